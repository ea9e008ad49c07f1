# A character-level GRU sampler: cuDNN's GRU, multinomial sampling, one .item() a character.
import sys, torch, torch.nn as nn
dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
torch.manual_seed(0)
V, E, Hd = 96, 128, 512
emb, gru, head = nn.Embedding(V, E).to(dev), nn.GRU(E, Hd, num_layers=2, batch_first=True).to(dev), nn.Linear(Hd, V).to(dev)
def sample(n):
    out, h = [], None
    c = torch.tensor([[1]], device=dev)
    with torch.no_grad():
        for _ in range(n):
            y, h = gru(emb(c), h)
            p = torch.softmax(head(y[:, -1]) / 0.9, -1)
            c = torch.multinomial(p, 1)
            out.append(chr(32 + c.item() % 95))
    return "".join(out)
for _ in range(2):
    print(sample(80)[:20])
