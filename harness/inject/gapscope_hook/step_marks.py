"""Step boundaries where the traced run's steps were inferred from its trace (no range, no function
to time): the twin marks what the inference cut at, so traced and untraced steps are the same
steps (GAPSCOPE_STEP_MARKS, a JSON list of keys):

    "graph"        each replay of a CUDA graph: torch.cuda.CUDAGraph.replay, which torch.compile's
                   CUDA-graph trees call too; both marks just before the replay
    "FILE:LINE"    each execution of that source line, the once-a-step sync's (the traced run's
                   `gapscope.sync FILE:LINE FUNCTION` mark names it): the first mark as the line
                   starts, before its sync, the second once it is done (the next line of its
                   function, or the function's return); sys.monitoring, Python 3.12 and later

    thread   |--step j--|b|--step j+1--|b|...     b: a boundary, two marks (CUDA events)
    step j   from boundary j's second mark to boundary j + 1's first

Boundaries are numbered by order within their thread and key, all of them (the analysis counts
the traced run's the same way: every graph launch of the thread, every sync joined to the line),
and each records the window's phase (window.py), so the steps inside the program's own capture
window can be kept and counted from its start.
"""

import os
import sys
import threading

from .notes import say
from .window import OPEN

GRAPH = "graph"
# sys.monitoring tool ids tried, after the debugger's, coverage's and profiler's (0, 1, 2).
TOOL_IDS = (3, 4, 5)


class _Thread:
    def __init__(self, order: int, name: str):
        self.order, self.name = order, name
        self.marks = {}  # key -> [(first mark, second mark, in window)]
        self.pending = None  # the line key whose second mark is due


class Boundaries:
    """The step boundaries of one process, by thread and key. `mark` is the recorder's."""

    def __init__(self, mark, window=None):
        self.mark = mark
        self.window = window
        self._lock = threading.Lock()
        self._local = threading.local()
        self._threads = []
        self.pid = os.getpid()
        self.on_first = None  # called once, at the process's first boundary

    def reset(self) -> None:
        """A forked child starts empty."""
        self._lock = threading.Lock()
        self._local = threading.local()
        self._threads = []
        self.pid = os.getpid()

    def _thread(self) -> _Thread:
        t = getattr(self._local, "t", None)
        if t is None:
            with self._lock:
                t = _Thread(len(self._threads), threading.current_thread().name)
                self._threads.append(t)
                first, self.on_first = self.on_first, None
            self._local.t = t
            if first is not None:
                first()
        return t

    def _open(self) -> bool:
        return self.window is not None and self.window.phase == OPEN

    def both(self, key: str) -> None:
        """A boundary whose two marks are taken at once (a graph's replay is about to start)."""
        first = self.mark()
        self._thread().marks.setdefault(key, []).append((first, self.mark(), self._open()))

    def before(self, key: str) -> None:
        """The first mark of a line's boundary (its second comes with after())."""
        t = self._thread()
        if t.pending is not None:
            self.after()
        t.marks.setdefault(key, []).append([self.mark(), None, self._open()])
        t.pending = key

    def after(self) -> None:
        t = self._thread()
        if t.pending is None:
            return
        last = t.marks[t.pending][-1]
        last[1] = self.mark()
        t.pending = None

    def runs(self, since_first) -> list:
        """The twin file's runs: per thread and key, step j from boundary j's second mark to
        boundary j + 1's first, where both share a clock; `in_window` where both boundaries are
        in the program's window. since_first(clock, steps): the recorder's conversion to ns."""
        out = []
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            for key, marks in list(t.marks.items()):
                steps = []
                for j in range(len(marks) - 1):
                    start, end = marks[j][1], marks[j + 1][0]
                    if start is None or start[0] != end[0] or start[0] == "capturing":
                        continue
                    steps.append((j + 1, start, end, marks[j][2] and marks[j + 1][2]))
                for clock in sorted({s[1][0] for s in steps}):
                    mine = [(n, a[1], b[1], w) for n, a, b, w in steps if a[0] == clock]
                    try:
                        start_ns, end_ns = since_first(clock, mine)
                    except Exception as e:
                        say(f"cannot read the CUDA events of thread {t.name} ({e}): left out")
                        continue
                    out.append({"thread": t.name, "thread_order": t.order, "key": key,
                                "sequence": 0, "clock": clock, "boundaries": len(marks),
                                "step": [s[0] for s in mine], "start_ns": start_ns,
                                "end_ns": end_ns, "in_window": [s[3] for s in mine]})
        return out


