"""Study part `captures`: a directory of run directories (tests/data/runs: the studies'
captures), as one table with the sentences that summarise it, the profiler's share where a
capture has its untraced twin, and where the GPU time of three of them goes by kernel class."""

from pathlib import Path

from analysis.toolkit import frame_md_table, run_dirs

from . import observer
from .captures import GRAPH_VARIANTS, capture_rows, kernels_per_step, kind  # noqa: F401
from .text import (
    BETWEEN_PROCESSES,
    between,
    beyond_span,
    bullet,
    floor_note,
    listing,
    pct,
    pct_span,
    span,
    with_floor,
)

KERNEL_TABLES = ("fused", "graphed", "static")
CAUSES = ("sync", "host", "queued")


KINDS = ("eager", "compiled", "graph-replayed, node by node", "graph-replayed, graph by graph")


def overhead(run) -> float | None:
    traced, untraced = run.traced_ms_per_step(), run.untraced_ms_per_step()
    return traced / untraced - 1 if traced and untraced else None


def _idle_share(a, cause: str) -> float:
    return a.summary["idle_ns_by_cause"][cause] / (a.summary["idle_ns"] or 1)


def _batches(found: list) -> str:
    return listing(sorted({str((run.info.get("config") or {}).get("batch")) for _, _, run in
                           found}, key=int))


def capture_findings(analyses: dict, floors: dict | None = None) -> list:
    from .aa import floors as aa_floors

    floors = aa_floors() if floors is None else floors
    graph_floor = floors.get("graph-replayed")
    out = []
    by_kind = {}
    for name, (a, run, _) in analyses.items():
        by_kind.setdefault(kind(run), []).append((name, a, run))
    eager = by_kind.get("eager", [])
    if eager:
        syncs = [_idle_share(a, "sync") for _, a, _ in eager if _idle_share(a, "sync") > 0]
        out.append(bullet(
            "Eager, the GPU waits for the host.",
            f"In every eager capture here ({listing([f'`{n}`' for n, _, _ in eager])}; batch "
            f"{_batches(eager)}) the GPU is busy {pct_span([a.summary['busy_share_of_window'] for _, a, _ in eager])} "  # noqa: E501
            "of the captured window, and "
            f"{pct_span([_idle_share(a, 'host') for _, a, _ in eager], 0)} of its idle time is "
            "the host's (cause `host`: the next op was launched after the GPU ran dry), "
            f"launching {span([a.steps['op_records'].median() for _, a, _ in eager], '.0f')} op "
            f"records a step ({span([kernels_per_step(a) for _, a, _ in eager], '.0f')} "
            "kernels), one launch call each"
            + (f"; the `.item()` sync is {pct_span(syncs, 0)} of the idle where the loop has one"
               if syncs else "") + " (traced shares of the window, as nsys saw it)."))
    compiled = by_kind.get("compiled", [])
    if compiled:
        out.append(bullet(
            "Compiled, still the host.",
            f"The compiled captures ({listing([f'`{n}`' for n, _, _ in compiled])}): busy "
            f"{pct_span([a.summary['busy_share_of_window'] for _, a, _ in compiled])}, "
            f"{span([a.steps['op_records'].median() for _, a, _ in compiled], '.0f')} op "
            f"records a step, {pct_span([_idle_share(a, 'host') for _, a, _ in compiled], 0)} of "
            "the idle the host's; the sync's share of the idle: "
            + ", ".join(f"`{n}` {pct(_idle_share(a, 'sync'), 0)}" for n, a, _ in compiled) + "."))
    graphs = [(n, a, r) for n, a, r in by_kind.get("graph-replayed", [])
              if a.summary.get("cuda_graph_trace") == "node"]
    pair = {n: (a, r) for n, a, r in graphs if n in ("graphed-sync", "graphed")}
    if len(pair) == 2:
        (sa, sr), (ga, gr) = pair["graphed-sync"], pair["graphed"]
        twins = any(a.summary.get("untraced") for a, _ in pair.values())
        out.append(bullet(
            "The graphed pair, node by node:",
            f"`graphed-sync` (one CUDA graph a step, `.item()` after each) shows a "
            f"{sa.summary['bubble_ns_median'] / 1e3:.1f} µs median bubble between steps, "
            f"{pct(_idle_share(sa, 'sync'), 0)} of its idle in sync; `graphed` (the flag read a "
            f"step late) {ga.summary['bubble_ns_median'] / 1e3:.1f} µs. "
            + ("" if twins else "Traced only: these two captures have no untraced twin, so "
               "neither bubble is what the step leaves without nsys (the observer part has the "
               "pair with its twin); ")
            + with_floor(
                f"untraced (each capture's bench, {BETWEEN_PROCESSES}) the two ran "
                f"{sr.untraced_ms_per_step():.3f} and {gr.untraced_ms_per_step():.3f} ms/step: "
                + between(sr.untraced_ms_per_step() / gr.untraced_ms_per_step(), graph_floor,
                          f"{pct(sr.untraced_ms_per_step() / gr.untraced_ms_per_step() - 1)} "
                          "apart"), [graph_floor]) + "."))
    fused = [(n, a, r) for n, a, r in graphs if (r.info.get("config") or {}).get("variant")
             == "fused"]
    if fused:
        out.append(bullet(
            "The fused step, node by node:",
            with_floor("; ".join(f"`{n}` busy {pct(a.summary['busy_share_of_window'])} of its "
                      "capture, "
                      f"{pct(_idle_share(a, 'queued'), 0)} of its idle `queued` (the graph's "
                      "kernel-to-kernel latency), traced "
                      f"{r.traced_ms_per_step():.3f} against untraced "
                      f"{r.untraced_ms_per_step():.3f} ms/step ({BETWEEN_PROCESSES}: "
                      + between(overhead(r) + 1, graph_floor, pct(overhead(r), 0, sign=True))
                      + ")" for n, a, r in fused), [graph_floor]) + "."))
    levels = {}
    for _, a, r in [x for found in by_kind.values() for x in found]:
        k = kind(r)
        if k == "graph-replayed":
            k += (", node by node" if a.summary.get("cuda_graph_trace") == "node"
                  else ", graph by graph")
        if overhead(r) is not None:
            levels.setdefault(k, []).append(overhead(r))
    kinds = [(k, levels[k]) for k in KINDS if k in levels]
    out.append(bullet(
        "What nsys added to a step",
        f"(traced ms/step ÷ the capture's own untraced bench, {BETWEEN_PROCESSES}, − 1): "
        + "; ".join(f"{k} " + beyond_span([x + 1 for x in v], floors.get(k.split(",")[0]))
                    for k, v in kinds if v)
        + f" ({floor_note([floors.get(k.split(',')[0]) for k, _ in kinds])})."))
    return out


