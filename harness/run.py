"""One profiled run: build, a full warm-up run, then the run with the profiler window; run.json."""

import hashlib
import importlib.metadata
import json
import platform
import subprocess
import time
from pathlib import Path

import torch
import transformers

from .config import ConfigError, RunConfig, profile_window, validate
from .decode import new_state
from .floor import model_shape, window_bytes
from .instrument import ProfilerWindow, no_window
from .model import ModelError, build_model, model_record, special_tokens, weight_bytes
from .stops import expected_stop_step, stop_steps
from .variants import VARIANTS, expandable_share, set_expandable_segments


def check_device(cfg: RunConfig) -> None:
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("CUDA is not available here: pass --device cpu")


def load_model(cfg: RunConfig):
    check_device(cfg)
    torch.set_float32_matmul_precision(cfg.matmul_precision)
    try:
        return build_model(cfg.model, cfg.dtype, cfg.device, cfg.seed)
    except ModelError as e:
        raise ConfigError(str(e)) from None


def make_decoder(model, cfg: RunConfig):
    """The variant's run(window), over a fresh decode state."""
    stops = stop_steps(cfg.stop, cfg.batch, cfg.new_tokens, cfg.stop_seed)
    bos, eos = special_tokens(model.config)
    st = new_state(cfg.batch, cfg.new_tokens, stops, cfg.device, cfg.gpu_sleep_cycles, bos, eos)
    return VARIANTS[cfg.variant](model, cfg, st)


def sync(cfg: RunConfig) -> None:
    if cfg.device == "cuda":
        torch.cuda.synchronize()


def run(cfg: RunConfig) -> dict:
    """Warm-up run, then the windowed run; writes cfg.out/run.json and returns its record."""
    validate(cfg)
    if cfg.variant == "hf-generate":
        raise ConfigError("hf-generate has no per-step NVTX ranges to profile: use it in bench")
    out = make_out_dir(cfg.out)
    if cfg.variant == "kv-expandable":
        set_expandable_segments(True)  # before load_model: CUDA must not be initialised yet
    if cfg.tp > 1:
        from . import tp

        tp.init(cfg.tp, cfg.device)  # before the model: it goes to this rank's GPU
    model = load_model(cfg)
    model_info = model_record(cfg.model, model)  # the whole model, before any shard
    if cfg.tp > 1:
        tp.shard(model, cfg.tp)
    decode = make_decoder(model, cfg)
    decode(no_window())
    start, stop = profile_window(cfg)
    window = ProfilerWindow(start, stop, active=True, kineto=kineto_capture(cfg))
    if window.kineto is not None:
        window.kineto.prepare()
    sync(cfg)
    t0 = time.perf_counter_ns()
    result = decode(window)
    sync(cfg)
    wall_ns = time.perf_counter_ns() - t0
    if window.kineto is not None and not window.kineto.export():
        raise ConfigError(f"--kineto {cfg.kineto}: the window --window {start}:{stop} never "
                          f"opened (the run made {result['steps_run']} steps): nothing captured")
    shape = model_shape(model.config, next(model.parameters()).element_size(),
                        weight_bytes(model))
    if cfg.tp > 1:
        shape = tp.rank_shape(shape, cfg.tp)  # one rank's bytes: its floor
    record = {
        "config": cfg.to_json(),
        "model": model_info,
        "versions": versions(),
        "result": summarise(result, cfg),
        "timing": timing(wall_ns, window, result["steps_run"]),
        "floor": window_bytes(shape, cfg.variant, cfg.batch, cfg.new_tokens, start, stop),
    }
    if cfg.tp > 1:
        record["tp"] = tp.record(cfg.tp, record["result"]["tokens_sha256"], model)
        tp.close()
        if record["tp"]["rank"] != 0:
            return record  # rank 0 writes run.json; each rank's capture is its own
    (out / "run.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def kineto_capture(cfg: RunConfig):
    """The Kineto capture of the window (--kineto: torch.profiler), or None."""
    if cfg.kineto is None:
        return None
    from .kineto import KinetoCapture

    return KinetoCapture(cfg.kineto, cuda=cfg.device == "cuda")


def make_out_dir(out: Path | None) -> Path:
    if out is None:
        raise ConfigError("--out DIR is required")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot create --out {out}: {e.strerror}") from None
    return out


def summarise(result: dict, cfg: RunConfig) -> dict:
    returned = result["tokens"].shape[1] - 1
    return {
        "tokens_generated": cfg.batch * returned,  # B x returned steps (EOS padding included)
        "steps_run": result["steps_run"],
        "stop_step": result["stop_step"],
        # From the schedule alone: differs from stop_step only if the model emitted EOS itself.
        "scheduled_stop_step": expected_stop_step(
            stop_steps(cfg.stop, cfg.batch, cfg.new_tokens, cfg.stop_seed), cfg.new_tokens),
        "overshoot_steps": result["overshoot_steps"],
        "stale_flag_reads": result["stale_flag_reads"],
        "expandable_segment_share": expandable_share(),
        "tokens_sha256": tokens_sha256(result["tokens"]),
    }


def tokens_sha256(tokens: torch.Tensor) -> str:
    """sha256 of the returned tokens [B, returned + 1] as int64 in C order, native byte order
    (little-endian on x86 and ARM): equal for two runs that decoded the same tokens."""
    return hashlib.sha256(tokens.cpu().to(torch.int64).contiguous().numpy().tobytes()).hexdigest()


def timing(wall_ns: int, window: ProfilerWindow, steps_run: int) -> dict:
    marks = window.marks_ns
    in_window = max(0, min(window.stop, steps_run) - window.start)
    window_ns = marks["stop"] - marks["start"] if "start" in marks and "stop" in marks else None
    return {
        "wall_ms": wall_ns / 1e6,
        "window_steps": in_window,
        # Host clock: step START+1 entered (after cudaProfilerStart returned) to step STOP done
        # (on CUDA, synchronized; before cudaProfilerStop): the captured steps, without the
        # profiler's own start and flush, so it compares with an untraced ms/step.
        "window_ms": window_ns / 1e6 if window_ns is not None else None,
        "ms_per_step": (window_ns / 1e6 / in_window if window_ns is not None and in_window
                        else wall_ns / 1e6 / steps_run),
    }


def versions() -> dict:
    cuda = torch.cuda.is_available()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "nvtx": _dist_version("nvtx"),
        "driver": _driver_version() if cuda else None,
        "gpu": torch.cuda.get_device_name() if cuda else None,
    }


def _dist_version(name: str) -> str | None:
    # nvtx may be carried as an unpacked wheel on PYTHONPATH, without its metadata.
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _driver_version() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def summary_line(record: dict) -> str:
    c, r, t = record["config"], record["result"], record["timing"]
    return (f"{c['variant']}: {r['steps_run']} steps run (stop step {r['stop_step']}, "
            f"overshoot {r['overshoot_steps']}), {r['tokens_generated']} tokens, "
            f"{t['ms_per_step']:.3f} ms/step, {t['wall_ms']:.1f} ms")
