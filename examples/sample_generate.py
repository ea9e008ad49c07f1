"""`model.generate()` with sampling, as people call it: top-k, top-p, temperature and a
repetition penalty, on a Llama-family model; no profiling code at all.

    python examples/sample_generate.py --device cpu --size tiny   # a few seconds on a CPU
    gapscope profile -- python examples/sample_generate.py        # on a GPU: a step a forward

Sampling adds its own kernels to every step (the penalty's gather and scatter over the tokens so
far, top-k's and top-p's sorts, the multinomial draw). The model is built from a config with
seeded random weights (no download): llama (the default), qwen2, mistral or gpt2. Two calls:
the first warms up (allocator, cuBLAS, the first call's kernels), the second is timed.
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from generate import SHAPES, load  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama", help="llama, qwen2, mistral, gpt2 or a directory")
    p.add_argument("--size", choices=sorted(SHAPES), default="small")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="bf16")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--runs", type=int, default=2, help="generate() calls; the first warms up")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("sample_generate: error: CUDA is not available here: pass --device cpu")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    model = load(args.model, args.size, dtype, args.device)
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, model.config.vocab_size, (args.batch, args.prompt_len),
                           generator=gen).to(args.device)
    kwargs = dict(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=True,
                  temperature=0.7, top_k=50, top_p=0.9, repetition_penalty=1.1,
                  pad_token_id=model.config.eos_token_id, attention_mask=torch.ones_like(prompt))
    torch.manual_seed(0)
    with torch.inference_mode():
        for run in range(1, args.runs + 1):
            t0 = time.perf_counter()
            out = model.generate(prompt, **kwargs)
            if args.device == "cuda":
                torch.cuda.synchronize()
            new = out.shape[1] - args.prompt_len
            print(f"sample_generate: run {run}: {args.model}, batch {args.batch}: {new} tokens, "
                  f"{1e3 * (time.perf_counter() - t0) / new:.3f} ms/token (host)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
