"""RESULTS.md and its plots from a study directory made by `scripts/study.sh`.

Every number comes from the directory's files: `bench-*.json` (untraced timings from
`python -m harness bench`) and `capture/<UTC>-<name>/` run directories (nsys captures with
run.json). Nothing here needs a GPU or torch, so a study run on a GPU machine can be turned into
its report anywhere:

    python -m analysis.study traces/study-20261130T221926Z -o docs/results [--notes FILE]
"""

import json
from pathlib import Path

import click
import pandas as pd

from analysis import observer
from analysis.cli import Command, GapscopeError, store_runs
from analysis.errors import TraceError
from analysis.kernels import kernel_table, op_names, step_row
from analysis.plots import plot_analysis, plot_bubbles
from analysis.readers.nsys import read_full_names
from analysis.study_benches import (
    LADDER,
    LADDER_BENCHES,
    batch_table,
    benches,
    finish_options_table,
    finish_table,
    ladder_table,
    model_text,
    numbered,
    processes_tables,
    scale_table,
)
from analysis.study_captures import capture_rows, md_table
from analysis.study_family import family_sections
from analysis.study_plots import plot_bars, plot_batch, plot_idle, plot_kernels, plot_scale
from analysis.sweep import run_dirs

# GPT-2 shapes by harness model name: layers, width, vocabulary (the analysis has no torch).
MODEL_SHAPES = {"gpt2": (12, 768, 50257), "tiny": (2, 64, 50257)}
DTYPE_BYTES = {"fp32": 4, "bf16": 2}
SLOT_ALIGN = 16  # harness/gpt2_step.py pads its cache's slots to this


def captures(study: Path) -> dict:
    """name -> run directory, the newest where a name was captured twice; in a directory of
    run directories that is no study.sh one (no capture/), every run under it by its path."""
    if not (study / "capture").is_dir():
        return {d.relative_to(study).as_posix(): d for d in run_dirs(study)}
    found = {}
    for d in sorted((study / "capture").glob("*Z-*")):
        if (d / "capture.sqlite").is_file():
            found[d.name.split("Z-", 1)[1]] = d
    return found


def section(title: str, table: pd.DataFrame, figure: str | None = None) -> list[str]:
    """A RESULTS.md section: its heading, its table, and its plot (figures/<figure>.png)."""
    image = [f"![{figure.replace('-', ' ')}](figures/{figure}.png)"] if figure else []
    return [title, md_table(table), *image]


