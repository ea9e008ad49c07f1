"""Where each step's host time goes (METRICS.md, "Host time"): the step's period on its thread
split, exclusively, by the named code that spent it, and each row's time split into the CUDA API
calls (blocking ones apart) and the code between them.

    thread   |Step 7 .............................................|Step 8 ...
    ranges     [forward .................]  [processors ..] [stop..]
    calls        [l] [l]  [l] [l] [l]  [l]     [l]            [sync...]
    rows       forward: python | cuda         processors        stop: sync      other

A step's host period runs from its start to the next step's start on the same thread (what
runs between two forwards belongs to the first), or to its own end where the next start comes
after a pause (the gap alone longer than the thread's median period) or there is none. Each ns
of it belongs to one row: the innermost NVTX range open on the thread then (a function the
hook or nsys traced, or a range of the program's own), else `other`. Everything is per thread;
the segments between range boundaries are made by one pass over the ranges (few: a few per
call), their API time by vectorised interval coverage (many calls).
"""

import re

import numpy as np
import pandas as pd

from ..measures.intervals import Coverage
from ..measures.stats import median

OTHER = "other"
PARTS = ("python", "cuda", "sync")
# Ranges that mark no code: the harness' capture window around its steps.
NOT_CODE = frozenset({"gapscope window"})
# The model's forward: the harness' range, or a traced function named `...forward`.
FORWARD_RANGE = "Model Forward"
_NUMBER = re.compile(r"\b\d+\b")
# The means a step leave out steps whose host period is over this many times the median.
OUTLIER = 3


def row_name(name: str) -> str:
    """A range's row: its name with standalone numbers as N (`Step 31` -> `Step N`)."""
    return _NUMBER.sub("N", name)


def is_forward(name: str) -> bool:
    return name == FORWARD_RANGE or name.endswith(".forward")


def host_periods(steps: pd.DataFrame) -> pd.DataFrame:
    """Per step range (steps' index): host_start_ns, host_end_ns, paused (cut at its own end:
    a pause follows, or nothing does). Steps by start within each thread."""
    out = pd.DataFrame(index=steps.index)
    out["host_start_ns"] = steps["start"].to_numpy()
    out["host_end_ns"] = steps["end"].to_numpy()
    out["paused"] = True
    for _, group in steps.groupby("tid", sort=False):
        group = group.sort_values("start", kind="stable")
        start, end = group["start"].to_numpy(), group["end"].to_numpy()
        if len(group) < 2:
            continue
        next_start = start[1:]
        period = next_start - start[:-1]
        gap = next_start - end[:-1]
        typical = np.median(period)
        follows = gap <= typical
        idx = group.index.to_numpy()[:-1]
        out.loc[idx[follows], "host_end_ns"] = next_start[follows]
        out.loc[idx, "paused"] = ~follows
    return out


def _thread_segments(ranges: pd.DataFrame) -> tuple:
    """The change points of one thread's innermost open range: (times, owner range position or
    -1, whether a forward range is open), from one pass over the ranges' boundaries."""
    start, end = ranges["start"].to_numpy(), ranges["end"].to_numpy()
    forward = np.array([is_forward(n) for n in ranges["name"]], dtype=bool)
    keep = np.flatnonzero(end > start)
    # Ends before starts at one time: a range ending where the next begins hands over at once.
    times = np.concatenate([end[keep], start[keep]])
    kinds = np.concatenate([np.zeros(len(keep), np.int8), np.ones(len(keep), np.int8)])
    which = np.concatenate([keep, keep])
    order = np.lexsort((kinds, times))
    points, owners, fwd = [], [], []
    stack, open_forward = [], 0
    for t, kind, k in zip(times[order].tolist(), kinds[order].tolist(), which[order].tolist(),
                          strict=True):
        if kind:
            stack.append(k)
            open_forward += int(forward[k])
        else:
            # The innermost is usually the top; a start/end range may close out of order.
            if stack[-1] == k:
                stack.pop()
            else:
                stack.remove(k)
            open_forward -= int(forward[k])
        if points and points[-1] == t:
            owners[-1], fwd[-1] = (stack[-1] if stack else -1), open_forward > 0
        else:
            points.append(t)
            owners.append(stack[-1] if stack else -1)
            fwd.append(open_forward > 0)
    return (np.array(points, dtype=np.int64), np.array(owners, dtype=np.int64),
            np.array(fwd, dtype=bool))


def _coverages(trace, tid: int) -> tuple:
    """(all CUDA API calls, the blocking ones) of one thread, as Coverages."""
    ops = trace.ops
    mine = (ops["tid"].to_numpy() == tid) & (ops["call_start"].to_numpy() >= 0)
    blocking = trace.blocking[trace.blocking["tid"].to_numpy() == tid]
    other = trace.api_calls[trace.api_calls["tid"].to_numpy() == tid]
    starts = np.concatenate([ops["call_start"].to_numpy()[mine], other["start"].to_numpy(),
                             blocking["start"].to_numpy()]).astype(np.int64)
    ends = np.concatenate([ops["call_end"].to_numpy()[mine], other["end"].to_numpy(),
                           blocking["end"].to_numpy()]).astype(np.int64)
    return (Coverage(starts, ends),
            Coverage(blocking["start"].to_numpy().astype(np.int64),
                     blocking["end"].to_numpy().astype(np.int64)))


