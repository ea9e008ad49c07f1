"""Steps inferred from the trace and one step sequence per thread, on hand-built exports whose
answers are worked out on paper (each builder draws its trace)."""

import random

import golden
import pytest
from click.testing import CliRunner
from synth import PID, TID, Synth
from synth_kineto import from_synth

from analysis.cli import main
from analysis.errors import TraceError
from analysis.measures.infer import launch_table, sequence_steps
from analysis.measures.steps import INFER
from analysis.measures.summary import Options, analyze
from analysis.readers import load_trace

SYNC = "cudaStreamSynchronize_v3020"
# One decode step: 8 launches (two layers of gemm + act between embed and the sampling), the
# flag's copy to the host, then the stop check's sync.
STEP = ("embed", "gemm", "act", "gemm", "act", "head", "argmax", "[copy]")
PREFILL = ("pf_embed", "pf_gemm", "act", "pf_gemm", "act", "head", "argmax", "[copy]")


def analyse(tmp_path, synth: Synth, name: str = "t.sqlite", **options):
    return analyze(load_trace(synth.write(tmp_path / name)), Options(**options))


def launch_step(t: Synth, names: tuple, at: int, tid: int = TID, stream: int = 7,
                sync: bool = True) -> None:
    """Launch j at at + 10j (2 ns), its op at at + 10j + 5 (3 ns); then the sync at + 80..150.

    time  at     +10    +20  ...  +70      +80 ............ +150       at + 200: next step
    host  [embed] [gemm] [act] ... [copy]  [sync ..........]
    GPU       |e|     |g|    ...      |c|   (ends at + 78)
    """
    for j, name in enumerate(names):
        kind = "memcpy" if name == "[copy]" else "kernel"
        t.launch(at + 10 * j, at + 10 * j + 2, at + 10 * j + 5, at + 10 * j + 8, tid=tid,
                 kind=kind, name=name, stream=stream)
    if sync:
        t.call(SYNC, at + 80, at + 150, tid=tid)


def eager_loop(steps: int = 5, tid: int = TID, at: int = 0, stream: int = 7,
               t: Synth | None = None) -> Synth:
    """Three set-up launches (0, 10, 20), a prefill at 100 (5 of its 8 ops named as a decode
    step's), decode steps at 1000 + 200k, then one launch after the loop at 1000 + 200 steps.

    launches  init×3 | prefill (8) | step 1 (8) | step 2 (8) | ... | post
    """
    t = t or Synth()
    for j in range(3):
        t.launch(at + 10 * j, at + 10 * j + 2, at + 10 * j + 5, at + 10 * j + 8, tid=tid,
                 name="init", stream=stream)
    launch_step(t, PREFILL, at + 100, tid=tid, stream=stream)
    for k in range(steps):
        launch_step(t, STEP, at + 1000 + 200 * k, tid=tid, stream=stream)
    end = at + 1000 + 200 * steps
    t.launch(end, end + 2, end + 5, end + 8, tid=tid, name="post", stream=stream)
    return t


def test_an_eager_loop_gets_a_step_per_repeat_after_its_sync(tmp_path):
    (a,) = analyse(tmp_path, eager_loop())
    s = a.steps
    assert list(s["step"]) == [1, 2, 3, 4, 5]
    assert list(s["name"]) == [f"Step {k} (inferred)" for k in range(1, 6)]
    # From each step's first launch (embed) to the next one's; the last to the post launch.
    assert list(s["cpu_start_ns"]) == [1000, 1200, 1400, 1600, 1800]
    assert list(s["cpu_end_ns"]) == [1200, 1400, 1600, 1800, 2000]
    assert list(s["ops"]) == [8] * 5
    assert list(s["gpu_start_ns"]) == [1005, 1205, 1405, 1605, 1805]
    assert list(s["gpu_end_ns"]) == [1078, 1278, 1478, 1678, 1878]
    # The first period runs from the window's start; then the cadence, 200 ns.
    assert list(s["period_ns"]) == [73, 200, 200, 200, 200]
    assert list(s["bubble_ns"].fillna(-1)) == [-1, 127, 127, 127, 127]
    assert list(s["thread"]) == [str(TID)] * 5
    m = a.summary
    assert (m["steps_from"], m["threads"]) == ("inferred", 1)
    assert m["steps_inferred_by"] == (
        "repeating sequence of 8 launches (100% the same), phase after cudaStreamSynchronize")
    # Set-up (3), prefill (8) and the launch after the loop: outside the steps.
    assert m["unattributed_ops"] == 12


