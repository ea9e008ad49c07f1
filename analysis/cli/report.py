"""`gapscope report`: a Markdown report with figures of TRACES in a folder of its own
(docs/ANALYSIS.md, "Outputs").

The folder holds this report's files only where the report made it: report.md, summary.json,
a figure a run and device, the timeline where --perfetto names a file in it. report.md ends in a
comment that lists them; a later report into the same folder (--force) replaces those files,
removes the ones it no longer writes and touches no other file (a run directory as the folder,
as `gapscope profile` writes its report: the capture beside it is never touched).
"""

import json
import re
from pathlib import Path

import click

from ..outputs import RUN_FILES, check_output
from ..render import report as report_mod
from ..render.comparison import comparison
from .analyze import timeline, write_perfetto
from .base import (
    GapscopeError,
    check_outputs,
    db_option,
    force_option,
    pattern_options,
    perfetto_option,
    said,
    write,
)
from .db import store_runs
from .inputs import open_planned, plan, with_baseline

REPORT, SUMMARY = "report.md", "summary.json"
MANIFEST = re.compile(r"<!-- gapscope report files: (.*?) -->")
# A report made before report.md listed its files: the figures it shows.
FIGURE_LINK = re.compile(r"\]\(([A-Za-z0-9._-]+\.png)\)")


def earlier_files(out: Path) -> list | None:
    """The files an earlier report wrote into `out` (report.md's list, else the figures it
    links to), report.md and summary.json among them; None where `out` holds no report.md."""
    report = out / REPORT
    if not report.is_file():
        return None
    text = report.read_text(errors="replace")
    found = MANIFEST.search(text)
    # A report.md gapscope did not write: itself only (replaced with --force), never the
    # files it links to.
    ours = text.startswith("# gapscope report")
    names = found.group(1).split() if found else FIGURE_LINK.findall(text) if ours else []
    own = [REPORT, SUMMARY, *names]
    return [out / n for n in dict.fromkeys(own)
            if ".." not in Path(n).parts and not Path(n).is_absolute()]


def check_folder(out: Path, force: bool, inputs: list) -> list:
    """-o DIR before any work: a folder (made where missing, later), and where it holds an
    earlier report, replaced only with --force; the earlier report's files."""
    if out.exists() and not out.is_dir():
        raise GapscopeError(f"-o {out}: not a folder; name a folder for the report")
    earlier = earlier_files(out) if out.is_dir() else None
    if earlier is not None and not force:
        raise GapscopeError(f"-o {out}: holds an earlier report ({REPORT} and "
                            f"{len(earlier) - 1} more files); --force replaces it (its own "
                            "files only)")
    if earlier is None and (out / SUMMARY).exists() and not force:
        raise GapscopeError(f"-o {out}: {SUMMARY} exists; --force replaces it")
    return [p for p in (earlier or []) if p.name not in RUN_FILES
            and not any(p.absolute() == Path(i).absolute() for i in inputs)]


def slug(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in label).strip("-") or "run"


@click.command()
@click.argument("traces", nargs=-1, required=True)
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for report.md, its figures (PNG) and summary.json; it may hold other "
                   "files (never touched). An earlier report in it is replaced with --force.")
@click.option("--show", is_flag=True,
              help="Also print each run's analysis, as `analyze` prints it (one reading of "
                   "each capture for both).")
@click.option("--baseline", default=None, metavar="LABEL",
              help="The run the others are compared with (default: the first run given).")
