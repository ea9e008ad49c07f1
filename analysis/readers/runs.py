"""A trace to analyse: a `.sqlite` export, or a run directory (`capture.sqlite` + `run.json`)."""

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import TraceError
from ..install import by_install
from ..outputs import check_input
from ..readers.untraced import FILE_NAME as UNTRACED_STEPS_NAME

TRACE_NAME = "capture.sqlite"
# The export compressed, read as it is (readers.compressed), where no plain one is: committed
# run directories keep theirs xz'd.
COMPRESSED_TRACE_NAMES = (TRACE_NAME + ".xz", TRACE_NAME + ".gz")
TRACE_NAMES = (TRACE_NAME, *COMPRESSED_TRACE_NAMES)
# A torch.profiler capture of the run (scripts/profile.sh --kineto), used where no export is.
KINETO_NAMES = ("kineto.json.gz", "kineto.json")
RUN_INFO_NAME = "run.json"


@dataclass(frozen=True)
class Run:
    trace_path: Path
    label: str
    info: dict = field(default_factory=dict)
    # The untraced twin's per-step timeline (analysis.readers.untraced), where the run has one.
    untraced_steps: Path | None = None

    @property
    def variant(self) -> str | None:
        """run.json's decode variant, `+compile` where it ran compiled (`pipelined+compile`):
        what the run is a configuration of (the label is the run's own name)."""
        config = self.info.get("config") if isinstance(self.info, dict) else None
        variant = config.get("variant") if isinstance(config, dict) else None
        if not variant:
            return None
        if config.get("compile") not in (None, "none") and variant != "compiled":
            return f"{variant}+compile"
        return str(variant)

    def traced_ms_per_step(self) -> float | None:
        return _number(self.info, "timing", "ms_per_step")

    def untraced_ms_per_step(self) -> float | None:
        return _number(self.info, "untraced", "ms_per_step_median")


