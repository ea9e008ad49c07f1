"""The analysed timeline as a Chrome trace (JSON), to zoom in Perfetto UI (ui.perfetto.dev) or
chrome://tracing: what the figures show binned, event by event.

    process "LABEL: GPU 0"   steps (GPU)       |--- Step 40 ---||--- Step 41 ---|
                             idle gaps           |sync|   |host| |queued|
                             stream 7          [op][op]  [op]  [op][op] ...
    process "LABEL: host"    NVTX steps: T     |---- Step 40 ----|---- Step 41 ---
                             thread T: host period  |host: step 40 ...|host: step 41
                             thread T: named code   [forward [update]]  [warper]
                             thread T: blocking       [cudaStreamSynchronize]

Chrome's trace event format: "X" (complete) events with `ts` and `dur` in µs, "M" (metadata)
events naming processes and threads. Times are written relative to each run's first event (its
`origin_ns`, in `otherData`) with three decimals, so a µs value is the exact ns count over 1000
(absolute ns since boot have too many digits for a float); each event's `args` keep its exact
ns (`start_ns`, `end_ns`), and a gap's its cause, ledger parts and next op. A gap is named
`idle: CAUSE`: Perfetto colours a slice by its name, chrome://tracing by `cname` (its reserved
colour names, the nearest to analysis.render.palette's colours).

Several runs go into one file, each in its own processes and from its own origin, so that their
steps line up at 0.
"""

import json

import numpy as np
import pandas as pd

from ..measures.gaps import LEDGER_COLUMNS
from ..measures.host import NOT_CODE, row_name
from ..render.text import STEPS_FROM_WORD

# chrome://tracing's reserved colours (catapult's color_scheme.js), nearest to the palette's.
CAUSE_CNAMES = {"sync": "terrible", "host": "thread_state_iowait", "queued":
                "detailed_memory_dump", "unknown": "generic_work"}
OP_CNAME = "good"
STEP_CNAME = "grey"
BLOCKING_CNAME = "thread_state_uninterruptible"
HOST_CNAME = "grey"
CODE_CNAME = "rail_animation"

# Track ids inside a process, in the order they are drawn: the steps (as many tracks as their
# overlaps need), then the gaps; each stream or host thread from FIRST_TID on.
STEPS_TID, FIRST_TID = 1, 10
# A Linux thread id is the low 24 bits of the trace's global thread id (readers: pid << 24).
OS_TID_MASK = (1 << 24) - 1


def _us(ns: np.ndarray) -> list:
    """ns counts as µs with three decimals, exactly (no float in between)."""
    ns = np.asarray(ns, dtype=np.int64)
    whole, frac = np.divmod(ns, 1000)
    return [f"{w}.{f:03d}" for w, f in zip(whole.tolist(), frac.tolist(), strict=True)]


def lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """A lane for each interval such that no two of one lane overlap: 0 for all where none
    overlap (a stream's ops), else the first lane free at each start (the steps of a pipelined
    loop overlap on the GPU; Chrome's format wants the slices of one track nested or apart)."""
    lane = np.zeros(len(start), dtype=np.int64)
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    if len(s) < 2 or not (np.maximum.accumulate(e)[:-1] > s[1:]).any():
        return lane
    free_at = []
    for i, (a, b) in enumerate(zip(s.tolist(), e.tolist(), strict=True)):
        for k, t in enumerate(free_at):
            if t <= a:
                free_at[k] = b
                lane[order[i]] = k
                break
        else:
            lane[order[i]] = len(free_at)
            free_at.append(b)
    return lane


def _within(frame: pd.DataFrame, lo: int, hi: int) -> pd.DataFrame:
    """The rows of an interval frame (Analysis.ops' start_ns/end_ns, the trace's blocking calls'
    start/end) that overlap [lo, hi)."""
    start, end = ("start_ns", "end_ns") if "start_ns" in frame.columns else ("start", "end")
    return frame[(frame[end].to_numpy() > lo) & (frame[start].to_numpy() < hi)]


