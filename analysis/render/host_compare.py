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


def host_comparison(labels: list, analyses: list) -> pd.DataFrame | None:
    """One row a line of the side-by-side host table (the figure's name first), one column a
    run: ms a step as text; None where no run has a host table."""
    hosts = [_host(a) for a in analyses]
    if not any(hosts):
        return None
    names = []
    for h in hosts:
        for r in (h or {}).get("rows", [])[:ROWS_SHOWN]:
            if r["name"] not in names:
                names.append(r["name"])
    lines = {"host period (mean)": [_ms(h and h.get("period_ns_mean")) for h in hosts],
             "named code": [_pct(h and h.get("named_share")) for h in hosts],
             "forward as one graph": [_bound(h) for h in hosts]}
    for name in names:
        lines[short_row(name)] = [_row(h, name) for h in hosts]
    return pd.DataFrame({"": list(lines), **{label: [v[i] for v in lines.values()]
                                           for i, label in enumerate(labels)}})


def _ms(ns) -> str:
    return "–" if ns is None else f"{ns / 1e6:.2f}"


def _pct(share) -> str:
    return "–" if share is None else f"{share:.1%}"


def _row(h: dict | None, name: str) -> str:
    found = [r for r in (h or {}).get("rows", []) if r["name"] == name]
    return _ms(found[0]["ns"]) if found else "–"


def _bound(h: dict | None) -> str:
    bounds = [b for b in (h or {}).get("bounds") or [] if b["scenario"].startswith("forward as")]
    if not bounds:
        return "–"
    return f"{bounds[0]['lower_ns'] / 1e6:.2f}-{bounds[0]['upper_ns'] / 1e6:.2f}"


def to_text(table: pd.DataFrame) -> str:
    """The side-by-side host table in TEXT_WIDTH columns (runs beyond it in further tables)."""
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
    return ("Host time a step (ms, mean; METRICS.md, \"Host time\"):\n\n"
            + md_table(["", *table.columns[1:]], table.itertuples(index=False)))