@perfetto_option
@db_option
@force_option
@pattern_options
def report(traces, out_dir, show, baseline, perfetto, db_path, force, step_pattern,
           check_pattern, device):
    """Write a Markdown report with plots for TRACES (exports or run dirs) into DIR: compare's
    tables (the hardware one too, for runs with GPU metrics), then each run's tables and figure.
    TRACE:REGEX analyses TRACE with its own steps pattern.

    \b
    Example:
        gapscope report traces/*-static/ traces/*-pipelined/ -o out/report
        gapscope report traces/*-fused/ -o out/fused --perfetto out/fused/timeline.json
    """
    out = Path(out_dir)
    planned, rule = with_baseline(plan(traces, step_pattern, check_pattern, device), baseline)
    earlier = check_folder(out, force, planned.files)
    try:  # made first: a timeline inside it (-o out --perfetto out/t.json) is checked there
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GapscopeError(f"-o {out}: cannot create the folder ({e.strerror or e})") from None
    with said():
        for name in (REPORT, SUMMARY):
            check_output(out / name, "-o", planned.files, replace=True)
    if perfetto:
        check_outputs(planned.files, force, perfetto=perfetto)
    check_outputs(planned.files, force, db_path)
    figures = [out / f"{slug(label)}-device" for label in planned.labels]
    # The traces are kept for the timeline, and for --show's first line (what made each).
    per_run = open_planned(planned, keep_trace=bool(perfetto) or show)
    labels = planned.labels
    plots = [(label, a, Path(f"{stem}{a.device}.png"), a.run.untraced_ms_per_step())
             for label, stem, analyses in zip(labels, figures, per_run, strict=True)
             for a in analyses]
    with said():
        for _, _, path, _ in plots:  # a figure of another's by the same name: --force
            check_output(path, "-o", planned.files, replace=force or path in earlier)
    draw_plots(plots)
    # As compare: the gaps of the traced runs, then the hardware table of the runs with metrics.
    c = comparison(labels, [analyses[0] for analyses in per_run], spread=False,
                   baseline_rule=rule)
    tables = c.to_markdown()
    parts = ["# gapscope report", *([tables] if tables else [])]
    written = [REPORT, SUMMARY, *(p.name for _, _, p, _ in plots)]
    if perfetto:
        write_perfetto(Path(perfetto), [timeline(label, analyses) for label, analyses
                                        in zip(labels, per_run, strict=True)])
        parts.append(f"The analysed timeline, every op and gap: `{perfetto}` (open it in "
                     "ui.perfetto.dev or chrome://tracing).")
        inside = _inside(Path(perfetto), out)
        if inside is not None:
            written.append(inside)
    summaries = {}
    for label, analyses in zip(labels, per_run, strict=True):
        parts.append(report_mod.to_markdown(label, analyses))
        for a in analyses:
            png = f"{slug(label)}-device{a.device}.png"
            parts.append(f"![{label}, device {a.device}]({png})\n")
            summaries.setdefault(label, {})[str(a.device)] = report_mod.plain(a.summary)
        summaries[label]["trace"] = str(analyses[0].run.trace_path)
    parts.append(f"<!-- gapscope report files: {' '.join(written)} -->")
    text = "\n\n".join(part.strip() for part in parts) + "\n"
    write(lambda p: p.write_text(json.dumps(summaries, indent=1)), out / SUMMARY)
    write(lambda p: p.write_text(text), out / REPORT)
    # The earlier report's files this one did not write again: removed, and no other file.
    for stale in earlier:
        if stale.is_file() and _inside(stale, out) not in written:
            stale.unlink()
    click.echo(f"gapscope: wrote {out / REPORT}", err=True)
    if show:
        for label, analyses in zip(labels, per_run, strict=True):
            click.echo(report_mod.to_text(label, analyses, analyses[0].source))
    if db_path:
        store_runs(db_path, list(zip(labels, per_run, strict=True)))


def _inside(path: Path, out: Path) -> str | None:
    """`path` relative to the folder `out`, where it lies in it."""
    try:
        return path.absolute().relative_to(out.absolute()).as_posix()
    except ValueError:
        return None


def draw_plots(plots: list) -> None:
    from ..render.plots import plot_analysis

    for label, a, path, untraced in plots:
        write(lambda p, a=a, label=label, u=untraced: plot_analysis(a, label, p, u), path)
