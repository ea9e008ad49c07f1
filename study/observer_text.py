"""The sentences over an observer sweep's tables (study part `observer`, study/observer.py makes
the tables): what nsys added to a step, what the untraced twin sees of the bubble, what a sync
costs a step untraced. Each number as the table it summarises prints it.
"""

from pathlib import Path

import pandas as pd

from analysis.toolkit import median

from .observer import CAPTURE_LEVELS, SYNC_PAIRS, share_cell, us_cell_from_ns
from .overhead import variant_dirs

GRAPH_REPLAYED = ("graphed-sync", "graphed", "fused")


def _kind(variant: str) -> str:
    if variant in GRAPH_REPLAYED:
        return "graph-replayed"
    return "compiled" if variant.endswith("compile") or variant == "compiled" else "eager"


def _floors(floors: dict | None) -> dict:
    from .aa import floors as aa_floors

    return aa_floors() if floors is None else floors


def overhead_findings(rows: list, floors: dict | None = None) -> list:
    """What nsys added to a step, per kind of rung and capture level (overhead.table's rows);
    a ratio inside its kind's A/A floor is within noise."""
    from .text import between, beyond_span, bullet, floor_note, listing

    floors = _floors(floors)
    spans, used = [], []
    for level, kinds in (("node", ("eager", "compiled", "graph-replayed")),
                         ("graph", ("graph-replayed",))):
        found = []
        for k in kinds:
            values = [r["traced_ms"][level] / r["untraced_ms"] for r in rows
                      if level in r["traced_ms"] and r["untraced_ms"] and _kind(r["variant"]) == k]
            if values:
                found.append(f"{k} {beyond_span(values, floors.get(k), 1)}")
                used.append(floors.get(k))
        if found:
            spans.append(f"flag set `{level}` (`--cuda-graph-trace={level}`): " + ", ".join(found))
    if not spans:
        return []
    gs = [(r["batch"], r["traced_ms"]["graph"] / r["untraced_ms"]) for r in rows
          if r["variant"] == "graphed-sync" and "graph" in r["traced_ms"] and r["untraced_ms"]]
    text = ("(traced ms/step, the harness' host clock over the captured window, ÷ the untraced "
            "median of the processes' medians, another process, − 1): " + "; ".join(spans)
            + f" ({floor_note(used)}).")
    if gs:
        g = floors.get("graph-replayed")
        text += (" Graph by graph, `graphed-sync`, whose host waits for every step, cost "
                 + listing([between(x, g, f"{(x - 1) * 100:+.1f}%") + f" at batch {b}"
                            for b, x in gs]) + ".")
    return [bullet("What nsys adds to a step", text)]


def bubble_findings(table: pd.DataFrame) -> list:
    from .text import bullet, listing, span

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
            "(its own runs, other processes than the captures) sees a median bubble of "
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
            "untraced (the twin, other processes), about the floor of two CUDA events back to "
            "back: "
            f"{span([100 * s for s in shares], '.0f', '%')} of their traced bubble is the "
            "profiler's."))
    return out


def sync_cost_findings(table: pd.DataFrame, floors: dict | None = None) -> list:
    from .text import BETWEEN_PROCESSES, beyond, bullet, listing, verdict, with_floor

    floors = _floors(floors)
    graph_floor, used = floors.get("graph-replayed"), []
    out = []
    found = {(r["variant"], r["batch"]): r for _, r in table.iterrows()}
    costs = []
    for (variant, batch), a in found.items():
        if variant != "graphed-sync" or ("graphed", batch) not in found:
            continue
        b = found[("graphed", batch)]
        if a["bench_ms"] and b["bench_ms"]:
            cost = median(a["bench_ms"]) - median(b["bench_ms"])
            if beyond(median(a["bench_ms"]) / median(b["bench_ms"]), graph_floor):
                costs.append(f"{cost * 1e3:.1f} µs at batch {batch} "
                             f"({100 * cost / median(b['bench_ms']):.1f}% of `graphed`'s step)")
            else:
                costs.append(f"within noise at batch {batch}")
    if costs:
        out.append(bullet(
            "What the sync costs once launches are cheap:",
            with_floor(f"`graphed-sync` against `graphed`, untraced (each its own bench "
                       f"process, {BETWEEN_PROCESSES}): " + listing(costs), [graph_floor])
            + "."))
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
            outside = beyond(median(xa) / median(xb), floors.get(_kind(synced)))
            used.append(floors.get(_kind(synced)))
            orders.append(
                f"`{synced}` {ra[0]:.3f}–{ra[1]:.3f} against `{hidden}` {rb[0]:.3f}–{rb[1]:.3f} "
                f"ms/step at batch {batch}: {v}"
                + (f" (`{faster}` faster)" if v == "apart" and outside else
                   ", but within noise (no order)" if v == "apart" else " (no order)"))
    if orders:
        out.append(bullet(
            "Eager and compiled pairs, between processes:",
            "each variant untraced in two processes (min–max of their medians, apart or "
            "overlapping; apart and the medians' ratio beyond the A/A floor for an order): "
            + with_floor("; ".join(orders), used) + ". `gapscope compare` prints `order flip:` "
            "only where the "
            "traced order is the other one and each order is outside its noise, else "
            "`flip within noise:` (METRICS.md)."))
    return out


def observer_findings(root: Path, table: pd.DataFrame) -> list:
    from .aa import floors as aa_floors
    from .overhead import rows as overhead_rows

    floors = aa_floors()
    return [*overhead_findings(overhead_rows(root), floors), *bubble_findings(table),
            *sync_cost_findings(table, floors)]


def sweep_notes(root: Path, table: pd.DataFrame) -> list:
    """How the sweep's captures were made (their run.json) and which were not made."""
    import json

    from .text import listing

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
