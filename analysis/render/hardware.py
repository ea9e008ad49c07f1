"""The hardware view of several runs side by side: how hard the GPU worked in each (summary
.gpu_metrics, time-weighted over the steps), next to its untraced step time and bandwidth floor.

A capture of GPU metrics alone (`profile.sh --metrics`) has no gaps to compare, so `compare`
shows these runs here only; a traced capture that also sampled metrics is in both tables.
"""

import textwrap

import pandas as pd

from ..render.report import md_table

# (column, header, width, format) of the table; None prints as "–".
COLUMNS = [
    ("label", "run", 0, "{}"),
    ("steps", "steps", 6, "{}"),
    ("untraced_ms_per_step", "untraced ms", 12, "{:.3f}"),
    ("speed_vs_first", "vs first", 9, "{:.2f}x"),
    ("floor_ms_per_step", "floor ms", 9, "{:.3f}"),
    ("floor_pct", "% floor", 8, "{:.1f}"),
    ("sm_active_pct", "SMs %", 7, "{:.1f}"),
    ("dram_read_pct", "DRAM rd %", 10, "{:.1f}"),
    ("dram_read_gbps", "GB/s", 6, "{:.0f}"),
    ("gr_active_pct", "GR %", 6, "{:.1f}"),
    ("tensor_active_pct", "tensor %", 9, "{:.1f}"),
]
NOTE = ("untraced ms: the untraced twin's median GPU period over the captured steps, else "
        "bench's ms/step; vs first: the first run's untraced ms over this one's; % floor: the "
        "bandwidth floor's share of the untraced step (METRICS.md); GPU metrics time-weighted "
        "over the steps.")


def has_metrics(analyses: list) -> bool:
    return any(a.summary.get("gpu_metrics") for a in analyses)


def is_traced(a) -> bool:
    """False for a capture of GPU metrics alone (its summary's cuda_trace, stored as 0)."""
    return a.summary.get("cuda_trace", True) not in (False, 0)


def config_label(config: dict) -> str | None:
    """`fused b32 bf16` from run.json's config (the plot's row names), None without one."""
    if not config.get("variant"):
        return None
    parts = [config["variant"]]
    if config.get("batch") is not None:
        parts.append(f"b{config['batch']}")
    if config.get("dtype"):
        parts.append(str(config["dtype"]))
    return " ".join(parts)


def hardware_table(labels: list, analyses: list, runs: list) -> pd.DataFrame:
    """One row per run with GPU metrics (the others are left out)."""
    rows = []
    for label, a, run in zip(labels, analyses, runs, strict=True):
        m = a.summary.get("gpu_metrics")
        if not m:
            continue
        twin = a.summary.get("untraced") or {}
        floor = a.summary.get("floor") or {}
        untraced = (twin["period_ns_median"] / 1e6 if twin.get("period_ns_median")
                    else run.untraced_ms_per_step())
        pct = floor.get("floor_pct_of_untraced_period") or floor.get("floor_pct_of_untraced")
        config = run.info.get("config") or {}
        rows.append({
            "label": label, "config_label": config_label(config), "device": a.device,
            "steps": a.summary["steps"],
            "untraced_ms_per_step": untraced,
            "traced_ms_per_step": run.traced_ms_per_step(),
            "floor_ms_per_step": (None if floor.get("floor_ns_per_step") is None
                                  else floor["floor_ns_per_step"] / 1e6),
            "floor_pct": pct,
            **{k: m.get(k) for k in ("sm_active_pct", "dram_read_pct", "dram_read_gbps",
                                     "dram_write_pct", "gr_active_pct", "tensor_active_pct")},
        })
    table = pd.DataFrame(rows)
    if not table.empty:
        first = table["untraced_ms_per_step"].iloc[0]
        table["speed_vs_first"] = [None if first is None or pd.isna(first) or v is None
                                   or pd.isna(v) else first / v
                                   for v in table["untraced_ms_per_step"]]
    return table


def _cells(table: pd.DataFrame) -> list:
    out = []
    for row in table.to_dict("records"):
        out.append([("–" if row.get(c) is None or pd.isna(row.get(c)) else fmt.format(row[c]))
                    for c, _, _, fmt in COLUMNS])
    return out


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def to_text(table: pd.DataFrame, width: int = 100) -> str:
    """Labels too long for `width` columns become #1, #2, ... with a legend under the table."""
    cells = _cells(table)
    legend = []
    rest_width = sum(w for _, _, w, _ in COLUMNS[1:])
    if max(len(r[0]) for r in cells) + rest_width > width:
        configs = table["config_label"].tolist()
        # A stored run's missing config label reads back as NaN: only a string is added.
        legend = [_fit(f"#{i}: {r[0]}" + (f" ({c})" if isinstance(c, str) and c not in r[0]
                                          else ""), width)
                  for i, (r, c) in enumerate(zip(cells, configs, strict=True), 1)]
        cells = [[f"#{i}", *r[1:]] for i, r in enumerate(cells, 1)]
    label_width = max([len("run")] + [len(r[0]) for r in cells])
    widths = [label_width] + [w for _, _, w, _ in COLUMNS[1:]]

    def line(values):
        first, rest = values[0], values[1:]
        return (f"{first:<{widths[0]}}"
                + "".join(f"{v:>{w}}" for v, w in zip(rest, widths[1:], strict=True)))

    head = line([h for _, h, _, _ in COLUMNS])
    return "\n".join(["GPU metrics, time-weighted over each run's steps", head,
                      "-" * len(head), *map(line, cells), *legend, textwrap.fill(NOTE, width)])


def to_markdown(table: pd.DataFrame) -> str:
    return (md_table([h for _, h, _, _ in COLUMNS], _cells(table)) + "\n\n" + NOTE + "\n")
