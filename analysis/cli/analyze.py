"""`gapscope analyze` (one capture: text, JSON, CSV, Markdown, figures, timeline) and
`gapscope ranges` (the range names in a capture, to write --steps)."""

import sys
from pathlib import Path

import click
import pandas as pd

from .. import api
from ..measures.steps import DEFAULT_STEP_PATTERN
from ..render import report as report_mod
from .base import (
    GapscopeError,
    check_outputs,
    check_stdout,
    db_option,
    force_option,
    input_files,
    pattern_options,
    perfetto_option,
    said,
    say_step_notes,
    write,
)


def write_perfetto(path: Path, runs: list) -> None:
    """runs: (label, [Analysis], the trace's strings, its blocking calls) each."""
    from ..render.perfetto import write_chrome_trace

    if not any(a.traced for _, analyses, _, _ in runs for a in analyses):
        raise GapscopeError("--perfetto: a capture of GPU metrics alone has no timeline to "
                            "write (profile with --trace=cuda,nvtx)")
    write(lambda p: write_chrome_trace(p, runs), path)
    click.echo(f"gapscope: wrote {path} (open it in ui.perfetto.dev or chrome://tracing)",
               err=True)


def timeline(label: str, analyses: list) -> tuple:
    """What write_perfetto takes of one run."""
    trace = analyses[0].trace
    return label, analyses, trace.strings, trace.blocking


def device_path(path: Path, device: int) -> Path:
    return path.with_name(f"{path.stem}-device{device}{path.suffix}")


@click.command()
@click.argument("trace")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv", "md"]),
              default="text", show_default=True)
@click.option("--table", type=click.Choice(report_mod.TABLES), default=None,
              help="The one table --format csv or json prints: one row a step (csv's default), "
                   "a gap, a stream, a sync site, or a step's host row (and device); json "
                   "without it: every table.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="Also draw the timeline, per-step bars and where the idle time is (gaps by "
                   "length) into this file: .png, .svg or .pdf.")
@perfetto_option
@db_option
@force_option
@pattern_options
def analyze(trace, fmt, table, plot, perfetto, db_path, force, step_pattern, check_pattern,
            device):
    """Analyse one TRACE: an nsys .sqlite export (as it is, .sqlite.gz or .sqlite.xz), a
    torch.profiler trace (.json, .json.gz) or a run directory (capture.sqlite + run.json).

    \b
    Example:
        gapscope analyze capture.sqlite --format json
        gapscope analyze traces/<UTC>-static/ --perfetto static.json   # ui.perfetto.dev
    """
    if table is not None and fmt not in ("csv", "json"):
        raise GapscopeError(f"--table {table}: it picks the table of --format csv or json; "
                            f"--format {fmt} prints every table")
    inputs = input_files([trace])
    check_stdout(inputs)
    check_outputs(inputs, force, db_path, plot=plot, perfetto=perfetto)
    with said():
        analyses = api.open(trace, step_pattern, check_pattern, device)
    run = analyses[0].run
    say_step_notes(run.label, analyses)
    plots = []
    if plot:
        plots = [(a, Path(plot) if len(analyses) == 1 else device_path(Path(plot), a.device))
                 for a in analyses]
        if len(plots) > 1:  # FILE-deviceN.png each: checked before anything is written
            for _, path in plots:
                check_outputs(inputs, force, plot=str(path))
    if fmt == "json":
        # Written as they are: click.echo would scan every chunk for terminal colour codes.
        with said():
            for chunk in report_mod.json_chunks(analyses, table):
                sys.stdout.write(chunk)
    elif fmt == "csv":
        with said():
            for chunk in report_mod.csv_chunks(analyses, table or "steps"):
                sys.stdout.write(chunk)
    elif fmt == "md":
        click.echo(report_mod.to_markdown(run.label, analyses), nl=False)
    else:
        click.echo(report_mod.to_text(run.label, analyses, analyses[0].source))
    if plots:
        from ..render.plots import plot_analysis

        for a, path in plots:
            write(lambda p, a=a: plot_analysis(a, run.label, p, run.untraced_ms_per_step()),
                  path)
            click.echo(f"gapscope: wrote {path}", err=True)
    if perfetto:
        write_perfetto(Path(perfetto), [timeline(run.label, analyses)])
    if db_path:
        from .db import store_runs  # sqlite-utils, only for --db

        store_runs(db_path, [(run.label, analyses)])


@click.command()
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
    from ..measures.steps import INFER, NAME_NUMBER, PROFILER_STEP_PATTERN, compile_pattern
    from ..readers import load_trace
    from ..readers.runs import resolve_run

    with said():
        run = resolve_run(trace)
        names = load_trace(run.trace_path).ranges["name"].astype(str)
        pattern = api.run_options(run, step_pattern, None, None).step_pattern
        compiled = None if pattern == INFER else compile_pattern(pattern, "--steps")
    def takes(regex) -> pd.Series:
        return pd.Series([regex is not None and regex.search(n) is not None for n in names],
                         index=names.index, dtype=bool)

    taken = takes(compiled)
    fallback = None
    if not taken.any() and pattern == DEFAULT_STEP_PATTERN:  # as find_steps falls back
        fallback = PROFILER_STEP_PATTERN
        taken = takes(compile_pattern(fallback, "--steps"))
    keys = names.str.replace(NAME_NUMBER, "N", regex=True) if shapes else names
    # Most frequent first; ties in the order the names first appear (steps in their order).
    counts = keys.groupby(keys, sort=False).agg(["size"]).assign(
        taken=taken.groupby(keys, sort=False).sum(),
        first=pd.Series(range(len(keys))).groupby(keys.to_numpy(), sort=False).min())
    counts = counts.sort_values(["size", "first"], ascending=[False, True], kind="stable")
    for name, row in counts.iterrows():
        mark = "*" if row["taken"] else " "
        click.echo(f"{row['size']:>8} {mark} {name}")
    # A name of the most frequent kind, for the pattern that would take that kind.
    frequent = names[keys == counts.index[0]].iloc[0] if len(counts) else None
    click.echo(ranges_footer(len(names), len(counts), pattern, fallback, int(taken.sum()),
                             shapes, frequent))


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def ranges_footer(ranges: int, kinds: int, pattern: str, fallback: str | None, taken: int,
                  shapes: bool, frequent: str | None) -> str:
    """The last lines of `gapscope ranges`: how many, what the steps pattern takes, and where it
    takes none, what analyze does then and a pattern to paste (`frequent`: a name of the most
    frequent kind)."""
    from ..measures.steps import INFER, pattern_for

    kind = ("kind of name", "kinds of name") if shapes else ("name", "names")
    head = f"{_plural(ranges, 'range', 'ranges')}, {_plural(kinds, *kind)}; "
    if pattern == INFER:
        return head + "--steps infer: analyze infers the steps from the trace, taking no range"
    if taken and fallback is None:
        return head + f"* the steps pattern '{pattern}' takes {taken} of them"
    if taken:
        return (head + f"the steps pattern '{pattern}' takes none;\n* torch.profiler's "
                f"'{fallback}', which analyze tries next, takes {taken} of them")
    if fallback:
        lines = [head + f"the steps pattern '{pattern}' takes none,",
                 f"nor does torch.profiler's '{fallback}': analyze infers the steps from the trace"]
    else:
        lines = [head + f"the steps pattern '{pattern}' takes none: analyze stops at it",
                 "(the default pattern, or --steps infer, infers the steps from the trace)"]
    if frequent is not None:
        lines.append(f"the first kind above as the steps: --steps '{pattern_for(frequent)}'")
    return "\n".join(lines)
