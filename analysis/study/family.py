"""Study part `family`: the ladder on another model family, at two batch sizes (issue 11).

The directory holds `bench-ladder-b<B>.json` (one `harness bench` of the ladder per batch, one
process each) and `capture/<UTC>-<variant>-b<B>/` run directories (`scripts/profile.sh` with
its untraced bench and twin). A compiled variant benched only by its capture (its
untraced.json, a process of its own) fills its ladder row from there, and the table says so.
"""

import json
import re
from pathlib import Path

import pandas as pd

from ..render.markdown import frame_md_table
from ..study.benches import LADDER, model_text, read_bench
from ..study.captures import capture_rows, kernels_per_step
from ..study.text import (
    BETWEEN_PROCESSES,
    SAME_PROCESS,
    bullet,
    listing,
    pct,
    pct_span,
    span,
)

CAPTURE = re.compile(r"Z-(?P<name>.+)-b(?P<batch>\d+)$")
# The family's ladder: GPT-2's, then our own step's rungs where the family has them.
FAMILY_LADDER = [*LADDER, "graphed-sync", "graphed", "fused"]


def ladder_benches(study: Path) -> dict:
    """batch -> that batch's bench rows (read_bench), the captures' own benches added."""
    out = {}
    for path in study.glob("bench-ladder-b*.json"):
        out[int(path.stem.rsplit("-b", 1)[1])] = read_bench(path)
    for name, batch, run in family_captures(study):
        bench = run / "untraced.json"
        if batch in out and name not in out[batch].index and bench.is_file():
            row = read_bench(bench)
            row["own_process"] = True
            out[batch] = pd.concat([out[batch], row.loc[[name]]])
    return dict(sorted(out.items()))


def family_captures(study: Path) -> list:
    """(name, batch, run directory) of each capture, the newest of a name and batch."""
    found = {}
    for d in sorted((study / "capture").glob("*Z-*-b*")):
        m = CAPTURE.search(d.name)
        if m and (d / "capture.sqlite").is_file():
            found[(m["name"], int(m["batch"]))] = d
    return [(name, batch, d) for (name, batch), d in found.items()]


def ladder_table(by_batch: dict) -> pd.DataFrame:
    """One row a variant (the ladder's order), per batch its ms/step, the speedup over naive, and
    whether it decoded kv's tokens (tokens_sha256)."""
    rows = []
    names = [v for v in FAMILY_LADDER if any(v in b.index for b in by_batch.values())]
    for v in names:
        row = {"variant": v}
        for batch, b in by_batch.items():
            if v not in b.index:
                row |= {f"b{batch} ms/step": "–", f"b{batch} p10–p90": "–",
                        f"b{batch} × naive": "–", f"b{batch} kv's tokens": "–"}
                continue
            r = b.loc[v]
            flag = r.get("own_process")
            own = " †" if pd.notna(flag) and bool(flag) else ""
            row[f"b{batch} ms/step"] = f"{r['ms_per_step_median']:.3f}{own}"
            row[f"b{batch} p10–p90"] = f"{r['ms_per_step_p10']:.2f}–{r['ms_per_step_p90']:.2f}"
            row[f"b{batch} × naive"] = (
                f"{b.loc['naive', 'ms_per_step_median'] / r['ms_per_step_median']:.2f}x"
                if "naive" in b.index else "–")
            row[f"b{batch} kv's tokens"] = (
                "–" if "kv" not in b.index
                else "yes" if r["tokens_sha256"] == b.loc["kv", "tokens_sha256"] else "no")
        rows.append(row)
    return pd.DataFrame(rows)


def family_capture_rows(study: Path) -> tuple:
    """(capture_rows' table with batch and the twin's bubble, {(name, batch): (analysis, run)})
    of the study's captures, in the ladder's order by batch."""
    found = family_captures(study)
    if not found:
        return pd.DataFrame(), {}
    rows, analyses = capture_rows({f"{name}-b{batch}": d for name, batch, d in found})
    rows["capture"] = [name for name, _, _ in found]
    rows["batch"] = [batch for _, batch, _ in found]
    twins = [(a.summary.get("untraced") or {}).get("bubble_ns_median")
             for a, _, _ in analyses.values()]
    rows["bubble µs untraced"] = ["–" if b is None else f"{b / 1e3:.1f}" for b in twins]
    order = {v: i for i, v in enumerate(FAMILY_LADDER)}
    rows = rows.sort_values(["batch", "capture"], key=lambda c: c.map(order)
                            if c.name == "capture" else c).reset_index(drop=True)
    by_key = {(name, batch): analyses[f"{name}-b{batch}"][:2] for name, batch, _ in found}
    return rows, by_key


