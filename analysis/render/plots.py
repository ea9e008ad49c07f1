"""PNG figures of one analysis: a timeline of a few steps (binned) and a zoom on one step
boundary, per-step stacked bars, gap lengths, the traced steps beside the untraced twin.

Each figure is drawn on its own Agg canvas (no display needed), without pyplot: importing this
module chooses no backend for the process, and no figure is left in a global registry. Only this
module and report draw or print. Every colour and word is analysis/render/palette.py's: one per
quantity, in every figure.
"""

import numpy as np

from ..measures.summary import CAUSES
from ..render.mpl import DPI, Figure, legend_above, new_figure, ticker
from ..render.palette import (
    BUSY,
    BUSY_COLOUR,
    CAUSE_COLOURS,
    METRIC_COLOURS,
    METRIC_WORDS,
    TRACED,
    TRACED_COLOUR,
    UNTRACED,
    UNTRACED_COLOUR,
)
from ..render.plots_host import draw_host_bars, has_host
from ..render.plots_timeline import draw_overview, draw_zoom, zoom_window

__all__ = ["DPI", "analysis_figure", "new_figure", "plot_analysis"]

# More steps than this are drawn as this many bars, each the mean of a run of consecutive steps:
# a bar per step of a 3000-step capture costs minutes in matplotlib and reads as noise.
MAX_BARS = 120
HIST_BINS = 40


def step_bins(count: int, most: int = MAX_BARS) -> np.ndarray:
    """The bar each of `count` steps falls in: runs of consecutive steps of (nearly) equal size."""
    return np.arange(count) * min(count, most) // max(count, 1)


def binned_parts(steps, most: int = MAX_BARS) -> tuple:
    """(bin of each bar, {part: ns per step, averaged over each bar's steps}): the busy part and
    the idle time by cause (the steps' idle_cause_* columns), adding up to each step's period."""
    period = steps["period_ns"].to_numpy(dtype=np.float64, na_value=0)
    idle = steps[[f"idle_cause_{c}_ns" for c in CAUSES]].to_numpy(dtype=np.float64)
    parts = {BUSY: period - idle.sum(axis=1)} | {c: idle[:, i] for i, c in enumerate(CAUSES)}
    bins = step_bins(len(steps), most)
    count = np.bincount(bins)
    return bins, {p: np.bincount(bins, weights=v) / count for p, v in parts.items()}


def _part_style(part: str) -> tuple:
    """(colour, legend word) of a part of the per-step bars: the overview's words."""
    if part == BUSY:
        return BUSY_COLOUR, "busy"
    return CAUSE_COLOURS[part], f"idle, cause: {part}"


def thread_groups(steps) -> list:
    """[(thread or None, its steps)], in the order of the threads' first steps: where several
    threads have steps, each thread's steps are drawn as a run of their own (they share step
    numbers and overlap in time); one group, None, for one thread."""
    if "thread" not in steps.columns or steps["thread"].nunique() < 2:
        return [(None, steps)]
    return [(str(t), g.reset_index(drop=True))
            for t, g in steps.groupby("thread", sort=False)]


def _ticks(names: np.ndarray, x: np.ndarray, every: int) -> tuple:
    """Every `every`-th of positions x, labelled by its step (a bar's first step, where a bar
    is the mean of several: the axis label says so)."""
    at = np.arange(0, len(x), max(1, every))
    return x[at].tolist(), [str(names[i]) for i in at]


