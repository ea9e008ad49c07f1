"""Another project's decode loop, as it is: no NVTX, no gapscope, one `.item()` stop check a token.

    python examples/decode_loop.py --device cpu --tiny                  # a CPU check
    gapscope profile -- python examples/decode_loop.py                  # eager, on a GPU
    gapscope profile -- python examples/decode_loop.py --compile        # one CUDA graph a token
    gapscope profile --step-function toy_lm:decode_one_token -- python examples/decode_loop.py

`--compile` wraps `decode_one_token` in `torch.compile(mode="reduce-overhead", fullgraph=True)`,
as gpt-fast does: after warm-up each token replays one CUDA graph. `--top-p P` samples with
top-p (sort, cumsum, multinomial: library kernels that bring their own NVTX ranges on some
builds) instead of greedily. The model is examples/toy_lm.py with random weights.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import toy_lm  # noqa: E402


def generate(model, prompt, new_tokens: int, decode, top_p, eos: int) -> torch.Tensor:
    token = toy_lm.prefill(model, prompt, top_p)
    tokens = [token]
    input_pos = torch.tensor([prompt.shape[1]], device=prompt.device)
    for _ in range(new_tokens - 1):
        # A CUDA graph's output is overwritten by the next replay: keep a copy.
        token = decode(model, token, input_pos, top_p).clone()
        input_pos += 1
        tokens.append(token)
        if (token == eos).all().item():  # the per-token host sync most loops have
            break
    return torch.cat(tokens, dim=1)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--new-tokens", type=int, default=100)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="bf16")
    p.add_argument("--tiny", action="store_true", help="2 layers of 64: for a CPU check")
    p.add_argument("--runs", type=int, default=2, help="generate() calls; the first warms up")
    args = p.parse_args()
    torch.manual_seed(0)
    shape = dict(vocab=1024, dim=64, layers=2, heads=4, ffn=128) if args.tiny else {}
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    with torch.device(args.device):
        model = toy_lm.ToyLM(batch=args.batch, max_len=16 + args.new_tokens, **shape)
    model = model.to(dtype).eval()
    decode = toy_lm.decode_one_token
    if args.compile:
        decode = torch.compile(decode, mode="reduce-overhead", fullgraph=True)
    prompt = torch.randint(0, model.embed.num_embeddings, (args.batch, 16), device=args.device)
    with torch.inference_mode():
        for run in range(args.runs):
            t0 = time.perf_counter()
            out = generate(model, prompt, args.new_tokens, decode, args.top_p, eos=2)
            if args.device == "cuda":
                torch.cuda.synchronize()
            ms = 1e3 * (time.perf_counter() - t0) / out.shape[1]
            print(f"decode_loop: run {run + 1}: {out.shape[1]} tokens, {ms:.3f} ms/token (host)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
