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
from pathlib import Path

import pandas as pd
import sqlite_utils

from analysis.report import column_values, plain

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
    "gaps": [["run_id", "device", "cause"]],
    "streams": [["run_id", "device", "stream"]],
}


def trace_hash(path: Path) -> str:
    """sha256 of the file's size, first MiB and last MiB: a million-op export is ~150 MiB, and
    reading all of it would cost more than writing its rows. Two different exports of one size
    that agree on both ends would share a hash; nsys writes neither end twice the same."""
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


def run_row(run, label: str, digest: str, a) -> dict:
    """The runs row of one run and device."""
    info = {k: v for k, v in run.info.items() if isinstance(v, dict)}
    return {"run_id": digest[:16], "device": a.device, "label": label,
            "trace": str(Path(run.trace_path).resolve()), "trace_hash": digest,
            **flatten(info), **{k: v for k, v in flatten(a.summary).items() if k != "device"},
            "run_json": json.dumps(run.info, sort_keys=True)}


def open_db(path) -> sqlite_utils.Database:
    db = sqlite_utils.Database(path)
    db.conn.execute("PRAGMA journal_mode = WAL")
    return db


def _insert_frame(db: sqlite_utils.Database, name: str, df: pd.DataFrame, key: dict) -> None:
    """A big table's rows in one executemany; sqlite-utils makes the table or adds the columns
    it lacks from the first row (its own insert_all builds a dict a row: seconds a million)."""
    df = df.assign(**key, row=range(len(df)))
    cols = [*key, "row", *(c for c in df.columns if c not in key and c != "row")]
    values = [column_values(df[c]) for c in cols]
    first = {c: v[0] if len(v) else None for c, v in zip(cols, values, strict=True)}
    table = db[name]
    if not table.exists():
        table.create({c: _sql_type(df[c], first[c]) for c in cols}, pk=None)
    else:
        table.add_missing_columns([first])
    marks = ", ".join("?" for _ in cols)
    names = ", ".join(f"[{c}]" for c in cols)
    sql = f"INSERT INTO [{name}] ({names}) VALUES ({marks})"
    db.conn.executemany(sql, zip(*values, strict=True))


def _sql_type(series: pd.Series, first):
    if pd.api.types.is_integer_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        return int
    if pd.api.types.is_float_dtype(series.dtype):
        return float
    return type(first) if isinstance(first, (int, float)) else str


def add_run(db: sqlite_utils.Database, run, label: str, analyses: list) -> str:
    """Writes (or replaces) one run's rows in every table; returns its run_id."""
    digest = trace_hash(Path(run.trace_path))
    run_id = digest[:16]
    with db.conn:
        for name in ("runs", *CHILD_TABLES):
            if db[name].exists():
                db.conn.execute(f"DELETE FROM [{name}] WHERE run_id = ?", (run_id,))
        rows = [run_row(run, label, digest, a) for a in analyses]
        db["runs"].upsert_all(rows, pk=RUN_KEY, alter=True)
        for a in analyses:
            for name, frame in CHILD_TABLES.items():
                _insert_frame(db, name, frame(a), {"run_id": run_id, "device": a.device})
    _ensure_indexes(db)
    return run_id


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
    import sqlite3

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
        self.steps = steps


def stored_for_compare(path, where: str | None) -> tuple:
    """(runs, analyses) of the database's runs that match `where`, for compare."""
    from analysis.runs import Run

    db = read_only(path)
    try:
        rows = stored_runs(db, where)
        runs = [Run(Path(r["trace"]), r["label"], json.loads(r["run_json"] or "{}"))
                for r in rows]
        analyses = [StoredAnalysis(r, stored_steps(db, r["run_id"], r["device"])) for r in rows]
    finally:
        db.conn.close()
    return runs, analyses
