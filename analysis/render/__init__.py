"""Analyses as people and tools read them: text and Markdown reports, JSON and CSV, the comparison
table, the hardware view, PNG figures and the Perfetto timeline. Numbers stay in ns until here."""

import os as _os

from .mpl_config import quiet_config_dir as _quiet_config_dir

# Before any figure module imports matplotlib (render/plots*.py): its configuration folder where
# the user's cannot be written.
_quiet_config_dir(_os.environ)
