"""gapscope's in-program hook. `gapscope profile` puts this directory (which holds nothing else)
first on PYTHONPATH, so Python runs this file at start-up as `sitecustomize`; it then loads the
next sitecustomize on the path, as Python would have. Without gapscope's environment variables
it does nothing else, and it never edits the program.

GAPSCOPE_TWIN_DIR=DIR        the untraced twin (a run without nsys): two CUDA events on the current
                             stream around each step, read at exit into DIR/untraced-<pid>.json
                             (docs/METRICS.md, "Untraced"). The steps are, by the variable set:
  GAPSCOPE_STEP_PATTERN=RE     the NVTX ranges whose message matches RE, opened with nvtx's
                               push_range/pop_range, start_range/end_range or annotate (context
                               manager or decorator), or torch.cuda.nvtx's range_push/range_pop,
                               range_start/range_end or range; the number is RE's group 1
  GAPSCOPE_STEP_FUNCTIONS=M:Q,...  every call of these functions (module M, qualified name Q),
                               numbered by order of call within the thread
GAPSCOPE_SYNC_MARKS=1        in the traced run: torch's sync debug mode ("warn"), and each of its
                             "called a synchronizing CUDA operation" warnings becomes, instead of
                             a printed warning, an NVTX mark `gapscope.sync FILE:LINE FUNCTION`
                             naming the first frame outside torch (docs/PROFILING.md); so does
                             each torch.cuda.synchronize() and Event.synchronize(), which torch
                             does not warn about

Only the standard library is imported here; torch, nvtx and the step functions' modules are
touched once the program imports them (an import hook), so the program imports and initialises
everything itself, in its own order. Any failure of the hook prints one line and turns it off;
the program runs on.
"""

import os
import sys
import time

FORMAT = "gapscope-untraced-steps/1"
SYNC_WARNING = "called a synchronizing CUDA operation"
SYNC_MARK = "gapscope.sync"
# The harness (harness.instrument.StepTimeline) finds the hook under this name.
MODULE_NAME = "gapscope_hook"

_HERE = os.path.dirname(os.path.realpath(__file__))
_THIS_FILE = os.path.abspath(__file__)


def _say(message: str) -> None:
    print(f"gapscope hook: {message}", file=sys.stderr, flush=True)


# --- the steps -----------------------------------------------------------------------------


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
        self.steps = []  # (number, start mark, end mark)
        self.last = None


class _Thread:
    def __init__(self):
        self.name = None
        self.order = None   # order of its first step within the process
        self.runs = []
        self.calls = 0      # steps numbered by order (functions, unnumbered ranges)
        self.open = 0       # steps open on this thread: only the outermost is a step
        self.stacks = {}    # NVTX domain -> the open ranges' tokens (None: not a step)


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
    def _begin(self, t: _Thread, number=None):
        if number is None:
            t.calls += 1
            number = t.calls
        t.open += 1
        return [number, self.mark()]

    def _end(self, t: _Thread, token) -> None:
        t.open -= 1
        self._add(t, token[0], token[1], self.mark())

    def _add(self, t: _Thread, number: int, start, end) -> None:
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
        run.steps.append((number, start[1], end[1]))
        run.last = number

    def function_enter(self):
        t = self._thread()
        if t.open:
            t.open += 1
            return None
        return self._begin(t)

    def function_exit(self, token) -> None:
        t = self._thread()
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
            self._add(t, token[0], token[1], self.mark())

    def harness_step(self, number: int, start, end) -> None:
        """A step the harness timed itself (harness.instrument.StepTimeline): its own marks."""
        clock = "host-clock" if isinstance(start, int) else "cuda-events"
        self._add(self._thread(), number, (clock, start), (clock, end))

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
                    _say(f"cannot read the CUDA events of thread {t.name} ({e}): left out")
                    continue
                out.append({"thread": t.name, "thread_order": t.order, "sequence": sequence,
                            "clock": run.clock, "step": [s[0] for s in steps],
                            "start_ns": start_ns, "end_ns": end_ns})
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
    for _, start, end in steps:
        start.synchronize()
        end.synchronize()
    return ([round(t0.elapsed_time(s[1]) * 1e6) for s in steps],
            [round(t0.elapsed_time(s[2]) * 1e6) for s in steps])


