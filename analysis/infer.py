"""Steps inferred from the trace where no range marks them (METRICS.md, "Inferred steps").

Each thread that launches GPU ops is read as the sequence of its launch calls, in order:

    graph replay  [copy][graph launch][sample]..sync | [copy][graph launch][sample]..sync | ...
                          |---------- step k ------------|--------- step k+1 ----------|
    eager         A B C ... Z ..sync | A B C ... Z ..sync | A B C ... Z ..sync
                  |- step k: p launches -|- step k+1 -|

A thread that replays one CUDA graph again and again has a step per replay, from the launch call
to the next one. Else the steps are the unit of p launches that the sequence of op names repeats,
found from the names that occur once a step (their consecutive occurrences are p apart), checked
position by position (launch i names what launch i + p names), and cut where the thread blocks
once a unit (the stop check's sync ends a step) or, without one, at its largest recurring host
gap. Prefill and set-up (before the repeating region) are left out; so is a first step much
longer than the rest. Nothing repeating: no steps (the caller says so), never invented ones.

Everything is numpy over the launches: sorts, cumulative sums, searchsorted.
"""

import numpy as np
import pandas as pd

from analysis.errors import TraceError
from analysis.trace import GRAPH

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
# The repeats must cover this share of the thread's launches at least (a few identical
# launches in a row, a layer's ops repeated within a step, are not steps).
MIN_COVER = 0.25
# Candidate units tried (those over the longest runs of one op name at a constant spacing).
CANDIDATES = 12
# A unit longer than the smallest one whose repeats cover this share of the longest coverage
# is not preferred: the shortest unit that repeats over most of the sequence.
COVER_SHARE = 0.9
# A first step longer than this many times the median of the others (host time or GPU span) is
# prefill or warm-up, not a decode step: left out.
FIRST_STEP_FACTOR = 2.0
TID_MASK = (1 << 24) - 1


def launch_table(ops: pd.DataFrame, graph_launches: pd.DataFrame) -> pd.DataFrame:
    """One row a launch call (ops that share thread, call and correlation id), sorted by thread
    and call start: tid, call_start, call_end, token (the op's name: kernel name id, or kind for
    a copy or set; a GRAPH op's graph exec id), records (its ops), graph (a graph replay),
    graph_key (which graph: its exec id, else its first node and node count), op_start, op_end."""
    known = (ops["call_start"].to_numpy() >= 0) & (ops["tid"].to_numpy() >= 0)
    cols = {c: ops[c].to_numpy()[known] for c in
            ("tid", "call_start", "call_end", "corr", "start", "end", "kind", "name_id")}
    order = np.lexsort((cols["start"], cols["corr"], cols["call_start"], cols["tid"]))
    c = {k: v[order] for k, v in cols.items()}
    first = np.ones(len(order), dtype=bool)
    first[1:] = ((c["tid"][1:] != c["tid"][:-1]) | (c["call_start"][1:] != c["call_start"][:-1])
                 | (c["corr"][1:] != c["corr"][:-1]))
    idx = np.flatnonzero(first)
    records = np.diff(np.append(idx, len(order)))
    kind = c["kind"][idx]
    token = (kind.astype(np.int64) << 32) | (c["name_id"][idx] + 1)
    launched = pd.MultiIndex.from_arrays([graph_launches["tid"].to_numpy(),
                                          graph_launches["corr"].to_numpy()])
    by_call = pd.MultiIndex.from_arrays([c["tid"][idx], c["corr"][idx]]).isin(launched)
    graph = (kind == GRAPH) | (records > 1) | by_call
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
    })


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
    if not found:
        n, tid, text = max(reasons) if reasons else (0, -1, "no launch calls recorded")
        raise TraceError(
            f"{trace.path}: no step ranges, and no repeating structure to infer steps from "
            f"(thread {tid & TID_MASK}, {n} launches: {text}); mark each step with an NVTX "
            "range (`Step N`) or pass --steps REGEX")
    return pd.concat(found, ignore_index=True), how


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
    graph = graph_steps(launches)
    seq = sequence_steps(launches, blocking)
    # A graph replayed a few times in set-up does not make the steps of an eager loop.
    if graph[0] is not None and (seq[0] is None or len(graph[0]) * 2 >= len(seq[0])):
        return drop_long_first(launches, *graph)
    if seq[0] is not None:
        return drop_long_first(launches, *seq)
    return None, seq[1]


def graph_steps(launches: pd.DataFrame) -> tuple:
    """A step per replay of the graph the thread launches most (at least MIN_REPEATS times):
    from its launch to the next; the last as long as the median step."""
    graph = launches["graph"].to_numpy()
    if graph.sum() < MIN_REPEATS:
        return None, "no graph replayed"
    keys = launches["graph_key"].to_numpy()[graph]
    values, counts = np.unique(keys, return_counts=True)
    key = values[np.argmax(counts)]
    if counts.max() < MIN_REPEATS:
        return None, "no graph replayed 3 times"
    at = np.flatnonzero(graph & (launches["graph_key"].to_numpy() == key))
    last = min(at[-1] + int(np.median(np.diff(at))), len(launches))
    bounds = np.column_stack([at, np.append(at[1:], last)])
    token = int(key)
    if token >> 32 == GRAPH:
        what = f"graph launch (exec {(token & 0xFFFFFFFF) - 1})"
    else:
        what = f"graph launch ({int(launches['records'].to_numpy()[at[0]])} nodes)"
    return bounds, what


