"""Docs a clone can follow, and the commands' small promises (issue 40, part 4): no path outside
the repository; README's first screen is what a user gets, its terms defined before they are
used; the run directory README describes is what runs hold; ANALYSIS.md's ten lines; --table
honoured by json; --check matching nothing said; the harness without torch in one line; compare
as CSV."""

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from analysis.cli import main

ROOT = Path(__file__).parent.parent
RUNS = ROOT / "tests" / "data" / "runs"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_no_doc_and_no_makefile_names_a_path_outside_the_repository():
    files = [ROOT / "README.md", ROOT / "Makefile", ROOT / "tests" / "data" / "README.md",
             ROOT / "scripts" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    outside = re.compile(r"\.\./shared|(?<![\w.])shared/|/work/")
    found = [f"{f.relative_to(ROOT)}:{i}" for f in files
             for i, line in enumerate(f.read_text().splitlines(), 1) if outside.search(line)]
    assert found == []


def _prose(text: str) -> str:
    """README without its generated blocks and code: the words a reader reads as prose."""
    text = re.sub(r"<!-- generated:.*?<!-- /generated -->", "", text, flags=re.S)
    return re.sub(r"```.*?```", "", text, flags=re.S)


def test_readme_opens_with_the_command_and_its_summary_and_defines_each_term_first():
    text = (ROOT / "README.md").read_text()
    first_block = text.index("<!-- generated: first-screen")
    assert text.index("\n## ") > first_block  # before any section
    block = text[first_block:text.index("<!-- /generated -->", first_block)]
    assert "$ gapscope analyze tests/data/runs/compiled" in block
    out = run("analyze", RUNS / "compiled").stdout.splitlines()[:10]
    assert [line for line in block.splitlines() if line.startswith(("compiled:", "  "))] == out
    prose = _prose(text)
    definitions = prose[:prose.index("GPT-2 decoded by a ladder")]
    for term in ("bubble", "period", "queued", "twin", "ledger", "window", "gap", "sync idle"):
        first = prose.lower().index(term)
        assert first < len(definitions), term
        assert re.search(rf"\*\*[^*]*{term}", definitions.lower()), term


def test_readme_names_every_file_a_bundled_run_holds():
    text = " ".join((ROOT / "README.md").read_text().split())
    described = text[text.index("A run directory ("):text.index("<!-- generated: profiler")]
    held = {p.name for d in RUNS.iterdir() if d.is_dir() for p in d.iterdir() if p.is_file()}
    # Compressed exports (capture.sqlite.xz) and the Kineto capture are the same files by kind.
    held = {re.sub(r"\.(xz|gz)$", "", n) for n in held} - {"kineto.json", "kineto.log"}
    assert sorted(n for n in held if f"`{n}`" not in described) == []
    assert "untraced_steps.json" in described and "report.md" in described


LABELS = ["steps from", "step time", "GPU busy", "bubble", "idle by cause", "idle ledger",
          "sync idle", "streams", "unattributed"]


@pytest.mark.parametrize("name", ["static", "compiled", "graphed-sync-graphlevel", "fused"])
def test_the_text_starts_with_the_ten_lines_analysis_md_promises(name):
    lines = run("analyze", RUNS / name).stdout.splitlines()
    starts = [line[2:17].strip() for line in lines if line.startswith("  ")
              and not line.startswith("   ")]
    assert lines[0].startswith(f"{name}: device 0, ")
    assert starts[:9] == LABELS
    analysis_md = " ".join((ROOT / "docs" / "ANALYSIS.md").read_text().split())
    assert "`analyze --format text`: ten lines first, one a quantity" in analysis_md


def test_json_honours_table_and_text_refuses_it():
    gaps = json.loads(run("analyze", RUNS / "graphed-sync-graphlevel", "--format", "json",
                          "--table", "gaps").stdout)
    whole = json.loads(run("analyze", RUNS / "graphed-sync-graphlevel", "--format", "json").stdout)
    assert list(gaps) == ["gaps"] and gaps["gaps"] == whole["gaps"]
    refused = run("analyze", RUNS / "graphed-sync-graphlevel", "--table", "gaps")
    assert refused.exit_code == 2 and refused.output == (
        "gapscope: error: --table gaps: it picks the table of --format csv or json; --format "
        "text prints every table\n")


def test_a_check_pattern_that_matches_nothing_is_said():
    done = run("analyze", RUNS / "graphed-sync-graphlevel", "--check", "^no such range$")
    assert done.exit_code == 0
    assert done.stderr.splitlines() == [
        "gapscope: note: graphed-sync-graphlevel: the check pattern '^no such range$' matches no "
        "range, so there is no stop-check cover; `gapscope ranges TRACE` lists the range names"]
    assert "stop checks: no range matches --check" in done.stdout


def test_the_harness_without_torch_lists_its_variants_and_refuses_a_run_in_one_line(tmp_path):
    block = "import sys; sys.modules['torch'] = None; from harness.cli import main; "
    listed = subprocess.run([sys.executable, "-c", block + "sys.exit(main(['variants']))"],
                            capture_output=True, text=True, cwd=ROOT)
    assert listed.returncode == 0 and listed.stdout.split("\n")[0].split()[0] == "naive"
    assert len(listed.stdout.splitlines()) == 18
    argv = ["run", "--variant", "static", "--out", str(tmp_path)]
    refused = subprocess.run([sys.executable, "-c", block + f"sys.exit(main({argv!r}))"],
                             capture_output=True, text=True, cwd=ROOT)
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        "gapscope: error: python -m harness run needs torch, which is not installed: pip "
        "install 'gapscope[harness]' (or `make install` in the source tree)"]


def test_compare_writes_csv_one_row_a_run_with_every_number():
    text = run("compare", RUNS / "graphed-sync-graphlevel", RUNS / "fused", "--format",
               "csv").stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    records = json.loads(run("compare", RUNS / "graphed-sync-graphlevel", RUNS / "fused",
                             "--format", "json").stdout)
    assert [r["label"] for r in rows] == [r["label"] for r in records]
    assert float(rows[1]["period_ns_median"]) == records[1]["period_ns_median"]
    lo, hi = records[1]["period_ns_median_ci"]
    assert (float(rows[1]["period_ns_median_ci_lo"]), float(rows[1]["period_ns_median_ci_hi"])) \
        == (lo, hi)
