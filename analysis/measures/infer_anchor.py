"""Steps between a thread's blocking calls, where the launches of a step change with its shape
(METRICS.md, "Inferred steps", 3.; infer.py reads the trace).

A loop without a KV cache runs the whole growing sequence every step: cuBLAS picks other GEMM
kernels and drops split-K as the length grows, attention kernels split otherwise, so no unit of
launches repeats position by position (infer_sequence.py) over the loop. Its blocking call does:

    launches  A B C D E ..sync | A B C' D E ..sync | A B C' D E F ..sync | ...
              |--- step k -----|---- step k+1 -----|----- step k+2 ------|

Each blocking call ends a step (the steps start at the first launch after it, as there); q
consecutive calls make one where the loop blocks q times a step (1 to MAX_BLOCKS_PER_UNIT). Two
neighbouring steps are alike when most of their ops have the same names, counted as bags (a
kernel swapped for another, one added or dropped, costs only itself): Σ_name min(count in k,
count in k+1) / the larger step's launches, at least MIN_ALIKE. Steps come from the stretches of
MIN_REPEATS alike steps or more; set-up, a prefill unlike the decode steps and the work between
two generate() calls break the stretches and are in no step.

Where the loop never blocks, the steps run from one launch of an op to the next instead: the op
launched once a step (embedding, sampling), found as the op whose launches are evenly spaced and
whose steps so cut are alike over the most launches.

Everything is numpy over the launches: one sort of (step, name) keys a grouping.
"""

import numpy as np
import pandas as pd

from ..measures.infer_sequence import (
    MAX_BLOCKS_PER_UNIT,
    MIN_COVER,
    MIN_REPEATS,
    MIN_UNIT,
    blocked_before,
)

# Of two neighbouring steps, the share of the larger one's ops whose names the other one has
# too (as many times) for the two to be steps of one loop: a no-KV loop's steps, 152 and 164
# kernels with nine names apart, share 87%; two halves of a step, or a step and set-up, far less.
MIN_ALIKE = 0.75
# Groupings whose steps cover within this share of the thread's launches of the best (and one
# step) are ties: the one with fewer blocking calls a step wins, then the one cut at the longer
# host wait.
TIE_SHARE = 0.05
# Where the loop never blocks: the ops tried as the one launched once a step, those whose
# launches are the most evenly spaced (a layer's ops recur unevenly: within a step, then across).
CANDIDATE_OPS = 24


