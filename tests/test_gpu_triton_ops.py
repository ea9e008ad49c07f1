"""On the GPU: the fused step's Triton kernels against their torch references, at "highest"."""

import pytest
import torch

from harness import triton_ops

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def highest():
    if triton_ops.triton is None:
        pytest.skip("needs Triton (it comes with PyTorch's CUDA builds)")
    torch.set_float32_matmul_precision("highest")


@pytest.mark.parametrize("pos", [0, 1, 63, 64, 65, 199])
def test_attention_matches_the_reference_and_writes_the_cache(pos):
    g = torch.Generator(device="cuda").manual_seed(pos)
    b, h, d, t = 5, 12, 64, 200
    qkv = torch.randn(b, 3 * h * d, device="cuda", generator=g)
    k = torch.randn(b, h, t, d, device="cuda", generator=g)
    v = torch.randn(b, h, t, d, device="cuda", generator=g)
    k_ref, v_ref = k.clone(), v.clone()
    p = torch.tensor([pos], device="cuda")
    out = triton_ops.attention_decode(qkv, k, v, p, h, 0.125)
    ref = triton_ops.attention_decode_ref(qkv, k_ref, v_ref, p, h, 0.125)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert torch.equal(k, k_ref) and torch.equal(v, v_ref)  # slot pos written, nothing else


@pytest.mark.parametrize("with_bias", [True, False])
def test_bias_layernorm_matches_the_reference(with_bias):
    g = torch.Generator(device="cuda").manual_seed(1)
    ln = torch.nn.LayerNorm(768, device="cuda")
    ln.weight.data.normal_(generator=g)
    ln.bias.data.normal_(generator=g)
    x = torch.randn(32, 768, device="cuda", generator=g)
    bias = torch.randn(768, device="cuda", generator=g) if with_bias else None
    x_ref = x.clone()
    with torch.no_grad():
        out = triton_ops.bias_layernorm(x, bias, ln)
        ref = triton_ops.bias_layernorm_ref(x_ref, bias, ln)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert torch.equal(x, x_ref)  # the bias added in place, exactly as x.add_(bias)
