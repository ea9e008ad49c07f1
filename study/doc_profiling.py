"""docs/PROFILING.md's generated blocks (blocks.py) besides the overhead table (publish.py):
what the table says about the twin's events and about node- against graph-level capture, and
the nsys line a committed capture's run.json records."""

import json
from pathlib import Path

from .text import BETWEEN_PROCESSES, SAME_PROCESS, between, floor_note, listing, span

OBSERVER = "docs/observer-20261201"
GRAPH_REPLAYED = ("graphed", "graphed-sync", "fused")


def _rows(root: Path) -> list:
    from .overhead import rows

    return [r for r in rows(root / OBSERVER) if r["untraced_ms"]]


def _pct(x: float) -> str:
    return f"{(x - 1) * 100:+.1f}%"


def overhead_notes(root: Path) -> str:
    """`events on` against untraced (the same processes), and node- against graph-level
    capture (traced against untraced, between processes, held against the A/A floor)."""
    from .aa import floor

    rows = _rows(root)
    ev = [(r, r["events_ms"] / r["untraced_ms"]) for r in rows if r["events_ms"]]
    graph = [x for r, x in ev if r["variant"] in GRAPH_REPLAYED]
    other = [(r, x) for r, x in ev if r["variant"] not in GRAPH_REPLAYED]
    low = [(r, x) for r, x in other if x < 1]
    high = [(r, x) for r, x in other if x >= 1]
    text = ("`events on` is the untraced run with the twin's two CUDA events a step, in the "
            f"bench's own processes after it ({SAME_PROCESS} each; medians over the processes): "
            f"{span([(x - 1) * 100 for x in graph], '+.1f', '%')} on the graph-replayed rungs; "
            "on the eager and compiled ones " + listing(
                [f"{_pct(x)} (`{r['variant']}`, batch {r['batch']})" for r, x in high]) + ".")
    if low:
        text += (" Where it reads below untraced (" + listing(
            [f"`{r['variant']}` at batch {r['batch']}, {_pct(x)}" for r, x in low])
            + "), the bench's own median was the slow one: "
            + listing([f"{r['untraced_ms']:.3f} ms/step over processes of "
                       f"{r['untraced_min_ms']:.3f}–{r['untraced_max_ms']:.3f}" for r, _ in low])
            + ": host noise between runs of one process, not the events.")
    g = floor(root, "graph-replayed")
    pairs = [r for r in rows if r["variant"] in GRAPH_REPLAYED
             and {"node", "graph"} <= set(r["traced_ms"])]
    levels = []
    for r in pairs:
        node, gr = (r["traced_ms"][k] / r["untraced_ms"] for k in ("node", "graph"))
        levels.append(f"`{r['variant']}` at batch {r['batch']} "
                      + between(node, g, _pct(node)) + " node by node against "
                      + between(gr, g, _pct(gr)) + " graph by graph")
    notes = ("Node by node against graph by graph (traced ms/step over the untraced median, "
             f"{BETWEEN_PROCESSES}), at every batch where both were captured: "
             + listing(levels))
    notes += f" ({floor_note([g])})." if "within noise" in notes else "."
    return text + "\n\n" + notes


def nsys_choice(root: Path) -> str:
    """The line scripts/lib.sh prints, with the nsys a committed capture's run.json names."""
    path = next(iter(sorted((root / OBSERVER).glob("b*/*/graph/run.json"))))
    nsys = json.loads(path.read_text())["nsys"]
    return (f"    gapscope: using nsys {nsys['version']} at {nsys['path']} (newest of N found)\n\n"
            f"(the version and path of the committed captures: `{path.relative_to(root)}`).")


def overhead_block(root: Path) -> str:
    """PROFILING.md's table of what nsys adds a step, by flag set."""
    from .overhead import table as overhead_table
    from .sources import SOURCES

    return overhead_table(root / SOURCES["observer"])


HOST_OVERHEAD = "docs/user-programs-20261202/overhead.jsonl"


def host_wrapper(root: Path) -> str:
    """A call's cost through the host table's wrappers, from scripts/host_overhead.py's lines."""
    lines = [json.loads(x) for x in (root / HOST_OVERHEAD).read_text().splitlines() if x]
    ns = {r["mode"]: r["ns_per_call"] for r in lines}
    calls = {r["calls"] for r in lines}
    rounds = {len(r["rounds"]) for r in lines}
    return (f"On the H200, without nsys (`{HOST_OVERHEAD}`, `python -m scripts.host_overhead "
            f"--mode MODE --calls {min(calls)}`, the median of {min(rounds)} rounds): a bare "
            f"call of a small function {ns['bare']:.0f} ns, through the hook's twin wrapper (the "
            f"host clock) {ns['clock']:.0f} ns, through its traced wrapper (an NVTX push and pop, "
            f"no profiler to receive them) {ns['ranges']:.0f} ns: about "
            f"{(ns['clock'] - ns['bare']) / 1e3:.1f} µs a call of named code in the twin's "
            "host-timed run, which is why that run's steps stay out of the untraced period.")
