"""The blocking calls inside the steps, grouped by the Python line that issued them (METRICS.md,
"Syncs").

gapscope's hook (`gapscope profile`) turns on torch's sync debug mode in the profiled program
and, for each "called a synchronizing CUDA operation" warning, leaves an NVTX mark on the thread
that made the call: `gapscope.sync FILE:LINE FUNCTION`. Torch warns in C++ before it syncs, but
Python sees the warning when the op returns, so the mark follows its call:

    thread T  |-- Step 7 -----------------------------------------|-- Step 8 ---
                 [launches]  [cudaStreamSynchronize ......]  ^ mark "gapscope.sync gen.py:41 f"
    device       ==ops==|..... gap: idle_blocked_ns ......|==ops==
                        a (the drain, inside the call)

A call's gpu_idle_after_ns is the whole of the sync gaps it drained (the gaps whose launching
thread's last blocking call entered before the drain `a` is this one, as measures/gaps.py measures
idle_blocked_ns), from `a` to the next op; gpu_idle_in_call_ns the part of them before the call
returned (their idle_blocked_ns). After it returns the GPU idles on: the sync emptied its queue.
"""

import numpy as np
import pandas as pd

from ..measures.steps import thread_labels

MARK_PREFIX = "gapscope.sync "
UNKNOWN = "unknown"
COLUMNS = ("tid", "thread", "call", "file", "line", "function", "calls", "calls_per_step",
           "blocked_ns", "blocked_ns_median", "gpu_idle_after_ns", "gpu_idle_in_call_ns")


def empty_syncs() -> pd.DataFrame:
    types = {"tid": np.int64, "thread": object, "call": object, "file": object, "line": "Int64",
             "function": object, "calls": np.int64, "calls_per_step": np.float64,
             "blocked_ns": np.int64, "blocked_ns_median": np.float64,
             "gpu_idle_after_ns": np.int64, "gpu_idle_in_call_ns": np.int64}
    return pd.DataFrame({c: pd.Series(dtype=types[c]) for c in COLUMNS})


def parse_marks(marks: pd.DataFrame) -> pd.DataFrame:
    """The hook's marks as start, tid, file, line, function; other marks, and any whose message
    does not parse, left out. The function is the last word (Python names have no spaces), the
    line the number after the path's last colon (a path may hold spaces and colons)."""
    named = marks[marks["name"].astype(str).str.startswith(MARK_PREFIX)]
    if named.empty:
        return pd.DataFrame({"start": pd.Series(dtype=np.int64), "tid": pd.Series(dtype=np.int64),
                             "file": pd.Series(dtype=object), "line": pd.Series(dtype=np.int64),
                             "function": pd.Series(dtype=object)})
    body = named["name"].astype(str).str.slice(len(MARK_PREFIX))
    where = body.str.rpartition(" ")
    file = where[0].str.rpartition(":")
    ok = ((file[0] != "") & (where[2] != "") & file[2].str.fullmatch("[0-9]+")).to_numpy(bool)
    return pd.DataFrame({
        "start": named["start"].to_numpy(np.int64)[ok], "tid": named["tid"].to_numpy(np.int64)[ok],
        "file": file[0].to_numpy(object)[ok], "line": file[2][ok].astype(np.int64).to_numpy(),
        "function": where[2].to_numpy(object)[ok]})


def outermost(blocking: pd.DataFrame) -> pd.DataFrame:
    """The blocking calls not inside another one of their thread (a runtime call's own driver
    call is one wait, not two), sorted by thread and start."""
    calls = blocking.sort_values(["tid", "start", "end"], ascending=[True, True, False],
                                 kind="stable").reset_index(drop=True)
    reach = calls.groupby("tid", sort=False)["end"].cummax()
    before = reach.groupby(calls["tid"], sort=False).shift(1)
    inside = (calls["end"] <= before).fillna(False).to_numpy(dtype=bool)
    return calls[~inside].reset_index(drop=True)


def _segments(times: np.ndarray, step_starts: np.ndarray) -> np.ndarray:
    """The step a time falls after on its thread: from one step's start to the next one's
    (-1 before the first), so a check between two function-traced forwards is its step's."""
    return np.searchsorted(step_starts, times, side="right") - 1


