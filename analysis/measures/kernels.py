"""Where a step's GPU time goes, by kernel class, and what bandwidth each class achieves.

The trace gives each op's time; it does not give bytes. The bytes come from the harness, which
knows the model: `bytes_per_step` maps a class to the bytes it must move at the least in one
step (the linear weights for `gemm`, the KV cache for `attention`). Achieved bandwidth is those
bytes over the class' GPU time per step, compared with a measured device copy rate: a class far
below the copy rate is where the next factor would have to come from.
"""

import functools
import re

import numpy as np
import pandas as pd

from ..readers.trace import op_names as trace_op_names

# Checked in order; the first pattern that matches a kernel's name gives its class. Names are
# cuBLAS/cutlass/nvjet for GEMMs (cuBLAS' generic `Kernel2` too), fmha/flash for attention,
# cuBLAS's `gemvx` for matrix-vector products (a single query against the KV cache: batched
# GEMVs), Triton's `triton_<kind>_fused_<ops>` for torch.compile code, classed by what it fuses,
# and the fused step's own Triton kernels (harness/triton_ops.py) by their names.
KERNEL_CLASSES = (
    ("attention", re.compile(r"fmha|flash|attention|sdpa|softmax", re.I)),
    ("gemv", re.compile(r"gemv", re.I)),
    ("gemm", re.compile(r"gemm|^Kernel2$|nvjet|xmma|cutlass|splitK|mm_", re.I)),
    ("layernorm", re.compile(r"layer_?norm|_ln_kernel", re.I)),
    ("reduce/argmax", re.compile(r"reduce|argmax|max_|_red_", re.I)),
    ("index/copy", re.compile(r"index|gather|scatter|cat|copy", re.I)),
    ("elementwise", re.compile(r"elementwise|triton_poi|triton_per|fused|unrolled|gelu", re.I)),
)


# Inductor names a fused pointwise kernel after the ATen ops it took parts from: the bias add of
# an `addmm`, SDPA's mask, an in-place op's write-back (`copy_`). Those names say nothing of what
# the kernel computes (the matmuls and the attention stay extern kernels of their own).
_NOT_COMPUTED = re.compile(
    r"_(?:addmm|bmm|mm|_scaled_dot_product_\w*?attention)(?=_)|(?<=_)copy_(?=_)")


@functools.lru_cache(maxsize=4096)  # a capture repeats a few hundred names many thousand times
def classify(name: str) -> str:
    if re.match(r"triton_(?:poi|per|red)_", name):
        name = _NOT_COMPUTED.sub("", name)
    for cls, pattern in KERNEL_CLASSES:
        if pattern.search(name):
            return cls
    return "other"


def op_names(ops: pd.DataFrame, strings: dict) -> pd.Series:
    """The ops' names (analysis.readers.trace.op_names) as a Series aligned with `ops`."""
    if "name" in ops.columns:  # Analysis.ops carry their names
        return pd.Series(ops["name"].to_numpy(), index=ops.index)
    names = trace_op_names(ops["kind"].to_numpy(), ops["name_id"].to_numpy(), strings)
    return pd.Series(names, index=ops.index)


def name_table(ops: pd.DataFrame, names: pd.Series, steps: int) -> pd.DataFrame:
    """One row a name (a kernel's; copies, sets and graph replays by their kind): name, ops,
    time_ns (their summed GPU time), ops_per_step, time_ns_per_step (over `steps` steps) and
    share (of the ops' summed GPU time); the longest in all first."""
    frame = pd.DataFrame({"name": names.to_numpy(),
                          "dur_ns": ops["end_ns"].to_numpy() - ops["start_ns"].to_numpy()})
    table = frame.groupby("name")["dur_ns"].agg(ops="size", time_ns="sum")
    table["ops_per_step"] = table["ops"] / steps
    table["time_ns_per_step"] = table["time_ns"] / steps
    table["share"] = table["time_ns"] / table["time_ns"].sum()
    return table.sort_values(["time_ns", "ops"], ascending=False, kind="stable").reset_index()


def op_classes(ops: pd.DataFrame, names: pd.Series, full_names: pd.DataFrame | None = None):
    """Each op's class by its short name; where that says nothing (`kernel`), by its full
    (demangled) name from `full_names` (readers.nsys.read_full_names), matched on (start, corr)."""
    classes = names.map(lambda n: n if n.startswith("[") else classify(n))
    if full_names is None or not len(full_names):
        return classes
    full = ops[["start_ns", "corr"]].merge(
        full_names.drop_duplicates(["start", "corr"]).rename(columns={"start": "start_ns"}),
        on=["start_ns", "corr"], how="left")["full_name"]
    by_full = full.fillna("").map(classify).set_axis(ops.index)
    return classes.where(classes != "other", by_full)


def kernel_table(
    ops: pd.DataFrame,
    names: pd.Series,
    steps: int,
    bytes_per_step: dict | None = None,
    copy_bytes_per_s: float | None = None,
    full_names: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row a class: ops and GPU time per step, share of the busy time, and where bytes are
    known, achieved bandwidth against the copy rate. `ops`: those of `steps` steps."""
    classes = op_classes(ops, names, full_names)
    dur_ns = ops["end_ns"].to_numpy() - ops["start_ns"].to_numpy()
    frame = pd.DataFrame({"class": classes.to_numpy(), "dur_ns": dur_ns})
    table = frame.groupby("class")["dur_ns"].agg(ops="size", time_ns="sum")
    table["ops_per_step"] = table["ops"] / steps
    table["time_ns_per_step"] = table["time_ns"] / steps
    table["share"] = table["time_ns"] / table["time_ns"].sum()
    table = table.drop(columns=["ops", "time_ns"]).sort_values("time_ns_per_step", ascending=False)
    known = pd.Series(bytes_per_step or {}, dtype="float64")
    table["bytes_per_step"] = known.reindex(table.index)
    table["bytes_per_s"] = table["bytes_per_step"] / (table["time_ns_per_step"] * 1e-9)
    table["copy_rate_fraction"] = table["bytes_per_s"] / (copy_bytes_per_s or np.nan)
    return table.reset_index()


STEP_ROW = "whole step (floor)"


def step_row(bytes_per_step: float, period_ns: float, copy_bytes_per_s: float | None) -> dict:
    """The row under the classes: the step's floor bytes (harness/floor.py: weights, the KV it
    reads and writes, activations) over its median GPU period; its copy-rate fraction is the
    share of the bandwidth floor the step reaches."""
    rate = bytes_per_step / (period_ns * 1e-9)
    return {"class": STEP_ROW, "ops_per_step": np.nan, "time_ns_per_step": period_ns,
            "share": np.nan, "bytes_per_step": bytes_per_step, "bytes_per_s": rate,
            "copy_rate_fraction": rate / copy_bytes_per_s if copy_bytes_per_s else np.nan}
