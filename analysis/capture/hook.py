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
    """What the twin marks as steps: NVTX ranges matching `pattern`, or calls of `functions`
    (MODULE:QUALNAME each)."""

    pattern: str | None = None
    functions: tuple = ()

    def variables(self) -> dict:
        if self.functions:
            return {"GAPSCOPE_STEP_FUNCTIONS": ",".join(self.functions)}
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


def merge(twin_dirs: list, window: list | None, numbering: str,
          last_sequence_only: bool) -> dict:
    """The untraced_steps.json document of the twin runs' files: one `runs` entry per twin run,
    process, thread and sequence, with `twin_run` and `process` (order within its twin run).
    last_sequence_only: a thread's last sequence of steps alone (the capture was a window of the
    run, which a warm-up loop numbered the same way precedes)."""
    runs = []
    for k, directory in enumerate(twin_dirs, start=1):
        for p, path in enumerate(process_files(directory)):
            try:
                doc = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            mine = [r for r in doc.get("runs", []) if r.get("step")]
            if last_sequence_only:
                last = {}
                for r in mine:
                    last[r.get("thread_order")] = r
                mine = list(last.values())
            for r in mine:
                runs.append({"twin_run": k, "process": p, "thread": r.get("thread"),
                             "thread_order": r.get("thread_order"), "clock": r.get("clock"),
                             "step": r["step"], "start_ns": r["start_ns"],
                             "end_ns": r["end_ns"]})
    clocks = sorted({r["clock"] for r in runs if r["clock"]})
    document = {"format": FORMAT, "source": "hook", "numbering": numbering,
                "clock": clocks[0] if len(clocks) == 1 else clocks, "window": window,
                "ms_per_step_median": None, "runs": runs}
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


def why_empty(twin_dirs: list) -> str:
    """Why the twin runs marked no step, in a few words."""
    if not any(process_files(d) for d in twin_dirs):
        return ("the hook wrote nothing: it did not load in the program (does it reset "
                "PYTHONPATH, run `python -I`/`-S`, or end with os._exit?)")
    return "the program's steps never ran without the profiler"


def write(run: Path, document: dict) -> Path | None:
    """RUN/untraced_steps.json, unless the program wrote one of its own there (kept)."""
    path = run / FILE_NAME
    if path.exists():
        return None
    path.write_text(json.dumps(document) + "\n")
    return path
