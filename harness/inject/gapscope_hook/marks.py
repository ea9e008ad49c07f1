"""Where the program's calls reach the recorder: the step functions wrapped, the harness' own
step marks, and the recorder's entry points, made eager once torch._dynamo is imported. Where
the twin times the host table (host_times.py), the same entry points tell its clock."""

from . import host_times
from .imports import attribute
from .recorder import DRAFT

_REC = None  # the process's Recorder, set by start.install


def use(recorder) -> None:
    """Makes `recorder` the one every wrapper and patched range reports to."""
    global _REC
    _REC = recorder


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


def _enter():
    return _REC.function_enter()


def _exit(token):
    _REC.function_exit(token)


def _push(message, domain):
    _REC.range_push(message, domain)
    clock = host_times.clock()
    if clock is not None:
        clock.range_push(message)


def _pop(domain):
    _REC.range_pop(domain)
    clock = host_times.clock()
    if clock is not None:
        clock.range_pop()


def _host_step_enter(name):
    clock = host_times.clock()
    if clock is not None:
        clock.step_begin(join_draft=True)
        clock.enter(name)


# A step function's call inside the draft's work (speculative.py) is no step, but a row of the
# host table of its own, named as the analysis names the draft's forwards (measures/draft.py).
DRAFT_ROW = "draft: "


def _host_draft_enter(name):
    clock = host_times.clock()
    if clock is not None:
        clock.enter(DRAFT_ROW + name)


def _host_draft_exit():
    clock = host_times.clock()
    if clock is not None:
        clock.exit()


def _draft_enter():
    _REC.draft_enter()
    clock = host_times.clock()
    if clock is not None:
        clock.draft_enter()


def _draft_exit():
    _REC.draft_exit()


def _host_step_exit():
    clock = host_times.clock()
    if clock is not None:
        clock.exit()
        clock.step_end()


def step_begin(row: str):
    """A step function's call begins (its wrapper's, or main_code's for the script's own): the
    recorder's token; in the twin's host-timed run the step's row opens (the draft's row inside
    the draft's work)."""
    token = _enter()
    if token is DRAFT:
        _host_draft_enter(row)
    else:
        _host_step_enter(row)
    return token


def step_end(token) -> None:
    if token is DRAFT:
        _host_draft_exit()
    else:
        _host_step_exit()
        _exit(token)


def step_wrapper(fn, name: str | None = None):
    """fn, each call a step (only the outermost one where it nests); `name` (MODULE.QUALNAME)
    its row in the host table."""
    import functools

    row = name or f"{fn.__module__}.{fn.__qualname__}"

    @functools.wraps(fn)
    def gapscope_step(*args, **kwargs):
        token = step_begin(row)
        try:
            return fn(*args, **kwargs)
        finally:
            step_end(token)

    gapscope_step.__gapscope_step__ = True
    gapscope_step.__gapscope_name__ = row
    return gapscope_step


def wrap_function(module, qualname: str) -> bool:
    """Replaces MODULE's QUALNAME (a function, or a method of a class in it) by its step wrapper.
    False when the name is not there."""
    found = attribute(module, qualname)
    if found is None:
        return False
    owner, name, raw = found
    if isinstance(raw, (staticmethod, classmethod)):
        if getattr(raw.__func__, "__gapscope_step__", False):
            return True
        wrapped = type(raw)(step_wrapper(raw.__func__, f"{module.__name__}.{qualname}"))
    elif callable(raw):
        if getattr(raw, "__gapscope_step__", False):
            return True
        wrapped = step_wrapper(raw, f"{module.__name__}.{qualname}")
    else:
        return False
    setattr(owner, name, wrapped)
    return True


def _arg(args: tuple, kwargs: dict, position: int, name: str):
    return args[position] if len(args) > position else kwargs.get(name)

def disable_dynamo(dynamo) -> None:
    """Once torch._dynamo is imported: the recorder's entry points run eagerly, never traced."""
    global _enter, _exit, _push, _pop, _host_step_enter, _host_step_exit
    global _draft_enter, _draft_exit, _host_draft_enter, _host_draft_exit
    (_enter, _exit, _push, _pop, _host_step_enter, _host_step_exit, _draft_enter, _draft_exit,
     _host_draft_enter, _host_draft_exit) = (
        dynamo.disable(f) for f in (_enter, _exit, _push, _pop, _host_step_enter,
                                    _host_step_exit, _draft_enter, _draft_exit,
                                    _host_draft_enter, _host_draft_exit))
    for name in ("range_start", "range_end"):
        setattr(_REC, name, dynamo.disable(getattr(_REC, name)))

