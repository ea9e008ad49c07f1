"""One device call (H200): `fused` at llama:8b in bf16, three ways in one process, interleaved (each
round builds, warms and times each way in turn, one CUDA graph alive at a time):
rule (GEMV_TUNED empty: every GEMV our Triton kernel, 5 kernels a layer), mix (GEMV_TUNED's cuBLAS
and split-K GEMVs with a norm kernel of their own: 10 a layer, the step before the fold) and
folded (the same GEMVs, the norm made by the split sums: 8 a layer). The log of the first call,
fold-glu.log, is of an earlier folded step that also made silu(gate) * up in the down GEMV's
prologue (7 a layer): dropped, as that step ran 7.08 ms a token against mix's 4.87. Timed: ms a
token by CUDA events over 100 tokens, and the floor share; then a torch.profiler kernel table
of `folded` at batch 1. Output fold.json and stdout (fold.log) beside it.
Run from the repository root as `OUT=DIR python3 docs/sizes-20261202/fold.py`. The timing is
harness.instrument's LoopSpan (an event at step 1's start, one at step 100's end); fold.log was made
by a copy of this file that held the same two events in a class of its own."""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.getcwd())
from harness import llama_fused, llama_ops  # noqa: E402
from harness.bench import copy_bytes_per_s  # noqa: E402
from harness.config import RunConfig, validate  # noqa: E402
from harness.floor import floor, model_shape  # noqa: E402
from harness.instrument import loop_span_window, no_window  # noqa: E402
from harness.model import build_model, weight_bytes  # noqa: E402
from harness.run import make_decoder  # noqa: E402

T0 = time.monotonic()
OUT = os.environ.get("OUT", "/tmp/out")
ROUNDS = int(os.environ.get("FOLD_ROUNDS", "3"))
R = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": {}}
TUNED = dict(llama_ops.GEMV_TUNED)
FOLDED = llama_fused.linear_residual


def log(s):
    print(f"[{time.monotonic() - T0:6.1f}s] {s}", flush=True)


def save():
    with open(os.path.join(OUT, "fold.json"), "w") as f:
        json.dump(R, f, indent=1)


def unfolded(y, w, bias, x, then_norm=None):
    """The step before the fold: the split sum, then torch's RMSNorm kernel."""
    FOLDED(y, w, bias, x)
    return F.rms_norm(x, x.shape[-1:], *then_norm) if then_norm is not None else None


def setup(way):
    llama_ops.GEMV_TUNED.clear()
    if way != "rule":
        llama_ops.GEMV_TUNED.update(TUNED)
    llama_fused.linear_residual = unfolded if way == "mix" else FOLDED


def cfg(batch):
    return validate(RunConfig(variant="fused", model="llama:8b", batch=batch, new_tokens=100,
                              dtype="bf16", matmul_precision="high", stop="none", device="cuda"))


rate = copy_bytes_per_s("cuda")
R["copy_bytes_per_s"] = rate
m = build_model("llama:8b", "bf16", "cuda", seed=0)
shape = model_shape(m.config, 2, weight_bytes(m))
log(f"copy rate {rate / 1e9:.0f} GB/s; 8b built")
tokens = {}


def timed(way, b):
    """A decoder built for this way alone (one CUDA graph alive at a time), warmed, then one
    timed run of 100 tokens: ms a token."""
    setup(way)
    decode = make_decoder(m, cfg(b))
    tokens.setdefault((way, b), decode(no_window())["tokens"].cpu())
    w = loop_span_window(100)
    decode(w)
    ms = w.timeline.ms_per_step()
    del decode
    torch.cuda.synchronize()
    return ms


for r in range(ROUNDS):
    for b in (1, 8):
        for way in ("rule", "mix", "folded"):
            ms = timed(way, b)
            R["rows"].setdefault(f"{way}/b{b}", []).append(ms)
            log(f"round {r + 1} {way} b{b}: {ms:.3f} ms/token")
            save()
for b in (1, 8):
    for a in ("rule", "mix"):
        R[f"tokens_equal_{a}_folded_b{b}"] = float(
            (tokens[a, b] == tokens["folded", b]).float().mean())
for key, runs in R["rows"].items():
    b = int(key.split("/b")[1])
    med = statistics.median(runs)
    fl = floor(shape, "fused", b, 100, range(100), rate, med)
    R.setdefault("summary", {})[key] = {"ms": med, "min": min(runs), "max": max(runs),
                                        "floor_ms": fl["floor_ms_per_step"],
                                        "floor_pct": fl["floor_pct"]}
    log(f"{key}: {med:.3f} ms/token ({min(runs):.3f}-{max(runs):.3f}), "
        f"{fl['floor_pct']:.1f}% of the {fl['floor_ms_per_step']:.3f} ms floor")
save()

# The kernel table of folded at batch 1: 20 tokens under torch.profiler (graph replays: CUPTI
# reports each node's kernel).
setup("folded")
from torch.profiler import ProfilerActivity, profile  # noqa: E402

decode = make_decoder(m, cfg(1))
decode(no_window())
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    decode(no_window())
    torch.cuda.synchronize()
table = {}
for e in prof.events():
    if e.device_type == torch.autograd.DeviceType.CUDA:
        t = table.setdefault(e.name, [0, 0.0])
        t[0] += 1
        t[1] += e.device_time
steps = 100  # the prefill's own kernels are few and named apart
R["kernels_folded_b1"] = sorted(({"name": k[:120], "per_step": c / steps, "us_each": us / c,
                                  "us_per_step": us / steps} for k, (c, us) in table.items()),
                                key=lambda row: -row["us_per_step"])
for row in R["kernels_folded_b1"][:14]:
    log(f"{row['per_step']:6.1f} x {row['us_each']:8.2f} us = {row['us_per_step']:8.1f} us/step "
        f"{row['name'][:60]}")
R["total_s"] = time.monotonic() - T0
save()
log("done")
