"""Speculative decoding (transformers' `generate(assistant_model=...)`): what the capture cannot
show by itself.

    traced run   each call of a candidate generator's update_candidate_strategy(input_ids, scores,
                 num_matches) is an NVTX mark `gapscope.accepted N`, N = num_matches + 1: the
                 tokens that verification added (the matches and the target's own next token).
                 An int by then in transformers (no sync is added); a tensor is left unmarked.
    twin         GAPSCOPE_STEP_DRAFT=M:Q,...: the draft's work (a generator's get_candidates):
                 a step function called inside it (the draft's forward) is no step, and the step
                 of the target's next forward starts where the draft's work began
                 (recorder.draft_enter; docs/METRICS.md, "Speculative decoding")
"""

import functools

from . import marks
from .imports import attribute

ACCEPTED_MARK = "gapscope.accepted"
MODULE = "transformers.generation.candidate_generator"
UPDATE = "update_candidate_strategy"


def accepted_of(args: tuple, kwargs: dict):
    """N for update_candidate_strategy's arguments, None where num_matches is no plain int."""
    n = args[2] if len(args) > 2 else kwargs.get("num_matches")
    return n + 1 if isinstance(n, int) and not isinstance(n, bool) else None


def nvtx_mark(text: str) -> None:
    """An NVTX mark through torch (a CUDA build), else the nvtx package; nothing where neither
    can (a CPU build of torch raises): the program never fails for a mark."""
    import sys

    torch = sys.modules.get("torch")
    try:
        torch.cuda.nvtx.mark(text)
        return
    except Exception:
        pass
    try:
        import nvtx

        nvtx.mark(text)
    except Exception:
        pass


def patch_update(module, mark) -> int:
    """Every class of `module` that defines update_candidate_strategy marks each call; how many."""
    done = 0
    for cls in [c for c in vars(module).values() if isinstance(c, type)]:
        fn = vars(cls).get(UPDATE)
        if fn is None or getattr(fn, "__gapscope_accepted__", False) or not callable(fn):
            continue

        def update(*args, __fn=fn, **kwargs):
            n = accepted_of(args[1:], kwargs)
            if n is not None:
                mark(f"{ACCEPTED_MARK} {n}")
            return __fn(*args, **kwargs)

        functools.update_wrapper(update, fn)
        update.__gapscope_accepted__ = True
        setattr(cls, UPDATE, update)
        done += 1
    return done


def draft_wrapper(fn):
    """fn, the draft's work: step functions called inside it are no steps (marks.py)."""

    @functools.wraps(fn)
    def gapscope_draft(*args, **kwargs):
        marks._draft_enter()
        try:
            return fn(*args, **kwargs)
        finally:
            marks._draft_exit()

    gapscope_draft.__gapscope_draft__ = True
    return gapscope_draft


def wrap_draft(module, qualname: str) -> bool:
    found = attribute(module, qualname)
    if found is None or not callable(found[2]):
        return False
    owner, name, raw = found
    if not getattr(raw, "__gapscope_draft__", False):
        setattr(owner, name, draft_wrapper(raw))
    return True
