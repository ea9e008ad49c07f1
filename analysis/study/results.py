"""RESULTS.md and its plots from a study directory made by `scripts/study.sh`.

Every number comes from the directory's files: `bench-*.json` (untraced timings from
`python -m harness bench`) and `capture/<UTC>-<name>/` run directories (nsys captures with
run.json). Nothing here needs a GPU or torch, so a study run on a GPU machine can be turned into
its report anywhere:

    gapscope study traces/study-20261130T221926Z -o docs/results [--notes FILE]
"""

import json
from pathlib import Path

import pandas as pd

from ..measures.floor_bytes import class_bytes, recorded_bytes_per_step, run_step_bytes
from ..measures.kernels import kernel_table, op_names, step_row
from ..readers.nsys import read_full_names
from ..readers.runs import trace_in
from ..render.markdown import frame_md_table
from ..render.plots import plot_analysis
from ..render.plots_runs import plot_bubbles
from ..study import observer, observer_text
from ..study.benches import (
    benches,
    model_text,
    processes_tables,
)
from ..study.captures import capture_rows

# One part at a time is parts.py's; its names import from here as before.
from ..study.parts import (  # noqa: F401
    PART_END,
    PART_HELP,
    PART_START,
    PARTS,
    StudyError,
    part_block,
    part_body,
    part_sections,
    part_start,
    put_part,
    write_part,
)
from ..study.plots import plot_idle, plot_kernels
from ..sweep import run_dirs


def captures(study: Path) -> dict:
    """name -> run directory, the newest where a name was captured twice; in a directory of
    run directories that is no study.sh one (no capture/), every run under it by its path."""
    if not (study / "capture").is_dir():
        return {d.relative_to(study).as_posix(): d for d in run_dirs(study)}
    found = {}
    for d in sorted((study / "capture").glob("*Z-*")):
        if trace_in(d) is not None:
            found[d.name.split("Z-", 1)[1]] = d
    return found


def section(title: str, table: pd.DataFrame, figure: str | None = None) -> list[str]:
    """A RESULTS.md section: its heading, its table, and its plot (figures/<figure>.png)."""
    image = [f"![{figure.replace('-', ' ')}](figures/{figure}.png)"] if figure else []
    return [title, frame_md_table(table), *image]


def kernels_for(a, run, strings: dict, copy_rate: float | None) -> pd.DataFrame:
    """The per-kernel-class table of a capture, bytes from the one floor model
    (measures/floor_bytes.py): the weights in the GEMMs' row, the KV read in the attention's,
    every part in the whole step's row under them. Without a shape for the run (another model,
    no run.json floor record), no class' bytes, and the step's only where run.json has them;
    without a copy rate (no bench of the same study), no "of copy rate" column."""
    ops = a.ops[a.ops["step"] >= 0]  # the ops of the captured steps
    parts = run_step_bytes(run.info)
    table = kernel_table(
        ops,
        op_names(ops, strings),
        len(a.steps),
        class_bytes(parts, run.info["config"]["variant"]) if parts else None,
        copy_rate,
        read_full_names(run.trace_path),
    )
    total = parts["total"] if parts else recorded_bytes_per_step(run.info)
    if total is not None:
        row = step_row(total, a.summary["period_ns_median"], copy_rate)
        table = pd.concat([table, pd.DataFrame([row])], ignore_index=True)
    out = pd.DataFrame(
        {
            "class": table["class"],
            "op records/step": table["ops_per_step"].map(
                lambda x: "–" if pd.isna(x) else f"{x:.0f}"),
            "µs/step": (table["time_ns_per_step"] / 1e3).map("{:.1f}".format),
            "share": (table["share"] * 100).map(lambda x: "–" if pd.isna(x) else f"{x:.1f}%"),
            "MB/step (least)": (table["bytes_per_step"] / 1e6).map(
                lambda x: "–" if pd.isna(x) else f"{x:.0f}"
            ),
            "achieved GB/s": (table["bytes_per_s"] / 1e9).map(
                lambda x: "–" if pd.isna(x) else f"{x:.0f}"
            ),
            "of copy rate": (table["copy_rate_fraction"] * 100).map(
                lambda x: "–" if pd.isna(x) else f"{x:.0f}%"
            ),
        }
    )
    return out if copy_rate else out.drop(columns="of copy rate")


def repeats(study: Path) -> int:
    return json.loads((study / "bench-ladder.json").read_text())["config"]["repeats"]


