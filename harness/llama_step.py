"""One decode step of our own for the Llama family (llama, qwen2, mistral), on HF's weights, with a
static KV cache of our own: what `graphed` and `graphed-sync` capture in one CUDA graph.

The step reads each decoder layer's modules as HF builds them (`input_layernorm`, `self_attn`'s
q/k/v/o projections, `post_attention_layernorm`, `mlp`'s gate/up/down, the final `norm`,
`lm_head`): RMSNorm, rotary embeddings, grouped-query attention, a gated MLP, tied or untied head,
qwen2's q/k/v biases (and llama's `attention_bias`/`mlp_bias` where a config sets them).
Per layer, plain PyTorch ops (~22 kernels):
    h = rms_norm(x)                         one fused kernel (F.rms_norm)
    qkv = h W_qkv^T + b                     q, k, v projections joined: one GEMM
    q, k = rotary(q, k)                     cos/sin at `pos` from tables HF's own rotary module made
    K, V cache <- k, v at pos               index_copy_ at a position tensor
    y = softmax(q K^T * scale, masked) V    query heads grouped by KV head: two batched GEMMs
    x = x + o_proj(y)
    x = x + down(act(gate) * up)            gate and up joined: one GEMM
Only `pos` (a device tensor) moves: the step is captured once and replayed.

Joined weights are copies made once per decoder (q, k, v and gate, up side by side: one GEMM each,
as gpt-fast joins them at load); they cost that much memory again, the step reads them alone.
"""

import torch
import torch.nn.functional as F

from .config import ConfigError
from .gpt2_step import SLOT_ALIGN

LLAMA_FAMILIES = ("llama", "qwen2", "mistral")
# Rotary types whose frequencies depend on the position alone; `dynamic` and `longrope` change
# them with the length reached, which a table made once cannot follow.
ROPE_TYPES = ("default", "linear", "llama3", "yarn")


def check_llama(model, new_tokens: int) -> None:
    """ConfigError (one line) for a config the step does not compute as HF does."""
    c = model.config
    rope = getattr(model.model.rotary_emb, "rope_type", "default")
    if rope not in ROPE_TYPES:
        raise ConfigError(f"our own step supports rope types {', '.join(ROPE_TYPES)}, not {rope!r}"
                          " (its frequencies change with the length reached)")
    window = getattr(c, "sliding_window", None)
    sliding = "sliding_attention" in (getattr(c, "layer_types", None) or ["sliding_attention"])
    if window is not None and sliding and window <= new_tokens:
        raise ConfigError(f"our own step has no sliding window: the config's {window} is within "
                          f"--new-tokens {new_tokens}")


def shape(model) -> dict:
    c = model.config
    heads = c.num_attention_heads
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // heads
    return {"heads": heads, "kv_heads": getattr(c, "num_key_value_heads", None) or heads,
            "head_dim": head_dim, "layers": c.num_hidden_layers}


def joined(linears: list) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The Linears' weights (and biases, zeros where one has none) stacked: [sum out, in]."""
    weight = torch.cat([lin.weight for lin in linears])
    if all(lin.bias is None for lin in linears):
        return weight, None
    return weight, torch.cat([lin.bias if lin.bias is not None
                              else lin.weight.new_zeros(lin.weight.shape[0]) for lin in linears])


