"""gapscope analysis: where a decode loop leaves the GPU idle, from an nsys SQLite export or a
torch.profiler trace (no torch needed). Installed with pip, the package is `gapscope.analysis`.

The library face (analysis/api.py, docs/ANALYSIS.md "In a notebook"):

    load(path, steps=None, check=None, device=None) -> Analysis      the capture's one device
    open_devices(path, ...) -> [Analysis]          one a device that ran steps
    compare([Analysis or path, ...], labels=None) -> Comparison      .table .to_text() ...
    Database(path)                                 the results database: add, runs, analyses
    Analysis                                       .summary .steps .gaps ...; .kernels()
                                                   .step(n) .plot() .to_perfetto() .to_text()
    open, analyze_trace                            open_devices, by its older names
    TraceError                                     bad input, with a one-line message
"""

from .errors import TraceError

__all__ = ["Analysis", "Comparison", "Database", "TraceError", "analyze_trace", "compare", "load",
           "open", "open_devices"]


def __getattr__(name: str):
    # Loaded on first use: `import analysis.errors` (the harness does) stays free of pandas.
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
