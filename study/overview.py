"""Study part `overview`: every committed capture by kind (the directories of sources.py's
SOURCES that hold captures), the ranges each part quotes for its own directory taken over all of
them; and README's profiler-share sentence made from them.
"""

import json
from pathlib import Path

import pandas as pd

from analysis.toolkit import frame_md_table, run_dirs

from .captures import analysed, is_traced
from .captures import kind as loop_kind
from .runs import kind
from .text import BETWEEN_PROCESSES, beyond, beyond_span, floor_note, pct_span, span

FAMILY_NAMES = {"gpt2": "GPT-2", "llama": "Llama"}


def capture_kind(run, a) -> str:
    """The kind of capture a range is taken over: family, rung kind and how nsys recorded it."""
    config = run.info.get("config") or {}
    family = FAMILY_NAMES.get(config.get("model", "gpt2"), config.get("model"))
    k = kind(run)
    if not is_traced(a):
        return f"{family} {k}, GPU metrics alone (no CUDA trace)"
    if k != "graph-replayed":
        return f"{family} {k}"
    level = "node by node" if a.summary.get("cuda_graph_trace") == "node" else "graph by graph"
    metrics = ", with GPU metrics" if a.summary.get("gpu_metrics") else ""
    return f"{family} graph-replayed, {level}{metrics}"


def every_capture(root: Path) -> pd.DataFrame:
    """One row a committed capture: where it is, its kind, and the figures ranged over."""
    from .sources import CAPTURE_SOURCES, SOURCES

    dirs = [(part, d) for part in CAPTURE_SOURCES for d in run_dirs(root / SOURCES[part])]
    done = analysed([d for _, d in dirs], progress=len(dirs) > 1)
    floors = family_floors(root / SOURCES["family"])
    rows = []
    for (part, d), (run, _, (a, *_), _) in zip(dirs, done, strict=True):
        s, twin = a.summary, a.summary.get("untraced") or {}
        traced, untraced = run.traced_ms_per_step(), run.untraced_ms_per_step()
        gaps = is_traced(a)
        rows.append({
            "source": SOURCES[part], "dir": d, "kind": capture_kind(run, a),
            "variant": (run.info.get("config") or {}).get("variant"),
            "batch": (run.info.get("config") or {}).get("batch"),
            "branches": (run.info.get("config") or {}).get("branches"),
            "overhead": traced / untraced - 1 if traced and untraced else None,
            "floor": floors.get((run.info.get("config") or {}).get("model", "gpt2"),
                                floors["gpt2"]).get(loop_kind(run)),
            "busy": s["busy_share_of_window"] if gaps else None,
            "host": s["idle_ns_by_cause"]["host"] / (s["idle_ns"] or 1) if gaps else None,
            "op_records": a.steps["op_records"].median() if gaps else None,
            "bubble_us": s["bubble_ns_median"] / 1e3 if gaps else None,
            "twin_bubble_us": None if twin.get("bubble_ns_median") is None
            else twin["bubble_ns_median"] / 1e3,
            "share": twin.get("profiler_bubble_share") if gaps else None,
            "share_noise": twin.get("profiler_bubble_share_within_noise") if gaps else None,
        })
    return pd.DataFrame(rows)


def family_floors(family: Path) -> dict:
    """model -> kind -> the floor between processes a ratio of its captures meets: the A/A
    reports' (GPT-2's), and for the model of the family part's directory `family` the same
    widened by its own pairs of untraced benches (family_text.family_floors)."""
    from .aa import floors as aa_floors
    from .family import family_capture_rows, ladder_benches
    from .family_text import family_floors as widened

    out = {"gpt2": aa_floors()}
    by_batch = ladder_benches(family)
    if by_batch:
        first = next(iter(sorted(family.glob("bench-ladder-b*.json"))))
        name = (json.loads(first.read_text()).get("config") or {}).get("model", "llama")
        out[name.split(":")[0]] = widened(by_batch, family_capture_rows(family)[1], out["gpt2"])
    return out


def _span(values, fn) -> str:
    values = [v for v in values if v is not None and not pd.isna(v)]
    return fn(values) if values else "–"


def _overhead_cell(g: pd.DataFrame) -> str:
    """The range of a kind's overheads, and how many of them are within noise."""
    rows = g[g["overhead"].notna()]
    if rows.empty:
        return "–"
    inside = sum(not beyond(o + 1, f) for o, f in zip(rows["overhead"], rows["floor"],
                                                       strict=True))
    return (pct_span(rows["overhead"], 0, sign=True)
            + (f" ({inside} of {len(rows)} within noise)" if inside else ""))


