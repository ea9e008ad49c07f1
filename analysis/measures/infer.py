"""Steps inferred from the trace where no range marks them (METRICS.md, "Inferred steps").

Each thread that launches GPU ops is read as the sequence of its launch calls, in order:

    graph replay  [copy][graph launch][sample]..sync | [copy][graph launch][sample]..sync | ...
                          |---------- step k ------------|--------- step k+1 ----------|
    eager         A B C ... Z ..sync | A B C ... Z ..sync | A B C ... Z ..sync
                  |- step k: p launches -|- step k+1 -|

A thread that replays one CUDA graph again and again has a step per replay, from the launch call
to the next one. Else the steps are the unit of p launches that the sequence of op names repeats,
found from the names that occur m times a step (each occurrence and the m-th next are p apart),
checked position by position (launch i names what launch i + p names), and cut where the thread
blocks once a unit (the stop check's sync ends a step) or, without one, at its largest recurring
host gap. Prefill and set-up (before the repeating stretch; their op names differ) are left out;
a slow first decode step is a step all the same. Nothing repeating: no steps (the caller says
so), never invented ones. The repeating unit is found in infer_sequence.py.

Everything is numpy over the launches: sorts, cumulative sums, searchsorted.
"""

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..measures.infer_anchor import anchored_steps, cover, op_anchored_steps

# The search for the repeating unit is infer_sequence.py's; its names import from here as before.
from ..measures.infer_sequence import (  # noqa: F401
    CANDIDATES,
    COVER_SHARE,
    MAX_BLOCKS_PER_UNIT,
    MAX_LAG,
    MIN_AGREEMENT,
    MIN_BLOCKED_SHARE,
    MIN_COVER,
    MIN_REPEATS,
    MIN_UNIT,
    TOTAL_SHARE,
    blocked_before,
    candidate_periods,
    gap_phase,
    repeating_regions,
    sequence_steps,
    sync_phase,
)
from ..readers.trace import GRAPH, OP_KIND_NAMES

TID_MASK = (1 << 24) - 1
# The steps between blocking calls replace a graph's or a repeating unit's where they hold this
# many times the launches (a loop whose kernels change with the step: the unit holds a stretch).
ANCHOR_GAIN = 1.5


def launch_table(ops: pd.DataFrame, graph_launches: pd.DataFrame) -> pd.DataFrame:
    """One row a launch call (the ops of one call of one thread), sorted by thread and call
    start: tid, call_start, call_end, token (the op's name: kernel name id, or kind for a copy
    or set; a GRAPH op's graph exec id), records (its ops), graph (a graph replay), graph_key
    (which graph: its exec id, else its first node and node count), op_start, op_end."""
    known = (ops["call_start"].to_numpy() >= 0) & (ops["tid"].to_numpy() >= 0)
    cols = {c: ops[c].to_numpy() for c in
            ("tid", "call_start", "call_end", "corr", "start", "end", "kind", "name_id")}
    if not known.all():
        cols = {k: v[known] for k, v in cols.items()}
    # A thread makes one call at a time: its call starts tell its launches apart.
    order = np.argsort(cols["call_start"], kind="stable")
    if len(order) and (cols["tid"] != cols["tid"][0]).any():
        order = order[np.argsort(cols["tid"][order], kind="stable")]
    c = {k: v[order] for k, v in cols.items()}
    first = np.ones(len(order), dtype=bool)
    first[1:] = (c["tid"][1:] != c["tid"][:-1]) | (c["call_start"][1:] != c["call_start"][:-1])
    idx = np.flatnonzero(first)
    records = np.diff(np.append(idx, len(order)))
    kind = c["kind"][idx]
    token = (kind.astype(np.int64) << 32) | (c["name_id"][idx] + 1)
    graph = (kind == GRAPH) | (records > 1) | _graph_calls(c["tid"][idx], c["corr"][idx],
                                                           graph_launches)
    return pd.DataFrame({
        "tid": c["tid"][idx],
        "call_start": c["call_start"][idx],
        "call_end": c["call_end"][idx],
        "token": token,
        "records": records,
        "graph": graph,
        "graph_key": np.where(kind == GRAPH, token, token ^ (records << 48)),
        "op_start": np.minimum.reduceat(c["start"], idx) if len(idx) else c["start"][:0],
        "op_end": np.maximum.reduceat(c["end"], idx) if len(idx) else c["end"][:0],
    }, copy=False)


