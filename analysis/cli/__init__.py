"""`gapscope`: the command line over the analysis library (also `python -m analysis.cli`).

Each command opens, compares or stores through the library (analysis.open, analysis.compare,
analysis.Database) and adds its options and its printing: analyze.py (analyze, ranges),
compare.py, report.py, db.py (db add, --db), profile.py and
analysis.capture.doctor, each imported when it runs (LAZY_COMMANDS): `gapscope --help` and
`--version` answer without pandas.
"""

import click

from .base import GapscopeError, Group, split_pattern, step_notes

__all__ = ["GapscopeError", "main", "split_pattern", "step_notes"]

# Every command is imported when it runs, not to be listed: name -> (module:attribute, the first
# sentence of its help, which `gapscope --help` lists; tests/test_startup.py holds the two
# alike). The analysis needs no harness (doctor) or nsys (profile) to run, and
# `gapscope --help` imports no pandas.
LAZY_COMMANDS = {
    "analyze": ("analysis.cli.analyze:analyze",
                "Analyse one TRACE: an nsys .sqlite export (as it is, .sqlite.gz or .sqlite.xz), "
                "a torch.profiler trace (.json, .json.gz) or a run directory (capture.sqlite + "
                "run.json)."),
    "compare": ("analysis.cli.compare:compare",
                "Compare TRACES (exports, run dirs, or directories of them), the first as the "
                "baseline."),
    "db": ("analysis.cli.db:db",
           "The results database: every run analysed, in one SQLite file (docs/METRICS.md)."),
    "doctor": ("analysis.capture.doctor:doctor",
               "Check that this machine can capture with `gapscope profile`: GPU and driver, "
               "torch with CUDA, nsys and its capture -> import -> SQLite export chain, GPU "
               "metrics sampling, perf_event_paranoid, free disk."),
    "profile": ("analysis.cli.profile:profile",
                "Run CMD under Nsight Systems, export the capture to SQLite and analyse it, "
                "all in a new run directory traces/<UTC>-<program>/, with an untraced twin of "
                "its steps."),
    "ranges": ("analysis.cli.analyze:ranges",
               "Each NVTX (or record_function) range name in TRACE with its count, the most "
               "frequent first, `*` beside those the steps pattern takes: what to write for "
               "--steps."),
    "report": ("analysis.cli.report:report",
               "Write a Markdown report with plots for TRACES (exports or run dirs) into DIR: "
               "compare's tables (the hardware one too, for runs with GPU metrics), then each "
               "run's tables and figure."),
}


class MainGroup(Group):
    lazy = LAZY_COMMANDS


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

