"""Issue 42's first look on the H200: mega's tokens against kv (fp32, "highest") and fused
(bf16), then ms/token beside fused and while-fused, and a sweep of its launch settings.
Run from the project root: python3 docs/mega-20261204/probe.py OUT.json"""

import json
import statistics
import sys
import time
from dataclasses import replace

import torch

from harness import llama_mega as M
from harness import variants as V
from harness.config import RunConfig, validate
from harness.decode import new_state
from harness.instrument import no_window
from harness.model import special_tokens
from harness.run import load_model, make_decoder
from harness.stops import stop_steps

OUT = {}


def log(*a):
    print(*a, flush=True)


def cfg_of(model, variant, **kw):
    return validate(RunConfig(**{**dict(variant=variant, model=model, device="cuda"), **kw}))


def state(model, cfg):
    bos, eos = special_tokens(model.config)
    return new_state(cfg.batch, cfg.new_tokens, stop_steps(cfg.stop, cfg.batch, cfg.new_tokens,
                                                            cfg.stop_seed), "cuda", 0, bos, eos)


def mega_run(model, cfg, loop=False, **kw):
    st = state(model, cfg)
    eager, kv = M.mega_eager(model, cfg, st, **kw)
    if loop:
        from harness.while_graph import while_loop
        return M.checked(while_loop(st, cfg.new_tokens, eager, True), kv)
    return M.checked(V._graphed_loop(st, cfg, eager, True, True), kv)


def timed(run, reps=5):
    result = run(no_window())
    ts = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        result = run(no_window())
        torch.cuda.synchronize()
        ts.append((time.perf_counter_ns() - t0) / 1e6 / result["steps_run"])
    return statistics.median(ts), result


def correctness():
    for name, dtype, batch, prec, against in [
            ("llama:small", "fp32", 4, "highest", "kv"),
            ("qwen2:small", "fp32", 4, "highest", "kv"),
            ("llama:small", "fp32", 1, "highest", "kv"),
            ("llama:small", "bf16", 1, "high", "fused"),
            ("llama:small", "bf16", 8, "high", "fused"),
            ("llama:1b", "bf16", 1, "high", "fused")]:
        cfg = cfg_of(name, against, dtype=dtype, batch=batch, matmul_precision=prec,
                     new_tokens=40, stop="uniform:10-35")
        model = load_model(cfg)
        ref = make_decoder(model, cfg)(no_window())
        for loop in (False, True):
            got = mega_run(model, replace(cfg, variant="mega"), loop=loop)(no_window())
            same = (got["tokens"] == ref["tokens"]).float().mean().item()
            key = f"tokens {name} {dtype} b{batch} {'while-mega' if loop else 'mega'} vs {against}"
            OUT[key] = {"equal_share": same, "steps": got["steps_run"],
                        "ref_steps": ref["steps_run"]}
            log(key, same, got["steps_run"], ref["steps_run"])
        del model
        torch.cuda.empty_cache()


SWEEPS = {
    ("llama:small", 1): [dict(warps=8, fma_block=16384), dict(warps=8, fma_block=8192, per_sm=2),
                         dict(warps=4, fma_block=8192, per_sm=2),
                         dict(warps=4, fma_block=4096, per_sm=4)],
    ("llama:1b", 1): [dict(warps=16, fma_block=16384), dict(warps=8, fma_block=8192, per_sm=2),
                      dict(warps=8, fma_block=16384, per_sm=2),
                      dict(warps=4, fma_block=8192, per_sm=4),
                      dict(warps=4, fma_block=4096, per_sm=4),
                      dict(warps=8, fma_block=4096, per_sm=3)],
    ("llama:8b", 1): [dict(warps=16, fma_block=16384), dict(warps=8, fma_block=16384, per_sm=2),
                      dict(warps=8, fma_block=8192, per_sm=2),
                      dict(warps=4, fma_block=8192, per_sm=4)],
    ("llama:1b", 8): [dict(), dict(warps=4, per_sm=2), dict(warps=8, per_sm=2)],
}


def speed():
    for (name, batch), sweep in SWEEPS.items():
        cfg = cfg_of(name, "fused", dtype="bf16", batch=batch, new_tokens=100)
        model = load_model(cfg)
        for variant in ("fused",):
            ms, _ = timed(make_decoder(model, replace(cfg, variant=variant)))
            OUT[f"ms {name} b{batch} {variant}"] = ms
            log(name, batch, variant, f"{ms:.4f}")
        for kw in sweep:
            key = f"ms {name} b{batch} mega {kw}"
            try:
                st = state(model, cfg)
                eager, kv = M.mega_eager(model, replace(cfg, variant="mega"), st, **kw)
                run = M.checked(V._graphed_loop(st, cfg, eager, True, True), kv)
                ms, r = timed(run)
            except Exception as e:  # noqa: BLE001 - a sweep point that fails is reported
                log(name, batch, "mega", kw, "FAILED", repr(e)[:300])
                OUT[key] = repr(e)[:300]
                continue
            OUT[key] = {"ms": ms, **kv.get("resident", {})}
            log(name, batch, "mega", kw, f"{ms:.4f}", kv.get("resident"))
        del model
        torch.cuda.empty_cache()


def correctness2():
    for batch in (1, 4):
        cfg = cfg_of("llama:small", "kv", dtype="fp32", batch=batch, matmul_precision="highest",
                     new_tokens=40, stop="uniform:10-35")
        model = load_model(cfg)
        ref = make_decoder(model, cfg)(no_window())
        got = mega_run(model, replace(cfg, variant="mega"), per_sm=2, warps=4)(no_window())
        same = (got["tokens"] == ref["tokens"]).float().mean().item()
        OUT[f"tokens llama:small fp32 b{batch} mega per_sm=2 vs kv"] = same
        log("tokens per_sm=2", batch, same)


if __name__ == "__main__":
    log(torch.__version__, __import__("triton").__version__, torch.cuda.get_device_name())
    try:
        correctness2()
        speed()
    finally:
        with open(sys.argv[1], "w") as f:
            json.dump(OUT, f, indent=1)
