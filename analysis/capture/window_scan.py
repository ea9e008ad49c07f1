"""Whether a program can open a capture window of its own, read from its source (not run): the
script and its own modules, import by import (host_functions.own_modules). A program whose
files call no cudaProfilerStart is captured whole at once, not tried first with
`--capture-range=cudaProfilerApi` and run again (PROFILING.md, `--range`)."""

import re
from pathlib import Path

from ..capture.host_functions import _script_root, own_modules

# What opens a window: the CUDA runtime's call by any binding, torch's profiler module (its
# start() and profile()), and gapscope's own marks (harness.profiling).
WINDOW_CALLS = re.compile(r"cudaProfilerStart|cuProfilerStart|cuda\.profiler|profiler\.start\b"
                          r"|profiler\.profile\b|harness\.profiling|harness import profiling")
PYTHON = re.compile(r"python[0-9.]*")


def opens_window(cmd: tuple, cwd: Path) -> bool | None:
    """True where the program's own files name a window call, False where none does, None
    where the command is not `python SCRIPT` or `python -m MODULE` with its file readable
    (nothing known: the window is tried first, as before)."""
    if not cmd or not PYTHON.fullmatch(Path(cmd[0]).name):
        return None
    _, first = _script_root(tuple(cmd), Path(cwd))
    if first is None or not first[0].is_file():
        return None
    files = [first[0], *(path for _, path in own_modules(tuple(cmd), Path(cwd)))]
    for path in files:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return None
        if WINDOW_CALLS.search(text):
            return True
    return False
