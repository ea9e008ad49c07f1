"""Tiny nsys-like SQLite exports built by hand, for tests whose answers are worked out on paper.

Only the columns the analysis reads are filled; table and column names follow nsys's schema 3.x.
"""

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

PID = 1000
TID = 1001


def global_tid(pid: int = PID, tid: int = TID) -> int:
    return (pid << 24) | tid


def global_pid(pid: int = PID) -> int:
    return pid << 24


SCHEMA = {
    "META_DATA_EXPORT": "name TEXT NOT NULL, value TEXT",
    "StringIds": "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL",
    "NVTX_EVENTS": "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, "
                   "text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, "
                   "domainId INTEGER",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "start INTEGER NOT NULL, end INTEGER NOT NULL, "
                                   "eventClass INTEGER NOT NULL, globalTid INTEGER, "
                                   "correlationId INTEGER, nameId INTEGER NOT NULL, "
                                   "returnValue INTEGER NOT NULL",
    "CUPTI_ACTIVITY_KIND_KERNEL": "start INTEGER NOT NULL, end INTEGER NOT NULL, "
                                  "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
                                  "streamId INTEGER NOT NULL, correlationId INTEGER, "
                                  "globalPid INTEGER, demangledName INTEGER NOT NULL, "
                                  "shortName INTEGER NOT NULL",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "start INTEGER NOT NULL, end INTEGER NOT NULL, "
                                  "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
                                  "streamId INTEGER NOT NULL, correlationId INTEGER, "
                                  "globalPid INTEGER, bytes INTEGER NOT NULL, "
                                  "copyKind INTEGER NOT NULL",
    "CUPTI_ACTIVITY_KIND_MEMSET": "start INTEGER NOT NULL, end INTEGER NOT NULL, "
                                  "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
                                  "streamId INTEGER NOT NULL, correlationId INTEGER, "
                                  "globalPid INTEGER, value INTEGER NOT NULL, "
                                  "bytes INTEGER NOT NULL",
    # The columns of a real nsys 2025.3 graph-level export, in its order.
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": "start INTEGER NOT NULL, end INTEGER NOT NULL, "
                                       "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
                                       "greenContextId INTEGER, streamId INTEGER NOT NULL, "
                                       "correlationId INTEGER, globalPid INTEGER, "
                                       "graphId INTEGER, graphExecId INTEGER",
    "GPU_METRICS": "timestamp INTEGER, typeId INTEGER NOT NULL, metricId INTEGER NOT NULL, "
                   "value INTEGER NOT NULL",
    "TARGET_INFO_GPU_METRICS": "typeId INTEGER NOT NULL, sourceId INTEGER NOT NULL, "
                               "typeName TEXT NOT NULL, metricId INTEGER NOT NULL, "
                               "metricName TEXT NOT NULL",
    "TARGET_INFO_GPU": "id INTEGER NOT NULL, name TEXT, memoryBandwidth INTEGER",
    "TARGET_INFO_SESSION_START_TIME": "utcEpochNs INTEGER, utcTime TEXT, localTime TEXT",
    "ThreadNames": "nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER",
}
# A metric-set typeId as nsys writes them: the GPU in the low byte, the set and chip above it.
METRIC_TYPE_ID = 0x10A00
OP_TABLE = {"kernel": "CUPTI_ACTIVITY_KIND_KERNEL", "memcpy": "CUPTI_ACTIVITY_KIND_MEMCPY",
            "memset": "CUPTI_ACTIVITY_KIND_MEMSET", "graph": "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"}
GRAPH_LAUNCH = "cudaGraphLaunch_v10000"
NVTX_MARK = 34  # NvtxMark in nsys's NVTX_EVENTS


