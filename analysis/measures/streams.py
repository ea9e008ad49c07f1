"""Streams of one device inside the step window: busy time, concurrency, stop-check cover.

    stream 7   ====  ======      ====
    stream 21    =======    ===
    concurrent   ^^  ^^^          (two or more streams running at once)
"""

import itertools

import numpy as np
import pandas as pd

from ..measures.intervals import Coverage, clip, merge, union_ns


def _stream_segments(ops: pd.DataFrame, window: tuple) -> dict:
    stream = ops["stream"].to_numpy()
    start, end = ops["start"].to_numpy(), ops["end"].to_numpy()
    out = {}
    for k in np.unique(stream):
        mine = stream == k
        out[int(k)] = merge(*clip(start[mine], end[mine], *window))
    return out


def concurrent_ns(segments: list) -> int:
    """Time during which two or more of the given disjoint-per-stream unions overlap."""
    if len(segments) < 2:
        return 0
    starts = np.concatenate([s for s, _ in segments])
    ends = np.concatenate([e for _, e in segments])
    times = np.concatenate([starts, ends])
    delta = np.concatenate([np.ones(len(starts), np.int64), -np.ones(len(ends), np.int64)])
    # Ends sort before starts at equal times: touching intervals do not overlap.
    order = np.lexsort((delta, times))
    times, delta = times[order], delta[order]
    running = np.cumsum(delta)
    lengths = np.diff(times)
    return int(lengths[running[:-1] >= 2].sum())


def stream_table(ops: pd.DataFrame, window: tuple) -> tuple:
    """(per-stream DataFrame: stream, ops, busy_ns; pairs DataFrame; concurrent_ns)."""
    segments = _stream_segments(ops, window)
    in_window = (ops["end"].to_numpy() > window[0]) & (ops["start"].to_numpy() < window[1])
    streams, counts = np.unique(ops["stream"].to_numpy()[in_window], return_counts=True)
    count = dict(zip(streams.tolist(), counts.tolist(), strict=True))
    per_stream = pd.DataFrame({
        "stream": list(segments),
        "ops": [count.get(k, 0) for k in segments],
        "busy_ns": [int((e - s).sum()) for s, e in segments.values()],
    })
    pairs = pd.DataFrame(
        [
            {"stream_a": x, "stream_b": y,
             "concurrent_ns": concurrent_ns([segments[x], segments[y]])}
            for x, y in itertools.combinations(segments, 2)
        ],
        columns=["stream_a", "stream_b", "concurrent_ns"],
    )
    return per_stream, pairs, concurrent_ns(list(segments.values()))


def check_cover(checks: pd.DataFrame, device_busy: Coverage, window: tuple) -> pd.DataFrame:
    """For each stop-check range inside the window, the fraction of it the device was busy."""
    inside = checks[(checks["start"] >= window[0]) & (checks["end"] <= window[1])
                    & (checks["end"] > checks["start"])]
    s = inside["start"].to_numpy()
    e = inside["end"].to_numpy()
    busy = device_busy.covered(s, e)
    return pd.DataFrame({
        "start_ns": s,
        "end_ns": e,
        "busy_ns": busy,
        "cover": busy / np.maximum(e - s, 1),
    })


def window_busy_ns(ops: pd.DataFrame, window: tuple) -> int:
    s, e = clip(ops["start"].to_numpy(), ops["end"].to_numpy(), *window)
    return union_ns(s, e)
