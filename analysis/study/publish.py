"""The published study: docs/RESULTS.md, README's findings and docs/PROFILING.md's overhead
table, every number made by `gapscope study` from the run directories committed here
(SOURCES), so that a test can make them again and fail on any difference (issue 19).

    python -m analysis.study.publish           # write them (and the figures) from SOURCES
    python -m analysis.study.publish --check   # exit 1 and say where, if they would change

Run from the repository root. Each part is also `gapscope study DIR -o docs --part PART`.
"""

import sys
from pathlib import Path

import pandas as pd

from ..render.markdown import frame_md_table

# Part `overview` is overview.py's; its names import from here as before.
from ..study.overview import (  # noqa: F401
    FAMILY_NAMES,
    KIND_ORDER,
    OVERVIEW_TEXT,
    capture_kind,
    every_capture,
    overview_findings,
    overview_sections,
    overview_table,
)
from ..study.sources import CAPTURE_SOURCES, SOURCES  # noqa: F401
from ..study.text import BETWEEN_PROCESSES, SAME_PROCESS, listing, pct_span, span, wrap

RESULTS, README, PROFILING = Path("docs/RESULTS.md"), Path("README.md"), Path("docs/PROFILING.md")


BY = "python -m analysis.study.publish"


def gen_start(name: str, by: str = BY) -> str:
    return f"<!-- generated: {name} ({by}) -->"


GEN_END = "<!-- /generated -->"


# --- README's findings: the parts' headline figures ---------------------------------------

def readme_findings(root: Path) -> str:
    from ..study import observer
    from ..study.benches import benches, ladder_rows

    t = every_capture(root)
    eager = t[t["kind"] == "GPT-2 eager"]
    b = benches(root / SOURCES["ladder"])
    lad, fin = ladder_rows(b), b["finish"]
    naive = lad.loc["naive"]
    same = lad[(lad["bench"] == naive["bench"]) & (lad.index.isin(["compiled"]))]
    compiled_x = naive["ms_per_step_median"] / same.loc["compiled", "ms_per_step_median"]
    pc_x = naive["ms_per_step_median"] / lad.loc["pipelined+compile", "ms_per_step_median"]
    sweep = observer.sweep(root / SOURCES["observer"])
    costs = [fin.loc["graphed-sync", "ms_per_step_median"] / fin.loc["graphed",
                                                                     "ms_per_step_median"] - 1]
    for batch in sorted(sweep["batch"].unique()):
        rows = sweep[sweep["batch"] == batch].set_index("variant")
        if {"graphed-sync", "graphed"} <= set(rows.index):
            a, g = (float(pd.Series(rows.loc[v, "bench_ms"]).median())
                    for v in ("graphed-sync", "graphed"))
            costs.append(a / g - 1)
    fused = t[(t["variant"] == "fused") & t["kind"].str.endswith("node by node")
              & (t["branches"].fillna(1) == 1)]
    f = fin.loc["fused"]
    hf = fin.loc["hf-generate", "ms_per_step_median"]
    return (
        "`docs/RESULTS.md`, every number made again from the runs committed here by `python -m "
        f"analysis.study.publish`: in eager mode the GPU is busy {pct_span(eager['busy'])} of "
        f"a captured step ({len(eager)} GPT-2 captures) and {pct_span(eager['host'], 0)} of "
        f"its idle is the host launching {span(eager['op_records'], '.0f')} op records a step, "
        "so hiding the sync on a second stream buys nothing (RESULTS.md's ladder part, in one "
        "process each); the article's "
        f"5x is {compiled_x:.2f}x here (`compiled` over `naive`, {SAME_PROCESS}; "
        f"`pipelined+compile` {pc_x:.2f}x, {BETWEEN_PROCESSES}); once the step is one CUDA "
        f"graph the per-step sync costs {pct_span(costs)} of it untraced ({len(costs)} "
        f"measurements in two sessions); the fused step runs {f['ms_per_step_median']:.3f} "
        f"ms/step, {hf / f['ms_per_step_median']:.2f}x faster than `model.generate` with a "
        f"static cache {SAME_PROCESS}, with the GPU busy {pct_span(fused['busy'])} of its "
        f"{len(fused)} node-level captures (batch "
        f"{listing([str(int(x)) for x in sorted(fused['batch'].unique())])}).")


# --- the documents ---------------------------------------------------------------------------

HEADER = """# Results: where the decode loop leaves the GPU idle

Every number in this file is computed from run directories committed in this repository, by
`gapscope study`: one part a directory (`gapscope study DIR -o docs --part PART`, the table
below), all of them and README's findings by `python -m analysis.study.publish`. `make test`
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
- *op records*: the GPU operations nsys recorded (kernels, copies, memsets; a graph replayed at
  graph level is one); *kernels*: the kernel records alone; *launch calls*: the CUDA API calls
  that launched them.
- MiB = 2^20 bytes; MB and GB/s: 10^6 bytes and 10^9 bytes a second."""


def sources_table() -> str:
    from ..study.parts import PART_HELP

    return frame_md_table(pd.DataFrame([
        {"part": p, "made from": f"`{d}`" if d != "." else "the repository (every directory "
         "above that holds captures)", "what": PART_HELP[p],
         "command": f"`gapscope study {d} -o docs --part {p}`"}
        for p, d in SOURCES.items()]))


def results_text(root: Path, fig: Path | None) -> str:
    from ..study.parts import part_block, part_sections

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
    return (head + start + "\n" + wrap(body.strip()) + "\n" + GEN_END
            + rest.split(GEN_END, 1)[1])


def documents(root: Path, fig: Path | None = None) -> dict:
    """path -> the text it should have: RESULTS.md whole, README's and PROFILING.md's
    generated blocks put into their current text."""
    from ..study.overhead import table as overhead_table

    readme = (root / README).read_text()
    readme = put_generated(readme, "findings", readme_findings(root))
    readme = put_generated(readme, "profiler-share", "**The profiler's own share.** " + " ".join(
        overview_findings(every_capture(root), " (docs/RESULTS.md, \"Every capture, by kind\")")))
    profiling = put_generated((root / PROFILING).read_text(), "overhead",
                              overhead_table(root / SOURCES["observer"]))
    return {RESULTS: results_text(root, fig), README: readme, PROFILING: profiling}


def main(argv: list) -> int:
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
    stale = []
    for path, text in documents(Path("."), fig).items():
        if (root / path).read_text() != text:
            stale.append(str(path))
            if not check:
                (root / path).write_text(text)
    if check and stale:
        sys.stderr.write(f"gapscope: {', '.join(stale)} would change: run python -m "
                         "analysis.study.publish\n")
        return 1
    sys.stderr.write(f"gapscope: {'checked' if check else 'wrote'} {RESULTS}, {README}, "
                     f"{PROFILING}{': ' + ', '.join(stale) + ' changed' if stale else ''}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