def join_marks(calls: pd.DataFrame, marks: pd.DataFrame, steps: pd.DataFrame) -> np.ndarray:
    """Row of `marks` joined to each of `calls` (-1: none), thread by thread; `steps` gives
    each thread's step starts (start, tid)."""
    joined = np.full(len(calls), -1, dtype=np.int64)
    call_tid = calls["tid"].to_numpy()
    for tid, own in marks.sort_values("start", kind="stable").groupby("tid", sort=False):
        rows = np.flatnonzero(call_tid == tid)
        rows = rows[np.argsort(calls["start"].to_numpy()[rows], kind="stable")]
        starts = np.sort(steps.loc[steps["tid"] == tid, "start"].to_numpy())
        call_start = calls["start"].to_numpy()[rows]
        mark_start = own["start"].to_numpy()
        on_thread = _join_thread(call_start, _segments(call_start, starts), mark_start,
                                 _segments(mark_start, starts))
        hit = on_thread >= 0
        joined[rows[hit]] = own.index.to_numpy()[on_thread[hit]]
    return joined


def _join_thread(call_start: np.ndarray, call_seg: np.ndarray, mark_start: np.ndarray,
                 mark_seg: np.ndarray) -> np.ndarray:
    """One thread's calls and marks, each sorted by start: the mark joined to each call (-1:
    none). Marks follow their calls (_join_following) unless, on this thread, more of them
    are joined when taken to precede them (the same, time reversed): a hook that marked before
    the call would still name the right one."""
    after, n_after = _join_following(call_start, call_seg, mark_start, mark_seg)
    back, n_back = _join_following(-call_start[::-1], call_seg[::-1], -mark_start[::-1],
                                   mark_seg[::-1])
    if n_back <= n_after:
        return after
    back = back[::-1]
    return np.where(back >= 0, len(mark_start) - 1 - back, -1)


def _join_following(call_start: np.ndarray, call_seg: np.ndarray, mark_start: np.ndarray,
                    mark_seg: np.ndarray) -> tuple:
    """(the mark joined to each call or -1, how many marks a call came before), marks taken to
    follow their calls. Within a segment (_segments), a run of k marks with no call between
    them joins the last k calls since the previous mark, in order (an op that synced twice
    warns twice when it returns); a mark no call came before then joins the first call after
    it that no mark joined. A call at the same instant as a mark comes first."""
    joined = [-1] * len(call_start)
    # Python lists: the loop reads one value at a time, which numpy makes slow.
    call_start, call_seg = call_start.tolist(), call_seg.tolist()
    mark_start, mark_seg = mark_start.tolist(), mark_seg.tolist()
    left, pending, c, m = [], [], 0, 0
    while m < len(mark_start):
        while c < len(call_start) and call_start[c] <= mark_start[m]:
            pending.append(c)
            c += 1
        pending = [p for p in pending if call_seg[p] == mark_seg[m]]
        r = m + 1
        while (r < len(mark_start) and mark_seg[r] == mark_seg[m]
               and (c == len(call_start) or call_start[c] > mark_start[r])):
            r += 1
        n = min(r - m, len(pending))
        for j, call in enumerate(pending[len(pending) - n:]):
            joined[call] = m + j
        left.extend(range(m + n, r))
        pending, m = [], r
    # The marks left over, in time order, each take the first call at or after it that no mark
    # took, if that call is in its segment (later ones, segments being in time order, are not).
    free = [i for i, mark in enumerate(joined) if mark < 0]
    p = 0
    for mark in left:
        while p < len(free) and call_start[free[p]] < mark_start[mark]:
            p += 1
        if p < len(free) and call_seg[free[p]] == mark_seg[mark]:
            joined[free[p]] = mark
            p += 1
    return np.array(joined, dtype=np.int64), len(mark_start) - len(left)


def counted(calls: pd.DataFrame, steps: pd.DataFrame, window: tuple) -> np.ndarray:
    """The calls inside the steps: on a thread with steps, starting inside one of its steps'
    host ranges or overlapping the device's window (a stop check after a function-traced
    forward is outside the forward's range)."""
    inside = np.zeros(len(calls), dtype=bool)
    call_tid = calls["tid"].to_numpy()
    start, end = calls["start"].to_numpy(), calls["end"].to_numpy()
    for tid, own in steps.groupby("tid", sort=False):
        rows = np.flatnonzero(call_tid == tid)
        own = own.sort_values("start", kind="stable")
        reach = np.maximum.accumulate(own["end"].to_numpy())
        j = np.searchsorted(own["start"].to_numpy(), start[rows], side="right") - 1
        in_step = (j >= 0) & (start[rows] < reach[np.maximum(j, 0)])
        in_window = (start[rows] < window[1]) & (end[rows] > window[0])
        inside[rows] = in_step | in_window
    return inside


