"""The nsys reader: an Nsight Systems SQLite export into the in-memory Trace (readers/trace.py).

The file is opened read-only (`mode=ro`; `immutable=1` where its header reads as WAL mode, so
that no `-wal` or `-shm` file is made beside it: outputs.py): analysing a trace never
changes its bytes or its folder.
Required tables are checked first, with the nsys option that would have recorded them.
"""

import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..outputs import readonly_uri
from ..readers.compressed import plain
from ..readers.content import head, is_sqlite, not_a_capture
from ..readers.gpu_metrics import has_metrics, read_dram_peaks, read_gpu_metrics
from ..readers.nsys_ops import (
    OP_TABLES,
    PARALLEL_MIN_OPS,
    empty_ops,
    int_frame,
    read_ops,
    table_columns,
)
from ..readers.trace import (
    BLOCKING_CALLS,
    GRAPH_LAUNCH_CALLS,
    LAUNCH_CALLS,
    LOOKUP_CALLS,
    Trace,
    empty_api_calls,
    empty_calls,
    empty_marks,
    strip_api_suffix,
)

# Event types of NVTX_EVENTS that are ranges (the same four nsys's own projection report reads).
NVTX_PUSHPOP = 59
NVTX_STARTEND = 60
NVTXT_PUSHPOP = 70
NVTXT_STARTEND = 71
RANGE_EVENT_TYPES = (NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND)
# An instant event (nvtxMark): NvtxMark in nsys's schema reference.
NVTX_MARK = 34


RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"

# NVTX_EVENTS is not required: an un-annotated program profiled with `--trace=cuda` (or with
# nvtx traced and none emitted) has no such table, and its steps are inferred from the trace.
NVTX_TABLE = "NVTX_EVENTS"
REQUIRED_TABLES = {
    "StringIds": "every nsys export has it: is this file a SQLite export of Nsight Systems?",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "profile with `nsys profile --trace=cuda,nvtx`",
}

def _connect(path: Path) -> sqlite3.Connection:
    """A read-only connection to the export at path (compressed or not: readers.compressed)."""
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    try:
        kind, content = head(path)
    except OSError as e:
        raise TraceError(f"{path}: cannot read it ({e.strerror})") from None
    # A stream damaged from its first bytes: decompressing it says so (readers.compressed).
    if not is_sqlite(content) and not (kind and content is None):
        raise TraceError(f"{path}: {not_a_capture(path, kind, content)}")
    return sqlite3.connect(_uri(plain(path)), uri=True)


def _uri(path: Path) -> str:
    """The read-only URI of the export's plain copy (the file itself where not compressed)."""
    return readonly_uri(plain(path))


def _tables(con: sqlite3.Connection) -> set:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}



def check_tables(path: Path, tables: set) -> list:
    """The op tables present; raises naming the first missing required table. A capture of GPU
    metrics without a CUDA trace (`--trace=nvtx --gpu-metrics-devices=N`) has no op tables and
    no API table: it is valid, for per-step metrics only."""
    if "StringIds" not in tables:
        raise TraceError(
            f"{path}: not an Nsight Systems export (no StringIds table); "
            "export a capture with `nsys export --type sqlite`"
        )
    kinds = [k for k, t in OP_TABLES.items() if t in tables]
    metrics_only = not kinds and has_metrics(tables)
    for table, fix in REQUIRED_TABLES.items():
        if table not in tables and not (metrics_only and table == RUNTIME_TABLE):
            raise TraceError(f"{path}: no {table} table: {fix}")
    if not kinds and not metrics_only:
        raise TraceError(
            f"{path}: no GPU operations (no CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET or "
            "_GRAPH_TRACE table): "
            "profile with `nsys profile --trace=cuda` and put the GPU work inside the capture range"
        )
    return kinds



# A kernel launch call: the runtime's and the driver's, any version suffix.
LAUNCH_CALL_SQL = f"""SELECT 1 FROM {RUNTIME_TABLE} AS r JOIN StringIds AS s ON s.id = r.nameId
WHERE s.value LIKE 'cudaLaunchKernel%' OR s.value LIKE 'cuLaunchKernel%' LIMIT 1"""


def check_kernels(con: sqlite3.Connection, path: Path, tables: set) -> None:
    """Raises where the export has kernel launch calls but no kernel table (nor graph
    executions): an export cut short, or a table dropped; its GPU busy time would be its copies
    alone."""
    if ("CUPTI_ACTIVITY_KIND_KERNEL" in tables or "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in tables
            or RUNTIME_TABLE not in tables):
        return
    if con.execute(LAUNCH_CALL_SQL).fetchone():
        raise TraceError(f"{path}: kernel launch calls but no CUPTI_ACTIVITY_KIND_KERNEL table: "
                         "no kernel ran (the launches failed, or were captured into a graph never "
                         "replayed), or the export is incomplete: export the .nsys-rep again "
                         "with `nsys export --type sqlite`")


