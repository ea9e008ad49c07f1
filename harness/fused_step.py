"""The fused GPT-2 step: HF's weights, 8 ops a layer instead of ~23, in one CUDA graph.

Per layer (B rows, C wide; x is the residual stream, updated in place):
    h = bias_layernorm(x, pending, ln_1)     x += the last GEMM's bias; LayerNorm       (Triton)
    qkv = h @ W_attn                         [B, 3C], no bias: a plain cuBLAS mm
    y = attention_decode(qkv, b_attn, ...)   + bias; K/V written at pos; softmax(qK)V (Triton)
    x.addmm_(y, W_o)                         x += y W_o: the residual add is the GEMM's beta=1
    h = bias_layernorm(x, b_o, ln_2)
    g = bias_gelu(h @ W_fc, b_fc)                                                      (Triton)
    x.addmm_(g, W_proj); pending = b_proj
cuBLAS may add a split-K reduction kernel to a GEMM. The graphed step runs ~23 kernels a layer;
inside a CUDA graph each kernel boundary costs about 0.4 µs of idle GPU, and 4-5 µs around the
memset of a cuBLASLt split-K GEMM, which torch calls for a GEMM with a bias: here none has one.

Micro-batches (`branches`, default 1): the batch is cut into equal parts, each run on its own
CUDA stream (in the graph: parallel branches), so that one branch's kernel boundaries are covered
by the other's kernels. The GPU gets busier, but each branch reads all the weights again: on the
H200 two branches were slower than one (docs/RESULTS.md).
"""

from contextlib import nullcontext

import torch

from .decode import advance_tokens
from .triton_ops import attention_decode, bias_gelu, bias_layernorm, head_scale


def new_fused_cache(model, batch: int, max_len: int) -> dict:
    """K and V as [L, B, H, T, D] zeros: a micro-batch's cache is a slice along B."""
    c = model.config
    p = next(model.parameters())
    shape = (c.n_layer, batch, c.n_head, max_len, c.n_embd // c.n_head)
    return {"k": torch.zeros(shape, dtype=p.dtype, device=p.device),
            "v": torch.zeros(shape, dtype=p.dtype, device=p.device)}


def split(batch: int, branches: int) -> list[tuple[int, int]]:
    """[0, batch) cut into `branches` contiguous parts, as equal as can be."""
    edges = [batch * j // branches for j in range(branches + 1)]
    return list(zip(edges[:-1], edges[1:], strict=True))


def fused_logits(model, kv: dict, token: torch.Tensor, pos: torch.Tensor,
                 rows: tuple[int, int]) -> torch.Tensor:
    """token: [b, 1] (the micro-batch's rows of the batch), pos: [1] -> logits [b, V]."""
    tr = model.transformer
    b0, b1 = rows
    x = tr.wte(token[:, 0]) + tr.wpe(pos)  # [b, C]: the residual stream, updated in place
    pending = None  # bias of the last GEMM that added into x, not added yet
    for layer, block in enumerate(tr.h):
        attn, mlp = block.attn, block.mlp
        h = bias_layernorm(x, pending, block.ln_1)
        qkv = h @ _in_out(attn.c_attn)  # [b, 3C]
        y = attention_decode(qkv, attn.c_attn.bias, kv["k"][layer, b0:b1], kv["v"][layer, b0:b1],
                             pos, attn.num_heads, head_scale(attn))  # [b, C]
        x.addmm_(y, _in_out(attn.c_proj))
        h = bias_layernorm(x, attn.c_proj.bias, block.ln_2)
        g = bias_gelu(h @ _in_out(mlp.c_fc), mlp.c_fc.bias)  # [b, 4C]
        x.addmm_(g, _in_out(mlp.c_proj))
        pending = mlp.c_proj.bias
    return model.lm_head(bias_layernorm(x, pending, tr.ln_f))  # [b, V]


def _in_out(module) -> torch.Tensor:
    """The weight as [in, out]: HF GPT-2's Conv1D stores it so; a Linear stores [out, in]."""
    return module.weight.t() if isinstance(module, torch.nn.Linear) else module.weight


def fused_step(model, kv: dict, st: dict, parts: list[tuple[int, int]], streams: list,
               nxt: torch.Tensor) -> torch.Tensor:
    """One decode step over all micro-batches; returns the all-finished flag [1].

    Each part runs on its stream (None: the current one, in order), then the streams join and
    the bookkeeping (stop schedule, flag) runs once for the whole batch. nxt: [B] long scratch.
    """
    main = torch.cuda.current_stream() if streams[0] is not None else None
    for s in streams:
        if s is not None:
            s.wait_stream(main)
    for rows, s in zip(parts, streams, strict=True):
        with torch.cuda.stream(s) if s is not None else nullcontext():
            logits = fused_logits(model, kv, st["token"][rows[0]:rows[1]], st["pos"], rows)
            torch.argmax(logits, dim=-1, out=nxt[rows[0]:rows[1]])
    for s in streams:
        if s is not None:
            main.wait_stream(s)
    return advance_tokens(st, nxt)
