"""README.md's generated blocks: the findings (each part's headline figures) and the profiler's
own share over every committed capture (blocks.py registers them)."""

import json
from pathlib import Path

from . import article
from .overview import every_capture, overview_findings
from .sources import SOURCES
from .text import (
    BETWEEN_PROCESSES,
    SAME_PROCESS,
    between,
    beyond_span,
    floor_note,
    listing,
    pct,
    pct_span,
    span,
)


def _sync_costs(root: Path) -> tuple:
    """`graphed-sync` ÷ `graphed` − 1, untraced: (in one process: [(cost, where)], between
    processes: [(ratio, where)]) from the ladder's finish bench, the family's ladder and the
    observer sweep (each variant its own process there)."""
    from analysis.toolkit import median

    from .benches import benches
    from .family import ladder_benches
    from .overhead import process_ms, variant_dirs

    same, apart = [], []
    fin = benches(root / SOURCES["ladder"])["finish"]
    same.append((fin.loc["graphed-sync", "ms_per_step_median"]
                 / fin.loc["graphed", "ms_per_step_median"], "GPT-2 batch 32"))
    for batch, rows in ladder_benches(root / SOURCES["family"]).items():
        if {"graphed-sync", "graphed"} <= set(rows.index) and not any(
                bool(rows.loc[v].get("own_process") is True) for v in ("graphed-sync", "graphed")):
            same.append((rows.loc["graphed-sync", "ms_per_step_median"]
                         / rows.loc["graphed", "ms_per_step_median"], f"Llama batch {batch}"))
    bench = {(batch, vdir.name): process_ms(vdir)
             for batch, vdir in variant_dirs(root / SOURCES["observer"])}
    for batch in sorted({b for b, _ in bench}):
        a, g = bench.get((batch, "graphed-sync")), bench.get((batch, "graphed"))
        if a and g:
            apart.append((median(a) / median(g), f"GPT-2 batch {batch}"))
    return same, apart


def readme_findings(root: Path) -> str:
    from .aa import floors
    from .benches import benches, ladder_rows

    t = every_capture(root)
    floor = floors()
    b = benches(root / SOURCES["ladder"])
    lad, fin = ladder_rows(b), b["finish"]
    naive = lad.loc["naive"]
    compiled_x = naive["ms_per_step_median"] / lad.loc["compiled", "ms_per_step_median"]
    same_bench = lad.loc["compiled", "bench"] == naive["bench"]
    pc_x = naive["ms_per_step_median"] / lad.loc["pipelined+compile", "ms_per_step_median"]
    same, apart = _sync_costs(root)

    def eager(family: str, column: str, f, digits=1) -> str:
        rows = t[t["kind"] == f"{family} eager"]
        return f"{f(rows[column], digits)} ({family}, {len(rows)} captures)"

    fused = t[(t["variant"] == "fused") & t["kind"].str.endswith("node by node")
              & (t["branches"].fillna(1) == 1)]
    f = fin.loc["fused"]
    hf = fin.loc["hf-generate", "ms_per_step_median"]
    ops = listing([f"{span(t[t['kind'] == f'{fam} eager']['op_records'], '.0f')} ({fam})"
                   for fam in ("GPT-2", "Llama")])
    return (
        "`docs/RESULTS.md`, every number made again from the runs committed here by `python -m "
        "study.publish`: in eager mode the GPU is busy "
        + listing([eager(fam, "busy", pct_span) for fam in ("GPT-2", "Llama")])
        + " of a captured step, and "
        + listing([eager(fam, "host", pct_span, 0).split(" (")[0] + f" ({fam})"
                   for fam in ("GPT-2", "Llama")])
        + f" of its idle is the host launching {ops} op records a step (traced shares), so "
        "hiding the sync on a second stream buys nothing (RESULTS.md's ladder part, in one "
        f"process each); the article's {article.speedup():g}x (docs/article-claims.json) is "
        f"{compiled_x:.2f}x here (GPT-2 batch 32, `compiled` "
        f"over `naive`, {SAME_PROCESS if same_bench else BETWEEN_PROCESSES}; "
        f"`pipelined+compile` "
        + between(pc_x, floor.get("compiled"), f"{pc_x:.2f}x") + f", {BETWEEN_PROCESSES}); "
        "once the step is one CUDA graph the per-step sync costs "
        f"{pct_span([r - 1 for r, _ in same])} of it untraced {SAME_PROCESS} "
        f"({listing([w for _, w in same])}) and, {BETWEEN_PROCESSES}, "
        + beyond_span([r for r, _ in apart], floor.get("graph-replayed"), 1, "pair")
        + f" ({listing([w for _, w in apart])}; {floor_note([floor.get('graph-replayed')])}); "
        f"the fused step runs {f['ms_per_step_median']:.3f} ms/step (GPT-2 batch 32), "
        f"{hf / f['ms_per_step_median']:.2f}x faster than `model.generate` with a static cache "
        f"{SAME_PROCESS}, with the GPU busy {pct_span(fused['busy'])} of its {len(fused)} "
        "node-level captures (traced; batch "
        f"{listing([str(int(x)) for x in sorted(fused['batch'].unique())])}).")


def profiler_share(root: Path) -> str:
    """README's block: nsys's overhead and share of the bubble over every committed capture."""
    return "**The profiler's own share.** " + " ".join(
        overview_findings(every_capture(root), " (docs/RESULTS.md, \"Every capture, by kind\")"))


