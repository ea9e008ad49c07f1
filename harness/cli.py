"""python -m harness {run,bench,variants}: fills a RunConfig and calls one function.

    python -m harness run --variant pipelined --out traces/x --batch 32 --new-tokens 100
    python -m harness bench --variants kv,static,graphed --repeats 5 --json bench.json
"""

import argparse
import json
import os
import sys
from pathlib import Path

from .config import VARIANT_NAMES, ConfigError, RunConfig, bench_configs, validate
from .model import ARCHS, SIZES


class Parser(argparse.ArgumentParser):
    """Bad options: one line on stderr and exit 2, never the usage block."""

    def error(self, message):
        sys.stderr.write(f"gapscope: error: {message}\n")
        sys.exit(2)


class DefaultsHelp(argparse.HelpFormatter):
    """Each option's help ends with its default, where it has one (None: decided per variant)."""

    def _get_help_string(self, action):
        help_text = action.help or ""
        unset = action.default is None or action.default is False
        if not unset and action.default != argparse.SUPPRESS and action.option_strings:
            help_text += f" (default: {action.default})"
        return help_text


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="gpt2", help=(
        f"ARCH[:SIZE] with ARCH {', '.join(ARCHS)} and SIZE {' or '.join(SIZES[:2])} (small, the "
        "default: 100-150M; tiny: CPU tests), or llama:1b / llama:8b (Llama-3.2-1B's and "
        "Llama-3-8B's shapes, drawn on the GPU); gpt2 is gpt2:small (124M), tiny is gpt2:tiny; "
        "or a directory with a config.json (and weights, else seeded random ones). graphed, "
        "graphed-sync and fused run gpt2, llama, qwen2 and mistral"))
    p.add_argument("--batch", type=int, default=32, help="sequences decoded together")
    p.add_argument("--new-tokens", type=int, default=100, help="tokens generated per sequence")
    p.add_argument("--dtype", default="fp32", help="fp32 or bf16")
    p.add_argument("--matmul-precision", default="high", help="high (TF32) or highest")
    p.add_argument("--compile", default=None, help="none, default or reduce-overhead")
    p.add_argument("--stop", default="none", help="none, fixed:S, uniform:A-B or geometric:P")
    p.add_argument("--stop-seed", type=int, default=0, help="seed of the --stop schedule")
    p.add_argument("--k", type=int, default=None, help="check-every-k: sync every K steps (8)")
    p.add_argument("--branches", type=int, default=None,
                   help="fused: micro-batches run side by side on their own streams (1)")
    p.add_argument("--window", default=None, help="START:STOP, profile steps START+1..STOP (30:50)")
    p.add_argument("--seed", type=int, default=0, help="weights")
    p.add_argument("--device", default="cuda", help="cuda or cpu")
    p.add_argument("--gpu-sleep-cycles", type=int, default=0, help="test only: slow each step")


