"""Study part `aa`: the A/A noise floor between processes, from `harness bench --processes N`
reports of one variant against itself (`aa-*.json`): how far apart two processes of the same
configuration land, the spread any comparison between processes must exceed.

The statistic is the one harness/processes.py computes: the median of the paired differences
d_i = b_i − a_i (process i of the second label minus process i of the first: they ran next to
each other). Its interval is not the report's bootstrap (with 4 processes a bootstrap of a
median can only return the smallest and largest d_i, and does not hold 95%) but the sign
test's, distribution-free: the k-th smallest and largest d_i hold the median difference with
probability 1 − 2·P(Bin(n, ½) ≤ k − 1), exactly, whatever the distribution; k is the largest
for which that reaches 95%, else 1 with its own level (87.5% for 4 processes), and none below 3
processes. `floor(root, kind)`, the largest ratio max(b_i / a_i, a_i / b_i) of a round, is what
the other parts hold a between-process ratio against (text.between).
"""

import json
import math
from pathlib import Path

import pandas as pd

from analysis.toolkit import frame_md_table

from .text import BETWEEN_PROCESSES, bullet, fmt_ms

# The committed A/A reports (the part `aa`'s directory: publish.SOURCES), relative to the
# repository; the floor of a kind is read from the report of the variant named for it.
AA_DIR = "docs/aa-20261201"
FLOOR_VARIANT = {"eager": "static", "compiled": "static", "graph-replayed": "fused"}
LEVEL = 0.95

AA_TEXT = (
    "Each variant benched against itself in interleaved processes (`python -m harness bench "
    "--variants V --processes N --repeats R --batch B`; `harness.processes.summarize` made the "
    "statistics from the per-process log lines, in the `.log` beside each report, when the "
    "step's time limit cut the run short; the reports record N and R, not B): each process's "
    "median ms/step is one observation, and round i ran the label's process i next to the "
    "other's. The A/A difference is the median of the rounds' paired differences (process i of "
    "`V (again)` − process i of `V`), as harness/processes.py computes it; it is not the "
    "difference of the two labels' medians. Its interval is the sign test's (k-th smallest to "
    "k-th largest difference, distribution-free, at the level it holds exactly with that many "
    "processes), not the report's bootstrap, which over 4 processes only returns the smallest "
    "and largest difference and does not hold 95%. The floor other parts hold a ratio between "
    "processes against is the largest ratio of one round's two processes (the slower over the "
    "faster): a ratio between two processes of one configuration came out that far from 1.")


