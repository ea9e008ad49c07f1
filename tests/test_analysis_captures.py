"""The study's ten real H200 captures (tests/data/runs/, see tests/data/README.md): nsys's own
projection, the ledger, and the facts that tell the variants apart, each read off the SQLite
export directly as well."""

import hashlib
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from analysis.measures.gaps import LEDGER_COLUMNS
from analysis.measures.steps import INFER
from analysis.measures.summary import Options, analyze
from analysis.readers import compressed, load_trace

RUNS = Path(__file__).parent / "data" / "runs"
EXPECTED = Path(__file__).parent / "data" / "expected" / "runs"
STEPS = list(range(31, 51))

# Per step: kernels, op records (kernels, copies, sets), launch calls (nsys's NumGPUOps: a graph
# launch once). Then the streams that ran kernels, window_ns, busy_ns, gaps, and the median
# stop-check cover (None: no check ranges). Window and busy were also worked out by hand from the
# export (a plain union of the op rows, the window from nsys's projection), the cover likewise.
FACTS = {
    "static": (330, 380, 380, 1, 164938347, 29057855, 7599, 0.04597031084091524),
    "pipelined-seed": (330, 380, 380, 2, 275436221, 28940468, 7599, 0.0),
    "compiled": (185, 199, 199, 1, 82324461, 20190616, 3979, 0.04929231593516989),
    "pipelined": (330, 380, 380, 2, 163783612, 29089208, 7599, 0.0),
    "pipelined-compile": (185, 199, 199, 2, 72740892, 20270468, 3979, 0.0),
    "nocheck": (330, 379, 379, 1, 168002745, 28987278, 7579, None),
    "graphed-sync": (234, 284, 2, 1, 30640748, 23219024, 5679, 0.7949425328582929),
    "graphed": (234, 284, 2, 1, 28726353, 23231540, 5679, 0.8103770276387856),
    "fused": (161, 163, 2, 1, 13257017, 12649307, 3239, 0.9462396893687076),
    "fused-b2": (311, 313, 2, 2, 17330991, 16896687, 646, 0.9629939516444299),
}
GRAPHED = ("graphed-sync", "graphed")
# A graph launch: (kernels in the capture, steps) and the op records of one launch call.
GRAPH_LAUNCHES = {"graphed-sync": ((4680, 20), 283), "graphed": ((4680, 20), 283),
                  "fused": ((3220, 20), 162), "fused-b2": ((6220, 20), 312)}
DEFERRED = ("graphed", "fused", "fused-b2")  # a graph, the flag read one step late


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def nsys_steps(csv: Path) -> pd.DataFrame:
    """The `Step N` rows of an `nvtx_gpu_proj_trace` CSV with `step` = N (nsys 2025.3 writes
    `:Step N`, domain first; 2024.2, which made these, `Step N`)."""
    nsys = pd.read_csv(csv)
    step = nsys["Name"].str.extract(r"^(?:[^:]*:)?Step (\d+)$")[0]
    return nsys[step.notna()].assign(step=step.dropna().astype(int))


def query(name: str, sql: str) -> list:
    export = compressed.plain(RUNS / name / "capture.sqlite.xz")
    con = sqlite3.connect(f"{export.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module", params=sorted(FACTS))
def run(request):
    path = RUNS / request.param / "capture.sqlite.xz"
    before = sha256(path)
    trace = load_trace(path)
    (a,) = analyze(trace)
    assert sha256(path) == before
    read = compressed.plain(path)  # the decompressed copy SQLite opened
    assert not list(read.parent.glob(read.name + "-*")), "no -journal/-wal/-shm files"
    return request.param, trace, a


