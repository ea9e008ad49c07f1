"""analysis/measures/ranks.py on hand-built per-rank captures (tests/synth.py, rank_traces
draws them)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from synth import ALL_REDUCE, rank_traces

from analysis.errors import TraceError
from analysis.measures.ranks import align, collective_waits, collectives, rank_table, slowest_ranks
from analysis.measures.summary import analyze
from analysis.readers import load_trace
from analysis.readers.nsys import read_session_start_ns

ROOT = Path(__file__).resolve().parent.parent


def analyse(tmp_path, traces):
    """Per rank: (DeviceAnalysis, its collectives on rank 0's time base)."""
    out, starts = [], []
    for r, synth in enumerate(traces):
        path = synth.write(tmp_path / f"capture_{r}.sqlite")
        trace = load_trace(path)
        (a,) = analyze(trace)
        out.append((a, collectives(a.ops, trace.strings, a.steps)))
        starts.append(read_session_start_ns(path))
    aligned = align([c for _, c in out], starts)
    return [(a, c) for (a, _), c in zip(out, aligned, strict=True)]


@pytest.fixture
def ranks(tmp_path):
    return analyse(tmp_path, rank_traces())


def test_collectives_are_the_nccl_kernels_in_order_within_each_step(ranks):
    coll = ranks[0][1]
    assert coll.values.tolist() == [[1, 0, 30, 80], [2, 0, 120, 150], [2, 1, 155, 170]]
    assert "AllReduce" in ALL_REDUCE


def test_the_slowest_rank_has_the_largest_gpu_period(ranks):
    # Periods: rank 0 step 1 is 80 - 10 (the window's start) = 70, step 2 170 - 80 = 90;
    # rank 1 82 - 10 = 72, then 175 - 82 = 93.
    table = slowest_ranks([a.steps for a, _ in ranks])
    assert table.values.tolist() == [[1, 1, 72, 70, 2], [2, 1, 93, 90, 3]]


def test_the_spread_of_a_collectives_start_is_the_wait_for_the_last_rank(ranks):
    # Step 1: rank 0 entered at 30, rank 1 at 50: rank 0 waited 20 for rank 1. Step 2: 120 vs
    # 140 (20, for rank 1), then 155 vs 150 (rank 1 waited 5 for rank 0).
    # They ended at 80 and 82, 150 and 150, 170 and 175: a time base true to 5 ns.
    waits = collective_waits([c for _, c in ranks])
    assert waits.values.tolist() == [[1, 0, 1, 20, 20, 2], [2, 0, 1, 20, 20, 0],
                                     [2, 1, 0, 5, 5, 5]]
    table = rank_table([a.steps for a, _ in ranks], [c for _, c in ranks])
    assert table[["step", "collectives", "collective_wait_ns"]].values.tolist() == [
        [1, 1, 20], [2, 2, 25]]
    assert table["waited_rank"].tolist() == [1, 1]  # step 2's widest collective waited for 1


def test_ranks_that_ran_different_collectives_are_refused_in_one_line(tmp_path):
    traces = rank_traces()
    traces[1].launch(160, 161, 176, 180, name=ALL_REDUCE)  # a third all-reduce in step 2
    ranks = analyse(tmp_path, traces)
    with pytest.raises(TraceError, match=r"step 2: the ranks ran \[2, 3\] collectives"):
        collective_waits([c for _, c in ranks])


def test_a_rank_captured_earlier_is_put_on_rank_0s_time_base(tmp_path, ranks):
    # Rank 1's nsys started 1000 ns earlier: its export says 1000 ns more for every time.
    (tmp_path / "early").mkdir()
    late = analyse(tmp_path / "early", rank_traces(early_ns=1000))
    assert late[1][0].steps["gpu_start_ns"].tolist() == [1010, 1100]  # its own base
    assert late[1][1].equals(ranks[1][1])
    assert collective_waits([c for _, c in late]).equals(collective_waits([c for _, c in ranks]))


def test_the_ranks_script_prints_the_table_and_refuses_a_directory_without_captures(tmp_path,
                                                                                   capsys):
    from scripts import ranks

    for r, synth in enumerate(rank_traces(early_ns=1000)):
        synth.write(tmp_path / f"capture_{r}.sqlite")
    assert ranks.main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[6].split() == ["2", "1", "0.1", "0.1", "2", "0.0", "1"]  # ns print as 0.1 µs
    assert max(len(line) for line in lines) <= 100
    (tmp_path / "empty").mkdir()
    assert ranks.main([str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err == (
        f"gapscope: error: {tmp_path / 'empty'}: no capture_0.sqlite, capture_1.sqlite, ... "
        "(profile-tp.sh)\n")


def test_the_ranks_module_runs_from_the_repository_root(tmp_path):
    done = subprocess.run([sys.executable, "-m", "scripts.ranks"], cwd=ROOT, capture_output=True,
                          text=True, env=os.environ | {"PYTHONPATH": ""})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "gapscope: error: usage: python -m scripts.ranks RUN_DIR\n"