def _graph_calls(tid: np.ndarray, corr: np.ndarray, graph_launches: pd.DataFrame) -> np.ndarray:
    """Which launches are graph launch calls (same thread and correlation id as one): the ids
    first, a cheap filter that leaves few to match on both."""
    out = np.isin(corr, graph_launches["corr"].to_numpy())
    if out.any():
        calls = set(zip(graph_launches["tid"].tolist(), graph_launches["corr"].tolist(),
                        strict=True))
        rows = np.flatnonzero(out)
        out[rows] = [(t, k) in calls for t, k in zip(tid[rows].tolist(), corr[rows].tolist(),
                                                      strict=True)]
    return out


def infer_steps(trace) -> tuple:
    """(step ranges: start, end, tid, name, index (1, 2, ... per thread); {tid: how its steps
    were found}). Raises TraceError, one line, where no thread repeats anything."""
    launches = launch_table(trace.ops, trace.graph_launches)
    blocking = trace.blocking.sort_values("start", kind="stable")
    found, how, reasons = [], {}, []
    for tid, mine in launches.groupby("tid", sort=False):
        mine = mine.reset_index(drop=True)
        block = blocking[blocking["tid"].to_numpy() == tid]
        bounds, text = thread_steps(mine, block, lambda token: op_name(token, trace.strings))
        if bounds is None:
            reasons.append((len(mine), tid, text))
            continue
        found.append(ranges_of(mine, bounds, tid))
        how[int(tid)] = text
    if not reasons and not found:
        fix = ("record the steps with torch.profiler's prof.step() or record_function('Step N'), "
               "with ProfilerActivity.CPU and CUDA" if trace.source == "kineto"
               else "profile with `nsys profile --trace=cuda,nvtx`")
        raise TraceError(
            f"{trace.path}: no step ranges, and no launch call of a GPU op recorded to infer "
            f"steps from; {fix}")
    if not found:
        n, tid, text = max(reasons)
        raise TraceError(
            f"{trace.path}: no step ranges, and no repeating structure to infer steps from "
            f"(thread {tid & TID_MASK}, {n} launches: {text}); mark each step with an NVTX "
            "range (`Step N`) or pass a steps pattern (--steps / steps=)")
    steps = pd.concat(found, ignore_index=True)
    return steps.sort_values(["start", "end"], kind="stable").reset_index(drop=True), how


def op_name(token: int, strings: dict) -> str:
    """The name of a launch's op from its token (launch_table's): a kernel's name, a copy's or
    set's kind, a graph's exec id."""
    kind, name_id = token >> 32, (token & 0xFFFFFFFF) - 1
    if kind == GRAPH:
        return f"graph exec {name_id}"
    return strings.get(name_id, "?") if kind == 0 else OP_KIND_NAMES[kind]


def ranges_of(launches: pd.DataFrame, bounds: np.ndarray, tid: int) -> pd.DataFrame:
    """The steps (rows of first, past-the-last launch) as ranges: from the step's first launch
    call to the next step's (or the end of the step's last launch call, for the last)."""
    start = launches["call_start"].to_numpy()
    end = launches["call_end"].to_numpy()
    lo, hi = bounds[:, 0], bounds[:, 1]
    stop = np.where(hi < len(start), start[np.minimum(hi, len(start) - 1)], end[hi - 1])
    index = np.arange(1, len(bounds) + 1)
    return pd.DataFrame({"start": start[lo], "end": stop, "tid": np.int64(tid),
                         "name": [f"Step {i} (inferred)" for i in index], "index": index})