def twin_document(recorder: Recorder, kind: str) -> dict:
    return {"format": FORMAT, "source": "hook", "kind": kind, "pid": os.getpid(),
            "argv": list(sys.argv), "window": None, "runs": recorder.runs()}


def harness_timeline() -> bool:
    """The harness times its own steps (StepTimeline on): when the twin is recording, the hook
    from then on leaves NVTX ranges alone and takes the harness' marks instead (harness_step),
    so no step gets two pairs of events."""
    if _REC is None:
        return False
    _REC.harness_owns_steps = True
    return True


def harness_step(number: int, start, end) -> None:
    if _REC is not None:
        _REC.harness_step(number, start, end)


# The recorder's entry points, as module globals the wrappers look up at each call, so that
# they can be swapped for torch._dynamo.disable'd ones once dynamo is imported: a compiled
# region then breaks its graph at the boundary and records the event eagerly, in order, as
# nsys's own function trace (an NVTX push/pop in the same place) makes it.
_REC = None


def _enter():
    return _REC.function_enter()


def _exit(token):
    _REC.function_exit(token)


def _push(message, domain):
    _REC.range_push(message, domain)


def _pop(domain):
    _REC.range_pop(domain)


def step_wrapper(fn):
    """fn, each call a step (only the outermost one where it nests)."""
    import functools

    @functools.wraps(fn)
    def gapscope_step(*args, **kwargs):
        token = _enter()
        try:
            return fn(*args, **kwargs)
        finally:
            _exit(token)

    gapscope_step.__gapscope_step__ = True
    return gapscope_step


def wrap_function(module, qualname: str) -> bool:
    """Replaces MODULE's QUALNAME (a function, or a method of a class in it) by its step wrapper.
    False when the name is not there."""
    parts = qualname.split(".")
    owner = module
    for part in parts[:-1]:
        owner = getattr(owner, part, None)
        if owner is None:
            return False
    name = parts[-1]
    raw = vars(owner).get(name) if hasattr(owner, "__dict__") else None
    if raw is None:
        raw = getattr(owner, name, None)
    if raw is None:
        return False
    if isinstance(raw, (staticmethod, classmethod)):
        if getattr(raw.__func__, "__gapscope_step__", False):
            return True
        wrapped = type(raw)(step_wrapper(raw.__func__))
    elif callable(raw):
        if getattr(raw, "__gapscope_step__", False):
            return True
        wrapped = step_wrapper(raw)
    else:
        return False
    setattr(owner, name, wrapped)
    return True


def _arg(args: tuple, kwargs: dict, position: int, name: str):
    return args[position] if len(args) > position else kwargs.get(name)


