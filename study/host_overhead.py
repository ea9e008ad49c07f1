"""What the host table's means cost (docs/PROFILING.md, "The host table's named code"), from a
directory scripts/host_batch.sh filled (its tars unpacked beside its overhead.jsonl): a call
through each wrapper, and whole programs with and without the hook's functions, with and without
nsys's Python sampling. For a generated block of PROFILING.md once such a directory is
committed (`python -m study.host_overhead DIR` prints it)."""

import json
import sys
from pathlib import Path

import pandas as pd

from analysis.toolkit import frame_md_table

# overhead.jsonl's modes in the order the table reads (scripts/host_overhead.py), the first
# under nsys where a later line of the same mode came from a run under it.
MODES = {"bare": "a bare call", "clock": "the hook's wrapper, twin (host clock)",
         "ranges": "the hook's wrapper, traced (NVTX push and pop)",
         "nsys": "nsys's own function-trace wrapper (sys.audit), under nsys"}
FORWARD = r"^transformers\.models\.[\w.]+\.\w+(?:ForCausalLM|LMHeadModel)\.forward$"


def call_table(path: Path) -> pd.DataFrame:
    """One row a line of overhead.jsonl: what was called and its ns a call; a second `ranges`
    line is the run under nsys."""
    rows, seen = [], set()
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        mode = r["mode"]
        where = "under nsys" if mode == "nsys" or mode in seen else "without nsys"
        seen.add(mode)
        rows.append({"call": MODES.get(mode, mode), "run": where,
                     "ns a call": round(r["ns_per_call"], 1)})
    return pd.DataFrame(rows)


def program_table(root: Path) -> pd.DataFrame:
    """The generate() program's step, traced, with and without the host functions (its host
    period mean, GPU period median), and under nsys with and without Python sampling."""
    from analysis import TraceError
    from analysis import open as open_run

    found = [(name, d, None) for name in ("gen-llama-sampled", "gen-llama-sampled-nohost")
             for d in sorted(root.glob(f"gen/*-{name}"))]
    found += [(f"nsys, {mode}", root / "sampling" / f"{mode}.sqlite.xz", FORWARD)
              for mode in ("plain", "sampled")
              if (root / "sampling" / f"{mode}.sqlite.xz").is_file()]
    rows = []
    for name, path, steps in found:
        try:
            a = open_run(path, steps=steps)[0]
        except TraceError as e:
            sys.stderr.write(f"gapscope: {name} left out: {e}\n")
            continue
        rows.append({"capture": name, "GPU period ms": a.summary["period_ns_median"] / 1e6,
                     "host period ms": a.summary["host"]["period_ns_mean"] / 1e6})
    table = pd.DataFrame(rows)
    return table.round(3) if len(table) else table


def overhead_sections(root: Path) -> list:
    parts = []
    calls = root / "overhead.jsonl"
    if calls.is_file():
        parts.append(frame_md_table(call_table(calls)))
    programs = program_table(root)
    if len(programs):
        parts.append(frame_md_table(programs))
    return parts


if __name__ == "__main__":
    print("\n\n".join(overhead_sections(Path(sys.argv[1]))))
