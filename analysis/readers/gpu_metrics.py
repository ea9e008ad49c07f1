"""Nsight Systems' sampled GPU metrics (`nsys profile --gpu-metrics-devices=N`) from an export.

Tables (export schema 3.x):
    GPU_METRICS              timestamp, typeId, metricId, value   one row a sample and metric
    TARGET_INFO_GPU_METRICS  typeId, metricId, metricName, ...    the names of the metrics
    TARGET_INFO_GPU          id, name, memoryBandwidth, ...       the GPUs (where nsys wrote it)

A metric is named by (typeId, metricId): the ids restart for every metric set, so the names are
joined on both. The GPU of a sample is `typeId & 0xFF`, as nsys's own gpu_metric_util recipes
read it (the upper bits name the metric set and chip). Values are % of the unit's peak
throughput (`[Throughput %]` in the name) or a rate in its own unit (`[MHz]`, `[bytes/s]`).

The peak DRAM bandwidth (for GB/s) comes from TARGET_INFO_GPU.memoryBandwidth (bytes/s) where the
export has it, else from PEAK_DRAM_BYTES_PER_S by the GPU's name, else it stays unknown and only
the % of peak is reported.
"""

import sqlite3

import numpy as np
import pandas as pd

from ..readers.trace import empty_metrics

DEVICE_MASK = 0xFF

METRICS_SQL = """
SELECT m.timestamp, m.typeId & {mask}, COALESCE(i.metricName, 'metric ' || m.metricId), m.value
FROM GPU_METRICS AS m
LEFT JOIN (SELECT DISTINCT typeId, metricId, metricName FROM TARGET_INFO_GPU_METRICS) AS i
  ON i.typeId = m.typeId AND i.metricId = m.metricId
WHERE m.timestamp IS NOT NULL AND m.timestamp >= 0
ORDER BY m.timestamp
"""
BARE_METRICS_SQL = """
SELECT timestamp, typeId & {mask}, 'metric ' || metricId, value FROM GPU_METRICS
WHERE timestamp IS NOT NULL AND timestamp >= 0 ORDER BY timestamp
"""

# Theoretical peak HBM bandwidth by product name (bytes/s), from NVIDIA's datasheets:
# H200 SXM 4.8 TB/s (H200 datasheet), H100 SXM 3.35 TB/s and H100 PCIe 2.0 TB/s (H100
# datasheet), A100 SXM 80GB 2.039 TB/s and 40GB 1.555 TB/s (A100 datasheet).
# Longest names first, so "H100 PCIe" wins over "H100".
PEAK_DRAM_BYTES_PER_S = (
    ("H200", 4.8e12),
    ("H100 PCIe", 2.0e12),
    ("H100", 3.35e12),
    ("A100-SXM4-80GB", 2.039e12),
    ("A100 80GB", 1.935e12),
    ("A100", 1.555e12),
)


def has_metrics(tables: set) -> bool:
    return "GPU_METRICS" in tables


def read_gpu_metrics(con: sqlite3.Connection, tables: set) -> pd.DataFrame:
    """timestamp, device, metric (its name), value; empty when the capture sampled none."""
    if not has_metrics(tables):
        return empty_metrics()
    sql = METRICS_SQL if "TARGET_INFO_GPU_METRICS" in tables else BARE_METRICS_SQL
    rows = con.execute(sql.format(mask=DEVICE_MASK)).fetchall()
    if not rows:
        return empty_metrics()
    out = pd.DataFrame(rows, columns=["timestamp", "device", "metric", "value"])
    return out.astype({"timestamp": np.int64, "device": np.int64, "metric": object,
                       "value": np.float64})


def _columns(con: sqlite3.Connection, table: str) -> set:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def peak_by_name(name: str) -> float | None:
    return next((peak for key, peak in PEAK_DRAM_BYTES_PER_S if key.lower() in name.lower()),
                None)


def read_dram_peaks(con: sqlite3.Connection, tables: set, devices) -> dict:
    """device -> (peak DRAM bytes/s or None, where it came from)."""
    info = {}
    if "TARGET_INFO_GPU" in tables:
        cols = _columns(con, "TARGET_INFO_GPU")
        if {"id", "name"} <= cols:
            bw = "memoryBandwidth" if "memoryBandwidth" in cols else "NULL"
            for gpu, name, peak in con.execute(f"SELECT id, name, {bw} FROM TARGET_INFO_GPU"):
                info[int(gpu)] = (name or "", peak)
    peaks = {}
    for d in devices:
        name, peak = info.get(int(d), ("", None))
        if peak:
            peaks[int(d)] = (float(peak), "TARGET_INFO_GPU.memoryBandwidth")
        elif name and peak_by_name(name):
            peaks[int(d)] = (peak_by_name(name), f"datasheet peak of the {name}")
        else:
            peaks[int(d)] = (None, "unknown: the export names no GPU with a known peak")
    return peaks


def with_gpu_name(peaks: dict, gpu_name: str | None) -> dict:
    """Unknown peaks filled from the GPU's name as the run recorded it (run.json versions.gpu):
    a capture without a CUDA trace may have no TARGET_INFO_GPU to name the GPU."""
    peak = peak_by_name(gpu_name) if gpu_name else None
    if peak is None:
        return peaks
    return {d: p if p[0] else (peak, f"datasheet peak of the {gpu_name} (run.json)")
            for d, p in peaks.items()}