def model_description(study: Path) -> str:
    """The model the study ran, from its ladder bench's model record."""
    return model_text(json.loads((study / "bench-ladder.json").read_text()).get("model"))


def environment(analyses: dict, b: dict) -> str:
    for _, run, _ in analyses.values():
        v, n = run.info.get("versions", {}), run.info.get("nsys", {})
        return (
            f"{v.get('gpu')}, driver {v.get('driver')}, torch {v.get('torch')} (CUDA "
            f"{v.get('torch_cuda')}), transformers {v.get('transformers')}, nvtx "
            f"{v.get('nvtx')}, Python {v.get('python')}, Nsight Systems {n.get('version')}"
        )
    return "no captures"


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
    from ..study.overhead import table as overhead_table

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
    parts += ["### What nsys adds to a step, by flag set (`python -m analysis.study.overhead table "
              "DIR`; `events on`: the untraced run with the twin's two CUDA events a step)",
              overhead_table(sweep_dir).strip()]
    return parts


def write_results(study: Path, out: Path, notes: Path | None) -> tuple:
    """(RESULTS.md's path, the analyses of the captures by name)."""
    b = benches(study)
    found = captures(study)
    if "ladder" not in b and not found:
        raise StudyError(
            f"{study}: no bench-ladder.json and no run directory under it: is this a directory "
            "of scripts/study.sh, or of run directories?"
        )
    fig = out / "figures"
    fig.mkdir(parents=True, exist_ok=True)
    caps, analyses = capture_rows(found)
    if "ladder" not in b:
        return runs_results(study, out, notes, caps, analyses), analyses
    from ..study.ladder import ladder_sections
    from ..study.runs import capture_findings

    parts = [
        f"# Results: where the decode loop leaves the GPU idle\n\nStudy `{study.name}`"
        + (f": captures made with {environment(analyses, b)}, each beside its own untraced "
           "bench" if analyses else "")
        + f". Regenerate with `gapscope study {study} -o DIR`."
    ]
    if notes is not None:
        parts.append(notes.read_text().strip())
    parts += ladder_sections(study, fig)
    if len(caps):
        plot_idle(fig / "idle.png", analyses)
        parts += ["## What the captures show", *capture_findings(analyses)]
        parts += section("### The captures", caps, "idle")
        share = observer.capture_share_table(analyses)
        if len(share):
            parts += section("### How much of the bubble is the profiler's", share)
            cost = observer.capture_sync_cost_table(analyses)
            if len(cost):
                parts += section("### What the sync costs a step, untraced (measured pairs)",
                                 cost)
    for title, table in processes_tables(study):
        parts += section(title, table)
    if (study / "observer").is_dir():
        parts += [PART_START, *observer_sections(study / "observer", fig), PART_END]
    rate = (
        b["finish"]["copy_bytes_per_s"].iloc[0]
        if "finish" in b
        else b["ladder"]["copy_bytes_per_s"].iloc[0]
    )
    for name in ("fused", "graphed", "static"):
        if name in analyses:
            a, run, strings = analyses[name]
            table = kernels_for(a, run, strings, rate)
            plot_kernels(
                fig / f"kernels-{name}.png", table, f"{name}: GPU time per step by kernel class"
            )
            parts += section(
                f"### Per-kernel time of `{name}` (copy rate {rate / 1e9:.0f} GB/s measured by "
                f"the bench)",
                table,
                f"kernels-{name}",
            )
    for name in ("graphed-sync", "graphed", "fused", "fused+b2", "static"):
        if name in analyses:
            a, _, _ = analyses[name]
            plot_analysis(a, name, fig / f"timeline-{name}.png")
            parts.append(f"![timeline {name}](figures/timeline-{name}.png)")
    path = out / "RESULTS.md"
    path.write_text("\n\n".join(p.strip() for p in parts) + "\n")
    return path, analyses


def runs_results(study: Path, out: Path, notes: Path | None, caps: pd.DataFrame,
                 analyses: dict) -> Path:
    """RESULTS.md of a directory of run directories (no bench files): the captures' table and
    where each one's GPU time goes."""
    plot_idle(out / "figures" / "idle.png", analyses)
    parts = [f"# Results: {len(caps)} runs under `{study.name}`\n\n{environment(analyses, {})}. "
             f"Regenerate with `gapscope study {study} -o DIR`."]
    if notes is not None:
        parts.append(notes.read_text().strip())
    parts += section("## What the captures show", caps, "idle")
    path = out / "RESULTS.md"
    path.write_text("\n\n".join(p.strip() for p in parts) + "\n")
    return path
