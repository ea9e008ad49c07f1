"""METRICS.md's reference values on the two bundled H200 exports, and nsys's own projection."""

import hashlib
import re
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from synth import Synth

from analysis.errors import TraceError
from analysis.measures.gaps import LEDGER_COLUMNS
from analysis.measures.summary import analyze
from analysis.readers import compressed, load_trace, nsys, nsys_ops

DATA_DIR = Path(__file__).parent / "data"

# trace: steps, window_ns, busy_ns, bubble median, (sync, host, queued), (wait, host, launch), gaps
REFERENCE = {
    "h200-eager-static-bs16": (20, 180644905, 23864070, 189086, (3578243, 147906023, 5296569),
                               (189854, 98546154, 58044827), 7839),
    "h200-eager-pipelined-seed-bs16": (20, 158190894, 23918543, 282878, (0, 129026947, 5245404),
                                       (0, 79689655, 54582696), 7839),
}


@pytest.fixture(scope="module", params=sorted(REFERENCE))
def reference(request):
    path = DATA_DIR / f"{request.param}.sqlite.xz"
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    analyses = analyze(load_trace(path))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    read = compressed.plain(path)  # the decompressed copy SQLite opened
    assert not list(read.parent.glob(read.name + "-*")), "no -journal/-wal/-shm files"
    return request.param, analyses


def test_reference_values_come_out_exactly(reference):
    name, analyses = reference
    assert [a.device for a in analyses] == [0]
    s = analyses[0].summary
    steps, window, busy, bubble, causes, ledger, gaps = REFERENCE[name]
    assert s["steps"] == steps
    assert s["window_ns"] == window
    assert s["busy_ns"] == busy
    assert s["idle_ns"] == window - busy
    assert s["bubble_ns_median"] == bubble
    assert s["idle_ns_by_cause"] == dict(zip(("sync", "host", "queued"), causes, strict=True)) | {
        "unknown": 0}
    assert s["idle_ledger"] == dict(zip(("blocked", "pre_launch", "in_launch"), ledger,
                                        strict=True))
    assert s["gaps"] == gaps
    assert s["unattributed_ops"] == 0


def test_gaps_ledger_and_steps_add_up_on_real_traces(reference):
    _, (a,) = reference
    gaps, steps, s = a.gaps, a.steps, a.summary
    assert (gaps[list(LEDGER_COLUMNS)].sum(axis=1) == gaps["gap_ns"]).all()
    assert gaps.groupby("cause", observed=True)["gap_ns"].sum().sum() == s["idle_ns"]
    assert steps["period_ns"].sum() == s["window_ns"]
    idle = steps[["idle_blocked_ns", "idle_pre_launch_ns", "idle_in_launch_ns"]].sum().sum()
    assert idle == s["idle_ns"]
    assert (steps["busy_ns"] + steps["intra_idle_ns"] == steps["span_ns"]).all()
    assert s["sync_idle_share_of_window"] == s["idle_ns_by_cause"]["sync"] / s["window_ns"]


def test_two_stream_trace_streams_and_checks(reference):
    name, (a,) = reference
    if name == "h200-eager-static-bs16":
        assert a.streams.to_dict("list") == {"stream": [7], "ops": [7840], "busy_ns": [23864070]}
        assert a.pairs.empty and len(a.checks) == 19
    else:
        assert list(a.streams["stream"]) == [21, 25] and list(a.streams["ops"]) == [3920, 3920]
        assert a.streams["busy_ns"].sum() == a.summary["busy_ns"]  # the streams never overlap
        assert a.pairs["concurrent_ns"].tolist() == [0]
        assert a.summary["check_cover_median"] == 0.0


def test_ops_per_step_equal_nsys_projection(reference):
    name, (a,) = reference
    nsys = pd.read_csv(DATA_DIR / "expected" / f"{name}_nvtx_gpu_proj_trace.csv")
    nsys = nsys[nsys["Name"].str.match(r"^Step \d+$")].copy()
    nsys["step"] = nsys["Name"].map(lambda n: int(re.match(r"Step (\d+)", n).group(1)))
    merged = a.steps.merge(nsys, on="step", validate="one_to_one")
    assert len(merged) == 20
    assert (merged["ops"] == merged["NumGPUOps"]).all()
    assert (merged["gpu_start_ns"] == merged["Projected Start (ns)"]).all()
    assert (merged["span_ns"] == merged["Projected Duration (ns)"]).all()
    assert (merged["cpu_start_ns"] == merged["Orig Start (ns)"]).all()
    assert (merged["cpu_ns"] == merged["Orig Duration (ns)"]).all()


def test_reading_ops_in_a_second_thread_gives_the_same_trace(monkeypatch):
    path = DATA_DIR / "h200-eager-pipelined-seed-bs16.sqlite.xz"
    serial = load_trace(path)
    threaded = load_trace(path, parallel_min_ops=0)
    pd.testing.assert_frame_equal(serial.ops, threaded.ops)
    # As text in chunks of 1000 rows (7840 ops: the last chunk part full), joined in order.
    monkeypatch.setattr(nsys_ops, "TEXT_CHUNK_ROWS", 1000)
    pd.testing.assert_frame_equal(serial.ops, load_trace(path, parallel_min_ops=0).ops)
    assert len(serial.ops) == 7840 and (serial.ops["call_start"] >= 0).all()


def test_a_value_nsys_never_writes_is_one_line_either_way(tmp_path):
    t = Synth()
    t.range("Step 1", 0, 100)
    t.launch(1, 2, 3, 4)
    path = t.write(tmp_path / "bad.sqlite")
    with sqlite3.connect(path) as con:
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'x'")
    for parallel_min_ops in (nsys.PARALLEL_MIN_OPS, 0):
        with pytest.raises(TraceError, match="unreadable SQLite .unexpected value in "):
            load_trace(path, parallel_min_ops=parallel_min_ops)