def host_table(trace, steps: pd.DataFrame, own_step_range: bool) -> tuple:
    """(per step, per row) for the step ranges `steps` (start, end, tid, index, thread, name):

    per step: step, thread, tid, host_start_ns, host_end_ns, host_period_ns, paused, named_ns,
              python_ns, cuda_ns, sync_ns, forward_ns (the forward's python and cuda time,
              inclusive), forward_python_ns (its python part)
    per row:  step, thread, row, calls, python_ns, cuda_ns, sync_ns, ns, forward_ns (the part
              of ns inside a forward), kind ("step": the step's own range, "code", "other")

    `own_step_range`: the step ranges are NVTX ranges that mark only the step (`Step N`): their
    own time is not named code. Function steps are code, inferred steps are no range at all."""
    periods = host_periods(steps)
    rows = []
    ranges = trace.ranges
    for tid, group in steps.groupby("tid", sort=False):
        mine = ranges[(ranges["tid"].to_numpy() == tid)
                      & ~ranges["name"].isin(NOT_CODE).to_numpy()].reset_index(drop=True)
        lo = int(periods.loc[group.index, "host_start_ns"].min())
        hi = int(periods.loc[group.index, "host_end_ns"].max())
        mine = mine[(mine["end"].to_numpy() > lo) & (mine["start"].to_numpy() < hi)]
        mine = mine.reset_index(drop=True)
        points, owners, fwd = _thread_segments(mine)
        h_start = periods.loc[group.index, "host_start_ns"].to_numpy()
        h_end = periods.loc[group.index, "host_end_ns"].to_numpy()
        cuts = np.unique(np.concatenate([points, h_start, h_end]))
        at = np.searchsorted(points, cuts, side="right") - 1
        if len(points):
            owner = np.where(at >= 0, owners[np.clip(at, 0, None)], -1)
            forward = np.where(at >= 0, fwd[np.clip(at, 0, None)], False)
        else:
            owner, forward = np.full(len(cuts), -1), np.zeros(len(cuts), dtype=bool)
        seg_a, seg_b = cuts[:-1], cuts[1:]
        owner, forward = owner[:-1], forward[:-1]
        # The step each segment lies in (host intervals of one thread do not overlap).
        order = np.argsort(h_start, kind="stable")
        j = np.searchsorted(h_start[order], seg_a, side="right") - 1
        jj = np.clip(j, 0, None)
        inside = (j >= 0) & (seg_b <= h_end[order][jj])
        seg_a, seg_b, owner, forward = seg_a[inside], seg_b[inside], owner[inside], forward[inside]
        step_pos = order[jj[inside]]
        api, sync = _coverages(trace, tid)
        sync_ns = sync.covered(seg_a, seg_b)
        cuda_ns = api.covered(seg_a, seg_b) - sync_ns
        python_ns = (seg_b - seg_a) - cuda_ns - sync_ns
        names = np.array([row_name(n) for n in mine["name"]] + [OTHER], dtype=object)
        step_names = set(group["name"]) if len(group) else set()
        kind_of = np.array([("step" if own_step_range and n in step_names else "code")
                            for n in mine["name"]] + [OTHER], dtype=object)
        label = np.where(owner >= 0, owner, len(mine))
        seg = pd.DataFrame({"pos": step_pos, "name": names[label], "kind": kind_of[label],
                            "python_ns": python_ns, "cuda_ns": cuda_ns, "sync_ns": sync_ns,
                            "forward_ns": np.where(forward, python_ns + cuda_ns, 0),
                            "forward_python_ns": np.where(forward, python_ns, 0)})
        # Calls: the ranges that start inside each step's host interval, by row.
        r_start = mine["start"].to_numpy()
        rj = np.searchsorted(h_start[order], r_start, side="right") - 1
        rjj = np.clip(rj, 0, None)
        started = (rj >= 0) & (r_start < h_end[order][rjj])
        calls = pd.DataFrame({"pos": order[rjj[started]], "name": names[:-1][started]})
        calls = calls.groupby(["pos", "name"]).size().rename("calls")
        by = seg.groupby(["pos", "name", "kind"], sort=False)[
            ["python_ns", "cuda_ns", "sync_ns", "forward_ns", "forward_python_ns"]].sum()
        by = by.reset_index()
        by = by.join(calls, on=["pos", "name"])
        by["calls"] = by["calls"].fillna(0).astype(np.int64)
        index = group.index.to_numpy()
        by["step_index"] = index[by["pos"].to_numpy()]
        rows.append(by.drop(columns="pos"))
    if not rows:
        return _empty_steps(), _empty_rows()
    table = pd.concat(rows, ignore_index=True)
    table["ns"] = table["python_ns"] + table["cuda_ns"] + table["sync_ns"]
    table["step"] = steps.loc[table["step_index"], "index"].to_numpy()
    table["thread"] = steps.loc[table["step_index"], "thread"].to_numpy()
    named = table["kind"].to_numpy() == "code"
    grouped = table.groupby("step_index")
    per = periods.loc[steps.index].copy()
    per["host_period_ns"] = per["host_end_ns"] - per["host_start_ns"]
    for part in ("python_ns", "cuda_ns", "sync_ns", "forward_ns", "forward_python_ns"):
        per[part] = grouped[part].sum().reindex(per.index, fill_value=0).to_numpy()
    per["named_ns"] = table.loc[named].groupby("step_index")["ns"].sum().reindex(
        per.index, fill_value=0).to_numpy()
    per.insert(0, "tid", steps["tid"].to_numpy())
    per.insert(0, "thread", steps["thread"].to_numpy())
    per.insert(0, "step", steps["index"].to_numpy())
    sums = grouped["ns"].sum().reindex(per.index, fill_value=0).to_numpy()
    if not np.array_equal(sums, per["host_period_ns"].to_numpy()):
        raise AssertionError("gapscope bug: the host rows do not add up to the step's host time")
    return per.reset_index().rename(columns={"index": "step_index"}), table[
        ["step_index", "step", "thread", "name", "kind", "calls", "python_ns", "cuda_ns",
         "sync_ns", "ns", "forward_ns"]]


