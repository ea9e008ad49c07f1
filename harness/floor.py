"""The bandwidth floor of a decode step: the bytes it must move ÷ the measured copy rate.

Bytes per step, from the model's config (any decoder family: layers, heads, KV heads, head dim,
widths, vocab, the dtype's size), never from a list of model names:
    weights      every parameter once (model.weight_bytes: tied embeddings once)
    kv_read      K and V of the cache slots the step's attention reads: all the allocated slots
                 for a static cache whose attention reads them masked (HF's StaticCache, the
                 graphed step's two GEMVs over its padded slots), slots 0..pos for a cache that
                 grows (HF's DynamicCache) or an attention that stops at pos (the fused step's
                 Triton kernel)
    kv_write     this token's K and V in every layer
    activations  an estimate: each op's output written once per row, in the model's dtype: per
                 layer the QKV projection (q + 2 kv widths), attention output, o-proj, two norms
                 and the residual add (5 × hidden), the MLP's up/gate and activation
                 (2 × intermediate); then the final norm and the logits (hidden + vocab)
The step's floor is their sum over the copy rate (bench.copy_bytes_per_s: bytes moved per second,
read + write, the unit of memory bandwidth); `floor_pct` is floor / the measured ms per step, the
share of the memory-bound ideal the step reaches. Positions are 0-based: step s writes pos s-1.
"""

# Variants whose attention reads every allocated slot every step (masked or not).
ALL_SLOTS = frozenset({"static", "compiled", "pipelined", "pipelined-seed", "deferred",
                       "check-every-k", "nocheck", "graphed", "graphed-sync"})
SLOT_ALIGN = 16  # the graphed step pads its slots (harness/gpt2_step.py)


def model_shape(config, dtype_bytes: int, weight_bytes: int) -> dict:
    """What the floor needs from a transformers config: GPT-2's names map onto these through
    its attribute_map (n_layer -> num_hidden_layers...); llama-like configs have them as is."""
    hidden = config.hidden_size
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    intermediate = (getattr(config, "intermediate_size", None) or getattr(config, "n_inner", None)
                    or 4 * hidden)
    return {
        "layers": config.num_hidden_layers,
        "heads": heads,
        "kv_heads": getattr(config, "num_key_value_heads", None) or heads,
        "head_dim": head_dim,
        "hidden": hidden,
        "intermediate": intermediate,
        "vocab": config.vocab_size,
        "dtype_bytes": dtype_bytes,
        "weight_bytes": weight_bytes,
    }


def cache_slots(variant: str, new_tokens: int) -> int:
    """Slots the variant's cache allocates (its static caches hold one per new token)."""
    if variant.startswith("graphed"):
        return -(-new_tokens // SLOT_ALIGN) * SLOT_ALIGN
    return new_tokens


def slots_read(variant: str, new_tokens: int, pos: int) -> int:
    return cache_slots(variant, new_tokens) if variant in ALL_SLOTS else pos + 1


def step_bytes(shape: dict, variant: str, batch: int, new_tokens: int, positions) -> dict:
    """Bytes per step by part, averaged over `positions` (the steps' pos values)."""
    positions = list(positions)
    e = shape["dtype_bytes"]
    slot = 2 * shape["layers"] * batch * shape["kv_heads"] * shape["head_dim"] * e  # K and V
    mean_slots = sum(slots_read(variant, new_tokens, p) for p in positions) / len(positions)
    qkv = (shape["heads"] + 2 * shape["kv_heads"]) * shape["head_dim"]
    per_layer = qkv + 5 * shape["hidden"] + 2 * shape["intermediate"]
    activations = batch * e * (shape["layers"] * per_layer + shape["hidden"] + shape["vocab"])
    parts = {
        "weights": shape["weight_bytes"],
        "kv_read": slot * mean_slots,
        "kv_write": slot,
        "activations": activations,
    }
    return {**parts, "total": sum(parts.values())}


def floor(shape: dict, variant: str, batch: int, new_tokens: int, positions,
          copy_bytes_per_s: float, ms_per_step: float | None) -> dict:
    """The floor block of bench results and run.json: bytes by part, ms per step, and the share
    of it the measured step reaches (None without a measurement)."""
    b = step_bytes(shape, variant, batch, new_tokens, positions)
    floor_ms = b["total"] / copy_bytes_per_s * 1e3
    return {
        "bytes_per_step": b,
        "copy_bytes_per_s": copy_bytes_per_s,
        "floor_ms_per_step": floor_ms,
        "floor_pct": 100 * floor_ms / ms_per_step if ms_per_step else None,
        "kv_slots_read": "all" if variant in ALL_SLOTS else "0..pos",
        "positions": [min(positions), max(positions)],
    }


def window_bytes(shape: dict, variant: str, batch: int, new_tokens: int, start: int,
                 stop: int) -> dict:
    """run.json's `floor`: the bytes of each profiled step START+1..STOP (step s writes pos s-1),
    for the analysis to divide by the copy rate that bench measured (untraced.json)."""
    steps = range(start + 1, stop + 1)
    return {
        "kv_slots_read": "all" if variant in ALL_SLOTS else "0..pos",
        "shape": shape,
        "bytes_by_step": [[s, step_bytes(shape, variant, batch, new_tokens, [s - 1])["total"]]
                          for s in steps],
    }
