"""The in-program hook (harness/inject/sitecustomize.py) from outside: the environment that turns
it on, the untraced twin's runs of the program, and their files merged into the run
directory's untraced_steps.json (analysis.readers.untraced's format).

    traced run   nsys profile ... CMD            GAPSCOPE_SYNC_MARKS=1: sync lines as NVTX marks
    twin run k   CMD (no nsys)                   GAPSCOPE_TWIN_DIR=RUN/twin/k: events per step
                 -> RUN/twin/k/untraced-<pid>.json, one per process
    merged       RUN/untraced_steps.json         one `runs` entry per process, thread, sequence
"""

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..readers.untraced import FILE_NAME, FORMAT

# The folder of the hook, beside the analysis as the repository and an install lay them out; it
# holds only sitecustomize.py and the package gapscope_hook, so putting it first on PYTHONPATH
# hides nothing else.
INJECT_DIR = Path(__file__).resolve().parents[2] / "harness" / "inject"
TWIN_DIR = "twin"


def available() -> bool:
    return (INJECT_DIR / "sitecustomize.py").is_file()


def hook_env(env: dict, **variables: str) -> dict:
    """env with the hook's folder first on PYTHONPATH and its GAPSCOPE_* variables set."""
    path = [str(INJECT_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return env | {"PYTHONPATH": os.pathsep.join(path)} | variables


@dataclass(frozen=True)
class Steps:
    """What the twin marks as steps: NVTX ranges matching `pattern`, calls of `functions`
    (MODULE:QUALNAME each), or the boundaries `marks` (keys: "graph", "FILE:LINE") of steps
    inferred from the trace."""

    pattern: str | None = None
    functions: tuple = ()
    marks: tuple = ()

    def variables(self) -> dict:
        if self.functions:
            return {"GAPSCOPE_STEP_FUNCTIONS": ",".join(self.functions)}
        if self.marks:
            return {"GAPSCOPE_STEP_MARKS": json.dumps(list(self.marks))}
        return {"GAPSCOPE_STEP_PATTERN": self.pattern}


def run_twin(cmd: tuple, directory: Path, steps: Steps, env: dict) -> int:
    """One run of CMD without nsys, the hook marking its steps into `directory` (its
    program.log holds all the program printed; it is also GAPSCOPE_RUN_DIR). Its exit status."""
    directory.mkdir(parents=True)
    variables = {"GAPSCOPE_TWIN_DIR": str(directory), "GAPSCOPE_RUN_DIR": str(directory)}
    with open(directory / "program.log", "w") as log:
        return subprocess.run(list(cmd), stdout=log, stderr=subprocess.STDOUT,
                              env=hook_env(env, **variables, **steps.variables())).returncode


def process_files(directory: Path) -> list:
    return sorted(directory.glob("untraced-*.json"), key=lambda p: int(p.stem.split("-")[1]))


def merge(twin_dirs: list, window: list | None, numbering: str, program_window: bool,
          host_run: int | None = None) -> dict:
    """The untraced_steps.json document of the twin runs' files: one `runs` entry per twin run,
    process, thread and sequence (and key, for step marks), with `twin_run` and `process` (order
    within its twin run). program_window: the capture was the program's own cudaProfilerStart
    to Stop; the twin's steps are then those inside the window the hook saw the program open
    (window.py), numbered from its start where they are numbered by order ("order", "mark"); where
    the hook saw no window, a thread's last sequence of steps alone (a warm-up loop numbered the
    same way precedes the window's), and nothing where the steps are numbered by order
    (`unplaced` says so). host_run: the twin run (1, 2, ...) that also timed the host table's
    functions: its steps are left out (their cost is in them), its host times kept."""
    runs, seen = [], False
    for k, directory in enumerate(twin_dirs, start=1):
        for p, path in enumerate(process_files(directory)):
            try:
                doc = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            opened = bool((doc.get("profiler_window") or {}).get("started"))
            seen |= opened
            mine = [r for r in doc.get("runs", []) if r.get("step")] if k != host_run else []
            if program_window and opened:
                firsts = {}  # a thread's (and key's) first step inside the window, all its runs
                for r in mine:
                    inside = [n for n, w in zip(r["step"], r.get("in_window") or [],
                                                strict=False) if w]
                    at = (r.get("thread_order"), r.get("key"))
                    if inside:
                        firsts[at] = min(firsts.get(at, inside[0]), inside[0])
                mine = [w for w in (in_window(r, numbering, firsts.get(
                    (r.get("thread_order"), r.get("key")))) for r in mine) if w["step"]]
            elif program_window:
                last = {}
                for r in mine:
                    last[(r.get("thread_order"), r.get("key"))] = r
                mine = list(last.values()) if numbering == "range" else []
            for r in mine:
                entry = {"twin_run": k, "process": p, "thread": r.get("thread"),
                         "thread_order": r.get("thread_order"), "clock": r.get("clock"),
                         "step": r["step"], "start_ns": r["start_ns"], "end_ns": r["end_ns"]}
                if numbering == "mark":
                    entry |= {"key": r.get("key"), "boundaries": r.get("boundaries")}
                runs.append(entry)
    clocks = sorted({r["clock"] for r in runs if r["clock"]})
    document = {"format": FORMAT, "source": "hook", "numbering": numbering,
                "clock": clocks[0] if len(clocks) == 1 else clocks, "window": window,
                "ms_per_step_median": None, "runs": runs,
                "unplaced": program_window and not seen and numbering != "range"}
    host = host_entries(twin_dirs)
    if host:
        document["host"] = host
    return document


def host_entries(twin_dirs: list) -> list:
    """The twin's host times (the hook's host_times.py), every process's threads, each entry
    with its twin run and process (readers/untraced.py, `host`)."""
    out = []
    for k, directory in enumerate(twin_dirs, start=1):
        for p, path in enumerate(process_files(directory)):
            try:
                doc = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            out += [{"twin_run": k, "process": p, **entry} for entry in doc.get("host") or []
                    if isinstance(entry, dict)]
    return out


def in_window(run: dict, numbering: str, first: int | None) -> dict:
    """A run's steps inside the program's window, counted from the window's start (its thread's
    first step there, `first`) where they are numbered by order (a mark run's boundaries then
    are the window's)."""
    keep = [i for i, w in enumerate(run.get("in_window") or []) if w]
    out = dict(run) | {key: [run[key][i] for i in keep] for key in ("step", "start_ns", "end_ns")}
    if numbering != "range" and keep:
        last = out["step"][-1]
        out["step"] = [n - first + 1 for n in out["step"]]
        if numbering == "mark":
            out["boundaries"] = last - first + 2
    return out


def why_empty(twin_dirs: list, document: dict | None = None) -> str:
    """Why the twin runs marked no step, in a few words."""
    if not any(process_files(d) for d in twin_dirs):
        return ("the hook wrote nothing: it did not load in the program (does it reset "
                "PYTHONPATH, run `python -I`/`-S`, or end with os._exit?)")
    if document is not None and document.get("unplaced"):
        return ("the program opens its capture window where the hook does not see it (not "
                "through torch.cuda.profiler, torch.cuda.cudart() or cuda-python), so the twin "
                "cannot count its steps from the window's start: --range all gives one")
    return "the program's steps never ran without the profiler (or never inside its window)"


def write(run: Path, document: dict) -> Path | None:
    """RUN/untraced_steps.json, unless the program wrote one of its own there (kept)."""
    path = run / FILE_NAME
    if path.exists():
        return None
    path.write_text(json.dumps(document) + "\n")
    return path
