"""The program's own code, named as the program imports it (GAPSCOPE_OWN_CODE=N): every module
whose file lies outside Python's standard library and its site-packages (the script's folder, a
folder the program puts on sys.path, a package run with `-m`, an editable install of the user's
project) has its functions and methods wrapped once it has run (host_times.host_wrapper: an NVTX
range `MODULE.QUALNAME` a call in the traced run, timed in the twin's), N of them at most in all;
the script's own functions (`__main__`, which exist only once it runs) through sys.monitoring
(main_code.py). What was named, and where the cap bit, goes to $GAPSCOPE_RUN_DIR/own_code-PID.json
at exit, for `gapscope profile` (analysis/capture/own_code.py reads it).

    a module             own: a file outside stdlib, site-packages, the hook, torch, transformers
    its functions        plain defs (no generator, coroutine, property) defined there
    its classes' methods their own plain methods, staticmethods, classmethods; of the dunders
                         only __call__
"""

import inspect
import os
import sys
import sysconfig
import types

from . import host_times
from .notes import say

DEFAULT_MAX = 600
# Packages named by their own rules (host_functions.py, nsys's function trace), or gapscope's:
# never the program's own, wherever they are installed (an editable transformers included).
NOT_OWN = frozenset({"torch", "transformers", "triton", "nvtx", "gapscope_hook", "sitecustomize",
                     "gapscope", "numpy", "pandas"})
_HERE = os.path.dirname(os.path.realpath(__file__))


def library_roots() -> tuple:
    """The folders whose modules are Python's or installed packages', not the program's."""
    import site

    roots = set()
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if paths.get(key):
            roots.add(paths[key])
    try:
        roots.update(site.getsitepackages())
    except AttributeError:  # an old virtualenv's site module
        pass
    user = getattr(site, "getusersitepackages", lambda: None)()
    if user:
        roots.add(user)
    roots.add(os.path.join(sys.base_prefix, "lib"))
    roots.add(os.path.dirname(_HERE))
    return tuple(sorted({os.path.realpath(r) + os.sep for r in roots}))


def is_own(name: str, origin, roots: tuple) -> bool:
    """A module the program brings itself: a Python source file outside the library roots and
    outside any site-packages or dist-packages folder."""
    if not isinstance(origin, str) or not origin.endswith(".py"):
        return False
    if name.partition(".")[0] in NOT_OWN or name == "__main__":
        return False
    path = os.path.realpath(origin)
    if any(path.startswith(r) for r in roots):
        return False
    parts = path.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return False
    return not installed_beside(path, name)


_INSTALLED = {}  # folder -> the distributions installed there (normalised names)


def module_root(path: str, name: str) -> str:
    """The folder a module is imported from (its sys.path entry): `.../X/a/b.py` for `a.b`,
    `.../X/a/__init__.py` for `a`, both X."""
    up = len(name.split(".")) + (os.path.basename(path) == "__init__.py")
    for _ in range(up):
        path = os.path.dirname(path)
    return path


def installed_beside(path: str, name: str) -> bool:
    """The module's top-level package was installed into a folder of its own (pip --target, a
    folder put on PYTHONPATH): that folder holds a `NAME-VERSION.dist-info` of its name. An
    editable install's metadata lies in site-packages, not beside its source: still the
    program's own."""
    root = module_root(path, name)
    if root not in _INSTALLED:
        try:
            _INSTALLED[root] = {e.split("-")[0].lower() for e in os.listdir(root)
                                if e.endswith(".dist-info")}
        except OSError:
            _INSTALLED[root] = set()
    return name.partition(".")[0].lower() in _INSTALLED[root]


def _plain(fn) -> bool:
    """A def the wrapper can time: not a generator or coroutine (a call returns at once)."""
    inner = inspect.unwrap(fn) if callable(fn) else fn
    return not (inspect.isgeneratorfunction(inner) or inspect.iscoroutinefunction(inner)
                or inspect.isasyncgenfunction(inner))


def _named(attr: str) -> bool:
    return not attr.startswith("__") or attr == "__call__"


def definitions(module) -> list:
    """QUALNAMEs (attribute paths: `f`, `Cls.m`) of the functions and methods MODULE defines."""
    name = module.__name__
    out = []
    for attr, obj in list(vars(module).items()):
        if isinstance(obj, types.FunctionType):
            if obj.__module__ == name and _named(attr) and _plain(obj):
                out.append(attr)
        elif isinstance(obj, type) and obj.__module__ == name and obj.__name__ == attr:
            for method, raw in list(vars(obj).items()):
                fn = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
                if isinstance(fn, types.FunctionType) and _named(method) and _plain(fn):
                    out.append(f"{attr}.{method}")
    return out


class OwnCode:
    """Names each own module's functions once it has run, at most `limit` in all."""

    def __init__(self, limit: int = DEFAULT_MAX, roots: tuple | None = None):
        self.limit = limit
        self.roots = library_roots() if roots is None else roots
        self.modules = {}       # name -> file
        self.functions = []     # MODULE:QUALNAME, in the order they were wrapped
        self.left_out = 0       # functions past the cap
        self.capped_at = None   # the first module the cap cut
        self.main = {"named": False, "why": None}

    def wants(self, spec) -> bool:
        return is_own(spec.name, getattr(spec, "origin", None), self.roots)

    def wrap_module(self, module) -> None:
        names = definitions(module)
        self.modules[module.__name__] = getattr(module, "__file__", None)
        for q in names:
            if len(self.functions) >= self.limit:
                if self.capped_at is None:
                    self.capped_at = module.__name__
                    say(f"own code: {self.limit} functions named, the cap: {module.__name__}'s "
                        "and later modules' are not (gapscope profile --max-own-functions N)")
                self.left_out += 1
                continue
            if host_times.wrap_host_function(module, q):
                self.functions.append(f"{module.__name__}:{q}")

    def document(self) -> dict:
        return {"limit": self.limit, "modules": self.modules, "functions": self.functions,
                "left_out": self.left_out, "capped_at": self.capped_at, "main": self.main}


def write(own: OwnCode, run_dir: str | None) -> None:
    """RUN_DIR/own_code-PID.json, where anything was named or the script's code was looked at."""
    import json

    if not run_dir or not (own.functions or own.main.get("functions") or own.main.get("why")):
        return
    path = os.path.join(run_dir, f"own_code-{os.getpid()}.json")
    try:
        with open(path, "w") as f:
            json.dump(own.document(), f)
    except OSError as e:
        say(f"cannot write {path}: {e}")


def limit_of(value: str) -> int:
    """GAPSCOPE_OWN_CODE: the cap (a positive integer; anything else, the default)."""
    return int(value) if value.strip().isdigit() and int(value) > 0 else DEFAULT_MAX
