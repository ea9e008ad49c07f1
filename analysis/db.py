"""The results database: every analysed run in one SQLite file, written with sqlite-utils.

    runs     one row per run and device: where the trace is, its hash, run.json flattened
             (config_*, versions_*, untraced_*, timing_*), every summary number (flattened)
    steps    one row per step   } keyed by (run_id, device); `row` is the position in the run,
    gaps     one row per gap    } since step names may repeat (several generate() calls)
    streams  one row per stream }

A run is its trace's content: adding the same trace again (from any path) replaces its rows.
A key no earlier run had becomes a new column (sqlite-utils' `alter=True`). METRICS.md documents
the schema; the file is the user's and opens in any SQLite tool.
"""

import hashlib
import json
import os
import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import sqlite_utils

from analysis.report import column_values, plain
from analysis.runs import Run

HASH_CHUNK = 1 << 20
RUN_KEY = ("run_id", "device")
# The tables keyed by run, and how each comes from a DeviceAnalysis. Another per-run table (the
# GPU metrics) is one more entry here and one more line in METRICS.md.
CHILD_TABLES = {
    "steps": lambda a: a.steps,
    "gaps": lambda a: a.gaps,
    "streams": lambda a: a.streams,
}
INDEXES = {
    "runs": [["config_variant", "config_batch"], ["trace"]],
    "steps": [["run_id", "device", "step"]],
}


def trace_hash(path: Path) -> str:
    """sha256 of the file's size, first MiB and last MiB: a million-op export is ~150 MiB, and
    reading all of it would cost more than writing its rows. Two different exports of one size
    that agree on both ends would share a hash (and one would replace the other)."""
    h = hashlib.sha256()
    size = path.stat().st_size
    h.update(size.to_bytes(8, "little"))
    with open(path, "rb") as f:
        h.update(f.read(HASH_CHUNK))
        if size > HASH_CHUNK:
            f.seek(max(HASH_CHUNK, size - HASH_CHUNK))
            h.update(f.read())
    return h.hexdigest()


def flatten(value, prefix: str = "") -> dict:
    """Nested dicts as one level, keys joined by `_` ({"config": {"batch": 8}} -> config_batch);
    lists as JSON text."""
    out = {}
    for key, v in value.items():
        name = f"{prefix}{key}"
        if isinstance(v, dict):
            out |= flatten(v, f"{name}_")
        elif isinstance(v, (list, tuple)):
            out[name] = json.dumps(plain(v))
        else:
            out[name] = plain(v)
    return out


# Summary keys that run.json has too, with other contents: the summary's go under a prefix of
# their own (`untraced` is the twin's figures, run.json's the bench's; `gpu_metrics` is the
# capture's, run.json's how it was sampled).
SUMMARY_PREFIXES = {"untraced": "twin", "gpu_metrics": "metrics"}


def run_row(run, label: str, digest: str, a) -> dict:
    """The runs row of one run and device."""
    info = {k: v for k, v in run.info.items() if isinstance(v, dict)}
    summary = {SUMMARY_PREFIXES.get(k, k): v for k, v in a.summary.items() if k != "device"}
    return {"run_id": digest[:16], "device": a.device, "label": label,
            "trace": str(Path(run.trace_path).resolve()), "trace_hash": digest,
            **flatten(info), **flatten(summary),
            "run_json": json.dumps(run.info, sort_keys=True)}


# A new database gets 64 KiB pages: a million gaps go in ~15% faster than with 4 KiB pages.
NEW_PAGE_SIZE = 65536
# A table of more rows than this is written by two processes, half each (_insert_forked).
FORK_ROWS = 200_000


def open_db(path) -> sqlite_utils.Database:
    new = str(path) != ":memory:" and not Path(path).exists()
    db = sqlite_utils.Database(path)
    if new:
        db.conn.execute(f"PRAGMA page_size = {NEW_PAGE_SIZE}")
    return db


def _sql_type(series: pd.Series) -> str:
    if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_integer_dtype(series.dtype):
        return "INTEGER"
    return "REAL" if pd.api.types.is_float_dtype(series.dtype) else "TEXT"


KEY_COLUMNS = ("run_id", "device", "row")


