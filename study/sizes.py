"""Study part `sizes`: the ladder at the sizes people decode (issue 33), side by side: the small
Llama (125M), Llama-3.2-1B's shape and Llama-3-8B's, untraced and captured.

The directory holds `bench-sizes-<size>-b<B>.json` (one `harness bench` process a size and batch,
scripts/study.sh --parts sizes) and `capture/<UTC>-sizes-<size>-<rung>-b<B>/` run directories
(scripts/profile.sh graph by graph, with their untraced twin). Per configuration: each rung's
ms/token, tokens/s and floor share; the `.item()` a step costs (graphed-sync's ms/step minus
graphed's, in one process); graphed-sync's bubble between steps traced and in its twin.
"""

import json
import re
from pathlib import Path

import pandas as pd

from analysis.toolkit import frame_md_table, trace_in

from .benches import read_bench
from .captures import capture_rows
from .text import SAME_PROCESS, bullet, listing, pct

BENCH = re.compile(r"bench-sizes-(?P<size>[0-9a-z]+)-b(?P<batch>\d+)$")
CAPTURE = re.compile(r"Z-sizes-(?P<size>[0-9a-z]+)-(?P<rung>.+)-b(?P<batch>\d+)$")
SIZES = ("small", "1b", "8b")
# The ladder's order (harness/variants.py); a rung a bench holds that is not named here comes
# after these, in the bench's order: no measured row is left out of the table.
RUNGS = ("naive", "kv", "kv-expandable", "static", "compiled", "pipelined", "pipelined-seed",
         "deferred", "check-every-k", "hf-generate", "graphed-sync", "graphed", "fused",
         "while-graph", "while-fused", "nocheck")

# The rungs whose step is one graph launch or one fused step (or the whole loop one launch):
# the others launch their kernels from Python every step.
ON_THE_GPU = ("graphed-sync", "graphed", "fused", "while-graph", "while-fused")


def _order(size: str) -> int:
    return SIZES.index(size) if size in SIZES else len(SIZES)


def size_benches(study: Path) -> dict:
    """(size, batch) -> (that bench's rows (read_bench), its model record), in size order."""
    out = {}
    for path in study.glob("bench-sizes-*-b*.json"):
        m = BENCH.match(path.stem)
        if m:
            model = json.loads(path.read_text()).get("model") or {}
            out[(m["size"], int(m["batch"]))] = (read_bench(path), model)
    return dict(sorted(out.items(), key=lambda kv: (_order(kv[0][0]), kv[0][1])))


def size_captures(study: Path) -> dict:
    """(size, rung, batch) -> the newest capture's run directory."""
    found = {}
    for d in sorted((study / "capture").glob("*Z-sizes-*")):
        m = CAPTURE.search(d.name)
        if m and trace_in(d) is not None:
            found[(m["size"], m["rung"], int(m["batch"]))] = d
    return found


def label(size: str, batch: int, model: dict) -> str:
    params = model.get("parameters")
    n = "?" if not params else (f"{params / 1e9:.2f}B" if params >= 1e9 else f"{params / 1e6:.0f}M")
    return f"{size} ({n}) b{batch}"


def ladder_table(benches: dict) -> pd.DataFrame:
    """One row a rung, per configuration its ms/token, tokens/s and % of the bandwidth floor."""
    names = [v for v in RUNGS if any(v in rows.index for rows, _ in benches.values())]
    names += list(dict.fromkeys(v for rows, _ in benches.values() for v in rows.index
                                if v not in names))
    out = []
    for v in names:
        row = {"rung": v}
        for (size, batch), (rows, model) in benches.items():
            key = label(size, batch, model)
            if v not in rows.index:
                row |= {f"{key} ms/token": "–", f"{key} tok/s": "–", f"{key} % floor": "–"}
                continue
            r = rows.loc[v]
            floor = r["floor"] if isinstance(r["floor"], dict) else {}
            share = floor.get("floor_pct")
            row |= {f"{key} ms/token": f"{r['ms_per_step_median']:.3f}",
                    f"{key} tok/s": f"{r['tokens_per_s']:.0f}",
                    f"{key} % floor": "–" if share is None else f"{share:.1f}"}
        out.append(row)
    return pd.DataFrame(out)


