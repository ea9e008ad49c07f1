"""The timeline panels of analysis/render/plots.py: a few steps binned to pixels, and a zoom on one
step boundary drawn op by op.

An eager step launches hundreds of ops of a few µs each: drawn as bars over three steps they are
thinner than a pixel, and the gaps' shading covers them. So the overview bins the window into
pixel columns and stacks what each column's time was (busy, or idle by the cause of its gap),
and the zoom draws the ops around the bubble between two steps, where they are wide enough to see.

    overview   |busy|host|busy|host|...|sync|...      one column a pixel, shares of its time
    zoom            [op]  host  [op] | bubble |[op]   the last ops of step k, the first of k+1
"""

import numpy as np
import pandas as pd

from ..measures.intervals import Coverage
from ..measures.summary import CAUSES
from ..render.mpl import legend_above
from ..render.palette import BUSY, BUSY_COLOUR, CAUSE_COLOURS, NVTX_COLOUR

TIMELINE_STEPS = 3
# Pixel columns of the overview (the figure's axes are ~1300 pixels wide at 110 dpi).
COLUMNS = 1000
# Ops drawn on each side of the zoomed step boundary, within this share of a step's period (a
# CUDA graph's step is one or two ops of a millisecond).
ZOOM_OPS = 8
ZOOM_PERIOD_SHARE = 0.15
# Steps as typical as the most typical ones, to this share of their median periods.
TYPICAL_SHARE = 0.05


# The host row's label, by where the steps came from (summary.steps_from).
STEP_ROW = {"function": "function steps (host)", "profiler_step": "ProfilerStep (host)",
            "inferred": "inferred steps (host)"}


def step_row(a) -> str:
    return STEP_ROW.get(a.summary.get("steps_from"), "NVTX steps (host)")


def gpu_row(a) -> str:
    """The row of each step's GPU span (its first op's start to its last op's end)."""
    return "steps on the GPU"


def of_thread(steps) -> str:
    """` of thread T` where several threads have steps (the timeline draws one thread's), else
    nothing."""
    if "thread" in steps.columns and steps["thread"].nunique() > 1:
        return f" of thread {one_thread(steps)['thread'].iloc[0]}"
    return ""


# The overview's rows above its 0-100% axis: the steps' GPU spans, then their host ranges.
GPU_ROW_Y, HOST_ROW_Y, ROW_HEIGHT = 1.04, 1.2, 0.13
# A step's name is written in its bar where the bar is this share of the window wide, and wide
# enough for the name (a character of 8 pt is about this share of the axes' width).
LABEL_SHARE, CHAR_SHARE = 0.04, 0.0055


