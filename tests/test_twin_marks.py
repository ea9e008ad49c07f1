"""The untraced twin of inferred steps (analysis/measures/twin_keys.py): what a thread's steps
were cut at (a graph's launch, the sync of one source line), each step's boundary as the twin
counts them, and the twin's steps of marks set beside the traced ones; `gapscope profile` end to
end (the stand-in nsys, a Python 3.12 program with no torch whose line the hook marks)."""

import json

import pandas as pd
from synth import TID, Synth
from test_analysis_infer import eager_loop, graph_loop
from test_hook_marks import PYTHON_312, needs_312
from test_profile_command import inproc
from test_scripts import run_dirs

from analysis import api
from analysis.measures.steps import INFER, step_ranges
from analysis.measures.twin_keys import GRAPH, boundaries, thread_keys
from analysis.readers import load_trace
from analysis.readers.untraced import FORMAT

LINE = "/src/loop.py:34"


def marked_loop(where: str = LINE) -> Synth:
    """eager_loop (a prefill and 5 decode steps, each ending with a sync) with the hook's mark
    after each sync: `gapscope.sync WHERE generate`, 1 ns after the call returns."""
    t = eager_loop()
    for call in list(t.calls):
        if t.strings.get("cudaStreamSynchronize_v3020") == call[5]:
            t.sync_mark(f"{where} generate", call[1] + 1)
    return t


def ranges(trace) -> pd.DataFrame:
    steps, _ = step_ranges(trace, INFER)
    return steps.sort_values("start", kind="stable").reset_index(drop=True)


def test_graph_steps_are_keyed_on_graph_launches_and_counted_from_the_first(tmp_path):
    trace = load_trace(graph_loop().write(tmp_path / "g.sqlite"))
    steps = ranges(trace)
    assert thread_keys(trace, steps["tid"][0], steps) == ((GRAPH,), None)
    # The set-up graph's launch at 100 is boundary 1; the steps start at boundaries 2..5; the last
    # step ends before the thread's next graph launch could: no twin step matches it.
    number, follows, count = boundaries(trace, steps["tid"][0], steps, GRAPH)
    assert (list(number), list(follows), count) == ([2, 3, 4, 5], [True, True, True, False], 5)


def test_steps_after_a_marked_sync_are_keyed_on_its_line(tmp_path):
    trace = load_trace(marked_loop().write(tmp_path / "m.sqlite"))
    steps = ranges(trace)
    tid = steps["tid"][0]
    assert thread_keys(trace, tid, steps) == ((LINE,), None)
    # The prefill's sync is boundary 1: decode step k starts after boundary k.
    number, follows, count = boundaries(trace, tid, steps, LINE)
    assert (list(number), list(follows), count) == ([1, 2, 3, 4, 5], [True] * 4 + [False], 6)


def test_steps_with_no_line_to_mark_or_no_sync_say_why(tmp_path):
    trace = load_trace(eager_loop().write(tmp_path / "plain.sqlite"))
    steps = ranges(trace)
    key, why = thread_keys(trace, steps["tid"][0], steps)
    assert key == () and why.startswith("the capture names no one source line for the sync")
    t = Synth()
    for k in range(4):  # no sync: the steps are cut at the largest host gap
        for j, name in enumerate(("embed", "gemm", "act", "head")):
            t.launch(1000 + 200 * k + 10 * j, 1000 + 200 * k + 10 * j + 2,
                     1000 + 200 * k + 10 * j + 5, 1000 + 200 * k + 10 * j + 8, name=name)
    trace = load_trace(t.write(tmp_path / "nosync.sqlite"))
    steps = ranges(trace)
    assert thread_keys(trace, TID | (1000 << 24), steps)[1] == (
        "the steps are cut at the largest host gap (no blocking call once a step), which a run "
        "without the profiler cannot place")


def twin_run(key, steps, boundaries_, spans=(), order=0):
    """A run of step marks: step j from 100j + 10 (the end of step j - 1 + a 10 ns bubble) to
    100j + 100 unless `spans` gives them."""
    return {"thread": "MainThread", "thread_order": order, "key": key, "clock": "cuda-events",
            "boundaries": boundaries_, "step": steps,
            "start_ns": [100 * j + 10 for j in steps], "end_ns": [100 * j + 100 for j in steps]}


def run_dir(tmp_path, synth: Synth, runs: list):
    d = tmp_path / "run"
    d.mkdir()
    synth.write(d / "capture.sqlite")
    (d / "untraced_steps.json").write_text(json.dumps(
        {"format": FORMAT, "source": "hook", "numbering": "mark", "runs": runs}))
    return d


def test_the_twin_of_graph_steps_meets_them_by_boundary(tmp_path):
    # Twin steps 2..4 (boundaries 2..5) are the traced steps 1..3: period 100, bubble 10, span 90;
    # the second run counted 4 boundaries, not the capture's 5: left out.
    d = run_dir(tmp_path, graph_loop(), [twin_run(GRAPH, [1, 2, 3, 4], 5),
                                         twin_run(GRAPH, [1, 2, 3], 4)])
    (a,) = api.open(d)
    u = a.summary["untraced"]
    assert (u["runs"], u["steps"], u["period_ns_median"], u["bubble_ns_median"],
            u["span_ns_median"]) == (1, 3, 100, 10, 90)
    assert list(a.steps["untraced_period_ns"].fillna(-1)) == [100, 100, 100, -1]
    assert a.summary["steps_from"] == "inferred"


