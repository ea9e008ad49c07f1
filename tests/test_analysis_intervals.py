"""Interval arithmetic, by hand: unions, covered time between points, unions per group."""

import numpy as np

from analysis.measures.intervals import Coverage, clip, merge, union_ns, union_ns_by_group


def arr(*values):
    return np.array(values, dtype=np.int64)


def test_merge_joins_overlapping_and_touching_intervals_only():
    s, e = merge(arr(30, 0, 10, 50), arr(40, 10, 20, 55))
    assert s.tolist() == [0, 30, 50] and e.tolist() == [20, 40, 55]
    assert union_ns(arr(0, 5, 100), arr(10, 8, 101)) == 11


def test_coverage_between_points_counts_partial_segments():
    cover = Coverage(arr(10, 30), arr(20, 40))
    assert cover.covered(arr(0, 15, 25, 0, 35), arr(100, 35, 28, 5, 30)).tolist() == [
        20, 10, 0, 0, 0]
    assert Coverage(arr(), arr()).covered(arr(0), arr(10)).tolist() == [0]


def test_union_by_group_keeps_groups_apart():
    got = union_ns_by_group(arr(2, 1, 2, 1, 2), arr(0, 0, 5, 50, 100), arr(10, 10, 20, 60, 101))
    assert got.to_dict() == {1: 20, 2: 21}


def test_clip_drops_what_falls_outside():
    s, e = clip(arr(0, 20, 90), arr(15, 30, 120), 10, 100)
    assert s.tolist() == [10, 20, 90] and e.tolist() == [15, 30, 100]
    s, e = clip(arr(0), arr(5), 10, 100)
    assert len(s) == 0
