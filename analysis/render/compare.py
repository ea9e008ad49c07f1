"""The comparison's tables as text and Markdown (measures/compare.py computes them): the runs as
columns (one row a run for many), the spread between runs, the order flips.
"""

import textwrap

import numpy as np
import pandas as pd

from ..measures.compare import untraced_figure
from ..measures.summary import CAUSES
from ..render.report import md_table, sync_note
from ..render.text import STEPS_FROM_WORD


def _apart(a, b) -> bool | None:
    """Whether two (lo, hi) intervals are disjoint; None where either is missing."""
    if not isinstance(a, tuple | list) or not isinstance(b, tuple | list):
        return None
    return a[1] < b[0] or b[1] < a[0]


def order_flips(table: pd.DataFrame) -> list:
    """One line per pair of runs that the traced GPU period orders one way and the untraced
    figure the other (METRICS.md, "order flip"): `order flip:` where each order is outside its
    noise (the traced periods' 95% CIs apart, and the untraced spreads over runs or processes
    apart), else `flip within noise:`, with the reason on the lines under it."""
    untraced, name = untraced_figure(table)
    if untraced is None:
        return []
    traced = pd.to_numeric(table["period_ns_median"], errors="coerce") / 1e6
    spread_key = "untraced_period_spread_ms" if name == "events" else "untraced_bench_spread_ms"
    spreads = list(table[spread_key]) if spread_key in table else [None] * len(table)
    cis = list(table["period_ns_median_ci"]) if "period_ns_median_ci" in table \
        else [None] * len(table)
    labels = list(table["label"])
    lines = []
    for i in range(len(table)):
        for j in range(i + 1, len(table)):
            dt, du = traced[i] - traced[j], untraced[i] - untraced[j]
            if dt * du >= 0:
                continue
            fast, slow = (i, j) if dt < 0 else (j, i)
            text = (f"{labels[fast]} < {labels[slow]} traced ({traced[fast]:.3f} vs "
                    f"{traced[slow]:.3f} ms), untraced {untraced[fast]:.3f} vs "
                    f"{untraced[slow]:.3f}")
            traced_apart = _apart(*(None if cis[k] is None else (cis[k][0], cis[k][1])
                                    for k in (fast, slow)))
            untraced_apart = _apart(spreads[fast], spreads[slow])
            if traced_apart and untraced_apart:
                lines.append(f"order flip: {text} ({name})")
                continue
            why = []
            if traced_apart is None:
                why.append("no traced CI")
            elif not traced_apart:
                why.append("traced 95% CIs overlap")
            if untraced_apart is None:
                why.append("no untraced spread")
            elif not untraced_apart:
                why.append("untraced spreads overlap ({:.3f}–{:.3f} and {:.3f}–{:.3f} ms)".format(
                    *spreads[fast], *spreads[slow]))
            # The pair on the first line; the untraced figure's name and why, indented below.
            lines.append(f"flip within noise: {text}\n" + textwrap.fill(
                f"({name}) " + "; ".join(why), TEXT_WIDTH, initial_indent="  ",
                subsequent_indent="  ", break_on_hyphens=False))
    return lines


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
        *_origin_rows(rows),
        ("GPU period ms/step [95% CI]",
         _cis(series, firsts, "period_ns_median", 1e6, 3)),
        ("host step ms [95% CI]",
         _cis(series, firsts, "step_cpu_ns_median", 1e6, 3)),
        ("GPU busy (of window)", [_opt(r["busy_share_of_window"], ".1%") for r in rows]),
        ("bubble median µs [95% CI]",
         _cis(series, firsts, "bubble_ns_median", 1e3, 1)),
        ("bubble p90 µs", [_opt(None if r["bubble_ns_p90"] is None
                                else r["bubble_ns_p90"] / 1e3, ".1f") for r in rows]),
    ]
    out += [(f"idle {c} ms/step (mean)", [_opt(_scaled(r[f"idle_{c}_ns_per_step"], 1e6), ".3f")
                                   for r in rows]) for c in CAUSES]
    out.append(("sync idle (of window)", [_opt(r["sync_idle_share_of_window"], ".1%")
                                          for r in rows]))
    # From run.json where the harness and profile script recorded them; left out when no run has.
    timing = [
        ("traced ms/step (run.json)", [_opt(r["traced_ms_per_step"], ".2f") for r in rows]),
        ("untraced ms/step (run.json)", [_opt(r["untraced_ms_per_step"], ".2f") for r in rows]),
        ("profiler overhead", [_opt(r["profiler_overhead"], ".1%") for r in rows]),
    ]
    twin = [
        ("untraced period ms (events)",
         [_opt(_scaled(r["untraced_period_ns_median"], 1e6), ".3f") for r in rows]),
        ("untraced bubble µs (events)",
         [_opt(_scaled(r["untraced_bubble_ns_median"], 1e3), ".1f") for r in rows]),
        # "noise": the twin's runs disagree by more than the profiler's effect (METRICS.md).
        ("profiler's share of bubble",
         ["noise" if _true(r.get("untraced_profiler_bubble_share_within_noise"))
          else _opt(r["untraced_profiler_bubble_share"], ".1%") for r in rows]),
        ("rank traced / untraced", [f"{r['traced_rank']} / {r['untraced_rank']}"
                                    if r["untraced_rank"] is not None else "n/a" for r in rows]),
    ]
    return out + [(name, cells) for name, cells in timing + twin if set(cells) != {"n/a"}]


