"""Options: meaningless combinations rejected in one line (exit 2); run.json and bench JSON keys."""

import contextlib
import io
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
    """`python -m harness ARGS` in this process: torch is imported once for the whole run, not
    once a test (harness.cli.main is what __main__ calls; argparse's errors exit 2)."""
    from harness.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as e:
            code = e.code
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


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
    (dict(variant="fused", model="phi"), "fused runs our own step, written for gpt2, llama, qwen2, "
                                          "mistral: --model phi is phi, whose parallel"),
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
    (["run", "--variant", "graphed-sync", "--out", "x", "--model", "phi:tiny"],
     "gapscope: error: graphed-sync runs our own step, written for gpt2, llama, qwen2, mistral: "
     "--model phi:tiny is phi"),
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
        2, "gapscope: error: CUDA is not available here: pass --device cpu\n")


def test_importing_harness_does_not_import_torch():
    code = "import sys, harness, harness.cli; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_variants_lists_the_registry_one_line_each():
    proc = harness("variants")
    names = [line.split()[0] for line in proc.stdout.splitlines()]
    assert names == ["naive", "kv", "kv-expandable", "static", "compiled", "pipelined",
                     "pipelined-seed", "deferred", "check-every-k", "graphed", "graphed-sync",
                     "fused", "nocheck", "while-graph", "while-fused", "mega", "while-mega",
                     "hf-generate"]


def test_run_writes_run_json_and_prints_one_line(tmp_path):
    out = tmp_path / "run"
    proc = harness("run", "--variant", "pipelined", "--out", str(out), "--stop", "fixed:7",
                   "--window", "2:5", *TINY)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("pipelined: 8 steps run (stop step 7, overshoot 1), 21 tokens, ")
    assert proc.stdout.count("\n") == 1
    record = json.loads((out / "run.json").read_text())
    assert list(record) == ["config", "model", "versions", "result", "timing", "floor"]
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
    # HF's StaticCache: every step reads all 12 slots (3072 bytes of K and V each; see the bench
    # test), writes one, and 628428 bytes of activations; steps 3..5 of window 2:5.
    weights = 4 * (50257 * 64 + 1024 * 64 + 2 * 49984 + 128)
    floor = record["floor"]
    assert floor["kv_slots_read"] == "all" and floor["shape"]["kv_heads"] == 2
    assert floor["bytes_by_step"] == [[s, weights + 13 * 3072 + 628428] for s in (3, 4, 5)]


class ScriptedClock:
    """time for harness.bench: each timed run lasts the next of `run_ms` (start, then end)."""

    def __init__(self, run_ms: list[float]):
        self.ends = iter([int(ms * 1e6) for ms in run_ms])
        self.now, self.started = 0, False

    def perf_counter_ns(self) -> int:
        if self.started:
            self.now += next(self.ends)
        self.started = not self.started
        return self.now


