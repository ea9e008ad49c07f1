"""One step of an analysis on its own, for a notebook (`a.step(40)`): its row of the per-step
table, its GPU ops with their names, the idle gaps in its period, and a line that says it.

    Step 40 (thread python3): GPU period 8.191 ms, busy 1.474 ms, bubble 57.8 µs; 392 op
    records; 391 gaps: sync 0.000, host 6.547, queued 0.190 ms
"""

from dataclasses import dataclass

import pandas as pd

from ..errors import TraceError
from ..measures.gaps import CAUSES


@dataclass(frozen=True, eq=False)
class StepView:
    """row: the step's row of `steps` (a Series); ops: its GPU ops (the columns of
    Analysis.ops, with `name` and `kind` as text); gaps: the gaps inside its period (the rows
    of Analysis.gaps whose step it is)."""

    row: pd.Series
    ops: pd.DataFrame
    gaps: pd.DataFrame

    def __repr__(self) -> str:
        r = self.row

        def ms(v):
            return "n/a" if pd.isna(v) else f"{v / 1e6:.3f} ms"

        bubble = "n/a" if pd.isna(r["bubble_ns"]) else f"{r['bubble_ns'] / 1e3:.1f} µs"
        idle = self.gaps.groupby("cause", observed=False)["gap_ns"].sum()
        causes = ", ".join(f"{c} {idle.get(c, 0) / 1e6:.3f}" for c in CAUSES
                           if c != "unknown" or idle.get(c, 0))
        return (f"{r['name']} (thread {r['thread']}): GPU period {ms(r['period_ns'])}, busy "
                f"{ms(r['busy_ns'])}, bubble {bubble}; {len(self.ops)} op records; "
                f"{len(self.gaps)} gaps: {causes} ms")


def named(ops: pd.DataFrame, strings: dict | None = None) -> pd.DataFrame:
    """The ops, which carry their `name` (a kernel's name, `[memcpy]`, `[memset]`, `[graph]`)
    and `kind` (`kernel`, `memcpy`, `memset`, `graph`) as words (summary.public_ops):
    Analysis.named_ops, kept for the code that called it."""
    return ops


def step_number(number) -> int:
    """A step's number as given (`40`, `"40"`, numpy's ints), else one line."""
    if isinstance(number, bool):
        raise TraceError(f"step {number!r}: a step is named by its number, e.g. step(40)")
    try:
        value = int(str(number).strip()) if isinstance(number, str) else int(number)
    except (TypeError, ValueError):
        raise TraceError(f"step {number!r}: a step is named by its number, e.g. step(40) "
                         "(METRICS.md, \"Step numbers\")") from None
    if not isinstance(number, str) and value != number:
        raise TraceError(f"step {number!r}: a step number is a whole number")
    return value


def one_step(steps: pd.DataFrame, ops: pd.DataFrame, gaps: pd.DataFrame, step: int,
             thread: str | None = None) -> StepView:
    """Step number `step` (of `thread`, where several threads number their steps alike): its
    row, its ops named, its gaps. With several threads, an op is the step's when its launch
    thread is the step's (labelled as steps.thread_labels labels it), a gap when the op ending
    it is (or no step's thread launched that op and the gap lies in the step's period).
    TraceError, one line, for a step the table has not."""
    rows = steps[steps["step"] == step]
    if thread is not None:
        rows = rows[rows["thread"] == thread]
    if rows.empty:
        have = steps["step"]
        raise TraceError(f"step {step}{f' of thread {thread}' if thread else ''}: the steps "
                         f"are {have.min()} to {have.max()} ({len(have)} of them)")
    if len(rows) > 1:
        raise TraceError(f"step {step}: {len(rows)} threads have one "
                         f"({', '.join(map(str, rows['thread']))}); pass thread=")
    row = rows.iloc[0]
    mine = ops[ops["step"].to_numpy() == step]
    own = gaps[gaps["step"].to_numpy() == step]
    if steps["thread"].nunique() > 1:
        # The ops and gaps carry their launch thread's label, as the steps' threads are named.
        mine = mine[mine["thread"].to_numpy() == row["thread"]]
        by = own["thread"].to_numpy()
        period = (own["start_ns"] >= row["gpu_end_ns"] - row["period_ns"]).to_numpy() & \
            (own["end_ns"] <= row["gpu_end_ns"]).to_numpy()
        own = own[(by == row["thread"]) | (~pd.Series(by).isin(steps["thread"]).to_numpy()
                                            & period)]
    return StepView(row, mine.reset_index(drop=True), own.reset_index(drop=True))
