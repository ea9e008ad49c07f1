"""The bandwidth floor in the analysis: run.json's bytes per step over the measured copy rate,
against each step's GPU period and the untraced step time."""

import json

import golden
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
    assert "floor          0.00 ms/step: 0 MB at the 1 GB/s copy rate (KV 0..pos)\n" \
           "                 the floor is 50.0% of the GPU period, 32.5% of the untraced step\n" \
           in text
    assert f["floor_pct_of_untraced_period"] is None  # no untraced twin in this run
    md = CliRunner().invoke(main, ["analyze", d, "--format", "md"])
    assert golden.row(md.output, "% of floor (GPU period)") == [50.0]


def test_no_floor_without_the_harness_bytes(tmp_path):
    out = json.loads(CliRunner().invoke(main, ["analyze", str(run_dir(tmp_path, floor=False)),
                                               "--format", "json"]).output)
    assert out["summary"]["floor"] is None


def test_floor_against_the_untraced_twin_period(tmp_path):
    """The twin times steps 1..3: ends at 100, 180, 270 ns, so Step 2's untraced period is 80
    and Step 3's is 90 (Step 1 has no earlier step: no period). The traced capture has Steps 1
    and 2: floors 20 and 45 ns; only Step 2 has both: 45 / 80 = 56.25%."""
    d = run_dir(tmp_path)
    twin = {"format": "gapscope-untraced-steps/1", "source": "cuda-events", "variant": "fused",
            "window": None, "ms_per_step_median": 1e-4,
            "runs": [{"step": [1, 2, 3], "start_ns": [0, 150, 200], "end_ns": [100, 180, 270]}]}
    (d / "untraced_steps.json").write_text(json.dumps(twin))
    out = json.loads(CliRunner().invoke(main, ["analyze", str(d), "--format", "json"]).output)
    f = out["summary"]["floor"]
    assert f["floor_pct_of_untraced_period"] == 56.25
    assert f["floor_pct_of_period"] == 50 and f["floor_pct_of_untraced"] == 32.5
    text = CliRunner().invoke(main, ["analyze", str(d)]).output
    # Wrapped at 100 columns: the words, whatever the line breaks.
    assert "the floor is 50.0% of the GPU period, 56.2% of the untraced GPU period, 32.5% of " \
           "the untraced step" in " ".join(text.split())


def test_a_metrics_only_capture_gets_its_twin_and_the_floor_against_it(tmp_path):
    """metrics_only_trace (Steps 1, 2 as NVTX ranges, no CUDA trace) in a run directory with
    a twin whose Step 2 has an untraced period of 80 ns (ends 100, 180) and floors of 20 and
    40 bytes at 1 GB/s: Step 2's floor 40 / 80 = 50%; no traced period, so no profiler share."""
    from synth import metrics_only_trace
    d = tmp_path / "run"
    d.mkdir()
    metrics_only_trace().write(d / "capture.sqlite", drop=("CUPTI_ACTIVITY_KIND_RUNTIME",))
    (d / "run.json").write_text(json.dumps({
        "config": {"variant": "fused"}, "versions": {"gpu": "NVIDIA H200"},
        "floor": {"kv_slots_read": "0..pos", "bytes_by_step": [[1, 20], [2, 40]]},
        "untraced": {"ms_per_step_median": 1e-4, "floor": {"copy_bytes_per_s": 1e9}}}))
    (d / "untraced_steps.json").write_text(json.dumps({
        "format": "gapscope-untraced-steps/1", "source": "cuda-events", "variant": "fused",
        "window": None, "ms_per_step_median": 1e-4,
        "runs": [{"step": [1, 2], "start_ns": [0, 120], "end_ns": [100, 180]}]}))
    out = json.loads(CliRunner().invoke(main, ["analyze", str(d), "--format", "json"]).output)
    s = out["summary"]
    assert s["untraced"]["period_ns_median"] == 80 and s["untraced"]["bubble_ns_median"] == 20
    assert s["untraced"]["profiler_bubble_share"] is None
    assert s["floor"]["floor_pct_of_untraced_period"] == 50
    assert s["floor"]["floor_pct_of_period"] is None and s["floor"]["floor_pct_of_untraced"] == 30
    text = CliRunner().invoke(main, ["analyze", str(d)]).output
    assert "  untraced       0.00 ms GPU period, 0.0 µs bubble median (CUDA events, no " \
           "profiler)\n" in text
    assert "the floor is 50.0% of the untraced GPU period, 30.0% of the untraced step" in text


def test_a_step_of_one_persistent_kernel(tmp_path):
    """mega's step as a node-level capture shows it: three steps, one cudaGraphLaunch and one
    kernel each (10-95, 110-195, 210-295 ns). No idle inside a step (one kernel); the idle left
    is the host's, between steps (15 ns: 7 before the launch call, 8 in it); the floor, 50 bytes
    a step at 1 GB/s, is 50 ns: of the periods 85, 100 and 100 ns the median share is 50%."""
    from synth import GRAPH_LAUNCH, Synth

    t = Synth()
    for i in range(3):
        s = 100 * i
        t.range(f"Step {i + 1}", s, s + 100)
        t.op(t.call(GRAPH_LAUNCH, s + 2, s + 6), s + 10, s + 95, name="_mega_kernel")
    d = tmp_path / "run"
    d.mkdir()
    t.write(d / "capture.sqlite")
    (d / "run.json").write_text(json.dumps({
        "config": {"variant": "mega"}, "versions": {"gpu": "NVIDIA H200"},
        "untraced": {"ms_per_step_median": 1e-4, "floor": {"copy_bytes_per_s": 1e9}},
        "floor": {"kv_slots_read": "0..pos", "bytes_by_step": [[1, 50], [2, 50], [3, 50]]}}))
    out = json.loads(CliRunner().invoke(main, ["analyze", str(d), "--format", "json"]).output)
    s = out["summary"]
    assert s["intra_idle_ns_median"] == 0 and s["bubble_ns_median"] == 15
    assert s["idle_ns_by_cause"] == {"sync": 0, "host": 30, "queued": 0, "unknown": 0}
    assert s["idle_ledger"] == {"blocked": 0, "pre_launch": 14, "in_launch": 16}
    f = s["floor"]
    assert f["floor_ns_per_step"] == 50 and f["floor_pct_of_period"] == 50
