"""What the figures draw is binned: a bar a run of steps, a histogram by counts, never a patch
a step or a gap."""

import numpy as np
import pandas as pd

from analysis.plots import MAX_BARS, binned_parts, gap_histogram, step_bins
from analysis.summary import CAUSES


def test_steps_fall_in_runs_of_nearly_equal_size():
    assert step_bins(5, most=2).tolist() == [0, 0, 0, 1, 1]
    assert step_bins(4).tolist() == [0, 1, 2, 3]  # fewer steps than bars: one bar each
    sizes = np.bincount(step_bins(3000))
    assert len(sizes) == MAX_BARS and set(sizes) == {25}


def test_a_bar_is_the_mean_of_its_steps_and_its_parts_fill_the_period():
    steps = pd.DataFrame({"period_ns": pd.array([10, 20, 30], dtype="Int64"),
                          "idle_wait_ns": [1, 2, 3], "idle_host_ns": [2, 4, 6],
                          "idle_launch_ns": [0, 0, 3]})
    bins, parts = binned_parts(steps)
    assert bins.tolist() == [0, 1, 2]
    assert parts["busy"].tolist() == [7.0, 14.0, 18.0]
    bins, parts = binned_parts(pd.concat([steps] * 100, ignore_index=True))
    assert len(parts["busy"]) == MAX_BARS and parts["busy"].max() <= 18.0


def test_the_gap_histogram_counts_each_gap_once_by_cause():
    cause = pd.Categorical(["host", "host", "sync", "queued", "host"], categories=CAUSES)
    gaps = pd.DataFrame({"gap_ns": [1_000, 10_000, 100_000, 1_000, 1_000_000], "cause": cause})
    edges, counts = gap_histogram(gaps)
    assert set(counts) == {"host", "sync", "queued"}
    assert edges[0] == 1.0 and edges[-1] > 1000.0 and np.isclose(edges[-1], 1000.0)
    assert {c: int(n.sum()) for c, n in counts.items()} == {"host": 3, "sync": 1, "queued": 1}
    assert counts["host"][0] == 1 and counts["host"][-1] == 1  # the shortest and the longest
