"""`gapscope profile -- CMD` against the stand-in nsys (fake_nsys/), as if pip-installed.

The packages are copied without scripts/ and run from another directory, as `pip install .` leaves
them; the stand-in runs the example decode loop on the CPU and exports the bundled H200 capture.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_scripts import (
    CAPTURE_FLAGS,
    FAKE,
    export_without,
    exported_bytes,
    make_env,
    nsys_calls,
    path_without_nsys,
    run_dirs,
)

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
EXAMPLE = ["--device", "cpu", "--size", "tiny", "--batch", "2", "--new-tokens", "6",
           "--window", "2:4"]
RUN_DIR_NAME = re.compile(r"^\d{8}T\d{6}Z-hf_decode$")
# A program that does nothing, for the paths that never get to the analysis.
NOTHING = [PY, "-c", "pass", "--device", "cpu"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """analysis/ and harness/ alone, as site-packages holds them: no scripts/, no tests/."""
    site = tmp_path_factory.mktemp("site")
    for package in ("analysis", "harness"):
        shutil.copytree(ROOT / package, site / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return site


def gapscope(site: Path, tmp: Path, *args: str, **env_extra) -> subprocess.CompletedProcess:
    """`gapscope ARGS` from tmp/work; an env_extra of None removes that variable."""
    env = make_env(tmp, PYTHONPATH=str(site)) | env_extra
    env = {k: v for k, v in env.items() if v is not None}
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run([PY, "-m", "analysis.cli", *args], env=env, cwd=work,
                          capture_output=True, text=True, timeout=300)


def inproc(tmp: Path, *args: str, **env_extra) -> subprocess.CompletedProcess:
    """The same call in this process (no interpreter start): for the paths that fail early."""
    from click.testing import CliRunner

    from analysis.cli import main

    env = make_env(tmp) | env_extra
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)
        for name in [k for k in os.environ if k not in env]:
            mp.delenv(name)
        for name, value in env.items():
            if value is None:
                mp.delenv(name, raising=False)
            else:
                mp.setenv(name, value)
        result = CliRunner().invoke(main, list(args))
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def profiled(installed, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("profiled")
    cmd = [PY, str(ROOT / "examples" / "hf_decode.py"), *EXAMPLE]
    # No twin here (three more runs of a torch program): tests/test_profile_twin.py has them.
    result = gapscope(installed, tmp, "profile", "--no-twin", "--", *cmd)
    assert result.returncode == 0, result.stderr
    (run,) = run_dirs(tmp)
    return tmp, run, cmd, result


def functions_flag(run: Path) -> str:
    return f"--python-functions-trace={run}/functions.json"


def test_profile_runs_the_program_under_the_capture_flags_then_exports(profiled):
    tmp, run, cmd, _ = profiled
    calls = [c for c in nsys_calls(tmp) if c != ["--version"]]
    assert calls == [
        ["profile", *CAPTURE_FLAGS, functions_flag(run), "-o", f"{run}/capture", *cmd],
        ["export", "--type", "sqlite", "-o", f"{run}/capture.sqlite", f"{run}/capture.nsys-rep"],
    ]
    # With no --steps nor --step-function, the function trace names every causal LM's forward
    # of the transformers the program's Python has (read from its files, not imported).
    config = json.loads((run / "functions.json").read_text())
    gpt2 = [e for e in config if e["module"] == "transformers.models.gpt2.modeling_gpt2"]
    assert gpt2 == [{"module": "transformers.models.gpt2.modeling_gpt2",
                     "functions": ["GPT2LMHeadModel.forward"]}]
    assert all(set(e) == {"module", "functions"} for e in config) and len(config) > 100


def test_profile_makes_a_utc_named_run_dir_with_the_capture_log_and_report(profiled):
    _, run, _, result = profiled
    assert RUN_DIR_NAME.match(run.name), run.name
    names = {"capture.nsys-rep", "capture.sqlite", "nsys.log", "run.json", "report.md"}
    assert names <= {p.name for p in run.iterdir()}
    assert (run / "capture.sqlite").read_bytes() == exported_bytes()
    # The example ran on the CPU under the stand-in: its line is in the log and on stdout.
    assert "hf_decode: gpt2 " in (run / "nsys.log").read_text()
    assert "hf_decode: gpt2 " in result.stdout
    assert f"{run.name.split('Z-', 1)[1]}: device 0, 20 steps" in result.stdout
    assert last_line(result.stderr) == (f"gapscope: done: {run} (20 steps (NVTX), "
                                        "6860 kernels captured)")


def test_profile_records_the_command_nsys_and_flags_in_run_json(profiled):
    tmp, run, cmd, _ = profiled
    record = json.loads((run / "run.json").read_text())
    flags = [*CAPTURE_FLAGS, functions_flag(run)]
    full = [str(FAKE), "profile", *flags, "-o", f"{run}/capture", *cmd]
    assert record["command"] == cmd
    assert record["cwd"] == str(tmp / "work")
    assert record["nsys"] == {"command": shlex.join(full), "version": "2025.3.2.0",
                              "path": str(FAKE)}
    assert record["capture"] == {"range": "cudaProfilerApi", "cuda_graph_trace": "node",
                                 "osrt": False, "delay_s": None, "duration_s": None,
                                 "flags": flags}
    # The program's own `Step N` ranges come first: they are the steps.
    assert record["analysis"] == {"step_pattern": r"^Step (\d+)$",
                                  "check_pattern": "^Check Stop Condition$",
                                  "steps_from": "nvtx", "step_functions": []}
    assert record["captured"] == {"steps": 20, "nvtx_ranges": 60, "kernels": 6860}
    assert record["hook"]["sync_marks"] is True
    assert record["hook"]["function_trace"] == "functions.json"
    assert record["hook"]["twin"] == {"runs": 0, "written": False, "why": "--no-twin"}


def test_a_second_profile_gets_its_own_run_dir(installed, tmp_path):
    # Captures that stop early (nothing captured) still leave their run directories.
    for _ in range(2):
        inproc(tmp_path, "profile", "--name", "same", "--", *NOTHING, FAKE_NSYS_PROFILE="nocapture")
    names = [p.name for p in run_dirs(tmp_path)]
    assert len(names) == 2 and all(re.match(r"^\d{8}T\d{6}Z-same(-2)?$", n) for n in names)


def test_recorded_step_pattern_is_reused_by_analyze(installed, tmp_path):
    """Steps 31..39 only: `gapscope analyze RUN` without --steps finds 9 steps, not 20."""
    result = inproc(tmp_path, "profile", "--steps", r"^Step (3[1-9])$", "--",
                      *NOTHING, FAKE_NSYS_RUN="0")
    assert result.returncode == 0, result.stderr
    (run,) = run_dirs(tmp_path)
    assert json.loads((run / "run.json").read_text())["analysis"]["step_pattern"] == (
        r"^Step (3[1-9])$")
    again = inproc(tmp_path, "analyze", str(run), "--format", "json")
    assert json.loads(again.stdout)["summary"]["steps"] == 9
    default = inproc(tmp_path, "analyze", str(run), "--format", "json",
                       "--steps", r"^Step (\d+)$")
    assert json.loads(default.stdout)["summary"]["steps"] == 20


@pytest.mark.parametrize("args, flags", [
    (["--range", "all"], ["--trace=cuda,nvtx"]),
    (["--delay", "2", "--duration", "5.5"], ["--delay=2", "--duration=5.5", "--trace=cuda,nvtx"]),
    (["--cuda-graph-trace", "graph", "--osrt"],
     ["--capture-range=cudaProfilerApi", "--capture-range-end=stop", "--trace=cuda,nvtx,osrt"]),
])
def test_range_graph_trace_and_osrt_options_become_nsys_flags(installed, tmp_path, args, flags):
    inproc(tmp_path, "profile", *args, "--", *NOTHING, FAKE_NSYS_PROFILE="nocapture")
    profile_call = [c for c in nsys_calls(tmp_path) if c[:1] == ["profile"]][0]
    (run,) = run_dirs(tmp_path)
    graph = "graph" if "graph" in args else "node"
    assert profile_call[1:profile_call.index("-o")] == [
        *flags, "--sample=none", "--cpuctxsw=none", f"--cuda-graph-trace={graph}",
        "--force-overwrite=false", functions_flag(run)]


# --- failures: one line each, profile.sh's exit codes ----------------------------------------


@pytest.mark.parametrize("args, message", [
    (["profile"], "Missing argument 'CMD...'"),
    (["profile", "--", "no-such-program-here"],
     "no-such-program-here: no such program (the command after --)"),
    (["profile", "--range", "cudaProfilerApi", "--delay", "3", "--", *NOTHING],
     "--delay/--duration time a stretch of the whole run: they do not go with --range "
     "cudaProfilerApi"),
    (["profile", "--steps", "(", "--", *NOTHING],
     "the steps pattern (--steps / steps=) '(' is not a valid regular expression"),
])
def test_usage_errors_exit_2_before_nsys_is_looked_for(installed, tmp_path, args, message):
    result = inproc(tmp_path, *args, PATH=path_without_nsys())
    assert result.returncode == 2
    assert result.stderr.startswith(f"gapscope: error: {message}"), result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert run_dirs(tmp_path) == []


def test_no_nsys_and_an_old_nsys_exit_2_without_a_run_dir(installed, tmp_path):
    # A machine not set up to profile is bad input, as elsewhere: exit 2.
    result = inproc(tmp_path, "profile", "--", *NOTHING, PATH=path_without_nsys())
    assert result.returncode == 2
    assert last_line(result.stderr).startswith("gapscope: error: no nsys found (looked at $NSYS, ")
    old = inproc(tmp_path, "profile", "--", *NOTHING, FAKE_NSYS_VERSION="2023.4.1")
    assert old.returncode == 2
    assert last_line(old.stderr) == (
        f"gapscope: error: nsys 2023.4.1 at {FAKE} is too old (gapscope needs 2024.2 or newer to "
        "capture and export SQLite): install a newer Nsight Systems or set NSYS")
    assert run_dirs(tmp_path) == []


def test_no_gpu_exits_2_unless_the_program_runs_on_the_cpu(installed, tmp_path):
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has a GPU")
    result = inproc(tmp_path, "profile", "--", PY, "-c", "pass")
    assert result.returncode == 2
    assert last_line(result.stderr).endswith(
        ": profile on a machine with an NVIDIA GPU and driver (`gapscope doctor` checks it), or "
        "run the program with --device cpu")
    assert run_dirs(tmp_path) == []


def test_a_failing_program_passes_its_exit_code_and_keeps_the_log(installed, tmp_path):
    result = inproc(tmp_path, "profile", "--", *NOTHING, FAKE_NSYS_PROFILE="fail:3")
    (run,) = run_dirs(tmp_path)
    assert result.returncode == 3
    assert last_line(result.stderr) == (
        "gapscope: error: the program under nsys failed with exit code 3: RuntimeError: CUDA "
        f"error: out of memory (all of it in {run}/nsys.log)")


def test_no_cudaprofilerstart_says_so_and_suggests_range_all(installed, tmp_path):
    result = inproc(tmp_path, "profile", "--range", "cudaProfilerApi", "--", *NOTHING,
                    FAKE_NSYS_PROFILE="nocapture")
    assert result.returncode == 1
    assert last_line(result.stderr) == (
        "gapscope: error: nsys wrote no capture: the program never called cudaProfilerStart "
        "(--range cudaProfilerApi): pass --range all to capture the whole run")
    assert len([c for c in nsys_calls(tmp_path) if c[:1] == ["profile"]]) == 1


def test_by_default_a_program_without_cudaprofilerstart_is_captured_whole(installed, tmp_path):
    """The default range tries the program's own window, then captures the whole run."""
    result = inproc(tmp_path, "profile", "--no-twin", "--", *NOTHING,
                    FAKE_NSYS_PROFILE="nocapture")
    (run,) = run_dirs(tmp_path)
    first, second = [c[1:c.index("-o")] for c in nsys_calls(tmp_path) if c[:1] == ["profile"]]
    assert first[:2] == ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    assert second == ["--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none",
                      "--cuda-graph-trace=node", "--force-overwrite=false", functions_flag(run)]
    assert ("gapscope: the program never called cudaProfilerStart: capturing the whole run again "
            "(--range all; pass it to skip the first try)") in result.stderr.splitlines()
    record = json.loads((run / "run.json").read_text())
    assert record["capture"]["range"] == "all" and record["capture"]["flags"] == second
    # The stand-in captured nothing the second time either.
    assert result.returncode == 1
    assert last_line(result.stderr) == f"gapscope: error: nsys wrote no capture: see {run}/nsys.log"


