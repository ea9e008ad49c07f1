"""The fused Llama-family step's ops: each runs its Triton kernel (harness/llama_kernels.py) on
CUDA and its torch reference elsewhere. The CPU tests run the step's algebra on the references;
the GPU tests (and Triton's interpreter, where Triton is installed) check kernels against them.

Block sizes were measured on the H200 (bf16, the stories110M shape, 100 tokens, fused ms/token at
batch 1 / 8, one process each): K by 128, 4 warps, 4 stages 0.433 / 0.455; K by 64 0.423 / 0.431;
2 warps 0.376 / 0.407; 8 warps 0.409 / 0.421; twice the columns 0.420 / 0.439; K by 256 with 3
stages 0.356 / 0.381, the one kept. A program per 16-64 output columns keeps 48-500 in flight.
"""

import torch
import torch.nn.functional as F

from .decode import advance_tokens
from .llama_kernels import triton
from .triton_ops import use_triton

if triton is not None:
    from .llama_kernels import (
        _advance_kernel,
        _gemv_kernel,
        _rope_attention_kernel,
        _silu_mul_kernel,
        _split_sum_kernel,
        _split_sum_norm_kernel,
    )

GEMV_MAX_BATCH = 16  # rows one GEMV program holds (a tl.dot's least M); more rows: cuBLAS GEMMs
GEMV_BLOCK_K = 256
GEMV_WARPS = 4
GEMV_STAGES = 3
ATTN_BLOCK_T = 64  # cache slots per iteration of the attention's online softmax
SILU_BLOCK = 1024
ADVANCE_CHUNK = 256  # head partials per iteration of the greedy pick
SPLIT_SUM_BLOCK = 1024
SPLIT_NORM_WARPS = 8  # a row of 4096 in one program: 16 values a thread
CUBLAS = "cublas"
# (kind, N, K, itemsize) -> a GEMV's launch (block_n, block_k, warps, stages, split) where it
# differs from gemv_config's rule, or CUBLAS: the fused step calls cuBLAS there instead (with
# torch's RMSNorm before it, silu_mul after gate/up). kind: norm (QKV), glu (gate and up),
# residual (o, down), argmax (the head). Measured on the H200 by scripts/gemv_sweep.py
# (docs/sizes-20261201/probe.log: µs a launch, each layer's weights in turn, in a CUDA graph):
# at Llama-3-8B's shapes in bf16, cuBLAS read the joined QKV at 3.1 TB/s and gate/up at 4.2 TB/s
# where every Triton launch tried was slower (its RMSNorm prologue reads x before the first
# weight tile: a wave's latency); split-K GEMVs ran o in 12.1 µs (cuBLAS 12.5) and down in 31.8
# (cuBLAS 35.9), their second kernel included. Other shapes take the rule.
GEMV_TUNED = {
    ("norm", 6144, 4096, 2): CUBLAS,
    ("glu", 14336, 4096, 2): CUBLAS,
    ("residual", 4096, 4096, 2): (32, 256, 4, 3, 2),
    ("residual", 4096, 14336, 2): (64, 256, 4, 3, 4),
}


def on_cublas(kind: str, w: torch.Tensor) -> bool:
    """Whether the fused step calls cuBLAS for this GEMV (GEMV_TUNED says so)."""
    return GEMV_TUNED.get((kind, *w.shape, w.element_size())) == CUBLAS


