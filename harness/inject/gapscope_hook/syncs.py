"""The traced run's sync marks (GAPSCOPE_SYNC_MARKS=1): torch's sync debug mode "warn", and each
"called a synchronizing CUDA operation" warning becomes, instead of a printed warning, an NVTX
mark `gapscope.sync FILE:LINE FUNCTION` naming the first frame outside torch (docs/PROFILING.md);
so does each torch.cuda.synchronize() and Event.synchronize(), which torch does not warn
about."""

import os
import sys

from .notes import say

SYNC_WARNING = "called a synchronizing CUDA operation"
SYNC_MARK = "gapscope.sync"
# The hook's own files (this package and sitecustomize.py beside it) are walked past.
_HOOK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB = os.path.dirname(os.__file__)


def _internal(path: str, torch_dir: str | None) -> bool:
    """A frame to walk past: torch's own, this hook's, the warnings machinery's, or code torch
    generated (fx graphs)."""
    if path.startswith((_HOOK_DIR, "<eval_with_key>", "<frozen ")):
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
            say(f"no sync lines: torch's sync debug mode failed ({e})")

    try:
        torch.cuda._lazy_call(warn_on_sync)
    except Exception as e:
        say(f"no sync lines: cannot wait for CUDA's start in this torch ({e})")

