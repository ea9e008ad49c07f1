"""The bytes a decode step must move: the one model of the bandwidth floor, from the model's shape.

Pure arithmetic, no third-party import: the harness calls it to write run.json's `floor` and its
bench's floor block (harness/floor.py), the analysis to split those bytes by kernel class and to
work them out for the runs whose run.json predates that record. Bytes per step, from the shape
(any decoder family: layers, heads, KV heads, head dim, widths, vocab, the dtype's size):
    weights      every parameter once (harness/model.weight_bytes: tied embeddings once)
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
The step's floor is their sum over the copy rate (bytes moved per second, read + write, the unit
of memory bandwidth). Positions are 0-based: step s writes pos s-1.
"""

# Variants whose attention reads every allocated slot every step (masked or not).
ALL_SLOTS = frozenset({"static", "compiled", "pipelined", "pipelined-seed", "deferred",
                       "check-every-k", "nocheck", "graphed", "graphed-sync", "while-graph"})
# The graphed step pads its cache's slots to a multiple of this (harness/gpt2_step.py takes it
# from here: one number for the step that pads and the floor that counts the padding).
SLOT_ALIGN = 16
# The kernel class that reads the KV cache (analysis/measures/kernels.classify): the graphed
# step's attention is two batched GEMVs, every other variant's an attention kernel.
KV_READ_CLASS = {"graphed": "gemv", "graphed-sync": "gemv", "while-graph": "gemv"}
# Variants whose cache is the graphed step's (slots padded to SLOT_ALIGN).
PADDED = frozenset({"graphed", "graphed-sync", "while-graph"})


def gpt2_parameters(layers: int, hidden: int, vocab: int, positions: int,
                    intermediate: int) -> int:
    """GPT-2's parameter count: token and position embeddings (the head tied to the first), per
    layer two norms, the QKV, output and two MLP projections with their biases, a final norm."""
    per_layer = (4 * hidden + hidden * 3 * hidden + 3 * hidden + hidden * hidden + hidden
                 + hidden * intermediate + intermediate + intermediate * hidden + hidden)
    return vocab * hidden + positions * hidden + layers * per_layer + 2 * hidden


def _gpt2_shape(layers: int, heads: int, hidden: int, dtype_bytes: int) -> dict:
    params = gpt2_parameters(layers, hidden, 50257, 1024, 4 * hidden)
    return {"layers": layers, "heads": heads, "kv_heads": heads, "head_dim": hidden // heads,
            "hidden": hidden, "intermediate": 4 * hidden, "vocab": 50257,
            "dtype_bytes": dtype_bytes, "weight_bytes": params * dtype_bytes}


DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
# The harness's GPT-2 presets (harness/model.PRESETS), for the runs made before run.json
# recorded `floor.shape`: gpt2:small is GPT2Config() (124,439,808 parameters), tiny 2 × 64.
PRESET_SHAPES = {"gpt2": (12, 12, 768), "gpt2:small": (12, 12, 768), "tiny": (2, 2, 64),
                 "gpt2:tiny": (2, 2, 64)}


def run_shape(info: dict) -> dict | None:
    """The shape of a run: run.json's `floor.shape` (the harness writes it), else that of the
    harness preset its config names in its dtype; None for another model (no record, no guess)."""
    shape = (info.get("floor") or {}).get("shape")
    if shape:
        return shape
    config = info.get("config") or {}
    preset, dtype = PRESET_SHAPES.get(config.get("model")), DTYPE_BYTES.get(config.get("dtype"))
    return _gpt2_shape(*preset, dtype) if preset and dtype else None


def cache_slots(variant: str, new_tokens: int) -> int:
    """Slots the variant's cache allocates (its static caches hold one per new token)."""
    if variant in PADDED:
        return -(-new_tokens // SLOT_ALIGN) * SLOT_ALIGN
    return new_tokens


def slots_read(variant: str, new_tokens: int, pos: int) -> int:
    return cache_slots(variant, new_tokens) if variant in ALL_SLOTS else pos + 1


def kv_slots_read(variant: str) -> str:
    return "all" if variant in ALL_SLOTS else "0..pos"


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


def window_positions(window: str) -> range:
    """The pos values of a profiled window START:STOP's steps START+1..STOP (step s writes s-1)."""
    start, stop = (int(x) for x in window.split(":"))
    return range(start, stop)


def class_bytes(parts: dict, variant: str) -> dict:
    """The parts of a step's bytes that one kernel class moves: the weights by the GEMMs, the KV
    read by the attention (the graphed step's GEMVs). The KV write and the activations spread
    over several classes: they count in the step's total (the floor), in no class' row."""
    return {"gemm": parts["weights"], KV_READ_CLASS.get(variant, "attention"): parts["kv_read"]}


def floor(shape: dict, variant: str, batch: int, new_tokens: int, positions,
          copy_bytes_per_s: float, ms_per_step: float | None) -> dict:
    """The floor block of bench results: bytes by part, ms per step, and the share of it the
    measured step reaches (None without a measurement)."""
    b = step_bytes(shape, variant, batch, new_tokens, positions)
    floor_ms = b["total"] / copy_bytes_per_s * 1e3
    return {
        "bytes_per_step": b,
        "copy_bytes_per_s": copy_bytes_per_s,
        "floor_ms_per_step": floor_ms,
        "floor_pct": 100 * floor_ms / ms_per_step if ms_per_step else None,
        "kv_slots_read": kv_slots_read(variant),
        "positions": [min(positions), max(positions)],
    }


def window_bytes(shape: dict, variant: str, batch: int, new_tokens: int, start: int,
                 stop: int) -> dict:
    """run.json's `floor`: the bytes of each profiled step START+1..STOP (step s writes pos s-1),
    for the analysis to divide by the copy rate that bench measured (untraced.json)."""
    steps = range(start + 1, stop + 1)
    return {
        "kv_slots_read": kv_slots_read(variant),
        "shape": shape,
        "bytes_by_step": [[s, step_bytes(shape, variant, batch, new_tokens, [s - 1])["total"]]
                          for s in steps],
    }


def run_step_bytes(info: dict) -> dict | None:
    """A run's bytes per step by part over its profiled window, from its shape and config; None
    where the shape or the config's variant, batch, tokens or window is missing."""
    shape, config = run_shape(info), info.get("config") or {}
    keys = ("variant", "batch", "new_tokens", "window")
    if shape is None or any(config.get(k) is None for k in keys):
        return None
    return step_bytes(shape, config["variant"], config["batch"], config["new_tokens"],
                      window_positions(config["window"]))


def recorded_bytes_per_step(info: dict) -> float | None:
    """The mean of run.json's `floor.bytes_by_step` (what the harness worked out at capture time
    with this model); None where it has none."""
    by_step = (info.get("floor") or {}).get("bytes_by_step")
    return sum(b for _, b in by_step) / len(by_step) if by_step else None
