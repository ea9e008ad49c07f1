"""Interval arithmetic on numpy arrays of ns timestamps: unions and covered time.

Everything is vectorised (sorts, running maxima, searchsorted); nothing loops over intervals.
Intervals are half-open [start, end); intervals that touch merge (no zero-length holes).
"""

import numpy as np
import pandas as pd


def merge(start: np.ndarray, end: np.ndarray) -> tuple:
    """The union of the intervals as sorted, disjoint (seg_start, seg_end) arrays."""
    if len(start) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    # A new segment begins where an interval starts after everything before it has ended.
    first = np.ones(len(s), dtype=bool)
    first[1:] = s[1:] > reach[:-1]
    idx = np.flatnonzero(first)
    last = np.append(idx[1:] - 1, len(s) - 1)
    return s[idx], reach[last]


def union_ns(start: np.ndarray, end: np.ndarray) -> int:
    seg_s, seg_e = merge(start, end)
    return int((seg_e - seg_s).sum())


def union_ns_by_group(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> pd.Series:
    """Length of the union of each group's intervals, indexed by group."""
    order = np.lexsort((start, group))
    g, s, e = group[order], start[order], end[order]
    if len(g) == 0:
        return pd.Series(dtype=np.int64)
    reach = pd.Series(e).groupby(g, sort=False).cummax().to_numpy()
    # A segment begins with each group, and where an interval starts after its group's reach.
    first = np.ones(len(g), dtype=bool)
    first[1:] = (g[1:] != g[:-1]) | (s[1:] > reach[:-1])
    idx = np.flatnonzero(first)
    last = np.append(idx[1:] - 1, len(g) - 1)
    return pd.Series(reach[last] - s[idx]).groupby(g[idx]).sum()


class Coverage:
    """Covered time of a union of intervals, queried at many points at once."""

    def __init__(self, start: np.ndarray, end: np.ndarray):
        self.seg_start, self.seg_end = merge(np.asarray(start), np.asarray(end))
        lengths = self.seg_end - self.seg_start
        self._before = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)

    def covered_before(self, t: np.ndarray) -> np.ndarray:
        """Covered time in (-inf, t) for each t."""
        t = np.asarray(t, dtype=np.int64)
        if len(self.seg_start) == 0:
            return np.zeros(t.shape, np.int64)
        j = np.searchsorted(self.seg_start, t, side="right") - 1
        jj = np.clip(j, 0, None)
        inside = np.clip(t - self.seg_start[jj], 0, self.seg_end[jj] - self.seg_start[jj])
        return np.where(j < 0, 0, self._before[jj] + inside)

    def covered(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Covered time in [a, b) for each pair (0 where b <= a)."""
        a = np.asarray(a, dtype=np.int64)
        b = np.maximum(np.asarray(b, dtype=np.int64), a)
        return self.covered_before(b) - self.covered_before(a)


def clip(start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> tuple:
    """Clips intervals to [lo, hi) and drops the empty ones."""
    s = np.clip(start, lo, hi)
    e = np.clip(end, lo, hi)
    keep = e > s
    return s[keep], e[keep]
