"""Generated blocks of docs/mega-20261204/README.md (issue 42: the step in one persistent kernel),
read from the directory's committed files: the bench files (the part `mega`'s runs), registers.json
(registers.py: the kernel compiled for sm_90a with no GPU) and gpu-mega-h100.log (the mega GPU
tests' run on the device).

mega_runs       the bench files: which configurations, how many processes, on which card
mega_registers  registers, spills and programs an SM, by size and batch
mega_tests      the GPU tests' outcome, as the log says it
"""

import json
import re
from pathlib import Path

import pandas as pd

from analysis.toolkit import frame_md_table

from .text import listing

MEGA = "docs/mega-20261204"


def mega_runs(root: Path) -> str:
    from .mega import BATCHES, SIZES, runs

    t = runs(root / MEGA)
    have = t.groupby(["size", "batch"])["process"].nunique()
    said = [f"{s} batch {b}: {have[(s, b)]}" for s in SIZES for b in BATCHES if (s, b) in have]
    gpu = t.iloc[0]["versions"].get("gpu")
    return (f"The bench files here (`bench-mega-<size>-b<B>-p<K>.json`, each with its log) were "
            f"made on {gpu} by run-h200.sh: processes a configuration, {listing(said)}.")


def mega_registers(root: Path) -> str:
    doc = json.loads((root / MEGA / "registers.json").read_text())
    rows = [{"size": r["size"], "batch": r["batch"], "warps": r["warps"],
             "registers a thread": r["registers"],
             "spill stores / loads (bytes)": f"{r['spill_store_bytes']} / {r['spill_load_bytes']}",
             "shared memory (bytes)": r["shared_bytes"], "programs an SM": r["programs_per_sm"]}
            for r in doc["rows"]]
    each = doc["without_each"]
    base = next(r for r in doc["rows"] if (r["size"], r["batch"]) == (each["size"],
                                                                       each["batch"]))
    kinds = [{"compiled out": f"`{r['without']}`", "registers a thread": r["registers"],
              "spill stores / loads (bytes)": f"{r['spill_store_bytes']} / "
                                              f"{r['spill_load_bytes']}"}
             for r in [{"without": "nothing", **base}, *each["rows"]]]
    most = min(each["rows"], key=lambda r: r["spill_store_bytes"])
    return (f"registers.json: the kernel as Triton {doc['triton']} compiles it for "
            f"{doc['target']} at each configuration's launch settings, assembled with -v by "
            f"the ptxas it uses (`{doc['ptxas']}`). The device's Triton is older, and its count "
            "can differ by a few registers.\n\n" + frame_md_table(pd.DataFrame(rows))
            + f"\n\nAt {each['size']} batch {each['batch']}, each task kind's branch compiled "
            f"out in turn: without `{most['without']}` the spills fall from "
            f"{base['spill_store_bytes']} to {most['spill_store_bytes']} bytes stored, so that "
            "task's code is what the register cap cuts.\n\n"
            + frame_md_table(pd.DataFrame(kinds)))


def mega_tests(root: Path) -> str:
    lines = (root / MEGA / "gpu-mega-h100.log").read_text().splitlines()
    progress = next(line for line in lines if re.fullmatch(r"[.FEsx]+\s+\[\s*\d+%\]", line))
    marks = progress.split()[0]
    failed = [line.split(" - ")[0].removeprefix("FAILED ") for line in lines
              if line.startswith("FAILED ")]
    why = sorted({line[1:].strip() for line in lines if line.startswith("E  ")})
    return (f"`pytest -m gpu tests/test_gpu_mega.py` on the device (gpu-mega-h100.log): "
            f"{marks.count('.')} passed, {marks.count('F')} failed"
            + (f" ({listing([f'`{f}`' for f in failed])}: {listing(why)})" if failed else "")
            + ".")
