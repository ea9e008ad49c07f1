"""The TRACES of compare, report and db add: each path (a sweep: every run under it) with its
own steps pattern where given as TRACE:REGEX, named and labelled first (cheap: no trace read,
so that the outputs are checked against them before any work), then opened in parallel
(analysis.sweep)."""

from dataclasses import dataclass

from .. import sweep
from ..measures.summary import Options
from ..outputs import input_files
from ..readers.runs import resolve_run, unique_labels
from .base import GapscopeError, said, say_step_notes, split_pattern


@dataclass(frozen=True)
class Planned:
    """The runs the TRACES name, in order (a sweep's by path), before any is analysed."""

    args: list      # one path a run
    options: list   # its Options (its own steps pattern where TRACE:REGEX gave one)
    labels: list    # its label (readers.runs.unique_labels: the same in every command)
    files: list     # every file the runs are read from (outputs.input_files)
    progress: bool  # a progress line a run (sweeps, and from sweep.PROGRESS_FROM runs on)


def plan(traces: tuple, step_pattern, check_pattern, device) -> Planned:
    args, swept, each = [], {}, []
    with said():
        for trace in traces:
            path, pattern = split_pattern(trace)
            found, under = sweep.expand([path])
            args += found
            swept |= under
            each += [Options(pattern or step_pattern, check_pattern, device)] * len(found)
        labels = unique_labels([resolve_run(arg) for arg in args])
        files = [f for arg in args for f in input_files(arg)]
    progress = bool(swept) or len(args) >= sweep.PROGRESS_FROM
    return Planned(args, each, labels, files, progress)


def with_baseline(planned: Planned, baseline: str | None) -> tuple:
    """(the plan with the baseline run first, the rule that chose it, said in the output):
    --baseline LABEL, else the first run given (a sweep's runs in path order)."""
    if baseline is None:
        return planned, "the first run"
    if baseline not in planned.labels:
        raise GapscopeError(f"--baseline {baseline}: no run is labelled so; the labels: "
                            f"{', '.join(planned.labels)}")
    i = planned.labels.index(baseline)
    order = [i, *(j for j in range(len(planned.args)) if j != i)]
    moved = Planned([planned.args[j] for j in order], [planned.options[j] for j in order],
                    [planned.labels[j] for j in order], planned.files, planned.progress)
    return moved, "--baseline"


def open_planned(planned: Planned, metrics_only: bool = True, keep_trace: bool = False) -> list:
    """[Analysis] of each run, in order, each run's notes on its steps pattern said."""
    with said():
        per_run = sweep.open_all(planned.args, planned.options, planned.progress, metrics_only,
                                 keep_trace)
    for label, analyses in zip(planned.labels, per_run, strict=True):
        say_step_notes(label, analyses)
    return per_run


def inputs(traces: tuple, step_pattern, check_pattern, device, metrics_only: bool = True,
           keep_trace: bool = False) -> tuple:
    """(labels, [Analysis] of each run). `keep_trace`: each Analysis keeps its trace (for
    --perfetto)."""
    planned = plan(traces, step_pattern, check_pattern, device)
    return planned.labels, open_planned(planned, metrics_only, keep_trace)