def _number(info: dict, *keys: str) -> float | None:
    value = info
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _read_info(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        info = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TraceError(f"{path}: not readable JSON ({e}); fix or remove it") from None
    return info if isinstance(info, dict) else {}


def is_run_dir(directory: Path) -> bool:
    """A directory that holds a trace (or the capture to export one from): what find_trace
    takes, as opposed to a directory of run directories."""
    return (any(directory.glob("*.sqlite")) or any(directory.glob("*.sqlite.gz"))
            or any(directory.glob("*.sqlite.xz"))
            or any((directory / n).is_file() for n in KINETO_NAMES)
            or (directory / "capture.nsys-rep").is_file())


def trace_in(directory: Path) -> Path | None:
    """The run directory's export: capture.sqlite, else capture.sqlite.xz or .gz; None."""
    return next((directory / n for n in TRACE_NAMES if (directory / n).is_file()), None)


def find_trace(directory: Path) -> Path:
    named = trace_in(directory)
    if named is not None:
        return named
    found = (sorted(directory.glob("*.sqlite")) or sorted(directory.glob("*.sqlite.xz"))
             or sorted(directory.glob("*.sqlite.gz")))
    if len(found) == 1:
        return found[0]
    if not found:
        kineto = [directory / n for n in KINETO_NAMES if (directory / n).is_file()]
        if kineto:
            return kineto[0]
    rep = directory / "capture.nsys-rep"
    if not found and rep.is_file():
        command = f"nsys export --type sqlite -o {directory / TRACE_NAME} {rep}"
        raise TraceError(
            f"{directory}: holds capture.nsys-rep but no {TRACE_NAME}: export it with the nsys "
            "that captured it, " + by_install(f"`scripts/export.sh {rep}` (or `{command}`)",
                                              f"`{command}`")
        )
    what = f"{len(found)} .sqlite files" if found else "no .sqlite file"
    runs = [d for d in sorted(directory.iterdir()) if d.is_dir() and trace_in(d) is not None] \
        if not found else []
    if runs:
        raise TraceError(
            f"{directory}: a folder of {len(runs)} run directories ({runs[0].name}, ...), not "
            f"one: analyse one of them, or compare them all with `gapscope compare {directory}`")
    raise TraceError(
        f"{directory}: a run directory needs {TRACE_NAME} ({what} there) or {KINETO_NAMES[0]}; "
        "pass a .sqlite export, a torch.profiler trace or a run directory made by `gapscope "
        "profile`" + by_install(" or scripts/profile.sh", "")
    )


# What a trace's name ends with, left out of its label (`torchprof.json.gz` is `torchprof`).
TRACE_SUFFIXES = (".sqlite.gz", ".sqlite.xz", ".json.gz", ".sqlite", ".json", ".gz", ".xz")


def trace_stem(path: Path) -> str:
    for suffix in TRACE_SUFFIXES:
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            return path.name.removesuffix(suffix)
    return path.stem


def _as_given(path: Path) -> Path:
    """The absolute path as given (`.` and `..` resolved, symbolic links kept)."""
    return Path(os.path.normpath(path.absolute()))


def resolve_run(arg: str) -> Run:
    """The trace a command-line argument names, with run.json's contents and a label."""
    path = Path(arg)
    if not path.exists():
        raise TraceError(f"{path}: no such file or directory")
    check_input(path)
    if path.is_dir():
        trace = find_trace(path)
        info = _read_info(path / RUN_INFO_NAME)
        stem = _as_given(path).name  # a link's own name, not its target's
        home = path
    else:
        trace = path
        in_run = path.name in (*TRACE_NAMES, *KINETO_NAMES)
        info = _read_info(path.parent / RUN_INFO_NAME) if in_run else {}
        stem = _as_given(path.parent).name if in_run else trace_stem(path)
        home = path.parent if in_run else None
    label = run_name(stem)
    twin = home / UNTRACED_STEPS_NAME if home is not None else None
    twin = twin if twin is not None and twin.is_file() else None
    if trace.name not in KINETO_NAMES:
        return Run(trace, label, info, twin)
    # The Kineto capture of a run (torch.profiler, --kineto): told apart from its nsys
    # capture, timed by its own run. ("Twin" is the untraced CUDA-event timeline only.)
    own = info.get("kineto")
    if isinstance(own, dict) and isinstance(own.get("timing"), dict):
        info = {**info, "timing": own["timing"]}
    return Run(trace, f"{label} (kineto)", info, twin)


# The time `gapscope profile` and scripts/profile.sh put before a run directory's name.
UTC_PREFIX = re.compile(r"^\d{8}T\d{6}Z-(?=.)")


def run_name(name: str) -> str:
    """A run's label from its directory's name (or its export's stem): the name without the UTC
    time a run directory's name starts with (`20261130T171200Z-pipelined` is `pipelined`)."""
    return UTC_PREFIX.sub("", name)


def _home(run: Run) -> Path:
    """The run directory (or, for a loose export, the export without its suffix)."""
    where = Path(os.path.normpath(run.trace_path.absolute()))  # links kept: the path as given
    if where.name in (*TRACE_NAMES, *KINETO_NAMES):
        return where.parent
    return where.with_name(trace_stem(where))


def _longer(run: Run, home: Path, depth: int) -> str:
    """The label told apart by more of the run's path (`home`): depth 1 the whole directory
    name (its UTC time kept), then its parent folders, `b8/graphed-sync/node`."""
    parts = [*home.parent.parts[-(depth - 1):], home.name] if depth > 1 else [home.name]
    name = "/".join(p for p in parts if p not in ("/", ""))
    return name + (" (kineto)" if run.label.endswith(" (kineto)") else "")


def unique_labels(runs: list) -> list:
    """Each run's own label (resolve_run: its name), the same in every command; where runs of
    one command share one, each of them by its whole directory name, then with as many parent
    folders as tell them apart (`a/static`, `b/static`), and a number where the path repeats
    (the same run given twice: `static #2`)."""
    out = [r.label for r in runs]
    for label in dict.fromkeys(out):
        group = [i for i, other in enumerate(out) if other == label]
        homes = list(dict.fromkeys(_home(runs[i]) for i in group))
        if len(homes) < 2:
            continue
        for depth in range(1, max(len(h.parts) for h in homes) + 1):
            names = {h: _longer(runs[group[0]], h, depth) for h in homes}
            if len(set(names.values())) == len(names):
                break
        for i in group:
            out[i] = names[_home(runs[i])]
    seen = {}
    for i, label in enumerate(out):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            out[i] = f"{label} #{seen[label]}"
    return out
