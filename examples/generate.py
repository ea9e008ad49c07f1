"""Decoding the way most people do: `model.generate()`, with no profiling code at all.

    python examples/generate.py --device cpu --size tiny        # a few seconds on a CPU
    gapscope profile -- python examples/generate.py             # on a GPU: the steps found by
                                                                # themselves, the sync's line

Nothing here knows about gapscope or NVTX: it is the program a user hands over as it is. The
model is a Hugging Face causal LM built from a config with seeded random weights (no download):
`gpt2`, `llama`, `qwen2` or `mistral`, or `--model PATH` (a local directory). Random weights never
emit EOS, so every sequence runs the full `--new-tokens`.
"""

import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

# The same shapes as examples/hf_decode.py: tiny for CPU tests, small about GPT-2's 124M.
SHAPES = {
    "tiny": dict(hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, vocab=1024),
    "small": dict(hidden=768, layers=12, heads=12, kv_heads=4, ffn=2048, vocab=32000),
}


def make_config(family: str, size: str):
    s = SHAPES[size]
    if family == "gpt2":
        vocab = s["vocab"] if size == "tiny" else 50257
        return transformers.GPT2Config(n_layer=s["layers"], n_embd=s["hidden"], n_head=s["heads"],
                                       vocab_size=vocab, bos_token_id=vocab - 1,
                                       eos_token_id=vocab - 1)
    config_class = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config,
                    "mistral": transformers.MistralConfig}[family]
    return config_class(hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                        num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
                        intermediate_size=s["ffn"], vocab_size=s["vocab"],
                        max_position_embeddings=2048, bos_token_id=1, eos_token_id=2)


def load(name: str, size: str, dtype, device: str):
    torch.manual_seed(0)
    if os.path.isdir(name):
        config = transformers.AutoConfig.from_pretrained(name)
    else:
        config = make_config(name, size)
    return transformers.AutoModelForCausalLM.from_config(config, dtype=dtype).to(device).eval()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="gpt2", help="gpt2, llama, qwen2, mistral or a directory")
    p.add_argument("--size", choices=sorted(SHAPES), default="small")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--prompt-len", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=100)
    p.add_argument("--cache", choices=["static", "dynamic"], default="static",
                   help="static: transformers compiles the decode step with CUDA graphs itself")
    p.add_argument("--warmup", type=int, default=1,
                   help="generate() calls before the timed one (compilation, allocator)")
    p.add_argument("--sample", action="store_true",
                   help="sample (top-k 50, top-p 0.9, temperature 0.8, repetition penalty 1.1) "
                        "instead of greedy: generate()'s processors and warpers, each step")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("generate: error: CUDA is not available here: pass --device cpu")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    model = load(args.model, args.size, dtype, args.device)
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, model.config.vocab_size, (args.batch, args.prompt_len),
                           generator=gen).to(args.device)
    kwargs = dict(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=False,
                  pad_token_id=model.config.eos_token_id,
                  attention_mask=torch.ones_like(prompt))
    if args.sample:
        kwargs |= dict(do_sample=True, top_k=50, top_p=0.9, temperature=0.8,
                       repetition_penalty=1.1)
    if args.cache == "static":
        kwargs["cache_implementation"] = "static"
    with torch.inference_mode():
        for _ in range(args.warmup):
            model.generate(prompt, **kwargs)
        if args.device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model.generate(prompt, **kwargs)
        if args.device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    new = out.shape[1] - args.prompt_len
    print(f"generate: {args.model} {args.cache} cache, batch {args.batch}: {new} tokens, "
          f"{1e3 * seconds / new:.3f} ms/token (host, whole generate())")
    return 0


if __name__ == "__main__":
    sys.exit(main())
