"""Formatting of analyses: text a person reads in ten seconds, JSON for tools, CSV and Markdown.

Numbers stay in ns until here; this module converts them for people (µs, ms, %).
"""

import io
import json
import math

import numpy as np
import pandas as pd

from analysis.summary import CAUSES, LEDGER


def plain(value):
    """A JSON-ready Python value: numpy scalars unwrapped, NA/NaN as None, whole floats as int."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (np.integer, int)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, (np.floating, float)):
        f = float(value)
        if math.isnan(f):
            return None
        return int(f) if f.is_integer() and abs(f) < 2**53 else f
    if isinstance(value, np.bool_):
        return bool(value)
    return value


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
    two stay DataFrames for json_chunks to write a column at a time."""
    return {
        "summary": plain(a.summary),
        "steps": a.steps if frames else columns(a.steps),
        "gaps": a.gaps if frames else columns(a.gaps),
        "streams": {
            "per_stream": records(a.streams),
            "pairs": records(a.pairs),
            "checks": records(a.checks),
        },
    }


def _json_chunks(value, indent: str, depth: int):
    """JSON text in pieces: objects one key a line down to the columns, each column one line,
    written by pandas' C encoder (a million values in a tenth of a second; `json.dumps` with
    `indent` takes its pure-Python path, and a list of a million dicts takes gigabytes)."""
    inner = indent + " "
    if isinstance(value, pd.DataFrame):
        yield "{\n"
        for i, c in enumerate(value.columns):
            yield f"{inner}{json.dumps(c)}: "
            yield value[c].to_json(orient="values", double_precision=15)
            yield ",\n" if i < len(value.columns) - 1 else "\n"
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


def json_chunks(analyses: list):
    """`analyze --format json` in pieces, to be written one after the other."""
    if len(analyses) == 1:
        yield from _json_chunks(analysis_dict(analyses[0], frames=True), "", 1)
    else:
        devices = {str(a.device): analysis_dict(a, frames=True) for a in analyses}
        yield from _json_chunks({"devices": devices}, "", -1)
    yield "\n"


def to_json(analyses: list) -> str:
    return "".join(json_chunks(analyses))


TABLES = ("steps", "gaps", "streams")


def to_csv(analyses: list, table: str = "steps") -> str:
    """One table (steps, gaps or streams), one row per step, gap or stream, and device."""
    frames = {"steps": lambda a: a.steps, "gaps": lambda a: a.gaps, "streams": lambda a: a.streams}
    out = pd.concat([frames[table](a).assign(device=a.device) for a in analyses],
                    ignore_index=True)
    buf = io.StringIO()
    out.to_csv(buf, index=False)
    return buf.getvalue()


def us(ns) -> str:
    return "n/a" if ns is None else f"{ns / 1e3:.1f} µs"


def ms(ns) -> str:
    return "n/a" if ns is None else f"{ns / 1e6:.2f} ms"


def pct(fraction) -> str:
    return "n/a" if fraction is None else f"{fraction:.1%}"


def shares(parts: dict, total: int, names: tuple, suffix: str = "") -> str:
    if total <= 0:
        return "no idle time"
    pairs = sorted(((parts[n], n) for n in names), reverse=True)
    shown = [(v, n) for v, n in pairs if v or n != "unknown"]
    return "  ".join(f"{n.removesuffix(suffix)} {v / total:.1%}" for v, n in shown)


def text_summary(label: str, s: dict, schema: str) -> str:
    speedup = s["sync_free_speedup"]
    cover = s["check_cover_median"]
    lines = [
        f"{label}: device {s['device']}, {s['steps']} steps, nsys export schema {schema}",
        f"  step time      {ms(s['step_cpu_ns_median'])} median on the host, "
        f"{ms(s['period_ns_median'])} period on the GPU",
        f"  GPU busy       {pct(s['gpu_util'])} of a {ms(s['window_ns'])} window "
        f"({ms(s['busy_ns'])} busy, {ms(s['idle_ns'])} idle in {s['gaps']} gaps)",
        f"  bubble         {us(s['bubble_ns_median'])} median, {us(s['bubble_ns_p90'])} p90 "
        "between steps",
        f"  idle by cause  {shares(s['idle_ns_by_cause'], s['idle_ns'], CAUSES)}",
        f"  idle ledger    {shares(s['idle_ledger'], s['idle_ns'], LEDGER, '_ns')}",
        f"  sync-free      at most {speedup:.3f}x faster with the sync hidden"
        if speedup else "  sync-free      n/a",
        f"  streams        {s['streams']}, {ms(s['concurrent_ns'])} with two or more running; "
        f"stop checks {pct(cover)} busy (median)",
        f"  unattributed   {s['unattributed_ops']} ops launched outside the steps"
        + (f", {s['ops_without_launch_call']} without a launch call"
           if s["ops_without_launch_call"] else ""),
    ]
    return "\n".join(lines)


def to_text(label: str, analyses: list, schema: str) -> str:
    return "\n\n".join(text_summary(label, a.summary, schema) for a in analyses)


SUMMARY_ROWS = (
    ("steps", "steps", str),
    ("step time (host, median)", "step_cpu_ns_median", ms),
    ("GPU period (median)", "period_ns_median", ms),
    ("window", "window_ns", ms),
    ("GPU busy", "gpu_util", pct),
    ("bubble median", "bubble_ns_median", us),
    ("bubble p90", "bubble_ns_p90", us),
    ("gaps", "gaps", str),
    ("sync-free speedup", "sync_free_speedup", lambda v: "n/a" if v is None else f"{v:.3f}x"),
)


def md_table(header: list, rows: list) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def md_summary(a) -> str:
    s = a.summary
    rows = [(name, fmt(s[key])) for name, key, fmt in SUMMARY_ROWS]
    rows += [(f"idle: {c}", ms(s["idle_ns_by_cause"][c])) for c in CAUSES]
    rows += [(f"ledger: {p.removesuffix('_ns')}", ms(s["idle_ledger"][p])) for p in LEDGER]
    return md_table(["device " + str(a.device), "value"], rows)


STEP_COLUMNS = ("step", "ops", "cpu_ns", "period_ns", "busy_ns", "bubble_ns", "overlap_ns",
                "idle_wait_ns", "idle_host_ns", "idle_launch_ns")


def md_steps(a) -> str:
    header = [c.replace("_ns", " (µs)") for c in STEP_COLUMNS]
    cells = []
    for c in STEP_COLUMNS:
        values = a.steps[c].astype("Float64") / 1e3 if c.endswith("_ns") else a.steps[c]
        fmt = "{:.1f}".format if c.endswith("_ns") else str
        cells.append(["" if v is pd.NA else fmt(v) for v in values.tolist()])
    return md_table(header, list(zip(*cells, strict=True)))


def to_markdown(label: str, analyses: list) -> str:
    parts = [f"## {label}"]
    for a in analyses:
        parts += [md_summary(a), md_steps(a)]
    return "\n\n".join(parts) + "\n"
