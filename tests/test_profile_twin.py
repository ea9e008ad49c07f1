"""`gapscope profile` on programs as they are (the stand-in nsys, tests/fake_nsys): steps from
--step-function, from transformers' forwards, or inferred; the untraced twin's runs through the
hook, merged into untraced_steps.json and read back per thread; bad --step-function values.

The programs here are a few lines of Python with no torch: the stand-in runs them for real, the
hook marks their steps on the host clock, and the export is the bundled H200 capture, its `Step N`
ranges renamed where a test needs function ranges.
"""

import json
import shutil
import sqlite3
import sys
from pathlib import Path

import golden
import pandas as pd
import pytest
from conftest import plain_copy
from synth import causes_trace
from test_profile_command import NOTHING, inproc, last_line
from test_scripts import FIXTURE, export_without, nsys_calls, path_without_nsys, run_dirs

from analysis.capture import hook
from analysis.capture.step_functions import FORWARD_PATTERN
from analysis.measures.untraced import per_traced_step
from analysis.readers.untraced import FORMAT, read_untraced_steps

PY = sys.executable
FORWARD = "transformers.models.gpt2.modeling_gpt2.GPT2LMHeadModel.forward"

STEPLOOP = "def decode_step(i):\n    return i + 1\n\n\ndef warm_up():\n    pass\n"
# 20 calls, as the capture holds 20 steps; says what the hook's environment was.
FUNCTION_PROGRAM = """
import os, sys
import steploop
for i in range(20):
    steploop.decode_step(i)
print("program:", os.environ.get("GAPSCOPE_SYNC_MARKS"), "gapscope_hook" in sys.modules,
      os.environ.get("GAPSCOPE_RUN_DIR"))
"""
# The same, with a window opened where the hook does not look (the stand-in nsys captures one).
CTYPES_WINDOW_PROGRAM = FUNCTION_PROGRAM + """
def open_window():  # ctypes.CDLL("libcudart.so").cudaProfilerStart(), unseen by the hook
    pass
"""
# Steps 1..60 as NVTX ranges (the capture's window holds 31..50).
NVTX_PROGRAM = """
import nvtx
# Its window, as the stand-in nsys captures it: torch.cuda.profiler.start() before step 31.
for i in range(1, 61):
    nvtx.push_range(f"Step {i}")
    nvtx.pop_range()
"""


def work(tmp: Path, program: str) -> list:
    """tmp/work/prog.py (and steploop.py beside it): the command that runs it (`--device cpu`,
    which the program ignores, lets gapscope run it on a machine without a GPU)."""
    d = tmp / "work"
    d.mkdir(exist_ok=True)
    (d / "steploop.py").write_text(STEPLOOP)
    (d / "prog.py").write_text(program)
    return [PY, str(d / "prog.py"), "--device", "cpu"]


def renamed_export(tmp: Path, name: str) -> Path:
    """The bundled capture with each `Step N` range renamed `name`: what nsys's function trace
    writes for the function the loop calls once a step."""
    db = plain_copy(FIXTURE, tmp / "renamed.sqlite")
    with sqlite3.connect(db) as con:
        con.execute("UPDATE StringIds SET value = ? WHERE value LIKE 'Step %'", (name,))
    return db


def record(run: Path) -> dict:
    return json.loads((run / "run.json").read_text())


# --- --step-function -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def function_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("function")
    cmd = work(tmp, FUNCTION_PROGRAM)
    result = inproc(tmp, "profile", "--step-function", "steploop:decode_step", "--range", "all",
                    "--twin-runs", "3", "--", *cmd,
                    FAKE_NSYS_EXPORT_FROM=str(renamed_export(tmp, "steploop.decode_step")))
    assert result.returncode == 0, result.stderr
    (run,) = run_dirs(tmp)
    return tmp, run, cmd, result


