"""What a thread's inferred steps were cut at, so that the untraced twin marks the same place
(METRICS.md, "Untraced", "Steps inferred"), and each step's boundary counted as the twin counts
them:

    key "graph"       a step starts at a CUDA graph's launch: boundary j is the thread's j-th
                      graph launch call in the capture (the twin: its j-th CUDAGraph.replay)
    key "FILE:LINE"   a step starts at the first launch after a sync that the hook's mark names
                      FILE:LINE: boundary j is the thread's j-th blocking call joined to that
                      line (the twin: the line's j-th execution)

A traced step and the twin's step j are the same where the step starts at boundary j and the
thread's next step at boundary j + 1, where this one ends.
"""

import dataclasses

import numpy as np
import pandas as pd

from ..measures.steps import thread_labels
from ..measures.syncs import join_marks, outermost, parse_marks

GRAPH = "graph"
# The share of a thread's steps whose start must show the key (a graph launch, a sync of one line).
MIN_KEYED = 0.8


def _graph_starts(trace, tid: int) -> np.ndarray:
    calls = trace.graph_launches
    return np.sort(calls.loc[calls["tid"].to_numpy() == tid, "start"].to_numpy())


def _sync_lines(trace, tid: int, steps: pd.DataFrame) -> pd.DataFrame:
    """The thread's outermost blocking calls, sorted by start, with the line their mark names
    (`where`: "FILE:LINE", None without a mark)."""
    blocking = trace.blocking
    calls = outermost(blocking[blocking["tid"].to_numpy() == tid]).reset_index(drop=True)
    parsed = parse_marks(trace.marks[trace.marks["tid"].to_numpy() == tid]).reset_index(drop=True)
    joined = join_marks(calls, parsed, steps.assign(tid=tid)) if len(parsed) else np.full(
        len(calls), -1)
    where = np.full(len(calls), None, dtype=object)
    hit = joined >= 0
    if hit.any():
        rows = parsed.iloc[joined[hit]]
        where[hit] = [f"{f}:{n}" for f, n in zip(rows["file"], rows["line"], strict=True)]
    return calls.assign(where=where).sort_values("start", kind="stable").reset_index(drop=True)


def _step_lines(calls: pd.DataFrame, start: np.ndarray) -> tuple:
    """(whether a sync precedes each step's start; each step's line: the one the last sync
    before its start is marked with, None where there is none or no mark names it)."""
    last = np.searchsorted(calls["start"].to_numpy(), start, side="left") - 1
    if not len(calls):
        return last >= 0, np.full(len(start), None, dtype=object)
    where = calls["where"].to_numpy()[np.maximum(last, 0)]
    return last >= 0, np.where(last >= 0, where, None)


# A line runs once a step where its syncs number this share of the steps, at least and at most.
ONCE_A_STEP = (0.8, 1.25)


def thread_keys(trace, tid: int, steps: pd.DataFrame, how: str = "") -> tuple:
    """(the keys, a tuple, and None) for one thread's inferred steps (`steps`: start, end of
    each, sorted), or ((), why the twin cannot mark them, one line). One key mostly ("graph",
    or the line the steps are cut after); where the inference cut some steps after one sync
    and some after another and each of those lines runs once a step, each of them: a step is
    keyed by the line it was cut after (either line keys the twin)."""
    start = steps["start"].to_numpy()
    graph = _graph_starts(trace, tid)
    if np.isin(start, graph).mean() >= MIN_KEYED:
        return (GRAPH,), None
    if "launch of" in how:
        return (), ("the steps are cut before each launch of an op (the loop never blocks), "
                    "which a run without the profiler cannot see")
    calls = _sync_lines(trace, tid, steps)
    after_sync, lines = _step_lines(calls, start)
    if len(calls) == 0 or after_sync.mean() < MIN_KEYED:
        return (), ("the steps are cut at the largest host gap (no blocking call once a step), "
                    "which a run without the profiler cannot place")
    counts = pd.Series(lines, dtype=object).value_counts()
    if not counts.empty and counts.iloc[0] >= MIN_KEYED * len(start):
        return (str(counts.index[0]),), None
    syncs = calls["where"].value_counts()
    low, high = ONCE_A_STEP
    once = [str(w) for w in counts.index
            if low * len(start) <= syncs.get(w, 0) <= high * len(start)]
    if once and counts[once].sum() >= MIN_KEYED * len(start):
        return tuple(once), None
    return (), ("the capture names no one source line for the sync the steps are cut after "
                "(captured with --no-sync-lines, or a sync torch does not warn about), so "
                "the twin has no line to mark")


