# A hand-written decoder with its own static KV cache, one CUDA graph a token, EOS checked every
# 4 tokens with .item(). Pure torch, no annotations.
import sys, torch, torch.nn as nn, torch.nn.functional as F
dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
torch.manual_seed(0)
L, D, H, V, T = (4, 512, 8, 8000, 128) if dev == "cuda" else (2, 64, 2, 100, 64)
B = 4
class Block(nn.Module):
    def __init__(s):
        super().__init__(); s.qkv = nn.Linear(D, 3 * D); s.o = nn.Linear(D, D)
        s.ff = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
        s.n1 = nn.LayerNorm(D); s.n2 = nn.LayerNorm(D)
        s.register_buffer("k", torch.zeros(B, H, T, D // H)); s.register_buffer("v", torch.zeros(B, H, T, D // H))
    def forward(s, x, pos, mask):
        q, k, v = s.qkv(s.n1(x)).view(B, 1, 3, H, D // H).permute(2, 0, 3, 1, 4)
        s.k.index_copy_(2, pos, k); s.v.index_copy_(2, pos, v)
        a = F.scaled_dot_product_attention(q, s.k, s.v, attn_mask=mask)
        x = x + s.o(a.transpose(1, 2).reshape(B, 1, D))
        return x + s.ff(s.n2(x))
class LM(nn.Module):
    def __init__(s):
        super().__init__(); s.emb = nn.Embedding(V, D); s.blocks = nn.ModuleList(Block() for _ in range(L)); s.head = nn.Linear(D, V)
    def forward(s, tok, pos):
        mask = (torch.arange(T, device=tok.device) <= pos).view(1, 1, 1, T)
        x = s.emb(tok)
        for b in s.blocks: x = b(x, pos, mask)
        return s.head(x)[:, -1]
model = LM().to(dev).eval()
tok = torch.zeros(B, 1, dtype=torch.long, device=dev); pos = torch.zeros(1, dtype=torch.long, device=dev)
def step():
    nxt = model(tok, pos).argmax(-1, keepdim=True)
    tok.copy_(nxt); pos.add_(1)
    return nxt
with torch.no_grad():
    if dev == "cuda":
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3): step()
        torch.cuda.current_stream().wait_stream(s)
        pos.zero_(); g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g): out = step()
        run = g.replay
    else:
        run = step
    pos.zero_(); toks = []
    for i in range(min(96, T - 4)):
        run(); toks.append(tok.clone())
        if i % 4 == 3 and bool((tok == 7).all().item()): break
print(len(toks))
