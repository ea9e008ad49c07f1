"""The Triton kernels of the fused steps (GPT-2's, the Llama family's), run by Triton's CPU
interpreter against their references.

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


# harness/llama_ops.py's wrappers launch the kernels where use_triton() says so: here, on CPU
# tensors, under the interpreter. fp32 at "highest" (IEEE dots); the tables as rope_tables makes
# them (cos halves equal, sin's first half negated).
LLAMA_CHECK = r"""
import torch
from harness import llama_ops as O
from harness.decode import new_state

def both(fn, *args):
    O.use_triton = lambda t: False
    ref = fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    O.use_triton = lambda t: True
    return fn(*args), ref

torch.manual_seed(0)
torch.set_float32_matmul_precision("highest")
for b in (1, 3):
    c, n = 40, 70
    x, w, w2, nw = torch.randn(b, c), torch.randn(n, c), torch.randn(n, c), torch.randn(c)
    bias, bias2, norm = torch.randn(n), torch.randn(n), (nw, 1e-5)
    torch.testing.assert_close(*both(O.norm_linear, x, norm, w, bias), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(*both(O.norm_linear, x, norm, w, None), rtol=1e-5, atol=1e-5)
    for b2 in (bias2, None):  # the up projection's bias apart from the gate's
        torch.testing.assert_close(*both(O.norm_glu, x, norm, w, w2, bias, b2), rtol=1e-5,
                                   atol=1e-5)
    res, y = torch.randn(b, n), torch.randn(b, c)
    res_ref = res.clone()
    O.use_triton = lambda t: False
    O.linear_residual(y, w, bias, res_ref)
    O.use_triton = lambda t: True
    O.linear_residual(y, w, bias, res)
    torch.testing.assert_close(res, res_ref, rtol=1e-5, atol=1e-5)
    head = torch.randn(1000, c)
    pmax, pidx = O.norm_argmax(x, norm, head)
    assert pmax.shape == (b, 63)  # 1000 columns, 16 a program
    greedy = torch.nn.functional.linear(O.rms_ref(x, norm), head).argmax(-1)
    assert torch.equal(pidx.gather(1, pmax.argmax(1, keepdim=True))[:, 0], greedy)
# Split-K (GEMV_TUNED): the K loop in 3 slices of 16, their fp32 sums added with the bias (and
# the residual) by a second kernel.
O.GEMV_TUNED.update({("norm", 70, 40, 4): (16, 16, 4, 2, 3), ("residual", 70, 40, 4):
                     (32, 16, 4, 2, 3)})
for b in (1, 3):
    x, w, bias, norm = torch.randn(b, 40), torch.randn(70, 40), torch.randn(70), (nw, 1e-5)
    torch.testing.assert_close(*both(O.norm_linear, x, norm, w, bias), rtol=1e-5, atol=1e-5)
    res, y = torch.randn(b, 70), torch.randn(b, 40)
    res_ref = res.clone()
    O.use_triton = lambda t: False
    O.linear_residual(y, w, bias, res_ref)
    O.use_triton = lambda t: True
    O.linear_residual(y, w, bias, res)
    torch.testing.assert_close(res, res_ref, rtol=1e-5, atol=1e-5)
# The fold at 8B's mix: the residual's sum making the next norm (in the split sum's kernel, one
# program a row; unsplit, torch's RMSNorm after the GEMV), against the references.
nw2 = torch.randn(70)
for split in (True, False):
    if not split:
        O.GEMV_TUNED.clear()
    for b in (1, 3):
        w, bias = torch.randn(70, 40), torch.randn(70)
        for then in (None, (nw2, 1e-5)):
            res, y = torch.randn(b, 70), torch.randn(b, 40) * 2
            res_ref = res.clone()
            O.use_triton = lambda t: False
            h_ref = O.linear_residual(y, w, bias, res_ref, then_norm=then)
            O.use_triton = lambda t: True
            h = O.linear_residual(y, w, bias, res, then_norm=then)
            torch.testing.assert_close(res, res_ref, rtol=1e-5, atol=1e-5)
            assert (h is None) == (then is None), split
            if then is not None:
                torch.testing.assert_close(h, h_ref, rtol=1e-5, atol=1e-5)
                torch.testing.assert_close(h, O.rms_ref(res, then), rtol=1e-5, atol=1e-5)
for h, kvh, d in ((6, 2, 16), (4, 4, 24)):  # GQA; a head dim whose half is no power of two
    slots = 150
    half_c, half_s = torch.randn(slots, d // 2), torch.randn(slots, d // 2)
    cos, sin = torch.cat([half_c, half_c], 1), torch.cat([-half_s, half_s], 1)
    for pos in (0, 5, 63, 64, 149):
        for qb in (None, torch.randn((h + 2 * kvh) * d)):
            qkv = torch.randn(3, (h + 2 * kvh) * d)
            kc, vc = torch.randn(3, kvh, slots, d), torch.randn(3, kvh, slots, d)
            kr, vr = kc.clone(), vc.clone()
            p = torch.tensor([pos])
            O.use_triton = lambda t: False
            ref = O.rope_attention(qkv, qb, cos, sin, kr, vr, p, h, kvh, 0.25)
            O.use_triton = lambda t: True
            out = O.rope_attention(qkv, qb, cos, sin, kc, vc, p, h, kvh, 0.25)
            torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
            assert torch.equal(kc, kr) and torch.equal(vc, vr), (d, pos)  # slot pos, exactly
gu, gb = torch.randn(3, 100) * 3, torch.randn(100)
torch.testing.assert_close(*both(O.silu_mul, gu, gb), rtol=1e-5, atol=1e-6)
# The greedy pick and the bookkeeping: 5 rows, a stop schedule, EOS ids 2 and 3, a tie across
# blocks (the first wins), a row that picks EOS id 3 itself; three steps.
pm, pi = torch.randn(5, 300), torch.randint(4, 5000, (5, 300))
pm[2, 7] = pm[2, 250] = 99.0
pi[4, pm[4].argmax()] = 3
states = [new_state(5, 6, torch.tensor([1, 3, 6, 9, 2]), "cpu", 0, 1, (2, 3)) for _ in range(2)]
flag = torch.zeros(1, dtype=torch.bool)
for step in range(3):
    O.use_triton = lambda t: False
    ref_flag = O.advance_partials(states[0], pm, pi, None)
    O.use_triton = lambda t: True
    O.advance_partials(states[1], pm, pi, flag)
    for key in ("ids", "token", "pos", "finished", "done"):
        assert torch.equal(states[0][key], states[1][key]), (step, key)
    assert bool(flag) == bool(ref_flag)
assert states[1]["ids"][:, 1].tolist()[2] == pi[2, 7] and states[1]["finished"][4]
print("ok")
"""

# harness/mega_kernel.py's whole step, one program (the interpreter runs programs one after
# another: with one, every wait is already met), against the schedule played with torch's ops
# (llama_mega.mega_llama_step on CPU tensors), fp32 at "highest": llama:tiny at one row (the FMA
# GEMVs) and two (tl.dot), a qwen2 of 1024 tokens (its q, k and v biases, tied head) at one row,
# three steps each; then llama:tiny at one row in tiles of 16 (o and down in several: the residual
# stored by more than one task) for 66 steps (positions past BLOCK_T's 64: the attention's second
# block of slots and its online softmax). Each step the ids, token and position equal; no wait
# marked an error.
MEGA_CHECK = r"""
from dataclasses import replace
import torch
from transformers import AutoModelForCausalLM, Qwen2Config
from harness import llama_mega as M
from harness.config import RunConfig, validate
from harness.decode import new_state
from harness.model import PRESETS, build_model, special_tokens
from harness.stops import stop_steps

torch.set_float32_matmul_precision("highest")
torch.manual_seed(0)
qwen = AutoModelForCausalLM.from_config(Qwen2Config(**{
    **PRESETS["qwen2", "tiny"], "vocab_size": 1024, "bos_token_id": 1, "eos_token_id": 2}))
for p in qwen.parameters():
    torch.nn.init.normal_(p, std=0.2)
llama = build_model("llama:tiny", "fp32", "cpu", seed=0)
narrow = {kind: 16 for kind in (1, 3, 4, 5, 6)}  # mega_schedule's QKV, O, GLU, DOWN, HEAD
cases = [(llama, "llama:tiny", 1, 3, None), (llama, "llama:tiny", 2, 3, None),
         (qwen.eval().requires_grad_(False), "qwen2:tiny", 1, 3, None),
         (llama, "llama:tiny", 1, 66, narrow)]
for model, name, batch, steps, tiles in cases:
    bos, eos = special_tokens(model.config)
    cfg = replace(validate(RunConfig(variant="kv", model=name, batch=batch, new_tokens=steps,
                                     device="cpu", matmul_precision="highest")), variant="mega")
    sts = [new_state(batch, steps, stop_steps("none", batch, steps, 0), "cpu", 0, bos, eos)
           for _ in range(2)]
    kvs = [M.mega_eager(model, cfg, st, programs=1, tiles=tiles)[1] for st in sts]
    assert (kvs[1]["sched"].tiles[3] == 16) == bool(tiles), kvs[1]["sched"].tiles
    for step in range(steps):
        M.mega_llama_step(model, kvs[0], sts[0])
        M._launch(model, kvs[1], sts[1])
        for key in ("ids", "token", "pos"):
            assert torch.equal(sts[0][key], sts[1][key]), (name, batch, step, key)
    assert int(kvs[1]["err"][0]) == 0
    assert len(set(sts[1]["ids"][0, 1:4].tolist())) > 1, name
print("ok")
"""


def interpret(check: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", check], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


NO_TRITON = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                               reason="needs Triton (CPU builds of torch come without it)")


@NO_TRITON
def test_triton_kernels_match_their_references_in_the_interpreter():
    proc = interpret(CHECK)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "ok"


@NO_TRITON
def test_llama_kernels_match_their_references_in_the_interpreter():
    proc = interpret(LLAMA_CHECK)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "ok"


@NO_TRITON
def test_mega_kernel_matches_the_schedules_playback_in_the_interpreter():
    proc = interpret(MEGA_CHECK)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "ok"
