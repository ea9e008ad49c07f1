"""Whether a program can open a capture window of its own, read from its source (not run): the
script and every Python file under its folder (its own modules, imported at the top, inside a
function or by name). A program whose files call no cudaProfilerStart is captured whole at once,
not tried first with `--capture-range=cudaProfilerApi` and run again (PROFILING.md, `--range`).

Where the scan cannot see all of the program's own code, it says nothing (None: the window is
tried first, as before): a command that is not `python SCRIPT` / `python -m MODULE`, a folder of
more than MAX_FILES Python files, code that loads code by other means (importlib, runpy, exec, a
subprocess), or changes sys.path where the command names no folder. A program that puts a folder
on sys.path is mostly given it on its command line (`--gpt-fast DIR`: a cloned repository): the
folders the command names are read too, and then the change is seen (their files' own loading
by exec or importlib loads their files, read all the same). A window opened inside an
installed library is not seen: `--range cudaProfilerApi` asks for the window whatever the scan
says."""

import re
from pathlib import Path

from ..capture.host_functions import script_root

# What opens a window: the CUDA runtime's and driver's calls by any binding (torch.cuda.cudart,
# cuda-python, cupy's profilerStart, numba's profile_start, pycuda's start_profiler), torch's
# torch.cuda.profiler module (its start() and profile()), gapscope's own marks, a program that
# speaks of nsys. Not torch.profiler (Kineto: CUPTI's activity records, no cudaProfilerStart;
# gpt-fast's generate.py has one behind its --profile).
WINDOW_CALLS = re.compile(
    r"cudaProfilerStart|cuProfilerStart|profilerStart|profile_start|start_profiler"
    r"|cuda\.profiler|cuda import profiler"
    r"|harness\.profiling|harness import profiling|\bnsys\b")
# Code the scan cannot follow: code loaded by name or run apart; another folder on the path
# (followed where the command names folders: program_folders).
UNSEEN_CODE = re.compile(r"\bimportlib\b|\brunpy\b|\bexec\s*\(|\bsubprocess\b|\bos\.system\b"
                         r"|__import__")
SYS_PATH = re.compile(r"sys\.path\s*(?:\.\s*(?:insert|append|extend)|\+=|=)")
PYTHON = re.compile(r"python[0-9.]*")
MAX_FILES = 400
SKIP_DIRS = {".git", ".venv", "venv", "env", "__pycache__", "node_modules", "site-packages",
             "build", "dist", ".tox", ".mypy_cache", ".pytest_cache"}


def program_files(root: Path) -> list | None:
    """Every .py under root (hidden folders and environments left out), None past MAX_FILES."""
    found = []
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir():
                if entry.name not in SKIP_DIRS and not entry.name.startswith("."):
                    stack.append(entry)
            elif entry.suffix == ".py":
                found.append(entry)
                if len(found) > MAX_FILES:
                    return None
    return found


def opens_window(cmd: tuple, cwd: Path) -> bool | None:
    """True where the program's files name a window call, False where none does and the scan
    saw all of its own code, None where it cannot tell (module docstring)."""
    if not cmd or not PYTHON.fullmatch(Path(cmd[0]).name):
        return None
    root, first = script_root(tuple(cmd), Path(cwd))
    if first is None or not first[0].is_file():
        return None
    files = program_files(Path(root))
    if files is None:
        return None
    named = named_folders(cmd, Path(cwd), Path(root))
    extra = [program_files(folder) for folder in named]
    if any(found is None for found in extra):
        return None
    unseen = path_changed = False
    own = set([first[0], *files])
    for path in dict.fromkeys([first[0], *files, *(f for found in extra for f in found)]):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return None
        if WINDOW_CALLS.search(text):
            return True
        # A named folder's own loading (a training script's exec of its config file) loads its
        # own files, read here all the same.
        if path in own:
            unseen = unseen or bool(UNSEEN_CODE.search(text))
            path_changed = path_changed or bool(SYS_PATH.search(text))
    return None if unseen or (path_changed and not named) else False


def named_folders(cmd: tuple, cwd: Path, root: Path) -> list:
    """The folders the command's arguments name (absolute or from the working folder), outside
    the script's own folder (read already): where a program puts a cloned repository on
    sys.path from."""
    out = []
    for arg in cmd[1:]:
        value = arg.partition("=")[2] if arg.startswith("--") and "=" in arg else arg
        if not value or value.startswith("-"):
            continue
        folder = (cwd / value).resolve()
        if folder.is_dir() and folder != root and root not in folder.parents:
            out.append(folder)
    return list(dict.fromkeys(out))
