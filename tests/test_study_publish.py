"""The published study is what `python -m study` makes of the committed runs (issues 19, 31):
docs/RESULTS.md and every generated block of README.md and docs/*.md are made again here from
docs/*/ and tests/data/runs, any difference fails, and so does a figure outside a block."""

import difflib
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from study.blocks import document_paths, record_paths
from study.cli import study as main
from study.publish import GEN_END, documents, gen_start, put_generated
from study.publish import main as publish_main
from study.text import pct_span, span, verdict, wrap

ROOT = Path(__file__).resolve().parent.parent


def first_difference(path: Path, want: str, have: str) -> str:
    diff = difflib.unified_diff(have.splitlines(), want.splitlines(), f"{path} (committed)",
                                f"{path} (made again)", n=1, lineterm="")
    return "\n".join(list(diff)[:40])


def test_publish_check_passes_on_readme_and_every_doc(monkeypatch, capsys):
    # `python -m study.publish --check`, in this process: every generated block of
    # README.md and docs/*.md (and RESULTS.md whole) is what the committed data make, byte for
    # byte, and no figure stands outside a block (issue 31).
    monkeypatch.chdir(ROOT)
    if publish_main(["--check"]) == 0:
        err = capsys.readouterr().err
        assert "each in a generated block or a listed constant" in err
        # it names every document it read, with the figures it checked there, and each record
        for path in document_paths(ROOT):
            assert re.search(rf"^gapscope: read {re.escape(str(path))}: \d+ figures", err, re.M), \
                path
        for path in record_paths(ROOT):
            assert f"gapscope: read {path}: a record" in err
        return
    err = capsys.readouterr().err
    for path, text in documents(Path("."), None).items():
        committed = (ROOT / path).read_text()
        assert committed == text, (
            f"{path} is not what the committed data make (python -m study.publish "
            f"writes it):\n{first_difference(path, text, committed)}")
    pytest.fail(err)


def test_one_part_made_by_gapscope_study_is_the_published_one(monkeypatch, tmp_path):
    # The command a reader runs for one part puts the same block where the published one is.
    monkeypatch.chdir(ROOT)
    shutil.copy(ROOT / "docs" / "RESULTS.md", tmp_path / "RESULTS.md")
    result = CliRunner().invoke(main, ["docs/aa-20261201", "-o", str(tmp_path), "--part", "aa"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "RESULTS.md").read_text() == (ROOT / "docs" / "RESULTS.md").read_text()


def test_ranges_print_as_the_tables_do():
    assert span([5.442, 5.685, 5.63]) == "5.442–5.685"
    assert span([0.1234, 0.1236], ".2f") == "0.12"  # one number where both print alike
    assert span([-0.292, 0.068], "+.1%") == "-29.2% to +6.8%"  # signs: "to", not a dash
    assert pct_span([0.0756, 0.178]) == "7.6–17.8%"
    assert pct_span([-0.33, 0.89], 0) == "-33% to 89%"
    assert verdict((1.0, 2.0), (2.5, 3.0)) == "apart"
    assert verdict((1.0, 2.5), (2.5, 3.0)) == "overlapping"  # touching ranges overlap


def test_a_bullet_wraps_under_its_text_and_a_table_does_not():
    bullet = "- **Title.** " + "word " * 30
    lines = wrap(bullet.strip(), 40).splitlines()
    assert lines[0].startswith("- **Title.**") and all(x.startswith("  ") for x in lines[1:])
    assert max(map(len, lines)) <= 40
    table = "| a | " + "b | " * 40
    assert wrap(table, 40) == table


def test_a_generated_block_is_replaced_between_its_markers():
    text = f"before\n{gen_start('x')}\nold\n{GEN_END}\nafter\n"
    assert put_generated(text, "x", "new") == f"before\n{gen_start('x')}\nnew\n{GEN_END}\nafter\n"
    with pytest.raises(ValueError, match="no `<!-- generated: y"):
        put_generated(text, "y", "new")