def _empty_steps() -> pd.DataFrame:
    columns = ["step_index", "step", "thread", "tid", "host_start_ns", "host_end_ns", "paused",
               "host_period_ns",
               "python_ns", "cuda_ns", "sync_ns", "forward_ns", "forward_python_ns", "named_ns"]
    return pd.DataFrame({c: pd.Series(dtype=object if c == "thread" else np.int64)
                         for c in columns})


def _empty_rows() -> pd.DataFrame:
    columns = ["step_index", "step", "thread", "name", "kind", "calls", "python_ns", "cuda_ns",
               "sync_ns", "ns", "forward_ns"]
    return pd.DataFrame({c: pd.Series(dtype=object if c in ("thread", "name", "kind")
                                      else np.int64) for c in columns})


def row_means(rows: pd.DataFrame, steps: int) -> pd.DataFrame:
    """One line a row: mean ns a step of each part (a step without the row counts 0), calls a
    step, share of the mean host time; largest first, `other` last among equals."""
    if rows.empty or steps == 0:
        return pd.DataFrame(columns=["name", "kind", "calls", *[f"{p}_ns" for p in PARTS], "ns",
                                     "forward_ns", "share"])
    sums = rows.groupby(["name", "kind"], sort=False)[
        ["calls", "python_ns", "cuda_ns", "sync_ns", "ns", "forward_ns"]].sum()
    means = (sums / steps).reset_index()
    total = means["ns"].sum()
    means["share"] = means["ns"] / total if total else 0.0
    return means.sort_values(["ns", "name"], ascending=[False, True], kind="stable").reset_index(
        drop=True)


def typical(per_step: pd.DataFrame) -> np.ndarray:
    """The steps the means are over: host period at most OUTLIER times the median (a prefill,
    a first call that loads its kernels, a step before a pause are left out)."""
    host = per_step["host_period_ns"].to_numpy()
    if len(host) == 0:
        return np.zeros(0, dtype=bool)
    return host <= OUTLIER * np.median(host)


def summarize_host(per_step: pd.DataFrame, rows: pd.DataFrame) -> dict:
    """summary["host"]: means a step over the typical steps, the named share (of those, and
    the smallest of any step), the rows."""
    n = len(per_step)
    if n == 0:
        return {"steps": 0, "why": "no step has a host period"}
    host = per_step["host_period_ns"].to_numpy()
    named = per_step["named_ns"].to_numpy()
    share = np.divide(named, host, out=np.zeros(n), where=host > 0)
    keep = typical(per_step)
    mine = per_step[keep]
    means = row_means(rows[rows["step_index"].isin(mine["step_index"])], len(mine))
    return {
        "steps": n,
        "steps_in_means": int(keep.sum()),
        "period_ns_mean": float(mine["host_period_ns"].mean()),
        "period_ns_median": median(per_step["host_period_ns"]),
        "paused_steps": int(per_step["paused"].sum()),
        **{f"{part}_ns_mean": float(mine[f"{part}_ns"].mean())
           for part in (*PARTS, "named", "forward", "forward_python")},
        "named_share": (float(named[keep].sum() / host[keep].sum()) if host[keep].sum()
                        else None),
        "named_share_min": float(share.min()),
        "rows": means.to_dict("records"),
    }
