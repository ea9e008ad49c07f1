"""The GPU ops of an nsys export (kernels, copies, sets, graph executions) and the API calls
that launched them: one frame of ops with their launch call's start, end and thread. Big exports
are read as text, the ops in a second thread while this one reads their launch calls
(PARALLEL_MIN_OPS); the rest of the export (ranges, calls, marks, names) is readers/nsys.py's.
"""

import itertools
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from ..readers.trace import GRAPH, KERNEL, MEMCPY, MEMSET, strip_api_suffix

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

OP_FRAME_COLUMNS = ["start", "end", "device", "stream", "corr", "name_id", "kind", "call_start",
                    "call_end", "tid"]


def empty_ops() -> pd.DataFrame:
    """The ops of a capture without a CUDA trace: none, with read_ops's columns."""
    return pd.DataFrame({c: pd.Series(dtype=np.int64) for c in OP_FRAME_COLUMNS})


def table_columns(con: sqlite3.Connection, table: str) -> set:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


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

# API calls that launch no GPU op: lookups beside each launch (cuKernelGetName before every
# cudaLaunchKernel on torch 2.11: as many rows as the launches), queries of the device or the
# stream. Never an op's launch call, so they are not read as one (names after strip_api_suffix).
NO_OP_CALLS = frozenset({
    "cuKernelGetName", "cuKernelGetFunction", "cuKernelGetAttribute", "cuKernelSetAttribute",
    "cuFuncGetAttribute", "cuFuncSetAttribute", "cuFuncGetName", "cuGetProcAddress",
    "cuLibraryGetKernel", "cuModuleGetFunction", "cuCtxGetCurrent", "cuCtxGetDevice",
    "cudaGetLastError", "cudaPeekAtLastError", "cudaStreamIsCapturing",
    "cudaStreamGetCaptureInfo", "cudaGetDevice", "cudaGetDeviceCount", "cudaDeviceGetAttribute",
    "cudaFuncGetAttributes", "cudaPointerGetAttributes", "cudaEventQuery", "cudaStreamQuery",
})

# The API calls that launched ops: those whose correlationId an op carries (small exports: SQLite
# indexes the ops' ids and looks each call up), or every call that can launch one (big exports,
# as text; not indexing 1M ids saves most of a second). Matched to the ops in numpy either way.
LAUNCH_SQL = """
SELECT correlationId, start, end, IFNULL(globalTid, -1) FROM CUPTI_ACTIVITY_KIND_RUNTIME
WHERE correlationId IN ({corr}) AND nameId NOT IN ({no_op})
"""
LAUNCH_COLUMNS = ["corr", "start", "end", "tid"]
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"


def no_op_name_ids(strings: dict) -> str:
    """The StringIds of NO_OP_CALLS, as SQL's list for NOT IN: "-1" where there are none (no
    string has that id; `x NOT IN (NULL)` would be true of no row)."""
    return ", ".join(str(i) for i, v in strings.items()
                     if strip_api_suffix(v) in NO_OP_CALLS) or "-1"


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


def int_frame(rows: list, columns: list) -> pd.DataFrame:
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
# and both read them as text: SQLite formats a chunk of rows, a column at a time, into one string
# a column (group_concat), with the GIL released all along, and numpy parses each string; a
# column at a time takes less than half of what one string of whole rows does. Rows fetched one
# at a time need the GIL back for each row's Python objects, and two threads fetching so run
# slower than one (ANALYSIS.md, Robustness). A thread, not a process: safe in a notebook or any
# threaded program.
PARALLEL_MIN_OPS = 200_000
TEXT_CHUNK_ROWS = 250_000
OP_COUNT_SQL = "SELECT count(*) FROM {table}"
ROWID_RANGE_SQL = "SELECT min(rowid), max(rowid) FROM {table}"
# OP_SELECT_SQL's columns of a chunk of rows, each column one string. A NULL drops out of
# group_concat: the count says so.
OPS_TEXT_EXPRS = ("start", "end", "(deviceId << 32) | streamId", "IFNULL(correlationId, -1)",
                  "{pid}", "{what}")
LAUNCH_TEXT_EXPRS = ("IFNULL(correlationId, -1)", "start", "end", "IFNULL(globalTid, -1)")
TEXT_SQL = "SELECT count(*), {columns} FROM {table} WHERE rowid BETWEEN ? AND ?{where}"


def text_sql(table: str, exprs: tuple, where: str = "") -> str:
    return TEXT_SQL.format(columns=", ".join(f"group_concat({e})" for e in exprs), table=table,
                           where=where)


