"""Study part `mega`: the decode step in one persistent kernel (issue 42) beside the rungs it
follows, from `bench-mega-<size>-b<B>-p<K>.json`: one `harness bench` process a size, batch and
round, timing `fused`, `while-fused`, `mega` and `while-mega` one after another
(docs/mega-20261204/run-h200.sh). Per configuration: each rung's ms/step (the median over the
processes of each process's median, their range beside it), its share of the bandwidth floor,
mega's time against while-fused's in each process, and whether the rungs decoded the same tokens;
then issue 42's goals against what was reached, and the configurations of the grid no process
measured."""

import json
import re
import statistics
from pathlib import Path

import pandas as pd

from analysis.toolkit import frame_md_table

from .benches import made_line
from .text import SAME_PROCESS, bullet, listing, pct, span

BENCH = re.compile(r"^bench-mega-(?P<size>[0-9a-z]+)-b(?P<batch>\d+)-p(?P<process>\d+)\.json$")
SIZES = ("small", "1b", "8b")
BATCHES = (1, 8)
ORDER = ("fused", "while-fused", "mega", "while-mega")
SIZE_WORDS = {"small": "the small Llama (125M)", "1b": "Llama-3.2-1B's shape",
              "8b": "Llama-3-8B's shape"}
# Issue 42's goals at batch 1, untraced, medians over processes (of the floor share; of each
# process's ratio to while-fused): mega's share of the floor at these sizes, and at 8B no slower
# than while-fused.
FLOOR_GOALS = {"small": 0.50, "1b": 0.80}
SAME_AS = {"8b": "while-fused"}

MEGA_TEXT = (
    "`mega` runs the Llama family's decode step as one persistent Triton kernel: one program an "
    "SM pulls its share of the step's tasks (each layer's projections in column blocks, the "
    "attention of each row and query head, the head's blocks and the greedy pick) from a "
    "schedule made on the host (harness/mega_schedule.py), and waits on a counter a phase where "
    "`fused` has a kernel boundary; `while-mega` runs that step as the body of `while-graph`'s "
    "loop (docs/VARIANTS.md). Each bench file is one `harness bench` process timing the four "
    "rungs one after another on random weights drawn on the GPU (medians of its repeats after a "
    "warm-up); the processes of one configuration ran in different rounds. ms/step is the "
    "median over the processes of each process's median, the range beside it the processes' "
    "medians; `% floor` is the bytes a step must move at the copy rate each process measured "
    "(docs/METRICS.md, \"Bandwidth floor\"), the median over the processes (their range "
    "beside it).")


def runs(root: Path) -> pd.DataFrame:
    """One row a bench result: size, batch, process, variant and its figures."""
    rows = []
    for path in sorted(root.glob("bench-mega-*-b*-p*.json")):
        m = BENCH.match(path.name)
        if not m:
            continue
        report = json.loads(path.read_text())
        for r in report["results"]:
            rows.append({"size": m["size"], "batch": int(m["batch"]),
                         "process": int(m["process"]), "variant": r["variant"],
                         "ms": r["ms_per_step_median"], "tokens_per_s": r["tokens_per_s"],
                         "floor_ms": r["floor"]["floor_ms_per_step"],
                         "floor_pct": r["floor"]["floor_pct"], "sha": r["tokens_sha256"],
                         "versions": report.get("versions") or {},
                         "config": report.get("config") or {}})
    return pd.DataFrame(rows)


def _key(col: pd.Series) -> pd.Series:
    if col.name == "size":
        return col.map(lambda s: SIZES.index(s) if s in SIZES else len(SIZES))
    if col.name == "variant":
        return col.map(lambda v: ORDER.index(v) if v in ORDER else len(ORDER))
    return col


def by_rung(t: pd.DataFrame) -> pd.DataFrame:
    """Per size, batch and variant: the median over the processes, their range, the floor's
    share (median), tokens/s (median), and mega's time over while-fused's in each process."""
    ratio = {}
    for (size, batch, _), g in t.groupby(["size", "batch", "process"]):
        ms = dict(zip(g["variant"], g["ms"], strict=True))
        for v in ms:
            if "while-fused" in ms:
                ratio.setdefault((size, batch, v), []).append(ms[v] / ms["while-fused"])
    out = (t.groupby(["size", "batch", "variant"], sort=False)
           .agg(processes=("ms", "size"), ms=("ms", "median"), lo=("ms", "min"),
                hi=("ms", "max"), floor_ms=("floor_ms", "median"),
                floor_pct=("floor_pct", "median"), floor_lo=("floor_pct", "min"),
                floor_hi=("floor_pct", "max"), tokens_per_s=("tokens_per_s", "median"))
           .reset_index())
    out["vs_while_fused"] = [ratio.get((r.size, r.batch, r.variant)) for r in out.itertuples()]
    return out.sort_values(["size", "batch", "variant"], key=_key).reset_index(drop=True)


