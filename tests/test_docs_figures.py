"""Issue 31: every measured figure of README.md and docs/*.md stands in a generated block that
`python -m study.publish --check` makes again, or is not there. What counts as a figure
(study/figures.py), the constants allowed outside a block (doc_constants.py), the
registry of blocks (blocks.py), and the statistics the A/A part and the between-process
sentences rest on (aa.py, text.py)."""

import json
from pathlib import Path

import pytest

from study import aa
from study.benchmark import block_from_record, block_text
from study.blocks import BLOCKS, document_paths
from study.figures import figures_in, missing_constants, stray_figures
from study.publish import README, PublishError, gen_start, put_blocks, stray
from study.text import between, beyond_span, floor_note

ROOT = Path(__file__).resolve().parent.parent


def found(text: str) -> list:
    return [figure for _, figure, _, _ in figures_in(text)]


def test_measured_figures_in_prose_are_found():
    text = ("nsys cost +55% (14.59 against 9.43 ms/step), 282 kernels a step; HTA reports 3.8% "
            "more idle; `sync_idle_share` 0.0198; 99 of 99 steps; ~393 ops; 2.2 GB and 25 s.")
    assert found(text) == ["+55%", "14.59", "9.43 ms", "282 kernels", "3.8%", "0.0198",
                           "99 of 99", "~393 ops", "2.2 GB", "25 s"]


def test_versions_dates_issues_code_and_blocks_are_not_figures():
    text = "\n".join([
        "nsys 2025.3.1.0 and torch 2.11 on Python 3.12, nsys 2024.2 fails on 2025.3 captures,",
        "measured 2026-12-01 15:31 UTC in 20261201T180227Z (issue 19, #31), schema 3.x.",
        "1. a numbered list's number",
        "a span `0.703 ms/step` and a [link](figures/1.5x.png)",
        "",
        "    make profile ARGS=\"--batch 8 --window 30:50\"   # 3.2 s, an indented command",
        "",
        "```",
        "took 4.5 s",
        "```",
        "<!-- generated: x (python -m study.publish) -->",
        "busy 87.3–95.4%",
        "<!-- /generated -->"])
    assert found(text) == []


def test_a_constant_is_allowed_only_inside_its_phrase():
    text = "a threshold of 90% (`MIN_AGREEMENT`) and a measured 90% busy\n"
    constants = [("a threshold of 90% (`MIN_AGREEMENT`)", "the code's")]
    assert [(n, f) for n, f, _ in stray_figures(text, constants)] == [(1, "90%")]
    assert stray_figures(text, constants)[0][2].endswith("measured 90% busy")
    assert missing_constants(text, constants + [("gone 5%", "x")]) == ["gone 5%"]


def test_a_figure_slipped_into_readme_is_refused():
    text = (ROOT / README).read_text().replace(
        "## Development", "The fused step took 0.70 ms/step.\n\n## Development")
    lines = stray(ROOT, {README: text})
    assert len(lines) == 1 and "`0.70 ms`" in lines[0] and lines[0].startswith("README.md:")


def test_every_document_is_covered_and_every_block_registered():
    paths = {str(p) for p in document_paths(ROOT)}
    assert {"README.md", "docs/RESULTS.md", "docs/ANALYSIS.md", "docs/METRICS.md",
            "docs/PROFILING.md", "docs/VARIANTS.md"} <= paths
    for file, name in BLOCKS:
        assert gen_start(name) in (ROOT / file).read_text(), (file, name)


def test_a_marker_without_a_maker_and_a_maker_without_a_marker_are_errors():
    with pytest.raises(PublishError, match="the block `stray` .* is made by nothing"):
        put_blocks(Path("docs/NEW.md"), f"{gen_start('stray')}\nx\n<!-- /generated -->\n", ROOT)
    with pytest.raises(PublishError, match="no `<!-- generated: profiler-share"):
        put_blocks(README, "no markers here\n", ROOT)


def test_the_sign_tests_interval_holds_its_stated_level():
    # n = 4: only k = 1, 1 − 2/16; n = 6: k = 1 at 1 − 2/64; n = 10: k = 2 at 1 − 2·11/1024.
    assert aa.sign_interval([4, 1, 3, 2]) == (1, 4, 0.875)
    assert aa.sign_interval([6, 1, 5, 2, 4, 3]) == (1, 6, 1 - 2 / 64)
    assert aa.sign_interval(list(range(10))) == (1, 8, 1 - 22 / 1024)
    assert aa.sign_interval([1, 2]) is None


def test_the_aa_part_names_the_median_of_paired_differences():
    # aa-static.json: rounds (7.454, 6.778), (6.553, 7.116), (9.394, 8.094), (7.537, 11.573):
    # differences −0.676, +0.563, −1.300, +4.036, median −0.0565 (not 7.605 − 7.495 = +0.110);
    # the widest round 11.573 / 7.537 = 1.5355x.
    (static,) = [b for b in aa.aa_findings(ROOT / aa.AA_DIR) if b.startswith("- **`static`")]
    assert ("the rounds' paired differences -1.300, -0.676, +0.563, +4.036 ms/step, their median "
            "-0.057; the sign test's [-1.300, +4.036] ms/step holds the median difference with "
            "87.5% confidence") in static
    assert "up to 1.535x apart" in static
    ratio, words, n = aa.floor(ROOT / aa.AA_DIR, "eager")
    assert (round(ratio, 4), n) == (1.5355, 4) and "`static`" in words


def test_a_ratio_inside_the_floor_is_within_noise():
    f = (1.5, "two `x` processes up to 1.500x apart", 4)
    assert between(1.4, f, "+40%") == "within noise"
    assert between(1 / 1.4, f, "-29%") == "within noise"  # either way round
    assert between(1.6, f, "+60%") == "+60%"
    assert beyond_span([1.4, 1.6, 2.0], f) == "+60% to +100% (2 captures; 1 more within noise)"
    assert beyond_span([1.1], f) == "within noise (1 capture)"
    assert floor_note([f, f, None]) == "the floor between processes: two `x` processes up to " \
        "1.500x apart"


def test_the_speed_block_is_the_committed_jsons():
    record = json.loads((ROOT / "docs/benchmark-2core.json").read_text())
    rows = [(c["name"], c["wall_s"], c["peak_rss_gib"], c["written_mib"])
            for c in record["commands"]]
    assert record["machine"]["cores"] == 2 and record["nsys"]["wall_s"]
    assert block_from_record(record) == block_text(
        record["when"], 2, record["trace"]["gpu_op_records"], record["trace"]["mib"],
        record["runs"], (record["load_average"]["start"][0], record["load_average"]["end"][0]),
        (record["nsys"]["version"], record["nsys"]["wall_s"]), rows)
