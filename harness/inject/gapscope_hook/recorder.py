"""The untraced twin's step boundaries of one process, thread by thread, on one clock each (CUDA
events on the current stream, else the host clock), and the twin file they make at exit
(analysis.readers.untraced reads it; docs/METRICS.md, "Untraced")."""

import os
import sys
import time

from .notes import say
from .window import OPEN

FORMAT = "gapscope-untraced-steps/1"
# function_enter's token for a step function's call inside the draft's work (speculative.py):
# no step.
DRAFT = "draft"


def default_mark():
    """(clock, mark): a CUDA event recorded on the current stream once the program has CUDA
    running, else the host clock. The event is read only at exit: no sync is added. Inside a
    CUDA graph capture nothing is recorded ("capturing"): the capture's run is not a step."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                if torch.cuda.is_current_stream_capturing():
                    return "capturing", None
                event = torch.cuda.Event(enable_timing=True)
                event.record(torch.cuda.current_stream())
                return "cuda-events", event
        except Exception:  # a CPU-only torch, or CUDA gone: the host clock
            pass
    return "host-clock", time.perf_counter_ns()


class _Run:
    """One sequence of steps of one thread, on one clock: a `runs` entry of the twin file."""

    def __init__(self, clock: str):
        self.clock = clock
        self.steps = []  # (number, start mark, end mark, in the program's capture window)
        self.last = None


class _Thread:
    def __init__(self):
        self.name = None
        self.order = None   # order of its first step within the process
        self.runs = []
        self.calls = 0      # steps numbered by order (functions, unnumbered ranges)
        self.open = 0       # steps open on this thread: only the outermost is a step
        self.stacks = {}    # NVTX domain -> the open ranges' tokens (None: not a step)
        self.draft = 0      # the draft's work open (speculative.py): its step calls are none
        self.pending = None  # (mark, phase) where the draft's work began, for the next step


class Recorder:
    """The step boundaries of one process, thread by thread. `mark` is injectable (tests)."""

    def __init__(self, pattern=None, mark=default_mark):
        import re
        import threading

        self.pattern = re.compile(pattern) if pattern else None
        self.mark = mark
        self.harness_owns_steps = False
        self._lock = threading.Lock()
        self._local = threading.local()
        self._threads = []
        self._started = {}  # start_range handles -> their tokens
        self.pid = os.getpid()
        self.on_first_step = None  # called once, at the process's first step
        self.window = None  # the program's capture window (window.Window), where followed

    def reset(self) -> None:
        """A forked child starts empty: the steps so far are its parent's."""
        import threading

        self._lock = threading.Lock()
        self._local = threading.local()
        self._threads = []
        self._started = {}
        self.pid = os.getpid()

    def _thread(self) -> _Thread:
        t = getattr(self._local, "t", None)
        if t is None:
            t = self._local.t = _Thread()
            with self._lock:
                self._threads.append(t)
        return t

    # Steps ---------------------------------------------------------------------------------
    def phase(self) -> int:
        """The window's phase now (window.OPEN: inside it); 0 where no window is followed."""
        return self.window.phase if self.window is not None else 0

    def _begin(self, t: _Thread, number=None):
        if number is None:
            t.calls += 1
            number = t.calls
        t.open += 1
        start = t.pending or (self.mark(), self.phase())
        t.pending = None
        return [number, start[0], start[1]]

    def _end(self, t: _Thread, token) -> None:
        t.open -= 1
        self._add(t, token[0], token[1], self.mark(), (token[2], self.phase()))

    def _add(self, t: _Thread, number: int, start, end, phases=(0, 0)) -> None:
        if start[0] != end[0] or start[0] == "capturing":  # no common clock, or no time at all
            return
        if t.order is None:
            import threading

            with self._lock:
                t.order = sum(1 for other in self._threads if other.order is not None)
                first, self.on_first_step = self.on_first_step, None
            t.name = threading.current_thread().name
            if first is not None:
                first()
        run = t.runs[-1] if t.runs else None
        # A number that does not grow starts a new sequence (a second loop, a second generate).
        if run is None or run.clock != start[0] or number <= run.last:
            run = _Run(start[0])
            t.runs.append(run)
        run.steps.append((number, start[1], end[1], phases == (OPEN, OPEN)))
        run.last = number

    def draft_enter(self) -> None:
        """The draft's work begins (speculative.py): the next step starts here, unless a step
        is open or the draft's work already began."""
        t = self._thread()
        if not t.open and t.pending is None and not t.draft:
            t.pending = (self.mark(), self.phase())
        t.draft += 1

    def draft_exit(self) -> None:
        t = self._thread()
        t.draft = max(t.draft - 1, 0)

    def function_enter(self):
        t = self._thread()
        if t.draft:
            return DRAFT
        if t.open:
            t.open += 1
            return None
        return self._begin(t)

    def function_exit(self, token) -> None:
        t = self._thread()
        if token is DRAFT:
            return
        if token is None:
            t.open -= 1
        else:
            self._end(t, token)

    def _range_token(self, t: _Thread, message):
        if self.pattern is None or self.harness_owns_steps or t.open or not isinstance(message,
                                                                                      str):
            return None
        found = self.pattern.search(message)
        if found is None:
            return None
        group = found.group(1) if self.pattern.groups else None
        return self._begin(t, int(group) if group is not None and group.isdigit() else None)

    def range_push(self, message, domain=None) -> None:
        t = self._thread()
        t.stacks.setdefault(domain, []).append(self._range_token(t, message))

    def range_pop(self, domain=None) -> None:
        t = self._thread()
        stack = t.stacks.get(domain)
        if stack:
            token = stack.pop()
            if token is not None:
                self._end(t, token)

    def range_start(self, message, handle) -> None:
        t = self._thread()
        token = self._range_token(t, message)
        if token is not None:
            # A start/end range may end on another thread: it is its starting thread's step.
            t.open -= 1
            self._started[_handle_key(handle)] = (t, token)

    def range_end(self, handle) -> None:
        found = self._started.pop(_handle_key(handle), None)
        if found is not None:
            t, token = found
            self._add(t, token[0], token[1], self.mark(), (token[2], self.phase()))

    def harness_step(self, number: int, start, end) -> None:
        """A step the harness timed itself (harness.instrument.StepTimeline): its own marks."""
        clock = "host-clock" if isinstance(start, int) else "cuda-events"
        now = self.phase()
        self._add(self._thread(), number, (clock, start), (clock, end), (now, now))

    # Exit ----------------------------------------------------------------------------------
    def runs(self) -> list:
        """The `runs` of the twin file: ns from each run's first mark, thread by thread in order
        of their first step. A run that cannot be read (CUDA gone) is left out, said once."""
        out = []
        with self._lock:
            threads = sorted((t for t in self._threads if t.order is not None),
                             key=lambda t: t.order)
        for t in threads:
            for sequence, run in enumerate(list(t.runs)):
                steps = list(run.steps)
                try:
                    start_ns, end_ns = _since_first(run.clock, steps)
                except Exception as e:
                    say(f"cannot read the CUDA events of thread {t.name} ({e}): left out")
                    continue
                out.append({"thread": t.name, "thread_order": t.order, "sequence": sequence,
                            "clock": run.clock, "step": [s[0] for s in steps],
                            "start_ns": start_ns, "end_ns": end_ns})
                if self.window is not None:  # which steps lay inside the program's window
                    out[-1]["in_window"] = [s[3] for s in steps]
        return out


def _handle_key(handle):
    try:
        hash(handle)
        return handle
    except TypeError:
        return id(handle)


def _since_first(clock: str, steps: list) -> tuple:
    if clock == "host-clock":
        t0 = steps[0][1]
        return [s[1] - t0 for s in steps], [s[2] - t0 for s in steps]
    t0 = steps[0][1]
    for _, start, end, *_ in steps:
        start.synchronize()
        end.synchronize()
    return ([round(t0.elapsed_time(s[1]) * 1e6) for s in steps],
            [round(t0.elapsed_time(s[2]) * 1e6) for s in steps])


def twin_document(recorder: Recorder, kind: str) -> dict:
    window = recorder.window.document() if recorder.window is not None else None
    return {"format": FORMAT, "source": "hook", "kind": kind, "pid": os.getpid(),
            "argv": list(sys.argv), "window": None, "profiler_window": window,
            "runs": recorder.runs()}

