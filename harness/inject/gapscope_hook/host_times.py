"""The host table's named code (docs/METRICS.md, "Host time"): the functions of
GAPSCOPE_HOST_FUNCTIONS=M:Q,... each wrapped once its module is imported (imports.py).

    traced run  each call is an NVTX range named `M.Q`, as nsys's function trace names its
                ranges, so the capture's host table names it (analysis/measures/host.py)
    twin run    each call is timed on the host clock, exclusively (a function's time less its
                named callees'), step by step: the untraced host table beside the traced one

While torch.compile traces (`torch.compiler.is_compiling()`) a wrapper only calls through: a
compiled region keeps its graph whole (nsys's own wrapper, a `sys.audit` call, breaks it), and
its time is its caller's. The twin's steps come from the recorder's boundaries (marks.py:
step functions; nvtx_ranges.py: the program's NVTX ranges, every one a row too).
"""

import sys
import threading
import time

from .imports import attribute
from .notes import say

OTHER = ""  # the time no named code holds, in the twin file's rows


def _never() -> bool:
    return False


def compiling_check():
    """torch.compiler.is_compiling once torch is imported, else a function that says no."""
    torch = sys.modules.get("torch")
    compiler = getattr(torch, "compiler", None)
    return getattr(compiler, "is_compiling", None) or _never


# What every wrapper asks at each call, a module global looked up then: torch's is_compiling
# from the moment torch is imported (watch_compiling), also for the wrappers made before it (a
# module of the program's own that imports no torch, wrapped first, later called inside a
# compiled region: dynamo reads the global and folds the call).
_COMPILING = _never


def watch_compiling(torch=None) -> None:
    """Points the wrappers at torch.compiler.is_compiling (on torch's import, start.py)."""
    global _COMPILING
    found = compiling_check()
    if found is not _never:
        _COMPILING = found


class _Thread:
    def __init__(self):
        self.stack = []       # the named code open on the thread, innermost last
        self.ranges = []      # the program's open NVTX ranges: whether each began a step
        self.calls = 0        # steps numbered by order (functions, unnumbered ranges)
        self.last = 0         # the host clock at the last event
        self.steps = []       # one dict a step: step, start_ns, end_ns, next_ns, in, after
        self.current = None   # the step that owns the time now (open, or ended and not followed)
        self.open = 0         # steps open (only the outermost counts)
        self.drafted = False  # the open step was opened by the draft's work (speculative.py)
        self.name = threading.current_thread().name


class HostClock:
    """Each thread's time by named code and step, on the host clock (`clock` is injectable).
    `pattern`: the step ranges' regex (GAPSCOPE_STEP_PATTERN), where the steps are NVTX ranges."""

    def __init__(self, pattern=None, clock=time.perf_counter_ns):
        import re

        self.pattern = re.compile(pattern) if pattern else None
        self.clock = clock
        self._local = threading.local()
        self._lock = threading.Lock()
        self._threads = []

    def _thread(self) -> _Thread:
        t = getattr(self._local, "t", None)
        if t is None:
            t = self._local.t = _Thread()
            with self._lock:
                self._threads.append(t)
        return t

    def _charge(self, t: _Thread) -> int:
        now = self.clock()
        step = t.current
        if step is not None:
            bucket = step["in"] if t.open else step["after"]
            key = t.stack[-1] if t.stack else OTHER
            bucket[key] = bucket.get(key, 0) + now - t.last
        t.last = now
        return now

    def enter(self, name: str) -> None:
        t = self._thread()
        self._charge(t)
        t.stack.append(name)

    def exit(self) -> None:
        t = self._thread()
        self._charge(t)
        if t.stack:
            t.stack.pop()

    def range_push(self, message) -> None:
        """A range the program opens: a row, and a step where it matches the pattern."""
        t = self._thread()
        found = (self.pattern.search(message) if self.pattern is not None and not t.open
                 and isinstance(message, str) else None)
        if found is not None:
            group = found.group(1) if self.pattern.groups else None
            self.step_begin(int(group) if group is not None and group.isdigit() else None)
        t.ranges.append(found is not None)
        self.enter(message if isinstance(message, str) else "")

    def range_pop(self) -> None:
        t = self._thread()
        self.exit()
        if t.ranges and t.ranges.pop():
            self.step_end()

    def step_begin(self, number: int | None = None, join_draft: bool = False) -> None:
        """A step begins; `join_draft`: a step function's call, which joins the step the draft's
        work opened before it, if any, instead of opening one inside it."""
        t = self._thread()
        if join_draft and t.drafted:
            t.drafted = False
            return
        if t.open:
            t.open += 1
            return
        now = self._charge(t)  # the time since the last step ended is that step's, after it
        t.open = 1
        if number is None:
            t.calls += 1
            number = t.calls
        if t.current is not None:
            t.current["next_ns"] = now
        t.current = {"step": number, "start_ns": now, "end_ns": None, "next_ns": None,
                     "in": {}, "after": {}}
        t.steps.append(t.current)

    def draft_enter(self) -> None:
        """The draft's work begins: the step it feeds opens now, unless one is open."""
        t = self._thread()
        if not t.open:
            self.step_begin()
            t.drafted = True

    def step_end(self) -> None:
        t = self._thread()
        if t.open == 0:
            return
        if t.open == 1:
            t.current["end_ns"] = self._charge(t)
        t.open -= 1

    def document(self) -> list:
        """The twin file's `host`: a thread a list, columns a step, each row's ns in the step
        (`in`) and after it until the next one starts (`after`), "" for no named code."""
        out = []
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            steps = [s for s in t.steps if s["end_ns"] is not None]
            if not steps:
                continue
            t0 = steps[0]["start_ns"]
            names = sorted({k for s in steps for part in ("in", "after") for k in s[part]})
            out.append({
                "thread": t.name, "step": [s["step"] for s in steps],
                "start_ns": [s["start_ns"] - t0 for s in steps],
                "end_ns": [s["end_ns"] - t0 for s in steps],
                "next_ns": [None if s["next_ns"] is None else s["next_ns"] - t0 for s in steps],
                "rows": {n: {part: [s[part].get(n, 0) for s in steps] for part in ("in", "after")}
                         for n in names},
            })
        return out


