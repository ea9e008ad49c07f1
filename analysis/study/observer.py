"""How much of a traced bubble is the profiler's: the tables of a `scripts/overhead.sh` sweep
(DIR/b<batch>/<variant>/{untraced.json, untraced_steps.json, node/, graph/}).

For each variant and batch: the inter-step bubble as a node-level capture, a graph-level capture
and the untraced twin (CUDA events, no profiler) see it, with ms/step untraced (the processes'
medians, min–max) and traced. For each measured pair (a sync every step, the sync hidden): what
the sync costs a step untraced, from the twins' periods and from the bench's ms/step, with the
spread the processes allow (min of one minus max of the other, and the reverse).
"""

from pathlib import Path

import pandas as pd

from ..errors import TraceError
from ..measures.stats import median
from ..study.text import fmt_ms
from ..study.overhead import process_ms, variant_dirs
from ..readers.untraced import read_untraced_steps
from ..measures.untraced import untraced_summary

# (sync every step, the sync hidden): their untraced difference is what the sync costs.
SYNC_PAIRS = (("graphed-sync", "graphed"), ("compiled", "pipelined+compile"),
              ("static", "deferred"))
CAPTURE_LEVELS = ("node", "graph")
VARIANT_ORDER = ("static", "deferred", "compiled", "pipelined+compile", "graphed-sync",
                 "graphed", "fused")


def analyse_run(path: Path):
    """The first device's analysis of a run directory, with its twin when it has one (made once
    per process: study_captures.analysed)."""
    from ..study.captures import analysed

    (run, _, analyses, _), = analysed([path])
    return analyses[0], run


def sweep(root: Path) -> pd.DataFrame:
    """One row per (batch, variant): bubbles and periods traced at each level and untraced."""
    from ..study.captures import analysed

    captures = [vdir / level for _, vdir in variant_dirs(root) for level in CAPTURE_LEVELS
                if (vdir / level / "capture.sqlite").is_file()]
    try:
        analysed(captures, progress=len(captures) > 1)  # in parallel, once
    except TraceError:
        pass  # each is tried again alone below, and a bad one left out
    rows = []
    for batch, vdir in variant_dirs(root):
        twin_path = vdir / "untraced_steps.json"
        twin = untraced_summary(read_untraced_steps(twin_path)) if twin_path.is_file() \
            else {}
        row = {"batch": batch, "variant": vdir.name,
               "bench_ms": process_ms(vdir),
               "untraced_bubble_ns": twin.get("bubble_ns_median"),
               "untraced_period_ns": twin.get("period_ns_median"),
               "twin_runs": twin.get("runs", 0)}
        for level in CAPTURE_LEVELS:
            if not (vdir / level / "capture.sqlite").is_file():
                continue
            try:
                a, run = analyse_run(vdir / level)
            except TraceError:
                continue
            row[f"{level}_bubble_ns"] = a.summary["bubble_ns_median"]
            row[f"{level}_period_ns"] = a.summary["period_ns_median"]
            row[f"{level}_ms"] = run.traced_ms_per_step()
            row[f"{level}_busy"] = a.summary["gpu_util"]
        rows.append(row)
    table = pd.DataFrame(rows)
    if len(table):
        order = {v: i for i, v in enumerate(VARIANT_ORDER)}
        table = table.sort_values(["batch", "variant"], key=lambda c: c.map(order).fillna(99)
                                  if c.name == "variant" else c).reset_index(drop=True)
    return table


def _us(ns) -> str:
    return "–" if ns is None or pd.isna(ns) else f"{ns / 1e3:.1f}"


def _share(traced, untraced) -> str:
    if traced is None or untraced is None or pd.isna(traced) or pd.isna(untraced) or traced <= 0:
        return "–"
    return f"{100 * (traced - untraced) / traced:.0f}%"