def kernel_sections(analyses: dict, fig: Path | None) -> list:
    from .kernel_table import kernels_for
    from .plots import plot_kernels

    parts = []
    for name in KERNEL_TABLES:
        if name not in analyses:
            continue
        a, run, strings = analyses[name]
        table = kernels_for(a, run, strings, None)
        if fig is not None:
            plot_kernels(fig / f"kernels-{name}.png", table,
                         f"{name}: GPU time per step by kernel class")
        parts += [f"### Per-kernel time of `{name}` (node-level capture, "
                  f"{run.info['config']['batch']} sequences, made {_made(analyses, name)})",
                  frame_md_table(table), f"![kernels {name}](figures/kernels-{name}.png)"]
        parts += kernel_findings(name, table)
    return parts


def _made(analyses: dict, name: str) -> str:
    from .captures import made

    return made(analyses[name][1])


def kernel_findings(name: str, table) -> list:
    """The class that takes most of the step's GPU time, with the bytes it moves at least."""
    rows = table[table["class"] != "whole step (floor)"]
    top = rows.iloc[0]
    text = (f"In `{name}`, `{top['class']}` takes {top['µs/step']} µs of GPU time a step "
            f"({top['share']}, {top['op records/step']} op records)")
    if top["MB/step (least)"] != "–":
        text += (f", moving at least {top['MB/step (least)']} MB a step at "
                 f"{top['achieved GB/s']} GB/s")
    memsets = rows[rows["class"] == "[memset]"]
    if len(memsets):
        text += f"; {memsets.iloc[0]['op records/step']} memsets a step"
    return [text + "."]


def captures_sections(root: Path, fig: Path | None) -> list:
    from analysis.toolkit import plot_analysis

    from .aa import floors as aa_floors
    from .plots import plot_idle

    floors = aa_floors()
    found = {d.relative_to(root).as_posix(): d for d in run_dirs(root)}
    caps, analyses = capture_rows(found, floors)
    if caps.empty:
        return []
    parts = [f"## What the captures show ({root.as_posix()})", CAPTURES_TEXT,
             *capture_findings(analyses, floors), frame_md_table(caps)]
    if fig is not None:
        plot_idle(fig / "idle.png", analyses)
        for n in TIMELINES:
            if n in analyses:
                plot_analysis(analyses[n][0], n, fig / f"timeline-{n}.png")
    parts.append("![idle](figures/idle.png)")
    share = observer.capture_share_table(analyses)
    if len(share):
        parts += ["### The captures with an untraced twin: how much of the bubble is the "
                  "profiler's", frame_md_table(share)]
    parts += kernel_sections(analyses, fig)
    parts += [f"![timeline {n}](figures/timeline-{n}.png)" for n in TIMELINES if n in analyses]
    return parts


TIMELINES = ("graphed-sync", "graphed", "fused", "fused-b2", "static")

CAPTURES_TEXT = (
    "The run directories of `tests/data/runs/` (tests/data/README.md says how each was made): "
    "`scripts/profile.sh` captures on the H200, nsys tracing CUDA and NVTX over a window of "
    "steps (run.json's `--window`), each with its untraced bench (`untraced`: `harness bench` in a "
    "process of its own, before the capture) and, for the later ones, its untraced twin (CUDA "
    "events around every step, no profiler). `made`: the study or the UTC time of the capture "
    "(its nsys command's output path). `graph trace`: how nsys recorded the CUDA graphs (`node`: "
    "each kernel; `graph`: one op record a replay; `none`: no graph). Op records: the GPU ops "
    "nsys recorded (kernels, copies, memsets; a graph replayed at graph level counts one); "
    "kernels: the kernel records alone; launch calls: the CUDA API calls that launched them. "
    "nsys overhead: traced ms/step ÷ untraced − 1, two processes (within noise where that "
    "ratio is inside the A/A floor of its kind: part A/A). A capture of GPU metrics "
    "alone (`fused-metrics`) has no gaps and is left out. The traced bubble and the shares of "
    "the idle are what the trace shows, not what the loop leaves without nsys: the untraced "
    "bubble is beside it where a twin exists.")
