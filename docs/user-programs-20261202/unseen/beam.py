# Beam search with transformers generate(): GPT-2 config, random weights, no annotations.
import sys, torch
from transformers import GPT2Config, GPT2LMHeadModel
dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
torch.manual_seed(0)
cfg = GPT2Config(n_layer=6, n_embd=512, n_head=8) if dev == "cuda" else GPT2Config(n_layer=2, n_embd=64, n_head=2)
model = GPT2LMHeadModel(cfg).to(dev).eval()
ids = torch.randint(0, cfg.vocab_size, (2, 24), device=dev)
with torch.no_grad():
    out = model.generate(ids, attention_mask=torch.ones_like(ids), num_beams=4, max_new_tokens=24,
                         min_new_tokens=24, do_sample=False, pad_token_id=0)
print(out.shape)
