"""`gapscope`: the command line over the analysis library (also `python -m analysis.cli`).

Each command opens, compares or stores through the library (analysis.open, analysis.compare,
analysis.Database) and adds its options and its printing: analyze.py (analyze, ranges),
compare.py (compare, report), db.py (db add, --db), and imported when used, profile.py,
study.py and analysis.capture.doctor.
"""

import click

from .analyze import analyze, ranges
from .base import GapscopeError, MainGroup, split_pattern, step_notes
from .compare import compare, report
from .db import db

__all__ = ["GapscopeError", "main", "split_pattern", "step_notes"]


def _version(ctx, _param, value) -> None:
    if value and not ctx.resilient_parsing:
        from ..install import version

        click.echo(version())
        ctx.exit()


@click.group(cls=MainGroup)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Show gapscope's version and where it runs from, and exit.")
def main():
    """Where a decode loop leaves the GPU idle, step by step, and why: reads an nsys SQLite export.

    \b
    Example:
        gapscope analyze traces/20261130T171200Z-pipelined/
        gapscope compare traces/*-static/ traces/*-graphed/
        gapscope profile -- python generate.py                # any program, as it is
    """


for command in (analyze, compare, db, ranges, report):
    main.add_command(command)