def _origin_rows(rows: list) -> list:
    """Where the steps came from, where some run's are not NVTX ranges; the threads and each
    one's median GPU period, where some run has several threads with steps."""
    out = []
    if any(r.get("steps_from", "nvtx") != "nvtx" for r in rows):
        out.append(("steps from", [STEPS_FROM_WORD.get(r.get("steps_from"), "NVTX")
                                   for r in rows]))
    if any((r.get("threads") or 1) > 1 for r in rows):
        out.append(("threads", [str(r.get("threads") or 1) for r in rows]))
        out.append(("period ms by thread", [_by_thread(r) for r in rows]))
    return out


def _by_thread(row: dict) -> str:
    """Each thread's median GPU period, in the order of the threads' first steps."""
    periods = row.get("period_ns_median_by_thread") or {"": row["period_ns_median"]}
    return " / ".join(_opt(_scaled(v, 1e6), ".3f") for v in periods.values())


def _true(value) -> bool:
    """A flag as compare's table holds it: True, 1 or 1.0 (from the database); None or NaN
    where the run has no twin."""
    return bool(_scaled(value, 1))


def _scaled(value, scale: float):
    return None if value is None or (isinstance(value, float) and np.isnan(value)) \
        else value / scale


def legend(table: pd.DataFrame, rule: str = "the first run") -> str:
    """The line under the table: which run is the baseline, by what rule, and what ~ and *
    say of the others."""
    return (f"baseline: {table['label'].iloc[0]} ({rule}; --baseline LABEL picks another); ~ "
            "within noise of it (95% bootstrap CI of the difference of medians contains 0), * "
            "a difference beyond noise; a row with a [95% CI] is a median over the steps, "
            "(mean) the mean over them")


# A terminal of 100 columns reads every table the CLI prints.
TEXT_WIDTH = 100


def _column_groups(widths: list, width: int | None) -> list:
    """Run columns (1..n) in consecutive groups that fit `width` beside the metric column."""
    groups, current, used = [], [], widths[0]
    for i in range(1, len(widths)):
        if current and width is not None and used + 2 + widths[i] > width:
            groups.append(current)
            current, used = [], widths[0]
        current.append(i)
        used += 2 + widths[i]
    return groups + [current]


