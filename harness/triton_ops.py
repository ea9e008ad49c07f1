"""The fused step's three Triton kernels, each beside the plain-torch reference it must match.

attention_decode: one query per (sequence, head) against the KV cache. It adds the QKV GEMM's
    bias, writes this token's K and V into the cache at `pos`, then returns softmax(q·K/√d)·V over
    slots 0..pos: one kernel where the graphed step runs ten (two index copies, two GEMVs, scale,
    mask, clone, softmax...).
bias_layernorm: x += bias in place (the bias of the GEMM that just added into x), then
    LayerNorm(x): one kernel for the residual's bias and the norm.
bias_gelu: g = gelu_tanh(g + bias) in place, after the MLP's first GEMM.
The GEMMs' biases live in these kernels so that every GEMM is a plain cuBLAS mm (or addmm_ into
the residual): given a bias, torch calls cuBLASLt, whose split-K GEMMs here come with a memset
node that costs 4-5 µs of idle GPU in a CUDA graph (docs/RESULTS.md).

All take `pos` as a device tensor, so they replay in a CUDA graph. Where Triton is missing (the
CPU build of torch) or the tensors are not on CUDA, the references run: the CPU tests check the
step's algebra with them; the GPU tests check the kernels against them.
"""

import math

import torch
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU builds of torch come without Triton
    triton = None

BLOCK_T = 64  # cache slots per iteration of the attention kernel's online softmax
GELU_BLOCK = 1024


def use_triton(t: torch.Tensor) -> bool:
    return triton is not None and t.is_cuda


def missing_triton(device_type: str) -> str | None:
    """Why the fused step cannot run its kernels here (None: it can). On CUDA without Triton the
    references would run instead, and the timings would not be the fused step's."""
    if device_type == "cuda" and triton is None:
        return "fused needs Triton on CUDA (PyTorch's CUDA builds bring it): pip install triton"
    return None


def attention_decode(qkv: torch.Tensor, bias: torch.Tensor, k_cache: torch.Tensor,
                     v_cache: torch.Tensor, pos: torch.Tensor, n_head: int,
                     scale: float) -> torch.Tensor:
    """qkv: [B, 3C] (q, k, v side by side, bias not added), bias: [3C], caches: [B, H, T, D],
    pos: [1] -> [B, C]. Writes k and v (bias added) at slot pos of the caches."""
    if not use_triton(qkv):
        return attention_decode_ref(qkv, bias, k_cache, v_cache, pos, n_head, scale)
    b, c3 = qkv.shape
    c = c3 // 3
    out = torch.empty(b, c, dtype=qkv.dtype, device=qkv.device)
    assert qkv.stride(1) == 1 and k_cache.stride(3) == 1 and k_cache.stride() == v_cache.stride()
    _attention_kernel[(b, n_head)](
        qkv, bias, k_cache, v_cache, out, pos, qkv.stride(0), k_cache.stride(0),
        k_cache.stride(1), k_cache.stride(2), out.stride(0), scale, C=c, D=c // n_head,
        BLOCK_T=BLOCK_T)
    return out


def attention_decode_ref(qkv, bias, k_cache, v_cache, pos, n_head: int,
                         scale: float) -> torch.Tensor:
    b, c3 = qkv.shape
    d = c3 // 3 // n_head
    q, k, v = (qkv + bias).view(b, 3, n_head, d).unbind(1)  # each [B, H, D]
    k_cache.index_copy_(2, pos, k[:, :, None])
    v_cache.index_copy_(2, pos, v[:, :, None])
    slots = torch.arange(k_cache.shape[2], device=qkv.device)  # [T]
    scores = torch.einsum("bhd,bhtd->bht", q, k_cache) * scale  # [B, H, T]
    scores = scores.masked_fill(slots > pos, float("-inf"))
    return torch.einsum("bht,bhtd->bhd", scores.softmax(-1), v_cache).reshape(b, n_head * d)


def bias_layernorm(x: torch.Tensor, bias: torch.Tensor | None,
                   ln: torch.nn.LayerNorm) -> torch.Tensor:
    """x: [B, C]; x += bias (in place, when given), then returns ln(x) [B, C]."""
    if not use_triton(x):
        return bias_layernorm_ref(x, bias, ln)
    b, c = x.shape
    out = torch.empty_like(x)
    assert x.stride(1) == 1 and out.stride(1) == 1
    _bias_ln_kernel[(b,)](
        x, bias if bias is not None else x, ln.weight, ln.bias, out, x.stride(0), out.stride(0),
        c, ln.eps, HAS_BIAS=bias is not None, BLOCK_C=triton.next_power_of_2(c))
    return out


def bias_layernorm_ref(x, bias, ln) -> torch.Tensor:
    if bias is not None:
        x.add_(bias)
    return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)