def test_a_capture_with_no_nvtx_table_at_all_gets_the_same_inferred_steps(tmp_path):
    # `nsys profile --trace=cuda` of an un-annotated program: the export has no NVTX_EVENTS.
    path = eager_loop().write(tmp_path / "plain.sqlite", drop=("NVTX_EVENTS",))
    (a,) = analyze(load_trace(path))
    (b,) = analyse(tmp_path, eager_loop())
    assert a.steps.equals(b.steps) and a.summary == b.summary
    assert list(a.steps["cpu_start_ns"]) == [1000, 1200, 1400, 1600, 1800]


def test_steps_infer_sets_the_step_ranges_aside(tmp_path):
    t = eager_loop()
    t.range("Step 1", 900, 2100)  # one range over the whole loop
    (nvtx,) = analyse(tmp_path, t)
    assert (len(nvtx.steps), nvtx.summary["steps_from"]) == (1, "nvtx")
    assert nvtx.summary["steps_inferred_by"] is None
    (a,) = analyse(tmp_path, t, name="u.sqlite", step_pattern=INFER)
    assert list(a.steps["cpu_start_ns"]) == [1000, 1200, 1400, 1600, 1800]
    assert a.summary["steps_from"] == "inferred"


def test_other_libraries_ranges_in_the_loop_change_nothing(tmp_path):
    plain = eager_loop()
    t = eager_loop()
    for k in range(5):  # CCCL's scan around each argmax launch, as top-p sampling has
        t.range("cub::DeviceScan::InclusiveSum", 1000 + 200 * k + 59, 1000 + 200 * k + 64)
    (a,) = analyse(tmp_path, t)
    (b,) = analyse(tmp_path, plain, name="u.sqlite")
    # The host table names the library's ranges (its rows differ); nothing else changes.
    assert a.steps.equals(b.steps) and (
        {k: v for k, v in a.summary.items() if k != "host"}
        == {k: v for k, v in b.summary.items() if k != "host"})


def test_without_a_sync_the_steps_start_after_the_largest_recurring_host_gap(tmp_path):
    t = Synth()
    # Each step: 8 launches 10 ns apart, then 120 ns of Python before the next step's first.
    for k in range(4):
        launch_step(t, STEP, 1000 + 200 * k, sync=False)
    (a,) = analyse(tmp_path, t)
    assert list(a.steps["cpu_start_ns"]) == [1000, 1200, 1400, 1600]
    assert list(a.steps["cpu_end_ns"]) == [1200, 1400, 1600, 1672]
    assert a.summary["steps_inferred_by"] == (
        "repeating sequence of 8 launches (100% the same), phase at the largest host gap")


def graph_loop(steps: int = 4, node_level: bool = False) -> Synth:
    """A set-up graph (exec 3) replayed once, then per step at 1000 + 100k: the input's copy
    (+0), the decode graph's launch (exec 7, +10), the argmax (+20), the flag's copy (+30) and
    the sync (+40..90).

    host  [copy in][graph launch][argmax][copy out][sync ....]   [copy in][graph launch] ...
    GPU       |c|    |===== graph 15..45 =====||a||c|
    """
    t = Synth()
    corr = t.call("cudaGraphLaunch_v10000", 100, 105)
    t.op(corr, 110, 150, kind="graph", graph=3)
    for k in range(steps):
        at = 1000 + 100 * k
        t.launch(at, at + 2, at + 3, at + 5, kind="memcpy")
        corr = t.call("cudaGraphLaunch_v10000", at + 10, at + 12)
        if node_level:
            for j in range(3):
                t.op(corr, at + 15 + 10 * j, at + 25 + 10 * j, name=f"node{j}")
        else:
            t.op(corr, at + 15, at + 45, kind="graph", graph=7)
        t.launch(at + 20, at + 22, at + 46, at + 48, name="argmax")
        t.launch(at + 30, at + 32, at + 49, at + 50, kind="memcpy")
        t.call(SYNC, at + 40, at + 90)
    return t


