"""The profiler's own cost, from a `scripts/overhead.sh` directory: traced ÷ untraced ms/step
per variant, batch and nsys flag set.

    python -m study.overhead merge-untraced DIR/b8/static   # the processes' files as one
    python -m study.overhead table DIR                      # the Markdown table

Untraced ms/step is the median of the processes' bench medians (each 5 runs, no events), with
their min–max; traced is run.json's host-clock ms/step over the captured window. `events` is
the untraced ms/step with the per-step CUDA events on (the timeline's own cost).
"""

import json
import sys
from pathlib import Path

from analysis.toolkit import median

FLAGSET_ORDER = ("node", "graph", "graph-nonvtx", "noevents", "metrics", "nvtx")


def _load(path: Path) -> dict | None:
    """The file's JSON; None where it does not exist (a flag set not captured), and None with a
    line on stderr where it exists but cannot be read: the table then says n/a, and why is
    said once."""
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        print(f"gapscope: skipped {path}: unreadable ({e})", file=sys.stderr)
        return None


def _process_files(d: Path, stem: str) -> list:
    return sorted(d.glob(f"{stem}-p*.json"), key=lambda p: int(p.stem.rsplit("-p", 1)[1]))


def merge_untraced(d: Path) -> None:
    """untraced.json: the first process's bench with every process's ms/step under
    `processes_ms_per_step` and their median as `ms_per_step_median` (what run.json's
    `untraced` and so compare's profiler overhead then use); untraced_steps.json: every
    process's runs in one file."""
    benches = [b for b in map(_load, _process_files(d, "untraced")) if b]
    if benches:
        merged = benches[0]
        for r in merged["results"]:
            r["processes_ms_per_step"] = [
                x["ms_per_step_median"] for b in benches for x in b["results"]
                if x["variant"] == r["variant"]]
            r["ms_per_step_median"] = median(r["processes_ms_per_step"])
        (d / "untraced.json").write_text(json.dumps(merged, indent=1) + "\n")
    timelines = [t for t in map(_load, _process_files(d, "untraced_steps")) if t]
    if timelines:
        merged = dict(timelines[0])
        merged["runs"] = [run for t in timelines for run in t["runs"]]
        merged["processes_ms_per_step"] = [t["ms_per_step_median"] for t in timelines]
        merged["ms_per_step_median"] = median(merged["processes_ms_per_step"])
        (d / "untraced_steps.json").write_text(json.dumps(merged) + "\n")


def variant_dirs(root: Path):
    """(batch, variant directory) of a sweep, batches in numeric order, variants by name."""
    for bdir in sorted(root.glob("b*"), key=lambda p: int(p.name[1:]) if p.name[1:].isdigit()
                       else 0):
        for vdir in sorted(p for p in bdir.iterdir() if p.is_dir()):
            yield int(bdir.name[1:]), vdir


def process_ms(vdir: Path) -> list:
    """Each process's untraced ms/step median, from its own untraced-p<N>.json."""
    benches = [b for b in map(_load, _process_files(vdir, "untraced")) if b]
    return [r["ms_per_step_median"] for b in benches for r in b.get("results", [])]


def rows(root: Path) -> list:
    """One dict per (batch, variant): untraced figures and traced ms/step by flag set."""
    out = []
    for batch, vdir in variant_dirs(root):
        steps = _load(vdir / "untraced_steps.json")
        procs = process_ms(vdir)
        row = {"batch": batch, "variant": vdir.name,
               "untraced_ms": median(procs) if procs else None,
               "untraced_min_ms": min(procs, default=None),
               "untraced_max_ms": max(procs, default=None),
               "processes": len(procs),
               "events_ms": steps["ms_per_step_median"] if steps else None, "traced_ms": {}}
        for f in FLAGSET_ORDER:
            run = _load(vdir / f / "run.json")
            if run and (run.get("timing") or {}).get("ms_per_step") is not None:
                row["traced_ms"][f] = run["timing"]["ms_per_step"]
        out.append(row)
    return out


def table(root: Path) -> str:
    found = rows(root)
    sets = [f for f in FLAGSET_ORDER if any(f in r["traced_ms"] for r in found)]
    head = ["batch", "variant", "untraced ms/step [min–max]", "events on", *sets]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in found:
        u = r["untraced_ms"]
        cells = [str(r["batch"]), r["variant"],
                 "n/a" if u is None else
                 f"{u:.3f} [{r['untraced_min_ms']:.3f}–{r['untraced_max_ms']:.3f}]",
                 "n/a" if r["events_ms"] is None or u is None
                 else f"{r['events_ms']:.3f} ({100 * (r['events_ms'] / u - 1):+.1f}%)"]
        for f in sets:
            t = r["traced_ms"].get(f)
            cells.append("" if t is None else f"{t:.3f}" if u is None
                         else f"{t:.3f} ({100 * (t / u - 1):+.1f}%)")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list) -> int:
    if len(argv) != 2 or argv[0] not in ("merge-untraced", "table"):
        sys.stderr.write("gapscope: error: usage: python -m study.overhead "
                         "merge-untraced DIR | table DIR\n")
        return 2
    path = Path(argv[1])
    if not path.is_dir():
        sys.stderr.write(f"gapscope: error: {path}: no such directory\n")
        return 2
    if argv[0] == "merge-untraced":
        merge_untraced(path)
    else:
        sys.stdout.write(table(path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
