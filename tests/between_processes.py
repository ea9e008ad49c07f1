"""What two captures of one program, each made in a process of its own (torch.profiler in one,
nsys in the other), agree on, and how closely.

Exact across processes: the ops and op records of each step (one program, one schedule). GPU
time is not: each process has its own clocks, caches and profiler start, and one step of a tiny
program read 9% apart (step 0, kineto/nsys 1.09, on a bare H200). So GPU time is compared by
its median over the steps of one kind (eager, graph-replayed: one step's outlier moves no
median), within the spread measured between processes: the spread between the steps of that
kind inside each of the two processes, plus the largest per-step difference of the committed
pair (tests/data/runs/static-kineto: one decode loop by nsys and by torch.profiler, kineto/nsys
1.0055-1.0133 a step).
"""

from pathlib import Path

import numpy as np

PAIR = Path(__file__).parent / "data" / "runs" / "static-kineto"


def committed_spread(nsys=None, kineto=None) -> float:
    """The largest |kineto/nsys - 1| of a step in the committed pair (its two Analyses, opened
    here where not given)."""
    import analysis

    if nsys is None:
        (nsys,) = analysis.open(PAIR / "capture.sqlite.xz")
        (kineto,) = analysis.open(PAIR / "kineto.json.gz")
    ratio = kineto.steps["busy_ns"].to_numpy(float) / nsys.steps["busy_ns"].to_numpy(float)
    return float(np.abs(ratio - 1).max())


def same_counts(a, b) -> bool:
    """The steps, their ops and their op records, exactly."""
    return all(a.steps[c].tolist() == b.steps[c].tolist() for c in ("step", "ops", "op_records"))


def spread(busy: np.ndarray) -> float:
    """max / min - 1 of the steps' GPU busy time."""
    return float(busy.max() / busy.min() - 1)


def gpu_time_agreement(a, b, kind_of_step, between: float) -> dict:
    """kind -> (median busy of a's steps / b's, the tolerance): steps grouped by
    kind_of_step(step number); the tolerance is the larger spread of that kind's steps in a
    and in b, plus `between` (committed_spread())."""
    out = {}
    kinds = np.array([kind_of_step(s) for s in a.steps["step"]])
    for kind in dict.fromkeys(kinds):
        mine = kinds == kind
        busy_a = a.steps["busy_ns"].to_numpy(float)[mine]
        busy_b = b.steps["busy_ns"].to_numpy(float)[mine]
        out[kind] = (float(np.median(busy_a) / np.median(busy_b)),
                     max(spread(busy_a), spread(busy_b)) + between)
    return out


def agrees(agreement: dict) -> bool:
    return all(abs(ratio - 1) <= tolerance for ratio, tolerance in agreement.values())
