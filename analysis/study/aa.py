"""Study part `aa`: the A/A noise floor between processes, from `harness bench --processes N`
reports of one variant against itself (`aa-*.json`): how far apart two processes of the same
configuration land, the spread any comparison between processes must exceed."""

import json
from pathlib import Path

from ..render.markdown import frame_md_table
from ..study.benches import processes_tables
from ..study.text import BETWEEN_PROCESSES, bullet

AA_TEXT = (
    "Each variant benched against itself in interleaved processes (`python -m harness bench "
    "--variants V --processes N --repeats R --batch B`; `harness.processes.summarize` made the "
    "statistics from the per-process log lines, in the `.log` beside each report, when the "
    "step's time limit cut the run short; the reports record N and R, not B): each process's "
    "median ms/step is one observation; the difference of the two labels' medians has a 95% "
    "bootstrap CI over processes.")


def aa_findings(root: Path) -> list:
    out = []
    for path in sorted(root.glob("aa-*.json")):
        report = json.loads(path.read_text())
        results, (diff, *_) = report["results"], report["differences"]
        singles = [x for r in results for x in r["ms_per_step"]]
        lo, hi = diff["ci95"]
        rlo, rhi = diff.get("relative_ci95") or (None, None)
        variant = results[0]["variant"]
        rel = (f" ({rlo * 100:+.1f}% to {rhi * 100:+.1f}%)" if rlo is not None else "")
        out.append(bullet(
            f"`{variant}`:",
            f"{results[0]['ms_per_step_median']:.3f} against "
            f"{results[1]['ms_per_step_median']:.3f} ms/step (medians of "
            f"{results[0]['processes']} processes each; single processes "
            f"{min(singles):.3f}–{max(singles):.3f}); the A/A difference "
            f"{diff['median_diff_ms']:+.3f} ms/step, 95% CI [{lo:+.3f}, {hi:+.3f}]{rel}: two "
            f"`{variant}`-like variants compared {BETWEEN_PROCESSES} must differ by more than "
            "that before the comparison can see it."))
    return out


def aa_sections(root: Path) -> list:
    tables = processes_tables(root, "aa-*.json")
    if not tables:
        return []
    parts = [f"## The A/A noise floor between processes ({root.name})", AA_TEXT,
             *aa_findings(root)]
    for title, table in tables:
        parts += [title, frame_md_table(table)]
    return parts
