"""python -m harness {run,bench,variants}: fills a RunConfig and calls one function.

    python -m harness run --variant pipelined --out traces/x --batch 32 --new-tokens 100
    python -m harness bench --variants kv,static,graphed --repeats 5 --json bench.json
"""

import argparse
import json
import sys
from pathlib import Path

from harness.config import VARIANT_NAMES, ConfigError, RunConfig, bench_configs, validate
from harness.model import ARCHS, SIZES


class Parser(argparse.ArgumentParser):
    """Bad options: one line on stderr and exit 2, never the usage block."""

    def error(self, message):
        sys.stderr.write(f"gapscope: error: {message}\n")
        sys.exit(2)


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="gpt2", help=(
        f"ARCH[:SIZE] with ARCH {', '.join(ARCHS)} and SIZE {' or '.join(SIZES)} (small, the "
        "default: 100-150M; tiny: CPU tests); gpt2 is gpt2:small (124M), tiny is gpt2:tiny; "
        "or a directory with a config.json (and weights, else seeded random ones). graphed, "
        "graphed-sync and fused are GPT-2 only"))
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=100)
    p.add_argument("--dtype", default="fp32", help="fp32 or bf16")
    p.add_argument("--matmul-precision", default="high", help="high (TF32) or highest")
    p.add_argument("--compile", default=None, help="none, default or reduce-overhead")
    p.add_argument("--stop", default="none", help="none, fixed:S, uniform:A-B or geometric:P")
    p.add_argument("--stop-seed", type=int, default=0)
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
    run = sub.add_parser("run", help="warm-up, then one run with the profiler window; run.json")
    run.add_argument("--variant", required=True, help=", ".join(VARIANT_NAMES))
    run.add_argument("--out", type=Path, required=True, help="run directory for run.json")
    add_run_options(run)
    bench = sub.add_parser("bench", help="untraced timing of several variants")
    bench.add_argument("--variants", required=True, help="comma-separated, e.g. kv,static,graphed")
    bench.add_argument("--repeats", type=int, default=5)
    bench.add_argument("--json", type=Path, default=None, help="write the results here")
    add_run_options(bench)
    sub.add_parser("variants", help="list the variants, one line each")
    return parser


def to_config(args: argparse.Namespace, variant: str) -> RunConfig:
    return RunConfig(
        variant=variant, out=getattr(args, "out", None), model=args.model, batch=args.batch,
        new_tokens=args.new_tokens, dtype=args.dtype, matmul_precision=args.matmul_precision,
        compile=args.compile, stop=args.stop, stop_seed=args.stop_seed, k=args.k,
        branches=args.branches, window=args.window, seed=args.seed, device=args.device,
        gpu_sleep_cycles=args.gpu_sleep_cycles)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ConfigError as e:
        sys.stderr.write(f"gapscope: error: {e}\n")
        return 2


def cmd_run(args) -> int:
    cfg = validate(to_config(args, args.variant))  # bad options answered before torch loads
    from harness.run import run, summary_line

    print(summary_line(run(cfg)))
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
    from harness.bench import bench, table

    report = bench(to_config(args, variants[0]), variants, args.repeats)
    print(table(report))
    if args.json is not None:
        try:
            args.json.write_text(json.dumps(report, indent=2) + "\n")
        except OSError as e:
            raise ConfigError(f"cannot write --json {args.json}: {e.strerror}") from None
    return 0


def cmd_variants(args) -> int:
    from harness.variants import variant_lines

    print("\n".join(variant_lines()))
    return 0


COMMANDS = {"run": cmd_run, "bench": cmd_bench, "variants": cmd_variants}