def thread_steps(launches: pd.DataFrame, blocking: pd.DataFrame, name_of=str) -> tuple:
    """(the steps as rows of (first launch, past-the-last launch), how) of one thread, or
    (None, why not): a graph's replays, else the repeating unit, else, where those hold less
    than 1/ANCHOR_GAIN of what the steps between its blocking calls hold (a loop whose
    launches change with the step), those, or where there are none of those either, the steps
    from one launch of an op to the next. `name_of`: an op's name from its token
    (launch_table's)."""
    graph = graph_steps(launches, blocking)
    seq = sequence_steps(launches, blocking)
    # A graph replayed a few times in set-up does not make the steps of an eager loop.
    if graph[0] is not None and (seq[0] is None or len(graph[0]) * 2 >= len(seq[0])):
        chosen = graph
    else:
        chosen = seq
    held = cover(chosen[0])
    if held * ANCHOR_GAIN >= len(launches) or len(launches) < 2 * MIN_REPEATS:
        return chosen  # the steps between blocking calls could not hold enough more
    anchored = anchored_steps(launches, blocking)
    why = [chosen[1], anchored[1]]
    if anchored[0] is None:
        anchored = op_anchored_steps(launches, name_of)
        why.append(anchored[1])
    if anchored[0] is not None and cover(anchored[0]) > ANCHOR_GAIN * held:
        return anchored
    if chosen[0] is None and anchored[0] is None:
        return None, "; ".join(why)
    return chosen


def graph_steps(launches: pd.DataFrame, blocking: pd.DataFrame) -> tuple:
    """A step per replay of the graph the thread launches most (MIN_REPEATS times at least),
    from its launch to the next, and so for each other graph replayed as often whose replays
    do not interleave with those (a second generate() call recaptures its graph). A step holds
    twice the median step's launches at most, so a step before a pause does not take in the
    prefill that follows; the last replay's step ends with the thread's first blocking call
    after it (the stop check), else holds the median step's launches."""
    graph = launches["graph"].to_numpy()
    call_start = launches["call_start"].to_numpy()
    block_start = blocking["start"].to_numpy()
    block_end = blocking["end"].to_numpy()
    key = launches["graph_key"].to_numpy()
    values, counts = np.unique(key[graph], return_counts=True)
    spans, bounds, names = [], [], []
    for v in values[np.argsort(-counts, kind="stable")]:
        at = np.flatnonzero(graph & (key == v))
        if len(at) < MIN_REPEATS:
            break
        if any(at[0] <= last and first <= at[-1] for first, last in spans):
            continue  # replayed within the steps of a graph already taken: part of them
        spans.append((at[0], at[-1]))
        median = int(np.median(np.diff(at)))
        hi = np.minimum(np.append(at[1:], len(launches)), at + 2 * median)
        hi[-1] = min(at[-1] + median, len(launches))
        j = np.searchsorted(block_start, call_start[at[-1]])
        if j < len(block_start):
            hi[-1] = min(hi[-1], np.searchsorted(call_start, block_end[j]))
        bounds.append(np.column_stack([at, hi]))
        token = int(v)
        names.append(f"exec {(token & 0xFFFFFFFF) - 1}" if token >> 32 == GRAPH
                     else f"{int(launches['records'].to_numpy()[at[0]])} nodes")
    if not bounds:
        return None, f"no graph replayed {MIN_REPEATS} times"
    bounds = np.concatenate(bounds)
    what = "graph launch" if len(names) == 1 else "graph launches"
    names = [n for _, n in sorted(zip(spans, names, strict=True))]  # in the order replayed
    return bounds[np.argsort(bounds[:, 0])], f"{what} ({', '.join(names)})"

