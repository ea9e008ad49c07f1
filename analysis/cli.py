"""`gapscope`: the command line over the analysis library (also `python -m analysis.cli`)."""

import importlib
import importlib.util
import json
import re
import sqlite3
import sys
from pathlib import Path

import click
import pandas as pd

from .render import compare as compare_mod
from .render import hardware as hardware_mod
from .render import report as report_mod
from .api import describe, load_and_analyse, run_options
from .errors import TraceError
from .readers.runs import unique_labels
from .measures.steps import DEFAULT_CHECK_PATTERN, DEFAULT_STEP_PATTERN, name_shapes
from .measures.summary import Options


class GapscopeError(click.ClickException):
    """Bad input: one line on stderr and exit status 2 (click's default for errors is 1)."""

    exit_code = 2


# Commands that live outside analysis/, imported only when used: the analysis needs no harness.
LAZY_COMMANDS = {"doctor": "analysis.capture.doctor:doctor", "study": "analysis.study.results:main",
                 "profile": "analysis.capture.profile:profile"}
# "gapscope" where installed (gapscope.analysis, gapscope.harness), "" in the source tree.
ROOT = (__package__ or "analysis").rpartition(".")[0]


def qualified(module: str) -> str:
    """A module of either package by its name in this installation."""
    return f"{ROOT}.{module}" if ROOT else module


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


class OneLineErrors:
    """Usage errors in one line (click's own take four: usage, a hint, a blank, the error)."""

    def main(self, *args, **kwargs):
        try:
            return super().main(*args, standalone_mode=False, **kwargs)
        except click.UsageError as e:
            click.echo(f"gapscope: error: {e.format_message()}", err=True)
            sys.exit(2)
        except click.ClickException as e:
            # click's own show() says "Error: ...": one style for every error instead.
            click.echo(f"gapscope: error: {e.format_message()}", err=True)
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("gapscope: aborted", err=True)
            sys.exit(1)


class Command(OneLineErrors, click.Command):
    pass


class Group(OneLineErrors, click.Group):
    # Commands imported when used; only the top-level group has them (not `gapscope db`).
    lazy: dict = {}

    def list_commands(self, ctx):
        lazy = [n for n, target in self.lazy.items()
                if _importable(qualified(target.split(":")[0]))]
        return sorted([*super().list_commands(ctx), *lazy])

    def get_command(self, ctx, name):
        if name in self.lazy:
            module, attr = self.lazy[name].split(":")
            module = qualified(module)
            if not _importable(module):
                return None  # not installed (the analysis alone): no such command
            try:
                return getattr(importlib.import_module(module), attr)
            except ImportError as e:  # installed but broken: say why, not "no such command"
                raise GapscopeError(f"gapscope {name}: {module} cannot be imported: {e}") from None
        return super().get_command(ctx, name)


class MainGroup(Group):
    lazy = LAZY_COMMANDS


def pattern_options(f):
    f = click.option("--device", type=int, default=None,
                     help="Analyse this CUDA device only (default: each that ran step ops).")(f)
    # None: the pattern run.json recorded (gapscope profile --steps/--check), else the default.
    f = click.option("--check", "check_pattern", default=None,
                     help="Regex naming the stop-check NVTX ranges (default: the run's own from "
                          f"its run.json, else {DEFAULT_CHECK_PATTERN}).")(f)
    f = click.option("--steps", "step_pattern", default=None,
                     help="Regex naming the step NVTX ranges; group 1 is the step index "
                          f"(default: the run's own from its run.json, else "
                          f"{DEFAULT_STEP_PATTERN}, and steps inferred from the trace where no "
                          "range matches); `--steps infer`: infer them whatever ranges the "
                          "trace has.")(f)
    return f