def readme_sizes(root: Path) -> str:
    """README's block: the ladder at Llama-3-8B's shape (study part `sizes`) and the peer bench
    there (VARIANTS.md's peer-8b): the fastest rung and its floor share, what one CUDA graph a
    token buys, the `.item()` a step, and the ratio to gpt-fast's compiled decode."""
    from .doc_variants import PEER_8B
    from .sizes import earlier_study, graph_buy, item_us, size_benches, sync_rows

    study = root / SOURCES["sizes"]
    benches = size_benches(study)
    rows, _ = benches[("8b", 1)]
    ms = rows["ms_per_step_median"]
    best = ms.idxmin()
    eager, eager_ms, graphed_ms = graph_buy(rows)
    sync = sync_rows(benches, study).set_index("configuration")
    item = next(r for c, r in sync.iterrows() if c.startswith("8b "))
    before = earlier_study(study)
    then_rows = size_benches(before)[("8b", 1)][0] if before is not None else None
    then = item_us(then_rows) if then_rows is not None else None
    graphed_then = "" if then_rows is None or "graphed" not in then_rows.index else (
        f"; {then_rows.loc['graphed', 'ms_per_step_median']:.3f} in the earlier run")
    earlier = "" if then is None else (
        f"; {then:.1f} µs in the earlier run of the same configuration "
        f"(`{'/'.join(before.parts[-3:])}`), {abs(float(item['.item() µs/step']) - then):.1f} µs "
        "apart")
    peer = json.loads((root / PEER_8B).read_text())
    p = {(r["side"], r["batch"]): r for r in peer["rows"]}
    batches = sorted({b for _, b in p})
    c = json.loads((study / "bench-sizes-8b-b1.json").read_text())["config"]
    return (
        f"**At Llama-3-8B's shape** (random {c['dtype']} weights drawn on the GPU, batch "
        f"{c['batch']}, {c['new_tokens']} tokens, one process; RESULTS.md's part `sizes`): the "
        "fastest rung, "
        f"`{best}`, runs {ms[best]:.3f} ms a token, {rows.loc[best, 'floor']['floor_pct']:.1f}% "
        "of the bandwidth floor (the weights and KV cache read once a token at the copy rate the "
        f"process measured); one CUDA graph a token (`graphed`, {graphed_ms:.3f}"
        f"{graphed_then}) is "
        f"{eager_ms / graphed_ms:.1f}x the fastest eager rung (`{eager}`, {eager_ms:.3f}), and "
        f"the per-step `.item()` then costs {item['.item() µs/step']} µs "
        f"({item['.item() share']} of the step{earlier}). Against gpt-fast's compiled decode at "
        "its "
        f"`llama-3-8b` config (VARIANTS.md, {peer['config']['processes']} processes a side): "
        + listing([f"{p[('fused', b)]['speedup_vs_gpt_fast']:.2f}x at batch {b}"
                   for b in batches]) + " for `fused`, in that run.")


def readme_mega(root: Path) -> str:
    """README's block: mega at batch 1 against while-fused, in the part's figures."""
    from .mega import FLOOR_GOALS, SAME_AS, SIZE_WORDS, SIZES, by_rung, goals, runs

    study = root / SOURCES["mega"]
    t = runs(study)
    rungs = by_rung(t)
    v = rungs.set_index(["size", "batch", "variant"])
    gpu = t.iloc[0]["versions"].get("gpu")
    said = []
    for size in SIZES:
        if (size, 1, "mega") not in v.index or (size, 1, "while-fused") not in v.index:
            continue
        m, w = v.loc[(size, 1, "mega")], v.loc[(size, 1, "while-fused")]
        said.append(f"{SIZE_WORDS[size]} {m['ms']:.3f} ms a token, {m['floor_pct']:.1f}% of the "
                    f"floor (`while-fused` {w['ms']:.3f}, {w['floor_pct']:.1f}%)")
    reached = [r for _, _, r in goals(rungs)]
    aims = [f"at least {pct(goal, 0)} of the floor at {SIZE_WORDS[s]}"
            for s, goal in FLOOR_GOALS.items()]
    aims += [f"no slower than `{than}` at {SIZE_WORDS[s]}" for s, than in SAME_AS.items()]
    processes = t[t["batch"] == 1].groupby("size")["process"].nunique()
    return (f"**One kernel a step** (`mega`: the Llama family's decode step in one persistent "
            f"Triton kernel; RESULTS.md's part `mega`, {gpu}, {t.iloc[0]['config']['dtype']}, "
            f"batch 1, medians over {span(processes.tolist(), 'd')} processes a configuration): "
            f"{listing(said)}. Issue 42's goals ({listing(aims)}): "
            f"{sum(r is True for r in reached)} of {len(reached)} reached; "
            "docs/mega-20261204/README.md says what bounds it and what would close the rest.")


# README's first screen: the command a new user runs on a bundled capture, and the summary it
# prints (its first FIRST_SCREEN_LINES lines: the run, where the steps came from, and one line a
# quantity), made by the analysis itself from the committed capture.
FIRST_SCREEN_RUN = "tests/data/runs/compiled"
FIRST_SCREEN_LINES = 10


def first_screen(root: Path) -> str:
    """README's opening block: `gapscope analyze` of a bundled capture and its summary lines, as
    the command prints them."""
    from analysis import load

    text = load(root / FIRST_SCREEN_RUN).to_text()
    lines = text.splitlines()[:FIRST_SCREEN_LINES]
    return "\n".join(["```", f"$ gapscope analyze {FIRST_SCREEN_RUN}", *lines, "```"])