class _Writer:
    """Events as JSON lines; names dumped once each (a kernel's name repeats a million times)."""

    def __init__(self):
        self.lines = []
        self._names = {}

    def name(self, text: str) -> str:
        if text not in self._names:
            self._names[text] = json.dumps(text)
        return self._names[text]

    def meta(self, pid: int, what: str, value, tid: int | None = None) -> None:
        key = "sort_index" if what.endswith("sort_index") else "name"
        event = {"ph": "M", "pid": pid, **({} if tid is None else {"tid": tid}), "name": what,
                 "args": {key: value}}
        self.lines.append(json.dumps(event))

    def slices(self, pid: int, tid: int, track: str, cat: str, names: list, start, end,
               origin: int, args: dict, cname) -> None:
        """A track and its "X" events, one a row; `args`: {key: ints or strings, a row each};
        `cname`: one colour for all, or a list of one a row."""
        self.meta(pid, "thread_name", track, tid)
        self.meta(pid, "thread_sort_index", tid, tid)
        start = np.asarray(start, dtype=np.int64)
        end = np.asarray(end, dtype=np.int64)
        head = f'{{"ph":"X","cat":{self.name(cat)},"pid":{pid},"tid":{tid},"name":'
        colours = ([f',"cname":"{c}"' for c in cname] if isinstance(cname, list)
                   else [f',"cname":"{cname}"'] * len(start))
        parts = [[head + self.name(str(n)) for n in names],
                 [',"ts":' + t for t in _us(start - origin)],
                 [',"dur":' + d for d in _us(end - start)], colours]
        for i, (key, values) in enumerate(args.items()):
            lead = ',"args":{' if i == 0 else ","
            parts.append([f'{lead}"{key}":' + (self.name(v) if isinstance(v, str) else str(v))
                          for v in _plain(values)])
        parts.append(["}}"] * len(start))
        self.lines += map("".join, zip(*parts, strict=True))

    def overlapping(self, pid: int, tid: int, track: str, cat: str, names: list, start, end,
                    origin: int, args: dict, cname) -> int:
        """Slices that may overlap (the steps of a pipelined loop, on the GPU) on as many tracks
        as they need from `tid` on; returns the next free track id."""
        start = np.asarray(start, dtype=np.int64)
        end = np.asarray(end, dtype=np.int64)
        lane = lanes(start, end)
        count = int(lane.max()) + 1 if len(lane) else 0
        for k in range(count):
            sel = np.flatnonzero(lane == k)
            self.slices(pid, tid + k, track + (f" ({k + 1})" if k else ""), cat,
                        [names[i] for i in sel], start[sel], end[sel], origin,
                        {key: [v[i] for i in sel] for key, v in args.items()}, cname)
        return tid + max(count, 1)


# The host's step tracks are named by where the steps came from (summary.steps_from).


def _by_thread(steps: pd.DataFrame, always: bool = False) -> list:
    """[(thread label or None, its rows)] in the order of the threads' first steps: each
    thread's steps on tracks of their own, named by it (where several threads have steps, or
    `always`: the host's tracks name their thread)."""
    thread = steps["thread"].astype(str).to_numpy() if "thread" in steps.columns else None
    if thread is None or (not always and len(set(thread)) < 2):
        return [(None, np.arange(len(steps)))]
    return [(t, np.flatnonzero(thread == t)) for t in pd.unique(thread)]


def _plain(values) -> list:
    """Python ints and strings of a column (numpy and pandas' integers unwrapped)."""
    if isinstance(values, (pd.Series, np.ndarray)):
        return values.tolist()
    return [v if isinstance(v, str) else int(v) for v in values]


