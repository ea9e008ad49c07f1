"""The script's own functions (`__main__`), which exist only once the script runs, so no import
hook can wrap them: sys.monitoring (Python 3.12 and later) reports each call and return of every
code object of the script's file instead. Each call is then what a wrapper would make of it: a
named row (`__main__.QUALNAME`: an NVTX range in the traced run, timed in the twin's), or a step
where the twin's GAPSCOPE_STEP_FUNCTIONS names `__main__:QUALNAME`.

    PY_START   every code object's first start is looked at once: the script's functions (not
               its module body, class bodies, generators, coroutines, lambdas) stay watched,
               every other code object's event is turned off for good (sys.monitoring.DISABLE)
    PY_RETURN  the watched code's own return event (a local event)
    PY_UNWIND  an exception leaving a watched function (global: it cannot be set per code object)
"""

import os
import sys
import threading

TOOL_IDS = (3, 4, 5)  # after the debugger's, coverage's and profiler's (0, 1, 2); step_marks too
# Generators, coroutines and async generators: a call returns before the work is done.
CO_NOT_PLAIN = 0x20 | 0x80 | 0x100 | 0x200
# A function's code (a class body's is not: it runs once, as the class is made).
CO_OPTIMIZED = 0x1


def main_file() -> str | None:
    """The script's file, once Python has made `__main__` (None for `-c` code, an interactive
    session, a frozen program); "" where `__main__` is a library's own module (a compile
    worker torch starts with `python -m`, which inherits the environment): nothing to name."""
    from .own_code import is_own, library_roots

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return None
    path = os.path.realpath(path)
    return path if is_own("script", path, library_roots()) else ""


class MainCalls:
    """Routes the calls and returns of the script's functions: `enter(name)` / `leave()` for
    named rows, `step_enter(name)` / `step_leave(token)` for the steps among them (`steps`: the
    QUALNAMEs of `__main__` that are step functions); `only`: the QUALNAMEs named (None: all)."""

    def __init__(self, enter=None, leave=None, step_enter=None, step_leave=None, steps=(),
                 only=None):
        self.enter, self.leave = enter, leave
        self.step_enter, self.step_leave = step_enter, step_leave
        self.steps = frozenset(steps)
        self.only = only
        self.seen = []          # the script's functions called so far, in order
        self._local = threading.local()

    def kind(self, qualname: str) -> int:
        """What a call of this function is: STEP, NAMED or nothing (IGNORED)."""
        if qualname in self.steps and self.step_enter is not None:
            return STEP
        if self.enter is not None and (self.only is None or qualname in self.only):
            return NAMED
        return IGNORED

    def tokens(self) -> list:
        """This thread's open steps' tokens."""
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack


IGNORED, NAMED, STEP = 0, 1, 2


def watch(calls: MainCalls, monitoring=None) -> str | None:
    """Turns the watch on. None when on, else why not (one line). The callbacks are kept short:
    each call of a named function costs two of them (docs/PROFILING.md has the figure)."""
    mon = monitoring or getattr(sys, "monitoring", None)
    if mon is None:
        return (f"the script's own functions (__main__) are not named: that needs sys.monitoring, "
                f"new in Python 3.12 (this is {sys.version.split()[0]})")
    tool = next((t for t in TOOL_IDS if mon.get_tool(t) is None), None)
    if tool is None:
        return "the script's own functions (__main__) are not named: every sys.monitoring tool id "\
               "is taken"
    mon.use_tool_id(tool, "gapscope main")
    events = mon.events
    watched = {}   # code -> (kind, `__main__.QUALNAME`)
    files = {}     # co_filename -> whether it is the script's
    script = []    # the script's file, once known
    enter, leave = calls.enter, calls.leave
    step_enter, step_leave, tokens = calls.step_enter, calls.step_leave, calls.tokens
    disable = mon.DISABLE

    def is_script(filename: str) -> bool:
        known = files.get(filename)
        if known is None:
            if not script:
                found = main_file()
                if found is None:
                    return False  # __main__ not made yet: ask again at the next start
                script.append(found)
            if not script[0]:
                return False
            known = files[filename] = os.path.realpath(filename) == script[0]
        return known

    def first_start(code):
        if (not is_script(code.co_filename) or code.co_flags & CO_NOT_PLAIN
                or not code.co_flags & CO_OPTIMIZED or code.co_name.startswith("<")):
            return None
        kind = calls.kind(code.co_qualname)
        if kind == IGNORED:
            return None
        calls.seen.append(code.co_qualname)
        entry = watched[code] = (kind, f"__main__.{code.co_qualname}")
        mon.set_local_events(tool, code, events.PY_RETURN)
        return entry

    def on_start(code, offset):
        entry = watched.get(code) or first_start(code)
        if entry is None:
            return disable
        if entry[0] == NAMED:
            enter(entry[1])
        else:
            tokens().append(step_enter(entry[1]))
        return None

    def on_return(code, offset, value):
        entry = watched.get(code)
        if entry is None:
            return
        if entry[0] == NAMED:
            leave()
        else:
            stack = tokens()
            if stack:
                step_leave(stack.pop())

    def on_unwind(code, offset, exc):
        on_return(code, offset, None)

    mon.register_callback(tool, events.PY_START, on_start)
    mon.register_callback(tool, events.PY_RETURN, on_return)
    mon.register_callback(tool, events.PY_UNWIND, on_unwind)
    mon.set_events(tool, events.PY_START | events.PY_UNWIND)
    return None


def lazy_nvtx() -> tuple:
    """(push, pop) of an NVTX range, found at the first call (the script's functions run once
    it has imported torch: torch's C calls, else nvtx's); no-ops where neither is there."""
    from . import host_times

    pair = []

    def push(name):
        if not pair:
            pair.extend(host_times._nvtx_pair() or (lambda name: None, lambda: None))
        pair[0](name)

    def pop():
        if pair:
            pair[1]()

    return push, pop


def main_steps(functions: list) -> list:
    """The QUALNAMEs of `__main__` among the step functions [(module, qualname)]."""
    return [q for m, q in functions if m == "__main__"]
