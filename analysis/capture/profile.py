"""Any program under Nsight Systems, ready to analyse: what `gapscope profile [OPTIONS] -- CMD`
(analysis/cli/profile.py) runs before it analyses the run directory.

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
import shlex
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..capture import hook, own_code
from ..capture import host_functions as hf
from ..capture import step_functions as sf
from ..capture.nsys import (
    EXPORT_TIMEOUT_S,
    capture_flags,
    export_command,
    range_names,
)
from ..capture.profile_request import (
    ProfileError,
    Request,
    accept,
    program_name,
    traced_functions,
)
from ..capture.profile_steps import (
    StepChoice,
    choose_steps,
    contents_problem,
    inferred_problem,
    never_called,
    never_called_message,
    no_capture_message,
)
from ..capture.profile_twin import last_message, no_twin_reason, note, untraced_twin
from ..render.mpl_config import without_own_config_dir


@dataclass(frozen=True)
class Captured:
    """A run directory ready to analyse: where, the steps chosen, what the capture holds."""

    run: Path
    choice: StepChoice
    held: dict
    program_exit_code: int = 0  # not 0: the program failed; the capture is of what ran before


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
        note(f"{path} could not be read ({e}); writing it anew")
        old = {}
    old = old if isinstance(old, dict) else {}
    path.write_text(json.dumps(old | record, indent=2) + "\n")


def capture(nsys_path: str, flags: list, run: Path, cmd: tuple, env: dict, mode: str) -> tuple:
    """One `nsys profile` of CMD into RUN/capture: (its full command, its exit status)."""
    full = [nsys_path, "profile", *flags, "-o", str(run / "capture"), *cmd]
    note(f"capturing: {shlex.join(full)}")
    try:
        return full, tee(full, run / "nsys.log", env, mode)
    except OSError as e:
        raise ProfileError(f"cannot run {nsys_path}: {e.strerror or e}") from None


HOST_VARIABLE = "GAPSCOPE_HOST_FUNCTIONS"
OWN_VARIABLE = "GAPSCOPE_OWN_CODE"
# The variables of the host table's code, in the traced run and the twin's timed run alike.
HOST_VARIABLES = (HOST_VARIABLE, OWN_VARIABLE)
HOST_FILE = "host_functions.txt"


def host_variables(r: Request, ok, run: Path, traced: list) -> dict:
    """The hook's variables naming the host table's code: generate()'s functions and torch's
    (host_functions.py, listed in RUN/host_functions.txt) and the program's own code, found by
    the hook as it is imported (GAPSCOPE_OWN_CODE, at most --max-own-functions functions); none
    with --no-host-functions. Functions nsys traces (the steps, transformers' forwards) are not
    named twice."""
    if r.no_host_functions or not hook.available():
        return {}
    transformers = ok.probe.transformers if ok.probe is not None else None
    names = hf.host_functions(transformers, r.host_functions, tuple(f.spec for f in traced))
    (run / HOST_FILE).write_text("".join(f"{n}\n" for n in names))
    note(f"host table: {len(names)} functions named (generate()'s, torch's sampling; "
         f"{run / HOST_FILE}) and the program's own code as it is imported (at most "
         f"{r.max_own_functions} functions)")
    return {HOST_VARIABLE: ",".join(names), OWN_VARIABLE: str(r.max_own_functions)}


def main_steps(functions: list) -> dict:
    """The traced run's variable for step functions of `__main__` (nsys cannot trace them: the
    hook opens their ranges, main_code.py)."""
    names = [f.qualname for f in functions if f.module == "__main__"]
    return {"GAPSCOPE_MAIN_STEPS": ",".join(names)} if names else {}


def host_count(host: dict) -> int:
    value = host.get(HOST_VARIABLE)
    return len(value.split(",")) if value else 0


def own_step_choice(sqlite: Path, own: dict, inferred: StepChoice) -> StepChoice:
    """Inferred steps, unless one of the program's own functions runs once a step: then its
    calls (own_code.own_step; METRICS.md, "Steps from the program's own function")."""
    spec, why = own_code.own_step(sqlite, own)
    if spec is None:
        note(f"steps inferred from the trace: {why}")
        return inferred
    function = sf.parse_spec(spec)
    note(f"steps: the calls of {spec}, the program's own function that runs once a step ({why})")
    return StepChoice(sf.functions_pattern([function]), "function", (spec,))


def draft_variables(choice: StepChoice, ok) -> dict:
    """The twin's draft functions (GAPSCOPE_STEP_DRAFT), where the steps are transformers'
    forwards: a speculative decode's draft forwards are no steps there either."""
    if choice.steps_from != "function" or choice.pattern != sf.FORWARD_PATTERN:
        return {}
    transformers = ok.probe.transformers if ok.probe is not None else None
    draft = hf.draft_functions(transformers)
    return {"GAPSCOPE_STEP_DRAFT": ",".join(draft)} if draft else {}


