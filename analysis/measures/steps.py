"""Steps: NVTX ranges matched by a pattern (or inferred from the trace, measures/infer.py), the
GPU ops each one launched, the per-step table.

An op belongs to a step when its launch call (same correlationId, same process) lies inside the
step's range on the step's thread: nsys's `nvtx_gpu_proj_trace` projection.

    thread  |--------------- Step 7 ---------------|
    host        [launch A]   [launch B]      [sync........]
    device            |A|        |B|          gpu_start..gpu_end = A.start..B.end

Each thread's steps are one sequence of their own (two threads decoding side by side share step
numbers and overlap in time): periods, bubbles and overlaps link a step to its own thread's
earlier steps.
"""

import re

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..measures.infer import infer_steps
from ..measures.infer_loop import assign_loop_ops, graph_level_hint, loop_steps
from ..measures.intervals import Coverage, union_ns_by_group

DEFAULT_STEP_PATTERN = r"^Step (\d+)$"
DEFAULT_CHECK_PATTERN = r"^Check Stop Condition$"
# torch.profiler's prof.step() marks its steps so: read when the default pattern matches nothing.
PROFILER_STEP_PATTERN = r"^ProfilerStep#(\d+)$"
# The forward of a transformers causal LM, as nsys's Python function trace names its calls
# (`gapscope profile` traces them in every capture): a generate() loop's steps, the prefill's
# first. Read when the default pattern and ProfilerStep#N match nothing.
FORWARD_STEP_PATTERN = (r"^transformers\.models\.[\w.]+\.\w+"
                        r"(?:ForCausalLM|LMHeadModel|ForConditionalGeneration)\.forward$")
# `--steps infer`: the steps from the trace itself, whatever ranges it has.
INFER = "infer"
# nsys's Python function tracing names a range by the function's qualified name,
# `transformers.models.gpt2.modeling_gpt2.GPT2LMHeadModel.forward`: dotted identifiers.
FUNCTION_NAME = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_<>][\w<>]*)+$")
# A thread's number in its globalTid (pid << 24 | tid, plus a tag above): the OS thread id.
TID_MASK = (1 << 24) - 1


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
    """Ranges whose name matches, sorted by start, with `index`, the step number (the one rule,
    METRICS.md "Step numbers"): the number the pattern's first group takes from each name,
    where every name gives one; else (no group, or a group that is not a number in some name)
    the range's position among its thread's matches, from 1."""
    matches = [pattern.search(name) for name in ranges["name"]]
    hit = np.array([m is not None for m in matches], dtype=bool)
    out = ranges[hit].copy()
    groups = [m for m in matches if m is not None]
    numbers = [m.group(1) if m.re.groups else None for m in groups]
    out["index"] = [int(n) if n is not None and n.isdigit() else -1 for n in numbers]
    out = outermost(out).sort_values(["start", "end"], kind="stable").reset_index(drop=True)
    if (out["index"].to_numpy() < 0).any():
        out["index"] = out.groupby("tid", sort=False).cumcount().to_numpy() + 1
    return out