@pytest.mark.parametrize(("node_level", "how"), [(False, "graph launch (exec 7)"),
                                                  (True, "graph launch (3 nodes)")])
def test_a_graph_replay_loop_gets_a_step_per_graph_launch(tmp_path, node_level, how):
    (a,) = analyse(tmp_path, graph_loop(node_level=node_level))
    s = a.steps
    # From each launch of the decode graph to the next; the last as long as the median step.
    assert list(s["cpu_start_ns"]) == [1010, 1110, 1210, 1310]
    assert list(s["cpu_end_ns"]) == [1110, 1210, 1310, 1332]
    # The next step's input copy is launched in this step (the last has none to launch).
    assert list(s["ops"]) == [4, 4, 4, 3]
    assert list(s["gpu_end_ns"]) == [1105, 1205, 1305, 1350]
    assert list(s["period_ns"]) == [90, 100, 100, 45]
    assert (a.summary["steps_from"], a.summary["steps_inferred_by"]) == ("inferred", how)


def test_a_slow_first_step_is_a_step_all_the_same(tmp_path):
    t = Synth()
    # Five repeats of one unit; the first one's host time is 600 ns (first-call work), the
    # others' 200: it is a decode step like the rest.
    for at in (1000, 1600, 1800, 2000, 2200):
        launch_step(t, STEP, at)
    t.launch(2400, 2402, 2405, 2408, name="post")
    (a,) = analyse(tmp_path, t)
    assert list(a.steps["cpu_start_ns"]) == [1000, 1600, 1800, 2000, 2200]
    assert list(a.steps["cpu_ns"]) == [600, 200, 200, 200, 200]


def test_two_calls_each_replaying_its_own_graph_get_steps_in_both(tmp_path):
    """generate() twice: each call captures its graph (exec 7, then exec 8), runs a prefill of
    20 launches, then replays it 3 times (each step: input copy, graph launch, argmax, copy
    out, sync); the second call starts at 5000.

    call 1  prefill (20) | [c][G7][a][c] x3 | call 2  prefill (20) | [c][G8][a][c] x3
    """
    t = Synth()
    for at0, graph in ((0, 7), (5000, 8)):
        for j in range(20):
            t.launch(at0 + 10 * j, at0 + 10 * j + 2, at0 + 10 * j + 5, at0 + 10 * j + 8,
                     name=f"prefill{j}")
        for k in range(3):
            at = at0 + 1000 + 100 * k
            t.launch(at, at + 2, at + 3, at + 5, kind="memcpy")
            corr = t.call("cudaGraphLaunch_v10000", at + 10, at + 12)
            t.op(corr, at + 15, at + 45, kind="graph", graph=graph)
            t.launch(at + 20, at + 22, at + 46, at + 48, name="argmax")
            t.launch(at + 30, at + 32, at + 49, at + 50, kind="memcpy")
            t.call(SYNC, at + 40, at + 90)
    (a,) = analyse(tmp_path, t)
    assert list(a.steps["step"]) == [1, 2, 3, 4, 5, 6]
    assert list(a.steps["cpu_start_ns"]) == [1010, 1110, 1210, 6010, 6110, 6210]
    # The last step of each call holds as many launches as the median step (4): it ends at the
    # launch after those, not at the next call's first graph launch.
    assert list(a.steps["cpu_end_ns"]) == [1110, 1210, 5000, 6110, 6210, 6232]
    assert list(a.steps["ops"]) == [4, 4, 3, 4, 4, 3]
    assert a.summary["steps_inferred_by"] == "graph launches (exec 7, exec 8)"


