"""The per-kernel-class table of a capture in RESULTS.md (parts `captures` and the whole study's),
with the bytes of the one floor model (measures/floor_bytes.py)."""

import pandas as pd

from analysis.toolkit import (
    class_bytes,
    kernel_table,
    op_names,
    read_full_names,
    recorded_bytes_per_step,
    run_step_bytes,
    step_row,
)


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
