"""The sizes people decode (issue 33): llama:8b and llama:1b are Meta's shapes, drawn on the
device; tiny stand-ins of both (the presets with their widths cut, their special tokens, vocab,
GQA ratio, rope and tying kept) built by the same path on the CPU and decoded by kv and our own
steps (fused on its three paths: Triton GEMVs, cuBLAS, and the per-shape mix GEMV_TUNED picks)."""

import pytest
import torch
from test_llama_steps import counts, decode, eager
from transformers import AutoModelForCausalLM

from harness import llama_fused, llama_ops, model
from harness.config import ConfigError, RunConfig, validate
from harness.model import build_config, build_model, draws_on_device, model_record

# The presets with their widths cut to a few dozen: what the CPU can decode in milliseconds.
SMALLER = dict(hidden_size=64, intermediate_size=224, num_hidden_layers=2, initializer_range=0.2)
STAND_INS = {
    "llama:8b": dict(SMALLER, num_attention_heads=8, num_key_value_heads=2),
    "llama:1b": dict(SMALLER, num_attention_heads=4, num_key_value_heads=1, head_dim=16),
}


@pytest.fixture(scope="module", params=list(STAND_INS))
def stand_in(request):
    name = request.param
    key = ("llama", name.split(":")[1])
    real = model.PRESETS[key]
    model.PRESETS[key] = {**real, **STAND_INS[name]}
    try:
        torch.set_float32_matmul_precision("highest")
        m = build_model(name, "fp32", "cpu", seed=0)
    finally:
        model.PRESETS[key] = real
    random_norms(m)
    return name, m, decode(m, name, "kv")


def random_norms(m, seed: int = 1) -> None:
    """Every RMSNorm weight drawn from U(0.5, 1.5): HF leaves them at one, under which a step that
    took one norm's weight for another's (the fused step folds each norm into the GEMV or split
    sum before it) would still decode kv's tokens."""
    g = torch.Generator(device=m.device).manual_seed(seed)
    with torch.no_grad():
        for mod in m.modules():
            if type(mod).__name__.endswith("RMSNorm"):
                mod.weight.copy_(torch.rand(mod.weight.shape, generator=g, device=m.device,
                                            dtype=mod.weight.dtype) + 0.5)


def test_the_8b_preset_is_llama_3_8b():
    # Meta's config.json for Meta-Llama-3-8B; 8,030,261,248 parameters: embeddings and head
    # 128256 x 4096 each, per layer q and o 4096^2, k and v 1024 x 4096, gate/up/down
    # 3 x 14336 x 4096 and two norms, then the final norm.
    c = build_config("llama:8b")
    assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads,
            c.intermediate_size, c.vocab_size, c.tie_word_embeddings, c.rms_norm_eps) == (
        32, 4096, 32, 8, 14336, 128256, False, 1e-5)
    assert c.rope_parameters["rope_theta"] == 500000.0
    layer = 2 * 4096**2 + 2 * 1024 * 4096 + 3 * 14336 * 4096 + 2 * 4096
    assert 2 * 128256 * 4096 + 32 * layer + 4096 == 8_030_261_248
    one = build_config("llama:8b")
    one.num_hidden_layers = 1
    with torch.device("meta"):  # nothing allocated
        meta = AutoModelForCausalLM.from_config(one)
    assert sum(p.numel() for p in meta.parameters()) + 31 * layer == 8_030_261_248


