"""The untraced twin of a `gapscope profile` capture: the program run again without nsys, the
hook timing the chosen steps with CUDA events (harness/inject/); and the one-line notes the
profile prints on stderr."""

import os
import re
import sys
from pathlib import Path

from ..capture import hook
from ..capture.profile_steps import StepChoice, numbered, traced_window
from ..errors import TraceError
from ..measures.steps import INFER, step_ranges
from ..measures.twin_keys import thread_keys
from ..readers import load_trace
from ..render.mpl_config import without_own_config_dir

# Lines nsys itself prints, skipped when naming the program's last message.
NSYS_CHATTER = re.compile(r"^\s*$|^\s+/|^(Generated|Generating|Collecting data|Capture range|"
                          r"Processing|\[[0-9]+/[0-9]+\])")


def note(message: str) -> None:
    print(f"gapscope: {message}", file=sys.stderr, flush=True)


def last_message(log: Path) -> str:
    """The last line the program (not nsys' own progress) printed."""
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    mine = [line for line in lines if not NSYS_CHATTER.search(line)]
    any_line = [line for line in lines if line.strip()]
    return (mine or any_line or ["(nothing)"])[-1].strip()


def no_twin_reason(choice: StepChoice, capture_range: str) -> str | None:
    if not hook.available():
        return (f"the hook ({hook.INJECT_DIR}/sitecustomize.py) is not installed beside the "
                "analysis")
    if choice.steps_from == "profiler_step":
        return ("torch.profiler's ProfilerStep#N ranges are opened in torch's C++, out of the "
                "hook's reach: name the step with --step-function for a twin")
    return None


def inferred_marks(sqlite: Path) -> tuple:
    """(the keys the twin marks for the steps inferred from the capture, one a thread that has
    one: "graph" or the once-a-step sync's "FILE:LINE"; the threads' reasons where a thread has
    none, one line)."""
    try:
        trace = load_trace(sqlite)
        steps, origin = step_ranges(trace, INFER)
    except TraceError as e:
        return (), [f"no steps to mark ({e})"]
    keys, why = [], []
    for tid, mine in steps.groupby("tid", sort=False):
        mine = mine.sort_values("start", kind="stable")
        found, reason = thread_keys(trace, tid, mine, origin["steps_inferred_by"] or "")
        if not found:
            why.append(reason if steps["tid"].nunique() == 1 else
                       f"thread {mine['thread'].iloc[0]}: {reason}")
        keys += [k for k in found if k not in keys]
    return tuple(keys), why


def untraced_twin(cmd: tuple, run: Path, choice: StepChoice, names: list, capture_range: str,
                  runs: int, extra_env: dict | None = None, draft: dict | None = None) -> dict:
    """Runs CMD `runs` times without nsys, the hook timing the chosen steps (and, `extra_env`'s
    GAPSCOPE_HOST_FUNCTIONS and GAPSCOPE_OWN_CODE, the host table's code; `draft`'s
    GAPSCOPE_STEP_DRAFT, a speculative decode's draft), and merges the runs into
    RUN/untraced_steps.json. What happened, for run.json's `hook.twin`."""
    functions = choice.functions if choice.steps_from == "function" else ()
    marks = ()
    if choice.steps_from == "inferred":
        marks, why = inferred_marks(run / "capture.sqlite")
        if not marks:
            reason = "; ".join(why)
            note(f"no untraced twin: {reason}")
            return {"runs": 0, "written": False, "why": reason}
        for line in why:
            note(f"untraced twin: {line}: those steps have none")
        note(f"untraced twin of the inferred steps: marking {', '.join(marks)}")
    steps = hook.Steps(pattern=None if functions or marks else choice.pattern,
                       functions=functions, marks=marks)
    by_range = not functions and not marks and numbered(names, choice.pattern)
    numbering = "mark" if marks else "range" if by_range else "order"
    window = traced_window(names, choice.pattern) if (
        by_range and capture_range == "cudaProfilerApi") else None
    dirs = []
    # The host table's timing costs the program about a microsecond a call of its named code: it
    # runs in the last twin run alone, whose steps then stand apart from the others' (the
    # untraced period and bubble are the other runs'), unless it is the only run.
    host_run = runs if extra_env else None
    if host_run == 1:
        note("untraced twin: its one run also times the host table's functions, so its period "
             "includes their cost (--twin-runs 2 or more keeps the other runs clean)")
    for k in range(1, runs + 1):
        directory = run / hook.TWIN_DIR / str(k)
        note(f"untraced twin {k}/{runs} (no nsys; its output in {directory}/program.log)"
             + (" with the host table's timing" if k == host_run else ""))
        env = (without_own_config_dir(dict(os.environ)) | (draft or {})
               | ((extra_env or {}) if k == host_run else {}))
        rc = hook.run_twin(cmd, directory, steps, env)
        if rc != 0:
            note(f"warning: no untraced twin: its run {k} failed with exit code {rc}: "
                 f"{last_message(directory / 'program.log')} (all of it in "
                 f"{directory}/program.log)")
            return {"runs": runs, "written": False, "why": f"run {k} failed with exit code {rc}"}
        dirs.append(directory)
    document = hook.merge(dirs, window, numbering, capture_range == "cudaProfilerApi",
                          host_run if host_run and runs > 1 else None)
    unplaced = document.pop("unplaced")
    if not document["runs"]:
        why = hook.why_empty(dirs, {"unplaced": unplaced})
        note(f"warning: no untraced twin: {why}")
        return {"runs": runs, "written": False, "why": why}
    if hook.write(run, document) is None:
        note(f"the program wrote its own {run}/untraced_steps.json: kept, the hook's runs are in "
             f"{run}/{hook.TWIN_DIR}/")
        return {"runs": runs, "written": False, "why": "the program wrote its own"}
    steps_marked = sum(len(r["step"]) for r in document["runs"])
    note(f"untraced twin: {steps_marked} steps in {len(document['runs'])} runs "
         f"({runs} runs of the program) -> {run}/untraced_steps.json")
    return {"runs": runs, "written": True, "window": window} | (
        {"marks": list(marks)} if marks else {}) | ({"host_run": host_run} if host_run else {})
