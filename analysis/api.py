"""The library face, for notebooks and scripts (docs/ANALYSIS.md, "In a notebook"):

    import analysis                                  # gapscope.analysis, installed

    (a,) = analysis.open("tests/data/runs/static")   # one Analysis a device
    a.summary["bubble_ns_median"], a.steps, a.gaps   # numbers and DataFrames, times in ns
    c = analysis.compare([analysis.open(p)[0] for p in paths])   # a Comparison
    print(c.to_text()); c.table; c.between_runs; c.hardware; c.order_flips
    with analysis.Database("runs.db") as db:         # the results database
        db.add(analysis.open(path)); db.runs(); db.analyses("config_batch = 16")

The console script (analysis/cli/) calls these and adds only options and printing.
"""

import dataclasses
from pathlib import Path

from .errors import TraceError
from .measures.analysis import Analysis
from .measures.floor import floor_summary
from .measures.steps import DEFAULT_CHECK_PATTERN, DEFAULT_STEP_PATTERN
from .measures.summary import Options, analyze_metrics
from .measures.summary import analyze as run_analysis
from .measures.untraced import with_untraced
from .readers import load_trace
from .readers.gpu_metrics import with_gpu_name
from .readers.runs import Run, resolve_run, unique_labels
from .readers.untraced import read_untraced_steps
from .render.comparison import Comparison, comparison
from .render.report import plain

# Database: module __getattr__ below.
__all__ = ["Analysis", "Comparison", "Database", "TraceError", "analyze_trace", "compare", "open"]  # noqa: F822


def __getattr__(name: str):
    # The results database (sqlite-utils) is imported when asked for: `gapscope analyze`
    # without --db starts without it.
    if name == "Database":
        from .store.database import Database

        return Database
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run_options(run: Run, step_pattern: str | None, check_pattern: str | None,
                device: int | None) -> Options:
    """Options for one run: a pattern not given is the one run.json recorded (`gapscope profile
    --steps/--check`), else the default."""
    recorded = run.info.get("analysis") if isinstance(run.info.get("analysis"), dict) else {}
    return Options(
        step_pattern or recorded.get("step_pattern") or DEFAULT_STEP_PATTERN,
        check_pattern or recorded.get("check_pattern") or DEFAULT_CHECK_PATTERN,
        device,
    )


def load_and_analyse(path: str | Path, step_pattern: str | None = None,
                     check_pattern: str | None = None, device: int | None = None,
                     metrics_only_ok: bool = True) -> tuple:
    """(run, trace, [Analysis]) of one argument: what `open` is made of (the Analyses without
    their run and trace set, their summaries as measured). A run directory's untraced twin
    (untraced_steps.json) is set beside each device's analysis, and the bandwidth floor
    (run.json's) in each summary. A capture of GPU metrics without a CUDA trace gets the
    metrics-only analysis where `metrics_only_ok`, else one line. Every TraceError names the
    input it is about (several are compared at once)."""
    try:
        return _load_and_analyse(path, step_pattern, check_pattern, device, metrics_only_ok)
    except TraceError as e:
        message = str(e)
        if not message.startswith(str(Path(path))):
            message = f"{Path(path)}: {message}"
        raise TraceError(message) from None


def _load_and_analyse(path, step_pattern, check_pattern, device, metrics_only_ok) -> tuple:
    run = resolve_run(str(path))
    trace = load_trace(run.trace_path)
    gpu = (run.info.get("versions") or {}).get("gpu")
    trace = dataclasses.replace(trace, dram_peaks=with_gpu_name(trace.dram_peaks, gpu))
    options = run_options(run, step_pattern, check_pattern, device)
    if trace.ops.empty:
        if not metrics_only_ok:
            raise TraceError(
                f"{run.trace_path}: GPU metrics only, no CUDA trace: `gapscope analyze` "
                "and `gapscope compare` read it (its GPU metrics); report needs a capture with "
                "`--trace=cuda,nvtx`")
        analyses = analyze_metrics(trace, options)
    else:
        analyses = run_analysis(trace, options)
    if run.untraced_steps is not None:
        twin = read_untraced_steps(run.untraced_steps)
        # The twin marks the program's own step boundaries: steps inferred from the trace are
        # cut elsewhere, so the two are not set side by side.
        analyses = [a if a.summary.get("steps_from") == "inferred" else with_untraced(a, twin)
                    for a in analyses]
    # After the twin: the floor is also set against each step's untraced GPU period.
    analyses = [dataclasses.replace(a, summary=a.summary | {"floor": floor_summary(
        run.info, a.steps, a.summary.get("gpu_metrics"))}) for a in analyses]
    return run, trace, analyses


def open(path: str | Path, steps: str | None = None, check: str | None = None,
         device: int | None = None, *, metrics_only: bool = True) -> list[Analysis]:
    """Analyse one capture: an nsys SQLite export (.sqlite, .sqlite.gz), a torch.profiler trace
    (.json, .json.gz) or a run directory (capture.sqlite + run.json): one Analysis a device,
    each with its `run` and `trace`, its summary in plain Python values (JSON-ready).

    steps, check: the regexes of `--steps` and `--check` (default: run.json's, else
    `^Step (\\d+)$` and `^Check Stop Condition$`; steps inferred from the trace where no range
    matches the default, or with steps="infer"); device: one CUDA device (default: each that
    ran step ops). A capture of GPU metrics without a CUDA trace gives Analyses of kind
    "metrics" (no gaps); `metrics_only=False` makes it an error instead. Raises
    analysis.errors.TraceError, with a one-line message naming the path, on bad input.
    """
    run, trace, analyses = load_and_analyse(path, steps, check, device, metrics_only)
    return [dataclasses.replace(a, summary=plain(a.summary), run=run, trace=trace)
            for a in analyses]


def analyze_trace(path: str | Path, steps: str | None = None, check: str | None = None,
                  device: int | None = None) -> list[Analysis]:
    """`open`, by its older name (README and notebooks use it)."""
    return open(path, steps, check, device)


def compare(runs: list, labels: list | None = None, spread: bool = True) -> Comparison:
    """Runs side by side, the first the baseline: `runs` are Analyses (one a run, as
    `open(path)[0]`) or paths (each opened, its first device). labels: default each run's
    own, told apart where two share one. `spread`: also the spread between runs of one
    configuration. Columns: render/comparison.py's Comparison."""
    analyses = [r if isinstance(r, Analysis) else open(r)[0] for r in runs]
    if not analyses:
        raise TraceError("compare: no runs to compare")
    if labels is None:
        labels = unique_labels([a.run for a in analyses])
    return comparison(labels, analyses, spread)