def to_text(table: pd.DataFrame, width: int | None = TEXT_WIDTH,
            rule: str = "the first run") -> str:
    """The runs as columns, split into tables of at most `width` columns, each repeating the
    metric names (None: one table however wide)."""
    rows = display_rows(table)
    header = ["", *table["label"]]
    cells = [header] + [[name, *values] for name, values in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    blocks = []
    for group in _column_groups(widths, width):
        keep = [0, *group]
        blocks.append("\n".join("  ".join(row[i].ljust(widths[i]) for i in keep).rstrip()
                                 for row in cells))
    said = legend(table, rule)
    said = said if width is None else textwrap.fill(said, width)
    # Each note starts its line (what a grep for `order flip:` finds); one longer than the width
    # goes on, indented, on the lines under it.
    notes = [*order_flips(table), _sync_note(table), *work_note(table)]
    if width is not None:
        notes = [wrapped(note, width) for note in notes]
    return "\n\n".join(blocks + ["\n".join([said, *notes])])


def wrapped(note: str, width: int = TEXT_WIDTH) -> str:
    """A note whose lines are longer than `width` wrapped, each going on indented under it."""
    return "\n".join(textwrap.fill(part, width, subsequent_indent="  ", break_on_hyphens=False)
                     for part in note.split("\n"))


def work_note(table: pd.DataFrame) -> list:
    """The line that says the runs compute different steps (measures.compare.work_differences),
    where they do: their ranks and differences set unlike steps side by side."""
    work = table["work"] if "work" in table.columns else None
    if work is None or work.isna().all():
        return []
    keys = [part.split("=")[0] for part in str(work.dropna().iloc[0]).split()]
    values = {k: list(dict.fromkeys(str(w).split()[i].split("=", 1)[1]
                                     for w in work.dropna())) for i, k in enumerate(keys)}
    differ = "; ".join(f"{k} {', '.join(v)}" for k, v in values.items())
    return [f"note: the runs compute different steps ({differ}): ranks and differences set "
            "unlike steps side by side"]


def _sync_note(table: pd.DataFrame) -> str:
    return sync_note(bool(pd.to_numeric(table["untraced_bubble_ns_median"],
                                        errors="coerce").notna().any()))


def to_markdown(table: pd.DataFrame, width: int | None = TEXT_WIDTH,
                rule: str = "the first run") -> str:
    """The runs as columns of Markdown tables of at most `width` characters a line, each
    repeating the metric names (None: one table)."""
    cells = [["", *table["label"]]] + [[name, *values] for name, values in display_rows(table)]
    # A Markdown cell is its text and three characters of "| " and " ".
    widths = [max(len(row[i]) for row in cells) + 1 for i in range(len(cells[0]))]
    blocks = [md_table([cells[0][i] for i in (0, *group)],
                       [[row[i] for i in (0, *group)] for row in cells[1:]])
              for group in _column_groups(widths, None if width is None else width - 3)]
    notes = [legend(table, rule), *(f"**{line}**" if line.startswith("order flip") else line
                       for line in order_flips(table)), _sync_note(table), *work_note(table)]
    return "\n\n".join(blocks + notes) + "\n"


def between_runs_text(table: pd.DataFrame) -> str:
    lines = ["Between runs (CIs from the spread between runs of one configuration, not the "
             "steps of one):"]
    for _, r in table.iterrows():
        lo, hi = r["period_ns_ci"]
        text = (f"  {r['label']}: {r['runs']} runs, {r['period_ns_median'] / 1e6:.3f} ms/step "
                f"[{lo / 1e6:.3f}, {hi / 1e6:.3f}]")
        if r["vs_first_ci"] is not None:
            d_lo, d_hi = r["vs_first_ci"]
            verdict = "within noise" if r["within_noise"] else "beyond noise"
            text += f"; vs first [{d_lo / 1e6:+.3f}, {d_hi / 1e6:+.3f}] {verdict}"
        lines.append(text)
    return "\n".join(lines)


# Many runs: one row a run (sweeps of tens of runs), the first run still the baseline.
ROWS_FROM = 8
ROW_COLUMNS = (
    ("steps", lambda r: str(r["steps"])),
    ("period ms", lambda r: _opt(_scaled(r["period_ns_median"], 1e6), ".3f")
     + _noise(r, "period_ns_median")),
    ("host ms", lambda r: _opt(_scaled(r["step_cpu_ns_median"], 1e6), ".3f")
     + _noise(r, "step_cpu_ns_median")),
    ("busy", lambda r: _opt(r["busy_share_of_window"], ".1%")),
    ("bubble µs", lambda r: _opt(_scaled(r["bubble_ns_median"], 1e3), ".1f")
     + _noise(r, "bubble_ns_median")),
    ("idle s/h/q", lambda r: "/".join(
        _opt(_scaled(r[f"idle_{c}_ns_per_step"], 1e6), ".2f") for c in ("sync", "host", "queued"))),
    ("sync idle", lambda r: _opt(r["sync_idle_share_of_window"], ".1%")),
    ("untraced", lambda r: _opt(r["untraced_ms_per_step"], ".3f")),
)
TERMINAL_COLUMNS = 100


def _noise(row: dict, key: str) -> str:
    flag = row.get(f"{key}_within_noise")
    return "" if flag is None or row["_first"] else (" ~" if flag else " *")


def to_text_rows(table: pd.DataFrame, rule: str = "the first run") -> str:
    """One row a run, the numbers within 100 characters; a label is never cut: where the
    longest does not fit before the numbers, the labels go last on each line."""
    rows = [dict(r, _first=i == 0) for i, r in enumerate(table.to_dict("records"))]
    columns = [(name, [cell(r) for r in rows]) for name, cell in ROW_COLUMNS]
    columns = [(n, cells) for n, cells in columns if set(cells) != {"n/a"}]
    widths = [max(len(n), *(len(c) for c in cells)) for n, cells in columns]
    room = TERMINAL_COLUMNS - sum(w + 2 for w in widths)
    labels = [str(r["label"]) for r in rows]
    label_width = max(len("run"), *(len(x) for x in labels))
    first = label_width <= room
    head = [n.rjust(w) for (n, _), w in zip(columns, widths, strict=True)]
    lines = ["  ".join(["run".ljust(label_width), *head] if first else [*head, "run"])]
    for i, label in enumerate(labels):
        cells = [c[i].rjust(w) for (_, c), w in zip(columns, widths, strict=True)]
        line = [label.ljust(label_width), *cells] if first else [*cells, label]
        lines.append("  ".join(line).rstrip())
    note = ("medians (ms/step, µs); idle s/h/q: ms a step by cause sync/host/queued (the mean "
            "over the steps); sync idle: the sync's idle time as a share of the window, as "
            "traced; untraced: ms/step from run.json")
    return "\n".join([*lines, "", wrapped(note), wrapped(legend(table, rule)),
                      *(wrapped(n) for n in [*order_flips(table), *work_note(table)])])


def csv_table(table: pd.DataFrame) -> str:
    """compare's table as CSV: every column, an interval (lo, hi) as `_lo` and `_hi` columns,
    dicts (per thread) as JSON text."""
    import json

    out = {}
    for column in table.columns:
        values = list(table[column])
        if any(isinstance(v, tuple | list) and len(v) == 2 for v in values):
            out[f"{column}_lo"] = [v[0] if isinstance(v, tuple | list) else None for v in values]
            out[f"{column}_hi"] = [v[1] if isinstance(v, tuple | list) else None for v in values]
        elif any(isinstance(v, dict) for v in values):
            out[column] = [json.dumps(v) if isinstance(v, dict) else v for v in values]
        else:
            out[column] = values
    return pd.DataFrame(out).to_csv(index=False)
