"""Study part `hardware`: how hard the GPU worked per step (nsys's sampled GPU metrics, no
CUDA trace or a graph-level one), beside each run's untraced step and bandwidth floor, from a
`scripts/hardware-view.sh` directory (its runs/); the sentences from the same rows."""

from pathlib import Path

import pandas as pd

from analysis.toolkit import frame_md_table, hardware_table, run_dirs

from .captures import analysed, is_traced
from .text import BETWEEN_PROCESSES, beyond, bullet, listing, span

DTYPE_ORDER = {"fp32": 0, "bf16": 1}


def hardware_rows(root: Path) -> pd.DataFrame:
    """One row a run with GPU metrics: config, hardware.hardware_table's figures, and for a
    capture that also traced CUDA its traced GPU period (the analysis' median)."""
    runs_dir = root / "runs" if (root / "runs").is_dir() else root
    dirs = run_dirs(runs_dir)
    done = analysed(dirs, progress=len(dirs) > 1)
    runs = [run for run, _, _, _ in done]
    analyses = [a for _, _, (a, *_), _ in done]
    table = hardware_table([d.name for d in dirs], analyses, runs)
    if table.empty:
        return table
    keep = {d.name: (run, a) for d, run, a in zip(dirs, runs, analyses, strict=True)}
    config = [keep[label][0].info.get("config") or {} for label in table["label"]]
    table["variant"] = [c.get("variant") for c in config]
    table["batch"] = [c.get("batch") for c in config]
    table["dtype"] = [c.get("dtype") for c in config]
    table["cuda_trace"] = [keep[label][1].summary.get("cuda_graph_trace", "graph")
                           if is_traced(keep[label][1]) else "none" for label in table["label"]]
    steps = [keep[label][1].steps for label in table["label"]]
    table["gr_step_min"] = [st["gr_active_pct"].min() if "gr_active_pct" in st else None
                            for st in steps]
    table["gr_step_max"] = [st["gr_active_pct"].max() if "gr_active_pct" in st else None
                            for st in steps]
    table["traced_period_ms"] = [keep[label][1].summary["period_ns_median"] / 1e6
                                 if is_traced(keep[label][1]) else None
                                 for label in table["label"]]
    order = table.assign(d=table["dtype"].map(DTYPE_ORDER).fillna(9),
                         v=(table["variant"] != "fused").astype(int))
    return table.loc[order.sort_values(["d", "v", "batch"]).index].reset_index(drop=True)


def beyond_ratios(ratios: list, floor) -> str:
    """Ratios of two processes as `1.23–1.27x`, or within noise where all are inside the floor
    (those inside said apart)."""
    out = [r for r in ratios if beyond(r, floor)]
    if not out:
        return "within noise"
    inside = len(ratios) - len(out)
    return span(out, ".2f", "x") + (f" ({inside} more within noise)" if inside else "")


def _f(x, spec: str) -> str:
    return "–" if x is None or pd.isna(x) else format(x, spec)


def hardware_md(table: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "variant": table["variant"], "batch": table["batch"], "dtype": table["dtype"],
        "CUDA trace": table["cuda_trace"],
        "ms/step untraced": table["untraced_ms_per_step"].map(lambda x: _f(x, ".3f")),
        "ms/step (metrics capture)": table["traced_ms_per_step"].map(lambda x: _f(x, ".3f")),
        "GPU period ms (CUDA-traced)": table["traced_period_ms"].map(lambda x: _f(x, ".3f")),
        "floor ms": table["floor_ms_per_step"].map(lambda x: _f(x, ".3f")),
        "% of floor": table["floor_pct"].map(lambda x: _f(x, ".1f") + "%"),
        "SMs active": table["sm_active_pct"].map(lambda x: _f(x, ".1f") + "%"),
        "DRAM read %": table["dram_read_pct"].map(lambda x: _f(x, ".1f") + "%"),
        "DRAM read GB/s": table["dram_read_gbps"].map(lambda x: _f(x, ".0f")),
        "GR active": table["gr_active_pct"].map(lambda x: _f(x, ".1f") + "%"),
    })