def test_a_step_function_goes_to_nsys_as_a_function_trace(function_run):
    tmp, run, cmd, _ = function_run
    (profile,) = [c for c in nsys_calls(tmp) if c[:1] == ["profile"]]
    assert profile[1:profile.index("-o")] == [
        "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none", "--cuda-graph-trace=node",
        "--force-overwrite=false", f"--python-functions-trace={run}/functions.json"]
    assert json.loads((run / "functions.json").read_text()) == [
        {"module": "steploop", "functions": ["decode_step"]}]
    r = record(run)
    assert r["analysis"] == {"step_pattern": r"^(?:steploop\.decode_step)$",
                             "check_pattern": "^Check Stop Condition$",
                             "steps_from": "function", "step_functions": ["steploop:decode_step"]}
    assert r["captured"]["steps"] == 20
    # The traced run got the hook for the sync lines (no torch here: nothing to mark).
    assert f"program: 1 True {run}" in (run / "nsys.log").read_text()


def test_the_twin_runs_the_program_again_and_merges_its_runs(function_run):
    tmp, run, cmd, result = function_run
    for k in (1, 2, 3):
        log = (run / "twin" / str(k) / "program.log").read_text()
        # No sync marks without nsys; the program's run directory is the twin's own.
        assert log == f"program: None True {run}/twin/{k}\n"
    doc = json.loads((run / "untraced_steps.json").read_text())
    assert (doc["format"], doc["source"], doc["numbering"], doc["window"], doc["clock"]) == (
        FORMAT, "hook", "order", None, "host-clock")
    assert [(r["twin_run"], r["process"], r["thread"], r["thread_order"], r["step"])
            for r in doc["runs"]] == [(k, 0, "MainThread", 0, list(range(1, 21))) for k in (1, 2)]
    # The last run also timed the host table's code: its steps, slowed by that, are left out.
    assert r"gapscope: untraced twin: 40 steps in 2 runs (3 runs of the program) -> " \
        f"{run}/untraced_steps.json" in result.stderr.splitlines()
    assert r"hook" in record(run) and record(run)["hook"]["twin"] == {
        "runs": 3, "written": True, "window": None, "host_run": 3}


def test_function_steps_of_the_twin_meet_the_traced_ones_by_order(function_run):
    tmp, run, _, _ = function_run
    out = json.loads(inproc(tmp, "analyze", str(run), "--format", "json").stdout)
    u = out["summary"]["untraced"]
    assert (u["runs"], u["steps"]) == (2, 40)
    # Every traced step has its twin: the k-th call of the thread is the k-th traced step.
    spans = out["steps"]["untraced_span_ns"]
    assert len(spans) == 20 and all(s is not None for s in spans)
    assert out["steps"]["untraced_period_ns"][0] is None
    assert all(p is not None for p in out["steps"]["untraced_period_ns"][1:])


# 30 calls, the program's own capture window around calls 6..25 (a stand-in torch, whose
# torch.cuda.profiler the hook follows as it follows torch's).
WINDOW_PROGRAM = """
import steploop
import torch.cuda.profiler
for i in range(30):
    if i == 5:
        torch.cuda.profiler.start()
    steploop.decode_step(i)
    if i == 24:
        torch.cuda.profiler.stop()
        torch.cuda.profiler.start()  # a second window: nsys captures the first alone
"""
FAKE_PROFILER = "def start():\n    pass\n\n\ndef stop():\n    pass\n"


def test_function_steps_in_the_programs_window_get_a_twin_of_the_window_s_steps(tmp_path):
    cmd = work(tmp_path, WINDOW_PROGRAM)
    fake = tmp_path / "work" / "torch" / "cuda"
    fake.mkdir(parents=True)
    (fake.parent / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "profiler.py").write_text(FAKE_PROFILER)
    result = inproc(tmp_path, "profile", "--step-function", "steploop:decode_step", "--twin-runs",
                    "2", "--no-host-functions", "--", *cmd, FAKE_NSYS_RUN="0",
                    FAKE_NSYS_EXPORT_FROM=str(renamed_export(tmp_path, "steploop.decode_step")))
    assert result.returncode == 0, result.stderr
    (run,) = run_dirs(tmp_path)
    doc = json.loads((run / "untraced_steps.json").read_text())
    # The window's 20 calls, counted from its start: the capture's 20 steps.
    assert doc["numbering"] == "order"
    assert [r["step"] for r in doc["runs"]] == [list(range(1, 21))] * 2
    raw = json.loads(next((run / "twin" / "1").glob("untraced-*.json")).read_text())
    assert raw["profiler_window"] == {"started": True, "stopped": True}
    assert raw["runs"][0]["in_window"] == [False] * 5 + [True] * 20 + [False] * 5
    out = json.loads(inproc(tmp_path, "analyze", str(run), "--format", "json").stdout)
    assert (out["summary"]["untraced"]["runs"], out["summary"]["untraced"]["steps"]) == (2, 40)


