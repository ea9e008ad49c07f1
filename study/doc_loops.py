"""Generated blocks of docs/user-programs-20261204/README.md (issue 39: the loops people write
themselves), read from the committed run directories' own records: run.json (the command, what
the hook named, the twin's runs), summary.json (the report's summary of the capture),
overhead.jsonl (the hook's cost a call) and gpu-suite.log.

loops_1204     each run: its program, its steps and what they are the calls of, the traced and
               untraced period, the host table's named share, tokens a step where known
hook_cost_1204 what naming a call costs, through a wrapper and through sys.monitoring
suite_1204     the GPU suite's last line
"""

import json
from pathlib import Path

import pandas as pd

from analysis.toolkit import frame_md_table

from .doc_records import run_dirs_in, shown

UP_1204 = "docs/user-programs-20261204"


def _summary(run: Path) -> dict:
    """The report's summary of the run's one device (summary.json: {label: {device: ...}})."""
    (devices,) = json.loads((run / "summary.json").read_text()).values()
    (summary,) = [s for k, s in devices.items() if k != "trace"]
    return summary


def _ms(ns) -> str:
    return "–" if ns is None else f"{ns / 1e6:.2f}"


def _spread(values) -> str:
    """The lowest and highest of the twin's runs' medians: the spread between processes."""
    values = [v for v in values or [] if v is not None]
    return f"{_ms(min(values))}–{_ms(max(values))}" if values else "–"


def loops_1204(root: Path) -> str:
    rows = []
    for d in run_dirs_in(root, UP_1204):
        info = json.loads((d / "run.json").read_text())
        s = _summary(d)
        own = (info.get("hook") or {}).get("own_code") or {}
        untraced = s.get("untraced") or {}
        tokens = s.get("tokens_per_step_mean")
        rows.append({
            "run directory": f"`{d.name}`",
            "program": "`" + " ".join(shown(w, root) for w in info["command"][1:2]) + "`",
            "steps": f"{s['steps']}: calls of `{', '.join(s.get('step_functions') or [])}`",
            "period ms (traced / untraced)": f"{_ms(s['period_ns_median'])} / "
                                             f"{_ms(untraced.get('period_ns_median'))}",
            "untraced runs' medians ms": _spread(untraced.get("run_period_ns_medians")),
            "twin runs": f"{untraced.get('runs', 0)} ({untraced.get('steps', 0)} steps)",
            "named code": f"{s['host']['named_share']:.1%}",
            "own functions named": f"{own.get('functions', 0)} + {own.get('main_functions', 0)} "
                                   "of `__main__`",
            "named calls a step": f"{sum(r['calls'] for r in s['host']['rows']):.0f}",
            "tokens a step": "–" if tokens is None else f"{tokens:.2f}",
        })
    return ("Each run directory's own records (run.json, the report's summary.json): the steps "
            "and the function they are the calls of, the traced and untraced GPU period "
            "(medians; beside it the untraced runs' own, each a process of its own), the twin's "
            "runs that timed the steps, the host table's named share, what the hook named of the "
            "program's own code and its calls a step (the host table's means: each a range "
            "traced, a timed call in the twin's host-timed run).\n\n"
            + frame_md_table(pd.DataFrame(rows)))


def hook_cost_1204(root: Path) -> str:
    """overhead.jsonl: ns a call of a trivial function by mode, the median of its rounds."""
    words = {"bare": "no hook", "clock": "a module's function, untraced (host clock)",
             "ranges": "a module's function, traced (NVTX push and pop)",
             "main-clock": "the script's own, untraced (sys.monitoring, host clock)",
             "main-ranges": "the script's own, traced (sys.monitoring, NVTX push and pop)"}
    rows = []
    for line in (root / UP_1204 / "overhead.jsonl").read_text().splitlines():
        r = json.loads(line)
        rows.append({"call": words.get(r["mode"], r["mode"]), "mode": f"`{r['mode']}`",
                     "ns a call": f"{r['ns_per_call']:.0f}", "calls": r["calls"]})
    return ("`python3 -m scripts.host_overhead --mode MODE --calls 100000` on the H200 (the median "
            "of 5 rounds; overhead.jsonl):\n\n" + frame_md_table(pd.DataFrame(rows)))


def suite_1204(root: Path) -> str:
    lines = (root / UP_1204 / "gpu-suite.log").read_text().splitlines()
    last = next(line for line in reversed(lines) if " passed" in line)
    return f"The whole GPU suite's last line (gpu-suite.log): `{last.strip()}`."
