"""`gapscope profile [OPTIONS] -- CMD [ARGS...]`: any program under Nsight Systems, analysed.

The program runs under `nsys profile` with the capture flags of scripts/profile.sh, the same nsys
exports the capture to SQLite, and the analysis reads it; everything lands in a new run directory
traces/<UTC>-<program>/ (never overwritten): capture.nsys-rep, capture.sqlite, nsys.log (all the
program and nsys printed), run.json (the command, nsys version and flags, the --steps/--check
patterns, which `gapscope analyze RUN` reuses) and report.md with its plots. The program finds
the run directory in $GAPSCOPE_RUN_DIR.

Exit status, as profile.sh's: 0 done; 2 bad usage; the program's own status when it fails under
nsys; 1 for the other failures (no nsys, too old, no GPU, nothing captured, no steps, no kernels).
Each failure is one line on stderr.
"""

import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import click

from analysis.capture import (
    EXPORT_TIMEOUT_S,
    GRAPH_TRACES,
    RANGES,
    NsysError,
    capture_contents,
    capture_flags,
    export_command,
    find_nsys,
    require_version,
)
from analysis.errors import TraceError
from analysis.steps import DEFAULT_CHECK_PATTERN, DEFAULT_STEP_PATTERN, compile_pattern

# Lines nsys itself prints, skipped when naming the program's last message.
NSYS_CHATTER = re.compile(r"^\s*$|^\s+/|^(Generated|Generating|Collecting data|Capture range|"
                          r"Processing|\[[0-9]+/[0-9]+\])")


class ProfileError(click.ClickException):
    """A failure after the options were accepted: one line, profile.sh's exit status."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


def program_name(cmd: tuple) -> str:
    """A run directory's name for CMD: the script or module Python runs, else the program."""
    name = Path(cmd[0]).name
    if re.fullmatch(r"python[0-9.]*", name):
        args = list(cmd[1:])
        while args and args[0].startswith("-") and args[0] not in ("-m", "-c"):
            args.pop(0)
        if args[:1] == ["-m"] and len(args) > 1:
            name = args[1]
        elif args and args[0] != "-c":
            name = Path(args[0]).stem
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "program"


def wants_cpu(cmd: tuple) -> bool:
    """The program was asked to run on the CPU (`--device cpu`): no GPU is required."""
    return "--device=cpu" in cmd or any(
        a == "--device" and b == "cpu" for a, b in zip(cmd, cmd[1:], strict=False))


def new_run_dir(base: Path, name: str) -> Path:
    """base/name, or name-2, name-3... when taken: mkdir fails on an existing directory, so two
    runs in one second never share one."""
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ProfileError(f"cannot create run directories under {base}: {e.strerror}") from None
    n = 1
    while True:
        run = base / (name if n == 1 else f"{name}-{n}")
        try:
            run.mkdir()
            return run
        except FileExistsError:
            n += 1


def last_message(log: Path) -> str:
    """The last line the program (not nsys' own progress) printed."""
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    mine = [line for line in lines if not NSYS_CHATTER.search(line)]
    any_line = [line for line in lines if line.strip()]
    return (mine or any_line or ["(nothing)"])[-1].strip()


def tee(cmd: list, log: Path, env: dict) -> int:
    """Runs cmd, its output (stdout and stderr) both to our stdout and into log."""
    with open(log, "w") as f, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                               stderr=subprocess.STDOUT, env=env, text=True,
                                               errors="replace", bufsize=1) as proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            f.write(line)
    return proc.returncode


def write_json(path: Path, record: dict) -> None:
    """Merges record into path's JSON (the program may have written its own run.json there)."""
    try:
        old = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, json.JSONDecodeError) as e:
        click.echo(f"gapscope: {path} could not be read ({e}); writing it anew", err=True)
        old = {}
    old = old if isinstance(old, dict) else {}
    path.write_text(json.dumps(old | record, indent=2) + "\n")


def check_gpu_for(cmd: tuple) -> None:
    if wants_cpu(cmd):
        return
    from harness.doctor import check_gpu

    gpu = check_gpu()
    if gpu["status"] != "OK":
        raise ProfileError(f"{gpu['detail']}: profile on a machine with an NVIDIA GPU and driver "
                           "(`gapscope doctor` checks it), or run the program with --device cpu")