def _analyse(arg: str, options: Options, metrics_only_ok: bool = False) -> tuple:
    """The run, its trace and its analyses. A capture of GPU metrics without a CUDA trace gets
    the metrics-only analysis where `metrics_only_ok` (analyze), else one line."""
    try:
        return load_and_analyse(arg, options.step_pattern, options.check_pattern,
                                options.device, metrics_only_ok)
    except TraceError as e:
        raise GapscopeError(str(e)) from None


def step_notes(pattern: str, steps) -> list:
    """What a steps pattern did that its user may not have meant, one line each: steps numbered
    by position (no group), or ranges of several kinds of name taken as steps (too loose)."""
    notes = []
    if re.compile(pattern).groups == 0:
        notes.append(f"the steps pattern '{pattern}' has no group, so the steps are numbered 0 "
                     f"to {len(steps) - 1} in the order they start; a group such as "
                     r"'^Step (\d+)$' takes the numbers in their names")
    shapes = name_shapes(steps["name"])
    if len(shapes) > 1:
        kinds = ", ".join(f"'{shape}' ×{count}" for shape, count in shapes.head(3).items())
        notes.append(f"the steps pattern '{pattern}' took {len(steps)} ranges of {len(shapes)} "
                     f"kinds of name as steps ({kinds}{', ...' if len(shapes) > 3 else ''}); "
                     "anchor it to the step ranges' names, e.g. " r"'^Step (\d+)$'")
    return notes


def _say_step_notes(label: str, pattern: str, analyses: list) -> None:
    for note in step_notes(pattern, analyses[0].steps):
        click.echo(f"gapscope: note: {label}: {note}", err=True)


def db_option(f):
    return click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None,
                        help="Also add the runs to this results database (SQLite; made if "
                             "missing; a run added again is replaced).")(f)


def perfetto_option(f):
    return click.option(
        "--perfetto", type=click.Path(dir_okay=False), default=None,
        help="Also write the analysed timeline to this Chrome trace JSON (ops by stream, steps, "
             "every gap by cause, blocking calls): open it in ui.perfetto.dev or "
             "chrome://tracing.")(f)


def _write_perfetto(path: Path, runs: list) -> None:
    """runs: (label, analyses, the trace's strings, its blocking calls) each."""
    from .render.perfetto import write_chrome_trace

    if not any(hardware_mod.is_traced(a) for _, analyses, _, _ in runs for a in analyses):
        raise GapscopeError("--perfetto: a capture of GPU metrics alone has no timeline to "
                            "write (profile with --trace=cuda,nvtx)")
    _write(lambda p: write_chrome_trace(p, runs), path)
    click.echo(f"gapscope: wrote {path} (open it in ui.perfetto.dev or chrome://tracing)",
               err=True)


def store_runs(db_path, labelled: list) -> None:
    """(label, run, analyses) into the database at db_path."""
    from .store import db as db_mod

    try:
        db = db_mod.open_db(db_path)
        for label, run, analyses in labelled:
            db_mod.add_run(db, run, label, analyses)
        held = db.execute("SELECT count(DISTINCT run_id) FROM runs").fetchone()[0]
        db.conn.close()
    except (OSError, sqlite3.Error) as e:
        raise GapscopeError(f"{db_path}: cannot write the database ({e})") from None
    # A run added again replaces its rows: the count after says what the database holds.
    click.echo(f"gapscope: added {_runs(len(labelled))} to {db_path}, which holds "
               f"{_runs(held)}", err=True)


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


@click.group(cls=MainGroup)
def main():
    """Where a decode loop leaves the GPU idle, step by step, and why: reads an nsys SQLite export.

    \b
    Example:
        gapscope analyze traces/20261130T171200Z-pipelined/
        gapscope compare tests/data/h200-eager-static-bs16.sqlite traces/*-graphed/
        gapscope profile -- python examples/hf_decode.py --model llama
    """


@main.command()
@click.argument("trace")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv", "md"]),
              default="text", show_default=True)
