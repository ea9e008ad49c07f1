"""docs/METRICS.md's generated blocks (blocks.py): the reference values of the two bundled H200
exports (tests/test_analysis_reference.py holds the same figures as the contract), and the
sizes the bandwidth floor counts whole, from the models' shapes."""

import json
from pathlib import Path

from .text import listing, pct, span

# Stored xz'd (tests/data/README.md); each row named by the export's stem.
REFERENCE = ("tests/data/h200-eager-static-bs16.sqlite.xz",
             "tests/data/h200-eager-pipelined-seed-bs16.sqlite.xz")
LLAMA_RUN = "docs/llama-20261201/capture/20261201T095945Z-static-b32/run.json"


def reference_block(root: Path) -> str:
    """The table every implementation of the page must give on the two exports, and what it
    says."""
    from analysis.toolkit import analyze, load_trace

    lines = ["| trace | steps | window_ns | busy_ns | bubble median | idle by cause (sync / host "
             "/ queued) | ledger (blocked / pre-launch / in launch) | gaps |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    found = []
    for path in REFERENCE:
        (a,) = analyze(load_trace(root / path))
        name = Path(path).name.removesuffix(".sqlite.xz")
        s = a.summary
        c, ledger = s["idle_ns_by_cause"], s["idle_ledger"]
        lines.append(f"| {name} | {s['steps']} | {s['window_ns']} | {s['busy_ns']} | "
                     f"{int(s['bubble_ns_median'])} | {c['sync']} / {c['host']} / {c['queued']} | "
                     f"{ledger['blocked']} / {ledger['pre_launch']} / {ledger['in_launch']} | "
                     f"{s['gaps']} |")
        ops = a.ops[a.ops["step"] >= 0]
        kernels = (ops["kind"] == "kernel").groupby(ops["step"]).sum().median()
        found.append((name, s, kernels))
    static = next(s for name, s, _ in found if "static" in name)
    text = (f"What these say (traced): on an H200 in eager mode the GPU is busy "
            f"{span([s['busy_share_of_window'] * 100 for _, s, _ in found], '.0f', '%')} of the "
            "window; the "
            "gaps are host-bound (Python launching "
            f"{span([k for _, _, k in found], '.0f')} small kernels a step), and the traced sync "
            f"idle is {pct(static['sync_idle_share_of_window'])} of the static one's window "
            "(`sync_idle_share_of_window` "
            f"{static['sync_idle_share_of_window']:.4f}). The bubble is "
            "where the "
            "two-stream trick matters only once launches are cheap (CUDA graphs): the harness "
            "has to show that difference, variant by variant.")
    return "\n".join(lines) + "\n\n" + text


def floor_sizes(root: Path) -> str:
    """The lookup-only tables the floor counts whole, against the weights, for the two models
    the committed runs use."""
    from analysis.toolkit import run_shape

    llama = json.loads((root / LLAMA_RUN).read_text())["floor"]["shape"]
    gpt2 = run_shape({"config": {"model": "gpt2", "dtype": "fp32"}})
    emb = llama["vocab"] * llama["hidden"] * llama["dtype_bytes"]
    pos = 1024 * gpt2["hidden"] * gpt2["dtype_bytes"]
    return ("The tables counted whole, from the models' shapes (floor_bytes): " + listing([
        f"llama:small's untied input embedding in fp32, {emb / 1e6:.1f} of its "
        f"{llama['weight_bytes'] / 1e6:.1f} MB of weights (`{LLAMA_RUN}`'s `floor.shape`)",
        f"GPT-2's position table in fp32, {pos / 1e6:.1f} of {gpt2['weight_bytes'] / 1e6:.1f} "
        "MB (GPT2Config(); its token embedding is also its head's weight, read whole)"]) + ".")
