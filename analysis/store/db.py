"""The results database: every analysed run in one SQLite file, written with sqlite-utils.

    runs     one row per run and device: where the trace is, its hash, run.json flattened
             (config_*, versions_*, untraced_*, timing_*), every summary number (flattened)
    steps    one row per step   } keyed by (run_id, device); `row` is the position in the run,
    gaps     one row per gap    } since step names may repeat (several generate() calls)
    streams  one row per stream }
    syncs    one row per sync site (thread, blocking call, Python line)
    host     one row per step and row of the host table (the named code that spent its time)
    host_steps, pairs, checks   the host table's steps, the stream pairs, the stop checks
(every table of an Analysis but its ops: those stay in the capture)

A run is its trace's content: adding the same trace again (from any path) replaces its rows.
A key no earlier run had becomes a new column (sqlite-utils' `alter=True`). METRICS.md documents
the schema; the file is the user's and opens in any SQLite tool.
"""

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import sqlite_utils

from ..measures.plain import plain
from ..render.report import column_values
from ..store.scratch import (
    KEY_COLUMNS,
    SCRATCH_FILES,
    copy_rows,
    image_columns,
    write_scratch,
)

HASH_CHUNK = 1 << 20
RUN_KEY = ("run_id", "device")
# The tables keyed by run, and how each comes from an Analysis. Another per-run table (the
# GPU metrics) is one more entry here and one more line in METRICS.md.
CHILD_TABLES = {
    "steps": lambda a: a.steps,
    "gaps": lambda a: a.gaps,
    "streams": lambda a: a.streams,
    "syncs": lambda a: a.syncs,
    "host": lambda a: a.host,
    "host_steps": lambda a: a.host_steps,
    "pairs": lambda a: a.pairs,
    "checks": lambda a: a.checks,
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
SUMMARY_PREFIXES = {"untraced": "twin", "gpu_metrics": "metrics", "floor": "bandwidth",
                    "host": "host"}


def run_row(run, label: str, digest: str, a) -> dict:
    """The runs row of one run and device."""
    info = {k: v for k, v in run.info.items() if isinstance(v, dict)}
    summary = {SUMMARY_PREFIXES.get(k, k): v for k, v in a.summary.items() if k != "device"}
    return {"run_id": digest[:16], "device": a.device, "label": label,
            "trace": str(Path(run.trace_path).resolve()), "trace_hash": digest,
            **flatten(info), **flatten(summary),
            "run_json": json.dumps(run.info, sort_keys=True),
            # The summary whole, as `analyze --format json` writes it: what an Analysis read
            # back from the database renders from (the columns above are for SQL).
            "summary_json": json.dumps(plain(a.summary))}


# A new database gets 64 KiB pages: a million gaps go in ~15% faster than with 4 KiB pages.
NEW_PAGE_SIZE = 65536


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
    run_id. A table of more than scratch.IMAGE_ROWS rows is written into a scratch database file
    first (store/scratch.py), attached, and copied in by SQLite."""
    digest = trace_hash(Path(run.trace_path))
    # (device, table, its first row keyed (the schema), the table's own columns)
    # A part an analysis lacks (None: GPU metrics alone have no gaps) writes no rows.
    frames = [(a.device, name, _keyed(frame(a).iloc[:1], digest[:16], a.device), _data(frame(a)))
              for a in analyses for name, frame in CHILD_TABLES.items() if frame(a) is not None]
    images, paths = {}, []  # frame's position -> its scratch database's columns
    try:
        for i, frame in enumerate(frames):
            image = image_columns(frame[3]) if len(images) < SCRATCH_FILES else None
            if image is not None:
                paths.append(write_scratch(image))
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
                copy_rows(db.conn, name, head, images[i], f"scratch_{i}", run_id, device)
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


