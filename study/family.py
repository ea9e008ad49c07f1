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

from analysis.toolkit import frame_md_table, trace_in

from .benches import LADDER, model_text, read_bench
from .captures import capture_rows

# The part's sentences are family_text.py's; they import from here as before.
from .family_text import (  # noqa: F401
    EAGER,
    family_findings,
    pingpong_findings,
    sync_bubble_findings,
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
        if m and trace_in(d) is not None:
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
    return rows[["capture", "batch", "traced ms/step", "untraced ms/step", "GPU busy (of window)",
                 "op records/step", "kernels/step", "bubble µs traced", "bubble µs untraced",
                 "idle sync / host / queued (of idle)", "sync idle (of window)"]]


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
        from .plots import plot_family

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

