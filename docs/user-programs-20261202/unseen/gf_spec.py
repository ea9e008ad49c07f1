# gpt-fast's own generate() (pytorch-labs/gpt-fast generate.py), eager, random bf16 weights:
# a plain decode on stories110M, then speculative decoding with stories15M as the draft.
import os, sys, types
import torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.peer/gpt-fast"))
for name in ("sentencepiece", "tiktoken", "tiktoken.load"):
    try:
        __import__(name)
    except ImportError:
        mod = types.ModuleType(name); mod.load_tiktoken_bpe = None; sys.modules[name] = mod
import generate as gf
from model import Transformer

torch.manual_seed(0)
target = Transformer.from_name("stories110M").to("cuda", torch.bfloat16).eval()
draft = Transformer.from_name("stories15M").to("cuda", torch.bfloat16).eval()
prompt = torch.randint(0, 32000, (16,), device="cuda", dtype=torch.int)
kw = dict(temperature=0.8, top_k=200)
with torch.no_grad():
    seq, _ = gf.generate(target, prompt, 64, 1, interactive=False, draft_model=None, **kw)
    print("plain", seq.shape)
    seq, stats = gf.generate(target, prompt, 64, 1, interactive=False, draft_model=draft,
                             speculate_k=4, **kw)
    print("speculative", seq.shape, stats["accept_counts"])