def test_no_repeating_structure_is_one_line_and_exit_2(tmp_path):
    rng = random.Random(7)
    t = Synth()
    for j in range(300):
        t.launch(10 * j, 10 * j + 2, 10 * j + 5, 10 * j + 8, name=f"k{rng.randrange(60)}")
    path = t.write(tmp_path / "t.sqlite")
    with pytest.raises(TraceError) as e:
        analyze(load_trace(path))
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: no step ranges, and no repeating structure to infer "
                              f"steps from (thread {TID}, 300 launches: no unit of launches "
                              "repeats 3 times with 90% of its ops the same over 25% of them; "
                              "too few blocking calls to cut steps at; no op launched once a step "
                              "whose 3 steps in a row have 75% of their ops alike over 25% of the "
                              "launches)")
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "no repeating structure" in result.output


def test_too_few_repeats_are_no_steps(tmp_path):
    t = eager_loop(steps=2)
    with pytest.raises(TraceError, match="no repeating structure"):
        analyse(tmp_path, t)


def two_threads(infer: bool = False) -> Synth:
    """Two threads decoding side by side, each its own stream, `Step 1..4` in both (or no ranges
    with `infer`): thread A's steps at 1000 + 200k, B's at 1100 + 250k, so they interleave.

    A  |Step 1 1000|Step 2 1200|Step 3 1400|Step 4 1600|
    B       |Step 1 1100 |Step 2 1350 |Step 3 1600 |Step 4 1850 |
    """
    t = Synth()
    t.thread_name("python3", tid=TID)
    t.thread_name("python3", tid=TID + 1)
    for k in range(4):
        a, b = 1000 + 200 * k, 1100 + 250 * k
        launch_step(t, STEP, a, tid=TID, stream=7)
        launch_step(t, STEP, b, tid=TID + 1, stream=9)
        if not infer:
            t.range(f"Step {k + 1}", a, a + 200, tid=TID)
            t.range(f"Step {k + 1}", b, b + 250, tid=TID + 1)
    for tid, end in ((TID, 1800), (TID + 1, 2100)):
        t.launch(end, end + 2, end + 5, end + 8, tid=tid, name="post")
    return t


@pytest.mark.parametrize("infer", [False, True])
def test_two_threads_have_one_step_sequence_each(tmp_path, infer):
    (a,) = analyse(tmp_path, two_threads(infer))
    s = a.steps
    a_rows = s["thread"] == "python3 (1001)"
    b_rows = s["thread"] == "python3 (1002)"
    assert a_rows.sum() == b_rows.sum() == 4
    assert list(s.loc[a_rows, "step"]) == list(s.loc[b_rows, "step"]) == [1, 2, 3, 4]
    # Each thread's own cadence: 200 and 250 ns; its first period from its own first op.
    assert list(s.loc[a_rows, "period_ns"]) == [73, 200, 200, 200]
    assert list(s.loc[b_rows, "period_ns"]) == [73, 250, 250, 250]
    assert (s["period_ns"] >= 0).all()
    assert list(s.loc[a_rows, "gpu_start_ns"]) == [1005, 1205, 1405, 1605]
    # Between A's steps (gpu_end at +78, the next op at +205: 127 ns) B's ops ran for 24, 15
    # and 0 ns (3 ns each), between B's (177 ns) A's for 24, 15 and 3 (its post launch): the
    # bubble is the time no op ran.
    assert list(s.loc[a_rows, "bubble_ns"].fillna(-1)) == [-1, 103, 112, 127]
    assert list(s.loc[b_rows, "bubble_ns"].fillna(-1)) == [-1, 153, 162, 174]
    assert a.summary["threads"] == 2
    assert a.summary["steps_from"] == ("inferred" if infer else "nvtx")
    if infer:
        assert a.summary["steps_inferred_by"] == "; ".join(
            f"thread python3 ({tid}): repeating sequence of 8 launches (100% the same), phase "
            "after cudaStreamSynchronize" for tid in (1001, 1002))


