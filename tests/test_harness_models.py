"""Every generic variant against kv for each architecture's tiny size on the CPU; the model
records, tokens_sha256 and --model DIR."""

import hashlib
import json
import struct

import pytest
import torch

from harness.config import ConfigError, RunConfig, validate
from harness.instrument import no_window
from harness.model import build_config, build_model, model_record, special_tokens, weight_bytes
from harness.run import load_model, make_decoder, run, tokens_sha256

BATCH, NEW, STOP = 4, 12, "uniform:4-9"  # stop seed 0 draws steps [6, 7, 9, 4]
STOPS = [6, 7, 9, 4]
ARCHS = ["llama:tiny", "qwen2:tiny", "mistral:tiny", "phi:tiny"]
# (BOS, EOS): each family's own ids, BOS != EOS (qwen2's are Qwen2.5's instruct tokens).
SPECIAL = {"llama:tiny": (1, (2,)), "qwen2:tiny": (151643, (151645,)),
           "mistral:tiny": (1, (2,)), "phi:tiny": (1, (2,))}
GENERIC = ["naive", "kv-expandable", "static", "pipelined", "pipelined-seed", "deferred",
           "check-every-k", "nocheck", "hf-generate"]

_models, _references = {}, {}


def model(name: str):
    if name not in _models:
        torch.set_float32_matmul_precision("highest")
        _models[name] = build_model(name, "fp32", "cpu", seed=0)
    return _models[name]


def config(variant: str, name: str, **kw) -> RunConfig:
    base = dict(variant=variant, model=name, batch=BATCH, new_tokens=NEW, device="cpu",
                stop=STOP, matmul_precision="highest")
    return validate(RunConfig(**{**base, **kw}))


def decode(name: str, variant: str, **kw) -> dict:
    # One run: that a second run does not depend on the first, the GPT-2 tests check (the
    # loops and caches are the same for every family).
    return make_decoder(model(name), config(variant, name, **kw))(no_window())


def reference(name: str) -> dict:
    if name not in _references:
        _references[name] = decode(name, "kv")
    return _references[name]


@pytest.mark.parametrize("name", ARCHS)
def test_kv_starts_at_the_family_bos_and_forces_its_eos(name):
    bos, eos = SPECIAL[name]
    assert special_tokens(model(name).config) == (bos, eos)
    tokens = reference(name)["tokens"]
    assert tokens.shape == (BATCH, 9 + 1) and reference(name)["stop_step"] == 9
    assert (tokens[:, 0] == bos).all()
    for j, s in enumerate(STOPS):
        assert not torch.isin(tokens[j, 1:s], torch.tensor(eos)).any()
        assert (tokens[j, s:] == eos[0]).all()


@pytest.mark.parametrize("name", ARCHS)
def test_kv_output_has_several_distinct_tokens(name):
    # Otherwise the identity tests below could not tell variants apart.
    assert len(set(reference(name)["tokens"][2, 1:9].tolist())) >= 6


@pytest.mark.parametrize("variant", GENERIC)
@pytest.mark.parametrize("name", ARCHS)
def test_generic_variant_gives_kv_tokens_and_stop_step(name, variant):
    result = decode(name, variant)
    assert torch.equal(result["tokens"], reference(name)["tokens"])
    assert result["stop_step"] == 9


@pytest.mark.usefixtures("compile_without_codegen")
def test_compiled_llama_gives_kv_tokens():
    # RoPE positions, GQA and the 4D mask through dynamo and inductor's decompositions (one
    # family only; tests/conftest.py says why without inductor's C++ code).
    result = decode("llama:tiny", "compiled")
    assert torch.equal(result["tokens"], reference("llama:tiny")["tokens"])


@pytest.mark.parametrize("variant", ["graphed", "graphed-sync", "fused"])
def test_own_step_variants_refuse_phi_in_one_line(variant):
    with pytest.raises(ConfigError) as err:
        config(variant, "phi:tiny", device="cuda")
    assert str(err.value) == (
        f"{variant} runs our own step, written for gpt2, llama, qwen2, mistral: --model phi:tiny "
        "is phi, whose parallel attention+MLP block, partial rotary and LayerNorm it does not "
        "compute (every other variant runs it)")


def test_records_count_shared_embeddings_once():
    # llama:tiny, untied: embed and lm_head 1024x64 each; a layer: q, o 64x64, k, v 64x32
    # (2 KV heads of 16), MLP 3 x 64x176, two norms; the final norm.
    llama = model_record("llama:tiny", model("llama:tiny"))
    assert llama == {
        "architecture": "llama", "size": "tiny", "path": None, "weights": "random",
        "class": "LlamaForCausalLM", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2,
        "vocab": 1024, "tied_embeddings": False,
        "parameters": 2 * 1024 * 64 + 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 176 + 2 * 64) + 64,
        "bos_token_id": 1, "eos_token_ids": [2]}
    # qwen2:tiny, tied: the 151936x128 embedding once; q, k, v carry biases (k, v 64 wide).
    qwen = model_record("qwen2:tiny", model("qwen2:tiny"))
    layer = (128 * 128 + 128) + 2 * (128 * 64 + 64) + 128 * 128 + 3 * 128 * 352 + 2 * 128
    assert qwen["tied_embeddings"] and qwen["kv_heads"] == 2
    assert qwen["parameters"] == 151936 * 128 + 2 * layer + 128
    assert weight_bytes(model("qwen2:tiny")) == 4 * qwen["parameters"]


