"""gapscope analysis: reads an Nsight Systems SQLite export (no torch needed).

`from analysis import analyze_trace` is the library API (analysis/api.py, docs/ANALYSIS.md);
`TraceError` is what it raises on bad input, with a one-line message. Installed with pip, the
package is `gapscope.analysis`.
"""

from .errors import TraceError

__all__ = ["TraceError", "analyze_trace"]


def __getattr__(name: str):
    # Loaded on first use: `import analysis.errors` (the harness does) stays free of pandas.
    if name == "analyze_trace":
        from .api import analyze_trace

        return analyze_trace
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")
