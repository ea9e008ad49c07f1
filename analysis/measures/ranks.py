"""Across the ranks of a tensor-parallel run: per step the slowest rank, and how long the ranks
waited for each other in collectives (docs/METRICS.md, "Ranks").

Input: each rank's Analysis (one capture a rank, `capture_<RANK>`) and its ops' strings.
Each nsys export counts its times from its own session start; `align` puts the ranks'
collectives on rank 0's time base by the difference of the session starts on the host's UTC
clock (readers.nsys.read_session_start_ns). Periods need no alignment (differences on one rank).
A collective (an NCCL kernel: its name holds "nccl" or "AllReduce") cannot finish before the
last rank has entered it, and its waiting is spent inside the kernel, so no gap shows it. Its
estimate is the spread of the collective's start across ranks: the rank that
started it last is the one the others waited for, and each other rank waited (last start - its
own start). Collectives are matched by their order within the step: NCCL runs a group's
collectives in the same order on every rank.
"""

import re

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..readers.trace import op_names

COLLECTIVE = re.compile(r"nccl|AllReduce")


def collectives(ops: pd.DataFrame, strings: dict, steps: pd.DataFrame) -> pd.DataFrame:
    """One rank's collective kernels: step, k (0, 1, ... by start within the step), start, end.
    A collective belongs to the step whose GPU span [gpu_start, gpu_end] holds its start."""
    names = (ops["name"].to_numpy(dtype=object) if "name" in ops.columns  # Analysis.ops
             else op_names(ops["kind"].to_numpy(), ops["name_id"].to_numpy(), strings))
    ops = ops.rename(columns={"start_ns": "start", "end_ns": "end"})
    mine = ops[[bool(COLLECTIVE.search(n)) for n in names]].sort_values(["start", "corr"])
    spans = steps.dropna(subset=["gpu_start_ns"]).sort_values("gpu_start_ns")
    lo = spans["gpu_start_ns"].to_numpy(dtype=np.int64)
    hi = spans["gpu_end_ns"].to_numpy(dtype=np.int64)
    start = mine["start"].to_numpy(dtype=np.int64)
    j = np.searchsorted(lo, start, side="right") - 1
    inside = (j >= 0) & (start <= hi[np.clip(j, 0, None)])
    out = pd.DataFrame({"step": spans["step"].to_numpy()[j[inside]], "start": start[inside],
                        "end": mine["end"].to_numpy(dtype=np.int64)[inside]})
    out["k"] = out.groupby("step").cumcount()
    return out[["step", "k", "start", "end"]].reset_index(drop=True)


def align(coll_by_rank: list[pd.DataFrame], session_starts_ns: list[int]) -> list[pd.DataFrame]:
    """Each rank's collectives on rank 0's time base: + (its session start - rank 0's)."""
    return [c.assign(start=c["start"] + (s - session_starts_ns[0]),
                     end=c["end"] + (s - session_starts_ns[0]))
            for c, s in zip(coll_by_rank, session_starts_ns, strict=True)]


def slowest_ranks(steps_by_rank: list[pd.DataFrame]) -> pd.DataFrame:
    """Per step every rank ran: slowest_rank (largest GPU period; the lowest rank on a tie),
    period_ns_max, period_ns_min, period_spread_ns = max - min."""
    periods = _by_rank([s.set_index("step")["period_ns"] for s in steps_by_rank])
    values = periods.to_numpy(dtype=np.int64)
    return pd.DataFrame({
        "step": periods.index.to_numpy(),
        "slowest_rank": values.argmax(axis=1),
        "period_ns_max": values.max(axis=1),
        "period_ns_min": values.min(axis=1),
        "period_spread_ns": values.max(axis=1) - values.min(axis=1),
    })


def collective_waits(coll_by_rank: list[pd.DataFrame]) -> pd.DataFrame:
    """One row a collective (step, k) every rank ran: last_rank (the latest to start it: the one
    waited for), start_spread_ns (its start, last - first), wait_ns (the others' waits summed:
    sum over ranks of last start - own start) and end_spread_ns (its end, last - first: a check of
    the time base, since a collective ends on every rank once the last one's data arrived)."""
    counts = _by_rank([c.groupby("step").size() for c in coll_by_rank], fill=0)
    uneven = counts.nunique(axis=1) > 1
    if uneven.any():
        step = counts.index[uneven][0]
        raise TraceError(f"step {step}: the ranks ran {counts.loc[step].tolist()} collectives "
                         "(by rank): the captures are not of one run")
    starts = _by_rank([c.set_index(["step", "k"])["start"] for c in coll_by_rank])
    values = starts.to_numpy(dtype=np.int64)
    ends = _by_rank([c.set_index(["step", "k"])["end"] for c in coll_by_rank])
    ends = ends.to_numpy(dtype=np.int64)
    last = values.max(axis=1)
    return pd.DataFrame({
        "step": starts.index.get_level_values("step").to_numpy(),
        "k": starts.index.get_level_values("k").to_numpy(),
        "last_rank": values.argmax(axis=1),
        "start_spread_ns": last - values.min(axis=1),
        "wait_ns": (last[:, None] - values).sum(axis=1),
        "end_spread_ns": ends.max(axis=1) - ends.min(axis=1),
    })


def rank_table(steps_by_rank: list[pd.DataFrame], coll_by_rank: list[pd.DataFrame]) -> pd.DataFrame:
    """Per step: slowest_ranks' columns, then collectives (their count), collective_wait_ns (the
    step's wait_ns summed) and waited_rank (last_rank of its widest collective; <NA> without
    collectives)."""
    table = slowest_ranks(steps_by_rank)
    waits = collective_waits(coll_by_rank)
    by_step = waits.groupby("step")
    widest = waits.loc[by_step["start_spread_ns"].idxmax().to_numpy()].set_index("step")
    steps = table["step"]
    table["collectives"] = steps.map(by_step.size()).fillna(0).astype(np.int64)
    table["collective_wait_ns"] = steps.map(by_step["wait_ns"].sum()).fillna(0).astype(np.int64)
    table["waited_rank"] = steps.map(widest["last_rank"]).astype("Int64")
    return table


def _by_rank(series: list[pd.Series], fill=None) -> pd.DataFrame:
    """Rank r's values in column r, on the keys every rank has (or all keys, `fill` elsewhere)."""
    frame = pd.concat(series, axis=1, keys=range(len(series)),
                      join="inner" if fill is None else "outer").sort_index()
    return frame.dropna() if fill is None else frame.fillna(fill)