def gemv_block_n(n: int, itemsize: int, weights: int = 1) -> int:
    """Output columns per GEMV program: narrow blocks for narrow outputs, so that a 768-wide
    projection still runs on 48 SMs. In fp32 at most 64 (32 for the gated MLP's two weights):
    the pipelined weight tiles of 256 x 128 fp32 values (or twice 256 x 64) need 313 KB of
    shared memory, over the H200's 227 KB (a 151936-word head; 8B's 14336-wide gate and up)."""
    bn = 128 if n >= 65536 else 64 if n >= 8192 else 32 if n >= 4096 else 16
    return min(bn, 64 // weights) if itemsize > 2 else bn


def gemv_config(kind: str, n: int, k: int, itemsize: int) -> tuple:
    """(block_n, block_k, warps, stages, split) of one GEMV: GEMV_TUNED's, else the rule."""
    tuned = GEMV_TUNED.get((kind, n, k, itemsize))
    if tuned is not None and tuned != CUBLAS:
        return tuned
    bn = gemv_block_n(n, itemsize, 2 if kind == "glu" else 1)
    return bn, GEMV_BLOCK_K, GEMV_WARPS, GEMV_STAGES, 1


def rms_ref(x: torch.Tensor, norm: tuple) -> torch.Tensor:
    """HF's RMSNorm: fp32 inside, rounded to the dtype, then times the weight."""
    weight, eps = norm
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def norm_linear(x, norm: tuple, w, bias=None) -> torch.Tensor:
    """x: [B, K] -> rms(x) W^T + bias [B, N] (the QKV projection)."""
    if not use_triton(x):
        return F.linear(rms_ref(x, norm), w, bias)
    out = x.new_empty(x.shape[0], w.shape[0])
    _gemv(x, w, norm=norm, bias=bias, out=out)
    return out


def norm_glu(x, norm: tuple, w_gate, w_up, b_gate=None, b_up=None) -> torch.Tensor:
    """x: [B, K] -> silu(h W_gate^T + b) * (h W_up^T + b) [B, I], h = rms(x): the MLP's first
    half."""
    if not use_triton(x):
        h = rms_ref(x, norm)
        return F.silu(F.linear(h, w_gate, b_gate)) * F.linear(h, w_up, b_up)
    out = x.new_empty(x.shape[0], w_gate.shape[0])
    _gemv(x, w_gate, norm=norm, bias=b_gate, w2=w_up, bias2=b_up, out=out)
    return out


def linear_residual(y, w, bias, x, then_norm: tuple | None = None):
    """x += y W^T + bias, in place (the o and down projections with their residual add).
    then_norm: also returns rms(x) by that norm, the next projection's input (where the GEMV is
    split, its sum's kernel makes it: no norm kernel of its own); else None. The split sum's
    norm rounds as HF's RMSNorm does (weight * (x * rstd) in x's dtype); where the GEMV is not
    split, torch's F.rms_norm rounds once fewer, so in bf16 the two paths' h can differ by an ulp
    in places (at fp32, where the tests compare tokens with kv's, they agree)."""
    if not use_triton(x):
        x.add_(F.linear(y, w, bias))
        return rms_ref(x, then_norm) if then_norm is not None else None
    h = x.new_empty(x.shape) if then_norm is not None else None
    if _gemv(y, w, bias=bias, out=x, residual=True, then_norm=then_norm, h=h):
        return h
    return F.rms_norm(x, x.shape[-1:], *then_norm) if then_norm is not None else None


def norm_argmax(x, norm: tuple, w, bias=None) -> tuple[torch.Tensor, torch.Tensor]:
    """The head without its logits: (row maxima, their columns) [B, blocks], one per GEMV program
    (the references: one block)."""
    if not use_triton(x):
        return F.linear(rms_ref(x, norm), w, bias).max(-1, keepdim=True)
    bn = gemv_config("argmax", w.shape[0], w.shape[1], w.element_size())[0]
    blocks = triton.cdiv(w.shape[0], bn)
    pmax = x.new_empty(x.shape[0], blocks, dtype=torch.float32)
    pidx = x.new_empty(x.shape[0], blocks, dtype=torch.long)
    _gemv(x, w, norm=norm, bias=bias, argmax=(pmax, pidx))
    return pmax, pidx


def _gemv(x, w, norm=None, bias=None, w2=None, bias2=None, out=None, residual=False,
          argmax=None, then_norm=None, h=None) -> bool:
    """Launches the GEMV (and its split sum); returns whether h now holds rms(out) by then_norm."""
    b, k = x.shape
    n = w.shape[0]
    assert b <= GEMV_MAX_BATCH and x.stride(1) == 1 and w.stride(1) == 1
    kind = ("argmax" if argmax is not None else "glu" if w2 is not None
            else "residual" if residual else "norm")
    bn, bk, warps, stages, split = gemv_config(kind, n, k, w.element_size())
    if kind in ("argmax", "glu"):
        split = 1  # their epilogues need the whole sum
    pmax, pidx = argmax if argmax is not None else (x, x)
    out = out if out is not None else x
    nw, eps = norm if norm is not None else (x, 0.0)
    k_slice = triton.cdiv(triton.cdiv(k, split), bk) * bk
    part = x.new_empty(split, b, n, dtype=torch.float32) if split > 1 else x
    _gemv_kernel[(triton.cdiv(n, bn), triton.cdiv(k, k_slice))](
        x, nw, w, w2 if w2 is not None else w, bias if bias is not None else w,
        bias2 if bias2 is not None else w, out, pmax, pidx, part, b, n, k, k_slice, x.stride(0),
        w.stride(0), (w2 if w2 is not None else w).stride(0), out.stride(0), pmax.stride(0), eps,
        NORM=norm is not None, HAS_BIAS=bias is not None, HAS_BIAS2=bias2 is not None,
        GLU=w2 is not None, RESIDUAL=residual,
        ARGMAX=argmax is not None, IEEE=_ieee(x), SPLIT=split, BLOCK_M=16, BLOCK_N=bn,
        BLOCK_K=bk, num_warps=warps, num_stages=stages)
    if split == 1:
        return False
    slices = triton.cdiv(k, k_slice)
    if then_norm is not None and residual:  # the sum and the next norm, one program a row
        tw, teps = then_norm
        _split_sum_norm_kernel[(b,)](
            part, bias if bias is not None else w, out, tw, h, b, n, out.stride(0), h.stride(0),
            teps, SPLIT=slices, HAS_BIAS=bias is not None,
            BLOCK_N=triton.next_power_of_2(n), num_warps=SPLIT_NORM_WARPS)
        return True
    _split_sum_kernel[(triton.cdiv(b * n, SPLIT_SUM_BLOCK),)](
        part, bias if bias is not None else w, out, b * n, n, out.stride(0), SPLIT=slices,
        HAS_BIAS=bias is not None, RESIDUAL=residual, BLOCK=SPLIT_SUM_BLOCK)
    return False


def _ieee(t: torch.Tensor) -> bool:
    """fp32 at "highest": no TF32 in the tensor-core dots (as cuBLAS then uses none)."""
    return t.dtype == torch.float32 and torch.get_float32_matmul_precision() == "highest"


def rope_attention(qkv, bias, cos, sin, k_cache, v_cache, pos, heads: int, kv_heads: int,
                   scale: float) -> torch.Tensor:
    """qkv: [B, (H + 2 KV) D] (bias not yet added, or None), cos/sin: [T, D] (sin's first half
    negated), caches [B, KV, T, D], pos [1] -> [B, H D]. Writes rotated k and v at pos."""
    b = qkv.shape[0]
    d = k_cache.shape[-1]
    if not use_triton(qkv):
        return rope_attention_ref(qkv, bias, cos, sin, k_cache, v_cache, pos, heads, kv_heads,
                                  scale)
    out = qkv.new_empty(b, heads * d)
    assert qkv.stride(1) == 1 and k_cache.stride(3) == 1 and k_cache.stride() == v_cache.stride()
    _rope_attention_kernel[(b, heads)](
        qkv, bias if bias is not None else qkv, cos, sin, k_cache, v_cache, out, pos,
        qkv.stride(0), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), out.stride(0),
        scale, H=heads, KVH=kv_heads, HALF=d // 2, HALF_P=triton.next_power_of_2(d // 2),
        HAS_BIAS=bias is not None, BLOCK_T=ATTN_BLOCK_T)
    return out


