"""The fused Llama step's GEMVs one by one, at a model's own shapes and weights, against cuBLAS:
what gets a decode step's matrix reads near the copy rate (issue 33).

    python scripts/gemv_sweep.py [--model llama:8b] [--batches 1,8] [--json FILE]

Each op of a decoder layer (the joined QKV projection with its RMSNorm, gate and up with silu,
the o and down projections into the residual, the head's argmax partials) runs for every layer's
weights in turn (so no layer's weights are still in L2 from the last launch), captured in one
CUDA graph and replayed (no launch cost of Triton's Python launcher in the time), timed by CUDA
events: µs a launch, and the weights' bytes over it in GB/s beside the copy rate measured here
(harness/bench.copy_bytes_per_s: bytes moved, read + write). Triton is our kernel at each
candidate launch (block_n, block_k, warps, stages, split: harness/llama_ops.gemv_config), cuBLAS
is what `graphed` and fused's cuBLAS path call (F.linear, x.addmm_ for the residual ones).
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Launches tried for each kind, besides the rule's (harness/llama_ops.gemv_config).
CANDIDATES = {
    "norm": [(16, 256, 4, 3, 1), (32, 256, 4, 3, 1), (16, 512, 4, 3, 1), (32, 512, 8, 3, 1),
             (16, 256, 4, 4, 1), (32, 256, 4, 3, 2), (64, 256, 4, 3, 4)],
    "glu": [(16, 256, 4, 3, 1), (32, 256, 4, 3, 1), (32, 512, 8, 3, 1), (16, 512, 4, 3, 1),
            (64, 256, 8, 3, 1)],
    "residual": [(16, 256, 4, 3, 1), (16, 512, 4, 3, 1), (32, 512, 8, 3, 1), (16, 256, 4, 4, 1),
                 (32, 256, 4, 3, 2), (32, 256, 4, 3, 4), (64, 256, 4, 3, 4), (64, 512, 8, 3, 8)],
    "argmax": [(64, 256, 4, 3, 1), (128, 256, 8, 3, 1), (64, 512, 8, 3, 1)],
}


def layer_ops(model, kv: dict) -> list:
    """(op, kind, weights of every layer [(W, W2 or None, norm)], N, K) of the fused step."""
    layers = model.model.layers
    return [
        ("qkv", "norm", [(kv["qkv"][i][0], None, layers[i].input_layernorm) for i in
                         range(len(layers))]),
        ("o", "residual", [(b.self_attn.o_proj.weight, None, None) for b in layers]),
        ("gate_up", "glu", [(b.mlp.gate_proj.weight, b.mlp.up_proj.weight,
                             b.post_attention_layernorm) for b in layers]),
        ("down", "residual", [(b.mlp.down_proj.weight, None, None) for b in layers]),
        ("head", "argmax", [(model.lm_head.weight, None, model.model.norm)] * 4),
    ]


def triton_launch(kind: str, x, out, w, w2, norm):
    from harness import llama_ops as O

    nrm = (norm.weight, norm.variance_epsilon) if norm is not None else None
    if kind == "norm":
        return lambda: O.norm_linear(x, nrm, w)
    if kind == "glu":
        return lambda: O.norm_glu(x, nrm, w, w2)
    if kind == "residual":
        return lambda: O.linear_residual(x, w, None, out)
    return lambda: O.norm_argmax(x, nrm, w)


def cublas_launch(kind: str, x, out, w, w2, joined):
    import torch.nn.functional as F

    if kind == "residual":
        return lambda: out.addmm_(x, w.t())
    if kind == "argmax":
        return lambda: F.linear(x, w).max(-1)
    return lambda: F.linear(x, joined if joined is not None else w)


def time_graph(launches: list, replays: int = 3) -> float:
    """µs a launch: `launches` captured in one CUDA graph, replayed `replays` times."""
    import torch

    for f in launches:  # compile, warm
        f()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for f in launches:
            f()
    g.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        g.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / replays / len(launches)


def sweep(model, kv: dict, batches: list, deadline: float = float("inf"), log=print) -> list:
    """One row a (op, batch, backend, launch): µs, GB/s of its weights. Stops adding
    candidates once time.monotonic() passes `deadline` (the rule's and cuBLAS's rows first)."""
    import torch

    from harness import llama_ops as O

    rows = []
    saved = dict(O.GEMV_TUNED)
    for op, kind, ws in layer_ops(model, kv):
        w0, w2_0, _ = ws[0]
        n, k = w0.shape
        wbytes = w0.numel() * w0.element_size() * (2 if w2_0 is not None else 1)
        joined = ([torch.cat([w, w2]) for w, w2, _ in ws] if kind == "glu" else None)
        key = (kind, n, k, w0.element_size())
        for batch in batches:
            x = torch.randn(batch, k, dtype=w0.dtype, device=w0.device)
            out = torch.zeros(batch, n, dtype=w0.dtype, device=w0.device)
            cublas_us = time_graph([cublas_launch(kind, x, out, w, w2, joined[i] if joined
                                                  else None) for i, (w, w2, _) in enumerate(ws)])
            rows.append(_row(op, kind, n, k, batch, "cublas", None, cublas_us, wbytes))
            for cand in [None] + CANDIDATES[kind]:
                if cand is not None and time.monotonic() > deadline:
                    break
                O.GEMV_TUNED.pop(key, None)
                if cand is not None:
                    O.GEMV_TUNED[key] = cand
                launch = O.gemv_config(kind, n, k, w0.element_size())
                try:
                    t = time_graph([triton_launch(kind, x, out, w, w2, norm)
                                    for w, w2, norm in ws])
                except Exception as e:  # a launch over the shared memory, say: its row says so
                    log(f"gemv {op} b{batch} {list(launch)}: {type(e).__name__}")
                    continue
                rows.append(_row(op, kind, n, k, batch, "triton", list(launch), t, wbytes,
                                 rule=cand is None))
            O.GEMV_TUNED.clear()
            O.GEMV_TUNED.update(saved)
            best = min((r for r in rows if r["op"] == op and r["batch"] == batch),
                       key=lambda r: r["us"])
            log(f"gemv {op} b{batch}: cublas {cublas_us:.1f} µs, best "
                f"{best['backend']} {best['launch']} {best['us']:.1f} µs {best['gbps']:.0f} GB/s")
    return rows


def _row(op, kind, n, k, batch, backend, launch, us, wbytes, rule=False) -> dict:
    return {"op": op, "kind": kind, "n": n, "k": k, "batch": batch, "backend": backend,
            "launch": launch, "rule": rule, "us": us, "gbps": wbytes / us / 1e3}


def tuned(rows: list, itemsize: int) -> dict:
    """GEMV_TUNED from a sweep: each op's fastest Triton launch summed over the batches, or
    "cublas" where cuBLAS's sum is lower."""
    out = {}
    for op in dict.fromkeys(r["op"] for r in rows):
        mine = [r for r in rows if r["op"] == op]
        batches = {r["batch"] for r in mine}
        totals = {}
        for r in mine:
            totals.setdefault(tuple(r["launch"] or ("cublas",)), []).append(r["us"])
        full = {lc: sum(ts) for lc, ts in totals.items() if len(ts) == len(batches)}
        best = min(full, key=full.get)
        out[(mine[0]["kind"], mine[0]["n"], mine[0]["k"], itemsize)] = (
            "cublas" if best == ("cublas",) else best)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="gemv_sweep.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="llama:8b")
    p.add_argument("--batches", default="1,8")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    import torch

    from harness.bench import copy_bytes_per_s
    from harness.llama_fused import new_fused_llama
    from harness.model import build_model

    model = build_model(args.model, "bf16", "cuda", seed=0)
    kv = new_fused_llama(model, 1, 16)
    rate = copy_bytes_per_s("cuda")
    rows = sweep(model, kv, [int(b) for b in args.batches.split(",")],
                 log=lambda s: print(s, file=sys.stderr))
    for r in rows:
        r["copy_rate_share"] = r["gbps"] * 1e9 / rate
    best = {str(k): v for k, v in tuned(rows, next(model.parameters()).element_size()).items()}
    report = {"model": args.model, "copy_bytes_per_s": rate, "rows": rows, "tuned": best,
              "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    print(f"copy rate {rate / 1e9:.0f} GB/s; per op, µs median over batches:")
    for op in dict.fromkeys(r["op"] for r in rows):
        mine = [r for r in rows if r["op"] == op]
        cub = statistics.median(r["us"] for r in mine if r["backend"] == "cublas")
        tri = min(r["us"] for r in mine if r["backend"] == "triton")
        print(f"  {op:<8} cublas {cub:7.1f}  triton best {tri:7.1f}")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
