"""Steps of a loop of one launch (a CUDA graph WHILE node, harness while-graph): found in the
repeats of that one execution's ops, on hand-built exports worked out on paper, and on a real
node-level capture of while-graph (tests/data/runs/while-graph)."""

from pathlib import Path

import numpy as np
import pytest
from synth import Synth

from analysis import api
from analysis.errors import TraceError
from analysis.measures.infer_loop import LOOP_AGREEMENT, loop_period, loop_steps
from analysis.measures.summary import analyze
from analysis.readers import load_trace

SYNC = "cudaStreamSynchronize_v3020"
BODY = ("embed", "gemm", "act", "gemm", "head", "next")


def while_loop(iterations: int = 4) -> Synth:
    """Two eager fills (0, 10), the one graph launch (20-30), its sync (35-520), a copy after.

    host  [fill][fill] [cudaGraphLaunch] [sync .................................] [copy]
    GPU    |f|   |f|        |e g a g h n|...42...|e g a g h n|...  iteration k at 100 + 100k:
                            op j at +10j, 8 ns long: busy 48 of 58, the body 100 apart
    """
    t = Synth()
    t.launch(0, 2, 3, 5, name="fill")
    t.launch(10, 12, 13, 15, name="fill")
    corr = t.call("cudaGraphLaunch_v10000", 20, 30)
    for k in range(iterations):
        for j, name in enumerate(BODY):
            at = 100 + 100 * k + 10 * j
            t.op(corr, at, at + 8, name=name)
    t.call(SYNC, 35, 520)
    t.launch(520, 522, 525, 530, kind="memcpy")
    return t


def test_a_while_loop_gets_a_step_per_iteration_of_its_one_launch(tmp_path):
    (a,) = analyze(load_trace(while_loop().write(tmp_path / "t.sqlite")))
    s = a.steps
    assert list(s["step"]) == [1, 2, 3, 4]
    assert list(s["gpu_start_ns"]) == [100, 200, 300, 400]
    assert list(s["gpu_end_ns"]) == [158, 258, 358, 458]
    assert list(s["period_ns"]) == [58, 100, 100, 100]
    assert list(s["bubble_ns"][1:]) == [42, 42, 42] and s["bubble_ns"].isna()[0]
    assert list(s["busy_ns"]) == [48] * 4 and list(s["op_records"]) == [6] * 4
    assert list(s["ops"]) == [1] * 4  # one launch call holds them all
    assert set(s["cpu_start_ns"]) == {20} and set(s["cpu_end_ns"]) == {30}
    summary = a.summary
    assert (summary["steps_from"], summary["steps_inferred_by"]) == (
        "inferred", "iterations of one graph launch (6 ops a step)")
    assert summary["unattributed_ops"] == 3  # the fills and the copy: not the loop's
    # 4 x 5 gaps of 2 ns inside the bodies, 3 bubbles of 42: all with the work long queued.
    assert summary["idle_ns"] == 166 and summary["idle_ns_by_cause"]["queued"] == 166


def test_a_graph_run_once_a_step_is_no_loop(tmp_path):
    """One launch, one step: two layers of the same four ops between an embedding and a head
    repeat, but the execution is no whole number of them."""
    t = Synth()
    corr = t.call("cudaGraphLaunch_v10000", 0, 5)
    names = ("embed", *("norm", "gemm", "act", "gemm") * 3, "head", "argmax")
    for j, name in enumerate(names):
        t.op(corr, 10 + 10 * j, 18 + 10 * j, name=name)
    assert loop_steps(load_trace(t.write(tmp_path / "t.sqlite"))) is None


def test_the_period_is_the_whole_body_never_a_part_that_repeats_inside_it():
    body = [1, 2, 3, 2, 3, 4]  # 2, 3 repeats inside the body: still one block of 6
    assert loop_period(np.array(body * 3)) == 6
    assert loop_period(np.array(body * 2)) is None  # two iterations are not MIN_REPEATS
    assert loop_period(np.array([9] + body * 3)) is None  # a node before the loop
    assert loop_period(np.array([5] * 7)) == 1  # an iteration of one record


def test_two_streams_may_swap_a_pair_of_ops_in_an_iteration():
    body = list(range(40))
    swapped = body[:10] + [body[11], body[10]] + body[12:]
    ops = np.array(body * 3 + swapped)
    assert np.mean(ops[:-40] == ops[40:]) >= LOOP_AGREEMENT
    assert loop_period(ops) == 40


DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def real_loop():
    """While-graph on the H200, node by node: GPT-2 124M, batch 8, 40 new tokens, uniform:20-40
    (the loop stopped at step 34, run.json); its twin is the run's untraced_steps.json."""
    (a,) = api.open(DATA / "runs" / "while-graph")
    return a


def test_the_real_loop_has_a_step_per_iteration_each_ending_with_its_condition_kernel(real_loop):
    a = real_loop
    s = a.steps
    assert list(s["step"]) == list(range(1, 35))  # run.json: 34 steps run
    assert set(s["op_records"]) == {297}  # 297 kernels a step, each graph node once
    assert a.summary["steps_inferred_by"] == (
        "iterations of one graph launch (297 ops a step; its ops recorded with no correlation "
        "id, given the launch's)")
    assert a.summary["ops_without_launch_call"] == 0 and a.summary["unattributed_ops"] == 1
    last = a.ops[a.ops["step"] >= 0].sort_values("start_ns").groupby("step").tail(1)
    assert {a.trace.strings[int(n)] for n in last["name_id"]} == {"gapscope_while_next"}
    assert (int(s["gpu_start_ns"].iloc[1]), int(s["bubble_ns"].iloc[1])) == (18198478, 613631)


def test_the_real_loops_twin_is_set_beside_its_steps(real_loop):
    twin = real_loop.summary["untraced"]
    assert (twin["source"], twin["runs"], twin["steps"]) == ("gpu-globaltimer", 3, 102)
    assert (twin["bubble_ns_median"], twin["period_ns_median"]) == (6816, 1099808)
    assert real_loop.steps["untraced_bubble_ns"].notna().sum() == 33  # step 1 has no bubble


def test_graph_by_graph_the_loop_is_one_op_and_the_analysis_says_why_in_one_line():
    with pytest.raises(TraceError, match=r"nsys recorded 1 graph execution\(s\) whole") as e:
        api.open(DATA / "loop" / "while-graph-graphlevel")
    assert "\n" not in str(e.value)
