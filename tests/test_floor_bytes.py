"""The one floor model, on the analysis side: the shape of a run, its bytes by kernel class, and the
bytes the harness recorded in the committed run directories made again from their shapes."""

import json
from pathlib import Path

import pytest

from analysis.measures.floor_bytes import (
    class_bytes,
    gpt2_parameters,
    recorded_bytes_per_step,
    run_shape,
    run_step_bytes,
)

ROOT = Path(__file__).resolve().parents[1]
CONFIG = {"model": "gpt2", "dtype": "fp32", "batch": 32, "new_tokens": 100, "window": "30:50"}


def committed_runs_with_a_floor() -> list:
    found = []
    for path in sorted([*ROOT.glob("docs/**/run.json"), *ROOT.glob("tests/data/**/run.json")]):
        info = json.loads(path.read_text())
        if (info.get("floor") or {}).get("shape"):
            found.append((path.relative_to(ROOT).as_posix(), info))
    return found


def test_gpt2_small_has_the_parameters_its_captures_measured():
    # GPT2Config(): 50257 x 768 tokens + 1024 x 768 positions + 12 layers of (4 x 768 norm,
    # 768 x 2304 + 2304, 768 x 768 + 768, 768 x 3072 + 3072, 3072 x 768 + 768) + 2 x 768.
    assert gpt2_parameters(12, 768, 50257, 1024, 3072) == 124_439_808
    shape = run_shape({"config": CONFIG})
    assert shape["weight_bytes"] == 497_759_232  # x 4 bytes: run.json's shape records the same
    graphed = json.loads((ROOT / "docs/hardware-view-20261201/runs/20261201T082908Z-graphed-b1"
                          / "run.json").read_text())
    assert shape == graphed["floor"]["shape"]


def test_a_run_without_a_shape_or_a_known_preset_has_no_bytes():
    assert run_shape({"config": {**CONFIG, "model": "llama"}}) is None
    assert run_step_bytes({"config": {**CONFIG, "model": "llama"}}) is None
    assert run_step_bytes({"config": {k: v for k, v in CONFIG.items() if k != "window"}}) is None


def test_the_weights_go_to_the_gemms_and_the_kv_read_to_the_attention():
    slot = 2 * 12 * 32 * 768 * 4  # K and V, 12 layers, 32 rows, 768 wide, fp32
    static = run_step_bytes({"config": {**CONFIG, "variant": "static"}})
    assert class_bytes(static, "static") == {"gemm": 497_759_232, "attention": 100 * slot}
    # The graphed step pads its 100 slots to 112 and reads them with two batched GEMVs.
    graphed = run_step_bytes({"config": {**CONFIG, "variant": "graphed"}})
    assert class_bytes(graphed, "graphed") == {"gemm": 497_759_232, "gemv": 112 * slot}
    # The fused step reads the slots written so far: steps 31..50 read 31..50 slots, 40.5 a step.
    fused = run_step_bytes({"config": {**CONFIG, "variant": "fused"}})
    assert class_bytes(fused, "fused")["attention"] == 40.5 * slot
    # The whole step adds this token's K and V and the activations: 32 rows x 4 bytes x
    # (12 x (3 x 768 + 5 x 768 + 2 x 3072) + 768 + 50257).
    assert fused["kv_write"] == slot
    assert fused["activations"] == 32 * 4 * (12 * (2304 + 3840 + 6144) + 768 + 50257)
    assert fused["total"] == 497_759_232 + 40.5 * slot + slot + fused["activations"]


@pytest.mark.parametrize("path, info", committed_runs_with_a_floor(),
                         ids=[p for p, _ in committed_runs_with_a_floor()])
def test_the_committed_floor_records_are_this_model(path, info):
    # What the harness wrote at capture time, made again from the shape it recorded beside it.
    assert run_step_bytes(info)["total"] == pytest.approx(recorded_bytes_per_step(info), rel=1e-12)


def test_recorded_bytes_are_their_mean():
    by_step = [[31, 200e6], [32, 400e6]]
    assert recorded_bytes_per_step({"floor": {"bytes_by_step": by_step}}) == 300e6
    assert recorded_bytes_per_step({}) is None
