"""matplotlib for the figure modules, imported after its configuration folder is settled
(render/mpl_config.py): the one place gapscope imports it at module level."""

import os

from ..render.mpl_config import quiet_config_dir

quiet_config_dir(os.environ)

import matplotlib.ticker as ticker  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

__all__ = ["Figure", "FigureCanvasAgg", "ticker"]
