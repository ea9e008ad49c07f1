"""--tp 2 on the CPU (gloo, two ranks under torchrun): tokens identical to --tp 1 for the tiny
GPT-2 and llama, static and deferred; the stop flag agreed; the options --tp refuses. The one
torchrun is conftest's tp2 fixture."""

import json

import pytest
import torch

from harness.config import ConfigError, RunConfig, validate
from harness.instrument import no_window
from harness.run import load_model, make_decoder, tokens_sha256


def tp1_sha(name: str, variant: str, **kw) -> str:
    cfg = validate(RunConfig(variant=variant, model=name, device="cpu", matmul_precision="highest",
                             **{**dict(batch=4, new_tokens=12, stop="uniform:4-9"), **kw}))
    return tokens_sha256(make_decoder(load_model(cfg), cfg)(no_window())["tokens"])


def test_tp2_decodes_the_tokens_of_tp1_and_agrees_on_the_flag(tp2):
    seen = dict(tp2[1])
    assert seen.pop("agree") == [False, False]
    assert len(seen) == 4
    for case, shas in seen.items():
        name, variant = case.split()
        assert shas == [tp1_sha(name, variant)] * 2, case


def test_torchrun_harness_run_tp2_writes_one_run_json(tp2):
    done, _, run = tp2
    assert done.stdout.count("static: 12 steps run") == 1  # rank 0 prints, rank 1 does not
    record = json.loads((run / "run.json").read_text())
    sha = tp1_sha("tiny", "static", batch=3, stop="none")
    assert record["result"]["tokens_sha256"] == sha
    t = record["tp"]
    assert (t["rank"], t["world_size"], t["backend"], t["ranks_agree"]) == (0, 2, "gloo", True)
    assert t["tokens_sha256_by_rank"] == [sha, sha]
    assert record["config"]["tp"] == 2
    # Per layer 12 x 64^2 sharded weights and 7 x 64 sharded biases (c_attn's 3, c_fc's 4; the
    # row-parallel biases stay whole): each rank keeps half of them, in both layers.
    assert record["model"]["parameters"] - t["parameters_per_rank"] == 2 * (6 * 64 * 64 + 7 * 32)


@pytest.mark.parametrize("kw, message", [
    (dict(variant="kv"), "--tp runs static, compiled, pipelined, deferred, nocheck, not kv"),
    (dict(model="phi:tiny"), "--tp shards gpt2 and llama, not phi"),
    (dict(variant="compiled", compile="reduce-overhead"), "--compile reduce-overhead"),
    (dict(tp=0), "--tp must be >= 1, got 0"),
])
def test_tp_refuses_in_one_line(kw, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        validate(RunConfig(**{**dict(variant="static", device="cpu", tp=2), **kw}))


def test_tp_needs_torchrun_and_divisible_heads(monkeypatch):
    from harness import tp

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ConfigError, match="--tp 2 runs under torchrun"):
        tp.init(2, "cpu")
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(ConfigError, match="--tp 2 needs torchrun --nproc-per-node 2, got WORLD_"):
        tp.init(2, "cpu")
    torch.set_float32_matmul_precision("highest")
    model = load_model(RunConfig(variant="static", model="tiny", device="cpu"))
    with pytest.raises(ConfigError, match=r"--tp 3 must divide the heads \(2\) and KV heads \(2\)"):
        tp.shard(model, 3)
