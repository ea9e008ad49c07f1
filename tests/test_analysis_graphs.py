"""CUDA graphs as nsys records them: whole executions (`CUPTI_ACTIVITY_KIND_GRAPH_TRACE`, the
default `--cuda-graph-trace=graph`) are GPU ops like kernels; node-level graph kernels are told
apart by their launch call. Hand-worked synthetic exports (tests/synth.py), and one real
graph-level capture."""

from pathlib import Path

from synth import GRAPH_LAUNCH, Synth, causes_trace

from analysis.measures.summary import analyze
from analysis.readers import load_trace
from analysis.readers.trace import GRAPH
from analysis.render.report import to_markdown, to_text

GRAPH_LEVEL_RUN = Path(__file__).parent / "data" / "runs" / "graphed-sync-graphlevel"


def analyse(tmp_path, synth: Synth):
    return analyze(load_trace(synth.write(tmp_path / "t.sqlite")))


def graph_only() -> Synth:
    """Three steps, one graph execution each, no kernel table at all; a sync in step 1:

    time    0    10   20   30   40   50   60   70   80   90   100  110  120  130
    steps   [Step 1 ...........][Step 2 ...................][Step 3 ..........]
    calls    [gl]     [sync 20-38]  [gl]                       [gl]
    graphs        [G 10-35 .....]     [G 50-80 .......]             [G 100-120]
    """
    t = Synth()
    t.range("Step 1", 0, 40)
    t.range("Step 2", 40, 90)
    t.range("Step 3", 90, 130)
    t.launch(2, 6, 10, 35, api=GRAPH_LAUNCH, kind="graph")
    t.call("cudaStreamSynchronize_v3020", 20, 38)
    t.launch(42, 46, 50, 80, api=GRAPH_LAUNCH, kind="graph")
    t.launch(92, 96, 100, 120, api=GRAPH_LAUNCH, kind="graph")
    return t


def test_a_graph_only_capture_loads_and_its_graphs_are_the_ops(tmp_path):
    trace = load_trace(graph_only().write(tmp_path / "t.sqlite"))
    assert list(trace.ops["kind"]) == [GRAPH] * 3
    assert list(trace.ops["name_id"]) == [1, 1, 1]  # the graph exec id
    (a,) = analyze(trace)
    s = a.summary
    # Window 10-120; busy 25 + 30 + 20; the gaps 35-50 and 80-100.
    assert (s["window_ns"], s["busy_ns"], s["idle_ns"], s["gaps"]) == (110, 75, 35, 2)
    assert list(a.gaps["cause"]) == ["sync", "host"]
    # 35-50: the host was in the sync until 38 (wait 3), busy until the launch at 42 (host 4),
    # launch 42-50; 80-100: host until the launch at 92, then 8 of launch.
    assert list(a.gaps["idle_blocked_ns"]) == [3, 0]
    assert list(a.gaps["idle_pre_launch_ns"]) == [4, 12]
    assert list(a.gaps["idle_in_launch_ns"]) == [8, 8]
    assert list(a.gaps["next_op"]) == ["[graph]", "[graph]"]
    assert list(a.steps["ops"]) == [1, 1, 1] and list(a.steps["op_records"]) == [1, 1, 1]
    assert list(a.steps["busy_ns"]) == [25, 30, 20]
    assert list(a.steps["period_ns"]) == [25, 45, 40]
    assert a.steps["bubble_ns"].isna()[0] and list(a.steps["bubble_ns"][1:]) == [15, 20]
    assert s["bubble_ns_median"] == 17.5
    assert s["idle_ns_by_cause"] == {"sync": 15, "host": 20, "queued": 0, "unknown": 0}
    assert s["sync_idle_share_of_window"] == 15 / 110
    assert (s["cuda_graph_trace"], s["graph_executions"], s["graph_execs"],
            s["graph_node_ops"]) == ("graph", 3, 1, 0)


def test_a_graph_level_capture_says_gaps_inside_graphs_are_not_visible(tmp_path):
    analyses = analyse(tmp_path, graph_only())
    text = to_text("g", analyses, "3.20.3")
    note = ("  CUDA graphs    graph: gaps inside a graph are not visible; "
            "--cuda-graph-trace=node shows them")
    assert note in text.splitlines()
    assert max(len(line) for line in text.splitlines()) <= 100
    md = to_markdown("g", analyses)
    assert "| CUDA graph trace | graph |" in md
    assert ("CUDA graphs, graph: gaps inside a graph are not visible; "
            "--cuda-graph-trace=node shows them.") in md


def mixed() -> Synth:
    """Step 1: a graph recorded whole (10-30) and an eager copy (32-34); step 2: a graph
    recorded node by node, two kernels of one cudaGraphLaunch (60-70, 72-80)."""
    t = Synth()
    t.range("Step 1", 0, 50)
    t.range("Step 2", 50, 100)
    t.launch(2, 5, 10, 30, api=GRAPH_LAUNCH, kind="graph", graph=4)
    t.launch(6, 8, 32, 34, api="cudaMemcpyAsync_v3020", kind="memcpy")
    corr = t.call(GRAPH_LAUNCH, 52, 55)
    t.op(corr, 60, 70, name="node_a")
    t.op(corr, 72, 80, name="node_b")
    return t


