"""The library face, for notebooks and scripts (docs/ANALYSIS.md, "In a notebook"):

    import analysis                                  # gapscope.analysis, installed

    a = analysis.load("tests/data/runs/static")      # one Analysis (one device)
    a.summary["bubble_ns_median"], a.steps, a.gaps   # numbers and DataFrames, times in ns
    a.host, a.summary["host"]["rows"]                # the host table: the code a step's host
                                                     # time went to (METRICS.md, "Host time")
    a.kernels(), a.step(40), a.plot("a.png"), a.to_perfetto("a.json"), print(a.to_text())
    analysis.open_devices(path)                      # [Analysis], one a device that ran steps
    c = analysis.compare([analysis.load(p) for p in paths])   # a Comparison
    print(c.to_text()); c.table; c.between_runs; c.hardware; c.order_flips
    with analysis.Database("runs.db") as db:         # the results database
        db.add(analysis.open_devices(path)); db.runs(); db.analyses("config_batch = 16")

The console script (analysis/cli/) calls these and adds only options and printing.
"""

import dataclasses
from pathlib import Path

import pandas as pd

from .errors import TraceError
from .measures import analysis as measured
from .measures.floor import floor_summary
from .measures.host_untraced import with_host_untraced
from .measures.infer_loop import is_loop
from .measures.names import COLUMNS, Summary, table
from .measures.plain import plain
from .measures.steps import DEFAULT_CHECK_PATTERN, DEFAULT_STEP_PATTERN
from .measures.summary import Options, analyze_metrics
from .measures.summary import analyze as run_analysis
from .measures.untraced import with_untraced
from .outputs import PERFETTO_FORMATS, PLOT_FORMATS, check_output, input_files, write_atomic
from .readers import load_trace
from .readers.gpu_metrics import with_gpu_name
from .readers.runs import Run, resolve_run, unique_labels
from .readers.untraced import read_untraced_steps
from .render.comparison import Comparison, comparison

# Database: module __getattr__ below (sqlite-utils is imported when it is asked for).
__all__ = ["Analysis", "Comparison", "Database", "TraceError", "analyze_trace", "compare",  # noqa: F822
           "load", "open", "open_devices"]


