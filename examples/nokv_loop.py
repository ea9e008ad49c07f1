"""A teaching loop, as it is: no KV cache, sampled with `torch.multinomial`, no NVTX, no gapscope.

    python examples/nokv_loop.py --device cpu --size tiny         # a few seconds on a CPU
    gapscope profile -- python examples/nokv_loop.py              # on a GPU: steps inferred

Every step runs the model over the whole sequence so far (`use_cache=False`), so each step's
work grows with it: cuBLAS picks other GEMM kernels, and drops split-K, as the length grows, and
no two stretches of steps launch the same kernels. The attention mask passed to the model is the
tokenizer's kind (all ones); transformers checks it on the host inside every forward (one
cudaStreamSynchronize a step). The model is a Hugging Face causal LM from a config with seeded
random weights (no download): gpt2, llama, qwen2 or mistral.
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


def sample(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    # logits: [B, vocab] -> [B, 1]
    probs = torch.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probs, num_samples=1)


def generate(model, prompt: torch.Tensor, new_tokens: int, temperature: float) -> torch.Tensor:
    # prompt: [B, T]; the whole sequence goes through the model every step.
    ids, mask = prompt, torch.ones_like(prompt)
    for _ in range(new_tokens):
        logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits[:, -1, :]
        next_id = sample(logits, temperature)
        ids = torch.cat([ids, next_id], dim=1)
        mask = torch.cat([mask, torch.ones_like(next_id)], dim=1)
    return ids[:, prompt.shape[1]:]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="gpt2", help="gpt2, llama, qwen2, mistral or a directory")
    p.add_argument("--size", choices=sorted(SHAPES), default="small")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=96)
    p.add_argument("--temperature", type=float, default=0.8)
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("nokv_loop: error: CUDA is not available here: pass --device cpu")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    model = load(args.model, args.size, dtype, args.device)
    torch.manual_seed(0)
    prompt = torch.randint(0, model.config.vocab_size, (args.batch, args.prompt_len),
                           device=args.device)
    with torch.inference_mode():
        t0 = time.perf_counter()
        out = generate(model, prompt, args.new_tokens, args.temperature)
        if args.device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    print(f"nokv_loop: {args.model}, batch {args.batch}: {out.shape[1]} tokens, "
          f"{1e3 * seconds / out.shape[1]:.3f} ms/token (host)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
