"""The published study: docs/RESULTS.md, README's findings and docs/PROFILING.md's overhead
table, every number made by `gapscope study` from the run directories committed here
(SOURCES), so that a test can make them again and fail on any difference (issue 19).

    python -m analysis.study.publish           # write them (and the figures) from SOURCES
    python -m analysis.study.publish --check   # exit 1 and say where, if they would change

Run from the repository root. Each part is also `gapscope study DIR -o docs --part PART`.
"""

import sys
from pathlib import Path

import pandas as pd

from ..render.markdown import frame_md_table
from ..study.captures import analysed, is_traced
from ..study.runs import kind
from ..study.text import BETWEEN_PROCESSES, SAME_PROCESS, listing, pct_span, span, wrap
from ..sweep import run_dirs

# part -> the committed directory it is made from (relative to the repository root).
SOURCES = {
    "ladder": "docs/study-20261130T221926Z",
    "captures": "tests/data/runs",
    "observer": "docs/observer-20261201",
    "hardware": "docs/hardware-view-20261201",
    "aa": "docs/aa-20261201",
    "family": "docs/llama-20261201",
    "overview": ".",
}
CAPTURE_SOURCES = ("captures", "observer", "hardware", "family")
RESULTS, README, PROFILING = Path("docs/RESULTS.md"), Path("README.md"), Path("docs/PROFILING.md")
FAMILY_NAMES = {"gpt2": "GPT-2", "llama": "Llama"}


BY = "python -m analysis.study.publish"


def gen_start(name: str, by: str = BY) -> str:
    return f"<!-- generated: {name} ({by}) -->"


GEN_END = "<!-- /generated -->"


# --- every committed capture, by kind (part `overview`) -------------------------------------

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
    dirs = [(part, d) for part in CAPTURE_SOURCES for d in run_dirs(root / SOURCES[part])]
    done = analysed([d for _, d in dirs], progress=len(dirs) > 1)
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
            "busy": s["gpu_util"] if gaps else None,
            "host": s["idle_ns_by_cause"]["host"] / (s["idle_ns"] or 1) if gaps else None,
            "op_records": a.steps["op_records"].median() if gaps else None,
            "bubble_us": s["bubble_ns_median"] / 1e3 if gaps else None,
            "twin_bubble_us": None if twin.get("bubble_ns_median") is None
            else twin["bubble_ns_median"] / 1e3,
            "share": twin.get("profiler_bubble_share") if gaps else None,
        })
    return pd.DataFrame(rows)


def _span(values, fn) -> str:
    values = [v for v in values if v is not None and not pd.isna(v)]
    return fn(values) if values else "–"


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
            "nsys overhead": _span(g["overhead"], lambda v: pct_span(v, 0, sign=True)),
            "GPU busy": _span(g["busy"], pct_span),
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


def overview_findings(t: pd.DataFrame, where: str = "") -> list:
    """The README's profiler-share sentence: nsys's overhead and share of the bubble by kind;
    `where` (a pointer to the table) after its first words."""
    def over(mask) -> str:
        return _span(t[mask]["overhead"], lambda v: pct_span(v, 0, sign=True))

    eager = t["kind"].str.endswith((" eager", " compiled"))
    node = t["kind"].str.endswith("node by node")
    graph = t["kind"].str.endswith("graph by graph")
    metrics = t["kind"].str.endswith("with GPU metrics")
    share_eager = _span(t[eager]["share"], lambda v: pct_span(v, 0))
    share_graph = _span(t[~eager]["share"], lambda v: pct_span(v, 0))
    return [
        f"Over every committed capture{where}, nsys added {over(eager)} to an eager or "
        f"compiled step ({int(eager.sum())} captures, GPT-2 and Llama), {over(node)} to a "
        "graph-replayed one recorded node by node "
        f"({int(node.sum())}) and {over(graph)} graph by graph ({int(graph.sum())}): traced "
        f"ms/step against the same configuration's untraced bench, {BETWEEN_PROCESSES}. Of a "
        f"traced inter-step bubble, the profiler's share was {share_eager} in the eager and "
        f"compiled captures with an untraced twin and {share_graph} in the graph-replayed ones "
        "(below 0: the traced bubble was the shorter)."
        + (f" The {int(metrics.sum())} graph-level captures that also sampled GPU metrics ran "
           f"{over(metrics)} against untraced: faster." if metrics.any() else "")]


