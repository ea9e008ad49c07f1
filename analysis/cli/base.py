"""What every command of the console script shares: one-line errors (exit 2 for bad input),
the lazily imported commands, the pattern options, and the notes on a loose steps pattern.

Imports neither pandas nor numpy: `gapscope --help`, `--version` and `doctor` start without
them (the library's modules are imported by the command that runs).
"""

import importlib
import importlib.util
import re
import sys
from contextlib import contextmanager
from pathlib import Path

import click

from ..errors import TraceError


def name_shapes(names):
    """measures.steps.name_shapes, imported when a note is made (it needs pandas)."""
    from ..measures.steps import name_shapes as shapes

    return shapes(names)


class GapscopeError(click.ClickException):
    """Bad input: one line on stderr and exit status 2 (click's default for errors is 1)."""

    exit_code = 2


@contextmanager
def said():
    """The library's TraceError as the CLI's one line, exit status 2."""
    try:
        yield
    except TraceError as e:
        raise GapscopeError(str(e)) from None


# "gapscope" where installed (gapscope.analysis, gapscope.harness), "" in the source tree.
ROOT = (__package__ or "analysis.cli").rpartition(".")[0].rpartition(".")[0]


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
    # name -> (module:attribute, summary): commands imported when used, listed by their
    # summary; only the top-level group has them (analysis.cli.LAZY_COMMANDS).
    lazy: dict = {}

    def list_commands(self, ctx):
        lazy = [n for n, (target, _) in self.lazy.items()
                if _importable(qualified(target.split(":")[0]))]
        return sorted([*super().list_commands(ctx), *lazy])

    def get_command(self, ctx, name):
        if name in self.lazy:
            module, attr = self.lazy[name][0].split(":")
            module = qualified(module)
            if not _importable(module):
                return None  # not installed (the analysis alone): no such command
            try:
                return getattr(importlib.import_module(module), attr)
            except ImportError as e:  # installed but broken: say why, not "no such command"
                raise GapscopeError(f"gapscope {name}: {module} cannot be imported: {e}") from None
        return super().get_command(ctx, name)

    def format_commands(self, ctx, formatter):
        """click's list of commands, the lazy ones by their summary (none of them imported)."""
        names = self.list_commands(ctx)
        listed = [(n, click.Command(n, help=self.lazy[n][1]) if n in self.lazy
                   else self.get_command(ctx, n)) for n in names]
        listed = [(n, c) for n, c in listed if c is not None and not c.hidden]
        if listed:
            limit = formatter.width - 6 - max(len(n) for n, _ in listed)
            with formatter.section("Commands"):
                formatter.write_dl([(n, c.get_short_help_str(limit)) for n, c in listed])


def pattern_options(f):
    from ..measures.steps import DEFAULT_CHECK_PATTERN, DEFAULT_STEP_PATTERN

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


def step_notes(summary: dict, steps) -> list:
    """What a steps pattern did that its user may not have meant, one line each, from what the
    analysis says it did (summary's step_pattern, step_numbers, steps_from): steps numbered in
    order (the names gave no number), or ranges of several kinds of name taken as steps (too
    loose). None for steps inferred from the trace or a function's calls (numbered in order,
    their names have no number)."""
    if summary.get("steps_from") in ("inferred", "function"):
        return []
    pattern = summary.get("step_pattern", "")
    notes = []
    if summary.get("step_numbers") == "order":
        why = ("has no group" if re.compile(pattern).groups == 0
               else "takes no number from some of the names")
        notes.append(f"the steps pattern '{pattern}' {why}, so the steps are numbered "
                     f"{steps['step'].min()} to {steps['step'].max()} in the order they start; "
                     r"a group such as '^Step (\d+)$' takes the numbers in their names")
    shapes = name_shapes(steps["name"])
    if len(shapes) > 1:
        kinds = ", ".join(f"'{shape}' ×{count}" for shape, count in shapes.head(3).items())
        notes.append(f"the steps pattern '{pattern}' took {len(steps)} ranges of {len(shapes)} "
                     f"kinds of name as steps ({kinds}{', ...' if len(shapes) > 3 else ''}); "
                     "anchor it to the step ranges' names, e.g. " r"'^Step (\d+)$'")
    return notes


def say_step_notes(label: str, analyses: list) -> None:
    """The notes on the steps pattern the run was analysed with (step_notes)."""
    for note in step_notes(analyses[0].summary, analyses[0].steps) + check_notes(
            analyses[0].summary):
        click.echo(f"gapscope: note: {label}: {note}", err=True)


def check_notes(summary: dict) -> list:
    """A check pattern given (--check, or run.json's) that matched no range: said, since the
    stop-check cover is then missing (the default pattern matching nothing is said in the
    report's streams line only: most programs have no such range)."""
    from ..measures.steps import DEFAULT_CHECK_PATTERN

    pattern = summary.get("check_pattern")
    if summary.get("checks") != 0 or pattern in (None, DEFAULT_CHECK_PATTERN):
        return []
    return [f"the check pattern '{pattern}' matches no range, so there is no stop-check cover; "
            "`gapscope ranges TRACE` lists the range names"]


def force_option(f):
    return click.option(
        "--force", is_flag=True,
        help="Replace output files that exist (without it, an existing output is refused and "
             "nothing is written). An input is never written, even with --force.")(f)


def input_files(traces) -> list:
    """The files the TRACES arguments stand for (outputs.input_files of each; TRACE:REGEX read
    as TRACE), before any of them is analysed."""
    from ..outputs import input_files as files

    found = []
    with said():
        for trace in traces:
            found += files(split_pattern(trace)[0])
    return found


def check_stdout(inputs) -> None:
    from ..outputs import check_stdout as check

    with said():
        check(inputs)


def check_outputs(inputs, force: bool, db: str | None = None, db_what: str = "--db",
                  **files) -> None:
    """Each output a command was given, before any work (outputs.py: not an input, its format
    by its extension, an existing file only with --force, its folder there and writable).
    `files`: the option's name (plot=...) -> its path or None; `db`: --db, added to."""
    from ..outputs import (
        PERFETTO_FORMATS,
        PLOT_FORMATS,
        check_database,
        check_output,
    )

    formats = {"plot": PLOT_FORMATS, "hardware_plot": PLOT_FORMATS, "perfetto": PERFETTO_FORMATS}
    with said():
        for name, value in files.items():
            if value:
                check_output(value, f"--{name.replace('_', '-')}", inputs, replace=force,
                             formats=formats[name])
        if db:
            check_database(db, db_what, inputs)


def write(draw, path: Path) -> None:
    """draw(path) whole or not at all (outputs.write_atomic), an unwritable path said in one
    line."""
    from ..outputs import write_atomic

    with said():
        write_atomic(path, draw)


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
