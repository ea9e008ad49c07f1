"""The Kineto reader: a torch.profiler Chrome trace (`prof.export_chrome_trace`, `.json`,
`.json.gz` or `.json.xz`) into the in-memory Trace (analysis.readers.trace), the same one the
nsys reader makes.

    {"schemaVersion": 1, "baseTimeNanoseconds": ..., "traceEvents": [
      {"ph": "X", "cat": "kernel", "pid": DEVICE, "tid": STREAM, "ts": µs, "dur": µs,
       "args": {"device": 0, "stream": 7, "correlation": 135071, ...}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": TID,
       "ts": µs, "dur": µs, "args": {"correlation": 135071, ...}},
      {"ph": "X", "cat": "user_annotation", "name": "Step 31", "pid": PID, "tid": TID, ...},
      {"ph": "s" | "f", "cat": "ac2g", "id": 135071, "pid": ..., "tid": ..., "ts": µs}, ...]}

Times are µs written with three decimals (whole ns; older Kineto wrote whole µs), which a
float64 cannot always hold (absolute µs since 1970 have 19 digits): the numbers are read as the
strings they are written as and turned into ns exactly. The file is only read.
"""

import gzip
import itertools
import json
import lzma
import re
import zlib
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..readers.nsys_ops import match_launches
from ..readers.trace import (
    BLOCKING_CALLS,
    GRAPH_LAUNCH_CALLS,
    KERNEL,
    LAUNCH_CALLS,
    LOOKUP_CALLS,
    MEMCPY,
    MEMSET,
    Trace,
    strip_api_suffix,
)

# Categories of GPU ops; the capitalised ones are older Kineto's names (HTA reads both).
OP_CATEGORIES = {"kernel": KERNEL, "Kernel": KERNEL, "gpu_memcpy": MEMCPY, "Memcpy": MEMCPY,
                 "gpu_memset": MEMSET, "Memset": MEMSET}
# Host API calls: runtime, and the driver's cuLaunchKernel (Triton's launches).
CALL_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "Runtime"})
# record_function ranges and prof.step()'s ProfilerStep#N. Not gpu_user_annotation: those are
# the same names drawn again on the GPU's rows, over the kernels they hold.
RANGE_CATEGORIES = frozenset({"user_annotation"})
FLOW_CATEGORY = "ac2g"
KINETO_THREAD_NAME = re.compile(r"^thread \d+ \((.*)\)$")

# A thread is (pid << 24) | tid, as nsys's globalTid: Linux ids stay below 2**22.
TID_BITS = 24
NO_GPU_FIX = ("profile with torch.profiler.profile(activities=[ProfilerActivity.CPU, "
              "ProfilerActivity.CUDA]) and run the GPU work inside it")


def ns(value) -> int:
    """A Kineto time (µs) in ns, exactly: a float literal arrives as its string, an int one
    (whole µs, older Kineto) as an int."""
    if type(value) is str:
        # Kineto's own "%d.%03d": dropping the point gives ns (the fast path: ~600k a trace).
        if value[-4:-3] == ".":
            try:
                return int(value.replace(".", "", 1))
            except ValueError:
                pass
        try:
            return int((Decimal(value) * 1000).to_integral_value(ROUND_HALF_EVEN))
        except InvalidOperation:
            raise ValueError(f"not a number: {value!r}") from None
    if type(value) is int:
        return value * 1000
    raise ValueError(f"not a time: {value!r}")


def short_kernel_name(signature: str) -> str:
    """A kernel's short name from the demangled signature torch.profiler records, as nsys's
    `shortName` gives it: the function's own name, without its return type, namespaces,
    template arguments or parameters (`void at::native::reduce_kernel<512, 1, ...>(...)` is
    `reduce_kernel`, `void cutlass::Kernel2<...>(...)` is `Kernel2`), so that the `next_op` of
    both readers join. A name with none of those (Triton's, cuBLAS's) stays as it is."""
    s = signature.strip()
    if s.endswith(")"):  # the parameter list: the last balanced (...)
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(s[i], 0)
            if depth == 0:
                s = s[:i]
                break
    kept, depth = [], 0
    for c in s:  # template arguments, nested ones too
        if c == "<":
            depth += 1
        elif c == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            kept.append(c)
    name = "".join(kept).strip().split(" ")[-1].rsplit("::", 1)[-1]
    return name or signature


