"""gpt-fast's own decode against our rungs on the same model shape, batch, dtype and token count.

    python scripts/peer_gptfast.py --gpt-fast DIR [--batches 1,8] [--variants graphed,fused]
        [--processes 3] [--repeats 5] [--new-tokens 100] [--dtype bf16] [--json FILE]
        [--workdir DIR]

DIR is a gpt-fast checkout (github.com/pytorch-labs/gpt-fast): its model.py and generate.py are
imported from there, nothing of it is copied here. The shape is its `stories110M` (12 layers x 768,
12 heads, no GQA, SwiGLU 2048, vocab 32000, untied), random weights on both sides; our side reads
the equivalent transformers LlamaConfig, which this script writes to WORKDIR/stories110M/.

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
cold (60-90 s on the H200), the later ones load its kernels (and their coordinate-descent tuning)
from the cache. Each worker's wall time is in the JSON (`process_s`) and in the progress lines
(stderr), so a cold process shows as one.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GPT_FAST = "gpt-fast"
MODEL_NAME = "stories110M"
# transformers' LlamaConfig of gpt-fast's stories110M (its ModelArgs: block_size 2048, rope_base
# 10000, norm_eps 1e-5, intermediate find_multiple(2 * 4 * 768 / 3, 256) = 2048, untied output).
LLAMA_CONFIG = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 32000,
    "hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 12,
    "num_attention_heads": 12, "num_key_value_heads": 12, "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
    "attention_bias": False, "mlp_bias": False, "bos_token_id": 1, "eos_token_id": 2,
    "initializer_range": 0.02,
}


class PeerError(Exception):
    """Bad usage or a failed process: one line, exit 2."""


def parse(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="peer_gptfast.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--gpt-fast", type=Path, default=None, help="a gpt-fast checkout")
    p.add_argument("--table", type=Path, default=None, metavar="JSON",
                   help="print the table of an earlier run's --json file again, and stop")
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
    p.add_argument("--model-dir", type=Path, default=None, help=argparse.SUPPRESS)
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


def write_config(workdir: Path) -> Path:
    model_dir = workdir / MODEL_NAME
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(LLAMA_CONFIG, indent=2) + "\n")
    return model_dir


def cache_env(workdir: Path, environ=None) -> dict:
    """The workers' environment: compile caches shared by every process of one comparison."""
    env = dict(os.environ if environ is None else environ)
    cache = workdir / "cache"
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache / "inductor"))
    env.setdefault("TRITON_CACHE_DIR", str(cache / "triton"))
    env.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "1")
    env.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "1")
    return env


def run_worker(args, side: str, batch: int, model_dir: Path) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--gpt-fast", str(args.gpt_fast),
               "--worker", side, "--batch", str(batch), "--model-dir", str(model_dir),
               "--repeats", str(args.repeats), "--new-tokens", str(args.new_tokens),
               "--dtype", args.dtype, "--top-k", str(args.top_k),
               "--temperature", str(args.temperature)]
    t0 = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True,
                          env=cache_env(model_dir.parent))
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
        model_dir = write_config(args.workdir or Path(tmp))
        for i in range(args.processes):  # rounds outermost: a run cut short has every batch
            for b in batches(args):
                for side in sides:
                    where = f"batch {b}, {side}, process {i + 1}/{args.processes}"
                    progress(t0, f"{where}: starting")
                    r = run_worker(args, side, b, model_dir)
                    runs.setdefault(f"{b}/{side}", []).append(r)
                    progress(t0, f"{where}: {r['ms_per_token_median']:.3f} ms/token "
                             f"(process {r.get('process_s', 0):.0f} s)")
                    if args.json is not None:
                        write_json(args.json, summary(args, runs) | {"partial": True})
    return summary(args, runs) | {"partial": False}


