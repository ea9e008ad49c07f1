"""Matplotlib's configuration folder where the user's cannot be written (HOME read-only, a
service account): a fresh temporary one, so that drawing a figure prints nothing but gapscope's
own line (matplotlib warns twice on stderr, then makes one of its own anyway)."""

import os
import tempfile
from pathlib import Path


def default_config_dir(environ) -> Path:
    """Where matplotlib keeps its configuration and font cache on Linux by default."""
    base = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME") or "~").expanduser()
                                                 / ".config")
    return Path(base) / "matplotlib"


def quiet_config_dir(environ) -> None:
    """Sets MPLCONFIGDIR to a temporary folder where it is unset and matplotlib's default one
    neither is writable nor can be made."""
    if environ.get("MPLCONFIGDIR"):
        return
    folder = default_config_dir(environ)
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if os.access(probe, os.W_OK):
        return
    environ["MPLCONFIGDIR"] = tempfile.mkdtemp(prefix="gapscope-mpl-")