@click.option("--table", type=click.Choice(report_mod.TABLES), default="steps",
              show_default=True, help="The table --format csv prints: one row a step, a gap "
                                      "or a stream (and device).")
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="Also draw timeline, per-step bars and gap histogram into this PNG.")
@perfetto_option
@db_option
@pattern_options
def analyze(trace, fmt, table, plot, perfetto, db_path, step_pattern, check_pattern, device):
    """Analyse one TRACE: an nsys .sqlite export (or .sqlite.gz), a torch.profiler trace
    (.json, .json.gz) or a run directory (capture.sqlite + run.json).

    \b
    Example:
        gapscope analyze tests/data/h200-eager-static-bs16.sqlite --format json
        gapscope analyze tests/data/runs/static --perfetto static.json   # ui.perfetto.dev
    """
    options = Options(step_pattern, check_pattern, device)
    run, loaded, analyses = _analyse(trace, options, metrics_only_ok=True)
    schema = describe(loaded)
    _say_step_notes(run.label, run_options(run, step_pattern, None, None).step_pattern, analyses)
    if fmt == "json":
        # Written as they are: click.echo would scan every chunk for terminal colour codes.
        for chunk in report_mod.json_chunks(analyses):
            sys.stdout.write(chunk)
    elif fmt == "csv":
        try:
            for chunk in report_mod.csv_chunks(analyses, table):
                sys.stdout.write(chunk)
        except TraceError as e:
            raise GapscopeError(str(e)) from None
    elif fmt == "md":
        click.echo(report_mod.to_markdown(run.label, analyses), nl=False)
    else:
        click.echo(report_mod.to_text(run.label, analyses, schema))
    if plot:
        from .render.plots import plot_analysis

        for a in analyses:
            path = Path(plot) if len(analyses) == 1 else _device_path(Path(plot), a.device)
            _write(lambda p, a=a: plot_analysis(a, run.label, p, run.untraced_ms_per_step()),
                   path)
            click.echo(f"gapscope: wrote {path}", err=True)
    if perfetto:
        _write_perfetto(Path(perfetto), [(run.label, analyses, loaded.strings, loaded.blocking)])
    if db_path:
        store_runs(db_path, [(run.label, run, analyses)])


@main.command()
@click.argument("trace")
@click.option("--steps", "step_pattern", default=None,
              help="Mark the ranges this regex takes as steps (default: the run's own from its "
                   f"run.json, else {DEFAULT_STEP_PATTERN}).")
@click.option("--shapes", is_flag=True,
              help="Count names with their numbers as N (`Step N`): one line a kind of range.")
def ranges(trace, step_pattern, shapes):
    """Each NVTX (or record_function) range name in TRACE with its count, the most frequent
    first, `*` beside those the steps pattern takes: what to write for --steps.

    \b
    Example:
        gapscope ranges my.sqlite --shapes
        gapscope ranges my.sqlite --steps '^decode (\\d+)$'
    """
    from .readers import load_trace
    from .readers.runs import resolve_run
    from .measures.steps import PROFILER_STEP_PATTERN, compile_pattern

    try:
        run = resolve_run(trace)
        names = load_trace(run.trace_path).ranges["name"].astype(str)
        pattern = run_options(run, step_pattern, None, None).step_pattern
        compiled = compile_pattern(pattern, "--steps")
    except TraceError as e:
        raise GapscopeError(str(e)) from None
    taken = names.map(lambda n: compiled.search(n) is not None)
    if not taken.any() and pattern == DEFAULT_STEP_PATTERN:  # as find_steps falls back
        pattern = PROFILER_STEP_PATTERN
        taken = names.str.contains(pattern, regex=True)
    keys = names.str.replace(r"\d+", "N", regex=True) if shapes else names
    # Most frequent first; ties in the order the names first appear (steps in their order).
    counts = keys.groupby(keys, sort=False).agg(["size"]).assign(
        taken=taken.groupby(keys, sort=False).sum(),
        first=pd.Series(range(len(keys))).groupby(keys.to_numpy(), sort=False).min())
    counts = counts.sort_values(["size", "first"], ascending=[False, True], kind="stable")
    for name, row in counts.iterrows():
        mark = "*" if row["taken"] else " "
        click.echo(f"{row['size']:>8} {mark} {name}")
    click.echo(f"{len(names)} ranges, {len(counts)} {'kinds of name' if shapes else 'names'}; "
               f"* the steps pattern '{pattern}' takes {int(taken.sum())} of them")