def capture_table(study: Path) -> pd.DataFrame:
    """Each capture (study_captures.capture_rows) with its batch and its twin's bubble: what
    nsys shows beside what is real."""
    rows, _ = family_capture_rows(study)
    if rows.empty:
        return rows
    rows = rows.rename(columns={"untraced": "untraced ms/step",
                                "bubble median µs": "bubble µs traced"})
    # A capture graph by graph has one record a replay and none of the graph's kernels.
    rows.loc[rows["graph trace"] == "graph", "kernels/step"] = "–"
    return rows[["capture", "batch", "traced ms/step", "untraced ms/step", "GPU busy",
                 "op records/step", "kernels/step", "bubble µs traced", "bubble µs untraced",
                 "idle sync / host / queued", "sync idle share"]]


def model_line(study: Path) -> str:
    """The model (study_benches.model_text) and the ladder's settings, from the first bench."""
    path = next(iter(sorted(study.glob("bench-ladder-b*.json"))), None)
    if path is None:
        return ""
    data = json.loads(path.read_text())
    c = data["config"]
    return (f"`--model {c['model']}`: {model_text(data.get('model'))}, "
            f"{(data.get('model') or {}).get('weights', 'random')} weights; {c['dtype']} with "
            f"matmul precision \"{c['matmul_precision']}\", {c['new_tokens']} new tokens, "
            f"{c['repeats']} repeats")


EAGER = ("naive", "kv", "static", "pipelined")


def _own(row) -> bool:
    flag = row.get("own_process")
    return bool(pd.notna(flag) and flag)


def _idle(a, cause: str) -> float:
    return a.summary["idle_ns_by_cause"][cause] / (a.summary["idle_ns"] or 1)