def rope_attention_ref(qkv, bias, cos, sin, k_cache, v_cache, pos, heads: int, kv_heads: int,
                       scale: float) -> torch.Tensor:
    b = qkv.shape[0]
    d = k_cache.shape[-1]
    if bias is not None:
        qkv = qkv + bias
    qk = qkv[:, : (heads + kv_heads) * d].view(b, heads + kv_heads, d)
    qk = qk * cos[pos] + qk.roll(d // 2, -1) * sin[pos]  # [B, H + KV, D]
    q, k = qk.split([heads, kv_heads], dim=1)
    v = qkv[:, (heads + kv_heads) * d :].view(b, kv_heads, d)
    k_cache.index_copy_(2, pos, k[:, :, None])
    v_cache.index_copy_(2, pos, v[:, :, None])
    slots = torch.arange(k_cache.shape[2], device=qkv.device)  # [T]
    q = q.reshape(b, kv_heads, heads // kv_heads, d)
    scores = torch.einsum("bkgd,bktd->bkgt", q, k_cache) * scale  # [B, KV, G, T]
    scores = scores.masked_fill(slots > pos, float("-inf"))
    y = torch.einsum("bkgt,bktd->bkgd", scores.softmax(-1), v_cache)
    return y.reshape(b, heads * d)


def silu_mul(gu: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """gu: [B, 2I] (gate, up side by side; bias not yet added, or None) -> silu(gate) * up."""
    if not use_triton(gu):
        if bias is not None:
            gu = gu + bias
        gate, up = gu.chunk(2, dim=-1)
        return F.silu(gate) * up
    assert gu.is_contiguous()
    b, width = gu.shape[0], gu.shape[1] // 2
    out = gu.new_empty(b, width)
    _silu_mul_kernel[(triton.cdiv(b * width, SILU_BLOCK),)](
        gu, bias if bias is not None else gu, out, b * width, width, HAS_BIAS=bias is not None,
        BLOCK=SILU_BLOCK)
    return out


def advance_partials(st: dict, pmax: torch.Tensor, pidx: torch.Tensor,
                     flag: torch.Tensor) -> torch.Tensor:
    """decode.advance_tokens from the head's partials [B, blocks]: the greedy token (the first
    column of the row's maximum), then the bookkeeping; returns the all-finished flag [1] bool
    (on CUDA written into `flag`)."""
    if not use_triton(pmax):
        return advance_tokens(st, pidx.gather(1, pmax.argmax(1, keepdim=True))[:, 0])
    if st["sleep_cycles"]:
        torch.cuda._sleep(st["sleep_cycles"])  # test-only: a slow GPU lets the host run ahead
    b, blocks = pmax.shape
    e = st["eos_ids"].numel()
    _advance_kernel[(1,)](
        pmax, pidx, blocks, pmax.stride(0), st["ids"], st["ids"].stride(0), st["token"],
        st["pos"], st["finished"].view(torch.uint8), st["done"].view(torch.uint8), st["stops"],
        st["eos_ids"], flag.view(torch.uint8), b, e, st["eos"],
        BLOCK_B=max(2, triton.next_power_of_2(b)), CHUNK=ADVANCE_CHUNK,
        BLOCK_E=max(2, triton.next_power_of_2(e)))
    return flag
