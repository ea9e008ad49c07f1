"""Study part `loop`: the whole decode loop on the GPU (issue 32), from a directory of
one-process benches of the graph-replayed rungs beside `while-graph` and `while-fused`
(`bench-b<B>-p<K>.json`: batch B, the K-th process, its rungs one after another) with their
untraced twins (`steps-b<B>-p<K>-<variant>.json`), and any `harness bench --processes` reports
(`processes-*.json`)."""

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.toolkit import frame_md_table

from .benches import made_line, processes_tables
from .text import SAME_PROCESS, bullet, listing, pct, span

BENCH = re.compile(r"^bench-b(\d+)-p(\d+)\.json$")
ORDER = ("graphed-sync", "graphed", "while-graph", "fused", "while-fused", "nocheck")
LOOP_TEXT = (
    "`while-graph` runs `graphed`'s step as the body of a CUDA graph WHILE node, `while-fused` "
    "`fused`'s: one launch decodes every token, a kernel at the end of the body sets the loop's "
    "condition from the step's all-finished flag, and the host waits once, at the end "
    "(docs/VARIANTS.md). Each bench file is one `harness bench` process timing the rungs one "
    "after another (medians of its repeats after a warm-up, p10–p90 beside them), then timing "
    "every step untraced: CUDA events around each step for the rungs that return to the host, "
    "the GPU's %globaltimer written by a kernel at the start and at the end of the loop's body "
    "for the two loops. The processes ran one batch after another, then again (interleaved): "
    "ms/step is the median over the processes of each process's median, the range beside it "
    "the processes' medians. Bubble: the twin's median gap from a step's end mark to the next "
    "step's start mark; the loops' marks sit inside the body (after the step's last kernel, "
    "before its first), the events outside the graph launch, so a loop's bubble holds the "
    "WHILE node's own turn-around and the rungs' bubble does not hold the graph's entry: "
    "compare the periods.")


def runs(root: Path) -> pd.DataFrame:
    """One row a bench result: batch, process, variant, its bench entry's figures and its
    twin's median period and bubble (ns)."""
    rows = []
    for path in sorted(root.glob("bench-b*-p*.json")):
        m = BENCH.match(path.name)
        if not m:
            continue
        batch, process = int(m.group(1)), int(m.group(2))
        report = json.loads(path.read_text())
        for r in report["results"]:
            twin = root / f"steps-b{batch}-p{process}-{r['variant']}.json"
            period, bubble = twin_medians(json.loads(twin.read_text())) if twin.is_file() \
                else (None, None)
            rows.append({"batch": batch, "process": process, "variant": r["variant"],
                         "ms": r["ms_per_step_median"], "p10": r["ms_per_step_p10"],
                         "p90": r["ms_per_step_p90"], "tokens_per_s": r["tokens_per_s"],
                         "steps": r["steps"], "sha": r["tokens_sha256"],
                         "period_ns": period, "bubble_ns": bubble,
                         "versions": report.get("versions") or {},
                         "config": report.get("config") or {}})
    return pd.DataFrame(rows)


def twin_medians(doc: dict) -> tuple:
    """The median period (end to end) and bubble (end to next start) over every run's steps."""
    periods, bubbles = [], []
    for run in doc["runs"]:
        start, end = np.asarray(run["start_ns"]), np.asarray(run["end_ns"])
        periods += list(np.diff(end))
        bubbles += list(start[1:] - end[:-1])
    return (float(np.median(periods)) if periods else None,
            float(np.median(bubbles)) if bubbles else None)


def by_variant(t: pd.DataFrame) -> pd.DataFrame:
    """Per batch and variant: median over processes, the processes' range, the first process's
    p10–p90, tokens/s, the twin's period and bubble (medians over processes)."""
    g = t.groupby(["batch", "variant"], sort=False)
    out = g.agg(processes=("ms", "size"), ms=("ms", "median"), lo=("ms", "min"),
                hi=("ms", "max"), p10=("p10", "first"), p90=("p90", "first"),
                tokens_per_s=("tokens_per_s", "median"), period_ns=("period_ns", "median"),
                bubble_ns=("bubble_ns", "median"), steps=("steps", "first"))
    return out.reset_index()