def test_the_1b_preset_is_llama_3_2_1b():
    c = build_config("llama:1b")
    assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads,
            c.head_dim, c.intermediate_size, c.vocab_size, c.tie_word_embeddings) == (
        16, 2048, 32, 8, 64, 8192, 128256, True)
    # 1,235,814,400 parameters: q and o 2048^2, k and v 512 x 2048, gate/up/down 3 x 8192 x 2048,
    # two norms a layer; one 128256 x 2048 table, tied; the final norm (VARIANTS.md's table).
    layer = 2 * 2048**2 + 2 * 512 * 2048 + 3 * 8192 * 2048 + 2 * 2048
    assert 128256 * 2048 + 16 * layer + 2048 == 1_235_814_400
    assert c.rope_parameters == {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                                 "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 8192}


def test_large_presets_are_drawn_on_the_device_small_ones_on_the_cpu(tmp_path):
    assert draws_on_device("llama:8b", None) and draws_on_device("llama:1b", None)
    assert not draws_on_device("llama", None) and not draws_on_device("llama:tiny", None)
    big = build_config("llama:1b")
    big.save_pretrained(tmp_path)  # a directory with a config of 1.24B parameters, no weights
    assert draws_on_device(str(tmp_path), big)


def test_the_device_path_draws_the_cpu_path_s_weights_on_the_cpu():
    # The same HF init, placed by torch.device: on the CPU, from one seed, the same values.
    a = build_model("llama:tiny", "fp32", "cpu", seed=3, on_device=True)
    b = build_model("llama:tiny", "fp32", "cpu", seed=3, on_device=False)
    for (name, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q), name
    assert a.model.embed_tokens.weight.std().item() == pytest.approx(0.2, rel=0.05)


def test_a_reduced_layer_copy_keeps_the_shape_but_the_depth():
    m = build_model("llama:tiny", "fp32", "cpu", seed=0, layers=1)
    assert len(m.model.layers) == 1 and m.config.hidden_size == 64


def test_every_variant_takes_the_new_sizes_and_other_families_do_not():
    for v in ("naive", "kv", "compiled", "hf-generate", "graphed", "graphed-sync", "fused"):
        for name in ("llama:8b", "llama:1b"):
            validate(RunConfig(variant=v, model=name, batch=8))
    with pytest.raises(ConfigError, match="llama:1b or llama:8b"):
        validate(RunConfig(variant="kv", model="qwen2:8b"))


def test_stand_ins_keep_the_special_tokens_and_decode_many_tokens(stand_in):
    name, m, ref = stand_in
    record = model_record(name, m)
    assert (record["bos_token_id"], record["eos_token_ids"], record["vocab"]) == (
        128000, [128001], 128256)
    assert record["tied_embeddings"] is (name == "llama:1b")
    assert (ref["tokens"][:, 0] == 128000).all() and ref["stop_step"] == 9
    assert len(set(ref["tokens"][2, 1:9].tolist())) >= 6  # else the identity tests were blind


@pytest.mark.parametrize("path", ["gemv", "cublas", "tuned"])
def test_stand_ins_decode_kv_s_tokens_on_our_own_steps(stand_in, path, monkeypatch):
    # tuned: GEMV_TUNED as at 8B, on the stand-in's own shapes (QKV, gate/up and the head on
    # cuBLAS, o and down split-K): the mix the fused step runs at Llama-3-8B's width.
    name, m, ref = stand_in
    c = m.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    qkv = (c.num_attention_heads + 2 * c.num_key_value_heads) * head_dim
    monkeypatch.setattr(llama_ops, "GEMV_TUNED", {} if path != "tuned" else {
        ("norm", qkv, c.hidden_size, 4): llama_ops.CUBLAS,
        ("glu", c.intermediate_size, c.hidden_size, 4): llama_ops.CUBLAS,
        ("argmax", c.vocab_size, c.hidden_size, 4): llama_ops.CUBLAS,
        ("residual", c.hidden_size, c.intermediate_size, 4): (16, 64, 4, 3, 2)})
    if path == "tuned":  # the norm-fused GEMVs must not run where GEMV_TUNED says cuBLAS
        for op in ("norm_linear", "norm_glu", "norm_argmax"):
            monkeypatch.setattr(llama_fused, op, None)
    fused = eager(m, name, "fused", gemv=path != "cublas")
    assert torch.equal(fused["tokens"], ref["tokens"])
    assert counts(fused) == (10, 1, 0)
    if path == "gemv":
        graphed = eager(m, name, "graphed")
        assert torch.equal(graphed["tokens"], ref["tokens"])


def test_the_stand_in_s_static_rung_decodes_kv_s_tokens(stand_in):
    name, m, ref = stand_in
    assert torch.equal(decode(m, name, "static")["tokens"], ref["tokens"])



def test_the_rule_s_fp32_tiles_fit_in_shared_memory_at_8b():
    # Two fp32 weight tiles of 64 x 256 in flight for gate and up asked the H200 for 313 KB
    # (docs/sizes-20261201/probe.log): the gated MLP takes half the head's columns in fp32.
    assert llama_ops.gemv_config("glu", 14336, 4096, 4)[0] == 32
    assert llama_ops.gemv_config("argmax", 128256, 4096, 4)[0] == 64
    assert llama_ops.gemv_config("glu", 8192, 2048, 2)[0] == 64  # bf16: as before
