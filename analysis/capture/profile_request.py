"""A `gapscope profile` request checked before anything runs: the patterns, the step functions,
the program, nsys and the GPU (bad usage or a machine not set up: exit status 2)."""

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..capture import step_functions as sf
from ..capture.host_functions import MAX_OWN_FUNCTIONS
from ..capture.nsys import NsysError, check_gpu, find_nsys, require_version
from ..capture.profile_twin import note
from ..capture.window_scan import opens_window
from ..errors import TraceError
from ..measures.steps import DEFAULT_CHECK_PATTERN, compile_pattern

DEFAULT_TWIN_RUNS = 3


class ProfileError(Exception):
    """Why the profile stopped, in one line, with profile.sh's exit status: 2 bad usage or a
    machine not set up, the program's own when it failed under nsys, 1 otherwise."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Request:
    """What to profile and how: `gapscope profile`'s options (its --help says each)."""

    cmd: tuple
    step_pattern: str | None = None
    step_functions: tuple = ()
    check_pattern: str = DEFAULT_CHECK_PATTERN
    capture_range: str | None = None
    delay_s: float | None = None
    duration_s: float | None = None
    graph_trace: str = "node"
    osrt: bool = False
    twin_runs: int = DEFAULT_TWIN_RUNS
    no_twin: bool = False
    no_sync_lines: bool = False
    host_functions: tuple = ()      # --host-function, beyond the ones found (host_functions.py)
    no_host_functions: bool = False
    max_own_functions: int = MAX_OWN_FUNCTIONS  # the program's own functions named at most
    name: str | None = None
    traces_dir: Path = Path("traces")


@dataclass(frozen=True)
class Accepted:
    """A request checked: its step functions parsed, the program's Python probed (None where
    not needed), the capture range resolved (and whether one was asked for), the nsys found."""

    functions: list
    probe: sf.Probe | None
    capture_range: str
    range_given: bool
    nsys: object
    # Why the range is `all` though none was asked for (window_scan.py), else None.
    range_chosen: str | None = None


NO_WINDOW_CALL = ("the program's own files open no capture window (no cudaProfilerStart, no "
                  "torch.cuda.profiler)")


def accept(r: Request) -> Accepted:
    """The request checked (module docstring); ProfileError with exit status 2 where not."""
    cmd, step_pattern, check_pattern = r.cmd, r.step_pattern, r.check_pattern
    delay_s, duration_s = r.delay_s, r.duration_s
    for pattern, option in ((step_pattern, "--steps"), (check_pattern, "--check")):
        try:
            if pattern is not None:
                compile_pattern(pattern, option)
        except TraceError as e:
            raise ProfileError(str(e), 2) from None
    if step_pattern is not None and r.step_functions:
        raise ProfileError("--steps and --step-function each name the steps: pass one", 2)
    try:
        functions = list(dict.fromkeys(sf.parse_spec(v) for v in r.step_functions))
    except sf.StepFunctionError as e:
        raise ProfileError(str(e), 2) from None
    range_given = r.capture_range is not None or delay_s is not None or duration_s is not None
    capture_range = resolve_range(r.capture_range, delay_s, duration_s)
    range_chosen = None
    if not range_given and opens_window(cmd, Path.cwd()) is False:
        # Its files open no window: capture all of it at once, not twice.
        capture_range, range_chosen = "all", NO_WINDOW_CALL
    if cmd[0].startswith("-") and cmd[0] != "-":
        raise ProfileError(f"no such option: {cmd[0]} (`gapscope profile --help` lists them; the "
                           "program's command goes after --)", 2)
    if shutil.which(cmd[0]) is None:
        raise ProfileError(f"{cmd[0]}: no such program (the command after --)", 2)
    probe = None
    for spec in r.host_functions:
        if not sf.SPEC.match(spec):
            raise ProfileError(f"--host-function {spec!r} is not MODULE:QUALNAME (e.g. "
                               "mypkg.decode:Decoder.sample)", 2)
    if functions or step_pattern is None or not r.no_host_functions:
        probe = sf.probe(cmd, functions, Path.cwd(), dict(os.environ))
        try:
            for line in sf.check(functions, probe):
                note(line)
        except sf.StepFunctionError as e:
            raise ProfileError(str(e), 2) from None
        traced = [f for f in functions if f.module != "__main__"]
        if traced and probe.own_python and not probe.nvtx:
            raise ProfileError(f"--step-function needs the nvtx package in the program's "
                               f"Python ({probe.python}) for nsys's function trace: "
                               f"`{probe.python} -m pip install nvtx`", 2)
        if len(traced) < len(functions) and not sf.monitors(probe):
            raise ProfileError(f"--step-function __main__:...: the script's own functions are "
                               f"timed through sys.monitoring, new in Python 3.12 (the "
                               f"program's is {probe.version or 'unknown'}): move the function "
                               "into a module the script imports", 2)
    try:
        nsys = find_nsys()
        require_version(nsys)
    except NsysError as e:
        raise ProfileError(str(e), 2) from None
    note(nsys.note)
    check_gpu_for(cmd)
    return Accepted(functions, probe, capture_range, range_given, nsys, range_chosen)

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


def check_gpu_for(cmd: tuple) -> None:
    if wants_cpu(cmd):
        return
    gpu = check_gpu()
    if gpu["status"] != "OK":
        raise ProfileError(f"{gpu['detail']}: profile on a machine with an NVIDIA GPU and driver "
                           "(`gapscope doctor` checks it), or run the program with --device cpu",
                           2)


def resolve_range(capture_range: str | None, delay_s, duration_s) -> str:
    timed = delay_s is not None or duration_s is not None
    if capture_range == "cudaProfilerApi" and timed:
        raise ProfileError("--delay/--duration time a stretch of the whole run: they do not go "
                           "with --range cudaProfilerApi", 2)
    return capture_range or ("all" if timed else "cudaProfilerApi")


def traced_functions(functions: list, probe: sf.Probe | None) -> list:
    """What the function trace names: the step functions, else (no --steps either) the forwards
    of the program's transformers' causal LMs, where nsys can trace them (nvtx installed)."""
    if functions:  # `__main__`'s are the hook's (main_code.py): nsys cannot trace them
        return [f for f in functions if f.module != "__main__"]
    if probe is None or probe.transformers is None:
        return []
    if not probe.nvtx:
        note(f"no steps from transformers' forwards: nsys's function trace needs the nvtx "
             f"package in the program's Python ({probe.python})")
        return []
    return sf.causal_lm_forwards(Path(probe.transformers))
