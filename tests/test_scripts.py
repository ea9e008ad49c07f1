"""The capture scripts and `gapscope doctor`, run for real against a stand-in nsys (fake_nsys/).

The stand-in records its arguments, runs the real harness on the CPU for `profile`, and exports a
copy of a bundled H200 capture (or one with tables dropped), so flag set, run-directory naming,
run.json merging and every failure path run the same code a GPU machine runs.
"""

import atexit
import gzip
import hashlib
import json
import lzma
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import golden
import pytest
from conftest import STATIC as FIXTURE
from conftest import plain_copy
from synth import causes_trace, metrics_only_trace

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
FAKE_DIR = Path(__file__).resolve().parent / "fake_nsys"
FAKE = FAKE_DIR / "nsys"
PY = sys.executable
# The smallest real harness run: two steps inside the window, a few seconds on a CPU.
CPU_RUN = ["--model", "tiny", "--batch", "2", "--new-tokens", "8", "--window", "2:4"]
CPU_RUN += ["--device", "cpu"]
CAPTURE_FLAGS = [
    "--capture-range=cudaProfilerApi",
    "--capture-range-end=stop",
    "--trace=cuda,nvtx",
    "--sample=none",
    "--cpuctxsw=none",
    "--cuda-graph-trace=node",
    "--force-overwrite=false",
]
RUN_DIR_NAME = re.compile(r"^\d{8}T\d{6}Z-static$")


# The stand-in's `#!/usr/bin/env python3` finds this Python first, not a version manager's shim
# (pyenv's costs 0.1 s a call, and a capture makes five): it needs the standard library only.
PY_DIR = Path(tempfile.mkdtemp(prefix="gapscope-tests-python3-"))
(PY_DIR / "python3").symlink_to(os.path.realpath(PY))
atexit.register(shutil.rmtree, PY_DIR, True)


def path_without_nsys() -> str:
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join([str(PY_DIR), *(d for d in dirs
                                           if d and not (Path(d) / "nsys").exists())])


def make_env(tmp: Path, **extra: str) -> dict:
    """An environment where the stand-in is the only nsys to be found."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GAPSCOPE_", "FAKE_NSYS"))}
    for name in ("NSYS", "TRACES_DIR", "RUN_NAME", "VARIANTS"):
        env.pop(name, None)
    env |= {
        "PATH": f"{FAKE_DIR}{os.pathsep}{path_without_nsys()}",
        "GAPSCOPE_PYTHON": PY,
        "GAPSCOPE_NSYS_PLACES": str(tmp / "no-install-place" / "nsys"),
        "GAPSCOPE_UNTRACED_REPEATS": "0",
        "TRACES_DIR": str(tmp / "traces"),
        "FAKE_NSYS_ARGS_LOG": str(tmp / "nsys-calls.jsonl"),
    }
    return env | extra


def run_script(name: str, env: dict, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPTS / name), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def nsys_calls(tmp: Path) -> list[list[str]]:
    log = tmp / "nsys-calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def run_dirs(tmp: Path) -> list[Path]:
    traces = tmp / "traces"
    return sorted(traces.iterdir()) if traces.exists() else []


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def export_without(tmp: Path, *tables: str) -> Path:
    """The bundled capture with tables gone, as nsys exports them when nothing filled them."""
    db = plain_copy(FIXTURE, tmp / f"without-{'-'.join(tables)}.sqlite")
    with sqlite3.connect(db) as con:
        for table in tables:
            con.execute(f"DROP TABLE {table}")
    return db


def exported_bytes() -> bytes:
    """What the stand-in nsys's export writes by default: the bundled capture, decompressed."""
    return lzma.decompress(FIXTURE.read_bytes())