def test_bench_writes_json_and_a_table(tmp_path, monkeypatch):
    # A copy rate of 2 GB/s instead of this machine's, and runs of known length (kv's five, then
    # check-every-k's): the timings and the floor below are then worked by hand.
    monkeypatch.setattr("harness.bench.copy_bytes_per_s", lambda device: 2e9)
    monkeypatch.setattr("harness.bench.time",
                        ScriptedClock([30, 10, 50, 20, 40] + [8, 8, 8, 8, 8]))
    path = tmp_path / "bench.json"
    proc = harness("bench", "--variants", "kv,check-every-k", "--k", "4", "--repeats", "5",
                   "--stop", "fixed:6", "--json", str(path), *TINY)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["variant", "steps", "ms/step"]
    assert max(len(line) for line in lines) <= 100
    assert [line.split()[:2] for line in lines[2:4]] == [["kv", "6"], ["check-every-k", "8"]]
    report = json.loads(path.read_text())
    assert list(report) == ["config", "model", "versions", "copy_bytes_per_s", "results"]
    assert report["model"]["architecture"] == "gpt2" and report["model"]["size"] == "tiny"
    assert report["config"]["variant"] == "kv,check-every-k" and report["config"]["k"] == 4
    assert report["config"]["compile"] is None and report["config"]["repeats"] == 5
    assert report["copy_bytes_per_s"] == 2e9
    kv, every4 = report["results"]
    assert set(kv) == {
        "variant", "steps", "ms_per_run_median", "ms_per_run_p10", "ms_per_run_p90",
        "ms_per_step_median", "ms_per_step_p10", "ms_per_step_p90", "tokens_per_s",
        "peak_allocated_bytes", "peak_reserved_bytes", "fragmentation", "weight_bytes",
        "weight_floor_ms_per_step", "weight_floor_pct", "floor", "expandable_segment_share",
        "tokens_sha256"}
    # Six steps of the same tokens, then check-every-k's overshoot trimmed: the same hash.
    assert kv["tokens_sha256"] == every4["tokens_sha256"]
    assert (kv["variant"], kv["steps"], every4["steps"]) == ("kv", 6, 8)
    assert kv["peak_allocated_bytes"] is None and kv["fragmentation"] is None
    # tiny: wte 50257x64 + wpe 1024x64 + 2 blocks of 49,984 + ln_f 128, fp32
    assert kv["weight_bytes"] == 4 * (50257 * 64 + 1024 * 64 + 2 * 49984 + 128)
    # Runs of 10..50 ms: p10 14 (10 + 0.4 x 10), median 30, p90 46; six steps a run.
    assert [kv[f"ms_per_run_{p}"] for p in ("p10", "median", "p90")] == pytest.approx([14, 30, 46])
    assert [kv[f"ms_per_step_{p}"] for p in ("p10", "median", "p90")] == pytest.approx(
        [14 / 6, 5, 46 / 6])
    # 3 rows x 6 new tokens in 30 ms; check-every-k ran 8 steps in 8 ms but kept 6 tokens a row
    # (its overshoot trimmed): 18 tokens in 8 ms.
    assert kv["tokens_per_s"] == pytest.approx(600)
    assert every4["ms_per_step_median"] == pytest.approx(1)
    assert every4["tokens_per_s"] == pytest.approx(2250)
    # K and V of one slot: 2 x 2 layers x batch 3 x 2 heads x 32 dims x 4 bytes = 3072; the
    # DynamicCache reads slots 0..pos over pos 0..5: 3.5 on average. Activations per row:
    # 2 layers x (192 qkv + 5 x 64 + 2 x 256) + 64 + 50257 logits, x 3 rows x 4 bytes.
    b = kv["floor"]["bytes_per_step"]
    assert (b["kv_read"], b["kv_write"], b["activations"]) == (3072 * 3.5, 3072, 628428)
    assert b["total"] == 13_528_320 + 3072 * 4.5 + 628428 == 14_170_572
    # 14,170,572 bytes at 2 GB/s: 7.085286 ms, 141.70572% of the 5 ms step.
    assert kv["floor"]["floor_ms_per_step"] == pytest.approx(7.085286)
    assert kv["floor"]["floor_pct"] == pytest.approx(141.70572)
    # The weights alone: 13,528,320 bytes, 6.76416 ms at 2 GB/s, of a 5 ms step.
    assert kv["weight_floor_ms_per_step"] == pytest.approx(6.76416)
    assert kv["weight_floor_pct"] == pytest.approx(135.2832)


def test_percentiles_interpolate_between_order_statistics():
    assert percentiles([5.0, 1.0, 4.0, 2.0, 3.0]) == pytest.approx([1.4, 3.0, 4.6])
    assert percentiles([7.0]) == [7.0, 7.0, 7.0]


