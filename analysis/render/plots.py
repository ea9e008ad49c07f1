"""PNG figures of one analysis: a timeline of a few steps (binned) and a zoom on one step
boundary, per-step stacked bars, gap lengths, the traced steps beside the untraced twin.

Each figure is drawn on its own Agg canvas (no display needed), without pyplot: importing this
module chooses no backend for the process, and no figure is left in a global registry. Only this
module and report draw or print. Every colour and word is analysis/render/palette.py's: one per
quantity, in every figure.
"""

import matplotlib.ticker
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..measures.summary import CAUSES
from ..render.palette import (
    BUSY_COLOUR,
    CAUSE_COLOURS,
    FLOOR,
    FLOOR_COLOUR,
    LEDGER_COLOURS,
    LEDGER_WORDS,
    METRIC_COLOURS,
    METRIC_WORDS,
    TRACED,
    TRACED_COLOUR,
    TRACED_GRAPH_COLOUR,
    UNTRACED,
    UNTRACED_COLOUR,
)
from ..render.plots_host import draw_host_bars, has_host
from ..render.plots_timeline import (
    draw_overview,
    draw_zoom,
    legend_above,
    zoom_window,
)

DPI = 110


def new_figure(**kwargs) -> Figure:
    """A figure on an Agg canvas of its own (Figure's arguments): saved as PNG by its canvas,
    freed with it, whatever backend the calling process (a notebook, say) has chosen."""
    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig

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


def _part_style(part: str) -> tuple:
    """(colour, legend word) of a part of the per-step bars."""
    if part == "busy":
        return BUSY_COLOUR, "busy"
    ledger = part.removeprefix("idle_")
    return LEDGER_COLOURS[ledger], f"idle: {LEDGER_WORDS[ledger]}"