@dataclass
class Synth:
    """Collects rows; `write` makes the file. Lazy like nsys: op tables without rows are left out
    unless `keep_empty` names them."""

    strings: dict = field(default_factory=dict)
    nvtx: list = field(default_factory=list)
    calls: list = field(default_factory=list)
    ops: dict = field(default_factory=lambda: {k: [] for k in OP_TABLE})
    next_corr: int = 1
    metrics: list = field(default_factory=list)
    metric_names: dict = field(default_factory=dict)
    gpus: list = field(default_factory=list)
    session_start_ns: int | None = None  # the capture's start on the UTC clock
    threads: list = field(default_factory=list)  # ThreadNames rows

    def thread_name(self, name: str, tid: int = TID, pid: int = PID) -> None:
        self.threads.append((self.string(name), 20, global_tid(pid, tid)))

    def string(self, value: str) -> int:
        return self.strings.setdefault(value, len(self.strings) + 1)

    def range(self, name: str, start: int, end: int | None, tid: int = TID, pid: int = PID,
              registered: bool = True, event_type: int = 59) -> None:
        text, text_id = (None, self.string(name)) if registered else (name, None)
        self.nvtx.append((start, end, event_type, text, global_tid(pid, tid), None, text_id, 0))

    def mark(self, name: str, start: int, tid: int = TID, pid: int = PID,
             registered: bool = False) -> None:
        """An NVTX mark (an instant: no end), its message as text or a registered string."""
        text, text_id = (None, self.string(name)) if registered else (name, None)
        self.nvtx.append((start, None, NVTX_MARK, text, global_tid(pid, tid), None, text_id, 0))

    def sync_mark(self, where: str, start: int, tid: int = TID, **kw) -> None:
        """The mark gapscope's hook leaves after a synchronizing call: `FILE:LINE FUNCTION`."""
        self.mark(f"gapscope.sync {where}", start, tid=tid, **kw)

    def call(self, name: str, start: int, end: int, tid: int = TID, pid: int = PID,
             corr: int | None = None) -> int:
        if corr is None:
            corr, self.next_corr = self.next_corr, self.next_corr + 1
        self.calls.append((start, end, 1, global_tid(pid, tid), corr, self.string(name), 0))
        return corr

    def op(self, corr: int, start: int, end: int, kind: str = "kernel", name: str = "k",
           device: int = 0, stream: int = 7, pid: int = PID, graph: int = 1) -> None:
        """An op; for kind "graph", a whole execution of graph exec `graph`."""
        common = (start, end, device, 1, stream, corr, global_pid(pid))
        if kind == "graph":
            self.ops[kind].append((start, end, device, 1, None, stream, corr, global_pid(pid),
                                   100 + graph, graph))
        elif kind == "kernel":
            self.ops[kind].append(common + (self.string(name), self.string(name)))
        else:
            self.ops[kind].append(common + (0, 0))

    def launch(self, call_start: int, call_end: int, op_start: int, op_end: int,
               api: str = "cudaLaunchKernel_v7000", tid: int = TID, pid: int = PID,
               **op) -> int:
        """A launch call and the op it started; returns the correlation id."""
        corr = self.call(api, call_start, call_end, tid=tid, pid=pid)
        self.op(corr, op_start, op_end, pid=pid, **op)
        return corr

    def sample(self, timestamp: int, metric: str, value: int, device: int = 0) -> None:
        """One GPU-metrics sample: `value` of `metric` over the interval ending at `timestamp`."""
        type_id = METRIC_TYPE_ID | device
        metric_id = self.metric_names.setdefault((type_id, metric), len(self.metric_names))
        self.metrics.append((timestamp, type_id, metric_id, value))

    def write(self, path: Path, drop: tuple = (), keep_empty: tuple = ()) -> Path:
        con = sqlite3.connect(path)
        rows = {
            "META_DATA_EXPORT": [("EXPORT_SCHEMA_VERSION", "3.20.3")],
            "StringIds": [(i, v) for v, i in self.strings.items()],
            "NVTX_EVENTS": self.nvtx,
            "CUPTI_ACTIVITY_KIND_RUNTIME": self.calls,
        }
        if self.metrics:
            rows["GPU_METRICS"] = self.metrics
            rows["TARGET_INFO_GPU_METRICS"] = [
                (t, 0, "GH100", m, name) for (t, name), m in self.metric_names.items()]
        if self.gpus:
            rows["TARGET_INFO_GPU"] = self.gpus
        if self.threads:
            rows["ThreadNames"] = self.threads
        if self.session_start_ns is not None:
            rows["TARGET_INFO_SESSION_START_TIME"] = [(self.session_start_ns, "", "")]
        rows.update({OP_TABLE[k]: v for k, v in self.ops.items()
                     if v or OP_TABLE[k] in keep_empty})
        for table, values in rows.items():
            if table in drop:
                continue
            con.execute(f"CREATE TABLE {table} ({SCHEMA[table]})")
            if values:
                marks = ", ".join("?" * len(values[0]))
                con.executemany(f"INSERT INTO {table} VALUES ({marks})", values)
        con.commit()
        con.close()
        return path


