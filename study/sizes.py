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
         "while-graph", "while-fused", "mega", "while-mega", "nocheck")

# The rungs whose step is one graph launch or one fused step (or the whole loop one launch):
# the others launch their kernels from Python every step.
ON_THE_GPU = ("graphed-sync", "graphed", "fused", "while-graph", "while-fused", "mega",
              "while-mega")


# An earlier committed run of the same configurations (study dir -> the earlier one, both under
# docs/): where the two runs of one configuration disagree, the part gives both and how far apart
# they are, never one run's figure alone (issue 41).
EARLIER = {"ladder8b-20261202/study": "sizes-20261202/study"}


def earlier_study(study: Path) -> Path | None:
    """The earlier run of `study`'s configurations, where one is committed."""
    rel = EARLIER.get("/".join(study.resolve().parts[-2:]))
    found = study.resolve().parent.parent / rel if rel else None
    return found if found is not None and found.is_dir() else None


def item_us(rows: pd.DataFrame) -> float | None:
    """The per-step `.item()` of one bench: graphed-sync's ms/step minus graphed's, in µs."""
    if not {"graphed-sync", "graphed"} <= set(rows.index):
        return None
    ms = rows["ms_per_step_median"]
    return float(ms["graphed-sync"] - ms["graphed"]) * 1e3


def beside_earlier(now: float, then: float | None, unit: str, digits: int = 3) -> str:
    """`now` with the earlier run's figure and how far apart the two are, in `unit`."""
    if then is None:
        return f"{now:.{digits}f}"
    return (f"{now:.{digits}f} (the earlier run's {then:.{digits}f}: {abs(now - then):.{digits}f}"
            f" {unit} apart)")


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


EARLIER_TRACED = "bubble µs traced, earlier run"
EARLIER_UNTRACED = "bubble µs untraced, earlier run"


def earlier_ms(earlier: dict, size: str, batch: int, variant: str) -> float | None:
    """A rung's ms/token in the earlier run of one configuration, None where it has none."""
    rows = earlier.get((size, batch), (None,))[0]
    if rows is None or variant not in rows.index:
        return None
    return float(rows.loc[variant, "ms_per_step_median"])


def sizes_findings(benches: dict, sync: pd.DataFrame, earlier: dict | None = None,
                   where: str = "") -> list:
    """The part's sentences, each from the tables above; `earlier` (size_benches of an earlier
    run of the same configurations, read from `where`): its figure beside each of this run's it
    also measured."""
    earlier = earlier or {}
    out = []
    best = []
    for (size, batch), (rows, model) in benches.items():
        v = rows["ms_per_step_median"].idxmin()
        share = (rows.loc[v, "floor"] or {}).get("floor_pct")
        ms = beside_earlier(rows.loc[v, "ms_per_step_median"], earlier_ms(earlier, size, batch, v),
                            "ms")
        best.append(f"`{v}` at {label(size, batch, model)} ({ms}"
                    f" ms/token" + ("" if share is None else f", {share:.1f}% of the floor") + ")")
    if best:
        out.append(bullet("The fastest rung:", f"untraced, {SAME_PROCESS} a configuration, "
                          + listing(best) + "."))
    graph = []
    for (size, batch), (rows, model) in benches.items():
        if (buy := graph_buy(rows)) is not None:
            eager, e, g = buy
            graph.append(f"{e / g:.1f}x at {label(size, batch, model)} (the fastest eager "
                         f"rung, `{eager}`, {e:.3f} ms/token, against "
                         f"{beside_earlier(g, earlier_ms(earlier, size, batch, 'graphed'), 'ms')}"
                         ")")
    if graph:
        out.append(bullet("What one CUDA graph a token buys:", "`graphed` against the fastest "
                          "rung that launches from Python each step: " + listing(graph) + "."))
    if not sync.empty:
        costs = [f"{r['.item() µs/step']} µs a step at {r['configuration']} ({r['.item() share']}"
                 " of graphed-sync's step)" for _, r in sync.iterrows()]
        text = "graphed-sync's ms/step minus graphed's: " + listing(costs)
        then = {label(s, b, m): item_us(rows) for (s, b), (rows, m) in earlier.items()}
        pairs = [(float(r[".item() µs/step"]), then[r["configuration"]])
                 for _, r in sync.iterrows() if then.get(r["configuration"]) is not None]
        if pairs:
            text += (f"; in the earlier run of the same configurations (`{where}`) "
                     + listing([f"{b:.1f}" for _, b in pairs]) + " µs: the two runs "
                     + f"{min(abs(a - b) for a, b in pairs):.1f} to "
                     + f"{max(abs(a - b) for a, b in pairs):.1f} µs apart")
        traced = [f"{r['bubble µs traced']} µs traced against {r['bubble µs untraced']} in its "
                  f"twin at {r['configuration']}"
                  + (f" (the earlier run's {r[EARLIER_TRACED]} against {r[EARLIER_UNTRACED]})"
                     if r.get(EARLIER_TRACED, "–") != "–" else "")
                  for _, r in sync.iterrows() if r["bubble µs traced"] != "–"]
        if traced:
            text += "; graphed-sync's median bubble between steps: " + listing(traced)
        out.append(bullet("What the per-step `.item()` costs, run by run:", text + "."))
    return out


def sizes_sections(study: Path, fig: Path | None = None) -> list:
    """The part's Markdown; its figure (each rung's floor share by size) into `fig` when given."""
    benches = size_benches(study)
    if not benches:
        return []
    sync = sync_rows(benches, study)
    table = ladder_table(benches)
    before = earlier_study(study)
    earlier = size_benches(before) if before is not None else {}
    where = "" if before is None else "/".join(before.parts[-3:])
    if earlier and not sync.empty:
        then = sync_rows(earlier, before).set_index("configuration")
        for after, (column, theirs) in (
                (".item() share", (".item() µs/step, earlier run", ".item() µs/step")),
                ("bubble µs untraced", (EARLIER_TRACED, "bubble µs traced")),
                (EARLIER_TRACED, (EARLIER_UNTRACED, "bubble µs untraced"))):
            sync.insert(list(sync.columns).index(after) + 1, column,
                        [then.loc[c, theirs] if c in then.index else "–"
                         for c in sync["configuration"]])
    parts = [f"## The ladder at the sizes people decode ({study.name})",
             "Each configuration (size and batch) is one `harness bench` process, random "
             "weights (the 1B and 8B shapes drawn on the GPU); the floor is harness/floor.py's, "
             "at the copy rate each process measured.",
             *sizes_findings(benches, sync, earlier, where),
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
