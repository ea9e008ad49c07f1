"""Variants side by side, with bootstrap confidence intervals on the per-step medians.

A difference from the first run is "within noise" when the 95% interval of the difference of
medians (steps resampled with replacement, seeded) contains zero.
"""

import numpy as np
import pandas as pd

from analysis.report import md_table
from analysis.summary import CAUSES

BOOTSTRAP_SAMPLES = 2000
SEED = 20261130
# Per-step columns whose medians are compared, and the summary key each one's median is.
COMPARED = {"period_ns": "period_ns_median", "cpu_ns": "step_cpu_ns_median",
            "bubble_ns": "bubble_ns_median"}


def bootstrap_medians(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    picks = rng.integers(0, len(values), size=(BOOTSTRAP_SAMPLES, len(values)))
    return np.median(values[picks], axis=1)


def _values(steps: pd.DataFrame, column: str) -> np.ndarray:
    return steps[column].dropna().to_numpy(dtype=np.float64)


def compare(labels: list, analyses: list, runs: list) -> pd.DataFrame:
    """One row per run: headline numbers, CIs, difference from the first run, profiler overhead.
    `analyses` holds one DeviceAnalysis per run (the device compared)."""
    rng = np.random.default_rng(SEED)
    boots = [{c: bootstrap_medians(v, rng) if len(v := _values(a.steps, c)) else None
              for c in COMPARED} for a in analyses]
    rows = []
    for label, a, run, boot in zip(labels, analyses, runs, boots, strict=True):
        s = a.summary
        row = {"label": label, "device": a.device, "steps": s["steps"],
               "gpu_util": s["gpu_util"], "bubble_ns_p90": s["bubble_ns_p90"],
               "sync_free_speedup": s["sync_free_speedup"]}
        for column, key in COMPARED.items():
            row[key] = s[key]
            b, base = boot[column], boots[0][column]
            row[f"{key}_ci"] = None if b is None else tuple(np.percentile(b, [2.5, 97.5]))
            if b is None or base is None:
                row[f"{key}_vs_first_ci"], row[f"{key}_within_noise"] = None, None
            else:
                lo, hi = np.percentile(b - base, [2.5, 97.5])
                row[f"{key}_vs_first_ci"] = (float(lo), float(hi))
                row[f"{key}_within_noise"] = bool(lo <= 0 <= hi)
        for cause in CAUSES:
            row[f"idle_{cause}_ns"] = s["idle_ns_by_cause"][cause]
        traced, untraced = run.traced_ms_per_step(), run.untraced_ms_per_step()
        row["traced_ms_per_step"] = traced
        row["untraced_ms_per_step"] = untraced
        row["profiler_overhead"] = traced / untraced - 1 if traced and untraced else None
        rows.append(row)
    return pd.DataFrame(rows)


def _median_ci(row: pd.Series, key: str, first: bool, scale: float, digits: int) -> str:
    value, ci = row[key], row[f"{key}_ci"]
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "n/a"
    text = f"{value / scale:.{digits}f} [{ci[0] / scale:.{digits}f}, {ci[1] / scale:.{digits}f}]"
    if not first and row[f"{key}_within_noise"] is not None:
        text += " ~" if row[f"{key}_within_noise"] else " *"
    return text


def _cis(series: list, firsts: list, key: str, scale: float, digits: int) -> list:
    return [_median_ci(r, key, f, scale, digits) for r, f in zip(series, firsts, strict=True)]


def _opt(value, fmt: str) -> str:
    return "n/a" if value is None or (isinstance(value, float) and np.isnan(value)) \
        else format(value, fmt)


def display_rows(table: pd.DataFrame) -> list:
    """(metric, one string per run) rows, for the text and Markdown tables."""
    firsts = [i == 0 for i in range(len(table))]
    rows = table.to_dict("records")
    series = [pd.Series(r) for r in rows]
    out = [
        ("steps", [str(r["steps"]) for r in rows]),
        ("GPU period ms/step [95% CI]",
         _cis(series, firsts, "period_ns_median", 1e6, 3)),
        ("host step ms [95% CI]",
         _cis(series, firsts, "step_cpu_ns_median", 1e6, 3)),
        ("GPU busy", [_opt(r["gpu_util"], ".1%") for r in rows]),
        ("bubble median µs [95% CI]",
         _cis(series, firsts, "bubble_ns_median", 1e3, 1)),
        ("bubble p90 µs", [_opt(None if r["bubble_ns_p90"] is None
                                else r["bubble_ns_p90"] / 1e3, ".1f") for r in rows]),
    ]
    out += [(f"idle {c} ms", [f"{r[f'idle_{c}_ns'] / 1e6:.2f}" for r in rows]) for c in CAUSES]
    out.append(("sync-free speedup", [_opt(r["sync_free_speedup"], ".3f") for r in rows]))
    # From run.json where the harness and profile script recorded them; left out when no run has.
    timing = [
        ("traced ms/step (run.json)", [_opt(r["traced_ms_per_step"], ".2f") for r in rows]),
        ("untraced ms/step (run.json)", [_opt(r["untraced_ms_per_step"], ".2f") for r in rows]),
        ("profiler overhead", [_opt(r["profiler_overhead"], ".1%") for r in rows]),
    ]
    return out + [(name, cells) for name, cells in timing if set(cells) != {"n/a"}]


LEGEND = ("~ within noise of the first run (95% bootstrap CI of the difference of medians "
          "contains 0); * a difference beyond noise")


def to_text(table: pd.DataFrame) -> str:
    rows = display_rows(table)
    header = ["", *table["label"]]
    cells = [header] + [[name, *values] for name, values in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in cells]
    return "\n".join(lines + ["", LEGEND])


def to_markdown(table: pd.DataFrame) -> str:
    rows = [[name, *values] for name, values in display_rows(table)]
    return md_table(["", *table["label"]], rows) + "\n\n" + LEGEND + "\n"


# Many runs: one row a run (sweeps of tens of runs), the first run still the baseline.
ROWS_FROM = 8
ROW_COLUMNS = (
    ("steps", lambda r: str(r["steps"])),
    ("period ms", lambda r: _opt(_scaled(r["period_ns_median"], 1e6), ".3f")
     + _noise(r, "period_ns_median")),
    ("host ms", lambda r: _opt(_scaled(r["step_cpu_ns_median"], 1e6), ".3f")
     + _noise(r, "step_cpu_ns_median")),
    ("busy", lambda r: _opt(r["gpu_util"], ".1%")),
    ("bubble µs", lambda r: _opt(_scaled(r["bubble_ns_median"], 1e3), ".1f")
     + _noise(r, "bubble_ns_median")),
    ("idle s/h/q ms", lambda r: "/".join(
        f"{r[f'idle_{c}_ns'] / 1e6:.1f}" for c in ("sync", "host", "queued"))),
    ("no-sync", lambda r: _opt(r["sync_free_speedup"], ".3f")),
    ("untraced", lambda r: _opt(r["untraced_ms_per_step"], ".3f")),
)
TERMINAL_COLUMNS = 100


def _scaled(value, scale: float):
    return None if value is None or (isinstance(value, float) and np.isnan(value)) \
        else value / scale


def _noise(row: dict, key: str) -> str:
    flag = row.get(f"{key}_within_noise")
    return "" if flag is None or row["_first"] else (" ~" if flag else " *")


def to_text_rows(table: pd.DataFrame) -> str:
    """One row a run, every column fitting 100 characters (labels cut with … where needed)."""
    rows = [dict(r, _first=i == 0) for i, r in enumerate(table.to_dict("records"))]
    columns = [(name, [cell(r) for r in rows]) for name, cell in ROW_COLUMNS]
    columns = [(n, cells) for n, cells in columns if set(cells) != {"n/a"}]
    widths = [max(len(n), *(len(c) for c in cells)) for n, cells in columns]
    room = TERMINAL_COLUMNS - sum(w + 2 for w in widths)
    labels = [_cut(str(r["label"]), max(room, 12)) for r in rows]
    label_width = max(len("run"), *(len(x) for x in labels))
    head = ["run".ljust(label_width)] + [n.rjust(w) for (n, _), w in zip(columns, widths,
                                                                          strict=True)]
    lines = ["  ".join(head)]
    for i, label in enumerate(labels):
        cells = [c[i].rjust(w) for (_, c), w in zip(columns, widths, strict=True)]
        lines.append("  ".join([label.ljust(label_width), *cells]).rstrip())
    note = ("medians (ms/step, µs); idle s/h/q: by cause sync/host/queued; no-sync: the "
            "sync-free speedup;\nuntraced: ms/step from run.json; ~ within the first run's "
            "noise, * beyond it (95% bootstrap CI)")
    return "\n".join([*lines, "", note])


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"
