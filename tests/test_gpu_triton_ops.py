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


def randn(*shape, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))


@pytest.mark.parametrize("pos", [0, 1, 63, 64, 65, 199])
def test_attention_matches_the_reference_and_writes_the_cache(pos):
    b, h, d, t = 5, 12, 64, 200
    qkv, bias = randn(b, 3 * h * d, seed=pos), randn(3 * h * d, seed=1000 + pos)
    k, v = randn(b, h, t, d, seed=2000 + pos), randn(b, h, t, d, seed=3000 + pos)
    k_ref, v_ref = k.clone(), v.clone()
    p = torch.tensor([pos], device="cuda")
    out = triton_ops.attention_decode(qkv, bias, k, v, p, h, 0.125)
    ref = triton_ops.attention_decode_ref(qkv, bias, k_ref, v_ref, p, h, 0.125)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert torch.equal(k, k_ref) and torch.equal(v, v_ref)  # slot pos written, nothing else


@pytest.mark.parametrize("with_bias", [True, False])
def test_bias_layernorm_matches_the_reference(with_bias):
    ln = torch.nn.LayerNorm(768, device="cuda").requires_grad_(False)
    ln.weight.copy_(randn(768, seed=1))
    ln.bias.copy_(randn(768, seed=2))
    x = randn(32, 768, seed=3)
    bias = randn(768, seed=4) if with_bias else None
    x_ref = x.clone()
    out = triton_ops.bias_layernorm(x, bias, ln)
    ref = triton_ops.bias_layernorm_ref(x_ref, bias, ln)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert torch.equal(x, x_ref)  # the bias added in place, exactly as x.add_(bias)


def test_bias_gelu_matches_the_reference():
    g, bias = randn(32, 3072, seed=5) * 4, randn(3072, seed=6)
    ref = triton_ops.bias_gelu_ref(g.clone(), bias)
    torch.testing.assert_close(triton_ops.bias_gelu(g, bias), ref, rtol=1e-5, atol=1e-6)