def sync_rows(benches: dict, study: Path) -> pd.DataFrame:
    """Per configuration: graphed-sync and graphed ms/step (one process), the `.item()` cost a
    step, and graphed-sync's median bubble traced and in its capture's untraced twin (with the
    lowest and highest of the twin's runs' medians: how much the host moved it run to run)."""
    caps = {k: d for k, d in size_captures(study).items() if k[1] == "graphed-sync"}
    analyses = capture_rows({f"{s}-b{b}": d for (s, _, b), d in caps.items()})[1] if caps else {}
    out = []
    for (size, batch), (rows, model) in benches.items():
        if not {"graphed-sync", "graphed"} <= set(rows.index):
            continue
        s, g = (rows.loc[v, "ms_per_step_median"] for v in ("graphed-sync", "graphed"))
        a = analyses.get(f"{size}-b{batch}", (None,))[0]
        u = (a.summary.get("untraced") or {}) if a else {}
        twin, per_run = u.get("bubble_ns_median"), u.get("run_bubble_ns_medians") or []
        out.append({"configuration": label(size, batch, model),
                    "graphed-sync ms/step": f"{s:.3f}", "graphed ms/step": f"{g:.3f}",
                    ".item() µs/step": f"{(s - g) * 1e3:.1f}", ".item() share": pct((s - g) / s),
                    "bubble µs traced": "–" if a is None
                    else f"{a.summary['bubble_ns_median'] / 1e3:.1f}",
                    "bubble µs untraced": "–" if twin is None else f"{twin / 1e3:.1f}",
                    "twin runs' bubble µs": "–" if len(per_run) < 2 else
                    f"{min(per_run) / 1e3:.1f}-{max(per_run) / 1e3:.1f}",
                    "graph trace": "–" if a is None else a.summary.get("cuda_graph_trace", "–")})
    return pd.DataFrame(out)


def graph_buy(rows: pd.DataFrame) -> tuple | None:
    """(the fastest rung that launches from Python each step, its ms/token, graphed's) of one
    bench, or None without both."""
    ms = rows["ms_per_step_median"]
    eager = ms[[v for v in rows.index if v not in ON_THE_GPU]]
    if eager.empty or "graphed" not in ms.index:
        return None
    return eager.idxmin(), float(eager.min()), float(ms["graphed"])


def sizes_findings(benches: dict, sync: pd.DataFrame) -> list:
    """The part's sentences, each from the tables above."""
    out = []
    best = []
    for (size, batch), (rows, model) in benches.items():
        v = rows["ms_per_step_median"].idxmin()
        share = (rows.loc[v, "floor"] or {}).get("floor_pct")
        best.append(f"`{v}` at {label(size, batch, model)} ({rows.loc[v, 'ms_per_step_median']:.3f}"
                    f" ms/token" + ("" if share is None else f", {share:.1f}% of the floor") + ")")
    if best:
        out.append(bullet("The fastest rung:", f"untraced, {SAME_PROCESS} a configuration, "
                          + listing(best) + "."))
    graph = []
    for (size, batch), (rows, model) in benches.items():
        if (buy := graph_buy(rows)) is not None:
            eager, e, g = buy
            graph.append(f"{e / g:.1f}x at {label(size, batch, model)} (the fastest eager "
                         f"rung, `{eager}`, {e:.3f} ms/token, against {g:.3f})")
    if graph:
        out.append(bullet("What one CUDA graph a token buys:", "`graphed` against the fastest "
                          "rung that launches from Python each step: " + listing(graph) + "."))
    if not sync.empty:
        costs = [f"{r['.item() µs/step']} µs a step at {r['configuration']} ({r['.item() share']}"
                 " of graphed-sync's step)" for _, r in sync.iterrows()]
        text = "graphed-sync's ms/step minus graphed's: " + listing(costs)
        traced = [f"{r['bubble µs traced']} µs traced against {r['bubble µs untraced']} in its "
                  f"twin at {r['configuration']}" for _, r in sync.iterrows()
                  if r["bubble µs traced"] != "–"]
        if traced:
            text += "; graphed-sync's median bubble between steps: " + listing(traced)
        out.append(bullet("What the per-step `.item()` costs as the step grows:", text + "."))
    return out


def sizes_sections(study: Path, fig: Path | None = None) -> list:
    """The part's Markdown; its figure (each rung's floor share by size) into `fig` when given."""
    benches = size_benches(study)
    if not benches:
        return []
    sync = sync_rows(benches, study)
    table = ladder_table(benches)
    parts = [f"## The ladder at the sizes people decode ({study.name})",
             "Each configuration (size and batch) is one `harness bench` process, random "
             "weights (the 1B and 8B shapes drawn on the GPU); the floor is harness/floor.py's, "
             "at the copy rate each process measured.",
             *sizes_findings(benches, sync),
             "### Untraced (harness bench, one process a configuration)",
             frame_md_table(table)]
    if fig is not None:
        from .plots import plot_sizes

        plot_sizes(fig / "sizes.png", table, "The ladder by model size: the share of the "
                   "bandwidth floor each rung reaches")
    parts.append("![the ladder by model size](figures/sizes.png)")
    if not sync.empty:
        parts += ["### The per-step sync (`graphed-sync` against `graphed`; captures graph by "
                  "graph, untraced = the capture's twin)", frame_md_table(sync)]
    return parts