def ladder_table(v: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, r in v.sort_values(["batch", "variant"], key=_order).iterrows():
        gs = v[(v["batch"] == r["batch"]) & (v["variant"] == "graphed")]["ms"]
        rows.append({
            "batch": int(r["batch"]), "variant": r["variant"], "processes": int(r["processes"]),
            "ms/step": f"{r['ms']:.3f}",
            "processes' range": f"{r['lo']:.3f}–{r['hi']:.3f}" if r["processes"] > 1 else "–",
            "p10–p90 (first process)": f"{r['p10']:.3f}–{r['p90']:.3f}",
            "tokens/s": f"{r['tokens_per_s']:.0f}",
            "vs graphed": pct(r["ms"] / gs.iloc[0] - 1, sign=True) if len(gs) else "–",
            "untraced period ms": _ms(r["period_ns"]),
            "untraced bubble µs": _us(r["bubble_ns"]), "steps": int(r["steps"])})
    return pd.DataFrame(rows)


def bubble_table(v: pd.DataFrame) -> pd.DataFrame:
    """What the per-step sync costs each rung and what is left with the loop on the GPU."""
    rows = []
    for batch, b in v.groupby("batch"):
        ms = dict(zip(b["variant"], b["ms"], strict=True))
        bub = dict(zip(b["variant"], b["bubble_ns"], strict=True))
        if not {"graphed-sync", "graphed", "while-graph"} <= set(ms):
            continue
        rows.append({
            "batch": int(batch),
            "graphed-sync bubble µs": _us(bub["graphed-sync"]),
            "graphed bubble µs": _us(bub["graphed"]),
            "while-graph bubble µs": _us(bub["while-graph"]),
            "graphed-sync − graphed µs/step": _diff(ms, "graphed-sync", "graphed"),
            "graphed-sync − while-graph µs/step": _diff(ms, "graphed-sync", "while-graph"),
            "graphed − while-graph µs/step": _diff(ms, "graphed", "while-graph"),
            "fused − while-fused µs/step": _diff(ms, "fused", "while-fused")})
    return pd.DataFrame(rows)


def findings(t: pd.DataFrame, v: pd.DataFrame) -> list:
    same = all(g["sha"].nunique() == 1 for _, g in t.groupby("batch"))
    batches = sorted(v["batch"].unique())
    out = [bullet("One launch, the same tokens.",
                  f"At batch {listing([str(b) for b in batches])} every rung here decoded the "
                  f"same tokens (tokens_sha256{'' if same else ': NOT all equal'}); the loops ran "
                  "every step in one graph launch with the stop check on the device.")]
    cost, left, fused = [], [], []
    for batch in batches:
        ms = dict(zip(*(v[v["batch"] == batch][c] for c in ("variant", "ms")), strict=True))
        if {"graphed-sync", "while-graph", "graphed"} <= set(ms):
            cost.append(1e3 * (ms["graphed-sync"] - ms["while-graph"]))
            left.append(ms["while-graph"] / ms["graphed"] - 1)
        if {"fused", "while-fused"} <= set(ms):
            fused.append(ms["while-fused"] / ms["fused"] - 1)
    if cost:
        out.append(bullet(
            "The article's bubble gone:",
            f"`while-graph` ran {span(cost, '.1f')} µs a step below `graphed-sync` (the same step "
            f"with `.item()` after each replay; {SAME_PROCESS}, medians over the processes) and "
            f"{pct_span_signed(left)} against `graphed` (the flag read a step late), its stop "
            "check made on the device after every step."))
    if fused:
        out.append(bullet(
            "What the loop itself buys:",
            f"`while-fused` against `fused` (no memset or copy nodes in its step): "
            f"{pct_span_signed(fused)}. `while-graph`'s lead over `graphed` is its step's "
            "memset and copy nodes (cuBLASLt's split-K memsets, the step's copies), which the "
            "driver runs as kernels inside a conditional body (`memset32`, `memcpy32_post` in "
            "the node-level capture, tests/data/runs/while-graph) where a graph replayed from "
            "the host runs them as memset and copy operations, each with the graph's own "
            "latency around it."))
    return out


def pct_span_signed(values: list) -> str:
    lo, hi = min(values), max(values)
    return pct(lo, sign=True) if abs(hi - lo) < 5e-4 else f"{pct(lo, sign=True)} to " \
        f"{pct(hi, sign=True)}"


def loop_sections(root: Path, fig: Path | None = None) -> list:
    t = runs(root)
    if t.empty:
        return []
    v = by_variant(t)
    first = t.iloc[0]
    made = made_line(first["versions"], first["config"], len(t.groupby(["batch", "process"])))
    parts = [f"## The whole loop on the GPU ({root.name})", LOOP_TEXT, made,
             *findings(t, v), "### The rungs by batch (untraced)",
             frame_md_table(ladder_table(v))]
    bubbles = bubble_table(v)
    if not bubbles.empty:
        parts += ["### What the per-step sync costs, and what is left when the loop stays on "
                  "the GPU (untraced)", frame_md_table(bubbles)]
    for title, table in processes_tables(root, "processes-*.json"):
        parts += [title, frame_md_table(table)]
    return parts


def _order(col: pd.Series) -> pd.Series:
    if col.name == "variant":
        return col.map(lambda x: ORDER.index(x) if x in ORDER else len(ORDER))
    return col


def _diff(ms: dict, a: str, b: str) -> str:
    return f"{1e3 * (ms[a] - ms[b]):+.1f}" if a in ms and b in ms else "–"


def _ms(ns) -> str:
    return "–" if ns is None or pd.isna(ns) else f"{ns / 1e6:.3f}"


def _us(ns) -> str:
    return "–" if ns is None or pd.isna(ns) else f"{ns / 1e3:.1f}"
