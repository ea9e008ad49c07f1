"""install(): the parts of the hook that gapscope's environment turns on (sitecustomize.py's
docstring lists the variables), each on the module it patches, once the program imports it."""

import os
import sys

from . import (
    compiled,
    host_times,
    main_code,
    marks,
    nvtx_ranges,
    own_code,
    speculative,
    step_marks,
    syncs,
    window,
)
from .imports import AfterImport
from .notes import say
from .recorder import Recorder, _since_first, twin_document


def step_functions(value: str) -> list:
    """GAPSCOPE_STEP_FUNCTIONS: "M:Q,M:Q" -> [(M, Q), ...]."""
    out = []
    for item in value.split(","):
        module, _, qualname = item.strip().partition(":")
        if module and qualname:
            out.append((module, qualname))
    return out


def install(environ=os.environ) -> None:
    """Turns on what the environment asks for (GAPSCOPE_TWIN_DIR, GAPSCOPE_HOST_FUNCTIONS,
    GAPSCOPE_OWN_CODE, GAPSCOPE_SYNC_MARKS)."""
    import atexit
    import json

    callbacks = {}

    def on(name, callback):
        callbacks.setdefault(name, []).append(callback)

    twin_dir = environ.get("GAPSCOPE_TWIN_DIR")
    host = environ.get("GAPSCOPE_HOST_FUNCTIONS")
    own_value = environ.get("GAPSCOPE_OWN_CODE")
    functions = step_functions(environ.get("GAPSCOPE_STEP_FUNCTIONS", "")) if twin_dir else []
    if twin_dir:
        pattern = environ.get("GAPSCOPE_STEP_PATTERN") or None
        rec = Recorder(None if functions else pattern)
        marks.use(rec)
        if host is not None:  # the host table's untraced twin: a clock before any wrapping
            host_times.use(host_times.HostClock(None if functions else pattern))
        kind = "function" if functions else "nvtx"
        rec.window = window.Window()
        window.install(on, rec.window)
        # Steps inferred from the traced run's trace: what the inference cut at.
        keys = step_marks.keys_of(environ.get("GAPSCOPE_STEP_MARKS", ""))
        bounds = step_marks.Boundaries(rec.mark, rec.window) if keys else None
        if bounds is not None:
            kind = "marks"
            step_marks.install(on, keys, bounds)

        for module_name, qualname in functions:
            if module_name == "__main__":  # main_code.py's, below
                continue

            def wrap(module, qualname=qualname):
                if not marks.wrap_function(module, qualname):
                    say(f"{module.__name__}:{qualname}: no such function: not timed")
            wrap.__name__ = f"wrap {qualname}"
            on(module_name, wrap)
        for module_name, qualname in step_functions(environ.get("GAPSCOPE_STEP_DRAFT", "")):
            def draft(module, qualname=qualname):
                speculative.wrap_draft(module, qualname)
            draft.__name__ = f"draft {qualname}"
            on(module_name, draft)
        if pattern and not functions:
            on("nvtx", nvtx_ranges.patch_nvtx)
            on("torch.cuda.nvtx", nvtx_ranges.patch_torch_nvtx)
        on("torch._dynamo", marks.disable_dynamo)

        def write():
            if rec.pid != os.getpid():
                return
            document = twin_document(rec, kind)
            if bounds is not None and bounds.pid == os.getpid():
                document["runs"] += bounds.runs(_since_first)
            if host_times.clock() is not None:
                document["host"] = host_times.clock().document()
            # A process that timed no step (torch.compile's worker processes inherit the
            # environment) leaves no file.
            if not any(run["step"] for run in document["runs"]):
                return
            path = os.path.join(twin_dir, f"untraced-{os.getpid()}.json")
            try:
                with open(path, "w") as f:
                    json.dump(document, f)
            except Exception as e:
                say(f"cannot write {path}: {e}")

        atexit.register(write)

        def write_before_torch_exits():
            # Exit handlers run last-registered first: the events are read before those torch
            # and the program registered since start-up.
            atexit.unregister(write)
            atexit.register(write)

        rec.on_first_step = write_before_torch_exits
        os.register_at_fork(after_in_child=rec.reset)
        if bounds is not None:
            bounds.on_first = write_before_torch_exits
            os.register_at_fork(after_in_child=bounds.reset)

    if host:
        host_times.install(on, host)
    own = None
    main_steps = main_code.main_steps(functions)
    main_ranges = [q for q in environ.get("GAPSCOPE_MAIN_STEPS", "").split(",") if q]
    if own_value is not None or main_steps or main_ranges:
        own = install_own_code(on, own_value, main_steps, main_ranges, bool(twin_dir))
        atexit.register(own_code.write, own, environ.get("GAPSCOPE_RUN_DIR"))
    if host or own_value is not None or functions:
        on("torch", host_times.watch_compiling)
        on("torch", compiled.patch_compile)
    if not twin_dir and (host or own_value is not None):
        def accepted(module):
            speculative.patch_update(module, speculative.nvtx_mark)
        accepted.__name__ = "mark the tokens each verification accepts"
        on(speculative.MODULE, accepted)

    if environ.get("GAPSCOPE_SYNC_MARKS") == "1":
        import warnings

        syncs.install_sync_marks(warnings, syncs._torch_mark)
        on("torch", syncs.enable_sync_debug)
        on("torch", syncs.mark_device_and_event_syncs)

    if callbacks or own is not None:
        finder = AfterImport(callbacks, own)
        # list.insert, not sys.meta_path's own: under nsys's function trace sys.meta_path is a
        # list that wraps each finder inserted into it, so that the loader of every spec it
        # finds decorates the traced functions; ours hands on the spec of a finder nsys already
        # wrapped, and wrapped a second time its loader would decorate them twice (a range
        # inside a range of the same name, each traced call counted twice).
        list.insert(sys.meta_path, 0, finder)
        for name in callbacks:
            finder.run_now(name)



def install_own_code(on, value: str | None, main_steps: list, main_ranges: list, twin: bool):
    """The program's own modules named as they are imported and the script's own functions
    through sys.monitoring (own_code.py, main_code.py). `value` None: the script's step functions
    alone (`main_steps` in a twin, `main_ranges` in the traced run: --step-function __main__:Q).
    The OwnCode record, for the file written at exit."""
    own = own_code.OwnCode(own_code.limit_of(value or ""))
    if value is None:
        own.wants = lambda spec: False
    clock = host_times.clock()
    enter = leave = None
    if clock is not None and value is not None:
        enter, leave = clock.enter, clock.exit
    elif not twin and (value is not None or main_ranges):
        enter, leave = main_code.lazy_nvtx()

    only = None if value is not None else frozenset(main_ranges)
    calls = main_code.MainCalls(enter, leave, marks.step_begin, marks.step_end, main_steps, only)
    why = main_code.watch(calls)
    # Why not (an older Python) goes to the record, which the report says once, not to the
    # program's stderr in every process it starts.
    own.main = {"named": why is None and enter is not None, "why": why, "functions": calls.seen}
    return own
