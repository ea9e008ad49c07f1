"""scripts/peer_gptfast.py's JSON (gpt-fast's compiled decode against our rungs, processes
interleaved) as the Markdown a docs block quotes: one row a batch, each side's median ms/token
over processes with their min-max, our rungs' speedup over gpt-fast, and each side's share of
the bandwidth floor. Reads the JSON only: no torch, nothing run."""

import json
from pathlib import Path

GPT_FAST = "gpt-fast"


def best_rates(runs: dict) -> dict:
    """A report's `runs` ({"B/side": [process records]}) -> batch (as text) -> the highest copy
    rate any process of the run measured at that batch (either side), where the processes
    recorded theirs: the floor every row of that batch is set at (scripts/peer_report.py).
    One process's copy rate can come out several % low (a floor share of 95% against 90% for
    the same step, docs/sizes-20261202/peer.json); the highest measured is the tightest bound."""
    rates = {}
    for key, rs in runs.items():
        b = key.split("/")[0]
        for r in rs:
            if r.get("copy_bytes_per_s"):
                rates[b] = max(rates.get(b, 0.0), r["copy_bytes_per_s"])
    return rates


def ms_cell(row: dict) -> str:
    """A row's median ms/token over processes with their lowest and highest in brackets."""
    return f"{row['ms_per_token_median']:.3f} ({row['min']:.3f}-{row['max']:.3f})"


def read_peer(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def peer_table(report: dict) -> str:
    """| batch | gpt-fast ms/token | `rung` ... | `rung` vs gpt-fast ... | (min-max in brackets)."""
    rows = {(r["batch"], r["side"]): r for r in report["rows"]}
    batches = sorted({b for b, _ in rows})
    ours = list(dict.fromkeys(s for _, s in rows if s != GPT_FAST))

    head = (["batch", "gpt-fast ms/token"] + [f"`{s}`" for s in ours]
            + [f"`{s}` vs gpt-fast" for s in ours])
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for b in batches:
        cells = [str(b), ms_cell(rows[b, GPT_FAST])] + [ms_cell(rows[b, s]) for s in ours]
        cells += [f"{rows[b, s]['speedup_vs_gpt_fast']:.2f}x" for s in ours]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def floor_sentence(report: dict) -> str:
    """Each side's share of the floor, batch by batch."""
    rows = report["rows"]
    batches = sorted({r["batch"] for r in rows})
    sides = list(dict.fromkeys(r["side"] for r in rows))
    by = {(r["batch"], r["side"]): r["floor_pct"] for r in rows}
    parts = [f"{s if s == GPT_FAST else f'`{s}`'} "
             + " and ".join(f"{by[b, s]:.1f}%" for b in batches if (b, s) in by) for s in sides]
    return (f"Share of the bandwidth floor (harness/floor.py at the copy rate measured in each "
            f"process) at batch {' and '.join(map(str, batches))}: " + ", ".join(parts) + ".")


def peer_block(path: Path) -> str:
    report = read_peer(path)
    return peer_table(report) + "\n\n" + floor_sentence(report)