def _device_path(path: Path, device: int) -> Path:
    return path.with_name(f"{path.stem}-device{device}{path.suffix}")


def _write(draw, path: Path) -> None:
    try:
        draw(path)
    except OSError as e:
        raise GapscopeError(f"{path}: cannot write ({e.strerror or e})") from None


def split_pattern(arg: str) -> tuple:
    """(path, its own steps pattern or None) of TRACE or TRACE:REGEX: the path is the longest
    part before a colon that exists (a regex may hold colons too; so may a path)."""
    if Path(arg).exists() or ":" not in arg:
        return arg, None
    cuts = [i for i, c in enumerate(arg) if c == ":"]
    for i in reversed(cuts):
        if Path(arg[:i]).exists():
            return arg[:i], arg[i + 1:]
    return arg, None


def _compare_inputs(traces: tuple, options: Options, metrics_only_ok: bool = False,
                    timelines: bool = False) -> tuple:
    """(runs, labels, each run's first analysis, (run, analyses) pairs, and where `timelines`
    each run's (strings, blocking calls) for --perfetto). A TRACE:REGEX argument analyses
    TRACE (every run under it, for a sweep) with its own steps pattern."""
    from .sweep import PROGRESS_FROM, analyse_all, expand, sweep_labels

    args, swept, each = [], {}, []
    try:
        for trace in traces:
            path, pattern = split_pattern(trace)
            found, under = expand([path])
            args += found
            swept |= under
            own = Options(pattern or options.step_pattern, options.check_pattern, options.device)
            each += [own] * len(found)
        done = analyse_all(args, each, progress=bool(swept) or len(args) >= PROGRESS_FROM,
                           metrics_only_ok=metrics_only_ok, blocking=timelines)
    except TraceError as e:
        raise GapscopeError(str(e)) from None
    pairs = [(run, analyses) for run, _, analyses, *_ in done]
    runs = [r for r, _ in pairs]
    labels = sweep_labels(args, unique_labels(runs), swept)
    for label, own, (run, analyses) in zip(labels, each, pairs, strict=True):
        _say_step_notes(label, run_options(run, own.step_pattern, None, None).step_pattern,
                        analyses)
    # Each run is compared on the device asked for, else its first device.
    firsts = [analyses[0] for _, analyses in pairs]
    extras = [(d[3], d[4]) for d in done] if timelines else None
    return runs, labels, firsts, pairs, extras


@main.command()
@click.argument("traces", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "md"]), default="text",
              show_default=True)
@click.option("--wide", is_flag=True,
              help="Text: every run in one table, however wide (default: tables of 100 columns).")
@click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None,
              help="With TRACES: also add them to this results database. Without: compare "
                   "the runs stored in it.")
@click.option("--where", default=None,
              help="With --db and no TRACES: only the runs this SQL condition on the runs "
                   "table selects, e.g. \"config_variant LIKE 'pipelined%'\".")
@click.option("--hardware-plot", "hardware_plot", type=click.Path(dir_okay=False), default=None,
              help="Draw the hardware table (runs with GPU metrics) to this PNG.")