_CLOCK = None  # the twin's HostClock, where the twin runs (start.install)


def use(clock) -> None:
    global _CLOCK
    _CLOCK = clock


def clock():
    return _CLOCK


def _nvtx_pair():
    """(push, pop) of an NVTX range in the default domain: torch's C calls once torch is
    imported (cheaper than nvtx's Python), else nvtx's; None where neither is there."""
    torch = sys.modules.get("torch")
    nvtx = getattr(getattr(torch, "_C", None), "_nvtx", None)
    if nvtx is not None:
        return nvtx.rangePushA, nvtx.rangePop
    try:
        import nvtx as package
    except ImportError:
        return None
    return (lambda message: package.push_range(message)), (lambda: package.pop_range())


def host_wrapper(fn, name: str):
    """fn, each call a row of the host table: an NVTX range where no twin runs, timed where it
    does; called straight through while torch.compile traces."""
    import functools

    watch_compiling()
    ranges = None if _CLOCK is not None else _nvtx_pair()

    if _CLOCK is not None:
        timer = _CLOCK

        @functools.wraps(fn)
        def gapscope_host(*args, **kwargs):
            if _COMPILING():
                return fn(*args, **kwargs)
            timer.enter(name)
            try:
                return fn(*args, **kwargs)
            finally:
                timer.exit()
    elif ranges is not None:
        push, pop = ranges

        @functools.wraps(fn)
        def gapscope_host(*args, **kwargs):
            if _COMPILING():
                return fn(*args, **kwargs)
            push(name)
            try:
                return fn(*args, **kwargs)
            finally:
                pop()
    else:
        return None
    gapscope_host.__gapscope_host__ = True
    gapscope_host.__gapscope_name__ = name
    return gapscope_host


def wrap_host_function(module, qualname: str) -> bool:
    """Replaces MODULE's QUALNAME (a function, a method, or a builtin like torch.multinomial)
    by its host wrapper; False where the name is not there or cannot be replaced."""
    found = attribute(module, qualname)
    if found is None:
        return False
    owner, attr, raw = found
    name = f"{module.__name__}.{qualname}"
    if isinstance(raw, (staticmethod, classmethod)):
        inner = raw.__func__
        if getattr(inner, "__gapscope_host__", False) or getattr(inner, "__gapscope_step__",
                                                                 False):
            return True
        wrapped = host_wrapper(inner, name)
        wrapped = None if wrapped is None else type(raw)(wrapped)
    elif callable(raw):
        if getattr(raw, "__gapscope_host__", False) or getattr(raw, "__gapscope_step__", False):
            return True
        wrapped = host_wrapper(raw, name)
    else:
        return False
    if wrapped is None:
        return False
    try:
        setattr(owner, attr, wrapped)
    except (AttributeError, TypeError):
        return False
    return True


def host_functions(value: str) -> dict:
    """GAPSCOPE_HOST_FUNCTIONS: "M:Q,M:Q" -> {M: [Q, ...]}."""
    out = {}
    for item in value.split(","):
        module, _, qualname = item.strip().partition(":")
        if module and qualname:
            out.setdefault(module, []).append(qualname)
    return out


def install(on, value: str) -> None:
    """Registers, for each module named, the wrapping of its functions once it is imported
    (`on(module, callback)`: start.py's)."""
    for module_name, qualnames in host_functions(value).items():
        def wrap(module, qualnames=qualnames):
            missing = [q for q in qualnames if not wrap_host_function(module, q)]
            if len(missing) == len(qualnames) and missing:
                say(f"{module.__name__}: none of its {len(missing)} host functions could be "
                    "wrapped")
        wrap.__name__ = f"host functions of {module_name}"
        on(module_name, wrap)
