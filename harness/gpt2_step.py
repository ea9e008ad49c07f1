"""One GPT-2 decode step of our own, on HF's modules and weights, with a static KV cache of our own.

Why: HF's StaticCache (transformers 5.17) mutates a counter in place, so torch.compile's CUDA graphs
are skipped, and a manual capture of the HF forward hit an index_copy_ assert. Here every shape is
fixed and the only moving part is `pos`, a device tensor: the step is captured once, then replayed.
"""

import torch
import torch.nn.functional as F

# Cache slots are padded to a multiple of SLOT_ALIGN (16): SDPA's efficient kernel padded its mask
# on every call otherwise. The step now spells attention out, but docs/RESULTS.md was measured with
# it. The number is defined once, with the floor that counts the padded slots.
from .floor import SLOT_ALIGN


def new_kv_cache(model, batch: int, max_len: int) -> dict:
    """Zeros, so masked slots are finite (a NaN there would poison the attention sums)."""
    c = model.config
    p = next(model.parameters())
    max_len = -(-max_len // SLOT_ALIGN) * SLOT_ALIGN  # slots past the last position stay masked
    shape = (c.n_layer, batch, c.n_head, max_len, c.n_embd // c.n_head)  # [L, B, H, T, D]
    return {
        "k": torch.zeros(shape, dtype=p.dtype, device=p.device),
        "v": torch.zeros(shape, dtype=p.dtype, device=p.device),
        "slots": torch.arange(max_len, device=p.device),  # [T]
    }


def gpt2_logits(model, kv: dict, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """token: [B, 1], pos: [1] (its position) -> logits [B, V]; writes this token's K/V at pos."""
    tr = model.transformer
    x = tr.wte(token) + tr.wpe(pos)  # [B, 1, C]
    mask = (kv["slots"] <= pos).view(1, 1, 1, -1)  # [1, 1, 1, T]: the slots written so far
    for layer, block in enumerate(tr.h):
        x = x + _attention(block.attn, block.ln_1(x), kv, layer, pos, mask)
        x = x + _mlp(block.mlp, block.ln_2(x))
    return model.lm_head(tr.ln_f(x))[:, -1]


def _attention(attn, h: torch.Tensor, kv: dict, layer: int, pos: torch.Tensor, mask: torch.Tensor):
    b, t, c = h.shape  # t == 1
    q, k, v = attn.c_attn(h).split(c, dim=2)  # each [B, 1, C]
    q, k, v = (z.view(b, t, attn.num_heads, attn.head_dim).transpose(1, 2) for z in (q, k, v))
    keys, values = kv["k"][layer], kv["v"][layer]  # [B, H, T, D]
    keys.index_copy_(2, pos, k)
    values.index_copy_(2, pos, v)
    # One query against T slots, spelled out: SDPA's memory-efficient kernel spent ~33 µs a
    # layer here (64-row tiles for one row, and memsets), two batched GEMVs and a softmax less.
    scores = torch.matmul(q, keys.transpose(-1, -2)) * attn.scaling  # [B, H, 1, T]
    y = torch.matmul(scores.masked_fill(~mask, float("-inf")).softmax(-1), values)  # [B, H, 1, D]
    return attn.c_proj(y.transpose(1, 2).reshape(b, t, c))  # [B, 1, C]


def _mlp(mlp, h: torch.Tensor) -> torch.Tensor:
    """GPT-2's MLP with its tanh GELU as one kernel: HF's `gelu_new` spells the same formula
    in seven elementwise ops, each a kernel (and a gap) in the graph."""
    return mlp.c_proj(F.gelu(mlp.c_fc(h), approximate="tanh"))


def capture(step, warmups: int, keep_graph: bool = False) -> tuple[torch.cuda.CUDAGraph,
                                                                     torch.Tensor]:
    """Capture step() (which returns a tensor) in a CUDA graph: warm up on a side stream first.

    The warm-up runs the step for real: callers reset their state afterwards. keep_graph: the
    cudaGraph_t is kept (`raw_cuda_graph()`) for a graph of one's own to embed (while-graph).
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph(keep_graph=True) if keep_graph else torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    return graph, out
