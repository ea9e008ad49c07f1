"""On the GPU: GPT-2 124M, fp32 at "highest", batch 8, a uniform stop schedule; every variant
against kv, the deferred check under a deliberately slowed GPU, and the syncs a step may not make.
"""

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.bench import bench
from harness.config import RunConfig, validate
from harness.instrument import no_window
from harness.model import build_model
from harness.run import make_decoder
from harness.stops import expected_stop_step, stop_steps
from harness.variants import set_expandable_segments

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent
BATCH, NEW, STOP = 8, 40, "uniform:10-30"
# ~25 ms a step at the H200's ~2 GHz: far longer than the host takes to launch a step.
SLOW_CYCLES = 50_000_000
EOS = 50256  # GPT-2's <|endoftext|>: its BOS and EOS


@pytest.fixture(scope="module")
def gpt2():
    torch.set_float32_matmul_precision("highest")
    return build_model("gpt2", "fp32", "cuda", seed=0)


def config(variant: str, **kw) -> RunConfig:
    base = dict(variant=variant, model="gpt2", batch=BATCH, new_tokens=NEW, device="cuda",
                stop=STOP, matmul_precision="highest")
    return validate(RunConfig(**{**base, **kw}))


def decode(model, variant: str, **kw) -> dict:
    run = make_decoder(model, config(variant, **kw))
    run(no_window())
    return run(no_window())


@pytest.fixture(scope="module")
def reference(gpt2):
    return decode(gpt2, "kv")


def counts(result: dict) -> tuple:
    return result["steps_run"], result["overshoot_steps"], result["stale_flag_reads"]


def test_kv_stops_at_the_last_scheduled_step(reference):
    stops = stop_steps(STOP, BATCH, NEW, seed=0)
    last = expected_stop_step(stops, NEW)
    assert reference["stop_step"] == last
    assert counts(reference) == (last, 0, None)
    for j, s in enumerate(stops.tolist()):
        assert (reference["tokens"][j, 1:s] != EOS).all()
        assert (reference["tokens"][j, s:] == EOS).all()


@pytest.mark.parametrize("variant", ["naive", "kv-expandable", "static", "compiled", "pipelined",
                                     "pipelined-seed", "deferred", "check-every-k", "graphed",
                                     "graphed-sync", "fused", "nocheck", "while-graph",
                                     "while-fused", "hf-generate"])
def test_variant_gives_kv_tokens_and_stop_step(gpt2, reference, variant):
    try:
        result = decode(gpt2, variant)
    finally:
        set_expandable_segments(False)  # kv-expandable turns it on for this process
    assert torch.equal(result["tokens"], reference["tokens"])
    assert result["stop_step"] == reference["stop_step"]


@pytest.mark.parametrize("variant", ["graphed", "graphed-sync", "pipelined"])
def test_compiled_step_gives_kv_tokens(gpt2, reference, variant):
    result = decode(gpt2, variant, compile="default")
    assert torch.equal(result["tokens"], reference["tokens"])
    assert result["stop_step"] == reference["stop_step"]


@pytest.mark.parametrize("branches", [1, 3, 8])
def test_fused_gives_kv_tokens_with_any_number_of_micro_batches(gpt2, reference, branches):
    result = decode(gpt2, "fused", branches=branches)
    assert torch.equal(result["tokens"], reference["tokens"])
    assert counts(result) == (reference["stop_step"] + 1, 1, 0)


@pytest.mark.parametrize("variant", ["pipelined", "deferred", "graphed", "fused"])
def test_deferred_check_overshoots_by_exactly_one_step(gpt2, reference, variant):
    assert counts(decode(gpt2, variant)) == (reference["stop_step"] + 1, 1, 0)


@pytest.fixture(scope="module")
def slow_reference(gpt2):
    return decode(gpt2, "kv", new_tokens=20, stop="fixed:8")


def test_pipelined_never_reads_a_stale_flag_on_a_slow_gpu(gpt2, slow_reference):
    result = decode(gpt2, "pipelined", new_tokens=20, stop="fixed:8", gpu_sleep_cycles=SLOW_CYCLES)
    assert counts(result) == (9, 1, 0)
    assert torch.equal(result["tokens"], slow_reference["tokens"])


