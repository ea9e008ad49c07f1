"""Untraced timing of several variants: warm-up, then repeats with a synchronize at both edges.

Memory: peak allocated and peak reserved since the variant started (stats reset per variant);
fragmentation = 1 - peak allocated / peak reserved, the share of the reserved peak that held no
tensor at the allocation peak (both peaks taken as one instant). Weight floor: the time to copy
the weights once at the device-to-device copy rate measured at start (bytes moved per second),
the least one step can take when it must read every weight.
"""

import statistics
import time

import torch

from harness.config import RunConfig, bench_configs
from harness.instrument import no_window
from harness.model import model_record, weight_bytes
from harness.run import load_model, make_decoder, sync, tokens_sha256, versions
from harness.variants import expandable_share, set_expandable_segments

COPY_BYTES_CUDA = 1 << 30
COPY_BYTES_CPU = 64 << 20  # keeps the CPU tests fast


def bench(cfg: RunConfig, variants: list[str], repeats: int) -> dict:
    configs = bench_configs(cfg, variants)
    if "kv-expandable" in variants:
        # Alone, it is set before CUDA starts, so every segment is expandable (share 1.0); mixed
        # with others it is switched per variant once CUDA is up, and only later segments are.
        set_expandable_segments(variants == ["kv-expandable"])
    model = load_model(cfg)
    rate = copy_bytes_per_s(cfg.device)
    results = [bench_variant(model, c, repeats, rate) for c in configs]
    # Options as given: compile None and k None mean each variant's own default.
    config = {**cfg.to_json(), "variant": ",".join(variants), "compile": cfg.compile, "k": cfg.k,
              "repeats": repeats}
    return {"config": config, "model": model_record(cfg.model, model), "versions": versions(),
            "copy_bytes_per_s": rate, "results": results}


def copy_bytes_per_s(device: str, repeats: int = 5) -> float:
    """Median rate of one device-to-device tensor copy, in bytes moved per second.

    A copy of n bytes reads n and writes n: 2n moved, the unit of the device's memory bandwidth
    (and of a step that reads its weights once), so the weight floor compares like with like.
    """
    n = COPY_BYTES_CUDA if device == "cuda" else COPY_BYTES_CPU
    src = torch.ones(n, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    times_ns = []
    for _ in range(repeats):
        sync_device(device)
        t0 = time.perf_counter_ns()
        dst.copy_(src)
        sync_device(device)
        times_ns.append(time.perf_counter_ns() - t0)
    return 2 * n / (statistics.median(times_ns) / 1e9)


def sync_device(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def bench_variant(model, cfg: RunConfig, repeats: int, copy_rate: float) -> dict:
    cuda = cfg.device == "cuda"
    if cuda:
        set_expandable_segments(cfg.variant == "kv-expandable")
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    decode = make_decoder(model, cfg)
    decode(no_window())
    runs_ns, result = [], None
    for _ in range(repeats):
        sync(cfg)
        t0 = time.perf_counter_ns()
        result = decode(no_window())
        sync(cfg)
        runs_ns.append(time.perf_counter_ns() - t0)
    steps = result["steps_run"]
    tokens = cfg.batch * (result["tokens"].shape[1] - 1)
    w = weight_bytes(model)
    floor_ms = w / copy_rate * 1e3
    run_ms = percentiles([t / 1e6 for t in runs_ns])
    step_ms = [x / steps for x in run_ms]
    peak_alloc = torch.cuda.max_memory_allocated() if cuda else None
    peak_res = torch.cuda.max_memory_reserved() if cuda else None
    return {
        "variant": cfg.variant,
        "steps": steps,
        "ms_per_run_median": run_ms[1], "ms_per_run_p10": run_ms[0], "ms_per_run_p90": run_ms[2],
        "ms_per_step_median": step_ms[1], "ms_per_step_p10": step_ms[0],
        "ms_per_step_p90": step_ms[2],
        "tokens_per_s": tokens / (run_ms[1] / 1e3),
        "peak_allocated_bytes": peak_alloc,
        "peak_reserved_bytes": peak_res,
        "fragmentation": 1 - peak_alloc / peak_res if cuda and peak_res else None,
        "weight_bytes": w,
        "weight_floor_ms_per_step": floor_ms,
        "weight_floor_pct": 100 * floor_ms / step_ms[1],
        "expandable_segment_share": expandable_share(),
        "tokens_sha256": tokens_sha256(result["tokens"]),
    }


def percentiles(xs: list[float]) -> list[float]:
    """[p10, median, p90], linear interpolation between order statistics."""
    ordered = sorted(xs)
    return [_quantile(ordered, q) for q in (0.1, 0.5, 0.9)]


def _quantile(ordered: list[float], q: float) -> float:
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def table(report: dict) -> str:
    head = (f"{'variant':<15}{'steps':>6}{'ms/run':>10}{'p10-p90':>17}{'ms/step':>9}{'tok/s':>10}"
            f"{'peak alloc MiB':>16}{'reserved MiB':>14}{'frag %':>8}{'floor %':>9}")
    lines = [head, "-" * len(head)]
    for r in report["results"]:
        alloc, res, frag = r["peak_allocated_bytes"], r["peak_reserved_bytes"], r["fragmentation"]
        lines.append(
            f"{r['variant']:<15}{r['steps']:>6}{r['ms_per_run_median']:>10.2f}"
            f"{r['ms_per_run_p10']:>8.2f}-{r['ms_per_run_p90']:<8.2f}{r['ms_per_step_median']:>9.3f}"
            f"{r['tokens_per_s']:>10.0f}{_mib(alloc):>16}{_mib(res):>14}"
            f"{'-' if frag is None else f'{100 * frag:.1f}':>8}{r['weight_floor_pct']:>9.1f}")
    rate = report["copy_bytes_per_s"] / 1e9
    lines.append(f"weight floor: {report['results'][0]['weight_bytes'] / 2**20:.1f} MiB of weights "
                 f"at a {rate:.1f} GB/s copy rate = "
                 f"{report['results'][0]['weight_floor_ms_per_step']:.3f} ms/step")
    return "\n".join(lines)


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.1f}"
