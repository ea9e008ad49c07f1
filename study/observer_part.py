"""Study part `observer`: how much of the bubble is the profiler's, from a scripts/overhead.sh
directory (the sentences, then the tables they summarise, and the figure)."""

from pathlib import Path

from analysis.toolkit import plot_bubbles

from . import observer, observer_text
from .section import section

OBSERVER_TEXT = (
    "Each variant timed untraced (`harness bench`; where the table gives [min–max], in several "
    "processes) with its untraced twin (CUDA events around every step, read back after the "
    "run), then captured node-level and, for the graph-replayed ones, graph-level: "
    "`scripts/overhead.sh`. Bubble: median over the captured steps of the GPU idle time "
    "between one step's last op and the next step's first (METRICS.md); the twin's bubble "
    "includes the stop check's copy to the host, and its floor is that of two CUDA events back "
    "to back. The profiler's share = (traced − untraced) / traced."
)


def observer_sections(sweep_dir: Path, fig: Path | None) -> list:
    """The part's Markdown: the sentences, then the tables they summarise; the figure into
    `fig` when given."""
    from .overhead import table as overhead_table

    table = observer.sweep(sweep_dir)
    if not len(table):
        return []
    parts = [f"## How much of the bubble is the profiler's ({sweep_dir.name})", OBSERVER_TEXT,
             *observer_text.sweep_notes(sweep_dir, table),
             *observer_text.observer_findings(sweep_dir, table)]
    batches = sorted(table["batch"].unique())
    anchor = 8 if 8 in batches else batches[0]
    if fig is not None:
        plot_bubbles(fig / "observer.png", table, anchor)
    parts += section("### The bubble, traced and untraced", observer.bubble_table(table),
                     "observer")
    cost = observer.sync_cost_table(table)
    if len(cost):
        parts += section("### What the sync costs a step, untraced (measured pairs; bench "
                         "median and [min, max] over the processes' combinations)", cost)
    parts += ["### What nsys adds to a step, by flag set (`python -m study.overhead table "
              "DIR`; `events on`: the untraced run with the twin's two CUDA events a step)",
              overhead_table(sweep_dir).strip()]
    return parts
