"""The untraced twin's reader: `untraced_steps.json`, the GPU start and end of every step timed
with CUDA events in a run without nsys (the harness writes it; the format is below), into a
per-step table and its summary (METRICS.md, "Untraced").

    {"format": "gapscope-untraced-steps/1", "source": "cuda-events", "variant": "graphed-sync",
     "window": [30, 50],            # the traced capture's window: steps 31..50 (or null)
     "ms_per_step_median": 1.21,    # host-timed, events on
     "runs": [{"step": [1, 2, ...], "start_ns": [...], "end_ns": [...]}, ...]}

Times are ns on the GPU clock from each run's first event; runs are repeats or processes, and
never compared by their clocks, only step by step within each.

`gapscope profile`'s twin of any program (harness/inject/sitecustomize.py) writes the same with
"source": "hook", "numbering": "range" (steps numbered by their NVTX range's number) or "order"
(function steps: by order of call within their thread) or "mark" (steps inferred from the
trace: step j from the thread's j-th boundary to the next, each run with the `key` it marked,
"graph" or "FILE:LINE", and its `boundaries`), and per run the thread it ran on:
`thread` (its Python name) and `thread_order` (0 for the process's first thread to make a step,
1 for the next...), plus `twin_run` and `process` (which run of the program, which of its
processes). Files without them read as before: one thread, steps by number.

Where the twin also timed the host table's named code (GAPSCOPE_HOST_FUNCTIONS), `host` holds
one entry per twin run, process and thread, on the host clock from its first step's start:

    "host": [{"twin_run": 1, "process": 0, "thread": "MainThread", "step": [1, 2, ...],
              "start_ns": [...], "end_ns": [...], "next_ns": [... or null],
              "rows": {"NAME": {"in": [ns a step], "after": [...]}, "": {...}}}]

`in` is a row's exclusive time while the step is open, `after` from its end to the next step's
start; "" is the time no named code held (measures/host_untraced.py).
"""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import TraceError

FORMAT = "gapscope-untraced-steps/1"
FILE_NAME = "untraced_steps.json"
RUN_COLUMNS = ("step", "start_ns", "end_ns")
NUMBERINGS = ("range", "order", "mark")


@dataclass(frozen=True)
class UntracedSteps:
    """`steps`: one row per step of each run: run, step, start_ns, end_ns, span_ns, period_ns,
    bubble_ns, overlap_ns (the last three NA where the earlier step is missing), thread and
    thread_order (None / NA where the file does not say), key and boundaries (a run of step
    marks: what it marked, how many boundaries it counted; None / NA elsewhere)."""

    path: Path
    source: str
    variant: str | None
    window: tuple | None
    ms_per_step_median: float | None
    steps: pd.DataFrame
    # "range": step numbers are the traced ones; "order": the k-th call of the thread; "mark":
    # step j runs from the thread's j-th boundary of its key to the next.
    numbering: str = "range"
    # The host table's twin: one row a sequence, step and row (HOST_COLUMNS); None without.
    host: pd.DataFrame | None = None


def _fail(path: Path, what: str):
    raise TraceError(f"{path}: {what}; it is written by the harness (untraced twin), "
                     "so write it again or remove it")


def _ints(path: Path, run: int, key: str, values) -> np.ndarray:
    if not isinstance(values, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in values):
        _fail(path, f"runs[{run}].{key} is not a list of integers")
    return np.array(values, dtype=np.int64)


def run_steps(step: np.ndarray, start: np.ndarray, end: np.ndarray) -> pd.DataFrame:
    """One run's steps in step order, with span, period, bubble and overlap (BRIEF/METRICS):
    period against step s-1 only (NA where it is missing); bubble and overlap against the
    latest end of all earlier steps (NA for the first)."""
    order = np.argsort(step, kind="stable")
    step, start, end = step[order], start[order], end[order]
    prev_reach = np.maximum.accumulate(end)[:-1]
    has_earlier = np.arange(len(step)) > 0
    reach = np.concatenate([[0], prev_reach])
    follows = np.concatenate([[False], step[1:] == step[:-1] + 1])
    prev_end = np.concatenate([[0], end[:-1]])
    return pd.DataFrame({
        "step": step,
        "start_ns": start,
        "end_ns": end,
        "span_ns": end - start,
        "period_ns": _nullable(end - prev_end, follows),
        "bubble_ns": _nullable(np.maximum(start - reach, 0), has_earlier),
        "overlap_ns": _nullable(np.maximum(reach - start, 0), has_earlier),
    })


def _nullable(values: np.ndarray, valid: np.ndarray) -> pd.arrays.IntegerArray:
    out = pd.array(np.where(valid, values, 0).astype(np.int64), dtype="Int64")
    out[~valid] = pd.NA
    return out


