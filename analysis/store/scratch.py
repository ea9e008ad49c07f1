"""A big table's rows into the database without Python work per row: its columns written as a
scratch database file in numpy (analysis.store.sqlite_image), attached, and copied in by one
INSERT ... SELECT (binding a million gaps' values one at a time took 1.5 s of CPU)."""

import os
import tempfile

import numpy as np
import pandas as pd

from ..store.sqlite_image import write_table

# A table of more rows than this, of integer and text columns only, goes in from a scratch
# database file made in numpy (analysis.store.sqlite_image) by one INSERT ... SELECT: no Python work
# per row (binding a million gaps' values one at a time took 1.5 s of CPU).
IMAGE_ROWS = 1000
# Scratch files of one run at most: SQLite attaches 10 databases at most (a run of more devices
# binds the rest of its big tables row by row).
SCRATCH_FILES = 8
# (run_id, device, row): every child table's key, its first columns.
KEY_COLUMNS = ("run_id", "device", "row")


def image_columns(data: pd.DataFrame) -> dict | None:
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


def write_scratch(image: dict) -> str:
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


def copy_rows(con, name: str, head: pd.DataFrame, image: dict, tag: str, run_id: str,
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
