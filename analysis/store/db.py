"""The results database: every analysed run in one SQLite file, written with sqlite-utils.

    runs     one row per run and device: where the trace is, its hash, run.json flattened
             (config_*, versions_*, untraced_*, timing_*), every summary number (flattened)
    steps    one row per step   } keyed by (run_id, device); `row` is the position in the run,
    gaps     one row per gap    } since step names may repeat (several generate() calls)
    streams  one row per stream }
    syncs    one row per sync site (thread, blocking call, Python line)

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

from ..render.report import column_values, plain
from ..readers.runs import Run
from ..store.sqlite_image import write_table

HASH_CHUNK = 1 << 20
RUN_KEY = ("run_id", "device")
# The tables keyed by run, and how each comes from a DeviceAnalysis. Another per-run table (the
# GPU metrics) is one more entry here and one more line in METRICS.md.
CHILD_TABLES = {
    "steps": lambda a: a.steps,
    "gaps": lambda a: a.gaps,
    "streams": lambda a: a.streams,
    "syncs": lambda a: a.syncs,
}
INDEXES = {
    "runs": [["config_variant", "config_batch"], ["trace"]],
    "steps": [["run_id", "device", "step"]],
}


def trace_hash(path: Path) -> str:
    """sha256 of the whole file (what `sha256sum` prints): two different captures never share
    a run. Read in chunks, the hash releasing the GIL; 0.15-0.3 s for a million-op, 174 MiB
    export on the 2-core development machine (ANALYSIS.md, Robustness)."""
    h = hashlib.sha256()
    chunk = bytearray(HASH_CHUNK)
    view = memoryview(chunk)
    with open(path, "rb") as f:
        while n := f.readinto(chunk):
            h.update(view[:n])
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
# capture's, run.json's how it was sampled; `floor` is the floor reached, run.json's the bytes).
SUMMARY_PREFIXES = {"untraced": "twin", "gpu_metrics": "metrics", "floor": "bandwidth"}


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
# A table of more rows than this, of integer and text columns only, goes in from a scratch
# database file made in numpy (analysis.store.sqlite_image) by one INSERT ... SELECT: no Python work
# per row (binding a million gaps' values one at a time took 1.5 s of CPU).
IMAGE_ROWS = 1000
# Scratch files of one run at most: SQLite attaches 10 databases at most (a run of more devices
# binds the rest of its big tables row by row).
SCRATCH_FILES = 8


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


def _insert_rows(con, sql: str, data: pd.DataFrame) -> None:
    """A small table's rows (their `row` 0, 1, ...; its own columns, _data) in one executemany
    over column lists: sqlite-utils' insert_all builds a dict a row; the table's columns come
    from sqlite-utils (add_missing_columns) all the same."""
    values = [column_values(data[c]) for c in data.columns]
    con.executemany(sql, zip(range(len(data)), *values, strict=True))


def add_run(db: sqlite_utils.Database, run, label: str, analyses: list) -> str:
    """Writes (or replaces) one run's rows in every table, in one transaction; returns its
    run_id. A table of more than IMAGE_ROWS rows is written into a scratch database file
    first (_image_columns), attached, and copied in by SQLite."""
    digest = trace_hash(Path(run.trace_path))
    # (device, table, its first row keyed (the schema), the table's own columns)
    frames = [(a.device, name, _keyed(frame(a).iloc[:1], digest[:16], a.device), _data(frame(a)))
              for a in analyses for name, frame in CHILD_TABLES.items()]
    images, paths = {}, []  # frame's position -> its scratch database's columns
    try:
        for i, frame in enumerate(frames):
            image = _image_columns(frame[3]) if len(images) < SCRATCH_FILES else None
            if image is not None:
                paths.append(_write_scratch(image))
                # Attached outside the transaction: SQLite attaches outside one only.
                db.conn.execute(f"ATTACH DATABASE ? AS scratch_{i}", (paths[-1],))
                images[i] = image
        _add_rows(db, run, label, digest, analyses, frames, images)
    finally:
        for i in images:
            db.conn.execute(f"DETACH DATABASE scratch_{i}")
        for path in paths:
            os.unlink(path)
    _ensure_indexes(db)
    return digest[:16]


def _add_rows(db, run, label: str, digest: str, analyses: list, frames: list,
              images: dict) -> None:
    """Every table's rows of one run in one transaction; frames[i] of images[i] from its
    scratch database scratch_{i}."""
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
            if i in images:
                _copy_rows(db.conn, name, head, images[i], f"scratch_{i}", run_id, device)
            else:
                _insert_rows(db.conn, _insert_sql(name, head, run_id, device), data)


def _image_columns(data: pd.DataFrame) -> dict | None:
    """A big table's columns as integer arrays for its scratch file, text ones (categorical,
    strings) as codes into their distinct values (-1: none) with `values[column]` those values;
    None for a small table or one the scratch file cannot carry (floats, missing integers)."""
    if len(data) <= IMAGE_ROWS:
        return None
    columns, values = {}, {}
    for c in data.columns:
        s = data[c]
        if pd.api.types.is_bool_dtype(s.dtype) or pd.api.types.is_integer_dtype(s.dtype):
            if s.hasnans:
                return None
            columns[c] = s.to_numpy(dtype=np.int64)
        elif (s.dtype == object or pd.api.types.is_string_dtype(s.dtype)
              or isinstance(s.dtype, pd.CategoricalDtype)):
            columns[c], distinct = pd.factorize(s)
            values[c] = list(distinct)
        else:
            return None
    return {"columns": columns, "values": values}


def _write_scratch(image: dict) -> str:
    """The scratch database of one big table (table t) in a file of its own; its path. The
    rowid of row r is image["first"] + r."""
    fd, path = tempfile.mkstemp(suffix=".db", prefix="gapscope-")
    os.close(fd)
    try:
        image["first"] = write_table(path, "t", image["columns"])
    except BaseException:
        os.unlink(path)
        raise
    return path


def _copy_sql(name: str, head: pd.DataFrame, image: dict, tag: str, run_id: str,
              device: int) -> str:
    """The INSERT ... SELECT of a scratch table's rows into table `name`, in rowid order: `row`
    from the rowid, text columns through their values' tables (temp.{tag}_{k})."""
    exprs = [f"'{run_id}'", str(int(device)), f"s.rowid - {image['first']}"]
    joins = []
    for c in head.columns[len(KEY_COLUMNS):]:
        if c in image["values"]:
            k = len(joins)
            joins.append(f"LEFT JOIN temp.[{tag}_{k}] AS v{k} ON v{k}.code = s.[{c}]")
            exprs.append(f"v{k}.value")
        else:
            exprs.append(f"s.[{c}]")
    names = ", ".join(f"[{c}]" for c in head.columns)
    return (f"INSERT INTO main.[{name}] ({names}) SELECT {', '.join(exprs)} "
            f"FROM {tag}.t AS s {' '.join(joins)} ORDER BY s.rowid")


def _copy_rows(con, name: str, head: pd.DataFrame, image: dict, tag: str, run_id: str,
               device: int) -> None:
    """A big table's rows from its attached scratch database `tag`; the values of its text
    columns in temp tables (inside the transaction) while the copy needs them."""
    texts = [c for c in head.columns[len(KEY_COLUMNS):] if c in image["values"]]
    for k, c in enumerate(texts):
        con.execute(f"CREATE TEMP TABLE [{tag}_{k}] (code INTEGER PRIMARY KEY, value)")
        con.executemany(f"INSERT INTO temp.[{tag}_{k}] VALUES (?, ?)",
                        enumerate(image["values"][c]))
    con.execute(_copy_sql(name, head, image, tag, run_id, device))
    for k in range(len(texts)):
        con.execute(f"DROP TABLE temp.[{tag}_{k}]")


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
        # The summary's own sections (SUMMARY_PREFIXES), as compare reads them; absent where
        # the run had none (their columns NULL).
        for key, prefix in SUMMARY_PREFIXES.items():
            part = {k.removeprefix(prefix + "_"): v for k, v in row.items()
                    if k.startswith(prefix + "_")}
            if any(v is not None for v in part.values()):
                self.summary[key] = part
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
