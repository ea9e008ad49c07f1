"""The calls the steps fall in (docs/METRICS.md, "Calls"): where a capture holds the program's
loop more than once (several generate() calls: a cold first call and warm ones), each call's
steps and their median period, traced and untraced. The capture's medians mix the calls; a
first call that is five times slower than the next shows only here."""

import re

import numpy as np
import pandas as pd

from ..measures.stats import median
from ..measures.steps import outermost

# A range is a call of the loop when its name is `generate` or ends in `.generate` (transformers'
# GenerationMixin.generate, as `gapscope profile` traces it; a program's own `generate`).
CALL_RANGE = re.compile(r"(?:^|\.)generate$")
# Calls listed one by one in the text report; the rest are counted.
SHOWN = 4


def call_ranges(ranges: pd.DataFrame) -> pd.DataFrame:
    """The outermost ranges named as CALL_RANGE (start, end, tid, name), in time order."""
    if ranges.empty:
        return ranges
    named = ranges[ranges["name"].astype(str).str.contains(CALL_RANGE)]
    return outermost(named).sort_values("start", kind="stable")


def step_calls(calls: pd.DataFrame, cpu_start: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Each step's call: the row of `calls` (call_ranges) on its thread that holds its start,
    -1 where none does."""
    call = np.full(len(cpu_start), -1, dtype=np.int64)
    for k, row in enumerate(calls.itertuples(index=False)):
        inside = (tid == row.tid) & (cpu_start >= row.start) & (cpu_start < row.end)
        call[inside & (call < 0)] = k
    return call


def calls_summary(table: pd.DataFrame, calls: pd.DataFrame, call: np.ndarray,
                  name: str = "generate") -> list:
    """summary["calls"]: one dict a call that holds steps (where two or more do), in time
    order: its number, thread, range (start_ns, end_ns: what the twin's steps are matched by),
    first and last step number, steps, the median period and GPU busy of its steps; [] for one
    call or none."""
    held = np.unique(call[call >= 0])
    if len(held) < 2:
        return []
    out = []
    for number, k in enumerate(held, start=1):
        mine = table[call == k]
        row = calls.iloc[int(k)]
        out.append({"call": number, "name": name, "thread": str(mine["thread"].iloc[0]),
                    "start_ns": int(row["start"]), "end_ns": int(row["end"]),
                    "first_step": int(mine["step"].min()), "last_step": int(mine["step"].max()),
                    "steps": int(len(mine)), "period_ns_median": median(mine["period_ns"]),
                    "busy_ns_median": median(mine["busy_ns"])})
    return out


def call_name(calls: pd.DataFrame) -> str:
    """The short name of the call ranges (`GenerationMixin.generate`), for the report."""
    if calls.empty:
        return "generate"
    return ".".join(str(calls["name"].iloc[0]).split(".")[-2:])


def with_untraced_calls(calls: list, steps: pd.DataFrame) -> list:
    """Each call with the median untraced period of its steps (the steps of its thread whose
    start its range holds; each with the twin's period matched to it), None where the twin has
    none of them."""
    if not calls or "untraced_period_ns" not in steps:
        return calls
    start, thread = steps["cpu_start_ns"].to_numpy(), steps["thread"].astype(str).to_numpy()
    out = []
    for c in calls:
        mine = (thread == c["thread"]) & (start >= c["start_ns"]) & (start < c["end_ns"])
        out.append(c | {"untraced_period_ns_median": median(
            steps.loc[mine, "untraced_period_ns"])})
    return out