def _device(w: _Writer, pid: int, label: str, a, strings: dict, origin: int, lo: int,
            hi: int) -> None:
    w.meta(pid, "process_name", f"{label}: GPU {a.device}")
    w.meta(pid, "process_sort_index", pid)
    steps = a.steps
    # The first step has no bubble or overlap (NA): 0 here, as the steps table's JSON has null.
    step_args = {key: _plain(steps[c].fillna(0).astype(np.int64)) for key, c in (
        ("step", "step"), ("start_ns", "gpu_start_ns"), ("end_ns", "gpu_end_ns"),
        *((c, c) for c in ("period_ns", "busy_ns", "bubble_ns", "overlap_ns",
                           *LEDGER_COLUMNS)))}
    gaps_tid = STEPS_TID
    for thread, rows in _by_thread(steps):
        gaps_tid = w.overlapping(
            pid, gaps_tid, "steps (GPU)" + (f": thread {thread}" if thread else ""), "step",
            steps["name"].astype(str).to_numpy()[rows].tolist(),
            np.asarray(step_args["start_ns"])[rows], np.asarray(step_args["end_ns"])[rows],
            origin, {k: np.asarray(v)[rows].tolist() for k, v in step_args.items()}, STEP_CNAME)
    g = a.gaps
    causes = g["cause"].astype(str).tolist()
    w.slices(pid, gaps_tid, "idle gaps, by cause", "gap", [f"idle: {c}" for c in causes],
             g["start_ns"], g["end_ns"], origin,
             {"cause": causes, **{c: g[c] for c in ("start_ns", "end_ns", "gap_ns",
                                                    *LEDGER_COLUMNS, "step", "next_stream")},
              "next_op": g["next_op"].astype(str).tolist()},
             [CAUSE_CNAMES[c] for c in causes])
    ops = _within(a.ops, lo, hi)
    names = ops["name"].to_numpy(dtype=object)
    kinds = ops["kind"].astype(str).to_numpy(dtype=object)
    tid = max(gaps_tid + 1, FIRST_TID)
    for stream in sorted(ops["stream"].unique().tolist()):
        mine = np.flatnonzero(ops["stream"].to_numpy() == stream)
        o = ops.iloc[mine]
        tid = w.overlapping(pid, tid, f"stream {stream}", "op", names[mine].tolist(),
                            o["start_ns"], o["end_ns"], origin,
                            {"kind": kinds[mine].tolist(), "start_ns": _plain(o["start_ns"]),
                             "end_ns": _plain(o["end_ns"]), "step": _plain(o["step"]),
                             "corr": _plain(o["corr"])}, OP_CNAME)


def _host(w: _Writer, pid: int, label: str, a, blocking: pd.DataFrame, origin: int, lo: int,
          hi: int) -> None:
    w.meta(pid, "process_name", f"{label}: host")
    w.meta(pid, "process_sort_index", pid)
    steps = a.steps
    cpu = {key: steps[c].to_numpy(np.int64) for key, c in (
        ("step", "step"), ("start_ns", "cpu_start_ns"), ("end_ns", "cpu_end_ns"))}
    word = STEPS_FROM_WORD.get(a.summary.get("steps_from"), "NVTX")
    tid = STEPS_TID
    for thread, rows in _by_thread(steps, always=True):
        tid = w.overlapping(pid, tid, f"{word} steps" + (f": thread {thread}" if thread else ""),
                            "nvtx", steps["name"].astype(str).to_numpy()[rows].tolist(),
                            cpu["start_ns"][rows], cpu["end_ns"][rows], origin,
                            {k: v[rows].tolist() for k, v in cpu.items()}, STEP_CNAME)
    tid = max(tid, FIRST_TID)
    tid = _host_rows(w, pid, tid, a, origin, lo, hi)
    calls = _within(blocking, lo, hi)
    for thread in sorted(calls["tid"].unique().tolist()):
        c = calls[calls["tid"].to_numpy() == thread]
        tid = w.overlapping(pid, tid, f"thread {int(thread) & OS_TID_MASK}: blocking calls",
                            "blocking", c["name"].astype(str).tolist(), c["start"], c["end"],
                            origin, {"start_ns": _plain(c["start"]), "end_ns": _plain(c["end"])},
                            BLOCKING_CNAME)


