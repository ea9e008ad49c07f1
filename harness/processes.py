"""bench --processes N: each variant in N processes of its own, interleaved (a b a b ...).

Eager variants vary between processes far more than within one (allocator state, clocks, what
else the machine runs), so a comparison's confidence interval must come from process-level
results. Each process runs `python -m harness bench` for one variant; its median ms/step is one
observation. Reported: the median over the processes with a 95% bootstrap interval (seeded), and
for each variant against the first the interval of the median of the paired differences (process
i of b minus process i of a: they ran next to each other). With one variant, it is run as two
arms (`v` and `v (again)`), interleaved the same way: their difference is the A/A noise floor.
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .config import LOOP_VARIANTS, ConfigError

BOOTSTRAP_SAMPLES = 10_000
SEED = 20261201
AGAIN = " (again)"


def median_ci(values, rng: np.random.Generator) -> list:
    """95% percentile-bootstrap interval of the median."""
    v = np.asarray(values, dtype=np.float64)
    picks = rng.integers(0, len(v), size=(BOOTSTRAP_SAMPLES, len(v)))
    lo, hi = np.percentile(np.median(v[picks], axis=1), [2.5, 97.5])
    return [float(lo), float(hi)]


def arms(variants: list) -> list:
    """The arms run: the variants, or for one variant the variant twice (A/A)."""
    return variants if len(variants) > 1 else [variants[0], variants[0] + AGAIN]


def schedule(variants: list, n: int) -> list:
    """(round, arm) in the order run: a b a b ..."""
    return [(i, arm) for i in range(n) for arm in arms(variants)]


# Options that belong to one variant only (as harness.config.bench_configs has it), and those
# some variants take no part in.
OWN_OPTIONS = {"--k": "check-every-k", "--branches": "fused"}
NOT_FOR = {"--window": LOOP_VARIANTS}


def child_command(arm: str, options: list, repeats: int, out: Path) -> list:
    """`options`: flag, value pairs; --k and --branches go to their variant only, --window to
    all but the loops of one launch."""
    variant = arm.removesuffix(AGAIN)
    pairs = [options[j:j + 2] for j in range(0, len(options), 2)]
    kept = [x for flag, value in pairs if OWN_OPTIONS.get(flag, variant) == variant
            and variant not in NOT_FOR.get(flag, ()) for x in (flag, value)]
    return [sys.executable, "-m", __package__, "bench", "--variants", variant,
            "--repeats", str(repeats), "--json", str(out), *kept]


def run_child(command: list) -> dict:
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise ConfigError(f"a bench process failed (exit {proc.returncode}): {last}")
    return json.loads(Path(command[command.index("--json") + 1]).read_text())


def run_processes(variants: list, n: int, repeats: int, options: list, runner=run_child,
                  log=sys.stderr, on_round=None) -> dict:
    """The process-level report; `runner` runs one child command and returns its bench JSON.
    `on_round(report)` gets the report of the rounds done so far after each round, so that a
    run cut short (a time limit, ^C) keeps what it measured."""
    order = schedule(variants, n)
    width = len(arms(variants))
    per_arm = {arm: [] for arm in arms(variants)}
    with tempfile.TemporaryDirectory(prefix="gapscope-bench-") as tmp:
        for k, (i, arm) in enumerate(order):
            out = Path(tmp) / f"{k}.json"
            report = runner(child_command(arm, options, repeats, out))
            result = report["results"][0]
            per_arm[arm].append(result)
            log.write(f"bench --processes: [{k + 1}/{len(order)}] {arm}, process {i + 1}/{n}: "
                      f"{result['ms_per_step_median']:.3f} ms/step\n")
            log.flush()
            if on_round is not None and (k + 1) % width == 0 and i + 1 < n:
                on_round(summarize(variants, n, repeats, per_arm))
    return summarize(variants, n, repeats, per_arm)


def summarize(variants: list, n: int, repeats: int, per_arm: dict) -> dict:
    """`per_arm`: each arm's results of the rounds done (all arms the same count); `n` the
    rounds planned: `complete` says whether all of them ran."""
    rng = np.random.default_rng(SEED)
    results = []
    for arm, runs in per_arm.items():
        ms = [r["ms_per_step_median"] for r in runs]
        floor_ms = [r["floor"]["floor_ms_per_step"] for r in runs if r.get("floor")]
        median = float(np.median(ms))
        results.append({
            "variant": arm,
            "processes": len(ms),
            "ms_per_step": ms,
            "ms_per_step_median": median,
            "ms_per_step_ci95": median_ci(ms, rng),
            "floor_ms_per_step": float(np.median(floor_ms)) if floor_ms else None,
            "floor_pct": 100 * float(np.median(floor_ms)) / median if floor_ms else None,
        })
    base = results[0]
    differences = []
    for other in results[1:]:
        d = np.array(other["ms_per_step"]) - np.array(base["ms_per_step"])
        lo, hi = median_ci(d, rng)
        differences.append({
            "a": base["variant"], "b": other["variant"],
            "median_diff_ms": float(np.median(d)), "ci95": [lo, hi],
            "relative_ci95": [lo / base["ms_per_step_median"], hi / base["ms_per_step_median"]],
            "within_noise": bool(lo <= 0 <= hi),
        })
    done = len(base["ms_per_step"])
    return {
        "processes": done,
        "processes_planned": n,
        "complete": done == n,
        "repeats": repeats,
        "aa": len(variants) == 1,
        "spread": "between processes",
        "results": results,
        "differences": differences,
        "runs": per_arm,
    }


def table(report: dict) -> str:
    head = f"{'variant':<24}{'procs':>6}{'ms/step':>10}{'95% CI':>22}{'% floor':>9}"
    lines = [head, "-" * len(head)]
    for r in report["results"]:
        lo, hi = r["ms_per_step_ci95"]
        pct = "-" if r["floor_pct"] is None else f"{r['floor_pct']:.1f}"
        lines.append(f"{r['variant']:<24}{r['processes']:>6}{r['ms_per_step_median']:>10.3f}"
                     f"{f'[{lo:.3f}, {hi:.3f}]':>22}{pct:>9}")
    for d in report["differences"]:
        lo, hi = d["ci95"]
        what = "A/A noise floor" if report["aa"] else f"{d['b']} - {d['a']}"
        verdict = "within noise" if d["within_noise"] else "a difference"
        lines.append(f"{what}: {d['median_diff_ms']:+.3f} ms/step, 95% CI [{lo:+.3f}, {hi:+.3f}] "
                     f"({100 * d['relative_ci95'][0]:+.1f}%..{100 * d['relative_ci95'][1]:+.1f}%)"
                     f", {verdict}")
    cut = ("" if report.get("complete", True)
           else f" (of {report['processes_planned']} planned: cut short)")
    lines.append(f"CIs: bootstrap of the median over {report['processes']} processes per "
                 f"variant{cut}, interleaved; differences paired by round")
    return "\n".join(lines)
