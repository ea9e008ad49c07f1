"""Finding nsys, checking its version, the capture flags, and what a capture holds.

The one definition: `gapscope profile` and `gapscope doctor` import it (pip installs no
scripts/), and scripts/lib.sh runs it, `python -m analysis.capture.nsys find|version|require|
capture-flags|metrics-flags` (main() below), standard library only, so a capture script costs
one small Python start per question.
"""

import glob
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..outputs import readonly_uri

# Older nsys releases were not checked against these flags and this SQLite schema; 2024.2 (Debian's)
# has every flag the capture passes. GAPSCOPE_NSYS_MIN lowers the bar at your own risk.
DEFAULT_MIN_VERSION = "2024.2"
# Where Nsight Systems lands when it is not on PATH; the last is the full copy Nsight Compute ships.
DEFAULT_PLACES = ("/opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda*/bin/nsys "
                  "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys")
RANGES = ("cudaProfilerApi", "all")
GRAPH_TRACES = ("node", "graph")
VERSION_TIMEOUT_S = 60
# `nsys export` of a capture: minutes for millions of events; past this, a hung export (a full
# disk, a stuck importer) ends with a message instead of holding the terminal forever.
EXPORT_TIMEOUT_S = 1800


class NsysError(Exception):
    """No usable nsys: the message names what was looked at and the fix."""


@dataclass(frozen=True)
class Nsys:
    path: str
    version: str
    note: str  # which one and why, as the scripts say it on stderr


def nsys_version(nsys: str) -> str | None:
    """e.g. 2025.3.2.0 from "NVIDIA Nsight Systems version 2025.3.2.0-253..."; None on failure."""
    try:
        out = subprocess.run([nsys, "--version"], capture_output=True, text=True,
                             timeout=VERSION_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"[0-9]{4}\.[0-9]+(?:\.[0-9]+)*", out.stdout) if out.returncode == 0 else None
    return found.group(0) if found else None


def version_key(version: str) -> tuple:
    return tuple(int(part) for part in version.split("."))


def _on_path(name: str) -> list[str]:
    """Every `name` on PATH, in PATH order (bash's `type -ap`)."""
    found = []
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            found.append(candidate)
    return found


def install_places() -> str:
    return os.environ.get("GAPSCOPE_NSYS_PLACES", DEFAULT_PLACES)


def find_nsys(notes: list | None = None) -> Nsys:
    """$NSYS if set, else the newest nsys on PATH or in the install places (PATH wins a tie).
    Skipped candidates are appended to `notes`."""
    notes = [] if notes is None else notes
    if env := os.environ.get("NSYS"):
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise NsysError(f"NSYS={env} is not an executable file: unset NSYS or point it at nsys")
        version = nsys_version(env)
        return Nsys(env, version or "", f"using nsys {version or '(version unknown)'} at {env} "
                    "(from $NSYS)")
    places = install_places()
    candidates = _on_path("nsys")
    for place in places.split():
        candidates += [p for p in sorted(glob.glob(place)) if os.access(p, os.X_OK)]
    best, best_version, found, seen = None, None, 0, set()
    for place in candidates:
        # /usr/local/cuda is often a link to /usr/local/cuda-X.Y: count one nsys once.
        real = os.path.realpath(place)
        if real in seen:
            continue
        seen.add(real)
        version = nsys_version(place)
        if version is None:
            notes.append(f"skipping {place}: `nsys --version` failed")
            continue
        found += 1
        if best is None or version_key(version) > version_key(best_version):
            best, best_version = place, version
    if best is None:
        raise NsysError(f"no nsys found (looked at $NSYS, PATH, {places}): install Nsight Systems "
                        "or set NSYS=/path/to/nsys")
    return Nsys(best, best_version,
                f"using nsys {best_version} at {best} (newest of {found} found)")


def require_version(nsys: Nsys) -> None:
    minimum = os.environ.get("GAPSCOPE_NSYS_MIN", DEFAULT_MIN_VERSION)
    if not nsys.version:
        raise NsysError(f"{nsys.path} --version failed: reinstall Nsight Systems or set NSYS to a "
                        "working nsys")
    if version_key(nsys.version) < version_key(minimum):
        raise NsysError(
            f"nsys {nsys.version} at {nsys.path} is too old (gapscope needs {minimum} or newer to "
            "capture and export SQLite): install a newer Nsight Systems or set NSYS")