def boundaries(trace, tid: int, steps: pd.DataFrame, key: str, only_cut_after: bool = False
               ) -> tuple:
    """(each step's boundary, 1-based, -1 where its start is no boundary of the key; whether the
    next step of the thread starts at the next boundary where this one ends; the thread's
    boundaries in the capture). `steps`: one thread's, start and end, sorted by start.
    `only_cut_after` (a thread of several line keys): a line key's steps are only those cut
    after that line's sync, the others are another key's."""
    start, end = steps["start"].to_numpy(), steps["end"].to_numpy()
    if key == GRAPH:
        marks = _graph_starts(trace, tid)
        at = np.searchsorted(marks, start, side="left")
        hit = (at < len(marks)) & (marks[np.minimum(at, len(marks) - 1)] == start)
        number = np.where(hit, at + 1, -1)
    else:
        calls = _sync_lines(trace, tid, steps)
        marks = calls.loc[calls["where"].to_numpy() == key, "start"].to_numpy()
        # The step starts at the first launch after its boundary's sync.
        number = np.searchsorted(marks, start, side="left")
        mine = _step_lines(calls, start)[1] == key if only_cut_after else True
        number = np.where((number >= 1) & mine, number, -1)
    follows = np.zeros(len(start), dtype=bool)
    follows[:-1] = ((number[1:] == number[:-1] + 1) & (number[:-1] > 0)
                    & (start[1:] == end[:-1]))
    return number, follows, len(marks)


def traced_threads(a) -> list:
    """The traced step table's threads, in order of their first step."""
    first = a.steps.groupby("thread", sort=False)["cpu_start_ns"].min().sort_values(kind="stable")
    return list(first.index)


def thread_ids(trace, labels: list) -> dict:
    """label -> the thread id (globalTid) the step table's label names."""
    tids = pd.unique(trace.ops["tid"].to_numpy())
    named = thread_labels([t for t in tids if t >= 0], trace.thread_names)
    by_label = {label: tid for tid, label in named.items()}
    return {label: by_label[label] for label in labels if label in by_label}


def marked_twin(u, a, trace):
    """The twin of step marks (numbering "mark") as the traced table numbers its inferred steps:
    for each traced thread (in order of first step; the twin's in order of first boundary), its
    key, each step's boundary in the capture, and the twin step of that number from each run
    that marked that key and counted as many boundaries; relabelled with the traced thread and
    step, numbering "range". Empty where the steps are not inferred or nothing matches."""
    steps = u.steps
    if trace is None or a.summary.get("steps_from") != "inferred" or a.steps.empty:
        return dataclasses.replace(u, steps=steps.iloc[0:0], numbering="range")
    how = a.summary.get("steps_inferred_by") or ""
    labels = traced_threads(a)
    tids = thread_ids(trace, labels)
    found = []
    for order, label in enumerate(labels):
        if label not in tids:
            continue
        mine = a.steps[a.steps["thread"] == label].sort_values("cpu_start_ns", kind="stable")
        ranges = pd.DataFrame({"start": mine["cpu_start_ns"].to_numpy(),
                               "end": mine["cpu_end_ns"].to_numpy()})
        keys, _ = thread_keys(trace, tids[label], ranges, how)
        for key in keys:
            number, follows, count = boundaries(trace, tids[label], ranges, key, len(keys) > 1)
            traced_step = dict(zip(number[follows].tolist(),
                                   mine["step"].to_numpy()[follows].tolist(), strict=True))
            runs = steps[(steps["key"] == key) & (steps["thread_order"] == order)
                         & (steps["boundaries"] == count)]
            runs = runs[runs["step"].isin(traced_step)]
            found.append(runs.assign(step=runs["step"].map(traced_step).astype(np.int64),
                                     thread=label))
    matched = pd.concat(found, ignore_index=True) if found else steps.iloc[0:0]
    return dataclasses.replace(u, steps=matched, numbering="range")