def alike(token: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For contiguous steps (rows lo, hi of launch positions, hi[k] = lo[k + 1]), the share of
    ops of step k and step k + 1 alike: Σ_name min(n_k(name), n_k+1(name)) / max(n_k, n_k+1)."""
    if len(lo) < 2:
        return np.empty(0)
    idx = np.arange(lo[0], hi[-1])
    step = np.searchsorted(lo, idx, side="right") - 1
    _, code = np.unique(token[idx], return_inverse=True)
    names = int(code.max()) + 1
    keys, counts = np.unique(step.astype(np.int64) * names + code, return_counts=True)
    # Step k + 1's count of a name, looked up at step k's key for it.
    later = keys >= names
    shifted, later_counts = keys[later] - names, counts[later]
    at = np.minimum(np.searchsorted(keys, shifted), len(keys) - 1)
    found = keys[at] == shifted
    common = np.bincount(shifted[found] // names,
                         weights=np.minimum(counts[at[found]], later_counts[found]),
                         minlength=len(lo) - 1)[:len(lo) - 1]
    n = hi - lo
    return common / np.maximum(n[:-1], n[1:])


def stretches(ok: np.ndarray) -> np.ndarray:
    """(first step, past-the-last step) of the runs of MIN_REPEATS steps or more in which each
    step is alike the next (ok[k]: step k and k + 1 alike)."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], ok.astype(np.int8), [0]])))
    runs = edges.reshape(-1, 2)
    runs[:, 1] += 1  # alike pairs k .. b - 1: steps k .. b
    return runs[runs[:, 1] - runs[:, 0] >= MIN_REPEATS]


def grouping(launches: pd.DataFrame, cuts: np.ndarray, q: int = 1) -> dict | None:
    """The steps between consecutive `cuts` (launch positions; q blocking calls a step), in the
    stretches where they are alike and hold MIN_UNIT launches a blocking call at least (a
    loading thread's blocking copies, one after the other, are no steps): bounds (first launch,
    past-the-last), the covered launches, the least alike share, the stretches, the median host
    gap before a step's first launch."""
    if len(cuts) < MIN_REPEATS + 1:
        return None
    token = launches["token"].to_numpy()
    lo, hi = cuts[:-1], cuts[1:]
    share = alike(token, lo, hi)
    size = hi - lo
    big = size >= MIN_UNIT * q
    ok = (share >= MIN_ALIKE) & big[:-1] & big[1:]
    runs = stretches(ok)
    if not len(runs):
        return None
    chosen = np.concatenate([np.arange(a, b) for a, b in runs])
    pairs = np.concatenate([np.arange(a, b - 1) for a, b in runs])
    start = launches["call_start"].to_numpy()
    end = launches["call_end"].to_numpy()
    first = lo[chosen]
    gap = start[first] - end[np.maximum(first - 1, 0)]
    return {"bounds": np.column_stack([lo[chosen], hi[chosen]]),
            "cover": int(size[chosen].sum()), "least": float(share[pairs].min()),
            "stretches": len(runs), "host_gap": float(np.median(gap)),
            "sizes": (int(size[chosen].min()), int(size[chosen].max()))}


def anchored_steps(launches: pd.DataFrame, blocking: pd.DataFrame) -> tuple:
    """(bounds, how) of the steps between the thread's blocking calls (module docstring), or
    (None, why not)."""
    blocked, names = blocked_before(launches, blocking)
    cuts = np.flatnonzero(blocked)
    if len(cuts) < MIN_REPEATS + 1:
        return None, "too few blocking calls to cut steps at"
    found = []  # (q, phase, grouping)
    for q in range(1, MAX_BLOCKS_PER_UNIT + 1):
        for phase in range(q):
            g = grouping(launches, cuts[phase::q], q)
            if g is not None and g["cover"] >= MIN_COVER * len(launches):
                found.append((q, phase, g))
    if not found:
        return None, (f"no {MIN_REPEATS} steps in a row between blocking calls with "
                      f"{MIN_ALIKE:.0%} of their ops alike over {MIN_COVER:.0%} of the launches")
    best = max(found, key=lambda f: f[2]["cover"])[2]
    ties = [f for f in found if f[2]["cover"] >= best["cover"] - slack(best, len(launches))]
    q = min(f[0] for f in ties)
    q, phase, g = max((f for f in ties if f[0] == q), key=lambda f: f[2]["host_gap"])
    call = pd.Series(names[g["bounds"][:, 0]].astype(str)).mode().iloc[0]
    each = f"each {call}" if q == 1 else f"every {q} blocking calls, after {call}"
    low, high = g["sizes"]
    size = f"{low} launches" if low == high else f"{low} to {high} launches"
    how = (f"steps between blocking calls ({each}): {size}, {g['least']:.0%} or more of each "
           "step's ops alike the next's")
    if g["stretches"] > 1:
        how += f", in {g['stretches']} stretches"
    return g["bounds"], how


def op_anchored_steps(launches: pd.DataFrame, name_of=str) -> tuple:
    """(bounds, how) of the steps from one launch of an op to the next, where the loop never
    blocks: the op named once a step (its launches the most evenly spaced, CANDIDATE_OPS tried),
    whose steps are alike (as above) over the most launches; of ops that tie, the one the host
    waits longest before (where the loop starts). `name_of`: an op's name from its token.
    (None, why not) otherwise."""
    token = launches["token"].to_numpy()
    n = len(token)
    order = np.argsort(token, kind="stable")
    t, pos = token[order], order
    first = np.ones(n, dtype=bool)
    first[1:] = t[1:] != t[:-1]
    group = np.cumsum(first) - 1
    counts = np.bincount(group)
    spacing = np.diff(pos).astype(np.float64)
    same = group[1:] == group[:-1]
    mean = np.bincount(group[1:][same], weights=spacing[same], minlength=len(counts))
    square = np.bincount(group[1:][same], weights=spacing[same] ** 2, minlength=len(counts))
    with np.errstate(divide="ignore", invalid="ignore"):
        mean, square = mean / (counts - 1), square / (counts - 1)
        spread = np.sqrt(np.maximum(square - mean ** 2, 0)) / mean
    eligible = np.flatnonzero((counts > MIN_REPEATS) & (mean >= MIN_UNIT))
    found = []
    for g in eligible[np.argsort(spread[eligible], kind="stable")][:CANDIDATE_OPS]:
        cuts = np.sort(pos[group == g])
        found_g = grouping(launches, cuts)
        if found_g is not None and found_g["cover"] >= MIN_COVER * n:
            found.append((found_g, int(token[cuts[0]])))
    if not found:
        return None, (f"no op launched once a step whose {MIN_REPEATS} steps in a row have "
                      f"{MIN_ALIKE:.0%} of their ops alike over {MIN_COVER:.0%} of the launches")
    best = max(found, key=lambda f: f[0]["cover"])[0]
    g, op = max((f for f in found if f[0]["cover"] >= best["cover"] - slack(best, n)),
                key=lambda f: f[0]["host_gap"])
    low, high = g["sizes"]
    size = f"{low} launches" if low == high else f"{low} to {high} launches"
    how = (f"steps from one launch of {name_of(op)} to the next (no blocking call): {size}, "
           f"{g['least']:.0%} or more of each step's ops alike the next's")
    if g["stretches"] > 1:
        how += f", in {g['stretches']} stretches"
    return g["bounds"], how


def slack(best: dict, launches: int) -> float:
    """How many launches less than the best grouping's a tie may cover: TIE_SHARE of the
    thread's, and one of the best's steps (cut at another phase, a stretch gains or loses one at
    its edge)."""
    return TIE_SHARE * launches + best["sizes"][1]


def cover(bounds: np.ndarray | None) -> int:
    """The launches a thread's steps hold."""
    return 0 if bounds is None else int((bounds[:, 1] - bounds[:, 0]).sum())
