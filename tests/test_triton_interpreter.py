"""The Triton kernels of the fused step, run by Triton's CPU interpreter against their references.

Skipped where Triton is not installed (CPU builds of torch come without it); the GPU tests
(test_gpu_triton_ops.py) check the compiled kernels. The interpreter must be switched on before
Triton is imported, so the checks run in a fresh interpreter.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CHECK = r"""
import torch
from harness import triton_ops as T

torch.manual_seed(0)
b, h, d, slots = 3, 2, 16, 150
c = h * d
for pos in (0, 5, 63, 64, 100, 149):
    qkv, bias = torch.randn(b, 3 * c), torch.randn(3 * c)
    k, v = torch.randn(b, h, slots, d), torch.randn(b, h, slots, d)
    k_ref, v_ref = k.clone(), v.clone()
    p = torch.tensor([pos])
    ref = T.attention_decode_ref(qkv, bias, k_ref, v_ref, p, h, 0.25)
    out = torch.empty(b, c)
    T._attention_kernel[(b, h)](qkv, bias, k, v, out, p, qkv.stride(0), k.stride(0), k.stride(1),
                                k.stride(2), out.stride(0), 0.25, C=c, D=d, BLOCK_T=T.BLOCK_T)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert torch.equal(k, k_ref) and torch.equal(v, v_ref), pos
ln = torch.nn.LayerNorm(48).requires_grad_(False)
ln.weight.normal_()
ln.bias.normal_()
x, bias = torch.randn(4, 48), torch.randn(48)
x_ref = x.clone()
ref = T.bias_layernorm_ref(x_ref, bias, ln)
out = torch.empty_like(x)
T._bias_ln_kernel[(4,)](x, bias, ln.weight, ln.bias, out, x.stride(0), out.stride(0), 48, ln.eps,
                        HAS_BIAS=True, BLOCK_C=64)
torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
assert torch.equal(x, x_ref)
g, bias = torch.randn(3, 100) * 4, torch.randn(100)
ref = T.bias_gelu_ref(g.clone(), bias)
T._bias_gelu_kernel[(1,)](g, bias, g.numel(), 100, BLOCK=512)
torch.testing.assert_close(g, ref, rtol=1e-5, atol=1e-6)
print("ok")
"""


@pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                    reason="needs Triton (CPU builds of torch come without it)")
def test_triton_kernels_match_their_references_in_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "ok"
