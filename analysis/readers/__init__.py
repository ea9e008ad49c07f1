"""One reader per kind of capture, each turning its input into the same analysis.trace.Trace.

    nsys.py   an Nsight Systems SQLite export (`nsys export --type sqlite`)
"""

from analysis.readers.nsys import load_trace

__all__ = ["load_trace"]