def idle_after(calls: pd.DataFrame, gaps) -> tuple:
    """(gap_ns, idle_blocked_ns) of the sync gaps (idle_blocked_ns > 0) each call drained: a
    gap goes to the
    last call its launching thread entered before the drain (calls: outermost, sorted by
    thread and start)."""
    gap_ns, wait_ns = np.zeros(len(calls), np.int64), np.zeros(len(calls), np.int64)
    wait = np.asarray(gaps["idle_blocked_ns"])
    held = wait > 0
    drain, tid = np.asarray(gaps["start_ns"])[held], np.asarray(gaps["tid"])[held]
    gap, wait = np.asarray(gaps["gap_ns"])[held], wait[held]
    call_tid, call_start = calls["tid"].to_numpy(), calls["start"].to_numpy()
    for thread in np.unique(tid):
        rows = np.flatnonzero(call_tid == thread)
        mine = np.flatnonzero(tid == thread)
        k = np.searchsorted(call_start[rows], drain[mine], side="left") - 1
        ok = k >= 0
        np.add.at(gap_ns, rows[k[ok]], gap[mine[ok]])
        np.add.at(wait_ns, rows[k[ok]], wait[mine[ok]])
    return gap_ns, wait_ns


def sync_table(blocking: pd.DataFrame, marks: pd.DataFrame, steps: pd.DataFrame, gaps,
               window: tuple) -> pd.DataFrame:
    """The syncs table of one device (METRICS.md, "Syncs"): the blocking calls inside its steps
    (`steps`: the step ranges of the device, start, end, tid), grouped by thread, call and the
    Python line its mark names ("unknown" without one), by blocked_ns, most first."""
    threads = steps["tid"].unique()
    calls = outermost(blocking[blocking["tid"].isin(threads)])
    if calls.empty:
        return empty_syncs()
    parsed = parse_marks(marks[marks["tid"].isin(threads)]).reset_index(drop=True)
    joined = join_marks(calls, parsed, steps)
    known = joined >= 0
    at = np.maximum(joined, 0)

    def from_mark(column: str, missing):
        values = parsed[column].to_numpy()[at] if len(parsed) else np.full(len(calls), missing)
        return np.where(known, values, missing)

    idle_after_ns, in_call_ns = idle_after(calls, gaps)
    rows = pd.DataFrame({
        "tid": calls["tid"].to_numpy(), "call": calls["name"].to_numpy(dtype=object),
        "file": from_mark("file", UNKNOWN), "line": from_mark("line", -1),
        "function": from_mark("function", UNKNOWN),
        "blocked_ns": (calls["end"] - calls["start"]).to_numpy(),
        "gpu_idle_after_ns": idle_after_ns, "gpu_idle_in_call_ns": in_call_ns,
    })[counted(calls, steps, window)]
    if rows.empty:
        return empty_syncs()
    table = rows.groupby(["tid", "call", "file", "line", "function"], sort=False).agg(
        calls=("blocked_ns", "size"), blocked_ns=("blocked_ns", "sum"),
        blocked_ns_median=("blocked_ns", "median"),
        gpu_idle_after_ns=("gpu_idle_after_ns", "sum"),
        gpu_idle_in_call_ns=("gpu_idle_in_call_ns", "sum")).reset_index()
    per_thread = steps.groupby("tid").size()
    # The thread as the steps name it (their `thread`; without one, as they would).
    labels = (dict(zip(steps["tid"], steps["thread"], strict=True)) if "thread" in steps.columns
              else thread_labels(steps["tid"], {}))
    table["thread"] = table["tid"].map(labels).astype(object)
    table["calls_per_step"] = table["calls"] / per_thread.reindex(table["tid"]).to_numpy()
    table["line"] = pd.array(table["line"].astype(np.int64), dtype="Int64")
    table.loc[table["line"] < 0, "line"] = pd.NA
    table = table.astype({"blocked_ns_median": np.float64, "calls_per_step": np.float64})
    table = table.sort_values(["blocked_ns", "gpu_idle_after_ns", "calls", "tid", "call", "file"],
                              ascending=[False, False, False, True, True, True], kind="stable")
    return table[list(COLUMNS)].reset_index(drop=True)