def test_ops_per_step_equal_nsys_projection(run):
    name, _, a = run
    merged = a.steps.merge(nsys_steps(EXPECTED / f"{name}_nvtx_gpu_proj_trace.csv"), on="step",
                           validate="one_to_one")
    assert list(merged["step"]) == STEPS
    assert (merged["ops"] == merged["NumGPUOps"]).all()
    assert (merged["gpu_start_ns"] == merged["Projected Start (ns)"]).all()
    assert (merged["span_ns"] == merged["Projected Duration (ns)"]).all()
    assert (merged["cpu_start_ns"] == merged["Orig Start (ns)"]).all()
    assert (merged["cpu_ns"] == merged["Orig Duration (ns)"]).all()


def test_ledger_causes_and_periods_add_up_to_idle_exactly(run):
    _, _, a = run
    gaps, steps, s = a.gaps, a.steps, a.summary
    assert s["idle_ns"] == s["window_ns"] - s["busy_ns"]
    assert (gaps[list(LEDGER_COLUMNS)].sum(axis=1) == gaps["gap_ns"]).all()
    assert sum(s["idle_ledger"].values()) == s["idle_ns"]
    assert sum(s["idle_ns_by_cause"].values()) == s["idle_ns"]
    assert gaps["gap_ns"].sum() == s["idle_ns"]
    assert steps[list(LEDGER_COLUMNS)].sum().sum() == s["idle_ns"]
    assert steps["period_ns"].sum() == s["window_ns"]
    assert (steps["busy_ns"] + steps["intra_idle_ns"] == steps["span_ns"]).all()
    assert s["unattributed_ops"] == 0 and s["ops_without_launch_call"] == 0


