"""Shared fixtures. GPU tests (`@pytest.mark.gpu`) are skipped, with a reason, without CUDA."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# torch on one thread, in this process and in every process a test starts (the harness under the
# stand-in nsys, torchrun's ranks): the tests run tiny models, whose ops a second thread only
# synchronises, and on a machine that others share a second thread that is not running stalls
# every op (a tiny harness run: 6 ms a step on one thread, 140 on two with the cores busy).
# Set before any test module imports torch; an OMP_NUM_THREADS of your own is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")

DATA_DIR = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parent.parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
            "--standalone"]


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: `make test-gpu` runs it on the GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def data_dir() -> Path:
    return DATA_DIR


def torchrun(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([*TORCHRUN, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="session")
def tp2(tmp_path_factory):
    """One torchrun of two gloo ranks on the CPU, for every test that needs one: tp_worker.py's
    cases, then `harness run --variant static --tp 2` in the same ranks; (its output, the
    worker's JSON, the run's directory). test_harness_tp checks them; test_scripts' profile-tp
    test replays the run's run.json."""
    tmp = tmp_path_factory.mktemp("tp2")
    opts = ["--model", "tiny", "--batch", "3", "--new-tokens", "12", "--device", "cpu",
            "--matmul-precision", "highest", "--out", str(tmp / "run")]
    done = torchrun(str(ROOT / "tests" / "tp_worker.py"), str(tmp / "seen.json"),
                    "--variant", "static", "--tp", "2", *opts)
    assert done.returncode == 0, done.stderr[-2000:]
    return done, json.loads((tmp / "seen.json").read_text()), tmp / "run"