def test_small_sizes_are_shaped_like_their_families():
    shapes = {}
    for arch in ["llama", "qwen2", "mistral", "phi"]:
        c = build_config(arch)
        shapes[arch] = (c.num_hidden_layers, c.hidden_size, c.num_attention_heads,
                        c.num_key_value_heads, c.vocab_size, c.tie_word_embeddings)
    assert shapes == {"llama": (12, 768, 12, 4, 32000, False),
                      "qwen2": (12, 512, 8, 2, 151936, True),
                      "mistral": (12, 768, 12, 4, 32768, False),
                      "phi": (10, 768, 12, 12, 51200, False)}
    assert build_config("gpt2").n_layer == 12 and build_config("tiny").n_embd == 64


def test_tokens_sha256_is_of_the_int64_bytes():
    tokens = torch.tensor([[1, 2], [3, 300]], dtype=torch.int32)
    assert tokens_sha256(tokens) == hashlib.sha256(struct.pack("<4q", 1, 2, 3, 300)).hexdigest()


def test_run_json_records_the_model_and_the_tokens_hash(tmp_path):
    records = {}
    for variant in ["kv", "static"]:
        out = tmp_path / variant
        run(config(variant, "mistral:tiny", out=out))
        records[variant] = json.loads((out / "run.json").read_text())
    kv, static = records["kv"], records["static"]
    assert list(kv) == ["config", "model", "versions", "result", "timing", "floor"]
    assert (kv["model"]["architecture"], kv["model"]["kv_heads"]) == ("mistral", 1)
    assert kv["model"]["parameters"] == model_record("mistral:tiny", model("mistral:tiny"))[
        "parameters"]
    assert kv["result"]["tokens_sha256"] == tokens_sha256(reference("mistral:tiny")["tokens"])
    assert static["result"]["tokens_sha256"] == kv["result"]["tokens_sha256"]


def test_model_dir_with_a_config_only_draws_the_same_seeded_weights(tmp_path):
    build_config("llama:tiny").save_pretrained(tmp_path)
    assert not list(tmp_path.glob("*.safetensors"))
    result = decode(str(tmp_path), "static")
    assert torch.equal(result["tokens"], reference("llama:tiny")["tokens"])
    record = model_record(str(tmp_path), model(str(tmp_path)))
    assert (record["architecture"], record["size"], record["weights"]) == ("llama", None, "random")


def test_model_dir_with_weights_loads_them(tmp_path):
    other = build_model("llama:tiny", "fp32", "cpu", seed=7)
    other.save_pretrained(tmp_path)
    name = str(tmp_path)
    assert model_record(name, model(name))["weights"] == "loaded"
    expected = make_decoder(other, config("kv", name))(no_window())["tokens"]
    assert torch.equal(decode(name, "kv")["tokens"], expected)
    assert not torch.equal(expected, reference("llama:tiny")["tokens"])
    assert torch.equal(decode(name, "pipelined")["tokens"], expected)


@pytest.mark.parametrize("content, message", [
    (None, "no config.json in that directory"),
    ("[1, 2]", "config.json is not a JSON object"),
    ('{"vocab_size": 8}', "config.json has no model_type"),
])
def test_bad_model_dirs_are_refused_in_one_line(tmp_path, content, message):
    if content is not None:
        (tmp_path / "config.json").write_text(content)
    with pytest.raises(ConfigError) as err:
        config("kv", str(tmp_path))
    assert str(err.value) == f"--model {tmp_path}: {message}"


def test_unknown_model_names_list_the_choices():
    with pytest.raises(ConfigError) as err:
        config("kv", "llama:huge")
    assert str(err.value) == ("--model must be ARCH[:SIZE] (gpt2, llama, qwen2, mistral, phi; "
                              "tiny, small; llama:1b or llama:8b), tiny, or a directory with a "
                              "config.json, got 'llama:huge'")


@pytest.mark.parametrize("content, message", [
    ('{"model_type": "llama", "eos_token_id": null}', "the llama config has no eos_token_id"),
    ('{"model_type": "nosuch"}', "The checkpoint you are trying to load has model type `nosuch`"),
    ('{"model_type": "t5"}', "Unrecognized configuration class"),
])
def test_unbuildable_model_dirs_are_refused_in_one_line(tmp_path, content, message):
    (tmp_path / "config.json").write_text(content)
    with pytest.raises(ConfigError) as err:
        load_model(config("kv", str(tmp_path)))
    assert str(err.value).startswith(f"--model {tmp_path}: {message}")
    assert "\n" not in str(err.value)


def test_hf_generate_ignores_a_model_dirs_generation_config(tmp_path):
    # A repetition penalty in generation_config.json would change generate's greedy picks.
    model("llama:tiny").save_pretrained(tmp_path)  # the same weights: the same tokens
    (tmp_path / "generation_config.json").write_text(json.dumps(
        {"repetition_penalty": 5.0, "suppress_tokens": [226, 630], "bos_token_id": 1,
         "eos_token_id": 2}))
    name = str(tmp_path)
    assert model(name).generation_config.repetition_penalty == 5.0
    assert torch.equal(decode(name, "hf-generate")["tokens"], reference("llama:tiny")["tokens"])
