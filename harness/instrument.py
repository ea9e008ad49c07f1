"""NVTX ranges, the cudaProfilerStart/Stop window and the per-step CUDA-event timeline: context
managers the decode loop always calls.

The NVTX ranges cost a function call when no tool is attached (nvtx itself is then a no-op); the
profiler window does nothing unless active and on CUDA; the timeline records nothing unless on.
So the loop never asks "am I profiled".
The analysis keys on the exact names: `Step N` (N from 1) holding `Model Forward` and
`Check Stop Condition`.
"""

import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import nvtx
import torch

STEP_COLOR = "blue"
FORWARD_COLOR = "green"
CHECK_COLOR = "red"
WINDOW_RANGE = "gapscope window"  # around steps START+1..STOP of an active window, on CUDA
WINDOW_COLOR = "gray"


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


class StepTimeline:
    """Two CUDA events per step, on the stream the step runs on: one before its first op, one
    after its last. They are read back only after the run (`read`), so timing adds no host sync:
    the untraced twin of a capture's per-step GPU timeline (docs/METRICS.md, "Untraced").

    An event's time is when its stream reaches it: the start event of a step launched late marks
    the launch, one behind a busy stream marks the moment the stream was free. Off CUDA, where
    every op runs on the calling thread, the host clock stands in (`source` says which).
    """

    def __init__(self, on: bool = False):
        self.on = on
        self.cuda = torch.cuda.is_available()
        self.source = "cuda-events" if self.cuda else "host-clock"
        self.marks = []  # (step, start mark, end mark): CUDA events or perf_counter_ns
        self._open = None  # [step, start mark, end mark or None] while a span is open
        self._stamped = None  # read()'s answer, given whole by a loop with no host steps
        # Under `gapscope profile`'s untraced twin (harness/inject/sitecustomize.py) the hook
        # takes these marks instead of timing the `Step N` ranges a second time.
        self._hook = sys.modules.get("gapscope_hook") if on else None
        if self._hook is not None and not self._hook.harness_timeline():
            self._hook = None

    def _mark(self):
        if not self.cuda:
            return time.perf_counter_ns()
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream())  # the stream the step runs on
        return event

    @contextmanager
    def span(self, i: int):
        if not self.on:
            yield
            return
        self._open = [i, self._mark(), None]
        try:
            yield
        finally:
            i, start, end = self._open
            self.marks.append((i, start, end if end is not None else self._mark()))
            self._open = None
            if self._hook is not None:
                self._hook.harness_step(*self.marks[-1])

    def end_early(self) -> None:
        """Ends the open step's span here, once: before its stop check, whose copy to the host
        and wait belong to the bubble (METRICS.md, "Untraced")."""
        if self.on and self._open is not None and self._open[2] is None:
            self._open[2] = self._mark()

    def set_stamps(self, start_ns: list[int], end_ns: list[int], source: str) -> None:
        """Every step's GPU start and end, stamped on the device by a loop that never returns to
        the host between steps (while-graph: the %globaltimer, harness/cuda_loop.py), in ns on
        the GPU's clock: read() gives them from the first start, steps numbered from 1."""
        t0 = start_ns[0] if start_ns else 0
        self._stamped = {"step": list(range(1, len(start_ns) + 1)),
                         "start_ns": [int(t - t0) for t in start_ns],
                         "end_ns": [int(t - t0) for t in end_ns]}
        self.source = source

    def read(self) -> dict:
        """{"step", "start_ns", "end_ns"}: ns from the first step's start mark."""
        if self._stamped is not None:
            stamped, self._stamped = self._stamped, None
            return stamped
        if not self.marks:
            return {"step": [], "start_ns": [], "end_ns": []}
        t0 = self.marks[0][1]
        if self.cuda:
            self.marks[-1][2].synchronize()

            def since(mark):
                return round(t0.elapsed_time(mark) * 1e6)
        else:
            def since(mark):
                return mark - t0
        return {
            "step": [i for i, _, _ in self.marks],
            "start_ns": [since(s) for _, s, _ in self.marks],
            "end_ns": [since(e) for _, _, e in self.marks],
        }


