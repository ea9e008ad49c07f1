"""The one dataclass of a run's configuration, and checks that reject meaningless combinations."""

from dataclasses import dataclass, fields, replace
from pathlib import Path

from .model import OWN_STEP_FAMILIES, ModelError, model_family

VARIANT_NAMES = (
    "naive", "kv", "kv-expandable", "static", "compiled", "pipelined", "pipelined-seed",
    "deferred", "check-every-k", "graphed", "graphed-sync", "fused", "nocheck", "while-graph",
    "while-fused", "mega", "while-mega", "hf-generate",
)
# A dynamic cache changes shape every step (compiling only recompiles); hf-generate compiles its
# static-cache step by itself.
NO_COMPILE = ("naive", "kv", "kv-expandable", "hf-generate")
# One CUDA graph launch decodes every step (harness/while_graph.py): no host steps to window.
LOOP_VARIANTS = ("while-graph", "while-fused", "while-mega")
NEEDS_CUDA = ("graphed", "graphed-sync", "fused", "mega", *LOOP_VARIANTS)
# Our fused step in a CUDA graph: --compile does not apply.
FUSED = ("fused", "while-fused", "mega", "while-mega")
# The step in one persistent kernel (harness/llama_mega.py): the Llama family's.
MEGA = ("mega", "while-mega")
MEGA_FAMILIES = ("llama", "qwen2", "mistral")
OWN_STEP = NEEDS_CUDA  # our own step (OWN_STEP_FAMILIES): the other variants run any causal LM
# What our own step lacks for a family it refuses, where one could expect it to run.
OWN_STEP_LACKS = {"phi": ", whose parallel attention+MLP block, partial rotary and LayerNorm it "
                         "does not compute"}
MAX_POSITIONS = 1024
DEFAULT_K = 8
DEFAULT_BRANCHES = 1  # fused: micro-batches side by side (docs/RESULTS.md measures 1, 2, 4)
# --tp N: the generic static-cache rungs, over the families harness/tp.py shards.
TP_VARIANTS = ("static", "compiled", "pipelined", "deferred", "nocheck")
TP_FAMILIES = ("gpt2", "llama")


class ConfigError(ValueError):
    """A bad option: the CLI prints it as one line and exits 2."""


@dataclass
class RunConfig:
    variant: str = "kv"
    out: Path | None = None
    model: str = "gpt2"
    batch: int = 32
    new_tokens: int = 100
    dtype: str = "fp32"
    matmul_precision: str = "high"
    compile: str | None = None  # None: the variant's default ("default" for compiled, else "none")
    stop: str = "none"
    stop_seed: int = 0
    k: int | None = None  # None: DEFAULT_K for check-every-k
    branches: int | None = None  # None: DEFAULT_BRANCHES for fused
    window: str | None = None  # None: "30:50", or "0:N" when fewer than 50 new tokens
    seed: int = 0
    device: str = "cuda"
    gpu_sleep_cycles: int = 0  # test-only: slows each step on the GPU so the host runs ahead
    kineto: Path | None = None  # run: also write a torch.profiler trace of the window here
    tp: int = 1  # run: tensor-parallel ranks (harness/tp.py), launched by torchrun

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["out"] = str(self.out) if self.out is not None else None
        if self.kineto is None:
            del d["kineto"]  # only a run with a Kineto capture says where it went
        else:
            d["kineto"] = str(self.kineto)
        if self.tp == 1:
            del d["tp"]  # only a tensor-parallel run says so (run.json's `tp` has the rest)
        d["compile"] = compile_mode(self)
        d["k"] = check_every(self)
        d["branches"] = branch_count(self)
        d["window"] = "{}:{}".format(*profile_window(self))
        return d


def compile_mode(cfg: RunConfig) -> str:
    if cfg.compile is not None:
        return cfg.compile
    return "default" if cfg.variant == "compiled" else "none"


def check_every(cfg: RunConfig) -> int | None:
    if cfg.variant != "check-every-k":
        return None
    return DEFAULT_K if cfg.k is None else cfg.k


