"""`gapscope compare` (runs side by side: analysis.compare) and `gapscope report` (a Markdown
report with figures of them)."""

import json
import sqlite3
from pathlib import Path

import click

from ..readers.runs import unique_labels
from ..render import report as report_mod
from ..render.comparison import comparison
from ..store.database import Database
from .analyze import timeline, write_perfetto
from .base import (
    GapscopeError,
    check_outputs,
    db_option,
    pattern_options,
    perfetto_option,
    write,
)
from .db import store_runs
from .inputs import inputs


@click.command()
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
    check_outputs(db_path if traces else None, hardware_plot=hardware_plot)
    if traces:
        labels, per_run = inputs(traces, step_pattern, check_pattern, device)
        if db_path:
            store_runs(db_path, list(zip(labels, per_run, strict=True)))
        # Each run is compared on the device asked for, else its first device.
        firsts = [analyses[0] for analyses in per_run]
    elif db_path:
        firsts = stored(db_path, where)
        labels = unique_labels([a.run for a in firsts])
    else:
        raise click.UsageError("give TRACES to compare, or --db FILE")
    c = comparison(labels, firsts)
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
    else:
        click.echo(c.to_markdown() if fmt == "md" else c.to_text(wide))


def stored(db_path, where) -> list:
    """The stored Analyses of the runs `where` selects."""
    if not Path(db_path).is_file():
        raise GapscopeError(f"{db_path}: no such database; write one with --db or `gapscope db "
                            "add`")
    try:
        with Database(db_path, read_only=True) as db:
            if not db.db["runs"].exists():
                raise GapscopeError(f"{db_path}: not a gapscope results database (no runs "
                                    "table); write one with --db or `gapscope db add`")
            analyses = db.analyses(where)
    except sqlite3.Error as e:
        raise GapscopeError(f"{db_path}: cannot read the runs ({e})") from None
    if not analyses:
        raise GapscopeError(f"{db_path}: no run matches" + (f" {where!r}" if where else ""))
    return analyses


@click.command()
@click.argument("traces", nargs=-1, required=True)
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for report.md, its PNGs and summary.json.")
@click.option("--show", is_flag=True,
              help="Also print each run's analysis, as `analyze` prints it (one reading of "
                   "each capture for both).")
@perfetto_option
@db_option
@pattern_options
def report(traces, out_dir, show, perfetto, db_path, step_pattern, check_pattern, device):
    """Write a Markdown report with plots for TRACES (exports or run dirs) into DIR: compare's
    tables (the hardware one too, for runs with GPU metrics), then each run's tables and figure.
    TRACE:REGEX analyses TRACE with its own steps pattern.

    \b
    Example:
        gapscope report traces/*-static/ traces/*-pipelined/ -o out/report
        gapscope report traces/*-fused/ -o out/fused --perfetto out/fused/timeline.json
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GapscopeError(f"{out}: cannot create the directory ({e.strerror or e})") from None
    # Its own folder made first: a timeline inside it (-o out --perfetto out/t.json) is fine.
    check_outputs(db_path, perfetto=perfetto)
    # The traces are kept for the timeline, and for --show's first line (what made each).
    labels, per_run = inputs(traces, step_pattern, check_pattern, device,
                             keep_trace=bool(perfetto) or show)
    draw_plots([(label, a, out / f"{slug(label)}-device{a.device}.png",
                 a.run.untraced_ms_per_step())
                for label, analyses in zip(labels, per_run, strict=True) for a in analyses])
    # As compare: the gaps of the traced runs, then the hardware table of the runs with metrics.
    c = comparison(labels, [analyses[0] for analyses in per_run], spread=False)
    tables = c.to_markdown()
    parts = ["# gapscope report", *([tables] if tables else [])]
    if perfetto:
        write_perfetto(Path(perfetto), [timeline(label, analyses) for label, analyses
                                        in zip(labels, per_run, strict=True)])
        parts.append(f"The analysed timeline, every op and gap: `{perfetto}` (open it in "
                     "ui.perfetto.dev or chrome://tracing).")
    summaries = {}
    for label, analyses in zip(labels, per_run, strict=True):
        parts.append(report_mod.to_markdown(label, analyses))
        for a in analyses:
            png = f"{slug(label)}-device{a.device}.png"
            parts.append(f"![{label}, device {a.device}]({png})\n")
            summaries.setdefault(label, {})[str(a.device)] = report_mod.plain(a.summary)
        summaries[label]["trace"] = str(analyses[0].run.trace_path)
    text = "\n\n".join(part.strip() for part in parts) + "\n"
    write(lambda p: p.write_text(text), out / "report.md")
    write(lambda p: p.write_text(json.dumps(summaries, indent=1)), out / "summary.json")
    click.echo(f"gapscope: wrote {out / 'report.md'}", err=True)
    if show:
        for label, analyses in zip(labels, per_run, strict=True):
            click.echo(report_mod.to_text(label, analyses, analyses[0].source))
    if db_path:
        store_runs(db_path, list(zip(labels, per_run, strict=True)))


def draw_plots(plots: list) -> None:
    from ..render.plots import plot_analysis

    for label, a, path, untraced in plots:
        write(lambda p, a=a, label=label, u=untraced: plot_analysis(a, label, p, u), path)


def slug(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in label).strip("-") or "run"