def lib_sh(env: dict, script: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", f'set -euo pipefail; source "{SCRIPTS / "lib.sh"}"; {script}'],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def fake_nsys_at(directory: Path, version: str) -> Path:
    """Another stand-in nsys that reports `version`."""
    directory.mkdir(parents=True)
    nsys = directory / "nsys"
    nsys.write_text(f'#!/bin/sh\nFAKE_NSYS_VERSION={version} exec "{FAKE}" "$@"\n')
    nsys.chmod(0o755)
    return nsys


# --- a full capture, run once for the tests that read it --------------------------------------


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("captured")
    env = make_env(tmp, GAPSCOPE_UNTRACED_REPEATS="1")
    # --kineto adds the torch.profiler twin (a second run, without nsys) to the same directory.
    result = run_script("profile.sh", env, "static", "--kineto", *CPU_RUN, cwd=tmp)
    assert result.returncode == 0, result.stderr
    (run,) = run_dirs(tmp)
    return tmp, run, result


def test_profile_passes_the_capture_flags_then_exports_to_sqlite(captured):
    tmp, run, _ = captured
    calls = [c for c in nsys_calls(tmp) if c != ["--version"]]
    harness_run = [PY, "-m", "harness", "run", "--variant", "static", "--out", str(run)]
    assert calls == [
        ["profile", *CAPTURE_FLAGS, "-o", f"{run}/capture", *harness_run, *CPU_RUN],
        ["export", "--type", "sqlite", "-o", f"{run}/capture.sqlite", f"{run}/capture.nsys-rep"],
    ]


def test_profile_makes_a_utc_named_run_dir_with_every_output(captured):
    _, run, _ = captured
    assert RUN_DIR_NAME.match(run.name), run.name
    names = {"capture.nsys-rep", "capture.sqlite", "nsys.log", "run.json", "untraced.json",
             "untraced_steps.json"}
    assert names <= {p.name for p in run.iterdir()}
    assert (run / "capture.sqlite").read_bytes() == exported_bytes()


def test_profile_records_nsys_and_untraced_timing_in_run_json(captured):
    _, run, _ = captured
    record = json.loads((run / "run.json").read_text())
    harness_run = [PY, "-m", "harness", "run", "--variant", "static", "--out", str(run)]
    command = [str(FAKE), "profile", *CAPTURE_FLAGS, "-o", f"{run}/capture", *harness_run]
    assert record["nsys"] == {
        "command": shlex.join(command + CPU_RUN),
        "version": "2025.3.2.0",
        "path": str(FAKE),
    }
    bench = json.loads((run / "untraced.json").read_text())
    assert record["untraced"] == bench["results"][0]
    assert record["untraced"]["variant"] == "static"
    assert record["config"]["variant"] == "static"
    # The capture ran with the hook that names each sync's line (harness/inject/).
    assert record["hook"] == {"sync_marks": True}


def test_profile_logs_the_harness_output_to_nsys_log(captured):
    _, run, result = captured
    log = (run / "nsys.log").read_text()
    assert f"Generated:\n    {run}/capture.nsys-rep" in log
    assert f"Generated:\n    {run}/capture.sqlite" in log
    assert "gapscope: using nsys 2025.3.2.0 at" in result.stderr
    done = rf"^gapscope: done: {re.escape(str(run))} \(20 steps \(NVTX\), "
    done += r"6860 kernels captured; "
    done += r"traced \d+\.\d\d ms/step, untraced \d+\.\d\d \([+-]\d+% under nsys\)\)$"
    assert re.match(done, last_line(result.stderr)), last_line(result.stderr)


def metrics_export(tmp: Path, samples: bool = True) -> Path:
    """A metrics-only export (no CUDA tables), as `--trace=nvtx --gpu-metrics-devices=0` makes."""
    trace = metrics_only_trace()
    if not samples:
        trace.metrics.clear()
    return trace.write(tmp / "metrics.sqlite", drop=("CUPTI_ACTIVITY_KIND_RUNTIME",))


def replayed_bench(tmp: Path, captured) -> str:
    """A stand-in python for profile.sh: its untraced `-m harness bench` writes the captured
    fixture's real untraced.json and untraced_steps.json (a torch process less) and logs its
    arguments to tmp/bench-calls; every other call runs this Python. The real bench under
    profile.sh is the captured fixture's."""
    run = captured[1]
    stub = tmp / "python-replaying-bench"
    stub.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$1 $2 $3" = "-m harness bench" ]; then\n'
        f'  echo "$*" >>"{tmp}/bench-calls"\n'
        '  while [ $# -gt 0 ]; do\n'
        f'    [ "$1" = --json ] && cp "{run}/untraced.json" "$2"\n'
        f'    [ "$1" = --timeline ] && cp "{run}/untraced_steps.json" "$2"\n'
        "    shift\n"
        "  done\n"
        "  exit 0\n"
        "fi\n"
        f'exec "{PY}" "$@"\n')
    stub.chmod(0o755)
    return str(stub)


def test_metrics_makes_the_nvtx_and_gpu_metrics_capture_timed_against_untraced(tmp_path,
                                                                               captured):
    env = make_env(tmp_path, GAPSCOPE_UNTRACED_REPEATS="1",
                   GAPSCOPE_PYTHON=replayed_bench(tmp_path, captured),
                   FAKE_NSYS_EXPORT_FROM=str(metrics_export(tmp_path)), **replayed(captured))
    result = run_script("profile.sh", env, "static", "--metrics=15000", *CPU_RUN, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (run,) = run_dirs(tmp_path)
    assert run.name.endswith("-static-metrics")
    (profile,) = [c for c in nsys_calls(tmp_path) if c[0] == "profile"]
    # No cudaProfilerApi range: with one, nsys turns CUDA tracing on.
    assert profile[1:10] == [
        "--capture-range=nvtx", "--nvtx-capture=gapscope window", "--capture-range-end=stop",
        "--trace=nvtx", "--sample=none", "--cpuctxsw=none", "--force-overwrite=false",
        "--gpu-metrics-devices=0", "--gpu-metrics-frequency=15000"]
    record = json.loads((run / "run.json").read_text())
    assert record["gpu_metrics"] == {"device": 0, "frequency_hz": 15000, "samples": 16}
    assert record["untraced"]["variant"] == "static"  # the overhead is measured as for any
    assert (tmp_path / "bench-calls").read_text().splitlines() == [" ".join([
        "-m", "harness", "bench", "--variants", "static", *CPU_RUN, "--repeats", "1",
        "--json", f"{run}/untraced.json", "--timeline", f"{run}/untraced_steps.json"])]
    summary = json.loads((run / "summary.json").read_text())["summary"]
    assert summary["cuda_trace"] is False and summary["gpu_metrics"]["sm_active_pct"] == 58
    assert golden.png_size(run / "metrics.png") == (1430, 495)  # the metrics-only figure
    assert "16 GPU metric samples at 15000 Hz" in last_line(result.stderr)


def test_metrics_capture_without_samples_names_the_permission(tmp_path):
    env = make_env(tmp_path, FAKE_NSYS_RUN="0",
                   FAKE_NSYS_EXPORT_FROM=str(metrics_export(tmp_path, samples=False)))
    result = run_script("profile.sh", env, "static", "--metrics", "--device", "cpu",
                        cwd=tmp_path)
    assert result.returncode == 1
    assert "no GPU metric samples" in last_line(result.stderr)
    assert "NVreg_RestrictProfilingToAdminUsers" in last_line(result.stderr)
    (profile,) = [c for c in nsys_calls(tmp_path) if c[0] == "profile"]
    assert "--gpu-metrics-frequency=20000" in profile


def test_metrics_frequency_must_be_a_number(tmp_path):
    result = run_script("profile.sh", make_env(tmp_path), "static", "--metrics=fast",
                        cwd=tmp_path)
    assert result.returncode == 2 and "--metrics=HZ needs a whole number" in result.stderr
    assert run_dirs(tmp_path) == []


def test_profile_kineto_adds_the_torch_profiler_twin_to_the_run_directory(captured):
    _, run, result = captured
    events = json.loads(gzip.decompress((run / "kineto.json.gz").read_bytes()))["traceEvents"]
    # Window 2:4 is steps 3 and 4, as record_function ranges; static checks every step.
    assert [e["name"] for e in events if e.get("cat") == "user_annotation"] == [
        "Step 3", "Model Forward", "Check Stop Condition",
        "Step 4", "Model Forward", "Check Stop Condition"]
    record = json.loads((run / "run.json").read_text())
    own = json.loads((run / "kineto" / "run.json").read_text())
    assert record["kineto"]["trace"] == str(run / "kineto.json.gz")
    assert record["kineto"]["timing"] == own["timing"]
    assert own["config"]["kineto"] == str(run / "kineto.json.gz")
    assert "--kineto" in record["kineto"]["command"] and "--kineto" not in record["nsys"]["command"]
    # On the CPU the trace has no GPU events: said in one line, and the capture still completes.
    assert f"gapscope: error: {run / 'kineto.json.gz'}: no GPU events" in result.stderr
    assert "warning: the torch.profiler trace could not be compared" in result.stderr


# --- options and environment -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "extra", "trace"),
    [
        (["--osrt"], {}, "--trace=cuda,nvtx,osrt"),
        ([], {"GAPSCOPE_OSRT": "1"}, "--trace=cuda,nvtx,osrt"),
        ([], {}, "--trace=cuda,nvtx"),
    ],
)
def test_osrt_flag_or_env_adds_osrt_to_the_trace(tmp_path, args, extra, trace):
    env = make_env(tmp_path, FAKE_NSYS_PROFILE="fail:3", **extra)
    run_script("profile.sh", env, "static", *args, "--device", "cpu", cwd=tmp_path)
    (profile,) = [c for c in nsys_calls(tmp_path) if c[0] == "profile"]
    assert profile[3] == trace
    assert "--osrt" not in profile