def test_function_steps_in_a_window_the_hook_does_not_see_get_no_twin_and_why(tmp_path):
    cmd = work(tmp_path, CTYPES_WINDOW_PROGRAM)
    result = inproc(tmp_path, "profile", "--step-function", "steploop:decode_step", "--", *cmd,
                    FAKE_NSYS_RUN="0",
                    FAKE_NSYS_EXPORT_FROM=str(renamed_export(tmp_path, "steploop.decode_step")))
    assert result.returncode == 0, result.stderr
    assert ("gapscope: warning: no untraced twin: the program opens its capture window where "
            "the hook does not see it (not through torch.cuda.profiler, torch.cuda.cudart() or "
            "cuda-python), so the twin cannot count its steps from the window's start: --range "
            "all gives one") in result.stderr.splitlines()
    (run,) = run_dirs(tmp_path)
    assert not (run / "untraced_steps.json").exists()


@pytest.mark.parametrize("args, message", [
    (["--step-function", "decode_step"],
     "--step-function 'decode_step' is not MODULE:QUALNAME (e.g. "
     "transformers.models.gpt2.modeling_gpt2:GPT2LMHeadModel.forward)"),
    (["--step-function", "__main__:step"],
     "--step-function __main__:step: {work}/prog.py defines no step"),
    (["--step-function", "steploop:decode"],
     "--step-function steploop:decode: {work}/steploop.py defines no decode"),
    (["--steps", "^x$", "--step-function", "steploop:decode_step"],
     "--steps and --step-function each name the steps: pass one"),
])
def test_a_bad_step_function_is_one_line_before_nsys(tmp_path, args, message):
    cmd = work(tmp_path, FUNCTION_PROGRAM)
    result = inproc(tmp_path, "profile", *args, "--", *cmd, PATH=path_without_nsys())
    assert result.returncode == 2
    assert result.stderr == f"gapscope: error: {message.format(work=tmp_path / 'work')}\n"
    assert run_dirs(tmp_path) == []


def test_a_step_function_never_called_is_one_line_and_the_run_is_kept(tmp_path):
    cmd = work(tmp_path, FUNCTION_PROGRAM)
    result = inproc(tmp_path, "profile", "--step-function", "steploop:decode_step", "--range",
                    "all", "--", *cmd, FAKE_NSYS_RUN="0")
    (run,) = run_dirs(tmp_path)
    assert result.returncode == 2
    assert last_line(result.stderr) == (
        "gapscope: error: --step-function steploop:decode_step: no call traced under nsys (no "
        "NVTX range steploop.decode_step in the capture; the function trace recorded no call at "
        "all): is it the function the loop calls, in the module the program imports? "
        f"({run} is kept)")
    assert {"nsys.log", "run.json", "capture.sqlite"} <= {p.name for p in run.iterdir()}


# The program puts its own lib/ folder on sys.path, then imports the module the step is in.
PATH_PROGRAM = """
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
import mymodel
for i in range(20):
    mymodel.GPT().forward(i)
"""


def test_a_module_the_program_makes_importable_itself_is_traced(tmp_path):
    cmd = work(tmp_path, PATH_PROGRAM)
    lib = tmp_path / "work" / "lib"
    lib.mkdir()
    (lib / "mymodel.py").write_text("class GPT:\n    def forward(self, i):\n        return i\n")
    result = inproc(tmp_path, "profile", "--step-function", "mymodel:GPT.forward", "--range",
                    "all", "--twin-runs", "1", "--", *cmd,
                    FAKE_NSYS_EXPORT_FROM=str(renamed_export(tmp_path, "mymodel.GPT.forward")))
    assert result.returncode == 0, result.stderr
    assert (f"gapscope: --step-function mymodel:GPT.forward: no module mymodel importable by the "
            f"program's Python ({PY}) before the run (the program may put its folder on sys.path "
            "itself): traced, and checked after the capture") in result.stderr.splitlines()
    (run,) = run_dirs(tmp_path)
    assert json.loads((run / "functions.json").read_text()) == [
        {"module": "mymodel", "functions": ["GPT.forward"]}]
    assert record(run)["captured"]["steps"] == 20
    # The twin's hook wraps the method once the program imports the module, wherever from.
    doc = json.loads((run / "untraced_steps.json").read_text())
    assert [r["step"] for r in doc["runs"]] == [list(range(1, 21))]


