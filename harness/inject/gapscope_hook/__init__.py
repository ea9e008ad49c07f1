"""gapscope's in-program hook, which harness/inject/sitecustomize.py starts in the profiled
program where gapscope's environment asks for it (that file's docstring: the variables). The
harness (harness.instrument.StepTimeline) finds it under this name, `gapscope_hook`, in
sys.modules.

    notes.py        the hook's one-line messages on stderr
    recorder.py     the twin's step boundaries, thread by thread, and the file they make
    marks.py        where the program's calls reach the recorder: step functions wrapped, the
                    harness' own marks, entry points made eager under torch.compile
    nvtx_ranges.py  nvtx's and torch.cuda.nvtx's ranges, the steps among them recorded
    window.py       the program's own capture window (cudaProfilerStart/Stop), as nsys reads it
    step_marks.py   boundaries of steps inferred from the trace: graph replays, a source line
    syncs.py        the traced run's sync marks: each synchronizing call's source line
    host_times.py   the host table's named code: an NVTX range a call traced, timed untraced
    imports.py      callbacks run on a module right after the program imports it
    start.py        install(): which parts the environment turns on

Only the standard library is imported here; torch, nvtx and the step functions' modules are
touched once the program imports them (imports.py), so the program imports and initialises
everything itself, in its own order. Any failure of the hook prints one line and turns it off;
the program runs on.
"""

from .marks import harness_step, harness_timeline

__all__ = ["harness_step", "harness_timeline"]
