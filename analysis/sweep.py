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
from .readers.runs import KINETO_NAMES, TRACE_NAME, TRACE_NAMES, is_run_dir

# From this many runs on, progress is shown even when they were named one by one.
PROGRESS_FROM = 8


def is_sweep(path: Path) -> bool:
    """A directory that is no run directory itself (runs.is_run_dir) but holds some under it."""
    return path.is_dir() and not is_run_dir(path)


def expand(args) -> tuple:
    """(the runs the arguments name, {run: its path under the sweep} for the swept ones): each
    sweep directory becomes the run directories under it (any depth, sorted by path)."""
    out, swept = [], {}
    for arg in args:
        path = Path(arg)
        if not is_sweep(path):
            out.append(str(arg))
            continue
        found = run_dirs(path)
        if not found:
            raise TraceError(f"{path}: no run directory ({TRACE_NAME}) under it; pass run "
                             "directories, .sqlite exports, or a directory of run directories")
        out += [str(p) for p in found]
        swept |= {str(p): p.relative_to(path).as_posix() for p in found}
    return out, swept


def sweep_labels(args: list, labels: list, swept: dict) -> list:
    """A swept run is named by its path under the sweep (which says what varied), with the
    variant in front unless the path already names it."""
    out = []
    for arg, label in zip(args, labels, strict=True):
        where = swept.get(arg)
        variant = label.split(" (")[0]
        out.append(label if where is None else where if variant in where
                   else f"{variant} {where}")
    return out


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