def candidate_periods(token: np.ndarray) -> np.ndarray:
    """Spacings to try: for each op name, its longest run of occurrences at one constant
    spacing; the CANDIDATES spacings whose runs span the most launches. A name that occurs once
    a step has runs spanning the whole repeating region at the step's length."""
    order = np.argsort(token, kind="stable")
    t = token[order]
    same = t[1:] == t[:-1]
    gap = np.where(same, np.diff(order), -1)
    if not same.any():
        return np.empty(0, np.int64)
    new_run = np.ones(len(gap), dtype=bool)
    new_run[1:] = (gap[1:] != gap[:-1]) | ~same[1:] | ~same[:-1]
    starts = np.flatnonzero(new_run)
    length = np.diff(np.append(starts, len(gap)))
    value = gap[starts]
    ok = value > 0
    span = pd.Series(length[ok] * value[ok]).groupby(value[ok]).max()
    return span.sort_values(ascending=False, kind="stable").index.to_numpy()[:CANDIDATES]


def repeating_region(token: np.ndarray, p: int) -> tuple:
    """(first launch, past-the-last launch) of the longest stretch in which each unit of p
    launches agrees with the next in at least MIN_AGREEMENT of its positions; (0, 0) if none."""
    n = len(token)
    if n < 2 * p:
        return 0, 0
    match = np.concatenate([[0], np.cumsum(token[:-p] == token[p:])])
    # w[i]: agreement of the unit starting at i with the next one.
    w = (match[p:n - p + 1] - match[:n - 2 * p + 1]) / p
    good = np.concatenate([[False], w >= MIN_AGREEMENT, [False]])
    edges = np.flatnonzero(good[1:] != good[:-1])
    if len(edges) == 0:
        return 0, 0
    runs = edges.reshape(-1, 2)
    a, b = runs[np.argmax(runs[:, 1] - runs[:, 0])]
    return int(a), int(b - 1 + 2 * p)


def sequence_steps(launches: pd.DataFrame, blocking: pd.DataFrame) -> tuple:
    """The repeating unit of launches (see the module's docstring), cut at its phase."""
    token = launches["token"].to_numpy()
    n = len(token)
    if n < 2 * MIN_REPEATS:
        return None, "too few launches"
    units = []  # (p, first, past-the-last launch of its repeating region)
    for p in candidate_periods(token):
        a, e = repeating_region(token, int(p))
        if e - a >= max(MIN_REPEATS * p, MIN_COVER * n):
            units.append((int(p), a, e))
    if not units:
        return None, (f"no unit of launches repeats {MIN_REPEATS} times with "
                      f"{MIN_AGREEMENT:.0%} of its ops the same over {MIN_COVER:.0%} of them")
    flags = blocked_before(launches, blocking)
    synced = [u + sync_phase(flags, *u) for u in units]
    synced = [u for u in synced if u[3] is not None]
    if synced:
        p, a, e, phase, name = min(synced)
        how = f"phase after {name}"
    else:
        longest = max(e - a for _, a, e in units)
        p, a, e = min(u for u in units if u[2] - u[1] >= COVER_SHARE * longest)
        phase = gap_phase(launches, p, a, e)
        how = "phase at the largest host gap"
    first = a + (phase - a) % p
    lo = np.arange(first, e - p + 1, p)
    if len(lo) < MIN_REPEATS:
        return None, f"a unit of {p} launches repeats only {len(lo)} times"
    bounds = np.column_stack([lo, lo + p])
    agreement = float(np.mean(token[first:lo[-1]] == token[first + p:lo[-1] + p]))
    return bounds, f"repeating sequence of {p} launches ({agreement:.0%} the same), {how}"


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


def drop_long_first(launches: pd.DataFrame, bounds: np.ndarray, how: str) -> tuple:
    """The steps less a first one much longer (host time or GPU span) than the median of the
    others: prefill or warm-up, which the unit matched."""
    if len(bounds) <= MIN_REPEATS:
        return bounds, how
    start = launches["call_start"].to_numpy()
    lo, hi = bounds[:, 0], bounds[:, 1]
    host = np.where(hi < len(start), start[np.minimum(hi, len(start) - 1)], start[hi - 1]) \
        - start[lo]
    # Steps are contiguous: each reduceat segment is one step (the last runs to the end).
    gpu = (np.maximum.reduceat(launches["op_end"].to_numpy(), lo)
           - np.minimum.reduceat(launches["op_start"].to_numpy(), lo))
    for values, what in ((host, "host time"), (gpu, "GPU span")):
        rest = np.median(values[1:])
        if rest > 0 and values[0] > FIRST_STEP_FACTOR * rest:
            return bounds[1:], (f"{how}; a first step of {values[0] / rest:.1f}x the median "
                                f"{what} left out (prefill)")
    return bounds, how
