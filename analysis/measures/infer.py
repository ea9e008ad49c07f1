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
so), never invented ones.

Everything is numpy over the launches: sorts, cumulative sums, searchsorted.
"""

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..readers.trace import GRAPH

# A step must repeat this often to be inferred (prefill, set-up and one-off work do not).
MIN_REPEATS = 3
# Of a unit's launches, the share that must name the same op as the next unit's, position by
# position, for the two to count as repeats (a kernel chosen anew as a cache grows breaks a few).
MIN_AGREEMENT = 0.9
# The thread blocks "once a unit" when a blocking call precedes one position of the unit in this
# share of the units, and blocks at most MAX_BLOCKS_PER_UNIT times a unit (more: the unit holds
# several steps, each with its sync).
MIN_BLOCKED_SHARE = 0.8
MAX_BLOCKS_PER_UNIT = 4
# The repeats must cover this share of the thread's launches at least (a few launches repeated
# in set-up are not steps).
MIN_COVER = 0.25
# A unit of one launch is not a step (a loading thread's blocking copies, one after the other):
# a decode step launches its forward and its sampling.
MIN_UNIT = 2
# Candidate units tried (those over the longest runs of one op name at a constant spacing).
CANDIDATES = 12
# Units whose repeats cover less than this share of the launches the best unit's cover are
# not steps (runs of one op name, a few ops repeated here and there).
TOTAL_SHARE = 0.5
# Without a sync to cut at: the shortest unit whose longest stretch of repeats is this share of
# the longest stretch of any unit.
COVER_SHARE = 0.9
# Lags tried for a name's recurrence: a name that occurs up to this many times a step.
MAX_LAG = 8
TID_MASK = (1 << 24) - 1


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
        bounds, text = thread_steps(mine, block)
        if bounds is None:
            reasons.append((len(mine), tid, text))
            continue
        found.append(ranges_of(mine, bounds, tid))
        how[int(tid)] = text
    if not reasons and not found:
        raise TraceError(
            f"{trace.path}: no step ranges, and no launch call of a GPU op recorded to infer "
            "steps from; profile with `nsys profile --trace=cuda,nvtx`")
    if not found:
        n, tid, text = max(reasons)
        raise TraceError(
            f"{trace.path}: no step ranges, and no repeating structure to infer steps from "
            f"(thread {tid & TID_MASK}, {n} launches: {text}); mark each step with an NVTX "
            "range (`Step N`) or pass a steps pattern (--steps / steps=)")
    steps = pd.concat(found, ignore_index=True)
    return steps.sort_values(["start", "end"], kind="stable").reset_index(drop=True), how


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


def thread_steps(launches: pd.DataFrame, blocking: pd.DataFrame) -> tuple:
    """(the steps as rows of (first launch, past-the-last launch), how) of one thread, or
    (None, why not)."""
    graph = graph_steps(launches, blocking)
    seq = sequence_steps(launches, blocking)
    # A graph replayed a few times in set-up does not make the steps of an eager loop.
    if graph[0] is not None and (seq[0] is None or len(graph[0]) * 2 >= len(seq[0])):
        return graph
    return seq


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


def candidate_periods(token: np.ndarray) -> np.ndarray:
    """Spacings to try: for each op name and lag m (1..MAX_LAG), its longest run of
    occurrences whose m-th next occurrence is one constant spacing away; the CANDIDATES
    spacings whose runs span the most launches. A name that occurs m times a step, at whatever
    offsets, has a run at lag m spanning the whole repeating region at the step's length. The
    lags stop at the first that gives a run over half the launches."""
    order = np.argsort(token, kind="stable").astype(np.int32)
    t = token[order]
    values, spans = [], []
    for m in range(1, MAX_LAG + 1):
        if len(t) <= m + 1:
            break
        same = t[m:] == t[:-m]
        gap = np.where(same, order[m:] - order[:-m], np.int32(-1))
        new_run = np.ones(len(gap), dtype=bool)
        new_run[1:] = (gap[1:] != gap[:-1]) | ~same[1:] | ~same[:-1]
        starts = np.flatnonzero(new_run)
        length = np.diff(np.append(starts, len(gap)))
        # Runs of MIN_REPEATS occurrences or more at one spacing.
        keep = (gap[starts] > 0) & (length >= MIN_REPEATS - 1)
        values.append(gap[starts][keep])
        spans.append(length[keep].astype(np.int64) * gap[starts][keep])
        if len(spans[-1]) and spans[-1].max() * 2 >= len(t):
            break  # a spacing that spans half the launches: enough to try
    value = np.concatenate(values) if values else np.empty(0, np.int64)
    if not len(value):
        return value
    span = np.concatenate(spans)
    by = np.lexsort((-span, value))  # each spacing's longest run first
    first = np.ones(len(by), dtype=bool)
    first[1:] = value[by][1:] != value[by][:-1]
    best = by[first]
    return value[best][np.argsort(-span[best], kind="stable")][:CANDIDATES]


def repeating_regions(token: np.ndarray, p: int) -> np.ndarray:
    """(first launch, past-the-last launch) rows of the maximal stretches in which each unit of
    p launches agrees with the next in at least MIN_AGREEMENT of its positions and that hold
    MIN_REPEATS units, longest first."""
    n = len(token)
    if n < 2 * p:
        return np.empty((0, 2), np.int64)
    match = np.concatenate([[0], np.cumsum(token[:-p] == token[p:], dtype=np.int32)])
    # w[i]: agreement of the unit starting at i with the next one.
    w = (match[p:n - p + 1] - match[:n - 2 * p + 1]) / p
    good = np.concatenate([[False], w >= MIN_AGREEMENT, [False]])
    runs = np.flatnonzero(good[1:] != good[:-1]).reshape(-1, 2)
    # Units starting at a .. b - 1 agree with the next: launches a .. b - 1 + 2p repeat.
    regions = np.column_stack([runs[:, 0], runs[:, 1] - 1 + 2 * p])
    regions = regions[regions[:, 1] - regions[:, 0] >= MIN_REPEATS * p]
    return regions[np.argsort(regions[:, 0] - regions[:, 1], kind="stable")]


def sequence_steps(launches: pd.DataFrame, blocking: pd.DataFrame) -> tuple:
    """The repeating unit of launches (see the module's docstring), cut at its phase in each
    stretch where it repeats (several generate() calls: one stretch each)."""
    token = launches["token"].to_numpy()
    n = len(token)
    if n < 2 * MIN_REPEATS:
        return None, "too few launches"
    units = []  # (p, its repeating regions, longest first)
    periods = candidate_periods(token)
    for p in periods[periods >= MIN_UNIT]:
        regions = repeating_regions(token, int(p))
        if len(regions) and (regions[:, 1] - regions[:, 0]).sum() >= MIN_COVER * n:
            units.append((int(p), regions))
    if not units:
        return None, (f"no unit of launches repeats {MIN_REPEATS} times with "
                      f"{MIN_AGREEMENT:.0%} of its ops the same over {MIN_COVER:.0%} of them")
    # Units that repeat over about as many launches as the best (not runs of one op name here
    # and there); of those, the shortest with a sync once a unit, else the shortest whose
    # longest stretch is about the longest (a layer's ops repeat within a step, but no stretch
    # of them spans two steps).
    most = max(r[:, 1].sum() - r[:, 0].sum() for _, r in units)
    units = [u for u in units if u[1][:, 1].sum() - u[1][:, 0].sum() >= TOTAL_SHARE * most]
    flags = blocked_before(launches, blocking)
    synced = [(p, regions) for p, regions in units
              if sync_phase(flags, p, *regions[0])[0] is not None]
    if synced:
        p, regions = min(synced, key=lambda u: u[0])
    else:
        longest = max(r[0, 1] - r[0, 0] for _, r in units)
        p, regions = min((u for u in units if u[1][0, 1] - u[1][0, 0] >= COVER_SHARE * longest),
                         key=lambda u: u[0])
    bounds, phases = [], []
    for a, e in regions:
        phase, name = sync_phase(flags, p, a, e) if synced else (None, None)
        phases.append(f"after {name}" if phase is not None else "at the largest host gap")
        if phase is None:
            phase = gap_phase(launches, p, a, e)
        lo = np.arange(a + (phase - a) % p, e - p + 1, p)
        bounds.append(np.column_stack([lo, lo + p]))
    bounds = np.concatenate(bounds)
    bounds = bounds[np.argsort(bounds[:, 0])]
    if len(bounds) < MIN_REPEATS:
        return None, f"a unit of {p} launches repeats only {len(bounds)} times"
    # How alike the steps are: each against the next, where that is the next unit.
    pairs = bounds[:-1, 0][bounds[1:, 0] == bounds[:-1, 0] + p]
    at = pairs[:, None] + np.arange(p)
    same = float(np.mean(token[at] == token[at + p])) if len(pairs) else 1.0
    how = f"repeating sequence of {p} launches ({same:.0%} the same), phase {phases[0]}"
    if len(regions) > 1:
        how += f", in {len(regions)} stretches"
    return bounds, how


def blocked_before(launches: pd.DataFrame, blocking: pd.DataFrame) -> tuple:
    """(for each launch, whether the thread entered a blocking call since the previous launch
    call began; the name of the first such call, "" where none)."""
    starts = blocking["start"].to_numpy()
    count = np.searchsorted(starts, launches["call_start"].to_numpy(), side="left")
    blocked = np.zeros(len(count), dtype=bool)
    blocked[1:] = count[1:] > count[:-1]
    names = np.array(list(blocking["name"]) + [""], dtype=object)
    first = np.where(blocked, np.concatenate([[0], count[:-1]]), len(starts))
    return blocked, names[first]


def sync_phase(flags: tuple, p: int, a: int, e: int) -> tuple:
    """(phase, the blocking call's name) where the thread blocks before one position of the unit
    in MIN_BLOCKED_SHARE of the units and at most MAX_BLOCKS_PER_UNIT times a unit; (None,
    None) otherwise. `flags`: blocked_before's."""
    blocked, names = flags
    units = (e - a) // p
    # Positions a + 1 .. a + units * p: each phase once a unit (a block before the region's
    # first launch is outside it; the one after its last unit is in).
    at = np.flatnonzero(blocked[a + 1:min(a + units * p, len(blocked) - 1) + 1]) + a + 1
    if len(at) == 0 or len(at) > MAX_BLOCKS_PER_UNIT * units:
        return None, None
    per_phase = np.bincount(at % p, minlength=p)
    phase = int(np.argmax(per_phase))
    if per_phase[phase] < MIN_BLOCKED_SHARE * units:
        return None, None
    chosen = at[at % p == phase]
    values, counts = np.unique(names[chosen].astype(str), return_counts=True)
    return phase, str(values[np.argmax(counts)])


def gap_phase(launches: pd.DataFrame, p: int, a: int, e: int) -> int:
    """The position of the unit after which the host waits longest before launching (median
    over the units of the gap between a launch call's end and the next one's start)."""
    start = launches["call_start"].to_numpy()
    end = launches["call_end"].to_numpy()
    lo = max(a, 1)
    units = (e - lo) // p
    host_gap = (start[lo:lo + units * p] - end[lo - 1:lo - 1 + units * p]).reshape(units, p)
    return (lo + int(np.argmax(np.median(host_gap, axis=0)))) % p
