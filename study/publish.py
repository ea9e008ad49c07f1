"""The published study: docs/RESULTS.md, README's findings and docs/PROFILING.md's overhead
table, every number made by `python -m study` from the run directories committed here
(SOURCES), so that a test can make them again and fail on any difference (issue 19).

    python -m study.publish           # write them (and the figures) from SOURCES
    python -m study.publish --check   # exit 1 and say where, if they would change

Run from the repository root. Each part is also `python -m study DIR -o docs --part PART`.
"""

import re
import sys
from pathlib import Path

import pandas as pd

from analysis.toolkit import frame_md_table

# Part `overview` is overview.py's; its names import from here as before.
from .overview import (  # noqa: F401
    FAMILY_NAMES,
    KIND_ORDER,
    OVERVIEW_TEXT,
    capture_kind,
    every_capture,
    overview_findings,
    overview_sections,
    overview_table,
)
from .sources import CAPTURE_SOURCES, SOURCES  # noqa: F401
from .text import (
    wrap,
)

RESULTS, README, PROFILING = Path("docs/RESULTS.md"), Path("README.md"), Path("docs/PROFILING.md")


BY = "python -m study.publish"


def gen_start(name: str, by: str = BY) -> str:
    return f"<!-- generated: {name} ({by}) -->"


GEN_END = "<!-- /generated -->"


# --- the documents ---------------------------------------------------------------------------

HEADER = """# Results: where the decode loop leaves the GPU idle

Every number in this file is computed from run directories committed in this repository, by
`python -m study`: one part a directory (`python -m study DIR -o docs --part PART`, the table
below), all of them and README's findings by `python -m study.publish`. `make test`
makes the file again and fails on any difference (tests/test_study_publish.py). Each sentence
that quotes a number is made from the table it summarises; a range is over every run of that
kind in the part's directory (the last part ranges over every capture).

How each comparison was made:
- *untraced*: timed without a profiler, by `harness bench` (the host's clock around whole runs
  after a warm-up; medians, p10–p90 over the repeats) or by the untraced twin (two CUDA events
  around each step); *traced*: under nsys. A traced bubble or share is what the trace shows,
  not what the loop leaves without nsys: the untraced figure stands beside it wherever one was
  measured.
- *in one process*: the variants were timed by one `harness bench` process, one after another;
  *between processes*: by different processes, where an eager figure moves far more than within
  one (part "The A/A noise floor between processes").
- *within noise*: a figure from two processes (a ratio, a difference of their medians) whose
  ratio is inside the floor between processes (the largest ratio two processes of one
  configuration came out apart: the A/A part's, for eager and compiled loops `static`'s and for
  graph-replayed ones `fused`'s, widened where a part holds two untraced benches of one
  configuration by their ratio); it stands in place of the number, the floor named beside it.
- *op records*: the GPU operations nsys recorded (kernels, copies, memsets; a graph replayed at
  graph level is one); *kernels*: the kernel records alone; *launch calls*: the CUDA API calls
  that launched them.
- MiB = 2^20 bytes; MB and GB/s: 10^6 bytes and 10^9 bytes a second."""


def sources_table() -> str:
    from .parts import PART_HELP

    return frame_md_table(pd.DataFrame([
        {"part": p, "made from": f"`{d}`" if d != "." else "the repository (every directory "
         "above that holds captures)", "what": PART_HELP[p],
         "command": f"`python -m study {d} -o docs --part {p}`"}
        for p, d in SOURCES.items()]))


def results_text(root: Path, fig: Path | None) -> str:
    from .parts import part_block, part_sections

    blocks = [HEADER, sources_table()]
    for part, source in SOURCES.items():
        body = part_sections(part, root / source if source != "." else root, fig)
        if body:
            blocks.append(part_block(part, body))
    return "\n\n".join(blocks) + "\n"


def put_generated(text: str, name: str, body: str, by: str = BY) -> str:
    """`text` with the block between gen_start(name, by) and GEN_END replaced by `body`."""
    start = gen_start(name, by)
    if start not in text:
        raise ValueError(f"no `{start}` marker")
    head, rest = text.split(start, 1)
    if GEN_END not in rest:
        raise ValueError(f"no `{GEN_END}` after `{start}`")
    # each paragraph wrapped (a table, a heading or an indented code line left as it is)
    body = "\n\n".join(wrap(part.strip("\n").rstrip()) for part in body.strip("\n").split("\n\n"))
    return (head + start + "\n" + body + "\n" + GEN_END
            + rest.split(GEN_END, 1)[1])


