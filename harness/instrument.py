"""NVTX ranges and the cudaProfilerStart/Stop window: context managers the decode loop always calls.

The NVTX ranges cost a function call when no tool is attached (nvtx itself is then a no-op); the
profiler window does nothing unless active and on CUDA. So the loop never asks "am I profiled".
The analysis keys on the exact names: `Step N` (N from 1) holding `Model Forward` and
`Check Stop Condition`.
"""

import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import nvtx
import torch

STEP_COLOR = "blue"
FORWARD_COLOR = "green"
CHECK_COLOR = "red"


# True while a torch.profiler capture runs (harness/kineto.py): each range is then also a
# record_function range of the same name, which Kineto writes as a user_annotation event.
ANNOTATE = False


def set_annotate(on: bool) -> None:
    global ANNOTATE
    ANNOTATE = on


@contextmanager
def _range(message: str, color: str):
    nvtx.push_range(message, color=color)
    try:
        with torch.profiler.record_function(message) if ANNOTATE else nullcontext():
            yield
    finally:
        nvtx.pop_range()


def step_range(i: int):
    return _range(f"Step {i}", STEP_COLOR)


def forward_range():
    return _range("Model Forward", FORWARD_COLOR)


def check_range():
    return _range("Check Stop Condition", CHECK_COLOR)


@dataclass
class ProfilerWindow:
    """Profile steps start+1 .. stop: cudaProfilerStart before step start+1, Stop after step stop.

    Host clock marks at both edges are kept whether or not the window is active (they time it).
    """

    start: int
    stop: int
    active: bool
    kineto: object = None  # a harness.kineto.KinetoCapture opened and closed at the same edges
    marks_ns: dict = field(default_factory=dict)


def no_window() -> ProfilerWindow:
    return ProfilerWindow(0, 0, False)


@contextmanager
def window_step(window: ProfilerWindow, i: int):
    """Wraps step i; opens or closes the capture range at the window's edges."""
    on = window.active and torch.cuda.is_available()
    if i == window.start + 1:
        if on:
            torch.cuda.cudart().cudaProfilerStart()
        if window.kineto is not None:
            window.kineto.start()
        # After the start: nsys takes a while to begin collecting, which is no step's time.
        window.marks_ns["start"] = time.perf_counter_ns()
    try:
        yield
    finally:
        if i == window.stop:
            if on:
                # The last step's kernels may still be queued (deferred checks launch ahead):
                # let them finish inside the capture range. Nothing after it is measured.
                torch.cuda.synchronize()
            window.marks_ns["stop"] = time.perf_counter_ns()
            if on:
                torch.cuda.cudart().cudaProfilerStop()
            if window.kineto is not None:
                window.kineto.stop()


def close_window(window: ProfilerWindow, steps_run: int) -> None:
    """A run that stopped before window.stop still closes the capture range it opened."""
    if window.start < steps_run < window.stop:
        on = window.active and torch.cuda.is_available()
        if on:
            torch.cuda.synchronize()
        window.marks_ns["stop"] = time.perf_counter_ns()
        if on:
            torch.cuda.cudart().cudaProfilerStop()
        if window.kineto is not None:
            window.kineto.stop()
