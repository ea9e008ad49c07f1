"""The TRACES of compare, report and db add: each path (a sweep: every run under it) with its
own steps pattern where given as TRACE:REGEX, opened in parallel (analysis.sweep)."""

from .. import sweep
from ..measures.summary import Options
from ..readers.runs import unique_labels
from .base import said, say_step_notes, split_pattern


def inputs(traces: tuple, step_pattern, check_pattern, device, metrics_only: bool = True,
           keep_trace: bool = False) -> tuple:
    """(labels, [Analysis] of each run): a swept run labelled by its path under the sweep.
    `keep_trace`: each Analysis keeps its trace (for --perfetto)."""
    args, swept, each = [], {}, []
    with said():
        for trace in traces:
            path, pattern = split_pattern(trace)
            found, under = sweep.expand([path])
            args += found
            swept |= under
            each += [Options(pattern or step_pattern, check_pattern, device)] * len(found)
        progress = bool(swept) or len(args) >= sweep.PROGRESS_FROM
        per_run = sweep.open_all(args, each, progress, metrics_only, keep_trace)
    labels = sweep.sweep_labels(args, unique_labels([a[0].run for a in per_run]), swept)
    for label, own, analyses in zip(labels, each, per_run, strict=True):
        say_step_notes(label, own.step_pattern, analyses)
    return labels, per_run