def overview_sections(root: Path, fig: Path | None = None) -> list:
    t = every_capture(root)
    if t.empty:
        return []
    return ["## Every capture, by kind", OVERVIEW_TEXT, *overview_findings(t),
            frame_md_table(overview_table(t))]


# --- README's findings: the parts' headline figures ---------------------------------------

def readme_findings(root: Path) -> str:
    from ..study import observer
    from ..study.benches import benches, ladder_rows

    t = every_capture(root)
    eager = t[t["kind"] == "GPT-2 eager"]
    b = benches(root / SOURCES["ladder"])
    lad, fin = ladder_rows(b), b["finish"]
    naive = lad.loc["naive"]
    same = lad[(lad["bench"] == naive["bench"]) & (lad.index.isin(["compiled"]))]
    compiled_x = naive["ms_per_step_median"] / same.loc["compiled", "ms_per_step_median"]
    pc_x = naive["ms_per_step_median"] / lad.loc["pipelined+compile", "ms_per_step_median"]
    sweep = observer.sweep(root / SOURCES["observer"])
    costs = [fin.loc["graphed-sync", "ms_per_step_median"] / fin.loc["graphed",
                                                                     "ms_per_step_median"] - 1]
    for batch in sorted(sweep["batch"].unique()):
        rows = sweep[sweep["batch"] == batch].set_index("variant")
        if {"graphed-sync", "graphed"} <= set(rows.index):
            a, g = (float(pd.Series(rows.loc[v, "bench_ms"]).median())
                    for v in ("graphed-sync", "graphed"))
            costs.append(a / g - 1)
    fused = t[(t["variant"] == "fused") & t["kind"].str.endswith("node by node")
              & (t["branches"].fillna(1) == 1)]
    f = fin.loc["fused"]
    hf = fin.loc["hf-generate", "ms_per_step_median"]
    return (
        "`docs/RESULTS.md`, every number made again from the runs committed here by `python -m "
        f"analysis.study.publish`: in eager mode the GPU is busy {pct_span(eager['busy'])} of "
        f"a captured step ({len(eager)} GPT-2 captures) and {pct_span(eager['host'], 0)} of "
        f"its idle is the host launching {span(eager['op_records'], '.0f')} op records a step, "
        "so hiding the sync on a second stream buys nothing (RESULTS.md's ladder part, in one "
        "process each); the article's "
        f"5x is {compiled_x:.2f}x here (`compiled` over `naive`, {SAME_PROCESS}; "
        f"`pipelined+compile` {pc_x:.2f}x, {BETWEEN_PROCESSES}); once the step is one CUDA "
        f"graph the per-step sync costs {pct_span(costs)} of it untraced ({len(costs)} "
        f"measurements in two sessions); the fused step runs {f['ms_per_step_median']:.3f} "
        f"ms/step, {hf / f['ms_per_step_median']:.2f}x faster than `model.generate` with a "
        f"static cache {SAME_PROCESS}, with the GPU busy {pct_span(fused['busy'])} of its "
        f"{len(fused)} node-level captures (batch "
        f"{listing([str(int(x)) for x in sorted(fused['batch'].unique())])}).")


# --- the documents ---------------------------------------------------------------------------

