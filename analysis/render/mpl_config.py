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


PREFIX = "gapscope-mpl-"


def quiet_config_dir(environ) -> None:
    """Sets MPLCONFIGDIR to a temporary folder, removed at exit, where it is unset and
    matplotlib's default one neither is writable nor can be made. Called as the figure modules
    import matplotlib (render/mpl.py), never before: a command that draws nothing leaves the
    environment as it was."""
    if environ.get("MPLCONFIGDIR"):
        return
    folder = default_config_dir(environ)
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if os.access(probe, os.W_OK):
        return
    import atexit
    import shutil

    made = tempfile.mkdtemp(prefix=PREFIX)
    atexit.register(shutil.rmtree, made, True)
    environ["MPLCONFIGDIR"] = made


def without_own_config_dir(environ: dict) -> dict:
    """The environment for a program gapscope runs: without the temporary folder above."""
    value = environ.get("MPLCONFIGDIR", "")
    if Path(value).name.startswith(PREFIX):
        return {k: v for k, v in environ.items() if k != "MPLCONFIGDIR"}
    return environ