def summary(args, runs: dict) -> dict:
    """Per (batch, side): each process's median ms/token, their median, min-max and 95% CI,
    the floor and its %, the speedup over gpt-fast's median at that batch."""
    import numpy as np

    from harness.processes import SEED, median_ci

    rng = np.random.default_rng(SEED)
    rows = []
    for key, rs in runs.items():
        b, side = key.split("/")
        ms = [r["ms_per_token_median"] for r in rs]
        base = statistics.median(x["ms_per_token_median"] for x in runs[f"{b}/{GPT_FAST}"])
        floor_ms = statistics.median(r["floor_ms_per_token"] for r in rs)
        med = statistics.median(ms)
        rows.append({"batch": int(b), "side": side, "processes": len(ms), "ms_per_token": ms,
                     "process_s": [r.get("process_s") for r in rs],
                     "ms_per_token_median": med, "min": min(ms), "max": max(ms),
                     "ci95": median_ci(ms, rng), "floor_ms_per_token": floor_ms,
                     "floor_pct": 100 * floor_ms / med, "speedup_vs_gpt_fast": base / med,
                     "tokens_equal_kv": rs[0].get("tokens_equal_kv"),
                     "sampling": rs[0]["sampling"], "span": rs[0]["span"]})
    return {"config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
                       if k not in ("worker", "batch", "model_dir")},
            "model": LLAMA_CONFIG, "versions": runs[next(iter(runs))][0]["versions"],
            "rows": rows, "runs": runs}


def write_json(path: Path, report: dict) -> None:
    path.write_text(json.dumps(report, indent=2) + "\n")


def progress(t0: float, text: str) -> None:
    sys.stderr.write(f"peer [{time.monotonic() - t0:4.0f} s] {text}\n")
    sys.stderr.flush()


def read_report(path: Path) -> dict:
    """An earlier run's --json file, whole (a run cut short says so: partial)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise PeerError(f"--table {path}: not a peer_gptfast JSON file ({e})") from None
    if not isinstance(report, dict) or not isinstance(report.get("rows"), list):
        raise PeerError(f"--table {path}: no rows (not a peer_gptfast --json file)")
    if report.get("partial"):
        sys.stderr.write(f"peer_gptfast: {path} is partial: the run was cut short\n")
    return report


def table(report: dict) -> str:
    head = (f"{'batch':>5} {'side':<14}{'procs':>6}{'ms/token':>10}{'min-max':>16}"
            f"{'95% CI':>18}{'% floor':>9}{'speedup':>9}{'=kv':>7}")
    lines = [head, "-" * len(head)]
    for r in report["rows"]:
        lo, hi = r["ci95"]
        agree = "-" if r["tokens_equal_kv"] is None else f"{r['tokens_equal_kv']:.2f}"
        lines.append(f"{r['batch']:>5} {r['side']:<14}{r['processes']:>6}"
                     f"{r['ms_per_token_median']:>10.3f}{r['min']:>9.3f}-{r['max']:<6.3f}"
                     f"{f'[{lo:.3f}, {hi:.3f}]':>18}{r['floor_pct']:>9.1f}"
                     f"{r['speedup_vs_gpt_fast']:>8.2f}x{agree:>7}")
    lines.append("ms/token: the median over processes of each one's median; min-max: the "
                 "processes'")
    lines.append("speedup: gpt-fast's median / the side's; =kv: the share of its tokens equal to "
                 "kv's")
    lines.append("(same process, same weights); sampling, and the span timed:")
    for r in report["rows"]:
        if r["batch"] == report["rows"][0]["batch"]:
            lines.append(f"  {r['side']}: {r['sampling']}")
            lines.append(f"  {'':<{len(r['side'])}}  timed: {r['span']}")
    return "\n".join(lines)


@contextmanager
def cuda_span():
    """Elapsed ms between two CUDA events around the body (read after a synchronize)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    box = {}
    start.record()
    yield box
    end.record()
    end.synchronize()
    box["ms"] = start.elapsed_time(end)


def floor_ms(dtype_bytes: int, weight_bytes: int, variant: str, batch: int, tokens: int) -> float:
    """harness/floor.py's floor of one step of this shape at the copy rate measured here."""
    from transformers import LlamaConfig

    from harness.bench import copy_bytes_per_s
    from harness.floor import floor, model_shape

    shape = model_shape(LlamaConfig(**LLAMA_CONFIG), dtype_bytes, weight_bytes)
    return floor(shape, variant, batch, tokens, range(tokens), copy_bytes_per_s("cuda"),
                 None)["floor_ms_per_step"]