def _spans(start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> tuple:
    """The spans overlapping [lo, hi], clipped to it: (which, clipped start, clipped end)."""
    inside = (end > lo) & (start < hi)
    return inside, np.maximum(start, lo)[inside], np.minimum(end, hi)[inside]


# A panel title's characters a line at fontsize 10 across the figure's width.
TITLE_CHARS = 130


def title_lines(text: str) -> str:
    """A panel's title in lines that fit the figure's width (a long step name makes it long)."""
    import textwrap

    return textwrap.fill(text, TITLE_CHARS)


def step_labels(steps) -> list:
    """Each step as the figures name it: its range's name, a traced function's as Class.method
    (render/host.py, short_row), with its number where the names repeat (every call of one
    function is a step of the same name)."""
    from ..render.host import short_row

    names = [short_row(n) for n in steps["name"].astype(str)]
    if len(set(names)) < len(names):
        names = [f"{n} {s}" for n, s in zip(names, steps["step"], strict=True)]
    return names


def draw_step_rows(ax, steps, lo: int, hi: int, scale: float, gpu_y: float, host_y: float,
                   height: float) -> None:
    """Every step overlapping [lo, hi], clipped to it, in two rows: its GPU span at gpu_y and
    its host range at host_y, each named where its bar is wide enough; steps whose GPU spans
    overlap (a pipelined loop) share the row in lanes. x in units of `scale` ns from lo."""
    from ..render.perfetto import lanes

    names = np.array(step_labels(steps), dtype=object)
    width = hi - lo
    rows = ((steps["gpu_start_ns"].to_numpy(dtype=np.float64, na_value=np.nan),
             steps["gpu_end_ns"].to_numpy(dtype=np.float64, na_value=np.nan), gpu_y),
            (steps["cpu_start_ns"].to_numpy(np.float64), steps["cpu_end_ns"].to_numpy(np.float64),
             host_y))
    for start, end, y in rows:
        known = ~np.isnan(start)
        which, s0, s1 = _spans(start[known], end[known], lo, hi)
        if not len(s0):
            continue
        lane = lanes(s0.astype(np.int64), s1.astype(np.int64))
        count = int(lane.max()) + 1
        for k in range(count):
            mine = lane == k
            h = height / count
            ax.broken_barh(list(zip((s0[mine] - lo) / scale, (s1[mine] - s0[mine]) / scale,
                                    strict=True)),
                           (y + k * h, h), color=NVTX_COLOUR, edgecolor="black", linewidth=0.6)
            for a, b, name in zip(s0[mine], s1[mine], names[known][which][mine], strict=True):
                if (b - a) >= max(LABEL_SHARE, CHAR_SHARE * (len(name) + 1)) * width:
                    ax.text((a - lo) / scale + width / scale * 0.004, y + (k + 0.5) * h, name,
                            va="center", fontsize=8 if count == 1 else 6, clip_on=True)


def one_thread(steps):
    """The steps of one thread (the one with most steps) where several have steps: theirs
    overlap in time, so a timeline of steps in a row draws one sequence."""
    if "thread" in steps.columns and steps["thread"].nunique() > 1:
        steps = steps[steps["thread"] == steps["thread"].value_counts(sort=True).index[0]]
        return steps.reset_index(drop=True)
    return steps


def typical_first(steps) -> int:
    """The first of TIMELINE_STEPS consecutive steps that read as the run's steps do: their
    periods add up nearest to as many median periods, and the bubble after the first is nearest
    the median bubble (not the pause between two generate() calls, say); the nearest the middle
    of the window among those about as typical, and never the first step (often slower) where
    there are more."""
    n = len(steps)
    if n <= TIMELINE_STEPS:
        return 0
    period = steps["period_ns"].to_numpy(dtype=np.float64, na_value=np.nan)
    bubble = steps["bubble_ns"].to_numpy(dtype=np.float64, na_value=np.nan)
    starts = np.arange(1, n - TIMELINE_STEPS + 1)
    sums = np.array([period[i:i + TIMELINE_STEPS].sum() for i in starts])
    score = (np.abs(sums - TIMELINE_STEPS * np.nanmedian(period))
             + np.abs(bubble[starts + 1] - np.nanmedian(bubble)))
    score = np.where(np.isnan(score), np.inf, score)
    # Typical: within TYPICAL_SHARE of the steps' time of the most typical; of those, the
    # nearest the middle.
    typical = score <= score.min() + TYPICAL_SHARE * TIMELINE_STEPS * np.nanmedian(period)
    middle = np.abs(starts - (n // 2 - 1))
    return int(starts[typical][np.argmin(middle[typical])])


def timeline_steps(steps) -> tuple:
    """A few typical steps (typical_first) from the window; of one thread, where several have
    steps."""
    steps = one_thread(steps)
    first = typical_first(steps)
    chosen = steps.iloc[first:first + TIMELINE_STEPS]
    lo = int(min(chosen["gpu_start_ns"].min(), chosen["cpu_start_ns"].min()))
    hi = int(max(chosen["gpu_end_ns"].max(), chosen["cpu_end_ns"].max()))
    return chosen, lo, hi


def binned_timeline(ops, gaps, lo: int, hi: int, columns: int = COLUMNS) -> tuple:
    """(column edges in ns, {BUSY or cause: ns of each column}): how each column's time was
    spent, busy (any op of the device running) or idle in a gap of each cause; the rest of a
    column is outside the window (before the first step's ops, after the last's)."""
    # No column narrower than a ns (a hand-drawn trace spans a few hundred).
    edges = np.linspace(lo, hi, max(min(columns, hi - lo), 1) + 1).round().astype(np.int64)
    a, b = edges[:-1], edges[1:]
    out = {BUSY: Coverage(ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy()).covered(a, b)}
    cause = gaps["cause"].astype(str).to_numpy()
    for c in CAUSES:
        mine = cause == c
        out[c] = Coverage(gaps["start_ns"].to_numpy()[mine],
                          gaps["end_ns"].to_numpy()[mine]).covered(a, b)
    return edges, out


def draw_overview(ax, a, zoom: tuple | None = None) -> None:
    """The middle steps binned to pixel columns: stacked shares of busy and idle by cause, each
    step's GPU span and host range above, named (so the GPU work at either edge says which
    step it is); `zoom` (lo, hi) outlined."""
    chosen, lo, hi = timeline_steps(a.steps)
    edges, parts = binned_timeline(a.ops, a.gaps, lo, hi)
    width = np.diff(edges).astype(np.float64)
    x = (edges - lo) / 1e6
    bottom = np.zeros(len(width))
    for key in (BUSY, *CAUSES):
        share = parts[key] / width
        if not share.any():
            continue
        colour = BUSY_COLOUR if key == BUSY else CAUSE_COLOURS[key]
        label = "busy" if key == BUSY else f"idle, cause: {key}"
        # fill_between, not stairs: a stairs patch of a thousand steps costs matplotlib seconds
        # to fit the axes' limits to (curve by curve); a polygon collection does it at once.
        top = bottom + share
        ax.fill_between(x, np.append(bottom, bottom[-1]), np.append(top, top[-1]), step="post",
                        color=colour, label=label, linewidth=0)
        bottom = top
    draw_step_rows(ax, one_thread(a.steps), lo, hi, 1e6, GPU_ROW_Y, HOST_ROW_Y, ROW_HEIGHT)
    if zoom is not None:
        z0, z1 = (zoom[0] - lo) / 1e6, (zoom[1] - lo) / 1e6
        ax.add_patch(_outline(ax, z0, z1))
        ax.text(z1, 0.97, " zoomed below", fontsize=7, va="top", zorder=6,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    ax.set_xlim(0, (hi - lo) / 1e6)
    ax.set_ylim(0, HOST_ROW_Y + ROW_HEIGHT + 0.02)
    ax.set_yticks([0, 0.5, 1, GPU_ROW_Y + ROW_HEIGHT / 2, HOST_ROW_Y + ROW_HEIGHT / 2],
                  ["0%", "50%", "100%", gpu_row(a), step_row(a)], fontsize=8)
    ax.set_xlabel("ms")
    names = step_labels(chosen)
    which = names[0] if len(names) == 1 else f"{names[0]} to {names[-1]}"
    ax.set_title(title_lines(f"{which}{of_thread(a.steps)}, binned to {len(width)} columns: the "
                             "share of each column's time the GPU was busy, or idle by the cause "
                             "of its gap"), pad=22, fontsize=10)
    legend_above(ax)


def _outline(ax, x0: float, x1: float):
    from matplotlib.patches import Rectangle

    return Rectangle((x0, 0), max(x1 - x0, 1e-9), 1.0, fill=False, edgecolor="black",
                     linestyle="--", linewidth=1.0, zorder=5)


def zoom_window(a, ops_each_side: int = ZOOM_OPS) -> tuple | None:
    """(lo, hi, step before, step after) around the bubble between the first two steps of the
    overview (timeline_steps): from the start of the `ops_each_side`-th op before it to the end
    of as many ops after it, at most ZOOM_PERIOD_SHARE of the median period on either side."""
    steps = one_thread(a.steps)
    if len(steps) < 2 or a.ops.empty:
        return None
    k = min(typical_first(steps), len(steps) - 2)
    before, after = steps.iloc[k], steps.iloc[k + 1]
    order = np.argsort(a.ops["start_ns"].to_numpy(), kind="stable")
    start, end = a.ops["start_ns"].to_numpy()[order], a.ops["end_ns"].to_numpy()[order]
    edge_a = int(min(before["gpu_end_ns"], after["gpu_start_ns"]))
    edge_b = int(max(before["gpu_end_ns"], after["gpu_start_ns"]))
    i = max(int(np.searchsorted(start, edge_a)) - ops_each_side, 0)
    j = min(int(np.searchsorted(start, edge_b)) + ops_each_side, len(start)) - 1
    reach = int(np.nanmedian(steps["period_ns"].astype("Float64").to_numpy(
        dtype=np.float64, na_value=np.nan)) * ZOOM_PERIOD_SHARE)
    lo = max(int(start[i]), edge_a - reach)
    hi = min(int(end[i:j + 1].max()), edge_b + reach)
    return lo, max(hi, lo + 1), before, after


def draw_zoom(ax, a, window: tuple) -> None:
    """The ops around one step boundary, one row a stream, the gaps shaded by cause behind
    them, the steps' GPU spans and host ranges above (every step in the window, named)."""
    lo, hi, before, after = window

    def rel_us(t):
        return (np.asarray(t, dtype=np.float64) - lo) / 1e3

    ops = a.ops[(a.ops["end_ns"].to_numpy() > lo) & (a.ops["start_ns"].to_numpy() < hi)]
    streams = sorted(ops["stream"].unique().tolist())
    for row, stream in enumerate(streams):
        o = ops[ops["stream"] == stream]
        ax.broken_barh(list(zip(rel_us(o["start_ns"]),
                                (o["end_ns"] - o["start_ns"]).to_numpy() / 1e3,
                                strict=True)), (row + 0.15, 0.7), color=BUSY_COLOUR,
                       # An edge of its own colour: an op of a µs stays a line a pixel wide.
                       edgecolor=BUSY_COLOUR, linewidth=0.8, zorder=3,
                       label="busy (an op)" if row == 0 else None)
    gaps = a.gaps[(a.gaps["end_ns"].to_numpy() > lo) & (a.gaps["start_ns"].to_numpy() < hi)]
    cause = gaps["cause"].astype(str).to_numpy()
    for c in CAUSES:
        g = gaps[cause == c]
        if len(g):
            ax.broken_barh(list(zip(rel_us(g["start_ns"]), g["gap_ns"].to_numpy() / 1e3,
                                    strict=True)), (0.05, len(streams) - 0.1),
                           color=CAUSE_COLOURS[c], linewidth=0, zorder=1,
                           label=f"idle, cause: {c}")
    top = len(streams)
    draw_step_rows(ax, one_thread(a.steps), lo, hi, 1e3, top + 0.1, top + 1.1, 0.8)
    ax.set_yticks([i + 0.5 for i in range(top + 2)],
                  [f"stream {s}" for s in streams] + [gpu_row(a), step_row(a)], fontsize=8)
    ax.set_ylim(0, top + 2)
    ax.set_xlim(0, (hi - lo) / 1e3)
    ax.set_xlabel("µs")
    first, second = step_labels(pd.DataFrame([before, after]))
    ax.set_title(title_lines(f"zoom: the last ops of {first} and the first of {second} on the "
                             f"GPU{of_thread(a.steps)}, the bubble between them; gaps shaded by "
                             "cause"), pad=22, fontsize=10)
    legend_above(ax)
