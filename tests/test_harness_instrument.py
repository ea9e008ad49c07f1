"""The NVTX ranges the analysis keys on, their nesting, and the profiler window's edges."""

import pytest
import torch

from harness import instrument
from harness.config import RunConfig, validate
from harness.instrument import ProfilerWindow, close_window, window_step
from harness.model import build_model
from harness.run import make_decoder


@pytest.fixture
def ranges(monkeypatch):
    """Records pushes as names and pops as ')'."""
    seen = []
    monkeypatch.setattr(instrument.nvtx, "push_range", lambda message, color: seen.append(message))
    monkeypatch.setattr(instrument.nvtx, "pop_range", lambda: seen.append(")"))
    return seen


def run_variant(variant: str, **kw) -> None:
    cfg = validate(RunConfig(variant=variant, model="tiny", batch=2, new_tokens=3, device="cpu",
                             stop="fixed:2", **kw))
    make_decoder(build_model("tiny", "fp32", "cpu", 0), cfg)(instrument.no_window())


def test_kv_checks_inside_every_step(ranges):
    run_variant("kv")  # stops after step 2
    assert ranges == ["Step 1", "Model Forward", ")", "Check Stop Condition", ")", ")",
                      "Step 2", "Model Forward", ")", "Check Stop Condition", ")", ")"]


def test_pipelined_checks_the_previous_step_from_step_2(ranges):
    run_variant("pipelined")  # step 3 is the overshoot that reads step 2's flag
    assert ranges == ["Step 1", "Model Forward", ")", ")",
                      "Step 2", "Model Forward", ")", "Check Stop Condition", ")", ")",
                      "Step 3", "Model Forward", ")", "Check Stop Condition", ")", ")"]


def test_nocheck_has_no_check_range(ranges):
    run_variant("nocheck")
    assert ranges == ["Step 1", "Model Forward", ")", ")", "Step 2", "Model Forward", ")", ")",
                      "Step 3", "Model Forward", ")", ")"]


def test_check_every_k_checks_only_on_multiples_of_k(ranges):
    run_variant("check-every-k", k=2)
    assert [r for r in ranges if r.startswith(("Step", "Check"))] == [
        "Step 1", "Step 2", "Check Stop Condition"]


def test_window_marks_its_edges_and_starts_the_profiler_only_on_cuda(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "cudart", lambda: calls.append("cudart"))
    window = ProfilerWindow(1, 3, active=True)
    for i in range(1, 5):
        with window_step(window, i):
            if i == 1:
                assert "start" not in window.marks_ns
            if i == 2:
                assert "start" in window.marks_ns and "stop" not in window.marks_ns
    assert window.marks_ns["start"] < window.marks_ns["stop"]
    assert calls == []


@pytest.fixture
def profiler_calls(monkeypatch) -> list:
    """What the window asks of CUDA, in order, with a stand-in cudart on a machine without one."""
    calls = []

    class Cudart:
        def cudaProfilerStart(self):
            calls.append("start")

        def cudaProfilerStop(self):
            calls.append("stop")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "cudart", Cudart)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append("sync"))
    return calls


def test_window_calls_profiler_start_before_step_start_plus_1_and_stop_after_stop(profiler_calls):
    calls = profiler_calls
    window = ProfilerWindow(2, 4, active=True)
    for i in range(1, 6):
        with window_step(window, i):
            calls.append(i)
    assert calls == [1, 2, "start", 3, 4, "sync", "stop", 5]


def test_a_run_that_ends_inside_the_window_closes_it(profiler_calls):
    calls = profiler_calls
    window = ProfilerWindow(1, 10, active=True)
    for i in range(1, 4):
        with window_step(window, i):
            pass
    close_window(window, 3)
    assert calls == ["start", "sync", "stop"]
    assert "stop" in window.marks_ns


def test_an_active_window_on_cuda_is_also_one_nvtx_range(ranges, monkeypatch):
    """`nsys --capture-range=nvtx --nvtx-capture='gapscope window'` captures the same steps as
    cudaProfilerApi without turning CUDA tracing on: the range opens before step start+1 and
    closes after step stop, around their own ranges."""
    calls = []

    class Cudart:
        def cudaProfilerStart(self):
            calls.append("start")

        def cudaProfilerStop(self):
            calls.append("stop")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "cudart", Cudart)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    window = ProfilerWindow(1, 3, active=True)
    for i in range(1, 5):
        with window_step(window, i), instrument.step_range(i):
            pass
    assert ranges == ["Step 1", ")", "gapscope window", "Step 2", ")", "Step 3", ")", ")",
                      "Step 4", ")"]
    assert calls == ["start", "stop"]


def test_a_loop_span_times_step_1_to_the_last_with_two_marks(monkeypatch):
    # Off CUDA the marks are the host clock. With a clock that ticks 1 ms a read, the span's two
    # marks are consecutive reads (nothing between reads this clock: one mark at step 1's start,
    # one at step 3's end, none a step), 1 ms apart: 1/3 ms a step.
    ticks = iter(range(0, 10**9, 1_000_000))
    monkeypatch.setattr(instrument.time, "perf_counter_ns", lambda: next(ticks))
    cfg = validate(RunConfig(variant="nocheck", model="tiny", batch=2, new_tokens=3,
                             device="cpu"))
    window = instrument.loop_span_window(3)
    make_decoder(build_model("tiny", "fp32", "cpu", 0), cfg)(window)
    span = window.timeline
    assert (span.source, span.marks["end"] - span.marks["start"]) == ("host-clock", 1_000_000)
    assert span.ms_per_step() == pytest.approx(1 / 3)


def test_a_loop_span_keeps_a_device_loop_s_first_start_and_last_end():
    span = instrument.LoopSpan(2)
    span.set_stamps([10, 2_000_030], [1_000_020, 4_000_050], "device-globaltimer")
    assert (span.marks, span.source) == ({"start": 10, "end": 4_000_050}, "device-globaltimer")
    assert span.ms_per_step() == pytest.approx(2.00002)


def test_a_loop_span_of_a_run_that_stopped_short_has_no_end():
    cfg = validate(RunConfig(variant="kv", model="tiny", batch=2, new_tokens=3, device="cpu",
                             stop="fixed:2"))
    window = instrument.loop_span_window(3)
    make_decoder(build_model("tiny", "fp32", "cpu", 0), cfg)(window)
    with pytest.raises(KeyError):
        window.timeline.ms_per_step()
