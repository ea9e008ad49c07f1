"""transformers' generate() with an assistant model (speculative decoding, greedy): a 12-layer
Llama-shaped target and a 2-layer draft of the same family, random weights. The draft's two
layers, embeddings, norm and head are the target's first two layers and its own, and the
target's later layers write nothing into the residual stream (their output projections zero):
the target runs all 12 layers and computes what the draft does, so the draft's tokens are
mostly accepted, as a well-matched draft's are. Four proposals a verification. No gapscope in it.

    python3 assisted.py [--new-tokens 96] [--calls 2]
"""

import argparse
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def models(device: str, dtype):
    torch.manual_seed(0)
    shape = dict(vocab_size=32000, hidden_size=768, intermediate_size=2048,
                 num_attention_heads=12, num_key_value_heads=12, max_position_embeddings=1024)
    target = LlamaForCausalLM(LlamaConfig(num_hidden_layers=12, **shape))
    draft = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, **shape))
    with torch.no_grad():
        for name, p in draft.named_parameters():
            p.copy_(target.get_parameter(name))
        for layer in target.model.layers[2:]:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    # Four proposals a verification, drafted whatever the draft's confidence (random weights
    # leave it low: transformers would stop drafting after one).
    draft.generation_config.num_assistant_tokens = 4
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0
    return (target.to(device=device, dtype=dtype).eval(),
            draft.to(device=device, dtype=dtype).eval())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--new-tokens", type=int, default=96)
    p.add_argument("--calls", type=int, default=2)
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    target, draft = models(args.device, dtype)
    prompt = torch.randint(0, 32000, (1, 16), device=args.device)
    for call in range(args.calls):
        start = time.perf_counter()
        out = target.generate(prompt, assistant_model=draft, max_new_tokens=args.new_tokens,
                              min_new_tokens=args.new_tokens, do_sample=False, pad_token_id=0)
        ms = (time.perf_counter() - start) * 1e3 / (out.shape[1] - prompt.shape[1])
        print(f"assisted: call {call + 1}: {out.shape[1] - prompt.shape[1]} new tokens, "
              f"{ms:.3f} ms a token")


if __name__ == "__main__":
    main()
