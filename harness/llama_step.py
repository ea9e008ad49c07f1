"""One decode step of our own for the Llama family (llama, qwen2, mistral), on HF's weights, with a
static KV cache of our own: what `graphed` and `graphed-sync` capture in one CUDA graph.

The step reads each decoder layer's modules as HF builds them (`input_layernorm`, `self_attn`'s
q/k/v/o projections, `post_attention_layernorm`, `mlp`'s gate/up/down, the final `norm`,
`lm_head`): RMSNorm, rotary embeddings, grouped-query attention, a gated MLP, tied or untied head,
qwen2's q/k/v biases (and llama's `attention_bias`/`mlp_bias` where a config sets them).
Plain PyTorch ops, no Triton, no compile; every op below launches one kernel (CUDA):
    per step    x = embed(token)                                                          1
                R = sum_j basis_j * table_j[pos]   rotary matrices of every head at pos   3
                K[..., D] = -inf past pos, else 0  the mask, in the K cache (all layers)  2
    per layer   h = rms_norm(x)                    F.rms_norm                             1
                qkv = h W_qkv^T (+ b)              q, k, v projections joined             1
                [q s, k, v] = qkv_n R_n            rotary (and the scale on q) per head   1
                K, V <- k, v at pos                one index_copy_ for both               1
                p = softmax(q K^T)                 GQA: query heads grouped by KV head    2
                y = p V                                                                   1
                x += y W_o^T                       addmm_: the residual add as beta=1     1
                h = rms_norm(x)                                                           1
                gu = h W_gu^T                      gate and up joined                     1
                a = act(gate) * up                                                        2
                x += a W_down^T                    addmm_                                 1
    per step    logits = lm_head(rms_norm(x))                                             2
                                                              13 L + 8 (164 for 12 layers)
then the loop's own ops (argmax, stop schedule, ids, flag: decode.advance, 13), so 13 L + 21 a
step: 177 at 12 layers and batch 1. Above batch 1, with more than one KV head, the query heads are
copied once a layer to [B x KV heads, group, D] (the batched GEMM needs them there): 14 L + 21, 189
for stories110M's shape at batch 8. By the same count (tests/test_llama_steps.py counts the calls
of one eager step) the step this replaced issued 22 L + 19, 283 at 12 layers, where 282 kernels a
step were measured on the H200: no op above is more than one kernel there unless cuBLAS splits a
GEMM, and qwen2's biased QKV GEMM at batch 1 may be two (torch adds a bias with a copy, then a
beta=1 GEMM, where cuBLASLt's epilogue does not apply).

How the kernels went:
- Rotary is a linear map of each head's D values: `q·cos + rotate_half(q)·sin` = q R(pos), R with
  cos on its diagonal and sin (first half negated) at (i + D/2 mod D, i). One batched GEMM over
  the heads computes q R_q, k R_k and v I (v passes through), R_q with the attention scale folded
  in. The R of every head at `pos` is built once a step from a [3, heads, D, D] basis and the
  [slots, 3, D] table (cos, signed sin, ones) that the model's own rotary module filled.
- The GEMM writes into a persistent [heads, B, D + PAD] buffer: the query heads' column D holds 1,
  every other extra column 0, and the cache keeps D + PAD columns a slot, where K's column D is
  -inf past `pos` and 0 up to it (rewritten once a step for every layer). So q·k over D + PAD
  columns is q·k plus 0 for a written slot and -inf for a later one: the mask costs no kernel a
  layer, and the softmax is one kernel.
- The o projection reads the D + PAD columns of each head against a copy of W_o with zero columns
  in the PAD places (made once, like the joined weights).
Rounding: R's products and sums run in the GEMM (fused multiply-adds, fp32 accumulation; under
TF32, "high", with TF32 inputs like every other GEMM), the scale multiplies q rather than q·k
(exact when it is a power of two, as for head dim 16 or 64), and the residual adds happen in the
GEMMs: each a rounding or so away from HF's ops, not bit for bit. At fp32 "highest" the tokens
are `kv`'s (tests/test_llama_steps.py, tests/test_gpu_llama.py); on the CPU the logits of tiny
llama and mistral were equal to the replaced step's, qwen2's (head dim 32) within 1e-6.

Only `pos` (a device tensor) moves: the step is captured once and replayed. Joined and padded
weights are copies made once per decoder (as gpt-fast joins q/k/v at load): that much memory again.
`new_llama_cache` (the plain [L, B, KV, T, D] cache and joined weights) is the fused step's.
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




# Extra head-dim columns in the graphed step's query buffer and K/V cache: column D carries the
# mask (query 1, key 0 or -inf); 8 keeps rows 16-byte aligned in bf16 and 32 in fp32.
PAD = 8


def rope_basis(s: dict, scaling: float, dtype, device) -> torch.Tensor:
    """[3, N, D, D] (N = H + 2 KV heads in qkv's order): R of head n = basis[0, n] * cos +
    basis[1, n] * sin' + basis[2, n] * 1, cos and sin' (first half negated) broadcast over rows;
    query heads scaled by the attention scale, value heads the identity."""
    nh, nkv, d = s["heads"], s["kv_heads"], s["head_dim"]
    eye = torch.eye(d, dtype=torch.float64)
    swap = eye.roll(d // 2, 0)  # swap[k, i] = 1 where k = i + D/2 (mod D)
    basis = torch.zeros(3, nh + 2 * nkv, d, d, dtype=torch.float64)
    basis[0, :nh], basis[1, :nh] = eye * scaling, swap * scaling
    basis[0, nh:nh + nkv], basis[1, nh:nh + nkv] = eye, swap
    basis[2, nh + nkv:] = eye
    return basis.to(dtype=dtype, device=device)


def padded_heads(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """W_o [C, H D] -> [C, H (D + PAD)], zeros in each head's PAD columns."""
    c = weight.shape[0]
    return F.pad(weight.view(c, heads, -1), (0, PAD)).reshape(c, -1).contiguous()


def new_graphed_llama(model, batch: int, max_len: int) -> dict:
    """The graphed step's cache [L, 2 (K, V), B, KV, T, D + PAD] (T: max_len rounded up to 16, as
    GPT-2's), its rotary basis and table, query buffer and mask view, and the joined weights."""
    s = shape(model)
    nh, nkv, d = s["heads"], s["kv_heads"], s["head_dim"]
    p = next(model.parameters())
    dt, dev = p.dtype, p.device
    slots = -(-max_len // SLOT_ALIGN) * SLOT_ALIGN
    cache = torch.zeros((s["layers"], 2, batch, nkv, slots, d + PAD), dtype=dt, device=dev)
    cos, sin = rope_tables(model, slots)
    rotated = torch.zeros((nh + 2 * nkv, batch, d + PAD), dtype=dt, device=dev)
    rotated[:nh, :, d] = 1  # q's column D: times K's mask column
    layers = model.model.layers
    return {"cache": cache, "mask": cache[:, 0, :, :, :, d],  # [L, B, KV, T]
            "rotated": rotated, "slots": torch.arange(slots, device=dev),
            "table": torch.stack([cos, sin, torch.ones_like(cos)], 1),  # [T, 3, D]
            "basis": rope_basis(s, layers[0].self_attn.scaling, dt, dev),
            "neg_inf": torch.tensor(float("-inf"), dtype=dt, device=dev),
            "zero": torch.tensor(0.0, dtype=dt, device=dev),
            "qkv": [joined([b.self_attn.q_proj, b.self_attn.k_proj, b.self_attn.v_proj])
                    for b in layers],
            "gate_up": [joined([b.mlp.gate_proj, b.mlp.up_proj]) for b in layers],
            "o": [padded_heads(b.self_attn.o_proj.weight, nh) for b in layers], **s}


def llama_logits(model, kv: dict, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """token: [B, 1], pos: [1] (its position) -> logits [B, V]; writes this token's K/V at pos."""
    m = model.model
    x = m.embed_tokens(token[:, 0])  # [B, C]: the residual stream, updated in place
    rot = (kv["basis"] * kv["table"].index_select(0, pos).view(3, 1, 1, -1)).sum(0)  # [N, D, D]
    mask = kv["mask"]
    _into(mask, torch.where, (kv["slots"] > pos).expand(mask.shape), kv["neg_inf"], kv["zero"])
    for layer, block in enumerate(m.layers):
        _attention(block, kv, layer, x, rot, pos)
        _mlp(block, kv, layer, x)
    return model.lm_head(_rms(m.norm, x))  # [B, V]


def _into(dst: torch.Tensor, op, *args) -> None:
    """dst[...] = op(*args) in one kernel: op's out= (a strided view); under torch.compile (dynamo
    takes no non-contiguous out=) a copy, which inductor fuses."""
    if torch.compiler.is_compiling():
        dst.copy_(op(*args))
    else:
        op(*args, out=dst)


def _rms(norm, x: torch.Tensor) -> torch.Tensor:
    """HF's RMSNorm as one kernel: the same formula (fp32 inside), one rounding fewer in bf16."""
    return F.rms_norm(x, x.shape[-1:], norm.weight, norm.variance_epsilon)


def _attention(block, kv: dict, layer: int, x: torch.Tensor, rot, pos) -> None:
    """x += o_proj(attention(x)), K and V written at pos."""
    b = x.shape[0]
    nh, nkv, d = kv["heads"], kv["kv_heads"], kv["head_dim"]
    dp = d + PAD
    qkv = F.linear(_rms(block.input_layernorm, x), *kv["qkv"][layer])  # [B, N D]
    out = kv["rotated"]  # [N, B, D + PAD]
    _into(out[:, :, :d], torch.bmm, qkv.view(b, -1, d).transpose(0, 1), rot)
    cache = kv["cache"][layer]  # [2, B, KV, T, D + PAD]
    cache.index_copy_(3, pos, out[nh:].view(2, nkv, b, 1, dp).permute(0, 2, 1, 3, 4))
    t = cache.shape[3]
    # Query heads grouped by the KV head they share (HF's repeat_kv): a view at batch 1.
    q = out[:nh].view(nkv, nh // nkv, b, dp).permute(2, 0, 1, 3).reshape(b * nkv, -1, dp)
    scores = torch.bmm(q, cache[0].view(b * nkv, t, dp).transpose(1, 2))  # [B KV, G, T]
    y = torch.bmm(scores.softmax(-1), cache[1].view(b * nkv, t, dp))  # [B KV, G, D + PAD]
    _residual(x, y.view(b, -1), kv["o"][layer], block.self_attn.o_proj.bias)


def _mlp(block, kv: dict, layer: int, x: torch.Tensor) -> None:
    mlp = block.mlp
    gate, up = F.linear(_rms(block.post_attention_layernorm, x), *kv["gate_up"][layer]).chunk(2, -1)
    _residual(x, mlp.act_fn(gate) * up, mlp.down_proj.weight, mlp.down_proj.bias)


def _residual(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, bias) -> None:
    """x += y W^T (+ bias): the GEMM's beta=1 (no bias in the GEMM: torch would add it with a
    copy first, or send it to cuBLASLt, whose split-K GEMMs bring memset nodes)."""
    x.addmm_(y, weight.t())
    if bias is not None:
        x.add_(bias)