@pattern_options
def compare(traces, fmt, wide, db_path, where, hardware_plot, step_pattern, check_pattern,
            device):
    """Compare TRACES (exports, run dirs, or directories of run dirs), the first as the baseline.
    TRACE:REGEX analyses TRACE with its own steps pattern (over --steps and run.json's).

    \b
    Example:
        gapscope compare tests/data/h200-eager-static-bs16.sqlite \\
                         tests/data/h200-eager-pipelined-seed-bs16.sqlite
        gapscope compare traces/sweep-20261201/            # every run under it
        gapscope compare mine.sqlite:'^decode (\\d+)$' traces/*-static/
        gapscope compare --db runs.db --where "config_batch = 16"
    """
    if traces and where:
        raise click.UsageError("--where selects runs of --db; give it without TRACES")
    if traces:
        runs, labels, firsts, pairs, _ = _compare_inputs(
            traces, Options(step_pattern, check_pattern, device), metrics_only_ok=True)
        if db_path:
            store_runs(db_path, list(zip(labels, runs, (a for _, a in pairs), strict=True)))
    elif db_path:
        runs, firsts = _stored(db_path, where)
        labels = unique_labels(runs)
    else:
        raise click.UsageError("give TRACES to compare, or --db FILE")
    # Captures of GPU metrics alone have no gaps: they go to the hardware table only.
    hardware = (hardware_mod.hardware_table(labels, firsts, runs)
                if hardware_mod.has_metrics(firsts) else None)
    if hardware_plot:
        if hardware is None or hardware.empty:
            raise GapscopeError("--hardware-plot: none of these runs sampled GPU metrics "
                                "(profile.sh --metrics makes such a capture)")
        from .render.plots import plot_hardware

        _write(lambda p: plot_hardware(hardware, p), Path(hardware_plot))
        click.echo(f"gapscope: wrote {hardware_plot}", err=True)
    kept = [i for i, a in enumerate(firsts) if hardware_mod.is_traced(a)]
    table = spread = None
    if kept:
        labels, firsts, runs = ([x[i] for i in kept] for x in (labels, firsts, runs))
        table = compare_mod.compare(labels, firsts, runs)
        spread = compare_mod.between_runs(firsts, runs)
    if fmt == "json":
        click.echo(json.dumps(_compare_json(table, spread, hardware), indent=1))
    else:
        click.echo(_compare_text(table, spread, hardware, fmt, wide))


def _compare_json(table, spread, hardware):
    """The runs' records; an object with `runs` and `between_runs`/`hardware` when either is."""
    out = [] if table is None else report_mod.records(table)
    if spread is None and hardware is None:
        return out
    out = {"runs": out}
    if spread is not None:
        out["between_runs"] = report_mod.records(spread)
    if hardware is not None:
        out["hardware"] = report_mod.records(hardware)
    return out


def _compare_text(table, spread, hardware, fmt: str, wide: bool) -> str:
    """The tables there are, text or Markdown, a blank line between them."""
    texts = []
    if table is not None and fmt == "md":
        texts.append(compare_mod.to_markdown(table).rstrip("\n"))
    elif table is not None and len(table) >= compare_mod.ROWS_FROM and not wide:
        texts.append(compare_mod.to_text_rows(table))
    elif table is not None:
        texts.append(compare_mod.to_text(table, width=None if wide else compare_mod.TEXT_WIDTH))
    if spread is not None:
        texts.append(compare_mod.between_runs_text(spread))
    if hardware is not None:
        texts.append((hardware_mod.to_markdown if fmt == "md" else hardware_mod.to_text)(
            hardware).rstrip("\n"))
    return "\n\n".join(texts)


def _stored(db_path, where) -> tuple:
    from .store import db as db_mod

    if not Path(db_path).is_file():
        raise GapscopeError(f"{db_path}: no such database; write one with --db or `gapscope db "
                            "add`")
    try:
        runs, analyses = db_mod.stored_for_compare(db_path, where)
    except sqlite3.Error as e:
        raise GapscopeError(f"{db_path}: cannot read the runs ({e})") from None
    if not runs:
        raise GapscopeError(f"{db_path}: no run matches" + (f" {where!r}" if where else ""))
    return runs, analyses


