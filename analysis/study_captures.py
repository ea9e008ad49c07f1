"""A study's captures as one table (RESULTS.md's "What the captures show" and the family
part's captures): each capture's analysis beside its untraced figures."""

import pandas as pd

from analysis.study_benches import ms
from analysis.summary import Options
from analysis.sweep import analyse_all


def md_table(df: pd.DataFrame) -> str:
    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "| " + " | ".join("---" for _ in df.columns) + " |"
    body = ["| " + " | ".join(map(str, row)) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def capture_rows(caps: dict) -> tuple:
    """The summary of each capture's analysis, and the analyses themselves for the plots."""
    rows, analyses = [], {}
    done = analyse_all([str(d) for d in caps.values()], Options(), progress=len(caps) > 1)
    for name, (run, _, (a, *_), strings) in zip(caps, done, strict=True):
        analyses[name] = (a, run, strings)
        s = a.summary
        idle = s["idle_ns"] or 1
        traced, untraced = run.traced_ms_per_step(), run.untraced_ms_per_step()
        rows.append(
            {
                "capture": name,
                "traced ms/step": ms(traced) if traced else "–",
                "untraced": ms(untraced) if untraced else "–",
                "nsys overhead": f"{(traced / untraced - 1) * 100:+.0f}%"
                if traced and untraced
                else "–",
                "GPU ops/step": f"{a.steps['op_records'].median():.0f}",
                "launches/step": f"{a.steps['ops'].median():.0f}",
                "GPU busy": f"{s['gpu_util'] * 100:.1f}%",
                "bubble median µs": f"{s['bubble_ns_median'] / 1e3:.1f}",
                "bubble p90 µs": f"{s['bubble_ns_p90'] / 1e3:.1f}",
                "idle sync / host / queued": " / ".join(
                    f"{s['idle_ns_by_cause'][c] / idle * 100:.0f}%"
                    for c in ("sync", "host", "queued")
                ),
                "sync idle share": f"{s['sync_idle_share'] * 100:.1f}%",
                "check cover": "–"
                if s["check_cover_median"] is None
                else f"{s['check_cover_median']:.2f}",
            }
        )
    return pd.DataFrame(rows), analyses
