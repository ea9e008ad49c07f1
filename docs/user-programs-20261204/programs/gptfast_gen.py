"""gpt-fast's own generate(), as a cloned repository is used: its folder put on sys.path, its
generate.py and model.py imported unchanged; random weights at its stories110M shape (no
checkpoint), bf16, batch 1, top-k sampling (its defaults). `--compile` compiles decode_one_token
and prefill as its generate.py main() does. A driver, no gapscope in it.

    python3 gptfast_gen.py --gpt-fast DIR [--compile] [--new-tokens 100] [--calls 3]
"""

import argparse
import sys
import time
import types

import torch


def stand_ins() -> None:
    """generate.py imports its tokenizer's packages; where they are missing, empty modules."""
    try:
        import sentencepiece  # noqa: F401
        import tiktoken  # noqa: F401
        import tiktoken.load  # noqa: F401
    except ImportError:
        for name in ("sentencepiece", "tiktoken", "tiktoken.load"):
            module = types.ModuleType(name)
            module.load_tiktoken_bpe = None
            sys.modules.setdefault(name, module)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--gpt-fast", required=True)
    p.add_argument("--model", default="stories110M")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--new-tokens", type=int, default=100)
    p.add_argument("--calls", type=int, default=3)
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    sys.path.insert(0, args.gpt_fast)
    stand_ins()
    import generate as gf  # gpt-fast's own

    torch.manual_seed(0)
    with torch.device(args.device):
        model = gf.Transformer.from_name(args.model)
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    model = model.to(dtype=dtype).eval().requires_grad_(False)
    if args.compile:
        gf.decode_one_token = torch.compile(gf.decode_one_token, mode="reduce-overhead",
                                            fullgraph=True)
        gf.prefill = torch.compile(gf.prefill, fullgraph=True, dynamic=True)
    prompt = torch.randint(0, 32000, (8,), dtype=torch.int, device=args.device)
    for call in range(args.calls):
        start = time.perf_counter()
        with torch.no_grad():
            seq, _ = gf.generate(model, prompt, args.new_tokens, batch_size=1, interactive=False,
                                 draft_model=None, temperature=0.8, top_k=200)
        gf.device_sync(args.device)
        ms = (time.perf_counter() - start) * 1e3 / args.new_tokens
        print(f"gptfast_gen: call {call + 1}: {seq.shape[-1]} tokens, {ms:.3f} ms a token")


if __name__ == "__main__":
    main()
