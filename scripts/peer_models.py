"""The shapes scripts/peer_gptfast.py compares on: gpt-fast's own configs (its model.py's
transformer_configs) and the transformers LlamaConfig our side runs for each, random weights on
both sides.

    stories110M  12 layers x 768, 12 heads, no GQA, SwiGLU 2048, vocab 32000, untied (134.1M):
                 our side reads the LlamaConfig below from a config.json written to WORKDIR
    llama-3-8b   32 layers x 4096, 32 heads over 8, SwiGLU 14336, vocab 128256, rope 500000,
                 untied (8.03B): our side runs the `llama:8b` preset (harness/model.py), drawn on
                 the GPU as gpt-fast draws its own (`with torch.device("cuda")`)
"""

import json
from pathlib import Path


class PeerError(Exception):
    """Bad usage or a failed process: one line, exit 2."""


# transformers' LlamaConfig of gpt-fast's stories110M (its ModelArgs: block_size 2048, rope_base
# 10000, norm_eps 1e-5, intermediate find_multiple(2 * 4 * 768 / 3, 256) = 2048, untied output).
STORIES_110M = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 32000,
    "hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 12,
    "num_attention_heads": 12, "num_key_value_heads": 12, "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
    "attention_bias": False, "mlp_bias": False, "bos_token_id": 1, "eos_token_id": 2,
    "initializer_range": 0.02,
}
# gpt-fast name -> our --model (None: a directory holding the config) and its config.
MODELS = {"stories110M": (None, STORIES_110M), "llama-3-8b": ("llama:8b", None)}


def gpt_fast_name(name: str) -> str:
    if name not in MODELS:

        raise PeerError(f"--model must be one of {', '.join(MODELS)} (gpt-fast's names), "
                        f"got {name!r}")
    return name


def model_config(name: str) -> dict:
    """The LlamaConfig fields our side decodes with (the preset's, for a preset)."""
    preset, config = MODELS[gpt_fast_name(name)]
    if config is not None:
        return config
    from harness.model import build_config

    return {"model_type": "llama", **build_config(preset).to_diff_dict()}


def llama_config(name: str):
    """The transformers config our side decodes with."""
    preset, config = MODELS[gpt_fast_name(name)]
    from transformers import LlamaConfig

    from harness.model import build_config

    if preset is not None:
        return build_config(preset)
    return LlamaConfig(**{k: v for k, v in config.items() if k != "model_type"})


def our_model(name: str, workdir: Path) -> str:
    """Our --model for gpt-fast's `name`: the preset, or a directory with its config.json."""
    preset, config = MODELS[gpt_fast_name(name)]
    if preset is not None:
        return preset
    model_dir = workdir / name
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return str(model_dir)
