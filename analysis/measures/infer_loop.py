"""Steps of a loop that never returns to the host (METRICS.md, "Inferred steps", loops of one
launch): one graph launch whose nodes repeat, as a CUDA graph WHILE node replays its body until a
kernel of the body says stop (harness while-graph). Its steps are in the device's record of that
one execution, recorded node by node:

    host     [cudaGraphLaunch]                                    [sync: the loop's end]
    device      |A B C ... Z|A B C ... Z|A B C ... Z|    one execution: m iterations of p ops
                |- step 1 --|- step 2 --|- step 3 --|

The ops of one launch call (one thread, one correlation id), in GPU order, read as op names
(kernel name, or kind for a copy or set, as infer.py reads launches): the execution is a loop when
its ops are m >= MIN_REPEATS blocks of p ops, m the fewest times any name occurs that is at least
MIN_REPEATS (the names the body runs once), p = ops / m exactly, and op i names what op i + p
names for LOOP_AGREEMENT of the ops (a body on several streams may order a few differently).
Steps are the blocks, from the execution's first op. A graph that runs once a step is no loop:
the layers repeat inside it, but its embedding and head do not, so its ops are no whole number of
blocks. Nor is an execution with nodes before or after its loop (not told apart from layers).
Each step owns its block's ops by GPU start (every op of the loop has the one launch call).
"""

import numpy as np
import pandas as pd

from ..readers.trace import GRAPH

# An iteration must repeat this often to be a loop's step (infer.py's rule for launches).
MIN_REPEATS = 3
# Of the ops, the share that must name what the op one period later names.
LOOP_AGREEMENT = 0.95
# steps_inferred_by starts so for these steps (the untraced twin can be set beside them: their
# numbers are the loop's own, step 1 its first iteration, when the capture holds the launch).
LOOP_HOW = "iterations of one graph launch"


def is_loop(how: str | None) -> bool:
    return how is not None and how.startswith(LOOP_HOW)


def loop_period(tokens: np.ndarray) -> int | None:
    """p, where `tokens` (op names in GPU order) are a whole number m >= MIN_REPEATS of blocks of
    p that repeat; None otherwise."""
    n = len(tokens)
    if n < MIN_REPEATS:
        return None
    _, counts = np.unique(tokens, return_counts=True)
    counts = counts[counts >= MIN_REPEATS]
    if not len(counts):
        return None
    m = int(counts.min())
    if n % m:
        return None
    p = n // m
    if np.mean(tokens[:-p] == tokens[p:]) < LOOP_AGREEMENT:
        return None
    return p


def loop_steps(trace) -> tuple | None:
    """(steps: start, end, tid, corr (the launch call's), name, index, gpu_lo, gpu_hi, and the
    op_corr, op_tid, op_stream the loop's ops carry; {tid: how}) for the executions that are
    loops, or None where none is. start/end: the launch call (the host's only part); gpu_lo,
    gpu_hi: the GPU start of the step's first op and of the next step's (the last: past the
    execution's end)."""
    found, how = [], {}
    for rows, launch, orphan in executions(trace):
        first = trace.ops.iloc[rows]
        names = (first["kind"].to_numpy().astype(np.int64) << 32) | (
            first["name_id"].to_numpy() + 1)
        p = loop_period(names)
        if p is None:
            continue
        starts = first["start"].to_numpy()[::p]
        found.append(pd.DataFrame({
            "start": launch["start"], "end": launch["end"], "tid": np.int64(launch["tid"]),
            "corr": np.int64(launch["corr"]), "gpu_lo": starts,
            "gpu_hi": np.append(starts[1:], first["end"].max() + 1),
            "op_corr": np.int64(first["corr"].iloc[0]), "op_tid": np.int64(first["tid"].iloc[0]),
            "op_stream": np.int64(first["stream"].iloc[0] if orphan else -1)}))
        how.setdefault(int(launch["tid"]), []).append((p, orphan))
    if not found:
        return None
    steps = pd.concat(found, ignore_index=True).sort_values(["tid", "gpu_lo"], kind="stable")
    index = steps.groupby("tid", sort=False).cumcount().to_numpy() + 1
    steps = steps.assign(index=index, name=[f"Step {i} (inferred)" for i in index])
    return (steps.sort_values(["gpu_lo"], kind="stable").reset_index(drop=True),
            {tid: describe(found) for tid, found in how.items()})