SCHEMA_VERSION_SQL = "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'"


def _schema_version(con: sqlite3.Connection, tables: set) -> str:
    if "META_DATA_EXPORT" not in tables:
        return "unknown"
    row = con.execute(SCHEMA_VERSION_SQL).fetchone()
    return row[0] if row else "unknown"



def call_name_ids(strings: dict, names: frozenset) -> dict:
    """StringIds of the API calls named (after strip_api_suffix), with their clean names; the
    API table is then filtered inside SQLite instead of being read whole."""
    return {i: n for i, v in strings.items() if (n := strip_api_suffix(v)) in names}


def blocking_name_ids(strings: dict) -> dict:
    return call_name_ids(strings, BLOCKING_CALLS)


# The blocking calls, the graph launch calls and the other API calls (readers/trace.py: not
# launching ops, not per-launch lookups) in one pass over the API table, filtered by name inside
# SQLite: in an eager capture a few a step, where the launches are hundreds.
CALLS_SQL = """
SELECT start, end, IFNULL(globalTid, -1), IFNULL(correlationId, -1), nameId
FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN ({ids})
"""
# A CUDA runtime or driver call's name, as StringIds holds it (`cudaStreamIsCapturing_v10000`,
# `cuLaunchKernel`): the strings the API table's names can be, kernels' and ranges' aside. An
# IN list of them filters faster inside SQLite than a NOT IN list of the launches.
API_NAME = re.compile(r"^cu(?:da)?[A-Z]\w*$")


def read_calls(con: sqlite3.Connection, strings: dict) -> tuple:
    """(blocking calls: start, end, tid, name; graph launch calls: start, end, tid, corr; the
    other API calls: start, end, tid)."""
    blocking = blocking_name_ids(strings)
    launches = call_name_ids(strings, GRAPH_LAUNCH_CALLS)
    skipped = set(call_name_ids(strings, LAUNCH_CALLS | LOOKUP_CALLS))
    wanted = [i for i, v in strings.items() if i not in skipped and API_NAME.match(v)]
    sql = CALLS_SQL.format(ids=", ".join(str(i) for i in wanted) or "NULL")
    calls = int_frame(con.execute(sql).fetchall(), ["start", "end", "tid", "corr", "name_id"])
    name_id = calls["name_id"]
    is_blocking = name_id.isin(list(blocking)).to_numpy()
    is_graph = name_id.isin(list(launches)).to_numpy()
    block = calls[is_blocking].reset_index(drop=True)
    block["name"] = block["name_id"].map(blocking).astype(object)
    graph = calls[is_graph].reset_index(drop=True)
    other = calls[~is_blocking & ~is_graph].reset_index(drop=True)
    return (block[["start", "end", "tid", "name"]], graph[["start", "end", "tid", "corr"]],
            other[["start", "end", "tid"]] if len(other) else empty_api_calls())


# The name is `text`, or the registered string through `textId` (the `nvtx` package registers).
RANGES_SQL = """
SELECT e.start, e.end, IFNULL(e.globalTid, -1), {name}
FROM NVTX_EVENTS AS e {join}
WHERE e.eventType IN ({types}) AND e.end IS NOT NULL
"""


def read_ranges(con: sqlite3.Connection, tables: set) -> pd.DataFrame:
    """The closed NVTX ranges: start, end, tid, name; none where the export has no NVTX table."""
    if NVTX_TABLE not in tables:
        return pd.DataFrame({"start": pd.Series(dtype=np.int64), "end": pd.Series(dtype=np.int64),
                             "tid": pd.Series(dtype=np.int64), "name": pd.Series(dtype=object)})
    has_text_id = "textId" in table_columns(con, "NVTX_EVENTS")
    sql = RANGES_SQL.format(
        name="COALESCE(e.text, s.value)" if has_text_id else "e.text",
        join="LEFT JOIN StringIds AS s ON s.id = e.textId" if has_text_id else "",
        types=", ".join(str(t) for t in RANGE_EVENT_TYPES),
    )
    rows = con.execute(sql).fetchall()
    ranges = pd.DataFrame(rows, columns=["start", "end", "tid", "name"])
    ranges[["start", "end", "tid"]] = ranges[["start", "end", "tid"]].astype(np.int64)
    ranges["name"] = ranges["name"].fillna("").astype(object)
    return ranges


# The OS thread names nsys recorded (one row a thread; several threads may share a name).
THREAD_NAMES_SQL = """
SELECT t.globalTid, s.value FROM ThreadNames AS t JOIN StringIds AS s ON s.id = t.nameId
WHERE t.globalTid IS NOT NULL
"""


