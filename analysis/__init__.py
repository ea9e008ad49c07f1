"""gapscope analysis: where a decode loop leaves the GPU idle, from an nsys SQLite export or a
torch.profiler trace (no torch needed). Installed with pip, the package is `gapscope.analysis`.

The library face (analysis/api.py, docs/ANALYSIS.md "In a notebook"):

    open(path, steps=None, check=None, device=None) -> [Analysis]   one a device
    compare([Analysis or path, ...], labels=None) -> Comparison      .table .to_text() ...
    Database(path)                                 the results database: add, runs, analyses
    analyze_trace                                  open, by its older name
    TraceError                                     bad input, with a one-line message
"""

from .errors import TraceError

__all__ = ["Analysis", "Comparison", "Database", "TraceError", "analyze_trace", "compare", "open"]


def __getattr__(name: str):
    # Loaded on first use: `import analysis.errors` (the harness does) stays free of pandas.
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
