"""Many runs at once: directories of run directories expanded, runs analysed in parallel
threads (one per core), progress on stderr."""

import dataclasses
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import api
from .errors import TraceError
from .measures.summary import Options
from .outputs import check_input
from .readers.runs import KINETO_NAMES, TRACE_NAME, TRACE_NAMES, is_run_dir, trace_stem

# From this many runs on, progress is shown even when they were named one by one.
PROGRESS_FROM = 8


# Exports that lie loose in a sweep directory, beside its run directories: each is a run.
LOOSE_EXPORTS = ("*.sqlite", "*.sqlite.gz", "*.sqlite.xz")


def _named_capture(directory: Path) -> bool:
    """It holds a capture by the name a run directory gives it (capture.sqlite ...)."""
    return any((directory / n).is_file()
               for n in (*TRACE_NAMES, *KINETO_NAMES, "capture.nsys-rep"))


def loose_exports(directory: Path) -> list:
    return sorted({p for pattern in LOOSE_EXPORTS for p in directory.glob(pattern)
                   if p.is_file()})


def is_sweep(path: Path) -> bool:
    """A directory that is no run directory itself (runs.is_run_dir: a capture by its run
    directory's name, or one export and nothing under it) but holds runs: run directories under
    it, or exports of its own, several or beside run directories."""
    if not path.is_dir() or _named_capture(path):
        return False
    return not is_run_dir(path) or len(loose_exports(path)) > 1 or bool(run_dirs(path))


def runs_under(root: Path) -> list:
    """The runs of a sweep, sorted by path: the run directories under it (run_dirs) and the
    exports lying loose in it or in a directory under it that is no run directory (one export
    beside a run.json is that directory's run)."""
    found = []
    for here, subdirs, _ in os.walk(root, followlinks=True):
        here = Path(here)
        if _named_capture(here):
            found.append(here)
            subdirs.clear()
            continue
        loose = loose_exports(here)
        if here != root and len(loose) == 1 and (here / "run.json").is_file():
            found.append(here)
            subdirs.clear()
            continue
        found += loose
        subdirs.sort()
    return sorted(found)


def expand(args) -> tuple:
    """(the runs the arguments name, {run: its path under the sweep} for the swept ones): each
    sweep directory becomes the runs under it (any depth, sorted by path: runs_under), an
    export's path without its suffix (`b8/graphed`)."""
    out, swept = [], {}
    for arg in args:
        path = Path(arg)
        check_input(path)
        if not is_sweep(path):
            out.append(str(arg))
            continue
        found = runs_under(path)
        if not found:
            raise TraceError(f"{path}: no run directory ({TRACE_NAME}) or export (.sqlite) "
                             "under it; pass run directories, .sqlite exports, or a directory "
                             "of them")
        out += [str(p) for p in found]
        swept |= {str(p): (p.relative_to(path).as_posix() if p.is_dir()
                           else (p.parent.relative_to(path) / trace_stem(p)).as_posix())
                  for p in found}
    return out, swept


def run_dirs(root: Path) -> list:
    """The run directories under root, sorted by path; symlinked ones too (a sweep is often
    assembled from links), never looking inside a run directory."""
    found = []
    for here, subdirs, files in os.walk(root, followlinks=True):
        if any(n in files for n in (*TRACE_NAMES, *KINETO_NAMES)):
            found.append(Path(here))
            subdirs.clear()
        subdirs.sort()
    return sorted(found)


def open_one(arg: str, options: Options, metrics_only: bool = True,
             keep_trace: bool = True) -> list:
    """api.open of one argument with `options`; without `keep_trace` each Analysis lets its
    in-memory trace go (a sweep of many runs holds only what it compares)."""
    analyses = api.open(arg, options.step_pattern, options.check_pattern, options.device,
                        metrics_only=metrics_only)
    return analyses if keep_trace else [dataclasses.replace(a, trace=None) for a in analyses]


def _workers(count: int) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(count, cores or 1))


def open_all(args: list, options: Options | list, progress: bool = False,
             metrics_only: bool = True, keep_trace: bool = False) -> list:
    """open_one of each argument (a list of Analyses each), in order; in threads where there
    are several runs and cores. Threads, not processes: safe where a notebook or any threaded
    program calls this, nothing to copy back, and SQLite's reading and numpy's whole-column
    work release the GIL, so runs overlap (ANALYSIS.md, Robustness). `options`: one for all, or
    one each."""
    each = options if isinstance(options, list) else [options] * len(args)
    workers = _workers(len(args))
    results = []
    if workers == 1:
        for i, (arg, own) in enumerate(zip(args, each, strict=True)):
            results.append(open_one(arg, own, metrics_only, keep_trace))
            _report(progress, i + 1, len(args), arg)
        return results
    with ThreadPoolExecutor(workers, thread_name_prefix="gapscope-run") as pool:
        futures = [pool.submit(open_one, arg, own, metrics_only, keep_trace)
                   for arg, own in zip(args, each, strict=True)]
        try:
            for i, (arg, future) in enumerate(zip(args, futures, strict=True)):
                results.append(future.result())
                _report(progress, i + 1, len(args), arg)
        except BaseException:
            for future in futures:  # a bad run ends the sweep: the runs not started are not
                future.cancel()
            raise
    return results


def _report(progress: bool, done: int, total: int, arg: str) -> None:
    if progress:
        print(f"gapscope: analysed {done}/{total}: {arg}", file=sys.stderr, flush=True)