def test_a_program_whose_files_open_no_window_is_captured_whole_at_once(installed, tmp_path):
    """Its script and its own module name no window call (window_scan.py): one capture of the
    whole run, said so; a script whose module opens one is tried in its window first."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "loop.py").write_text("import helper\nhelper.run()\n")
    (work / "helper.py").write_text("def run():\n    pass\n")
    result = inproc(tmp_path, "profile", "--no-twin", "--", PY, "loop.py", "--device", "cpu",
                    FAKE_NSYS_PROFILE="nocapture")
    (run,) = run_dirs(tmp_path)
    (flags,) = [c[1:c.index("-o")] for c in nsys_calls(tmp_path) if c[:1] == ["profile"]]
    assert "--capture-range=cudaProfilerApi" not in flags
    assert ("gapscope: the program's own files open no capture window (no cudaProfilerStart, no "
            "torch.cuda.profiler): capturing the whole run (--range cudaProfilerApi tries the "
            "window first)") in result.stderr.splitlines()
    capture = json.loads((run / "run.json").read_text())["capture"]
    assert (capture["range"], capture["range_chosen"]) == (
        "all", "the program's own files open no capture window (no cudaProfilerStart, no "
        "torch.cuda.profiler)")

    (work / "helper.py").write_text("import torch\ndef run():\n    torch.cuda.profiler.start()\n")
    other = tmp_path / "other"
    (other / "work").mkdir(parents=True)
    for name in ("loop.py", "helper.py"):
        shutil.copy(work / name, other / "work" / name)
    inproc(other, "profile", "--no-twin", "--", PY, "loop.py", "--device", "cpu",
           FAKE_NSYS_PROFILE="nocapture")
    first = [c[1:c.index("-o")] for c in nsys_calls(other) if c[:1] == ["profile"]][0]
    assert first[:2] == ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]


def test_no_step_ranges_names_the_pattern_once_escaped(installed, tmp_path):
    result = inproc(tmp_path, "profile", "--steps", r"^Iteration (\d+)$", "--",
                      *NOTHING, FAKE_NSYS_RUN="0")
    assert result.returncode == 1
    assert last_line(result.stderr) == (
        "gapscope: error: the capture holds 6860 CUDA kernels but no NVTX ranges matching "
        r"--steps '^Iteration (\d+)$' (ranges seen: Check Stop Condition, Model Forward, Step 31, "
        "Step 32, Step 33): pass --steps REGEX naming your step ranges")


def test_no_nvtx_at_all_and_no_kernels_each_name_their_cause(installed, tmp_path):
    no_nvtx = export_without(tmp_path, "NVTX_EVENTS")
    result = inproc(tmp_path, "profile", "--steps", r"^Step (\d+)$", "--", *NOTHING,
                    FAKE_NSYS_RUN="0", FAKE_NSYS_EXPORT_FROM=str(no_nvtx))
    assert result.returncode == 1
    assert last_line(result.stderr) == (
        "gapscope: error: the capture holds 6860 CUDA kernels but no NVTX ranges: mark each step "
        "with harness.profiling (`with prof.step(i):`) and check that `python -c 'import nvtx'` "
        "works")
    no_kernels = export_without(tmp_path, "CUPTI_ACTIVITY_KIND_KERNEL")
    result = inproc(tmp_path, "profile", "--", *NOTHING, FAKE_NSYS_RUN="0",
                      FAKE_NSYS_EXPORT_FROM=str(no_kernels))
    assert result.returncode == 1
    assert last_line(result.stderr) == (
        "gapscope: error: the capture holds 20 steps but no CUDA kernels: the program did not use "
        "the GPU (--device cpu?) or CUDA was not traced")


def test_a_failed_export_keeps_the_capture_and_gives_the_export_command(installed, tmp_path):
    result = inproc(tmp_path, "profile", "--", *NOTHING, FAKE_NSYS_RUN="0",
                      FAKE_NSYS_EXPORT_FROM="fail")
    (run,) = run_dirs(tmp_path)
    assert result.returncode == 1
    assert last_line(result.stderr).endswith(
        f"export it with the nsys that captured it, `nsys export --type sqlite -o "
        f"{run}/capture.sqlite {run}/capture.nsys-rep`")
    assert (run / "capture.nsys-rep").exists()


def test_doctor_installed_works_from_anywhere_and_checks_disk_under_dot_traces(installed,
                                                                                tmp_path):
    result = gapscope(installed, tmp_path, "doctor", "--no-capture", TRACES_DIR=None)
    lines = {line.split()[1]: line for line in result.stdout.splitlines()}
    assert "Traceback" not in result.stderr and "lib.sh" not in result.stdout + result.stderr
    assert lines["nsys"] == f"OK    nsys     nsys 2025.3.2.0 at {FAKE} (newest of 1 found)"
    assert re.fullmatch(r"\S+\s+disk\s+[0-9.]+ GiB free under traces\b.*", lines["disk"])


# --- on the GPU machine, with a real nsys ----------------------------------------------------


@pytest.mark.gpu
def test_profile_captures_the_example_loop_with_a_real_nsys(tmp_path):
    from test_scripts import real_nsys_env, with_root_on_path

    env = real_nsys_env(tmp_path)
    # Extended, not replaced: on the H200 the carried wheels (nvtx) are on PYTHONPATH.
    env["PYTHONPATH"] = with_root_on_path(env)
    example = [PY, str(ROOT / "examples" / "hf_decode.py"), "--size", "tiny", "--timeline"]
    result = subprocess.run([PY, "-m", "analysis.cli", "profile", "--", *example], env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = run_dirs(tmp_path)
    record = json.loads((run / "run.json").read_text())
    assert record["captured"]["steps"] == 20 and record["captured"]["kernels"] > 0
    assert "GPU step period median" in result.stdout
    # No cudaProfilerStart (--window none) under the default range: the whole run, said so.
    none = subprocess.run([PY, "-m", "analysis.cli", "profile", "--no-twin", "--", *example,
                           "--window", "none"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert none.returncode == 0, none.stdout + none.stderr
    assert ("the program never called cudaProfilerStart: capturing the whole run again"
            in none.stderr)


@pytest.mark.parametrize("option", ["--bogus", "-o"])
def test_an_unknown_option_is_named_as_one_not_as_a_missing_program(tmp_path, option):
    result = inproc(tmp_path, "profile", option, "DIR", "--", PY, "-c", "pass")
    assert result.returncode == 2
    assert result.stderr == (f"gapscope: error: no such option: {option} (`gapscope profile "
                             "--help` lists them; the program's command goes after --)\n")
    assert run_dirs(tmp_path) == []


def test_a_program_that_fails_after_its_loop_is_analysed_and_passes_its_exit_code(tmp_path):
    """It fails before any cudaProfilerStart (its file speaks of one, so the window is tried
    first): captured whole again, the capture analysed, no twin (it would fail too), and
    gapscope exits with the program's status, the last line saying the report is partial."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "loop.py").write_text("# its window: torch.cuda.profiler.start()\nimport sys\n"
                                  "print('boom', file=sys.stderr)\nsys.exit(3)\n")
    result = inproc(tmp_path, "profile", "--", PY, "loop.py", "--device", "cpu",
                    FAKE_NSYS_PROFILE="nowindow")
    (run,) = run_dirs(tmp_path)
    first, second = [c[1:c.index("-o")] for c in nsys_calls(tmp_path) if c[:1] == ["profile"]]
    assert first[0] == "--capture-range=cudaProfilerApi" and second[0] == "--trace=cuda,nvtx"
    lines = result.stderr.splitlines()
    assert ("gapscope: the program failed (exit code 3) with no cudaProfilerStart before: "
            "capturing the whole run again, to analyse what ran before the failure") in lines
    assert ("gapscope: warning: the program failed with exit code 3 (boom): analysing what nsys "
            "captured before it stopped") in lines
    assert f"{run.name.split('Z-', 1)[1]}: device 0, 20 steps" in result.stdout
    assert (run / "report.md").is_file()
    record = json.loads((run / "run.json").read_text())
    assert record["program_exit_code"] == 3
    assert record["capture"]["range_fallback"] == (
        "the program failed (exit code 3) before any cudaProfilerStart")
    assert record["hook"]["twin"] == {
        "runs": 0, "written": False,
        "why": "the program failed (exit code 3): a run without the profiler would too"}
    assert result.returncode == 3
    assert last_line(result.stderr) == (
        "gapscope: error: the program failed with exit code 3: the report above is of what ran "
        f"before it stopped (the log: {run}/nsys.log)")


def test_a_program_that_fails_before_its_step_function_runs_says_so_with_its_status(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "loop.py").write_text("import sys\nprint('no model', file=sys.stderr)\nsys.exit(4)\n"
                                  "def step():\n    pass\n")
    result = inproc(tmp_path, "profile", "--step-function", "loop:step", "--", PY, "loop.py",
                    "--device", "cpu")
    (run,) = run_dirs(tmp_path)
    assert result.returncode == 4
    assert last_line(result.stderr) == (
        "gapscope: error: the program under nsys failed with exit code 4: no model (all of it in "
        f"{run}/nsys.log), before any call of the step functions")
