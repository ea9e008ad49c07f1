"""On the GPU: graphed, graphed-sync, fused, mega and while-mega on the small llama, qwen2 and
mistral (fp32 at "highest", batch 8, a uniform stop schedule) against kv; fused on both of its
paths (GEMV up to 16 rows, cuBLAS above); the replays make no host sync; the Llama-family kernels
against their references in fp32 and bf16. One family: `-k llama` (the tests are grouped by
family)."""

import pytest
import torch

from harness import llama_ops
from harness.config import RunConfig, validate
from harness.decode import new_state
from harness.instrument import no_window
from harness.model import build_model, special_tokens
from harness.run import make_decoder, tokens_sha256
from harness.stops import stop_steps
from harness.variants import fused_own_step

pytestmark = pytest.mark.gpu

BATCH, NEW, STOP = 8, 40, "uniform:10-30"
FAMILIES = ["llama", "qwen2", "mistral"]
OWN = ["graphed", "graphed-sync", "fused", "mega", "while-mega"]


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    torch.set_float32_matmul_precision("highest")
    m = build_model(request.param, "fp32", "cuda", seed=0)
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


@pytest.mark.parametrize("variant", OWN)
def test_own_step_gives_kv_tokens_and_stop_step(family, variant):
    name, model, ref = family
    assert len(set(ref["tokens"][0, 1:10].tolist())) > 1  # not one repeated token
    assert same(decode(model, name, variant), ref)


def test_fused_cublas_path_gives_kv_tokens(family):
    # Batch 8 takes the GEMV path; the cuBLAS one (above 16 rows) forced here.
    name, model, ref = family
    bos, eos = special_tokens(model.config)
    st = new_state(BATCH, NEW, stop_steps(STOP, BATCH, NEW, 0), "cuda", 0, bos, eos)
    run = fused_own_step(model, config(name, "fused"), st, graph=True, gemv=False)
    run(no_window())
    assert same(run(no_window()), ref)


def test_fused_gives_kv_tokens_at_batch_24(family):
    name, model, _ = family
    assert same(decode(model, name, "fused", batch=24), decode(model, name, "kv", batch=24))


@pytest.mark.parametrize("variant", OWN)
def test_replays_make_no_host_sync_outside_the_stop_check(family, variant):
    name, model, ref = family
    run = make_decoder(model, config(name, variant))
    run(no_window())
    torch.cuda.set_sync_debug_mode("error")
    try:
        result = run(no_window())
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert same(result, ref)


def randn(*shape, seed: int, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator("cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", generator=g).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 8, 16])
def test_gemv_ops_match_their_references(dtype, rows):
    torch.set_float32_matmul_precision("highest")
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    x, nw = randn(rows, 768, seed=1, dtype=dtype), randn(768, seed=2, dtype=dtype)
    w, w2 = randn(2048, 768, seed=3, dtype=dtype) / 20, randn(2048, 768, seed=4, dtype=dtype) / 20
    b = randn(2048, seed=5, dtype=dtype)
    norm = (nw, 1e-5)
    ref = torch.nn.functional.linear(llama_ops.rms_ref(x, norm), w, b)
    torch.testing.assert_close(llama_ops.norm_linear(x, norm, w, b), ref, **tol)
    g_ref = torch.nn.functional.silu(ref) * torch.nn.functional.linear(
        llama_ops.rms_ref(x, norm), w2, None)
    torch.testing.assert_close(llama_ops.norm_glu(x, norm, w, w2, b, None), g_ref, **tol)
    res = randn(rows, 2048, seed=6, dtype=dtype)
    want = res + torch.nn.functional.linear(x, w, b)
    llama_ops.linear_residual(x, w, b, res)
    torch.testing.assert_close(res, want, **tol)


@pytest.mark.parametrize("pos", [0, 1, 63, 64, 99])
def test_rope_attention_matches_the_reference_and_writes_the_cache(pos):
    torch.set_float32_matmul_precision("highest")
    b, h, kvh, d, t = 5, 12, 4, 64, 112
    half_c, half_s = randn(t, d // 2, seed=10), randn(t, d // 2, seed=11)
    cos, sin = torch.cat([half_c, half_c], 1), torch.cat([-half_s, half_s], 1)
    qkv, bias = randn(b, (h + 2 * kvh) * d, seed=pos), randn((h + 2 * kvh) * d, seed=500 + pos)
    k, v = randn(b, kvh, t, d, seed=1000 + pos), randn(b, kvh, t, d, seed=2000 + pos)
    k_ref, v_ref = k.clone(), v.clone()
    p = torch.tensor([pos], device="cuda")
    out = llama_ops.rope_attention(qkv, bias, cos, sin, k, v, p, h, kvh, 0.125)
    ref = llama_ops.rope_attention_ref(qkv, bias, cos, sin, k_ref, v_ref, p, h, kvh, 0.125)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    # Slot pos written (the rotation as the reference's, to rounding), every other slot as it was.
    torch.testing.assert_close(k, k_ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(v, v_ref, rtol=0, atol=0)
    others = torch.arange(t, device="cuda") != pos
    assert torch.equal(k[:, :, others], k_ref[:, :, others])


def test_head_partials_pick_torchs_greedy_token():
    x, nw = randn(8, 768, seed=20), randn(768, seed=21)
    head = randn(32000, 768, seed=22) / 20
    pmax, pidx = llama_ops.norm_argmax(x, (nw, 1e-5), head)
    greedy = torch.nn.functional.linear(llama_ops.rms_ref(x, (nw, 1e-5)), head).argmax(-1)
    assert torch.equal(pidx.gather(1, pmax.argmax(1, keepdim=True))[:, 0], greedy)