def capture_flags(trace: str = "cuda,nvtx", capture_range: str = "cudaProfilerApi",
                  graph_trace: str = "node", delay_s: float | None = None,
                  duration_s: float | None = None,
                  functions_trace: Path | str | None = None) -> list[str]:
    """The `nsys profile` flags; the defaults are every capture's (profile.sh, profile-tp.sh,
    doctor). scripts/profile.sh explains each one. functions_trace: nsys's Python function-trace
    JSON (an NVTX range around each call of the functions it names:
    analysis.capture.step_functions)."""
    flags = []
    if capture_range == "cudaProfilerApi":
        # Without --capture-range-end=stop nsys ends the program when the range closes (exit 143).
        flags += ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    if delay_s is not None:
        flags.append(f"--delay={delay_s:g}")
    if duration_s is not None:
        flags.append(f"--duration={duration_s:g}")
    flags += [f"--trace={trace}", "--sample=none", "--cpuctxsw=none",
              f"--cuda-graph-trace={graph_trace}", "--force-overwrite=false"]
    if functions_trace is not None:
        flags.append(f"--python-functions-trace={functions_trace}")
    return flags


def metrics_flags(device: str = "0", hz: str = "20000") -> list[str]:
    """NVTX and sampled GPU metrics, no CUDA trace (profile.sh --metrics, overhead.sh,
    doctor's metrics check). The sampler reads the GPU's counters on its own clock: no CUPTI
    callbacks, no per-launch cost. The window is the harness' NVTX range: a cudaProfilerApi range
    makes nsys turn CUDA tracing on (nsys 2025.3 on the H200: "CUDA tracing is required for
    cudaProfilerStart/Stop API support")."""
    return ["--capture-range=nvtx", f"--nvtx-capture={WINDOW_RANGE}", "--capture-range-end=stop",
            "--trace=nvtx", "--sample=none", "--cpuctxsw=none", "--force-overwrite=false",
            f"--gpu-metrics-devices={device}", f"--gpu-metrics-frequency={hz}"]


# harness.instrument's NVTX range around an active window's steps (its twin, for NVTX capture
# ranges); the capture takes it by name, so nsys must not insist on registered strings.
WINDOW_RANGE = "gapscope window"
NVTX_CAPTURE_ENV = {"NSYS_NVTX_PROFILER_REGISTER_ONLY": "0"}


def export_command(nsys: str, rep: Path, sqlite: Path) -> list[str]:
    return [nsys, "export", "--type", "sqlite", "-o", str(sqlite), str(rep)]


# nsys exports lazily: a table that would hold no rows is not created at all.
# The NVTX ranges the analysis reads (METRICS.md, Inputs): closed, of the four range types, the
# same as analysis.readers.nsys (not imported: doctor loads this module and needs no pandas).
RANGE_EVENT_TYPES = (59, 60, 70, 71)
NVTX_NAMES_SQL = f"""
    SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS AS e LEFT JOIN StringIds AS s
    ON s.id = e.textId WHERE e.end IS NOT NULL AND e.eventType IN {RANGE_EVENT_TYPES}"""


@dataclass(frozen=True)
class Contents:
    steps: int         # NVTX ranges matching the step pattern
    ranges: int        # NVTX ranges of any name
    names: list        # a few distinct range names, for the message when no step matches
    kernels: int


def range_names(sqlite: Path) -> list[str]:
    """The names of the closed NVTX ranges an export holds (read-only), one per range."""
    with sqlite3.connect(readonly_uri(sqlite), uri=True) as db:
        tables = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"NVTX_EVENTS", "StringIds"} <= tables:
            return []
        return [n for (n,) in db.execute(NVTX_NAMES_SQL) if n is not None]


def capture_contents(sqlite: Path, step_pattern: str) -> Contents:
    """What an export holds, read-only: enough to say why a capture cannot be analysed."""
    pattern = re.compile(step_pattern)
    with sqlite3.connect(readonly_uri(sqlite), uri=True) as db:
        tables = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        names = ([n for (n,) in db.execute(NVTX_NAMES_SQL) if n is not None]
                 if {"NVTX_EVENTS", "StringIds"} <= tables else [])
        # A graph-level capture records graph executions, not their kernels (as lib.sh counts).
        kernels = sum(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                      for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
                      if t in tables)
    steps = sum(1 for n in names if pattern.search(n))
    return Contents(steps, len(names), sorted(set(names))[:5], kernels)


