"""RESULTS.md and its plots from a study directory made by `scripts/study.sh`.

Every number comes from the directory's files: `bench-*.json` (untraced timings from
`python -m harness bench`) and `capture/<UTC>-<name>/` run directories (nsys captures with
run.json). Nothing here needs a GPU or torch, so a study run on a GPU machine can be turned into
its report anywhere:

    python -m study traces/study-20261130T221926Z -o docs/results [--notes FILE]
"""

import json
from pathlib import Path

import pandas as pd

from analysis.toolkit import plot_analysis, run_dirs, trace_in

from . import observer
from .benches import (
    benches,
    model_text,
    processes_tables,
)
from .captures import capture_rows
from .kernel_table import kernels_for
from .observer_part import observer_sections
from .parts import PART_END, PART_START, StudyError
from .plots import plot_idle, plot_kernels
from .section import section


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
    from .ladder import ladder_sections
    from .runs import capture_findings

    parts = [
        f"# Results: where the decode loop leaves the GPU idle\n\nStudy `{study.name}`"
        + (f": captures made with {environment(analyses, b)}, each beside its own untraced "
           "bench" if analyses else "")
        + f". Regenerate with `python -m study {study} -o DIR`."
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
             f"Regenerate with `python -m study {study} -o DIR`."]
    if notes is not None:
        parts.append(notes.read_text().strip())
    parts += section("## What the captures show", caps, "idle")
    path = out / "RESULTS.md"
    path.write_text("\n\n".join(p.strip() for p in parts) + "\n")
    return path
