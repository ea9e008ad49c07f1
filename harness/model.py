"""GPT-2 built from its config with seeded random weights: no download, no hub access."""

import os

# Build from config only: never reach the hub, even for a config lookup.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

EOS = 50256  # GPT-2's <|endoftext|>: both BOS and EOS
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def gpt2_config(name: str) -> GPT2Config:
    """'gpt2': the 124M model; 'tiny': 2 layers, 64 wide, full vocab (EOS exists), 1024 positions.

    The tiny model draws wider weights (std 0.2): at GPT-2's 0.02 its greedy output is one token
    repeated, which would make token-identity tests nearly blind.
    """
    if name == "gpt2":
        return GPT2Config()
    return GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=1024, initializer_range=0.2)


def build_model(name: str, dtype: str, device: str, seed: int) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    config = gpt2_config(name)
    # SDPA is the eager default; naming it keeps every variant on the same attention kernels.
    config._attn_implementation = "sdpa"
    model = GPT2LMHeadModel(config)
    return model.to(device=device, dtype=DTYPES[dtype]).eval().requires_grad_(False)


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of parameters read once per decode step (tied wte/lm_head counted once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())
