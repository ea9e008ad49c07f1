"""Sampled GPU metrics per step and over the window, time-weighted (METRICS.md, "GPU metrics").

A sample's value is the unit's average over the interval since the previous sample of the same
metric and device: sample i covers (t[i-1], t[i]]; the first covers nothing known and is left
out. The mean over [a, b] weights each sample by how much of its interval lies inside, so a
sample that straddles two steps counts in both, in proportion:

    samples      v1=10 covers (0,100]   v2=50 covers (100,200]
    step [50,150]      50 ns of v1 + 50 ns of v2  ->  30%
"""

import re

import numpy as np
import pandas as pd

# Short key -> the start of nsys's metric name (all are "[Throughput %]": % of the unit's peak).
METRICS = {
    "gr_active": re.compile(r"^GR Active\b.*%"),
    "sm_active": re.compile(r"^SMs? Active\b.*%"),
    "tensor_active": re.compile(r"^Tensor Active\b.*%"),
    "dram_read": re.compile(r"^DRAM Read Bandwidth\b.*%"),
    "dram_write": re.compile(r"^DRAM Write Bandwidth\b.*%"),
}
BANDWIDTH = ("dram_read", "dram_write")


def metric_keys(names) -> dict:
    """nsys metric name -> short key, for the names that are one of METRICS."""
    out = {}
    for name in names:
        key = next((k for k, pattern in METRICS.items() if pattern.search(name)), None)
        if key is not None:
            out[name] = key
    return out


class Series:
    """One metric of one device: the running integral of value × time over the samples."""

    def __init__(self, t: np.ndarray, v: np.ndarray):
        order = np.argsort(t, kind="stable")
        self.t = t[order].astype(np.float64)
        self.v = v[order].astype(np.float64)
        area = np.zeros(len(self.t))
        area[1:] = np.cumsum(self.v[1:] * np.diff(self.t))
        self.area = area

    def integral(self, x: np.ndarray) -> np.ndarray:
        """∫ value dt from the first sample to x (x clipped to the sampled span)."""
        x = np.clip(np.asarray(x, dtype=np.float64), self.t[0], self.t[-1])
        k = np.clip(np.searchsorted(self.t, x, side="left"), 1, len(self.t) - 1)
        return self.area[k - 1] + self.v[k] * (x - self.t[k - 1])

    def mean(self, lo, hi) -> np.ndarray:
        """Time-weighted mean over each [lo, hi]; NaN where no sampled time lies inside."""
        if len(self.t) < 2:
            return np.full(np.shape(lo), np.nan)
        lo = np.asarray(lo, dtype=np.float64)
        hi = np.asarray(hi, dtype=np.float64)
        covered = np.clip(hi, self.t[0], self.t[-1]) - np.clip(lo, self.t[0], self.t[-1])
        area = self.integral(hi) - self.integral(lo)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(covered > 0, area / np.where(covered > 0, covered, 1), np.nan)


def device_series(samples: pd.DataFrame, device: int) -> dict:
    """key -> Series for the device's metrics that METRICS names."""
    mine = samples[samples["device"].to_numpy() == device]
    keys = metric_keys(mine["metric"].unique())
    out = {}
    for name, group in mine.groupby("metric", sort=False):
        if name in keys:
            out[keys[name]] = Series(group["timestamp"].to_numpy(), group["value"].to_numpy())
    return out


def step_metrics(series: dict, lo, hi, peak_bytes_per_s: float | None) -> pd.DataFrame:
    """Per interval: `<key>_pct` for each metric (NaN where absent), and DRAM GB/s from the
    peak (NaN where the peak is unknown)."""
    out = {}
    for key in METRICS:
        out[f"{key}_pct"] = series[key].mean(lo, hi) if key in series else np.full(len(lo), np.nan)
    for key in BANDWIDTH:
        scale = np.nan if peak_bytes_per_s is None else peak_bytes_per_s / 100 / 1e9
        out[f"{key}_gbps"] = out[f"{key}_pct"] * scale
    return pd.DataFrame(out)


def _value(x) -> float | None:
    return None if x is None or np.isnan(x) else float(x)


def window_metrics(series: dict, window: tuple, peak: tuple, interval: str) -> dict:
    """summary.gpu_metrics: the window's time-weighted means, the peak used for GB/s, how many
    samples fell in the window and their median spacing."""
    lo, hi = np.array([window[0]]), np.array([window[1]])
    row = step_metrics(series, lo, hi, peak[0]).iloc[0]
    times = next(iter(series.values())).t if series else np.array([])
    inside = times[(times > window[0]) & (times <= window[1])]
    spacing = np.diff(times)
    out = {name: _value(row[name]) for name in row.index}
    out |= {
        "dram_peak_gbps": None if peak[0] is None else peak[0] / 1e9,
        "dram_peak_source": peak[1],
        "samples": int(len(inside)),
        "sample_period_ns_median": float(np.median(spacing)) if len(spacing) else None,
        "interval": interval,
        "metrics": sorted(series),
    }
    return out


def with_step_metrics(table: pd.DataFrame, samples: pd.DataFrame, device: int, lo_col: str,
                      hi_col: str, window: tuple, peak: tuple, interval: str) -> tuple:
    """(the table with the per-step metric columns (over [lo_col, hi_col] of each row),
    summary.gpu_metrics); the table as it was, and None, when the device has no known metric."""
    series = device_series(samples, device)
    if not series:
        return table, None
    lo = table[lo_col].to_numpy(dtype=np.float64, na_value=np.nan)
    hi = table[hi_col].to_numpy(dtype=np.float64, na_value=np.nan)
    per_step = step_metrics(series, lo, hi, peak[0])
    table = table.assign(**{c: per_step[c].to_numpy() for c in per_step.columns})
    return table, window_metrics(series, window, peak, interval)
