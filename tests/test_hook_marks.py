"""The hook's program window and step marks (harness/inject/gapscope_hook/window.py,
step_marks.py): the first cudaProfilerStart to Stop as nsys captures it, the steps inside it;
the boundaries of inferred steps, at each CUDA graph replay and each execution of a source line
(sys.monitoring: the line tests run under a Python 3.12 where this machine has one).

On the CPU: fake clocks and stand-in modules; the subprocesses import no torch.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from test_hook import HOOK_FILE, INJECT, Clock


def python_312() -> str | None:
    """A Python of 3.12 or later that runs: this one, else one on PATH or in pyenv's versions."""
    if sys.version_info >= (3, 12):
        return sys.executable
    found = [shutil.which(f"python3.{minor}") for minor in range(12, 16)]
    found += sorted(str(p) for p in (Path.home() / ".pyenv" / "versions").glob("3.1[2-9]*/bin/"
                                                                              "python3"))
    for candidate in filter(None, found):
        try:
            done = subprocess.run([candidate, "-c", "import sys; sys.monitoring"],
                                  capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            return candidate
    return None


PYTHON_312 = python_312()
needs_312 = pytest.mark.skipif(
    PYTHON_312 is None,
    reason="marking a source line needs sys.monitoring (Python 3.12+), and none is here")


# --- the program's window ----------------------------------------------------------------------


def test_the_window_is_the_first_start_to_the_first_stop_after_it(hook):
    w = hook.window.Window()
    w.stop()  # a stop before any start: nothing
    assert w.phase == hook.window.BEFORE
    w.start()
    w.start()  # a start while open: nothing
    assert w.phase == hook.window.OPEN and w.document() == {"started": True, "stopped": False}
    w.stop()
    w.start()  # nsys captures once: a second window is not one
    assert w.phase == hook.window.CLOSED and w.document() == {"started": True, "stopped": True}


def test_the_window_follows_cudart_and_torch_profiler_calls_and_they_still_run(hook):
    calls = []
    runtime = types.SimpleNamespace(cudaProfilerStart=lambda: calls.append("start") or 0,
                                    cudaProfilerStop=lambda: calls.append("stop") or 0)
    w = hook.window.Window()
    callbacks = {}
    hook.window.install(lambda name, cb: callbacks.setdefault(name, []).append(cb), w)
    assert sorted(callbacks) == ["cuda.bindings.runtime", "cuda.cudart", "torch.cuda",
                                 "torch.cuda.profiler"]
    for cb in callbacks["torch.cuda"]:
        cb(types.SimpleNamespace(_cudart=runtime))
    for cb in callbacks["torch.cuda.profiler"]:  # its start() calls cudart() as torch's does
        profiler = types.SimpleNamespace(start=lambda: runtime.cudaProfilerStart(),
                                         stop=lambda: runtime.cudaProfilerStop())
        cb(profiler)
    assert runtime.cudaProfilerStart() == 0 and w.phase == hook.window.OPEN
    profiler.stop()
    assert w.phase == hook.window.CLOSED and calls == ["start", "stop"]
    for cb in callbacks["torch.cuda"]:  # followed once, whatever calls again
        cb(types.SimpleNamespace(_cudart=runtime))
    assert runtime.cudaProfilerStart.__gapscope_window__ is True


def test_each_step_records_whether_it_lay_inside_the_window(hook):
    rec = hook.recorder.Recorder(None, Clock())
    rec.window = w = hook.window.Window()
    hook.marks.use(rec)
    step = hook.marks.step_wrapper(lambda: None)
    step()            # before the window
    w.start()
    step()
    step()            # inside
    token = hook.marks._enter()
    w.stop()          # a step that the stop cuts: not wholly inside
    hook.marks._exit(token)
    step()            # after
    (run,) = rec.runs()
    assert run["step"] == [1, 2, 3, 4, 5]
    assert run["in_window"] == [False, True, True, False, False]


# --- step marks --------------------------------------------------------------------------------


def test_boundaries_make_a_step_from_one_to_the_next_by_thread_and_key(hook):
    w = hook.window.Window()
    b = hook.step_marks.Boundaries(Clock(), w)
    b.both("graph")                  # marks 10, 20
    w.start()
    b.both("graph")                  # 30, 40
    b.before("/x.py:3")              # 50
    b.after()                        # 60
    b.both("graph")                  # 70, 80
    b.before("/x.py:3")              # 90; its second mark never came: no step after it
    (graph, line) = b.runs(hook.recorder._since_first)
    assert (graph["key"], graph["boundaries"], graph["step"]) == ("graph", 3, [1, 2])
    # Step j: from boundary j's second mark to boundary j + 1's first: 20..30, 40..70.
    assert (graph["start_ns"], graph["end_ns"]) == ([0, 20], [10, 50])
    assert graph["in_window"] == [False, True]
    assert (line["key"], line["boundaries"], line["step"]) == ("/x.py:3", 2, [1])
    assert (line["start_ns"], line["end_ns"], line["in_window"]) == ([0], [30], [True])


def test_every_cuda_graph_replay_is_a_boundary_and_still_replays(hook):
    class CUDAGraph:
        replays = 0

        def replay(self):
            CUDAGraph.replays += 1

    graphs = types.SimpleNamespace(CUDAGraph=CUDAGraph)
    b = hook.step_marks.Boundaries(Clock())
    hook.step_marks.patch_graph_replay(graphs, b)
    hook.step_marks.patch_graph_replay(graphs, b)  # patched once
    for g in (CUDAGraph(), CUDAGraph(), CUDAGraph()):
        g.replay()
    (run,) = b.runs(hook.recorder._since_first)
    assert CUDAGraph.replays == 3 and run["step"] == [1, 2] and run["boundaries"] == 3


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="this Python has sys.monitoring")
def test_a_line_key_needs_sys_monitoring_and_says_so(hook):
    why = hook.step_marks.watch_lines(["/x.py:3"], hook.step_marks.Boundaries(Clock()))
    assert why == ("marking a source line needs sys.monitoring, new in Python 3.12 (this is "
                   f"{sys.version.split()[0]})")


