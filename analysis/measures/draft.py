"""Speculative decoding (METRICS.md, "Speculative decoding"): where a draft model's forwards
interleave with the target's (`generate(assistant_model=draft)`), the steps are the target's
verifications, each from the draft work that feeds it to the target forward's end; the tokens
each verification added, from the hook's `gapscope.accepted N` marks.

    thread  |get_candidates ..........|          |get_candidates ...
    forward   [d] [d] [d]  (the draft's)  [T]       [d] [d]            [T]
    marks                                     ^ accepted 3                  ^ accepted 1
    steps   |Step 1 ..............................|  |Step 2 ...............|

Which forwards are the draft's: those inside a `….get_candidates` range, or inside a
`GenerationMixin.generate` that is itself inside another (the draft's own generate()); where
the capture has neither kind of range, those of the smaller of two groups of forwards by GPU
work (draft_by_work).
"""

import re

import numpy as np
import pandas as pd

from ..measures.intervals import union_ns_by_group
from ..measures.stats import median
from ..measures.steps import assign_steps, outermost

CANDIDATES = re.compile(r"\.get_candidates$")
GENERATE = "transformers.generation.utils.GenerationMixin.generate"
ACCEPTED = re.compile(r"^gapscope\.accepted (\d+)$")
# The host table's row of the draft's forwards: this, then the forward's name.
DRAFT_ROW = "draft: "
# The fallback by GPU work: two groups of forwards, the larger's ops a forward at least
# WORK_RATIO times the smaller's, each of at least MIN_FORWARDS.
WORK_RATIO = 2
MIN_FORWARDS = 3


def _inside(inner: pd.DataFrame, outer: pd.DataFrame) -> np.ndarray:
    """Whether each `inner` range lies within an `outer` range of its thread."""
    out = np.zeros(len(inner), dtype=bool)
    tid, start, end = (inner[c].to_numpy() for c in ("tid", "start", "end"))
    for thread, group in outermost(outer).groupby("tid", sort=False):
        group = group.sort_values("start", kind="stable")
        mine = np.flatnonzero(tid == thread)
        j = np.searchsorted(group["start"].to_numpy(), start[mine], side="right") - 1
        ok = j >= 0
        out[mine[ok]] = end[mine[ok]] <= group["end"].to_numpy()[j[ok]]
    return out


def draft_by_ranges(forwards: pd.DataFrame, ranges: pd.DataFrame) -> tuple | None:
    """(which forwards are the draft's, the get_candidates ranges) by the ranges that hold the
    draft's work; None where the capture has neither kind."""
    names = ranges["name"].astype(str)
    candidates = ranges[names.str.contains(CANDIDATES).to_numpy()]
    generates = ranges[(names == GENERATE).to_numpy()]
    nested = generates.drop(outermost(generates).index)
    holders = pd.concat([candidates, nested])
    if holders.empty:
        return None
    return _inside(forwards, holders), candidates


def forward_ops(forwards: pd.DataFrame, ops: pd.DataFrame) -> np.ndarray:
    """Ops (distinct launch calls) launched inside each forward range (forwards' rows)."""
    owner = assign_steps(ops, forwards.reset_index(drop=True))
    mine = owner >= 0
    counts = pd.Series(ops["corr"].to_numpy()[mine]).groupby(owner[mine]).nunique()
    return counts.reindex(range(len(forwards)), fill_value=0).to_numpy()


def _small_group(counts: np.ndarray) -> np.ndarray | None:
    """The forwards of the smaller-work group, where the counts split in two at least
    WORK_RATIO apart (at their largest ratio), each of MIN_FORWARDS or more; else None."""
    values = np.unique(counts)
    if len(values) < 2:
        return None
    ratio = values[1:] / values[:-1]
    k = int(np.argmax(ratio))
    small = counts <= values[k]
    if (ratio[k] < WORK_RATIO or small.sum() < MIN_FORWARDS
            or (~small).sum() < MIN_FORWARDS):
        return None
    return small


