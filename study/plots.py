"""A study's figures (RESULTS.md): the ladder's bars, the scaling and batch sweeps, idle by
cause per capture, per-kernel time. Each on an Agg canvas of its own (plots.new_figure): no
display needed, no backend chosen at import."""

from pathlib import Path

import pandas as pd

from analysis.toolkit import STEP_ROW, new_figure

from .benches import numbered


def plot_bars(path: Path, labels: list, values: list, lo: list, hi: list, xlabel: str, title: str):
    fig = new_figure(figsize=(8, 0.45 * len(labels) + 1.2))
    ax = fig.subplots()
    err = [
        [v - a for v, a in zip(values, lo, strict=True)],
        [b - v for v, b in zip(values, hi, strict=True)],
    ]
    ax.barh(labels, values, xerr=err, color="#1f77b4", capsize=3)
    for y, (v, top) in enumerate(zip(values, hi, strict=True)):
        ax.text(top, y, f"  {v:.2f}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_scale(path: Path, b: dict):
    fig = new_figure(figsize=(6, 4))
    ax = fig.subplots()
    scale = numbered(b, "scale")
    for v, color in (("naive", "#d62728"), ("kv", "#2ca02c")):
        ax.plot(
            list(scale),
            [df.loc[v, "ms_per_run_median"] for df in scale.values()],
            "o-",
            color=color,
            label=v,
        )
    ax.set_xlabel("new tokens")
    ax.set_ylabel("ms per run (median)")
    ax.set_title("naive is quadratic, the KV cache linear (batch 32, fp32)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_batch(path: Path, b: dict):
    batch = numbered(b, "batch")
    xs = list(batch)
    fig = new_figure(figsize=(7, 4))
    ax = fig.subplots()
    for v, color in (("compiled", "#1f77b4"), ("pipelined+compile", "#ff7f0e")):
        med = [df.loc[v, "ms_per_step_median"] for df in batch.values()]
        lo = [m - df.loc[v, "ms_per_step_p10"] for m, df in zip(med, batch.values(), strict=True)]
        hi = [df.loc[v, "ms_per_step_p90"] - m for m, df in zip(med, batch.values(), strict=True)]
        ax.errorbar(xs, med, yerr=[lo, hi], fmt="o-", color=color, capsize=3, label=v)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch")
    ax.set_ylabel("ms per step (median, p10–p90)")
    ax.set_title("compiled vs the two-stream ping-pong, by batch")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_idle(path: Path, analyses: dict):
    names = list(analyses)
    parts = {"busy": [], "sync": [], "host": [], "queued": []}
    for name in names:
        s = analyses[name][0].summary
        parts["busy"].append(s["busy_ns"] / s["steps"] / 1e6)
        for c in ("sync", "host", "queued"):
            parts[c].append(s["idle_ns_by_cause"][c] / s["steps"] / 1e6)
    colors = {"busy": "#2ca02c", "sync": "#d62728", "host": "#ff7f0e", "queued": "#9467bd"}
    fig = new_figure(figsize=(8, 0.45 * len(names) + 1.5))
    ax = fig.subplots()
    left = [0.0] * len(names)
    for part, values in parts.items():
        ax.barh(
            names,
            values,
            left=left,
            color=colors[part],
            label=part if part == "busy" else f"idle: {part}",
        )
        left = [a + v for a, v in zip(left, values, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("ms per step in the capture (window / steps)")
    ax.set_title("Where each step's GPU time goes: busy, and idle by cause")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_kernels(path: Path, table: pd.DataFrame, title: str):
    """The classes' GPU time a step; the whole step's row (its period, the floor's bytes) is no
    class and would dwarf them: left out."""
    table = table[table["class"] != STEP_ROW]
    fig = new_figure(figsize=(7, 0.4 * len(table) + 1.2))
    ax = fig.subplots()
    ax.barh(table["class"], table["µs/step"].astype(float), color="#1f77b4")
    ax.invert_yaxis()
    ax.set_xlabel("µs per step on the GPU")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_family(path: Path, by_batch: dict, title: str, order=None):
    """The family part's ladder: ms/step per variant in `order` (default: the GPT-2 ladder's),
    one bar per batch (p10-p90 whiskers)."""
    from .benches import LADDER

    names = [v for v in order or LADDER if any(v in b.index for b in by_batch.values())]
    fig = new_figure(figsize=(8, 0.5 * len(names) * len(by_batch) / 2 + 1.6))
    ax = fig.subplots()
    height = 0.8 / max(len(by_batch), 1)
    for k, (batch, b) in enumerate(by_batch.items()):
        rows = [b.loc[v] if v in b.index else None for v in names]
        y = [i + (k - (len(by_batch) - 1) / 2) * height for i in range(len(names))]
        mid = [r["ms_per_step_median"] if r is not None else 0 for r in rows]
        pairs = list(zip(mid, rows, strict=True))
        err = [[m - r["ms_per_step_p10"] if r is not None else 0 for m, r in pairs],
               [r["ms_per_step_p90"] - m if r is not None else 0 for m, r in pairs]]
        ax.barh(y, mid, height=height, xerr=err, capsize=2, label=f"batch {batch}")
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel("ms per step, untraced (median, p10-p90)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_sizes(path: Path, table: pd.DataFrame, title: str):
    """The sizes part's ladder: per rung (rows, in the table's order) one bar a configuration,
    the share of its bandwidth floor (`<configuration> % floor` columns; `–` where not run)."""
    keys = [c.removesuffix(" % floor") for c in table.columns if c.endswith(" % floor")]
    rungs = list(table["rung"])
    fig = new_figure(figsize=(8, 0.42 * len(rungs) * max(1, len(keys) / 2) + 1.4))
    ax = fig.subplots()
    height = 0.8 / max(1, len(keys))
    colours = ("#9ecae1", "#4292c6", "#08519c", "#08306b")
    for k, key in enumerate(keys):
        shares = [float(x) if x != "–" else 0.0 for x in table[f"{key} % floor"]]
        ys = [i + (k - (len(keys) - 1) / 2) * height for i in range(len(rungs))]
        ax.barh(ys, shares, height=height, color=colours[k % len(colours)], label=key)
        for y, share, ms in zip(ys, shares, table[f"{key} ms/token"], strict=True):
            if ms != "–":
                ax.text(share, y, f" {ms} ms", va="center", fontsize=6)
    ax.set_yticks(range(len(rungs)), rungs)
    ax.invert_yaxis()
    ax.set_xlim(0, 110)
    ax.set_xlabel("% of the bandwidth floor (untraced; label: ms a token)")
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