def _text_chunks(con: sqlite3.Connection, table: str, sql: str, columns: list) -> list:
    """The integer columns of `sql` (text_sql: the count and each column as text, of the rows
    between two rowids) over the table in rowid order, chunk by chunk: SQLite formats them with
    the GIL released."""
    chunks = []
    lo, hi = con.execute(ROWID_RANGE_SQL.format(table=table)).fetchone()
    for first in range(lo, hi + 1, TEXT_CHUNK_ROWS) if lo is not None else ():
        count, *texts = con.execute(sql, (first, first + TEXT_CHUNK_ROWS - 1)).fetchone()
        try:
            values = [np.fromstring(text or "", dtype=np.int64, sep=",") for text in texts]
        except ValueError:
            values = None
        if values is None or any(len(v) != count for v in values):
            raise sqlite3.DatabaseError(f"unexpected value in {table}: NULL or not an "
                                        "integer where nsys writes one")
        chunks.append(dict(zip(columns, values, strict=True)))
    return chunks


def _columns(chunks: list, columns: list) -> dict:
    return {c: np.concatenate([chunk[c] for chunk in chunks]) if chunks
            else np.empty(0, np.int64) for c in columns}


def _ops_as_text(uri: str, selects: list) -> dict:
    """OP_COLUMNS of the (table, pid, what) selects, in rowid order as OP_SELECT_SQL reads them,
    on a read-only connection of its own (what the second thread runs)."""
    con = sqlite3.connect(uri, uri=True)
    try:
        chunks = [chunk for table, pid, what in selects
                  for chunk in _text_chunks(con, table, text_sql(table, tuple(
                      e.format(pid=pid, what=what) for e in OPS_TEXT_EXPRS)), OP_COLUMNS)]
    finally:
        con.close()
    return _columns(chunks, OP_COLUMNS)


def _launches_as_text(con: sqlite3.Connection, no_op: str) -> dict:
    """LAUNCH_COLUMNS of every API call that can launch an op (not NO_OP_CALLS)."""
    sql = text_sql(RUNTIME_TABLE, LAUNCH_TEXT_EXPRS, f" AND nameId NOT IN ({no_op})")
    return _columns(_text_chunks(con, RUNTIME_TABLE, sql, LAUNCH_COLUMNS), LAUNCH_COLUMNS)


def _pid_column(con: sqlite3.Connection, table: str) -> str:
    return "IFNULL(globalPid, -1)" if "globalPid" in table_columns(con, table) else "-1"


def _read_graphs(con: sqlite3.Connection) -> dict:
    """The graph executions, with `what` their graph exec id (the graph's id in older exports)."""
    columns = table_columns(con, OP_TABLES[GRAPH])
    exec_id = next((c for c in ("graphExecId", "graphId") if c in columns), "-1")
    sql = GRAPH_SQL.format(pid=_pid_column(con, OP_TABLES[GRAPH]), exec_id=f"IFNULL({exec_id}, -1)")
    return _int_columns(con.execute(sql).fetchall(), OP_COLUMNS)


def read_ops(con: sqlite3.Connection, uri: str, kinds: list,
             parallel_min_ops: int = PARALLEL_MIN_OPS, strings: dict | None = None) -> pd.DataFrame:
    """The ops frame (readers/trace.py's Trace.ops); `strings`, the export's StringIds (read
    here where not given), name the calls that launch nothing."""
    if strings is None:
        strings = dict(con.execute("SELECT id, value FROM StringIds").fetchall())
    no_op = no_op_name_ids(strings)
    rows = [k for k in kinds if k != GRAPH]
    selects = [(OP_TABLES[k], _pid_column(con, OP_TABLES[k]), "shortName" if k == KERNEL else -k)
               for k in rows]
    ops_sql = " UNION ALL ".join(OP_SELECT_SQL.format(table=t, pid=p, what=w)
                                 for t, p, w in selects)
    corr_sql = " UNION ALL ".join(f"SELECT correlationId FROM {OP_TABLES[k]}" for k in kinds)
    launch_sql = LAUNCH_SQL.format(corr=corr_sql, no_op=no_op)
    count = sum(con.execute(OP_COUNT_SQL.format(table=OP_TABLES[k])).fetchone()[0] for k in rows)
    if count < parallel_min_ops:
        raw = _int_columns(con.execute(ops_sql).fetchall() if rows else [], OP_COLUMNS)
        calls = _int_columns(con.execute(launch_sql).fetchall(), LAUNCH_COLUMNS)
    else:
        with ThreadPoolExecutor(1, thread_name_prefix="gapscope-ops") as pool:
            pending = pool.submit(_ops_as_text, uri, selects)
            calls = _launches_as_text(con, no_op)
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
