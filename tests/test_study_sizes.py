"""Study part `sizes` (study/sizes.py): the ladder side by side at several model sizes,
on the real Llama run of docs/llama-20261201 standing in (its batch-1 bench and graph-level
graphed-sync capture as the small size, its batch-32 bench relabelled as an 8B one)."""

import json
import shutil
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from study.cli import study as main
from study.sizes import ladder_table, size_benches, sizes_findings, sync_rows

LLAMA = Path(__file__).parent.parent / "docs" / "llama-20261201"


def stand_in(tmp_path: Path) -> Path:
    study = tmp_path / "sizes-x"
    (study / "capture").mkdir(parents=True)
    shutil.copy(LLAMA / "bench-ladder-b1.json", study / "bench-sizes-small-b1.json")
    big = json.loads((LLAMA / "bench-ladder-b32.json").read_text())
    big["model"] |= {"size": "8b", "parameters": 8_030_261_248}
    (study / "bench-sizes-8b-b8.json").write_text(json.dumps(big))
    shutil.copytree(LLAMA / "capture" / "20261201T180355Z-graphed-sync-b1",
                    study / "capture" / "20261201T180355Z-sizes-small-graphed-sync-b1")
    return study


def test_sizes_in_order_with_their_parameters_in_the_label(tmp_path):
    benches = size_benches(stand_in(tmp_path))
    assert list(benches) == [("small", 1), ("8b", 8)]
    t = ladder_table(benches).set_index("rung")
    assert list(t.index) == ["naive", "kv", "static", "compiled", "pipelined", "hf-generate",
                             "graphed-sync", "graphed", "fused"]
    assert t.loc["fused"].tolist() == ["0.469", "2134", "25.6", "0.636", "50312", "21.1"]
    assert list(t.columns[:3]) == ["small (125M) b1 ms/token", "small (125M) b1 tok/s",
                                   "small (125M) b1 % floor"]
    assert t.columns[3] == "8b (8.03B) b8 ms/token"


def test_the_item_cost_and_the_bubble_traced_and_untraced(tmp_path):
    # graphed-sync 0.6451 against graphed 0.6322 ms/step in the batch-1 process: 12.9 µs, 2.0%;
    # 0.9124 - 0.8980 at the other: 14.4 µs, 1.6%. Only the small size has a capture.
    study = stand_in(tmp_path)
    rows = sync_rows(size_benches(study), study)
    assert rows[".item() µs/step"].tolist() == ["12.9", "14.4"]
    assert rows[".item() share"].tolist() == ["2.0%", "1.6%"]
    assert rows["bubble µs traced"].tolist() == ["48.7", "–"]
    assert rows["bubble µs untraced"].tolist() == ["29.3", "–"]
    assert rows["graph trace"].tolist() == ["graph", "–"]


def test_the_sizes_part_in_results_md(tmp_path):
    study = stand_in(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(study), "-o", str(out), "--part", "sizes"])
    assert result.exit_code == 0, result.output
    text = (out / "RESULTS.md").read_text()
    assert "<!-- part: sizes -->" in text
    assert ("`fused` at small (125M) b1 (0.469 ms/token, 25.6% of the floor) and `fused` at 8b "
            "(8.03B) b8 (0.636 ms/token, 21.1% of the floor)") in " ".join(text.split())
    assert "48.7 µs traced against 29.3 in its twin at small (125M) b1" in " ".join(text.split())
    assert "![the ladder by model size](figures/sizes.png)" in text
    assert (out / "figures" / "sizes.png").stat().st_size > 10_000


def test_the_sizes_part_needs_its_benches(tmp_path):
    result = CliRunner().invoke(main, [str(tmp_path), "-o", str(tmp_path / "o"), "--part",
                                       "sizes"])
    assert result.exit_code == 2
    assert "nothing for part sizes here: it needs bench-sizes-<size>-b<B>.json" in result.output


def test_every_rung_measured_is_a_row_in_the_ladder_s_order(tmp_path):
    # The committed 8B run's bench holds 14 rungs: each is a row, in harness/variants.py's
    # order; a rung the table does not name (here a copy of fused called `mystery`) comes last.
    study = tmp_path / "sizes-y"
    study.mkdir()
    bench = Path(__file__).parent.parent / "docs" / "ladder8b-20261202" / "study"
    data = json.loads((bench / "bench-sizes-8b-b1.json").read_text())
    fused = next(r for r in data["results"] if r["variant"] == "fused")
    data["results"].insert(0, fused | {"variant": "mystery"})
    (study / "bench-sizes-8b-b1.json").write_text(json.dumps(data))
    t = ladder_table(size_benches(study)).set_index("rung")
    assert list(t.index) == ["naive", "kv", "kv-expandable", "static", "pipelined",
                             "pipelined-seed", "deferred", "check-every-k", "graphed-sync",
                             "graphed", "fused", "while-graph", "while-fused", "nocheck",
                             "mystery"]
    assert t.loc["while-fused"].tolist() == ["4.433", "226", "88.2"]
    assert t.loc["mystery"].tolist() == t.loc["fused"].tolist() == ["4.443", "225", "88.0"]


def test_what_one_graph_a_token_buys_at_8b():
    # bench-sizes-8b-b1.json: naive 26.389 ms/token is the fastest of the eight rungs that launch
    # from Python each step; graphed 5.288: 26.389 / 5.288 = 4.99x.
    study = Path(__file__).parent.parent / "docs" / "ladder8b-20261202" / "study"
    benches = {k: v for k, v in size_benches(study).items() if k == ("8b", 1)}
    text = " ".join(" ".join(sizes_findings(benches, pd.DataFrame())).split())
    assert ("What one CUDA graph a token buys:** `graphed` against the fastest rung that launches "
            "from Python each step: 5.0x at 8b (8.03B) b1 (the fastest eager rung, `naive`, "
            "26.389 ms/token, against 5.288).") in text


def test_the_8b_twin_s_runs_moved_its_bubble():
    # The 8B capture's twin: its three runs' median bubbles 37582, 124206.5 and 121536.5 ns
    # (the first run's host left the GPU three times less idle): 111.8 µs over all its steps.
    study = Path(__file__).parent.parent / "docs" / "ladder8b-20261202" / "study"
    rows = sync_rows(size_benches(study), study).set_index("configuration")
    assert rows.loc["8b (8.03B) b1", ["bubble µs traced", "bubble µs untraced",
                                      "twin runs' bubble µs"]].tolist() == [
        "271.3", "111.8", "37.6-124.2"]
