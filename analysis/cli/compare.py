"""`gapscope compare`: runs side by side (analysis.compare), as text, Markdown, JSON or CSV."""

import json
import sqlite3
from pathlib import Path

import click

from ..outputs import check_input
from ..readers.runs import unique_labels
from ..render.comparison import comparison
from ..store.database import Database
from .base import (
    GapscopeError,
    check_outputs,
    check_stdout,
    force_option,
    pattern_options,
    said,
    write,
)
from .db import store_runs
from .inputs import open_planned, plan, with_baseline


@click.command()
@click.argument("traces", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "md", "csv"]),
              default="text", show_default=True,
              help="csv: one row a traced run, compare's table with every number (as json).")
@click.option("--wide", is_flag=True,
              help="Text: every run in one table, however wide (default: tables of 100 columns).")
@click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None,
              help="With TRACES: also add them to this results database. Without: compare "
                   "the runs stored in it.")
@click.option("--where", default=None,
              help="With --db and no TRACES: only the runs this SQL condition on the runs "
                   "table selects, e.g. \"config_variant LIKE 'pipelined%'\".")
@click.option("--hardware-plot", "hardware_plot", type=click.Path(dir_okay=False), default=None,
              help="Draw the hardware table (runs with GPU metrics) to this file: .png, .svg or "
                   ".pdf.")
@click.option("--baseline", default=None, metavar="LABEL",
              help="The run the others are compared with (default: the first run given; a "
                   "sweep's runs in path order).")
@force_option
@pattern_options
def compare(traces, fmt, wide, db_path, where, hardware_plot, baseline, force, step_pattern,
            check_pattern, device):
    """Compare TRACES (exports, run dirs, or directories of them), the first as the baseline.
    TRACE:REGEX analyses TRACE with its own steps pattern (over --steps and run.json's).

    \b
    Example:
        gapscope compare traces/*-static/ traces/*-graphed/
        gapscope compare traces/                           # every run and export under it
        gapscope compare mine.sqlite:'^decode (\\d+)$' traces/*-static/
        gapscope compare --db runs.db --where "config_batch = 16"
    """
    if traces and where:
        raise click.UsageError("--where selects runs of --db; give it without TRACES")
    if traces:
        planned, rule = with_baseline(plan(traces, step_pattern, check_pattern, device),
                                      baseline)
        files = planned.files
    elif db_path:
        files = [db_path]
    else:
        raise click.UsageError("give TRACES to compare, or --db FILE")
    check_stdout(files)
    check_outputs(files, force, db_path if traces else None, hardware_plot=hardware_plot)
    if traces:
        per_run = open_planned(planned)
        labels = planned.labels
        if db_path:
            store_runs(db_path, list(zip(labels, per_run, strict=True)))
        # Each run is compared on the device asked for, else its first device.
        firsts = [analyses[0] for analyses in per_run]
    else:
        firsts = stored(db_path, where)
        labels = unique_labels([a.run for a in firsts])
        firsts, labels, rule = _stored_baseline(firsts, labels, baseline)
    c = comparison(labels, firsts, baseline_rule=rule)
    if hardware_plot:
        if c.hardware is None or c.hardware.empty:
            raise GapscopeError("--hardware-plot: none of these runs sampled GPU metrics "
                                "(nsys profile --gpu-metrics-devices=N samples them; "
                                "`gapscope doctor` says whether this machine can)")
        from ..render.plots_runs import plot_hardware

        write(lambda p: plot_hardware(c.hardware, p), Path(hardware_plot))
        click.echo(f"gapscope: wrote {hardware_plot}", err=True)
    if fmt == "json":
        click.echo(json.dumps(c.to_records(), indent=1))
    elif fmt == "csv":
        click.echo(c.to_csv(), nl=False)
    else:
        click.echo(c.to_markdown() if fmt == "md" else c.to_text(wide))


def _stored_baseline(firsts: list, labels: list, baseline: str | None) -> tuple:
    """The stored runs with the baseline first: --baseline LABEL, else the first added."""
    if baseline is None:
        return firsts, labels, "the first run"
    if baseline not in labels:
        raise GapscopeError(f"--baseline {baseline}: no stored run is labelled so; the labels: "
                            f"{', '.join(labels)}")
    i = labels.index(baseline)
    order = [i, *(j for j in range(len(labels)) if j != i)]
    return [firsts[j] for j in order], [labels[j] for j in order], "--baseline"


def stored(db_path, where) -> list:
    """The stored Analyses of the runs `where` selects."""
    with said():
        check_input(db_path)
    if not Path(db_path).is_file():
        raise GapscopeError(f"{db_path}: no such database; write one with --db or `gapscope db "
                            "add`")
    try:
        with Database(db_path, read_only=True) as db:
            if not db.db["runs"].exists():
                raise GapscopeError(f"{db_path}: not a gapscope results database (no runs "
                                    "table); write one with --db or `gapscope db add`")
            analyses = db.analyses(where, tables=("syncs",))  # what compare reads
    except sqlite3.Error as e:
        raise GapscopeError(f"{db_path}: cannot read the runs ({e})") from None
    if not analyses:
        raise GapscopeError(f"{db_path}: no run matches" + (f" {where!r}" if where else ""))
    return analyses
