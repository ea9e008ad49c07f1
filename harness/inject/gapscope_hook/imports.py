"""Callbacks run on a module right after the program imports it: a meta-path finder that wraps
the module's own loader, so the program imports everything itself, in its own order."""

import sys

from .notes import say


def attribute(module, qualname: str):
    """(the object holding MODULE's QUALNAME, its last name, the raw attribute: a function, a
    staticmethod or classmethod object, any callable), or None where the name is not there."""
    parts = qualname.split(".")
    owner = module
    for part in parts[:-1]:
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    name = parts[-1]
    raw = vars(owner).get(name) if hasattr(owner, "__dict__") else None
    if raw is None:
        raw = getattr(owner, name, None)
    return None if raw is None else (owner, name, raw)


class AfterImport:
    """A meta-path finder that runs callbacks on a module right after it executes (the module's
    own finder and loader do the import): those named for it, and `own.wrap_module` for every
    module whose spec `own.wants` (own_code.py: the program's own modules)."""

    def __init__(self, callbacks: dict, own=None):
        self.callbacks = callbacks  # module name -> [callback(module)]
        self.own = own
        self._busy = set()

    def find_spec(self, name, path=None, target=None):
        if name in self._busy or (name not in self.callbacks and self.own is None):
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
        callbacks = list(self.callbacks.get(name, ()))
        if self.own is not None and self.own.wants(spec):
            callbacks.append(self.own.wrap_module)
        if not callbacks or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = loader_for(spec.loader, callbacks)
        return spec

    def run_now(self, name: str) -> None:
        """For a module imported before the hook was installed."""
        module = sys.modules.get(name)
        if module is not None:
            run_callbacks(self.callbacks.get(name, []), module)


def run_callbacks(callbacks, module) -> None:
    for callback in callbacks:
        try:
            callback(module)
        except Exception as e:
            say(f"{getattr(module, '__name__', module)}: {callback.__name__} failed ({e}): "
                 "that part of the hook is off")


class _Loader:
    """The module's own loader, with the callbacks run after it executes the module."""

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
        run_callbacks(self.callbacks, sys.modules.get(module.__name__, module))



# nsys's function trace (its injected Python, read from the library) wraps the loader of every
# spec a meta-path finder returns, so that executing a module decorates its traced functions,
# unless the loader is already one of its own: an instance of its class NvtxLoaderBase. Ours
# holds a loader nsys wrapped; wrapped again it would decorate them twice (a range inside a
# range of the same name, each traced call counted twice). So where the loader is nsys's, ours
# is made an NvtxLoaderBase too, and nsys leaves it as it is.
NSYS_LOADER_BASE = "NvtxLoaderBase"
_KINDS: dict = {}


def loader_for(loader, callbacks) -> _Loader:
    base = next((c for c in type(loader).__mro__ if c.__name__ == NSYS_LOADER_BASE), None)
    if base is None:
        return _Loader(loader, callbacks)
    if base not in _KINDS:
        _KINDS[base] = type("_Loader", (_Loader, base), {})
    return _KINDS[base](loader, callbacks)
