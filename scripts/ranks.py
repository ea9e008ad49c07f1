"""The ranks of one tensor-parallel run side by side (profile-tp.sh writes the run directory).

    python -m scripts.ranks RUN_DIR      # RUN_DIR holds capture_0.sqlite, capture_1.sqlite, ...

(from the repository root, or with it on PYTHONPATH, as profile-tp.sh runs it)

Per rank its device, steps, median GPU period and bubble; per step the slowest rank and the
collectives' wait (analysis/measures/ranks.py; docs/METRICS.md, "Ranks"), in µs; then the largest
collective end spread, the check that the captures share one time base.
"""

import sys
from pathlib import Path

from analysis.errors import TraceError
from analysis.measures.ranks import align, collective_waits, collectives, rank_table
from analysis.measures.summary import analyze, median
from analysis.readers import load_trace
from analysis.readers.nsys import read_session_start_ns


def rank_captures(run: Path) -> list[Path]:
    paths = sorted(run.glob("capture_*.sqlite"), key=lambda p: int(p.stem.split("_")[1]))
    if [int(p.stem.split("_")[1]) for p in paths] != list(range(len(paths))) or not paths:
        raise TraceError(f"{run}: no capture_0.sqlite, capture_1.sqlite, ... (profile-tp.sh)")
    return paths


def main(argv: list[str]) -> int:
    """Exit 0 with the tables on stdout; 2 with one `gapscope: error:` line."""
    if len(argv) != 1:
        sys.stderr.write("gapscope: error: usage: python -m scripts.ranks RUN_DIR\n")
        return 2
    try:
        return print_ranks(Path(argv[0]))
    except TraceError as e:
        sys.stderr.write(f"gapscope: error: {e}\n")
        return 2


def print_ranks(run: Path) -> int:
    analyses, colls, starts = [], [], []
    for path in rank_captures(run):
        trace = load_trace(path)
        found = analyze(trace)
        if len(found) != 1:
            raise TraceError(f"{path}: steps ran on {len(found)} devices, one a rank expected")
        analyses.append(found[0])
        colls.append(collectives(found[0].ops, trace.strings, found[0].steps))
        start = read_session_start_ns(path)
        if start is None:
            raise TraceError(f"{path}: no TARGET_INFO_SESSION_START_TIME: cannot align the ranks")
        starts.append(start)
    colls = align(colls, starts)
    print("rank  device  steps  period_us_median  bubble_us_median")
    for r, a in enumerate(analyses):
        print(f"{r:>4}  {a.device:>6}  {len(a.steps):>5}  {us(median(a.steps['period_ns'])):>16}"
              f"  {us(median(a.steps['bubble_ns'])):>16}")
    table = rank_table([a.steps for a in analyses], colls)
    print("\nstep  slowest_rank  period_us_max  period_us_min  collectives  wait_us  waited_rank")
    for row in table.itertuples():
        print(f"{row.step:>4}  {row.slowest_rank:>12}  {us(row.period_ns_max):>13}  "
              f"{us(row.period_ns_min):>13}  {row.collectives:>11}  "
              f"{us(row.collective_wait_ns):>7}  {row.waited_rank!s:>11}")
    waits = collective_waits(colls)
    print(f"\ncollective wait per step, median: {us(median(table['collective_wait_ns']))} µs; "
          f"largest end spread (time-base check): "
          f"{us(waits['end_spread_ns'].max() if len(waits) else None)} µs")
    return 0


def us(ns) -> str:
    return "-" if ns is None else f"{ns / 1e3:.1f}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
