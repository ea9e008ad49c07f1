"""Issue 31: every measured figure of README.md and docs/*.md stands in a generated block that
`python -m study.publish --check` makes again, or is not there. What counts as a figure
(study/figures.py), the constants allowed outside a block (doc_constants.py), the
registry of blocks (blocks.py), and the statistics the A/A part and the between-process
sentences rest on (aa.py, text.py)."""

import json
from pathlib import Path

import pytest

from study import aa, const_kinds
from study.benchmark import block_from_record, block_text
from study.blocks import BLOCKS, document_paths, record_paths
from study.check import constant_errors, tally
from study.doc_constants import CONSTANTS
from study.figures import figures_in, missing_constants, stray_figures
from study.publish import README, PublishError, gen_start, put_blocks, stray
from study.text import between, beyond_span, floor_note

ROOT = Path(__file__).resolve().parent.parent


def found(text: str) -> list:
    return [figure for _, figure, _, _ in figures_in(text)]


def test_measured_figures_in_prose_are_found():
    text = ("nsys cost +55% (14.59 against 9.43 ms/step), 282 kernels a step; HTA reports 3.8% "
            "more idle; `sync_idle_share_of_window` 0.0198; 99 of 99 steps; ~393 ops; 2.2 GB and "
            "25 s.")
    assert found(text) == ["+55%", "14.59", "9.43", "282 kernels", "3.8%", "0.0198", "99 of 99",
                           "~393 ops", "2.2 GB", "25 s"]


def test_an_integer_before_any_noun_a_version_and_a_number_in_words_are_figures():
    text = ("13 L + 21 a step, 177 for 12 layers; it exited 143 on the H200; HF spells it in "
            "seven; beam ran two twin runs; torch 2.11 and Triton 3.9")
    assert found(text) == ["13", "+ 21", "177", "12 layers", "143", "seven", "two", "2.11", "3.9"]
    # `two` counts before what was run or captured, not before what the definition counts
    assert found("two streams, two threads, between two steps") == []


def test_backticks_count_their_units_and_decimals_and_not_what_one_types():
    text = "a span `0.703 ms/step` and `--window 30:50` and `a.step(40)` and `Step 31`"
    assert found(text) == ["0.703"]


def test_quoted_output_counts_every_number_and_a_commands_comment_is_prose():
    text = "\n".join(["text", "", "    make profile ARGS=\"--batch 8\"   # 3.2 s, a command",
                      "    # three runs", "    static: device 0, 20 steps", "", "```",
                      "gapscope analyze RUN --steps infer", "  step time      2.95 ms median",
                      "```"])
    assert found(text) == ["3.2 s", "three", "0", "20 steps", "2.95 ms"]


def test_dates_issues_list_numbers_exit_statuses_names_and_blocks_are_not_figures():
    text = "\n".join([
        "measured 2026-12-01 15:31 UTC in 20261201T180227Z (issue 19, #31, issues 19, 31), "
        "of April 2024; fp32 H200 Llama-3-8B bench-b1.json; exit 2, exits 1, exited 0.",
        "1. a numbered list's number",
        "## 3. a heading's",
        "a [link](figures/1.5x.png) and https://example.com/v2.1",
        "<!-- generated: x (python -m study.publish) -->",
        "busy 87.3–95.4%",
        "<!-- /generated -->"])
    assert found(text) == []


def test_the_audits_contradicted_and_unsourced_sentences_are_seen():
    """Issue 41: each sentence the audit found contradicted or unsourced at 96c7a7f passed the
    old check (words, integers before an unlisted noun, backticks, indented output, an
    allow-listed phrase). Each is refused now, the current allow-list notwithstanding."""
    old = {
        "docs/VARIANTS.md": ["kernel (HF's `gelu_new` spells the same formula in seven).",
                             "13 L + 21 a step with the loop's bookkeeping, 177 for 12 layers",
                             "the median and p10/p90 of 5+ repeats (after a warm-up run)",
                             "8 kernels a layer (101 a step).",
                             "the step it replaced ran 22 L + 19 by the same count",
                             "run here with Triton 3.9 beside the venv"],
        "docs/PROFILING.md": ["the range closes (it exited 143 on the H200 machine) |"],
        "docs/user-programs-20261202/README.md": [
            "each `gapscope profile --twin-runs 2 -- python3 .wt/unseen/X.py`, beam with two "
            "twin runs"],
        "README.md": ["the per-step `.item()` then costs 88.3 µs (1.6% of the step)."],
        "docs/user-programs-20261201/README.md": [
            "\n    20261201T163524Z-gen-auto: device 0, 197 steps, nsys export schema 3.20.3\n"],
    }
    for doc, sentences in old.items():
        for sentence in sentences:
            assert stray_figures(sentence, CONSTANTS.get(doc, [])), (doc, sentence)