def test_a_step_function_never_called_names_what_the_function_trace_recorded(tmp_path):
    cmd = work(tmp_path, FUNCTION_PROGRAM)
    result = inproc(tmp_path, "profile", "--step-function", "steploop:warm_up", "--range", "all",
                    "--", *cmd, FAKE_NSYS_RUN="0",
                    FAKE_NSYS_EXPORT_FROM=str(renamed_export(tmp_path, "steploop.decode_step")))
    (run,) = run_dirs(tmp_path)
    assert result.returncode == 2
    assert last_line(result.stderr) == (
        "gapscope: error: --step-function steploop:warm_up: no call traced under nsys (no NVTX "
        "range steploop.warm_up in the capture; the function trace recorded steploop.decode_step "
        "×20): is it the function the loop calls, in the module the program imports? "
        f"({run} is kept)")


# --- no step flag: the program's own ranges, transformers' forwards, or inferred -------------


def test_without_step_ranges_the_causal_lm_forwards_are_the_steps(tmp_path):
    result = inproc(tmp_path, "profile", "--", *NOTHING, FAKE_NSYS_RUN="0",
                    FAKE_NSYS_EXPORT_FROM=str(renamed_export(tmp_path, FORWARD)))
    assert result.returncode == 0, result.stderr
    (run,) = run_dirs(tmp_path)
    assert record(run)["analysis"] == {
        "step_pattern": FORWARD_PATTERN, "check_pattern": "^Check Stop Condition$",
        "steps_from": "function",
        "step_functions": ["transformers.models.gpt2.modeling_gpt2:GPT2LMHeadModel.forward"]}
    assert record(run)["captured"]["steps"] == 20
    out = json.loads(inproc(tmp_path, "analyze", str(run), "--format", "json").stdout)
    assert out["summary"]["steps"] == 20


def test_inferred_steps_cut_after_a_sync_no_mark_names_get_no_twin_and_why(tmp_path):
    result = inproc(tmp_path, "profile", "--", *NOTHING, FAKE_NSYS_RUN="0",
                    FAKE_NSYS_EXPORT_FROM=str(export_without(tmp_path, "NVTX_EVENTS")))
    assert ("  untraced       no twin: the capture names no one source line for the sync the steps "
            "are cut") in result.stdout
    (run,) = run_dirs(tmp_path)
    r = record(run)
    assert (r["analysis"]["step_pattern"], r["analysis"]["steps_from"]) == ("infer", "inferred")
    assert r["captured"] == {"steps": 0, "nvtx_ranges": 0, "kernels": 6860}
    # The bundled capture was made without the sync marks: its .item() has no line to mark;
    # the report says so.
    text = (run / "report.md").read_text()
    assert ("| untraced twin | none: the capture names no one source line for the sync the "
            "steps are cut after") in text
    assert r["hook"]["twin"] == {
        "runs": 0, "written": False,
        "why": "the capture names no one source line for the sync the steps are cut after "
               "(captured with --no-sync-lines, or a sync torch does not warn about), so the "
               "twin has no line to mark"}


# --- the twin of NVTX steps --------------------------------------------------------------------


def test_nvtx_steps_get_a_twin_kept_to_the_capture_window(tmp_path):
    pytest.importorskip("nvtx")
    cmd = work(tmp_path, NVTX_PROGRAM)
    result = inproc(tmp_path, "profile", "--twin-runs", "2", "--no-sync-lines",
                    "--no-host-functions", "--", *cmd)
    assert result.returncode == 0, result.stderr
    (run,) = run_dirs(tmp_path)
    doc = json.loads((run / "untraced_steps.json").read_text())
    # The capture (the bundled one) holds steps 31..50: the window the twin is read over.
    assert (doc["numbering"], doc["window"]) == ("range", [30, 50])
    assert [r["step"] for r in doc["runs"]] == [list(range(1, 61))] * 2
    assert record(run)["hook"]["sync_marks"] is False
    u = json.loads(inproc(tmp_path, "analyze", str(run), "--format", "json").stdout)
    u = u["summary"]["untraced"]
    assert (u["runs"], u["steps"], u["window"]) == (2, 40, [30, 50])
    assert len(u["run_period_ns_medians"]) == 2 and u["period_ns_spread"] is not None