# The GPU check of `gapscope doctor` and `gapscope profile` (the harness' doctor imports it).
def check(status: str, name: str, detail: str, fix: str = "", **found) -> dict:
    return {"status": status, "name": name, "detail": detail, "fix": fix, **found}


def check_gpu() -> dict:
    smi = shutil.which("nvidia-smi")
    if smi:
        query = [smi, "--query-gpu=name,driver_version", "--format=csv,noheader"]
        try:
            out = subprocess.run(query, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            return check("FAIL", "gpu", "nvidia-smi took over 60 s",
                         "fix the NVIDIA driver install (nvidia-smi must answer)")
        if out.returncode == 0 and out.stdout.strip():
            gpus = [line.split(", ") for line in out.stdout.strip().splitlines()]
            names = ", ".join(name for name, _ in gpus)
            return check("OK", "gpu", f"{names}, driver {gpus[0][1]}")
        reason = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
        return check(
            "FAIL",
            "gpu",
            f"nvidia-smi failed: {reason[0]}",
            "fix the NVIDIA driver install (nvidia-smi must list the GPU)",
        )
    try:
        import torch
    except ImportError:
        return check(
            "FAIL",
            "gpu",
            "no nvidia-smi, and no torch to ask",
            "run on a machine with an NVIDIA GPU and its driver",
        )
    if torch.cuda.is_available():
        return check("OK", "gpu", f"{torch.cuda.get_device_name(0)} (nvidia-smi not on PATH)")
    return check(
        "FAIL",
        "gpu",
        "no nvidia-smi and torch sees no CUDA device",
        "run on a machine with an NVIDIA GPU and its driver",
    )


# --- scripts/lib.sh's entry: one question a call, answered as the scripts print it -----------

USAGE = ("usage: python -m analysis.capture.nsys find | usable | version NSYS | require NSYS | "
         "capture-flags TRACE [GRAPH_TRACE [FUNCTIONS_JSON]] | metrics-flags DEVICE HZ")


def _find_saying() -> Nsys:
    """find_nsys, saying on stderr which nsys and why (and what was skipped)."""
    notes: list = []
    try:
        found = find_nsys(notes)
    finally:
        for note in notes:
            print(f"gapscope: {note}", file=sys.stderr)
    print(f"gapscope: {found.note}", file=sys.stderr)
    return found


def _found() -> int:
    """Prints the nsys to use."""
    print(_find_saying().path)
    return 0


def _usable() -> int:
    """find, then require: prints the version, then the path, of an nsys new enough."""
    found = _find_saying()
    require_version(found)
    print(f"{found.version}\n{found.path}")
    return 0


def _lines(*lines: str | None) -> int:
    """Prints them one a line; 1, silent, when there is none (an nsys that says no version)."""
    if None in lines:
        return 1
    print("\n".join(lines))
    return 0


COMMANDS = {
    ("find", 0): _found,
    ("usable", 0): _usable,
    ("version", 1): lambda nsys: _lines(nsys_version(nsys)),
    ("require", 1): lambda nsys: require_version(Nsys(nsys, nsys_version(nsys) or "", "")),
    ("capture-flags", 1): lambda trace: _lines(*capture_flags(trace)),
    ("capture-flags", 2): lambda trace, graph: _lines(*capture_flags(trace, graph_trace=graph)),
    ("capture-flags", 3): lambda trace, graph, functions: _lines(
        *capture_flags(trace, graph_trace=graph, functions_trace=functions or None)),
    ("metrics-flags", 2): lambda device, hz: _lines(*metrics_flags(device, hz)),
}


def main(argv: list[str]) -> int:
    """Exit 0 with the answer on stdout; 2 with one `gapscope: error:` line (the scripts' die);
    `version` exits 1, silent, when nsys does not say its version (the caller words it)."""
    command = COMMANDS.get((argv[0], len(argv) - 1)) if argv else None
    if command is None:
        print(f"gapscope: error: {USAGE}", file=sys.stderr)
        return 2
    try:
        return command(*argv[1:]) or 0
    except NsysError as e:
        print(f"gapscope: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