KIND_ORDER = ("eager", "compiled", "graph-replayed, node by node", "graph-replayed, graph by graph",
              "graph-replayed, graph by graph, with GPU metrics",
              "graph-replayed, GPU metrics alone (no CUDA trace)")


def _kind_key(k: str) -> tuple:
    family, _, rest = k.partition(" ")
    return (list(FAMILY_NAMES.values()).index(family) if family in FAMILY_NAMES.values() else 9,
            KIND_ORDER.index(rest) if rest in KIND_ORDER else 9, k)


def overview_table(t: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for k in sorted(t["kind"].unique(), key=_kind_key):
        g = t[t["kind"] == k]
        rows.append({
            "kind of capture": k, "captures": len(g),
            "from": ", ".join(f"{src} ({n})" for src, n in g["source"].value_counts(sort=False)
                              .items()),
            "batches": ", ".join(str(b) for b in sorted(g["batch"].dropna().unique())),
            "nsys overhead": _overhead_cell(g),
            "GPU busy (of window)": _span(g["busy"], pct_span),
            "host's share of idle": _span(g["host"], lambda v: pct_span(v, 0)),
            "op records/step": _span(g["op_records"], lambda v: span(v, ".0f")),
            "bubble µs traced": _span(g["bubble_us"], lambda v: span(v, ".1f")),
            "bubble µs untraced (twin)": _span(g["twin_bubble_us"], lambda v: span(v, ".1f")),
            "profiler's share of bubble": _span(g["share"], lambda v: pct_span(v, 0)),
        })
    return pd.DataFrame(rows)


OVERVIEW_TEXT = (
    "Every committed capture, grouped by kind: the ranges each part quotes for its own "
    "directory, taken here over all of them. nsys overhead: traced ms/step (the harness' host "
    "clock over the captured window) ÷ the same configuration's untraced bench (another "
    "process) − 1; GPU busy and the host's share of the idle: as traced; the bubble traced "
    "beside the untraced twin's where the capture has one (profiler's share = (traced − "
    "untraced) ÷ traced, over those captures only).")


def _shares(rows: pd.DataFrame) -> str:
    """The range of the profiler's shares of the bubble beyond their twin's spread, and how many
    are within it."""
    rows = rows[rows["share"].notna()]
    if rows.empty:
        return "–"
    out = rows[~rows["share_noise"].fillna(False).astype(bool)]
    inside = len(rows) - len(out)
    if out.empty:
        return f"within noise ({len(rows)} captures)"
    return (pct_span(out["share"], 0) + f" ({len(out)} captures"
            + (f"; {inside} more within noise)" if inside else ")"))


def overview_findings(t: pd.DataFrame, where: str = "") -> list:
    """The README's profiler-share sentence: nsys's overhead and share of the bubble by kind;
    `where` (a pointer to the table) after its first words."""
    def over(mask) -> str:
        rows = t[mask & t["overhead"].notna()]
        if rows.empty:
            return "–"
        return beyond_span([o + 1 for o in rows["overhead"]], list(rows["floor"]))

    eager = t["kind"].str.endswith((" eager", " compiled"))
    node = t["kind"].str.endswith("node by node")
    graph = t["kind"].str.endswith("graph by graph")
    metrics = t["kind"].str.endswith("with GPU metrics")
    share_eager, share_graph = _shares(t[eager]), _shares(t[~eager])
    used = [f for f in t["floor"] if f is not None]
    return [
        f"Over every committed capture{where}, nsys added to an eager or compiled step (GPT-2 "
        f"and Llama) {over(eager)}, to a graph-replayed one recorded node by node {over(node)} "
        f"and graph by graph {over(graph)}: traced ms/step against the same configuration's "
        f"untraced bench, {BETWEEN_PROCESSES} ({floor_note(used)}). Of a traced inter-step "
        f"bubble, the profiler's share (against the untraced twin, run in other processes) was "
        f"{share_eager} in the eager and compiled captures with a twin and {share_graph} in the "
        "graph-replayed ones (below 0: the traced bubble was the shorter; within noise where "
        "the twin's runs differ by more than the share: METRICS.md, Untraced)."
        + (f" The graph-level captures that also sampled GPU metrics ran {over(metrics)} "
           "against untraced: faster." if metrics.any() else "")]


def overview_sections(root: Path, fig: Path | None = None) -> list:
    t = every_capture(root)
    if t.empty:
        return []
    return ["## Every capture, by kind", OVERVIEW_TEXT, *overview_findings(t),
            frame_md_table(overview_table(t))]
