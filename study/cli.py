"""`python -m study`: RESULTS.md and its plots from a study directory (study.results; one
part: study.parts)."""

import json
from pathlib import Path

import click

from analysis import TraceError
from analysis.cli import GapscopeError
from analysis.toolkit import (
    Command,
    check_input,
    check_output,
    check_outputs,
    force_option,
    input_files,
    said,
    store_runs,
)

from .parts import PART_HELP, PARTS, StudyError, write_part
from .results import write_results


@click.command("python -m study", cls=Command)
@click.argument("study", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    help="Directory for RESULTS.md and its PNGs.",
)
@click.option(
    "--notes",
    type=click.Path(path_type=Path),
    default=None,
    help="A Markdown file of commentary to put after the header, as it is.",
)
@click.option("--db", "db_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also add the captures to this results database.")
@click.option(
    "--part",
    type=click.Choice(list(PARTS)),
    default=None,
    help="Rewrite only this part of OUT/RESULTS.md (between its markers), from STUDY: "
    + "; ".join(f"{k}: {v}" for k, v in PART_HELP.items())
    + ". `python -m study.publish` makes every part of docs/RESULTS.md.",
)
@force_option
def study(study, out, notes, db_path, part, force):
    """Write RESULTS.md and its plots from STUDY, a directory made by scripts/study.sh, or any
    directory of run directories (every run under it, analysed in parallel).

    \b
    Example:
        python -m study traces/study-20261130T221926Z -o OUT --notes NOTES.md
        python -m study docs/observer-20261201 -o docs --part observer
        python -m study docs/llama-20261201 -o docs --part family
        python -m study.publish            # every part of docs/RESULTS.md
    """
    if not study.is_dir():
        raise GapscopeError(
            f"{study}: not a directory; pass the study directory of scripts/study.sh"
        )
    # Before any work: RESULTS.md replaced only with --force (--part rewrites its own part of
    # it), never a file the study reads; the notes a regular file; --db a results database.
    files = input_files([str(study)])
    with said():
        if notes is not None:
            check_input(notes, "a Markdown file of notes")
        if out.exists() and not out.is_dir():
            raise GapscopeError(f"-o {out}: not a folder; name a folder for RESULTS.md")
        if out.is_dir():
            check_output(out / "RESULTS.md", "-o", files, replace=force or part is not None)
    check_outputs(files, force, str(db_path) if db_path else None)
    try:
        if part:
            path, analyses = write_part(study, out, part), {}
        else:
            path, analyses = write_results(study, out, notes)
    except StudyError as e:
        raise GapscopeError(str(e)) from None
    except (TraceError, OSError, KeyError, json.JSONDecodeError) as e:
        raise GapscopeError(f"{study}: cannot make the results ({e})") from None
    click.echo(f"gapscope: wrote {path}", err=True)
    if db_path:
        store_runs(db_path, [(name, [a]) for name, (a, _, _) in analyses.items()])