def global_tid(pid: int, tid: int) -> int:
    return (int(pid) << TID_BITS) | (int(tid) & ((1 << TID_BITS) - 1))


def read_document(path: Path) -> dict:
    """The trace's JSON, gzipped or not, with float literals kept as strings (see ns)."""
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    try:
        with open(path, "rb") as f:
            raw = f.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        elif raw[:6] == b"\xfd7zXZ\x00":
            raw = lzma.decompress(raw)
    except (EOFError, gzip.BadGzipFile, zlib.error, lzma.LZMAError) as e:
        kind = "xz" if isinstance(e, lzma.LZMAError) else "gzip"
        raise TraceError(f"{path}: damaged or truncated {kind} ({e}); export the trace again"
                         ) from None
    except OSError as e:
        raise TraceError(f"{path}: cannot read it ({e.strerror or e})") from None
    try:
        doc = json.loads(raw, parse_float=str)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TraceError(
            f"{path}: not valid JSON ({e}): truncated? export it again with "
            "prof.export_chrome_trace") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(
            f"{path}: not a torch.profiler trace (no traceEvents list); export one with "
            "prof.export_chrome_trace(PATH)")
    return doc


def _columns(rows: list, names: list) -> dict:
    # fromiter over the flattened rows: several times faster than np.array on tuples.
    flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64,
                       count=len(rows) * len(names))
    data = flat.reshape(len(rows), len(names))
    return {n: data[:, i] for i, n in enumerate(names)}


def thread_name(name) -> str:
    """Kineto's `thread 1051 (python3)` as the OS thread's name (`python3`), as nsys records it."""
    m = KINETO_THREAD_NAME.match(str(name))
    return m.group(1) if m else str(name)


def collect(events: list) -> tuple:
    """One pass over the events: GPU ops, API calls, ranges, ac2g flow ends, as rows, and the
    threads' names."""
    ops, op_names, calls, call_names, ranges, flows, names = [], [], [], [], [], {}, {}
    for e in events:
        if not isinstance(e, dict):
            continue
        cat = e.get("cat")
        ph = e.get("ph")
        if ph == "X":
            kind = OP_CATEGORIES.get(cat)
            if kind is not None:
                args = e.get("args") or {}
                start = ns(e["ts"])
                ops.append((start, start + ns(e["dur"]), int(args.get("device", e["pid"])),
                            int(args.get("stream", e["tid"])), int(args.get("correlation", -1)),
                            kind, int(e["pid"]), int(e["tid"])))
                op_names.append(e.get("name", "?"))
            elif cat in CALL_CATEGORIES:
                args = e.get("args") or {}
                start = ns(e["ts"])
                tid = global_tid(e["pid"], e["tid"])
                calls.append((start, start + ns(e["dur"]), tid, int(args.get("correlation", -1))))
                call_names.append(strip_api_suffix(e.get("name", "")))
            elif cat in RANGE_CATEGORIES:
                start = ns(e["ts"])
                ranges.append((start, start + ns(e["dur"]), global_tid(e["pid"], e["tid"]),
                               str(e.get("name", ""))))
        elif cat == FLOW_CATEGORY and ph in ("s", "f"):
            # Where an op or call lacks args.correlation, the flow at its (pid, tid, ts) has it.
            flows[(ph, e.get("pid"), e.get("tid"), ns(e["ts"]))] = int(e["id"])
        elif ph == "M" and e.get("name") == "thread_name" and type(e.get("tid")) is int:
            names[global_tid(e["pid"], e["tid"])] = thread_name((e.get("args") or {}).get("name"))
    return ops, op_names, calls, call_names, ranges, flows, names


