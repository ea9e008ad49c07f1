"""scripts/peer_gptfast.py's report: the summary of its processes (medians, spread, floor share,
speedup), its JSON and its table (`--table JSON` prints a committed run again)."""

import json
import statistics
import sys
from pathlib import Path

from study.peer import best_rates

from .peer_models import PeerError  # noqa: F401 (the scripts' one error)

GPT_FAST = "gpt-fast"


def summary(args, runs: dict) -> dict:
    """Per (batch, side): each process's median ms/token, their median, min-max and 95% CI,
    the floor (at the batch's highest measured copy rate: best_rates) and its %, the speedup
    over gpt-fast's median at that batch."""
    import numpy as np

    from harness.processes import SEED, median_ci

    from .peer_models import model_config

    rng = np.random.default_rng(SEED)
    rows = []
    best = best_rates(runs)
    for key, rs in runs.items():
        b, side = key.split("/")
        ms = [r["ms_per_token_median"] for r in rs]
        base = statistics.median(x["ms_per_token_median"] for x in runs[f"{b}/{GPT_FAST}"])
        floor_ms = statistics.median(at_rate(r, best.get(b)) for r in rs)
        med = statistics.median(ms)
        rows.append({"batch": int(b), "side": side, "processes": len(ms), "ms_per_token": ms,
                     "process_s": [r.get("process_s") for r in rs],
                     "ms_per_token_median": med, "min": min(ms), "max": max(ms),
                     "ci95": median_ci(ms, rng), "floor_ms_per_token": floor_ms,
                     "floor_pct": 100 * floor_ms / med, "speedup_vs_gpt_fast": base / med,
                     "tokens_equal_kv": rs[0].get("tokens_equal_kv"),
                     "sampling": rs[0]["sampling"], "span": rs[0]["span"]})
    return {"config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
                       if k not in ("worker", "batch", "our_model")},
            "model": model_config(args.model), "versions": runs[next(iter(runs))][0]["versions"],
            "rows": rows, "runs": runs}


def at_rate(run: dict, rate: float | None) -> float:
    """A process's floor (ms a token) moved from the copy rate it measured to `rate`."""
    own = run.get("copy_bytes_per_s")
    return run["floor_ms_per_token"] * own / rate if own and rate else run["floor_ms_per_token"]


def write_json(path: Path, report: dict) -> None:
    path.write_text(json.dumps(report, indent=2) + "\n")


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