def test_per_run_facts_come_out_exactly(run):
    name, trace, a = run
    kernels, records, ops, _, window, busy, gaps, cover = FACTS[name]
    s = a.summary
    assert s["steps"] == 20 and list(a.steps["step"]) == STEPS
    ours = a.ops[a.ops["kind"] == "kernel"].groupby("step").size()
    assert (ours == kernels).all() and len(ours) == 20
    assert query(name, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL") == [(20 * kernels,)]
    assert (a.steps["op_records"] == records).all()
    assert (a.steps["ops"] == ops).all()
    assert (s["window_ns"], s["busy_ns"], s["gaps"]) == (window, busy, gaps)
    nsys = nsys_steps(EXPECTED / f"{name}_nvtx_gpu_proj_trace.csv")
    end = nsys["Projected Start (ns)"] + nsys["Projected Duration (ns)"]
    assert window == end.max() - nsys["Projected Start (ns)"].min()
    assert s["check_cover_median"] == cover
    assert len(a.checks) == (0 if cover is None else 20 if name in DEFERRED else 19)


def test_pipelined_variants_run_kernels_on_two_streams_in_turn(run):
    name, _, a = run
    streams = FACTS[name][3]
    kernels = query(name, "SELECT streamId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                          "GROUP BY streamId")
    assert set(a.streams["stream"]) == {stream for stream, _ in kernels}
    assert a.summary["streams"] == streams
    if name == "fused-b2":
        # Two micro-batches side by side in one graph: the capture stream (its half and the
        # step's bookkeeping, 161 kernels a step) and a branch stream (150), overlapping for
        # 13.89 of the 17.33 ms window.
        assert sorted(count for _, count in kernels) == [20 * 150, 20 * 161]
        assert a.summary["concurrent_ns"] == 13886584
        return
    assert len(kernels) == streams == (2 if name.startswith("pipelined") else 1)
    assert len({count for _, count in kernels}) == 1  # 10 steps each
    assert a.summary["concurrent_ns"] == 0  # a ping-pong, never an overlap: each step waits


GRAPH_KERNELS_SQL = """
SELECT count(*), count(DISTINCT k.correlationId) FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.correlationId = k.correlationId
JOIN StringIds AS s ON s.id = r.nameId WHERE s.value LIKE 'cudaGraphLaunch%'
"""


def test_graphed_kernels_share_their_graph_launch_correlation_id(run):
    name, _, a = run
    launches, records = GRAPH_LAUNCHES.get(name, ((0, 0), None))
    assert query(name, GRAPH_KERNELS_SQL) == [launches]
    if records:
        # A step: one cudaGraphLaunch (graphed: 234 kernels, 36 memsets and 13 device-to-device
        # copies; fused: 161 kernels and one copy), then the flag's copy to the host, a call of
        # its own.
        per_call = a.ops[a.ops["step"] >= 0].groupby("corr").size()
        assert sorted(per_call.value_counts().items()) == [(1, 20), (records, 20)]


def test_graphed_deferred_check_leaves_each_step_gpu_work_running_past_its_range(run):
    name, _, a = run
    outlives = int((a.steps["gpu_end_ns"] > a.steps["cpu_end_ns"]).sum())
    # The stop-check cover hardly tells the two graphed variants apart (0.79 and 0.81): in
    # graphed-sync the check's blocking copy waits while its own replay runs. Where the GPU work
    # ends does: graphed reads the previous step's flag and moves on.
    assert outlives == (20 if name in DEFERRED else 0)


SYNC_NS = {
    "static": 1144354, "pipelined-seed": 0, "compiled": 9056497, "pipelined": 0,
    "pipelined-compile": 0, "nocheck": 0, "graphed-sync": 1764189, "graphed": 0, "fused": 0,
    "fused-b2": 0,
}
@pytest.mark.parametrize("name", sorted(SYNC_NS))
def test_idle_of_cause_sync_only_where_the_host_blocks_before_the_drain(name):
    (a,) = analyze(load_trace(RUNS / name / "capture.sqlite.xz"))
    assert a.summary["idle_ns_by_cause"]["sync"] == SYNC_NS[name]


def test_node_level_captures_say_node_where_a_graph_launch_made_the_ops(run):
    # profile.sh captures with --cuda-graph-trace=node: no graph rows, and every op of a graphed
    # step but the check's own copy came from a cudaGraphLaunch (its correlation id).
    name, _, a = run
    s = a.summary
    assert s["graph_executions"] == 0
    if name in GRAPH_LAUNCHES:
        assert s["cuda_graph_trace"] == "node"
        assert s["graph_node_ops"] == GRAPH_LAUNCHES[name][1] * len(STEPS)
    else:
        assert (s["cuda_graph_trace"], s["graph_node_ops"]) == ("none", 0)


# What the inference keys on in each capture, with its ranges set aside (METRICS.md, "Inferred
# steps"): its sync (stream, or the event the ping-pong waits on), else the largest host gap;
# one launch of the step's graph.
INFERRED_BY = {
    "static": "380 launches (100% the same), phase after cudaStreamSynchronize",
    "pipelined-seed": "380 launches (100% the same), phase at the largest host gap",
    "compiled": "199 launches (100% the same), phase after cudaStreamSynchronize",
    "pipelined": "380 launches (100% the same), phase after cudaEventSynchronize",
    "pipelined-compile": "199 launches (100% the same), phase after cudaEventSynchronize",
    "nocheck": "379 launches (100% the same), phase at the largest host gap",
    "graphed-sync": "graph launch (283 nodes)",
    "graphed": "graph launch (283 nodes)",
    "fused": "graph launch (162 nodes)",
    "fused-b2": "graph launch (312 nodes)",
}


def test_steps_inferred_without_the_ranges_are_the_nvtx_steps(run):
    name, trace, a = run
    (i,) = analyze(trace, Options(step_pattern=INFER))
    s = i.summary
    how = INFERRED_BY[name]
    assert s["steps_inferred_by"] == (how if how.startswith("graph")
                                      else f"repeating sequence of {how}")
    if name == "nocheck":
        # No sync: cut at the largest host gap, one launch after the loop's own step begins,
        # so the capture's first and last partial units are left out.
        assert (s["steps"], s["period_ns_median"]) == (19, 7809069)
        assert a.summary["period_ns_median"] == 7815085
        return
    assert s["steps"] == 20 and list(i.steps["ops"]) == list(a.steps["ops"])
    columns = ["gpu_start_ns", "gpu_end_ns", "busy_ns", "period_ns", "bubble_ns"]
    assert i.steps[columns].equals(a.steps[columns])
