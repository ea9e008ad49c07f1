"""The bandwidth floor of the captured steps, next to what they took and the DRAM rate measured.

The harness writes into run.json `floor.bytes_by_step` (the bytes each profiled step must move:
weights, the KV slots it reads, its KV write, its activations; harness/floor.py) and, through
profile.sh's untraced timing, `untraced.floor.copy_bytes_per_s` (the device-to-device copy rate).
The floor of a step is its bytes over that rate; the achieved fraction is floor / the step's
time: its GPU period where the capture traced CUDA, its GPU period in the untraced twin (the
same steps, no profiler: the figure to quote), and bench's untraced ms/step (all the steps).
"""

import numpy as np
import pandas as pd

from ..errors import TraceError


def _get(info: dict, *keys):
    for key in keys:
        info = info.get(key) if isinstance(info, dict) else None
    return info


def _median_pct(floor_ns, period_ns, mean_floor_ns) -> float | None:
    """Median over the steps of floor / period × 100; None without periods."""
    if period_ns is None or mean_floor_ns is None:
        return None
    ratio = floor_ns / period_ns
    return float(100 * np.nanmedian(ratio)) if np.isfinite(ratio).any() else None


def floor_summary(info: dict, steps: pd.DataFrame, metrics: dict | None) -> dict | None:
    """None when run.json lacks the bytes or the copy rate (an export given alone, older runs)."""
    by_step = _get(info, "floor", "bytes_by_step")
    rate = _get(info, "untraced", "floor", "copy_bytes_per_s")
    if not by_step or not rate:
        return None
    untraced_ms = _get(info, "untraced", "ms_per_step_median")
    try:
        bytes_of = dict((int(s), float(b)) for s, b in by_step)
        rate = float(rate)
        untraced_ms = None if untraced_ms is None else float(untraced_ms)
    except (TypeError, ValueError):
        raise TraceError("run.json: floor.bytes_by_step, untraced.floor.copy_bytes_per_s or "
                         "untraced.ms_per_step_median is not numbers; the harness writes "
                         "them: run it again or remove them") from None
    floor_ns = np.array([bytes_of.get(int(s), np.nan) for s in steps["step"]]) / rate * 1e9
    mean_floor_ns = float(np.nanmean(floor_ns)) if np.isfinite(floor_ns).any() else None
    period = (steps["period_ns"].to_numpy(dtype=np.float64, na_value=np.nan)
              if "period_ns" in steps.columns else None)
    traced_pct = _median_pct(floor_ns, period, mean_floor_ns)
    twin = (steps["untraced_period_ns"].to_numpy(dtype=np.float64, na_value=np.nan)
            if "untraced_period_ns" in steps.columns else None)
    return {
        "floor_ns_per_step": mean_floor_ns,
        "bytes_per_step": float(np.mean(list(bytes_of.values()))),
        "copy_gbps": rate / 1e9,
        "kv_slots_read": _get(info, "floor", "kv_slots_read"),
        "floor_pct_of_period": traced_pct,
        "floor_pct_of_untraced_period": _median_pct(floor_ns, twin, mean_floor_ns),
        "floor_pct_of_untraced": (100 * mean_floor_ns / 1e6 / untraced_ms
                                  if untraced_ms and mean_floor_ns is not None else None),
        "dram_read_gbps": metrics.get("dram_read_gbps") if metrics else None,
        "dram_read_pct": metrics.get("dram_read_pct") if metrics else None,
    }
