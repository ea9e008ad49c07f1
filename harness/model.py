"""Causal LMs built from a transformers config with seeded random weights: no download, no hub.

`--model` names a preset `ARCH[:SIZE]` (ARCHS x SIZES; `gpt2` is gpt2:small, `tiny` gpt2:tiny) or
a local directory with a config.json (its weights when present, else seeded random ones).
Presets: `tiny` for the CPU tests (2 layers, 64-128 wide), `small` of 100-150M shaped like the
family's small members (GQA for llama/qwen2/mistral, RoPE, ties where the family ties), and the
sizes people decode: `llama:1b` (Llama-3.2-1B's shape) and `llama:8b` (Llama-3-8B's).

Random weights are drawn where the model runs when it is large (the LARGE sizes, or a directory
whose config has over DEVICE_INIT_PARAMETERS parameters): HF builds its modules under a
`torch.device`, so 8B parameters are drawn on the GPU in seconds, never made on the CPU first.
The small ones are drawn on the CPU and moved, as they always were (their seeded weights, and so
their tokens, stay what the committed runs decoded).
"""

import json
import os
from pathlib import Path

ARCHS = ("gpt2", "llama", "qwen2", "mistral", "phi")
SIZES = ("tiny", "small", "1b", "8b")
LARGE = ("1b", "8b")  # drawn on the device (llama only)
DEVICE_INIT_PARAMETERS = 500_000_000
ALIASES = {"tiny": "gpt2:tiny", "gpt2": "gpt2:small"}
# graphed, graphed-sync and fused run our own step: GPT-2's, or the Llama family's
OWN_STEP_FAMILIES = ("gpt2", "llama", "qwen2", "mistral")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")

# The tiny sizes draw wider weights (std 0.2): at the families' 0.02 greedy output is one token
# repeated, which would make token-identity tests nearly blind. qwen2 (tied, 152k tokens) and phi
# are 128 wide, phi at std 0.05: 64 wide, their greedy output was one token or two alternating.
# The small sizes keep the families' std 0.02 (7-31 distinct tokens in their first 40).
TINY = dict(initializer_range=0.2, max_position_embeddings=1024)

# Config fields by architecture and size. gpt2:small is GPT2Config() (124M). The others:
#   llama:small    Llama-2's vocab, GPT-2's width and depth, 12 heads over 4 KV heads, untied: 125M
#   qwen2:small    Qwen2.5's vocab and tokens, 12 layers 512 wide, 8 heads over 2, tied: 138M
#   mistral:small  v0.3's vocab, 12 layers 768 wide, 12 heads over 4, untied, no window: 143M
#   phi:small      Phi-2's vocab, partial rotary, parallel block, untied, 10 layers 768 wide: 150M
PRESETS = {
    ("gpt2", "small"): {},
    ("gpt2", "tiny"): dict(n_layer=2, n_embd=64, n_head=2, n_positions=1024,
                           initializer_range=0.2),
    ("llama", "small"): dict(vocab_size=32000, hidden_size=768, intermediate_size=2048,
                             num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=4,
                             max_position_embeddings=2048, bos_token_id=1, eos_token_id=2,
                             tie_word_embeddings=False),
    ("llama", "tiny"): dict(vocab_size=1024, hidden_size=64, intermediate_size=176,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            bos_token_id=1, eos_token_id=2, tie_word_embeddings=False, **TINY),
    ("qwen2", "small"): dict(vocab_size=151936, hidden_size=512, intermediate_size=2816,
                             num_hidden_layers=12, num_attention_heads=8, num_key_value_heads=2,
                             max_position_embeddings=32768, rope_theta=1e6, bos_token_id=151643,
                             eos_token_id=151645, tie_word_embeddings=True),
    ("qwen2", "tiny"): dict(vocab_size=151936, hidden_size=128, intermediate_size=352,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            bos_token_id=151643, eos_token_id=151645, tie_word_embeddings=True,
                            **TINY),
    ("mistral", "small"): dict(vocab_size=32768, hidden_size=768, intermediate_size=2688,
                               num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=4,
                               max_position_embeddings=32768, sliding_window=None,
                               bos_token_id=1, eos_token_id=2, tie_word_embeddings=False),
    ("mistral", "tiny"): dict(vocab_size=1024, hidden_size=64, intermediate_size=176,
                              num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                              sliding_window=None, bos_token_id=1, eos_token_id=2,
                              tie_word_embeddings=False, **TINY),
    ("phi", "small"): dict(vocab_size=51200, hidden_size=768, intermediate_size=3072,
                           num_hidden_layers=10, num_attention_heads=12, num_key_value_heads=12,
                           partial_rotary_factor=0.5, max_position_embeddings=2048,
                           bos_token_id=50256, eos_token_id=50256, tie_word_embeddings=False),
    ("phi", "tiny"): dict(vocab_size=1024, hidden_size=128, intermediate_size=512,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                          partial_rotary_factor=0.5, bos_token_id=1, eos_token_id=2,
                          tie_word_embeddings=False, **{**TINY, "initializer_range": 0.05}),
    # Meta's shapes, as their config.json files give them (random weights, std 0.02).
    ("llama", "8b"): dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                          num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                          max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
                          bos_token_id=128000, eos_token_id=128001, tie_word_embeddings=False),
    ("llama", "1b"): dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                          num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                          head_dim=64, max_position_embeddings=131072, rope_theta=500000.0,
                          rope_scaling={"rope_type": "llama3", "factor": 32.0,
                                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                        "original_max_position_embeddings": 8192},
                          rms_norm_eps=1e-5, bos_token_id=128000, eos_token_id=128001,
                          tie_word_embeddings=True),
}


class ModelError(ValueError):
    """A --model that names nothing buildable, in one line: the harness raises it as a
    config.ConfigError (which imports this module)."""


