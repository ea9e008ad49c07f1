"""The host table of one device's analysis: the host time of the steps that ran on it, by named
code (measures/host.py), its summary, what removing each row would buy (measures/host_bound.py)
and, where the table cannot name the code, why, in one line."""

import numpy as np
import pandas as pd

from ..measures.host import host_table, summarize_host
from ..measures.host_bound import bounds
from ..measures.intervals import union_ns_by_group

# The steps' own range marks a step, not the code in it (function steps are code: the function).
OWN_RANGE_SOURCES = ("nvtx", "profiler_step")

NO_NAMED_CODE = ("no named code inside the steps: the capture holds no traced function and no "
                 "NVTX range of the program's on the steps' thread, so all of it is `other` "
                 "(`gapscope profile` traces generate()'s functions and the program's own modules;"
                 " --host-function M:Q names more)")
NO_API_CALLS = ("no CUDA API call on the steps' thread: the capture did not trace the CUDA "
                "runtime (`nsys profile --trace=cuda`), so python holds the launches too")


def why_not(summary: dict, rows: pd.DataFrame, api_seen: bool) -> str | None:
    """The one line that says what the table lacks, or None."""
    if not (rows["kind"] == "code").any():
        return NO_NAMED_CODE
    if not api_seen:
        return NO_API_CALLS
    return None


def host_busy(per_step: pd.DataFrame, ops: pd.DataFrame) -> np.ndarray:
    """Each step's GPU busy time over the work its host period launched: the union of the ops
    whose launch call starts in [host_start_ns, host_end_ns) on the step's thread (a generate()
    step's processors and sampling too, which lie outside the forward's range)."""
    busy = np.zeros(len(per_step))
    call, tid = ops["call_start"].to_numpy(), ops["tid"].to_numpy()
    for thread_tid, group in per_step.groupby("tid", sort=False):
        order = np.argsort(group["host_start_ns"].to_numpy(), kind="stable")
        starts = group["host_start_ns"].to_numpy()[order]
        ends = group["host_end_ns"].to_numpy()[order]
        mine = np.flatnonzero((tid == thread_tid) & (call >= 0))
        j = np.searchsorted(starts, call[mine], side="right") - 1
        jj = np.clip(j, 0, None)
        inside = (j >= 0) & (call[mine] < ends[jj])
        rows = mine[inside]
        if len(rows):
            union = union_ns_by_group(jj[inside], ops["start"].to_numpy()[rows],
                                      ops["end"].to_numpy()[rows])
            positions = group.index.to_numpy()[order]
            busy[per_step.index.get_indexer(positions[union.index.to_numpy()])] = union.to_numpy()
    return busy


def host_analysis(trace, steps: pd.DataFrame, on_device: pd.Index, ops: pd.DataFrame,
                  origin: dict) -> tuple:
    """(per-step frame, per-row frame, summary["host"]) for the steps that ran on the device,
    the step ranges `on_device` (steps' index) in the step table's order, whose ops are `ops`;
    in both frames `step_row` is the row of the step table (the Analysis' steps) a line
    belongs to."""
    per_step, rows = host_table(trace, steps, origin["steps_from"] in OWN_RANGE_SOURCES)
    per_step = per_step[per_step["step_index"].isin(on_device)].reset_index(drop=True)
    rows = rows[rows["step_index"].isin(on_device)].reset_index(drop=True)
    per_step = per_step.assign(busy_ns=host_busy(per_step, ops))
    summary = summarize_host(per_step, rows)
    if not per_step.empty:
        summary["bounds"] = bounds(per_step, rows, per_step["busy_ns"].to_numpy()).to_dict(
            "records")
        api_seen = bool((per_step["cuda_ns"] + per_step["sync_ns"]).sum() > 0)
        summary["why"] = why_not(summary, rows, api_seen)
    # The internal step index as the row of the step table each belongs to.
    position = pd.Series(np.arange(len(on_device)), index=on_device)
    per_step = per_step.assign(step_index=position.reindex(per_step["step_index"]).to_numpy())
    rows = rows.assign(step_index=position.reindex(rows["step_index"]).to_numpy())
    return (per_step.rename(columns={"step_index": "step_row"}),
            rows.rename(columns={"step_index": "step_row"}), summary)
