"""analysis/measures/kernels.py: the class of each kernel name found in the study's captures, and
the per-class table on a hand-made frame and on the graphed capture."""

from pathlib import Path

import pandas as pd
import pytest

from analysis.measures.kernels import classify, kernel_table, op_names
from analysis.measures.summary import analyze
from analysis.readers import load_trace
from analysis.readers.nsys import read_full_names
from analysis.readers.trace import KERNEL, MEMCPY

GRAPHED = Path(__file__).parent / "data" / "runs" / "graphed" / "capture.sqlite.xz"

# Inductor names a fused kernel after the ATen ops it took pointwise parts from: the bias add of
# an `addmm`, the mask built for SDPA, an in-place op's write-back (`copy_`). The matmuls and the
# attention stay extern kernels (compiled runs 49 `Kernel2` a step: 4 a layer and lm_head).

# Every kernel name (shortName) in tests/data/runs/*/capture.sqlite.
REAL_NAMES = [
    ("Kernel2", "gemm"),
    ("splitKreduce_kernel", "gemm"),
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm80", "attention"),
    ("softmax_warp_forward", "attention"),  # graphed: softmax over one query's scores
    ("kernel", "other"),  # cuBLAS's batched GEMV: classed by its full name (below)
    ("vectorized_layer_norm_kernel", "layernorm"),
    ("reduce_kernel", "reduce/argmax"),
    ("index_elementwise_kernel", "index/copy"),
    ("indexSelectSmallIndex", "index/copy"),
    ("vectorized_gather_kernel", "index/copy"),
    ("elementwise_kernel_with_index", "index/copy"),  # arange
    ("elementwise_kernel", "elementwise"),
    ("vectorized_elementwise_kernel", "elementwise"),
    ("triton_red_fused_add_embedding_native_layer_norm_view_0", "layernorm"),
    ("triton_poi_fused_add_arange_index_copy_split_transpose_view_1", "index/copy"),
    ("triton_poi_fused_add_arange_index_copy_split_transpose_view_2", "index/copy"),
    pytest.param("triton_per_fused_add_addmm_embedding_native_layer_norm_view_4", "layernorm"),
    pytest.param("triton_per_fused_add_addmm_native_layer_norm_view_6", "layernorm"),
    pytest.param("triton_per_fused_add_addmm_native_layer_norm_view_7", "layernorm"),
    pytest.param("triton_per_fused_add_addmm_native_layer_norm_view_8", "layernorm"),
    pytest.param("triton_poi_fused_add_addmm_mul_pow_tanh_view_5", "elementwise"),
    pytest.param("triton_poi_fused__scaled_dot_product_efficient_attention_constant_pad_nd_expand"
                 "_le_scalar_tensor_slice_split_transpose_view_where_3", "elementwise",
                 id="triton_poi_fused__scaled_dot_product_..._where_3"),
    pytest.param("triton_poi_fused_add_copy__9", "elementwise"),
    ("_attention_kernel", "attention"),  # the fused step's own (harness/triton_ops.py)
    ("_bias_ln_kernel", "layernorm"),
    ("_bias_gelu_kernel", "elementwise"),
]


@pytest.mark.parametrize(("name", "expected"), REAL_NAMES)
def test_classify_real_kernel_names(name, expected):
    assert classify(name) == expected


def test_classify_unknown_name_is_other():
    assert classify("my_custom_kernel") == "other"


def tiny_ops() -> tuple:
    """Two steps: a GEMM each (30 and 50 ns), one attention (20), two elementwise (5 and 9),
    one copy (12): 126 ns of op time."""
    ops = pd.DataFrame({
        "start_ns": [0, 100, 40, 60, 160, 70],
        "end_ns": [30, 150, 60, 65, 169, 82],
        "kind": [KERNEL, KERNEL, KERNEL, KERNEL, KERNEL, MEMCPY],
        "name_id": [1, 1, 2, 3, 3, -1],
    })
    strings = {1: "Kernel2", 2: "fmha_cutlassF_f32_aligned_64x64_rf_sm80",
               3: "vectorized_elementwise_kernel"}
    return ops, strings


def test_op_names_reads_kernels_by_id_and_copies_by_kind():
    ops, strings = tiny_ops()
    assert list(op_names(ops, strings)) == [
        "Kernel2", "Kernel2", "fmha_cutlassF_f32_aligned_64x64_rf_sm80",
        "vectorized_elementwise_kernel", "vectorized_elementwise_kernel", "[memcpy]"]


def test_kernel_table_on_a_hand_made_frame():
    ops, strings = tiny_ops()
    table = kernel_table(ops, op_names(ops, strings), steps=2,
                         bytes_per_step={"gemm": 400, "attention": 100}, copy_bytes_per_s=2e10)
    assert list(table["class"]) == ["gemm", "attention", "elementwise", "[memcpy]"]
    assert list(table["ops_per_step"]) == [1.0, 0.5, 1.0, 0.5]
    assert list(table["time_ns_per_step"]) == [40.0, 10.0, 7.0, 6.0]
    assert table["share"].tolist() == pytest.approx([80 / 126, 20 / 126, 14 / 126, 12 / 126])
    # 400 B in 40 ns and 100 B in 10 ns: 10 GB/s each, half the copy rate; no bytes, no rate.
    assert table["bytes_per_s"].tolist()[:2] == pytest.approx([1e10, 1e10])
    assert table["copy_rate_fraction"].tolist()[:2] == pytest.approx([0.5, 0.5])
    assert table[["bytes_per_step", "bytes_per_s", "copy_rate_fraction"]].iloc[2:].isna().all(
        axis=None)


def test_kernel_table_on_the_graphed_capture_sums_to_the_op_records():
    trace = load_trace(GRAPHED)
    (a,) = analyze(trace)
    ops = a.ops[a.ops["step"] >= 0]
    table = kernel_table(ops, op_names(ops, trace.strings), len(a.steps),
                         full_names=read_full_names(GRAPHED)).set_index("class")
    # The 24 `kernel`s a step are `internal::gemvx::kernel<...>` by their full names (two a layer).
    assert table["ops_per_step"].to_dict() == {
        "gemm": 49.0, "gemv": 24.0, "attention": 12.0, "layernorm": 25.0, "elementwise": 94.0,
        "index/copy": 28.0, "reduce/argmax": 2.0, "[memset]": 36.0, "[memcpy]": 14.0}
    assert table["ops_per_step"].sum() == 284 == a.steps["op_records"].iloc[0]
    assert (a.steps["op_records"] == 284).all()
    # sqlite: SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE shortName = the id of
    # Kernel2 (gemm), of kernel (gemv)
    assert table.loc["gemm", "time_ns_per_step"] == 12239578 / 20
    assert table.loc["gemv", "time_ns_per_step"] == 3186142 / 20
    assert table["share"].sum() == pytest.approx(1.0)
    assert table.index[0] == "gemm"  # the most time a step


def test_the_whole_step_row_is_the_floor_bytes_over_the_period():
    from analysis.measures.kernels import STEP_ROW, step_row

    row = step_row(bytes_per_step=600e6, period_ns=1e6, copy_bytes_per_s=3e12)
    assert row["class"] == STEP_ROW and row["time_ns_per_step"] == 1e6
    assert row["bytes_per_s"] == 600e9 and row["copy_rate_fraction"] == 0.2
