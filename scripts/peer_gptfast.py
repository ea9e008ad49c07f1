"""gpt-fast's own decode against our rungs on the same model shape, batch, dtype and token count.

    python scripts/peer_gptfast.py --gpt-fast DIR [--model stories110M|llama-3-8b]
        [--batches 1,8] [--variants graphed,fused] [--processes 3] [--repeats 5]
        [--new-tokens 100] [--dtype bf16] [--json FILE] [--workdir DIR]
    python scripts/peer_gptfast.py --table FILE.json

DIR is a gpt-fast checkout (github.com/pytorch-labs/gpt-fast): its model.py and generate.py are
imported from there, nothing of it is copied here. The shape is one of gpt-fast's own configs
(scripts/peer_models.py: `stories110M`, the default, or `llama-3-8b`), random weights on both
sides; our side runs the equivalent transformers LlamaConfig. The workers are peer_workers.py's,
the summary and table peer_report.py's.

Each (batch, side) runs in processes of its own, interleaved (round 1: gpt-fast and ours at each
batch, then round 2, ...: `--processes` rounds); each process warms up, then times `--repeats`
decodes and reports their median. Decode only, on both sides, between two CUDA events:
  gpt-fast  its Transformer.from_name("stories110M"), setup_caches, its eager prefill of the BOS
            token, then its decode_n_tokens() for new_tokens - 1 tokens with decode_one_token under
            torch.compile(mode="reduce-overhead", fullgraph=True), as its generate.py --compile;
            its sampling (top-k 200, temperature 0.8: generate.py's defaults; --top-k,
            --temperature)
  ours      `python -m harness`'s decoder of the variant: the events at the start of step 1 and the
            end of step new_tokens (`--stop none`: every step runs); greedy (argmax), with the stop
            schedule's bookkeeping on the device
ms/token = the span / tokens decoded in it (new_tokens - 1 for gpt-fast, whose first token comes
from prefill; new_tokens for ours, whose step 1 feeds BOS). Reported per (batch, side): the median
over processes, their min-max and a 95% bootstrap interval, our floor (harness/floor.py) and its %.

Compile caches: every worker gets TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR under
WORKDIR/cache (a temporary directory unless --workdir; a variable already set is kept), with
inductor's FX-graph and AOT-autograd caches on: only the first gpt-fast process of a batch compiles
cold (60-90 s on the H200 at stories110M, about 2 minutes at llama-3-8b), the later ones load its
kernels (and their coordinate-descent tuning) from the cache. Each worker's wall time is in the
JSON (`process_s`) and in the progress lines (stderr), so a cold process shows as one.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.peer_models import MODELS, gpt_fast_name, llama_config, our_model  # noqa: E402, F401
from scripts.peer_report import (  # noqa: E402
    GPT_FAST,
    PeerError,
    read_report,
    summary,
    table,
    write_json,
)


def parse(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="peer_gptfast.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--gpt-fast", type=Path, default=None, help="a gpt-fast checkout")
    p.add_argument("--table", type=Path, default=None, metavar="JSON",
                   help="print the table of an earlier run's --json file again, and stop")
    p.add_argument("--model", default="stories110M", help=f"gpt-fast's config: {', '.join(MODELS)}")
    p.add_argument("--batches", default="1,8")
    p.add_argument("--variants", default="graphed,fused", help="our rungs")
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--new-tokens", type=int, default=100)
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--top-k", type=int, default=200, help="gpt-fast's sampling")
    p.add_argument("--temperature", type=float, default=0.8, help="gpt-fast's sampling")
    p.add_argument("--workdir", type=Path, default=None,
                   help="where the config.json and the compile caches go (default: a temporary "
                   "directory)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # one side, one batch
    p.add_argument("--batch", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--our-model", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def check(args) -> None:
    if not (args.gpt_fast / "model.py").is_file() or not (args.gpt_fast / "generate.py").is_file():
        raise PeerError(f"--gpt-fast {args.gpt_fast}: no model.py and generate.py (a gpt-fast "
                        "checkout)")
    if args.processes < 1 or args.repeats < 1 or args.new_tokens < 2:
        raise PeerError("--processes and --repeats must be >= 1, --new-tokens >= 2")
    if args.json is not None and not args.json.parent.is_dir():
        raise PeerError(f"--json {args.json}: no directory {args.json.parent}")
    from harness.config import ConfigError, RunConfig, validate

    gpt_fast_name(args.model)
    for v in args.variants.split(","):
        try:
            validate(RunConfig(variant=v, model="llama", new_tokens=args.new_tokens))
        except ConfigError as e:
            raise PeerError(str(e)) from None


def batches(args) -> list[int]:
    try:
        out = [int(b) for b in args.batches.split(",")]
    except ValueError:
        raise PeerError(f"--batches must be comma-separated integers, got {args.batches!r}"
                        ) from None
    return out


def cache_env(workdir: Path, environ=None) -> dict:
    """The workers' environment: compile caches shared by every process of one comparison."""
    env = dict(os.environ if environ is None else environ)
    cache = workdir / "cache"
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache / "inductor"))
    env.setdefault("TRITON_CACHE_DIR", str(cache / "triton"))
    env.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "1")
    env.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "1")
    return env


