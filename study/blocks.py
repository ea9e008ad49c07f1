"""Every generated block of README.md and docs/*.md, and what makes it: the registry that
`python -m study.publish` writes and `--check` compares byte for byte.

A block is the text between `<!-- generated: NAME (python -m study.publish) -->` and
`<!-- /generated -->` in one file; its maker is a function `maker(root: Path) -> str` (root: the
repository) that reads only committed data (a run directory, a JSON a script wrote, a capture)
and returns the block's Markdown (prose is wrapped at 100 columns; tables are left as they are).
docs/RESULTS.md is made whole by publish.results_text and has no entry here.

To add a block:
1. write its maker in the study module of its document (doc_*.py: one per document; a new one
   for a new document), reading the committed file it quotes, with the words of study/text.py
   for how each figure was compared (in one process, between processes, traced, untraced;
   within noise where the A/A floor holds the effect: text.between);
2. add a line below: (file, NAME) -> "module:function";
3. put the two markers where it goes and run `python -m study.publish`.
A marker with no line here, or a line whose marker is missing, fails `--check`. Figures outside
every block are refused by figures.py (a constant of a definition goes in doc_constants.py).

The makers are named as strings, imported when the block is made, so that this module imports
nothing of the study and any module may read the registry.
"""

import importlib
from pathlib import Path

BLOCKS = {
    ("README.md", "first-screen"): "study.doc_readme:first_screen",
    ("README.md", "profiler-share"): "study.doc_readme:profiler_share",
    ("README.md", "findings"): "study.doc_readme:readme_findings",
    ("README.md", "sizes"): "study.doc_readme:readme_sizes",
    ("README.md", "mega"): "study.doc_readme:readme_mega",
    ("docs/ANALYSIS.md", "benchmark"): "study.doc_analysis:benchmark_block",
    ("docs/ANALYSIS.md", "fused-waits"): "study.doc_analysis:fused_waits",
    ("docs/ANALYSIS.md", "hta-resnet"): "study.doc_analysis:hta_resnet",
    ("docs/ANALYSIS.md", "hta-h200"): "study.doc_analysis:hta_h200",
    ("docs/METRICS.md", "floor-sizes"): "study.doc_metrics:floor_sizes",
    ("docs/METRICS.md", "reference"): "study.doc_metrics:reference_block",
    ("docs/PROFILING.md", "overhead"): "study.doc_profiling:overhead_block",
    ("docs/PROFILING.md", "overhead-notes"): "study.doc_profiling:overhead_notes",
    ("docs/PROFILING.md", "nsys-choice"): "study.doc_profiling:nsys_choice",
    ("docs/PROFILING.md", "host-wrapper"): "study.doc_profiling:host_wrapper",
    ("docs/VARIANTS.md", "graphed-shows"): "study.doc_variants:graphed_shows",
    ("docs/VARIANTS.md", "fused-shows"): "study.doc_variants:fused_shows",
    ("docs/VARIANTS.md", "llama-fused"): "study.doc_variants:llama_fused",
    ("docs/VARIANTS.md", "peer"): "study.doc_variants:peer_block",
    ("docs/VARIANTS.md", "peer-notes"): "study.doc_variants:peer_notes",
    ("docs/VARIANTS.md", "peer-8b"): "study.doc_variants:peer_8b",
    ("docs/VARIANTS.md", "fused-8b"): "study.doc_variants:fused_8b",
    ("docs/VARIANTS.md", "metrics-8b"): "study.doc_variants:metrics_8b",
    ("tests/data/README.md", "runs-made"): "study.doc_data:runs_made",
    ("tests/data/README.md", "runs-config"): "study.doc_data:runs_config",
    ("tests/data/README.md", "runs-table"): "study.doc_data:runs_table",
    ("tests/data/README.md", "graphlevel-run"): "study.doc_data:graphlevel_run",
    ("tests/data/README.md", "while-graph-runs"): "study.doc_data:while_graph_runs",
    ("tests/data/README.md", "metrics-run"): "study.doc_data:metrics_run",
    ("tests/data/README.md", "kineto-run"): "study.doc_data:kineto_run",
    ("docs/host-20261202/README.md", "host-runs"): "study.doc_records:host_runs",
    ("docs/ladder8b-20261202/README.md", "ladder8b-runs"): "study.doc_records:ladder8b_runs",
    ("docs/user-programs-20261201/README.md", "programs-1201"): "study.doc_records:programs_1201",
    ("docs/user-programs-20261202/README.md", "programs-1202"): "study.doc_records:programs_1202",
    ("docs/user-programs-20261204/README.md", "loops-1204"): "study.doc_loops:loops_1204",
    ("docs/user-programs-20261204/README.md", "hook-cost-1204"): "study.doc_loops:hook_cost_1204",
    ("docs/user-programs-20261204/README.md", "suite-1204"): "study.doc_loops:suite_1204",
    ("docs/user-programs-20261202/README.md", "t5-later"): "study.doc_records:t5_later",
    ("docs/user-programs-20261202/README.md", "ftrace-check"): "study.doc_records:ftrace_check",
    ("docs/mega-20261204/README.md", "mega-runs"): "study.doc_mega:mega_runs",
    ("docs/mega-20261204/README.md", "mega-tests"): "study.doc_mega:mega_tests",
    ("docs/mega-20261204/README.md", "mega-registers"): "study.doc_mega:mega_registers",
    ("docs/VARIANTS.md", "gelu-new"): "study.doc_claims:gelu_new",
    ("docs/VARIANTS.md", "bench-repeats"): "study.doc_claims:bench_repeats",
}
# What publish covers besides docs/RESULTS.md: each file is checked for its blocks and for
# figures outside them. Every Markdown file a reader opens: README.md, every docs/**/*.md, the
# test data's, the scripts' and the traces' READMEs, the examples'.
DOCUMENTS = ("README.md", "docs/**/*.md", "tests/data/README.md", "scripts/README.md",
             "traces/README.md", "examples/**/*.md")
# Markdown that a tool wrote with the runs beside it: a record, read as its own source (its
# figures are the run's, never edited by hand), not a document: pattern -> what wrote it.
RECORDS = {
    "docs/**/report.md": "`gapscope report` of the run directory it sits in, written with the run",
    "docs/hardware-view-*/results.md": "scripts/hardware-view.sh: `gapscope compare` of its runs/",
}


def _matching(root: Path, patterns) -> set:
    return {p.relative_to(root) for pattern in patterns for p in root.glob(pattern) if p.is_file()}


def record_paths(root: Path) -> dict:
    """path -> what wrote it, of every record (RECORDS), sorted."""
    return {p: what for pattern, what in RECORDS.items()
            for p in sorted(_matching(root, [pattern]))}


def document_paths(root: Path) -> list:
    """Every document (DOCUMENTS) less the records, relative to root, sorted; RESULTS.md among
    them."""
    return sorted(_matching(root, DOCUMENTS) - set(record_paths(root)))


def makers(path: Path) -> dict:
    """NAME -> maker of each block registered for one file."""
    return {name: _resolve(ref) for (file, name), ref in BLOCKS.items() if Path(file) == path}


def _resolve(ref: str):
    module, _, function = ref.partition(":")
    return getattr(importlib.import_module(module), function)
