"""Device idle gaps inside the step window, each split into wait / launch / host and given a cause.

For a gap [a, b) with n the op that ends it, L its launch call, T the thread of L:

    device  ==op==|.................. gap ..................|==n==
    thread T   [ blocking call (wait) ]   python ...  [launch L]
                  <------ wait_ns ---->  <- host_ns ->  <launch_ns>

wait_ns: T inside a blocking call; launch_ns: from max(a, L.start) to b, minus wait; host_ns: the
rest. cause: sync if wait_ns > 0, else host if L.start >= a, else queued; unknown without L.
"""

import numpy as np
import pandas as pd

from analysis.intervals import Coverage

CAUSES = ("sync", "host", "queued", "unknown")


def find_gaps(ops: pd.DataFrame, window: tuple) -> pd.DataFrame:
    """Maximal idle intervals of the device inside the window, with the op that ends each."""
    order = np.lexsort((ops["corr"].to_numpy(), ops["start"].to_numpy()))
    s = ops["start"].to_numpy()[order]
    e = ops["end"].to_numpy()[order]
    reach = np.maximum.accumulate(e)
    first = np.zeros(len(s), dtype=bool)
    first[1:] = s[1:] > reach[:-1]
    nxt = np.flatnonzero(first)  # sorted position of the first op after each hole
    a, b = reach[nxt - 1], s[nxt]
    inside = (a >= window[0]) & (b <= window[1])
    nxt, a, b = nxt[inside], a[inside], b[inside]
    n = ops.iloc[order[nxt]]
    return pd.DataFrame({
        "start_ns": a,
        "end_ns": b,
        "gap_ns": b - a,
        "next_stream": n["stream"].to_numpy(),
        "next_corr": n["corr"].to_numpy(),
        "next_kind": n["kind"].to_numpy(),
        "next_name_id": n["name_id"].to_numpy(),
        "launch_start_ns": n["call_start"].to_numpy(),
        "tid": n["tid"].to_numpy(),
    })


def split_gaps(gaps: pd.DataFrame, blocking: pd.DataFrame) -> pd.DataFrame:
    """Adds wait_ns, launch_ns, host_ns (summing to gap_ns) and cause."""
    a = gaps["start_ns"].to_numpy()
    b = gaps["end_ns"].to_numpy()
    tid = gaps["tid"].to_numpy()
    launch = gaps["launch_start_ns"].to_numpy()
    known = launch >= 0
    from_launch = np.clip(np.maximum(a, launch), a, b)
    wait = np.zeros(len(gaps), np.int64)
    wait_in_launch = np.zeros(len(gaps), np.int64)
    for thread, group in blocking.groupby("tid", sort=False):
        rows = np.flatnonzero(known & (tid == thread))
        if len(rows) == 0:
            continue
        cover = Coverage(group["start"].to_numpy(), group["end"].to_numpy())
        wait[rows] = cover.covered(a[rows], b[rows])
        wait_in_launch[rows] = cover.covered(from_launch[rows], b[rows])
    launch_ns = np.where(known, (b - from_launch) - wait_in_launch, 0)
    out = gaps.copy()
    out["wait_ns"] = wait
    out["launch_ns"] = launch_ns
    out["host_ns"] = out["gap_ns"].to_numpy() - wait - launch_ns
    cause = np.where(wait > 0, "sync", np.where(launch >= a, "host", "queued"))
    out["cause"] = np.where(known, cause, "unknown")
    return out


def gaps_by_step(gaps: pd.DataFrame, steps: pd.DataFrame) -> np.ndarray:
    """Position in `steps` of the step whose period holds each gap. A gap never straddles a
    step's gpu_end (an op ends there), so the periods split the gaps without cutting any."""
    ends = steps["gpu_end"].to_numpy(dtype=np.float64, na_value=-np.inf)
    boundary = np.maximum.accumulate(ends)
    return np.searchsorted(boundary, gaps["end_ns"].to_numpy(), side="left")
