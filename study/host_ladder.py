"""Study part `host`: the host table's bound checked against the ladder (METRICS.md, "Host
time: what removing it buys"). An eager rung's capture says how fast its step could run with
the forward replayed as one CUDA graph, or with the forward's Python gone; the rungs that do
that were captured too: `static` predicts `graphed` and `graphed-sync` (its forward as one
graph), `static` and `kv` predict `compiled` (its Python gone, its launches kept, fewer of them).
Each prediction sits beside the rung's measured step, traced and untraced, from the committed
captures of one directory (one model, batch and session)."""

import json
from pathlib import Path

import pandas as pd

from analysis.toolkit import FORWARD_GRAPH, FORWARD_PYTHON, frame_md_table, run_dirs

from .captures import analysed, is_traced
from .text import listing

# (the eager rung, the rung it predicts, the bound's scenario)
PAIRS = (("static", "graphed", FORWARD_GRAPH), ("static", "graphed-sync", FORWARD_GRAPH),
         ("static", "compiled", FORWARD_PYTHON), ("kv", "compiled", FORWARD_PYTHON))
# The committed directories the part reads (publish.py's SOURCES), and any of this part's own.
SOURCE_PARTS = ("observer", "family")
# A predicted rung whose GPU busy time is under this share of the eager step's runs faster
# kernels than the bound assumes (the findings say so).
FASTER_GPU = 0.8
OWN_GLOB = "docs/host-*"

HOST_TEXT = (
    "The host table of an eager capture (gapscope analyze, METRICS.md \"Host time\") bounds the "
    "step with a row's host cost gone: the step cannot run faster than its GPU busy time or the "
    "host work left, the larger of the two (`lower`), nor slower than their sum (`upper`). Two "
    "of its bounds have a rung of the ladder that does what they assume: the forward replayed "
    "as one CUDA graph (one graph launch in its place) is `graphed` and `graphed-sync`; the "
    "forward's Python gone with its launches kept is what `compiled` approaches (torch.compile "
    "without CUDA graphs also fuses kernels: fewer launches). Each row below sets the bound, "
    "made from the eager capture alone, beside that rung's step measured in the same directory "
    "(same model, batch and session), traced (the capture's GPU period) and untraced (its twin, "
    "else its bench); where the session has no capture of that rung, the same configuration's "
    "from another session, said so. The bound is traced: its host rows carry the profiler's "
    "cost, and it keeps the eager step's kernels, where the graphed rungs run kernels of their "
    "own.")


def rung(run) -> str:
    config = run.info.get("config") or {}
    variant = config.get("variant") or ""
    compiled = config.get("compile") not in (None, "none") and variant != "compiled"
    return variant + ("+compile" if compiled else "")


def level(a) -> str:
    """How nsys recorded a graph-replayed rung's graphs (nothing for the others)."""
    how = {"graph": "graph by graph", "node": "node by node"}.get(
        a.summary.get("cuda_graph_trace"))
    return f" ({how})" if how else ""


def _untraced_ms(run, a) -> float | None:
    twin = a.summary.get("untraced") or {}
    if twin.get("period_ns_median") is not None:
        return twin["period_ns_median"] / 1e6
    return run.untraced_ms_per_step()


def _where(value_ms: float | None, lo: float, hi: float) -> str:
    """`inside`, or how far outside the bound the measured step lies (`12% above`)."""
    if value_ms is None:
        return "n/a"
    if value_ms < lo:
        return f"{(1 - value_ms / lo) * 100:.1f}% below"
    if value_ms > hi:
        return f"{(value_ms / hi - 1) * 100:.1f}% above"
    return "inside"


