"""The traced capture beside its untraced twin (METRICS.md, "Untraced"): the same steps
timed with CUDA events in a run without nsys, so each traced number can be set against what
the loop does when nobody watches.

    traced    |==step==|  bubble 117 µs  |==step==|
    untraced  |==step==|b|==step==|             the profiler's share = (117 - b) / 117

The share is one number only where the untraced runs agree with each other better than the
traced figure differs from them: runs whose own medians lie further apart than that difference
say the share is within noise (`*_within_noise`).
"""

import dataclasses

import pandas as pd

from ..measures.analysis import Analysis
from ..measures.calls import with_untraced_calls
from ..measures.stats import median, p90
from ..measures.twin_keys import marked_twin
from ..readers.untraced import UntracedSteps

# Per-step columns of the twin, by their name in the traced step table.
TWIN_COLUMNS = {"period_ns": "untraced_period_ns", "bubble_ns": "untraced_bubble_ns",
                "span_ns": "untraced_span_ns"}


def window_steps(u: UntracedSteps) -> pd.DataFrame:
    """The steps of the traced capture's window (S+1..E), every step where there is none."""
    if u.window is None:
        return u.steps
    step = u.steps["step"]
    return u.steps[(step > u.window[0]) & (step <= u.window[1])].reset_index(drop=True)


def spread(values: list) -> float | None:
    """max − min of the runs' own medians; None with fewer than two."""
    known = [v for v in values if v is not None]
    return max(known) - min(known) if len(known) >= 2 else None


def untraced_summary(u: UntracedSteps) -> dict:
    steps = window_steps(u)
    runs = steps.groupby("run")
    period_medians = [median(g) for _, g in runs["period_ns"]]
    bubble_medians = [median(g) for _, g in runs["bubble_ns"]]
    return {
        "source": u.source,
        "window": list(u.window) if u.window else None,
        "runs": int(steps["run"].nunique()),
        "steps": len(steps),
        "period_ns_median": median(steps["period_ns"]),
        "bubble_ns_median": median(steps["bubble_ns"]),
        "bubble_ns_p90": p90(steps["bubble_ns"]),
        "span_ns_median": median(steps["span_ns"]),
        "overlap_ns_median": median(steps["overlap_ns"]),
        "ms_per_step_median": u.ms_per_step_median,
        # Each run's own median: the spread between processes, which one median would hide.
        "run_period_ns_medians": period_medians,
        "run_bubble_ns_medians": bubble_medians,
        "period_ns_spread": spread(period_medians),
        "bubble_ns_spread": spread(bubble_medians),
    }


def _traced_threads(traced: pd.DataFrame) -> list:
    """The traced step table's threads, in order of their first step."""
    first = traced.groupby("thread", sort=False)["cpu_start_ns"].min().sort_values(kind="stable")
    return list(first.index)


def matched_twin(u: UntracedSteps, traced: pd.DataFrame) -> pd.DataFrame:
    """The twin's window steps with `step` (and, where the traced table has threads, `thread`)
    as the traced table names them: a twin thread is the traced thread of the same name, else
    the one in the same place in order of first step; function steps ("order") are the k-th
    traced step of their thread. Twin steps with no traced counterpart are left out."""
    twin = window_steps(u).copy()
    threaded = _threaded(u, traced)
    if threaded:
        threads = _traced_threads(traced)
        names = set(twin["thread"].dropna())
        if names and names <= set(threads):
            twin["thread"] = twin["thread"].astype(object)
        else:
            by_order = dict(enumerate(threads))
            twin["thread"] = [by_order.get(int(o)) for o in twin["thread_order"]]
        twin = twin[twin["thread"].notna()]
    if u.numbering == "order":
        keys = ["thread"] if threaded else []
        groups = traced.groupby(keys, sort=False) if keys else [((), traced)]
        renumbered = []
        for key, group in groups:
            if "cpu_start_ns" in group.columns:
                group = group.sort_values("cpu_start_ns", kind="stable")
            ordered = group["step"].tolist()
            mine = twin
            if keys:
                mine = twin[twin["thread"] == (key[0] if isinstance(key, tuple) else key)]
            nth = dict(enumerate(ordered, start=1))
            renumbered.append(mine.assign(step=[nth.get(int(s)) for s in mine["step"]]))
        twin = pd.concat(renumbered) if renumbered else twin.iloc[0:0]
        twin = twin[twin["step"].notna()].astype({"step": "int64"})
    return twin.reset_index(drop=True)


def per_step(u: UntracedSteps) -> pd.DataFrame:
    """Median over the runs of each step's period, bubble and span, by step."""
    return _medians(window_steps(u), ["step"])


def _medians(twin: pd.DataFrame, keys: list) -> pd.DataFrame:
    grouped = twin.groupby(keys)[list(TWIN_COLUMNS)]
    return grouped.median().rename(columns=TWIN_COLUMNS).reset_index()


def per_traced_step(u: UntracedSteps, traced: pd.DataFrame) -> tuple:
    """(per_step's medians keyed as the traced table is, the merge keys): by thread and step
    where the traced table has threads and the twin says which thread each run was on, else
    by step (matched_twin)."""
    twin = matched_twin(u, traced)
    keys = ["thread", "step"] if _threaded(u, traced) else ["step"]
    return _medians(twin, keys), keys


def _threaded(u: UntracedSteps, traced: pd.DataFrame) -> bool:
    return "thread" in traced.columns and bool(u.steps["thread_order"].notna().all())


def share(traced, untraced) -> float | None:
    """(traced − untraced) / traced: how much of a traced figure the profiler added."""
    if traced is None or untraced is None or traced <= 0:
        return None
    return (traced - untraced) / traced


def within_noise(traced, untraced, runs_spread) -> bool | None:
    """True where the untraced runs' medians lie further apart than the traced figure lies from
    their pooled median: the profiler's share is then not told apart from the program's own
    variation between runs. None where it cannot be said (one run, or a figure missing)."""
    if traced is None or untraced is None or runs_spread is None:
        return None
    return runs_spread > abs(traced - untraced)


def with_untraced(a: Analysis, u: UntracedSteps, trace=None) -> Analysis:
    """The analysis with `summary.untraced` and the per-step untraced columns (NA for a traced
    step the twin lacks). A twin of step marks (numbering "mark") is set beside inferred steps
    only, through the capture's boundaries (`trace`, twin_marks.py)."""
    if u.numbering == "mark":
        u = marked_twin(u, a, trace)
        if u.steps.empty:
            return a
    twin = untraced_summary(u)
    s = a.summary
    # A capture of GPU metrics without a CUDA trace has no traced bubble: no share, the twin still.
    for figure in ("bubble", "period"):
        traced, untraced = s.get(f"{figure}_ns_median"), twin[f"{figure}_ns_median"]
        twin[f"profiler_{figure}_share"] = share(traced, untraced)
        twin[f"profiler_{figure}_share_within_noise"] = within_noise(
            traced, untraced, twin[f"{figure}_ns_spread"])
    table, keys = per_traced_step(u, a.steps)
    steps = a.steps.merge(table, on=keys, how="left", validate="many_to_one")
    s = s | {"untraced": twin}
    if s.get("calls"):
        s["calls"] = with_untraced_calls(s["calls"], steps)
    return dataclasses.replace(a, summary=s, steps=steps)