def _data(frame: pd.DataFrame) -> pd.DataFrame:
    """A table's own columns (a frame's device column is the key's)."""
    keys = [c for c in KEY_COLUMNS if c in frame.columns]
    return frame.drop(columns=keys) if keys else frame


def _keyed(frame: pd.DataFrame, run_id: str, device: int) -> pd.DataFrame:
    out = _data(frame).assign(run_id=run_id, device=device, row=np.arange(len(frame)))
    return out[[*KEY_COLUMNS, *_data(frame).columns]]


def _create_sql(name: str, df: pd.DataFrame) -> str:
    """A child table: its rows stored in key order (WITHOUT ROWID), so rows written in order
    append, and the key serves every per-run query and delete without another index."""
    cols = ", ".join(f"[{c}] {_sql_type(df[c])}" for c in df.columns)
    return (f"CREATE TABLE [{name}] ({cols}, PRIMARY KEY (run_id, device, row)) "
            "WITHOUT ROWID")


def _insert_sql(name: str, df: pd.DataFrame, run_id: str, device: int) -> str:
    """The INSERT of one run's rows: run_id and device are literals of the statement, so each
    row binds only its own values."""
    names = ", ".join(f"[{c}]" for c in df.columns)
    marks = ", ".join("?" for _ in df.columns[2:])
    return f"INSERT INTO [{name}] ({names}) VALUES ('{run_id}', {int(device)}, {marks})"


def _insert_rows(con, sql: str, data: pd.DataFrame, first: int = 0) -> None:
    """Rows first, first + 1, ... (their `row`) of a table's own columns (_data) in one
    executemany over column lists: sqlite-utils' insert_all builds a dict a row (seconds a
    million); the table's columns come from sqlite-utils (add_missing_columns) all the same."""
    values = [column_values(data[c]) for c in data.columns]
    con.executemany(sql, zip(range(first, first + len(data)), *values, strict=True))


def _write_halves(frames: list, paths: tuple) -> None:
    """The big frames' rows into two scratch databases at the same time, the first half of
    each frame here and the second by a forked child: binding a million rows' values is most
    of the time of --db, and it splits over two cores. Frame k becomes table t{k} of each."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _write_scratch(paths[1], frames, second=True)
            code = 0
        finally:
            os._exit(code)
    _write_scratch(paths[0], frames, second=False)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise sqlite3.OperationalError("the forked writer of the big tables failed")


def _write_scratch(path: str, frames: list, second: bool) -> None:
    """One half of each frame into a database of its own (a connection of its own: SQLite's
    must not cross a fork). A scratch file read once in rowid order and removed: plain tables
    (a key costs a third more time a row), no journal, no syncing."""
    out = sqlite3.connect(path)
    try:
        out.execute("PRAGMA journal_mode = OFF")
        out.execute("PRAGMA synchronous = OFF")
        with out:
            for k, (device, _, head, data) in enumerate(frames):
                out.execute(f"CREATE TABLE t{k} ({', '.join(f'[{c}]' for c in head.columns)})")
                half = len(data) // 2
                sql = _insert_sql(f"t{k}", head, head["run_id"].iloc[0], device)
                if second:
                    _insert_rows(out, sql, data.iloc[half:], half)
                else:
                    _insert_rows(out, sql, data.iloc[:half])
    finally:
        out.close()


def add_run(db: sqlite_utils.Database, run, label: str, analyses: list) -> str:
    """Writes (or replaces) one run's rows in every table; returns its run_id. Tables of more
    than FORK_ROWS rows are written by two processes into scratch databases first, then
    copied in by SQLite (no Python per row), so that the run still goes in one transaction."""
    digest = trace_hash(Path(run.trace_path))
    # (device, table, its first row keyed (the schema), the table's own columns)
    frames = [(a.device, name, _keyed(frame(a).iloc[:1], digest[:16], a.device), _data(frame(a)))
              for a in analyses for name, frame in CHILD_TABLES.items()]
    big = [i for i, f in enumerate(frames) if len(f[3]) > FORK_ROWS] if hasattr(os, "fork") \
        else []
    paths, attached = [], []
    try:
        if big:
            for _ in range(2):
                fd, path = tempfile.mkstemp(suffix=".db", prefix="gapscope-")
                os.close(fd)
                paths.append(path)
            _write_halves([frames[i] for i in big], tuple(paths))
            # Attached outside the transaction: SQLite attaches outside one only.
            for tag, path in zip("ab", paths, strict=True):
                db.conn.execute(f"ATTACH DATABASE ? AS scratch_{tag}", (path,))
                attached.append(tag)
        _add_rows(db, run, label, digest, analyses, frames, big)
    finally:
        for tag in attached:
            db.conn.execute(f"DETACH DATABASE scratch_{tag}")
        for path in paths:
            os.unlink(path)
    _ensure_indexes(db)
    return digest[:16]


def _add_rows(db, run, label: str, digest: str, analyses: list, frames: list,
              big: list) -> None:
    """Every table's rows of one run in one transaction; frames[big[k]] from the scratch
    databases' t{k}."""
    run_id = digest[:16]
    with db.conn:
        for name in ("runs", *CHILD_TABLES):
            if db[name].exists():
                db.conn.execute(f"DELETE FROM [{name}] WHERE run_id = ?", (run_id,))
        rows = [run_row(run, label, digest, a) for a in analyses]
        db["runs"].upsert_all(rows, pk=RUN_KEY, alter=True)
        for i, (device, name, head, data) in enumerate(frames):
            if not db[name].exists():
                db.conn.execute(_create_sql(name, head))
            elif len(head):
                db[name].add_missing_columns(head.to_dict("records"))
            if i in big:
                names = ", ".join(f"[{c}]" for c in head.columns)
                for tag in "ab":
                    db.conn.execute(f"INSERT INTO main.[{name}] ({names}) SELECT {names} "
                                    f"FROM scratch_{tag}.t{big.index(i)} ORDER BY rowid")
            else:
                _insert_rows(db.conn, _insert_sql(name, head, run_id, device), data)