def _host_rows(w: _Writer, pid: int, tid: int, a, origin: int, lo: int, hi: int) -> int:
    """The host table on each step thread: each step's host period (its parts in args) and the
    named code that spent it, the thread's NVTX ranges (traced functions too), nested as they
    ran. Returns the next free track id."""
    steps = a.host_steps
    if steps is None or steps.empty or a.trace is None:
        return tid
    ranges = _within(a.trace.ranges, lo, hi)
    for thread in steps["tid"].unique().tolist():
        mine = steps[steps["tid"].to_numpy() == thread]
        os_tid = int(thread) & OS_TID_MASK
        tid = w.overlapping(
            pid, tid, f"thread {os_tid}: host period", "host",
            [f"host: step {s}" for s in mine["step"].tolist()], mine["host_start_ns"],
            mine["host_end_ns"], origin,
            {key: _plain(mine[key].astype(np.int64)) for key in (
                "step", "host_start_ns", "host_end_ns", "host_period_ns", "python_ns", "cuda_ns",
                "sync_ns", "named_ns")}, HOST_CNAME)
        code = ranges[(ranges["tid"].to_numpy() == thread)
                      & ~ranges["name"].isin(NOT_CODE).to_numpy()]
        code = code.sort_values(["start", "end"], ascending=[True, False], kind="stable")
        w.slices(pid, tid, f"thread {os_tid}: named code", "code",
                 [row_name(n) for n in code["name"]], code["start"], code["end"], origin,
                 {"name": code["name"].astype(str).tolist(), "start_ns": _plain(code["start"]),
                  "end_ns": _plain(code["end"])}, CODE_CNAME)
        tid += 1
    return tid


def _bounds(traced: list, blocking: pd.DataFrame) -> tuple:
    """(lo, hi, origin): the stretch written, the steps on the host and on the GPU, and the
    first time written in it (an op or call that began before the first step)."""
    lo = min(int(min(a.steps["cpu_start_ns"].min(), a.steps["gpu_start_ns"].min())) for a in traced)
    hi = max(int(max(a.steps["cpu_end_ns"].max(), a.steps["gpu_end_ns"].max())) for a in traced)
    starts = [_within(a.ops, lo, hi)["start_ns"].to_numpy() for a in traced]
    starts.append(_within(blocking, lo, hi)["start"].to_numpy())
    return lo, hi, min([lo, *(int(s.min()) for s in starts if len(s))])


def chrome_trace(runs: list) -> str:
    """The JSON text of `runs`: (label, [Analysis], the trace's strings, its blocking
    calls) each; captures of GPU metrics alone (no ops, no gaps) are left out."""
    w = _Writer()
    origins = {}
    pid = 0
    for label, analyses, strings, blocking in runs:
        traced = [a for a in analyses if a.traced]
        if not traced:
            continue
        lo, hi, origin = _bounds(traced, blocking)
        origins[label] = origin
        pid += 1
        _host(w, pid, label, traced[0], blocking, origin, lo, hi)
        for a in traced:
            pid += 1
            _device(w, pid, label, a, strings, origin, lo, hi)
    other = json.dumps({"source": "gapscope", "origin_ns": origins})
    return ('{"displayTimeUnit":"ns","otherData":' + other + ',"traceEvents":[\n'
            + ",\n".join(w.lines) + "\n]}\n")


def write_chrome_trace(path, runs: list) -> None:
    """The Chrome trace JSON at `path`, gzip-compressed where the name ends in .json.gz (as
    ui.perfetto.dev opens it)."""
    text = chrome_trace(runs)
    if str(path).lower().endswith(".gz"):
        import gzip

        with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                                                     compresslevel=6) as f:
            f.write(text.encode("utf-8"))
        return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
