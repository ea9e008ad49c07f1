"""The fused Llama-family step (llama, qwen2, mistral): HF's weights, 5 kernels a layer, in one
CUDA graph with `graphed`'s loop.

Up to GEMV_MAX_BATCH (16) rows, per layer (x is the residual stream, updated in place):
    qkv = norm_linear(x)       RMSNorm in the GEMV's prologue, q/k/v bias in its epilogue  (Triton)
    y = rope_attention(qkv)    rotary on q and k, K/V written at pos, GQA, online softmax  (Triton)
    x += y W_o^T               a GEMV with the residual add in its epilogue                (Triton)
    g = norm_glu(x)            RMSNorm, gate and up GEMVs side by side, silu(gate) * up    (Triton)
    x += g W_down^T                                                                        (Triton)
then the head, whose GEMV keeps only each program's row maxima and their columns (no logits
written), and one kernel that picks the greedy token from them and does the step's bookkeeping.
With the embedding that is 5 L + 3 kernels a step, none of them a split-K reduction or a memset.
The GEMVs read the model's own weights; only `graphed`'s joined QKV copy is used (one GEMV).
Where llama_ops.GEMV_TUNED sends a projection to cuBLAS (at Llama-3-8B's width: QKV and gate/up,
which cuBLAS reads faster) and gives a split-K launch (8B's o and down: a second kernel adds the
slices), the norm between them is folded into that sum: the kernel that adds the slices
and the residual makes the RMSNorm of the new x, which the next cuBLAS GEMM reads. At 8B a layer
is QKV (cuBLAS), attention, o and its sum with the norm, gate/up (cuBLAS), silu(gate) * up, down
and its sum with the next norm: 8 kernels (10 with a norm kernel of their own). Measured on the
H200 (docs/sizes-20261202/fold-glu.log, torch.profiler at batch 1): torch's RMSNorm kernel took
6.2 µs, the split sum 1.7 and the sum with the norm 2.9. Also tried there, and dropped:
silu(gate) * up made in the down GEMV's prologue (no silu kernel) made the step 7.08 ms a token
against 4.87 without the folds.

More rows: cuBLAS GEMMs (joined QKV, joined gate/up) between the same attention kernel, a Triton
silu(gate) * up and torch's one-kernel RMSNorm: 8 kernels a layer.
"""

import torch
import torch.nn.functional as F

from .config import ConfigError
from .llama_ops import (
    GEMV_MAX_BATCH,
    advance_partials,
    linear_residual,
    norm_argmax,
    norm_glu,
    norm_linear,
    on_cublas,
    rope_attention,
    silu_mul,
)
from .llama_step import check_llama, new_llama_cache


def check_fused(model, new_tokens: int, branches: int) -> None:
    check_llama(model, new_tokens)
    act = getattr(model.config, "hidden_act", "silu")
    if act != "silu":
        raise ConfigError(f"fused computes the gated MLP with silu, not the config's {act!r}")
    if branches != 1:
        raise ConfigError("fused runs the Llama family in one branch: --branches 1 "
                          "(micro-batches are GPT-2's)")


def new_fused_llama(model, batch: int, max_len: int, gemv: bool | None = None) -> dict:
    """The step's cache and weights; `gemv` (default: batch <= GEMV_MAX_BATCH) picks the path."""
    kv = new_llama_cache(model, batch, max_len)
    kv["gemv"] = batch <= GEMV_MAX_BATCH if gemv is None else gemv
    kv["flag"] = torch.zeros(1, dtype=torch.bool, device=kv["k"].device)
    return kv


