"""matplotlib for the figure modules, imported after its configuration folder is settled
(render/mpl_config.py): the one place gapscope imports it at module level, and the one place of
what every figure module shares: a figure on a canvas of its own (new_figure), its resolution
(DPI), the legend above the axes (legend_above), and a name's colour (name_colour)."""

import os
import zlib

from ..render.mpl_config import quiet_config_dir

quiet_config_dir(os.environ)

import matplotlib.ticker as ticker  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

DPI = 110


def new_figure(**kwargs) -> Figure:
    """A figure on an Agg canvas of its own (Figure's arguments): saved by its canvas, freed
    with it, whatever backend the calling process (a notebook, say) has chosen."""
    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def legend_above(ax, **kwargs) -> None:
    """The legend in one row above the axes, under the title: outside the data."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=len(handles),
                  frameon=False, fontsize=8, borderaxespad=0.2, handlelength=1.2,
                  columnspacing=1.2, **kwargs)


def name_colour(name: str, palette: tuple, fixed: dict | None = None) -> str:
    """A name's colour, the same in every figure whatever else it holds and in what order:
    `fixed`'s where it names one, else the palette's entry its CRC-32 picks (stable across
    processes, unlike hash())."""
    if fixed and name in fixed:
        return fixed[name]
    return palette[zlib.crc32(name.encode("utf-8")) % len(palette)]


__all__ = ["DPI", "Figure", "FigureCanvasAgg", "legend_above", "name_colour", "new_figure",
           "ticker"]
