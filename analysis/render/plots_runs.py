"""PNG figures of several runs side by side: the study's bubbles as each observer saw them, and
compare's hardware table (`--hardware-plot`). Drawn as analysis/render/plots.py draws (an Agg
canvas of its own, palette.py's colours and words).
"""

import numpy as np
import pandas as pd

from ..render.mpl import DPI, Figure, legend_above, new_figure
from ..render.palette import (
    FLOOR,
    FLOOR_COLOUR,
    METRIC_COLOURS,
    TRACED,
    TRACED_COLOUR,
    TRACED_GRAPH_COLOUR,
    UNTRACED,
    UNTRACED_COLOUR,
)

BUBBLE_SERIES = (("node_bubble_ns", f"{TRACED}, node-level", TRACED_COLOUR),
                 ("graph_bubble_ns", f"{TRACED}, graph-level", TRACED_GRAPH_COLOUR),
                 ("untraced_bubble_ns", f"{UNTRACED} (CUDA events)", UNTRACED_COLOUR))


def plot_bubbles(path, sweep, batch: int) -> None:
    bubbles_figure(sweep, batch).savefig(path, dpi=DPI)


def bubbles_figure(sweep, batch: int) -> Figure:
    """Grouped bars: each variant's median inter-step bubble at one batch, as a node-level
    capture, a graph-level capture and the untraced twin saw it (study.observer.sweep)."""
    rows = sweep[sweep["batch"] == batch].reset_index(drop=True)
    x = np.arange(len(rows))
    width = 0.27
    fig = new_figure(figsize=(9, 3.6))
    ax = fig.subplots()
    for i, (column, label, color) in enumerate(BUBBLE_SERIES):
        values = [v / 1e3 if column in rows and v == v and v is not None else 0
                  for v in (rows[column] if column in rows else [None] * len(rows))]
        ax.bar(x + (i - 1) * width, values, width, label=label, color=color)
    ax.set_xticks(x, rows["variant"], rotation=20)
    ax.set_ylabel("bubble median (µs)")
    ax.set_title(f"How much of the bubble is the profiler's (batch {batch}, H200)")
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def plot_hardware(table, path) -> None:
    hardware_figure(table).savefig(path, dpi=DPI)


def hardware_figure(table) -> Figure:
    """compare's hardware table (analysis/render/hardware.py) as panels, one row a run: the
    untraced step beside its bandwidth floor (where some run has either), and how hard the GPU
    worked (SMs active, DRAM read, % of the floor reached). A value a run lacks is no bar and
    says "n/a"; a series no run has is left out, legend and all."""
    # A run without a config label has NaN there (pandas' string column), not None.
    labels = [c if isinstance(c, str) and c else lab
              for c, lab in zip(table["config_label"], table["label"], strict=True)]
    y = np.arange(len(labels))

    def values(column):
        if column not in table.columns:
            return np.full(len(table), np.nan)
        return pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=np.float64)

    time_series = [(values("untraced_ms_per_step"), 0.8, UNTRACED_COLOUR, f"{UNTRACED} step"),
                   (values("floor_ms_per_step"), 0.35, FLOOR_COLOUR, FLOOR)]
    work_series = [(values(c), colour, name) for c, colour, name in (
        ("sm_active_pct", METRIC_COLOURS["sm_active_pct"], "SMs active"),
        ("dram_read_pct", METRIC_COLOURS["dram_read_pct"], "DRAM read"),
        ("floor_pct", FLOOR_COLOUR, f"% of the {FLOOR}"))]
    time_series = [t for t in time_series if np.isfinite(t[0]).any()]
    work_series = [w for w in work_series if np.isfinite(w[0]).any()]
    panels = 1 + bool(time_series)
    fig = new_figure(figsize=(11 if panels == 2 else 6.5, 0.5 * len(labels) + 1.9))
    axes = fig.subplots(1, panels, sharey=True, squeeze=False)[0]
    if time_series:
        left = axes[0]
        for v, height, colour, name in time_series:
            _bars(left, y, v, height, colour, name, "{:.3f}")
        left.set_xlabel("ms per step")
        left.set_xlim(0, np.nanmax([np.nanmax(v) for v, *_ in time_series]) * 1.15)
    right = axes[-1]
    step = 0.8 / max(len(work_series), 1)
    for i, (v, colour, name) in enumerate(work_series):
        _bars(right, y + (i - (len(work_series) - 1) / 2) * step, v, step, colour, name,
              "{:.0f}")
    right.set_xlim(0, 100)
    floor = any(name.endswith(FLOOR) for _, _, name in work_series)
    right.set_xlabel("% (of peak; of the floor)" if floor else "% of peak")
    for ax in axes:
        legend_above(ax)
    axes[0].set_yticks(y, labels)
    axes[0].invert_yaxis()
    fig.suptitle("How hard the GPU works, per run (GPU metrics, untraced step time)")
    fig.tight_layout()
    return fig


def _bars(ax, y: np.ndarray, values: np.ndarray, height: float, colour: str, name: str,
          fmt: str) -> None:
    """Horizontal bars where a value is known; "n/a" at 0 where it is not."""
    known = np.isfinite(values)
    ax.barh(y[known], values[known], height=height, color=colour, label=name)
    for at in y[~known]:
        ax.text(0, at, " n/a", va="center", fontsize=7, color=colour)
