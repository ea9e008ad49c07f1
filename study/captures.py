"""A study's captures as one table (RESULTS.md's "What the captures show" and the family
part's captures): each capture's analysis beside its untraced figures; and the analyses
themselves, made once per process for every part that reads a capture."""

import dataclasses
import re
from pathlib import Path

import pandas as pd

from analysis.toolkit import TRACE_NAMES, Options, open_all

from .text import fmt_ms

# path -> (stamp, (run, made by, [Analysis], strings)): the parts of one `study_publish` run
# share their captures (several parts read one), each analysed once; a changed file is analysed
# again.
_ANALYSED: dict = {}
STAMPED = (*TRACE_NAMES, "run.json", "untraced_steps.json", "untraced.json")


def _stamp(path: Path) -> tuple:
    return tuple((path / n).stat().st_mtime_ns if (path / n).is_file() else None
                 for n in STAMPED)


def analysed(paths: list, progress: bool = False) -> list:
    """(run, made by, [Analysis], the trace's strings) for each run directory, metrics-
    only captures included (hardware.is_traced tells them), in parallel where not yet made."""
    paths = [Path(p) for p in paths]
    todo = [p for p in paths if _ANALYSED.get(str(p), (None,))[0] != _stamp(p)]
    done = [_held(analyses) for analyses in open_all(
        [str(p) for p in todo], Options(), progress=progress and len(todo) > 1, keep_trace=True)]
    for p, result in zip(todo, done, strict=True):
        _ANALYSED[str(p)] = (_stamp(p), result)
    return [_ANALYSED[str(p)][1] for p in paths]


def _held(analyses: list) -> tuple:
    """What the parts read of a capture: the trace's strings kept, the rest of it let go."""
    first = analyses[0]
    return (first.run, first.source, [dataclasses.replace(a, trace=None) for a in analyses],
            first.trace.strings)


GRAPH_VARIANTS = ("graphed", "graphed-sync", "fused", "while-graph", "while-fused", "mega",
                  "while-mega")


def kind(run) -> str:
    """`eager`, `compiled` (torch.compile, no CUDA graph) or `graph-replayed`: the kinds of loop
    a figure is ranged over, and whose A/A floor (aa.floor) a ratio between processes meets."""
    config = run.info.get("config") or {}
    if config.get("variant") in GRAPH_VARIANTS:
        return "graph-replayed"
    return "eager" if config.get("compile") in (None, "none") else "compiled"


def overhead_cell(run, floors: dict | None) -> str:
    """nsys's overhead as a table cell: traced ÷ the capture's untraced bench (another process)
    − 1, `within noise` where that ratio is inside the A/A floor of the capture's kind."""
    from .text import beyond

    traced, untraced = run.traced_ms_per_step(), run.untraced_ms_per_step()
    if not (traced and untraced):
        return "–"
    cell = f"{(traced / untraced - 1) * 100:+.0f}%"
    if floors is not None and not beyond(traced / untraced, floors.get(kind(run))):
        cell += " (within noise)"
    return cell


def is_traced(a) -> bool:
    """False for a capture of GPU metrics alone (no gaps to show)."""
    return "idle_ns" in a.summary


def kernels_per_step(a) -> float:
    """The median number of kernel records a captured step (op records less copies, sets and
    graph replays)."""
    ops = a.ops[a.ops["step"] >= 0]
    counts = ops[ops["kind"] == "kernel"].groupby("step").size()
    return float(counts.reindex(a.steps["step"], fill_value=0).median())


STUDY_IN_PATH = re.compile(r"(study-\d{8}T\d{6}Z)")
STAMP_IN_PATH = re.compile(r"(\d{8}T\d{6}Z)")


def made(run) -> str:
    """Where a capture was made, from its nsys command's output path: the study's name, else
    the run directory's UTC time."""
    command = (run.info.get("nsys") or {}).get("command") or ""
    out = command.split(" -o ", 1)[1].split()[0] if " -o " in command else str(run.trace_path)
    found = STUDY_IN_PATH.search(out) or STAMP_IN_PATH.search(out)
    return found.group(1) if found else "–"


def capture_rows(caps: dict, floors: dict | None = None) -> tuple:
    """The summary of each capture's analysis, and the analyses themselves for the plots;
    captures of GPU metrics alone are left out. With `floors` (kind -> aa.floor), an overhead
    inside its kind's A/A floor is said to be within noise."""
    rows, analyses = [], {}
    for name, (run, _, (a, *_), strings) in zip(caps, analysed(list(caps.values()),
                                                               progress=len(caps) > 1),
                                                strict=True):
        if not is_traced(a):
            continue
        analyses[name] = (a, run, strings)
        s = a.summary
        idle = s["idle_ns"] or 1
        traced, untraced = run.traced_ms_per_step(), run.untraced_ms_per_step()
        twin = (s.get("untraced") or {}).get("bubble_ns_median")
        rows.append(
            {
                "capture": name,
                "made": made(run),
                "batch": (run.info.get("config") or {}).get("batch", "–"),
                "graph trace": s.get("cuda_graph_trace", "–"),
                "traced ms/step": fmt_ms(traced) if traced else "–",
                "untraced": fmt_ms(untraced) if untraced else "–",
                "nsys overhead": overhead_cell(run, floors),
                "op records/step": f"{a.steps['op_records'].median():.0f}",
                "kernels/step": f"{kernels_per_step(a):.0f}",
                "launch calls/step": f"{a.steps['ops'].median():.0f}",
                "GPU busy (of window)": f"{s['busy_share_of_window'] * 100:.1f}%",
                "bubble median µs": f"{s['bubble_ns_median'] / 1e3:.1f}",
                "bubble µs untraced": "–" if twin is None else f"{twin / 1e3:.1f}",
                "bubble p90 µs": f"{s['bubble_ns_p90'] / 1e3:.1f}",
                "idle sync / host / queued (of idle)": " / ".join(
                    f"{s['idle_ns_by_cause'][c] / idle * 100:.0f}%"
                    for c in ("sync", "host", "queued")
                ),
                "sync idle (of window)": f"{s['sync_idle_share_of_window'] * 100:.1f}%",
                "check cover": "–"
                if s["check_cover_median"] is None
                else f"{s['check_cover_median']:.2f}",
            }
        )
    return pd.DataFrame(rows), analyses
