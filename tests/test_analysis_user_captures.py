"""Programs gapscope did not write, captured as they are on an H200 (tests/data/user/, see
tests/data/README.md): their steps inferred from the trace, beside the steps nsys's Python
function tracing marked (the model's forward, the loop's decode function) in the same capture,
and a program of two decoding threads."""

import pytest
from conftest import DATA_DIR

from analysis.measures.steps import INFER
from analysis.measures.summary import Options, analyze
from analysis.readers import load_trace

USER = DATA_DIR / "user"
FORWARD = r"GPT2LMHeadModel\.forward$"


@pytest.fixture(scope="module")
def user():
    """name -> the capture's trace, read from its .sqlite.xz as it is stored."""
    return {packed.name.removesuffix(".sqlite.xz"): load_trace(packed)
            for packed in sorted(USER.glob("*.sqlite.xz"))}


# name: (function-trace pattern, steps it marks, inferred steps, how, inferred median period,
# the function-traced steps' median period)
CASES = {
    # generate() twice (warm-up, timed), static cache: each call replays its own CUDA graph
    # (99 + 98: the warm-up's first decode step runs before its graph exists), 200 forwards.
    "gen-static-fn": (FORWARD, 200, 197, "graph launches (exec 5, exec 8)", 2080565, 2085893),
    # generate() once, dynamic cache, eager: 1 prefill and 99 decode forwards.
    "gen-dynamic-fn": (FORWARD, 100, 99, "repeating sequence of 309 launches (100% the same), "
                       "phase after cudaStreamSynchronize", 6678588, 6680733),
    # A decode loop with top-p sampling (cub's NVTX ranges in every step): 99 decode calls.
    "loop-eager-fn": (r"toy_lm\.decode_one_token$", 99, 99, "repeating sequence of 478 "
                      "launches (100% the same), phase after cudaStreamSynchronize", 11664739,
                      11665219),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_inferred_steps_are_every_decode_step_at_the_function_traced_period(user, name):
    pattern, marked, inferred, how, period, traced = CASES[name]
    trace = user[name]
    # `--steps infer` sets the function-trace ranges aside.
    (a,) = analyze(trace, Options(step_pattern=INFER))
    s = a.summary
    assert (s["steps"], s["steps_from"], s["steps_inferred_by"]) == (inferred, "inferred", how)
    assert s["period_ns_median"] == period
    assert list(a.steps["step"]) == list(range(1, inferred + 1))
    (f,) = analyze(trace, Options(step_pattern=pattern))
    assert (f.summary["steps"], f.summary["steps_from"]) == (marked, "function")
    assert list(f.steps["step"]) == list(range(1, marked + 1))
    assert f.summary["period_ns_median"] == traced
    assert abs(period / traced - 1) < 0.005  # the target: within 5%
    # With no pattern: transformers' forwards are found by themselves (as `gapscope profile`
    # finds them); other function-trace ranges (toy_lm's) do not match, and the steps are
    # inferred.
    (d,) = analyze(trace)
    if name.startswith("gen-"):
        assert d.summary["steps_from"] == "function" and d.steps.equals(f.steps)
    else:
        assert d.summary["steps_from"] == "inferred" and d.steps.equals(a.steps)


def test_two_threads_sharing_step_numbers_each_get_their_own_sequence(user):
    trace = user["two-threads"]
    (a,) = analyze(trace)
    s = a.steps
    assert (a.summary["steps_from"], a.summary["threads"], len(s)) == ("nvtx", 2, 118)
    # nsys names both Python threads `python3`: the OS thread id tells them apart.
    threads = s.groupby("thread", sort=False)
    assert threads.size().to_dict() == {"python3 (1309)": 59, "python3 (1310)": 59}
    assert {t: list(g["step"]) for t, g in threads} == {
        "python3 (1309)": list(range(1, 60)), "python3 (1310)": list(range(1, 60))}
    # Read as one sequence, four of these steps had negative periods; now none has.
    assert (s["period_ns"].dropna() >= 0).all() and s["period_ns"].notna().all()
    assert threads["period_ns"].median().to_dict() == {"python3 (1309)": 16479050,
                                                       "python3 (1310)": 17364006}
    # The syncs name each thread as the steps do: its stop check, by the time it blocked.
    assert a.syncs[["thread", "call", "calls"]].values.tolist() == [
        ["python3 (1310)", "cudaStreamSynchronize", 60],
        ["python3 (1309)", "cudaStreamSynchronize", 59]]
    # Inferred, each thread's steps and periods are those its NVTX ranges give.
    (i,) = analyze(trace, Options(step_pattern=INFER))
    assert i.summary["steps_inferred_by"] == "; ".join(
        f"thread python3 ({t}): repeating sequence of 419 launches (100% the same), phase after "
        "cudaStreamSynchronize" for t in (1309, 1310))
    cols = ["thread", "step", "ops", "gpu_start_ns", "gpu_end_ns", "period_ns", "bubble_ns"]
    assert i.steps[cols].equals(s[cols])


def test_a_compiled_loop_gets_a_step_per_cuda_graph_replay_and_its_item_line(user):
    # examples/decode_loop.py --compile under `gapscope profile --range all` (the sync marks on,
    # graphs node by node): two generate() calls of 99 decode tokens each; the warm-up's first
    # replays come after torch.compile's own warm-up runs, so 197 replays of the one graph.
    (a,) = analyze(user["loop-graph"])
    s = a.summary
    assert (s["steps"], s["steps_from"], s["steps_inferred_by"]) == (
        197, "inferred", "graph launch (138 nodes)")
    assert (s["period_ns_median"], s["cuda_graph_trace"]) == (1137941, "node")
    assert list(a.steps["step"]) == list(range(1, 198))
    # The loop's `.item()` stop check, once a step, named by its line.
    top = a.syncs.iloc[0]
    assert (top["call"], top["file"].rsplit("/", 2)[-2:], top["line"], top["function"],
            top["calls"]) == ("cudaStreamSynchronize", ["examples", "decode_loop.py"], 34,
                              "generate", 197)