def family_findings(by_batch: dict, caps: dict) -> list:
    """The part's sentences: the untraced ladder by batch (one process a batch, † rows from
    their capture's own process) and the captures (caps: {(name, batch): (analysis, run)})."""
    out = []
    batches = list(by_batch)
    eager = {b: [v for v in EAGER if v in rows.index and not _own(rows.loc[v])]
             for b, rows in by_batch.items()}
    text = "; ".join(
        f"{span(by_batch[b].loc[eager[b], 'ms_per_step_median'])} ms/step at batch {b} "
        f"({listing([f'`{v}`' for v in eager[b]])})" for b in batches if eager[b])
    static = [(b, caps[("static", b)][0]) for b in batches if ("static", b) in caps]
    if static:
        text += (f". In `static`'s captures the GPU is busy "
                 f"{pct_span([a.summary['gpu_util'] for _, a in static])} of the window, "
                 f"{pct_span([_idle(a, 'host') for _, a in static], 0)} of its idle the host's, "
                 "launching " + listing([f"{a.steps['op_records'].median():.0f} op records "
                                         f"({kernels_per_step(a):.0f} kernels) a step at batch "
                                         f"{b}" for b, a in static]))
    if text:
        out.append(bullet("The eager rungs are bound by the host:",
                          f"untraced, {SAME_PROCESS} a batch, {text}."))
    comp = []
    for b, rows in by_batch.items():
        if {"compiled", "naive"} <= set(rows.index) and not _own(rows.loc["compiled"]):
            x = rows.loc["naive", "ms_per_step_median"] / rows.loc["compiled", "ms_per_step_median"]
            comp.append(f"{x:.2f}x over `naive` at batch {b}")
    counts = [f"{caps[(v, b)][0].steps['op_records'].median():.0f} op records a step against "
              f"`static`'s {caps[('static', b)][0].steps['op_records'].median():.0f} at batch {b}"
              for b in batches for v in ("compiled",) if (v, b) in caps and ("static", b) in caps]
    if comp:
        out.append(bullet("`torch.compile`:", f"{SAME_PROCESS} a batch, " + listing(comp)
                          + (f"; `compiled` launches {listing(counts)}" if counts else "") + "."))
    out += pingpong_findings(by_batch, caps)
    out += sync_bubble_findings(by_batch, caps)
    prof = [(b, caps[("compiled", b)]) for b in batches if ("compiled", b) in caps]
    overheads = [r.traced_ms_per_step() / r.untraced_ms_per_step() - 1
                 for a, r in caps.values() if r.traced_ms_per_step() and r.untraced_ms_per_step()]
    if prof or overheads:
        twinned = [(b, a) for b, (a, _) in prof if a.summary.get("untraced")]
        parts = []
        if twinned:
            parts.append(
                "traced, `compiled`'s captures show a median bubble of " + listing(
                    [f"{a.summary['bubble_ns_median'] / 1e3:.1f} µs at batch {b}"
                     for b, a in twinned])
                + " where their twins see " + listing(
                    [f"{a.summary['untraced']['bubble_ns_median'] / 1e3:.1f}"
                     for _, a in twinned]) + " µs ("
                + listing([pct(a.summary["untraced"]["profiler_bubble_share"], 0)
                           for _, a in twinned]) + " of it the profiler's)")
        if overheads:
            parts.append(f"nsys adds {pct_span(overheads, 0, sign=True)} to each captured step "
                         f"(traced ms/step ÷ its capture's untraced bench, {BETWEEN_PROCESSES}, "
                         f"{len(overheads)} captures)")
        out.append(bullet("The profiler:", "; ".join(parts) + "."))
    fastest = []
    for b, rows in by_batch.items():
        if "hf-generate" in rows.index:
            best = rows["ms_per_step_median"].idxmin()
            hf = rows.loc["hf-generate"]
            fastest.append(f"{hf['ms_per_step_median']:.3f} ms/step at batch {b}"
                           + (f" ({rows.loc['naive', 'ms_per_step_median'] / hf['ms_per_step_median']:.2f}x `naive`)"  # noqa: E501
                              if "naive" in rows.index else "")
                           + ("" if best == "hf-generate" else f", behind `{best}`"))
    if fastest:
        out.append(bullet(
            "`hf-generate`",
            f"(transformers' generate with a static cache, which compiles the forward with CUDA "
            f"graphs, \"reduce-overhead\": read in its source, not traced here): "
            f"{listing(fastest)}. Only a step that replays as a graph leaves the host's pace "
            "behind."))
    differ = [f"`{v}` at batch {b}" for b, rows in by_batch.items() if "kv" in rows.index
              for v in rows.index if rows.loc[v, "tokens_sha256"] != rows.loc["kv",
                                                                              "tokens_sha256"]]
    naive_only = all(d.startswith("`naive` ") for d in differ)
    out.append(bullet(
        "Tokens:",
        "every rung decoded `kv`'s tokens (tokens_sha256)" + (
            f" except {listing(differ)}: under TF32 "
            + ("its whole-sequence recompute rounds" if naive_only
               else "their GEMMs (of other shapes than `kv`'s) round")
            + " differently and some greedy choices differ" if differ else "")
        + "; at \"highest\" the GPU tests check each rung against `kv` for all four families."))
    return out


def pingpong_findings(by_batch: dict, caps: dict) -> list:
    out = []
    batches = list(by_batch)
    syncs = {v: [a.summary["sync_idle_share"] for (n, _), (a, _) in caps.items() if n == v]
             for v in ("compiled", "pipelined+compile")}
    text = []
    if all(syncs.values()):
        text.append(f"`compiled`'s captures put {pct_span(syncs['compiled'])} of the window in "
                    f"sync idle, `pipelined+compile`'s {pct_span(syncs['pipelined+compile'])}")
    for b in batches:
        rows = by_batch[b]
        if "pipelined+compile" not in rows.index or "compiled" not in rows.index:
            continue
        p = rows.loc["pipelined+compile", "ms_per_step_median"]
        procs = [rows.loc["compiled", "ms_per_step_median"]]
        if ("compiled", b) in caps and caps[("compiled", b)][1].untraced_ms_per_step():
            procs.append(caps[("compiled", b)][1].untraced_ms_per_step())
        where = ("slower than" if p > max(procs) else "faster than" if p < min(procs)
                 else "between")
        text.append(f"untraced at batch {b}, `pipelined+compile` ran {p:.3f} ms/step in a process "
                    f"of its own against `compiled`'s {listing([f'{x:.3f}' for x in procs])} in "
                    f"{len(procs)} other process{'es' if len(procs) > 1 else ''}: {where} "
                    f"{'both' if len(procs) == 2 and where != 'between' else 'them'}")
    twins = {v: [a.summary["untraced"]["bubble_ns_median"] / 1e3 for (n, _), (a, _)
                 in caps.items() if n == v and a.summary.get("untraced")]
             for v in ("compiled", "pipelined+compile")}
    if all(twins.values()):
        text.append(f"the twin's bubble is {span(twins['pipelined+compile'], '.1f')} µs for the "
                    f"ping-pong against {span(twins['compiled'], '.1f')} for `compiled`")
    if text:
        out.append(bullet("The ping-pong, compiled:", "; ".join(text) + " (each twin from its "
                          "own capture's process)."))
    return out