def causes_trace() -> Synth:
    """One thread, one stream, two steps, a gap of each cause (worked out in the tests):

    time     0    10   20   30   40   50   60   70   80   90   100  110  120  130  140  150
    steps    [Step 1 ....................................][Step 2 .......................
    check                                  [55 ........ 80]
    calls         [k1]           [k2]     [sync 58-80]       [k3]  [k4]              [k6]
    ops                [k1]           [k2]                      [k3]     [k4] [k5] [k6]
    """
    t = Synth()
    t.range("Step 1", 0, 81)
    t.range("Step 2", 81, 200)
    t.range("Check Stop Condition", 55, 80)
    t.launch(10, 15, 20, 30, name="k1")
    t.launch(40, 45, 50, 60, name="k2")
    t.call("cudaStreamSynchronize_v3020", 58, 80)  # entered while k2 runs: it spans the drain
    t.launch(85, 90, 95, 105, name="k3")
    t.launch(100, 102, 110, 120, name="k4")
    t.op(999, 125, 128, name="k5")  # no launch call recorded
    t.launch(130, 132, 140, 150, name="k6")
    return t


SM = "SMs Active [Throughput %]"
READ = "DRAM Read Bandwidth [Throughput %]"
WRITE = "DRAM Write Bandwidth [Throughput %]"
GR = "GR Active [Throughput %]"


def metrics_only_trace() -> Synth:
    """Two NVTX steps, GPU metrics, no CUDA tables (write it with the API table dropped):

    time       0        50       100      150      200      250      300
    steps               [Step 1 ...........][Step 2 ..........................]
    SMs active  (99)      10 over (0,100]    50 over (100,200]  90 over (200,300]
    DRAM read 20% throughout, write 2, 4, 6; GR active 100, 100, 80; on an H200 (4.8 TB/s)
    """
    t = Synth()
    t.range("Step 1", 50, 150)
    t.range("Step 2", 150, 300)
    for ts, sm, read, write, gr in ((0, 99, 99, 99, 99), (100, 10, 20, 2, 100),
                                    (200, 50, 20, 4, 100), (300, 90, 20, 6, 80)):
        t.sample(ts, SM, sm)
        t.sample(ts, READ, read)
        t.sample(ts, WRITE, write)
        t.sample(ts, GR, gr)
    t.gpus.append((0, "NVIDIA H200", None))
    return t


ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def rank_traces(early_ns: int = 0) -> list[Synth]:
    """Two ranks of one tensor-parallel run, two steps (worked out in
    tests/test_analysis_ranks.py); each step a GEMM, then all-reduces (AR). On one time base as
    drawn; rank 1's capture started `early_ns` before rank 0's (at 10^9 on the UTC clock), so
    its export's times are early_ns larger:

    time      0    10   30   50   80 82  100  120  140 150 155 170 175  200
    rank 0    [Step 1 ...........]      [Step 2 .......................]
      ops          [gemm][AR 30-80]          [gemm][AR 120-150][AR 155-170]
    rank 1    [Step 1 ...........]      [Step 2 .......................]
      ops          [gemm 10-50][AR 50-82]    [gemm 100-140][AR][AR 150-175]
    """
    plans = [  # (step range, [(op start, op end, name)])
        [((0, 100), [(10, 30, "gemm"), (30, 80, ALL_REDUCE)]),
         ((100, 200), [(100, 120, "gemm"), (120, 150, ALL_REDUCE), (155, 170, ALL_REDUCE)])],
        [((0, 100), [(10, 50, "gemm"), (50, 82, ALL_REDUCE)]),
         ((100, 200), [(100, 140, "gemm"), (140, 150, ALL_REDUCE), (150, 175, ALL_REDUCE)])],
    ]
    traces = []
    for r, plan in enumerate(plans):
        t = Synth(session_start_ns=10**9 - r * early_ns)
        d = -r * early_ns
        for n, ((lo, hi), ops) in enumerate(plan, start=1):
            t.range(f"Step {n}", lo - d, hi - d)
            for j, (start, end, name) in enumerate(ops):
                t.launch(lo + j - d, lo + j + 1 - d, start - d, end - d, name=name)
        traces.append(t)
    return traces


