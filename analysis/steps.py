"""Steps: NVTX ranges matched by a pattern, the GPU ops each one launched, the per-step table.

An op belongs to a step when its launch call (same correlationId, same process) lies inside the
step's range on the step's thread: nsys's `nvtx_gpu_proj_trace` projection.

    thread  |--------------- Step 7 ---------------|
    host        [launch A]   [launch B]      [sync........]
    device            |A|        |B|          gpu_start..gpu_end = A.start..B.end
"""

import re

import numpy as np
import pandas as pd

from analysis.errors import TraceError
from analysis.intervals import Coverage, union_ns_by_group

DEFAULT_STEP_PATTERN = r"^Step (\d+)$"
DEFAULT_CHECK_PATTERN = r"^Check Stop Condition$"
# torch.profiler's prof.step() marks its steps so: read when the default pattern matches nothing.
PROFILER_STEP_PATTERN = r"^ProfilerStep#(\d+)$"


# Messages name a pattern for both callers: the command line's option, the library's argument.
PATTERN_NAMES = {"--steps": "steps pattern (--steps / steps=)",
                 "--check": "check pattern (--check / check=)"}


def compile_pattern(pattern: str, option: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise TraceError(f"the {PATTERN_NAMES.get(option, option)} '{pattern}' is not a valid "
                         f"regular expression: {e}") from None


def match_ranges(ranges: pd.DataFrame, pattern: re.Pattern) -> pd.DataFrame:
    """Ranges whose name matches, sorted by start, with `index` from the pattern's first group
    (when it is a number) or their position."""
    matches = [pattern.search(name) for name in ranges["name"]]
    hit = np.array([m is not None for m in matches], dtype=bool)
    out = ranges[hit].copy()
    groups = [m for m in matches if m is not None]
    numbers = [m.group(1) if m.re.groups else None for m in groups]
    out["index"] = [
        int(n) if n is not None and n.isdigit() else i for i, n in enumerate(numbers)
    ]
    return out.sort_values(["start", "end"], kind="stable").reset_index(drop=True)


def find_steps(ranges: pd.DataFrame, pattern: str) -> pd.DataFrame:
    """The step ranges; with the default pattern and no `Step N` range, prof.step()'s
    `ProfilerStep#N` ranges instead."""
    steps = match_ranges(ranges, compile_pattern(pattern, "--steps"))
    if steps.empty and pattern == DEFAULT_STEP_PATTERN:
        steps = match_ranges(ranges, re.compile(PROFILER_STEP_PATTERN))
    if steps.empty:
        raise TraceError(f"no NVTX range matches the {PATTERN_NAMES['--steps']} '{pattern}'; "
                         f"{names_seen(ranges)}")
    return steps


# The no-match message shows this many kinds of range name, the most frequent first.
NAMES_SHOWN = 8


def name_shapes(names: pd.Series) -> pd.Series:
    """How many ranges have each name shape: the name with its numbers as N (`Step N`), so that
    a step pattern's candidates read as one line each; most frequent first."""
    shapes = names.astype(str).str.replace(r"\d+", "N", regex=True)
    return shapes.value_counts(sort=True)


def names_seen(ranges: pd.DataFrame) -> str:
    """The range names of the trace, for the message that no range matches: every kind, with
    its count, up to NAMES_SHOWN of them."""
    if ranges.empty:
        return ("the trace has no NVTX (or record_function) range: mark each step, e.g. "
                "`with nvtx.annotate(f\"Step {i}\")`")
    shapes = name_shapes(ranges["name"])
    shown = ", ".join(f"'{shape}' ×{count}" for shape, count in shapes.head(NAMES_SHOWN).items())
    more = len(shapes) - NAMES_SHOWN
    rest = f" and {more} more" if more > 0 else ""
    return (f"the ranges seen, by name (N: any number): {shown}{rest} "
            "(`gapscope ranges TRACE` lists every name with its count)")


def assign_steps(ops: pd.DataFrame, steps: pd.DataFrame) -> np.ndarray:
    """Row of `steps` each op belongs to, -1 for none. Where two steps of one thread overlap,
    the op goes to the later-starting one (nsys would count it in both)."""
    owner = np.full(len(ops), -1, dtype=np.int64)
    call_start = ops["call_start"].to_numpy()
    call_end = ops["call_end"].to_numpy()
    tid = ops["tid"].to_numpy()
    for thread, group in steps.groupby("tid", sort=False):
        rows = group.index.to_numpy()
        starts = group["start"].to_numpy()
        ends = group["end"].to_numpy()
        mine = np.flatnonzero((tid == thread) & (call_start >= 0))
        j = np.searchsorted(starts, call_start[mine], side="right") - 1
        ok = j >= 0
        jj = np.clip(j, 0, None)
        ok &= call_end[mine] <= ends[jj]
        owner[mine[ok]] = rows[jj[ok]]
    return owner


def host_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """The host side of the per-step table: step, name, cpu_start, cpu_end, cpu_ns."""
    return pd.DataFrame({
        "step": steps["index"].to_numpy(),
        "name": steps["name"].to_numpy(),
        "cpu_start": steps["start"].to_numpy(),
        "cpu_end": steps["end"].to_numpy(),
        "cpu_ns": (steps["end"] - steps["start"]).to_numpy(),
    })


def step_table(steps: pd.DataFrame, ops: pd.DataFrame, device_busy: Coverage) -> pd.DataFrame:
    """Per-step table of one device (METRICS.md, "Per step"). `ops` carries a `step` column."""
    mine = ops.loc[ops["step"].to_numpy() >= 0, ["step", "corr", "start", "end"]]
    grouped = mine.groupby("step")
    table = host_steps(steps)
    # Distinct launch calls, like nsys's NumGPUOps: a CUDA graph launch counts once.
    table["ops"] = grouped["corr"].nunique().reindex(steps.index, fill_value=0).to_numpy()
    table["op_records"] = grouped.size().reindex(steps.index, fill_value=0).to_numpy()
    has = table["op_records"].to_numpy() > 0
    gpu_start = grouped["start"].min().reindex(steps.index).to_numpy()
    gpu_end = grouped["end"].max().reindex(steps.index).to_numpy()
    busy = union_ns_by_group(mine["step"].to_numpy(), mine["start"].to_numpy(),
                             mine["end"].to_numpy()).reindex(steps.index).to_numpy()
    table["gpu_start"] = pd.array(np.where(has, gpu_start, 0), dtype="Int64")
    table["gpu_end"] = pd.array(np.where(has, gpu_end, 0), dtype="Int64")
    table["busy_ns"] = pd.array(np.where(has, busy, 0), dtype="Int64")
    table.loc[~has, ["gpu_start", "gpu_end", "busy_ns"]] = pd.NA
    table["span_ns"] = table["gpu_end"] - table["gpu_start"]
    table["intra_idle_ns"] = table["span_ns"] - table["busy_ns"]
    _link_previous(table, has, device_busy)
    return table


def _link_previous(table: pd.DataFrame, has: np.ndarray, device_busy: Coverage) -> None:
    """bubble_ns, overlap_ns, period_ns against the previous step that ran on this device."""
    gpu_start = table["gpu_start"].to_numpy(dtype=np.float64, na_value=np.nan)
    gpu_end = table["gpu_end"].to_numpy(dtype=np.float64, na_value=np.nan)
    prev_end = pd.Series(gpu_end).ffill().shift(1).to_numpy()
    linked = has & ~np.isnan(prev_end)
    lo = np.where(linked, prev_end, 0).astype(np.int64)
    hi = np.where(linked, gpu_start, 0).astype(np.int64)
    gap = np.maximum(hi - lo, 0)
    bubble = gap - device_busy.covered(lo, hi)
    overlap = np.maximum(lo - hi, 0)
    window_start = np.nanmin(gpu_start)
    # The first step's period runs from the window's start, so the periods add up to the window.
    period = np.where(linked, gpu_end - prev_end, gpu_end - window_start)
    table["bubble_ns"] = _nullable(bubble, linked)
    table["overlap_ns"] = _nullable(overlap, linked)
    table["period_ns"] = _nullable(period, has)


def _nullable(values: np.ndarray, valid: np.ndarray) -> pd.arrays.IntegerArray:
    out = pd.array(np.where(valid, values, 0).astype(np.int64), dtype="Int64")
    out[~valid] = pd.NA
    return out
