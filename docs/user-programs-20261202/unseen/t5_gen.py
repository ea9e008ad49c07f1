# An encoder-decoder: T5 config, random weights, greedy generate(); window opened by the program.
import sys, torch
from transformers import T5Config, T5ForConditionalGeneration
dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
torch.manual_seed(0)
cfg = T5Config(d_model=256, d_ff=1024, num_layers=4, num_heads=4, vocab_size=4000, decoder_start_token_id=0)
m = T5ForConditionalGeneration(cfg).to(dev).eval()
ids = torch.randint(0, 4000, (2, 40), device=dev)
with torch.no_grad():
    m.generate(ids, max_new_tokens=8, min_new_tokens=8)   # warm-up
    if dev == "cuda": torch.cuda.profiler.start()
    out = m.generate(ids, max_new_tokens=32, min_new_tokens=32)
    if dev == "cuda": torch.cuda.synchronize(); torch.cuda.profiler.stop()
print(out.shape)