def sign_interval(values, level: float = LEVEL) -> tuple | None:
    """(lo, hi, confidence): the order-statistic interval of the median of `values` that holds
    `level` (the largest k whose exact confidence reaches it), else the widest one (k = 1) with
    its own confidence; None with fewer than 3 values."""
    v, n = sorted(values), len(values)
    if n < 3:
        return None

    def confidence(k: int) -> float:
        return 1 - 2 * sum(math.comb(n, j) for j in range(k)) / 2 ** n

    k = max((k for k in range(1, n // 2 + 1) if confidence(k) >= level), default=1)
    return v[k - 1], v[n - k], confidence(k)


def reports(root: Path) -> dict:
    """variant -> its A/A report (aa-*.json)."""
    out = {}
    for path in sorted(root.glob("aa-*.json")):
        report = json.loads(path.read_text())
        out[report["results"][0]["variant"]] = report | {"path": path}
    return out


def rounds(report: dict) -> list:
    """(a_i, b_i) of each round: the two labels' process i."""
    a, b = (r["ms_per_step"] for r in report["results"][:2])
    return list(zip(a, b, strict=True))


def round_ratio(report: dict) -> float:
    """The largest ratio of a round's two processes, the slower over the faster."""
    return max(max(b / a, a / b) for a, b in rounds(report))


def floor(root: Path, kind: str) -> tuple | None:
    """(largest ratio, that floor in words, processes) of the A/A report for a kind of loop
    (`eager`, `compiled`, `graph-replayed`; FLOOR_VARIANT), from the study's own aa-*.json
    where it has them, else the committed ones; None where there is none."""
    found = reports(root) or reports(Path(__file__).resolve().parents[1] / AA_DIR)
    report = found.get(FLOOR_VARIANT.get(kind, kind))
    if report is None:
        return None
    r = round_ratio(report)
    return (r, f"two `{report['results'][0]['variant']}` processes of one round up to {r:.3f}x "
            "apart", len(rounds(report)))


def floors(root: Path | None = None) -> dict:
    """kind -> floor(root, kind), for every kind FLOOR_VARIANT names."""
    return {k: floor(root or Path(AA_DIR), k) for k in FLOOR_VARIANT}


def _interval(values, spec: str = ".3f") -> str:
    got = sign_interval(values)
    if got is None:
        return "– (fewer than 3 processes)"
    lo, hi, conf = got
    return f"[{lo:{spec}}, {hi:{spec}}] ({conf * 100:.1f}%)"


def aa_findings(root: Path) -> list:
    out = []
    for variant, report in reports(root).items():
        pairs = rounds(report)
        d = [b - a for a, b in pairs]
        a_med = report["results"][0]["ms_per_step_median"]
        singles = [x for pair in pairs for x in pair]
        med = float(pd.Series(d).median())
        got = sign_interval(d)
        ci = ("no interval (fewer than 3 rounds)" if got is None else
              f"[{got[0]:+.3f}, {got[1]:+.3f}] ms/step holds the median difference with "
              f"{got[2] * 100:.1f}% confidence ({got[0] / a_med * 100:+.1f}% to "
              f"{got[1] / a_med * 100:+.1f}% of `{variant}`'s median)")
        out.append(bullet(
            f"`{variant}`:",
            f"single processes {min(singles):.3f}–{max(singles):.3f} ms/step ({len(pairs)} "
            f"rounds of two); the rounds' paired differences "
            + ", ".join(f"{x:+.3f}" for x in sorted(d)) + f" ms/step, their median "
            f"{med:+.3f}; the sign test's {ci}. Two processes of one round came out up to "
            f"{round_ratio(report):.3f}x apart: two `{variant}`-like variants compared "
            f"{BETWEEN_PROCESSES} must differ by more than that before the comparison can see "
            "it (within noise otherwise)."))
    return out


def aa_tables(root: Path) -> list:
    """(title, table) per report: each label's median over its processes with the sign test's
    interval, and the paired difference's."""
    out = []
    for variant, report in reports(root).items():
        pairs = rounds(report)
        rows = [{"label": r["variant"], "processes": r["processes"],
                 "ms/step median": fmt_ms(r["ms_per_step_median"]),
                 "single processes": f"{min(r['ms_per_step']):.3f}–{max(r['ms_per_step']):.3f}",
                 "sign-test interval of the median (confidence)": _interval(r["ms_per_step"])}
                for r in report["results"][:2]]
        d = [b - a for a, b in pairs]
        lo_hi = sign_interval(d)
        rows.append({"label": f"paired difference (again − {variant})", "processes": len(d),
                     "ms/step median": f"{pd.Series(d).median():+.3f}",
                     "single processes": f"{min(d):+.3f} to {max(d):+.3f}",
                     "sign-test interval of the median (confidence)": _interval(d, "+.3f")
                     + ("" if lo_hi is None else " within noise" if lo_hi[0] <= 0 <= lo_hi[1]
                        else " a difference")})
        title = (f"### {report['path'].stem}: {len(pairs)} processes a label, interleaved"
                 + (f" (of {report['processes_planned']} planned)"
                    if report.get("processes_planned", len(pairs)) != len(pairs) else ""))
        out.append((title, pd.DataFrame(rows)))
    return out


def aa_sections(root: Path) -> list:
    tables = aa_tables(root)
    if not tables:
        return []
    parts = [f"## The A/A noise floor between processes ({root.name})", AA_TEXT,
             *aa_findings(root)]
    for title, table in tables:
        parts += [title, frame_md_table(table)]
    return parts
