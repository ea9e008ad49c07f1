"""The repeating unit of a thread's launches, where no graph is replayed (infer.py reads the
trace; METRICS.md, "Inferred steps").

The steps are the unit of p launches that the sequence of op names repeats, found from the
names that occur m times a step (each occurrence and the m-th next are p apart), checked
position by position (launch i names what launch i + p names), and cut where the thread blocks
once a unit (the stop check's sync ends a step) or, without one, at its largest recurring host
gap. Nothing repeating: no steps, never invented ones.
"""

import numpy as np
import pandas as pd

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