def test_pipelined_seed_reads_stale_flags_on_a_slow_gpu(gpt2, slow_reference):
    # With no event wait the host reads pinned memory the copy has not reached yet: it sees
    # "not finished" for steps that were, and keeps launching. The tokens it returns are still
    # right only because finish() trims them by the device's own record.
    result = decode(gpt2, "pipelined-seed", new_tokens=20, stop="fixed:8",
                    gpu_sleep_cycles=SLOW_CYCLES)
    assert result["stale_flag_reads"] > 0
    assert result["overshoot_steps"] > 1
    assert result["stop_step"] == 8
    assert torch.equal(result["tokens"], slow_reference["tokens"])


@pytest.mark.parametrize("variant", ["static", "graphed", "fused"])
def test_steps_make_no_host_sync_outside_the_stop_check(gpt2, reference, variant):
    run = make_decoder(gpt2, config(variant))
    run(no_window())  # the first run may sync (lazy allocation); the steps after it may not
    torch.cuda.set_sync_debug_mode("error")
    try:
        result = run(no_window())
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert torch.equal(result["tokens"], reference["tokens"])


def harness_run(tmp_path: Path, variant: str) -> dict:
    out = tmp_path / variant
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--variant", variant, "--out", str(out),
         "--model", "tiny", "--batch", "4", "--new-tokens", "12", "--stop", "fixed:6"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "run.json").read_text())


def test_kv_expandable_sets_the_allocator_before_cuda_starts(tmp_path):
    assert harness_run(tmp_path, "kv-expandable")["result"]["expandable_segment_share"] == 1.0
    assert harness_run(tmp_path, "kv")["result"]["expandable_segment_share"] == 0.0


def test_kv_expandable_benched_alone_has_every_segment_expandable(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "bench", "--variants", "kv-expandable", "--json",
         str(out), "--model", "tiny", "--batch", "4", "--new-tokens", "12", "--repeats", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["results"][0]["expandable_segment_share"] == 1.0


def test_graphed_run_json_on_the_gpu(tmp_path):
    record = harness_run(tmp_path, "graphed")
    assert record["versions"]["gpu"] and record["versions"]["torch_cuda"]
    assert record["result"]["steps_run"] == 7 and record["result"]["stop_step"] == 6
    assert (record["result"]["overshoot_steps"], record["result"]["stale_flag_reads"]) == (1, 0)
    assert record["timing"]["window_steps"] == 7


def test_bench_reports_memory_and_the_weight_floor_on_the_gpu():
    cfg = validate(RunConfig(variant="kv", model="tiny", batch=4, new_tokens=12, device="cuda",
                             stop="fixed:6"))
    report = bench(cfg, ["kv", "graphed"], repeats=5)
    assert report["copy_bytes_per_s"] > 1e11  # an H200 copies at well over 100 GB/s
    for r in report["results"]:
        assert 0 < r["peak_allocated_bytes"] <= r["peak_reserved_bytes"]
        assert 0 <= r["fragmentation"] < 1
        assert r["fragmentation"] == pytest.approx(
            1 - r["peak_allocated_bytes"] / r["peak_reserved_bytes"])
        assert r["steps"] == {"kv": 6, "graphed": 7}[r["variant"]]


@pytest.mark.parametrize("variant", ["graphed-sync", "graphed", "pipelined"])
def test_timeline_times_every_step_on_the_gpu_without_a_sync(gpt2, variant):
    from harness.bench import timeline

    cfg = config(variant)
    decode = make_decoder(gpt2, cfg)
    decode(no_window())
    doc = timeline(decode, cfg, repeats=2)
    assert doc["source"] == "cuda-events" and len(doc["runs"]) == 2
    for run in doc["runs"]:
        starts, ends = run["start_ns"], run["end_ns"]
        assert run["step"] == list(range(1, len(starts) + 1)) and starts[0] == 0
        assert all(s < e for s, e in zip(starts, ends, strict=True))
        spans = [e - s for s, e in zip(starts, ends, strict=True)]
        # GPT-2 124M at batch 8 takes over 0.3 ms of GPU time a step on an H200.
        assert min(spans) > 300_000
        bubbles = [max(0, s - max(ends[:j + 1])) for j, s in enumerate(starts[1:])]
        if variant == "graphed-sync":
            # .item() every step: the GPU waits for the host to read the flag and launch again.
            assert statistics.median(bubbles) > 2_000
        if variant == "graphed":
            # The deferred check keeps the next replay queued: no bubble to speak of.
            assert statistics.median(bubbles) < 2_000
