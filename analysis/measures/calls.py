"""The calls the steps fall in (docs/METRICS.md, "Calls"): where a capture holds the program's
loop more than once (several generate() calls: a cold first call and warm ones), each call's
steps and their median period, traced and untraced. The capture's medians mix the calls; a
first call that is five times slower than the next shows only here."""

import re

import numpy as np
import pandas as pd

from ..measures.stats import median

# A range is a call of the loop when its name is `generate` or ends in `.generate` (transformers'
# GenerationMixin.generate, as `gapscope profile` traces it; a program's own `generate`).
CALL_RANGE = re.compile(r"(?:^|\.)generate$")
# Calls listed one by one in the text report; the rest are counted.
SHOWN = 4


def outermost(ranges: pd.DataFrame) -> pd.DataFrame:
    """The ranges not inside another of them on the same thread (nsys wraps a traced function
    again where a finder hands it on: a range just inside one of its own name)."""
    keep = []
    for _, group in ranges.sort_values(["tid", "start", "end"], ascending=[True, True, False],
                                       kind="stable").groupby("tid", sort=False):
        end = None
        for i, row in zip(group.index, group.itertuples(index=False), strict=True):
            if end is not None and row.end <= end:
                continue
            keep.append(i)
            end = row.end
    return ranges.loc[keep].sort_values("start", kind="stable")


def step_calls(ranges: pd.DataFrame, cpu_start: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Each step's call (0, 1, ... in time order), -1 where no call range holds its start; the
    calls are the outermost ranges named as CALL_RANGE on the step's thread."""
    call = np.full(len(cpu_start), -1, dtype=np.int64)
    if ranges.empty or not len(cpu_start):
        return call
    named = ranges[ranges["name"].astype(str).str.contains(CALL_RANGE)]
    for k, row in enumerate(outermost(named).itertuples(index=False)):
        inside = (tid == row.tid) & (cpu_start >= row.start) & (cpu_start < row.end)
        call[inside & (call < 0)] = k
    # Numbered by the calls that hold steps, in order.
    held = np.unique(call[call >= 0])
    return np.where(call >= 0, np.searchsorted(held, np.maximum(call, 0)), -1)


def calls_summary(table: pd.DataFrame, call: np.ndarray, name: str = "generate") -> list:
    """summary["calls"]: one dict a call (where there are two or more): its number, first and
    last step, steps, the median period and GPU busy of its steps; [] for one call or none."""
    if len(np.unique(call[call >= 0])) < 2:
        return []
    out = []
    for k in np.unique(call[call >= 0]):
        mine = table[call == k]
        out.append({"call": int(k) + 1, "name": name, "first_step": int(mine["step"].iloc[0]),
                    "last_step": int(mine["step"].iloc[-1]), "steps": int(len(mine)),
                    "period_ns_median": median(mine["period_ns"]),
                    "busy_ns_median": median(mine["busy_ns"])})
    return out


def call_name(ranges: pd.DataFrame) -> str:
    """The short name of the call ranges (`GenerationMixin.generate`), for the report."""
    named = ranges.loc[ranges["name"].astype(str).str.contains(CALL_RANGE), "name"]
    if named.empty:
        return "generate"
    return ".".join(str(named.iloc[0]).split(".")[-2:])


def with_untraced_calls(calls: list, steps: pd.DataFrame) -> list:
    """Each call with the median untraced period of its steps (the twin's, matched step by
    step), None where the twin has none of them."""
    if not calls or "untraced_period_ns" not in steps:
        return calls
    number = steps["step"].to_numpy()
    out = []
    for c in calls:
        mine = (number >= c["first_step"]) & (number <= c["last_step"])
        out.append(c | {"untraced_period_ns_median": median(
            steps.loc[mine, "untraced_period_ns"])})
    return out