def read_thread_names(con: sqlite3.Connection, tables: set) -> dict:
    """globalTid -> thread name; empty where the export has no ThreadNames table."""
    if "ThreadNames" not in tables:
        return {}
    return {int(tid): str(name) for tid, name in con.execute(THREAD_NAMES_SQL).fetchall()}


# Marks, named as ranges are (text, or the registered string through textId).
MARKS_SQL = """
SELECT e.start, IFNULL(e.globalTid, -1), {name}
FROM NVTX_EVENTS AS e {join}
WHERE e.eventType = {mark}
"""


def read_marks(con: sqlite3.Connection, tables: set) -> pd.DataFrame:
    """The NVTX marks: start, tid, name ("" where a mark has no message); none without NVTX."""
    if NVTX_TABLE not in tables:
        return empty_marks()
    has_text_id = "textId" in table_columns(con, "NVTX_EVENTS")
    sql = MARKS_SQL.format(
        name="COALESCE(e.text, s.value)" if has_text_id else "e.text",
        join="LEFT JOIN StringIds AS s ON s.id = e.textId" if has_text_id else "",
        mark=NVTX_MARK,
    )
    marks = pd.DataFrame(con.execute(sql).fetchall(), columns=["start", "tid", "name"])
    marks[["start", "tid"]] = marks[["start", "tid"]].astype(np.int64)
    marks["name"] = marks["name"].fillna("").astype(object)
    return marks


def read_strings(con: sqlite3.Connection) -> dict:
    return dict(con.execute("SELECT id, value FROM StringIds").fetchall())


def load_trace(path, parallel_min_ops: int = PARALLEL_MIN_OPS) -> Trace:
    """Reads one export. Raises TraceError, one line, for anything it cannot use."""
    path = Path(path)
    con = _connect(path)
    try:
        tables = _tables(con)
        kinds = check_tables(path, tables)
        check_kernels(con, path, tables)
        strings = read_strings(con)
        if RUNTIME_TABLE in tables:
            blocking, graph_launches, api_calls = read_calls(con, strings)
        else:  # GPU metrics without a CUDA trace
            blocking = pd.DataFrame({"start": [], "end": [], "tid": [], "name": []})
            graph_launches, api_calls = empty_calls(), empty_api_calls()
        metrics = read_gpu_metrics(con, tables)
        trace = Trace(
            path=path,
            schema_version=_schema_version(con, tables),
            ops=read_ops(con, _uri(path), kinds, parallel_min_ops, strings) if kinds
            else empty_ops(),
            blocking=blocking,
            ranges=read_ranges(con, tables),
            strings=strings,
            marks=read_marks(con, tables),
            graph_launches=graph_launches,
            gpu_metrics=metrics,
            dram_peaks=read_dram_peaks(con, tables, sorted(metrics["device"].unique())),
            thread_names=read_thread_names(con, tables),
            api_calls=api_calls,
        )
    except sqlite3.DatabaseError as e:
        raise TraceError(
            f"{path}: unreadable SQLite ({e}): the file is damaged or truncated; export it again"
        ) from None
    finally:
        con.close()
    if trace.ops.empty and trace.gpu_metrics.empty:
        raise TraceError(
            f"{path}: the export holds no GPU operations; profile with `nsys profile --trace=cuda` "
            "and put the GPU work inside the capture range"
        )
    return trace


# Kernels' full (demangled) names, for classing them: a short name can be as bare as `kernel`
# (cuBLAS's batched GEMV) where the full one says `gemvx::kernel<...>`.
FULL_NAMES_SQL = """
SELECT s.value, k.start, IFNULL(k.correlationId, -1)
FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN StringIds AS s ON s.id = k.demangledName
"""


def read_full_names(path) -> pd.DataFrame:
    """One row a kernel: full_name, start, corr (the pair identifies the op in Trace.ops)."""
    con = _connect(Path(path))
    try:
        if "CUPTI_ACTIVITY_KIND_KERNEL" not in _tables(con):
            return pd.DataFrame({"full_name": [], "start": [], "corr": []})
        rows = con.execute(FULL_NAMES_SQL).fetchall()
    finally:
        con.close()
    return pd.DataFrame(rows, columns=["full_name", "start", "corr"])


def read_session_start_ns(path) -> int | None:
    """The capture's start on the host's UTC clock, ns (TARGET_INFO_SESSION_START_TIME's
    utcEpochNs): the export's times count from it. None in an export without that table."""
    con = _connect(Path(path))
    try:
        if "TARGET_INFO_SESSION_START_TIME" not in _tables(con):
            return None
        row = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    finally:
        con.close()
    return int(row[0]) if row and row[0] is not None else None
