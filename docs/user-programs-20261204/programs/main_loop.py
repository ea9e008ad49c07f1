"""A decode loop and its model both written in this script, as many people write one: no
transformers, no module of its own, every function in `__main__`. A small Llama-like decoder
(RMSNorm, rotary, a static KV cache, SwiGLU), random weights, greedy, an `.item()` stop check a
token. `--compile` compiles the step function itself. No gapscope in it.

    python3 main_loop.py [--layers 8] [--new-tokens 100] [--batch 1] [--compile]
"""

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)).type_as(x) * self.weight


def rotate(x, cos, sin):
    # x: [B, H, S, D]
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, max_len: int, batch: int):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        shape = (batch, heads, max_len, self.head_dim)
        self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape), persistent=False)

    def forward(self, x, pos, cos, sin, mask):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(b, s, -1))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, max_len: int, batch: int):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.attn = Attention(dim, heads, max_len, batch)
        self.gate = nn.Linear(dim, 4 * dim, bias=False)
        self.up = nn.Linear(dim, 4 * dim, bias=False)
        self.down = nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x, pos, cos, sin, mask):
        x = x + self.attn(self.norm1(x), pos, cos, sin, mask)
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    def __init__(self, vocab: int, dim: int, heads: int, layers: int, max_len: int, batch: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, max_len, batch) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        half = dim // heads // 2
        freqs = 1.0 / (10000 ** (torch.arange(half).float() / half))
        angles = torch.outer(torch.arange(max_len).float(), freqs)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        self.max_len = max_len

    def forward(self, tokens, pos):
        # tokens: [B, S], pos: [S]
        x = self.embed(tokens)
        cos, sin = self.cos[pos].to(x.dtype), self.sin[pos].to(x.dtype)
        keys = torch.arange(self.max_len, device=tokens.device)
        mask = keys[None, :] <= pos[:, None]
        for block in self.blocks:
            x = block(x, pos, cos, sin, mask)
        return self.head(self.norm(x))


def greedy(logits):
    return logits[:, -1].argmax(-1, keepdim=True)


def decode_one_token(model, token, pos):
    return greedy(model(token, pos))


def finished(token, eos: int) -> bool:
    return bool((token == eos).all().item())


def generate(model, prompt, new_tokens: int, eos: int, step):
    pos = torch.arange(prompt.shape[1], device=prompt.device)
    token = greedy(model(prompt, pos))
    out = [token]
    for i in range(new_tokens - 1):
        pos = pos[-1:] + 1
        token = step(model, token, pos)
        out.append(token)
        if finished(token, eos):
            break
    return torch.cat(out, dim=1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--new-tokens", type=int, default=100)
    p.add_argument("--calls", type=int, default=3)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    model = Decoder(32000, args.dim, 16, args.layers, 16 + args.new_tokens, args.batch)
    model = model.to(device=args.device, dtype=dtype).eval()
    step = torch.compile(decode_one_token) if args.compile else decode_one_token
    prompt = torch.randint(0, 32000, (args.batch, 16), device=args.device)
    with torch.no_grad():
        for call in range(args.calls):
            start = time.perf_counter()
            out = generate(model, prompt, args.new_tokens, eos=-1, step=step)
            ms = (time.perf_counter() - start) * 1e3 / out.shape[1]
            print(f"main_loop: call {call + 1}: {out.shape[1]} tokens, {ms:.3f} ms a token")


if __name__ == "__main__":
    main()