def resolve_range(capture_range: str | None, delay_s, duration_s) -> str:
    timed = delay_s is not None or duration_s is not None
    if capture_range == "cudaProfilerApi" and timed:
        raise click.UsageError("--delay/--duration time a stretch of the whole run: they do not "
                               "go with --range cudaProfilerApi")
    return capture_range or ("all" if timed else "cudaProfilerApi")


def no_capture_message(run: Path, capture_range: str, nsys_version: str) -> str:
    if (run / "capture.qdstrm").exists():
        return (f"nsys {nsys_version} wrote {run}/capture.qdstrm but no .nsys-rep: its importer is "
                f"missing or broken here (see {run}/nsys.log); import it with `QdstrmImporter -i "
                f"{run}/capture.qdstrm` from Nsight Systems {nsys_version}")
    if capture_range == "cudaProfilerApi":
        return ("nsys wrote no capture: the program never called cudaProfilerStart "
                "(--range cudaProfilerApi): pass --range all to capture the whole run")
    return f"nsys wrote no capture: see {run}/nsys.log"


def contents_problem(sqlite: Path, step_pattern: str, capture_range: str) -> tuple[str, dict]:
    """(why the capture cannot be analysed or "", what it holds)."""
    try:
        c = capture_contents(sqlite, step_pattern)
    except sqlite3.Error as e:
        return f"cannot read {sqlite} as an nsys SQLite export ({e})", {}
    held = {"steps": c.steps, "nvtx_ranges": c.ranges, "kernels": c.kernels}
    steps = f"NVTX ranges matching --steps '{step_pattern}'"
    if c.steps == 0 and c.kernels == 0:
        where = ("open the window around the steps (profiled_steps(window=...)) or pass --range "
                 "all" if capture_range == "cudaProfilerApi" else "does the program use the GPU?")
        return f"the capture holds no {steps} and no CUDA kernels: {where}", held
    if c.steps == 0 and c.ranges == 0:
        return (f"the capture holds {c.kernels} CUDA kernels but no NVTX ranges: mark each step "
                "with harness.profiling (`with prof.step(i):`) and check that `python -c 'import "
                "nvtx'` works"), held
    if c.steps == 0:
        return (f"the capture holds {c.kernels} CUDA kernels but no {steps} (ranges seen: "
                f"{', '.join(c.names)}): pass --steps REGEX naming your step ranges"), held
    if c.kernels == 0:
        return (f"the capture holds {c.steps} steps but no CUDA kernels: the program did not use "
                "the GPU (--device cpu?) or CUDA was not traced"), held
    return "", held


@click.command(context_settings={"ignore_unknown_options": True,
                                 "allow_interspersed_args": False})
@click.option("--steps", "step_pattern", default=DEFAULT_STEP_PATTERN, show_default=True,
              help="Regex naming the step NVTX ranges (group 1: the step index); kept in run.json.")
@click.option("--check", "check_pattern", default=DEFAULT_CHECK_PATTERN, show_default=True,
              help="Regex naming the stop-check NVTX ranges; kept in run.json.")
@click.option("--range", "capture_range", type=click.Choice(RANGES), default=None,
              help="cudaProfilerApi: only between the program's cudaProfilerStart/Stop (the "
                   "default); all: the whole run (the default with --delay/--duration).")
@click.option("--delay", "delay_s", type=click.FloatRange(min=0), default=None,
              help="Start capturing this many seconds into the run.")
@click.option("--duration", "duration_s", type=click.FloatRange(min=0, min_open=True),
              default=None, help="Capture this many seconds.")
@click.option("--cuda-graph-trace", "graph_trace", type=click.Choice(GRAPH_TRACES), default="node",
              show_default=True,
              help="node: kernels inside CUDA graphs one by one (as profile.sh); graph: one op "
                   "per graph launch, cheaper.")
@click.option("--osrt", is_flag=True, help="Also trace OS runtime calls (the waits of a sync).")
@click.option("--name", default=None,
              help="The run directory's name after the time (default: the program's name).")
