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


@pytest.fixture
def compile_without_codegen(monkeypatch):
    """torch.compile, for the harness's CPU tests, through dynamo, AOT autograd's
    functionalization (the static caches' in-place writes) and inductor's decompositions, but
    without inductor's C++ code generation: that is g++ at -O3, 20 to 30 s of CPU a compiled
    variant, and a backend that no user of the harness runs. The GPU suite compiles the same
    variants with inductor's Triton code (tests/test_gpu_harness.py, tests/test_gpu_models.py)."""
    import torch

    real = torch.compile

    def compile(model=None, *, mode=None, backend="inductor", **kw):
        assert mode in (None, "default"), f"mode {mode!r} is inductor's alone"
        if backend == "inductor":
            backend = "aot_eager_decomp_partition"
        return real(model, backend=backend, **kw)

    monkeypatch.setattr(torch, "compile", compile)