def patch_graph_replay(graphs, boundaries: Boundaries) -> None:
    """torch.cuda.graphs.CUDAGraph.replay: a boundary before each replay (torch.compile's
    CUDA-graph trees replay from their own eager code, outside any compiled region)."""
    cls = graphs.CUDAGraph
    replay = cls.replay
    if getattr(replay, "__gapscope_step__", False):
        return

    def gapscope_replay(self, *args, **kwargs):
        boundaries.both(GRAPH)
        return replay(self, *args, **kwargs)

    gapscope_replay.__gapscope_step__ = True
    gapscope_replay.__doc__ = replay.__doc__
    cls.replay = gapscope_replay


def parse_line_key(key: str) -> tuple | None:
    """"FILE:LINE" -> (absolute FILE, LINE); None for another key."""
    path, _, line = key.rpartition(":")
    return (os.path.abspath(path), int(line)) if path and line.isdigit() else None


def watch_lines(keys: list, boundaries: Boundaries, monitoring=None) -> str | None:
    """Marks each execution of the lines `keys` name (FILE:LINE): before it (as the line starts)
    and after it (the next line of its code, or its return or yield). Every code object's first
    start is looked at once (then that event is off for it); only the code objects holding one
    of the lines report their lines. None when on, else why not (one line)."""
    mon = monitoring or getattr(sys, "monitoring", None)
    if mon is None:
        return (f"marking a source line needs sys.monitoring, new in Python 3.12 (this is "
                f"{sys.version.split()[0]})")
    targets = {}
    for key in keys:
        where = parse_line_key(key)
        if where is not None:
            targets[where] = key
    files = {path for path, _ in targets}
    tool = next((t for t in TOOL_IDS if mon.get_tool(t) is None), None)
    if tool is None:
        return "every sys.monitoring tool id is taken"
    mon.use_tool_id(tool, "gapscope")
    events = mon.events
    paths = {}  # co_filename -> absolute, or None outside the files

    def lines_of(code) -> dict:
        path = paths.get(code.co_filename, 0)
        if path == 0:
            path = os.path.abspath(code.co_filename)
            path = paths[code.co_filename] = path if path in files else None
        if path is None:
            return {}
        held = {line for _, _, line in code.co_lines() if line is not None}
        return {line: key for (p, line), key in targets.items() if p == path and line in held}

    watched = {}  # code -> {line: key}

    def on_start(code, offset):
        lines = lines_of(code)
        if lines:
            watched[code] = lines
            mon.set_local_events(tool, code, events.LINE | events.PY_RETURN | events.PY_YIELD)
        return mon.DISABLE

    def on_line(code, line):
        boundaries.after()
        key = watched.get(code, {}).get(line)
        if key is not None:
            boundaries.before(key)

    def on_leave(code, offset, value):
        boundaries.after()

    mon.register_callback(tool, events.PY_START, on_start)
    mon.register_callback(tool, events.LINE, on_line)
    mon.register_callback(tool, events.PY_RETURN, on_leave)
    mon.register_callback(tool, events.PY_YIELD, on_leave)
    mon.set_events(tool, events.PY_START)
    return None


def keys_of(value: str) -> list:
    """GAPSCOPE_STEP_MARKS: a JSON list of keys."""
    import json

    try:
        keys = json.loads(value)
    except ValueError:
        return []
    return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []


def install(on, keys: list, boundaries: Boundaries) -> None:
    """Turns on the marks `keys` asks for: graph replays once torch.cuda.graphs is imported, the
    lines at once. `on(module, callback)`: start.install's."""
    if GRAPH in keys:
        def graphs(module):
            patch_graph_replay(module, boundaries)

        graphs.__name__ = "mark each CUDA graph replay"
        on("torch.cuda.graphs", graphs)
    lines = [k for k in keys if parse_line_key(k) is not None]
    if lines:
        why = watch_lines(lines, boundaries)
        if why is not None:
            say(f"no step marks at {', '.join(lines)}: {why}")