def run_profile(r: Request) -> Captured:
    """CMD under nsys into a new run directory, exported, its steps chosen, its untraced twin
    run (module docstring); a failure raises ProfileError with its exit status."""
    cmd, step_pattern, check_pattern = r.cmd, r.step_pattern, r.check_pattern
    delay_s, duration_s, graph_trace = r.delay_s, r.duration_s, r.graph_trace
    ok = accept(r)
    functions, capture_range, nsys = ok.functions, ok.capture_range, ok.nsys
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    run = new_run_dir(r.traces_dir, f"{stamp}-{r.name or program_name(cmd)}")
    note(f"run directory: {run}")
    if ok.range_chosen:
        note(f"{ok.range_chosen}: capturing the whole run (--range cudaProfilerApi tries the "
             "window first)")
    traced = traced_functions(functions, ok.probe)
    functions_file = run / sf.FUNCTIONS_FILE if traced else None
    if functions_file is not None:
        sf.write_config(functions_file, traced)
    trace = "cuda,nvtx,osrt" if r.osrt else "cuda,nvtx"
    sync_lines = not r.no_sync_lines and hook.available()
    env = without_own_config_dir(dict(os.environ)) | {"GAPSCOPE_RUN_DIR": str(run)}
    host = host_variables(r, ok, run, traced)
    if sync_lines:
        host["GAPSCOPE_SYNC_MARKS"] = "1"
    host |= main_steps(functions)
    if host and hook.available():
        env = hook.hook_env(env, **host)

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
        "capture": {"range": capture_range, "cuda_graph_trace": graph_trace, "osrt": r.osrt,
                    "delay_s": delay_s, "duration_s": duration_s, "flags": flags,
                    **({"range_chosen": ok.range_chosen} if ok.range_chosen else {})},
        "analysis": {"step_pattern": step_pattern, "check_pattern": check_pattern,
                     "step_functions": [f.spec for f in functions]},
        "hook": {"sync_marks": sync_lines,
                 "function_trace": functions_file.name if functions_file else None,
                 "function_trace_functions": len(traced),
                 "host_functions": host_count(host)},
    }
    run_json = run / "run.json"
    write_json(run_json, record)
    log = run / "nsys.log"
    full, rc = capture(nsys.path, flags, run, cmd, env, "w")
    rep, sqlite = run / "capture.nsys-rep", run / "capture.sqlite"
    if (not rep.exists() and not (run / "capture.qdstrm").exists()
            and capture_range == "cudaProfilerApi" and not ok.range_given):
        # A program as it is seldom opens a capture range: capture all of it instead. One that
        # failed before opening it is captured whole too: what ran before the failure is kept.
        note("the program never called cudaProfilerStart: capturing the whole run again "
             "(--range all; pass it to skip the first try)" if rc == 0 else
             f"the program failed (exit code {rc}) with no cudaProfilerStart before: capturing "
             "the whole run again, to analyse what ran before the failure")
        with open(log, "a") as f:
            f.write("gapscope: no cudaProfilerStart: capturing again with --range all\n")
        capture_range, first_rc = "all", rc
        flags = flags_for(capture_range)
        full, rc = capture(nsys.path, flags, run, cmd, env, "a")
        record["capture"] |= {"range": capture_range, "flags": flags,
                              "range_fallback": "the program never called cudaProfilerStart"
                              if first_rc == 0 else f"the program failed (exit code "
                              f"{first_rc}) before any cudaProfilerStart"}
        record["nsys"]["command"] = shlex.join(full)
        write_json(run_json, record)
    # nsys exits with the status of the program it ran; it writes the capture all the same.
    if rc != 0 and not rep.exists():
        raise ProfileError(f"the program under nsys failed with exit code {rc}: "
                           f"{last_message(log)} (all of it in {log})", rc)
    if rc != 0:
        note(f"warning: the program failed with exit code {rc} ({last_message(log)}): "
             "analysing what nsys captured before it stopped")
        record["program_exit_code"] = rc
        write_json(run_json, record)

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
    own = own_code.read(run)
    record["hook"]["own_code"] = own_code.summary(own)
    if choice.steps_from == "inferred" and own is not None:
        choice = own_step_choice(run / "capture.sqlite", own, choice)
    record["analysis"] |= {"step_pattern": choice.pattern, "steps_from": choice.steps_from,
                           "step_functions": list(choice.functions)}
    write_json(run_json, record)
    if functions:
        missing = never_called(names, functions)
        if len(missing) == len(functions):
            if rc != 0:
                raise ProfileError(f"the program under nsys failed with exit code {rc}: "
                                   f"{last_message(log)} (all of it in {log}), before any call "
                                   "of the step functions", rc)
            raise ProfileError(never_called_message(names, missing, run), 2)
        for f in missing:
            note(f"warning: --step-function {f.spec} was never called under nsys")
    if choice.steps_from == "inferred":
        problem, held = inferred_problem(sqlite, len(names), capture_range)
        note("no NVTX step ranges and no step function in the capture: the analysis infers the "
             "steps from the trace (--steps infer)")
    else:
        problem, held = contents_problem(sqlite, choice.pattern, capture_range)
    write_json(run_json, record | {"captured": held})
    if problem and rc != 0:
        raise ProfileError(f"the program under nsys failed with exit code {rc}: "
                           f"{last_message(log)} (all of it in {log}); what it ran before: "
                           f"{problem}", rc)
    if problem:
        raise ProfileError(problem)

    why_not = ("--no-twin" if r.no_twin else
               f"the program failed (exit code {rc}): a run without the profiler would too"
               if rc != 0 else no_twin_reason(choice, capture_range))
    if why_not is None:
        twin_env = {k: v for k, v in host.items() if k in HOST_VARIABLES}
        draft = draft_variables(choice, ok)
        record["hook"]["twin"] = untraced_twin(cmd, run, choice, names, capture_range,
                                               r.twin_runs, twin_env, draft)
    else:
        if not r.no_twin:
            note(f"no untraced twin: {why_not}")
        record["hook"]["twin"] = {"runs": 0, "written": False, "why": why_not}
    write_json(run_json, record | {"captured": held})
    return Captured(run, choice, held, rc)
