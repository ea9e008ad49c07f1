"""The nsys reader: an Nsight Systems SQLite export into the in-memory Trace (analysis.trace).

The file is opened read-only (`mode=ro`): analysing a trace never changes its bytes.
Required tables are checked first, with the nsys option that would have recorded them.
"""

import itertools
import multiprocessing
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.errors import TraceError
from analysis.trace import BLOCKING_CALLS, KERNEL, MEMCPY, MEMSET, Trace, strip_api_suffix

# Event types of NVTX_EVENTS that are ranges (the same four nsys's own projection report reads).
NVTX_PUSHPOP = 59
NVTX_STARTEND = 60
NVTXT_PUSHPOP = 70
NVTXT_STARTEND = 71
RANGE_EVENT_TYPES = (NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND)

OP_TABLES = {
    KERNEL: "CUPTI_ACTIVITY_KIND_KERNEL",
    MEMCPY: "CUPTI_ACTIVITY_KIND_MEMCPY",
    MEMSET: "CUPTI_ACTIVITY_KIND_MEMSET",
}

# globalTid = pid << 24 | tid (plus a hardware tag in the top bits); globalPid keeps the upper part.
PID_MASK = np.int64(-(1 << 24))  # 0xFFFFFFFFFF000000 as a signed 64-bit mask

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
    """The op tables present; raises naming the first missing required table."""
    if "StringIds" not in tables:
        raise TraceError(
            f"{path}: not an Nsight Systems export (no StringIds table); "
            "export a capture with `nsys export --type sqlite`"
        )
    for table, fix in REQUIRED_TABLES.items():
        if table not in tables:
            raise TraceError(f"{path}: no {table} table: {fix}")
    kinds = [k for k, t in OP_TABLES.items() if t in tables]
    if not kinds:
        raise TraceError(
            f"{path}: no GPU operations (no CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY or _MEMSET table): "
            "profile with `nsys profile --trace=cuda` and put the GPU work inside the capture range"
        )
    return kinds


SCHEMA_VERSION_SQL = "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'"


def _schema_version(con: sqlite3.Connection, tables: set) -> str:
    if "META_DATA_EXPORT" not in tables:
        return "unknown"
    row = con.execute(SCHEMA_VERSION_SQL).fetchone()
    return row[0] if row else "unknown"


# Lazy exports leave out empty tables, so the union is built from the tables that exist.
# `what` is the kernel's name id, or -kind for a memcpy or memset (names are ids >= 0).
# Device and stream (a CUPTI uint32) travel as one integer: every column costs about 0.1 s per
# million rows on the way from SQLite to Python.
OP_SELECT_SQL = """
SELECT start, end, (deviceId << 32) | streamId, IFNULL(correlationId, -1), {pid}, {what}
FROM {table}
"""
OP_COLUMNS = ["start", "end", "device_stream", "corr", "pid", "what"]

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


# From this many ops on, a forked process reads the ops while this one reads their launch calls:
# SQLite decoding rows is most of the load time, and so it runs on two cores.
PARALLEL_MIN_OPS = 200_000
OP_COUNT_SQL = "SELECT count(*) FROM {table}"


def _query_columns(uri: str, sql: str, columns: list) -> dict:
    """One query on a read-only connection of its own (what the forked reader runs)."""
    con = sqlite3.connect(uri, uri=True)
    try:
        return _int_columns(con.execute(sql).fetchall(), columns)
    finally:
        con.close()


def _fork_pool():
    """A one-process pool, where forking is safe and allowed (Linux); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return multiprocessing.get_context("fork").Pool(1)
    except (OSError, ValueError):
        return None


def read_ops(con: sqlite3.Connection, uri: str, kinds: list,
             parallel_min_ops: int = PARALLEL_MIN_OPS) -> pd.DataFrame:
    parts = [
        OP_SELECT_SQL.format(
            table=OP_TABLES[k], what="shortName" if k == KERNEL else -k,
            pid="IFNULL(globalPid, -1)" if "globalPid" in _columns(con, OP_TABLES[k]) else "-1",
        )
        for k in kinds
    ]
    ops_sql = " UNION ALL ".join(parts)
    corr_sql = " UNION ALL ".join(f"SELECT correlationId FROM {OP_TABLES[k]}" for k in kinds)
    launch_sql = LAUNCH_SQL.format(corr=corr_sql)
    count = sum(con.execute(OP_COUNT_SQL.format(table=OP_TABLES[k])).fetchone()[0] for k in kinds)
    pool = _fork_pool() if count >= parallel_min_ops else None
    if pool is None:
        raw = _int_columns(con.execute(ops_sql).fetchall(), OP_COLUMNS)
        calls = _int_columns(con.execute(launch_sql).fetchall(), LAUNCH_COLUMNS)
    else:
        with pool:
            pending = pool.apply_async(_query_columns, (uri, ops_sql, OP_COLUMNS))
            calls = _int_columns(con.execute(launch_sql).fetchall(), LAUNCH_COLUMNS)
            raw = pending.get()
    launch = match_launches(raw["pid"], raw["corr"], calls)
    found = launch >= 0

    def call_column(name: str) -> np.ndarray:
        return np.where(found, calls[name][launch] if len(calls[name]) else -1, -1)

    what = raw["what"]
    device_stream = raw["device_stream"]
    return pd.DataFrame({
        "start": raw["start"],
        "end": raw["end"],
        "device": device_stream >> 32,
        "stream": device_stream & 0xFFFFFFFF,
        "corr": raw["corr"],
        "name_id": np.maximum(what, -1),
        "kind": np.where(what >= 0, KERNEL, -what),
        "call_start": call_column("start"),
        "call_end": call_column("end"),
        "tid": call_column("tid"),
    })


def blocking_name_ids(strings: dict) -> dict:
    """StringIds of the blocking calls, with their clean names; the API table is then filtered
    inside SQLite instead of being read whole."""
    return {i: n for i, v in strings.items() if (n := strip_api_suffix(v)) in BLOCKING_CALLS}


BLOCKING_SQL = """
SELECT start, end, IFNULL(globalTid, -1), nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME
WHERE nameId IN ({ids})
"""


def read_blocking_calls(con: sqlite3.Connection, strings: dict) -> pd.DataFrame:
    names = blocking_name_ids(strings)
    sql = BLOCKING_SQL.format(ids=", ".join(str(i) for i in names) or "NULL")
    calls = _int_frame(con.execute(sql).fetchall(), ["start", "end", "tid", "name_id"])
    calls["name"] = calls["name_id"].map(names).astype(object)
    return calls.drop(columns="name_id")


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
        trace = Trace(
            path=path,
            schema_version=_schema_version(con, tables),
            ops=read_ops(con, _uri(path), kinds, parallel_min_ops),
            blocking=read_blocking_calls(con, strings),
            ranges=read_ranges(con),
            strings=strings,
        )
    except sqlite3.DatabaseError as e:
        raise TraceError(
            f"{path}: unreadable SQLite ({e}): the file is damaged or truncated; export it again"
        ) from None
    finally:
        con.close()
    if trace.ops.empty:
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