def run_worker(args, side: str, batch: int, ours: str, workdir: Path) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--gpt-fast", str(args.gpt_fast),
               "--worker", side, "--batch", str(batch), "--model", args.model,
               "--our-model", ours,
               "--repeats", str(args.repeats), "--new-tokens", str(args.new_tokens),
               "--dtype", args.dtype, "--top-k", str(args.top_k),
               "--temperature", str(args.temperature)]
    t0 = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, env=cache_env(workdir))
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise PeerError(f"the {side} process at batch {batch} failed (exit {proc.returncode}): "
                        f"{last}")
    return json.loads(proc.stdout.strip().splitlines()[-1]) | {
        "process_s": round(time.monotonic() - t0, 1)}


def compare(args) -> dict:
    """Every process, interleaved; with --json, the summary so far is written after each one (a
    run cut short keeps what it measured: `"partial": true`)."""
    sides = [GPT_FAST, *args.variants.split(",")]
    runs = {}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="peer-gptfast-") as tmp:
        workdir = args.workdir or Path(tmp)
        ours = our_model(args.model, workdir)
        for i in range(args.processes):  # rounds outermost: a run cut short has every batch
            for b in batches(args):
                for side in sides:
                    where = f"batch {b}, {side}, process {i + 1}/{args.processes}"
                    progress(t0, f"{where}: starting")
                    r = run_worker(args, side, b, ours, workdir)
                    runs.setdefault(f"{b}/{side}", []).append(r)
                    progress(t0, f"{where}: {r['ms_per_token_median']:.3f} ms/token "
                             f"(process {r.get('process_s', 0):.0f} s)")
                    if args.json is not None:
                        write_json(args.json, summary(args, runs) | {"partial": True})
    return summary(args, runs) | {"partial": False}


def progress(t0: float, text: str) -> None:
    sys.stderr.write(f"peer [{time.monotonic() - t0:4.0f} s] {text}\n")
    sys.stderr.flush()


def main(argv=None) -> int:
    args = parse(argv)
    try:
        if args.worker is not None:
            from scripts.peer_workers import gpt_fast_worker, ours_worker

            worker = gpt_fast_worker if args.worker == GPT_FAST else ours_worker
            print(json.dumps(worker(args)))
            return 0
        if args.table is not None:
            print(table(read_report(args.table)))
            return 0
        if args.gpt_fast is None:
            raise PeerError("--gpt-fast DIR is required (a gpt-fast checkout), or --table JSON")
        check(args)
        report = compare(args)
    except PeerError as e:
        sys.stderr.write(f"peer_gptfast: error: {e}\n")
        return 2
    print(table(report))
    if args.json is not None:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
