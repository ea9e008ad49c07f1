"""Analyses for tools: JSON (the summary, and the frames columnar where asked) and CSV, streamed
in chunks so that a million-step table never sits in memory as one string.
"""

import json

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..measures.analysis import METRICS
from ..measures.plain import plain
from ..render.csv_text import Unwritable, csv_field, csv_rows, int_list, is_int

# From this many values on, a column of integers is written by csv_text.int_list.
JSON_INTS_MIN = 1000


def records(df: pd.DataFrame) -> list:
    cols = list(df.columns)
    return [dict(zip(cols, (plain(v) for v in row), strict=True))
            for row in df.itertuples(index=False, name=None)]


def column_values(series: pd.Series) -> list:
    """One column as a JSON-ready list, without a Python call per value: NA and NaN as None."""
    if series.dtype == object or isinstance(series.dtype, pd.CategoricalDtype):
        return series.astype(object).where(series.notna(), None).tolist()
    if series.hasnans:
        return series.to_numpy(dtype=object, na_value=None).tolist()
    return series.to_numpy().tolist()


def columns(df: pd.DataFrame) -> dict:
    """A big table columnar: {column: [values]}; `pandas.DataFrame(columns)` reads it back."""
    return {c: column_values(df[c]) for c in df.columns}


def analysis_dict(a, frames: bool = False) -> dict:
    """One device's analysis as JSON-ready values; steps and gaps columnar. With `frames`, the
    two stay DataFrames for json_chunks to write a column at a time. A metrics-only analysis
    (no CUDA trace) has its summary and steps alone."""
    if a.kind == METRICS:
        return {"summary": plain(a.summary), "steps": a.steps if frames else columns(a.steps)}
    return {
        "summary": plain(a.summary),
        "steps": a.steps if frames else columns(a.steps),
        "gaps": a.gaps if frames else columns(a.gaps),
        "streams": {
            "per_stream": records(a.streams),
            "pairs": records(a.pairs),
            "checks": records(a.checks),
        },
        "syncs": records(a.syncs),
        "host": host_frame(a) if frames else columns(host_frame(a)),
    }


def host_frame(a) -> pd.DataFrame:
    """The host table, one row a step and row (METRICS.md, "Host time"), empty where the
    analysis has none (a stored one)."""
    if a.host is None:
        return pd.DataFrame(columns=HOST_COLUMNS)
    return a.host[HOST_COLUMNS]


HOST_COLUMNS = ["step_row", "step", "thread", "name", "kind", "calls", "python_ns", "cuda_ns",
                "sync_ns", "ns", "forward_ns"]


def _json_chunks(value, indent: str, depth: int):
    """JSON text in pieces: objects one key a line down to the columns, each column one line,
    written by pandas' C encoder (a million values in a tenth of a second; `json.dumps` with
    `indent` takes its pure-Python path, and a list of a million dicts takes gigabytes)."""
    inner = indent + " "
    if isinstance(value, pd.DataFrame):
        last = len(value.columns) - 1

        def column(i: int) -> str:
            series = value.iloc[:, i]
            # integers by render/csv_text.py (the same digits, in a third of the time)
            text = (int_list(series) if len(series) > JSON_INTS_MIN and is_int(series)
                    else series.to_json(orient="values", double_precision=15))
            return (f"{inner}{json.dumps(value.columns[i])}: " + text
                    + (",\n" if i < last else "\n"))

        yield "{\n"
        yield from map(column, range(len(value.columns)))
        yield indent + "}"
    elif isinstance(value, dict) and depth < 3 and value:
        yield "{\n"
        for i, (key, v) in enumerate(value.items()):
            yield f"{inner}{json.dumps(key)}: "
            yield from _json_chunks(v, inner, depth + 1)
            yield ",\n" if i < len(value) - 1 else "\n"
        yield indent + "}"
    else:
        yield json.dumps(value, allow_nan=False)


def json_chunks(analyses: list, table: str | None = None):
    """`analyze --format json` in pieces, to be written one after the other; `table` (--table):
    that table alone, under its key (`{"gaps": {...}}`)."""
    def document(a) -> dict:
        whole = analysis_dict(a, frames=True)
        if table is None:
            return whole
        if table not in whole:
            raise TraceError(f"--table {table}: a capture of GPU metrics without a CUDA trace "
                             "has no gaps, streams, syncs or host table; --table steps gives "
                             "its per-step metrics")
        return {table: whole[table]}

    if len(analyses) == 1:
        yield from _json_chunks(document(analyses[0]), "", 1)
    else:
        devices = {str(a.device): document(a) for a in analyses}
        yield from _json_chunks({"devices": devices}, "", -1)
    yield "\n"


def to_json(analyses: list, table: str | None = None) -> str:
    return "".join(json_chunks(analyses, table))


TABLES = ("steps", "gaps", "streams", "syncs", "host")
CSV_CHUNK_ROWS = 200_000


def _is_int(series: pd.Series) -> bool:
    """numpy integers (never NA; the nullable Int64 of the steps table goes through pandas)."""
    return isinstance(series.dtype, np.dtype) and series.dtype.kind in "iu"


def _csv_fast(series: pd.Series) -> bool:
    """Columns that csv_chunks formats exactly as to_csv does (render/csv_text.py): numpy
    integers, strings and categories (floats and nullable integers, in the small tables only, go
    through pandas)."""
    return (_is_int(series) or series.dtype == object
            or pd.api.types.is_string_dtype(series.dtype)
            or isinstance(series.dtype, pd.CategoricalDtype))


def csv_chunks(analyses: list, table: str = "steps"):
    """`analyze --format csv`: one table (steps, gaps, streams, syncs or host), one row per step,
    gap, stream, sync site or step and host row, and device, in pieces of CSV_CHUNK_ROWS rows
    (a million gaps in a second, render/csv_text.py: pandas' to_csv takes seconds)."""
    if table != "steps" and any(a.kind == METRICS for a in analyses):
        raise TraceError(f"--table {table}: a capture of GPU metrics without a CUDA trace has no "
                         "gaps, streams, syncs or host table; --table steps prints its per-step "
                         "metrics")
    frames = {"steps": lambda a: a.steps, "gaps": lambda a: a.gaps, "streams": lambda a: a.streams,
              "syncs": lambda a: a.syncs, "host": host_frame}
    out = pd.concat([frames[table](a).assign(device=a.device) for a in analyses],
                    ignore_index=True)
    if not all(_csv_fast(out[c]) for c in out.columns):
        yield out.to_csv(index=False)
        return
    yield ",".join(csv_field(str(c)) for c in out.columns) + "\n"

    def rows(first: int) -> str:
        chunk = out.iloc[first:first + CSV_CHUNK_ROWS]
        try:
            return csv_rows(chunk)
        except Unwritable:
            return chunk.to_csv(index=False, header=False)

    yield from map(rows, range(0, len(out), CSV_CHUNK_ROWS))


def to_csv(analyses: list, table: str = "steps") -> str:
    return "".join(csv_chunks(analyses, table))
