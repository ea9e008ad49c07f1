"""Our own Llama-family steps (graphed's and fused's) against kv, tiny models on the CPU, fp32 at
"highest": the steps run eagerly (the CUDA graph is CUDA-only), fused's Triton kernels replaced by
their torch references (tests/test_triton_interpreter.py and the GPU tests check the kernels)."""

from dataclasses import replace

import pytest
import torch
from torch.overrides import TorchFunctionMode
from transformers import AutoModelForCausalLM, LlamaConfig

from harness.config import ConfigError, RunConfig, validate
from harness.decode import new_state
from harness.instrument import no_window
from harness.llama_step import PAD, llama_logits, new_graphed_llama, rope_tables
from harness.model import PRESETS, build_model, special_tokens
from harness.run import make_decoder
from harness.stops import stop_steps
from harness.variants import fused_own_step, own_step

BATCH, NEW, STOP = 4, 12, "uniform:4-9"
FAMILIES = ["llama:tiny", "qwen2:tiny", "mistral:tiny"]


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    torch.set_float32_matmul_precision("highest")
    model = build_model(request.param, "fp32", "cpu", seed=0)
    return request.param, model, decode(model, request.param, "kv")


def config(name: str, variant: str, **kw) -> RunConfig:
    return validate(RunConfig(**{**dict(variant=variant, model=name, batch=BATCH, new_tokens=NEW,
                                        device="cpu", stop=STOP, matmul_precision="highest"),
                                 **kw}))


def decode(model, name: str, variant: str, **kw) -> dict:
    run = make_decoder(model, config(name, variant, **kw))
    run(no_window())
    return run(no_window())


def eager(model, name: str, variant: str, **kw) -> dict:
    """graphed (own_step) or fused, eagerly, twice: the second run must not depend on the first."""
    cfg = replace(config(name, "kv"), variant=variant)
    make = fused_own_step if variant == "fused" else own_step
    run = make(model, cfg, _state(model), graph=False, **kw)
    run(no_window())
    return run(no_window())


def counts(result: dict) -> tuple:
    return result["steps_run"], result["overshoot_steps"], result["stale_flag_reads"]


def test_kv_output_is_not_one_repeated_token(family):
    name, _, ref = family
    assert ref["stop_step"] == 9
    assert len(set(ref["tokens"][2, 1:9].tolist())) >= 6  # else the identity tests were blind


def test_own_step_gives_kv_tokens(family):
    name, model, ref = family
    result = eager(model, name, "graphed")
    assert torch.equal(result["tokens"], ref["tokens"])
    assert counts(result) == (10, 1, 0)


def test_own_step_with_item_every_step_gives_kv_tokens(family):
    name, model, ref = family
    result = eager(model, name, "graphed", deferred=False)  # graphed-sync's loop, eagerly
    assert torch.equal(result["tokens"], ref["tokens"])


@pytest.mark.parametrize("gemv", [True, False], ids=["gemv", "cublas"])
def test_fused_step_gives_kv_tokens_on_either_path(family, gemv):
    # The GEMV path (RMSNorm folded into the projections, residual adds in place, the head's
    # argmax partials, one bookkeeping kernel) and the cuBLAS path of larger batches.
    name, model, ref = family
    result = eager(model, name, "fused", gemv=gemv)
    assert torch.equal(result["tokens"], ref["tokens"])
    assert counts(result) == (10, 1, 0)


@pytest.mark.parametrize("variant", ["graphed", "fused"])
def test_own_steps_match_kv_for_all_new_tokens(variant):
    model = build_model("llama:tiny", "fp32", "cpu", seed=0)
    ref = decode(model, "llama:tiny", "kv", stop="none")
    make = fused_own_step if variant == "fused" else own_step
    cfg = replace(config("llama:tiny", "kv", stop="none"), variant=variant)
    run = make(model, cfg, _state(model, "none"), graph=False)
    assert torch.equal(run(no_window())["tokens"], ref["tokens"])


def scaled_llama(rope: dict):
    torch.manual_seed(0)
    cfg = LlamaConfig(**{**PRESETS["llama", "tiny"], "rope_scaling": rope})
    return AutoModelForCausalLM.from_config(cfg).eval().requires_grad_(False)


def test_rope_scaling_comes_from_the_models_own_rotary_module():
    # Linear scaling divides positions by 4: a step that ignored it would not give kv's tokens.
    model = scaled_llama({"rope_type": "linear", "factor": 4.0})
    ref = decode(model, "llama:tiny", "kv")
    plain = decode(build_model("llama:tiny", "fp32", "cpu", seed=0), "llama:tiny", "kv")
    assert not torch.equal(ref["tokens"], plain["tokens"])
    assert torch.equal(eager(model, "llama:tiny", "graphed")["tokens"], ref["tokens"])
    assert torch.equal(eager(model, "llama:tiny", "fused")["tokens"], ref["tokens"])


def test_rope_tables_hold_hfs_cos_and_rotate_half_sin():
    model = build_model("llama:tiny", "fp32", "cpu", seed=0)
    cos, sin = rope_tables(model, 20)
    hf_cos, hf_sin = model.model.rotary_emb(torch.zeros(1), position_ids=torch.tensor([[7]]))
    assert torch.equal(cos[7], hf_cos[0, 0])
    assert torch.equal(sin[7, 8:], hf_sin[0, 0, 8:]) and torch.equal(sin[7, :8], -hf_sin[0, 0, :8])


