"""Variants side by side, with bootstrap confidence intervals on the per-step medians, and the
spread between runs of one configuration (render/compare.py prints them).

A difference from the first run is "within noise" when the 95% interval of the difference of
medians (steps resampled with replacement, seeded by their values) contains zero.
"""

import hashlib
import json

import numpy as np
import pandas as pd

from ..measures.summary import CAUSES, by_thread

BOOTSTRAP_SAMPLES = 2000
SEED = 20261130
# Per-step columns whose medians are compared, and the summary key each one's median is.
COMPARED = {"period_ns": "period_ns_median", "cpu_ns": "step_cpu_ns_median",
            "bubble_ns": "bubble_ns_median"}


# Resamples drawn this many at a time (an even number: the generator's stream is then the same as
# drawing them all at once).
BOOTSTRAP_ROWS = 250


def bootstrap_medians(values: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
    """The medians of BOOTSTRAP_SAMPLES resamples (with replacement) of `values`, drawn by a
    generator seeded from the values themselves: the same steps give the same interval wherever
    the run sits in a comparison, and whatever else is compared. What np.median(values[picks],
    axis=1) gives of rng.integers(0, n, (BOOTSTRAP_SAMPLES, n)), found by counting each
    resample's picks by rank (a cumulative count reaches the middle) instead of partitioning
    every resample. `rng`: another generator (the tests')."""
    if rng is None:
        digest = hashlib.sha256(np.ascontiguousarray(values, dtype=np.float64).tobytes()).digest()
        rng = np.random.default_rng([SEED, int.from_bytes(digest[:8], "little")])
    n = len(values)
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    low, high = (n - 1) // 2, n // 2  # the middle order statistics, 0-based
    medians = []
    for first in range(0, BOOTSTRAP_SAMPLES, BOOTSTRAP_ROWS):
        rows = min(BOOTSTRAP_ROWS, BOOTSTRAP_SAMPLES - first)
        picks = rank[rng.integers(0, n, size=(rows, n))] + (np.arange(rows) * n)[:, None]
        reach = np.bincount(picks.ravel(), minlength=rows * n).reshape(rows, n).cumsum(axis=1)
        a, b = ranked[(reach <= low).sum(axis=1)], ranked[(reach <= high).sum(axis=1)]
        medians.append(a if low == high else (a + b) / 2)
    return np.concatenate(medians)


def _values(steps: pd.DataFrame, column: str) -> np.ndarray:
    return steps[column].dropna().to_numpy(dtype=np.float64)


def compare(labels: list, analyses: list, runs: list) -> pd.DataFrame:
    """One row per run: headline numbers, CIs, difference from the first run, profiler overhead.
    `analyses` holds one Analysis per run (the device compared)."""
    boots = [{c: bootstrap_medians(v) if len(v := _values(a.steps, c)) else None
              for c in COMPARED} for a in analyses]
    rows = []
    for label, a, run, boot in zip(labels, analyses, runs, boots, strict=True):
        s = a.summary
        threads = by_thread(a.steps)
        row = {"label": label, "device": a.device, "steps": s["steps"],
               "steps_from": s.get("steps_from") or "nvtx", "threads": len(threads) or 1,
               "period_ns_median_by_thread": (
                   {str(k): v for k, v in threads["period_ns_median"].items()}
                   if len(threads) else None),
               "busy_share_of_window": s["busy_share_of_window"],
               "bubble_ns_p90": s["bubble_ns_p90"],
               "sync_idle_share_of_window": s["sync_idle_share_of_window"]}
        for column, key in COMPARED.items():
            row[key] = s[key]
            b, base = boot[column], boots[0][column]
            row[f"{key}_ci"] = None if b is None else tuple(np.percentile(b, [2.5, 97.5]))
            if b is None or base is None:
                row[f"{key}_vs_first_ci"], row[f"{key}_within_noise"] = None, None
            else:
                lo, hi = np.percentile(b - base, [2.5, 97.5])
                row[f"{key}_vs_first_ci"] = (float(lo), float(hi))
                row[f"{key}_within_noise"] = bool(lo <= 0 <= hi)
        for cause in CAUSES:
            row[f"idle_{cause}_ns"] = s["idle_ns_by_cause"][cause]
            # Per step: runs of 20 and 60 steps compare (the periods add up to the window).
            row[f"idle_{cause}_ns_per_step"] = (s["idle_ns_by_cause"][cause] / s["steps"]
                                               if s["steps"] else None)
        traced, untraced = run.traced_ms_per_step(), run.untraced_ms_per_step()
        row["traced_ms_per_step"] = traced
        row["untraced_ms_per_step"] = untraced
        row["profiler_overhead"] = traced / untraced - 1 if traced and untraced else None
        twin = s.get("untraced") or {}
        for key in ("period_ns_median", "bubble_ns_median", "profiler_bubble_share",
                    "profiler_bubble_share_within_noise"):
            row[f"untraced_{key}"] = twin.get(key)
        row["untraced_period_spread_ms"] = _twin_spread(twin)
        row["untraced_bench_spread_ms"] = _bench_spread(run.info.get("untraced"))
        host = s.get("host") if isinstance(s.get("host"), dict) else {}
        row["host_period_ns_mean"] = host.get("period_ns_mean")
        row["host_named_share"] = host.get("named_share")
        rows.append(row)
    table = pd.DataFrame(rows)
    table["traced_rank"], table["untraced_rank"] = ranks(table)
    table["work"] = work_differences(runs)
    return table


# The configuration keys that change what a step computes (the variant and compile mode change
# how it is computed: what a comparison is for).
WORK_KEYS = ("model", "batch", "dtype", "matmul_precision", "window")


def work_differences(runs: list) -> list:
    """Each run's values of the WORK_KEYS that differ between the runs (`batch=32`), None for
    every run where none differs (or no run.json says): runs that compute different steps are
    ranked side by side only with a note (render/compare.py)."""
    configs = [r.info.get("config") if isinstance(r.info.get("config"), dict) else {}
               for r in runs]
    differ = [k for k in WORK_KEYS
              if len({str(c[k]) for c in configs if c.get(k) is not None}) > 1]
    if not differ:
        return [None] * len(runs)
    return [" ".join(f"{k}={c.get(k, '?')}" for k in differ) for c in configs]


def untraced_figure(table: pd.DataFrame) -> tuple:
    """The untraced figure every run has, to rank them by: the twin's GPU period (events), else
    the bench's ms/step (run.json); (None, None) where some run has neither."""
    for key, scale, name in (("untraced_period_ns_median", 1e6, "events"),
                             ("untraced_ms_per_step", 1.0, "bench")):
        values = pd.to_numeric(table[key], errors="coerce")
        if values.notna().all():
            return values / scale, name
    return None, None


def ranks(table: pd.DataFrame) -> tuple:
    """1 for the fastest, by the traced GPU period and by the untraced figure (None where a run
    lacks one: a ranking of some runs would hide the others)."""
    traced = pd.to_numeric(table["period_ns_median"], errors="coerce")
    untraced, _ = untraced_figure(table)
    if untraced is None or traced.isna().any():
        return [None] * len(table), [None] * len(table)
    return _rank(traced), _rank(untraced)


def _rank(values: pd.Series) -> list:
    return values.rank(method="min").astype(int).tolist()


def _twin_spread(twin: dict) -> tuple | None:
    """(min, max) in ms of the twin's per-run period medians (its runs, of every process that
    overhead.sh merged); a list stored as JSON text by the database too."""
    runs = twin.get("run_period_ns_medians")
    if isinstance(runs, str):
        runs = json.loads(runs)
    runs = [x for x in runs or [] if x is not None]
    return (min(runs) / 1e6, max(runs) / 1e6) if runs else None


def _bench_spread(bench: dict | None) -> tuple | None:
    """(min, max) in ms of the bench's untraced ms/step: its processes' medians where several
    processes ran (overhead.sh), else its p10–p90 over the repeats of its one process."""
    bench = bench or {}
    procs = [x for x in bench.get("processes_ms_per_step") or [] if x is not None]
    if len(procs) > 1:
        return min(procs), max(procs)
    lo, hi = bench.get("ms_per_step_p10"), bench.get("ms_per_step_p90")
    return (lo, hi) if lo is not None and hi is not None else None


def _config(run, a) -> dict | None:
    """What makes two runs repeats: run.json's config without where it was written, and how
    the CUDA graphs were recorded (a graph-level and a node-level capture of one configuration
    are two observers, not repeats: summary.cuda_graph_trace); None without a config."""
    config = run.info.get("config")
    if not isinstance(config, dict):
        return None
    out = {k: str(v) for k, v in config.items() if k != "out"}
    if a.summary.get("cuda_graph_trace") in ("graph", "node", "mixed"):
        out["cuda_graph_trace"] = a.summary["cuda_graph_trace"]
    return out


def _config_key(run, a) -> str:
    """Runs of one configuration (_config), captured by the same profiler (an nsys capture and
    its torch.profiler twin are not repeats)."""
    config = _config(run, a)
    if config is None:
        return f"label:{run.label}"
    profiler = "nsys" if ".sqlite" in run.trace_path.name else "kineto"
    return repr([profiler, *sorted(config.items())])


def between_runs(analyses: list, runs: list) -> pd.DataFrame | None:
    """Where several runs share one configuration (`make profile RUNS=N`), one row per
    configuration with the spread *between* runs: each run's median GPU period is one
    observation; the median of those with a 95% bootstrap CI over runs, and against the first
    configuration the CI of the difference (runs resampled within each configuration). None
    when no configuration has two runs: then only the steps of one run give a spread."""
    groups = {}
    for a, run in zip(analyses, runs, strict=True):
        groups.setdefault(_config_key(run, a), []).append((a, run))
    if max(len(g) for g in groups.values()) < 2:
        return None
    rows, base = [], None
    names = _group_names([members[0] for members in groups.values()])
    for name, members in zip(names, groups.values(), strict=True):
        medians = np.array([a.summary["period_ns_median"] for a, _ in members], dtype=np.float64)
        boot = bootstrap_medians(medians)
        untraced = [r.untraced_ms_per_step() for _, r in members]
        row = {"label": name, "runs": len(members),
               "period_ns_median": float(np.median(medians)),
               "period_ns_ci": tuple(np.percentile(boot, [2.5, 97.5])),
               "untraced_ms_per_step_median": (float(np.median(untraced))
                                               if all(u is not None for u in untraced) else None)}
        if base is None:
            base = boot
            row["vs_first_ci"], row["within_noise"] = None, None
        else:
            lo, hi = np.percentile(boot - base, [2.5, 97.5])
            row["vs_first_ci"], row["within_noise"] = (float(lo), float(hi)), bool(lo <= 0 <= hi)
        rows.append(row)
    return pd.DataFrame(rows)


def _group_names(firsts: list) -> list:
    """Each configuration's label (`firsts`: the (Analysis, run) of its first run), with the
    config values that tell it from the others where two share a label (`static batch=8`,
    `static batch=2`, `fused cuda_graph_trace=node`)."""
    configs = [_config(r, a) or {} for a, r in firsts]
    # A configuration is named by its variant (run.json's), not by its first run's own label.
    labels = [r.variant or r.label for _, r in firsts]
    out = []
    for label, c in zip(labels, configs, strict=True):
        same = [d for d, other in zip(configs, labels, strict=True) if other == label]
        differ = sorted(k for k in c if len({d.get(k) for d in same}) > 1)
        out.append(" ".join([label, *(f"{k}={c[k]}" for k in differ)]))
    return out