def test_function_trace_ranges_are_steps_numbered_within_their_thread(tmp_path):
    t = eager_loop()
    name = "transformers.models.gpt2.modeling_gpt2.GPT2LMHeadModel.forward"
    t.range(name, 100, 180)  # the prefill's forward
    for k in range(5):
        t.range(name, 1000 + 200 * k, 1000 + 200 * k + 75)
    (a,) = analyse(tmp_path, t, step_pattern=r"GPT2LMHeadModel\.forward$")
    assert list(a.steps["step"]) == [1, 2, 3, 4, 5, 6]
    assert a.summary["steps_from"] == "function"
    assert list(a.steps["period_ns"])[1:] == [900, 200, 200, 200, 200]


def test_a_kineto_trace_without_profiler_steps_gets_the_same_inferred_steps(tmp_path):
    k = from_synth(eager_loop())
    k.events.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": TID,
                     "args": {"name": f"thread {TID} (python3)"}})
    (a,) = analyze(load_trace(k.write(tmp_path / "t.json")))
    (b,) = analyse(tmp_path, eager_loop())
    assert a.summary["steps_from"] == "inferred"
    assert a.summary["steps_inferred_by"] == b.summary["steps_inferred_by"]
    columns = ["step", "cpu_start_ns", "cpu_end_ns", "ops", "gpu_start_ns", "gpu_end_ns",
               "period_ns"]
    assert a.steps[columns].equals(b.steps[columns])
    # Kineto's `thread 1001 (python3)` is the OS thread's name, as nsys records it.
    assert set(a.steps["thread"]) == {"python3"}
    k.range("ProfilerStep#4", 900, 2100)
    (p,) = analyze(load_trace(k.write(tmp_path / "u.json")))
    assert (list(p.steps["step"]), p.summary["steps_from"]) == ([4], "profiler_step")


def test_reports_show_threads_apart_and_where_the_steps_came_from(tmp_path):
    path = two_threads(infer=True).write(tmp_path / "two.sqlite")
    runner = CliRunner()
    text = runner.invoke(main, ["analyze", str(path)]).output.splitlines()
    assert text[1:5] == [
        "  steps from     inferred from the trace (no step ranges): thread python3 (1001): "
        "repeating sequence",
        "                 of 8 launches (100% the same), phase after cudaStreamSynchronize; "
        "thread python3",
        "                 (1002): repeating sequence of 8 launches (100% the same), phase after",
        "                 cudaStreamSynchronize; numbered 1–4 in order within their thread",
    ]
    # Medians of each thread's bubbles (test_two_threads_have_one_step_sequence_each): 112, 162;
    # a line a thread after the ten lines every report starts with.
    assert text[13:15] == [
        "  thread         python3 (1001): 4 steps, 0.00 ms period, 0.1 µs bubble (medians)",
        "  thread         python3 (1002): 4 steps, 0.00 ms period, 0.2 µs bubble (medians)",
    ]
    assert max(len(line) for line in text) <= 100
    md = runner.invoke(main, ["analyze", str(path), "--format", "md"]).output
    assert golden.row(md, "thread python3 (1002)") == [4, 0.0, 0.2]
    assert "| thread | step | ops |" in md
    csv = runner.invoke(main, ["analyze", str(path), "--format", "csv"]).output.splitlines()
    assert csv[0].startswith("step,name,cpu_start_ns,cpu_end_ns,cpu_ns,thread,ops,")
    assert csv[1].startswith("1,Step 1 (inferred),1000,1200,200,python3 (1001),8,")
    db = tmp_path / "runs.db"
    assert runner.invoke(main, ["db", "add", str(db), str(path)]).exit_code == 0
    for args in (["compare", str(path)], ["compare", "--db", str(db)]):
        rows = {line[:29].strip(): line[29:].strip()
                for line in runner.invoke(main, args).output.splitlines()}
        assert rows["steps from"] == "inferred"
        assert (rows["threads"], rows["period ms by thread"]) == ("2", "0.000 / 0.000")