class Calls(TorchFunctionMode):
    """The torch functions and tensor methods a step calls, outermost only (F.rms_norm is one
    call, as it is one kernel on CUDA; on the CPU it runs as several)."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", str(func))
        copied = name == "reshape" and out.untyped_storage().data_ptr() != (
            args[0].untyped_storage().data_ptr())
        if copied or name not in VIEWS:
            self.names.append(name)
        return out


# Calls that launch nothing: views (reshape counts where it copied) and attribute reads.
VIEWS = {"__get__", "__getitem__", "view", "transpose", "permute", "expand", "t", "chunk",
         "reshape"}
LAYER = ["rms_norm", "linear", "bmm", "index_copy_", "bmm", "softmax", "bmm", "addmm_",
         "rms_norm", "linear", "silu", "mul", "addmm_"]


@pytest.mark.parametrize("name", ["llama:tiny", "mistral:tiny"])
@pytest.mark.parametrize("batch", [1, 4])
def test_graphed_step_launches_13_ops_a_layer_and_8_a_step(name, batch):
    # The module docstring's count: 13 L + 8 (+ a query copy a layer above batch 1, with
    # more than one KV head).
    model = build_model(name, "fp32", "cpu", seed=0)
    kv = new_graphed_llama(model, batch, 20)
    token, pos = torch.ones(batch, 1, dtype=torch.long), torch.tensor([3])
    with torch.no_grad(), Calls() as calls:
        llama_logits(model, kv, token, pos)
    # mistral:tiny has one KV head: its query heads are [B, group, D] as they stand.
    layer = LAYER[:4] + ["reshape"] * (batch > 1 and kv["kv_heads"] > 1) + LAYER[4:]
    assert calls.names == (["embedding", "index_select", "mul", "sum", "gt", "where"] + layer * 2
                           + ["rms_norm", "linear"])


def test_rotary_matrices_are_hfs_rotation_scaled_on_q_identity_on_v():
    torch.set_float32_matmul_precision("highest")
    model = build_model("qwen2:tiny", "fp32", "cpu", seed=0)  # 4 heads over 2, head dim 32
    kv = new_graphed_llama(model, 1, 20)
    nh, nkv, d = kv["heads"], kv["kv_heads"], kv["head_dim"]
    pos = torch.tensor([7])
    rot = (kv["basis"] * kv["table"].index_select(0, pos).view(3, 1, 1, -1)).sum(0)
    x = torch.randn(nh + 2 * nkv, 1, d, generator=torch.Generator().manual_seed(0))
    cos, sin = model.model.rotary_emb(x, position_ids=pos[None])  # [1, 1, D]
    hf = x * cos + torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1) * sin
    out = torch.bmm(x, rot)
    scale = model.model.layers[0].self_attn.scaling
    torch.testing.assert_close(out[:nh], hf[:nh] * scale, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out[nh:nh + nkv], hf[nh:nh + nkv], rtol=1e-6, atol=1e-6)
    assert torch.equal(out[nh + nkv:], x[nh + nkv:])


def test_the_key_caches_mask_column_is_minus_inf_past_pos_in_every_layer():
    model = build_model("mistral:tiny", "fp32", "cpu", seed=0)
    kv = new_graphed_llama(model, 2, 20)  # 32 slots
    d = kv["head_dim"]
    with torch.no_grad():
        llama_logits(model, kv, torch.ones(2, 1, dtype=torch.long), torch.tensor([5]))
    keys = kv["cache"][:, 0]  # [L, B, KV, T, D + PAD]
    assert keys.shape[-1] == d + PAD
    assert (keys[..., :6, d] == 0).all() and (keys[..., 6:, d] == float("-inf")).all()
    assert (keys[..., d + 1:] == 0).all() and (kv["cache"][:, 1, ..., d:] == 0).all()
    assert (keys[..., 5, :d] != 0).all() and (keys[..., 6:, :d] == 0).all()  # slot 5 written


def test_dynamic_rope_is_refused_in_one_line():
    model = scaled_llama({"rope_type": "dynamic", "factor": 4.0})
    with pytest.raises(ConfigError) as err:
        eager(model, "llama:tiny", "graphed")
    assert str(err.value) == ("our own step supports rope types default, linear, llama3, yarn, "
                              "not 'dynamic' (its frequencies change with the length reached)")


def test_a_sliding_window_within_reach_is_refused():
    torch.manual_seed(0)
    cfg = LlamaConfig(**PRESETS["llama", "tiny"])
    cfg.sliding_window = 8  # mistral's attribute, on a llama: the step reads it from any config
    model = AutoModelForCausalLM.from_config(cfg).eval()
    with pytest.raises(ConfigError, match="no sliding window: the config's 8 is within"):
        eager(model, "llama:tiny", "fused")


def test_fused_refuses_branches_and_other_activations():
    model = build_model("llama:tiny", "fp32", "cpu", seed=0)
    cfg = replace(config("llama:tiny", "kv"), variant="fused")  # validate: fused needs CUDA
    with pytest.raises(ConfigError, match=r"fused runs the Llama family in one branch"):
        fused_own_step(model, replace(cfg, branches=2), _state(model), graph=False)
    model.config.hidden_act = "gelu"
    with pytest.raises(ConfigError, match="gated MLP with silu, not the config's 'gelu'"):
        fused_own_step(model, cfg, _state(model), graph=False)


def _state(model, stop: str = STOP) -> dict:
    bos, eos = special_tokens(model.config)
    return new_state(BATCH, NEW, stop_steps(stop, BATCH, NEW, 0), "cpu", 0, bos, eos)


def test_llama_family_variants_validate_on_cuda():
    for name in FAMILIES:
        for variant in ("graphed", "graphed-sync", "fused"):
            assert validate(RunConfig(variant=variant, model=name)).model == name
