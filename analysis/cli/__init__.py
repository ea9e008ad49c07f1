"""`gapscope`: the command line over the analysis library (also `python -m analysis.cli`).

Each command opens, compares or stores through the library (analysis.open, analysis.compare,
analysis.Database) and adds its options and its printing: analyze.py (analyze, ranges),
compare.py (compare, report), db.py (db add, --db), profile.py, study.py and
analysis.capture.doctor, each imported when it runs (base.LAZY_COMMANDS): `gapscope --help` and
`--version` answer without pandas.
"""

import click

from .base import GapscopeError, MainGroup, print_version, split_pattern, step_notes

__all__ = ["GapscopeError", "main", "split_pattern", "step_notes"]


@click.group(cls=MainGroup)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=print_version, help="Print gapscope's version and exit.")
def main():
    """Where a decode loop leaves the GPU idle, step by step, and why: reads an nsys SQLite export.

    \b
    Example:
        gapscope analyze traces/20261130T171200Z-pipelined/
        gapscope compare tests/data/h200-eager-static-bs16.sqlite traces/*-graphed/
        gapscope profile -- python examples/hf_decode.py --model llama
    """