def test_the_twin_of_steps_cut_at_a_sync_line_meets_them_by_the_line_s_executions(tmp_path):
    d = run_dir(tmp_path, marked_loop(), [twin_run(LINE, [1, 2, 3, 4, 5], 6),
                                          twin_run("/src/other.py:1", [1, 2, 3, 4, 5], 6)])
    (a,) = api.open(d)
    assert a.summary["untraced"]["steps"] == 4
    assert list(a.steps["untraced_span_ns"].fillna(-1)) == [90, 90, 90, 90, -1]


# The program the twin runs: a prefill check, then 5 decode checks, at line 2 (check()'s body).
LOOP_PROGRAM = """\
def check(i):
    return i > 100

check(-1)
for i in range(5):
    check(i)
"""


@needs_312
def test_profile_marks_the_line_of_the_sync_the_inferred_steps_are_cut_after(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    program = work / "loop.py"
    program.write_text(LOOP_PROGRAM)
    where = f"{program}:2"
    export = marked_loop(where).write(tmp_path / "capture.sqlite")
    result = inproc(tmp_path, "profile", "--range", "all", "--twin-runs", "2",
                    "--no-host-functions", "--", PYTHON_312, str(program), "--device", "cpu",
                    FAKE_NSYS_RUN="0",
                    FAKE_NSYS_EXPORT_FROM=str(export))
    assert result.returncode == 0, result.stderr
    assert (f"gapscope: untraced twin of the inferred steps: marking {where}"
            in result.stderr.splitlines())
    (run,) = run_dirs(tmp_path)
    doc = json.loads((run / "untraced_steps.json").read_text())
    assert doc["numbering"] == "mark"
    assert [(r["key"], r["boundaries"], r["step"]) for r in doc["runs"]] == [
        (where, 6, [1, 2, 3, 4, 5])] * 2
    assert json.loads((run / "run.json").read_text())["hook"]["twin"] == {
        "runs": 2, "written": True, "window": None, "marks": [where]}
    out = json.loads(inproc(tmp_path, "analyze", str(run), "--format", "json").stdout)
    u = out["summary"]["untraced"]
    assert (u["runs"], u["steps"]) == (2, 8)
    assert [p is not None for p in out["steps"]["untraced_span_ns"]] == [True] * 4 + [False]


def test_a_twin_of_marks_goes_beside_inferred_steps_only(tmp_path):
    t = marked_loop()
    t.range("Step 1", 900, 2100)
    d = run_dir(tmp_path, t, [twin_run(LINE, [1, 2, 3, 4, 5], 6)])
    (nvtx,) = api.open(d)
    assert nvtx.summary["steps_from"] == "nvtx" and "untraced" not in nvtx.summary
    (inferred,) = api.open(d, steps=INFER)
    assert inferred.summary["untraced"]["steps"] == 4


def test_a_twin_whose_thread_marked_another_key_is_no_twin(tmp_path):
    d = run_dir(tmp_path, marked_loop(), [twin_run("/src/other.py:1", [1, 2, 3, 4, 5], 6)])
    (a,) = api.open(d)
    assert "untraced" not in a.summary


def test_steps_cut_after_either_of_two_syncs_run_once_a_step_are_keyed_on_both(tmp_path):
    """nanoGPT's generate syncs twice a token (its logits' index and its top-k mask); the
    inference cut some stretches after one and some after the other: each line keys the steps
    cut after it, so both get a twin."""
    a, b = "/src/model.py:190", "/src/model.py:322"
    t = Synth()
    for k in range(6):  # a token: a launch, sync A, a launch, sync B
        base = 1000 + 100 * k
        t.launch(base, base + 2, base + 5, base + 8, name="forward")
        t.call("cudaStreamSynchronize_v3020", base + 10, base + 20)
        t.sync_mark(f"{a} GPT.forward", base + 21)
        t.launch(base + 30, base + 32, base + 35, base + 38, name="sample")
        t.call("cudaStreamSynchronize_v3020", base + 40, base + 50)
        t.sync_mark(f"{b} GPT.generate", base + 51)
    trace = load_trace(t.write(tmp_path / "two.sqlite"))
    tid = trace.ops["tid"].iloc[0]
    # Steps 1-2 cut after A (from the sample launch on), steps 3-5 after B (from the forward).
    starts = [1030, 1130, 1300, 1400, 1500]
    steps = pd.DataFrame({"start": starts, "end": [1130, 1230, 1400, 1500, 1600]})
    assert thread_keys(trace, tid, steps) == ((b, a), None)
    number, follows, count = boundaries(trace, tid, steps, a, only_cut_after=True)
    assert (list(number), list(follows), count) == ([1, 2, -1, -1, -1], [True] + [False] * 4, 6)
    number, follows, count = boundaries(trace, tid, steps, b, only_cut_after=True)
    assert (list(number), list(follows), count) == ([-1, -1, 3, 4, 5], [False, False, True, True,
                                                                        False], 6)