def patch_nvtx(module) -> None:
    """nvtx's push_range/pop_range, start_range/end_range and annotate, recording the steps
    among the ranges the program opens (the ranges themselves still go to NVTX)."""
    import functools

    push, pop, start, end = (module.push_range, module.pop_range, module.start_range,
                             module.end_range)

    def push_range(*args, **kwargs):
        _push(_arg(args, kwargs, 0, "message"), _arg(args, kwargs, 2, "domain"))
        return push(*args, **kwargs)

    def pop_range(*args, **kwargs):
        try:
            return pop(*args, **kwargs)
        finally:
            _pop(_arg(args, kwargs, 0, "domain"))

    def start_range(*args, **kwargs):
        handle = start(*args, **kwargs)
        _REC.range_start(_arg(args, kwargs, 0, "message"), handle)
        return handle

    def end_range(*args, **kwargs):
        _REC.range_end(_arg(args, kwargs, 0, "range_id"))
        return end(*args, **kwargs)

    base = module.annotate

    class annotate(base):
        __doc__ = base.__doc__

        def __init__(self, message=None, color=None, domain=None, category=None, payload=None):
            super().__init__(message, color, domain, category, payload)
            self._gapscope = (message, domain)

        def __enter__(self):
            _push(*self._gapscope)
            return super().__enter__()

        def __exit__(self, *exc):
            try:
                return super().__exit__(*exc)
            finally:
                _pop(self._gapscope[1])

        def __call__(self, func):
            inner = super().__call__(func)
            message = self._gapscope[0] if self._gapscope[0] is not None else func.__name__
            domain = self._gapscope[1]

            @functools.wraps(func)
            def annotated(*args, **kwargs):
                _push(message, domain)
                try:
                    return inner(*args, **kwargs)
                finally:
                    _pop(domain)

            return annotated

    targets = [module] + [m for m in (getattr(module, "nvtx", None),) if m is not None]
    for target in targets:
        for name, value in (("push_range", push_range), ("pop_range", pop_range),
                            ("start_range", start_range), ("end_range", end_range),
                            ("annotate", annotate)):
            if hasattr(target, name):
                setattr(target, name, value)


def patch_torch_nvtx(module) -> None:
    """torch.cuda.nvtx's range_push/range_pop/range_start/range_end (its `range` calls the
    first two by name, so it is covered). Its ranges are in NVTX's default domain."""
    push, pop, start, end = (module.range_push, module.range_pop, module.range_start,
                             module.range_end)

    def range_push(msg):
        _push(msg, None)
        return push(msg)

    def range_pop():
        try:
            return pop()
        finally:
            _pop(None)

    def range_start(msg):
        handle = start(msg)
        _REC.range_start(msg, handle)
        return handle

    def range_end(range_id):
        _REC.range_end(range_id)
        return end(range_id)

    module.range_push, module.range_pop = range_push, range_pop
    module.range_start, module.range_end = range_start, range_end


def disable_dynamo(dynamo) -> None:
    """Once torch._dynamo is imported: the recorder's entry points run eagerly, never traced."""
    global _enter, _exit, _push, _pop
    _enter, _exit, _push, _pop = (dynamo.disable(f) for f in (_enter, _exit, _push, _pop))
    for name in ("range_start", "range_end"):
        setattr(_REC, name, dynamo.disable(getattr(_REC, name)))


# --- the sync's source line ----------------------------------------------------------------


_STDLIB = os.path.dirname(os.__file__)


def _internal(path: str, torch_dir: str | None) -> bool:
    """A frame to walk past: torch's own, this hook's, the warnings machinery's, or code torch
    generated (fx graphs)."""
    if path == _THIS_FILE or path.startswith("<eval_with_key>") or path.startswith("<frozen "):
        return True
    if os.path.basename(path) in ("warnings.py", "_py_warnings.py") and (
            os.path.dirname(path) == _STDLIB):
        return True
    return bool(torch_dir) and path.startswith(torch_dir)


# (file, torch's folder) -> the file as the mark names it, or None for a frame to walk past:
# a sync a step repeats the same few lines, and path work costs more than the walk.
_SHOWN = {}


def _shown(path: str, torch_dir: str | None):
    key = (path, torch_dir)
    if key not in _SHOWN:
        _SHOWN[key] = None if _internal(path, torch_dir) else (
            path if path.startswith("<") else os.path.abspath(path))
    return _SHOWN[key]


def sync_mark_message(frame, torch_dir: str | None) -> str | None:
    """`gapscope.sync FILE:LINE FUNCTION` for the first frame at or above `frame` outside torch
    (FILE absolute, FUNCTION its qualified name); None when there is none."""
    while frame is not None:
        code = frame.f_code
        where = _shown(code.co_filename, torch_dir)
        if where is not None:
            name = getattr(code, "co_qualname", code.co_name)
            return f"{SYNC_MARK} {where}:{frame.f_lineno} {name}"
        frame = frame.f_back
    return None


_TORCH_DIR = []


