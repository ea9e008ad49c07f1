"""Which steps a `gapscope profile` capture holds and whether it can be analysed: the step
ranges or functions chosen, what the capture lacks, and the untraced twin of the chosen steps."""

import re
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..capture import step_functions as sf
from ..capture.nsys import capture_contents
from ..measures.steps import DEFAULT_STEP_PATTERN, FUNCTION_NAME, PROFILER_STEP_PATTERN

# `--steps infer`: the analysis finds the steps in the trace itself (no step ranges).
INFER_STEPS = "infer"


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


# The function trace's calls the message lists at most, the most frequent first.
CALLS_SHOWN = 5


def traced_calls(names: list) -> str:
    """The calls the function trace recorded (ranges named `module.qualname`), by count, for the
    line that says a step function was never called."""
    counts = Counter(n for n in names if FUNCTION_NAME.match(n))
    if not counts:
        return "the function trace recorded no call at all"
    shown = ", ".join(f"{name} ×{n}" for name, n in counts.most_common(CALLS_SHOWN))
    more = len(counts) - CALLS_SHOWN
    return f"the function trace recorded {shown}" + (f" and {more} more" if more > 0 else "")


def never_called_message(names: list, missing: list, run: Path) -> str:
    """The one line for step functions of which nsys traced no call: what was asked, and what
    the trace recorded instead."""
    which = ", ".join(f.spec for f in missing)
    asked = " or ".join(f.range_name for f in missing)
    return (f"--step-function {which}: no call traced under nsys (no NVTX range {asked} in the "
            f"capture; {traced_calls(names)}): is it the function the loop calls, in the module "
            f"the program imports? ({run} is kept)")


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
