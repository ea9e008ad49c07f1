"""gapscope's in-program hook. `gapscope profile` puts this directory (which holds only this
file and the package gapscope_hook) first on PYTHONPATH, so Python runs this file at start-up as
`sitecustomize`; it then loads the next sitecustomize on the path, as Python would have. Without
gapscope's environment variables it does nothing else, and it never edits the program.

GAPSCOPE_TWIN_DIR=DIR        the untraced twin (a run without nsys): two CUDA events on the current
                             stream around each step, read at exit into DIR/untraced-<pid>.json
                             (docs/METRICS.md, "Untraced"). The steps are, by the variable set:
  GAPSCOPE_STEP_PATTERN=RE     the NVTX ranges whose message matches RE, opened with nvtx's
                               push_range/pop_range, start_range/end_range or annotate (context
                               manager or decorator), or torch.cuda.nvtx's range_push/range_pop,
                               range_start/range_end or range; the number is RE's group 1
  GAPSCOPE_STEP_FUNCTIONS=M:Q,...  every call of these functions (module M, qualified name Q),
                               numbered by order of call within the thread
  GAPSCOPE_STEP_MARKS=[KEY,...]  steps inferred from the traced run's trace: a boundary at each
                               CUDA graph replay ("graph") or each execution of a source line
                               ("FILE:LINE", the once-a-step sync's), step j from boundary j
                               to j + 1
                             In every twin run the hook follows the program's own capture window
                             (cudaProfilerStart/Stop through torch or cuda-python): each step
                             says whether it lay inside the first start-to-stop, as nsys captures
GAPSCOPE_HOST_FUNCTIONS=M:Q,...  the host table's named code (gapscope_hook/host_times.py):
                             each call an NVTX range in the traced run, timed on the host clock
                             (exclusive, per step) in the twin's
GAPSCOPE_OWN_CODE=N          the program's own code named too (gapscope_hook/own_code.py): every
                             module it imports from outside the standard library and
                             site-packages, at most N functions, and the script's own functions
                             (`__main__`, through sys.monitoring, Python 3.12+); as the host
                             functions, a range a call traced, timed in the twin's; what was named
                             into $GAPSCOPE_RUN_DIR/own_code-PID.json
GAPSCOPE_STEP_DRAFT=M:Q,...  in the twin: the draft's work of speculative decoding; a step
                             function called inside it is no step, the next step starts with it
GAPSCOPE_MAIN_STEPS=Q,...    in the traced run: these functions of `__main__` (step functions
                             nsys cannot trace) an NVTX range a call, `__main__.Q`
GAPSCOPE_SYNC_MARKS=1        in the traced run: torch's sync debug mode ("warn"), and each of its
                             "called a synchronizing CUDA operation" warnings becomes, instead of
                             a printed warning, an NVTX mark `gapscope.sync FILE:LINE FUNCTION`
                             naming the first frame outside torch (docs/PROFILING.md); so does
                             each torch.cuda.synchronize() and Event.synchronize(), which torch
                             does not warn about

The hook itself is the package gapscope_hook beside this file (its __init__ lists the parts),
imported only where one of the variables is set; stdlib only. Any failure of the hook prints one
line and turns it off; the program runs on.
"""

import os
import sys

_HERE = os.path.dirname(os.path.realpath(__file__))


def _chain() -> None:
    """Loads the next sitecustomize on sys.path (a distribution's or a virtualenv's), which this
    file hides, as Python would have loaded it."""
    from importlib.machinery import PathFinder
    from importlib.util import module_from_spec

    rest = [p for p in sys.path if os.path.realpath(p or os.curdir) != _HERE]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if __name__ == "sitecustomize":
    if (os.environ.get("GAPSCOPE_TWIN_DIR") or os.environ.get("GAPSCOPE_SYNC_MARKS") == "1"
            or os.environ.get("GAPSCOPE_HOST_FUNCTIONS") or "GAPSCOPE_OWN_CODE" in os.environ
            or os.environ.get("GAPSCOPE_MAIN_STEPS")):
        try:
            from gapscope_hook import start

            start.install()
        except Exception as e:  # never the program's problem
            print(f"gapscope hook: off ({type(e).__name__}: {e})", file=sys.stderr, flush=True)
    _chain()
