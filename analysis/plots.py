"""PNG figures of one analysis: a timeline of a few steps, per-step stacked bars, gap lengths.

Each figure is drawn on its own Agg canvas (no display needed), without pyplot: importing this
module chooses no backend for the process, and no figure is left in a global registry. Only this
module and report draw or print.
"""

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from analysis.summary import CAUSES

CAUSE_COLORS = {"sync": "#d62728", "host": "#ff7f0e", "queued": "#9467bd", "unknown": "#7f7f7f"}
PART_COLORS = {"busy": "#2ca02c", "idle_wait_ns": "#d62728", "idle_host_ns": "#ff7f0e",
               "idle_launch_ns": "#1f77b4"}
TIMELINE_STEPS = 3
DPI = 110


def new_figure(**kwargs) -> Figure:
    """A figure on an Agg canvas of its own (Figure's arguments): saved as PNG by its canvas,
    freed with it, whatever backend the calling process (a notebook, say) has chosen."""
    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def _timeline_steps(steps) -> tuple:
    """A few steps from the middle of the window, away from the first (often slower) one."""
    first = min(max(len(steps) // 2 - 1, 0), max(len(steps) - TIMELINE_STEPS, 0))
    chosen = steps.iloc[first:first + TIMELINE_STEPS]
    lo = int(min(chosen["gpu_start"].min(), chosen["cpu_start"].min()))
    hi = int(max(chosen["gpu_end"].max(), chosen["cpu_end"].max()))
    return chosen, lo, hi


def draw_timeline(ax, a) -> None:
    chosen, lo, hi = _timeline_steps(a.steps)

    def rel_ms(t):
        return (np.asarray(t, dtype=np.float64) - lo) / 1e6

    ops = a.ops[(a.ops["end"] > lo) & (a.ops["start"] < hi)]
    streams = sorted(ops["stream"].unique())
    for row, stream in enumerate(streams):
        o = ops[ops["stream"] == stream]
        widths_ms = (o["end"] - o["start"]).to_numpy() / 1e6
        ax.broken_barh(list(zip(rel_ms(o["start"]), widths_ms, strict=True)), (row + 0.1, 0.8),
                       color="#2ca02c", linewidth=0, zorder=3)
    gaps = a.gaps[(a.gaps["end_ns"] > lo) & (a.gaps["start_ns"] < hi)]
    for cause in CAUSES:
        g = gaps[gaps["cause"] == cause]
        if len(g):
            ax.broken_barh(list(zip(rel_ms(g["start_ns"]), g["gap_ns"] / 1e6, strict=True)),
                           (0, len(streams)), color=CAUSE_COLORS[cause], alpha=0.35,
                           linewidth=0, zorder=1, label=f"gap: {cause}")
    top = len(streams)
    ax.broken_barh(list(zip(rel_ms(chosen["cpu_start"]), chosen["cpu_ns"] / 1e6, strict=True)),
                   (top + 0.15, 0.7), color="#bbbbbb", edgecolor="black")
    for _, step in chosen.iterrows():
        ax.text(rel_ms(step["cpu_start"]) + 0.05, top + 0.5, str(step["name"]), va="center",
                fontsize=8)
    ax.set_yticks([i + 0.5 for i in range(top + 1)],
                  [f"stream {s}" for s in streams] + ["NVTX steps"])
    ax.set_ylim(0, top + 1)
    ax.set_xlim(0, (hi - lo) / 1e6)
    ax.set_xlabel("ms")
    ax.set_title(f"{len(chosen)} steps: GPU ops (green), idle gaps shaded by cause")
    ax.legend(loc="upper right", fontsize=7, ncol=4)


# More steps than this are drawn as this many bars, each the mean of a run of consecutive steps:
# a bar per step of a 3000-step capture costs minutes in matplotlib and reads as noise.
MAX_BARS = 120
HIST_BINS = 40


def step_bins(count: int, most: int = MAX_BARS) -> np.ndarray:
    """The bar each of `count` steps falls in: runs of consecutive steps of (nearly) equal size."""
    return np.arange(count) * min(count, most) // max(count, 1)


def binned_parts(steps) -> tuple:
    """(bin of each bar, {part: ns per step, averaged over each bar's steps}): the busy part and
    the three idle parts, adding up to each step's period."""
    idle_parts = ["idle_wait_ns", "idle_host_ns", "idle_launch_ns"]
    period = steps["period_ns"].to_numpy(dtype=np.float64, na_value=0)
    idle = steps[idle_parts].to_numpy(dtype=np.float64)
    parts = {"busy": period - idle.sum(axis=1)} | {p: idle[:, i] for i, p in enumerate(idle_parts)}
    bins = step_bins(len(steps))
    count = np.bincount(bins)
    return bins, {p: np.bincount(bins, weights=v) / count for p, v in parts.items()}


def draw_step_bars(ax, a) -> None:
    steps = a.steps
    bins, parts = binned_parts(steps)
    x = np.arange(len(next(iter(parts.values()))))
    bottom = np.zeros(len(x))
    # One filled staircase a part (bar i spans x = i ± 0.5): four artists, not a patch a bar.
    edges = np.arange(len(x) + 1) - 0.5
    for part, values in parts.items():
        ax.stairs(bottom + values / 1e6, edges, baseline=bottom.copy(), fill=True,
                  color=PART_COLORS[part], label=part.removeprefix("idle_").removesuffix("_ns"))
        bottom += values / 1e6
    names = steps["step"].astype(str).to_numpy()
    firsts = np.searchsorted(bins, x)
    ticks = x[:: max(1, len(x) // 20)]
    binned = len(x) < len(steps)
    ax.set_xticks(ticks, [f"{names[firsts[t]]}…" if binned else names[firsts[t]] for t in ticks],
                  fontsize=7)
    ax.set_xlabel(f"step (each bar the mean of {len(steps) / len(x):.0f} steps)" if binned
                  else "step")
    ax.set_ylabel("ms of the step's GPU period")
    ax.set_title("per step: GPU busy and where the idle time went")
    ax.legend(fontsize=7, ncol=4, loc="upper right")


def gap_histogram(gaps) -> tuple:
    """(log-spaced bin edges in µs, {cause: counts}) of the gap lengths, causes with gaps only."""
    lengths_us = gaps["gap_ns"].to_numpy() / 1e3
    edges = np.logspace(np.log10(max(lengths_us.min(), 1e-3)),
                        np.log10(lengths_us.max()) + 1e-9, HIST_BINS + 1)
    codes = gaps["cause"].cat.codes.to_numpy()
    which = np.clip(np.searchsorted(edges, lengths_us, side="right") - 1, 0, HIST_BINS - 1)
    counts = np.bincount(codes.astype(np.int64) * HIST_BINS + which,
                         minlength=len(CAUSES) * HIST_BINS).reshape(len(CAUSES), HIST_BINS)
    return edges, {c: counts[i] for i, c in enumerate(CAUSES) if counts[i].any()}


def draw_gap_histogram(ax, a) -> None:
    gaps = a.gaps
    if gaps.empty:
        ax.text(0.5, 0.5, "no gaps", ha="center")
        return
    edges, counts = gap_histogram(gaps)
    bottom = np.zeros(HIST_BINS)
    for cause, n in counts.items():
        ax.stairs(bottom + n, edges, baseline=bottom, fill=True, color=CAUSE_COLORS[cause],
                  label=cause)
        bottom += n
    ax.set_xscale("log")
    ax.set_xlabel("gap length (µs)")
    ax.set_ylabel("gaps")
    ax.set_title(f"{len(gaps)} idle gaps by length and cause")
    ax.legend(fontsize=7)


def draw_step_metrics(ax, a) -> None:
    """The companion of the per-step bars: SMs active and DRAM read/write, % of peak."""
    steps = a.steps
    x = np.arange(len(steps))
    for column, label, color in (("sm_active_pct", "SMs active", "#2ca02c"),
                                 ("dram_read_pct", "DRAM read", "#1f77b4"),
                                 ("dram_write_pct", "DRAM write", "#9467bd")):
        if column in steps.columns and steps[column].notna().any():
            ax.plot(x, steps[column].to_numpy(np.float64), marker="o", markersize=3,
                    color=color, label=label)
    m = a.summary["gpu_metrics"]
    peak = "" if m["dram_peak_gbps"] is None else f" (DRAM peak {m['dram_peak_gbps']:.0f} GB/s)"
    ax.set_xticks(x, [str(s) for s in steps["step"]], fontsize=7)
    ax.set_ylim(0, 100)
    ax.set_xlabel("step")
    ax.set_ylabel("% of peak (time-weighted)")
    ax.set_title(f"per step: SMs active and DRAM bandwidth{peak}")
    ax.legend(fontsize=7, ncol=3)


def plot_analysis(a, label: str, path) -> None:
    """analysis_figure as a PNG."""
    analysis_figure(a, label).savefig(path, dpi=DPI)


def analysis_figure(a, label: str) -> Figure:
    """Timeline on top, per-step bars and gap histogram below, and under the bars the per-step
    GPU metrics where the capture sampled them (alone for a metrics-only capture)."""
    metrics = bool(a.summary.get("gpu_metrics"))
    if a.summary.get("cuda_trace") is False:  # a metrics-only capture: no ops to draw
        fig = new_figure(figsize=(13, 4.5), layout="constrained")
        draw_step_metrics(fig.subplots(), a)
        fig.suptitle(f"{label}: device {a.device}, GPU metrics only (no CUDA trace)")
        return fig
    # Margins set by hand: matplotlib's constrained layout measures every label, drawing the
    # figure twice (a third of the time of a report on a million ops).
    fig = new_figure(figsize=(13, 12 if metrics else 9))
    grid = fig.add_gridspec(3 if metrics else 2, 2, left=0.075, right=0.99, bottom=0.06,
                            top=0.93, hspace=0.3, wspace=0.2)
    draw_timeline(fig.add_subplot(grid[0, :]), a)
    draw_step_bars(fig.add_subplot(grid[1, 0]), a)
    draw_gap_histogram(fig.add_subplot(grid[1, 1]), a)
    if metrics:
        draw_step_metrics(fig.add_subplot(grid[2, :]), a)
    fig.suptitle(f"{label}: device {a.device}, GPU busy {a.summary['gpu_util']:.1%}")
    return fig


BUBBLE_SERIES = (("node_bubble_ns", "traced, node-level", "#1f77b4"),
                 ("graph_bubble_ns", "traced, graph-level", "#9467bd"),
                 ("untraced_bubble_ns", "untraced (CUDA events)", "#2ca02c"))


def plot_bubbles(path, sweep, batch: int) -> None:
    bubbles_figure(sweep, batch).savefig(path, dpi=DPI)


def bubbles_figure(sweep, batch: int) -> Figure:
    """Grouped bars: each variant's median inter-step bubble at one batch, as a node-level
    capture, a graph-level capture and the untraced twin saw it (analysis.observer.sweep)."""
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
    """compare's hardware table (analysis/hardware.py) as two panels, one row a run: the
    untraced step beside its bandwidth floor, and how hard the GPU worked (SMs active, DRAM read,
    % of the floor reached)."""
    # A run without a config label has NaN there (pandas' string column), not None.
    labels = [c if isinstance(c, str) and c else lab
              for c, lab in zip(table["config_label"], table["label"], strict=True)]
    y = np.arange(len(labels))
    fig = new_figure(figsize=(11, 0.5 * len(labels) + 1.6))
    left, right = fig.subplots(1, 2, sharey=True)

    def values(column):
        return table[column].astype("float64").fillna(0).to_numpy()

    left.barh(y, values("untraced_ms_per_step"), color="#1f77b4", label="untraced step")
    left.barh(y, values("floor_ms_per_step"), height=0.35, color="#2ca02c",
              label="bandwidth floor")
    left.set_xlabel("ms per step")
    left.legend(loc="lower right", fontsize=8)
    for offset, column, color, name in ((-0.27, "sm_active_pct", "#ff7f0e", "SMs active"),
                                        (0.0, "dram_read_pct", "#9467bd", "DRAM read"),
                                        (0.27, "floor_pct", "#2ca02c", "% of floor")):
        right.barh(y + offset, values(column), height=0.27, color=color, label=name)
    right.set_xlim(0, 100)
    right.set_xlabel("% (of peak; of the floor)")
    right.legend(loc="lower right", fontsize=8)
    left.set_yticks(y, labels)
    left.invert_yaxis()
    fig.suptitle("How hard the GPU works, per run (GPU metrics, untraced step time)")
    fig.tight_layout()
    return fig
