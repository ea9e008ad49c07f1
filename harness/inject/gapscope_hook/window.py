"""The program's own capture window, as nsys reads it: `gapscope profile` captures with
`--capture-range=cudaProfilerApi --capture-range-end=stop`, so the capture runs from the first
cudaProfilerStart to the first cudaProfilerStop after it; a start while it runs, a stop before
it, and any start or stop after it change nothing (nsys captures once, the program runs on).

The twin's runs see the same calls where the program makes them through torch:
torch.cuda.profiler.start/stop (its profile() context calls them), torch.cuda.cudart()'s
cudaProfilerStart/Stop (torch._C._cudart), and cuda-python's runtime bindings. Each step records
the phase at its start and at its end; it is in the window where both are OPEN, as the traced run
holds only the steps wholly inside the capture.
"""

import threading

from .notes import say

BEFORE, OPEN, CLOSED = 0, 1, 2


class Window:
    """The first start-to-stop of the process, in program order."""

    def __init__(self):
        self.phase = BEFORE
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self.phase == BEFORE:
                self.phase = OPEN

    def stop(self) -> None:
        with self._lock:
            if self.phase == OPEN:
                self.phase = CLOSED

    def document(self) -> dict:
        """The twin file's `profiler_window`: whether the program opened and closed it."""
        return {"started": self.phase != BEFORE, "stopped": self.phase == CLOSED}


def _wrap(owner, name: str, before) -> bool:
    """owner.name, calling before() first; False where it is not there or cannot be replaced
    (a wrapper already in place counts as done)."""
    fn = getattr(owner, name, None)
    if fn is None:
        return False
    if getattr(fn, "__gapscope_window__", False):
        return True

    def call(*args, **kwargs):
        before()
        return fn(*args, **kwargs)

    call.__gapscope_window__ = True
    call.__name__ = getattr(fn, "__name__", name)
    call.__doc__ = getattr(fn, "__doc__", None)
    try:
        setattr(owner, name, call)
    except (AttributeError, TypeError) as e:
        say(f"cannot follow {name} ({e}): the twin's window is the whole run")
        return False
    return True


def follow(owner, window: Window, start: str = "cudaProfilerStart",
           stop: str = "cudaProfilerStop") -> None:
    """The window follows owner's start and stop calls."""
    _wrap(owner, start, window.start)
    _wrap(owner, stop, window.stop)


def install(on, window: Window) -> None:
    """Follows the program's calls into each module that opens or closes the window, as each is
    imported (`on(module name, callback)`: start.install's)."""

    def torch_profiler(module):
        follow(module, window, "start", "stop")

    def torch_cudart(module):
        runtime = getattr(module, "_cudart", None)  # torch.cuda's handle on torch._C._cudart
        if runtime is not None:
            follow(runtime, window)

    def cuda_python(module):
        follow(module, window)

    torch_profiler.__name__ = "follow torch.cuda.profiler"
    torch_cudart.__name__ = "follow torch.cuda.cudart()"
    cuda_python.__name__ = "follow cuda-python's cudaProfilerStart"
    on("torch.cuda.profiler", torch_profiler)
    on("torch.cuda", torch_cudart)
    for name in ("cuda.cudart", "cuda.bindings.runtime"):
        on(name, cuda_python)