def branch_count(cfg: RunConfig) -> int | None:
    if cfg.variant != "fused":
        return None
    return DEFAULT_BRANCHES if cfg.branches is None else cfg.branches


def profile_window(cfg: RunConfig) -> tuple[int, int]:
    if cfg.variant in LOOP_VARIANTS:
        return (0, cfg.new_tokens)  # the capture holds the one launch: every step
    if cfg.window is not None:
        return parse_window(cfg.window)
    return (30, 50) if cfg.new_tokens >= 50 else (0, cfg.new_tokens)


def parse_window(spec: str) -> tuple[int, int]:
    """'30:50' -> (30, 50): profile steps 31..50."""
    try:
        start, stop = (int(x) for x in spec.split(":"))
    except ValueError:
        raise ConfigError(f"--window must be START:STOP (e.g. 30:50), got {spec!r}") from None
    return start, stop


def parse_stop(spec: str) -> tuple:
    """'none' | 'fixed:S' | 'uniform:A-B' | 'geometric:P' -> ('none',) | ('fixed', S) | ..."""
    kind, _, arg = spec.partition(":")
    try:
        if kind == "none" and not arg:
            return ("none",)
        if kind == "fixed":
            return ("fixed", int(arg))
        if kind == "uniform":
            lo, hi = arg.split("-")
            return ("uniform", int(lo), int(hi))
        if kind == "geometric":
            return ("geometric", float(arg))
    except ValueError:
        pass
    raise ConfigError(f"--stop must be none, fixed:S, uniform:A-B or geometric:P, got {spec!r}")


def validate(cfg: RunConfig) -> RunConfig:
    """Raise ConfigError (one line) for a combination that means nothing; return cfg otherwise."""
    v = cfg.variant
    if v not in VARIANT_NAMES:
        raise ConfigError(f"unknown variant {v!r} (known: {', '.join(VARIANT_NAMES)})")
    try:
        family = model_family(cfg.model)
    except ModelError as e:
        raise ConfigError(str(e)) from None
    if v in OWN_STEP and family not in OWN_STEP_FAMILIES:
        why = OWN_STEP_LACKS.get(family, "")
        raise ConfigError(f"{v} runs our own step, written for {', '.join(OWN_STEP_FAMILIES)}: "
                          f"--model {cfg.model} is {family}{why} (every other variant runs it)")
    if v in MEGA and family not in MEGA_FAMILIES:
        raise ConfigError(f"{v} runs the Llama family's step ({', '.join(MEGA_FAMILIES)}): "
                          f"--model {cfg.model} is {family}")
    _check_choice("--dtype", cfg.dtype, ("fp32", "bf16"))
    _check_choice("--matmul-precision", cfg.matmul_precision, ("high", "highest"))
    _check_choice("--device", cfg.device, ("cuda", "cpu"))
    if cfg.compile is not None:
        _check_choice("--compile", cfg.compile, ("none", "default", "reduce-overhead"))
    if cfg.batch < 1:
        raise ConfigError(f"--batch must be >= 1, got {cfg.batch}")
    if cfg.new_tokens < 1 or cfg.new_tokens + 1 > MAX_POSITIONS:
        raise ConfigError(
            f"--new-tokens must be 1..{MAX_POSITIONS - 1} (BOS + new tokens fit in "
            f"{MAX_POSITIONS} positions), got {cfg.new_tokens}")
    mode = compile_mode(cfg)
    if v in NO_COMPILE and mode != "none":
        raise ConfigError(f"--compile {mode} means nothing for {v} (only static-cache variants)")
    if v in NEEDS_CUDA and mode == "reduce-overhead":
        raise ConfigError(f"{v} is its own CUDA graph: --compile default fuses its kernels, "
                          "reduce-overhead would nest compile's graphs in it")
    if v in FUSED and mode != "none":
        raise ConfigError(f"{v} is its own fused step in a CUDA graph: --compile does not apply")
    if v in LOOP_VARIANTS and cfg.window is not None:
        raise ConfigError(f"--window means nothing for {v}: one graph launch runs every step, so "
                          "a capture holds the whole run (leave --window out)")
    if v == "compiled" and mode == "none":
        raise ConfigError("compiled with --compile none is static: use --variant static")
    if cfg.k is not None and v != "check-every-k":
        raise ConfigError(f"--k only applies to check-every-k, not {v}")
    if v == "check-every-k" and check_every(cfg) < 1:
        raise ConfigError(f"--k must be >= 1, got {cfg.k}")
    if cfg.branches is not None and v != "fused":
        raise ConfigError(f"--branches only applies to fused, not {v}")
    if v == "fused" and not 1 <= branch_count(cfg) <= cfg.batch:
        raise ConfigError(f"--branches must be 1..batch ({cfg.batch}), got {cfg.branches}")
    start, stop = profile_window(cfg)
    if not 0 <= start < stop <= cfg.new_tokens:
        raise ConfigError(
            f"--window {start}:{stop} needs 0 <= START < STOP <= new tokens ({cfg.new_tokens})")
    _check_stop(parse_stop(cfg.stop), cfg.new_tokens)
    if cfg.gpu_sleep_cycles < 0:
        raise ConfigError(f"--gpu-sleep-cycles must be >= 0, got {cfg.gpu_sleep_cycles}")
    if v in NEEDS_CUDA and cfg.device != "cuda":
        raise ConfigError(f"{v} needs CUDA")
    if cfg.gpu_sleep_cycles and cfg.device != "cuda":
        raise ConfigError("--gpu-sleep-cycles needs --device cuda")
    _check_tp(cfg, family, mode)
    if cfg.kineto is not None:
        if not str(cfg.kineto).endswith((".json", ".json.gz")):
            raise ConfigError(
                f"--kineto {cfg.kineto}: the trace's name must end in .json or .json.gz")
        # The run directory itself is made by the run.
        if cfg.kineto.parent != cfg.out and not cfg.kineto.parent.is_dir():
            raise ConfigError(f"--kineto {cfg.kineto}: no directory {cfg.kineto.parent}")
    return cfg