class Analysis(measured.Analysis):
    """One device's analysis of one capture, with the verbs a notebook reaches for. Made by
    `load` and `open_devices` (a capture), `Database.analyses` (kind "stored"); `kind` says which
    parts it has: "trace" all, "metrics" (GPU metrics without a CUDA trace) summary and steps,
    "stored" summary and steps; a part a kind lacks is None.

    summary  dict: the numbers `gapscope analyze --format json` prints (METRICS.md, "Summary")
    device   int: the CUDA device;   run: path, label, run.json;   trace: the in-memory trace

    Tables (DataFrames, times in ns; METRICS.md defines every column):

    steps    step, name, cpu_start_ns, cpu_end_ns, cpu_ns, thread, ops, op_records,
             gpu_start_ns, gpu_end_ns, busy_ns, span_ns, intra_idle_ns, bubble_ns, overlap_ns,
             period_ns, idle_blocked_ns, idle_pre_launch_ns, idle_in_launch_ns,
             idle_cause_sync_ns, idle_cause_host_ns, idle_cause_queued_ns, idle_cause_unknown_ns
    gaps     step, start_ns, end_ns, gap_ns, next_stream, next_corr, launch_start_ns, tid,
             idle_blocked_ns, idle_pre_launch_ns, idle_in_launch_ns, thread, cause, next_op
    streams  stream, ops, busy_ns
    syncs    tid, thread, call, file, line, function, calls, calls_per_step, blocked_ns,
             blocked_ns_median, gpu_idle_after_ns, gpu_idle_in_call_ns
    pairs    stream_a, stream_b, concurrent_ns
    checks   start_ns, end_ns, busy_ns, cover
    ops      start_ns, end_ns, device, stream, corr, kind, name, name_id, call_start_ns,
             call_end_ns, tid, thread, step
    host     step_row, step, thread, name, kind, calls, python_ns, cuda_ns, sync_ns, ns,
             forward_ns
    host_steps  step_row, step, thread, tid, host_start_ns, host_end_ns, paused, host_period_ns,
             python_ns, cuda_ns, sync_ns, forward_ns, forward_python_ns, named_ns, busy_ns

    host is the host table (METRICS.md, "Host time"): one row a step and the named code that
    spent its host time, host_steps one row a step. With an untraced twin, steps also has
    untraced_* columns; with GPU metrics, the per-step metrics (sm_active_pct, dram_read_pct
    ...); where the capture marks the tokens each step added (speculative decoding), tokens
    after thread. Times: a column ending start_ns or end_ns is a time on the capture's clock, any
    other _ns a duration. A thread is its label (`thread`, as the steps name it), the raw
    globalTid beside it (`tid`) where kept; an op's `kind` and `name` are words (name_id the
    raw string id). `step` is the step number (METRICS.md, "Step numbers"); an op or gap
    outside every step has -1. Old column names (CHANGELOG.md) read with a FutureWarning.
    """

    def _needs(self, part: str, what: str):
        value = getattr(self, part)
        if value is None:
            raise TraceError(f"{what}: this Analysis (kind {self.kind!r}) has no {part}; "
                             f"analysis.load its capture ({self._where()})")
        return value

    def _where(self) -> str:
        return str(self.run.trace_path) if self.run is not None else "its trace"

    def named_ops(self) -> pd.DataFrame:
        """ops, which carry their `name` (a kernel's name, `[memcpy]`, `[memset]`, `[graph]`)
        and `kind` as words (kernel, memcpy, memset, graph): the same as `.ops`."""
        return self._needs("ops", "named_ops")

    def kernels(self) -> pd.DataFrame:
        """The steps' GPU ops by name, the longest in all first: name, ops, time_ns,
        ops_per_step, time_ns_per_step, share (of the steps' ops' GPU time)."""
        from .measures.kernels import name_table

        ops = self._needs("ops", "kernels")
        ops = ops[ops["step"].to_numpy() >= 0]
        return name_table(ops, ops["name"], len(self.steps))

    def step(self, number, thread: str | None = None):
        """One step by its number (`a.step(40)`; "40" too): `.row` (its row of steps), `.ops`
        (empty for a stored Analysis: the capture keeps them), `.gaps` (those in its period);
        its repr says it in a line. `thread`: where several threads number their steps alike.
        A number the steps have not: TraceError, saying which they have."""
        from .measures.one_step import one_step, step_number

        ops = self.ops if self.ops is not None else pd.DataFrame(
            {c: pd.Series(dtype=object) for c in ("step", "thread")})
        return one_step(self.steps, ops, self._needs("gaps", "step"), step_number(number),
                        thread)

    def _renderable(self, what: str) -> None:
        """A stored run from a database written before it kept summaries whole has its
        summary's columns only: too little to render, said in one line."""
        # Such a summary is the runs row itself (its trace_hash and all): store/database.py.
        if self.kind == measured.STORED and "trace_hash" in self.summary:
            raise TraceError(f"{what}: {self.label or 'this run'} was stored before the database "
                             "kept each summary whole: add its run again (`gapscope db add`)")

    def to_text(self) -> str:
        """What `gapscope analyze` prints of this device."""
        from .render.report import to_text

        self._renderable("to_text")
        return to_text(self.label or "run", [self], self.source)

    def to_markdown(self) -> str:
        """What `gapscope analyze --format md` prints of this device."""
        from .render.report import to_markdown

        self._renderable("to_markdown")
        return to_markdown(self.label or "run", [self])

    def _inputs(self) -> list:
        """The files this analysis was read from: an output never lands on one."""
        if self.run is None:
            return []
        home = self.run.trace_path.parent
        return [self.run.trace_path, *input_files(home)] if (home / "run.json").is_file() \
            else [self.run.trace_path]

    def plot(self, path=None, overwrite: bool = False):
        """The figure `gapscope analyze --plot` draws (a timeline of three steps, a zoom on one
        step boundary, per-step bars, where the idle time is by gap length, the traced steps
        beside the untraced twin): a matplotlib Figure, also saved where `path` is given (.png,
        .svg or .pdf; an existing file only with `overwrite=True`, never an input)."""
        from .render.plots import DPI, analysis_figure

        if path is not None:
            check_output(path, "plot(path)", self._inputs(), replace=overwrite,
                         replace_how="overwrite=True", formats=PLOT_FORMATS)
        if self.kind == measured.STORED and self.ops is None:
            raise TraceError(f"plot: a stored Analysis keeps no ops to draw; analysis.load its "
                             f"capture ({self._where()})")
        untraced = self.run.untraced_ms_per_step() if self.run is not None else None
        fig = analysis_figure(self, self.label or "run", untraced)
        if path is not None:
            write_atomic(path, lambda p: fig.savefig(p, dpi=DPI))
        return fig

    def to_perfetto(self, path, overwrite: bool = False) -> Path:
        """The analysed timeline (ops by stream, steps, every gap by cause, blocking calls) as
        a Chrome trace at `path` (.json, or .json.gz compressed), for ui.perfetto.dev or
        chrome://tracing; the path. An existing file only with `overwrite=True`, never an
        input."""
        from .render.perfetto import write_chrome_trace

        check_output(path, "to_perfetto(path)", self._inputs(), replace=overwrite,
                     replace_how="overwrite=True", formats=PERFETTO_FORMATS)
        trace = self._needs("trace", "to_perfetto")
        self._needs("gaps", "to_perfetto")
        runs = [(self.label or "run", [self], trace.strings, trace.blocking)]
        return write_atomic(path, lambda p: write_chrome_trace(p, runs))


