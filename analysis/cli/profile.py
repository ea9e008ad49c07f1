"""`gapscope profile [OPTIONS] -- CMD [ARGS...]`: any program under Nsight Systems, analysed
(analysis.capture.profile runs it; this command then writes the run's report and prints its
analysis). Exit status, as profile.sh's: analysis/capture/profile.py's docstring."""

import os
from pathlib import Path

import click

from ..capture.host_functions import MAX_OWN_FUNCTIONS
from ..capture.nsys import GRAPH_TRACES, RANGES
from ..capture.profile import run_profile
from ..capture.profile_request import DEFAULT_TWIN_RUNS, ProfileError, Request
from ..capture.profile_twin import note
from ..measures.steps import DEFAULT_CHECK_PATTERN
from .report import report


class Failed(click.ClickException):
    """The profile stopped: its one line, with profile.sh's exit status."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


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
@click.option("--host-function", "host_functions", multiple=True, metavar="MODULE:QUALNAME",
              help="Name this function's host time too (repeatable): the host table times "
                   "generate()'s functions and the program's own modules' by itself.")
@click.option("--no-host-functions", is_flag=True,
              help="Time no named code for the host table (its rows: the NVTX ranges alone).")
@click.option("--max-own-functions", type=click.IntRange(min=1), default=MAX_OWN_FUNCTIONS,
              show_default=True,
              help="Name at most this many functions of the program's own code (the modules it "
                   "imports from outside site-packages, and the script's own).")
@click.option("--name", default=None,
              help="The run directory's name after the time (default: the program's name).")
@click.option("--traces-dir", type=click.Path(file_okay=False, path_type=Path),
              default=lambda: os.environ.get("TRACES_DIR") or "traces",
              show_default="$TRACES_DIR or ./traces", help="Where the run directory goes.")
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def profile(ctx, **options):
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
    options["step_functions"] = tuple(options["step_functions"])
    options["host_functions"] = tuple(options["host_functions"])
    try:
        done = run_profile(Request(**options))
    except ProfileError as e:
        raise Failed(str(e), e.exit_code) from None
    run, choice, held = done.run, done.choice, done.held
    patterns = {"step_pattern": choice.pattern, "check_pattern": options["check_pattern"],
                "device": None}
    try:
        ctx.invoke(report, traces=(str(run),), out_dir=str(run), show=True, **patterns)
    except click.ClickException as e:
        raise Failed(f"the analysis failed on {run}: {e.format_message()}", e.exit_code) from None
    note(f"done: {run} ({steps_said(run, choice, held)}, {held['kernels']} kernels captured)")
    if done.program_exit_code:
        raise Failed(f"the program failed with exit code {done.program_exit_code}: the report "
                     f"above is of what ran before it stopped (the log: {run}/nsys.log)",
                     done.program_exit_code)


def steps_said(run: Path, choice, held: dict) -> str:
    """The report's step count and where the steps came from (its summary.json), for the last
    line; the capture's count where the report wrote none."""
    return report_steps(run / "summary.json") or (
        "steps inferred" if choice.steps_from == "inferred" else f"{held['steps']} steps")


def report_steps(path: Path) -> str | None:
    """`N steps (SOURCE)` of a report's summary.json ({label: {device: summary, "trace"}}:
    each device's, where they differ), None where it has none."""
    import json

    from ..render.text import STEPS_FROM_WORD

    try:
        summaries = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    said = [f"{s['steps']} steps ({STEPS_FROM_WORD.get(s.get('steps_from'), 'NVTX')})"
            for devices in (summaries.values() if isinstance(summaries, dict) else ())
            if isinstance(devices, dict)
            for s in devices.values() if isinstance(s, dict) and "steps" in s]
    return ", ".join(dict.fromkeys(said)) or None