def build(path: Path, doc: dict) -> Trace:
    ops, op_names, calls, call_names, ranges, flows, names = collect(doc["traceEvents"])
    if not ops:
        raise TraceError(f"{path}: no GPU events (kernel, gpu_memcpy, gpu_memset): {NO_GPU_FIX}")
    if flows:
        # Ops: the flow's end at (device row pid, stream row tid, ts); calls: its start.
        ops = [r if r[4] >= 0 else (*r[:4], flows.get(("f", r[6], r[7], r[0]), -1), *r[5:])
               for r in ops]
        calls = [r if r[3] >= 0 else (*r[:3], flows.get(("s", r[2] >> TID_BITS,
                                                          r[2] & ((1 << TID_BITS) - 1), r[0]),
                                                         -1))
                 for r in calls]
    op = _columns(ops, ["start", "end", "device", "stream", "corr", "kind", "pid", "tid"])
    call = _columns(calls, ["start", "end", "tid", "corr"]) if calls else {
        c: np.empty(0, np.int64) for c in ("start", "end", "tid", "corr")}
    # Correlation ids are the profiled process's own (one process a trace): ops carry no pid.
    launched = call["corr"] >= 0
    launch_calls = {c: v[launched] for c, v in call.items()}
    row = match_launches(np.full(len(ops), -1, np.int64), op["corr"], launch_calls)
    found = row >= 0

    def call_column(name: str) -> np.ndarray:
        values = launch_calls[name]
        return np.where(found, values[row] if len(values) else -1, -1)

    codes, signatures = pd.factorize(pd.Series(op_names, dtype=object))
    # Short kernel names, as nsys's: each distinct signature shortened once, then names that
    # shorten alike share one id.
    short_codes, kernel_names = pd.factorize(
        pd.Series([short_kernel_name(n) for n in signatures], dtype=object))
    codes = short_codes[codes] if len(short_codes) else codes
    kernel = op["kind"] == KERNEL
    ops_frame = pd.DataFrame({
        "start": op["start"], "end": op["end"], "device": op["device"], "stream": op["stream"],
        "corr": op["corr"], "name_id": np.where(kernel, codes, -1).astype(np.int64),
        "kind": op["kind"], "call_start": call_column("start"), "call_end": call_column("end"),
        "tid": call_column("tid"),
    })
    blocking = [(*c[:3], n) for c, n in zip(calls, call_names, strict=True) if n in BLOCKING_CALLS]
    # The other API calls, as the nsys reader takes them (readers/trace.py, Trace.api_calls).
    named = BLOCKING_CALLS | LAUNCH_CALLS | LOOKUP_CALLS | GRAPH_LAUNCH_CALLS
    api = [(*c[:3], n) for c, n in zip(calls, call_names, strict=True) if n not in named]
    schema = str(doc.get("schemaVersion", "unknown"))
    if not ((op["start"] % 1000).any() or (op["end"] % 1000).any()):
        # Older Kineto: the report says that each gap is known to about a µs (METRICS.md).
        schema += ", all times in whole µs"
    return Trace(
        path=path,
        schema_version=schema,
        ops=ops_frame,
        blocking=_frame(blocking, ["start", "end", "tid", "name"]),
        ranges=_frame(ranges, ["start", "end", "tid", "name"]),
        strings=dict(enumerate(kernel_names)),
        source="kineto",
        thread_names=names,
        api_calls=_frame(api, ["start", "end", "tid", "name"])[["start", "end", "tid"]],
    )


def _frame(rows: list, columns: list) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=columns)
    frame[columns[:3]] = frame[columns[:3]].astype(np.int64)
    frame[columns[3]] = frame[columns[3]].astype(object)
    return frame


def load_trace(path) -> Trace:
    """Reads one torch.profiler trace. Raises TraceError, one line, for anything it cannot use."""
    path = Path(path)
    doc = read_document(path)
    try:
        return build(path, doc)
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        raise TraceError(
            f"{path}: a malformed trace event ({type(e).__name__}: {e}); is this a "
            "torch.profiler trace?") from None