def parse_model(name: str) -> tuple[str, str | None, Path | None]:
    """--model -> (architecture, size, None) for a preset, (model_type, None, dir) for a path.

    Reads at most a config.json: no torch, so bad options are answered before torch loads.
    """
    spec = ALIASES.get(name, name)
    arch, _, size = spec.partition(":")
    if arch in ARCHS and ":" not in spec:
        size = "small"
    if (arch, size) in PRESETS:
        return arch, size, None
    path = Path(name)
    if not path.is_dir():
        raise ModelError(f"--model must be ARCH[:SIZE] ({', '.join(ARCHS)}; "
                         f"{', '.join(SIZES[:2])}; llama:{' or llama:'.join(LARGE)}), "
                         f"tiny, or a directory with a config.json, got {name!r}")
    try:
        model_type = json.loads((path / "config.json").read_text()).get("model_type")
    except OSError:
        raise ModelError(f"--model {name}: no config.json in that directory") from None
    except (ValueError, AttributeError):
        raise ModelError(f"--model {name}: config.json is not a JSON object") from None
    if not model_type:
        raise ModelError(f"--model {name}: config.json has no model_type")
    return model_type, None, path


def model_family(name: str) -> str:
    return parse_model(name)[0]


def hub_offline() -> None:
    """Build from config only: never reach the hub, even for a config lookup. Set when a model
    is built, not at import (importing the harness has no side effect); the loads below also
    pass local_files_only, which holds where transformers was imported before this ran."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def build_config(name: str):
    """The transformers config of a preset or a directory (local files only), its BOS/EOS
    checked (special_tokens) before any model is built."""
    hub_offline()
    from transformers import CONFIG_MAPPING, AutoConfig

    arch, size, path = parse_model(name)
    try:
        config = (AutoConfig.from_pretrained(path, local_files_only=True) if path is not None
                  else CONFIG_MAPPING[arch](**PRESETS[arch, size]))
        special_tokens(config)
    except (OSError, ValueError, KeyError) as e:
        raise ModelError(f"--model {name}: {_first_line(e)}") from None
    return config


def build_model(name: str, dtype: str, device: str, seed: int, layers: int | None = None,
                on_device: bool | None = None):
    """The model in eval mode, no grad, SDPA attention; random weights drawn from `seed`
    unless --model is a directory that holds weights. `layers`: the first N decoder layers only
    (a reduced-layer copy of a shape, for checks at fp32); `on_device` overrides where random
    weights are drawn (None: draws_on_device)."""
    import torch
    hub_offline()
    from transformers import AutoModelForCausalLM

    path = parse_model(name)[2]
    config = build_config(name)
    if layers is not None:
        config.num_hidden_layers = layers
    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    # SDPA is the eager default; naming it keeps every variant on the same attention kernels.
    try:
        if path is not None and has_weights(path):
            model = AutoModelForCausalLM.from_pretrained(
                path, config=config, local_files_only=True, dtype=torch_dtype,
                attn_implementation="sdpa")
        elif draws_on_device(name, config) if on_device is None else on_device:
            torch.manual_seed(seed)  # seeds the device's generator too
            with torch.device(device):
                model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa",
                                                         dtype=torch_dtype)
        else:
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    except (OSError, ValueError, KeyError) as e:
        # A config that is no causal LM's, unreadable weights: one line.
        raise ModelError(f"--model {name}: {_first_line(e)}") from None
    return model.to(device=device, dtype=torch_dtype).eval().requires_grad_(False)


def draws_on_device(name: str, config) -> bool:
    """Random weights drawn where the model runs: a LARGE preset, or a directory's config of
    over DEVICE_INIT_PARAMETERS parameters (counted on the meta device, nothing allocated)."""
    size, path = parse_model(name)[1:]
    if path is None:
        return size in LARGE
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        meta = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in meta.parameters()) > DEVICE_INIT_PARAMETERS


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def has_weights(path: Path) -> bool:
    return any((path / f).is_file() for f in WEIGHT_FILES)


def special_tokens(config) -> tuple[int, tuple[int, ...]]:
    """(BOS, EOS ids) from a model's config. The first EOS id is the one the stop schedule
    forces; emitting any of them finishes a sequence. No BOS id: the first EOS (GPT-2's way)."""
    eos = getattr(config, "eos_token_id", None)  # 5.x configs may lack either attribute
    eos = tuple(eos) if isinstance(eos, list | tuple) else (() if eos is None else (eos,))
    if not eos:
        raise ModelError(f"the {config.model_type} config has no eos_token_id")
    bos = getattr(config, "bos_token_id", None)
    bos = bos if bos is not None else eos[0]
    return int(bos), tuple(int(e) for e in eos)


def weight_bytes(model) -> int:
    """Bytes of parameters read once per decode step (tied wte/lm_head counted once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def model_record(name: str, model) -> dict:
    """What run.json and bench JSON record of the model: family, sizes, parameters, tokens."""
    arch, size, path = parse_model(name)
    c = model.config
    bos, eos = special_tokens(c)
    heads = c.num_attention_heads
    tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
    return {
        "architecture": arch,
        "size": size,
        "path": str(path) if path is not None else None,
        "weights": "loaded" if path is not None and has_weights(path) else "random",
        "class": type(model).__name__,
        "layers": c.num_hidden_layers,
        "hidden": c.hidden_size,
        "heads": heads,
        "kv_heads": getattr(c, "num_key_value_heads", None) or heads,
        "vocab": c.vocab_size,
        "tied_embeddings": tied,
        "parameters": sum(p.numel() for p in model.parameters()),  # shared tensors once
        "bos_token_id": bos,
        "eos_token_ids": list(eos),
    }