def _torch_dir() -> str | None:
    """torch's package folder (with a trailing separator), once torch is imported."""
    if not _TORCH_DIR:
        torch = sys.modules.get("torch")
        path = getattr(torch, "__file__", None)
        if not path:
            return None
        _TORCH_DIR.append(os.path.dirname(os.path.abspath(path)) + os.sep)
    return _TORCH_DIR[0]


def install_sync_marks(warnings_module, mark) -> None:
    """The display of torch's sync warning becomes `mark(message)`; every other warning is shown
    as before. The filter `always`, for that message only, lets each sync through (the default
    shows a warning once per line)."""
    warnings_module.filterwarnings("always", message=".*" + SYNC_WARNING)
    name = "_showwarnmsg" if hasattr(warnings_module, "_showwarnmsg") else None
    if name is not None:
        shown = warnings_module._showwarnmsg

        def _showwarnmsg(msg):
            if SYNC_WARNING in str(msg.message):
                try:
                    text = sync_mark_message(sys._getframe(1), _torch_dir())
                    if text is not None:
                        mark(text)
                    return
                except Exception:
                    pass
            shown(msg)

        warnings_module._showwarnmsg = _showwarnmsg
    else:  # no private hook: the public one
        show = warnings_module.showwarning

        def showwarning(message, category, filename, lineno, file=None, line=None):
            if SYNC_WARNING in str(message):
                text = sync_mark_message(sys._getframe(1), _torch_dir())
                if text is not None:
                    mark(text)
                return
            show(message, category, filename, lineno, file, line)

        warnings_module.showwarning = showwarning


def _torch_mark(text: str) -> None:
    sys.modules["torch"].cuda.nvtx.mark(text)


def mark_unwarned_syncs(torch, mark) -> None:
    """torch.cuda.synchronize() and Event.synchronize() wait without torch's warning (device and
    event syncs do not pass through c10's warn_or_error_on_sync, stream syncs and copies do):
    each call is marked the same way by wrapping them, after the wait, as the warning is."""
    import functools

    compiler = getattr(torch, "compiler", None)
    compiling = getattr(compiler, "is_compiling", None) or (lambda: False)

    def marking(fn):
        @functools.wraps(fn)
        def synchronize(*args, **kwargs):
            if compiling():  # traced by dynamo: the call as it was, no frame walk in a graph
                return fn(*args, **kwargs)
            try:
                return fn(*args, **kwargs)
            finally:
                text = sync_mark_message(sys._getframe(1), _torch_dir())
                if text is not None:
                    mark(text)

        return synchronize

    torch.cuda.synchronize = marking(torch.cuda.synchronize)
    torch.cuda.Event.synchronize = marking(torch.cuda.Event.synchronize)


def mark_device_and_event_syncs(torch) -> None:
    mark_unwarned_syncs(torch, _torch_mark)


def enable_sync_debug(torch) -> None:
    """torch's sync debug mode "warn", set when the program initialises CUDA (never before: the
    setter itself would initialise it). Queued with torch.cuda's own lazy calls."""

    def warn_on_sync():
        try:
            import warnings

            # torch says once that the mode is a prototype: not the program's output.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch._C._cuda_set_sync_debug_mode(1)

            # The program's filters may have come first since start-up: ours goes in front.
            warnings.filterwarnings("always", message=".*" + SYNC_WARNING)
        except Exception as e:
            _say(f"no sync lines: torch's sync debug mode failed ({e})")

    try:
        torch.cuda._lazy_call(warn_on_sync)
    except Exception as e:
        _say(f"no sync lines: cannot wait for CUDA's start in this torch ({e})")


# --- after-import callbacks ----------------------------------------------------------------