def test_a_failing_twin_run_is_a_warning_and_the_report_still_comes(tmp_path):
    cmd = work(tmp_path, "import os, sys\nif os.environ.get('GAPSCOPE_TWIN_DIR'):\n"
                         "    sys.exit('boom')\n")
    result = inproc(tmp_path, "profile", "--", *cmd, FAKE_NSYS_RUN="0")
    (run,) = run_dirs(tmp_path)
    assert result.returncode == 0, result.stderr
    assert (f"gapscope: warning: no untraced twin: its run 1 failed with exit code 1: boom (all "
            f"of it in {run}/twin/1/program.log)") in result.stderr.splitlines()
    assert not (run / "untraced_steps.json").exists() and (run / "report.md").exists()


# --- merging and matching --------------------------------------------------------------------


def process_file(directory: Path, pid: int, runs: list) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"untraced-{pid}.json").write_text(json.dumps(
        {"format": FORMAT, "source": "hook", "kind": "nvtx", "pid": pid, "runs": runs}))


def thread_run(name, order, sequence, steps, start=0):
    return {"thread": name, "thread_order": order, "sequence": sequence, "clock": "cuda-events",
            "step": steps, "start_ns": [start + 10 * i for i in range(len(steps))],
            "end_ns": [start + 10 * i + 5 for i in range(len(steps))]}


def test_the_merge_keeps_each_process_and_thread_and_in_a_window_the_last_sequence(tmp_path):
    one, two = tmp_path / "1", tmp_path / "2"
    process_file(one, 1200, [thread_run("MainThread", 0, 0, [1, 2]),
                             thread_run("MainThread", 0, 1, [1, 2, 3]),
                             thread_run("w", 1, 0, [1])])
    process_file(one, 999, [])               # a helper process with no step
    process_file(two, 77, [thread_run("MainThread", 0, 0, [4, 5])])
    doc = hook.merge([one, two], [1, 3], "range", program_window=True)
    assert [(r["twin_run"], r["process"], r["thread"], r["step"]) for r in doc["runs"]] == [
        (1, 1, "MainThread", [1, 2, 3]), (1, 1, "w", [1]), (2, 0, "MainThread", [4, 5])]
    assert (doc["window"], doc["clock"], doc["source"]) == ([1, 3], "cuda-events", "hook")
    whole = hook.merge([one], None, "range", program_window=False)
    assert [r["step"] for r in whole["runs"]] == [[1, 2], [1, 2, 3], [1]]
    assert hook.why_empty([tmp_path / "none"]).startswith("the hook wrote nothing")


def test_in_a_window_the_merge_keeps_its_steps_counted_from_its_start(tmp_path):
    def run(steps, inside, clock="cuda-events", **more):
        return {"thread": "MainThread", "thread_order": 0, "sequence": 0, "clock": clock,
                "step": steps, "start_ns": steps, "end_ns": steps, "in_window": inside} | more

    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "untraced-5.json").write_text(json.dumps({
        "format": FORMAT, "profiler_window": {"started": True, "stopped": True}, "runs": [
            # One thread's calls on two clocks (CUDA started at call 4): counted across both.
            run([1, 2, 3], [False, False, True], clock="host-clock"),
            run([4, 5, 6], [True, True, False])]}))
    doc = hook.merge([tmp_path / "1"], None, "order", program_window=True)
    assert [r["step"] for r in doc["runs"]] == [[1], [2, 3]]
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "untraced-6.json").write_text(json.dumps({
        "format": FORMAT, "profiler_window": {"started": True, "stopped": True}, "runs": [
            run([1, 2, 3, 4, 5], [False, True, True, True, False], key="graph",
                boundaries=6)]}))
    doc = hook.merge([tmp_path / "2"], None, "mark", program_window=True)
    # Boundaries 2..5 lay inside: the window's 4, its steps 1..3.
    assert [(r["key"], r["boundaries"], r["step"]) for r in doc["runs"]] == [("graph", 4,
                                                                              [1, 2, 3])]
    # Not a window capture (--range all): every step, as numbered.
    doc = hook.merge([tmp_path / "2"], None, "mark", program_window=False)
    assert [(r["boundaries"], r["step"]) for r in doc["runs"]] == [(6, [1, 2, 3, 4, 5])]


