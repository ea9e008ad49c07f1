"""The one device call of issue 33 (H200): the new shapes on the GPU; its output is probe.json
and probe.log beside it. Run from a copy of the tree as `OUT=DIR python3 probe.py`. Its ms a token
are harness.instrument's LoopSpan's (an event at step 1's start, one at the last step's end);
probe.log was made by a copy that held the same two events in a class of its own."""
import json
import os
import sys
import time
import traceback
from dataclasses import replace

T0 = time.monotonic()
BUDGET = float(os.environ.get("PROBE_BUDGET", "150"))
OUT = os.environ.get("OUT", "/tmp/out")
sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
R = {"t_import": None}


def el():
    return time.monotonic() - T0


def log(s):
    print(f"[{el():6.1f}s] {s}", flush=True)


def save():
    with open(os.path.join(OUT, "probe.json"), "w") as f:
        json.dump(R, f, indent=1, default=str)


def left():
    return BUDGET - el()


import torch  # noqa: E402

from harness.bench import copy_bytes_per_s  # noqa: E402
from harness.config import RunConfig, validate  # noqa: E402
from harness.floor import floor, model_shape  # noqa: E402
from harness.instrument import loop_span_window, no_window  # noqa: E402
from harness.model import build_model, model_record, weight_bytes  # noqa: E402
from harness.run import make_decoder  # noqa: E402
from harness.variants import set_expandable_segments  # noqa: E402

R["t_import"] = el()
R["gpu"] = torch.cuda.get_device_name()
R["versions"] = {"torch": torch.__version__, "transformers": __import__("transformers").__version__}
rate = copy_bytes_per_s("cuda")
R["copy_bytes_per_s"] = rate
log(f"copy rate {rate / 1e9:.0f} GB/s")


def cfg_of(name, variant, batch, n, dtype="bf16", prec="high", stop="none"):
    return validate(RunConfig(variant=variant, model=name, batch=batch, new_tokens=n, dtype=dtype,
                              matmul_precision=prec, stop=stop, device="cuda"))


