"""A greedy decode loop over a Hugging Face causal LM, instrumented for gapscope in three lines.

    python examples/hf_decode.py --device cpu --size tiny             # a few seconds on a CPU
    gapscope profile -- python examples/hf_decode.py --model llama    # on a GPU: capture steps
                                                                      # 31..50 and analyse them

The model is built from a transformers config with seeded random weights (no download): `gpt2`,
`llama`, `qwen2` or `mistral` at `--size tiny` (CPU tests) or `small` (about GPT-2's size), or
`--model PATH`, a local directory with a config.json (and its weights, when there).
Only `harness.profiling` comes from gapscope: copy this file and the loop is yours.
"""

import argparse
import hashlib
import inspect
import os
import sys
import time
from pathlib import Path

# Never reach the hub, even for a config lookup.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Run from a checkout without installing it: the harness package lies beside examples/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import transformers  # noqa: E402

from harness.profiling import profiled_steps  # noqa: E402

# Shapes per family and size: tiny for CPU tests, small about GPT-2's 124M (GQA where the family
# has it). Vocabularies are the family's own at small, 1024 at tiny (fast on a CPU).
SHAPES = {
    "tiny": dict(hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, vocab=1024),
    "small": dict(hidden=768, layers=12, heads=12, kv_heads=4, ffn=2048, vocab=32000),
}
FAMILIES = ("gpt2", "llama", "qwen2", "mistral")


def make_config(family: str, size: str) -> transformers.PretrainedConfig:
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


def load_model(name: str, size: str, dtype: torch.dtype, device: str, seed: int):
    torch.manual_seed(seed)
    path = Path(name)
    if name not in FAMILIES:
        if not (path / "config.json").is_file():
            sys.exit(f"hf_decode: error: --model {name}: neither one of {', '.join(FAMILIES)} "
                     "nor a directory with a config.json")
        if any(path.glob("*.safetensors")) or any(path.glob("*.bin")):
            model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        else:  # a config alone: random weights of that shape
            config = transformers.AutoConfig.from_pretrained(path)
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
    else:
        model = transformers.AutoModelForCausalLM.from_config(make_config(name, size), dtype=dtype)
    return model.to(device).eval()


def parse_window(spec: str) -> tuple[int, int] | None:
    if spec == "none":
        return None
    start, stop = (int(x) for x in spec.split(":"))
    return start, stop


def cache_kwarg(model) -> str:
    """transformers 5.17 names the cache `past_key_values`; later 5.x releases call it `cache`."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def decode(model, args) -> dict:
    """Greedy decode: prefill outside the steps, then one NVTX `Step i` per generated token."""
    device = next(model.parameters()).device
    vocab = model.config.vocab_size
    eos = model.config.eos_token_id
    eos = eos[0] if isinstance(eos, list) else eos
    gen = torch.Generator().manual_seed(args.seed)
    prompt = torch.randint(0, vocab, (args.batch, args.prompt_len), generator=gen).to(device)
    tokens = [prompt]
    with torch.inference_mode(), profiled_steps(window=parse_window(args.window),
                                                timeline=args.timeline) as prof:
        # The cache fills in place, so each step passes the same object.
        cache = {cache_kwarg(model): transformers.DynamicCache(config=model.config)}
        next_ids = model(prompt, use_cache=True, **cache).logits[:, -1:].argmax(-1)
        finished = torch.zeros(args.batch, dtype=torch.bool, device=device)
        t0 = time.perf_counter()
        steps = 0
        for i in range(1, args.new_tokens + 1):
            with prof.step(i):
                with prof.forward():
                    logits = model(next_ids, use_cache=True, **cache).logits
                next_ids = logits[:, -1:].argmax(-1)
                tokens.append(next_ids)
                finished |= next_ids.squeeze(1) == eos
                steps = i
                with prof.check():
                    if bool(finished.all()):  # one host sync a step, as most loops have
                        break
        seconds = time.perf_counter() - t0
    ids = torch.cat(tokens, dim=1).cpu()
    return {"steps": steps, "ms_per_step": 1e3 * seconds / steps, "timeline": prof.timeline(),
            "tokens_sha256": hashlib.sha256(ids.numpy().tobytes()).hexdigest()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="gpt2", help=f"{', '.join(FAMILIES)} or a local directory")
    p.add_argument("--size", choices=sorted(SHAPES), default="small", help="default: small")
    p.add_argument("--device", default="cuda", help="cuda or cpu (default: cuda)")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="default: fp32")
    p.add_argument("--batch", type=int, default=8, help="default: 8")
    p.add_argument("--prompt-len", type=int, default=16, help="default: 16")
    p.add_argument("--new-tokens", type=int, default=60, help="default: 60")
    p.add_argument("--window", default="30:50",
                   help="START:STOP, capture steps START+1..STOP, or none (default: 30:50)")
    p.add_argument("--timeline", action="store_true",
                   help="CUDA events around each step; prints the GPU's median step period")
    p.add_argument("--seed", type=int, default=0, help="weights and prompt (default: 0)")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("hf_decode: error: CUDA is not available here: pass --device cpu")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    model = load_model(args.model, args.size, dtype, args.device, args.seed)
    result = decode(model, args)
    line = (f"hf_decode: {args.model} ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M "
            f"parameters), batch {args.batch}: {result['steps']} steps, "
            f"{result['ms_per_step']:.3f} ms/step (host), tokens sha256 "
            f"{result['tokens_sha256'][:12]}")
    if result["timeline"]:
        t = result["timeline"]
        periods = sorted(b - a for a, b in zip(t["end_ns"], t["end_ns"][1:], strict=False))
        if periods:
            line += f", GPU step period median {periods[len(periods) // 2] / 1e6:.3f} ms"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