def test_graph_rows_and_node_kernels_together_are_mixed(tmp_path):
    (a,) = analyse(tmp_path, mixed())
    s = a.summary
    assert (s["window_ns"], s["busy_ns"]) == (70, 40)
    assert list(a.gaps["start_ns"]) == [30, 34, 70] and list(a.gaps["end_ns"]) == [32, 60, 72]
    assert list(a.gaps["cause"]) == ["queued", "host", "queued"]
    assert list(a.gaps["next_op"]) == ["[memcpy]", "node_a", "node_b"]
    # One launch call per op in step 1; step 2's graph launch once, its two kernels twice.
    assert list(a.steps["ops"]) == [2, 1] and list(a.steps["op_records"]) == [2, 2]
    assert list(a.steps["bubble_ns"][1:]) == [26]
    assert (s["cuda_graph_trace"], s["graph_executions"], s["graph_execs"],
            s["graph_node_ops"]) == ("mixed", 1, 1, 2)
    assert "CUDA graphs    mixed: gaps inside some graphs" in to_text("m", [a], "3.20.3")


def test_eager_ops_beside_graph_rows_are_graph_level_and_node_kernels_alone_are_node(tmp_path):
    t = mixed()
    t.ops["kernel"] = []  # step 2's graph gone: a graph row and an eager copy
    (a,) = analyse(tmp_path, t)
    assert (a.summary["cuda_graph_trace"], a.summary["graph_node_ops"]) == ("graph", 0)
    t = mixed()
    t.ops["graph"] = []
    (b,) = analyze(load_trace(t.write(tmp_path / "node.sqlite")))
    assert (b.summary["cuda_graph_trace"], b.summary["graph_node_ops"]) == ("node", 2)
    assert "CUDA graphs" not in to_text("n", [b], "3.20.3")
    (c,) = analyze(load_trace(causes_trace().write(tmp_path / "eager.sqlite")))
    assert (c.summary["cuda_graph_trace"], c.summary["graph_executions"]) == ("none", 0)


def test_graphs_on_two_streams_overlap_like_kernels(tmp_path):
    # The ping-pong replayed as graphs: exec 1 on stream 7, exec 2 on stream 9, then exec 1.
    t = Synth()
    t.range("Step 1", 0, 40)
    t.range("Step 2", 40, 80)
    t.range("Step 3", 80, 120)
    t.launch(1, 3, 10, 50, api=GRAPH_LAUNCH, kind="graph", graph=1, stream=7)
    t.launch(41, 43, 45, 70, api=GRAPH_LAUNCH, kind="graph", graph=2, stream=9)
    t.launch(81, 83, 90, 110, api=GRAPH_LAUNCH, kind="graph", graph=1, stream=7)
    (a,) = analyse(tmp_path, t)
    s = a.summary
    assert (s["window_ns"], s["busy_ns"], s["concurrent_ns"], s["streams"]) == (100, 80, 5, 2)
    assert a.streams.to_dict("list") == {"stream": [7, 9], "ops": [2, 1], "busy_ns": [60, 25]}
    assert a.pairs.to_dict("records") == [{"stream_a": 7, "stream_b": 9, "concurrent_ns": 5}]
    assert list(a.steps["overlap_ns"][1:]) == [5, 0]
    assert list(a.steps["bubble_ns"][1:]) == [0, 20]
    assert list(a.steps["period_ns"]) == [40, 20, 40]
    assert list(a.gaps["cause"]) == ["host"] and list(a.gaps["idle_in_launch_ns"]) == [9]
    assert (s["graph_executions"], s["graph_execs"]) == (3, 2)


def test_a_real_graph_level_capture_reads_its_graph_executions():
    trace = load_trace(GRAPH_LEVEL_RUN / "capture.sqlite.xz")
    (a,) = analyze(trace)
    s = a.summary
    # graphed-sync at batch 8, window 30:40: one graph replay and the .item() copy a step,
    # the replay recorded whole, no kernel rows (numbers read back from the export by sqlite).
    assert s["steps"] == 10
    assert (s["cuda_graph_trace"], s["graph_executions"], s["graph_node_ops"]) == ("graph", 10, 0)
    step_ops = a.ops[a.ops["step"] >= 0]
    assert (step_ops[step_ops["kind"] == "graph"].groupby("step").size() == 1).all()
    assert list(a.steps["ops"]) == [2] * 10
    # The graphs cover 96.8% of the window (the bug this fixes read "GPU busy 0.1%").
    assert (s["window_ns"], s["busy_ns"], s["gaps"]) == (11820050, 11447603, 19)
    assert s["idle_ns_by_cause"] == {"sync": 316896, "host": 0, "queued": 55551, "unknown": 0}
    assert s["bubble_ns_median"] == 30432
    assert "  CUDA graphs    graph: gaps inside a graph are not visible" in to_text("g", [a], "")


def test_a_graph_launch_of_another_process_with_the_same_id_makes_no_node(tmp_path):
    # Correlation ids are per process: process 2000's cudaGraphLaunch #5 did not launch
    # process 1000's kernel #5.
    t = Synth()
    t.range("Step 1", 0, 50)
    t.call("cudaLaunchKernel_v7000", 2, 4, corr=5)
    t.op(5, 10, 20)
    t.call(GRAPH_LAUNCH, 1, 3, pid=2000, tid=2001, corr=5)
    (a,) = analyse(tmp_path, t)
    assert (a.summary["cuda_graph_trace"], a.summary["graph_node_ops"]) == ("none", 0)
