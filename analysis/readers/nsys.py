"""The nsys reader: an Nsight Systems SQLite export into the in-memory Trace (analysis.readers.trace).

The file is opened read-only (`mode=ro`): analysing a trace never changes its bytes.
Required tables are checked first, with the nsys option that would have recorded them.
"""

import itertools
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..readers.gpu_metrics import has_metrics, read_dram_peaks, read_gpu_metrics
from ..readers.trace import (
    BLOCKING_CALLS,
    GRAPH,
    GRAPH_LAUNCH_CALLS,
    KERNEL,
    MEMCPY,
    MEMSET,
    Trace,
    empty_calls,
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

OP_TABLES = {
    KERNEL: "CUPTI_ACTIVITY_KIND_KERNEL",
    MEMCPY: "CUPTI_ACTIVITY_KIND_MEMCPY",
    MEMSET: "CUPTI_ACTIVITY_KIND_MEMSET",
    # One row per graph execution: what nsys's default `--cuda-graph-trace=graph` records
    # instead of the graph's kernels, copies and sets.
    GRAPH: "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
}

# globalTid = pid << 24 | tid (plus a hardware tag in the top bits); globalPid keeps the upper part.
PID_MASK = np.int64(-(1 << 24))  # 0xFFFFFFFFFF000000 as a signed 64-bit mask

RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
OP_FRAME_COLUMNS = ["start", "end", "device", "stream", "corr", "name_id", "kind", "call_start",
                    "call_end", "tid"]

REQUIRED_TABLES = {
    "StringIds": "every nsys export has it: is this file a SQLite export of Nsight Systems?",
    "NVTX_EVENTS": "profile with `nsys profile --trace=cuda,nvtx` and mark the steps with NVTX",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "profile with `nsys profile --trace=cuda,nvtx`",
}

def _connect(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    try:
        with open(path, "rb") as f:
            header = f.read(16)
    except OSError as e:
        raise TraceError(f"{path}: cannot read it ({e.strerror})") from None
    if not header:
        raise TraceError(f"{path}: empty file; export a capture with `nsys export --type sqlite`")
    if header != b"SQLite format 3\x00":
        raise TraceError(
            f"{path}: not a SQLite file; export the .nsys-rep with `nsys export --type sqlite` "
            "(a torch.profiler trace is read from its .json or .json.gz)"
        )
    return sqlite3.connect(_uri(path), uri=True)


def _uri(path: Path) -> str:
    return f"{path.resolve().as_uri()}?mode=ro"


def _tables(con: sqlite3.Connection) -> set:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _columns(con: sqlite3.Connection, table: str) -> set:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


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


def empty_ops() -> pd.DataFrame:
    """The ops of a capture without a CUDA trace: none, with read_ops's columns."""
    return pd.DataFrame({c: pd.Series(dtype=np.int64) for c in OP_FRAME_COLUMNS})


SCHEMA_VERSION_SQL = "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'"


def _schema_version(con: sqlite3.Connection, tables: set) -> str:
    if "META_DATA_EXPORT" not in tables:
        return "unknown"
    row = con.execute(SCHEMA_VERSION_SQL).fetchone()
    return row[0] if row else "unknown"


# Lazy exports leave out empty tables, so the union is built from the tables that exist.
# `what` is the kernel's name id, or -kind for a memcpy or memset (names are ids >= 0); a graph
# execution's graph exec id comes with its rows of their own (GRAPH_SQL), few as they are.
# Device and stream (a CUPTI uint32) travel as one integer: every column costs about 0.1 s per
# million rows on the way from SQLite to Python.
OP_SELECT_SQL = """
SELECT start, end, (deviceId << 32) | streamId, IFNULL(correlationId, -1), {pid}, {what}
FROM {table}
"""
OP_COLUMNS = ["start", "end", "device_stream", "corr", "pid", "what"]
GRAPH_SQL = """
SELECT start, end, (deviceId << 32) | streamId, IFNULL(correlationId, -1), {pid}, {exec_id}
FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE
"""

# The API calls that launched ops: only those whose correlationId an op carries. Matching them
# to ops in numpy costs less than SQLite's join, which indexes the whole API table first.
LAUNCH_SQL = """
SELECT correlationId, start, end, IFNULL(globalTid, -1) FROM CUPTI_ACTIVITY_KIND_RUNTIME
WHERE correlationId IN ({corr})
"""
LAUNCH_COLUMNS = ["corr", "start", "end", "tid"]


def _int_columns(rows: list, columns: list) -> dict:
    """The rows' integer columns as numpy arrays (views of one row-major block)."""
    try:
        flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64,
                           count=len(rows) * len(columns))
    except (TypeError, ValueError) as e:
        # NULL where nsys always writes a value: damaged, or not written by nsys.
        raise sqlite3.DatabaseError(f"unexpected value in {', '.join(columns)}: {e}") from None
    data = flat.reshape(len(rows), len(columns))
    return {c: data[:, i] for i, c in enumerate(columns)}


def _int_frame(rows: list, columns: list) -> pd.DataFrame:
    return pd.DataFrame(_int_columns(rows, columns))


def match_launches(op_pid: np.ndarray, op_corr: np.ndarray, calls: dict) -> np.ndarray:
    """Row of `calls` that launched each op (-1: none): same correlationId, same process
    (correlation ids are per process). Ops without globalPid (older schemas) match on the id
    alone. Where two calls of a process share an id, the earlier one launched the op."""
    if len(calls["corr"]) == 0:
        return np.full(len(op_corr), -1, dtype=np.int64)
    call_pid = calls["tid"] & PID_MASK
    if (op_pid < 0).any():
        op_pid, call_pid = np.zeros_like(op_pid), np.zeros_like(call_pid)
    codes, _ = pd.factorize(np.concatenate([op_pid, call_pid]))
    # Correlation ids are uint32: one int64 key holds (process, id).
    key = (codes.astype(np.int64) << 32) | (np.concatenate([op_corr, calls["corr"]]) & 0xFFFFFFFF)
    op_key, call_key = key[:len(op_pid)], key[len(op_pid):]
    order = np.lexsort((calls["start"], call_key))
    sorted_key = call_key[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = sorted_key[1:] != sorted_key[:-1]
    sorted_key, order = sorted_key[first], order[first]
    pos = np.minimum(np.searchsorted(sorted_key, op_key), len(sorted_key) - 1)
    found = (sorted_key[pos] == op_key) & (op_corr >= 0)
    return np.where(found, order[pos], -1)


# From this many ops on, a second thread reads the ops while this one reads their launch calls,
# and reads them as text: SQLite formats a chunk of rows into one string in a single step, with
# the GIL released all along, and numpy parses the string. Rows fetched one at a time need the
# GIL back for each row's Python objects, and two threads fetching so run slower than one
# (ANALYSIS.md, Robustness). A thread, not a process: safe in a notebook or any threaded program.
PARALLEL_MIN_OPS = 200_000
TEXT_CHUNK_ROWS = 250_000
OP_COUNT_SQL = "SELECT count(*) FROM {table}"
ROWID_RANGE_SQL = "SELECT min(rowid), max(rowid) FROM {table}"
# OP_SELECT_SQL's columns, a row as text and a chunk of rows as one string. A row with a NULL
# drops out of group_concat (NULL || text is NULL): the count says so.
OPS_TEXT_SQL = """
SELECT count(*), group_concat(start || ',' || end || ',' || ((deviceId << 32) | streamId) || ','
    || IFNULL(correlationId, -1) || ',' || {pid} || ',' || {what}, ',')
FROM {table} WHERE rowid BETWEEN ? AND ?
"""


def _ops_as_text(uri: str, selects: list) -> dict:
    """OP_COLUMNS of the (table, pid, what) selects, in rowid order as OP_SELECT_SQL reads them,
    on a read-only connection of its own (what the second thread runs)."""
    con = sqlite3.connect(uri, uri=True)
    parts = []
    try:
        for table, pid, what in selects:
            sql = OPS_TEXT_SQL.format(table=table, pid=pid, what=what)
            lo, hi = con.execute(ROWID_RANGE_SQL.format(table=table)).fetchone()
            for first in range(lo, hi + 1, TEXT_CHUNK_ROWS) if lo is not None else ():
                count, text = con.execute(sql, (first, first + TEXT_CHUNK_ROWS - 1)).fetchone()
                try:
                    values = np.fromstring(text or "", dtype=np.int64, sep=",")
                except ValueError:
                    values = None
                if values is None or len(values) != count * len(OP_COLUMNS):
                    raise sqlite3.DatabaseError(f"unexpected value in {table}: NULL or not an "
                                                "integer where nsys writes one")
                parts.append(values)
    finally:
        con.close()
    data = (np.concatenate(parts) if parts else np.empty(0, np.int64)).reshape(-1, len(OP_COLUMNS))
    return {c: data[:, i] for i, c in enumerate(OP_COLUMNS)}


def _pid_column(con: sqlite3.Connection, table: str) -> str:
    return "IFNULL(globalPid, -1)" if "globalPid" in _columns(con, table) else "-1"


def _read_graphs(con: sqlite3.Connection) -> dict:
    """The graph executions, with `what` their graph exec id (the graph's id in older exports)."""
    columns = _columns(con, OP_TABLES[GRAPH])
    exec_id = next((c for c in ("graphExecId", "graphId") if c in columns), "-1")
    sql = GRAPH_SQL.format(pid=_pid_column(con, OP_TABLES[GRAPH]), exec_id=f"IFNULL({exec_id}, -1)")
    return _int_columns(con.execute(sql).fetchall(), OP_COLUMNS)


def read_ops(con: sqlite3.Connection, uri: str, kinds: list,
             parallel_min_ops: int = PARALLEL_MIN_OPS) -> pd.DataFrame:
    rows = [k for k in kinds if k != GRAPH]
    selects = [(OP_TABLES[k], _pid_column(con, OP_TABLES[k]), "shortName" if k == KERNEL else -k)
               for k in rows]
    ops_sql = " UNION ALL ".join(OP_SELECT_SQL.format(table=t, pid=p, what=w)
                                 for t, p, w in selects)
    corr_sql = " UNION ALL ".join(f"SELECT correlationId FROM {OP_TABLES[k]}" for k in kinds)
    launch_sql = LAUNCH_SQL.format(corr=corr_sql)
    count = sum(con.execute(OP_COUNT_SQL.format(table=OP_TABLES[k])).fetchone()[0] for k in rows)
    if count < parallel_min_ops:
        raw = _int_columns(con.execute(ops_sql).fetchall() if rows else [], OP_COLUMNS)
        calls = _int_columns(con.execute(launch_sql).fetchall(), LAUNCH_COLUMNS)
    else:
        with ThreadPoolExecutor(1, thread_name_prefix="gapscope-ops") as pool:
            pending = pool.submit(_ops_as_text, uri, selects)
            calls = _int_columns(con.execute(launch_sql).fetchall(), LAUNCH_COLUMNS)
            raw = pending.result()
    what = raw["what"]
    kind = np.where(what >= 0, KERNEL, -what)
    name_id = np.maximum(what, -1)
    if GRAPH in kinds:
        graphs = _read_graphs(con)
        raw = {c: np.concatenate([raw[c], graphs[c]]) for c in OP_COLUMNS}
        kind = np.concatenate([kind, np.full(len(graphs["what"]), GRAPH)])
        name_id = np.concatenate([name_id, graphs["what"]])
    launch = match_launches(raw["pid"], raw["corr"], calls)
    found = launch >= 0

    def call_column(name: str) -> np.ndarray:
        return np.where(found, calls[name][launch] if len(calls[name]) else -1, -1)

    device_stream = raw["device_stream"]
    # copy=False: the columns as they are, not stacked into one block (0.15 s a million ops).
    return pd.DataFrame({
        "start": raw["start"],
        "end": raw["end"],
        "device": device_stream >> 32,
        "stream": device_stream & 0xFFFFFFFF,
        "corr": raw["corr"],
        "name_id": name_id,
        "kind": kind,
        "call_start": call_column("start"),
        "call_end": call_column("end"),
        "tid": call_column("tid"),
    }, copy=False)


def call_name_ids(strings: dict, names: frozenset) -> dict:
    """StringIds of the API calls named (after strip_api_suffix), with their clean names; the
    API table is then filtered inside SQLite instead of being read whole."""
    return {i: n for i, v in strings.items() if (n := strip_api_suffix(v)) in names}


def blocking_name_ids(strings: dict) -> dict:
    return call_name_ids(strings, BLOCKING_CALLS)


# The blocking calls and the graph launch calls in one pass over the API table.
CALLS_SQL = """
SELECT start, end, IFNULL(globalTid, -1), IFNULL(correlationId, -1), nameId
FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN ({ids})
"""


def read_calls(con: sqlite3.Connection, strings: dict) -> tuple:
    """(blocking calls: start, end, tid, name; graph launch calls: start, end, tid, corr)."""
    blocking = blocking_name_ids(strings)
    launches = call_name_ids(strings, GRAPH_LAUNCH_CALLS)
    sql = CALLS_SQL.format(ids=", ".join(str(i) for i in blocking | launches) or "NULL")
    calls = _int_frame(con.execute(sql).fetchall(), ["start", "end", "tid", "corr", "name_id"])
    is_blocking = calls["name_id"].isin(list(blocking)).to_numpy()
    block = calls[is_blocking].reset_index(drop=True)
    block["name"] = block["name_id"].map(blocking).astype(object)
    graph = calls[~is_blocking].reset_index(drop=True)
    return (block[["start", "end", "tid", "name"]],
            graph[["start", "end", "tid", "corr"]])


# The name is `text`, or the registered string through `textId` (the `nvtx` package registers).
RANGES_SQL = """
SELECT e.start, e.end, IFNULL(e.globalTid, -1), {name}
FROM NVTX_EVENTS AS e {join}
WHERE e.eventType IN ({types}) AND e.end IS NOT NULL
"""


def read_ranges(con: sqlite3.Connection) -> pd.DataFrame:
    has_text_id = "textId" in _columns(con, "NVTX_EVENTS")
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


def read_marks(con: sqlite3.Connection) -> pd.DataFrame:
    """The NVTX marks: start, tid, name ("" where a mark has no message)."""
    has_text_id = "textId" in _columns(con, "NVTX_EVENTS")
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
        strings = read_strings(con)
        if RUNTIME_TABLE in tables:
            blocking, graph_launches = read_calls(con, strings)
        else:  # GPU metrics without a CUDA trace
            blocking = pd.DataFrame({"start": [], "end": [], "tid": [], "name": []})
            graph_launches = empty_calls()
        metrics = read_gpu_metrics(con, tables)
        trace = Trace(
            path=path,
            schema_version=_schema_version(con, tables),
            ops=read_ops(con, _uri(path), kinds, parallel_min_ops) if kinds else empty_ops(),
            blocking=blocking,
            ranges=read_ranges(con),
            strings=strings,
            marks=read_marks(con),
            graph_launches=graph_launches,
            gpu_metrics=metrics,
            dram_peaks=read_dram_peaks(con, tables, sorted(metrics["device"].unique())),
            thread_names=read_thread_names(con, tables),
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