def _window(path: Path, value) -> tuple | None:
    if value is None:
        return None
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            or value[0] >= value[1]):
        _fail(path, f"window {value!r} is not null or [S, E] with S < E")
    return value[0], value[1]


def read_untraced_steps(path) -> UntracedSteps:
    """Reads one file. Raises TraceError, one line, for anything it cannot use."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        _fail(path, f"not readable JSON ({e})")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        got = data.get("format") if isinstance(data, dict) else None
        _fail(path, f"format is {got!r}, not {FORMAT!r}")
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs:
        _fail(path, "no runs")
    tables = []
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            _fail(path, f"runs[{i}] is not an object")
        step, start, end = (_ints(path, i, k, run.get(k)) for k in RUN_COLUMNS)
        if not len(step) == len(start) == len(end):
            _fail(path, f"runs[{i}]: step, start_ns and end_ns differ in length")
        if len(np.unique(step)) != len(step):
            _fail(path, f"runs[{i}]: a step appears twice")
        if (end < start).any():
            _fail(path, f"runs[{i}]: a step ends before it starts")
        thread, order = _thread(path, i, run)
        key, count = _marks(path, i, run)
        table = run_steps(step, start, end).assign(run=i, thread=thread, key=key)
        table["thread_order"] = pd.array([order] * len(table), dtype="Int64")
        table["boundaries"] = pd.array([count] * len(table), dtype="Int64")
        tables.append(table)
    steps = pd.concat(tables, ignore_index=True)
    ms = data.get("ms_per_step_median")
    numbering = data.get("numbering", "range")
    if numbering not in NUMBERINGS:
        _fail(path, f"numbering {numbering!r} is not one of {', '.join(NUMBERINGS)}")
    return UntracedSteps(
        path=path,
        source=str(data.get("source", "")),
        variant=data.get("variant") if isinstance(data.get("variant"), str) else None,
        window=_window(path, data.get("window")),
        ms_per_step_median=float(ms) if isinstance(ms, (int, float))
        and not isinstance(ms, bool) else None,
        steps=steps[["run", *steps.columns.drop("run")]],
        numbering=numbering,
        host=read_host(path, data.get("host")),
    )


def _marks(path: Path, i: int, run: dict) -> tuple:
    """(key, boundaries) of a run of step marks (numbering "mark"); None, None elsewhere."""
    key, count = run.get("key"), run.get("boundaries")
    if key is not None and not isinstance(key, str):
        _fail(path, f"runs[{i}].key is not a string")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 0):
        _fail(path, f"runs[{i}].boundaries is not a whole number >= 0")
    return key, count


HOST_COLUMNS = ["sequence", "thread", "step", "start_ns", "end_ns", "next_ns", "name", "in_ns",
                "after_ns"]


def read_host(path: Path, entries) -> pd.DataFrame | None:
    """The twin's host times (module docstring) as one long frame: `sequence` numbers the
    entries (a twin run's process's thread), `next_ns` is -1 where no step follows."""
    if entries is None:
        return None
    if not isinstance(entries, list):
        _fail(path, "host is not a list")
    frames = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("rows"), dict):
            _fail(path, f"host[{i}] is not an object with rows")
        step, start, end = (_ints(path, i, k, entry.get(k)) for k in RUN_COLUMNS)
        follow = entry.get("next_ns")
        if not isinstance(follow, list) or len(follow) != len(step):
            _fail(path, f"host[{i}].next_ns is not a list a step")
        nxt = _ints(path, i, "next_ns", [-1 if v is None else v for v in follow])
        if not len(step) == len(start) == len(end):
            _fail(path, f"host[{i}]: step, start_ns and end_ns differ in length")
        for name, parts in entry["rows"].items():
            if not isinstance(parts, dict):
                _fail(path, f"host[{i}].rows[{name!r}] is not an object")
            inside, after = (_ints(path, i, f"rows.{part}", parts.get(part))
                             for part in ("in", "after"))
            if not len(inside) == len(after) == len(step):
                _fail(path, f"host[{i}].rows[{name!r}]: not one value a step")
            frames.append(pd.DataFrame({
                "sequence": i, "thread": entry.get("thread"), "step": step, "start_ns": start,
                "end_ns": end, "next_ns": nxt, "name": str(name), "in_ns": inside,
                "after_ns": after}))
    if not frames:
        return pd.DataFrame(columns=HOST_COLUMNS)
    return pd.concat(frames, ignore_index=True)[HOST_COLUMNS]


def _thread(path: Path, i: int, run: dict) -> tuple:
    thread, order = run.get("thread"), run.get("thread_order")
    if thread is not None and not isinstance(thread, str):
        _fail(path, f"runs[{i}].thread is not a name")
    if order is not None and (not isinstance(order, int) or isinstance(order, bool) or order < 0):
        _fail(path, f"runs[{i}].thread_order is not a whole number >= 0")
    return thread, order