@main.command()
@click.argument("traces", nargs=-1, required=True)
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for report.md, its PNGs and summary.json.")
@perfetto_option
@db_option
@pattern_options
def report(traces, out_dir, perfetto, db_path, step_pattern, check_pattern, device):
    """Write a Markdown report with plots for TRACES (exports or run dirs) into DIR: compare's
    tables (the hardware one too, for runs with GPU metrics), then each run's tables and figure.
    TRACE:REGEX analyses TRACE with its own steps pattern.

    \b
    Example:
        gapscope report traces/*-static/ traces/*-pipelined/ -o out/report
        gapscope report traces/*-fused/ -o out/fused --perfetto out/fused/timeline.json
    """
    runs, labels, firsts, pairs, extras = _compare_inputs(
        traces, Options(step_pattern, check_pattern, device), metrics_only_ok=True,
        timelines=bool(perfetto))
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GapscopeError(f"{out}: cannot create the directory ({e.strerror or e})") from None
    plots = [(label, a, out / f"{_slug(label)}-device{a.device}.png", run.untraced_ms_per_step())
             for label, (run, analyses) in zip(labels, pairs, strict=True) for a in analyses]
    _draw_plots(plots)
    parts = ["# gapscope report"]
    # As compare: the gaps of the traced runs, then the hardware table of the runs with metrics.
    kept = [i for i, a in enumerate(firsts) if hardware_mod.is_traced(a)]
    if kept:
        parts.append(compare_mod.to_markdown(compare_mod.compare(
            *([x[i] for i in kept] for x in (labels, firsts, runs)))))
    if hardware_mod.has_metrics(firsts):
        parts.append(hardware_mod.to_markdown(hardware_mod.hardware_table(labels, firsts, runs)))
    if perfetto:
        _write_perfetto(Path(perfetto), [(label, analyses, *extra) for label, (_, analyses), extra
                                         in zip(labels, pairs, extras, strict=True)])
        parts.append(f"The analysed timeline, every op and gap: `{perfetto}` (open it in "
                     "ui.perfetto.dev or chrome://tracing).")
    summaries = {}
    for label, (run, analyses) in zip(labels, pairs, strict=True):
        parts.append(report_mod.to_markdown(label, analyses))
        for a in analyses:
            png = f"{_slug(label)}-device{a.device}.png"
            parts.append(f"![{label}, device {a.device}]({png})\n")
            summaries.setdefault(label, {})[str(a.device)] = report_mod.plain(a.summary)
        summaries[label]["trace"] = str(run.trace_path)
    text = "\n\n".join(part.strip() for part in parts) + "\n"
    _write(lambda p: p.write_text(text), out / "report.md")
    _write(lambda p: p.write_text(json.dumps(summaries, indent=1)), out / "summary.json")
    click.echo(f"gapscope: wrote {out / 'report.md'}", err=True)
    if db_path:
        store_runs(db_path, list(zip(labels, runs, (a for _, a in pairs), strict=True)))


@main.group(cls=Group)
def db():
    """The results database: every run analysed, in one SQLite file (docs/METRICS.md)."""


@db.command("add", cls=Command)
@click.argument("database", type=click.Path(dir_okay=False))
@click.argument("traces", nargs=-1, required=True)
@pattern_options
def db_add(database, traces, step_pattern, check_pattern, device):
    """Analyse TRACES (exports, run dirs, directories of run dirs) into DATABASE.

    \b
    Example:
        gapscope db add runs.db traces/*/
        sqlite3 runs.db "SELECT label, bubble_ns_median FROM runs"
    """
    runs, labels, _, pairs, _ = _compare_inputs(
        traces, Options(step_pattern, check_pattern, device))
    store_runs(database, list(zip(labels, runs, (a for _, a in pairs), strict=True)))


def _draw_plots(plots: list) -> None:
    from .render.plots import plot_analysis

    for label, a, path, untraced in plots:
        _write(lambda p, a=a, label=label, u=untraced: plot_analysis(a, label, p, u), path)


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in label).strip("-") or "run"


if __name__ == "__main__":
    main()
