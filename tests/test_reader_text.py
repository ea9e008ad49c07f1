"""The nsys reader of big exports (as text, a column at a time, in a second thread) reads what
the row-by-row one reads; a lookup call beside a launch is never taken for the launch."""

import pandas as pd
import pytest
from synth import Synth

from analysis.readers import nsys_ops
from analysis.readers.nsys import load_trace


def lookup_trace() -> Synth:
    """Two launches on two devices, a memset and a copy; the first launch's correlation id is
    also a cuKernelGetName's that started before it (a lookup: never an op's launch)."""
    t = Synth()
    t.range("Step 1", 0, 100)
    first = t.launch(10, 15, 20, 30, name="k1")
    t.call("cuKernelGetName", 5, 6, corr=first)
    t.call("cudaStreamIsCapturing_v10000", 16, 17)
    t.launch(31, 35, 40, 50, name="k2", device=1)
    t.launch(51, 55, 60, 62, api="cudaMemsetAsync_v3020", kind="memset")
    t.launch(63, 66, 70, 75, api="cudaMemcpyAsync_v3020", kind="memcpy")
    return t


@pytest.mark.parametrize("parallel_min_ops", [nsys_ops.PARALLEL_MIN_OPS, 0])
def test_a_lookup_sharing_a_launchs_id_is_not_its_launch(tmp_path, parallel_min_ops):
    ops = load_trace(lookup_trace().write(tmp_path / "t.sqlite"), parallel_min_ops).ops
    assert ops[["start", "device", "kind", "call_start", "call_end"]].values.tolist() == [
        [20, 0, 0, 10, 15], [40, 1, 0, 31, 35], [70, 0, 1, 63, 66], [60, 0, 2, 51, 55]]


def test_the_text_reader_in_chunks_reads_the_rows_in_order(tmp_path, monkeypatch):
    path = lookup_trace().write(tmp_path / "t.sqlite")
    serial = load_trace(path).ops
    monkeypatch.setattr(nsys_ops, "TEXT_CHUNK_ROWS", 1)
    pd.testing.assert_frame_equal(serial, load_trace(path, parallel_min_ops=0).ops)


def test_an_export_without_lookups_still_finds_every_launch(tmp_path):
    t = Synth()
    t.range("Step 1", 0, 100)
    t.launch(10, 15, 20, 30)
    for parallel_min_ops in (nsys_ops.PARALLEL_MIN_OPS, 0):
        ops = load_trace(t.write(tmp_path / f"t{parallel_min_ops}.sqlite"), parallel_min_ops).ops
        assert ops["call_start"].tolist() == [10]