def test_a_thread_copying_one_blocking_copy_after_another_has_no_steps(tmp_path):
    t = eager_loop()
    for j in range(12):  # a loading thread: each copy a blocking cudaMemcpy, one launch each
        t.launch(3000 + 10 * j, 3000 + 10 * j + 5, 3000 + 10 * j + 2, 3000 + 10 * j + 4,
                 api="cudaMemcpy_v3020", kind="memcpy", tid=TID + 1, stream=9)
    (a,) = analyse(tmp_path, t)
    assert a.summary["threads"] == 1 and list(a.steps["cpu_start_ns"]) == [
        1000, 1200, 1400, 1600, 1800]


def test_ops_without_launch_calls_give_nothing_to_infer_from(tmp_path):
    t = Synth()
    for j in range(10):
        t.op(100 + j, 10 * j, 10 * j + 5)  # no launch call recorded
    with pytest.raises(TraceError, match="no launch call of a GPU op recorded to infer steps "
                                         "from; profile with `nsys profile --trace=cuda,nvtx`"):
        analyse(tmp_path, t)


def test_a_layers_ops_repeating_within_a_step_do_not_make_the_step(tmp_path):
    # Ten layers of (gemm, act, norm) between embed and the sampling: the three ops repeat ten
    # times a step, but no stretch of them spans two steps; the step is the 33 launches.
    # No sync: the cut is at the 108 ns of Python before each embed (other gaps: 8 ns).
    step = ("embed", *("gemm", "act", "norm") * 10, "head", "argmax")
    t = Synth()
    for k in range(6):
        at = 430 * k
        for j, name in enumerate(step):
            t.launch(at + 10 * j, at + 10 * j + 2, at + 10 * j + 5, at + 10 * j + 8, name=name)
    (a,) = analyse(tmp_path, t)
    assert list(a.steps["cpu_start_ns"]) == [0, 430, 860, 1290, 1720, 2150]
    assert list(a.steps["ops"]) == [33] * 6
    assert a.summary["steps_inferred_by"] == (
        "repeating sequence of 33 launches (100% the same), phase at the largest host gap")


# --- a loop whose launches change with its shape -----------------------------------------------

# One layer of a no-KV loop, by regime as the sequence grows: cuBLAS's split-K on the down
# projection (and its reduce kernel) early, then a plain GEMM, then another GEMM for QKV and O,
# then attention split in two (its combine kernel).
LAYERS = {
    "splitk": ("norm", "gemm_a", "rope", "attn", "gemm_a", "add", "norm", "gemm_a", "act",
               "gemm_splitk", "splitk_reduce", "add"),
    "plain": ("norm", "gemm_a", "rope", "attn", "gemm_a", "add", "norm", "gemm_a", "act",
              "gemm_a", "add"),
    "wide": ("norm", "gemm_b", "rope", "attn", "gemm_b", "add", "norm", "gemm_a", "act",
             "gemm_a", "add"),
    "combine": ("norm", "gemm_b", "rope", "attn", "attn_combine", "gemm_b", "add", "norm",
                "gemm_a", "act", "gemm_a", "add"),
}


def growing_loop(regimes: list, sync: bool = True) -> Synth:
    """Set-up (3 launches) and a prefill (8, its sync), then a step per regime at 1000 + 400k:
    embed, two layers of that regime, softmax, multinomial, the copy, then the sync (launches
    10 ns apart; the sync 10 ns after the copy, 70 ns long); a launch after the loop.

    steps  splitk: 28 launches | plain: 26 | wide: 26 (4 GEMMs renamed) | combine: 28
    """
    t = Synth()
    for j in range(3):
        t.launch(10 * j, 10 * j + 2, 10 * j + 5, 10 * j + 8, name="init")
    launch_step(t, PREFILL, 100, sync=sync)
    for k, regime in enumerate(regimes):
        names = ("embed", *LAYERS[regime] * 2, "softmax", "multinomial", "[copy]")
        at = 1000 + 400 * k
        for j, name in enumerate(names):
            kind = "memcpy" if name == "[copy]" else "kernel"
            t.launch(at + 10 * j, at + 10 * j + 2, at + 10 * j + 5, at + 10 * j + 8, kind=kind,
                     name=name)
        if sync:
            t.call(SYNC, at + 10 * len(names) + 10, at + 10 * len(names) + 80)
    end = 1000 + 400 * len(regimes)
    t.launch(end, end + 2, end + 5, end + 8, name="post")
    return t


