"""Analyses as Markdown (`--format md`): the summary, the syncs, the GPU metrics, the floor and
the per-step tables, each a Markdown table; `md_table` is the one Markdown table of the project.
"""

import pandas as pd

from ..measures.gaps import LEDGER_COLUMNS
from ..measures.summary import CAUSES, LEDGER
from ..render.palette import LEDGER_WORDS
from ..render.text import (
    GRAPH_NOTES,
    SYNC_HINT,
    UNKNOWN,
    by_thread,
    draft_text,
    ms_from_ns,
    no_twin_why,
    pct,
    pct_value,
    share_text,
    steps_from,
    sync_where,
    tokens_text,
    us_from_ns,
)

SUMMARY_ROWS = (
    ("steps", "steps", str),
    ("step time (host, median)", "step_cpu_ns_median", ms_from_ns),
    ("GPU period (median)", "period_ns_median", ms_from_ns),
    ("window", "window_ns", ms_from_ns),
    ("GPU busy (of window)", "busy_share_of_window", pct),
    ("bubble median", "bubble_ns_median", us_from_ns),
    ("bubble p90", "bubble_ns_p90", us_from_ns),
    ("gaps", "gaps", str),
    ("sync idle (of window, traced)", "sync_idle_share_of_window", pct),
    ("CUDA graph trace", "cuda_graph_trace", str),
)


def md_table(header, rows) -> str:
    """A Markdown table: the header's names, a rule, then each row's cells as str() prints them."""
    header = [str(h) for h in header]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def frame_md_table(df: pd.DataFrame) -> str:
    """md_table of a DataFrame: its columns as the header, its rows (index left out) as rows."""
    return md_table(df.columns, df.itertuples(index=False))


# The untraced twin's rows (summary.untraced), where the run has one.
UNTRACED_ROWS = (
    ("untraced steps (events)", "steps", str),
    ("untraced GPU period (median)", "period_ns_median", ms_from_ns),
    ("untraced bubble median", "bubble_ns_median", us_from_ns),
    ("untraced bubble p90", "bubble_ns_p90", us_from_ns),
    ("untraced span (median)", "span_ns_median", ms_from_ns),
)


def sync_note(twin: bool) -> str:
    """What to trust for the sync, said once under a comparison: the traced share is the
    observer's picture, not the gain; `twin`: some run has an untraced twin to point at."""
    if twin:
        return ("sync idle (a share of the window): as traced; what hiding the sync buys: the "
                "untraced bubble (events)")
    return ("sync idle (a share of the window): as traced; no run here has the untraced twin "
            "that measures what hiding it buys")


# The profiler's shares, each a number or "within noise" (share_text).
SHARE_ROWS = (("profiler's share of the bubble", "bubble"),
              ("profiler's share of the period", "period"))


def md_summary(a) -> str:
    s = a.summary
    rows = [(name, fmt(s[key])) for name, key, fmt in SUMMARY_ROWS]
    # Tokens and the draft (speculative decoding) after the GPU period, where known.
    rows[3:3] = [(name, text) for name, text in (("tokens", tokens_text(s)),
                                                  ("draft", draft_text(s))) if text]
    rows.insert(1, ("steps from", steps_from(s, a.steps)))
    rows += [(f"thread {thread}", f"{t['steps']} steps, {ms_from_ns(t['period_ns_median'])} "
              f"period, {us_from_ns(t['bubble_ns_median'])} bubble (medians)")
             for thread, t in by_thread(a.steps).iterrows()]
    if "untraced" in s:
        rows += [(name, fmt(s["untraced"][key])) for name, key, fmt in UNTRACED_ROWS]
        rows += [(name, share_text(s["untraced"], figure)) for name, figure in SHARE_ROWS]
    elif no_twin_why(a):
        rows.append(("untraced twin", f"none: {no_twin_why(a)}"))
    rows += [(f"{c['name']} call {c['call']}",
              f"steps {c['first_step']}-{c['last_step']}: {ms_from_ns(c['period_ns_median'])} "
              "period median" + ("" if c.get("untraced_period_ns_median") is None else
                                 f", untraced {ms_from_ns(c['untraced_period_ns_median'])}")
              + f", GPU busy {ms_from_ns(c['busy_ns_median'])}")
             for c in s.get("calls", [])]
    rows += [(f"idle: {c}", ms_from_ns(s["idle_ns_by_cause"][c])) for c in CAUSES]
    rows += [(f"ledger: {LEDGER_WORDS[p]}", ms_from_ns(s["idle_ledger"][p])) for p in LEDGER]
    return md_table(["device " + str(a.device), "value"], rows)


