"""The bandwidth floor of a decode step, from the model's config: the bytes it must move ÷ the
measured copy rate. The model itself (weights, KV read and write, activations; the slots each
variant reads) is analysis/measures/floor_bytes.py, the one the analysis splits by kernel class;
here what only the harness can do: read a transformers config into that model's shape.
`floor_pct` is floor / the measured ms per step, the share of the memory-bound ideal reached.
"""

# harness -> analysis, never back: installed, the two are gapscope.harness and gapscope.analysis;
# in the source tree, top-level packages. floor_bytes imports nothing beyond the standard library.
try:
    from ..analysis.measures import floor_bytes
except ImportError:
    from analysis.measures import floor_bytes

ALL_SLOTS, SLOT_ALIGN = floor_bytes.ALL_SLOTS, floor_bytes.SLOT_ALIGN
cache_slots, slots_read, step_bytes = (floor_bytes.cache_slots, floor_bytes.slots_read,
                                       floor_bytes.step_bytes)
floor, window_bytes = floor_bytes.floor, floor_bytes.window_bytes


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