def hardware_findings(t: pd.DataFrame) -> list:
    from .aa import floors

    floor = floors().get("graph-replayed")
    out = []
    fused = t[t["variant"] == "fused"]
    floors = [f"{span(rows['floor_pct'], '.1f', '%')} in {dtype} (batch "
              f"{listing([str(b) for b in rows['batch']])})"
              for dtype, rows in fused.groupby("dtype", sort=False)]
    if floors:
        out.append(bullet(
            "The best step reads HBM at a fraction of its bandwidth.",
            f"`fused` reaches {listing(floors)} of its bandwidth floor; over every run here "
            f"the front end (GR) is active {span(t['gr_active_pct'], '.1f', '%')} of the "
            f"captured steps while the SMs are active {span(t['sm_active_pct'], '.1f', '%')} "
            "of them (each run's mean, time-weighted over its steps; a single step's GR active "
            f"{span(list(t['gr_step_min'].dropna()) + list(t['gr_step_max'].dropna()), '.1f', '%')}"
            "): a string of kernels each too small to fill the GPU, one after the other."))
    pairs = []
    for batch in sorted(fused["batch"].unique()):
        rows = fused[fused["batch"] == batch].set_index("dtype")
        if {"fp32", "bf16"} <= set(rows.index):
            pairs.append((batch, rows.loc["fp32"], rows.loc["bf16"]))
    if pairs:
        b, fp, bf = pairs[0]
        ratios = [p["untraced_ms_per_step"] / q["untraced_ms_per_step"] for _, p, q in pairs]
        out.append(bullet(
            "bf16 halves the bytes, not the time.",
            f"`fused` in bf16 ran {beyond_ratios(ratios, floor)} faster than in fp32 untraced "
            f"(batch {listing([str(x) for x, _, _ in pairs])}, each its own process, "
            f"{BETWEEN_PROCESSES}; batch {b}: "
            f"{bf['untraced_ms_per_step']:.3f} against {fp['untraced_ms_per_step']:.3f} ms/step) "
            f"for half the weights' bytes (floor {bf['floor_ms_per_step']:.3f} against "
            f"{fp['floor_ms_per_step']:.3f} ms at batch {b}), so its share of its floor falls: "
            "the step is bound by its kernels' latency more than by bytes."))
    rel = (t["traced_ms_per_step"] / t["untraced_ms_per_step"] - 1).dropna()
    if len(rel):
        below = (rel < 0).all()
        text = (f"Its host-timed window under `--metrics` was {span(-100 * rel, '.1f', '%')} "
                f"{'below' if below else 'off'} the untraced twin's period (other processes"
                + (", each beyond the graph-replayed A/A floor" if all(
                    beyond(1 + r, floor) for r in rel) else "; not all beyond the "
                    "graph-replayed A/A floor") + ") in "
                f"{'every' if below else 'each'} row ({len(rel)} runs)")
        traced = t[t["traced_period_ms"].notna()]
        if len(traced):
            gpu = 1 - traced["traced_period_ms"] / traced["untraced_ms_per_step"]
            text += (f", and in the {len(traced)} runs that also traced CUDA graph by graph the "
                     f"traced GPU period itself was {span(100 * gpu, '.1f', '%')} below the "
                     "twin's")
        out.append(bullet(
            "The metrics capture ran faster than untraced.",
            text + ". Not explained (GPU clocks held up while nsys samples is a guess; "
            "docs/PROFILING.md has the check): an observer effect in the other direction, and "
            "one more reason to quote the untraced figures."))
    return out


HARDWARE_TEXT = (
    "`scripts/hardware-view.sh` runs `profile.sh VARIANT --metrics=HZ` for each row: NVTX "
    "ranges plus nsys's sampled GPU metrics, its untraced bench and twin beside it. `CUDA "
    "trace`: `none` for the runs captured by the harness' NVTX range; `graph` for those made "
    "earlier by the cudaProfilerApi range, under which nsys also traced CUDA graph by graph. "
    "Untraced: the twin's median GPU period over the captured steps; ms/step (metrics "
    "capture): run.json's host-timed window; floor: those steps' bytes (weights, the KV slots "
    "read, activations) over the measured copy rate; % of floor: median over the steps of "
    "floor ÷ untraced period; SMs active, DRAM read and GR active time-weighted over the steps' "
    "NVTX ranges (METRICS.md). The same table in `gapscope compare DIR/runs` (its hardware "
    "table); the figure is its `--hardware-plot`.")


def made_line(root: Path) -> str:
    """The runs' settings, from their run.json and nsys command."""
    import json
    import re

    runs_dir = root / "runs" if (root / "runs").is_dir() else root
    infos = [json.loads((d / "run.json").read_text()) for d in run_dirs(runs_dir)
             if (d / "run.json").is_file()]
    if not infos:
        return ""
    hz = {m.group(1) for i in infos for m in [re.search(
        r"--gpu-metrics-frequency[= ](\d+)", (i.get("nsys") or {}).get("command") or "")] if m}
    windows = {(i.get("config") or {}).get("window") for i in infos}
    tokens = {(i.get("config") or {}).get("new_tokens") for i in infos}
    v = infos[0].get("versions") or {}
    steps = ", ".join(f"{int(w.split(':')[0]) + 1}–{w.split(':')[1]}" for w in sorted(windows))
    return (f"Made with {v.get('gpu')}, torch {v.get('torch')}: "
            f"{', '.join(map(str, sorted(tokens)))} new tokens, steps {steps} captured, GPU "
            f"metrics sampled at {', '.join(sorted(hz)) or '–'} Hz (run.json of each run).")


def hardware_sections(root: Path, fig: Path | None) -> list:
    from analysis.toolkit import plot_hardware

    t = hardware_rows(root)
    if t.empty:
        return []
    if fig is not None:
        plot_hardware(t, fig / "hardware-view.png")
    return [f"## The hardware view ({root.name})", HARDWARE_TEXT, made_line(root),
            *hardware_findings(t),
            frame_md_table(hardware_md(t)), "![hardware view](figures/hardware-view.png)"]
