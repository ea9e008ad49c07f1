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

from analysis import TraceError
from analysis.toolkit import median, read_untraced_steps, trace_in, untraced_summary

from .overhead import process_ms, variant_dirs
from .text import fmt_ms

# (sync every step, the sync hidden): their untraced difference is what the sync costs.
SYNC_PAIRS = (("graphed-sync", "graphed"), ("compiled", "pipelined+compile"),
              ("static", "deferred"))
CAPTURE_LEVELS = ("node", "graph")
VARIANT_ORDER = ("static", "deferred", "compiled", "pipelined+compile", "graphed-sync",
                 "graphed", "fused")


def analyse_run(path: Path):
    """The first device's analysis of a run directory, with its twin when it has one (made once
    per process: study_captures.analysed)."""
    from .captures import analysed

    (run, _, analyses, _), = analysed([path])
    return analyses[0], run


def sweep(root: Path) -> pd.DataFrame:
    """One row per (batch, variant): bubbles and periods traced at each level and untraced."""
    from .captures import analysed

    captures = [vdir / level for _, vdir in variant_dirs(root) for level in CAPTURE_LEVELS
                if trace_in(vdir / level) is not None]
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
            if trace_in(vdir / level) is None:
                continue
            try:
                a, run = analyse_run(vdir / level)
            except TraceError:
                continue
            row[f"{level}_bubble_ns"] = a.summary["bubble_ns_median"]
            row[f"{level}_period_ns"] = a.summary["period_ns_median"]
            row[f"{level}_ms"] = run.traced_ms_per_step()
            row[f"{level}_busy"] = a.summary["busy_share_of_window"]
        rows.append(row)
    table = pd.DataFrame(rows)
    if len(table):
        order = {v: i for i, v in enumerate(VARIANT_ORDER)}
        table = table.sort_values(["batch", "variant"], key=lambda c: c.map(order).fillna(99)
                                  if c.name == "variant" else c).reset_index(drop=True)
    return table


def us_cell_from_ns(ns) -> str:
    return "–" if ns is None or pd.isna(ns) else f"{ns / 1e3:.1f}"


def share_cell(traced, untraced) -> str:
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
            "bubble µs: node-level": us_cell_from_ns(r.get("node_bubble_ns")),
            "graph-level": us_cell_from_ns(r.get("graph_bubble_ns"))
            if get("graph_bubble_ns") is not None else "–",
            "untraced (events)": us_cell_from_ns(r["untraced_bubble_ns"]),
            "profiler's share: node": share_cell(r.get("node_bubble_ns"), r["untraced_bubble_ns"]),
            "graph": share_cell(r.get("graph_bubble_ns"), r["untraced_bubble_ns"]),
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
                "untraced bubble µs": f"{us_cell_from_ns(a['untraced_bubble_ns'])} vs "
                                      f"{us_cell_from_ns(b['untraced_bubble_ns'])}",
                "sync cost µs/step: events": us_cell_from_ns(twin),
                "bench [spread]": bench,
                "traced node-level bubble µs": f"{us_cell_from_ns(a.get('node_bubble_ns'))} vs "
                                               f"{us_cell_from_ns(b.get('node_bubble_ns'))}",
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
            "traced bubble µs": us_cell_from_ns(s["bubble_ns_median"]),
            "untraced bubble µs": us_cell_from_ns(u["bubble_ns_median"]),
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
                "traced bubble µs": f"{us_cell_from_ns(a.summary['bubble_ns_median'])} vs "
                f"{us_cell_from_ns(b.summary['bubble_ns_median'])}",
                "untraced cost of the sync µs/step (events)": us_cell_from_ns(twin),
                "untraced cost µs/step (bench)": "–" if None in bench
                else f"{(bench[0] - bench[1]) * 1e3:.1f}",
            })
    return pd.DataFrame(rows)