# The per-step tables of a report: (caption, columns, the column it needs), each table only
# where the run has that column, each within 100 columns (the units are in the caption).
HOST_STEPS = ("Per step, µs: the step on the host (its NVTX range)", ("step", "cpu_ns"), "cpu_ns")
GPU_STEPS = (
    "Per step, µs: the NVTX range on the host, the step on the GPU, its idle time by ledger part",
    ("step", "ops", "tokens", "cpu_ns", "period_ns", "busy_ns", "bubble_ns", "overlap_ns",
     *LEDGER_COLUMNS), "period_ns")
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
    "overlap_ns": "overlap", **{f"idle_{p}_ns": w for p, w in LEDGER_WORDS.items()},
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
    tables = ((HOST_STEPS, METRIC_STEPS) if not a.traced
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
    rows = [("floor per step", ms_from_ns(f["floor_ns_per_step"])),
            ("bytes per step", f"{f['bytes_per_step'] / 1e6:.1f} MB (KV {f['kv_slots_read']})"),
            ("copy rate", f"{f['copy_gbps']:.0f} GB/s"),
            ("% of floor (GPU period)", pct_value(f["floor_pct_of_period"])),
            ("% of floor (untraced GPU period)", pct_value(f.get("floor_pct_of_untraced_period"))),
            ("% of floor (untraced step)", pct_value(f["floor_pct_of_untraced"])),
            ("DRAM read measured", "n/a" if f["dram_read_gbps"] is None
             else f"{f['dram_read_gbps']:.0f} GB/s")]
    return md_table([f"bandwidth floor, device {a.device}", "value"], rows)


def md_syncs(a) -> str:
    """The syncs table, every site; a thread column where the steps ran on several."""
    syncs = a.syncs
    if syncs is None or syncs.empty:
        return "No blocking call inside the steps."
    threads = syncs["tid"].nunique() > 1
    header = [*(["thread"] if threads else []), "call", "where", "calls", "/step",
              "host blocked µs", "median", "GPU idle after µs", "idle in call µs"]
    rows = [[*([row.thread] if threads else []), row.call, sync_where(row), row.calls,
             f"{row.calls_per_step:.2f}", f"{row.blocked_ns / 1e3:.1f}",
             f"{row.blocked_ns_median / 1e3:.1f}", f"{row.gpu_idle_after_ns / 1e3:.1f}",
             f"{row.gpu_idle_in_call_ns / 1e3:.1f}"]
            for row in syncs.itertuples(index=False)]
    text = f"Blocking calls inside the steps, device {a.device}:\n\n" + md_table(header, rows)
    if (syncs["file"] == UNKNOWN).all():
        text += f"\n\nNo line is known: {SYNC_HINT}."
    return text


def to_markdown(label: str, analyses: list, more=None) -> str:
    """`more(a)`: Markdown to add after a traced analysis' syncs (render/report.py: the host
    table)."""
    parts = [f"## {label}"]
    for a in analyses:
        if not a.traced:
            parts += ["GPU metrics only (no CUDA trace): no gap analysis.", md_metrics(a),
                      md_floor(a), md_steps(a)]
        else:
            parts.append(md_summary(a))
            if a.summary["cuda_graph_trace"] in GRAPH_NOTES:
                parts.append(f"CUDA graphs, {GRAPH_NOTES[a.summary['cuda_graph_trace']]}.")
            parts += [md_syncs(a), more(a) if more else "", md_metrics(a), md_floor(a),
                      md_steps(a)]
    return "\n\n".join(p for p in parts if p) + "\n"