def test_a_constant_is_allowed_only_inside_its_phrase():
    text = "a threshold of 90% (`MIN_AGREEMENT`) and a measured 90% busy\n"
    constants = [("a threshold of 90% (`MIN_AGREEMENT`)", "the code's")]
    assert [(n, f) for n, f, _ in stray_figures(text, constants)] == [(1, "90%")]
    assert stray_figures(text, constants)[0][2].endswith("measured 90% busy")
    assert missing_constants(text, constants + [("gone 5%", "x")]) == ["gone 5%"]


def test_a_pinned_constant_fails_once_its_code_says_otherwise(tmp_path):
    (tmp_path / "code.py").write_text("DEFAULT_TWIN_RUNS = 4\n")
    text = "runs it 3 more times\n"
    held = [("runs it 3 more times", "an option's default", ("code.py", "DEFAULT_TWIN_RUNS = 4"))]
    gone = [("runs it 3 more times", "an option's default", ("code.py", "DEFAULT_TWIN_RUNS = 3"))]
    assert constant_errors(tmp_path, Path("README.md"), text, held) == []
    (line,) = constant_errors(tmp_path, Path("README.md"), text, gone)
    assert "pinned to `DEFAULT_TWIN_RUNS = 3` in code.py, which no longer says so" in line


def test_every_constant_is_of_a_kind_that_is_no_measurement():
    """The allow-list holds constants only: each entry's reason starts with one of the kinds of
    const_kinds.py (an option's default, a model's size, a version the code pins ...), each pin
    names a file of the repository that holds its text."""
    kinds = [v for k, v in vars(const_kinds).items() if k.isupper() and isinstance(v, str)]
    for doc, entries in CONSTANTS.items():
        for entry in entries:
            assert any(entry[1].startswith(k) for k in kinds), (doc, entry)
            if len(entry) == 3:
                path, pin = entry[2]
                assert pin in (ROOT / path).read_text(), (doc, entry)


def test_a_figure_slipped_into_readme_is_refused():
    text = (ROOT / README).read_text().replace(
        "## Development", "The fused step took 0.70 ms/step.\n\n## Development")
    lines = stray(ROOT, {README: text})
    assert len(lines) == 1 and "`0.70`" in lines[0] and lines[0].startswith("README.md:")


def test_every_document_is_covered_and_every_block_registered():
    paths = {str(p) for p in document_paths(ROOT)}
    assert {"README.md", "docs/RESULTS.md", "docs/ANALYSIS.md", "docs/METRICS.md",
            "docs/PROFILING.md", "docs/VARIANTS.md", "tests/data/README.md", "scripts/README.md",
            "docs/ladder8b-20261202/README.md", "docs/user-programs-20261202/README.md"} <= paths
    records = {str(p) for p in record_paths(ROOT)}
    assert "docs/hardware-view-20261201/results.md" in records and not records & paths
    assert all((ROOT / p).parent.joinpath("run.json").is_file() for p in records
               if p.endswith("report.md"))
    for file, name in BLOCKS:
        assert gen_start(name) in (ROOT / file).read_text(), (file, name)


def test_the_tally_counts_blocks_constants_and_the_rest():
    text = ("a 5% threshold here, 12 layers there\n"
            "<!-- generated: x (python -m study.publish) -->\n1.5 ms and 2 runs\n"
            "<!-- /generated -->\n")
    t = tally(Path("X.md"), text, [("a 5% threshold", "an option's default")])
    assert (t.blocks, t.in_blocks, t.constants, [f for _, f, _ in t.stray]) == \
        (1, 2, 1, ["12 layers"])
    assert t.line() == "X.md: 4 figures: 2 in 1 generated block, 1 listed constant, 1 neither"


def test_a_marker_without_a_maker_and_a_maker_without_a_marker_are_errors():
    with pytest.raises(PublishError, match="the block `stray` .* is made by nothing"):
        put_blocks(Path("docs/NEW.md"), f"{gen_start('stray')}\nx\n<!-- /generated -->\n", ROOT)
    with pytest.raises(PublishError, match="no `<!-- generated: first-screen"):
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
