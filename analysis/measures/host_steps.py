"""The host table of one device's analysis: the host time of the steps that ran on it, by named
code (measures/host.py), its summary, what removing each row would buy (measures/host_bound.py)
and, where the table cannot name the code, why, in one line."""

import numpy as np
import pandas as pd

from ..measures.host import host_table, summarize_host
from ..measures.host_bound import bounds

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


def host_analysis(trace, steps: pd.DataFrame, on_device: pd.Index, table: pd.DataFrame,
                  origin: dict) -> tuple:
    """(per-step frame, per-row frame, summary["host"]) for the steps of `table`, whose rows
    are the step ranges `on_device` (steps' index) in order; in both frames `step_row` is the
    row of `table` (the Analysis' steps) a line belongs to."""
    per_step, rows = host_table(trace, steps, origin["steps_from"] in OWN_RANGE_SOURCES)
    per_step = per_step[per_step["step_index"].isin(on_device)].reset_index(drop=True)
    rows = rows[rows["step_index"].isin(on_device)].reset_index(drop=True)
    busy = pd.Series(table["busy_ns"].to_numpy(dtype=np.float64, na_value=np.nan),
                     index=on_device)
    per_step = per_step.assign(busy_ns=busy.reindex(per_step["step_index"]).to_numpy())
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
