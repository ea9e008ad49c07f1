"""Formatting of analyses: text a person reads in ten seconds, JSON for tools, CSV and Markdown.

Numbers stay in ns until here; this module converts them for people (µs, ms, %).
"""

import json
import math
import os
import textwrap

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..render.palette import LEDGER_WORDS
from ..measures.analysis import METRICS
from ..measures.summary import CAUSES, LEDGER, by_thread
from ..measures.syncs import UNKNOWN


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
    }


def _json_chunks(value, indent: str, depth: int):
    """JSON text in pieces: objects one key a line down to the columns, each column one line,
    written by pandas' C encoder (a million values in a tenth of a second; `json.dumps` with
    `indent` takes its pure-Python path, and a list of a million dicts takes gigabytes)."""
    inner = indent + " "
    if isinstance(value, pd.DataFrame):
        last = len(value.columns) - 1

        def column(i: int) -> str:
            return (f"{inner}{json.dumps(value.columns[i])}: "
                    + value.iloc[:, i].to_json(orient="values", double_precision=15)
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


TABLES = ("steps", "gaps", "streams", "syncs")
CSV_CHUNK_ROWS = 200_000


def _csv_field(text: str) -> str:
    """A string as pandas' to_csv writes it (the csv module's QUOTE_MINIMAL)."""
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


# A column with fewer distinct values than CSV_FEW in its first CSV_SAMPLE rows is formatted
# once per distinct value (steps, streams, threads, causes, kernel names repeat a million times).
CSV_SAMPLE = 10_000
CSV_FEW = 1_000


def _is_int(series: pd.Series) -> bool:
    """numpy integers (never NA; the nullable Int64 of the steps table goes through pandas)."""
    return isinstance(series.dtype, np.dtype) and series.dtype.kind in "iu"


def _csv_fast(series: pd.Series) -> bool:
    """Columns that csv_chunks formats exactly as to_csv does: numpy integers, strings and
    categories (floats and nullable integers, in the small tables only, go through pandas)."""
    return (_is_int(series) or series.dtype == object
            or pd.api.types.is_string_dtype(series.dtype)
            or isinstance(series.dtype, pd.CategoricalDtype))


def _csv_cells(series: pd.Series) -> list:
    """One column's CSV cells, without a Python call per value: repeating values are formatted
    once each, other integers by pandas' C JSON encoder (the same digits as to_csv)."""
    if _is_int(series) and series.iloc[:CSV_SAMPLE].nunique() >= CSV_FEW:
        return series.to_json(orient="values")[1:-1].split(",") if len(series) else []
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    cells = [_csv_field(str(u)) for u in uniques.tolist()]
    # Code -1 (NA) takes the appended empty cell, as to_csv writes NA.
    return np.array(cells + [""], dtype=object)[codes].tolist()


def csv_chunks(analyses: list, table: str = "steps"):
    """`analyze --format csv`: one table (steps, gaps, streams or syncs), one row per step, gap,
    stream or sync site, and device, in pieces of CSV_CHUNK_ROWS rows (a million gaps in a
    second: pandas' to_csv takes seconds)."""
    if table != "steps" and any(a.kind == METRICS for a in analyses):
        raise TraceError(f"--table {table}: a capture of GPU metrics without a CUDA trace has no "
                         "gaps, streams or syncs; --table steps prints its per-step metrics")
    frames = {"steps": lambda a: a.steps, "gaps": lambda a: a.gaps, "streams": lambda a: a.streams,
              "syncs": lambda a: a.syncs}
    out = pd.concat([frames[table](a).assign(device=a.device) for a in analyses],
                    ignore_index=True)
    if not all(_csv_fast(out[c]) for c in out.columns):
        yield out.to_csv(index=False)
        return
    yield ",".join(_csv_field(str(c)) for c in out.columns) + "\n"

    def rows(first: int) -> str:
        chunk = out.iloc[first:first + CSV_CHUNK_ROWS]
        cells = [_csv_cells(chunk[c]) for c in chunk.columns]
        return "\n".join(map(",".join, zip(*cells, strict=True))) + "\n"

    yield from map(rows, range(0, len(out), CSV_CHUNK_ROWS))


def to_csv(analyses: list, table: str = "steps") -> str:
    return "".join(csv_chunks(analyses, table))


def us(ns) -> str:
    return "n/a" if ns is None else f"{ns / 1e3:.1f} µs"


def ms(ns) -> str:
    return "n/a" if ns is None else f"{ns / 1e6:.2f} ms"


def pct(fraction) -> str:
    return "n/a" if fraction is None else f"{fraction:.1%}"


def shares(parts: dict, total: int, names: tuple, words: dict | None = None) -> str:
    if total <= 0:
        return "no idle time"
    pairs = sorted(((parts[n], n) for n in names), reverse=True)
    shown = [(v, n) for v, n in pairs if v or n != "unknown"]
    return "  ".join(f"{(words or {}).get(n, n)} {v / total:.1%}" for v, n in shown)


# Said wherever graph executions were recorded whole: the gaps between their nodes exist, but
# the capture cannot show them (nor the busy time inside, which counts as busy throughout).
GRAPH_NOTES = {
    "graph": "graph: gaps inside a graph are not visible; --cuda-graph-trace=node shows them",
    "mixed": "mixed: gaps inside some graphs are not visible; --cuda-graph-trace=node shows them",
}


# Where the steps came from (summary.steps_from), in words.
STEPS_FROM = {
    "nvtx": "NVTX ranges",
    "function": "calls of a traced Python function (nsys --python-functions-trace), numbered "
                "in order within their thread",
    "profiler_step": "torch.profiler's ProfilerStep#N ranges (prof.step())",
    "inferred": "inferred from the trace (no step ranges)",
}
TEXT_WIDTH = 100
LABEL_WIDTH = 17  # "  idle by cause  ": where a text line's value starts


def steps_from(s: dict) -> str | None:
    """Where the steps came from, in words, with what an inference keyed on; None for NVTX
    ranges (the default, said by nothing)."""
    source = s.get("steps_from", "nvtx")
    if source == "nvtx":
        return None
    by = s.get("steps_inferred_by")
    return STEPS_FROM[source] + (f": {by}" if by else "")


def steps_lines(s: dict, steps: pd.DataFrame) -> list:
    """Where the steps came from (unless NVTX ranges) and, where several threads have steps,
    one line a thread."""
    lines = []
    origin = steps_from(s)
    if origin:
        lines += textwrap.wrap(origin, TEXT_WIDTH, initial_indent="  steps from     ",
                               subsequent_indent=" " * LABEL_WIDTH)
    for thread, t in by_thread(steps).iterrows():
        lines.append(f"  thread         {thread}: {t['steps']} steps, {ms(t['period_ns_median'])} "
                     f"period, {us(t['bubble_ns_median'])} bubble (medians)")
    return lines


def text_summary(label: str, s: dict, schema: str, steps: pd.DataFrame | None = None) -> str:
    cover = s["check_cover_median"]
    lines = [
        f"{label}: device {s['device']}, {s['steps']} steps, {schema}",
        *steps_lines(s, steps if steps is not None else pd.DataFrame()),
        f"  step time      {ms(s['step_cpu_ns_median'])} median on the host, "
        f"{ms(s['period_ns_median'])} period on the GPU",
        f"  GPU busy       {pct(s['gpu_util'])} of a {ms(s['window_ns'])} window "
        f"({ms(s['busy_ns'])} busy, {ms(s['idle_ns'])} idle in {s['gaps']} gaps)",
        f"  bubble         {us(s['bubble_ns_median'])} median, {us(s['bubble_ns_p90'])} p90 "
        "between steps",
        f"  idle by cause  {shares(s['idle_ns_by_cause'], s['idle_ns'], CAUSES)}",
        f"  idle ledger    {shares(s['idle_ledger'], s['idle_ns'], LEDGER, LEDGER_WORDS)}",
        f"  sync idle      {pct(s['sync_idle_share'])} of the window, as traced (not what hiding "
        + ("the sync buys: see untraced)" if "untraced" in s
           else "the sync buys: no twin here)"),
        f"  streams        {s['streams']}, {ms(s['concurrent_ns'])} with two or more running; "
        f"stop checks {pct(cover)} busy (median)",
        f"  unattributed   {s['unattributed_ops']} ops launched outside the steps"
        + (f", {s['ops_without_launch_call']} without a launch call"
           if s["ops_without_launch_call"] else ""),
    ]
    if s["cuda_graph_trace"] in GRAPH_NOTES:
        lines.append(f"  CUDA graphs    {GRAPH_NOTES[s['cuda_graph_trace']]}")
    if "untraced" in s:
        u = s["untraced"]
        lines.append(f"  untraced       {ms(u['period_ns_median'])} period, "
                     f"{us(u['bubble_ns_median'])} bubble median; the profiler's share of the "
                     f"bubble: {share_text(u, 'bubble')}")
        if u.get("period_ns_spread") is not None:
            lines.append(f"                 the profiler's share of the period: "
                         f"{share_text(u, 'period')} ({u['runs']} untraced runs)")
    return "\n".join(lines + metrics_lines(s.get("gpu_metrics")) + floor_lines(s.get("floor")))


def share_text(u: dict, figure: str) -> str:
    """The profiler's share of the traced bubble or period, or "within noise" with the untraced
    runs' range where their own medians lie further apart than traced and untraced do
    (METRICS.md, "Untraced")."""
    if u.get(f"profiler_{figure}_share_within_noise"):
        fmt = us if figure == "bubble" else ms
        medians = [m for m in u[f"run_{figure}_ns_medians"] if m is not None]
        return f"within noise (untraced runs' medians {fmt(min(medians))} to {fmt(max(medians))})"
    return pct(u[f"profiler_{figure}_share"])


def floor_lines(f: dict | None) -> list:
    """The bandwidth floor (analysis/measures/floor.py), one or two lines; none without run.json's."""
    if not f or f["floor_ns_per_step"] is None:
        return []
    parts = [f"{pct(v / 100)} {what}" for v, what in (
        (f["floor_pct_of_period"], "of the GPU period"),
        (f.get("floor_pct_of_untraced_period"), "of the untraced GPU period"),
        (f["floor_pct_of_untraced"], "of the untraced step")) if v is not None]
    lines = [f"  floor          {ms(f['floor_ns_per_step'])}/step: {f['bytes_per_step'] / 1e6:.0f} "
             f"MB at the {f['copy_gbps']:.0f} GB/s copy rate (KV {f['kv_slots_read']})"]
    if parts:
        lines.append("                 the floor is " + ", ".join(parts))
    if f["dram_read_gbps"] is not None:
        lines.append(f"                 DRAM read measured {f['dram_read_gbps']:.0f} GB/s, "
                     f"{f['dram_read_gbps'] / f['copy_gbps']:.1%} of the copy rate")
    return lines


def _pct_value(v) -> str:
    return "n/a" if v is None else f"{v:.1f}%"


def metrics_lines(m: dict | None) -> list:
    """GPU metrics, time-weighted over the window (two lines; none without metrics)."""
    if not m:
        return []

    def gbps(key):
        return "" if m[f"{key}_gbps"] is None else f" ({m[f'{key}_gbps']:.0f} GB/s)"

    peak = ("GB/s unknown: no peak DRAM bandwidth for this GPU" if m["dram_peak_gbps"] is None
            else f"of a {m['dram_peak_gbps']:.0f} GB/s peak")
    return [
        f"  GPU metrics    GR active {_pct_value(m['gr_active_pct'])}, SMs active "
        f"{_pct_value(m['sm_active_pct'])}, tensor {_pct_value(m['tensor_active_pct'])} "
        f"({m['samples']} samples in the window)",
        f"  DRAM           read {_pct_value(m['dram_read_pct'])}{gbps('dram_read')}, write "
        f"{_pct_value(m['dram_write_pct'])}{gbps('dram_write')} {peak}",
    ]


def metrics_text_summary(label: str, s: dict, schema: str,
                         steps: pd.DataFrame | None = None) -> str:
    lines = [
        f"{label}: device {s['device']}, {s['steps']} steps, {schema}",
        *steps_lines(s, steps if steps is not None else pd.DataFrame()),
        "  GPU metrics only: no CUDA trace, so no gap analysis; steps are their NVTX ranges",
        f"  step time      {ms(s['step_cpu_ns_median'])} median on the host, "
        f"{ms(s['window_ns'])} window",
    ]
    if "untraced" in s:
        u = s["untraced"]
        lines.append(f"  untraced       {ms(u['period_ns_median'])} GPU period, "
                     f"{us(u['bubble_ns_median'])} bubble median (CUDA events, no profiler)")
    return "\n".join(lines + metrics_lines(s["gpu_metrics"]) + floor_lines(s.get("floor")))


def to_text(label: str, analyses: list, schema: str) -> str:
    return "\n\n".join(
        metrics_text_summary(label, a.summary, schema, a.steps)
        if a.kind == METRICS
        else "\n".join([text_summary(label, a.summary, schema, a.steps),
                        *sync_lines(a.syncs, a.summary["steps"])])
        for a in analyses)


SUMMARY_ROWS = (
    ("steps", "steps", str),
    ("step time (host, median)", "step_cpu_ns_median", ms),
    ("GPU period (median)", "period_ns_median", ms),
    ("window", "window_ns", ms),
    ("GPU busy", "gpu_util", pct),
    ("bubble median", "bubble_ns_median", us),
    ("bubble p90", "bubble_ns_p90", us),
    ("gaps", "gaps", str),
    ("sync idle share (traced)", "sync_idle_share", pct),
    ("CUDA graph trace", "cuda_graph_trace", str),
)


def md_table(header: list, rows: list) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# The untraced twin's rows (summary.untraced), where the run has one.
UNTRACED_ROWS = (
    ("untraced steps (events)", "steps", str),
    ("untraced GPU period (median)", "period_ns_median", ms),
    ("untraced bubble median", "bubble_ns_median", us),
    ("untraced bubble p90", "bubble_ns_p90", us),
    ("untraced span (median)", "span_ns_median", ms),
)


def sync_note(twin: bool) -> str:
    """What to trust for the sync, said once under a comparison: the traced share is the
    observer's picture, not the gain; `twin`: some run has an untraced twin to point at."""
    if twin:
        return "sync idle share: as traced; what hiding the sync buys: the untraced bubble (events)"
    return ("sync idle share: as traced; no run here has the untraced twin that measures what "
            "hiding it buys")


# The profiler's shares, each a number or "within noise" (share_text).
SHARE_ROWS = (("profiler's share of the bubble", "bubble"),
              ("profiler's share of the period", "period"))


def md_summary(a) -> str:
    s = a.summary
    rows = [(name, fmt(s[key])) for name, key, fmt in SUMMARY_ROWS]
    if steps_from(s):
        rows.insert(1, ("steps from", steps_from(s)))
    rows += [(f"thread {thread}", f"{t['steps']} steps, {ms(t['period_ns_median'])} period, "
              f"{us(t['bubble_ns_median'])} bubble (medians)")
             for thread, t in by_thread(a.steps).iterrows()]
    if "untraced" in s:
        rows += [(name, fmt(s["untraced"][key])) for name, key, fmt in UNTRACED_ROWS]
        rows += [(name, share_text(s["untraced"], figure)) for name, figure in SHARE_ROWS]
    rows += [(f"idle: {c}", ms(s["idle_ns_by_cause"][c])) for c in CAUSES]
    rows += [(f"ledger: {LEDGER_WORDS[p]}", ms(s["idle_ledger"][p])) for p in LEDGER]
    return md_table(["device " + str(a.device), "value"], rows)


# The per-step tables of a report: (caption, columns, the column it needs), each table only
# where the run has that column, each within 100 columns (the units are in the caption).
HOST_STEPS = ("Per step, µs: the step on the host (its NVTX range)", ("step", "cpu_ns"), "cpu_ns")
GPU_STEPS = (
    "Per step, µs: the NVTX range on the host, the step on the GPU, its idle time by ledger part",
    ("step", "ops", "cpu_ns", "period_ns", "busy_ns", "bubble_ns", "overlap_ns", "idle_wait_ns",
     "idle_host_ns", "idle_launch_ns"), "period_ns")
TWIN_STEPS = (
    "Per step, µs: traced beside the untraced twin (CUDA events in a run without the profiler)",
    ("step", "period_ns", "untraced_period_ns", "bubble_ns", "untraced_bubble_ns"),
    "untraced_period_ns")
METRIC_STEPS = (
    "Per step: GPU metrics, time-weighted over the step (% of peak; DRAM read in GB/s)",
    ("step", "gr_active_pct", "sm_active_pct", "tensor_active_pct", "dram_read_pct",
     "dram_write_pct", "dram_read_gbps"), "sm_active_pct")
STEP_HEADERS = {
    "cpu_ns": "host", "period_ns": "period", "busy_ns": "busy", "bubble_ns": "bubble",
    "overlap_ns": "overlap", **{f"idle_{p}": w for p, w in LEDGER_WORDS.items()},
    "untraced_period_ns": "untraced period", "untraced_bubble_ns": "untraced bubble",
    "gr_active_pct": "GR %", "sm_active_pct": "SMs %", "tensor_active_pct": "tensor %",
    "dram_read_pct": "DRAM rd %", "dram_write_pct": "DRAM wr %", "dram_read_gbps": "DRAM rd GB/s",
}


def _step_cells(steps: pd.DataFrame, c: str) -> list:
    """One column's cells, formatted a column at a time: no Python call per row (a report of
    thousands of steps)."""
    numeric = c.endswith(("_ns", "_pct", "_gbps"))
    values = steps[c].astype("Float64") / (1e3 if c.endswith("_ns") else 1) if numeric \
        else steps[c]
    fmt = "{:.0f}".format if c.endswith("_gbps") else "{:.1f}".format if numeric else str
    return ["" if v is pd.NA or v is None else fmt(v) for v in values.tolist()]


def md_steps(a) -> str:
    """The per-step tables the run has columns for; a metrics-only capture has its host step
    time and metrics."""
    tables = ((HOST_STEPS, METRIC_STEPS) if a.kind == METRICS
              else (GPU_STEPS, TWIN_STEPS, METRIC_STEPS))
    threads = () if by_thread(a.steps).empty else ("thread",)
    parts = []
    for caption, wanted, needed in tables:
        if needed not in a.steps.columns:
            continue
        # Where several threads have steps, each row names its thread.
        names = [*threads, *(c for c in wanted if c in a.steps.columns)]
        cells = [_step_cells(a.steps, c) for c in names]
        parts.append(caption + ":\n\n" + md_table([STEP_HEADERS.get(c, c) for c in names],
                                                  list(zip(*cells, strict=True))))
    return "\n\n".join(parts)


def md_metrics(a) -> str:
    m = a.summary.get("gpu_metrics")
    if not m:
        return ""
    rows = [(k.replace("_pct", " %").replace("_gbps", " GB/s"),
             "n/a" if m[k] is None else f"{m[k]:.1f}")
            for k in (*(f"{key}_pct" for key in ("gr_active", "sm_active", "tensor_active",
                                                  "dram_read", "dram_write")),
                      "dram_read_gbps", "dram_write_gbps", "dram_peak_gbps")]
    rows += [("peak from", m["dram_peak_source"]), ("samples", m["samples"]),
             ("averaged over", f"each step's {m['interval']}")]
    return md_table([f"GPU metrics, device {a.device}", "value"], rows)


def md_floor(a) -> str:
    f = a.summary.get("floor")
    if not f or f["floor_ns_per_step"] is None:
        return ""
    rows = [("floor per step", ms(f["floor_ns_per_step"])),
            ("bytes per step", f"{f['bytes_per_step'] / 1e6:.1f} MB (KV {f['kv_slots_read']})"),
            ("copy rate", f"{f['copy_gbps']:.0f} GB/s"),
            ("% of floor (GPU period)", _pct_value(f["floor_pct_of_period"])),
            ("% of floor (untraced GPU period)", _pct_value(f.get("floor_pct_of_untraced_period"))),
            ("% of floor (untraced step)", _pct_value(f["floor_pct_of_untraced"])),
            ("DRAM read measured", "n/a" if f["dram_read_gbps"] is None
             else f"{f['dram_read_gbps']:.0f} GB/s")]
    return md_table([f"bandwidth floor, device {a.device}", "value"], rows)


# The syncs table's text: the sites that block longest, then how many more there are.
SYNC_SITES_SHOWN = 3
TEXT_WIDTH = 100
SYNC_HINT = ("capture with `gapscope profile` (or scripts/profile.sh) to name the lines: it "
             "marks each sync")


def short_path(path: str) -> str:
    """A source file as a reader finds it: within its installed package (after `site-packages/`
    or `dist-packages/`), else relative to the working directory, else the path itself."""
    for root in ("site-packages/", "dist-packages/"):
        if root in path:
            return path.rsplit(root, 1)[1]
    try:
        return os.path.relpath(path) if os.path.isabs(path) and not os.path.relpath(
            path).startswith("..") else path
    except ValueError:
        return path


def sync_where(row) -> str:
    """A sync site as file:line in function, or why it has none."""
    if row.file == UNKNOWN:
        return "unknown (no mark)"
    return f"{short_path(row.file)}:{row.line} in {row.function}"


def os_thread(tid: int) -> int:
    """The OS thread id of a globalTid (pid << 24 | tid, as both readers write it)."""
    return int(tid) & 0xFFFFFF


def _fit(indent: str, text: str) -> str:
    """indent + text in TEXT_WIDTH columns, a long path cut from its start ("…" for it)."""
    room = TEXT_WIDTH - len(indent)
    return indent + (text if len(text) <= room else "…" + text[len(text) - room + 1:])


def sync_lines(syncs: pd.DataFrame, steps: int) -> list:
    """The blocking calls inside the steps (analysis/measures/syncs.py): totals, then the sites that
    block longest, each its line and its numbers."""
    if syncs.empty:
        return ["  syncs          no blocking call inside the steps"]
    calls = int(syncs["calls"].sum())
    lines = [f"  syncs          {calls / steps:.2f} blocking calls a step ({calls}): "
             f"{ms(int(syncs['blocked_ns'].sum()))} blocked, "
             f"{ms(int(syncs['gpu_idle_after_ns'].sum()))} GPU idle after"]
    threads = syncs["tid"].nunique() > 1
    for row in syncs.head(SYNC_SITES_SHOWN).itertuples(index=False):
        thread_steps = row.calls / row.calls_per_step
        thread = f", thread {os_thread(row.tid)}" if threads else ""
        lines += [_fit("    ", sync_where(row) + thread),
                  f"      {row.call} {row.calls_per_step:.2f}/step: {us(row.blocked_ns_median)} "
                  f"blocked (median), {us(row.gpu_idle_after_ns / thread_steps)}/step GPU idle "
                  "after"]
    if len(syncs) > SYNC_SITES_SHOWN:
        lines.append(f"    and {len(syncs) - SYNC_SITES_SHOWN} more (--format md, or csv "
                     "--table syncs)")
    if (syncs["file"] == UNKNOWN).all():
        lines.append(f"    {SYNC_HINT}")
    return lines


def md_syncs(a) -> str:
    """The syncs table, every site; a thread column where the steps ran on several."""
    syncs = a.syncs
    if syncs.empty:
        return "No blocking call inside the steps."
    threads = syncs["tid"].nunique() > 1
    header = [*(["thread"] if threads else []), "call", "where", "calls", "/step",
              "blocked µs", "median µs", "GPU idle after µs", "in call µs"]
    rows = [[*([os_thread(row.tid)] if threads else []), row.call, sync_where(row), row.calls,
             f"{row.calls_per_step:.2f}", f"{row.blocked_ns / 1e3:.1f}",
             f"{row.blocked_ns_median / 1e3:.1f}", f"{row.gpu_idle_after_ns / 1e3:.1f}",
             f"{row.gpu_idle_in_call_ns / 1e3:.1f}"]
            for row in syncs.itertuples(index=False)]
    text = f"Blocking calls inside the steps, device {a.device}:\n\n" + md_table(header, rows)
    if (syncs["file"] == UNKNOWN).all():
        text += f"\n\nNo line is known: {SYNC_HINT}."
    return text


def to_markdown(label: str, analyses: list) -> str:
    parts = [f"## {label}"]
    for a in analyses:
        if a.kind == METRICS:
            parts += ["GPU metrics only (no CUDA trace): no gap analysis.", md_metrics(a),
                      md_floor(a), md_steps(a)]
        else:
            parts.append(md_summary(a))
            if a.summary["cuda_graph_trace"] in GRAPH_NOTES:
                parts.append(f"CUDA graphs, {GRAPH_NOTES[a.summary['cuda_graph_trace']]}.")
            parts += [md_syncs(a), md_metrics(a), md_floor(a), md_steps(a)]
    return "\n\n".join(p for p in parts if p) + "\n"
