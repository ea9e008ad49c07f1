"""The one analysis type: one device's analysis of one capture, whatever made it.

Three kinds share it, the parts a kind lacks are None (never an empty frame that looks measured):

    kind       made by                                 has
    "trace"    a CUDA trace (nsys export, torch.prof.) summary, steps, gaps, streams, syncs,
                                                       host, host_steps, pairs, checks, ops,
                                                       the trace
    "metrics"  nsys GPU metrics without a CUDA trace   summary (gpu_metrics), steps (host ranges)
    "stored"   a row of the results database          summary (flattened back), steps

Columns: docs/METRICS.md ("Per-step table", "Gaps", "Streams", "Syncs", "Host time"); ns.
"""

from dataclasses import dataclass, fields

import pandas as pd

from ..readers.runs import Run
from ..readers.trace import Trace

TRACE, METRICS, STORED = "trace", "metrics", "stored"
KINDS = (TRACE, METRICS, STORED)


@dataclass(frozen=True, eq=False)
class Analysis:
    """One device's analysis of one capture (module docstring: which parts each kind has);
    `analysis.Analysis` (api.py) is this with its verbs, and its docstring lists every table's
    columns (METRICS.md defines them).

    device:  the CUDA device
    summary: the numbers `gapscope analyze --format json` prints as "summary"
    steps, gaps, streams, syncs, host, host_steps, pairs, checks, ops: DataFrames, times in ns
    run:     where it came from (path, label, run.json), set by analysis.open_devices
    trace:   the in-memory trace it was made from (strings, blocking calls, ranges)
    """

    device: int
    summary: dict
    steps: pd.DataFrame
    gaps: pd.DataFrame | None = None
    streams: pd.DataFrame | None = None
    syncs: pd.DataFrame | None = None
    pairs: pd.DataFrame | None = None
    checks: pd.DataFrame | None = None
    ops: pd.DataFrame | None = None
    host: pd.DataFrame | None = None
    host_steps: pd.DataFrame | None = None
    kind: str = TRACE
    run: Run | None = None
    trace: Trace | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Analysis.kind: {self.kind!r}, not one of {KINDS}")

    @property
    def traced(self) -> bool:
        """It has GPU ops, so gaps (False for GPU metrics alone; a stored run says which)."""
        if self.kind == STORED:
            return self.summary.get("cuda_trace", True) not in (False, 0)
        return self.kind == TRACE

    @property
    def label(self) -> str | None:
        return self.run.label if self.run is not None else None

    @property
    def source(self) -> str | None:
        """What made the trace, for a report's first line (a stored run: the database's)."""
        if self.trace is not None:
            return describe(self.trace)
        return "read from a results database" if self.kind == STORED else None

    def __repr__(self) -> str:
        parts = [f"device={self.device}", f"kind={self.kind!r}", f"label={self.label!r}",
                 f"steps={len(self.steps)}"]
        parts += [f"{f.name}={len(getattr(self, f.name))}" for f in fields(self)
                  if f.name in ("gaps", "streams", "syncs", "host")
                  and getattr(self, f.name) is not None]
        return f"Analysis({', '.join(parts)})"


def describe(trace: Trace) -> str:
    """What made the trace, for the report's first line."""
    if trace.source == "kineto":
        return f"torch.profiler trace schema {trace.schema_version}"
    return f"nsys export schema {trace.schema_version}"
