"""Instrument your own decode loop for gapscope in three lines (the public API).

    from harness.profiling import profiled_steps

    with profiled_steps(window=(30, 50), timeline=True) as prof:
        for i in range(1, max_new_tokens + 1):
            with prof.step(i):                      # NVTX `Step i`: what `--steps` finds
                logits = model(next_ids, past_key_values=cache, use_cache=True).logits
                with prof.check():                  # NVTX `Check Stop Condition`
                    if bool(finished.all()):        # the stop check (a host sync)
                        break
    spans = prof.timeline()   # per-step GPU start/end ns from CUDA events, read after the loop

Then `gapscope profile -- python your_loop.py` captures steps 31..50 (window=(30, 50): the
capture opens before step 31 and closes after step 50, as the harness' --window 30:50 does) and
analyses them. `window=None` leaves cudaProfilerStart/Stop alone: profile with `--range all`.

Needs `nvtx`; importing it needs neither torch nor transformers nor the rest of the harness. The
window and the timeline need torch, and act only when the loop runs on CUDA (CUDA initialised when
the first step begins); on the CPU, and with `enabled=False`, everything here does nothing. With no
profiler attached the NVTX ranges cost a function call each.
"""

from contextlib import contextmanager, nullcontext

import nvtx

try:  # torch (and with it harness.instrument's ranges and window) only when installed
    import torch

    from . import instrument
except ImportError:
    torch = instrument = None

__all__ = ["ProfiledSteps", "profiled_steps"]


@contextmanager
def _nvtx_range(message: str, color: str):
    nvtx.push_range(message, color=color)
    try:
        yield
    finally:
        nvtx.pop_range()


# Without torch: the same names and colours as harness.instrument's ranges.
def _step_range(i: int):
    return instrument.step_range(i) if instrument else _nvtx_range(f"Step {i}", "blue")


def _forward_range():
    return instrument.forward_range() if instrument else _nvtx_range("Model Forward", "green")


def _check_range():
    return instrument.check_range() if instrument else _nvtx_range("Check Stop Condition", "red")


def _cuda_in_use() -> bool:
    return torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized()


class ProfiledSteps:
    """What `profiled_steps` yields: `step(i)`, `forward()`, `check()`, and after the loop
    `timeline()`. Make it with `profiled_steps`, which also closes the window on the way out."""

    def __init__(self, window: tuple[int, int] | None, timeline: bool, enabled: bool):
        if window is not None and not (0 <= window[0] < window[1]):
            raise ValueError(f"window must be (start, stop) with 0 <= start < stop, got {window}")
        self.enabled = enabled
        self._window_steps = window
        self._want_timeline = timeline
        self._window = None   # harness.instrument.ProfilerWindow, set at the first step
        self._cuda = None     # decided at the first step: the model is on its device by then
        self._steps = None    # harness.instrument.StepTimeline, on CUDA with timeline=True
        self._last_step = 0
        self._timeline = None

    def _begin(self) -> None:
        self._cuda = _cuda_in_use()
        if instrument is not None:
            start, stop = self._window_steps or (0, 0)
            active = self._cuda and self._window_steps is not None
            self._window = instrument.ProfilerWindow(start, stop, active=active)
            if self._cuda and self._want_timeline:
                self._steps = instrument.StepTimeline(on=True)

    @contextmanager
    def step(self, i: int):
        """Step i: the NVTX range `Step i`, the window's edges, and its two CUDA events."""
        if not self.enabled:
            yield
            return
        if self._cuda is None:
            self._begin()
        edges = instrument.window_step(self._window, i) if self._window else nullcontext()
        timed = self._steps.span(i) if self._steps else nullcontext()
        with edges, _step_range(i), timed:
            try:
                yield
            finally:
                self._last_step = i

    def forward(self):
        """The model call inside a step (NVTX `Model Forward`); optional."""
        return _forward_range() if self.enabled else nullcontext()

    def check(self):
        """The stop check inside a step (NVTX `Check Stop Condition`): what `--check` finds. The
        step's timeline span ends here, as the harness' does: the check's copy to the host and
        its wait belong to the bubble."""
        if self._steps is not None:
            self._steps.end_early()
        return _check_range() if self.enabled else nullcontext()

    def close(self) -> None:
        """A loop that ended inside the window still closes the capture range it opened."""
        if self._window is not None:
            instrument.close_window(self._window, self._last_step)

    def timeline(self) -> dict | None:
        """{"step": [...], "start_ns": [...], "end_ns": [...]}: each step's first and last event
        on the GPU clock, ns from the first step's start (one `runs` entry of the untraced
        per-step timeline file). Reading waits for the last event, so call it after the loop.
        None when no events were recorded: timeline=False, disabled, or not on CUDA."""
        if self._timeline is None and self._steps is not None and self._steps.marks:
            self._timeline = self._steps.read()  # harness.instrument.StepTimeline's
        return self._timeline


@contextmanager
def profiled_steps(window: tuple[int, int] | None = (30, 50), timeline: bool = False,
                   enabled: bool = True):
    """Yields a ProfiledSteps for one decode loop.

    window: (start, stop): cudaProfilerStart before step start+1, cudaProfilerStop after step
        stop (after a device sync, so the last step's kernels land inside the capture). None: no
        window; capture the whole run (`gapscope profile --range all`).
    timeline: record a CUDA event before and after each step, on the current stream, read only
        by `timeline()` after the loop (no sync is added inside it).
    enabled: False makes every call a no-op (one flag to turn instrumentation off).
    """
    prof = ProfiledSteps(window, timeline, enabled)
    try:
        yield prof
    finally:
        prof.close()
