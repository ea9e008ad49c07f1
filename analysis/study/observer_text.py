"""The sentences over an observer sweep's tables (study part `observer`, study/observer.py makes
the tables): what nsys added to a step, what the untraced twin sees of the bubble, what a sync
costs a step untraced. Each number as the table it summarises prints it.
"""

from pathlib import Path

import pandas as pd

from ..measures.stats import median
from ..study.observer import CAPTURE_LEVELS, SYNC_PAIRS, share_cell, us_cell_from_ns
from ..study.overhead import variant_dirs

GRAPH_REPLAYED = ("graphed-sync", "graphed", "fused")


def _kind(variant: str) -> str:
    if variant in GRAPH_REPLAYED:
        return "graph-replayed"
    return "compiled" if variant.endswith("compile") or variant == "compiled" else "eager"


def overhead_findings(rows: list) -> list:
    """What nsys added to a step, per kind of rung and capture level (overhead.table's rows)."""
    from ..study.text import bullet, listing, span

    spans = []
    for level, kinds in (("node", ("eager", "compiled", "graph-replayed")),
                         ("graph", ("graph-replayed",))):
        found = []
        for k in kinds:
            values = [100 * (r["traced_ms"][level] / r["untraced_ms"] - 1) for r in rows
                      if level in r["traced_ms"] and r["untraced_ms"] and _kind(r["variant"]) == k]
            if values:
                found.append(f"{k} {span(values, '+.1f', '%')} ({len(values)} captures)")
        if found:
            spans.append(f"flag set `{level}` (`--cuda-graph-trace={level}`): " + ", ".join(found))
    if not spans:
        return []
    gs = [(r["batch"], 100 * (r["traced_ms"]["graph"] / r["untraced_ms"] - 1)) for r in rows
          if r["variant"] == "graphed-sync" and "graph" in r["traced_ms"] and r["untraced_ms"]]
    text = ("(traced ms/step, the harness' host clock over the captured window, ÷ the untraced "
            "median of the processes' medians, another process, − 1): " + "; ".join(spans) + ".")
    if gs:
        text += (" Graph by graph, `graphed-sync`, whose host waits for every step, cost "
                 + listing([f"{x:+.1f}% at batch {b}" for b, x in gs]) + ".")
    return [bullet("What nsys adds to a step", text)]


def bubble_findings(table: pd.DataFrame) -> list:
    from ..study.text import bullet, listing, span

    out = []
    gs = table[table["variant"] == "graphed-sync"]
    if len(gs):
        parts = []
        for level in CAPTURE_LEVELS:
            col = f"{level}_bubble_ns"
            if col not in gs:
                continue
            rows = gs[gs[col].notna()]
            if len(rows):
                parts.append(f"{level}-level " + listing(
                    [f"{us_cell_from_ns(r[col])} µs at batch {r['batch']} "
                     f"({share_cell(r[col], r['untraced_bubble_ns'])} the profiler's)"
                     for _, r in rows.iterrows()]))
        out.append(bullet(
            "The sync's bubble, traced and untraced.",
            "`graphed-sync` (one CUDA graph a step, `.item()` after each): the untraced twin "
            "sees a median bubble of "
            + listing([f"{us_cell_from_ns(r['untraced_bubble_ns'])} µs at batch {r['batch']}"
                       for _, r in gs.iterrows()])
            + "; traced, " + "; ".join(parts) + "."))
    quiet = table[table["variant"].isin(("graphed", "fused"))]
    traced = [x for c in ("node_bubble_ns", "graph_bubble_ns") if c in quiet
              for x in quiet[c].dropna()]
    shares = [1 - u / t for c in ("node_bubble_ns", "graph_bubble_ns") if c in quiet
              for t, u in zip(quiet[c], quiet["untraced_bubble_ns"], strict=True)
              if pd.notna(t) and pd.notna(u) and t > 0]
    if traced:
        out.append(bullet(
            "Graph-replayed rungs without a per-step sync",
            f"(`graphed`, `fused`) show {span([x / 1e3 for x in traced], '.1f')} µs traced "
            f"(either level) against {span(quiet['untraced_bubble_ns'] / 1e3, '.1f')} µs "
            "untraced, about the floor of two CUDA events back to back: "
            f"{span([100 * s for s in shares], '.0f', '%')} of their traced bubble is the "
            "profiler's."))
    return out


