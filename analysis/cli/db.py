"""`gapscope db add` and the --db option of the other commands: runs into the results database
(analysis.Database)."""

import sqlite3

import click

from ..store.database import Database
from .base import Command, GapscopeError, Group, check_outputs, pattern_options
from .inputs import open_planned, plan


def store_runs(db_path, labelled: list) -> None:
    """(label, [Analysis]) of each run into the database at db_path, and one line on what it
    holds after."""
    try:
        with Database(db_path) as db:
            for label, analyses in labelled:
                db.add(analyses, label)
            held = db.count()
    except (OSError, sqlite3.Error) as e:
        raise GapscopeError(f"{db_path}: cannot write the database ({e})") from None
    # A run added again replaces its rows: the count after says what the database holds.
    click.echo(f"gapscope: added {_runs(len(labelled))} to {db_path}, which holds "
               f"{_runs(held)}", err=True)


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


@click.group(cls=Group)
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
    planned = plan(traces, step_pattern, check_pattern, device)
    # Never an input, nor a SQLite file gapscope did not write (an nsys export).
    check_outputs(planned.files, False, database, "DATABASE")
    per_run = open_planned(planned)
    store_runs(database, list(zip(planned.labels, per_run, strict=True)))