def tick_every(steps, positions: int) -> int:
    """Label every how many positions: at most 20 labels of two digits across a half-width
    panel, 14 of three or more, so that they stay apart."""
    most = 20 if steps["step"].astype(str).str.len().max() <= 2 else 14
    return max(1, -(-positions // most))


def _thread_label(ax, x: float, thread: str | None) -> None:
    if thread is not None:
        ax.text(x, 0.98, f"thread {thread}", transform=ax.get_xaxis_transform(), fontsize=7,
                va="top")


def draw_step_bars(ax, a) -> None:
    """The GPU period of each step (a bar a run of steps, MAX_BARS at most), busy and idle by
    cause: the overview's colours; several threads' steps a run each, side by side."""
    groups = thread_groups(a.steps)
    shown = {BUSY} | {c for c in CAUSES if a.steps[f"idle_cause_{c}_ns"].to_numpy().any()}
    ticks, words, offset, labelled = [], [], 0, set()
    every = tick_every(a.steps, min(MAX_BARS, len(a.steps)))
    for thread, steps in groups:
        most = max(1, MAX_BARS * len(steps) // len(a.steps))
        bins, parts = binned_parts(steps, most)
        x = offset + np.arange(len(parts[BUSY]))
        edges = np.append(x - 0.5, x[-1] + 0.5)
        bottom = np.zeros(len(x))
        # One filled staircase a part (bar i spans x = i ± 0.5): a few artists, not a bar each.
        for part in (BUSY, *CAUSES):
            if part not in shown:
                continue
            colour, word = _part_style(part)
            values = parts[part] / 1e6
            ax.stairs(bottom + values, edges, baseline=bottom.copy(), fill=True, color=colour,
                      label=None if part in labelled else word)
            labelled.add(part)
            bottom += values
        firsts = np.searchsorted(bins, np.arange(len(x)))
        at, text = _ticks(steps["step"].to_numpy()[firsts], x, every)
        ticks, words = ticks + at, words + text
        _thread_label(ax, offset - 0.4, thread)
        offset += len(x) + 1
    binned = max(len(g) for _, g in groups) > MAX_BARS // len(groups)
    ax.set_xticks(ticks, words, fontsize=7)
    per_bar = f" (each bar the mean of {len(a.steps) / (offset - len(groups)):.0f} steps)"
    ax.set_xlabel("step" + (per_bar if binned else ""))
    ax.set_ylabel("ms")
    ax.set_ylim(0, ax.get_ylim()[1] * (1.12 if len(groups) > 1 else 1))
    ax.set_title("per step: the GPU period, busy and idle by cause" +
                 (", thread by thread" if len(groups) > 1 else ""), pad=22, fontsize=10)
    legend_above(ax)


def gap_histogram(gaps) -> tuple:
    """(log-spaced bin edges in µs, {cause: counts}, {cause: ns}) of the gap lengths: how many
    gaps of each length, and how much idle time they hold; causes with gaps only."""
    gap_ns = gaps["gap_ns"].to_numpy()
    lengths_us = gap_ns / 1e3
    edges = np.logspace(np.log10(max(lengths_us.min(), 1e-3)),
                        np.log10(lengths_us.max()) + 1e-9, HIST_BINS + 1)
    codes = gaps["cause"].cat.codes.to_numpy()
    which = np.clip(np.searchsorted(edges, lengths_us, side="right") - 1, 0, HIST_BINS - 1)
    cell = codes.astype(np.int64) * HIST_BINS + which
    size = len(CAUSES) * HIST_BINS
    counts = np.bincount(cell, minlength=size).reshape(len(CAUSES), HIST_BINS)
    times = np.bincount(cell, weights=gap_ns, minlength=size).reshape(len(CAUSES), HIST_BINS)
    kept = [i for i, _ in enumerate(CAUSES) if counts[i].any()]
    return (edges, {CAUSES[i]: counts[i] for i in kept},
            {CAUSES[i]: times[i] for i in kept})


def draw_gap_histogram(ax, a) -> None:
    """Where the idle time is: the gaps by length (log bins), each bin's height the idle time
    its gaps hold (ms a step), by cause; the legend says each cause's gaps and share of the
    idle time. A few long sync gaps then stand beside thousands of short queued ones."""
    gaps = a.gaps
    if gaps.empty:
        ax.text(0.5, 0.5, "no gaps", ha="center")
        return
    edges, counts, times = gap_histogram(gaps)
    steps = max(len(a.steps), 1)
    idle = sum(t.sum() for t in times.values())
    bottom = np.zeros(HIST_BINS)
    for cause, t in times.items():
        n = int(counts[cause].sum())
        ax.stairs(bottom + t / steps / 1e6, edges, baseline=bottom.copy(), fill=True,
                  color=CAUSE_COLOURS[cause],
                  label=f"{cause}: {n} gap{'s' if n != 1 else ''}, {_share(t.sum() / idle)}")
        bottom += t / steps / 1e6
    ax.set_xscale("log")
    # Plain numbers at 1, 2, 5 of each decade where the lengths span few decades (one label
    # alone reads as no scale), at the powers of ten where they span many.
    few = np.log10(edges[-1] / edges[0]) < 3
    ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1, 2, 5) if few else (1,)))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel(f"gap length (µs), {len(gaps)} gaps")
    ax.set_ylabel("idle ms per step, in the bin")
    ax.set_title("where the idle time is: gaps by length, by the time they hold; % of the idle",
                 pad=22, fontsize=10)
    legend_above(ax)