HEADER = """# Results: where the decode loop leaves the GPU idle

Every number in this file is computed from run directories committed in this repository, by
`gapscope study`: one part a directory (`gapscope study DIR -o docs --part PART`, the table
below), all of them and README's findings by `python -m analysis.study.publish`. `make test`
makes the file again and fails on any difference (tests/test_study_publish.py). Each sentence
that quotes a number is made from the table it summarises; a range is over every run of that
kind in the part's directory (the last part ranges over every capture).

How each comparison was made:
- *untraced*: timed without a profiler, by `harness bench` (the host's clock around whole runs
  after a warm-up; medians, p10–p90 over the repeats) or by the untraced twin (two CUDA events
  around each step); *traced*: under nsys. A traced bubble or share is what the trace shows,
  not what the loop leaves without nsys: the untraced figure stands beside it wherever one was
  measured.
- *in one process*: the variants were timed by one `harness bench` process, one after another;
  *between processes*: by different processes, where an eager figure moves far more than within
  one (part "The A/A noise floor between processes").
- *op records*: the GPU operations nsys recorded (kernels, copies, memsets; a graph replayed at
  graph level is one); *kernels*: the kernel records alone; *launch calls*: the CUDA API calls
  that launched them.
- MiB = 2^20 bytes; MB and GB/s: 10^6 bytes and 10^9 bytes a second."""


def sources_table() -> str:
    from ..study.parts import PART_HELP

    return frame_md_table(pd.DataFrame([
        {"part": p, "made from": f"`{d}`" if d != "." else "the repository (every directory "
         "above that holds captures)", "what": PART_HELP[p],
         "command": f"`gapscope study {d} -o docs --part {p}`"}
        for p, d in SOURCES.items()]))


def results_text(root: Path, fig: Path | None) -> str:
    from ..study.parts import part_block, part_sections

    blocks = [HEADER, sources_table()]
    for part, source in SOURCES.items():
        body = part_sections(part, root / source if source != "." else root, fig)
        if body:
            blocks.append(part_block(part, body))
    return "\n\n".join(blocks) + "\n"


def put_generated(text: str, name: str, body: str, by: str = BY) -> str:
    """`text` with the block between gen_start(name, by) and GEN_END replaced by `body`."""
    start = gen_start(name, by)
    if start not in text:
        raise ValueError(f"no `{start}` marker")
    head, rest = text.split(start, 1)
    if GEN_END not in rest:
        raise ValueError(f"no `{GEN_END}` after `{start}`")
    return (head + start + "\n" + wrap(body.strip()) + "\n" + GEN_END
            + rest.split(GEN_END, 1)[1])


def documents(root: Path, fig: Path | None = None) -> dict:
    """path -> the text it should have: RESULTS.md whole, README's and PROFILING.md's
    generated blocks put into their current text."""
    from ..study.overhead import table as overhead_table

    readme = (root / README).read_text()
    readme = put_generated(readme, "findings", readme_findings(root))
    readme = put_generated(readme, "profiler-share", "**The profiler's own share.** " + " ".join(
        overview_findings(every_capture(root), " (docs/RESULTS.md, \"Every capture, by kind\")")))
    profiling = put_generated((root / PROFILING).read_text(), "overhead",
                              overhead_table(root / SOURCES["observer"]))
    return {RESULTS: results_text(root, fig), README: readme, PROFILING: profiling}


def main(argv: list) -> int:
    check = "--check" in argv
    root = Path.cwd()
    if not (root / SOURCES["ladder"]).is_dir():
        sys.stderr.write("gapscope: error: run from the repository root (no "
                         f"{SOURCES['ladder']} here)\n")
        return 2
    fig = None
    if not check:
        fig = root / "docs" / "figures"
        fig.mkdir(parents=True, exist_ok=True)
    stale = []
    for path, text in documents(Path("."), fig).items():
        if (root / path).read_text() != text:
            stale.append(str(path))
            if not check:
                (root / path).write_text(text)
    if check and stale:
        sys.stderr.write(f"gapscope: {', '.join(stale)} would change: run python -m "
                         "analysis.study.publish\n")
        return 1
    sys.stderr.write(f"gapscope: {'checked' if check else 'wrote'} {RESULTS}, {README}, "
                     f"{PROFILING}{': ' + ', '.join(stale) + ' changed' if stale else ''}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