def bytes_per_step(config: dict, model: dict | None = None) -> dict:
    """The least each class must move in one decode step: every linear weight once (GEMMs, the
    tied lm_head included) and the KV cache slots the variant's attention reads. HF's SDPA and
    the graphed step's two batched GEMVs (scores, then values) read every slot, masked too (the
    graphed step pads them to a multiple of 16); the fused step's attention kernel reads the
    slots written so far: on average over the window's steps S+1..E, (S+1+E)/2 of them.
    `model` is run.json's model record (harness/model.py): for another family than GPT-2 the
    GEMMs move every parameter but the rows of an untied input embedding (one row is read), and
    the cache holds kv_heads × head size per layer and slot (grouped-query attention)."""
    e = DTYPE_BYTES[config["dtype"]]
    if model is not None and model.get("architecture") != "gpt2":
        layers, width, vocab = model["layers"], model["hidden"], model["vocab"]
        kv_width = width // model["heads"] * model["kv_heads"]
        unread = 0 if model["tied_embeddings"] else vocab * width
        classes = {"gemm": (model["parameters"] - unread) * e}
    else:
        layers, width, vocab = MODEL_SHAPES[config["model"]]
        kv_width = width
        per_layer = width * 3 * width + width * width + 2 * width * 4 * width  # c_attn, c_proj, mlp
        per_layer += 3 * width + width + 4 * width + width  # their biases
        classes = {"gemm": (layers * per_layer + vocab * width) * e}
    slots, cls = config["new_tokens"], "attention"
    if config["variant"].startswith("graphed"):
        slots, cls = -(-slots // SLOT_ALIGN) * SLOT_ALIGN, "gemv"
    elif config["variant"] == "fused":
        start, stop = (int(x) for x in config["window"].split(":"))
        slots = (start + 1 + stop) / 2
    classes[cls] = 2 * layers * config["batch"] * slots * kv_width * e
    return classes


def kernels_for(a, run, strings: dict, copy_rate: float) -> pd.DataFrame:
    ops = a.ops[a.ops["step"] >= 0]  # the ops of the captured steps
    table = kernel_table(
        ops,
        op_names(ops, strings),
        len(a.steps),
        bytes_per_step(run.info["config"], run.info.get("model")),
        copy_rate,
        read_full_names(run.trace_path),
    )
    floor_bytes = (run.info.get("floor") or {}).get("bytes_by_step")
    if floor_bytes:
        mean_bytes = sum(b for _, b in floor_bytes) / len(floor_bytes)
        row = step_row(mean_bytes, a.summary["period_ns_median"], copy_rate)
        table = pd.concat([table, pd.DataFrame([row])], ignore_index=True)
    return pd.DataFrame(
        {
            "class": table["class"],
            "ops/step": table["ops_per_step"].map(lambda x: "–" if pd.isna(x) else f"{x:.0f}"),
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
    "Every variant at batch 1, 8 and 32, timed untraced (`harness bench`, each eager one in "
    "two processes) with its untraced twin (CUDA events around every step, read back after the "
    "run), then captured node-level and (for the graph-replayed ones) graph-level: "
    "`scripts/overhead.sh` in `observer/`. Bubble: median over steps 31–50 of the GPU idle "
    "time between one step's last op and the next step's first (METRICS.md); the twin's "
    "bubble includes the stop check's copy to the host, and its floor is about 1.3 µs (two "
    "events back to back). The profiler's share = (traced − untraced) / traced."
)


def observer_sections(sweep_dir: Path, fig: Path) -> list:
    table = observer.sweep(sweep_dir)
    if not len(table):
        return []
    parts = ["## How much of the bubble is the profiler's", OBSERVER_TEXT]
    batches = sorted(table["batch"].unique())
    anchor = 8 if 8 in batches else batches[0]
    plot_bubbles(fig / "observer.png", table, anchor)
    parts += section("### The bubble, traced and untraced", observer.bubble_table(table),
                     "observer")
    cost = observer.sync_cost_table(table)
    if len(cost):
        parts += section("### What the sync costs a step, untraced (measured pairs; bench "
                         "median and [min, max] over the processes' combinations)", cost)
    return parts


def part_start(name: str) -> str:
    return f"<!-- part: {name} -->"


PART_START, PART_END = part_start("observer"), "<!-- /part -->"


def part_body(part: str, study: Path, out: Path) -> list:
    if part == "family":
        (out / "figures").mkdir(parents=True, exist_ok=True)
        body = family_sections(study, out / "figures")
        if not body:
            raise GapscopeError(f"{study}: no bench-ladder-b<batch>.json (`scripts/study.sh "
                                "--parts family --model ARCH` makes them)")
        return body
    sweep_dir = study / "observer" if (study / "observer").is_dir() else study
    fig = out / "figures"
    fig.mkdir(parents=True, exist_ok=True)
    body = observer_sections(sweep_dir, fig)
    if not body:
        raise GapscopeError(f"{sweep_dir}: no b<batch>/<variant>/ runs of scripts/overhead.sh")
    return body


def write_part(study: Path, out: Path, part: str = "observer") -> Path:
    """One part alone, put into OUT/RESULTS.md between its markers (`<!-- part: NAME -->`;
    before the ladder's section the first time), the rest of the file left as it is."""
    body = part_body(part, study, out)
    path = out / "RESULTS.md"
    text = path.read_text() if path.is_file() else ""
    start = part_start(part)
    block = "\n\n".join([start, *body, PART_END])
    if start in text and PART_END in text.split(start, 1)[1]:
        head, rest = text.split(start, 1)
        text = head + block + rest.split(PART_END, 1)[1]
    elif "\n## 1. " in text:
        head, rest = text.split("\n## 1. ", 1)
        text = head + "\n" + block + "\n\n## 1. " + rest
    else:
        text = text + ("\n\n" if text else "") + block + "\n"
    path.write_text(text)
    return path


def write_results(study: Path, out: Path, notes: Path | None) -> tuple:
    """(RESULTS.md's path, the analyses of the captures by name)."""
    b = benches(study)
    found = captures(study)
    if "ladder" not in b and not found:
        raise GapscopeError(
            f"{study}: no bench-ladder.json and no run directory under it: is this a directory "
            "of scripts/study.sh, or of run directories?"
        )
    fig = out / "figures"
    fig.mkdir(parents=True, exist_ok=True)
    caps, analyses = capture_rows(found)
    if "ladder" not in b:
        return runs_results(study, out, notes, caps, analyses), analyses
    lad = pd.concat([b.get(k, pd.DataFrame()) for k in LADDER_BENCHES])
    lad = lad.loc[[v for v in LADDER if v in lad.index]]
    plot_bars(
        fig / "ladder.png",
        list(lad.index),
        list(lad["ms_per_step_median"]),
        list(lad["ms_per_step_p10"]),
        list(lad["ms_per_step_p90"]),
        "ms per step (median, p10–p90)",
        "The article's ladder, untraced (batch 32, 100 tokens, fp32)",
    )
    parts = [
        f"# Results: where the decode loop leaves the GPU idle\n\nStudy `{study.name}`: "
        f"{environment(analyses, b)}. {model_description(study)} with seeded random weights, "
        "fp32 with TF32 "
        'matmuls ("high"), empty prompts, greedy decoding. Untraced timings are medians of '
        f"{repeats(study)} runs after a warm-up "
        "(p10–p90 beside them); captures are nsys traces of steps 31–50. Regenerate with "
        f"`python -m analysis.study {study} -o DIR`."
    ]
    if notes is not None:
        parts.append(notes.read_text().strip())
    parts += section(
        "## 1. The article's ladder (batch 32, 100 new tokens)", ladder_table(b), "ladder"
    )
    if numbered(b, "scale"):
        plot_scale(fig / "scaling.png", b)
        parts += section("### Naive vs KV cache as the sequence grows", scale_table(b), "scaling")
    if numbered(b, "batch"):
        plot_batch(fig / "batch.png", b)
        parts += section("### The ping-pong by batch (both compiled)", batch_table(b), "batch")
    if len(caps):
        plot_idle(fig / "idle.png", analyses)
        parts += section("### What the captures show", caps, "idle")
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
    if "finish" in b:
        parts += section(
            "## 2. The ladder finished (stop schedule uniform 50–100, batch 32)", finish_table(b)
        )
        if "lt-off" in b or numbered(b, "branches"):
            parts += section(
                "### The fused step by micro-batches, and graphed off cuBLASLt (each its own "
                "process)",
                finish_options_table(b),
            )
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
                f"### Per-kernel time of `{name}` (copy rate {rate / 1e9:.0f} GB/s measured)",
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
             f"Regenerate with `python -m analysis.study {study} -o DIR`."]
    if notes is not None:
        parts.append(notes.read_text().strip())
    parts += section("## What the captures show", caps, "idle")
    path = out / "RESULTS.md"
    path.write_text("\n\n".join(p.strip() for p in parts) + "\n")
    return path


@click.command("study", cls=Command)
@click.argument("study", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    help="Directory for RESULTS.md and its PNGs.",
)
@click.option(
    "--notes",
    type=click.Path(path_type=Path),
    default=None,
    help="A Markdown file of commentary to put after the header, as it is.",
)
@click.option("--db", "db_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also add the captures to this results database.")
@click.option(
    "--part",
    type=click.Choice(["observer", "family"]),
    default=None,
    help="Rewrite only this part of OUT/RESULTS.md (between its markers): observer from "
    "STUDY/observer or STUDY itself when it is an overhead.sh directory; family from STUDY's "
    "bench-ladder-b<B>.json and capture/ (another model family at several batches).",
)
def main(study, out, notes, db_path, part):
    """Write RESULTS.md and its plots from STUDY, a directory made by scripts/study.sh, or any
    directory of run directories (every run under it, analysed in parallel).

    \b
    Example:
        gapscope study traces/study-20261130T221926Z -o docs --notes docs/results-notes.md
        gapscope study docs/observer-20261201 -o docs --part observer
        gapscope study docs/llama-20261201 -o docs --part family
    """
    if not study.is_dir():
        raise GapscopeError(
            f"{study}: not a directory; pass the study directory of scripts/study.sh"
        )
    try:
        if part:
            path, analyses = write_part(study, out, part), {}
        else:
            path, analyses = write_results(study, out, notes)
    except (TraceError, OSError, KeyError, json.JSONDecodeError) as e:
        raise GapscopeError(f"{study}: cannot make the results ({e})") from None
    click.echo(f"gapscope: wrote {path}", err=True)
    if db_path:
        store_runs(db_path, [(name, run, [a]) for name, (a, run, _) in analyses.items()])


if __name__ == "__main__":
    main()
