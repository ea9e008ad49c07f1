"""The report's host panel: each step's host time stacked by the code that spent it (the host
table's largest rows, the rest together, `other`), beside the GPU's busy time of the same host
period (METRICS.md, "Host time")."""

import numpy as np

from ..render.host import short_row
from ..render.mpl import legend_above, name_colour
from ..render.palette import (
    BUSY_COLOUR,
    HOST_FIXED_COLOURS,
    HOST_OTHER_COLOUR,
    HOST_REST_COLOUR,
    HOST_ROW_COLOURS,
    HOST_ROWS_DRAWN,
)

# Rows drawn each in a colour of its own; the others are one band ("the rest").
ROWS_DRAWN = HOST_ROWS_DRAWN
MAX_BARS = 120
# Bars over this many times the 90th percentile's height are cut at the axis' top.
CLIP = 3
CUT_SAID = 3


def has_host(a) -> bool:
    return a.host_steps is not None and not a.host_steps.empty and a.host is not None


def host_parts(a) -> tuple:
    """(each bar's first step, {band: ms a step, averaged over each bar's steps}, busy ms a
    step likewise): the bands add up to each step's host period."""
    steps, rows = a.host_steps, a.host
    order = [r["name"] for r in a.summary["host"]["rows"] if r["name"] != "other"]
    drawn = order[:ROWS_DRAWN]
    band = np.where(rows["name"].isin(drawn), rows["name"],
                    np.where(rows["name"] == "other", "other", "the rest"))
    table = rows.assign(band=band).pivot_table(index="step_row", columns="band", values="ns",
                                               aggfunc="sum", fill_value=0)
    table = table.reindex(index=steps["step_row"], fill_value=0)
    bands = [b for b in (*drawn, "the rest", "other") if b in table.columns]
    n = len(steps)
    bins = np.arange(n) * min(n, MAX_BARS) // max(n, 1)
    count = np.bincount(bins)
    parts = {b: np.bincount(bins, weights=table[b].to_numpy(np.float64)) / count / 1e6
             for b in bands}
    busy = np.bincount(bins, weights=np.nan_to_num(steps["busy_ns"].to_numpy(np.float64))) \
        / count / 1e6
    return bins, parts, busy


def host_colour(band: str) -> str:
    """A row of named code's colour by its name (mpl.name_colour): the same in every figure,
    whatever its rank there."""
    fixed = {"other": HOST_OTHER_COLOUR, "the rest": HOST_REST_COLOUR, **HOST_FIXED_COLOURS}
    return name_colour(band, HOST_ROW_COLOURS, fixed)


def draw_host_bars(ax, a) -> None:
    bins, parts, busy = host_parts(a)
    x = np.arange(len(busy))
    edges = np.arange(len(x) + 1) - 0.5
    bottom = np.zeros(len(x))
    for band, values in parts.items():
        ax.stairs(bottom + values, edges, baseline=bottom.copy(), fill=True,
                  color=host_colour(band), label=short_row(band))
        bottom += values
    ax.stairs(busy, edges, color=BUSY_COLOUR, linewidth=2, label="GPU busy (same period)")
    names = a.host_steps["step"].astype(str).to_numpy()
    # A prefill or a cold first step can be many times the others: the axis is cut above the
    # typical bars, and each bar that leaves it says its height.
    typical = np.percentile(bottom, 90) if len(bottom) else 0
    if typical > 0 and bottom.max() > CLIP * typical:
        top = 1.5 * typical
        ax.set_ylim(0, top)
        cut = np.flatnonzero(bottom > top)
        said = ", ".join(f"{names[np.searchsorted(bins, i)]}: {bottom[i]:.1f} ms"
                         for i in cut[:CUT_SAID])
        more = f" and {len(cut) - CUT_SAID} more" if len(cut) > CUT_SAID else ""
        ax.text(0.99, 0.97, f"cut at the top: step {said}{more}", transform=ax.transAxes,
                ha="right", va="top", fontsize=7)
    ticks = x[:: max(1, len(x) // 20)]
    firsts = np.searchsorted(bins, ticks)
    binned = len(x) < len(a.host_steps)
    ax.set_xticks(ticks, [names[f] + ("…" if binned else "") for f in firsts], fontsize=7)
    ax.set_xlabel("step" + (f" (each bar the mean of {len(a.host_steps) / len(x):.0f} steps)"
                            if binned else ""))
    ax.set_ylabel("ms")
    ax.set_title("per step: the host period by the code that spent it, and the GPU busy time",
                 pad=22, fontsize=10)
    legend_above(ax)