def syncs_trace(scale: int = 1) -> Synth:
    """Two steps on one thread with three sync sites (worked out in tests/test_syncs.py); each
    sync drains the device inside the call, which returns 5 (8 for the device sync) later:

    time     0    15   40 45   55   70 75   85 95  110  115  130 135  145  160 168 175 190
    steps    [Step 1 ..........................][Step 2 .................................]
    syncs         [ss 15-45]  [memcpy 60-75]        [ss 115-135]  [dev 150-168]   [dev 250-260]
    marks               ^46 gen.py:41 ^76 gen.py:57         ^136 gen.py:41    ^169 other thread
    ops           [k1 20-40] [k2 55-70] [k3 85-95] [k4 110-130] [k5 145-160] [k6 175-190]

    `scale` multiplies every time (1000: the same in µs, for the text's figures).
    """
    t = Synth()
    x = scale
    t.range("Step 1", 0, 100 * x)
    t.range("Step 2", 100 * x, 200 * x)
    t.launch(10 * x, 12 * x, 20 * x, 40 * x, name="k1")
    t.call("cudaStreamSynchronize_v3020", 15 * x, 45 * x)
    t.sync_mark("/src/gen.py:41 decode", 46 * x)
    t.launch(50 * x, 52 * x, 55 * x, 70 * x, name="k2")
    t.call("cudaMemcpy_v3020", 60 * x, 75 * x)
    t.sync_mark("/src/gen.py:57 check", 76 * x, registered=True)
    t.launch(80 * x, 82 * x, 85 * x, 95 * x, name="k3")
    t.launch(105 * x, 107 * x, 110 * x, 130 * x, name="k4")
    t.call("cudaStreamSynchronize_v3020", 115 * x, 135 * x)
    t.sync_mark("/src/gen.py:41 decode", 136 * x)
    t.launch(140 * x, 142 * x, 145 * x, 160 * x, name="k5")
    # torch.cuda.synchronize(): torch's sync debug mode does not warn, so no mark.
    t.call("cudaDeviceSynchronize_v3020", 150 * x, 168 * x)
    t.sync_mark("/src/gen.py:99 elsewhere", 169 * x, tid=TID + 1)
    t.launch(170 * x, 172 * x, 175 * x, 190 * x, name="k6")
    t.call("cudaDeviceSynchronize_v3020", 250 * x, 260 * x)  # after the steps and the window
    return t


def host_trace(scale: int = 1) -> Synth:
    """One thread, three function steps (a model's forward), a warper and a loop of named code
    between them, a sync, and a pause before the last step (worked out in
    tests/test_analysis_host.py; `scale` multiplies every time):

    loop      [5 ...................................................... 100)
    forward      [10 ...................... 60)                               [110 ..... 160)
    warper                                        [70 ....... 90)                              ...
    calls           [15-20) [30-38) [50-52 cap)      [75-80)     [95 sync 105)  [115-120) [130-135)
    ops                [25-35) [40-50)                  [82-88)                 [125-140) [140-150)
    later: the warper 170-180, a pause, a forward 400-450 (a launch 405-410, its op 415-430)
    """
    t = Synth()
    x = scale
    forward = "pkg.model.LM.forward"
    t.range("pkg.gen.Loop.run", 5 * x, 100 * x)
    for lo, hi in ((10, 60), (110, 160), (400, 450)):
        t.range(forward, lo * x, hi * x)
    for lo, hi in ((70, 90), (170, 180)):
        t.range("pkg.gen.Warper.__call__", lo * x, hi * x)
    for c0, c1, o0, o1 in ((15, 20, 25, 35), (30, 38, 40, 50), (75, 80, 82, 88),
                           (115, 120, 125, 140), (130, 135, 140, 150), (405, 410, 415, 430)):
        t.launch(c0 * x, c1 * x, o0 * x, o1 * x)
    t.call("cudaStreamIsCapturing_v10000", 50 * x, 52 * x)
    t.call("cuKernelGetName", 12 * x, 13 * x)  # a per-launch lookup: not read
    t.call("cudaStreamSynchronize_v3020", 95 * x, 105 * x)
    return t


