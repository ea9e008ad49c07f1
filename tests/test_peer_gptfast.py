"""scripts/peer_gptfast.py without a GPU: its config is gpt-fast's stories110M, its options are
checked in one line, and its summary of interleaved processes (the workers stubbed)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM, LlamaConfig

ROOT = Path(__file__).resolve().parent.parent
SPEC = importlib.util.spec_from_file_location("peer_gptfast", ROOT / "scripts/peer_gptfast.py")
peer = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(peer)


def fake_checkout(tmp_path: Path) -> Path:
    (tmp_path / "gpt-fast").mkdir()
    for name in ("model.py", "generate.py"):
        (tmp_path / "gpt-fast" / name).write_text("")
    return tmp_path / "gpt-fast"


def test_the_config_has_stories110m_parameters(tmp_path):
    # gpt-fast's stories110M: per layer wqkv 3 x 768^2, wo 768^2, w1/w3/w2 3 x 768 x 2048, two
    # norms; embeddings and output 32000 x 768 each (untied); the final norm.
    layer = 4 * 768 * 768 + 3 * 768 * 2048 + 2 * 768
    expected = 12 * layer + 2 * 32000 * 768 + 768
    assert expected == 134_105_856
    config = LlamaConfig.from_pretrained(peer.our_model("stories110M", tmp_path))
    with __import__("torch").device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in model.parameters()) == expected
    assert (config.num_key_value_heads, config.rope_theta if hasattr(config, "rope_theta")
            else config.rope_parameters["rope_theta"]) == (12, 10000.0)


def test_llama_3_8b_is_gpt_fast_s_config_on_our_side():
    # gpt-fast's model.py: "llama-3-8b": dict(block_size=8192, n_layer=32, n_head=32,
    # n_local_heads=8, dim=4096, intermediate_size=14336, vocab_size=128256, rope_base=500000),
    # norm_eps 1e-5 by default, an untied output Linear.
    c = peer.llama_config("llama-3-8b")
    assert (c.max_position_embeddings, c.num_hidden_layers, c.num_attention_heads,
            c.num_key_value_heads, c.hidden_size, c.intermediate_size, c.vocab_size,
            c.rope_parameters["rope_theta"], c.rms_norm_eps, c.tie_word_embeddings) == (
        8192, 32, 32, 8, 4096, 14336, 128256, 500000.0, 1e-5, False)
    assert peer.our_model("llama-3-8b", Path("/nonexistent")) == "llama:8b"  # writes nothing


@pytest.mark.parametrize("extra, message", [
    ([], "no model.py and generate.py (a gpt-fast checkout)"),
    (["--model", "llama-2-7b"], "--model must be one of stories110M, llama-3-8b"),
    (["--variants", "fused,nope"], "unknown variant 'nope'"),
    (["--processes", "0"], "--processes and --repeats must be >= 1"),
])
def test_bad_options_exit_2_in_one_line(tmp_path, extra, message):
    checkout = tmp_path / "none" if not extra else fake_checkout(tmp_path)
    proc = subprocess.run([sys.executable, str(ROOT / "scripts/peer_gptfast.py"), "--gpt-fast",
                           str(checkout), *extra], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr


def test_workers_share_compile_caches_under_the_workdir(tmp_path):
    # A cache the user set is kept; the others go under WORKDIR/cache.
    env = peer.cache_env(tmp_path, {"PATH": "/bin", "TRITON_CACHE_DIR": "/mine"})
    assert env == {"PATH": "/bin", "TRITON_CACHE_DIR": "/mine",
                   "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache" / "inductor"),
                   "TORCHINDUCTOR_FX_GRAPH_CACHE": "1", "TORCHINDUCTOR_AUTOGRAD_CACHE": "1"}


def test_processes_interleave_and_the_summary_takes_medians(tmp_path, monkeypatch, capsys):
    order = []
    times = {"gpt-fast": [0.50, 0.40, 0.45], "fused": [0.30, 0.20, 0.25]}

    def worker(args, side, batch, ours, workdir):
        order.append((batch, side))
        ms = times[side][order.count((batch, side)) - 1] * batch
        return {"ms_per_token_median": ms, "floor_ms_per_token": 0.05, "sampling": "s",
                "span": "x", "versions": {}, "process_s": 80.0 if len(order) == 1 else 20.0}

    monkeypatch.setattr(peer, "run_worker", worker)
    args = peer.parse(["--gpt-fast", str(fake_checkout(tmp_path)), "--variants", "fused",
                       "--batches", "1,2"])
    report = peer.compare(args)
    assert order == [(1, "gpt-fast"), (1, "fused"), (2, "gpt-fast"), (2, "fused")] * 3
    rows = {(r["batch"], r["side"]): r for r in report["rows"]}
    assert rows[1, "gpt-fast"]["ms_per_token_median"] == 0.45
    assert (rows[1, "fused"]["min"], rows[1, "fused"]["max"]) == (0.20, 0.30)
    assert rows[2, "fused"]["speedup_vs_gpt_fast"] == pytest.approx(0.90 / 0.50)
    assert rows[1, "fused"]["floor_pct"] == pytest.approx(20.0)
    assert rows[1, "gpt-fast"]["process_s"] == [80.0, 20.0, 20.0]  # the first one compiled
    lines = [line.split("] ", 1)[1] for line in capsys.readouterr().err.splitlines()]
    assert lines[:3] == ["batch 1, gpt-fast, process 1/3: starting",
                         "batch 1, gpt-fast, process 1/3: 0.500 ms/token (process 80 s)",
                         "batch 1, fused, process 1/3: starting"]
    assert len(lines) == 24
    assert max(len(line) for line in peer.table(report).splitlines()) <= 100


def test_every_row_of_a_batch_takes_the_floor_at_its_highest_measured_copy_rate(
        tmp_path, monkeypatch):
    # The fused process measured 3.0e12 B/s, gpt-fast's 4.0e12: fused's own floor of 0.08 ms
    # is 0.06 at 4.0e12, so 0.06 / 0.25 = 24% of it (not 32%); gpt-fast's stays 0.06 / 0.5.
    # Batch 2 records no rates (a JSON from before they were kept): each its own floor.
    rates = {"gpt-fast": 4.0e12, "fused": 3.0e12}

    def worker(args, side, batch, ours, workdir):
        run = {"ms_per_token_median": 0.5 if side == "gpt-fast" else 0.25,
               "floor_ms_per_token": 0.06 if side == "gpt-fast" else 0.08, "sampling": "s",
               "span": "x", "versions": {}}
        return run | ({"copy_bytes_per_s": rates[side]} if batch == 1 else {})

    monkeypatch.setattr(peer, "run_worker", worker)
    args = peer.parse(["--gpt-fast", str(fake_checkout(tmp_path)), "--variants", "fused",
                       "--batches", "1,2", "--processes", "1"])
    rows = {(r["batch"], r["side"]): r for r in peer.compare(args)["rows"]}
    assert rows[1, "fused"]["floor_ms_per_token"] == pytest.approx(0.06)
    assert rows[1, "fused"]["floor_pct"] == pytest.approx(24.0)
    assert rows[1, "gpt-fast"]["floor_pct"] == pytest.approx(12.0)
    assert rows[2, "fused"]["floor_pct"] == pytest.approx(32.0)


def test_a_run_cut_short_keeps_what_it_measured(tmp_path, monkeypatch):
    calls = []

    def worker(args, side, batch, ours, workdir):
        calls.append(side)
        if len(calls) == 4:
            raise peer.PeerError("the fused process at batch 1 failed (exit 1): boom")
        return {"ms_per_token_median": 0.5 if side == "gpt-fast" else 0.25,
                "floor_ms_per_token": 0.05, "sampling": "s", "span": "x", "versions": {}}

    monkeypatch.setattr(peer, "run_worker", worker)
    out = tmp_path / "peer.json"
    args = peer.parse(["--gpt-fast", str(fake_checkout(tmp_path)), "--variants", "fused",
                       "--batches", "1", "--json", str(out)])
    with pytest.raises(peer.PeerError):
        peer.compare(args)
    report = json.loads(out.read_text())
    assert report["partial"] is True
    assert [(r["side"], r["ms_per_token"], r["speedup_vs_gpt_fast"]) for r in report["rows"]] == [
        ("gpt-fast", [0.5, 0.5], 1.0), ("fused", [0.25], 2.0)]


PEER_RUN = Path(__file__).resolve().parent.parent / "docs" / "llama-peer-20261201"


def test_the_committed_peer_table_prints_again_and_is_what_variants_md_quotes(capsys):
    """`--table` on the H200 run's JSON prints its rows again; VARIANTS.md's table quotes them."""
    assert peer.main(["--table", str(PEER_RUN / "peer.json")]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:8]]
    assert rows == [
        ["1", "gpt-fast", "3", "0.443", "0.442-0.455", "[0.442,", "0.455]", "14.8", "1.00x", "-"],
        ["1", "graphed", "3", "0.594", "0.593-0.594", "[0.593,", "0.594]", "11.0", "0.75x", "0.96"],
        ["1", "fused", "3", "0.352", "0.351-0.352", "[0.351,", "0.352]", "18.5", "1.26x", "0.73"],
        ["8", "gpt-fast", "3", "0.613", "0.607-0.615", "[0.607,", "0.615]", "11.9", "1.00x", "-"],
        ["8", "graphed", "3", "0.685", "0.685-0.685", "[0.685,", "0.685]", "10.7", "0.89x", "0.96"],
        ["8", "fused", "3", "0.377", "0.377-0.377", "[0.377,", "0.377]", "18.2", "1.63x", "0.73"],
    ]
    variants = (PEER_RUN.parent / "VARIANTS.md").read_text()
    by = {(r[0], r[1]): r for r in rows}
    for batch in ("1", "8"):
        gf, fu, gr = by[batch, "gpt-fast"], by[batch, "fused"], by[batch, "graphed"]
        line = (f"| {batch} | {gf[3]} ({gf[4]}) | {fu[3]} ({fu[4]}) | {gr[3]} ({gr[4]}) | "
                f"{fu[8]} | {gr[8]} |")
        assert line in variants


def test_table_of_a_file_that_is_not_a_peer_run_is_one_line(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text('{"a": 1}')
    assert peer.main(["--table", str(bad)]) == 2
    assert capsys.readouterr().err == (
        f"peer_gptfast: error: --table {bad}: no rows (not a peer_gptfast --json file)\n")
