"""The host table's untraced twin (METRICS.md, "Host time: traced and untraced"): the same named
code timed by the hook on the host clock in the runs without nsys, set beside each traced row,
with the profiler's share of it; and the bounds again from the untraced figures.

The twin knows each row's whole exclusive time, not its parts: how much of it is blocked in a
sync or lies inside the forward is taken from the traced row (its sync_ns / ns, forward_ns /
ns), the GPU busy time from the capture (the GPU's own work, which the profiler barely moves).
"""

import dataclasses

import numpy as np
import pandas as pd

from ..measures.analysis import Analysis
from ..measures.host import OTHER, OUTLIER, row_name, typical
from ..measures.host_bound import FORWARD_GRAPH, FORWARD_PYTHON, GRAPH_LAUNCH_NS, limits
from ..measures.stats import median
from ..measures.untraced import share
from ..readers.untraced import UntracedSteps


def twin_steps(host: pd.DataFrame, window: tuple | None) -> pd.DataFrame:
    """One row a sequence's step: its host period (to the next step's start, or its own end
    where a pause follows: the gap alone longer than the sequence's median period, as traced),
    and whether what ran after it counts; steps of the window only, where there is one."""
    steps = host.drop_duplicates(["sequence", "step_position"])[
        ["sequence", "step_position", "step", "start_ns", "end_ns", "next_ns"]].copy()
    has_next = steps["next_ns"].to_numpy() >= 0
    period = np.where(has_next, steps["next_ns"] - steps["start_ns"], np.nan)
    typical = pd.Series(period).groupby(steps["sequence"].to_numpy()).transform("median")
    follows = has_next & ((steps["next_ns"] - steps["end_ns"]).to_numpy()
                          <= typical.to_numpy())
    steps["follows"] = follows
    steps["period_ns"] = np.where(follows, steps["next_ns"], steps["end_ns"]) - steps["start_ns"]
    if window is not None:
        steps = steps[(steps["step"] > window[0]) & (steps["step"] <= window[1])]
    return steps


def untraced_rows(u: UntracedSteps, keep: set | None = None) -> tuple:
    """(each row's mean ns a step, median over the twin's sequences; the period likewise; the
    sequences, the steps): means over each sequence's typical steps (at most OUTLIER times its
    median period), as the traced table's; `keep`: the step numbers the traced table's means
    are over, where the twin numbers its steps as the capture does (the same steps)."""
    host = u.host.copy()
    host["step_position"] = host.groupby(["sequence", "name"]).cumcount()
    window = u.window if u.numbering == "range" else None
    steps = twin_steps(host, window)
    if keep is not None:  # the traced means' steps decide, not the twin's own median
        steps = steps[steps["step"].isin(keep)]
    else:
        limit = steps.groupby("sequence")["period_ns"].transform("median") * OUTLIER
        steps = steps[steps["period_ns"] <= limit]
    mine = host.merge(steps[["sequence", "step_position", "follows"]],
                      on=["sequence", "step_position"])
    mine["ns"] = mine["in_ns"] + np.where(mine["follows"], mine["after_ns"], 0)
    mine["name"] = [OTHER if r == "" else row_name(r) for r in mine["name"]]
    counts = steps.groupby("sequence").size()
    sums = mine.groupby(["sequence", "name"])["ns"].sum().unstack(fill_value=0)
    means = sums.div(counts.reindex(sums.index), axis=0)
    rows = {r: median(means[r]) for r in means.columns}
    period = median(steps.groupby("sequence")["period_ns"].mean())
    return rows, period, int(counts.size), int(len(steps))


def with_host_untraced(a: Analysis, u: UntracedSteps) -> Analysis:
    """The analysis with each host row's untraced ns and the profiler's share, and
    summary.host.untraced (period, runs, the profiler's share of the host period)."""
    h = a.summary.get("host")
    if not h or not h.get("steps") or u.host is None or u.host.empty:
        return a
    rows, period, sequences, steps = untraced_rows(u, traced_typical(a, u))
    if not steps:
        return a
    traced_rows = [r | {"untraced_ns": rows.get(r["name"]),
                        "profiler_share": share(r["ns"], rows.get(r["name"]))}
                   for r in h["rows"]]
    untraced = {"runs": sequences, "steps": steps, "period_ns_mean": period,
                "profiler_share": share(h["period_ns_mean"], period),
                "rows_only_untraced": sorted(set(rows) - {r["name"] for r in h["rows"]})}
    bounds = [b | untraced_bound(b, traced_rows, period) for b in h.get("bounds", [])]
    summary = a.summary | {"host": h | {"rows": traced_rows, "untraced": untraced,
                                        "bounds": bounds}}
    return dataclasses.replace(a, summary=summary)


def traced_typical(a: Analysis, u: UntracedSteps) -> set | None:
    """The step numbers of the traced table's means (its typical steps), where the twin's steps
    are numbered as the capture's (function calls by order, NVTX ranges by number): so a first
    call of several times the period, left out traced, is left out untraced too. None else."""
    per_step = a.host_steps
    if (per_step is None or per_step.empty or u.numbering not in ("order", "range")
            or a.summary.get("steps_from") not in ("function", "nvtx")
            or a.summary.get("threads", 1) != 1):
        return None
    return set(per_step.loc[typical(per_step), "step"].astype(int).tolist())


def untraced_bound(b: dict, rows: list, period: float | None) -> dict:
    """A bound from the untraced figures: the rows' untraced time, split as traced."""
    if period is None:
        return {}
    known = [r for r in rows if r.get("untraced_ns") is not None and r["ns"]]

    def part(r, key):
        return r["untraced_ns"] * r[key] / r["ns"]

    sync = sum(part(r, "sync_ns") for r in known)
    if b["scenario"] == FORWARD_GRAPH:
        removed, added = sum(part(r, "forward_ns") for r in known), GRAPH_LAUNCH_NS
    elif b["scenario"] == FORWARD_PYTHON:
        # The forward's python share of each row, as traced: forward_ns holds python and cuda.
        removed = sum(part(r, "forward_ns") * r["python_ns"]
                      / max(r["python_ns"] + r["cuda_ns"], 1) for r in known)
        added = 0
    else:
        name = b["scenario"].removesuffix(" gone")
        mine = [r for r in known if r["name"] == name or (name.startswith("other")
                                                          and r["name"] == OTHER)]
        removed = sum(r["untraced_ns"] * (r["python_ns"] + r["cuda_ns"]) / r["ns"] for r in mine)
        added = 0
    busy = b["busy_ns"] or 0
    step, lower, upper = limits(busy, max(period - sync - removed + added, 0), period)
    return {"untraced_lower_ns": float(lower), "untraced_upper_ns": float(upper),
            "untraced_host_period_ns": period, "untraced_step_ns": float(step)}
