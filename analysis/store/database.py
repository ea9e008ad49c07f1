"""The results database as an object: every analysed run in one SQLite file (store/db.py writes
it; docs/METRICS.md, "The results database", has its tables and columns).

    db = Database("runs.db")
    db.add(analysis.open("tests/data/runs/static"))      # its run_id; added again: replaced
    db.runs()                                            # DataFrame, one row a run and device
    db.steps(run_id), db.gaps(run_id)                    # the run's rows, in order
    db.analyses("config_batch = 16")                     # stored Analyses, for compare
    db.query("SELECT label, bubble_ns_median FROM runs")
"""

import json
import sqlite3
from pathlib import Path

import pandas as pd
import sqlite_utils

from ..errors import TraceError
from ..measures.analysis import STORED, Analysis
from ..measures.names import renamed_frame, renamed_summary
from ..outputs import check_database, input_files
from ..outputs import same_file as _same_file
from ..readers.runs import Run
from ..store import db as db_mod

STEPS_SQL = "SELECT * FROM steps WHERE run_id = ? AND device = ? ORDER BY row"
COUNT_RUNS_SQL = "SELECT count(DISTINCT run_id) FROM runs"


def open_read_only(path) -> sqlite_utils.Database:
    """The database opened read-only (compare never changes it)."""
    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    return sqlite_utils.Database(sqlite3.connect(uri, uri=True))


def frame(cursor) -> pd.DataFrame:
    return pd.DataFrame(cursor.fetchall(), columns=[d[0] for d in cursor.description])


def stored_summary(row: dict) -> dict:
    """A runs row as the summary compare reads: the summary as stored whole (summary_json), or,
    in a database made before it was, the row, with the causes and the summary's own sections
    (db.SUMMARY_PREFIXES) nested again; a section absent where the run had none (its columns
    NULL)."""
    if row.get("summary_json"):
        return renamed_summary(json.loads(row["summary_json"]))
    summary = dict(row)
    summary["idle_ns_by_cause"] = {k.removeprefix("idle_ns_by_cause_"): v for k, v in row.items()
                                   if k.startswith("idle_ns_by_cause_")}
    for key, prefix in db_mod.SUMMARY_PREFIXES.items():
        part = {k.removeprefix(prefix + "_"): v for k, v in row.items()
                if k.startswith(prefix + "_")}
        if any(v is not None for v in part.values()):
            summary[key] = part
    return renamed_summary(summary)


def _restored(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """A child table as the analysis made it: the gaps' cause categorical again, the host
    steps' pause a boolean."""
    if name == "gaps" and "cause" in frame.columns:
        from ..measures.gaps import CAUSES

        frame = frame.assign(cause=pd.Categorical(frame["cause"], categories=CAUSES))
    if name == "host_steps" and "paused" in frame.columns:
        frame = frame.assign(paused=frame["paused"].astype(bool))
    return frame


class Database:
    """A results database: made where missing (unless `read_only`), opened where it is."""

    def __init__(self, path, read_only: bool = False):
        self.path = path
        if read_only and not Path(path).is_file():
            raise TraceError(f"{path}: no such database")
        if not read_only:  # never into another SQLite file (an nsys export): outputs.py
            check_database(path, "Database(path)")
        self.db = open_read_only(path) if read_only else db_mod.open_db(path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self.db.conn.close()

    def add(self, analyses: list, label: str | None = None) -> str:
        """One run's analyses (each device's, as analysis.open returns them) into every table,
        replacing the run's rows where it was added before; its run_id."""
        run = analyses[0].run
        if run is not None and any(_same_file(self.path, f) for f in input_files(
                run.trace_path.parent if (run.trace_path.parent / "run.json").is_file()
                else run.trace_path)):
            raise TraceError(f"Database(path) {self.path}: is an input of the run it is given "
                             f"({run.trace_path}); writing it would destroy the capture")
        return db_mod.add_run(self.db, run, label or run.label, analyses)

    def count(self) -> int:
        """How many runs the database holds (a run of several devices counts once)."""
        return self.db.execute(COUNT_RUNS_SQL).fetchone()[0] if self.db["runs"].exists() else 0

    def query(self, sql: str, params=()) -> pd.DataFrame:
        return frame(self.db.execute(sql, params))

    def runs(self, where: str | None = None) -> pd.DataFrame:
        """The runs table (one row a run and device; `where`: SQL on it), in the order added."""
        return pd.DataFrame(self.run_rows(where))

    def run_rows(self, where: str | None = None) -> list:
        return list(self.db["runs"].rows_where(where, order_by="rowid"))

    def steps(self, run_id: str, device: int = 0) -> pd.DataFrame:
        """One row a step of the run (table `steps`), in step order."""
        return renamed_frame(frame(self.db.execute(STEPS_SQL, [run_id, device])), "steps")

    def gaps(self, run_id: str, device: int = 0) -> pd.DataFrame:
        """One row a GPU idle gap of the run (table `gaps`), in time order."""
        return self.table("gaps", run_id, device)

    def table(self, name: str, run_id: str, device: int = 0) -> pd.DataFrame:
        """One run's rows of a child table (steps, gaps, streams, syncs), in order."""
        if name not in db_mod.CHILD_TABLES:
            raise TraceError(f"{name}: no such table; the database has runs, "
                             f"{', '.join(db_mod.CHILD_TABLES)}")
        return renamed_frame(frame(self.db.execute(
            f"SELECT * FROM [{name}] WHERE run_id = ? AND device = ? ORDER BY row",
            [run_id, device])), name)

    def analyses(self, where: str | None = None, tables=None) -> list:
        """The runs that match `where` as Analyses of kind "stored", in the order they were
        added: the summary, the steps and every table the database keeps (gaps, streams,
        syncs, host, host_steps, pairs, checks: all but the ops, which stay in the capture);
        `tables`: only those (compare reads the steps and syncs alone). A table the database
        lacks (written by an older gapscope, or a run without it) is None."""
        wanted = db_mod.CHILD_TABLES if tables is None else tables
        out = []
        for row in self.run_rows(where):
            run = Run(Path(row["trace"]), row["label"], json.loads(row["run_json"] or "{}"))
            parts = {}
            for name in wanted:
                if name == "steps" or not self.db[name].exists():
                    continue
                found = self.table(name, row["run_id"], row["device"])
                parts[name] = (_restored(found.drop(columns=["run_id", "device", "row"],
                                                    errors="ignore"), name)
                               if len(found.columns) else None)
            out.append(Analysis(row["device"], stored_summary(row),
                                self.steps(row["run_id"], row["device"]), **parts,
                                kind=STORED, run=run))
        return out
