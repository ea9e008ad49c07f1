"""Device idle gaps inside the step window, each split into wait / launch / host and given a cause.

For a gap [a, b) with n the op that ends it, L its launch call, T the thread of L:

    device  ==op==|.................. gap ..................|==n==
    thread T   [ blocking call (wait) ]   python ...  [launch L]
           <-- idle_blocked_ns --> <- idle_pre_launch_ns -> <idle_in_launch_ns>

The ledger (what the host was doing), LEDGER's parts: blocked (idle_blocked_ns): from a until T
returns from the blocking calls it was already in when the device drained at a (at most until
it launched n); in launch (idle_in_launch_ns): from max(a, L.start) to b; pre-launch
(idle_pre_launch_ns): the rest. The cause (one word a gap): sync if it has blocked time, else
host if L.start >= a, else queued; unknown without L.

Only a wait that spans the drain is the sync's: a blocking call T enters after a returns at once
(the device is already idle), so the GPU starved on the host, not on the sync (the two-stream
ping-pong's event waits, compiled). And once n is launched, a block of T no longer holds n back:
a CUDA graph's nodes, replayed while the host waits on the previous step's event, leave gaps of
launch latency, not of the sync.
"""

import numpy as np
import pandas as pd

CAUSES = ("sync", "host", "queued", "unknown")
# The ledger's parts (what the host was doing while the GPU idled): summary.idle_ledger's keys;
# a gap's and a step's columns are idle_<part>_ns.
LEDGER = ("blocked", "pre_launch", "in_launch")
LEDGER_COLUMNS = tuple(f"idle_{part}_ns" for part in LEDGER)
SYNC, HOST, QUEUED, UNKNOWN = range(len(CAUSES))


def find_gaps(ops: pd.DataFrame, window: tuple) -> dict:
    """Maximal idle intervals of the device inside the window, with the op that ends each,
    as columns (numpy arrays)."""
    order = np.lexsort((ops["corr"].to_numpy(), ops["start"].to_numpy()))
    s = ops["start"].to_numpy()[order]
    reach = np.maximum.accumulate(ops["end"].to_numpy()[order])
    first = np.zeros(len(s), dtype=bool)
    first[1:] = s[1:] > reach[:-1]
    nxt = np.flatnonzero(first)  # sorted position of the first op after each hole
    a, b = reach[nxt - 1], s[nxt]
    inside = (a >= window[0]) & (b <= window[1])
    a, b = a[inside], b[inside]
    n = order[nxt[inside]]
    gaps = {"start_ns": a, "end_ns": b, "gap_ns": b - a}
    for col, name in NEXT_OP_COLUMNS.items():
        gaps[name] = ops[col].to_numpy()[n]
    return gaps


NEXT_OP_COLUMNS = {"stream": "next_stream", "corr": "next_corr", "kind": "next_kind",
                   "name_id": "next_name_id", "call_start": "launch_start_ns", "tid": "tid"}


def split_gaps(gaps: dict, blocking: pd.DataFrame) -> dict:
    """Adds the ledger's columns (LEDGER_COLUMNS, summing to gap_ns) and cause (codes into
    CAUSES)."""
    a, b = gaps["start_ns"], gaps["end_ns"]
    tid, launch = gaps["tid"], gaps["launch_start_ns"]
    known = launch >= 0
    from_launch = np.clip(np.maximum(a, launch), a, b)
    wait = np.zeros(len(a), np.int64)
    for thread, group in blocking.groupby("tid", sort=False):
        rows = np.flatnonzero(known & (tid == thread))
        if len(rows) == 0:
            continue
        order = np.argsort(group["start"].to_numpy(), kind="stable")
        starts = group["start"].to_numpy()[order]
        reach = np.maximum.accumulate(group["end"].to_numpy()[order])
        # The blocking calls T entered before the drain at a (nested driver calls included):
        # T held on from a until the last of them returned.
        before = np.searchsorted(starts, a[rows], side="left") - 1
        held_until = np.where(before >= 0, reach[np.maximum(before, 0)], a[rows])
        wait[rows] = np.clip(np.minimum(held_until, from_launch[rows]) - a[rows], 0, None)
    launch_ns = np.where(known, b - from_launch, 0)
    cause = np.where(wait > 0, SYNC, np.where(launch >= a, HOST, QUEUED))
    return gaps | {
        "idle_blocked_ns": wait,
        "idle_pre_launch_ns": gaps["gap_ns"] - wait - launch_ns,
        "idle_in_launch_ns": launch_ns,
        "cause": np.where(known, cause, UNKNOWN).astype(np.int8),
    }


def gaps_by_step(gaps: dict, steps: pd.DataFrame, thread_of: dict | None = None) -> np.ndarray:
    """Position in `steps` of the step whose period holds each gap. A gap never straddles a
    step's gpu_end (an op ends there), so the periods split the gaps without cutting any.
    Where several threads have steps (`thread_of`: tid -> the steps' `thread` label), a gap
    goes to a step of the thread that launched the op ending it, by that thread's periods (the
    last step's where it ends after them); a gap launched from no step's thread, by all steps."""
    ends = steps["gpu_end_ns"].to_numpy(dtype=np.float64, na_value=-np.inf)
    boundary = np.maximum.accumulate(ends)
    position = np.searchsorted(boundary, gaps["end_ns"], side="left")
    thread = steps["thread"].to_numpy() if "thread" in steps.columns else None
    if thread is None or len(set(thread)) < 2 or not thread_of:
        return position
    gap_thread = pd.Series(gaps["tid"]).map(thread_of).to_numpy()
    for label in pd.unique(thread):
        rows = np.flatnonzero(thread == label)
        mine = np.flatnonzero(gap_thread == label)
        j = np.searchsorted(np.maximum.accumulate(ends[rows]), gaps["end_ns"][mine], side="left")
        position[mine] = rows[np.minimum(j, len(rows) - 1)]
    return position
