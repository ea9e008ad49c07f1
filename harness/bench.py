"""Untraced timing of several variants: warm-up, then repeats with a synchronize at both edges.

Memory: peak allocated and peak reserved since the variant started (stats reset per variant);
fragmentation = 1 - peak allocated / peak reserved, the share of the reserved peak that held no
tensor at the allocation peak (both peaks taken as one instant). Weight floor: the time to copy
the weights once at the device-to-device copy rate measured at start (bytes moved per second),
the least one step can take when it must read every weight. The floor (harness/floor.py) adds the
KV cache the step reads and writes and its activations: `floor`, per step over the run's steps.
"""

import statistics
import time

import torch

from .config import RunConfig, bench_configs, profile_window
from .floor import floor, model_shape
from .instrument import no_window, timeline_window
from .model import model_record, weight_bytes
from .run import load_model, make_decoder, sync, tokens_sha256, versions
from .variants import expandable_share, set_expandable_segments

COPY_BYTES_CUDA = 1 << 30
COPY_BYTES_CPU = 64 << 20  # keeps the CPU tests fast


def bench(cfg: RunConfig, variants: list[str], repeats: int, timeline_repeats: int = 0) -> dict:
    """Untraced timing of each variant; with timeline_repeats, that many more runs with per-step
    CUDA events, whose timelines come back under "timelines" (variant -> untraced_steps.json)."""
    configs = bench_configs(cfg, variants)
    if "kv-expandable" in variants:
        # Alone, it is set before CUDA starts, so every segment is expandable (share 1.0); mixed
        # with others it is switched per variant once CUDA is up, and only later segments are.
        set_expandable_segments(variants == ["kv-expandable"])
    model = load_model(cfg)
    rate = copy_bytes_per_s(cfg.device)
    results, timelines = [], {}
    for c in configs:
        entry, decode = bench_variant(model, c, repeats, rate)
        results.append(entry)
        if timeline_repeats:
            timelines[c.variant] = timeline(decode, c, timeline_repeats)
    # Options as given: compile None and k None mean each variant's own default.
    config = {**cfg.to_json(), "variant": ",".join(variants), "compile": cfg.compile, "k": cfg.k,
              "repeats": repeats}
    report = {"config": config, "model": model_record(cfg.model, model), "versions": versions(),
              "copy_bytes_per_s": rate, "results": results}
    return report | ({"timelines": timelines} if timeline_repeats else {})


TIMELINE_FORMAT = "gapscope-untraced-steps/1"


def timeline(decode, cfg: RunConfig, repeats: int) -> dict:
    """`repeats` more runs of a warm decoder with every step between two CUDA events (after the
    timing runs, so those ran without them): docs/METRICS.md's untraced_steps.json."""
    runs, per_step_ms = [], []
    for _ in range(repeats):
        window = timeline_window()
        sync(cfg)
        t0 = time.perf_counter_ns()
        result = decode(window)
        sync(cfg)
        per_step_ms.append((time.perf_counter_ns() - t0) / 1e6 / result["steps_run"])
        runs.append(window.timeline.read())
    return {"format": TIMELINE_FORMAT, "source": window.timeline.source, "variant": cfg.variant,
            "window": list(profile_window(cfg)), "config": cfg.to_json(),
            "ms_per_step_median": statistics.median(per_step_ms), "runs": runs}


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


def bench_variant(model, cfg: RunConfig, repeats: int, copy_rate: float) -> tuple:
    """(the variant's bench entry, its warm decoder)."""
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
    shape = model_shape(model.config, next(model.parameters()).element_size(), w)
    step_floor = floor(shape, cfg.variant, cfg.batch, cfg.new_tokens, range(steps), copy_rate,
                       step_ms[1])
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
        "floor": step_floor,
        "expandable_segment_share": expandable_share(),
        "tokens_sha256": tokens_sha256(result["tokens"]),
    }, decode


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
    """Fits 100 columns: ms/run and its spread are in the JSON."""
    head = (f"{'variant':<15}{'steps':>6}{'ms/step':>9}{'p10-p90':>16}{'tok/s':>9}"
            f"{'alloc MiB':>10}{'resv MiB':>9}{'frag %':>7}{'floor ms':>9}{'% floor':>8}")
    lines = [head, "-" * len(head)]
    for r in report["results"]:
        alloc, res, frag = r["peak_allocated_bytes"], r["peak_reserved_bytes"], r["fragmentation"]
        lines.append(
            f"{r['variant']:<15}{r['steps']:>6}{r['ms_per_step_median']:>9.3f}"
            f"{r['ms_per_step_p10']:>8.3f}-{r['ms_per_step_p90']:<7.3f}"
            f"{r['tokens_per_s']:>9.0f}{_mib(alloc):>10}{_mib(res):>9}"
            f"{'-' if frag is None else f'{100 * frag:.1f}':>7}"
            f"{r['floor']['floor_ms_per_step']:>9.3f}{r['floor']['floor_pct']:>8.1f}")
    rate = report["copy_bytes_per_s"] / 1e9
    first = report["results"][0]
    b = first["floor"]["bytes_per_step"]
    lines.append(f"floor: the bytes a step moves at the {rate:.1f} GB/s copy rate "
                 "(harness/floor.py)")
    lines.append(f"  {first['variant']}: weights {b['weights'] / 1e6:.1f} MB, KV read "
                 f"{b['kv_read'] / 1e6:.1f} ({first['floor']['kv_slots_read']}), KV write "
                 f"{b['kv_write'] / 1e6:.2f}, activations {b['activations'] / 1e6:.2f}")
    lines.append(f"weight floor alone: {first['weight_floor_ms_per_step']:.3f} ms/step")
    return "\n".join(lines)


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.1f}"
