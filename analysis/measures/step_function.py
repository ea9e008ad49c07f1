"""The program's own function that runs once a step, where the steps were inferred from the trace
(METRICS.md, "Steps from the program's own function"): its calls are then the steps, as
`--step-function` would make them, and the untraced twin marks the same calls.

    thread    |..step 1 (inferred)..|..step 2..|..step 3..|     cut at a sync, a gap, a replay
    ranges      [decode_one_token ]   [decode_one_token]  ...   one call a step: the steps
                  [forward] [sample]    [forward] [sample]      inside it: covers less
                [generate .......................................]   one call in all: no

A candidate is a function of the program's own code (a range the hook named, `MODULE.QUALNAME`),
its outermost calls on the steps' threads. It qualifies where it has at least MIN_CALLS calls,
between 1/MAX_RATIO and MAX_RATIO as many as the inferred steps (an inference may cut a step at
each of two syncs, or join two), and the launch calls of at least MIN_COVER of the ops the steps'
threads launched between their first step's start and last step's end lie inside its calls.
A qualifying candidate half of whose calls lie inside another qualifying one's is not the step
(the forward inside decode_one_token, though the forward covers the prefills' launches too).
Of the rest the one chosen covers the most ops; among those within COVER_TIE of it, the one
with the longest calls.
"""

import numpy as np
import pandas as pd

from ..measures.steps import outermost

MIN_CALLS = 3
MAX_RATIO = 3.0
MIN_COVER = 0.5
COVER_TIE = 0.01


def _inside(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether each point lies in one of the disjoint, sorted intervals [start, end]."""
    at = np.searchsorted(starts, points, side="right") - 1
    ok = at >= 0
    return ok & (points <= ends[np.clip(at, 0, None)])


def candidates_table(trace, steps: pd.DataFrame, names: list) -> pd.DataFrame:
    """One row a candidate range name present on the steps' threads: calls, steps, cover (the
    share of the window's ops launched inside its calls), duration_ns (its calls' total),
    inside (the other candidates whose calls hold at least half of its calls, a tuple)."""
    tids = set(steps["tid"].tolist())
    lo, hi = int(steps["start"].min()), int(steps["end"].max())
    ranges = trace.ranges
    mine = ranges[ranges["name"].isin(set(names)).to_numpy()
                  & ranges["tid"].isin(tids).to_numpy()]
    ops = trace.ops
    launched = ops[ops["tid"].isin(tids).to_numpy() & (ops["call_start"].to_numpy() >= lo)
                   & (ops["call_start"].to_numpy() <= hi)]
    rows, calls_of = [], {}
    for name, group in mine.groupby("name", sort=True):
        calls = outermost(group).sort_values("start", kind="stable")
        calls_of[name] = calls
        covered = np.zeros(len(launched), dtype=bool)
        for tid, by_thread in calls.groupby("tid", sort=False):
            on = launched["tid"].to_numpy() == tid
            covered[on] = _inside(launched["call_start"].to_numpy()[on],
                                  by_thread["start"].to_numpy(), by_thread["end"].to_numpy())
        rows.append({"name": name, "calls": len(calls), "steps": len(steps),
                     "cover": float(covered.mean()) if len(launched) else 0.0,
                     "duration_ns": int((calls["end"] - calls["start"]).sum())})
    for row in rows:
        row["inside"] = tuple(other for other in calls_of if other != row["name"]
                              and held(calls_of[row["name"]], calls_of[other]) >= 0.5)
    return pd.DataFrame(rows, columns=["name", "calls", "steps", "cover", "duration_ns",
                                       "inside"])


def held(inner: pd.DataFrame, outer: pd.DataFrame) -> float:
    """The share of `inner`'s calls that lie inside one of `outer`'s (each thread's own)."""
    if inner.empty:
        return 0.0
    inside = 0
    for tid, mine in inner.groupby("tid", sort=False):
        theirs = outer[outer["tid"].to_numpy() == tid].sort_values("start", kind="stable")
        if theirs.empty:
            continue
        starts, ends = theirs["start"].to_numpy(), theirs["end"].to_numpy()
        at = np.searchsorted(starts, mine["start"].to_numpy(), side="right") - 1
        ok = at >= 0
        inside += int((ok & (mine["end"].to_numpy() <= ends[np.clip(at, 0, None)])).sum())
    return inside / len(inner)


def once_a_step(table: pd.DataFrame) -> str | None:
    """The candidate chosen from candidates_table's rows (module docstring), None for none."""
    if table.empty:
        return None
    ratio = table["calls"] / table["steps"]
    ok = table[(table["calls"] >= MIN_CALLS) & (ratio >= 1 / MAX_RATIO) & (ratio <= MAX_RATIO)
               & (table["cover"] >= MIN_COVER)]
    if "inside" in ok.columns:  # a qualifying candidate inside another one is not the step
        names = set(ok["name"])
        ok = ok[[not (set(inside) & names) for inside in ok["inside"]]]
    if ok.empty:
        return None
    best = ok["cover"].max()
    near = ok[ok["cover"] >= best - COVER_TIE]
    return str(near.sort_values(["duration_ns", "name"], ascending=[False, True],
                                kind="stable").iloc[0]["name"])
