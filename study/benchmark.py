"""Speed of the whole analysis on a ~1M-GPU-op trace, next to nsys's projection report.

    python -m study.benchmark [--copies 150] [--repeat-names|--renumber] [--runs 3]
                                 [--nsys PATH] [--only TEXT ...] [--no-steps] [--json FILE]
                                 [--startup-runs 7]

Builds bench.sqlite in a scratch directory of its own (removed at the end; several benchmarks
may run at once) by tiling a real export in time: each copy shifts every timestamp by the
export's span and every correlationId by its largest one, and keeps the step names (or renumbers
them), so the tiled trace is one long, consistent capture, and a copy of it without its step
ranges (un-annotated: gapscope infers the steps, analysis/measures/infer.py). Then times each
output (text, JSON, CSV, `--table gaps`, --db, report, and text of the un-annotated copy) in a
fresh process, nsys's projection report on the same file in the same run, interleaved, and
prints each one's median wall time over nsys's (its ratio; the target is 0.8x or less), its CPU
time (user + system, all threads: what a loaded machine cannot hide) and its peak RSS; then the
start-up times of study/startup.py. With --no-steps every command reads the
un-annotated copy; nsys's projection still reads the original (it needs the ranges). This is the
one place outside the loader that touches SQLite, and it only writes its own scratch copy.

`--json FILE` writes every figure it prints, one object (format "gapscope-benchmark/1"; the
keys stay as they are, new ones are only added):
    when, command                       UTC time of the run, the command line
    machine {cores, cpu, system, python}
    load_average {start, end}           os.getloadavg() (1, 5, 15 min) before and after
    trace {source, copies, step_names, gpu_op_records, mib}
    runs                                timed runs of each command
    nsys {version, report, wall_s, cpu_s} | null     each run's seconds
    commands [{name, args, wall_s, cpu_s, peak_rss_gib, written_mib, ratio}]
                                        each run's seconds; ratio: median wall / nsys's
    startup {NAME: {wall_s, median_s, target_s}}     study/startup.py's figures
docs/benchmark-2core.json is such a record, made on the 2-core development machine.
"""

import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from analysis.toolkit import EXPORT_TIMEOUT_S, median, plain

DEFAULT_SOURCE = (Path(__file__).resolve().parents[1]
                  / "tests/data/h200-eager-static-bs16.sqlite.xz")
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


# The step ranges, by their name (as text, or registered through textId).
DELETE_STEPS_SQL = """
DELETE FROM NVTX_EVENTS WHERE COALESCE(text, (SELECT value FROM StringIds WHERE id = textId))
LIKE 'Step %'
"""


def remove_steps(trace: Path, out: Path) -> None:
    """A copy of the trace without its step ranges."""
    shutil.copyfile(trace, out)
    con = sqlite3.connect(out)
    con.execute(DELETE_STEPS_SQL)
    con.commit()
    con.close()


def build(source: Path, copies: int, out: Path, repeat_names: bool = False) -> int:
    """Writes the tiled trace; returns its number of GPU ops. With `repeat_names`, every tile
    keeps the source's step names (Step 31..50 again and again, as in a capture of several
    `generate()` calls) instead of numbering on. The source may be stored compressed."""
    shutil.copyfile(plain(source), out)
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


# Each command runs in a fresh process under this wrapper, which prints the process' peak RSS
# (KiB on Linux) when it ends (gapscope starts no process of its own: its parallel work is in
# threads, so this is all of it).
WRAPPER = """
import resource, sys
from analysis.cli import main
try:
    main(sys.argv[1:], prog_name="gapscope")
except SystemExit as e:
    if e.code:
        raise
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""
INFERRED = "analyze (steps inferred)"


def commands(trace: Path, out: Path, unannotated: Path | None = None) -> dict:
    """name -> gapscope arguments; each output goes to a file, as a user would redirect it. With
    `unannotated`, also the text of that copy (its steps inferred)."""
    inferred = {INFERRED: ["analyze", str(unannotated)]} if unannotated else {}
    return inferred | {
        "analyze --format text": ["analyze", str(trace)],
        "analyze --format json": ["analyze", str(trace), "--format", "json"],
        "analyze --format csv": ["analyze", str(trace), "--format", "csv"],
        "analyze --format csv --table gaps": ["analyze", str(trace), "--format", "csv",
                                              "--table", "gaps"],
        "analyze --format csv --table streams": ["analyze", str(trace), "--format", "csv",
                                                 "--table", "streams"],
        "analyze --db FILE": ["analyze", str(trace), "--db", str(out / "bench.db")],
        "report -o DIR": ["report", str(trace), "-o", str(out / "report")],
    }


def children_cpu_s() -> float:
    """User + system seconds of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_command(args: list, out_dir: Path) -> tuple:
    """(wall s, peak RSS KiB, output bytes, CPU s) of one command in a fresh process: start,
    imports and writing the output included."""
    root = Path(__file__).resolve().parents[1]
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir()
    out = out_dir / "stdout"
    cpu, t = children_cpu_s(), time.perf_counter()
    with open(out, "wb") as f:
        done = subprocess.run([sys.executable, "-c", WRAPPER, *args], cwd=root, check=True,
                              stdout=f, stderr=subprocess.PIPE, text=True)
    wall, cpu = time.perf_counter() - t, children_cpu_s() - cpu
    own = int(done.stderr.split()[-1])
    return wall, own, sum(p.stat().st_size for p in out_dir.rglob("*") if p.is_file()), cpu