def test_bench_timeline_writes_one_untraced_timeline_per_variant(tmp_path):
    proc = harness("bench", "--variants", "kv,pipelined", "--repeats", "1", "--stop", "fixed:4",
                   "--timeline", str(tmp_path / "steps-{variant}.json"), "--timeline-repeats", "2",
                   "--json", str(tmp_path / "bench.json"), *TINY)
    assert proc.returncode == 0, proc.stderr
    assert "timelines" not in json.loads((tmp_path / "bench.json").read_text())
    kv, pipelined = (json.loads((tmp_path / f"steps-{v}.json").read_text())
                     for v in ("kv", "pipelined"))
    assert (kv["format"], kv["source"], kv["variant"]) == (
        "gapscope-untraced-steps/1", "host-clock", "kv")
    assert kv["window"] == [0, 12] and kv["ms_per_step_median"] > 0
    assert len(kv["runs"]) == 2
    # kv stops at step 4; pipelined reads step 4's flag in step 5, its one step of overshoot
    assert [r["step"] for r in kv["runs"]] == [[1, 2, 3, 4]] * 2
    assert pipelined["runs"][0]["step"] == [1, 2, 3, 4, 5]
    for run in kv["runs"] + pipelined["runs"]:
        starts, ends = run["start_ns"], run["end_ns"]
        assert starts[0] == 0
        # On the CPU each step ends before the next begins.
        assert all(s < e for s, e in zip(starts, ends, strict=True))
        assert all(e <= s for e, s in zip(ends, starts[1:], strict=False))


def test_bench_timeline_with_several_variants_needs_a_placeholder(tmp_path):
    proc = harness("bench", "--variants", "kv,static", "--timeline", str(tmp_path / "t.json"),
                   *TINY)
    assert proc.returncode == 2
    assert proc.stderr == (
        "gapscope: error: --timeline with several variants needs {variant} in FILE\n")


def test_run_help_shows_the_defaults():
    out = harness("run", "--help").stdout
    for default in ("(default: 32)", "(default: 100)", "(default: fp32)", "(default: cuda)",
                    "(default: 0)"):
        assert default in out, default


def test_bench_processes_interleaves_variants_in_processes_of_their_own(tmp_path, monkeypatch):
    """The first child runs as the process it is (processes.run_child); the other three run the
    same command line in this process, so that torch is not imported three more times."""
    from harness import processes
    from harness.cli import main

    commands = []

    def runner(command):
        commands.append(command)
        if len(commands) == 1:
            return processes.run_child(command)
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(command[3:]) == 0
        return json.loads(Path(command[command.index("--json") + 1]).read_text())

    real = processes.run_processes
    monkeypatch.setattr(processes, "run_processes",
                        lambda *a, **kw: real(*a, runner=runner, log=sys.stderr, **kw))
    path = tmp_path / "bench.json"
    proc = harness("bench", "--variants", "kv,check-every-k", "--k", "4", "--processes", "2",
                   "--repeats", "1", "--new-tokens", "4", "--json", str(path),
                   *[a for a in TINY if a not in ("--new-tokens", "12")])
    assert [c[:4] + [c[c.index("--variants") + 1]] for c in commands] == [
        [sys.executable, "-m", "harness", "bench", v] for v in ["kv", "check-every-k"] * 2]
    assert proc.returncode == 0, proc.stderr
    progress = [line for line in proc.stderr.splitlines() if line.startswith("bench --processes")]
    assert [line.split("] ")[1].split(":")[0] for line in progress] == [
        "kv, process 1/2", "check-every-k, process 1/2", "kv, process 2/2",
        "check-every-k, process 2/2"]
    report = json.loads(path.read_text())
    kv, every = report["results"]
    assert (kv["variant"], kv["processes"], report["spread"]) == ("kv", 2, "between processes")
    assert kv["ms_per_step_median"] == pytest.approx(sum(kv["ms_per_step"]) / 2)
    lo, hi = kv["ms_per_step_ci95"]
    assert min(kv["ms_per_step"]) <= lo <= hi <= max(kv["ms_per_step"])
    [d] = report["differences"]
    diffs = [b - a for a, b in zip(kv["ms_per_step"], every["ms_per_step"], strict=True)]
    assert d["median_diff_ms"] == pytest.approx(sum(diffs) / 2)
    assert "check-every-k - kv" in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 100