class _AfterImport:
    """A meta-path finder that runs callbacks on a module right after it executes (the module's
    own finder and loader do the import)."""

    def __init__(self, callbacks: dict):
        self.callbacks = callbacks  # module name -> [callback(module)]
        self._busy = set()

    def find_spec(self, name, path=None, target=None):
        if name not in self.callbacks or name in self._busy:
            return None
        self._busy.add(name)
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.discard(name)
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, self.callbacks[name])
        return spec

    def run_now(self, name: str) -> None:
        """For a module imported before the hook was installed."""
        module = sys.modules.get(name)
        if module is not None:
            _run_callbacks(self.callbacks.get(name, []), module)


def _run_callbacks(callbacks, module) -> None:
    for callback in callbacks:
        try:
            callback(module)
        except Exception as e:
            _say(f"{getattr(module, '__name__', module)}: {callback.__name__} failed ({e}): "
                 "that part of the hook is off")


class _Loader:
    def __init__(self, loader, callbacks):
        self.loader = loader
        self.callbacks = callbacks

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        # The module keeps its own loader, as if the hook had never been there.
        module.__loader__ = self.loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        # A module may put another object in its place (torch.backends.cudnn does).
        _run_callbacks(self.callbacks, sys.modules.get(module.__name__, module))


# --- start-up ------------------------------------------------------------------------------


def step_functions(value: str) -> list:
    """GAPSCOPE_STEP_FUNCTIONS: "M:Q,M:Q" -> [(M, Q), ...]."""
    out = []
    for item in value.split(","):
        module, _, qualname = item.strip().partition(":")
        if module and qualname:
            out.append((module, qualname))
    return out


def install(environ=os.environ) -> None:
    import atexit
    import json

    global _REC
    callbacks = {}

    def on(name, callback):
        callbacks.setdefault(name, []).append(callback)

    twin_dir = environ.get("GAPSCOPE_TWIN_DIR")
    if twin_dir:
        functions = step_functions(environ.get("GAPSCOPE_STEP_FUNCTIONS", ""))
        pattern = environ.get("GAPSCOPE_STEP_PATTERN") or None
        _REC = Recorder(None if functions else pattern)
        kind = "function" if functions else "nvtx"

        for module_name, qualname in functions:
            def wrap(module, qualname=qualname):
                if not wrap_function(module, qualname):
                    _say(f"{module.__name__}:{qualname}: no such function: not timed")
            wrap.__name__ = f"wrap {qualname}"
            on(module_name, wrap)
        if pattern and not functions:
            on("nvtx", patch_nvtx)
            on("torch.cuda.nvtx", patch_torch_nvtx)
        on("torch._dynamo", disable_dynamo)

        def write():
            if _REC.pid != os.getpid():
                return
            document = twin_document(_REC, kind)
            # A process that timed no step (torch.compile's worker processes inherit the
            # environment) leaves no file.
            if not any(run["step"] for run in document["runs"]):
                return
            path = os.path.join(twin_dir, f"untraced-{os.getpid()}.json")
            try:
                with open(path, "w") as f:
                    json.dump(document, f)
            except Exception as e:
                _say(f"cannot write {path}: {e}")

        atexit.register(write)

        def write_before_torch_exits():
            # Exit handlers run last-registered first: the events are read before those torch
            # and the program registered since start-up.
            atexit.unregister(write)
            atexit.register(write)

        _REC.on_first_step = write_before_torch_exits
        os.register_at_fork(after_in_child=_REC.reset)

    if environ.get("GAPSCOPE_SYNC_MARKS") == "1":
        import warnings

        install_sync_marks(warnings, _torch_mark)
        on("torch", enable_sync_debug)
        on("torch", mark_device_and_event_syncs)

    if callbacks:
        finder = _AfterImport(callbacks)
        sys.meta_path.insert(0, finder)
        for name in callbacks:
            finder.run_now(name)


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
    sys.modules[MODULE_NAME] = sys.modules[__name__]
    if os.environ.get("GAPSCOPE_TWIN_DIR") or os.environ.get("GAPSCOPE_SYNC_MARKS") == "1":
        try:
            install()
        except Exception as e:  # never the program's problem
            _say(f"off ({type(e).__name__}: {e})")
    _chain()