def face(a: measured.Analysis) -> Analysis:
    """The Analysis with its verbs, of any the library made: its tables Tables and its summary
    a Summary, which read a renamed column or key under its old name too, with a FutureWarning
    (measures/names.py; CHANGELOG.md)."""
    if isinstance(a, Analysis) and isinstance(a.summary, Summary):
        return a
    parts = {f.name: getattr(a, f.name) for f in dataclasses.fields(a)}
    for name in COLUMNS:
        parts[name] = table(parts[name], name)
    parts["summary"] = Summary(parts["summary"])
    return Analysis(**parts)


_DATABASE = []


def _database_class():
    """analysis.Database: the results database whose analyses carry the verbs, made on first
    use, so that `gapscope analyze` without --db starts without sqlite-utils."""
    if not _DATABASE:
        from .store import database as stored

        class Database(stored.Database):
            __doc__ = stored.Database.__doc__

            def analyses(self, where: str | None = None, tables=None) -> list:
                """The stored runs as Analyses of kind "stored": every table but the ops (the
                capture keeps those); `tables`: only those."""
                return [face(a) for a in super().analyses(where, tables)]

        Database.__module__ = __name__
        _DATABASE.append(Database)
    return _DATABASE[0]


def __getattr__(name: str):
    if name == "Database":
        return _database_class()
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