def test_step_mark_keys_are_a_json_list_and_a_line_key_is_file_colon_line(hook):
    assert hook.step_marks.keys_of('["graph", "/a b/c.py:12"]') == ["graph", "/a b/c.py:12"]
    assert hook.step_marks.keys_of("not json") == hook.step_marks.keys_of('{"a": 1}') == []
    assert hook.step_marks.parse_line_key("/a:b/c.py:12") == ("/a:b/c.py", 12)
    assert hook.step_marks.parse_line_key("graph") is None


# A loop calling work() 4 times; line 8 is the target. One clock for the marks and the program:
# each call ticks at line 7, the mark before line 8, line 8's own tick, the mark after (at line
# 9's start).
LINE_PROGRAM = """\
import itertools, json, sys
sys.path.insert(0, sys.argv[1])
from gapscope_hook import recorder, step_marks
tick = itertools.count()
b = step_marks.Boundaries(lambda: ("host-clock", next(tick)))
def work(log):
    a = next(tick)
    log.append(next(tick))
    return a
print(step_marks.watch_lines([__file__ + ":8"], b))
log = []
for i in range(4):
    work(log)
print(json.dumps({"log": log, "runs": b.runs(recorder._since_first)}))
"""


@needs_312
def test_each_execution_of_a_line_is_a_boundary_marked_before_and_after_it(tmp_path):
    program = tmp_path / "loop.py"
    program.write_text(LINE_PROGRAM)
    out = subprocess.run([PYTHON_312, str(program), str(INJECT)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "None"
    got = json.loads(lines[1])
    # Call k: line 7 ticks 4k, the mark before line 8 4k + 1, line 8 4k + 2, the mark after 4k + 3.
    assert got["log"] == [2, 6, 10, 14]
    (run,) = got["runs"]
    assert (run["key"], run["boundaries"], run["step"]) == (f"{program}:8", 4, [1, 2, 3])
    # Step j from the mark after execution j (4j - 1) to the mark before j + 1 (4j + 1).
    assert (run["start_ns"], run["end_ns"]) == ([0, 4, 8], [2, 6, 10])


@needs_312
def test_the_hook_writes_the_marked_steps_of_a_line_key(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text(textwrap.dedent("""\
        def check(i):
            return i > 100

        for i in range(6):
            if check(i):
                break
        """))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GAPSCOPE_")}
    env |= {"PYTHONPATH": str(INJECT), "GAPSCOPE_TWIN_DIR": str(tmp_path),
            "GAPSCOPE_STEP_MARKS": json.dumps([f"{program}:2"])}
    out = subprocess.run([PYTHON_312, str(program)], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    (written,) = tmp_path.glob("untraced-*.json")
    doc = json.loads(written.read_text())
    assert (doc["kind"], doc["profiler_window"]) == ("marks", {"started": False,
                                                             "stopped": False})
    (run,) = doc["runs"]
    assert (run["key"], run["boundaries"], run["step"], run["clock"]) == (
        f"{program}:2", 6, [1, 2, 3, 4, 5], "host-clock")
    assert run["in_window"] == [False] * 5
    assert HOOK_FILE.exists()