def test_twin_threads_meet_the_traced_threads_by_name_else_by_order(tmp_path):
    # Two twin threads, steps by order: thread 0 spans 5 and 7, thread 1 spans 1 and 3.
    runs = [{"thread": "MainThread", "thread_order": 0, "step": [1, 2], "start_ns": [0, 10],
             "end_ns": [5, 17]},
            {"thread": "worker", "thread_order": 1, "step": [1, 2], "start_ns": [0, 10],
             "end_ns": [1, 13]}]
    path = tmp_path / "u.json"
    path.write_text(json.dumps({"format": FORMAT, "numbering": "order", "runs": runs}))
    u = read_untraced_steps(path)
    # The traced threads by id (no names in common): 222 began first, so it is thread 0.
    traced = pd.DataFrame({"thread": [111, 222, 111, 222], "step": [0, 0, 1, 1],
                           "cpu_start_ns": [50, 10, 70, 30]})
    table, keys = per_traced_step(u, traced)
    assert keys == ["thread", "step"]
    assert table.fillna(-1).to_dict("list") == {
        "thread": [111, 111, 222, 222], "step": [0, 1, 0, 1],
        "untraced_period_ns": [-1, 12, -1, 12], "untraced_bubble_ns": [-1, 9, -1, 5],
        "untraced_span_ns": [1, 3, 5, 7]}
    # Names in common: matched by name, whatever the order.
    named = traced.assign(thread=traced["thread"].map({111: "MainThread", 222: "worker"}))
    table, _ = per_traced_step(u, named)
    assert table.groupby("thread")["untraced_span_ns"].apply(list).to_dict() == {
        "MainThread": [5, 7], "worker": [1, 3]}
    # A traced table without threads: by step alone, the threads pooled (today's files).
    table, keys = per_traced_step(u, traced.drop(columns="thread"))
    assert keys == ["step"] and table["untraced_span_ns"].tolist() == [3.0, 5.0]


# --- the spread ------------------------------------------------------------------------------


def test_a_share_smaller_than_the_runs_spread_is_within_noise(tmp_path):
    """causes_trace: traced periods 40 and 90 (median 65), bubble 35. Three twin runs of steps
    1, 2: periods 80, 30, 70 (median 70, spread 50 > |65 - 70|) and bubbles 20, 10, 20 (median
    20, spread 10 < |35 - 20|)."""
    d = tmp_path / "run"
    d.mkdir()
    causes_trace().write(d / "capture.sqlite")
    runs = [{"step": [1, 2], "start_ns": [0, 50], "end_ns": [30, 110]},
            {"step": [1, 2], "start_ns": [0, 40], "end_ns": [30, 60]},
            {"step": [1, 2], "start_ns": [0, 50], "end_ns": [30, 100]}]
    (d / "untraced_steps.json").write_text(json.dumps({"format": FORMAT, "runs": runs}))
    u = json.loads(inproc(tmp_path, "analyze", str(d), "--format", "json").stdout)
    u = u["summary"]["untraced"]
    assert (u["period_ns_median"], u["period_ns_spread"], u["run_period_ns_medians"]) == (
        70, 50, [80, 30, 70])
    assert (u["bubble_ns_median"], u["bubble_ns_spread"]) == (20, 10)
    assert u["profiler_period_share_within_noise"] is True
    assert u["profiler_bubble_share_within_noise"] is False
    text = inproc(tmp_path, "analyze", str(d)).stdout
    assert "the profiler's share of the bubble: 42.9%" in text
    # Wrapped at 100 columns: the words, whatever the line breaks.
    assert ("the profiler's share of the period: within noise (untraced runs' medians "
            "0.00 ms to 0.00 ms) (3 untraced runs)") in " ".join(text.split())
    md = inproc(tmp_path, "analyze", str(d), "--format", "md").stdout
    assert "| profiler's share of the period | within noise (untraced runs' medians" in md
    assert golden.row(md, "profiler's share of the bubble") == [42.9]
    # A second run whose third twin run has a 40 ns bubble: medians 20, 10, 40 spread 30 > 15.
    d2 = tmp_path / "run2"
    shutil.copytree(d, d2)
    runs[2] = {"step": [1, 2], "start_ns": [0, 70], "end_ns": [30, 100]}
    (d2 / "untraced_steps.json").write_text(json.dumps({"format": FORMAT, "runs": runs}))
    compared = inproc(tmp_path, "compare", str(d), str(d2)).stdout
    rows = {line[:29].strip(): line[29:].split() for line in compared.splitlines()}
    assert rows["profiler's share of bubble"] == ["42.9%", "noise"]