def executions(trace):
    """(op rows in GPU order, the launch call: start, end, tid, corr, whether its ops are
    orphans) for each candidate execution: the ops of one launch call; and runs of ops with no
    launch call on one stream (nsys 2025.3 gives a WHILE body's nodes correlation id 0), each
    taken as the execution of the last graph launch call made before its first op."""
    ops = trace.ops
    call_start = ops["call_start"].to_numpy()
    known = np.flatnonzero((call_start >= 0) & (ops["tid"].to_numpy() >= 0))
    by_call = ops.iloc[known].groupby(["tid", "corr"], sort=False)
    for (tid, corr), rows in by_call.indices.items():
        rows = known[rows]
        if len(rows) >= 2 * MIN_REPEATS:
            rows = rows[np.argsort(ops["start"].to_numpy()[rows], kind="stable")]
            yield rows, {"start": call_start[rows[0]], "end": ops["call_end"].iloc[rows[0]],
                         "tid": tid, "corr": corr}, False
    launches = trace.graph_launches.sort_values("start", kind="stable")
    for rows in orphan_runs(ops):
        j = np.searchsorted(launches["start"].to_numpy(), ops["start"].iloc[rows[0]]) - 1
        if len(rows) >= 2 * MIN_REPEATS and j >= 0:
            yield rows, launches.iloc[j].to_dict(), True


def orphan_runs(ops: pd.DataFrame) -> list:
    """Rows of the ops with no launch call, in runs: one stream's in GPU order, a run cut where
    an op with a launch call on that stream comes between."""
    order = np.lexsort((ops["start"].to_numpy(), ops["device"].to_numpy(),
                        ops["stream"].to_numpy()))
    orphan = ops["call_start"].to_numpy()[order] < 0
    lane = (ops["device"].to_numpy()[order].astype(np.int64) << 32) | ops["stream"].to_numpy()[
        order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (lane[1:] != lane[:-1]) | ~orphan[:-1]
    runs = np.split(order, np.flatnonzero(new)[1:])
    return [r for r, first in zip(runs, orphan[np.flatnonzero(new)], strict=True) if first]


def graph_level_hint(trace) -> str | None:
    """Why a capture recorded graph by graph holds no steps to find, where it may be a loop of
    one launch: its graph executions are whole ops, too few to be steps."""
    graph = trace.ops["kind"].to_numpy() == GRAPH
    if not graph.any():
        return None
    _, counts = np.unique(trace.ops["name_id"].to_numpy()[graph], return_counts=True)
    if counts.max() >= MIN_REPEATS:
        return None
    return (f"nsys recorded {int(graph.sum())} graph execution(s) whole (graph by graph): a loop "
            "that runs inside one launch (a CUDA graph WHILE node) shows its iterations only "
            "node by node (nsys --cuda-graph-trace=node)")


def describe(found: list) -> str:
    """steps_inferred_by for one thread's loops: [(p, orphans)]."""
    ops = ", ".join(str(p) for p in sorted({p for p, _ in found}))
    launches = "" if len(found) == 1 else f", {len(found)} launches"
    orphans = ("; its ops recorded with no correlation id, given the launch's"
               if any(o for _, o in found) else "")
    return f"{LOOP_HOW}{launches} ({ops} ops a step{orphans})"


def assign_loop_ops(ops: pd.DataFrame, steps: pd.DataFrame, owner: np.ndarray) -> None:
    """owner[i] = the row of `steps` (loop steps) that holds op i: an op of the loop's execution
    (its correlation id and thread, and stream where the ops are orphans) whose GPU start lies
    in the step's [gpu_lo, gpu_hi)."""
    corr, tid, stream, start = (ops[c].to_numpy() for c in ("corr", "tid", "stream", "start"))
    keys = ["op_corr", "op_tid", "op_stream", "corr"]
    for (c, t, s, _), group in steps.groupby(keys, sort=False):
        group = group.sort_values("gpu_lo", kind="stable")
        mine = np.flatnonzero((corr == c) & (tid == t) & ((stream == s) | (s < 0)))
        lo = group["gpu_lo"].to_numpy(dtype=np.int64)
        hi = group["gpu_hi"].to_numpy(dtype=np.int64)
        j = np.searchsorted(lo, start[mine], side="right") - 1
        ok = (j >= 0) & (start[mine] < hi[np.clip(j, 0, None)])
        owner[mine[ok]] = group.index.to_numpy()[j[ok]]


def with_loop_launches(ops: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """The ops, those of loop steps that carry no launch call given their launch's (call start
    and end, thread, correlation id): the gaps before them are then the launch's to classify
    (`queued`: made long before), as for a loop whose ops nsys correlates."""
    if "op_corr" not in steps.columns:
        return ops
    step = ops["step"].to_numpy()
    rows = np.flatnonzero((step >= 0) & (ops["call_start"].to_numpy() < 0))
    if not len(rows):
        return ops
    out = ops.copy()
    launch = steps.iloc[step[rows]]
    for col, src in (("call_start", "start"), ("call_end", "end"), ("tid", "tid"),
                     ("corr", "corr")):
        values = out[col].to_numpy().copy()
        values[rows] = launch[src].to_numpy()
        out[col] = values
    return out