def sync_bubble_findings(by_batch: dict, caps: dict) -> list:
    """`graphed-sync` against `graphed` untraced (the ladder's process at each batch) beside
    `graphed-sync`'s bubble in its captures, traced and in the capture's untraced twin."""
    pairs = []
    for b, rows in by_batch.items():
        if not {"graphed-sync", "graphed"} <= set(rows.index) or any(
                _own(rows.loc[v]) for v in ("graphed-sync", "graphed")):
            continue
        s, g = (rows.loc[v, "ms_per_step_median"] for v in ("graphed-sync", "graphed"))
        pairs.append(f"{s:.3f} against {g:.3f} ms/step at batch {b}: {(s - g) * 1e3:.1f} µs a "
                     f"step, {pct((s - g) / g)} of `graphed`'s step")
    bubbles = []
    for b in by_batch:
        if ("graphed-sync", b) not in caps:
            continue
        a = caps[("graphed-sync", b)][0]
        level = "graph by graph" if a.summary.get("cuda_graph_trace") == "graph" else "node by node"
        twin = (a.summary.get("untraced") or {}).get("bubble_ns_median")
        bubbles.append(f"{a.summary['bubble_ns_median'] / 1e3:.1f} µs traced ({level}) against "
                       + ("no untraced twin" if twin is None else f"{twin / 1e3:.1f} µs in its "
                          "untraced twin") + f" at batch {b}")
    if not pairs and not bubbles:
        return []
    text = []
    if pairs:
        text.append(f"untraced, {SAME_PROCESS} a batch, `graphed-sync` (one CUDA graph a step, "
                    "`.item()` after each) against `graphed` (the flag read a step late) ran "
                    + "; ".join(pairs))
    if bubbles:
        text.append("`graphed-sync`'s median bubble between steps in its captures: "
                    + listing(bubbles))
    return [bullet("The sync bubble, once launches are cheap:", ". ".join(text) + ".")]


def family_sections(study: Path, fig: Path | None = None) -> list:
    """The part's Markdown; with `fig` (a directory) also its figure, fig/family-ladder.png."""
    by_batch = ladder_benches(study)
    if not by_batch:
        return []
    rows, caps = family_capture_rows(study)
    parts = [f"## The ladder on another family ({study.name})", model_line(study) + ".",
             *family_findings(by_batch, caps)]
    parts += ["### Untraced (harness bench, one process per batch)",
              frame_md_table(ladder_table(by_batch)),
              "† benched in a process of its own (its capture's untraced run), not beside the "
              "others: compare it with them only across the between-process spread."]
    if fig is not None:
        from ..study.plots import plot_family

        model = json.loads(next(iter(sorted(study.glob("bench-ladder-b*.json")))).read_text())
        plot_family(fig / "family-ladder.png", by_batch,
                    f"The ladder on --model {model['config'].get('model')}, untraced",
                    FAMILY_LADDER)
    parts.append("![family ladder](figures/family-ladder.png)")
    graph_level = any(a.summary.get("cuda_graph_trace") == "graph" for a, _ in caps.values())
    caps = capture_table(study)
    if not caps.empty:
        how = ("eager and compiled node by node, graph replays graph by graph" if graph_level
               else "node-level")
        parts += [f"### Captured (scripts/profile.sh, {how}; untraced = its bench and twin)",
                  frame_md_table(caps)]
    return parts

