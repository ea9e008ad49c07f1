"""A small Llama-shaped decoder with its own static KV cache, written the way gpt-fast writes one:
`prefill` -> `decode_one_token` -> a loop. No profiling code: examples/decode_loop.py drives it.

Random weights (seeded); RMSNorm, rotary embeddings, SwiGLU, one KV cache per layer written at
`input_pos`. Shapes in comments: B batch, T tokens, H heads, D head size, S cache length.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, batch: int, max_len: int):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.wqkv = nn.Linear(dim, 3 * dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        shape = (batch, heads, max_len, self.head_dim)
        self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape), persistent=False)

    def forward(self, x, rope, mask, input_pos):
        b, t, _ = x.shape  # x: [B, T, dim]
        q, k, v = self.wqkv(x).view(b, t, 3, self.heads, self.head_dim).unbind(2)
        q, k = rotate(q, rope), rotate(k, rope)
        q, k, v = (y.transpose(1, 2) for y in (q, k, v))  # [B, H, T, D]
        self.k_cache.index_copy_(2, input_pos, k)
        self.v_cache.index_copy_(2, input_pos, v)
        y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask)
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, ffn: int, batch: int, max_len: int):
        super().__init__()
        self.attn = Attention(dim, heads, batch, max_len)
        self.w13 = nn.Linear(dim, 2 * ffn, bias=False)
        self.w2 = nn.Linear(ffn, dim, bias=False)
        self.norm1, self.norm2 = nn.RMSNorm(dim), nn.RMSNorm(dim)

    def forward(self, x, rope, mask, input_pos):
        x = x + self.attn(self.norm1(x), rope, mask, input_pos)
        gate, up = self.w13(self.norm2(x)).chunk(2, dim=-1)
        return x + self.w2(F.silu(gate) * up)


class ToyLM(nn.Module):
    def __init__(self, vocab=32000, dim=768, layers=12, heads=12, ffn=2048, batch=1,
                 max_len=256):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, ffn, batch, max_len) for _ in range(layers))
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.register_buffer("rope", rope_table(max_len, dim // heads), persistent=False)
        causal = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))
        self.register_buffer("causal", causal, persistent=False)

    def forward(self, idx, input_pos):
        # idx: [B, T], input_pos: [T]
        mask = self.causal[None, None, input_pos]  # [1, 1, T, S]
        rope = self.rope[input_pos]
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x, rope, mask, input_pos)
        return self.head(self.norm(x))  # [B, T, vocab]


def rope_table(max_len: int, head_dim: int, base: float = 10000.0) -> torch.Tensor:
    freqs = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(max_len).float(), freqs)  # [S, D/2]
    return torch.stack([angles.cos(), angles.sin()], dim=-1)  # [S, D/2, 2]


def rotate(x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
    # x: [B, T, H, D], rope: [T, D/2, 2]
    x2 = x.float().reshape(*x.shape[:-1], -1, 2)
    cos, sin = rope[None, :, None, :, 0], rope[None, :, None, :, 1]
    out = torch.stack([x2[..., 0] * cos - x2[..., 1] * sin, x2[..., 1] * cos + x2[..., 0] * sin],
                      dim=-1)
    return out.flatten(3).type_as(x)


def sample(logits: torch.Tensor, top_p: float | None) -> torch.Tensor:
    # logits: [B, vocab] -> [B, 1]
    if top_p is None:
        return logits.argmax(-1, keepdim=True)
    probs = torch.softmax(logits.float(), dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    keep = sorted_probs.cumsum(-1) - sorted_probs < top_p
    sorted_probs = sorted_probs * keep
    choice = torch.multinomial(sorted_probs, 1)
    return order.gather(-1, choice)


def prefill(model, prompt: torch.Tensor, top_p: float | None) -> torch.Tensor:
    input_pos = torch.arange(prompt.shape[1], device=prompt.device)
    return sample(model(prompt, input_pos)[:, -1], top_p)


def decode_one_token(model, token, input_pos, top_p: float | None = None):
    # token: [B, 1], input_pos: [1]
    return sample(model(token, input_pos)[:, -1], top_p)