def bench_configs(cfg: RunConfig, variants: list[str]) -> list[RunConfig]:
    """--k belongs to check-every-k only, --branches to fused, --window to all but the loops
    of one launch; every other option applies to each variant as given."""
    return [validate(replace(cfg, variant=v, k=cfg.k if v == "check-every-k" else None,
                             branches=cfg.branches if v == "fused" else None,
                             window=None if v in LOOP_VARIANTS else cfg.window))
            for v in variants]


def _check_choice(flag: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{flag} must be one of {', '.join(choices)}, got {value!r}")


def _check_tp(cfg: RunConfig, family: str, mode: str) -> None:
    if cfg.tp < 1:
        raise ConfigError(f"--tp must be >= 1, got {cfg.tp}")
    if cfg.tp == 1:
        return
    if cfg.variant not in TP_VARIANTS:
        raise ConfigError(f"--tp runs {', '.join(TP_VARIANTS)}, not {cfg.variant}")
    if family not in TP_FAMILIES:
        raise ConfigError(f"--tp shards {' and '.join(TP_FAMILIES)}, not {family}")
    if mode == "reduce-overhead":
        raise ConfigError("--tp with --compile reduce-overhead would capture NCCL in compile's "
                          "CUDA graphs, untried: use --compile default")
    if cfg.kineto is not None:
        raise ConfigError("--tp with --kineto: every rank would write the one trace")


def _check_stop(stop: tuple, new_tokens: int) -> None:
    kind = stop[0]
    if kind == "fixed" and not 1 <= stop[1] <= new_tokens:
        raise ConfigError(f"--stop fixed:S needs 1 <= S <= {new_tokens} (new tokens): {stop[1]}")
    if kind == "uniform" and not 1 <= stop[1] <= stop[2] <= new_tokens:
        raise ConfigError(
            f"--stop uniform:A-B needs 1 <= A <= B <= {new_tokens} (new tokens), "
            f"got {stop[1]}-{stop[2]}")
    if kind == "geometric" and not 0.0 < stop[1] <= 1.0:
        raise ConfigError(f"--stop geometric:P needs 0 < P <= 1, got {stop[1]}")
