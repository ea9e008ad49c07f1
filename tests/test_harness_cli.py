"""Options: meaningless combinations rejected in one line (exit 2); run.json and bench JSON keys."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.bench import percentiles
from harness.config import ConfigError, RunConfig, validate

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--model", "tiny", "--batch", "3", "--new-tokens", "12", "--device", "cpu"]


def harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("kw, message", [
    (dict(variant="fast"), "unknown variant 'fast'"),
    (dict(variant="naive", compile="default"), "--compile default means nothing for naive"),
    (dict(variant="kv", compile="reduce-overhead"),
     "--compile reduce-overhead means nothing for kv"),
    (dict(variant="graphed", compile="reduce-overhead"), "graphed is its own CUDA graph"),
    (dict(variant="compiled", compile="none"), "compiled with --compile none is static"),
    (dict(variant="static", k=4), "--k only applies to check-every-k, not static"),
    (dict(variant="check-every-k", k=0), "--k must be >= 1, got 0"),
    (dict(new_tokens=1024), "--new-tokens must be 1..1023"),
    (dict(new_tokens=20, window="10:21"),
     "--window 10:21 needs 0 <= START < STOP <= new tokens (20)"),
    (dict(window="50:30"), "--window 50:30 needs"),
    (dict(window="30-50"), "--window must be START:STOP"),
    (dict(stop="fixed:0"), "--stop fixed:S needs 1 <= S <= 100"),
    (dict(stop="uniform:9-4"), "--stop uniform:A-B needs 1 <= A <= B <= 100"),
    (dict(stop="geometric:0"), "--stop geometric:P needs 0 < P <= 1"),
    (dict(stop="sometimes"), "--stop must be none, fixed:S, uniform:A-B or geometric:P"),
    (dict(variant="graphed", device="cpu"), "graphed needs CUDA"),
    (dict(variant="fused", device="cpu"), "fused needs CUDA"),
    (dict(variant="graphed", branches=2), "--branches only applies to fused, not graphed"),
    (dict(variant="fused", batch=4, branches=5), "--branches must be 1..batch (4), got 5"),
    (dict(variant="fused", branches=0), "--branches must be 1..batch (32), got 0"),
    (dict(variant="fused", compile="default"), "fused is its own fused step in a CUDA graph"),
    (dict(dtype="fp16"), "--dtype must be one of fp32, bf16"),
    (dict(gpu_sleep_cycles=1000, device="cpu"), "--gpu-sleep-cycles needs --device cuda"),
    (dict(model="llama:huge"), "--model must be ARCH[:SIZE] (gpt2, llama, qwen2, mistral, phi;"),
    (dict(variant="fused", model="qwen2"), "fused runs our own GPT-2 step: --model qwen2 is qwen2"),
])
def test_meaningless_combinations_are_rejected(kw, message):
    with pytest.raises(ConfigError) as err:
        validate(RunConfig(**kw))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_window_defaults_to_30_50_or_the_whole_run():
    assert RunConfig(new_tokens=100).to_json()["window"] == "30:50"
    assert RunConfig(new_tokens=12).to_json()["window"] == "0:12"


def test_variant_defaults_resolve_compile_and_k():
    assert RunConfig(variant="compiled").to_json()["compile"] == "default"
    assert RunConfig(variant="static").to_json()["compile"] == "none"
    assert RunConfig(variant="check-every-k").to_json()["k"] == 8
    assert RunConfig(variant="kv").to_json()["k"] is None
    assert RunConfig(variant="fused").to_json()["branches"] == 1
    assert RunConfig(variant="fused", branches=4).to_json()["branches"] == 4
    assert RunConfig(variant="graphed").to_json()["branches"] is None


@pytest.mark.parametrize("args, message", [
    (["run", "--variant", "fast", "--out", "x", *TINY], "gapscope: error: unknown variant 'fast'"),
    (["run", "--variant", "kv", "--out", "x", "--k", "3", *TINY],
     "gapscope: error: --k only applies to check-every-k, not kv"),
    (["run", "--variant", "graphed", "--out", "x", *TINY], "gapscope: error: graphed needs CUDA"),
    (["run", "--variant", "kv", *TINY],
     "gapscope: error: the following arguments are required: --out"),
    (["run", "--variant", "kv", "--out", "x", "--batch", "many"],
     "gapscope: error: argument --batch: invalid int value: 'many'"),
    (["bench", "--variants", "kv,naive", "--compile", "default", *TINY],
     "gapscope: error: --compile default means nothing for kv"),
    (["launch"], "gapscope: error: argument command: invalid choice: 'launch'"),
    (["run", "--variant", "graphed-sync", "--out", "x", "--model", "llama:tiny"],
     "gapscope: error: graphed-sync runs our own GPT-2 step: --model llama:tiny is llama"),
    (["bench", "--variants", "kv", "--json", "/nonexistent/b.json", *TINY],
     "gapscope: error: --json /nonexistent/b.json: no directory /nonexistent"),
    (["bench", "--variants", "kv", "--repeats", "0", *TINY],
     "gapscope: error: --repeats must be >= 1, got 0"),
])
def test_bad_options_exit_2_with_one_line(args, message):
    proc = harness(*args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith(message)
    assert proc.stderr.count("\n") == 1


def test_cuda_without_cuda_exits_2_with_one_line(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    proc = harness("run", "--variant", "kv", "--out", str(tmp_path), "--model", "tiny")
    assert (proc.returncode, proc.stderr) == (
        2, "gapscope: error: CUDA is not available here: pass --device cpu (graphed needs CUDA)\n")


def test_importing_harness_does_not_import_torch():
    code = "import sys, harness, harness.cli; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_variants_lists_the_registry_one_line_each():
    proc = harness("variants")
    names = [line.split()[0] for line in proc.stdout.splitlines()]
    assert names == ["naive", "kv", "kv-expandable", "static", "compiled", "pipelined",
                     "pipelined-seed", "deferred", "check-every-k", "graphed", "graphed-sync",
                     "fused", "nocheck", "hf-generate"]


def test_run_writes_run_json_and_prints_one_line(tmp_path):
    out = tmp_path / "run"
    proc = harness("run", "--variant", "pipelined", "--out", str(out), "--stop", "fixed:7",
                   "--window", "2:5", *TINY)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("pipelined: 8 steps run (stop step 7, overshoot 1), 21 tokens, ")
    assert proc.stdout.count("\n") == 1
    record = json.loads((out / "run.json").read_text())
    assert list(record) == ["config", "model", "versions", "result", "timing"]
    assert record["model"] == {
        "architecture": "gpt2", "size": "tiny", "path": None, "weights": "random",
        "class": "GPT2LMHeadModel", "layers": 2, "hidden": 64, "heads": 2, "kv_heads": 2,
        "vocab": 50257, "tied_embeddings": True, "parameters": 50257 * 64 + 1024 * 64 + 2 * 49984
        + 128, "bos_token_id": 50256, "eos_token_ids": [50256]}
    assert record["config"] == {
        "variant": "pipelined", "out": str(out), "model": "tiny", "batch": 3, "new_tokens": 12,
        "dtype": "fp32", "matmul_precision": "high", "compile": "none", "stop": "fixed:7",
        "stop_seed": 0, "k": None, "branches": None, "window": "2:5", "seed": 0, "device": "cpu",
        "gpu_sleep_cycles": 0}
    assert set(record["versions"]) == {"python", "torch", "torch_cuda", "transformers", "nvtx",
                                       "driver", "gpu"}
    assert record["result"] == {"tokens_generated": 21, "steps_run": 8, "stop_step": 7,
                                "scheduled_stop_step": 7, "overshoot_steps": 1,
                                "stale_flag_reads": 0,
                                "expandable_segment_share": None,
                                "tokens_sha256": record["result"]["tokens_sha256"]}
    assert len(record["result"]["tokens_sha256"]) == 64
    assert set(record["timing"]) == {"wall_ms", "window_steps", "window_ms", "ms_per_step"}
    assert record["timing"]["window_steps"] == 3
    assert 0 < record["timing"]["window_ms"] < record["timing"]["wall_ms"]


def test_bench_writes_json_and_a_table(tmp_path):
    path = tmp_path / "bench.json"
    proc = harness("bench", "--variants", "kv,check-every-k", "--k", "4", "--repeats", "5",
                   "--stop", "fixed:6", "--json", str(path), *TINY)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["variant", "steps", "ms/run"]
    assert [line.split()[:2] for line in lines[2:4]] == [["kv", "6"], ["check-every-k", "8"]]
    report = json.loads(path.read_text())
    assert list(report) == ["config", "model", "versions", "copy_bytes_per_s", "results"]
    assert report["model"]["architecture"] == "gpt2" and report["model"]["size"] == "tiny"
    assert report["config"]["variant"] == "kv,check-every-k" and report["config"]["k"] == 4
    assert report["config"]["compile"] is None and report["config"]["repeats"] == 5
    assert report["copy_bytes_per_s"] > 0
    kv, every4 = report["results"]
    assert set(kv) == {
        "variant", "steps", "ms_per_run_median", "ms_per_run_p10", "ms_per_run_p90",
        "ms_per_step_median", "ms_per_step_p10", "ms_per_step_p90", "tokens_per_s",
        "peak_allocated_bytes", "peak_reserved_bytes", "fragmentation", "weight_bytes",
        "weight_floor_ms_per_step", "weight_floor_pct", "expandable_segment_share",
        "tokens_sha256"}
    # Six steps of the same tokens, then check-every-k's overshoot trimmed: the same hash.
    assert kv["tokens_sha256"] == every4["tokens_sha256"]
    assert (kv["variant"], kv["steps"], every4["steps"]) == ("kv", 6, 8)
    assert kv["peak_allocated_bytes"] is None and kv["fragmentation"] is None
    # tiny: wte 50257x64 + wpe 1024x64 + 2 blocks of 49,984 + ln_f 128, fp32
    assert kv["weight_bytes"] == 4 * (50257 * 64 + 1024 * 64 + 2 * 49984 + 128)
    assert kv["ms_per_run_p10"] <= kv["ms_per_run_median"] <= kv["ms_per_run_p90"]
    assert kv["ms_per_step_median"] == pytest.approx(kv["ms_per_run_median"] / 6)
    assert kv["tokens_per_s"] == pytest.approx(3 * 6 / (kv["ms_per_run_median"] / 1e3))


def test_percentiles_interpolate_between_order_statistics():
    assert percentiles([5.0, 1.0, 4.0, 2.0, 3.0]) == pytest.approx([1.4, 3.0, 4.6])
    assert percentiles([7.0]) == [7.0, 7.0, 7.0]
