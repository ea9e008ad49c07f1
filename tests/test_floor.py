"""The bandwidth floor's bytes, worked out by hand, for GPT-2 and a grouped-query config."""

from types import SimpleNamespace

import pytest

from harness.floor import cache_slots, floor, model_shape, step_bytes


def gqa_config():
    """A llama-like config: 4 layers, 8 heads of 16 dims sharing 2 KV heads, gated MLP 256."""
    return SimpleNamespace(hidden_size=128, num_attention_heads=8, num_key_value_heads=2,
                           head_dim=16, intermediate_size=256, num_hidden_layers=4,
                           vocab_size=1000)


def test_kv_heads_head_dim_and_widths_come_from_the_config():
    shape = model_shape(gqa_config(), dtype_bytes=2, weight_bytes=10_000)
    assert (shape["kv_heads"], shape["head_dim"], shape["intermediate"]) == (2, 16, 256)
    b = step_bytes(shape, "fused", batch=2, new_tokens=10, positions=[3])
    slot = 2 * 4 * 2 * 2 * 16 * 2  # K and V, layers, batch, KV heads, head dim, bf16
    assert (b["kv_read"], b["kv_write"]) == (4 * slot, slot)  # slots 0..3
    # per row: 4 x ((8 + 2 x 2) x 16 + 5 x 128 + 2 x 256) + 128 + 1000, 2 rows, 2 bytes
    assert b["activations"] == 2 * 2 * (4 * (192 + 640 + 512) + 1128)


def test_a_static_cache_reads_all_its_slots_and_graphed_pads_them():
    shape = model_shape(gqa_config(), dtype_bytes=2, weight_bytes=0)
    slot = 2 * 4 * 1 * 2 * 16 * 2
    assert step_bytes(shape, "static", 1, 20, [0, 19])["kv_read"] == 20 * slot
    assert cache_slots("graphed", 20) == 32
    assert step_bytes(shape, "graphed", 1, 20, [0])["kv_read"] == 32 * slot
    assert step_bytes(shape, "kv", 1, 20, [0, 1, 2])["kv_read"] == 2 * slot  # 1, 2, 3 slots


def test_floor_is_bytes_over_the_copy_rate():
    shape = model_shape(gqa_config(), dtype_bytes=2, weight_bytes=1_000_000)
    f = floor(shape, "fused", 1, 10, [0], copy_bytes_per_s=1e9, ms_per_step=4.0)
    # One row at pos 0: 1,000,000 of weights, one slot read and one written (512 bytes each:
    # K and V x 4 layers x 2 KV heads x 16 dims x 2 bytes), 2 x (4 x 1344 + 1128) of activations.
    assert f["bytes_per_step"]["total"] == 1_000_000 + 512 + 512 + 13_008
    # 1,014,032 bytes at 1 GB/s is 1.014032 ms, 25.3508% of a 4 ms step.
    assert f["floor_ms_per_step"] == pytest.approx(1.014032)
    assert f["floor_pct"] == pytest.approx(25.3508)
    assert f["kv_slots_read"] == "0..pos" and f["positions"] == [0, 0]


def test_gpt2_names_map_through_its_config():
    from transformers import GPT2Config

    shape = model_shape(GPT2Config(), dtype_bytes=4, weight_bytes=0)
    assert (shape["layers"], shape["kv_heads"], shape["head_dim"]) == (12, 12, 64)
    assert (shape["intermediate"], shape["vocab"]) == (3072, 50257)
