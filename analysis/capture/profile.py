"""`gapscope profile [OPTIONS] -- CMD [ARGS...]`: any program under Nsight Systems, analysed.

The program runs under `nsys profile` with the capture flags of scripts/profile.sh, the same nsys
exports the capture to SQLite, and the analysis reads it; everything lands in a new run directory
traces/<UTC>-<program>/ (never overwritten): capture.nsys-rep, capture.sqlite, nsys.log (all the
program and nsys printed), functions.json (nsys's Python function trace: the step functions),
run.json (the command, nsys version and flags, the step and check patterns, which `gapscope
analyze RUN` reuses), twin/ and untraced_steps.json (the untraced twin), and report.md with its
plots. The program finds the run directory in $GAPSCOPE_RUN_DIR.

The steps, in order: the --steps ranges or --step-function calls asked for; else the program's
own `Step N` (or `ProfilerStep#N`) ranges; else the forwards of transformers' causal LMs, which
the function trace marks in every capture (a generate() loop); else steps inferred from the trace.
The program then runs --twin-runs more times without nsys, the hook (harness/inject/) timing the
same steps with CUDA events: the untraced twin. In the traced run the hook also names each
synchronizing CUDA call's source line (an NVTX mark), unless --no-sync-lines.

Exit status, as profile.sh's: 0 done; 2 bad usage or a machine not set up to profile (no nsys,
one too old, no GPU); the program's own status when it fails under nsys; 1 for the other failures
(nothing captured, no steps, no kernels).
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
from dataclasses import dataclass
from pathlib import Path

import click

from ..capture import hook
from ..capture import step_functions as sf
from ..capture.nsys import (
    EXPORT_TIMEOUT_S,
    GRAPH_TRACES,
    RANGES,
    NsysError,
    capture_contents,
    capture_flags,
    check_gpu,
    export_command,
    find_nsys,
    range_names,
    require_version,
)
from ..errors import TraceError
from ..measures.steps import (
    DEFAULT_CHECK_PATTERN,
    DEFAULT_STEP_PATTERN,
    PROFILER_STEP_PATTERN,
    compile_pattern,
)

# `--steps infer`: the analysis finds the steps in the trace itself (no step ranges).
INFER_STEPS = "infer"
DEFAULT_TWIN_RUNS = 3

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


def tee(cmd: list, log: Path, env: dict, mode: str = "w") -> int:
    """Runs cmd, its output (stdout and stderr) both to our stdout and into log."""
    with open(log, mode) as f, subprocess.Popen(cmd, stdout=subprocess.PIPE,
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
    gpu = check_gpu()
    if gpu["status"] != "OK":
        raise ProfileError(f"{gpu['detail']}: profile on a machine with an NVIDIA GPU and driver "
                           "(`gapscope doctor` checks it), or run the program with --device cpu",
                           2)


def note(message: str) -> None:
    click.echo(f"gapscope: {message}", err=True)


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
    """(why the capture cannot be analysed with these step ranges or "", what it holds)."""
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


@dataclass(frozen=True)
class StepChoice:
    """Where the steps come from: the pattern the analysis gets (run.json's step_pattern),
    summary.steps_from's word, and for function steps the functions (MODULE:QUALNAME)."""

    pattern: str
    steps_from: str          # nvtx | profiler_step | function | inferred
    functions: tuple = ()


def count(names: list, pattern: str) -> int:
    compiled = re.compile(pattern)
    return sum(1 for n in names if compiled.search(n))


def choose_steps(names: list, step_pattern: str | None, functions: list,
                 forwards_traced: bool) -> StepChoice:
    """The steps the capture holds, in gapscope profile's order (module docstring)."""
    if functions:
        pattern = sf.functions_pattern(functions)
        return StepChoice(pattern, "function", tuple(f.spec for f in functions))
    if step_pattern is not None:
        return StepChoice(step_pattern, "nvtx")
    if count(names, DEFAULT_STEP_PATTERN):
        return StepChoice(DEFAULT_STEP_PATTERN, "nvtx")
    if count(names, PROFILER_STEP_PATTERN):
        return StepChoice(PROFILER_STEP_PATTERN, "profiler_step")
    if forwards_traced:
        forward = re.compile(sf.FORWARD_PATTERN)
        seen = sorted({n for n in names if forward.search(n)})
        if seen:
            return StepChoice(sf.FORWARD_PATTERN, "function",
                              tuple(sf.from_range_name(n).spec for n in seen))
    return StepChoice(INFER_STEPS, "inferred")


def never_called(names: list, functions: list) -> list:
    """The step functions with no range in the capture."""
    seen = set(names)
    return [f for f in functions if f.range_name not in seen]


def traced_window(names: list, pattern: str) -> list | None:
    """[S, E] for steps S+1..E: the numbers of the step ranges a window captured."""
    compiled = re.compile(pattern)
    numbers = []
    for name in names:
        found = compiled.search(name)
        if found and compiled.groups and (found.group(1) or "").isdigit():
            numbers.append(int(found.group(1)))
    return [min(numbers) - 1, max(numbers)] if numbers else None


def numbered(names: list, pattern: str) -> bool:
    """The step ranges carry their number (group 1), as `Step N` does."""
    return traced_window(names, pattern) is not None


def no_twin_reason(choice: StepChoice, capture_range: str) -> str | None:
    if not hook.available():
        return (f"the hook ({hook.INJECT_DIR}/sitecustomize.py) is not installed beside the "
                "analysis")
    if choice.steps_from == "inferred":
        return ("the steps are inferred from the trace (no NVTX step ranges and no step "
                "function), and a run without the profiler has nothing to mark them by")
    if choice.steps_from == "profiler_step":
        return ("torch.profiler's ProfilerStep#N ranges are opened in torch's C++, out of the "
                "hook's reach: name the step with --step-function for a twin")
    if choice.steps_from == "function" and capture_range == "cudaProfilerApi":
        return ("the function steps are counted from the capture's start (the program's "
                "cudaProfilerStart), which a run without nsys cannot place: --range all gives "
                "one")
    return None


def untraced_twin(cmd: tuple, run: Path, choice: StepChoice, names: list, capture_range: str,
                  runs: int) -> dict:
    """Runs CMD `runs` times without nsys, the hook timing the chosen steps, and merges the runs
    into RUN/untraced_steps.json. What happened, for run.json's `hook.twin`."""
    functions = choice.functions if choice.steps_from == "function" else ()
    steps = hook.Steps(pattern=None if functions else choice.pattern, functions=functions)
    by_range = not functions and numbered(names, choice.pattern)
    window = traced_window(names, choice.pattern) if (
        by_range and capture_range == "cudaProfilerApi") else None
    dirs = []
    for k in range(1, runs + 1):
        directory = run / hook.TWIN_DIR / str(k)
        note(f"untraced twin {k}/{runs} (no nsys; its output in {directory}/program.log)")
        rc = hook.run_twin(cmd, directory, steps, dict(os.environ))
        if rc != 0:
            note(f"warning: no untraced twin: its run {k} failed with exit code {rc}: "
                 f"{last_message(directory / 'program.log')} (all of it in "
                 f"{directory}/program.log)")
            return {"runs": runs, "written": False, "why": f"run {k} failed with exit code {rc}"}
        dirs.append(directory)
    document = hook.merge(dirs, window, "range" if by_range else "order",
                          last_sequence_only=capture_range == "cudaProfilerApi")
    if not document["runs"]:
        why = hook.why_empty(dirs)
        note(f"warning: no untraced twin: {why}")
        return {"runs": runs, "written": False, "why": why}
    if hook.write(run, document) is None:
        note(f"the program wrote its own {run}/untraced_steps.json: kept, the hook's runs are in "
             f"{run}/{hook.TWIN_DIR}/")
        return {"runs": runs, "written": False, "why": "the program wrote its own"}
    steps_marked = sum(len(r["step"]) for r in document["runs"])
    note(f"untraced twin: {steps_marked} steps in {len(document['runs'])} runs "
         f"({runs} runs of the program) -> {run}/untraced_steps.json")
    return {"runs": runs, "written": True, "window": window}


def capture(nsys_path: str, flags: list, run: Path, cmd: tuple, env: dict, mode: str) -> tuple:
    """One `nsys profile` of CMD into RUN/capture: (its full command, its exit status)."""
    full = [nsys_path, "profile", *flags, "-o", str(run / "capture"), *cmd]
    note(f"capturing: {shlex.join(full)}")
    try:
        return full, tee(full, run / "nsys.log", env, mode)
    except OSError as e:
        raise ProfileError(f"cannot run {nsys_path}: {e.strerror or e}") from None


def traced_functions(functions: list, probe: sf.Probe | None) -> list:
    """What the function trace names: the step functions, else (no --steps either) the forwards
    of the program's transformers' causal LMs, where nsys can trace them (nvtx installed)."""
    if functions:
        return functions
    if probe is None or probe.transformers is None:
        return []
    if not probe.nvtx:
        note(f"no steps from transformers' forwards: nsys's function trace needs the nvtx "
             f"package in the program's Python ({probe.python})")
        return []
    return sf.causal_lm_forwards(Path(probe.transformers))


@click.command(context_settings={"ignore_unknown_options": True,
                                 "allow_interspersed_args": False})
@click.option("--steps", "step_pattern", default=None,
              help="Regex naming the step NVTX ranges (group 1: the step index); kept in run.json. "
                   "Default: the program's own `Step N` (or `ProfilerStep#N`) ranges, else the "
                   "forwards of transformers' causal LMs, else steps inferred from the trace.")
@click.option("--step-function", "step_functions", multiple=True, metavar="MODULE:QUALNAME",
              help="Each call of this function is a step (nsys's Python function trace; "
                   "repeatable), e.g. mypkg.decode:Decoder.step.")
@click.option("--check", "check_pattern", default=DEFAULT_CHECK_PATTERN, show_default=True,
              help="Regex naming the stop-check NVTX ranges; kept in run.json.")
@click.option("--range", "capture_range", type=click.Choice(RANGES), default=None,
              help="cudaProfilerApi: only between the program's cudaProfilerStart/Stop; all: the "
                   "whole run. Default: cudaProfilerApi, and all again where the program never "
                   "called cudaProfilerStart (all with --delay/--duration).")
@click.option("--delay", "delay_s", type=click.FloatRange(min=0), default=None,
              help="Start capturing this many seconds into the run.")
@click.option("--duration", "duration_s", type=click.FloatRange(min=0, min_open=True),
              default=None, help="Capture this many seconds.")
@click.option("--cuda-graph-trace", "graph_trace", type=click.Choice(GRAPH_TRACES), default="node",
              show_default=True,
              help="node: kernels inside CUDA graphs one by one (as profile.sh); graph: one op "
                   "per graph launch, cheaper.")
@click.option("--osrt", is_flag=True, help="Also trace OS runtime calls (the waits of a sync).")
@click.option("--twin-runs", type=click.IntRange(min=1), default=DEFAULT_TWIN_RUNS,
              show_default=True,
              help="Runs of the program without nsys for the untraced twin (its steps timed "
                   "with CUDA events).")
@click.option("--no-twin", is_flag=True, help="No untraced twin runs.")
@click.option("--no-sync-lines", is_flag=True,
              help="Do not name the source line of each synchronizing CUDA call (torch's sync "
                   "debug mode, in the traced run).")
@click.option("--name", default=None,
              help="The run directory's name after the time (default: the program's name).")
@click.option("--traces-dir", type=click.Path(file_okay=False, path_type=Path),
              default=lambda: os.environ.get("TRACES_DIR") or "traces",
              show_default="$TRACES_DIR or ./traces", help="Where the run directory goes.")
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def profile(ctx, step_pattern, step_functions, check_pattern, capture_range, delay_s, duration_s,
            graph_trace, osrt, twin_runs, no_twin, no_sync_lines, name, traces_dir, cmd):
    """Run CMD under Nsight Systems, export the capture to SQLite and analyse it, all in a new
    run directory traces/<UTC>-<program>/, with an untraced twin of its steps.

    The program needs no edit: its own `Step N` NVTX ranges are the steps, or each call of a
    --step-function, or (a transformers generate() loop) each forward of the model, else the
    steps are inferred from the trace. harness.profiling marks a loop by hand (three lines).

    \b
    Example:
        gapscope profile -- python examples/generate.py
        gapscope profile --step-function mypkg.decode:step -- python run.py
        gapscope profile --range all --steps '^decode (\\d+)$' -- python my_loop.py
    """
    for pattern, option in ((step_pattern, "--steps"), (check_pattern, "--check")):
        try:
            if pattern is not None:
                compile_pattern(pattern, option)
        except TraceError as e:
            raise click.UsageError(str(e)) from None
    if step_pattern is not None and step_functions:
        raise click.UsageError("--steps and --step-function each name the steps: pass one")
    try:
        functions = list(dict.fromkeys(sf.parse_spec(v) for v in step_functions))
    except sf.StepFunctionError as e:
        raise click.UsageError(str(e)) from None
    range_given = capture_range is not None or delay_s is not None or duration_s is not None
    capture_range = resolve_range(capture_range, delay_s, duration_s)
    if shutil.which(cmd[0]) is None:
        raise click.UsageError(f"{cmd[0]}: no such program (the command after --)")
    probe = None
    if functions or step_pattern is None:
        probe = sf.probe(cmd, functions, Path.cwd(), dict(os.environ))
        try:
            for line in sf.check(functions, probe):
                note(line)
        except sf.StepFunctionError as e:
            raise click.UsageError(str(e)) from None
        if functions and probe.own_python and not probe.nvtx:
            raise click.UsageError(f"--step-function needs the nvtx package in the program's "
                                   f"Python ({probe.python}) for nsys's function trace: "
                                   f"`{probe.python} -m pip install nvtx`")
    try:
        nsys = find_nsys()
        require_version(nsys)
    except NsysError as e:
        raise ProfileError(str(e), 2) from None
    note(nsys.note)
    check_gpu_for(cmd)

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    run = new_run_dir(traces_dir, f"{stamp}-{name or program_name(cmd)}")
    note(f"run directory: {run}")
    traced = traced_functions(functions, probe)
    functions_file = run / sf.FUNCTIONS_FILE if traced else None
    if functions_file is not None:
        sf.write_config(functions_file, traced)
    trace = "cuda,nvtx,osrt" if osrt else "cuda,nvtx"
    sync_lines = not no_sync_lines and hook.available()
    env = dict(os.environ) | {"GAPSCOPE_RUN_DIR": str(run)}
    if sync_lines:
        env = hook.hook_env(env, GAPSCOPE_SYNC_MARKS="1")

    def flags_for(capture_range: str) -> list:
        return capture_flags(trace, capture_range, graph_trace, delay_s, duration_s,
                             functions_file)

    flags = flags_for(capture_range)
    record = {
        "command": list(cmd),
        "cwd": os.getcwd(),
        "nsys": {"command": shlex.join([nsys.path, "profile", *flags, "-o",
                                        str(run / "capture"), *cmd]),
                 "version": nsys.version, "path": nsys.path},
        "capture": {"range": capture_range, "cuda_graph_trace": graph_trace, "osrt": osrt,
                    "delay_s": delay_s, "duration_s": duration_s, "flags": flags},
        "analysis": {"step_pattern": step_pattern, "check_pattern": check_pattern,
                     "step_functions": [f.spec for f in functions]},
        "hook": {"sync_marks": sync_lines,
                 "function_trace": functions_file.name if functions_file else None,
                 "function_trace_functions": len(traced)},
    }
    run_json = run / "run.json"
    write_json(run_json, record)
    log = run / "nsys.log"
    full, rc = capture(nsys.path, flags, run, cmd, env, "w")
    rep, sqlite = run / "capture.nsys-rep", run / "capture.sqlite"
    if (rc == 0 and not rep.exists() and not (run / "capture.qdstrm").exists()
            and capture_range == "cudaProfilerApi" and not range_given):
        # A program as it is seldom opens a capture range: capture all of it instead.
        note("the program never called cudaProfilerStart: capturing the whole run again "
             "(--range all; pass it to skip the first try)")
        with open(log, "a") as f:
            f.write("gapscope: no cudaProfilerStart: capturing again with --range all\n")
        capture_range = "all"
        flags = flags_for(capture_range)
        full, rc = capture(nsys.path, flags, run, cmd, env, "a")
        record["capture"] |= {"range": capture_range, "flags": flags,
                              "range_fallback": "the program never called cudaProfilerStart"}
        record["nsys"]["command"] = shlex.join(full)
        write_json(run_json, record)
    # nsys exits with the status of the program it ran.
    if rc != 0:
        raise ProfileError(f"the program under nsys failed with exit code {rc}: "
                           f"{last_message(log)} (all of it in {log})", rc)

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
    try:
        names = range_names(sqlite)
    except sqlite3.Error as e:
        raise ProfileError(f"cannot read {sqlite} as an nsys SQLite export ({e})") from None
    choice = choose_steps(names, step_pattern, functions, bool(traced))
    record["analysis"] |= {"step_pattern": choice.pattern, "steps_from": choice.steps_from,
                           "step_functions": list(choice.functions)}
    write_json(run_json, record)
    if functions:
        missing = never_called(names, functions)
        if len(missing) == len(functions):
            which = ", ".join(f.spec for f in missing)
            raise ProfileError(f"--step-function {which}: never called under nsys (no NVTX "
                               f"range {' or '.join(f.range_name for f in missing)} in the "
                               f"capture): is it the function the loop calls? ({run} is kept)", 2)
        for f in missing:
            note(f"warning: --step-function {f.spec} was never called under nsys")
    if choice.steps_from == "inferred":
        problem, held = inferred_problem(sqlite, len(names), capture_range)
        note("no NVTX step ranges and no step function in the capture: the analysis infers the "
             "steps from the trace (--steps infer)")
    else:
        problem, held = contents_problem(sqlite, choice.pattern, capture_range)
    write_json(run_json, record | {"captured": held})
    if problem:
        raise ProfileError(problem)

    why_not = "--no-twin" if no_twin else no_twin_reason(choice, capture_range)
    if why_not is None:
        record["hook"]["twin"] = untraced_twin(cmd, run, choice, names, capture_range, twin_runs)
    else:
        if not no_twin:
            note(f"no untraced twin: {why_not}")
        record["hook"]["twin"] = {"runs": 0, "written": False, "why": why_not}
    write_json(run_json, record | {"captured": held})

    from .. import cli

    patterns = {"step_pattern": choice.pattern, "check_pattern": check_pattern, "device": None}
    try:
        ctx.invoke(cli.report, traces=(str(run),), out_dir=str(run), **patterns)
        ctx.invoke(cli.analyze, trace=str(run), **patterns)
    except click.ClickException as e:
        raise ProfileError(f"the analysis failed on {run}: {e.format_message()}",
                           e.exit_code) from None
    steps = ("steps inferred" if choice.steps_from == "inferred" else f"{held['steps']} steps")
    note(f"done: {run} ({steps}, {held['kernels']} kernels captured)")


def inferred_problem(sqlite: Path, ranges: int, capture_range: str) -> tuple[str, dict]:
    """Without step ranges the capture needs kernels to infer steps from."""
    try:
        c = capture_contents(sqlite, r"(?!)")
    except sqlite3.Error as e:
        return f"cannot read {sqlite} as an nsys SQLite export ({e})", {}
    held = {"steps": 0, "nvtx_ranges": ranges, "kernels": c.kernels}
    if c.kernels == 0:
        where = ("open the window around the steps (profiled_steps(window=...)) or pass --range "
                 "all" if capture_range == "cudaProfilerApi" else "does the program use the GPU?")
        return f"the capture holds no NVTX step ranges and no CUDA kernels: {where}", held
    return "", held