def _ensure_indexes(db: sqlite_utils.Database) -> None:
    for name, indexes in INDEXES.items():
        table = db[name]
        if not table.exists():
            continue
        have = {tuple(i.columns) for i in table.indexes}
        for columns in indexes:
            if tuple(columns) not in have and set(columns) <= set(table.columns_dict):
                table.create_index(columns, if_not_exists=True)


def read_only(path) -> sqlite_utils.Database:
    """The database opened read-only (compare never changes it)."""
    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    return sqlite_utils.Database(sqlite3.connect(uri, uri=True))


def stored_runs(db: sqlite_utils.Database, where: str | None) -> list:
    """The runs rows that match `where` (SQL over the runs table), in the order they were
    added."""
    return list(db["runs"].rows_where(where, order_by="rowid"))


def stored_steps(db: sqlite_utils.Database, run_id: str, device: int) -> pd.DataFrame:
    rows = db.execute("SELECT * FROM steps WHERE run_id = ? AND device = ? ORDER BY row",
                      [run_id, device])
    names = [d[0] for d in rows.description]
    return pd.DataFrame(rows.fetchall(), columns=names)


class StoredAnalysis:
    """What compare reads of an analysis, rebuilt from the database: device, summary, steps."""

    def __init__(self, row: dict, steps: pd.DataFrame):
        self.device = row["device"]
        self.summary = dict(row)
        self.summary["idle_ns_by_cause"] = {
            k.removeprefix("idle_ns_by_cause_"): v for k, v in row.items()
            if k.startswith("idle_ns_by_cause_")}
        twin = {k.removeprefix("twin_"): v for k, v in row.items() if k.startswith("twin_")}
        if twin.get("period_ns_median") is not None:
            self.summary["untraced"] = twin  # the untraced twin, as compare reads it
        self.steps = steps


def stored_for_compare(path, where: str | None) -> tuple:
    """(runs, analyses) of the database's runs that match `where`, for compare."""
    db = read_only(path)
    try:
        rows = stored_runs(db, where)
        runs = [Run(Path(r["trace"]), r["label"], json.loads(r["run_json"] or "{}"))
                for r in rows]
        analyses = [StoredAnalysis(r, stored_steps(db, r["run_id"], r["device"])) for r in rows]
    finally:
        db.conn.close()
    return runs, analyses
