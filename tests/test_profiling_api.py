"""harness.profiling, the public API a user wraps around their own loop, and examples/hf_decode.py.

CUDA is faked where the API would touch it (cudaProfilerStart/Stop, synchronize, events) so the
window's edges and the event timeline are checked on a CPU; the real thing runs in test_gpu_*.
"""

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from harness import instrument, profiling

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def calls(monkeypatch):
    """NVTX pushes as names, pops as ')', and the CUDA calls, in order."""
    seen = []
    monkeypatch.setattr(instrument.nvtx, "push_range", lambda message, color: seen.append(message))
    monkeypatch.setattr(instrument.nvtx, "pop_range", lambda: seen.append(")"))
    return seen


class FakeEvent:
    """A CUDA event whose GPU time is the order it was recorded in, times 1.5 ms."""

    recorded = 0

    def __init__(self, enable_timing):
        assert enable_timing

    def record(self, stream):
        self.t_ms = 1.5 * FakeEvent.recorded
        FakeEvent.recorded += 1

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return other.t_ms - self.t_ms


@pytest.fixture
def fake_cuda(monkeypatch, calls):
    import torch

    class Cudart:
        def cudaProfilerStart(self):
            calls.append("start")

        def cudaProfilerStop(self):
            calls.append("stop")

    FakeEvent.recorded = 0
    monkeypatch.setattr(profiling, "_cuda_in_use", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "cudart", Cudart)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append("sync"))
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: None)
    return calls


def loop(prof, steps: int, stop_at: int | None = None) -> None:
    for i in range(1, steps + 1):
        with prof.step(i):
            with prof.forward():
                pass
            with prof.check():
                if i == stop_at:
                    break


def test_steps_and_checks_carry_the_names_the_analysis_finds(calls):
    with profiling.profiled_steps(window=(1, 2), timeline=True) as prof:
        loop(prof, 2)
    assert calls == ["Step 1", "Model Forward", ")", "Check Stop Condition", ")", ")",
                     "Step 2", "Model Forward", ")", "Check Stop Condition", ")", ")"]
    assert prof.timeline() is None  # the CPU: no events


def test_the_window_opens_before_step_start_plus_1_and_closes_after_step_stop(fake_cuda):
    with profiling.profiled_steps(window=(1, 3)) as prof:
        loop(prof, 4)
    names = [c for c in fake_cuda if c in ("start", "stop", "sync") or c.startswith("Step")]
    assert names == ["Step 1", "start", "Step 2", "Step 3", "sync", "stop", "Step 4"]


def test_a_loop_that_ends_inside_the_window_still_closes_it(fake_cuda):
    with profiling.profiled_steps(window=(1, 5)) as prof:
        loop(prof, 5, stop_at=3)
    assert [c for c in fake_cuda if c in ("start", "stop")] == ["start", "stop"]


def test_the_timeline_gives_each_step_start_and_end_ns_from_the_first_event(fake_cuda):
    with profiling.profiled_steps(window=None, timeline=True) as prof:
        loop(prof, 3)
    assert "start" not in fake_cuda  # window=None: cudaProfilerStart/Stop left alone
    # Events in order: start 1, end 1, start 2, ... at 1.5 ms apart.
    assert prof.timeline() == {"step": [1, 2, 3], "start_ns": [0, 3_000_000, 6_000_000],
                               "end_ns": [1_500_000, 4_500_000, 7_500_000]}


def test_disabled_is_a_no_op_even_on_cuda(fake_cuda):
    with profiling.profiled_steps(window=(0, 2), timeline=True, enabled=False) as prof:
        loop(prof, 3)
    assert fake_cuda == [] and prof.timeline() is None


def test_a_bad_window_is_refused():
    with pytest.raises(ValueError, match="window must be"):
        profiling.ProfiledSteps((5, 5), False, True)


def test_importable_without_torch_and_names_the_ranges_the_same():
    """torch made unimportable: NVTX ranges straight through nvtx, window and events absent."""
    code = """
import sys
sys.modules["torch"] = None
import nvtx
seen = []
nvtx.push_range = lambda message, color: seen.append(message)
nvtx.pop_range = lambda: seen.append(")")
from harness.profiling import profiled_steps
with profiled_steps(window=(0, 1), timeline=True) as prof:
    with prof.step(1):
        with prof.check():
            pass
assert prof.timeline() is None
assert "transformers" not in sys.modules and "harness.instrument" not in sys.modules
print(seen)
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['Step 1', 'Check Stop Condition', ')', ')']"


def test_the_example_decodes_a_llama_on_the_cpu(capsys):
    """(gpt2 runs under the stand-in nsys in test_profile_command.py, as a program.) Its main(),
    in this process: torch and transformers are imported already."""
    example = runpy.run_path(str(ROOT / "examples" / "hf_decode.py"), run_name="hf_decode")
    assert example["main"](["--device", "cpu", "--size", "tiny", "--model", "llama", "--batch",
                            "2", "--new-tokens", "4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("hf_decode: llama (") and ": 4 steps, " in out


@pytest.mark.gpu
def test_the_timeline_times_real_steps_on_cuda():
    import torch

    x = torch.randn(512, 512, device="cuda")
    with profiling.profiled_steps(window=None, timeline=True) as prof:
        for i in range(1, 6):
            with prof.step(i):
                x = torch.tanh(x @ x)
    t = prof.timeline()
    assert t["step"] == [1, 2, 3, 4, 5] and t["start_ns"][0] == 0
    assert all(s < e for s, e in zip(t["start_ns"], t["end_ns"], strict=True))
    assert t["end_ns"] == sorted(t["end_ns"])


def test_a_steps_timeline_span_ends_before_its_stop_check(fake_cuda):
    with profiling.profiled_steps(window=None, timeline=True) as prof:
        for i in (1, 2):
            with prof.step(i):
                FakeEvent.recorded += 0  # the forward: no event
                with prof.check():
                    FakeEvent.recorded += 10  # the check's copy and wait: 15 ms of event time
    # Step 1 ends at its check (event 1), before the check's 15 ms; step 2 starts after them.
    assert prof.timeline() == {"step": [1, 2], "start_ns": [0, 18_000_000],
                               "end_ns": [1_500_000, 19_500_000]}