def ms_per_token(model, cfg, runs=3):
    decode = make_decoder(model, cfg)
    decode(no_window())
    ms = []
    for _ in range(runs):
        w = loop_span_window(cfg.new_tokens)
        r = decode(w)
        ms.append(w.timeline.ms_per_step())
    tokens = decode(no_window())["tokens"]
    return sorted(ms)[len(ms) // 2], ms, tokens, r


def floor_of(model, variant, batch, n, ms=None):
    shape = model_shape(model.config, next(model.parameters()).element_size(), weight_bytes(model))
    return floor(shape, variant, batch, n, range(n), rate, ms)


def section(name, fn):
    if left() < 5:
        R.setdefault("skipped", []).append(name)
        log(f"{name}: skipped (time)")
        return
    log(f"{name}: start")
    try:
        fn()
    except Exception as e:  # keep going: one section's failure is data
        R.setdefault("errors", {})[name] = traceback.format_exc()[-3000:]
        log(f"{name}: FAILED {type(e).__name__}: {str(e)[:300]}")
    save()


M = {}


def build8():
    torch.cuda.synchronize()
    t = time.monotonic()
    m = build_model("llama:8b", "bf16", "cuda", seed=0)
    torch.cuda.synchronize()
    R["init_8b_s"] = time.monotonic() - t
    R["model_8b"] = model_record("llama:8b", m)
    R["weight_bytes_8b"] = weight_bytes(m)
    M["8b"] = m
    log(f"8b built in {R['init_8b_s']:.2f} s, {R['model_8b']['parameters']} params")


def sweep8():
    import gemv_sweep as G
    from harness import llama_ops as O
    from harness.llama_fused import new_fused_llama

    m = M["8b"]
    kv = new_fused_llama(m, 1, 16)
    rows = G.sweep(m, kv, [1, 8], deadline=T0 + min(BUDGET - 60, el() + 45), log=log)
    for r in rows:
        r["copy_rate_share"] = r["gbps"] * 1e9 / rate
    R["gemv_rows"] = rows
    tuned = G.tuned(rows, 2)
    R["gemv_tuned"] = {str(k): v for k, v in tuned.items()}
    M["tuned"] = tuned
    del kv
    O.GEMV_TUNED.clear()


def fused8(table):
    from harness import llama_ops as O

    m = M["8b"]
    out = R.setdefault("fused_8b", {})
    O.GEMV_TUNED.clear()
    if table == "tuned":
        O.GEMV_TUNED.update(M["tuned"])
    for b in (1, 8):
        med, ms, tok, _ = ms_per_token(m, cfg_of("llama:8b", "fused", b, 100), runs=3)
        fl = floor_of(m, "fused", b, 100, med)
        out[f"{table}/b{b}"] = {"ms": med, "runs": ms, "floor_ms": fl["floor_ms_per_step"],
                                "floor_pct": fl["floor_pct"]}
        M[f"fused_tok_b{b}"] = tok
        log(f"fused {table} b{b}: {med:.3f} ms/token, floor {fl['floor_ms_per_step']:.3f} "
            f"({fl['floor_pct']:.1f}%)")
        save()


def graphed8():
    m = M["8b"]
    out = {}
    for v in ("graphed",):
        for b in (1, 8):
            med, ms, tok, _ = ms_per_token(m, cfg_of("llama:8b", v, b, 100), runs=3)
            fl = floor_of(m, v, b, 100, med)
            out[f"{v}/b{b}"] = {"ms": med, "runs": ms, "floor_pct": fl["floor_pct"]}
            M[f"{v}_tok_b{b}"] = tok
            log(f"{v} b{b}: {med:.3f} ms/token ({fl['floor_pct']:.1f}% floor)")
    R["graphed_8b"] = out


def agree8():
    """bf16 tokens of fused/graphed against kv at 8B, batch 8, 100 tokens."""
    m = M["8b"]
    ref = make_decoder(m, cfg_of("llama:8b", "kv", 8, 100))(no_window())["tokens"]
    out = {"distinct_kv_tokens_row0": len(set(ref[0, 1:].tolist()))}
    for v in ("fused", "graphed"):
        tok = M.get(f"{v}_tok_b8")
        if tok is not None:
            out[v] = float((tok.cpu() == ref.cpu())[:, 1:].float().mean())
    R["agree_8b_bf16_b8"] = out
    log(f"8b bf16 agreement with kv: {out}")


RUNGS = ["kv", "naive", "kv-expandable", "static", "pipelined", "pipelined-seed", "deferred",
         "check-every-k", "graphed", "graphed-sync", "fused", "nocheck"]


def rungs(name, key, n=8, batch=1, extra=()):
    m = M[key]
    out = {}
    ref = None
    for v in RUNGS + list(extra):
        if left() < 8:
            out[v] = "skipped (time)"
            continue
        t = time.monotonic()
        try:
            c = cfg_of(name, v, batch, n, stop="uniform:3-6" if n >= 6 else "none")
            d = make_decoder(m, c)
            r = d(no_window())
            tok = r["tokens"].cpu()
            if v == "kv":
                ref = tok
            same = None if ref is None else bool(torch.equal(tok, ref))
            out[v] = {"s": round(time.monotonic() - t, 2), "steps_run": r["steps_run"],
                      "stop_step": r["stop_step"], "tokens_equal_kv": same}
        except Exception as e:
            out[v] = f"FAILED {type(e).__name__}: {str(e)[:400]}"
        set_expandable_segments(False)
        log(f"{name} {v}: {out[v]}")
    torch.cuda.empty_cache()
    return out


def rungs8():
    R["rungs_8b_bf16"] = rungs("llama:8b", "8b", n=8, batch=2)


def build1():
    M.pop("8b", None)
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    t = time.monotonic()
    M["1b"] = build_model("llama:1b", "bf16", "cuda", seed=0)
    torch.cuda.synchronize()
    R["init_1b_s"] = time.monotonic() - t
    R["model_1b"] = model_record("llama:1b", M["1b"])
    log(f"1b built in {R['init_1b_s']:.2f} s")


def fast1():
    m = M["1b"]
    out = {}
    for v in ("fused", "graphed"):
        for b in (1, 8):
            med, ms, tok, _ = ms_per_token(m, cfg_of("llama:1b", v, b, 100), runs=2)
            fl = floor_of(m, v, b, 100, med)
            out[f"{v}/b{b}"] = {"ms": med, "floor_pct": fl["floor_pct"]}
            log(f"1b {v} b{b}: {med:.3f} ms ({fl['floor_pct']:.1f}%)")
    R["fast_1b"] = out


def rungs1():
    R["rungs_1b_bf16"] = rungs("llama:1b", "1b", n=8, batch=2)


def fp32_reduced():
    """Reduced-layer copies at fp32 "highest": every own-step rung's tokens against kv."""
    M.pop("1b", None)
    torch.cuda.empty_cache()
    torch.set_float32_matmul_precision("highest")
    out = {}
    for name in ("llama:8b", "llama:1b"):
        m = build_model(name, "fp32", "cuda", seed=0, layers=2)
        ref = None
        res = {}
        for v in ("kv", "static", "graphed", "graphed-sync", "fused"):
            c = cfg_of(name, v, 8, 24, dtype="fp32", prec="highest", stop="uniform:10-20")
            r = make_decoder(m, c)(no_window())
            tok = r["tokens"].cpu()
            if v == "kv":
                ref = tok
                res["distinct_row0"] = len(set(tok[0, 1:].tolist()))
            res[v] = {"equal_kv": bool(torch.equal(tok, ref)), "stop_step": r["stop_step"]}
        out[name] = res
        log(f"fp32 2-layer {name}: {res}")
        del m
        torch.cuda.empty_cache()
    R["fp32_reduced"] = out
    torch.set_float32_matmul_precision("high")


def compiled_reduced():
    m = build_model("llama:8b", "bf16", "cuda", seed=0, layers=2)
    R["compiled_8b_2layer"] = {v: _one(m, v) for v in ("compiled", "hf-generate")}
    log(f"compiled 2-layer: {R['compiled_8b_2layer']}")


def _one(m, v):
    t = time.monotonic()
    try:
        r = make_decoder(m, cfg_of("llama:8b", v, 2, 8))(no_window())
        return {"s": round(time.monotonic() - t, 1), "steps_run": r["steps_run"]}
    except Exception as e:
        return f"FAILED {type(e).__name__}: {str(e)[:300]}"


section("build8", build8)
section("fused8-rule", lambda: fused8("rule"))  # the headline first, if the sweep runs long
section("sweep8", sweep8)
section("fused8-tuned", lambda: fused8("tuned") if "tuned" in M else None)
section("graphed8", graphed8)
section("rungs8", rungs8)
section("agree8", agree8)
section("build1", build1)
section("rungs1", rungs1)
section("fp32_reduced", fp32_reduced)
section("fast1", fast1)
section("compiled_reduced", compiled_reduced)
R["total_s"] = el()
save()
log("done")
