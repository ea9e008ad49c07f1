"""Study part `family` (study/family.py): the ladder of another model family at
several batches, from hand-made benches and from the real Llama run of docs/llama-20261201."""

import json
from pathlib import Path
from types import SimpleNamespace

import golden
import pandas as pd
from click.testing import CliRunner

from study.cli import study as main
from study.family import (
    family_findings,
    ladder_benches,
    ladder_table,
    sync_bubble_findings,
)

LLAMA = Path(__file__).parent.parent / "docs" / "llama-20261201"


def bench(path: Path, rows: list, compile_mode=None) -> None:
    """rows: (variant, ms/step, tokens hash); p10/p90 = ms ∓ 0.1."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "config": {"compile": compile_mode, "model": "llama"}, "copy_bytes_per_s": 4e12,
        "results": [{"variant": v, "ms_per_step_median": m, "ms_per_step_p10": m - 0.1,
                     "ms_per_step_p90": m + 0.1, "tokens_sha256": h} for v, m, h in rows]}))


def test_the_ladder_by_batch_with_a_capture_s_own_bench(tmp_path):
    bench(tmp_path / "bench-ladder-b1.json", [("naive", 12.0, "a"), ("kv", 10.0, "a"),
                                               ("compiled", 4.0, "a")])
    bench(tmp_path / "bench-ladder-b32.json", [("naive", 16.0, "b"), ("kv", 8.0, "c")])
    # pipelined+compile benched only by its capture's untraced run (a process of its own).
    cap = tmp_path / "capture" / "20261201T000000Z-pipelined+compile-b1"
    bench(cap / "untraced.json", [("pipelined", 5.0, "a")], compile_mode="default")
    (cap / "capture.sqlite").write_bytes(b"")
    table = ladder_table(ladder_benches(tmp_path))
    rows = [tuple(r) for r in table.itertuples(index=False)]
    assert list(table.columns) == ["variant", "b1 ms/step", "b1 p10–p90", "b1 × naive",
                                   "b1 kv's tokens", "b32 ms/step", "b32 p10–p90",
                                   "b32 × naive", "b32 kv's tokens"]
    assert rows == [
        ("naive", "12.000", "11.90–12.10", "1.00x", "yes", "16.000", "15.90–16.10", "1.00x", "no"),
        ("kv", "10.000", "9.90–10.10", "1.20x", "yes", "8.000", "7.90–8.10", "2.00x", "yes"),
        ("compiled", "4.000", "3.90–4.10", "3.00x", "yes", "–", "–", "–", "–"),
        ("pipelined+compile", "5.000 †", "4.90–5.10", "2.40x", "yes", "–", "–", "–", "–"),
    ]


def test_the_family_part_of_the_real_llama_run(tmp_path):
    (tmp_path / "RESULTS.md").write_text("# R\n\n## 1. The ladder\n")
    result = CliRunner().invoke(main, [str(LLAMA), "-o", str(tmp_path), "--part", "family"])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "RESULTS.md").read_text()
    assert text.index("<!-- part: family -->") < text.index("## 1. The ladder")
    assert ("`--model llama`: llama:small (125M parameters, 12 layers of 768, 4 of 12 heads for "
            "keys and values), random weights; fp32 with matmul precision \"high\", 100 new "
            "tokens, 3 repeats." in " ".join(text.split()))
    # Untraced: the ladder's process at batch 32, pipelined+compile from its capture's bench.
    assert [3.233, 3.17, 3.26, 2.87, "yes", 3.594, 3.55, 3.66, 2.72, "yes"] in golden.starts(
        text, "compiled", 10)
    # Our own step's rungs on the family, in the same processes.
    assert [0.469, 0.47, 0.47, 19.79, "yes", 0.636, 0.64, 0.64, 15.39, "yes"] in golden.starts(
        text, "fused", 10)
    # † marks a figure from the capture's own bench.
    (untraced,) = [r for r in golden.table_rows(text, "pipelined+compile") if "†" in r[0]]
    assert golden.values(untraced)[:6] == [5.013, 4.87, 5.05, 1.85, "yes", 4.463]
    assert "†" in untraced[4]
    # Captured, against the untraced bench and twin of each capture.
    assert [32, 9.383, 6.449, 13.3, 310, 308, 843.0, 95.3, 9, 87, 4, 8.2] in golden.rows(
        text, "compiled")
    assert [1, 7.225, 5.013, 10.4, 226, 222, 937.0, 145.4, 0, 100, 0, 0.0] in golden.rows(
        text, "pipelined+compile")
    # The sentences quote those rows: pipelined+compile's own process against compiled's two,
    # 5.013 / 3.678 = 1.363x, inside the floor this family's own pair of untraced benches sets:
    # static at batch 1 benched 17.537 ms/step by its capture and 7.789 by the ladder, 2.252x.
    flat = " ".join(text.split())
    assert ("`pipelined+compile` ran 5.013 ms/step in a process of its own against "
            "`compiled`'s 3.233 and 3.678 in 2 other processes (between processes): within "
            "noise") in flat
    assert ("`static` at batch 1 untraced 17.537 ms/step in its capture's bench and 7.789 in the "
            "ladder's, 2.252x apart") in flat
    # nsys's overhead on the eager and compiled captures (traced ÷ own bench up to 2.229x, for
    # pipelined+compile at batch 32: 9.961 / 4.463) is within that floor; graph replays beyond
    # the graph-replayed one (0.645 / 0.638 = 1.011x): +6% and +7%.
    assert ("nsys adds eager within noise (2 captures), compiled within noise (4 captures) and "
            "graph-replayed +6% to +7% (2 captures)") in flat
    # graphed-sync captured graph by graph, beside its twin; the sync bubble's sentence.
    assert ("| graphed-sync | 1 | 0.684 | 0.638 | 91.8% | 2 | – | 48.7 | 29.3 | 90% / 0% / 10% "
            "| 7.4% |" in text)
    assert ("ran 0.645 against 0.632 ms/step at batch 1: 12.9 µs a step, 2.0% of `graphed`'s "
            "step; 0.912 against 0.898 ms/step at batch 32: 14.4 µs a step, 1.6% of `graphed`'s "
            "step. `graphed-sync`'s median bubble between steps in its captures: 48.7 µs traced "
            "(graph by graph) against 29.3 µs in its untraced twin at batch 1") in flat
    assert "![family ladder](figures/family-ladder.png)" in text
    assert (tmp_path / "figures" / "family-ladder.png").stat().st_size > 10_000
    again = CliRunner().invoke(main, [str(LLAMA), "-o", str(tmp_path), "--part", "family"])
    assert again.exit_code == 0 and (tmp_path / "RESULTS.md").read_text() == text


def test_the_family_part_needs_the_benches(tmp_path):
    result = CliRunner().invoke(main, [str(tmp_path), "-o", str(tmp_path), "--part", "family"])
    assert result.exit_code == 2 and "bench-ladder-b<B>.json" in result.output
    assert len(result.output.splitlines()) == 1


def frame(rows: dict) -> pd.DataFrame:
    """variant -> (ms/step, tokens hash), as read_bench gives them (p10/p90 = ms ∓ 0.1)."""
    return pd.DataFrame([{"ms_per_step_median": m, "ms_per_step_p10": m - 0.1,
                          "ms_per_step_p90": m + 0.1, "tokens_sha256": h}
                         for m, h in rows.values()], index=list(rows))


def capture(bubble_ns: float, twin_ns: float | None, level: str = "graph"):
    summary = {"bubble_ns_median": bubble_ns, "cuda_graph_trace": level}
    if twin_ns is not None:
        summary["untraced"] = {"bubble_ns_median": twin_ns}
    return SimpleNamespace(summary=summary), None


def test_our_own_rungs_close_the_family_ladder():
    by_batch = {1: frame({"fused": (0.3, "a"), "graphed": (0.8, "a"), "naive": (12.0, "a"),
                          "graphed-sync": (0.9, "a"), "hf-generate": (1.8, "a")})}
    assert list(ladder_table(by_batch)["variant"]) == ["naive", "hf-generate", "graphed-sync",
                                                       "graphed", "fused"]


def test_the_sync_bubble_traced_and_untraced_beside_the_measured_pair():
    by_batch = {1: frame({"graphed-sync": (0.912, "a"), "graphed": (0.889, "a")}),
                32: frame({"graphed-sync": (2.100, "b"), "graphed": (2.050, "b")})}
    caps = {("graphed-sync", 1): capture(61_200, 30_100),
            ("graphed-sync", 32): capture(75_450, None, "node")}
    assert sync_bubble_findings(by_batch, caps) == [
        "- **The sync bubble, once launches are cheap:** untraced, in one process a batch, "
        "`graphed-sync` (one CUDA graph a step, `.item()` after each) against `graphed` (the flag "
        "read a step late) ran 0.912 against 0.889 ms/step at batch 1: 23.0 µs a step, 2.6% of "
        "`graphed`'s step; 2.100 against 2.050 ms/step at batch 32: 50.0 µs a step, 2.4% of "
        "`graphed`'s step. `graphed-sync`'s median bubble between steps in its captures: 61.2 µs "
        "traced (graph by graph) against 30.1 µs in its untraced twin at batch 1 and 75.5 µs "
        "traced (node by node) against no untraced twin at batch 32."]
    # The pair alone (no capture), and nothing without either.
    (alone,) = sync_bubble_findings(by_batch, {})
    assert alone.endswith("2.4% of `graphed`'s step.")
    assert sync_bubble_findings({1: frame({"graphed": (0.889, "a")})}, {}) == []


def test_tokens_that_differ_under_tf32_are_named_with_their_reason():
    def tokens(differ: dict) -> str:
        rows = {"kv": (10.0, "k"), "naive": (12.0, "k"), "graphed": (0.8, "k")} | differ
        (line,) = [f for f in family_findings({32: frame(rows)}, {}) if "**Tokens:**" in f]
        return line

    assert "except `naive` at batch 32: under TF32 its whole-sequence recompute rounds" in tokens(
        {"naive": (12.0, "x")})
    assert ("except `naive` at batch 32 and `graphed` at batch 32: under TF32 their GEMMs (of "
            "other shapes than `kv`'s) round differently") in tokens(
        {"naive": (12.0, "x"), "graphed": (0.8, "y")})