def test_the_twin_times_the_host_table_code_beside_the_traced_rows(function_run):
    """The host table (tests/test_analysis_host.py): the hook names the code in both runs, here
    torch's token choice and transformers' (not imported by this program) and the step
    function itself (its own wrapper's, not named twice)."""
    tmp, run, _, _ = function_run
    names = (run / "host_functions.txt").read_text().splitlines()
    assert record(run)["hook"]["host_functions"] == len(names)
    assert {"torch:multinomial", "torch:argmax"} <= set(names)
    assert "steploop:decode_step" not in names
    doc = json.loads((run / "untraced_steps.json").read_text())
    assert [(h["twin_run"], h["step"], sorted(h["rows"])) for h in doc["host"]] == [
        (3, list(range(1, 21)), ["", "steploop.decode_step"])]
    host = json.loads(inproc(tmp, "analyze", str(run), "--format", "json").stdout)[
        "summary"]["host"]
    # The host-timed run's steps, less any over 3x its median (the host clock of a shared machine).
    assert host["untraced"]["runs"] == 1 and 10 < host["untraced"]["steps"] <= 20
    step = next(r for r in host["rows"] if r["name"] == "steploop.decode_step")
    assert step["untraced_ns"] is not None and 0 < step["profiler_share"] <= 1


# --- the program's own function, once a step ----------------------------------------------------

# A module found through a folder the program adds to sys.path (a cloned repository), its step
# function called 20 times, as the capture holds 20 of its ranges.
OWN_PROGRAM = """
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "clone"))
import looplib
for i in range(20):
    looplib.decode_one_token(i)
"""


def test_inferred_steps_become_the_calls_of_the_program_own_function_that_runs_once_a_step(
        tmp_path):
    cmd = work(tmp_path, OWN_PROGRAM)
    clone = tmp_path / "work" / "clone"
    clone.mkdir()
    (clone / "looplib.py").write_text("def decode_one_token(i):\n    return sample(i)\n\n\n"
                                      "def sample(i):\n    return i\n")
    result = inproc(tmp_path, "profile", "--range", "all", "--twin-runs", "2", "--", *cmd,
                    FAKE_NSYS_EXPORT_FROM=str(renamed_export(tmp_path,
                                                             "looplib.decode_one_token")))
    assert result.returncode == 0, result.stderr
    (run,) = run_dirs(tmp_path)
    r = record(run)
    assert r["analysis"] == {"step_pattern": r"^(?:looplib\.decode_one_token)$",
                             "check_pattern": "^Check Stop Condition$",
                             "steps_from": "function",
                             "step_functions": ["looplib:decode_one_token"]}
    assert r["hook"]["own_code"] == {"modules": 1, "functions": 2, "limit": 600, "left_out": 0,
                                     "capped_at": None, "main_functions": 0,
                                     "main_why": r["hook"]["own_code"]["main_why"]}
    assert ("gapscope: steps: the calls of looplib:decode_one_token, the program's own function "
            "that runs once a step (20 calls for 20 inferred steps, 100% of their launches "
            "inside)") in result.stderr.splitlines()
    doc = json.loads((run / "untraced_steps.json").read_text())
    assert [(e["twin_run"], e["step"]) for e in doc["runs"]] == [(1, list(range(1, 21)))]
    assert last_line(result.stderr) == (f"gapscope: done: {run} (20 steps (function), "
                                        "6860 kernels captured)")
