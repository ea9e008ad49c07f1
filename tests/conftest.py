"""Shared fixtures. GPU tests (`@pytest.mark.gpu`) are skipped, with a reason, without CUDA."""

import lzma
import os
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

# torch on one thread, in this process and in every process a test starts (the harness under the
# stand-in nsys, torchrun's ranks): the tests run tiny models, whose ops a second thread only
# synchronises, and on a machine that others share a second thread that is not running stalls
# every op (a tiny harness run: 6 ms a step on one thread, 140 on two with the cores busy).
# Set before any test module imports torch; an OMP_NUM_THREADS of your own is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")

DATA_DIR = Path(__file__).parent / "data"
# The committed exports are stored xz'd (tests/data/README.md) and read as they are, as gapscope
# reads them; a test that changes one, or opens it with sqlite3 itself, works on a plain_copy.
STATIC = DATA_DIR / "h200-eager-static-bs16.sqlite.xz"
PIPELINED_SEED = DATA_DIR / "h200-eager-pipelined-seed-bs16.sqlite.xz"


def plain_copy(src: Path, dst: Path) -> Path:
    """dst, a copy of the export src as a plain SQLite file (decompressed where src is xz'd):
    one a test may change; src is only read."""
    if Path(src).name.endswith(".xz"):
        with lzma.open(src) as f, open(dst, "wb") as g:
            shutil.copyfileobj(f, g, 1 << 20)
    else:
        shutil.copyfile(src, dst)
    return Path(dst)


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



@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_setupnodes(config, specs):
    """pytest-xdist, writing to a pipe, says "bringing up nodes..." as it starts its workers and
    again, with nothing new at -q, once they have collected: once is enough."""
    reporter = config.pluginmanager.get_plugin("terminaldistreporter")
    if reporter is None or getattr(reporter, "said_once", False):
        return
    show = reporter.ensure_show_status

    def once():
        if not reporter.said_once:
            reporter.said_once = True
            show()

    reporter.said_once = False
    reporter.ensure_show_status = once


def skip_reason(report) -> str:
    """A skipped test's reason, as pytest's `-rs` prints it (without "Skipped: ")."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def pytest_terminal_summary(terminalreporter):
    """Why tests were skipped, one line a reason with how many (pytest's -rs prints a line a
    test: a hundred GPU tests would bury the rest)."""
    skipped = terminalreporter.stats.get("skipped", [])
    reasons = Counter(skip_reason(r) for r in skipped)
    for reason, count in reasons.most_common():
        terminalreporter.write_line(f"skipped {count}: {reason}")


INJECT = Path(__file__).resolve().parent.parent / "harness" / "inject"


def _hook_modules() -> list:
    return [n for n in sys.modules if n == "gapscope_hook" or n.startswith("gapscope_hook.")]


@pytest.fixture
def hook(monkeypatch):
    """A fresh copy of the in-program hook's package (harness/inject/gapscope_hook) with every
    part imported: their globals, the recorder among them, start empty; the process's own copy,
    if any, is put back afterwards."""
    import importlib

    for name in _hook_modules():
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(INJECT))
    package = importlib.import_module("gapscope_hook")
    for part in sorted(p.stem for p in (INJECT / "gapscope_hook").glob("*.py")):
        if part != "__init__":
            importlib.import_module(f"gapscope_hook.{part}")
    yield package
    for name in _hook_modules():
        del sys.modules[name]
