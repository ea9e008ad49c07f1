"""On the GPU, the sizes people decode (issue 33): every rung on reduced-layer copies of llama:8b
and llama:1b (their widths, vocab, GQA, rope and tying; 2 layers) at fp32 "highest" against kv,
fused also on the mix of cuBLAS and split-K GEMVs GEMV_TUNED gives 8B in bf16 (the same entries
for fp32, with launches whose tiles fit in fp32); the whole llama:8b in bf16: drawn on the GPU in
seconds, every rung but the compiled ones builds and runs a few steps, and fused's split-K GEMVs
against their references."""

import time

import pytest
import torch
from test_sizes import random_norms

from harness import llama_ops
from harness.config import RunConfig, validate
from harness.instrument import no_window
from harness.model import build_model
from harness.run import make_decoder, tokens_sha256

pytestmark = pytest.mark.gpu

BATCH, NEW, STOP = 8, 24, "uniform:10-20"
RUNGS = ["naive", "static", "compiled", "pipelined", "deferred", "check-every-k", "nocheck",
         "graphed", "graphed-sync", "fused"]


@pytest.fixture(scope="module", params=["llama:8b", "llama:1b"])
def reduced(request):
    torch.set_float32_matmul_precision("highest")
    m = build_model(request.param, "fp32", "cuda", seed=0, layers=2)
    random_norms(m)
    yield request.param, m, decode(m, request.param, "kv")
    del m
    torch.cuda.empty_cache()


def config(name: str, variant: str, **kw) -> RunConfig:
    return validate(RunConfig(**{**dict(variant=variant, model=name, batch=BATCH, new_tokens=NEW,
                                        device="cuda", stop=STOP, matmul_precision="highest"),
                                 **kw}))


def decode(model, name: str, variant: str, **kw) -> dict:
    run = make_decoder(model, config(name, variant, **kw))
    run(no_window())
    return run(no_window())


def same(result: dict, ref: dict) -> bool:
    return (tokens_sha256(result["tokens"]) == tokens_sha256(ref["tokens"])
            and result["stop_step"] == ref["stop_step"])


@pytest.mark.parametrize("variant", RUNGS)
def test_every_rung_gives_kv_tokens_on_a_reduced_layer_copy(reduced, variant):
    name, model, ref = reduced
    assert len(set(ref["tokens"][0, 1:10].tolist())) > 3  # not one repeated token
    assert same(decode(model, name, variant), ref)


def test_fused_on_8b_s_mix_of_cublas_and_split_k_gives_kv_tokens(reduced, monkeypatch):
    name, model, ref = reduced
    c = model.config
    qkv = (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim
    fp32 = {("norm", qkv, c.hidden_size, 4): llama_ops.CUBLAS,
             ("glu", c.intermediate_size, c.hidden_size, 4): llama_ops.CUBLAS,
             ("residual", c.hidden_size, c.hidden_size, 4): (32, 128, 4, 3, 2),
             ("residual", c.hidden_size, c.intermediate_size, 4): (32, 128, 4, 3, 4)}
    monkeypatch.setattr(llama_ops, "GEMV_TUNED", fp32)
    assert same(decode(model, name, "fused"), ref)


def test_split_k_gemvs_match_their_references_in_bf16(monkeypatch):
    torch.manual_seed(0)
    for n, k, launch in ((4096, 4096, (32, 256, 4, 3, 2)), (4096, 14336, (64, 256, 4, 3, 4))):
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        y = torch.randn(8, k, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(8, n, device="cuda", dtype=torch.bfloat16)
        ref = x + torch.nn.functional.linear(y, w)
        monkeypatch.setitem(llama_ops.GEMV_TUNED, ("residual", n, k, 2), launch)
        llama_ops.linear_residual(y, w, None, x)
        torch.testing.assert_close(x, ref, rtol=2e-2, atol=2e-2)


@pytest.fixture(scope="module")
def llama8b():
    torch.cuda.synchronize()
    t0 = time.monotonic()
    m = build_model("llama:8b", "bf16", "cuda", seed=0)
    torch.cuda.synchronize()
    yield m, time.monotonic() - t0
    del m
    torch.cuda.empty_cache()


def test_8b_is_drawn_on_the_gpu_in_seconds(llama8b):
    m, seconds = llama8b
    assert seconds < 30  # 9.4 s on the H200 (docs/sizes-20261201/probe.log)
    assert sum(p.numel() for p in m.parameters()) == 8_030_261_248
    assert m.lm_head.weight.is_cuda and m.lm_head.weight.dtype == torch.bfloat16


@pytest.mark.parametrize("variant", [r for r in RUNGS if r != "compiled"])
def test_every_rung_runs_at_8b_in_bf16(llama8b, variant):
    m, _ = llama8b
    cfg = validate(RunConfig(variant=variant, model="llama:8b", batch=2, new_tokens=8,
                             dtype="bf16", stop="uniform:3-6", device="cuda"))
    result = make_decoder(m, cfg)(no_window())
    assert result["stop_step"] == 6 and result["tokens"].shape == (2, 7)
