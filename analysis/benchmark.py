"""Speed of the whole analysis on a ~1M-GPU-op trace, next to nsys's projection report.

    python -m analysis.benchmark [--copies 128] [--runs 3] [--nsys PATH]

Builds /tmp/gapscope-bench.sqlite by tiling a real export in time: each copy shifts every
timestamp by the export's span and every correlationId by its largest one, and renumbers the
step ranges, so the tiled trace is one long, consistent capture. This is the one place outside
the loader that touches SQLite, and it only writes its own scratch copy.
"""

import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

import click

DEFAULT_SOURCE = Path(__file__).resolve().parent.parent / "tests/data/h200-eager-static-bs16.sqlite"
SCRATCH = Path("/tmp/gapscope-bench.sqlite")
SHIFTED = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
           "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS")
STEP_PREFIX = "Step "

SPAN_SQL = """
SELECT min(start), max(end), max(correlationId) FROM (
    SELECT start, end, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME
    UNION ALL SELECT start, end, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL)
"""


def _copy_sql(con: sqlite3.Connection, table: str) -> str:
    """INSERT … SELECT of the original rows with times and correlation ids moved by (?, ?)."""
    cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
    moved = {"start": "start + :dt", "end": "end + :dt", "correlationId": "correlationId + :dc"}
    if table == "NVTX_EVENTS":
        # Copies carry the step name as text (textId NULL), renumbered so steps stay distinct.
        moved["text"] = (
            "CASE WHEN name LIKE 'Step %' THEN 'Step ' || (CAST(substr(name, 6) AS INTEGER) "
            "+ :dstep) ELSE name END"
        )
        moved["textId"] = "NULL"
        source = ("(SELECT e.*, COALESCE(e.text, s.value) AS name FROM NVTX_EVENTS AS e "
                  "LEFT JOIN StringIds AS s ON s.id = e.textId WHERE e.rowid <= :rows)")
    else:
        source = f"(SELECT * FROM {table} WHERE rowid <= :rows)"
    exprs = ", ".join(moved.get(c, c) for c in cols)
    return f"INSERT INTO {table} ({', '.join(cols)}) SELECT {exprs} FROM {source}"


def build(source: Path, copies: int, out: Path, repeat_names: bool = False) -> int:
    """Writes the tiled trace; returns its number of GPU ops. With `repeat_names`, every tile
    keeps the source's step names (Step 31..50 again and again, as in a capture of several
    `generate()` calls) instead of numbering on."""
    shutil.copyfile(source, out)
    con = sqlite3.connect(out)
    t0, t1, max_corr = con.execute(SPAN_SQL).fetchone()
    dt, dc = (t1 - t0) + 1_000_000, max_corr + 1
    steps = con.execute("SELECT count(*) FROM NVTX_EVENTS AS e JOIN StringIds AS s "
                        "ON s.id = e.textId WHERE s.value LIKE 'Step %'").fetchone()[0]
    present = [t for t in SHIFTED if con.execute(
        "SELECT 1 FROM sqlite_master WHERE name = ?", (t,)).fetchone()]
    rows = {t: con.execute(f"SELECT max(rowid) FROM {t}").fetchone()[0] or 0 for t in present}
    sql = {t: _copy_sql(con, t) for t in present}
    for k in range(1, copies):
        dstep = 0 if repeat_names else k * steps
        for t in present:
            con.execute(sql[t], {"dt": k * dt, "dc": k * dc, "dstep": dstep, "rows": rows[t]})
    con.commit()
    ops = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in present if t.startswith("CUPTI_ACTIVITY_KIND_M") or t.endswith("KERNEL"))
    con.close()
    return ops


CHILD = """
import resource, sys, time
t = time.perf_counter()
from analysis.readers import load_trace
from analysis.summary import analyze
a = analyze(load_trace(sys.argv[1]))
wall = time.perf_counter() - t
# Peak RSS of this process and of the forked reader the loader may use (KiB on Linux).
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
reader = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(wall, a[0].summary["steps"], a[0].summary["gaps"], own, reader)
"""


def run_child(trace: Path) -> tuple:
    """Wall time of one analysis in a fresh process (start and imports included), its own
    wall time, steps, gaps, and the peak RSS (KiB) of it and of its forked reader."""
    root = Path(__file__).resolve().parent.parent
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, str(trace)], cwd=root, check=True,
                         capture_output=True, text=True).stdout.split()
    wall = time.perf_counter() - t
    return wall, float(out[0]), int(out[1]), int(out[2]), int(out[3]), int(out[4])


def run_nsys(nsys: str, trace: Path) -> float:
    work = Path("/tmp/gapscope-bench-nsys")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    t = time.perf_counter()
    subprocess.run([nsys, "stats", "-q", "-r", "nvtx_gpu_proj_trace", "-f", "csv", "-o",
                    str(work / "proj"), str(trace)], check=True, capture_output=True)
    return time.perf_counter() - t


@click.command()
@click.option("--source", type=click.Path(exists=True, dir_okay=False), default=DEFAULT_SOURCE)
@click.option("--copies", default=128, show_default=True, help="Tiles of the source export.")
@click.option("--runs", default=3, show_default=True, help="Timed runs; the median is printed.")
@click.option("--nsys", default=None, help="An nsys binary to time its projection report.")
def main(source, copies, runs, nsys):
    t = time.perf_counter()
    ops = build(Path(source), copies, SCRATCH)
    click.echo(f"built {SCRATCH}: {ops} GPU ops, {SCRATCH.stat().st_size / 2**20:.0f} MiB "
               f"in {time.perf_counter() - t:.1f} s")
    results = [run_child(SCRATCH) for _ in range(runs)]
    wall = statistics.median(r[0] for r in results)
    inner = statistics.median(r[1] for r in results)
    own_mib = max(r[4] for r in results) / 1024
    reader_mib = max(r[5] for r in results) / 1024
    click.echo(f"gapscope: {wall:.2f} s wall per analysis (process start and imports included; "
               f"imports + load + analysis {inner:.2f} s), median of {runs}; peak RSS "
               f"{own_mib:.0f} MiB, forked reader {reader_mib:.0f} MiB (the two overlap in "
               f"time only while reading); {results[0][2]} steps, {results[0][3]} gaps")
    if nsys:
        times = [run_nsys(nsys, SCRATCH) for _ in range(runs)]
        click.echo(f"nsys stats -r nvtx_gpu_proj_trace: {statistics.median(times):.2f} s wall, "
                   f"median of {runs}")


if __name__ == "__main__":
    main()
