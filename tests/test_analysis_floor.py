"""The bandwidth floor in the analysis: run.json's bytes per step over the measured copy rate,
against each step's GPU period and the untraced step time."""

import json

from click.testing import CliRunner
from synth import causes_trace

from analysis.cli import main


def run_dir(tmp_path, floor: bool = True):
    """causes_trace (Step 1's period 40 ns, Step 2's 90 ns) as a run directory; its floors are
    20 and 45 bytes at 1 GB/s: 20 and 45 ns, half of each period, and 32.5 of 100 ns untraced."""
    d = tmp_path / "run"
    d.mkdir()
    causes_trace().write(d / "capture.sqlite")
    info = {"config": {"variant": "fused"}, "versions": {"gpu": "NVIDIA H200"},
            "untraced": {"ms_per_step_median": 1e-4, "floor": {"copy_bytes_per_s": 1e9}}}
    if floor:
        info["floor"] = {"kv_slots_read": "0..pos", "bytes_by_step": [[1, 20], [2, 45]]}
    (d / "run.json").write_text(json.dumps(info))
    return d


def test_floor_per_step_and_the_share_reached(tmp_path):
    d = str(run_dir(tmp_path))
    out = json.loads(CliRunner().invoke(main, ["analyze", d, "--format", "json"]).output)
    f = out["summary"]["floor"]
    assert f["floor_ns_per_step"] == 32.5 and f["bytes_per_step"] == 32.5
    assert f["floor_pct_of_period"] == 50 and f["floor_pct_of_untraced"] == 32.5
    assert f["copy_gbps"] == 1 and f["kv_slots_read"] == "0..pos"
    assert f["dram_read_gbps"] is None  # no GPU metrics in this capture
    text = CliRunner().invoke(main, ["analyze", d]).output
    assert "floor          0.00 ms/step: 0 MB at the 1 GB/s copy rate (KV 0..pos); 50.0% of " \
           "the GPU period, 32.5% of the untraced step" in text
    md = CliRunner().invoke(main, ["analyze", d, "--format", "md"])
    assert "| % of floor (GPU period) | 50.0% |" in md.output


def test_no_floor_without_the_harness_bytes(tmp_path):
    out = json.loads(CliRunner().invoke(main, ["analyze", str(run_dir(tmp_path, floor=False)),
                                               "--format", "json"]).output)
    assert out["summary"]["floor"] is None
