"""compare's host table: the runs' host tables side by side, one line a row of named code (ms a
step, mean), under each run's host period, named share and what the forward as one CUDA graph
would leave (METRICS.md, "Host time"). Stored runs (the database) carry their rows as JSON."""

import json

import pandas as pd

from ..render.host import cut_row, short_row
from ..render.markdown import md_table
from ..render.text import TEXT_WIDTH

# Rows shown: each run's largest, the first run's order first.
ROWS_SHOWN = 8
FIRST_WIDTH = 28


def _host(a) -> dict | None:
    h = a.summary.get("host")
    if not isinstance(h, dict) or not h.get("steps"):
        return None
    out = dict(h)
    for key in ("rows", "bounds"):
        if isinstance(out.get(key), str):  # a stored run: JSON text
            out[key] = json.loads(out[key])
    return out


# The figures over the rows of named code, and how each is said (render/host.py's words).
PERIOD, NAMED, LOWER, UPPER = ("host period (mean)", "named code", "forward as one graph, lower",
                               "forward as one graph, upper")


def host_comparison(labels: list, analyses: list) -> pd.DataFrame | None:
    """One row a figure of the side-by-side host table, one column a run, numbers: `line` (its
    name), `unit` ("ns", a mean a step; "share", of the host period), then each run's value (NaN
    where the run has none): the host period, the named share, the bound with the forward as
    one CUDA graph (lower and upper), then each row of named code shown (each run's largest, the
    first run's order first). None where no run has a host table."""
    hosts = [_host(a) for a in analyses]
    if not any(hosts):
        return None
    names = []
    for h in hosts:
        for r in (h or {}).get("rows", [])[:ROWS_SHOWN]:
            if r["name"] not in names:
                names.append(r["name"])
    lines = {PERIOD: ("ns", [h and h.get("period_ns_mean") for h in hosts]),
             NAMED: ("share", [h and h.get("named_share") for h in hosts]),
             LOWER: ("ns", [_bound(h, "lower_ns") for h in hosts]),
             UPPER: ("ns", [_bound(h, "upper_ns") for h in hosts])}
    for name in names:
        lines[short_row(name)] = ("ns", [_row(h, name) for h in hosts])
    table = pd.DataFrame({"line": list(lines), "unit": [u for u, _ in lines.values()]})
    for i, label in enumerate(labels):
        table[label] = pd.array([v[i] for _, v in lines.values()], dtype="Float64")
    return table


def _row(h: dict | None, name: str):
    found = [r for r in (h or {}).get("rows", []) if r["name"] == name]
    return found[0]["ns"] if found else None


def _bound(h: dict | None, key: str):
    bounds = [b for b in (h or {}).get("bounds") or [] if b["scenario"].startswith("forward as")]
    return bounds[0][key] if bounds else None


def _cell(value, unit: str) -> str:
    if value is None or pd.isna(value):
        return "–"
    return f"{value:.1%}" if unit == "share" else f"{value / 1e6:.2f}"


def display(table: pd.DataFrame) -> pd.DataFrame:
    """The table as the text and Markdown show it: ms a step and shares as text, the bound's
    lower and upper on one line (`1.01-1.10`)."""
    runs = list(table.columns[2:])
    rows = {}
    for _, r in table.iterrows():
        if r["line"] == UPPER:
            continue
        if r["line"] == LOWER:
            up = table.loc[table["line"] == UPPER].iloc[0]
            rows["forward as one graph"] = [
                "–" if pd.isna(r[c]) else f"{_cell(r[c], 'ns')}-{_cell(up[c], 'ns')}"
                for c in runs]
            continue
        rows[r["line"]] = [_cell(r[c], r["unit"]) for c in runs]
    return pd.DataFrame({"": list(rows), **{c: [v[i] for v in rows.values()]
                                           for i, c in enumerate(runs)}})


def to_text(table: pd.DataFrame) -> str:
    """The side-by-side host table in TEXT_WIDTH columns (runs beyond it in further tables)."""
    table = display(table)
    widths = [max(len(str(c)), *(len(str(v)) for v in table[c])) for c in table.columns[1:]]
    groups, group, used = [], [], FIRST_WIDTH
    for i, w in enumerate(widths):
        if group and used + w + 2 > TEXT_WIDTH:
            groups.append(group)
            group, used = [], FIRST_WIDTH
        group.append(i + 1)
        used += w + 2
    groups.append(group)
    out = []
    for g in groups:
        cols = [table.columns[i] for i in g]
        lines = ["host ms a step (mean)".ljust(FIRST_WIDTH)
                 + "".join(f"  {str(c):>{widths[i - 1]}}" for c, i in zip(cols, g, strict=True))]
        for k in range(len(table)):
            first = str(table.iloc[k, 0])
            first = cut_row(first, FIRST_WIDTH)
            lines.append(first.ljust(FIRST_WIDTH) + "".join(
                f"  {str(table.iloc[k, i]):>{widths[i - 1]}}" for i in g))
        out.append("\n".join(lines))
    return "\n\n".join(out)


def to_markdown(table: pd.DataFrame) -> str:
    table = display(table)
    return ("Host time a step (ms, mean; METRICS.md, \"Host time\"):\n\n"
            + md_table(["", *table.columns[1:]], table.itertuples(index=False)))