def rung_table(v: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in v.itertuples():
        rows.append({
            "size": r.size, "batch": r.batch, "variant": r.variant, "processes": r.processes,
            "ms/step": f"{r.ms:.3f}",
            "processes' range": f"{r.lo:.3f}–{r.hi:.3f}" if r.processes > 1 else "–",
            "tokens/s": f"{r.tokens_per_s:.0f}", "floor ms": f"{r.floor_ms:.3f}",
            "% floor": f"{r.floor_pct:.1f}" + (f" ({r.floor_lo:.1f}–{r.floor_hi:.1f})"
                                                 if r.processes > 1 else ""),
            "÷ while-fused (each process)": span(r.vs_while_fused, ".3f") + "x"
            if r.vs_while_fused else "–"})
    return pd.DataFrame(rows)


def tokens_line(t: pd.DataFrame) -> str:
    """Whether mega and while-mega decoded the same tokens as each other in every process, and
    as fused and while-fused."""
    loops_same, as_fused = [], []
    for _, g in t.groupby(["size", "batch", "process"]):
        sha = dict(zip(g["variant"], g["sha"], strict=True))
        if {"mega", "while-mega"} <= set(sha):
            loops_same.append(sha["mega"] == sha["while-mega"])
        if {"mega", "fused"} <= set(sha):
            as_fused.append(sha["mega"] == sha["fused"])
    if not loops_same:
        return bullet("Tokens.", "no process here timed both `mega` and `while-mega`.")
    both = "every" if all(loops_same) else "NOT every"
    fused = (f"the same as `fused`'s in {sum(as_fused)} of {len(as_fused)} processes"
             if as_fused else "not compared with `fused`'s")
    return bullet("Tokens.", f"`mega` and `while-mega` decoded the same tokens in {both} process "
                  f"(tokens_sha256, {len(loops_same)} processes); {fused} (bf16: mega's one-row "
                  "GEMVs add each dot product in another order than fused's kernels, so a "
                  "near tie between two logits can go the other way; the fp32 check at "
                  "\"highest\" against `kv` is the tests').")


def goals(v: pd.DataFrame) -> list:
    """Issue 42's goals at batch 1, each (size, what mega did, reached: True, False or None where
    not measured): the floor share at 125M and 1B, 8B's time against while-fused's."""
    out = []
    one = v[(v["batch"] == 1) & (v["variant"] == "mega")].set_index("size")
    for size, goal in FLOOR_GOALS.items():
        if size not in one.index:
            out.append((size, "not measured in this run", None))
            continue
        r = one.loc[size]
        fused = v[(v["size"] == size) & (v["batch"] == 1) & (v["variant"] == "while-fused")]
        was = f" (`while-fused`: {fused['floor_pct'].iloc[0]:.1f}%)" if len(fused) else ""
        spread = (f", processes {r['floor_lo']:.1f}–{r['floor_hi']:.1f}%"
                  if r["processes"] > 1 else "")
        out.append((size, f"`mega` ran {r['ms']:.3f} ms a token (processes {r['lo']:.3f}–"
                    f"{r['hi']:.3f}), {r['floor_pct']:.1f}% of the floor{spread}{was}, against "
                    f"a goal of {pct(goal, 0)}",
                    bool(r["floor_pct"] >= 100 * goal)))
    for size, than in SAME_AS.items():
        if size not in one.index or one.loc[size, "vs_while_fused"] is None:
            out.append((size, "not measured in this run", None))
            continue
        ratios = one.loc[size, "vs_while_fused"]
        mid = statistics.median(ratios)
        out.append((size, f"`mega` took {mid:.3f}x `{than}`'s time a token ({SAME_PROCESS}, "
                    f"the median of {len(ratios)} processes' own ratios, "
                    f"{span(ratios, '.3f')}), against a goal of no slower", bool(mid <= 1)))
    return out


def goal_lines(v: pd.DataFrame) -> list:
    words = {True: ": reached.", False: ": not reached.", None: "."}
    return [bullet(f"Goal at {SIZE_WORDS[size]}, batch 1:", said + words[reached])
            for size, said, reached in goals(v)]


def missing(t: pd.DataFrame) -> list:
    """The grid's configurations (SIZES x BATCHES, two processes a side) short of processes."""
    have = t.groupby(["size", "batch"])["process"].nunique().to_dict()
    short = [f"{s} batch {b} ({have.get((s, b), 0)} of 2)" for s in SIZES for b in BATCHES
             if have.get((s, b), 0) < 2]
    if not short:
        return []
    return [bullet("Not measured here:", f"{listing(short)} processes (the directory's "
                   "README says why).")]


def mega_sections(root: Path, fig: Path | None = None) -> list:
    t = runs(root)
    if t.empty:
        return []
    v = by_rung(t)
    first = t.iloc[0]
    made = made_line(first["versions"], first["config"],
                     len(t.groupby(["size", "batch", "process"])), model=False)
    return [f"## One kernel a step ({root.name})", MEGA_TEXT, made, *goal_lines(v),
            tokens_line(t), *missing(t), "### The rungs by size and batch (untraced)",
            frame_md_table(rung_table(v))]

