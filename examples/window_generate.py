"""A program that opens its own capture window: a warm-up `generate()`, then the timed one inside
`torch.cuda.profiler.start()` / `stop()`, as people mark the part they care about for nsys.

    python examples/window_generate.py --device cpu --size tiny   # a CPU check (no window)
    gapscope profile -- python examples/window_generate.py        # on a GPU: the window's steps

gapscope captures only the window (nsys's cudaProfilerApi range), and its untraced twin times
the same steps inside the same window. `--cache static` lets transformers compile the decode step
with CUDA graphs itself. The model is built from a config with seeded random weights.
"""

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from generate import SHAPES, load  # noqa: E402


def window(device: str):
    """The profiler window: torch.cuda.profiler's own (cudaProfilerStart/Stop) on a GPU; on a
    CPU there is no CUDA profiler to start."""
    if device == "cuda":
        return torch.cuda.profiler.profile()
    return contextlib.nullcontext()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="gpt2", help="gpt2, llama, qwen2, mistral or a directory")
    p.add_argument("--size", choices=sorted(SHAPES), default="small")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--prompt-len", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=48)
    p.add_argument("--cache", choices=["static", "dynamic"], default="dynamic")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("window_generate: error: CUDA is not available here: pass --device cpu")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    model = load(args.model, args.size, dtype, args.device)
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, model.config.vocab_size, (args.batch, args.prompt_len),
                           generator=gen).to(args.device)
    kwargs = dict(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=False,
                  pad_token_id=model.config.eos_token_id, attention_mask=torch.ones_like(prompt))
    if args.cache == "static":
        kwargs["cache_implementation"] = "static"
    with torch.inference_mode():
        model.generate(prompt, **kwargs)  # warm-up, outside the window
        if args.device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with window(args.device):
            out = model.generate(prompt, **kwargs)
            if args.device == "cuda":
                torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    new = out.shape[1] - args.prompt_len
    print(f"window_generate: {args.model} {args.cache} cache, batch {args.batch}: {new} tokens, "
          f"{1e3 * seconds / new:.3f} ms/token (host, inside the window)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