def _share(share: float) -> str:
    """A share of the idle time for a legend, as the text says it (one decimal; the panel's
    title names the denominator): never "0.0%" for some time."""
    return "<0.1%" if 0 < share < 0.0005 else f"{share:.1%}"


def _series(steps, column: str, scale: float) -> np.ndarray:
    return steps[column].astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan) / scale


def draw_twin(axes: tuple, a, untraced_ms_per_step: float | None) -> None:
    """The traced GPU period and bubble of each step beside the untraced twin's (CUDA events in
    a run without the profiler, where the run has untraced_steps.json); else the period beside
    the untraced ms/step of run.json (the bench's, over whole runs). Several threads' steps a
    run each, as the bars draw them."""
    left, right = axes
    twin = "untraced_period_ns" in a.steps.columns
    groups = thread_groups(a.steps)
    every = tick_every(a.steps, len(a.steps))
    for ax, column, scale, unit in ((left, "period_ns", 1e6, "ms"),
                                    (right, "bubble_ns", 1e3, "µs")):
        ticks, words, offset = [], [], 0
        for i, (thread, steps) in enumerate(groups):
            x = offset + np.arange(len(steps))
            ax.plot(x, _series(steps, column, scale), marker="o", markersize=3,
                    color=TRACED_COLOUR, label=TRACED if i == 0 else None)
            if twin:
                ax.plot(x, _series(steps, f"untraced_{column}", scale), marker="s",
                        markersize=3, color=UNTRACED_COLOUR,
                        label=f"{UNTRACED} (twin: CUDA events)" if i == 0 else None)
            at, text = _ticks(steps["step"].to_numpy(), x, every)
            ticks, words = ticks + at, words + text
            _thread_label(ax, offset - 0.4, thread)
            offset += len(steps) + 1
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)
        ax.set_xticks(ticks, words, fontsize=7)
        ax.set_xlabel("step")
    if not twin and untraced_ms_per_step:
        left.axhline(untraced_ms_per_step, color=UNTRACED_COLOUR, linestyle="--",
                     label=f"{UNTRACED} ms/step (run.json: the bench's whole runs)")
        top = np.nanmax(np.append(_series(a.steps, "period_ns", 1e6), untraced_ms_per_step))
        left.set_ylim(0, top * 1.1)
    if len(groups) > 1:
        for ax in axes:
            ax.set_ylim(0, ax.get_ylim()[1] * 1.12)
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
    # A full-width panel: twice the labels of a half-width one.
    at, text = _ticks(steps["step"].to_numpy(), x, tick_every(steps, len(steps)) // 2 or 1)
    ax.set_xticks(at, text, fontsize=7)
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
    grid = fig.add_gridspec(rows, 2, left=0.105, right=0.99, bottom=0.5 / height,
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
    fig.suptitle(f"{label}: device {a.device}, GPU busy {a.summary['busy_share_of_window']:.1%}",
                 y=1 - 0.2 / height)
    return fig
