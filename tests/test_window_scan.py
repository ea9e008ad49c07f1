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
