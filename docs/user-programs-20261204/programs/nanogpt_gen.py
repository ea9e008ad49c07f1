"""nanoGPT's own GPT.generate(), as a cloned repository is used: its folder put on sys.path and
its model.py imported unchanged; GPT-2 small's shape (12 layers, 768 wide), random weights, its
sample.py's way (eval, bf16 autocast, top-k 200, temperature 0.8), no KV cache (nanoGPT has none).
A driver, no gapscope in it.

    python3 nanogpt_gen.py --nanogpt DIR [--new-tokens 100] [--samples 2]
"""

import argparse
import sys
import time
from contextlib import nullcontext

import torch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nanogpt", required=True)
    p.add_argument("--new-tokens", type=int, default=100)
    p.add_argument("--samples", type=int, default=2)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    sys.path.insert(0, args.nanogpt)
    from model import GPT, GPTConfig  # nanoGPT's own

    torch.manual_seed(1337)
    config = GPTConfig(block_size=1024, vocab_size=50304, n_layer=args.layers, n_head=12,
                       n_embd=768, dropout=0.0, bias=False)
    model = GPT(config).eval().to(args.device)
    ctx = (torch.amp.autocast(device_type="cuda", dtype=torch.bfloat16)
           if args.device == "cuda" else nullcontext())
    x = torch.randint(0, 50257, (1, 16), device=args.device)
    with torch.no_grad(), ctx:
        for k in range(args.samples):
            start = time.perf_counter()
            y = model.generate(x, args.new_tokens, temperature=0.8, top_k=200)
            ms = (time.perf_counter() - start) * 1e3 / args.new_tokens
            print(f"nanogpt_gen: sample {k + 1}: {y.shape[-1]} tokens, {ms:.3f} ms a token")


if __name__ == "__main__":
    main()