def _step_ticks(ax, steps, bins: np.ndarray, x: np.ndarray) -> None:
    names = steps["step"].astype(str).to_numpy()
    firsts = np.searchsorted(bins, x)
    ticks = x[:: max(1, len(x) // 20)]
    binned = len(x) < len(steps)
    ax.set_xticks(ticks, [f"{names[firsts[t]]}…" if binned else names[firsts[t]] for t in ticks],
                  fontsize=7)
    ax.set_xlabel(f"step (each bar the mean of {len(steps) / len(x):.0f} steps)" if binned
                  else "step")


def draw_step_bars(ax, a) -> None:
    steps = a.steps
    bins, parts = binned_parts(steps)
    x = np.arange(len(next(iter(parts.values()))))
    bottom = np.zeros(len(x))
    # One filled staircase a part (bar i spans x = i ± 0.5): four artists, not a patch a bar.
    edges = np.arange(len(x) + 1) - 0.5
    for part, values in parts.items():
        colour, word = _part_style(part)
        ax.stairs(bottom + values / 1e6, edges, baseline=bottom.copy(), fill=True,
                  color=colour, label=word)
        bottom += values / 1e6
    _step_ticks(ax, steps, bins, x)
    ax.set_ylabel("ms")
    ax.set_title("per step: the GPU period, busy and idle by ledger part", pad=22, fontsize=10)
    legend_above(ax)


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
        ax.stairs(bottom + n, edges, baseline=bottom, fill=True, color=CAUSE_COLOURS[cause],
                  label=f"idle, cause: {cause}")
        bottom += n
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("gap length (µs)")
    ax.set_ylabel("gaps")
    ax.set_title(f"{len(gaps)} idle gaps by length and cause", pad=22, fontsize=10)
    legend_above(ax)


def _series(steps, column: str, scale: float) -> np.ndarray:
    return steps[column].astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan) / scale


def draw_twin(axes: tuple, a, untraced_ms_per_step: float | None) -> None:
    """The traced GPU period and bubble of each step beside the untraced twin's (CUDA events in
    a run without the profiler, where the run has untraced_steps.json); else the period beside
    the untraced ms/step of run.json (the bench's, over whole runs)."""
    left, right = axes
    steps = a.steps
    x = np.arange(len(steps))
    twin = "untraced_period_ns" in steps.columns
    for ax, column, scale, unit in ((left, "period_ns", 1e6, "ms"),
                                    (right, "bubble_ns", 1e3, "µs")):
        ax.plot(x, _series(steps, column, scale), marker="o", markersize=3, color=TRACED_COLOUR,
                label=TRACED)
        if twin:
            ax.plot(x, _series(steps, f"untraced_{column}", scale), marker="s", markersize=3,
                    color=UNTRACED_COLOUR, label=f"{UNTRACED} (twin: CUDA events)")
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)
        ax.set_xticks(x[:: max(1, len(x) // 20)],
                      steps["step"].astype(str).to_numpy()[:: max(1, len(x) // 20)], fontsize=7)
        ax.set_xlabel("step")
    if not twin and untraced_ms_per_step:
        left.axhline(untraced_ms_per_step, color=UNTRACED_COLOUR, linestyle="--",
                     label=f"{UNTRACED} ms/step (run.json: the bench's whole runs)")
        top = np.nanmax(np.append(_series(steps, "period_ns", 1e6), untraced_ms_per_step))
        left.set_ylim(0, top * 1.1)
    left.set_title("per step: the GPU period, traced and untraced", pad=22, fontsize=10)
    right.set_title("per step: the bubble between steps, traced and untraced" if twin else
                    "per step: the bubble between steps, traced (untraced: no twin per step)",
                    pad=22, fontsize=10)
    legend_above(left)
    legend_above(right)


def draw_step_metrics(ax, a) -> None:
    """The companion of the per-step bars: SMs active and DRAM read/write, % of peak."""
    steps = a.steps
    x = np.arange(len(steps))
    for column, word in METRIC_WORDS.items():
        if column in steps.columns and steps[column].notna().any():
            ax.plot(x, steps[column].to_numpy(np.float64), marker="o", markersize=3,
                    color=METRIC_COLOURS[column], label=word)
    m = a.summary["gpu_metrics"]
    peak = "" if m["dram_peak_gbps"] is None else f" (DRAM peak {m['dram_peak_gbps']:.0f} GB/s)"
    ax.set_xticks(x, [str(s) for s in steps["step"]], fontsize=7)
    ax.set_ylim(0, 100)
    ax.set_xlabel("step")
    ax.set_ylabel("% of peak (time-weighted)")
    ax.set_title(f"per step: SMs active and DRAM bandwidth{peak}", pad=22, fontsize=10)
    legend_above(ax)


def _has_twin(a, untraced_ms_per_step) -> bool:
    return "untraced_period_ns" in a.steps.columns or bool(untraced_ms_per_step)


def plot_analysis(a, label: str, path, untraced_ms_per_step: float | None = None) -> None:
    """analysis_figure as a PNG."""
    analysis_figure(a, label, untraced_ms_per_step).savefig(path, dpi=DPI)


def analysis_figure(a, label: str, untraced_ms_per_step: float | None = None) -> Figure:
    """The middle steps binned, a zoom on one step boundary, per-step bars and the gap
    histogram, the traced period and bubble beside the untraced twin's (or run.json's untraced
    ms/step, `untraced_ms_per_step`) where the run has one, each step's host period by the code
    that spent it (the host table), and the per-step GPU metrics where the capture sampled them
    (alone for a metrics-only capture)."""
    metrics = bool(a.summary.get("gpu_metrics"))
    if a.summary.get("cuda_trace") is False:  # a metrics-only capture: no ops to draw
        fig = new_figure(figsize=(13, 4.5), layout="constrained")
        draw_step_metrics(fig.subplots(), a)
        fig.suptitle(f"{label}: device {a.device}, GPU metrics only (no CUDA trace)")
        return fig
    twin = _has_twin(a, untraced_ms_per_step)
    host = has_host(a)
    rows = 3 + twin + host + metrics
    # Margins set by hand: matplotlib's constrained layout measures every label, drawing the
    # figure twice (a third of the time of a report on a million ops).
    height = 3.6 * rows
    fig = new_figure(figsize=(13, height))
    grid = fig.add_gridspec(rows, 2, left=0.09, right=0.99, bottom=0.5 / height,
                            top=1 - 0.95 / height, hspace=0.62, wspace=0.2)
    window = zoom_window(a)
    draw_overview(fig.add_subplot(grid[0, :]), a, None if window is None else window[:2])
    if window is not None:
        draw_zoom(fig.add_subplot(grid[1, :]), a, window)
    draw_step_bars(fig.add_subplot(grid[2, 0]), a)
    draw_gap_histogram(fig.add_subplot(grid[2, 1]), a)
    if twin:
        draw_twin((fig.add_subplot(grid[3, 0]), fig.add_subplot(grid[3, 1])), a,
                  untraced_ms_per_step)
    if host:
        draw_host_bars(fig.add_subplot(grid[3 + twin, :]), a)
    if metrics:
        draw_step_metrics(fig.add_subplot(grid[rows - 1, :]), a)
    fig.suptitle(f"{label}: device {a.device}, GPU busy {a.summary['gpu_util']:.1%}",
                 y=1 - 0.2 / height)
    return fig


BUBBLE_SERIES = (("node_bubble_ns", f"{TRACED}, node-level", TRACED_COLOUR),
                 ("graph_bubble_ns", f"{TRACED}, graph-level", TRACED_GRAPH_COLOUR),
                 ("untraced_bubble_ns", f"{UNTRACED} (CUDA events)", UNTRACED_COLOUR))


def plot_bubbles(path, sweep, batch: int) -> None:
    bubbles_figure(sweep, batch).savefig(path, dpi=DPI)


def bubbles_figure(sweep, batch: int) -> Figure:
    """Grouped bars: each variant's median inter-step bubble at one batch, as a node-level
    capture, a graph-level capture and the untraced twin saw it (analysis.study.observer.sweep)."""
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
    """compare's hardware table (analysis/render/hardware.py) as two panels, one row a run: the
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

    left.barh(y, values("untraced_ms_per_step"), color=UNTRACED_COLOUR,
              label=f"{UNTRACED} step")
    left.barh(y, values("floor_ms_per_step"), height=0.35, color=FLOOR_COLOUR, label=FLOOR)
    left.set_xlabel("ms per step")
    left.legend(loc="lower right", fontsize=8)
    for offset, column, color, name in (
            (-0.27, "sm_active_pct", METRIC_COLOURS["sm_active_pct"], "SMs active"),
            (0.0, "dram_read_pct", METRIC_COLOURS["dram_read_pct"], "DRAM read"),
            (0.27, "floor_pct", FLOOR_COLOUR, f"% of the {FLOOR}")):
        right.barh(y + offset, values(column), height=0.27, color=color, label=name)
    right.set_xlim(0, 100)
    right.set_xlabel("% (of peak; of the floor)")
    right.legend(loc="lower right", fontsize=8)
    left.set_yticks(y, labels)
    left.invert_yaxis()
    fig.suptitle("How hard the GPU works, per run (GPU metrics, untraced step time)")
    fig.tight_layout()
    return fig