def run_nsys(nsys: str, trace: Path, work: Path) -> tuple:
    """(wall s, CPU s) of nsys's projection report of the trace."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    cpu, t = children_cpu_s(), time.perf_counter()
    subprocess.run([nsys, "stats", "-q", "-r", "nvtx_gpu_proj_trace", "-f", "csv", "-o",
                    str(work / "proj"), str(trace)], check=True, capture_output=True,
                   timeout=EXPORT_TIMEOUT_S)
    return time.perf_counter() - t, children_cpu_s() - cpu


@click.command()
@click.option("--source", type=click.Path(exists=True, dir_okay=False), default=DEFAULT_SOURCE)
@click.option("--copies", default=150, show_default=True, help="Tiles of the source export.")
@click.option("--repeat-names/--renumber", default=True, show_default=True,
              help="Keep the source's step names in every tile (a capture of several "
                   "generate() calls), or number the steps on.")
@click.option("--runs", default=3, show_default=True, help="Timed runs; the median is printed.")
@click.option("--nsys", default=None, help="An nsys binary to time its projection report "
              "(on a machine without one: bash ../shared/tools/nsys-host.sh prints one).")
@click.option("--only", multiple=True,
              help="Time only the commands whose name has this text (repeatable): --only db.")
@click.option("--no-steps", is_flag=True,
              help="Every command reads the tiled trace without its step ranges: gapscope infers "
                   "the steps (nsys's projection still reads the trace with them).")
@click.option("--startup-runs", default=7, show_default=True,
              help="Fresh processes for each start-up figure (study/startup.py); 0: "
                   "none.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Also write every figure, the load and the machine to this "
              "JSON (the module's docstring gives its keys; docs/benchmark-2core.json is one).")
def main(source, copies, repeat_names, runs, nsys, only, no_steps, startup_runs, json_out):
    """Times every output of gapscope on a tiled ~1M-op trace, each in a fresh process, and
    nsys's projection report on the same file in the same run, interleaved (the machine's load
    then weighs on both alike), then gapscope's start-up."""
    import json
    import shlex

    with tempfile.TemporaryDirectory(prefix="gapscope-bench-") as scratch:
        record = measure(Path(source), copies, repeat_names, runs, nsys, Path(scratch), only,
                         no_steps)
    if startup_runs:
        from . import startup

        record["startup"] = startup.measure(startup_runs)
        for line in startup.lines(record["startup"]):
            click.echo(line)
    record["command"] = shlex.join(["python", "-m", "study.benchmark", *sys.argv[1:]])
    if json_out is not None:
        json_out.write_text(json.dumps(record, indent=1) + "\n")
        click.echo(f"gapscope: wrote {json_out}", err=True)