@click.option("--traces-dir", type=click.Path(file_okay=False, path_type=Path),
              default=lambda: os.environ.get("TRACES_DIR") or "traces",
              show_default="$TRACES_DIR or ./traces", help="Where the run directory goes.")
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def profile(ctx, step_pattern, check_pattern, capture_range, delay_s, duration_s, graph_trace,
            osrt, name, traces_dir, cmd):
    """Run CMD under Nsight Systems, export the capture to SQLite and analyse it, all in a new
    run directory traces/<UTC>-<program>/.

    Mark the steps of your loop with harness.profiling (see examples/hf_decode.py): its window
    calls cudaProfilerStart/Stop, which the default --range cudaProfilerApi captures.

    \b
    Example:
        gapscope profile -- python examples/hf_decode.py --model llama
        gapscope profile --range all --steps '^decode (\\d+)$' -- python my_loop.py
    """
    for pattern, option in ((step_pattern, "--steps"), (check_pattern, "--check")):
        try:
            compile_pattern(pattern, option)
        except TraceError as e:
            raise click.UsageError(str(e)) from None
    capture_range = resolve_range(capture_range, delay_s, duration_s)
    if shutil.which(cmd[0]) is None:
        raise click.UsageError(f"{cmd[0]}: no such program (the command after --)")
    try:
        nsys = find_nsys()
        require_version(nsys)
    except NsysError as e:
        raise ProfileError(str(e)) from None
    click.echo(f"gapscope: {nsys.note}", err=True)
    check_gpu_for(cmd)

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    run = new_run_dir(traces_dir, f"{stamp}-{name or program_name(cmd)}")
    click.echo(f"gapscope: run directory: {run}", err=True)
    flags = capture_flags("cuda,nvtx,osrt" if osrt else "cuda,nvtx", capture_range, graph_trace,
                          delay_s, duration_s)
    full = [nsys.path, "profile", *flags, "-o", str(run / "capture"), *cmd]
    record = {
        "command": list(cmd),
        "cwd": os.getcwd(),
        "nsys": {"command": shlex.join(full), "version": nsys.version, "path": nsys.path},
        "capture": {"range": capture_range, "cuda_graph_trace": graph_trace, "osrt": osrt,
                    "delay_s": delay_s, "duration_s": duration_s, "flags": flags},
        "analysis": {"step_pattern": step_pattern, "check_pattern": check_pattern},
    }
    run_json = run / "run.json"
    write_json(run_json, record)
    click.echo(f"gapscope: capturing: {shlex.join(full)}", err=True)
    log = run / "nsys.log"
    try:
        rc = tee(full, log, os.environ | {"GAPSCOPE_RUN_DIR": str(run)})
    except OSError as e:
        raise ProfileError(f"cannot run {nsys.path}: {e.strerror or e}") from None
    # nsys exits with the status of the program it ran.
    if rc != 0:
        raise ProfileError(f"the program under nsys failed with exit code {rc}: "
                           f"{last_message(log)} (all of it in {log})", rc)

    rep, sqlite = run / "capture.nsys-rep", run / "capture.sqlite"
    if not rep.exists():
        raise ProfileError(no_capture_message(run, capture_range, nsys.version))
    try:
        with open(log, "a") as f:
            exported = subprocess.run(export_command(nsys.path, rep, sqlite), stdout=f,
                                      stderr=subprocess.STDOUT, timeout=EXPORT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ProfileError(f"nsys export of {rep} took over {EXPORT_TIMEOUT_S} s; the .nsys-rep "
                           f"is kept: `nsys export --type sqlite -o {sqlite} {rep}`") from None
    if exported.returncode != 0 or not sqlite.exists():
        raise ProfileError(
            f"nsys {nsys.version} could not export {rep} to SQLite (exit {exported.returncode}): "
            f"{last_message(log)}. The .nsys-rep is kept: export it with the nsys that captured "
            f"it, `nsys export --type sqlite -o {sqlite} {rep}`")
    problem, held = contents_problem(sqlite, step_pattern, capture_range)
    write_json(run_json, record | {"captured": held})
    if problem:
        raise ProfileError(problem)

    from analysis import cli

    patterns = {"step_pattern": step_pattern, "check_pattern": check_pattern, "device": None}
    try:
        ctx.invoke(cli.report, traces=(str(run),), out_dir=str(run), **patterns)
        ctx.invoke(cli.analyze, trace=str(run), **patterns)
    except click.ClickException as e:
        raise ProfileError(f"the analysis failed on {run}: {e.format_message()}") from None
    click.echo(f"gapscope: done: {run} ({held['steps']} steps, {held['kernels']} kernels "
               "captured)", err=True)