def test_profile_without_a_variant_is_a_usage_error(tmp_path):
    result = run_script("profile.sh", make_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("gapscope: error: usage: scripts/profile.sh VARIANT")
    assert run_dirs(tmp_path) == []


@pytest.mark.parametrize("variant, message", [
    ("nope", "gapscope: error: unknown variant 'nope': usage:"),
    ("hf-generate", "gapscope: error: hf-generate cannot be profiled step by step: "
                    "model.generate runs the loop inside transformers, with no `Step N` NVTX "
                    "ranges; time it untraced with `python -m harness bench --variants "
                    "hf-generate`"),
])
def test_an_unknown_or_uncapturable_variant_is_a_usage_error_before_nsys_is_looked_for(
        tmp_path, variant, message):
    env = make_env(tmp_path, PATH=path_without_nsys())  # no nsys anywhere: the name fails first
    result = run_script("profile.sh", env, variant, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(message)
    assert len(result.stderr.splitlines()) == 1
    assert run_dirs(tmp_path) == []


def test_profile_refuses_an_out_option_it_sets_itself(tmp_path):
    result = run_script("profile.sh", make_env(tmp_path), "static", "--out", "x", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("gapscope: error: profile.sh sets --out itself")


def test_run_name_replaces_the_variant_in_the_run_dir_name(tmp_path):
    env = make_env(tmp_path, FAKE_NSYS_PROFILE="fail:3", RUN_NAME="static+compile")
    run_script("profile.sh", env, "static", "--device", "cpu", cwd=tmp_path)
    (run,) = run_dirs(tmp_path)
    assert re.match(r"^\d{8}T\d{6}Z-static\+compile$", run.name)


def test_new_run_dir_never_reuses_a_directory(tmp_path):
    make = 'new_run_dir "$PWD/traces" 20261130T191500Z-static'
    result = lib_sh(make_env(tmp_path), f"{make}; {make}; {make}", cwd=tmp_path)
    traces = tmp_path / "traces"
    assert result.stdout.splitlines() == [
        f"{traces}/20261130T191500Z-static",
        f"{traces}/20261130T191500Z-static-2",
        f"{traces}/20261130T191500Z-static-3",
    ]


def test_a_profile_in_a_taken_second_gets_a_suffixed_run_dir(tmp_path):
    # Take this second and the next few, as a run started just before would have.
    now = datetime.now(timezone.utc)
    taken = [(now + timedelta(seconds=s)).strftime("%Y%m%dT%H%M%SZ-static") for s in range(10)]
    for name in taken:
        (tmp_path / "traces" / name).mkdir(parents=True)
    env = make_env(tmp_path, FAKE_NSYS_PROFILE="fail:3")
    run_script("profile.sh", env, "static", "--device", "cpu", cwd=tmp_path)
    (new,) = [d for d in run_dirs(tmp_path) if d.name not in taken]
    assert new.name[: -len("-2")] in taken and new.name.endswith("-2")
    assert (new / "nsys.log").exists()
    assert all(not any((tmp_path / "traces" / name).iterdir()) for name in taken)


# --- finding nsys ----------------------------------------------------------------------------


def test_find_nsys_takes_the_newest_on_path(tmp_path):
    # lib.sh asks analysis.capture.nsys (tests/test_capture.py holds the rules, in-process).
    old = fake_nsys_at(tmp_path / "a", "2024.2.3.38")
    new = fake_nsys_at(tmp_path / "b", "2025.3.2.0")
    env = make_env(tmp_path, PATH=f"{old.parent}:{new.parent}:{path_without_nsys()}")
    result = lib_sh(env, "find_nsys", cwd=tmp_path)
    assert result.stdout == f"{new}\n"
    assert result.stderr == f"gapscope: using nsys 2025.3.2.0 at {new} (newest of 2 found)\n"


# --- failures a user meets -------------------------------------------------------------------


def test_profile_without_nsys_says_so_and_makes_no_run_dir(tmp_path):
    env = make_env(tmp_path, PATH=path_without_nsys())
    result = run_script("profile.sh", env, "static", "--device", "cpu", cwd=tmp_path)
    assert result.returncode == 2
    assert last_line(result.stderr).startswith(
        "gapscope: error: no nsys found (looked at $NSYS, PATH, ")
    assert last_line(result.stderr).endswith(": install Nsight Systems or set NSYS=/path/to/nsys")
    assert run_dirs(tmp_path) == []


def test_profile_with_an_old_nsys_says_it_is_too_old(tmp_path):
    env = make_env(tmp_path, FAKE_NSYS_VERSION="2023.4.1.97")
    result = run_script("profile.sh", env, "static", "--device", "cpu", cwd=tmp_path)
    assert result.returncode == 2
    assert last_line(result.stderr) == (
        "gapscope: error: "
        f"nsys 2023.4.1.97 at {FAKE} is too old (gapscope needs 2024.2 or newer to "
        "capture and export SQLite): install a newer Nsight Systems or set NSYS"
    )
    assert run_dirs(tmp_path) == []


def test_profile_without_a_gpu_says_so(tmp_path):
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has a GPU: the GPU tests profile for real")
    result = run_script("profile.sh", make_env(tmp_path), "static", cwd=tmp_path)
    assert result.returncode == 2
    assert last_line(result.stderr).startswith("gapscope: error: no CUDA GPU visible to torch ")
    assert last_line(result.stderr).endswith(
        ": profile on a machine with an NVIDIA GPU and driver (`make doctor` checks it)"
    )
    assert run_dirs(tmp_path) == []


def test_harness_failing_under_nsys_passes_its_exit_code_and_keeps_the_log(tmp_path):
    env = make_env(tmp_path, FAKE_NSYS_PROFILE="fail:3")
    result = run_script("profile.sh", env, "static", "--device", "cpu", cwd=tmp_path)
    (run,) = run_dirs(tmp_path)
    assert result.returncode == 3
    assert last_line(result.stderr) == (
        "gapscope: error: the run under nsys failed with exit code 3: "
        f"RuntimeError: CUDA error: out of memory (all of it in {run}/nsys.log)"
    )
    assert (run / "nsys.log").read_text() == "RuntimeError: CUDA error: out of memory\n"


def test_bad_harness_options_fail_in_the_untraced_run_before_nsys(tmp_path):
    env = make_env(tmp_path, GAPSCOPE_UNTRACED_REPEATS="1")
    bad = ["--model", "tiny", "--batch", "many", "--new-tokens", "8", "--device", "cpu"]
    result = run_script("profile.sh", env, "static", *bad, cwd=tmp_path)
    assert result.returncode == 2
    assert last_line(result.stderr) == (
        "gapscope: error: the untraced timing run failed (exit 2, its message is above); "
        "nothing was captured"
    )
    assert [c for c in nsys_calls(tmp_path) if c[0] == "profile"] == []


def test_qdstrm_without_nsys_rep_is_kept_with_how_to_import_it(tmp_path):
    env = make_env(tmp_path, FAKE_NSYS_PROFILE="qdstrm", FAKE_NSYS_RUN="0")
    result = run_script("profile.sh", env, "static", "--device", "cpu", cwd=tmp_path)
    (run,) = run_dirs(tmp_path)
    assert result.returncode == 1
    qdstrm = f"{run}/capture.qdstrm"
    assert last_line(result.stderr) == (
        "gapscope: error: "
        f"nsys 2025.3.2.0 wrote {qdstrm} but no .nsys-rep: its importer is missing or "
        f"broken here (see {run}/nsys.log). The .qdstrm is kept: import it where Nsight Systems "
        f"2025.3.2.0 works, with `QdstrmImporter -i {qdstrm}` from that same version, then "
        "`scripts/export.sh capture.nsys-rep`"
    )
    assert sorted(p.name for p in run.iterdir()) == ["capture.qdstrm", "nsys.log"]
    assert "Importer error status" in (run / "nsys.log").read_text()


def replayed(captured) -> dict:
    """The harness run left out, its run.json (the captured fixture's real one, of CPU_RUN: 8
    steps) put where it would have written it: for the tests of what the script says after."""
    return {"FAKE_NSYS_RUN": "0", "FAKE_NSYS_RUN_JSON": str(captured[1] / "run.json")}


def test_no_capture_at_all_names_the_window(tmp_path, captured):
    env = make_env(tmp_path, FAKE_NSYS_PROFILE="nocapture", **replayed(captured))
    result = run_script("profile.sh", env, "static", *CPU_RUN, cwd=tmp_path)
    assert result.returncode == 1
    assert last_line(result.stderr) == (
        "gapscope: error: "
        "nsys wrote no capture: the profiler window --window 2:4 never opened (the run "
        "made 8 steps, on --device cuda?): choose a --window inside the run or raise --new-tokens"
    )


def test_capture_without_nvtx_names_nvtx_as_the_cause(tmp_path):
    env = make_env(
        tmp_path,
        FAKE_NSYS_RUN="0",
        FAKE_NSYS_EXPORT_FROM=str(export_without(tmp_path, "NVTX_EVENTS")),
    )
    result = run_script("profile.sh", env, "static", "--device", "cpu", cwd=tmp_path)
    assert result.returncode == 1
    assert last_line(result.stderr) == (
        "gapscope: error: "
        "the capture holds 6860 CUDA kernels but no `Step N` NVTX ranges: NVTX was not "
        f"recorded: check that `{PY} -c 'import nvtx'` works and that --trace has nvtx"
    )
    (run,) = run_dirs(tmp_path)
    assert {"capture.nsys-rep", "capture.sqlite", "nsys.log"} <= {p.name for p in run.iterdir()}


def test_capture_without_kernels_names_the_device(tmp_path):
    db = export_without(tmp_path, "CUPTI_ACTIVITY_KIND_KERNEL")
    env = make_env(tmp_path, FAKE_NSYS_RUN="0", FAKE_NSYS_EXPORT_FROM=str(db))
    result = run_script("profile.sh", env, "static", "--device", "cpu", cwd=tmp_path)
    assert result.returncode == 1
    assert last_line(result.stderr) == (
        "gapscope: error: "
        "the capture holds 20 steps but no CUDA kernels: the run did not use the GPU "
        "(pass --device cuda) or CUDA was not traced (--trace needs cuda)"
    )


def test_capture_with_neither_steps_nor_kernels_names_the_window(tmp_path, captured):
    db = export_without(tmp_path, "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_KERNEL")
    env = make_env(tmp_path, FAKE_NSYS_EXPORT_FROM=str(db), **replayed(captured))
    result = run_script("profile.sh", env, "static", *CPU_RUN, cwd=tmp_path)
    assert result.returncode == 1
    assert last_line(result.stderr) == (
        "gapscope: error: "
        "the capture holds no steps and no CUDA kernels: --window 2:4 lies outside the "
        "steps the run made (8): choose a --window inside the run or raise --new-tokens"
    )


def test_capture_shorter_than_the_window_warns(tmp_path):
    env = make_env(tmp_path, FAKE_NSYS_RUN="0")
    result = run_script(
        "profile.sh", env, "static", "--window", "0:30", "--device", "cpu", cwd=tmp_path
    )
    (run,) = run_dirs(tmp_path)
    lines = result.stderr.strip().splitlines()
    assert lines[-2] == (
        "gapscope: warning: the capture holds 20 steps, --window 0:30 asked for 30: the run ended "
        "at step ? (raise --new-tokens or check --stop)"
    )
    # The stand-in ran no harness here, so there is no run.json to complete.
    assert lines[-1] == f"gapscope: error: the harness wrote no {run}/run.json: see {run}/nsys.log"
    assert result.returncode == 1


def test_failed_export_keeps_the_nsys_rep_and_says_how_to_retry(tmp_path):
    env = make_env(tmp_path, FAKE_NSYS_RUN="0", FAKE_NSYS_EXPORT_FROM="fail")
    result = run_script("profile.sh", env, "static", "--device", "cpu", cwd=tmp_path)
    (run,) = run_dirs(tmp_path)
    rep = f"{run}/capture.nsys-rep"
    assert result.returncode == 1
    assert last_line(result.stderr) == (
        "gapscope: error: "
        f"nsys 2025.3.2.0 could not export {rep} to SQLite (exit 1): Error: {rep} was "
        "written by a newer version of Nsight Systems. The .nsys-rep is kept: export it with the "
        f"nsys that captured it, `scripts/export.sh {rep}`"
    )
    assert (run / "capture.nsys-rep").exists()


# --- export.sh and profile-all.sh ------------------------------------------------------------


def test_export_writes_sqlite_next_to_the_capture_and_never_overwrites(tmp_path):
    rep = tmp_path / "old" / "capture.nsys-rep"
    rep.parent.mkdir()
    rep.write_bytes(b"fake nsys-rep\n")
    env = make_env(tmp_path)
    first = run_script("export.sh", env, str(rep), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert (rep.parent / "capture.sqlite").read_bytes() == exported_bytes()
    again = run_script("export.sh", env, str(rep), cwd=tmp_path)
    assert again.returncode == 2
    assert last_line(again.stderr) == (
        f"gapscope: error: {rep.parent}/capture.sqlite exists: remove it or name another output"
    )


def test_profile_all_goes_past_a_failing_variant_and_reports_it(tmp_path, captured):
    # A small export (tests/synth.py's two steps): the reports after each capture and across the
    # runs are about the loop over variants here, not the analysis of a large capture.
    small = causes_trace().write(tmp_path / "small.sqlite")
    env = make_env(tmp_path, VARIANTS="static no-such-variant", FAKE_NSYS_EXPORT_FROM=str(small),
                   **replayed(captured))
    result = run_script("profile-all.sh", env, *CPU_RUN, cwd=tmp_path)
    (ok_run,) = [d for d in run_dirs(tmp_path) if d.name.endswith("-static")]
    # The unknown name is refused before a run directory is made.
    assert [d for d in run_dirs(tmp_path) if d.name.endswith("-no-such-variant")] == []
    progress = [line for line in result.stderr.splitlines() if line.startswith("gapscope: [")]
    assert progress[0] == "gapscope: [1/2] static ..."
    assert re.match(r"^gapscope: \[1/2\] static ok in \d+ s \(total \d+ s\)$", progress[1])
    assert progress[2] == "gapscope: [2/2] no-such-variant ..."
    assert re.match(r"^gapscope: \[2/2\] no-such-variant FAILED with exit 2 in \d+ s", progress[3])
    assert last_line(result.stderr) == (
        "gapscope: error: 1 of 2 variants failed: no-such-variant (exit 2)"
    )
    assert result.returncode == 1
    assert json.loads((ok_run / "run.json").read_text())["nsys"]["path"] == str(FAKE)


# --- gapscope doctor -------------------------------------------------------------------------

DOCTOR_WITHOUT_TORCH = (
    "import sys; sys.modules['torch'] = None; sys.argv[0] = 'doctor'; "
    "from analysis.capture.doctor import doctor; doctor()"
)


def with_root_on_path(env: dict) -> str:
    """This checkout first; the rest kept (on the H200 the carried wheels are on PYTHONPATH)."""
    return os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))


def run_doctor(env: dict, cwd: Path) -> subprocess.CompletedProcess:
    """doctor with torch made unimportable, as on a laptop that only analyses traces."""
    env = env | {"PYTHONPATH": with_root_on_path(env)}
    return subprocess.run(
        [PY, "-c", DOCTOR_WITHOUT_TORCH], env=env, cwd=cwd, capture_output=True, text=True
    )


def test_doctor_without_gpu_torch_or_nsys_fails_politely(tmp_path):
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has a GPU: test_doctor_on_a_gpu_machine_is_all_ok covers it")
    env = make_env(tmp_path, PATH=path_without_nsys())
    result = run_doctor(env, tmp_path)
    lines = result.stdout.splitlines()
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert lines[:2] == [
        "FAIL  gpu      no nvidia-smi, and no torch to ask  "
        "fix: run on a machine with an NVIDIA GPU and its driver",
        f"FAIL  torch    not importable by {PY}  "
        "fix: `make install` (or pip install -e '.[harness]')",
    ]
    assert lines[2].startswith("FAIL  nsys     no nsys found (looked at $NSYS, PATH, ")
    assert lines[3] == (
        "FAIL  capture  not tried: it needs the GPU, torch and nsys above  "
        "fix: fix the lines above first"
    )
    assert lines[4] == "WARN  metrics  not tried: it needs nsys  fix: fix the nsys line above"
    assert [line.split()[1] for line in lines[5:]] == ["perf", "disk"]


@pytest.mark.parametrize(("answer", "line"), [
    ("ok", "OK    metrics  nsys can sample GPU metrics on GPU 0"),
    ("denied", "WARN  metrics  nsys may not read the GPU's performance counters (insufficient "
               "privilege)  fix: let every user read the GPU counters: `options nvidia "
               "NVreg_RestrictProfilingToAdminUsers=0` in /etc/modprobe.d/"),
    ("none", "WARN  metrics  nsys lists no GPU that can sample metrics: "
             "none: Disable GPU Metrics [Default]  fix: GPU metrics need a Turing or newer GPU"),
])
def test_doctor_says_whether_gpu_metrics_can_be_sampled(tmp_path, answer, line):
    result = run_doctor(make_env(tmp_path, FAKE_NSYS_GPU_METRICS=answer), tmp_path)
    (found,) = [x for x in result.stdout.splitlines() if x.split()[1] == "metrics"]
    assert found.startswith(line)


def test_doctor_names_the_nsys_it_found(tmp_path):
    result = run_doctor(make_env(tmp_path), tmp_path)
    (line,) = [line for line in result.stdout.splitlines() if line.split()[1] == "nsys"]
    assert line == f"OK    nsys     nsys 2025.3.2.0 at {FAKE} (newest of 1 found)"


def test_doctor_fails_an_old_nsys(tmp_path):
    result = run_doctor(make_env(tmp_path, FAKE_NSYS_VERSION="2023.4.1.97"), tmp_path)
    (line,) = [line for line in result.stdout.splitlines() if line.split()[1] == "nsys"]
    assert line == (
        f"FAIL  nsys     nsys 2023.4.1.97 at {FAKE} is too old (gapscope needs 2024.2 or newer to "
        "capture and export SQLite): install a newer Nsight Systems or set NSYS"
    )
    assert result.returncode == 1


# --- on the GPU machine, with a real nsys ----------------------------------------------------


def real_nsys_env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_NSYS")}
    env |= {"GAPSCOPE_PYTHON": PY, "TRACES_DIR": str(tmp / "traces")}
    if lib_sh(env, "find_nsys", cwd=tmp).returncode != 0:
        pytest.skip("no nsys on this machine: set NSYS (source .carry/env.sh on the H200)")
    return env


GRAPH_KERNELS_SQL = "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId IS NOT NULL"
GRAPH_EXECUTIONS_SQL = "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE"


def count_or_zero(con: sqlite3.Connection, sql: str) -> int:
    """The count; 0 where nsys created no table (it exports lazily: no rows, no table)."""
    try:
        return con.execute(sql).fetchone()[0]
    except sqlite3.OperationalError as e:
        if "no such table" not in str(e):
            raise
        return 0


@pytest.mark.gpu
def test_doctor_on_a_gpu_machine_is_all_ok(tmp_path):
    env = real_nsys_env(tmp_path)
    env["PYTHONPATH"] = with_root_on_path(env)
    result = subprocess.run(
        [PY, "-m", "analysis.capture.doctor", "--traces-dir", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    statuses = {line.split()[1]: line.split()[0] for line in result.stdout.splitlines()}
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("gpu", "torch", "nsys", "capture", "metrics", "disk"):
        assert statuses[name] == "OK", result.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("variant, trace_args, recorded", [
    ("static", [], "kernels"),
    # A replayed graph: one GRAPH_TRACE row an execution by default, its kernels when asked.
    ("graphed", [], "graphs"),
    ("graphed", ["--cuda-graph-trace", "node"], "graph kernels"),
])
def test_profile_captures_the_window_steps_with_a_real_nsys(tmp_path, variant, trace_args,
                                                            recorded):
    env = real_nsys_env(tmp_path) | {"GAPSCOPE_UNTRACED_REPEATS": "1"}
    args = ["--model", "tiny", "--batch", "2", "--new-tokens", "8", "--window", "2:4"]
    result = run_script("profile.sh", env, variant, *trace_args, *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (run,) = run_dirs(tmp_path)
    with sqlite3.connect(run / "capture.sqlite") as con:
        steps = con.execute(
            "SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS AS e "
            "LEFT JOIN StringIds AS s ON s.id = e.textId "
            "WHERE coalesce(e.text, s.value) LIKE 'Step %' ORDER BY e.start"
        ).fetchall()
        graph_kernels = count_or_zero(con, GRAPH_KERNELS_SQL)
        graph_executions = count_or_zero(con, GRAPH_EXECUTIONS_SQL)
    assert steps == [("Step 3",), ("Step 4",)]
    # --cuda-graph-trace=node: a replayed graph's kernels are rows of their own, with their node;
    # =graph (graphed's default): one row a graph execution, and no kernel of a graph.
    assert (graph_kernels > 0) == (recorded == "graph kernels")
    assert (graph_executions > 0) == (recorded == "graphs")
    record = json.loads((run / "run.json").read_text())
    version = lib_sh(env, f'nsys_version "{record["nsys"]["path"]}"', cwd=tmp_path).stdout.strip()
    assert record["nsys"]["version"] == version
    assert record["untraced"]["variant"] == variant


@pytest.mark.parametrize("variant, args, graph_trace", [
    ("graphed", [], "graph"),
    ("fused", [], "graph"),
    ("mega", [], "graph"),
    ("while-mega", [], "node"),  # one launch runs every step: its kernels are the steps
    ("graphed-sync", ["--cuda-graph-trace", "node"], "node"),
    ("static", ["--cuda-graph-trace=graph"], "graph"),
])
def test_graph_replayed_variants_are_captured_graph_by_graph_unless_asked(
        tmp_path, variant, args, graph_trace):
    env = make_env(tmp_path, FAKE_NSYS_PROFILE="nocapture", FAKE_NSYS_RUN="0")
    run_script("profile.sh", env, variant, *args, "--device", "cpu", cwd=tmp_path)
    (profile,) = [c for c in nsys_calls(tmp_path) if c[0] == "profile"]
    assert [f for f in profile if f.startswith("--cuda-graph-trace")] == [
        f"--cuda-graph-trace={graph_trace}"]


def test_a_graph_trace_level_other_than_node_or_graph_is_a_usage_error(tmp_path):
    result = run_script("profile.sh", make_env(tmp_path), "graphed", "--cuda-graph-trace", "kernel",
                        "--device", "cpu", cwd=tmp_path)
    assert result.returncode == 2
    assert last_line(result.stderr).startswith(
        "gapscope: error: --cuda-graph-trace must be node or graph, got 'kernel'")


# --- hardware-view.sh ------------------------------------------------------------------------


def test_hardware_view_builds_the_results_table_from_metrics_runs(tmp_path):
    # The real metrics capture (fused, batch 32, no CUDA trace, no untraced run) as a run.
    run = tmp_path / "hv" / "runs" / "20261201T000000Z-fused-b32"
    run.mkdir(parents=True)
    metrics = ROOT / "tests" / "data" / "runs" / "fused-metrics"
    plain_copy(metrics / "capture.sqlite.xz", run / "capture.sqlite")
    shutil.copy(metrics / "run.json", run / "run.json")
    env = make_env(tmp_path, HARDWARE_VIEW_DIR=str(tmp_path / "hv"))
    result = run_script("hardware-view.sh", env, "results", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = (tmp_path / "hv" / "results.md").read_text().splitlines()
    assert rows[0].startswith("| run | steps | untraced ms | vs first | floor ms | % floor |")
    # No untraced run: no floor, no untraced figure.
    assert golden.row("\n".join(rows), "fused-b32") == [
        10, None, None, None, None, 55.4, 17.9, 860, 96, 7.2]
    # One run, one panel (no untraced step or floor to draw): 6.5 x (0.5 + 1.9) in at 110 dpi.
    assert golden.png_size(tmp_path / "hv" / "hardware-view.png") == (715, 264)
    with tarfile.open(tmp_path / "hv" / "hardware-view.tgz") as packed:
        assert sorted(packed.getnames()) == [
            ".", "./hardware-view.png", "./results.md", "./runs", f"./runs/{run.name}",
            f"./runs/{run.name}/capture.sqlite", f"./runs/{run.name}/run.json"]
    bad = run_script("hardware-view.sh", env, "everything", cwd=tmp_path)
    assert bad.returncode == 2 and "unknown stage 'everything'" in bad.stderr


def test_profile_tp_refuses_a_variant_tp_does_not_run_before_nsys_is_looked_for(tmp_path):
    env = make_env(tmp_path, PATH=path_without_nsys())
    result = run_script("profile-tp.sh", env, "kv", "2", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("gapscope: error: --tp runs static, compiled, pipelined, "
                                    "deferred, nocheck, not kv: usage: scripts/profile-tp.sh")
    assert run_dirs(tmp_path) == []


# --- study.sh --parts family ------------------------------------------------------------------


def test_study_family_benches_the_ladder_once_per_batch(tmp_path):
    # A stand-in python that logs its arguments and writes an empty bench to --json.
    stub = tmp_path / "py"
    stub.write_text("#!/usr/bin/env bash\necho \"$*\" >>\"$STUB_LOG\"\nwhile [ $# -gt 0 ]; do "
                    "[ \"$1\" = --json ] && echo '{\"results\": []}' >\"$2\"; shift; done\n")
    stub.chmod(0o755)
    env = make_env(tmp_path, GAPSCOPE_PYTHON=str(stub), STUB_LOG=str(tmp_path / "calls"))
    study = tmp_path / "study"
    args = ("--parts", "family", "--model", "llama", "--budget", "quick", "--captures", "none",
            "--family-batches", "1 32", "--dir", str(study))
    result = run_script("study.sh", env, *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls == [
        f"-m harness bench --json {study}/bench-ladder-b{b}.json --variants naive,kv,static,"
        f"compiled,pipelined,hf-generate,graphed-sync,graphed,fused --batch {b} --new-tokens 100 "
        "--dtype fp32 --matmul-precision high --repeats 3 --model llama" for b in (1, 32)]
    # A part done before is kept: no second bench.
    again = run_script("study.sh", env, *args, cwd=tmp_path)
    assert again.returncode == 0 and "done before, kept" in again.stdout
    assert len((tmp_path / "calls").read_text().splitlines()) == 2


@pytest.mark.parametrize("model, captured", [
    ("llama", ["static", "compiled", "pipelined+compile", "graphed-sync"]),
    ("phi", ["static", "compiled", "pipelined+compile"]),  # no own step: no graphed-sync
])
def test_study_family_captures_graphed_sync_where_our_own_step_runs(tmp_path, model, captured):
    stub = tmp_path / "py"
    stub.write_text("#!/usr/bin/env bash\nwhile [ $# -gt 0 ]; do [ \"$1\" = --json ] && "
                    "echo '{\"results\": []}' >\"$2\"; shift; done\n")
    stub.chmod(0o755)
    env = make_env(tmp_path, GAPSCOPE_PYTHON=str(stub))
    result = run_script("study.sh", env, "--parts", "family", "--model", model, "--budget",
                        "quick", "--family-batches", "1", "--dir", str(tmp_path / "s"),
                        cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    said = [line.split("] ", 1)[1] for line in result.stdout.splitlines()
            if "family capture" in line and "FAILED" not in line]
    assert said == [f"family capture {c} at batch 1" for c in captured]


# --- study.sh --parts sizes -------------------------------------------------------------------


def test_study_sizes_benches_and_captures_each_size_in_a_process_of_its_own(tmp_path):
    stub = tmp_path / "py"
    stub.write_text("#!/usr/bin/env bash\necho \"$*\" >>\"$STUB_LOG\"\nwhile [ $# -gt 0 ]; do "
                    "[ \"$1\" = --json ] && echo '{\"results\": []}' >\"$2\"; shift; done\n")
    stub.chmod(0o755)
    env = make_env(tmp_path, GAPSCOPE_PYTHON=str(stub), STUB_LOG=str(tmp_path / "calls"))
    study = tmp_path / "study"
    result = run_script("study.sh", env, "--parts", "sizes", "--budget", "quick", "--dir",
                        str(study), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    benches = [c for c in calls if f"--json {study}/bench-" in c]
    assert benches == [
        f"-m harness bench --json {study}/bench-sizes-{s}-b1.json --variants naive,kv,"
        "kv-expandable,static,pipelined,pipelined-seed,deferred,check-every-k,graphed-sync,"
        f"graphed,fused,while-graph,while-fused,nocheck --batch 1 --new-tokens 100 --dtype bf16 "
        f"--repeats 3 --model {m}"
        for s, m in (("small", "llama"), ("1b", "llama:1b"), ("8b", "llama:8b"))]
    said = [line.split("] ", 1)[1] for line in result.stdout.splitlines() if "capture" in line
            and "FAILED" not in line and not line.startswith("    ")]
    assert said == [f"capture sizes-{s}-graphed-sync-b1" for s in ("small", "1b", "8b")]
    twins = [c for c in calls if "untraced.json" in c]  # profile.sh's untraced bench, each size
    assert [c.split(" --model ")[1].split()[0] for c in twins] == ["llama", "llama:1b", "llama:8b"]


def test_sizes_h200_names_its_stages_on_a_bad_one(tmp_path):
    result = run_script("sizes-h200.sh", make_env(tmp_path), "everything", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "usage: scripts/sizes-h200.sh peer|study|suite|sweep\n"


def test_an_export_with_launch_calls_but_no_kernel_table_is_one_line(tmp_path):
    """Its copies alone would make its GPU busy time: refused, not analysed."""
    from click.testing import CliRunner

    from analysis.cli import main

    db = export_without(tmp_path, "CUPTI_ACTIVITY_KIND_KERNEL")
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    result = CliRunner().invoke(main, ["analyze", str(db)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"gapscope: error: {db}: kernel launch calls but no CUPTI_ACTIVITY_KIND_KERNEL table: no "
        "kernel ran (the launches failed, or were captured into a graph never replayed), or the "
        "export is incomplete: export the .nsys-rep again with `nsys export --type sqlite`\n")
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
