"""--tp 2 on the CPU (gloo, two ranks under torchrun): tokens identical to --tp 1 for the tiny
GPT-2 and llama, static and deferred; the stop flag agreed; the options --tp refuses; and
scripts/profile-tp.sh around such a run. One torchrun for all of them (tp2)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_scripts import CPU_RUN, make_env, nsys_calls, run_dirs, run_script

from harness.config import ConfigError, RunConfig, validate
from harness.instrument import no_window
from harness.run import load_model, make_decoder, tokens_sha256

ROOT = Path(__file__).resolve().parent.parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
            "--standalone"]


def torchrun(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([*TORCHRUN, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def tp2(tmp_path_factory):
    """One torchrun of two gloo ranks on the CPU: tp_worker.py's cases, then `harness run
    --variant static --tp 2` in the same ranks; (its output, the worker's JSON, the run's
    directory)."""
    tmp = tmp_path_factory.mktemp("tp2")
    opts = ["--model", "tiny", "--batch", "3", "--new-tokens", "12", "--device", "cpu",
            "--matmul-precision", "highest", "--out", str(tmp / "run")]
    done = torchrun(str(ROOT / "tests" / "tp_worker.py"), str(tmp / "seen.json"),
                    "--variant", "static", "--tp", "2", *opts)
    assert done.returncode == 0, done.stderr[-2000:]
    return done, json.loads((tmp / "seen.json").read_text()), tmp / "run"


def tp1_sha(name: str, variant: str, **kw) -> str:
    cfg = validate(RunConfig(variant=variant, model=name, device="cpu", matmul_precision="highest",
                             **{**dict(batch=4, new_tokens=12, stop="uniform:4-9"), **kw}))
    return tokens_sha256(make_decoder(load_model(cfg), cfg)(no_window())["tokens"])


def test_tp2_decodes_the_tokens_of_tp1_and_agrees_on_the_flag(tp2):
    seen = dict(tp2[1])
    assert seen.pop("agree") == [False, False]
    assert len(seen) == 4
    for case, shas in seen.items():
        name, variant = case.split()
        assert shas == [tp1_sha(name, variant)] * 2, case


def test_torchrun_harness_run_tp2_writes_one_run_json(tp2):
    done, _, run = tp2
    assert done.stdout.count("static: 12 steps run") == 1  # rank 0 prints, rank 1 does not
    record = json.loads((run / "run.json").read_text())
    sha = tp1_sha("tiny", "static", batch=3, stop="none")
    assert record["result"]["tokens_sha256"] == sha
    t = record["tp"]
    assert (t["rank"], t["world_size"], t["backend"], t["ranks_agree"]) == (0, 2, "gloo", True)
    assert t["tokens_sha256_by_rank"] == [sha, sha]
    assert record["config"]["tp"] == 2
    # Per layer 12 x 64^2 sharded weights and 7 x 64 sharded biases (c_attn's 3, c_fc's 4; the
    # row-parallel biases stay whole): each rank keeps half of them, in both layers.
    assert record["model"]["parameters"] - t["parameters_per_rank"] == 2 * (6 * 64 * 64 + 7 * 32)


@pytest.mark.parametrize("kw, message", [
    (dict(variant="kv"), "--tp runs static, compiled, pipelined, deferred, nocheck, not kv"),
    (dict(model="phi:tiny"), "--tp shards gpt2 and llama, not phi"),
    (dict(variant="compiled", compile="reduce-overhead"), "--compile reduce-overhead"),
    (dict(tp=0), "--tp must be >= 1, got 0"),
])
def test_tp_refuses_in_one_line(kw, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        validate(RunConfig(**{**dict(variant="static", device="cpu", tp=2), **kw}))


def test_tp_needs_torchrun_and_divisible_heads(monkeypatch):
    from harness import tp

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ConfigError, match="--tp 2 runs under torchrun"):
        tp.init(2, "cpu")
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(ConfigError, match="--tp 2 needs torchrun --nproc-per-node 2, got WORLD_"):
        tp.init(2, "cpu")
    torch.set_float32_matmul_precision("highest")
    model = load_model(RunConfig(variant="static", model="tiny", device="cpu"))
    with pytest.raises(ConfigError, match=r"--tp 3 must divide the heads \(2\) and KV heads \(2\)"):
        tp.shard(model, 3)


def test_profile_tp_captures_each_rank_under_torchrun_and_tables_the_ranks(tmp_path, tp2):
    # Two ranks under torchrun, each under its own (stand-in) nsys; each export is the bundled
    # H200 capture, so the ranks' table has every step and no collective. The ranks' harness
    # run is replayed: rank 0's run.json of a real `harness run --tp 2` (tp2, checked above).
    env = make_env(tmp_path, OMP_NUM_THREADS="1", FAKE_NSYS_RUN="0",
                   FAKE_NSYS_RUN_JSON=str(tp2[2] / "run.json"))
    result = run_script("profile-tp.sh", env, "static", "2", *CPU_RUN, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (run,) = run_dirs(tmp_path)
    assert run.name.endswith("-static-tp2")
    names = {p.name for p in run.iterdir()}
    assert {"capture_0.nsys-rep", "capture_1.nsys-rep", "capture_0.sqlite", "capture_1.sqlite",
            "run.json", "nsys.log", "ranks.txt"} <= names
    profiles = [c for c in nsys_calls(tmp_path) if c[0] == "profile"]
    assert len(profiles) == 2 and all(f"{run}/capture_%q{{RANK}}" in c for c in profiles)
    record = json.loads((run / "run.json").read_text())
    assert record["tp"]["world_size"] == 2 and record["tp"]["ranks_agree"]
    assert "torch.distributed.run --standalone --nproc-per-node 2" in record["nsys"]["command"]
    assert "waited_rank" in (run / "ranks.txt").read_text()
