"""Shared fixtures. GPU tests (`@pytest.mark.gpu`) are skipped, with a reason, without CUDA."""

import os
from pathlib import Path

import pytest

# torch on one thread, in this process and in every process a test starts (the harness under the
# stand-in nsys, torchrun's ranks): the tests run tiny models, whose ops a second thread only
# synchronises, and on a machine that others share a second thread that is not running stalls
# every op (a tiny harness run: 6 ms a step on one thread, 140 on two with the cores busy).
# Set before any test module imports torch; an OMP_NUM_THREADS of your own is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")

DATA_DIR = Path(__file__).parent / "data"


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