def build_parser() -> Parser:
    parser = Parser(prog="python -m harness", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    run = sub.add_parser("run", help="warm-up, then one run with the profiler window; run.json",
                         formatter_class=DefaultsHelp)
    run.add_argument("--variant", required=True, help=", ".join(VARIANT_NAMES))
    run.add_argument("--out", type=Path, required=True, help="run directory for run.json")
    run.add_argument("--kineto", type=Path, default=None, metavar="FILE.json[.gz]",
                     help="also capture the window with torch.profiler into this trace")
    run.add_argument("--tp", type=int, default=1,
                     help="tensor-parallel ranks: under torchrun --nproc-per-node N")
    add_run_options(run)
    bench = sub.add_parser("bench", help="untraced timing of several variants",
                           formatter_class=DefaultsHelp)
    bench.add_argument("--variants", required=True, help="comma-separated, e.g. kv,static,graphed")
    bench.add_argument("--repeats", type=int, default=5, help="timed runs of each variant")
    bench.add_argument("--json", type=Path, default=None, help="write the results here")
    bench.add_argument("--timeline", default=None, metavar="FILE",
                       help="also time every step on the GPU with CUDA events (after the timing "
                            "runs) and write untraced_steps.json here; with several variants "
                            "FILE holds {variant}")
    bench.add_argument("--timeline-repeats", type=int, default=3,
                       help="runs with events for --timeline (3)")
    bench.add_argument("--processes", type=int, default=1,
                       help="run each variant in N processes, interleaved: CIs between processes")
    add_run_options(bench)
    sub.add_parser("variants", help="list the variants, one line each")
    return parser


def to_config(args: argparse.Namespace, variant: str) -> RunConfig:
    return RunConfig(
        variant=variant, out=getattr(args, "out", None), model=args.model, batch=args.batch,
        new_tokens=args.new_tokens, dtype=args.dtype, matmul_precision=args.matmul_precision,
        compile=args.compile, stop=args.stop, stop_seed=args.stop_seed, k=args.k,
        branches=args.branches, window=args.window, seed=args.seed, device=args.device,
        gpu_sleep_cycles=args.gpu_sleep_cycles, kineto=getattr(args, "kineto", None),
        tp=getattr(args, "tp", 1))


RUN_OPTIONS = ("model", "batch", "new_tokens", "dtype", "matmul_precision", "compile", "stop",
               "stop_seed", "k", "branches", "window", "seed", "device", "gpu_sleep_cycles")


def run_options(args: argparse.Namespace) -> list:
    """The run options as given, for a child `python -m harness bench`."""
    out = []
    for name in RUN_OPTIONS:
        value = getattr(args, name)
        if value is not None:
            out += [f"--{name.replace('_', '-')}", str(value)]
    return out


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ConfigError as e:
        sys.stderr.write(f"gapscope: error: {e}\n")
        return 2
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in HARNESS_PACKAGES:
            raise
        sys.stderr.write(f"gapscope: error: python -m harness {args.command} needs {e.name}, "
                         "which is not installed: pip install 'gapscope[harness]' (or `make "
                         "install` in the source tree)\n")
        return 2


def cmd_run(args) -> int:
    cfg = validate(to_config(args, args.variant))  # bad options answered before torch loads
    from .run import run, summary_line

    record = run(cfg)
    if record.get("tp", {}).get("rank", 0) == 0:
        print(summary_line(record))
    return 0


def cmd_bench(args) -> int:
    variants = [v for v in args.variants.split(",") if v]
    if not variants:
        raise ConfigError("--variants needs at least one name")
    if args.repeats < 1:
        raise ConfigError(f"--repeats must be >= 1, got {args.repeats}")
    bench_configs(to_config(args, variants[0]), variants)
    if args.json is not None and not args.json.parent.is_dir():
        raise ConfigError(f"--json {args.json}: no directory {args.json.parent}")
    timeline_paths = _timeline_paths(args.timeline, variants)
    if args.timeline is not None and args.timeline_repeats < 1:
        raise ConfigError(f"--timeline-repeats must be >= 1, got {args.timeline_repeats}")
    if args.processes < 1:
        raise ConfigError(f"--processes must be >= 1, got {args.processes}")
    if args.processes > 1:
        if timeline_paths:
            raise ConfigError("--timeline times one process: leave out --processes or --timeline")
        from .processes import run_processes
        from .processes import table as processes_table

        keep = None if args.json is None else (
            lambda partial: _write_json(args.json, partial, "--json"))
        report = run_processes(variants, args.processes, args.repeats, run_options(args),
                               on_round=keep)
        print(processes_table(report))
    else:
        from .bench import bench, table

        report = bench(to_config(args, variants[0]), variants, args.repeats,
                       args.timeline_repeats if timeline_paths else 0)
        print(table(report))
        for variant, timeline in report.pop("timelines", {}).items():
            _write_json(timeline_paths[variant], timeline, "--timeline")
    if args.json is not None:
        _write_json(args.json, report, "--json")
    return 0


def _timeline_paths(spec: str | None, variants: list[str]) -> dict:
    if spec is None:
        return {}
    if len(variants) > 1 and "{variant}" not in spec:
        raise ConfigError("--timeline with several variants needs {variant} in FILE")
    paths = {v: Path(spec.replace("{variant}", v)) for v in variants}
    for path in paths.values():
        if not path.parent.is_dir():
            raise ConfigError(f"--timeline {path}: no directory {path.parent}")
    return paths


def _write_json(path: Path, doc: dict, option: str) -> None:
    try:
        path.write_text(json.dumps(doc, indent=2) + "\n")
    except OSError as e:
        raise ConfigError(f"cannot write {option} {path}: {e.strerror}") from None


def cmd_variants(args) -> int:
    """The variants, one line each: read from harness/variants.py's docstring without importing
    it (no torch needed to list them)."""
    import ast

    doc = ast.get_docstring(ast.parse(Path(__file__).with_name("variants.py").read_text()))
    try:
        print("\n".join(line.strip() for line in doc.splitlines()
                        if line.strip().split(" ")[0] in VARIANT_NAMES), flush=True)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


# What the harness' commands import that `pip install gapscope` (the analysis alone) lacks.
HARNESS_PACKAGES = ("torch", "transformers", "nvtx", "triton", "numpy")


COMMANDS = {"run": cmd_run, "bench": cmd_bench, "variants": cmd_variants}
