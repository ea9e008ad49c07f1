"""Generated blocks of tests/data/README.md: what the study's captures in tests/data/runs/ are
and show, each figure read from its run directory (run.json: configuration, versions, nsys;
the analysis of capture.sqlite: op records, busy, idle).

runs_config   the configuration and versions the ten runs share
runs_table    one row a run: its variant, traced and untraced ms/step, what a step holds
"""

from pathlib import Path

import pandas as pd

from analysis.toolkit import frame_md_table

from .captures import analysed, kernels_per_step
from .text import listing

RUNS = "tests/data/runs"
# run directory -> what it is there to show (words only: the figures are the table's)
SHOWS = {
    "static": "eager HF StaticCache on one stream; `.item()` each step",
    "pipelined-seed": "the article's ping-pong as written: the same op records a step on two "
                      "streams in turn",
    "compiled": "inductor: Triton names; `.item()` gaps",
    "pipelined": "the ping-pong written correctly: two streams, an event wait on the previous "
                 "step",
    "pipelined-compile": "the same, compiled, on two streams",
    "nocheck": "no stop check at all, no check ranges: the eager bound",
    "graphed-sync": "our own step in one CUDA graph (not compiled), `.item()` each step: the "
                    "`cudaGraphLaunch` and the flag copy a step; attention as cuBLAS batched "
                    "GEMVs (`gemvx`, short name `kernel`) and a `softmax_warp_forward` a layer",
    "graphed": "the same with the deferred check: every gap `queued` (launch latency between "
               "graph nodes); each step's GPU work ends after its NVTX range",
    "fused": "the fused step in one graph (Triton `_attention_kernel`, `_bias_ln_kernel`, "
             "`_bias_gelu_kernel`, cuBLAS `Kernel2` + `splitKreduce_kernel`), no memset",
    "fused-b2": "two micro-batches on two streams inside the graph",
}
# config keys that name the variant's own options, as its row says them
OPTIONS = (("compile", "--compile", "none"), ("branches", "--branches", 1),
           ("stop", "--stop", "none"))


def _runs(root: Path) -> list:
    """(name, run, [Analysis]) of each run of the table, in its order."""
    names = list(SHOWS)
    done = analysed([root / RUNS / n for n in names])
    return [(n, run, analyses) for n, (run, _, analyses, _) in zip(names, done, strict=True)]


def _shared(values: list) -> str:
    found = sorted({str(v) for v in values})
    return found[0] if len(found) == 1 else " / ".join(found)


def runs_config(root: Path) -> str:
    runs = _runs(root)
    config = [r.info["config"] for _, r, _ in runs]
    versions = [r.info["versions"] for _, r, _ in runs]
    nsys = [(r.info.get("nsys") or {}).get("version") for _, r, _ in runs]

    def each(key, where=config):
        return _shared([c.get(key) for c in where])

    return (f"All {len(runs)} (each run.json's `config` and `versions`): `{each('model')}`, "
            f"{each('dtype')}, TF32 `{each('matmul_precision')}`, batch {each('batch')}, "
            f"{each('new_tokens')} new tokens, `--window {each('window')}`, torch "
            f"{each('torch', versions)}, transformers {each('transformers', versions)}, driver "
            f"{each('driver', versions)}, {each('gpu', versions)}; nsys {_shared(nsys)}.")


def runs_table(root: Path) -> str:
    rows = []
    for name, run, (a, *_) in _runs(root):
        c, s = run.info["config"], a.summary
        options = [f"`{flag} {c[key]}`" for key, flag, default in OPTIONS
                   if c.get(key, default) not in (default, None)]
        untraced = run.untraced_ms_per_step()
        sync = s["idle_ns_by_cause"]["sync"] / 1e6
        rows.append({
            "dir": f"`runs/{name}/`",
            "variant, options": ", ".join([f"`{c['variant']}`", *options]),
            "ms/step traced / untraced": f"{run.traced_ms_per_step():.2f} / "
                                         + ("–" if untraced is None else f"{untraced:.2f}"),
            "kernels (op records) a step": f"{kernels_per_step(a):.0f} "
                                           f"({a.steps['op_records'].median():.0f})",
            "streams": str(s["streams"]),
            "GPU busy": f"{s['busy_share_of_window'] * 100:.1f}%",
            "sync idle ms, window": f"{sync:.2f}",
            "what it shows": SHOWS[name]})
    return frame_md_table(pd.DataFrame(rows))


def runs_made(root: Path) -> str:
    """Where each run was made: the study directory its nsys command wrote into."""
    made = {}
    for name, run, _ in _runs(root):
        out = (run.info.get("config") or {}).get("out", "")
        made.setdefault(out.split("/capture/")[0].rsplit("/", 1)[-1], []).append(f"`{name}`")
    return "Made by " + listing([f"{d} ({listing(n)})" for d, n in made.items()]) + \
        " (each run.json's `config.out`)."


def run_line(root: Path, run: str) -> str:
    """One run directory's configuration, versions and twin, from its own run.json (and
    untraced_steps.json where the twin ran)."""
    import json

    d = root / run
    info = json.loads((d / "run.json").read_text())
    c, v = info["config"], info.get("versions") or {}
    said = [f"`{c['variant']}`", f"`{c['model']}`", c["dtype"], f"TF32 `{c['matmul_precision']}`",
            f"batch {c['batch']}", f"{c['new_tokens']} new tokens", f"`--window {c['window']}`"]
    if c.get("stop") not in (None, "none"):
        said.append(f"`--stop {c['stop']}`")
    if (info.get("result") or {}).get("stop_step") is not None:
        said.append(f"stopped at step {info['result']['stop_step']}")
    said += [f"torch {v['torch']}", f"transformers {v['transformers']}", f"driver {v['driver']}",
             v["gpu"]]
    if (info.get("nsys") or {}).get("version"):
        said.append(f"nsys {info['nsys']['version']}")
    twin, hook = d / "untraced_steps.json", (info.get("hook") or {}).get("twin") or {}
    if twin.is_file():
        runs = hook.get("runs", json.loads(twin.read_text()).get("runs"))
        runs = len(runs) if isinstance(runs, list) else runs
        said.append(f"its untraced twin {runs} run{'s' * (runs != 1)}")
    return f"`{run}`: " + ", ".join(said) + " (its run.json)."


def graphlevel_run(root: Path) -> str:
    return run_line(root, "tests/data/runs/graphed-sync-graphlevel")


def while_graph_runs(root: Path) -> str:
    return run_line(root, "tests/data/runs/while-graph") + "\n\n" + run_line(
        root, "tests/data/loop/while-graph-graphlevel")


def metrics_run(root: Path) -> str:
    return run_line(root, "tests/data/runs/fused-metrics")


def kineto_run(root: Path) -> str:
    return run_line(root, "tests/data/runs/static-kineto")
