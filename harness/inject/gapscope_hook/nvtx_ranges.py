"""nvtx's and torch.cuda.nvtx's ranges, patched once the program imports them, so that the
steps among the ranges it opens are recorded (the ranges themselves still go to NVTX). The
recorder is reached through marks' module globals at each call (marks.disable_dynamo swaps
them)."""

from . import marks


def _arg(args: tuple, kwargs: dict, position: int, name: str):
    return args[position] if len(args) > position else kwargs.get(name)


def patch_nvtx(module) -> None:
    """nvtx's push_range/pop_range, start_range/end_range and annotate, recording the steps
    among the ranges the program opens (the ranges themselves still go to NVTX)."""
    import functools

    push, pop, start, end = (module.push_range, module.pop_range, module.start_range,
                             module.end_range)

    def push_range(*args, **kwargs):
        marks._push(_arg(args, kwargs, 0, "message"), _arg(args, kwargs, 2, "domain"))
        return push(*args, **kwargs)

    def pop_range(*args, **kwargs):
        try:
            return pop(*args, **kwargs)
        finally:
            marks._pop(_arg(args, kwargs, 0, "domain"))

    def start_range(*args, **kwargs):
        handle = start(*args, **kwargs)
        marks._REC.range_start(_arg(args, kwargs, 0, "message"), handle)
        return handle

    def end_range(*args, **kwargs):
        marks._REC.range_end(_arg(args, kwargs, 0, "range_id"))
        return end(*args, **kwargs)

    base = module.annotate

    class annotate(base):
        __doc__ = base.__doc__

        def __init__(self, message=None, color=None, domain=None, category=None, payload=None):
            super().__init__(message, color, domain, category, payload)
            self._gapscope = (message, domain)

        def __enter__(self):
            marks._push(*self._gapscope)
            return super().__enter__()

        def __exit__(self, *exc):
            try:
                return super().__exit__(*exc)
            finally:
                marks._pop(self._gapscope[1])

        def __call__(self, func):
            inner = super().__call__(func)
            message = self._gapscope[0] if self._gapscope[0] is not None else func.__name__
            domain = self._gapscope[1]

            @functools.wraps(func)
            def annotated(*args, **kwargs):
                marks._push(message, domain)
                try:
                    return inner(*args, **kwargs)
                finally:
                    marks._pop(domain)

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
        marks._push(msg, None)
        return push(msg)

    def range_pop():
        try:
            return pop()
        finally:
            marks._pop(None)

    def range_start(msg):
        handle = start(msg)
        marks._REC.range_start(msg, handle)
        return handle

    def range_end(range_id):
        marks._REC.range_end(range_id)
        return end(range_id)

    module.range_push, module.range_pop = range_push, range_pop
    module.range_start, module.range_end = range_start, range_end