def fused_llama_step(model, kv: dict, st: dict) -> torch.Tensor:
    """One decode step; returns the all-finished flag [1] bool."""
    m = model.model
    pos = st["pos"]
    x = m.embed_tokens(st["token"][:, 0])  # [B, C]: the residual stream, updated in place
    h = None  # rms(x) by the norm ahead, where the last kernel made it (a split GEMV's sum)
    for layer, block in enumerate(m.layers):
        attn, mlp = block.self_attn, block.mlp
        w_qkv, b_qkv = kv["qkv"][layer]
        if _triton(kv, "norm", w_qkv):
            qkv, b_qkv = norm_linear(x, _norm(block.input_layernorm), w_qkv, b_qkv), None
        else:
            qkv = _normed(h, block.input_layernorm, x) @ w_qkv.t()  # bias: in the attention
        y = rope_attention(qkv, b_qkv, kv["cos"], kv["sin"], kv["k"][layer], kv["v"][layer], pos,
                           kv["heads"], kv["kv_heads"], attn.scaling)  # [B, H D]
        glu_triton = _triton(kv, "glu", mlp.gate_proj.weight)
        h = _residual(kv, y, attn.o_proj, x,
                      None if glu_triton else block.post_attention_layernorm)
        if glu_triton:
            g = norm_glu(x, _norm(block.post_attention_layernorm), mlp.gate_proj.weight,
                         mlp.up_proj.weight, mlp.gate_proj.bias, mlp.up_proj.bias)
            h = _residual(kv, g, mlp.down_proj, x, _norm_ahead(model, kv, layer))
        else:
            w_gu, b_gu = kv["gate_up"][layer]
            g = silu_mul(_normed(h, block.post_attention_layernorm, x) @ w_gu.t(), b_gu)
            h = _residual(kv, g, mlp.down_proj, x, _norm_ahead(model, kv, layer))
    head = model.lm_head
    if _triton(kv, "argmax", head.weight):
        pmax, pidx = norm_argmax(x, _norm(m.norm), head.weight, head.bias)
    else:
        pmax, pidx = F.linear(_normed(h, m.norm, x), head.weight, head.bias).max(-1, keepdim=True)
    return advance_partials(st, pmax, pidx, kv["flag"])


def _triton(kv: dict, kind: str, w: torch.Tensor) -> bool:
    """The GEMV path's Triton kernel for this projection, unless GEMV_TUNED sends it to cuBLAS."""
    return kv["gemv"] and not on_cublas(kind, w)


def _norm(norm) -> tuple:
    return norm.weight, norm.variance_epsilon


def _norm_ahead(model, kv: dict, layer: int):
    """The norm in front of the projection after this layer's MLP where that projection runs on
    cuBLAS (the next layer's QKV, or the head): the down GEMV's sum can make its input."""
    m = model.model
    if layer + 1 < len(m.layers):
        nxt = m.layers[layer + 1]
        return None if _triton(kv, "norm", kv["qkv"][layer + 1][0]) else nxt.input_layernorm
    return None if _triton(kv, "argmax", model.lm_head.weight) else m.norm


def _rms(norm, x: torch.Tensor) -> torch.Tensor:
    return F.rms_norm(x, x.shape[-1:], norm.weight, norm.variance_epsilon)


def _normed(h, norm, x: torch.Tensor) -> torch.Tensor:
    """rms(x) by `norm`: h where the last kernel made it, else torch's one-kernel RMSNorm."""
    return h if h is not None else _rms(norm, x)


def _residual(kv: dict, y: torch.Tensor, proj, x: torch.Tensor, then=None):
    """x += proj(y), then rms(x) by the norm `then` (None: no norm); returns it, or None.
    A Triton GEMV (split: its sum's kernel makes the norm), or cuBLAS's GEMM with the add as its
    beta=1 (no bias: torch would send a GEMM with one to cuBLASLt, whose split-K memsets cost µs
    in a graph) and torch's RMSNorm."""
    if _triton(kv, "residual", proj.weight):
        return linear_residual(y, proj.weight, proj.bias, x,
                               then_norm=_norm(then) if then is not None else None)
    x.addmm_(y, proj.weight.t())
    if proj.bias is not None:
        x.add_(proj.bias)
    return _rms(then, x) if then is not None else None