def nsys_version(nsys: str) -> str:
    try:
        done = subprocess.run([nsys, "--version"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "?"
    return done.stdout.strip().rsplit(" ", 1)[-1] if done.returncode == 0 else "?"


def block_text(when: str, cores: int, ops: int, mib: float, runs: int, load: tuple,
               nsys: tuple | None, rows: list) -> str:
    """The generated block: how it was measured, the table, and the range against nsys.
    rows: (name, [wall s of each run], peak RSS GiB, written MiB)."""
    head = (f"Measured {when} on {cores} cores: {ops:,} GPU op records ({mib:.0f} MiB export), "
            f"each output {runs} times in a fresh process (start, imports and writing the output "
            f"included), interleaved with nsys's projection; load average (1 min) "
            f"{load[0]:.2f} at the start, {load[1]:.2f} at the end.")
    if nsys:
        version, times = nsys
        head += (f" nsys {version} `stats -r nvtx_gpu_proj_trace`: "
                 f"{median(times):.2f} s (median; runs "
                 f"{min(times):.2f}–{max(times):.2f} s).")
    lines = [f"| gapscope command | wall, median of {runs} | runs | / nsys | peak RSS | written |",
             "| --- | --- | --- | --- | --- | --- |"]
    ratios = []
    for name, walls, own, written in rows:
        wall = median(walls)
        ratio = wall / median(nsys[1]) if nsys else None
        if ratio is not None:
            ratios.append(ratio)
        lines.append(f"| `{name}` | {wall:.2f} s | {min(walls):.2f}–{max(walls):.2f} s | "
                     + (f"{ratio:.2f}x" if ratio is not None else "n/a")
                     + f" | {own:.2f} GiB | {written:.1f} MiB |")
    tail = (f"Every output took {min(ratios):.2f}–{max(ratios):.2f}x of nsys's projection in "
            f"this run (medians), under a load average of {load[0]:.2f}–{load[1]:.2f} on "
            f"{cores} cores" if ratios else "No nsys in this run, so no ratio")
    tail += f"; the largest peak RSS {max(r[2] for r in rows):.2f} GiB."
    from .text import wrap

    return "\n\n".join([wrap(head), "\n".join(lines), wrap(tail)])


def measure(source: Path, copies: int, repeat_names: bool, runs: int, nsys: str | None,
            scratch: Path, only: tuple = (), no_steps: bool = False) -> dict:
    """Prints the table and returns the record --json writes (the module's docstring)."""
    load = os.getloadavg()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    trace = scratch / "bench.sqlite"
    t = time.perf_counter()
    ops = build(source, copies, trace, repeat_names)
    click.echo(f"built {trace}: {ops} GPU ops, {trace.stat().st_size / 2**20:.0f} MiB "
               f"in {time.perf_counter() - t:.1f} s ({'repeated' if repeat_names else 'renumbered'}"
               " step names)")
    unannotated = scratch / "bench-no-steps.sqlite"
    remove_steps(trace, unannotated)
    click.echo(f"and {unannotated}: the same without its step ranges (steps inferred)")
    todo = {name: args for name, args in
            commands(unannotated if no_steps else trace, scratch / "out",
                     None if no_steps else unannotated).items()
            if not only or any(text in name for text in only)}
    results = {name: [] for name in todo}
    nsys_runs = []
    for _ in range(runs):
        if nsys:
            nsys_runs.append(run_nsys(nsys, trace, scratch / "nsys"))
        for name, args in todo.items():
            results[name].append(run_command(args, scratch / "out"))
    nsys_s = median(r[0] for r in nsys_runs) if nsys else None
    click.echo(f"| gapscope command | wall (median of {runs}) | / nsys | CPU (median) | "
               "peak RSS | written |")
    click.echo("| --- | --- | --- | --- | --- | --- |")
    rows = []
    for name, rs in results.items():
        wall, cpu = median(r[0] for r in rs), median(r[3] for r in rs)
        own = max(r[1] for r in rs) / 2**20
        ratio = wall / nsys_s if nsys_s else None
        click.echo(f"| `{name}` | {wall:.2f} s | "
                   + (f"{ratio:.2f}x" if ratio is not None else "n/a")
                   + f" | {cpu:.2f} s | {own:.2f} GiB | {rs[0][2] / 2**20:.1f} MiB |")
        rows.append({"name": name, "args": [Path(a).name if a.startswith(str(scratch)) else a
                                            for a in todo[name]],
                     "wall_s": [r[0] for r in rs], "cpu_s": [r[3] for r in rs],
                     "peak_rss_gib": own, "written_mib": rs[0][2] / 2**20, "ratio": ratio})
    if nsys:
        click.echo(f"nsys stats -r nvtx_gpu_proj_trace: {nsys_s:.2f} s wall, "
                   f"{median(r[1] for r in nsys_runs):.2f} s CPU, median of {runs}")
    # Other work on the machine weighs on every figure: say how much there was.
    end = os.getloadavg()
    click.echo(f"load average at the start {load[0]:.2f}, at the end {end[0]:.2f} "
               f"(1 min; {os.cpu_count()} cores)")
    return {
        "format": "gapscope-benchmark/1",
        "when": when,
        "machine": machine(),
        "load_average": {"start": list(load), "end": list(end)},
        "trace": {"source": _relative(source), "copies": copies,
                  "step_names": "inferred" if no_steps else
                  "repeated" if repeat_names else "renumbered",
                  "gpu_op_records": ops, "mib": trace.stat().st_size / 2**20},
        "runs": runs,
        "nsys": {"version": nsys_version(nsys), "report": "stats -r nvtx_gpu_proj_trace",
                 "wall_s": [r[0] for r in nsys_runs], "cpu_s": [r[1] for r in nsys_runs]}
        if nsys else None,
        "commands": rows,
    }


def machine() -> dict:
    """What the figures were measured on."""
    import platform

    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                  if line.startswith("model name")), platform.processor() or "?")
    return {"cores": os.cpu_count(), "cpu": model, "system": platform.platform(),
            "python": platform.python_version()}


def _relative(path: Path) -> str:
    root = Path(__file__).resolve().parents[1]
    try:
        return str(Path(path).resolve().relative_to(root))
    except ValueError:
        return str(path)


def block_from_record(record: dict) -> str:
    """block_text of a --json record: the block publish puts into docs/ANALYSIS.md."""
    t, nsys, load = record["trace"], record.get("nsys"), record["load_average"]
    rows = [(c["name"], c["wall_s"], c["peak_rss_gib"], c["written_mib"])
            for c in record["commands"]]
    return block_text(record["when"], record["machine"]["cores"], t["gpu_op_records"], t["mib"],
                      record["runs"], (load["start"][0], load["end"][0]),
                      (nsys["version"], nsys["wall_s"]) if nsys else None, rows)


if __name__ == "__main__":
    main()