def gpt_fast_worker(args) -> dict:
    """gpt-fast's decode_n_tokens, compiled as its generate.py --compile does."""
    import torch

    sys.path.insert(0, str(args.gpt_fast.resolve()))
    stand_in_tokenizer_imports()
    import generate as gf  # gpt-fast's; it sets its inductor options on import

    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = gf.Transformer.from_name(MODEL_NAME)
    model = model.to(dtype=dtype).eval().requires_grad_(False)
    gf.decode_one_token = torch.compile(gf.decode_one_token, mode="reduce-overhead",
                                        fullgraph=True)
    b, n = args.batch, args.new_tokens
    sampling = dict(temperature=args.temperature, top_k=args.top_k)
    prompt = torch.full((b, 1), 1, dtype=torch.int, device="cuda")  # BOS, as ours
    with torch.device("cuda"):
        model.setup_caches(max_batch_size=b, max_seq_length=1 + n)

    def once() -> float:
        with torch.no_grad():
            token = gf.prefill(model, prompt, torch.arange(0, 1, device="cuda"), **sampling)
            pos = torch.tensor([1], device="cuda", dtype=torch.int)
            with cuda_span() as span:
                gf.decode_n_tokens(model, token.view(b, -1), pos, n - 1, **sampling)
        return span["ms"] / (n - 1)

    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return measure(once, args, f"top-k {args.top_k}, temperature {args.temperature} (its "
                   "sample(): softmax, an exponential draw, argmax)",
                   f"its decode_n_tokens() for {n - 1} tokens", weights, "graphed", dtype)


def stand_in_tokenizer_imports() -> None:
    """generate.py imports its tokenizer, which imports sentencepiece and tiktoken; the decode
    uses neither: where they are missing, empty modules stand in."""
    for name in ("sentencepiece", "tiktoken", "tiktoken.load"):
        try:
            __import__(name)
        except ImportError:
            module = types.ModuleType(name)
            module.load_tiktoken_bpe = None
            sys.modules[name] = module


class LoopSpan:
    """A StepTimeline stand-in: CUDA events at the start of step 1 and the end of step `last`
    only (an event pair every step would add host work the decode does not do)."""

    def __init__(self, last: int):
        self.last, self.on, self.marks = last, True, {}

    @contextmanager
    def span(self, i: int):
        import torch

        if i == 1:
            self.marks["start"] = torch.cuda.Event(enable_timing=True)
            self.marks["start"].record()
        yield
        if i == self.last:
            self.marks["end"] = torch.cuda.Event(enable_timing=True)
            self.marks["end"].record()

    def end_early(self) -> None:
        pass


def ours_worker(args) -> dict:

    from harness.config import RunConfig, validate
    from harness.instrument import ProfilerWindow, no_window
    from harness.model import weight_bytes
    from harness.run import load_model, make_decoder

    n = args.new_tokens
    cfg = validate(RunConfig(variant=args.worker, model=str(args.model_dir), batch=args.batch,
                             new_tokens=n, dtype=args.dtype, device="cuda"))
    model = load_model(cfg)
    decode = make_decoder(model, cfg)

    def once() -> float:
        window = ProfilerWindow(0, 0, False, timeline=LoopSpan(n))
        result = decode(window)
        assert result["steps_run"] == n, result["steps_run"]
        return window.timeline.marks["start"].elapsed_time(window.timeline.marks["end"]) / n

    dtype = next(model.parameters()).dtype
    report = measure(once, args, "greedy (argmax), then the stop schedule's bookkeeping",
                     f"steps 1-{n} of the decoder", weight_bytes(model), args.worker, dtype)
    tokens = decode(no_window())["tokens"]
    ref = make_decoder(model, replace(cfg, variant="kv"))(no_window())["tokens"]
    return report | {"tokens_equal_kv": float((tokens == ref)[:, 1:].float().mean())}


def measure(once, args, sampling: str, span: str, weights: int, floor_variant: str, dtype) -> dict:
    import torch

    from harness.run import versions

    for _ in range(2):  # compile, capture, warm
        once()
    ms = [once() for _ in range(args.repeats)]
    return {"side": args.worker, "batch": args.batch, "ms_per_token": ms,
            "ms_per_token_median": statistics.median(ms), "sampling": sampling, "span": span,
            "floor_ms_per_token": floor_ms(torch.tensor([], dtype=dtype).element_size(), weights,
                                           floor_variant, args.batch, args.new_tokens),
            "versions": versions()}


def main(argv=None) -> int:
    args = parse(argv)
    try:
        if args.worker is not None:
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
