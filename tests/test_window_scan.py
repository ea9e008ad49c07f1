"""Whether a program's own files can open a capture window (analysis/capture/window_scan.py),
on programs written here: the script, its modules import by import, and what it cannot read."""

from analysis.capture.window_scan import opens_window

PY = "/usr/bin/python3"


def test_a_window_call_anywhere_in_the_programs_own_files_is_found(tmp_path):
    (tmp_path / "main.py").write_text("from pkg import loop\nloop.go()\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "loop.py").write_text("def go():\n    pass\n")
    assert opens_window((PY, "main.py"), tmp_path) is False
    for call in ("torch.cuda.profiler.start()", "torch.cuda.cudart().cudaProfilerStart()",
                 "with torch.cuda.profiler.profile():", "from harness import profiling",
                 "cuda.bindings.runtime.cudaProfilerStart()"):
        body = call + ("\n        pass" if call.endswith(":") else "")
        (tmp_path / "pkg" / "loop.py").write_text(f"import torch\ndef go():\n    {body}\n")
        assert opens_window((PY, "main.py"), tmp_path) is True, call
    # Run as a module from its folder, the same.
    assert opens_window(("python3.12", "-m", "main"), tmp_path) is True


def test_what_it_cannot_read_is_not_known(tmp_path):
    (tmp_path / "main.py").write_text("pass\n")
    assert opens_window(("bash", "-c", "python3 main.py"), tmp_path) is None
    assert opens_window((PY, "-c", "pass"), tmp_path) is None
    assert opens_window((PY, "missing.py"), tmp_path) is None
    assert opens_window((PY, "-u", "main.py"), tmp_path) is False


def test_a_window_in_a_module_imported_inside_a_function_or_by_other_bindings_is_found(tmp_path):
    (tmp_path / "main.py").write_text("def main():\n    import later\n    later.go()\nmain()\n")
    (tmp_path / "later.py").write_text("def go():\n    pass\n")
    assert opens_window((PY, "main.py"), tmp_path) is False
    for call in ("cupy.cuda.runtime.profilerStart()", "numba.cuda.profile_start()",
                 "pycuda.driver.start_profiler()", "from torch.cuda import profiler as p"):
        (tmp_path / "later.py").write_text(f"def go():\n    {call}\n")
        assert opens_window((PY, "main.py"), tmp_path) is True, call


def test_code_the_scan_cannot_follow_leaves_it_unknown(tmp_path):
    (tmp_path / "main.py").write_text("pass\n")
    for line in ("import sys; sys.path.insert(0, '..')", "import importlib",
                 "import subprocess", "exec(open('x.py').read())"):
        (tmp_path / "main.py").write_text(line + "\n")
        assert opens_window((PY, "main.py"), tmp_path) is None, line
    # A folder too large to read: unknown.
    (tmp_path / "main.py").write_text("pass\n")
    many = tmp_path / "many"
    many.mkdir()
    for i in range(401):
        (many / f"m{i}.py").write_text("")
    assert opens_window((PY, "main.py"), tmp_path) is None


def test_a_folder_the_program_puts_on_sys_path_is_read_where_the_command_names_it(tmp_path):
    """A cloned repository, imported through sys.path from a folder given on the command line
    (gpt-fast's, nanoGPT's): read too, so its window call is found, and its absence known."""
    (tmp_path / "drive.py").write_text("import sys\nsys.path.insert(0, sys.argv[2])\n"
                                       "import generate\n")
    clone = tmp_path.parent / f"{tmp_path.name}-clone"
    clone.mkdir()
    (clone / "generate.py").write_text("def decode():\n    pass\n")
    (clone / "train.py").write_text("exec(open('configurator.py').read())\n")  # nanoGPT's
    assert opens_window((PY, "drive.py"), tmp_path) is None  # no folder named: unknown
    assert opens_window((PY, "drive.py", "--repo", str(clone)), tmp_path) is False
    assert opens_window((PY, "drive.py", f"--repo={clone}"), tmp_path) is False
    (clone / "generate.py").write_text("import torch\ntorch.cuda.profiler.start()\n")
    assert opens_window((PY, "drive.py", "--repo", str(clone)), tmp_path) is True


def test_torch_profiler_kineto_is_no_capture_window(tmp_path):
    """torch.profiler.profile() (Kineto) calls no cudaProfilerStart: gpt-fast's generate.py has
    one, and its programs were captured twice, the first try finding no window."""
    (tmp_path / "main.py").write_text("import torch\nwith torch.profiler.profile() as p:\n"
                                      "    pass\n")
    assert opens_window((PY, "main.py"), tmp_path) is False
