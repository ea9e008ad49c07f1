"""What removing a row's host cost would buy (METRICS.md, "Host time: what removing it buys"):
per step, the host work that remains once a row's python and CUDA-call time is gone (plus what
replaces it: one graph launch for a forward replayed as a CUDA graph), set against the step's
GPU busy time. The step cannot run faster than the larger of the two, nor, with no overlap of
host and GPU at all, slower than their sum (nor than it runs now):

    lower = max(busy, remaining)      upper = min(busy + remaining, step)
    remaining = host period - blocked (sync) - removed + added
    step = max(host period, busy)

`step` is the step as it runs now: its host period, or, where the host runs ahead of the GPU
(graph replays queued faster than they run), the GPU work it launched; removing host work from
such a step buys nothing, and the bound says so (1.00x).

Time blocked in a synchronizing call is the host waiting for the GPU, not host work: it is
left out of `remaining` (the GPU's side of it is in `busy`).
"""

import numpy as np
import pandas as pd

from ..measures.host import OTHER, is_forward, typical
from ..measures.stats import median

# One launch of a captured graph, where a forward becomes one: the host's cost of
# cudaGraphLaunch untraced, a few µs on the H200 (docs/PROFILING.md); a constant of the bound.
GRAPH_LAUNCH_NS = 10_000
# Rows given a bound of their own, largest first.
TOP_ROWS = 5
FORWARD_GRAPH = "forward as one CUDA graph"
FORWARD_PYTHON = "forward's Python gone, its launches kept"


def limits(busy, remaining, host):
    """(step, lower, upper) of the module docstring, for arrays a step or single figures."""
    step = np.maximum(host, busy)
    lower = np.maximum(busy, remaining)
    return step, lower, np.maximum(np.minimum(busy + remaining, step), lower)


def scenarios(per_step: pd.DataFrame, rows: pd.DataFrame) -> list:
    """[(name, removed ns a step, added ns a step)], each an array over per_step's rows: the
    forward replayed as one graph, the forward's Python gone (what compiling it without graphs
    approaches), and each of the largest rows gone (its own time, not its callees')."""
    out = []
    forward = (per_step["forward_ns"].to_numpy() > 0).any()
    if forward:
        n = len(per_step)
        out.append((FORWARD_GRAPH, per_step["forward_ns"].to_numpy(),
                    np.full(n, GRAPH_LAUNCH_NS)))
        out.append((FORWARD_PYTHON, per_step["forward_python_ns"].to_numpy(), np.zeros(n)))
    if rows.empty:
        return out
    work = rows.assign(work_ns=rows["python_ns"] + rows["cuda_ns"])
    keep = per_step.loc[typical(per_step), "step_index"]
    mean = work[work["step_index"].isin(keep)].groupby("name")["work_ns"].sum()
    # A forward's own row is the first scenario's already.
    mean = mean[[not (forward and is_forward(r)) for r in mean.index]]
    for row in mean[mean > 0].sort_values(ascending=False, kind="stable").index[:TOP_ROWS]:
        mine = work[work["name"] == row].groupby("step_index")["work_ns"].sum()
        removed = mine.reindex(per_step["step_index"], fill_value=0).to_numpy()
        out.append((f"{row} gone" if row != OTHER else "other (no named code) gone", removed,
                    np.zeros(len(per_step))))
    return out


def bounds(per_step: pd.DataFrame, rows: pd.DataFrame, busy_ns: np.ndarray) -> pd.DataFrame:
    """One row a scenario: medians over the steps of the removed time, the lower and upper
    bound, the measured host period, GPU busy and step, and the speed-up each bound gives (the
    measured step over the upper bound: at least; over the lower: at most)."""
    columns = ["scenario", "removed_ns", "lower_ns", "upper_ns", "host_period_ns", "busy_ns",
               "step_ns", "speedup_min", "speedup_max"]
    if per_step.empty:
        return pd.DataFrame(columns=columns)
    busy = np.nan_to_num(np.asarray(busy_ns, dtype=np.float64))
    work = (per_step["host_period_ns"] - per_step["sync_ns"]).to_numpy(dtype=np.float64)
    host = per_step["host_period_ns"].to_numpy(dtype=np.float64)
    out = []
    for name, removed, added in scenarios(per_step, rows):
        step, lower, upper = limits(busy, np.maximum(work - removed + added, 0), host)
        lo, hi, measured = median(lower), median(upper), median(step)
        out.append({"scenario": name, "removed_ns": median(removed), "lower_ns": lo,
                    "upper_ns": hi, "host_period_ns": median(host), "busy_ns": median(busy),
                    "step_ns": measured,
                    "speedup_min": measured / hi if hi else None,
                    "speedup_max": measured / lo if lo else None})
    return pd.DataFrame(out, columns=columns)