def test_a_loop_whose_kernels_change_with_the_step_gets_a_step_per_blocking_call(tmp_path):
    # No unit repeats 3 times position by position (each regime runs twice; the renamed GEMMs
    # are 4 of 26 positions): the steps are cut at each sync. Alike: 24/28 (split-K dropped),
    # 22/26 (GEMMs renamed), 26/28 (combine added), 100% within a regime.
    (a,) = analyse(tmp_path, growing_loop(["splitk"] * 2 + ["plain"] * 2 + ["wide"] * 2
                                          + ["combine"] * 2))
    s = a.steps
    assert list(s["step"]) == list(range(1, 9))
    assert list(s["cpu_start_ns"]) == [1000 + 400 * k for k in range(8)]
    assert list(s["cpu_end_ns"]) == [1000 + 400 * k for k in range(1, 9)]
    assert list(s["ops"]) == [28, 28, 26, 26, 26, 26, 28, 28]
    assert a.summary["steps_inferred_by"] == (
        "steps between blocking calls (each cudaStreamSynchronize): 26 to 28 launches, 85% or "
        "more of each step's ops alike the next's")
    # Set-up (3), prefill (8) and the launch after the loop: outside the steps.
    assert a.summary["unattributed_ops"] == 12


def test_the_steps_between_blocking_calls_win_where_a_repeating_unit_holds_a_stretch(tmp_path):
    # A unit of 26 launches repeats over the `plain` and `wide` steps, in 2 stretches (6 steps,
    # 156 of 336 launches); the steps between syncs hold 324, over 1.5 times as many.
    t = growing_loop(["splitk"] * 2 + ["plain"] * 4 + ["wide"] * 2 + ["combine"] * 4)
    trace = load_trace(t.write(tmp_path / "g.sqlite"))
    launches = launch_table(trace.ops, trace.graph_launches)
    unit, _ = sequence_steps(launches, trace.blocking.sort_values("start"))
    assert (len(unit), int((unit[:, 1] - unit[:, 0]).sum())) == (6, 156)
    (a,) = analyze(trace)
    assert list(a.steps["cpu_start_ns"]) == [1000 + 400 * k for k in range(12)]
    assert a.summary["steps_inferred_by"].startswith("steps between blocking calls")


def test_without_a_blocking_call_the_steps_run_from_one_launch_of_an_op_to_the_next(tmp_path):
    # embed, softmax, multinomial and the copy are launched once a step, evenly; embed comes
    # after the host's longest wait (the loop's own Python, ~120 ns against 8): the steps start
    # there. The last step has no embed after it: it is in no step.
    t = growing_loop(["splitk"] * 2 + ["plain"] * 2 + ["wide"] * 2 + ["combine"] * 2, sync=False)
    (a,) = analyse(tmp_path, t)
    assert list(a.steps["cpu_start_ns"]) == [1000 + 400 * k for k in range(7)]
    assert list(a.steps["ops"]) == [28, 28, 26, 26, 26, 26, 28]
    assert a.summary["steps_inferred_by"] == (
        "steps from one launch of embed to the next (no blocking call): 26 to 28 launches, 85% "
        "or more of each step's ops alike the next's")


def test_random_kernels_between_syncs_are_no_steps(tmp_path):
    rng = random.Random(3)
    t = Synth()
    for j in range(300):
        t.launch(10 * j, 10 * j + 2, 10 * j + 5, 10 * j + 8, name=f"k{rng.randrange(60)}")
        if j % 10 == 9:
            t.call(SYNC, 10 * j + 3, 10 * j + 9)
    with pytest.raises(TraceError, match="no 3 steps in a row between blocking calls with 75% "
                                         "of their ops alike over 25% of the launches"):
        analyse(tmp_path, t)