def bias_gelu(g: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """g: [B, N] <- gelu_tanh(g + bias), in place; returns g."""
    if not use_triton(g):
        return bias_gelu_ref(g, bias)
    assert g.is_contiguous()
    n = g.numel()
    _bias_gelu_kernel[(triton.cdiv(n, GELU_BLOCK),)](g, bias, n, bias.numel(), BLOCK=GELU_BLOCK)
    return g


def bias_gelu_ref(g, bias) -> torch.Tensor:
    return g.copy_(F.gelu(g + bias, approximate="tanh"))


def head_scale(attn) -> float:
    """HF GPT-2's score scale: 1/sqrt(head_dim) (scale_attn_weights), as its modules store it."""
    return float(getattr(attn, "scaling", 1.0 / math.sqrt(attn.head_dim)))


if triton is not None:

    @triton.jit
    def _attention_kernel(qkv_ptr, bias_ptr, k_ptr, v_ptr, out_ptr, pos_ptr, s_qkv, s_b, s_h,
                          s_t, s_out, scale, C: tl.constexpr, D: tl.constexpr,
                          BLOCK_T: tl.constexpr):
        b = tl.program_id(0)
        h = tl.program_id(1)
        pos = tl.load(pos_ptr)
        d = tl.arange(0, D)
        row = qkv_ptr + b * s_qkv + h * D + d
        col = bias_ptr + h * D + d
        q = (tl.load(row) + tl.load(col)).to(tl.float32) * scale
        k_new = tl.load(row + C) + tl.load(col + C)
        v_new = tl.load(row + 2 * C) + tl.load(col + 2 * C)
        base = b * s_b + h * s_h
        tl.store(k_ptr + base + pos * s_t + d, k_new)
        tl.store(v_ptr + base + pos * s_t + d, v_new)
        k_new = k_new.to(tl.float32)
        v_new = v_new.to(tl.float32)
        m = tl.full([], float("-inf"), tl.float32)  # running max of the scores
        total = tl.full([], 0.0, tl.float32)  # running sum of exp(score - m)
        acc = tl.zeros([D], dtype=tl.float32)  # running sum of exp(score - m) * v
        for t0 in range(0, pos + 1, BLOCK_T):
            t = t0 + tl.arange(0, BLOCK_T)
            # Slots before pos come from the cache; pos itself from registers (this program's
            # own store above need not be visible to its other threads yet).
            older = (t < pos)[:, None]
            offs = base + t[:, None] * s_t + d[None, :]
            is_new = (t == pos)[:, None]
            k = tl.where(is_new, k_new[None, :], tl.load(k_ptr + offs, mask=older, other=0.0))
            v = tl.where(is_new, v_new[None, :], tl.load(v_ptr + offs, mask=older, other=0.0))
            s = tl.sum(k.to(tl.float32) * q[None, :], axis=1)  # [BLOCK_T]
            s = tl.where(t <= pos, s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=0))
            p = tl.exp(s - m_new)
            keep = tl.exp(m - m_new)
            total = total * keep + tl.sum(p, axis=0)
            acc = acc * keep + tl.sum(p[:, None] * v.to(tl.float32), axis=0)
            m = m_new
        tl.store(out_ptr + b * s_out + h * D + d, (acc / total).to(out_ptr.dtype.element_ty))

    @triton.jit
    def _bias_ln_kernel(x_ptr, bias_ptr, w_ptr, b_ptr, out_ptr, s_x, s_out, C, eps,
                        HAS_BIAS: tl.constexpr, BLOCK_C: tl.constexpr):
        row = tl.program_id(0)
        c = tl.arange(0, BLOCK_C)
        inside = c < C
        x = tl.load(x_ptr + row * s_x + c, mask=inside, other=0.0)
        if HAS_BIAS:
            x = x + tl.load(bias_ptr + c, mask=inside, other=0.0)
            tl.store(x_ptr + row * s_x + c, x, mask=inside)
        x = x.to(tl.float32)
        mean = tl.sum(x, axis=0) / C
        xc = tl.where(inside, x - mean, 0.0)
        var = tl.sum(xc * xc, axis=0) / C
        w = tl.load(w_ptr + c, mask=inside, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + c, mask=inside, other=0.0).to(tl.float32)
        y = xc * (1.0 / tl.sqrt(var + eps)) * w + b
        tl.store(out_ptr + row * s_out + c, y.to(out_ptr.dtype.element_ty), mask=inside)

    @triton.jit
    def _bias_gelu_kernel(g_ptr, bias_ptr, n, width, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = i < n
        g = tl.load(g_ptr + i, mask=inside, other=0.0)
        x = (g + tl.load(bias_ptr + i % width, mask=inside, other=0.0)).to(tl.float32)
        u = 0.7978845608028654 * (x + 0.044715 * x * x * x)  # sqrt(2/pi) (x + 0.044715 x^3)
        tanh_u = 1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)
        tl.store(g_ptr + i, (0.5 * x * (1.0 + tanh_u)).to(g_ptr.dtype.element_ty), mask=inside)