def _feeds(small: np.ndarray) -> bool:
    """The small-work forwards (in time order) feed the large ones: at most one large-work
    forward before the first small-work one (a target's prefill before the draft's), the last
    forward large-work, and small-work ones between at least half of the consecutive
    large-work pairs."""
    large = np.flatnonzero(~small)
    between = int((np.diff(large) > 1).sum())
    return bool(np.argmax(small) <= 1 and not small[-1] and 2 * between >= len(large) - 1)


def draft_by_work(forwards: pd.DataFrame, ops: pd.DataFrame) -> np.ndarray:
    """Which forwards are the draft's by GPU work, thread by thread: those of the smaller-work
    group (_small_group) where it feeds the other (_feeds); forwards that launched nothing are
    set aside."""
    counts = forward_ops(forwards, ops)
    draft = np.zeros(len(forwards), dtype=bool)
    tid = forwards["tid"].to_numpy()
    order = np.argsort(forwards["start"].to_numpy(), kind="stable")
    for thread in pd.unique(tid):
        rows = order[(tid[order] == thread) & (counts[order] > 0)]
        small = _small_group(counts[rows])
        if small is not None and _feeds(small):
            draft[rows[small]] = True
    return draft


def _first_after(starts: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple:
    """(whether any, the first) of the sorted `starts` in [lo, hi), for each pair."""
    k = np.searchsorted(starts, lo, side="left")
    ok = k < len(starts)
    ok[ok] = starts[k[ok]] < hi[ok]
    first = np.zeros(len(lo), dtype=np.int64)
    first[ok] = starts[k[ok]]
    return ok, first


def verification_steps(target: pd.DataFrame, draft: pd.DataFrame,
                       candidates: pd.DataFrame) -> pd.DataFrame:
    """The target forwards as steps: each from the first get_candidates range (else the first
    draft forward) after the thread's previous target forward ended and before it starts, to
    its own end; numbered 1, 2, ... within their thread."""
    out = target.sort_values(["start", "end"], kind="stable").reset_index(drop=True)
    start = out["start"].to_numpy().copy()
    for thread, rows in out.groupby("tid", sort=False).indices.items():
        t_start = start[rows]
        prev_end = np.concatenate([[np.iinfo(np.int64).min],
                                   out["end"].to_numpy()[rows][:-1]])
        begin = t_start
        for holder in (draft, candidates):  # get_candidates, where there is one, first
            mine = np.sort(holder.loc[holder["tid"].to_numpy() == thread, "start"].to_numpy())
            ok, first = _first_after(mine, prev_end, t_start)
            begin = np.where(ok, first, begin)
        start[rows] = begin
    out["start"] = start
    out["index"] = out.groupby("tid", sort=False).cumcount().to_numpy() + 1
    return out


def speculative_steps(trace, steps: pd.DataFrame, origin: dict) -> tuple:
    """(steps, origin) with the draft's forwards taken out of function steps (module
    docstring) and origin["draft"]: {"ranges": the draft's forwards, "found_by": "ranges" or
    "kernels"}; unchanged where no forward is the draft's. Then, for any steps, their tokens
    (step_tokens) as a `tokens` column where the capture marks them."""
    if origin["steps_from"] == "function" and len(steps) >= 2:
        by_ranges = draft_by_ranges(steps, trace.ranges)
        found_by = "kernels" if by_ranges is None else "ranges"
        draft, candidates = by_ranges or (draft_by_work(steps, trace.ops), steps.iloc[0:0])
        if draft.any() and not draft.all():
            forwards = steps[draft].reset_index(drop=True)
            steps = verification_steps(steps[~draft], forwards, candidates)
            origin = origin | {"draft": {"ranges": forwards, "found_by": found_by}}
    tokens = step_tokens(steps, trace.marks)
    if tokens is not None:
        steps = steps.assign(tokens=tokens)
    return steps, origin


def step_tokens(steps: pd.DataFrame, marks: pd.DataFrame) -> pd.arrays.IntegerArray | None:
    """Tokens each step added: the sum of N over the `gapscope.accepted N` marks in
    [its start, the next step's start) on its thread (NA for a step without one); None where no
    step has one."""
    hit = marks["name"].astype(str).str.extract(ACCEPTED, expand=False)
    marks = marks.assign(n=pd.to_numeric(hit)).dropna(subset=["n"])
    if marks.empty or steps.empty:
        return None
    total = np.zeros(len(steps), dtype=np.int64)
    seen = np.zeros(len(steps), dtype=bool)
    m_tid, m_start, n = marks["tid"].to_numpy(), marks["start"].to_numpy(), marks["n"].to_numpy()
    for thread, rows in steps.groupby("tid", sort=False).indices.items():
        rows = rows[np.argsort(steps["start"].to_numpy()[rows], kind="stable")]
        starts = steps["start"].to_numpy()[rows]
        mine = np.flatnonzero(m_tid == thread)
        j = np.searchsorted(starts, m_start[mine], side="right") - 1
        ok = j >= 0
        np.add.at(total, rows[j[ok]], n[mine[ok]].astype(np.int64))
        seen[rows[j[ok]]] = True
    if not seen.any():
        return None
    out = pd.array(total, dtype="Int64")
    out[~seen] = pd.NA
    return out


def draft_named(ranges: pd.DataFrame, draft: pd.DataFrame) -> pd.DataFrame:
    """The ranges with the draft's forwards renamed `draft: NAME` (the host table's row)."""
    key = ["tid", "start", "end", "name"]
    hit = ranges[key].merge(draft[key].drop_duplicates().assign(_draft=True), on=key,
                            how="left")["_draft"].notna().to_numpy()
    names = ranges["name"].to_numpy(dtype=object).copy()
    names[hit] = [DRAFT_ROW + n for n in names[hit]]
    return ranges.assign(name=names)


def tokens_summary(table: pd.DataFrame) -> dict:
    """The summary's token keys over the steps that have tokens (METRICS.md); {} where none
    has."""
    if "tokens" not in table.columns or table["tokens"].isna().all():
        return {}
    known = table[table["tokens"].notna()]
    tokens = int(known["tokens"].sum())
    period = known["period_ns"].astype("Float64").sum()
    return {
        "tokens": tokens,
        "token_steps": len(known),
        "tokens_per_step_mean": tokens / len(known),
        "tokens_per_step_median": median(known["tokens"]),
        "period_ns_per_token": float(period) / tokens if tokens else None,
    }


def draft_summary(draft: dict, ops: pd.DataFrame, on_device: pd.Index, table: pd.DataFrame,
                  host: dict) -> dict:
    """summary["draft"]: the draft's forwards (`name`, `row`, `found_by`, `forwards`,
    `forwards_per_step_mean`), their GPU busy time a step (`busy_ns_median`, `busy_share` of the
    steps' busy time) and their host row (`host_ns_mean`, `host_share`). `ops` carry `step`, the
    row in the steps of each; `on_device`: the steps of the table, in its order."""
    forwards = draft["ranges"]
    inside = assign_steps(ops, forwards) >= 0
    mine = inside & (ops["step"].to_numpy() >= 0)
    busy = union_ns_by_group(ops["step"].to_numpy()[mine], ops["start"].to_numpy()[mine],
                             ops["end"].to_numpy()[mine]).reindex(on_device, fill_value=0)
    steps_busy = int(table["busy_ns"].sum())
    name = str(forwards["name"].mode().iloc[0])
    row = next((r for r in (host or {}).get("rows", []) if r["name"] == DRAFT_ROW + name), None)
    return {
        "name": name,
        "row": DRAFT_ROW + name,
        "found_by": draft["found_by"],
        "forwards": len(forwards),
        "forwards_per_step_mean": len(forwards) / len(table) if len(table) else None,
        "busy_ns_median": median(busy),
        "busy_share": float(busy.sum()) / steps_busy if steps_busy else None,
        "host_ns_mean": None if row is None else float(row["ns"]),
        "host_share": None if row is None else float(row["share"]),
    }