LLAMA_FORWARD = "transformers.models.llama.modeling_llama.LlamaForCausalLM.forward"
GENERATE = "transformers.generation.utils.GenerationMixin.generate"
CANDIDATES = "transformers.generation.candidate_generator.AssistedCandidateGenerator"


def speculative_trace(candidates: bool = True, generate: bool = True, marks: bool = True,
                      scale: int = 1) -> Synth:
    """generate(assistant_model=draft) on one thread: three verifications, the draft's forwards
    (d, one kernel each) in get_candidates, inside the draft's own generate(), then the target's
    forward (T, three kernels), then update_candidate_strategy and its `gapscope.accepted N`
    mark (worked out in tests/test_speculative.py). `candidates`: the get_candidates and
    update_candidate_strategy ranges; `generate`: the outer and the draft's generate() ranges
    (neither: host functions off); `scale` multiplies every time.

    time        10  20-30 40-50 60-70 100 110 ... 200 205 215  220 230-240 280 290 ... 380
    generate   [0 ........................................................................ 600)
    candidates  [10 ............... 100)                       [220 ....... 280)
    draft gen.    [12 ............ 98)                           [222 ..... 278)
    forwards       [d1]  [d2]  [d3]       [T1 110-200]               [d4]          [T2 290-380]
    update                                             [205-215)                         [385-395)
    marks                                                  ^210 accepted 3                  ^390 1
    then candidates [400-470), draft gen. [402-468), d5 410-420, d6 430-440, T3 480-570,
    update [575-585), mark 580 accepted 2.
    ops     each d: a launch call [+1, +3) of its start, its kernel [+4, +14);
            each T: launch calls at +10, +20, +30 (2 long), kernels of 20 back to back from +15
    """
    t = Synth()
    x = scale
    if generate:
        t.range(GENERATE, 0, 600 * x)
    verifications = (((10, 100), ((20, 30), (40, 50), (60, 70)), (110, 200), (205, 215), 210, 3),
                     ((220, 280), ((230, 240),), (290, 380), (385, 395), 390, 1),
                     ((400, 470), ((410, 420), (430, 440)), (480, 570), (575, 585), 580, 2))
    for (c0, c1), drafts, (t0, t1), (u0, u1), at, accepted in verifications:
        if candidates:
            t.range(f"{CANDIDATES}.get_candidates", c0 * x, c1 * x)
            t.range(f"{CANDIDATES}.update_candidate_strategy", u0 * x, u1 * x)
        if generate:
            t.range(GENERATE, (c0 + 2) * x, (c1 - 2) * x)
        for d0, d1 in drafts:
            t.range(LLAMA_FORWARD, d0 * x, d1 * x)
            t.launch((d0 + 1) * x, (d0 + 3) * x, (d0 + 4) * x, (d0 + 14) * x, name="draft_k")
        t.range(LLAMA_FORWARD, t0 * x, t1 * x)
        for j in range(3):
            t.launch((t0 + 10 * (j + 1)) * x, (t0 + 10 * (j + 1) + 2) * x,
                     (t0 + 15 + 20 * j) * x, (t0 + 35 + 20 * j) * x, name="target_k")
        if marks:
            t.mark(f"gapscope.accepted {accepted}", at * x)
    return t
