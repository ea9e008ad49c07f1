"""The traced capture beside its untraced twin (METRICS.md, "Untraced"): the same steps
timed with CUDA events in a run without nsys, so each traced number can be set against what
the loop does when nobody watches.

    traced    |==step==|  bubble 117 µs  |==step==|
    untraced  |==step==|b|==step==|             the profiler's share = (117 - b) / 117
"""

import dataclasses

import pandas as pd

from analysis.readers.untraced import UntracedSteps
from analysis.summary import DeviceAnalysis, median, p90

# Per-step columns of the twin, by their name in the traced step table.
TWIN_COLUMNS = {"period_ns": "untraced_period_ns", "bubble_ns": "untraced_bubble_ns",
                "span_ns": "untraced_span_ns"}


def window_steps(u: UntracedSteps) -> pd.DataFrame:
    """The steps of the traced capture's window (S+1..E), every step where there is none."""
    if u.window is None:
        return u.steps
    step = u.steps["step"]
    return u.steps[(step > u.window[0]) & (step <= u.window[1])].reset_index(drop=True)


def untraced_summary(u: UntracedSteps) -> dict:
    steps = window_steps(u)
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
        "run_period_ns_medians": [median(g) for _, g in steps.groupby("run")["period_ns"]],
    }


def per_step(u: UntracedSteps) -> pd.DataFrame:
    """Median over the runs of each step's period, bubble and span, by step."""
    steps = window_steps(u)
    grouped = steps.groupby("step")[list(TWIN_COLUMNS)]
    return grouped.median().rename(columns=TWIN_COLUMNS).reset_index()


def share(traced, untraced) -> float | None:
    """(traced − untraced) / traced: how much of a traced figure the profiler added."""
    if traced is None or untraced is None or traced <= 0:
        return None
    return (traced - untraced) / traced


def with_untraced(a: DeviceAnalysis, u: UntracedSteps) -> DeviceAnalysis:
    """The analysis with `summary.untraced` and the per-step untraced columns (NA for a traced
    step the twin lacks)."""
    twin = untraced_summary(u)
    s = a.summary
    # A capture of GPU metrics alone has no traced period or bubble: no share, the twin still.
    twin["profiler_bubble_share"] = share(s.get("bubble_ns_median"), twin["bubble_ns_median"])
    twin["profiler_period_share"] = share(s.get("period_ns_median"), twin["period_ns_median"])
    steps = a.steps.merge(per_step(u), on="step", how="left", validate="many_to_one")
    return dataclasses.replace(a, summary=s | {"untraced": twin}, steps=steps)