def prediction_table(root: Path) -> pd.DataFrame:
    """One row a prediction: where, model, batch, the eager rung's step and GPU busy, its bound,
    the predicted rung's capture and its step traced and untraced, where each lies."""
    from .sources import SOURCES

    groups = [root / SOURCES[p] for p in SOURCE_PARTS] + sorted(root.glob(OWN_GLOB))
    dirs = [d for g in groups if g.is_dir() for d in run_dirs(g)]
    done = analysed(dirs)
    found = []
    for d, (run, _, analyses, _) in zip(dirs, done, strict=True):
        a = analyses[0]
        if is_traced(a):
            found.append((d, run, a, run.info.get("config") or {}))
    rows = []
    sessions = {_session(d, root) for d, *_ in found}
    benches = {where: bench_rungs(root / where) for where in sessions}
    for eager_rung, target, scenario in PAIRS:
        for d, run, a, config in found:
            if rung(run) != eager_rung:
                continue
            key = (config.get("model", "gpt2"), config.get("batch"))
            bound = next((b for b in (a.summary.get("host") or {}).get("bounds", [])
                          if b["scenario"] == scenario), None)
            if bound is None:
                continue
            where = _session(d, root)
            head = {"where": where, "model": key[0], "batch": key[1], "eager": eager_rung,
                    "eager step ms": round(a.summary["host"]["period_ns_median"] / 1e6, 3),
                    "GPU busy ms": round(bound["busy_ns"] / 1e6, 3), "bound": scenario}
            same = [(td, trun, ta) for td, trun, ta, tconfig in found
                    if rung(trun) == target and _config_key(tconfig) == _config_key(config)]
            targets = [t for t in same if _session(t[0], root) == where]
            bench = benches.get(where, {}).get((key[0], key[1], target))
            if not targets and bench is not None:
                rows.append(head | _measured(bound, f"{target} (bench)", None, None, bench))
                continue
            # No such rung in the session: the same configuration's from another one, said so.
            other = "" if targets else " (another session)"
            for _, trun, ta in targets or same:
                rows.append(head | _measured(bound, f"{target}{level(ta)}{other}",
                                             ta.summary["busy_ns_median"] / 1e6,
                                             ta.summary["period_ns_median"] / 1e6,
                                             _untraced_ms(trun, ta)))
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    return table.sort_values(["bound", "where", "model", "batch", "predicts"],
                             kind="stable").reset_index(drop=True)


def _config_key(config: dict) -> tuple:
    """What makes two rungs' steps comparable across sessions: the model, batch, dtype, tokens
    and window the harness ran."""
    return tuple(config.get(k) for k in ("model", "batch", "dtype", "new_tokens", "window"))


def _measured(bound: dict, predicts: str, busy_ms, traced_ms, untraced_ms) -> dict:
    lo, hi = bound["lower_ns"] / 1e6, bound["upper_ns"] / 1e6

    def ms(v):
        return None if v is None else round(v, 3)

    return {"lower ms": round(lo, 3), "upper ms": round(hi, 3), "predicts": predicts,
            "its GPU busy ms": ms(busy_ms), "traced ms": ms(traced_ms),
            "traced": _where(traced_ms, lo, hi), "untraced ms": ms(untraced_ms),
            "untraced": _where(untraced_ms, lo, hi)}


def bench_rungs(session: Path) -> dict:
    """(model, batch, variant) -> the untraced ms/step of a `harness bench --json` report in the
    session's directory (bench*.json): the rungs a session timed without capturing them."""
    out = {}
    for path in sorted(session.glob("bench*.json")):
        try:
            report = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        config = report.get("config") or {}
        for r in report.get("results") or []:
            out[(config.get("model", "gpt2"), config.get("batch"), r.get("variant"))] = r.get(
                "ms_per_step_median")
    return out


def _session(d: Path, root: Path) -> str:
    """The directory of one session's captures of one batch: a run directory's parent, or its
    grandparent where the parent names how nsys recorded it (observer's node/, graph/)."""
    parent = d.parent.parent if d.name in ("node", "graph") else d.parent
    try:
        return str(parent.relative_to(root.resolve() if parent.is_absolute() else root))
    except ValueError:
        return str(parent)


def host_findings(table: pd.DataFrame) -> list:
    out = []
    for scenario in (FORWARD_GRAPH, FORWARD_PYTHON):
        mine = table[table["bound"] == scenario]
        if mine.empty:
            continue
        for column in ("traced", "untraced"):
            inside = int((mine[column] == "inside").sum())
            parts = [f"{inside} of {len(mine)} inside the bound"]
            for side in ("below", "above"):
                off = mine[column][mine[column].str.endswith(side)]
                if len(off):
                    by = sorted(off.str.removesuffix(f" {side}"), key=lambda x: float(x[:-1]))
                    parts.append(f"{len(off)} {side} it (by {listing(by)})")
            out.append(f"- **{scenario}, the {column} step:** " + ", ".join(parts) + ".")
    # The bound keeps the eager step's kernels: a rung that runs faster ones lands below it.
    own = pd.to_numeric(table["its GPU busy ms"], errors="coerce")
    faster = table[own < FASTER_GPU * table["GPU busy ms"]]
    if len(faster):
        below = int(faster["untraced"].str.endswith("below").sum())
        which = sorted({f"{r.model} batch {r.batch} {r.predicts}" for r in faster.itertuples()})
        out.append(
            f"- **Kernels of their own.** In {len(faster)} of {len(table)} rows the predicted "
            f"rung's GPU busy time is under {FASTER_GPU:.0%} of the eager step's "
            f"({listing(which)}), which the bound keeps; {below} of them lie below it untraced.")
    return out


def host_sections(root: Path, fig: Path | None = None) -> list:
    table = prediction_table(Path(root))
    if table.empty:
        return []
    return ["## The host table's bound against the ladder", HOST_TEXT, *host_findings(table),
            frame_md_table(table.fillna("n/a"))]
