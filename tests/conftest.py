"""Shared fixtures. GPU tests (`@pytest.mark.gpu`) are skipped, with a reason, without CUDA."""

from pathlib import Path

import pytest

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