class LoopSpan:
    """A StepTimeline that times the loop whole: a mark at the start of step 1 and one at the end
    of step `last`, nothing between (an event pair every step adds host work the decode does not
    do): what a benchmark of ms a token wants. CUDA events on the stream the step runs on, the
    host clock off CUDA; a loop that never returns to the host gives its device stamps
    (`set_stamps`) and the first start and last end are kept. `ms_per_step()` after the run."""

    def __init__(self, last: int):
        self.last, self.on, self.marks = last, True, {}
        self.cuda = torch.cuda.is_available()
        self.source = "cuda-events" if self.cuda else "host-clock"

    def _mark(self):
        if not self.cuda:
            return time.perf_counter_ns()
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream())
        return event

    @contextmanager
    def span(self, i: int):
        if i == 1:
            self.marks["start"] = self._mark()
        yield
        if i == self.last:
            self.marks["end"] = self._mark()

    def end_early(self) -> None:
        pass

    def set_stamps(self, start_ns: list[int], end_ns: list[int], source: str) -> None:
        self.marks = {"start": int(start_ns[0]), "end": int(end_ns[-1])}
        self.source = source

    def ms_per_step(self) -> float:
        """ms from step 1's start to step `last`'s end, over `last`; raises KeyError when the
        run never reached step `last`."""
        start, end = self.marks["start"], self.marks["end"]
        if isinstance(start, int):
            return (end - start) / 1e6 / self.last
        end.synchronize()
        return start.elapsed_time(end) / self.last


def loop_span_window(last: int) -> "ProfilerWindow":
    """No capture range; the loop from step 1 to step `last` timed whole (LoopSpan)."""
    return ProfilerWindow(0, 0, False, timeline=LoopSpan(last))


@dataclass
class ProfilerWindow:
    """Profile steps start+1 .. stop: cudaProfilerStart before step start+1, Stop after step stop.

    Host clock marks at both edges are kept whether or not the window is active (they time it).
    `timeline` records each step's GPU start and end with CUDA events when it is on.
    """

    start: int
    stop: int
    active: bool
    kineto: object = None  # a harness.kineto.KinetoCapture opened and closed at the same edges
    marks_ns: dict = field(default_factory=dict)
    timeline: StepTimeline = field(default_factory=StepTimeline)


def no_window() -> ProfilerWindow:
    return ProfilerWindow(0, 0, False)


def timeline_window() -> ProfilerWindow:
    """No capture range, every step timed on the GPU with CUDA events."""
    return ProfilerWindow(0, 0, False, timeline=StepTimeline(on=True))


@contextmanager
def window_step(window: ProfilerWindow, i: int):
    """Wraps step i; opens or closes the capture range at the window's edges."""
    on = window.active and torch.cuda.is_available()
    if i == window.start + 1:
        if on:
            # The same window as an NVTX range too, for `nsys --capture-range=nvtx`: a capture
            # range by cudaProfilerApi turns CUDA tracing on, one by NVTX does not.
            nvtx.push_range(WINDOW_RANGE, color=WINDOW_COLOR)
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
                nvtx.pop_range()
            if window.kineto is not None:
                window.kineto.stop()


@contextmanager
def whole_run(window: ProfilerWindow):
    """The window around a loop with no host steps (one launch decodes them all): it opens and
    closes as window_step would around steps 1 and N, so it holds the whole run. The caller
    waits for the GPU inside it (the launch returns at once)."""
    on = window.active and torch.cuda.is_available()
    if on:
        nvtx.push_range(WINDOW_RANGE, color=WINDOW_COLOR)
        torch.cuda.cudart().cudaProfilerStart()
    if window.kineto is not None:
        window.kineto.start()
    window.marks_ns["start"] = time.perf_counter_ns()
    try:
        yield
    finally:
        window.marks_ns["stop"] = time.perf_counter_ns()
        if on:
            torch.cuda.cudart().cudaProfilerStop()
            nvtx.pop_range()
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
            nvtx.pop_range()
        if window.kineto is not None:
            window.kineto.stop()
