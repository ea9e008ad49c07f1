"""The library API for notebooks and scripts: `from analysis import analyze_trace`.

    from analysis import analyze_trace

    (r,) = analyze_trace("traces/20261130T171200Z-hf_decode/")   # one result per device
    r.summary["gpu_util"], r.summary["bubble_ns_median"]        # the summary `--format json` prints
    r.steps[["step", "period_ns", "bubble_ns"]]                 # DataFrames, times in ns
    r.gaps.groupby("cause", observed=True)["gap_ns"].sum()

The console script calls the same function, so both give the same numbers (tested).
"""

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .errors import TraceError
from .measures.floor import floor_summary
from .readers import load_trace
from .readers.gpu_metrics import with_gpu_name
from .readers.untraced import read_untraced_steps
from .readers.runs import Run, resolve_run
from .measures.steps import DEFAULT_CHECK_PATTERN, DEFAULT_STEP_PATTERN
from .measures.summary import DeviceAnalysis, Options, analyze_metrics
from .measures.summary import analyze as run_analysis
from .measures.untraced import with_untraced


@dataclass(frozen=True)
class Result:
    """One device's analysis of one trace (docs/METRICS.md defines every column and key).

    summary: the dict `gapscope analyze --format json` prints as "summary" (plain Python values)
    steps:   one row a step; gaps: one row a GPU idle gap; streams: one row a stream
    run:     the trace's path, its label and run.json's contents
    analysis: the whole DeviceAnalysis (also stream pairs, stop checks and the ops)
    """

    device: int
    summary: dict
    steps: pd.DataFrame
    gaps: pd.DataFrame
    streams: pd.DataFrame
    run: Run
    analysis: DeviceAnalysis


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


def describe(trace) -> str:
    """What made the trace, for the report's first line."""
    if trace.source == "kineto":
        return f"torch.profiler trace schema {trace.schema_version}"
    return f"nsys export schema {trace.schema_version}"


def load_and_analyse(path: str | Path, step_pattern: str | None = None,
                     check_pattern: str | None = None, device: int | None = None,
                     metrics_only_ok: bool = True) -> tuple:
    """(run, trace, [DeviceAnalysis]) of one argument. A run directory's untraced twin
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


def analyse_run(path: str | Path, step_pattern: str | None = None,
                check_pattern: str | None = None, device: int | None = None,
                metrics_only_ok: bool = True) -> tuple:
    """(run, what made the trace (`describe`), [DeviceAnalysis]): what the CLI's commands
    share (load_and_analyse)."""
    run, trace, analyses = load_and_analyse(path, step_pattern, check_pattern, device,
                                            metrics_only_ok)
    return run, describe(trace), analyses


def analyze_trace(path: str | Path, steps: str | None = None, check: str | None = None,
                  device: int | None = None) -> list[Result]:
    """Analyse one trace: an nsys SQLite export, or a run directory (capture.sqlite + run.json).

    steps, check: the regexes of `--steps` and `--check` (default: run.json's, else
    `^Step (\\d+)$` and `^Check Stop Condition$`; steps inferred from the trace where no range
    matches the default, or with steps="infer"); device: one CUDA device (default: each that
    ran step ops). Raises analysis.errors.TraceError, with a one-line message, on bad input.
    """
    from .render.report import plain

    run, _, analyses = analyse_run(path, steps, check, device)
    return [Result(a.device, plain(a.summary), a.steps, a.gaps, a.streams, run, a)
            for a in analyses]