def rope_tables(model, slots: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [slots, D] for positions 0..slots-1, from the model's own rotary module (its
    inv_freq, scaling and attention factor), in the model's dtype; sin's first half negated, so
    rotate_half(q) * sin == q.roll(D/2) * sin_signed exactly."""
    p = next(model.parameters())
    positions = torch.arange(slots, device=p.device)[None]  # [1, T]
    cos, sin = model.model.rotary_emb(p.new_zeros(1), position_ids=positions)  # [1, T, D]
    half = sin.shape[-1] // 2
    sign = torch.ones(sin.shape[-1], dtype=sin.dtype, device=sin.device)
    sign[:half] = -1
    return cos[0].contiguous(), (sin[0] * sign).contiguous()


def new_llama_cache(model, batch: int, max_len: int) -> dict:
    """K and V as [L, B, KV heads, T, D] zeros (T: max_len rounded up to 16, as GPT-2's), the
    rotary tables, and each layer's joined weights."""
    s = shape(model)
    p = next(model.parameters())
    slots = -(-max_len // SLOT_ALIGN) * SLOT_ALIGN
    cache_shape = (s["layers"], batch, s["kv_heads"], slots, s["head_dim"])
    cos, sin = rope_tables(model, slots)
    qkv = [joined([b.self_attn.q_proj, b.self_attn.k_proj, b.self_attn.v_proj])
           for b in model.model.layers]
    gate_up = [joined([b.mlp.gate_proj, b.mlp.up_proj]) for b in model.model.layers]
    return {"k": torch.zeros(cache_shape, dtype=p.dtype, device=p.device),
            "v": torch.zeros(cache_shape, dtype=p.dtype, device=p.device),
            "slots": torch.arange(slots, device=p.device), "cos": cos, "sin": sin,
            "qkv": qkv, "gate_up": gate_up, **s}


def llama_logits(model, kv: dict, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """token: [B, 1], pos: [1] (its position) -> logits [B, V]; writes this token's K/V at pos."""
    m = model.model
    x = m.embed_tokens(token[:, 0])  # [B, C]
    cos, sin = kv["cos"].index_select(0, pos), kv["sin"].index_select(0, pos)  # [1, D]
    mask = kv["slots"] <= pos  # [T]: the slots written so far
    for layer, block in enumerate(m.layers):
        x = x + _attention(block.self_attn, _rms(block.input_layernorm, x), kv, layer, pos,
                           cos, sin, mask)
        x = x + _mlp(block.mlp, _rms(block.post_attention_layernorm, x), kv["gate_up"][layer])
    return model.lm_head(_rms(m.norm, x))  # [B, V]


def _rms(norm, x: torch.Tensor) -> torch.Tensor:
    """HF's RMSNorm as one kernel: the same formula (fp32 inside), one rounding fewer in bf16."""
    return F.rms_norm(x, x.shape[-1:], norm.weight, norm.variance_epsilon)


def _attention(attn, h, kv: dict, layer: int, pos, cos, sin, mask) -> torch.Tensor:
    b = h.shape[0]
    nh, nkv, d = kv["heads"], kv["kv_heads"], kv["head_dim"]
    weight, bias = kv["qkv"][layer]
    qkv = F.linear(h, weight, bias)  # [B, (H + 2 KV) D]
    qk = qkv[:, : (nh + nkv) * d].view(b, nh + nkv, d)
    qk = qk * cos + qk.roll(d // 2, -1) * sin  # HF's q * cos + rotate_half(q) * sin, exactly
    q, k = qk.split([nh, nkv], dim=1)  # [B, H, D], [B, KV, D]
    v = qkv[:, (nh + nkv) * d :].view(b, nkv, d)
    keys, values = kv["k"][layer], kv["v"][layer]  # [B, KV, T, D]
    keys.index_copy_(2, pos, k[:, :, None])
    values.index_copy_(2, pos, v[:, :, None])
    q = q.reshape(b, nkv, nh // nkv, d)  # query heads by the KV head they share (HF's repeat_kv)
    scores = torch.matmul(q, keys.transpose(-1, -2)) * attn.scaling  # [B, KV, G, T]
    y = torch.matmul(scores.masked_fill(~mask, float("-inf")).softmax(-1), values)  # [B, KV, G, D]
    return attn.o_proj(y.reshape(b, nh * d))


def _mlp(mlp, h: torch.Tensor, gate_up: tuple) -> torch.Tensor:
    gu = F.linear(h, *gate_up)  # [B, 2I]
    gate, up = gu.chunk(2, dim=-1)
    return mlp.down_proj(mlp.act_fn(gate) * up)
