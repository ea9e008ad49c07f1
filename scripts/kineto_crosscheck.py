"""The nsys capture and the torch.profiler twin of one run, step by step (issue 13's cross-check).

    python -m scripts.kineto_crosscheck RUN_DIR            # RUN/capture.sqlite[.xz], kineto.json.gz
    python -m scripts.kineto_crosscheck NSYS.sqlite KINETO.json.gz [--busy-tolerance 0.05]

Prints, per step present in both, ops and op records (equal when both saw the same launches),
busy time and its ratio (the GPU's own work: within the tolerance), and the idle by cause of each.
Exit 0 when ops and records match and every busy ratio is within the tolerance, 1 when not,
2 on bad input.
"""

import argparse
import sys
from pathlib import Path

from analysis.errors import TraceError
from analysis.measures.summary import analyze
from analysis.readers import load_trace
from analysis.readers.runs import KINETO_NAMES, TRACE_NAME, trace_in


def pair(args: list) -> tuple:
    if len(args) == 1:
        run = Path(args[0])
        kineto = next((run / n for n in KINETO_NAMES if (run / n).is_file()), run / KINETO_NAMES[0])
        return trace_in(run) or run / TRACE_NAME, kineto
    if len(args) == 2:
        return Path(args[0]), Path(args[1])
    raise TraceError("give a run directory, or an nsys export and a torch.profiler trace")


def crosscheck(nsys_path: Path, kineto_path: Path, tolerance: float) -> tuple:
    """(lines, ok): the per-step table and the verdict, first device of each."""
    n = analyze(load_trace(nsys_path))[0]
    k = analyze(load_trace(kineto_path))[0]
    both = n.steps.merge(k.steps, on="step", suffixes=("_nsys", "_kineto"))
    ratio = both["busy_ns_kineto"].astype(float) / both["busy_ns_nsys"].astype(float)
    same_ops = (both["ops_nsys"] == both["ops_kineto"]) & (
        both["op_records_nsys"] == both["op_records_kineto"])
    close = (ratio - 1).abs() <= tolerance
    lines = [f"{'step':>6} {'ops nsys/kineto':>16} {'records':>13} {'busy us nsys':>13} "
             f"{'kineto':>9} {'ratio':>7}"]
    for row, r, same, near in zip(both.itertuples(), ratio, same_ops, close, strict=True):
        flag = "" if same and near else "  <-"
        lines.append(f"{row.step:>6} {row.ops_nsys:>7} / {row.ops_kineto:<6} "
                     f"{row.op_records_nsys:>5} / {row.op_records_kineto:<5} "
                     f"{row.busy_ns_nsys / 1e3:>13.1f} {row.busy_ns_kineto / 1e3:>9.1f} "
                     f"{r:>7.3f}{flag}")
    for name, a in (("nsys", n), ("kineto", k)):
        s = a.summary
        cause = "  ".join(f"{c} {v / 1e3:.1f}" for c, v in s["idle_ns_by_cause"].items())
        lines.append(f"{name:>6}: {s['steps']} steps, idle {s['idle_ns'] / 1e3:.1f} us of "
                     f"{s['window_ns'] / 1e3:.1f}: {cause} (us)")
    only = sorted(set(n.steps["step"]) ^ set(k.steps["step"]))
    if only:
        lines.append(f"steps in one capture only: {only}")
    ok = bool(len(both)) and bool(same_ops.all()) and bool(close.all())
    lines.append(f"{'match' if ok else 'MISMATCH'}: {int(same_ops.sum())}/{len(both)} steps with "
                 f"equal ops, {int(close.sum())}/{len(both)} with busy within {tolerance:.0%}")
    return lines, ok


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="+", help="RUN_DIR, or NSYS.sqlite KINETO.json[.gz]")
    p.add_argument("--busy-tolerance", type=float, default=0.05)
    args = p.parse_args(argv)
    try:
        lines, ok = crosscheck(*pair(args.traces), args.busy_tolerance)
    except TraceError as e:
        sys.stderr.write(f"kineto_crosscheck: error: {e}\n")
        return 2
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
