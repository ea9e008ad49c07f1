"""On two GPUs (NCCL, one rank a GPU): --tp 2 decodes the tokens of --tp 1 for GPT-2 and
llama:small at fp32 "highest", batch 8, a uniform stop schedule, on the TP rungs (compiled and
pipelined with --compile default too). Skipped with fewer than two GPUs: one GPU cannot hold two
NCCL ranks."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent
OPTS = ["--batch", "8", "--new-tokens", "40", "--stop", "uniform:10-30",
        "--matmul-precision", "highest"]
CASES = [(m, v, c) for m in ("gpt2", "llama:small") for v, c in (
    ("static", None), ("deferred", None), ("pipelined", None), ("nocheck", None),
    ("compiled", None), ("pipelined", "default"))]


def harness(out: Path, model: str, variant: str, compile_mode: str | None, tp: int) -> dict:
    args = ["-m", "harness", "run", "--variant", variant, "--model", model, "--out", str(out),
            *OPTS, *(["--compile", compile_mode] if compile_mode else [])]
    launch = [sys.executable, *args]
    if tp > 1:
        launch = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                  "--nproc-per-node", str(tp), *args, "--tp", str(tp)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NCCL_NVLS_ENABLE": "0"}
    done = subprocess.run(launch, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "run.json").read_text())


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs (nvidia-h200-x2)")
@pytest.mark.parametrize("model, variant, compile_mode", CASES)
def test_tp2_on_two_gpus_decodes_the_tokens_of_tp1(tmp_path, model, variant, compile_mode):
    one = harness(tmp_path / "tp1", model, variant, compile_mode, 1)
    two = harness(tmp_path / "tp2", model, variant, compile_mode, 2)
    assert two["tp"]["backend"] == "nccl" and two["tp"]["ranks_agree"]
    assert two["result"]["stop_step"] == one["result"]["stop_step"]
    assert two["result"]["tokens_sha256"] == one["result"]["tokens_sha256"]