def outermost(ranges: pd.DataFrame) -> pd.DataFrame:
    """The ranges not inside another of the same thread: a step holds no step. (nsys's function
    trace wraps a function twice where the program has an import hook of its own: a range just
    inside one of the same name; a recursive step function nests the same way.)"""
    if len(ranges) < 2:
        return ranges
    order = np.lexsort((-ranges["end"].to_numpy(), ranges["start"].to_numpy(),
                        ranges["tid"].to_numpy()))
    tid = ranges["tid"].to_numpy()[order]
    end = ranges["end"].to_numpy()[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = tid[1:] != tid[:-1]
    # The latest end of the thread's ranges so far, before each range (its own excluded).
    reach = pd.Series(end).groupby(tid).cummax().to_numpy()
    before = np.concatenate([[0], reach[:-1]])
    inside = ~first & (end <= before)
    return ranges.iloc[np.sort(order[~inside])]


def is_function_trace(steps: pd.DataFrame) -> bool:
    """Ranges of nsys's Python function tracing (`--python-functions-trace`): every name a
    dotted qualified name."""
    return len(steps) > 0 and all(FUNCTION_NAME.match(n) for n in steps["name"])


def match_steps(ranges: pd.DataFrame, pattern: str) -> tuple:
    """(the step ranges, where they came from: {"steps_from": "nvtx", "function" or
    "profiler_step", "step_pattern": the pattern that took them, "step_numbers": "name" or
    "order"}); with the default pattern and no `Step N` range, prof.step()'s `ProfilerStep#N`
    ranges instead, else the function trace's ranges of transformers' causal-LM forwards.
    Numbers: match_ranges' rule; function-trace ranges are numbered 1, 2, ... by their order
    within their thread (their names carry no number). Empty where nothing matches."""
    steps = match_ranges(ranges, compile_pattern(pattern, "--steps"))
    source, used = "nvtx", pattern
    if steps.empty and pattern == DEFAULT_STEP_PATTERN:
        used = PROFILER_STEP_PATTERN
        steps, source = match_ranges(ranges, re.compile(used)), "profiler_step"
    if steps.empty and pattern == DEFAULT_STEP_PATTERN:
        used = FORWARD_STEP_PATTERN
        steps = match_ranges(ranges, re.compile(used))
    if is_function_trace(steps):
        steps["index"] = steps.groupby("tid", sort=False).cumcount().to_numpy() + 1
        source = "function"
    regex = re.compile(used)
    by_name = (source != "function" and regex.groups > 0 and not steps.empty
               and all((regex.search(n).group(1) or "").isdigit() for n in steps["name"]))
    return steps, {"steps_from": source, "step_pattern": used,
                   "step_numbers": "name" if by_name else "order"}


def no_steps_error(ranges: pd.DataFrame, pattern: str) -> TraceError:
    return TraceError(f"no NVTX range matches the {PATTERN_NAMES['--steps']} '{pattern}'; "
                      f"{names_seen(ranges)}")


def thread_labels(tids, names: dict) -> dict:
    """tid -> the name shown for the thread: the name the capture recorded, else the OS thread
    id; where threads share a name (every Python thread is `python3` to the OS), the name and
    the id, `python3 (4242)`."""
    tids = sorted({int(t) for t in tids})
    named = {t: names.get(t) for t in tids}
    counts = pd.Series([n for n in named.values() if n is not None], dtype=object).value_counts()
    out = {}
    for t in tids:
        os_tid = str(t & TID_MASK) if t >= 0 else "unknown"
        name = named[t]
        out[t] = os_tid if name is None else name if counts[name] == 1 else f"{name} ({os_tid})"
    return out


def all_thread_labels(steps: pd.DataFrame, tids, names: dict) -> dict:
    """tid -> label of every thread in `tids` (an op's, a gap's): a thread with steps by its
    steps' label, any other by thread_labels among the others, its OS thread id added where the
    name is a steps' thread's label too; -1 (no launch call) `unknown`."""
    own = dict(zip(steps["tid"].astype(np.int64), steps["thread"], strict=True))
    others = thread_labels([t for t in set(int(t) for t in tids) if t not in own and t >= 0],
                           names)
    taken = set(own.values())
    out = {t: (f"{label} ({t & TID_MASK})" if label in taken and not label.endswith(")")
               else label) for t, label in others.items()}
    return {-1: "unknown", **out, **own}


def with_threads(steps: pd.DataFrame, names: dict) -> pd.DataFrame:
    """The steps with `thread`, the label of the thread that opened each range."""
    labels = thread_labels(steps["tid"], names)
    return steps.assign(thread=steps["tid"].map(labels).astype(object))


def step_ranges(trace, pattern: str) -> tuple:
    """(the step ranges, each with its thread's label, and where they came from:
    {"steps_from", "step_pattern", "step_numbers", "steps_inferred_by"}). Ranges matching the
    pattern (match_steps); with the
    default pattern and none, or with `--steps infer`, steps inferred from the trace."""
    if pattern != INFER:
        steps, origin = match_steps(trace.ranges, pattern)
        if not steps.empty:
            functions = (sorted(set(steps["name"])) if origin["steps_from"] == "function"
                         else None)
            return with_threads(steps, trace.thread_names), origin | {
                "steps_inferred_by": None, "step_functions": functions}
        if pattern != DEFAULT_STEP_PATTERN or trace.ops.empty:
            raise no_steps_error(trace.ranges, pattern)
    if trace.ops.empty:
        raise TraceError(f"{trace.path}: --steps infer needs a CUDA trace to infer the steps from")
    try:
        # A loop of one launch (its steps in one execution's repeats), else the host's launches.
        steps, how = loop_steps(trace) or infer_steps(trace)
    except TraceError as e:
        if hint := graph_level_hint(trace):
            raise TraceError(f"{e}; {hint}") from None
        if pattern == INFER or trace.ranges.empty:
            raise
        # The default pattern found nothing and nothing repeats: say what ranges there are.
        raise TraceError(f"{e}; {names_seen(trace.ranges)}") from None
    steps = with_threads(steps, trace.thread_names)
    labels = dict(zip(steps["tid"], steps["thread"], strict=True))
    if len(how) == 1:
        by = next(iter(how.values()))
    else:
        by = "; ".join(f"thread {labels[t]}: {text}" for t, text in how.items())
    return steps, {"steps_from": "inferred", "step_pattern": INFER, "step_numbers": "order",
                   "steps_inferred_by": by}


# The no-match message shows this many kinds of range name, the most frequent first.
NAMES_SHOWN = 8


# A number in a name, not the digits of an identifier (`gpt2`, `fp16`, `GPT2LMHeadModel`).
NAME_NUMBER = r"(?<![A-Za-z0-9])\d+"


def name_shapes(names: pd.Series) -> pd.Series:
    """How many ranges have each name shape: the name with its numbers as N (`Step N`), so that
    a step pattern's candidates read as one line each; most frequent first."""
    shapes = names.astype(str).str.replace(NAME_NUMBER, "N", regex=True)
    return shapes.value_counts(sort=True)


def pattern_for(name: str) -> str:
    r"""A steps pattern that takes the ranges shaped as `name` is: its text, anchored, each
    number in it any number, the first one the step's (`Step 31` -> `^Step (\d+)$`)."""
    parts = re.split(NAME_NUMBER, name)
    literal = [re.sub(r"([.^$*+?{}\[\]\\|()])", r"\\\1", p) for p in parts]
    numbers = [r"(\d+)"] + [r"\d+"] * (len(parts) - 2)
    body = literal[0] + "".join(n + lit for n, lit in zip(numbers, literal[1:], strict=False))
    return f"^{body}$"


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
    the op goes to the later-starting one (nsys would count it in both). Steps of a loop of one
    launch (infer_loop.py: they have a `corr`) own their launch's ops by GPU start."""
    owner = np.full(len(ops), -1, dtype=np.int64)
    if "op_corr" in steps.columns:
        assign_loop_ops(ops, steps, owner)
        return owner
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
    """The host side of the per-step table: step, name, cpu_start, cpu_end, cpu_ns, thread;
    tokens where the step ranges have them (measures/draft.py)."""
    return pd.DataFrame({
        "step": steps["index"].to_numpy(),
        "name": steps["name"].to_numpy(),
        "cpu_start_ns": steps["start"].to_numpy(),
        "cpu_end_ns": steps["end"].to_numpy(),
        "cpu_ns": (steps["end"] - steps["start"]).to_numpy(),
        "thread": steps["thread"].to_numpy(),
        # Tokens each step added, where the capture marks them (measures/draft.py).
        **({"tokens": steps["tokens"].array} if "tokens" in steps.columns else {}),
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
    table["gpu_start_ns"] = pd.array(np.where(has, gpu_start, 0), dtype="Int64")
    table["gpu_end_ns"] = pd.array(np.where(has, gpu_end, 0), dtype="Int64")
    table["busy_ns"] = pd.array(np.where(has, busy, 0), dtype="Int64")
    table.loc[~has, ["gpu_start_ns", "gpu_end_ns", "busy_ns"]] = pd.NA
    table["span_ns"] = table["gpu_end_ns"] - table["gpu_start_ns"]
    table["intra_idle_ns"] = table["span_ns"] - table["busy_ns"]
    _link_previous(table, has, device_busy)
    return table


def _link_previous(table: pd.DataFrame, has: np.ndarray, device_busy: Coverage) -> None:
    """bubble_ns, overlap_ns, period_ns against the earlier steps of the same thread that ran on
    this device: `reach`, the latest gpu_end among them."""
    gpu_start = table["gpu_start_ns"].to_numpy(dtype=np.float64, na_value=np.nan)
    gpu_end = pd.Series(table["gpu_end_ns"].to_numpy(dtype=np.float64, na_value=np.nan))
    thread = table["thread"].to_numpy()
    by_thread = gpu_end.groupby(thread, sort=False)
    reach = by_thread.cummax().groupby(thread, sort=False).ffill()
    prev_end = reach.groupby(thread, sort=False).shift(1).to_numpy()
    linked = has & ~np.isnan(prev_end)
    lo = np.where(linked, prev_end, 0).astype(np.int64)
    hi = np.where(linked, gpu_start, 0).astype(np.int64)
    gap = np.maximum(hi - lo, 0)
    bubble = gap - device_busy.covered(lo, hi)
    overlap = np.maximum(lo - hi, 0)
    # Each thread's first step's period runs from the thread's first gpu_start, so a thread's
    # periods add up to its span (to the window, where there is one thread).
    window_start = pd.Series(gpu_start).groupby(thread, sort=False).transform("min").to_numpy()
    period = np.where(linked, np.fmax(gpu_end.to_numpy(), prev_end) - prev_end,
                      gpu_end.to_numpy() - window_start)
    table["bubble_ns"] = _nullable(bubble, linked)
    table["overlap_ns"] = _nullable(overlap, linked)
    table["period_ns"] = _nullable(period, has)


def _nullable(values: np.ndarray, valid: np.ndarray) -> pd.arrays.IntegerArray:
    out = pd.array(np.where(valid, values, 0).astype(np.int64), dtype="Int64")
    out[~valid] = pd.NA
    return out