def _spread(values: list, digits: int = 3) -> str:
    if not values:
        return "–"
    mid = sorted(values)[len(values) // 2] if len(values) % 2 else \
        sum(sorted(values)[len(values) // 2 - 1:len(values) // 2 + 1]) / 2
    if len(values) == 1:
        return f"{mid:.{digits}f} (1 process)"
    return f"{mid:.{digits}f} [{min(values):.{digits}f}–{max(values):.{digits}f}]"


def bubble_table(table: pd.DataFrame) -> pd.DataFrame:
    """The RESULTS table: bubble medians by how they were measured, and ms/step."""
    get = table.get
    rows = []
    for _, r in table.iterrows():
        rows.append({
            "variant": r["variant"], "batch": r["batch"],
            "untraced ms/step": _spread(r["bench_ms"]),
            "bubble µs: node-level": _us(r.get("node_bubble_ns")),
            "graph-level": _us(r.get("graph_bubble_ns")) if get("graph_bubble_ns") is not None
            else "–",
            "untraced (events)": _us(r["untraced_bubble_ns"]),
            "profiler's share: node": _share(r.get("node_bubble_ns"), r["untraced_bubble_ns"]),
            "graph": _share(r.get("graph_bubble_ns"), r["untraced_bubble_ns"]),
            "traced ms/step: node": "–" if pd.isna(r.get("node_ms", None)) else
            f"{r['node_ms']:.3f}",
            "GPU busy: node": "–" if pd.isna(r.get("node_busy", None)) else
            f"{100 * r['node_busy']:.1f}%",
            "graph ms/step": "–" if pd.isna(r.get("graph_ms", None)) else f"{r['graph_ms']:.3f}",
        })
    return pd.DataFrame(rows)


def sync_cost_table(table: pd.DataFrame) -> pd.DataFrame:
    """What the sync costs a step untraced, per measured pair and batch (µs/step)."""
    found = {(r["variant"], r["batch"]): r for _, r in table.iterrows()}
    rows = []
    for (variant, batch), a in sorted(found.items(), key=lambda kv: kv[0][1]):
        for synced, hidden in SYNC_PAIRS:
            if variant != synced or (hidden, batch) not in found:
                continue
            b = found[(hidden, batch)]
            twin = None if pd.isna(a["untraced_period_ns"]) or pd.isna(b["untraced_period_ns"]) \
                else a["untraced_period_ns"] - b["untraced_period_ns"]
            xa, xb = a["bench_ms"], b["bench_ms"]
            bench = "–"
            if xa and xb:
                mid = (median(xa) - median(xb)) * 1e3
                bench = f"{mid:.1f} [{(min(xa) - max(xb)) * 1e3:.1f}, " \
                        f"{(max(xa) - min(xb)) * 1e3:.1f}]"
            rows.append({
                "pair": f"{synced} vs {hidden}", "batch": batch,
                "untraced bubble µs": f"{_us(a['untraced_bubble_ns'])} vs "
                                      f"{_us(b['untraced_bubble_ns'])}",
                "sync cost µs/step: events": _us(twin),
                "bench [spread]": bench,
                "traced node-level bubble µs": f"{_us(a.get('node_bubble_ns'))} vs "
                                               f"{_us(b.get('node_bubble_ns'))}",
            })
    return pd.DataFrame(rows)


# Captures made by profile.sh with their twin (a study's capture/ runs): (analysis, Run, strings)
# by name.

def _batch(run) -> object:
    return (run.info.get("config") or {}).get("batch", "–")


def capture_share_table(analyses: dict) -> pd.DataFrame:
    """Each capture with an untraced twin: its bubble and period traced (node- or graph-level,
    as `cuda_graph_trace` says) and untraced, the profiler's share, and the spread of the
    twin's runs (processes or repeats)."""
    rows = []
    for name, (a, run, _) in analyses.items():
        s, u = a.summary, a.summary.get("untraced")
        if u is None:
            continue
        per_run = [m for m in u["run_period_ns_medians"] if m is not None]
        rows.append({
            "capture": name,
            "batch": _batch(run),
            "graph trace": s["cuda_graph_trace"],
            "traced bubble µs": _us(s["bubble_ns_median"]),
            "untraced bubble µs": _us(u["bubble_ns_median"]),
            "profiler's share": "–" if u["profiler_bubble_share"] is None
            else f"{u['profiler_bubble_share'] * 100:.0f}%",
            "traced period ms": fmt_ms(s["period_ns_median"] / 1e6),
            "untraced period ms": "–" if u["period_ns_median"] is None
            else fmt_ms(u["period_ns_median"] / 1e6),
            "untraced runs, period min–max ms": f"{len(per_run)}: "
            f"{min(per_run) / 1e6:.3f}–{max(per_run) / 1e6:.3f}" if per_run else "–",
        })
    return pd.DataFrame(rows)


def capture_sync_cost_table(analyses: dict) -> pd.DataFrame:
    """What the sync costs a step untraced, from the measured pairs (SYNC_PAIRS) at one batch:
    the difference of the twins' periods and of the bench's ms/step, beside the traced bubble."""
    found = {}
    for _, (a, run, _) in sorted(analyses.items()):
        found.setdefault((run.label, _batch(run)), (a, run))
    rows = []
    for (label, batch), (a, run) in found.items():
        for synced, hidden in SYNC_PAIRS:
            if label != synced or (hidden, batch) not in found:
                continue
            b, other = found[(hidden, batch)]
            ua, ub = a.summary.get("untraced"), b.summary.get("untraced")
            twin = (ua["period_ns_median"] - ub["period_ns_median"]
                    if ua and ub and None not in (ua["period_ns_median"], ub["period_ns_median"])
                    else None)
            bench = (run.untraced_ms_per_step(), other.untraced_ms_per_step())
            rows.append({
                "pair": f"{synced} vs {hidden}",
                "batch": batch,
                "traced bubble µs": f"{_us(a.summary['bubble_ns_median'])} vs "
                f"{_us(b.summary['bubble_ns_median'])}",
                "untraced cost of the sync µs/step (events)": _us(twin),
                "untraced cost µs/step (bench)": "–" if None in bench
                else f"{(bench[0] - bench[1]) * 1e3:.1f}",
            })
    return pd.DataFrame(rows)


# The sentences over a sweep's tables (study part `observer`), each number as a table prints it.

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
                    [f"{_us(r[col])} µs at batch {r['batch']} "
                     f"({_share(r[col], r['untraced_bubble_ns'])} the profiler's)"
                     for _, r in rows.iterrows()]))
        out.append(bullet(
            "The sync's bubble, traced and untraced.",
            "`graphed-sync` (one CUDA graph a step, `.item()` after each): the untraced twin "
            "sees a median bubble of " + listing([f"{_us(r['untraced_bubble_ns'])} µs at batch "
                                                  f"{r['batch']}" for _, r in gs.iterrows()])
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
