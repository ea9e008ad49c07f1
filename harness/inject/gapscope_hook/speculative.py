"""Speculative decoding (transformers' `generate(assistant_model=...)`): what the capture cannot
show by itself.

    traced run   each call of a candidate generator's update_candidate_strategy(input_ids, scores,
                 num_matches) is an NVTX mark `gapscope.accepted N`: the tokens that
                 verification added (the matches and the target's own next token), the
                 sequence's length then less its length at the generator's get_candidates
                 before it (shapes: no sync is added), else num_matches + 1 where that is a
                 plain int; unmarked where neither is known
    twin         GAPSCOPE_STEP_DRAFT=M:Q,...: the draft's work (a generator's get_candidates):
                 a step function called inside it (the draft's forward) is no step, and the step
                 of the target's next forward starts where the draft's work began
                 (recorder.draft_enter; docs/METRICS.md, "Speculative decoding")
"""

import functools
import weakref

from . import marks
from .imports import attribute

ACCEPTED_MARK = "gapscope.accepted"
MODULE = "transformers.generation.candidate_generator"
UPDATE = "update_candidate_strategy"


CANDIDATES = "get_candidates"
# Each candidate generator's sequence length at its last get_candidates.
_LENGTHS = weakref.WeakKeyDictionary()


def length_of(input_ids) -> int | None:
    shape = getattr(input_ids, "shape", None)
    return int(shape[-1]) if shape is not None and len(shape) else None


def accepted_of(generator, args: tuple, kwargs: dict):
    """N for update_candidate_strategy's arguments (module docstring), None where unknown."""
    now = length_of(args[0] if args else kwargs.get("input_ids"))
    try:
        before = _LENGTHS.get(generator)
    except TypeError:  # not weak-referenceable
        before = None
    if now is not None and before is not None and now > before:
        return now - before
    n = args[2] if len(args) > 2 else kwargs.get("num_matches")
    return n + 1 if isinstance(n, int) and not isinstance(n, bool) else None


def _remember(generator, args: tuple, kwargs: dict) -> None:
    length = length_of(args[0] if args else kwargs.get("input_ids"))
    if length is not None:
        try:
            _LENGTHS[generator] = length
        except TypeError:
            pass


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
    """Every class of `module` that defines update_candidate_strategy marks each call, and each
    that defines get_candidates remembers the sequence's length; how many methods."""
    done = 0
    for cls in [c for c in vars(module).values() if isinstance(c, type)]:
        for name in (UPDATE, CANDIDATES):
            fn = vars(cls).get(name)
            if fn is None or getattr(fn, "__gapscope_accepted__", False) or not callable(fn):
                continue

            if name == UPDATE:
                def patched(self, *args, __fn=fn, **kwargs):
                    n = accepted_of(self, args, kwargs)
                    if n is not None:
                        mark(f"{ACCEPTED_MARK} {n}")
                    return __fn(self, *args, **kwargs)
            else:
                def patched(self, *args, __fn=fn, **kwargs):
                    _remember(self, args, kwargs)
                    return __fn(self, *args, **kwargs)

            functools.update_wrapper(patched, fn)
            patched.__gapscope_accepted__ = True
            setattr(cls, name, patched)
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