def sync_cost_findings(table: pd.DataFrame) -> list:
    from ..study.text import BETWEEN_PROCESSES, bullet, listing, verdict

    out = []
    found = {(r["variant"], r["batch"]): r for _, r in table.iterrows()}
    costs = []
    for (variant, batch), a in found.items():
        if variant != "graphed-sync" or ("graphed", batch) not in found:
            continue
        b = found[("graphed", batch)]
        if a["bench_ms"] and b["bench_ms"]:
            cost = median(a["bench_ms"]) - median(b["bench_ms"])
            costs.append(f"{cost * 1e3:.1f} µs at batch {batch} "
                         f"({100 * cost / median(b['bench_ms']):.1f}% of `graphed`'s step)")
    if costs:
        out.append(bullet(
            "What the sync costs once launches are cheap:",
            f"`graphed-sync` against `graphed`, untraced (each its own bench process, "
            f"{BETWEEN_PROCESSES}): " + listing(costs) + "."))
    orders = []
    for synced, hidden in SYNC_PAIRS:
        if synced == "graphed-sync":
            continue
        for batch in sorted({b for v, b in found if v == synced}):
            if (hidden, batch) not in found:
                continue
            xa, xb = found[(synced, batch)]["bench_ms"], found[(hidden, batch)]["bench_ms"]
            if len(xa) < 2 or len(xb) < 2:
                continue
            ra, rb = (min(xa), max(xa)), (min(xb), max(xb))
            v = verdict(ra, rb)
            faster = synced if median(xa) < median(xb) else hidden
            orders.append(
                f"`{synced}` {ra[0]:.3f}–{ra[1]:.3f} against `{hidden}` {rb[0]:.3f}–{rb[1]:.3f} "
                f"ms/step at batch {batch}: {v}"
                + (f" (`{faster}` faster)" if v == "apart" else " (no order)"))
    if orders:
        out.append(bullet(
            "Eager and compiled pairs, between processes:",
            "each variant untraced in two processes (min–max of their medians): "
            + "; ".join(orders) + ". `gapscope compare` prints `order flip:` only where the "
            "traced order is the other one and each order is outside its noise, else "
            "`within noise:` (METRICS.md)."))
    return out


def observer_findings(root: Path, table: pd.DataFrame) -> list:
    from ..study.overhead import rows as overhead_rows

    return [*overhead_findings(overhead_rows(root)), *bubble_findings(table),
            *sync_cost_findings(table)]


def sweep_notes(root: Path, table: pd.DataFrame) -> list:
    """How the sweep's captures were made (their run.json) and which were not made."""
    import json

    from ..study.text import listing

    out = []
    for _, vdir in variant_dirs(root):
        path = next((vdir / level / "run.json" for level in CAPTURE_LEVELS
                     if (vdir / level / "run.json").is_file()), None)
        if path is None:
            continue
        info = json.loads(path.read_text())
        c, v = info.get("config") or {}, info.get("versions") or {}
        start, stop = (int(x) for x in str(c.get("window", "30:50")).split(":"))
        out.append(f"Made with {v.get('gpu')}, torch {v.get('torch')}, nsys "
                   f"{(info.get('nsys') or {}).get('version')}: {c.get('model')}, "
                   f"{c.get('dtype')}, {c.get('new_tokens')} new tokens, steps "
                   f"{start + 1}–{stop} captured (run.json of each capture).")
        break
    missing = []
    for _, r in table.iterrows():
        levels = CAPTURE_LEVELS if r["variant"] in GRAPH_REPLAYED else CAPTURE_LEVELS[:1]
        for level in levels:
            if pd.isna(r.get(f"{level}_bubble_ns")):
                missing.append(f"{level}-level `{r['variant']}` at batch {r['batch']}")
    if missing:
        out.append(f"Not captured (no run directory, or none that analyses): {listing(missing)}.")
    return out
