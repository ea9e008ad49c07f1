"""torch.compile of a function the hook wrapped: the function itself is compiled and the wrapper
put around what torch.compile returns, so that each call of the compiled function is still a
named row (or a step), made eagerly outside the compiled region, and the region stays whole.

    decode_one_token = torch.compile(decode_one_token, mode="reduce-overhead", fullgraph=True)
        the hook's wrapper (host or step)          <- around the compiled callable: each call
          torch.compile(the original function)         a range / a step: guards and graph replay

Without this the wrapper would be compiled with the function: a host wrapper calls straight
through while dynamo traces (its range never opens), a step wrapper breaks the graph at its marks
(and a `fullgraph=True` compile fails on the break).
"""

import functools


def _wrapped_kind(fn):
    """("host" | "step", the wrapper's row name, the function it wraps) for a wrapper of the hook,
    else None."""
    if not callable(fn):
        return None
    for kind in ("host", "step"):
        if getattr(fn, f"__gapscope_{kind}__", False) and hasattr(fn, "__wrapped__"):
            return kind, getattr(fn, "__gapscope_name__", None), fn.__wrapped__
    return None


def rewrap(kind: str, name: str | None, compiled):
    """The hook's wrapper of that kind around the compiled callable (None: leave it as it is)."""
    from . import host_times, marks

    if kind == "host":
        return host_times.host_wrapper(compiled, name) if name else None
    return marks.step_wrapper(compiled, name)


def patch_compile(torch) -> None:
    """torch.compile, compiling the function inside a hook wrapper, the wrapper put back
    around the result (module docstring). Also as a decorator with options."""
    compile_ = torch.compile
    if getattr(compile_, "__gapscope_compile__", False):
        return

    def with_wrapper(compile_call, model):
        found = _wrapped_kind(model)
        if found is None:
            return compile_call(model)
        kind, name, inner = found
        compiled = compile_call(inner)
        again = rewrap(kind, name, compiled)
        return compiled if again is None else again

    @functools.wraps(compile_)
    def gapscope_compile(model=None, *args, **kwargs):
        if model is None:  # @torch.compile(mode=...): the decorator it returns, wrapped too
            decorator = compile_(None, *args, **kwargs)
            return lambda fn: with_wrapper(decorator, fn)
        return with_wrapper(lambda m: compile_(m, *args, **kwargs), model)

    gapscope_compile.__gapscope_compile__ = True
    torch.compile = gapscope_compile