MARKER = re.compile(r"<!-- generated: (\S+) \((.*?)\) -->")


class PublishError(Exception):
    """A document and the registry disagree: one line, said as it is."""


def put_blocks(path: Path, text: str, root: Path) -> str:
    """`text` (the file `path`) with every block blocks.py registers for it made again; a marker
    there with no maker, or a maker with no marker, is a PublishError."""
    from .blocks import makers

    made = makers(path)
    for name, by in MARKER.findall(text):
        if name not in made or by != BY:
            raise PublishError(f"{path}: the block `{name}` ({by}) is made by nothing: add it to "
                               "study/blocks.py (BLOCKS), or take its markers out")
    for name, maker in made.items():
        if gen_start(name) not in text:
            raise PublishError(f"{path}: no `{gen_start(name)}` marker for the block "
                               "study/blocks.py registers")
        text = put_generated(text, name, maker(root))
    return text


def documents(root: Path, fig: Path | None = None) -> dict:
    """path -> the text it should have: RESULTS.md whole, and README.md and every other
    docs/*.md with their generated blocks (blocks.py) made again in their current text."""
    from .blocks import document_paths

    out = {RESULTS: results_text(root, fig)}
    for path in document_paths(root):
        if path != RESULTS:
            out[path] = put_blocks(path, (root / path).read_text(), root)
    return out


def checked(root: Path, texts: dict) -> tuple:
    """([Tally] of each document, [error line]) over the texts publish would write: figures
    outside the generated blocks that no constant covers, constants no longer held or no longer
    pinned (check.py); RESULTS.md is generated whole."""
    from .check import constant_errors, tally
    from .doc_constants import CONSTANTS

    tallies, errors = [], []
    for path, text in texts.items():
        constants = CONSTANTS.get(str(path), [])
        t = tally(path, text, constants, whole=path == RESULTS)
        tallies.append(t)
        errors += [f"{path}:{n}: `{figure}` outside a generated block: {line[:60]}"
                   for n, figure, line in t.stray]
        errors += constant_errors(root, path, text, constants)
    return tallies, errors


def stray(root: Path, texts: dict) -> list:
    """The error lines of `checked`."""
    return checked(root, texts)[1]


def main(argv: list) -> int:
    from .blocks import record_paths

    check = "--check" in argv
    root = Path.cwd()
    if not (root / SOURCES["ladder"]).is_dir():
        sys.stderr.write("gapscope: error: run from the repository root (no "
                         f"{SOURCES['ladder']} here)\n")
        return 2
    fig = None
    if not check:
        fig = root / "docs" / "figures"
        fig.mkdir(parents=True, exist_ok=True)
    try:
        texts = documents(Path("."), fig)
    except PublishError as e:
        sys.stderr.write(f"gapscope: error: {e}\n")
        return 2
    stale = []
    for path, text in texts.items():
        if (root / path).read_text() != text:
            stale.append(str(path))
            if not check:
                (root / path).write_text(text)
    tallies, errors = checked(root, texts)
    for t in tallies:
        sys.stderr.write(f"gapscope: read {t.line(whole=t.path == RESULTS)}\n")
    records = record_paths(Path("."))
    for path, what in records.items():
        sys.stderr.write(f"gapscope: read {path}: a record, its own source ({what})\n")
    for line in errors:
        sys.stderr.write(f"gapscope: {line}\n")
    if check and stale:
        sys.stderr.write(f"gapscope: {', '.join(stale)} would change: run python -m "
                         "study.publish\n")
    if errors:
        sys.stderr.write(f"gapscope: {len(errors)} figure(s) outside the generated blocks or "
                         "constants no longer held: put each figure in a block "
                         "(study/blocks.py), list a constant in study/doc_constants.py, or take "
                         "it out\n")
    if (check and stale) or errors:
        return 1
    figures = sum(t.figures for t in tallies)
    sys.stderr.write(f"gapscope: {'checked' if check else 'wrote'} {len(texts)} documents "
                     f"({figures} figures, each in a generated block or a listed constant) and "
                     f"read {len(records)} records"
                     f"{'; ' + ', '.join(stale) + ' changed' if stale else ''}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