def marked(a) -> bool:
    """Steps inferred from the trace whose twin is one of step marks (a loop of one launch's
    iterations are timed as the loop's own steps)."""
    return (a.summary.get("steps_from") == "inferred"
            and not is_loop(a.summary.get("steps_inferred_by")))


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
        # A twin of the program's own step boundaries (ranges, functions; a loop's iterations
        # are its steps) goes beside those steps; one of step marks (what the inference cut at)
        # beside the other inferred steps only.
        analyses = [with_untraced(a, twin, trace) if marked(a) == (twin.numbering == "mark")
                    else a for a in analyses]
        # The host table's twin, where the hook timed its named code (GAPSCOPE_HOST_FUNCTIONS).
        analyses = [with_host_untraced(a, twin) for a in analyses]
    own = (run.info.get("hook") or {}).get("own_code") if isinstance(run.info, dict) else None
    if own:  # what the hook named of the program's own code (capture/own_code.py)
        analyses = [dataclasses.replace(a, summary=a.summary | {"host": a.summary["host"] | {
            "own_code": own}}) if a.summary.get("host") else a for a in analyses]
    # After the twin: the floor is also set against each step's untraced GPU period.
    analyses = [dataclasses.replace(a, summary=a.summary | {"floor": floor_summary(
        run.info, a.steps, a.summary.get("gpu_metrics"))}) for a in analyses]
    return run, trace, analyses


def open_devices(path: str | Path, steps: str | None = None, check: str | None = None,
                 device: int | None = None, *, metrics_only: bool = True) -> list[Analysis]:
    """Analyse one capture: an nsys SQLite export (.sqlite, .sqlite.gz, .sqlite.xz), a
    torch.profiler trace (.json, .json.gz) or a run directory (capture.sqlite + run.json): a
    list of Analyses, one a device that ran steps (one, mostly: `load` gives it alone), each
    with its `run` and `trace`, its summary in plain Python values (JSON-ready).

    steps, check: the regexes of `--steps` and `--check` (default: run.json's, else
    `^Step (\\d+)$` and `^Check Stop Condition$`; steps inferred from the trace where no range
    matches the default, or with steps="infer"); device: one CUDA device (default: each that
    ran step ops). A capture of GPU metrics without a CUDA trace gives Analyses of kind
    "metrics" (no gaps); `metrics_only=False` makes it an error instead. Raises
    analysis.errors.TraceError, with a one-line message naming the path, on bad input.
    """
    run, trace, analyses = load_and_analyse(path, steps, check, device, metrics_only)
    return [face(dataclasses.replace(a, summary=plain(a.summary), run=run, trace=trace))
            for a in analyses]


def load(path: str | Path, steps: str | None = None, check: str | None = None,
         device: int | None = None) -> Analysis:
    """The one Analysis of a capture (`open_devices`'s arguments): of its device, or of
    `device` where the steps ran on several (TraceError naming them where none is given)."""
    analyses = open_devices(path, steps, check, device)
    if len(analyses) > 1:
        devices = [a.device for a in analyses]
        raise TraceError(f"{path}: the steps ran on devices {devices}: load(path, device=N) "
                         "for one, open_devices(path) for each")
    return analyses[0]


def open(path: str | Path, steps: str | None = None, check: str | None = None,
         device: int | None = None, *, metrics_only: bool = True) -> list[Analysis]:
    """`open_devices`, by its older name: a list, one Analysis a device."""
    return open_devices(path, steps, check, device, metrics_only=metrics_only)


def analyze_trace(path: str | Path, steps: str | None = None, check: str | None = None,
                  device: int | None = None) -> list[Analysis]:
    """`open_devices`, by its oldest name."""
    return open_devices(path, steps, check, device)


def compare(runs: list, labels: list | None = None, spread: bool = True) -> Comparison:
    """Runs side by side, the first the baseline: `runs` are Analyses (one a run, as
    `load(path)`) or paths (each opened, its first device). labels: default each run's
    own, told apart where two share one. `spread`: also the spread between runs of one
    configuration. Columns: render/comparison.py's Comparison."""
    analyses = [face(r) if isinstance(r, measured.Analysis) else open_devices(r)[0]
                for r in runs]
    if not analyses:
        raise TraceError("compare: no runs to compare")
    if labels is None:
        labels = unique_labels([a.run for a in analyses])
    return comparison(labels, analyses, spread)
