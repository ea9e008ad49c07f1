"""Study part `ladder`: the article's ladder untraced, from a study's bench files alone
(`bench-*.json`, each one `harness bench` process), its sentences made from the same rows as
its tables (study_text)."""

import json
from pathlib import Path

import pandas as pd

from analysis.toolkit import frame_md_table

from . import article
from .benches import (
    LADDER_NOTE,
    batch_table,
    benches,
    finish_options_table,
    finish_table,
    ladder_rows,
    ladder_table,
    model_text,
    numbered,
    scale_table,
)
from .text import (
    BETWEEN_PROCESSES,
    SAME_PROCESS,
    apart,
    between,
    bullet,
    fmt_ms,
    listing,
    pct,
    span,
    verdict,
    with_floor,
)


def _range(row: pd.Series) -> tuple:
    return row["ms_per_step_p10"], row["ms_per_step_p90"]


def _p(row: pd.Series, digits: int) -> str:
    return f"{row['ms_per_step_p10']:.{digits}f}–{row['ms_per_step_p90']:.{digits}f}"


def _pair(a: str, ra: pd.Series, b: str, rb: pd.Series, digits: int = 2) -> str:
    """`a` X against `b` Y ms/step (p10–p90 .. and ..: apart|overlapping)."""
    return (f"`{a}` {fmt_ms(ra['ms_per_step_median'])} against "
            f"`{b}` {fmt_ms(rb['ms_per_step_median'])} ms/step "
            f"(p10–p90 {_p(ra, digits)} and {_p(rb, digits)}: "
            f"{verdict(_range(ra), _range(rb))})")


def bench_processes(b: dict) -> str:
    """Which variants each bench file (one process) holds, in words; numbered files
    (`bench-batch-N`) as one entry with their numbers."""
    groups = {}
    for k, df in b.items():
        stem, _, n = k.rpartition("-")
        key = (stem, tuple(df.index)) if n.isdigit() else (k, tuple(df.index))
        groups.setdefault(key, []).append(int(n) if n.isdigit() else None)
    out = []
    for (stem, labels), ns in groups.items():
        ns = sorted(n for n in ns if n is not None)
        name = f"`bench-{stem}-N` (N = {', '.join(map(str, ns))})" if ns else f"`bench-{stem}`"
        out.append(f"{name}: {', '.join(labels)}")
    return "; ".join(out)


def _floors(floors: dict | None) -> dict:
    from .aa import floors as aa_floors

    return aa_floors() if floors is None else floors


def ladder_findings(b: dict, floors: dict | None = None) -> list:
    floors = _floors(floors)
    eager_floor = floors.get("eager")
    out = []
    if "ladder" not in b:
        return out
    lad = ladder_rows(b)
    naive = lad.loc["naive"]
    base = naive["ms_per_step_median"]
    same = [v for v in lad.index if v != "naive" and lad.loc[v, "bench"] == naive["bench"]]
    other = [v for v in lad.index if lad.loc[v, "bench"] != naive["bench"]]
    x = {v: base / lad.loc[v, "ms_per_step_median"] for v in lad.index}
    if same:
        best = max(same, key=x.get)
        text = (f"In one process (`{naive['bench']}`) the fastest rung, `{best}`, ran "
                f"{fmt_ms(lad.loc[best, 'ms_per_step_median'])} against naive's "
                f"{fmt_ms(base)} ms/step ({x[best]:.2f}x)")
        if "compiled" in same and best != "compiled":
            text += f", `compiled` {x['compiled']:.2f}x"
        text += "."
        if "pipelined+compile" in other:
            r = lad.loc["pipelined+compile"]
            text += with_floor(
                f" The article's last rung, `pipelined+compile`, ran "
                f"{fmt_ms(r['ms_per_step_median'])} in another process (`{r['bench']}`): "
                + between(x["pipelined+compile"], floors.get("compiled"),
                          f"{x['pipelined+compile']:.2f}x naive's figure")
                + f", {BETWEEN_PROCESSES}", [floors.get("compiled")]) + "."
        reached = [v for v in lad.index if x[v] >= article.speedup()]
        title = (f"The article's \"about {article.speedup():g}x over naive\" "
                 + ("holds." if reached else "does not hold here."))
        out.append(bullet(title, text))
    scale = numbered(b, "scale")
    if len(scale) >= 2:
        first, last = min(scale), max(scale)
        nv = [df.loc["naive", "ms_per_step_median"] for df in scale.values()]
        kv = [df.loc["kv", "ms_per_step_median"] for df in scale.values()]
        ratio = {n: df.loc["naive", "ms_per_run_median"] / df.loc["kv", "ms_per_run_median"]
                 for n, df in scale.items()}
        mib = {n: df.loc["naive", "peak_reserved_bytes"] / 2**20 for n, df in scale.items()}
        grows = all(a < c for a, c in zip(nv, nv[1:], strict=False))
        text = (f"From {first} to {last} new tokens (`bench-scale-N`, one process each, naive "
                f"and kv in it) naive's ms/step goes from {nv[0]:.3f} to {nv[-1]:.3f} "
                f"({'rising at every length' if grows else 'not monotonic'}) while kv's stays "
                f"within {span(kv)}; naive/kv per run grows from {ratio[first]:.2f}x to "
                f"{ratio[last]:.2f}x. Naive's peak reserved memory: {mib[first]:.0f} MiB at "
                f"{first} tokens, {mib[last]:.0f} MiB at {last}")
        if "naive" in lad.index:
            text += (f"; in the ladder's process (100 new tokens) "
                     f"{pct(naive['fragmentation'])} of it was free at the peak "
                     "(fragmentation)")
        out.append(bullet("Naive is quadratic, the KV cache linear.", text + "."))
    if "kv-expandable" in lad.index and "kv" in lad.index:
        e, k = lad.loc["kv-expandable"], lad.loc["kv"]
        ratio = e["ms_per_step_median"] / k["ms_per_step_median"]
        out.append(bullet(
            "Expandable segments.",
            with_floor(
                f"`kv-expandable` (`{e['bench']}`, a process of its own so that the setting "
                f"precedes CUDA) reserved {e['peak_reserved_bytes'] / 2**20:.0f} against kv's "
                f"{k['peak_reserved_bytes'] / 2**20:.0f} MiB (fragmentation "
                f"{pct(e['fragmentation'])} against {pct(k['fragmentation'])}) and ran "
                f"{fmt_ms(e['ms_per_step_median'])} against {fmt_ms(k['ms_per_step_median'])} "
                f"ms/step, {BETWEEN_PROCESSES}: "
                + between(ratio, eager_floor, f"{pct(ratio - 1, sign=True)}"),
                [eager_floor]) + "."))
    if {"static", "kv"} <= set(same) | {"naive"} and "static" in lad.index:
        out.append(bullet(
            "The static cache, eager.",
            f"{SAME_PROCESS.capitalize()} (`{naive['bench']}`): "
            f"{_pair('static', lad.loc['static'], 'kv', lad.loc['kv'])}."))
    out += pingpong_findings(b, lad)
    return out


def pingpong_findings(b: dict, lad: pd.DataFrame) -> list:
    out = []
    eager = []
    for name, rows in (("ladder", lad), ("finish", b.get("finish"))):
        if rows is not None and {"pipelined", "static"} <= set(rows.index):
            bench = rows.loc["static", "bench"] if "bench" in rows else f"bench-{name}"
            eager.append(f"in `{bench}` {_pair('pipelined', rows.loc['pipelined'], 'static', rows.loc['static'], 2 if name == 'ladder' else 3)}")  # noqa: E501
    if eager:
        out.append(bullet("The two-stream ping-pong, eager:",
                          f"each comparison {SAME_PROCESS}: {'; '.join(eager)}."))
    batch = numbered(b, "batch")
    if batch:
        gains = {n: df.loc["compiled", "ms_per_step_median"]
                 / df.loc["pipelined+compile", "ms_per_step_median"] - 1
                 for n, df in batch.items()}
        inside = sum(not apart(_range(df.loc["compiled"]), _range(df.loc["pipelined+compile"]))
                     for df in batch.values())
        smallest = min(batch)
        out.append(bullet(
            "The ping-pong, compiled, by batch:",
            f"at batches {listing([str(n) for n in batch])} (`bench-batch-N`, one process a "
            f"batch, `compiled` and `pipelined+compile` in it) the ping-pong's gain over "
            f"`compiled` is {span(gains.values(), '+.1%')}, its p10–p90 overlapping "
            f"`compiled`'s at {inside} of {len(batch)} batches; at batch {smallest} "
            f"{gains[smallest]:+.1%} (the article: {article.pingpong_gain():+.1%} at its "
            f"smallest batch, on an {article.gpu()}: docs/article-claims.json)."))
    if {"pipelined+compile", "pipelined-seed+compile"} <= set(lad.index):
        out.append(bullet(
            "The article's ping-pong as written",
            "(`pipelined-seed`, which reads its pinned flag without waiting on an event) is "
            "not safe: on a slowed GPU (`--gpu-sleep-cycles`) the GPU test sees it act on a "
            "stale flag; timing cannot tell it from the correct one: "
            f"{SAME_PROCESS} (`{lad.loc['pipelined+compile', 'bench']}`) "
            f"{_pair('pipelined-seed+compile', lad.loc['pipelined-seed+compile'], 'pipelined+compile', lad.loc['pipelined+compile'])}."))  # noqa: E501
    return out


def finish_findings(b: dict, floors: dict | None = None) -> list:
    graph_floor = _floors(floors).get("graph-replayed")
    out = []
    fin = b.get("finish")
    if fin is None:
        return out
    if {"graphed-sync", "graphed"} <= set(fin.index):
        s, g = fin.loc["graphed-sync"], fin.loc["graphed"]
        cost = s["ms_per_step_median"] - g["ms_per_step_median"]
        out.append(bullet(
            "Once launches are cheap, the sync's cost:",
            f"{SAME_PROCESS.capitalize()} (`bench-finish`), "
            f"{_pair('graphed-sync', s, 'graphed', g, 3)}: the `.item()` each step costs "
            f"{cost * 1e3:.1f} µs, {pct(cost / g['ms_per_step_median'])} of the graphed step."))
    if "fused" in fin.index:
        f = fin.loc["fused"]
        text = f"`fused` ran {fmt_ms(f['ms_per_step_median'])} ms/step"
        ref = [(v, fin.loc[v]) for v in ("hf-generate", "graphed") if v in fin.index]
        if ref:
            text += f" {SAME_PROCESS} (`bench-finish`): " + ", ".join(
                f"{r['ms_per_step_median'] / f['ms_per_step_median']:.2f}x `{v}` "
                f"({fmt_ms(r['ms_per_step_median'])})" for v, r in ref)
        text += (f"; it reaches {f['weight_floor_pct']:.1f}% of the weight-bandwidth floor "
                 "(the weights' bytes over the bench's measured copy rate).")
        out.append(bullet("The fused step.", text))
    eager = [v for v in ("static", "pipelined", "deferred", "check-every-k", "nocheck")
             if v in fin.index]
    if eager:
        widest = max(eager, key=lambda v: fin.loc[v, "ms_per_step_p90"]
                     - fin.loc[v, "ms_per_step_p10"])
        out.append(bullet(
            "The finish bench's eager rows",
            f"ran {span(fin.loc[eager, 'ms_per_step_median'])} ms/step, "
            f"`{widest}` with p10–p90 {_p(fin.loc[widest], 3)}."))
    if "lt-off" in b and "graphed" in fin.index:
        lt, g = b["lt-off"].loc["graphed"], fin.loc["graphed"]
        ratio = lt["ms_per_step_median"] / g["ms_per_step_median"]
        out.append(bullet(
            "cuBLASLt's memsets:",
            with_floor(
                "torch sends a GEMM with a bias to cuBLASLt, whose split-K kernels for these "
                "shapes come with a memset node (the `[memset]` rows of the per-kernel tables); "
                f"with `DISABLE_ADDMM_CUDA_LT=1` (`bench-lt-off`, a process of its own) the "
                f"graphed step ran {fmt_ms(lt['ms_per_step_median'])} against "
                f"{fmt_ms(g['ms_per_step_median'])} ms/step in `bench-finish`, "
                f"{BETWEEN_PROCESSES}: " + between(ratio, graph_floor, f"{pct(1 - ratio)} less"),
                [graph_floor]) + "."))
    branches = numbered(b, "branches")
    if branches and "fused" in fin.index:
        f = fin.loc["fused"]["ms_per_step_median"]
        out.append(bullet(
            "Busy is not fast:",
            with_floor(
                "`fused` with its batch cut into micro-batches on streams inside the graph "
                f"(each its own process, {BETWEEN_PROCESSES}) ran " + ", ".join(
                    f"{fmt_ms(df.loc['fused', 'ms_per_step_median'])} ms/step with {n} ("
                    + between(df.loc["fused", "ms_per_step_median"] / f, graph_floor,
                              pct(df.loc["fused", "ms_per_step_median"] / f - 1, sign=True))
                    + ")" for n, df in branches.items())
                + f", against {fmt_ms(f)} with one (`bench-finish`)", [graph_floor])
            + ": every micro-batch reads all the weights again."))
    return out


def bench_config(study: Path, stem: str) -> dict:
    """A bench file's harness configuration (batch, new tokens, stop schedule, ...)."""
    return json.loads((study / f"bench-{stem}.json").read_text()).get("config") or {}


def ladder_header(study: Path, b: dict) -> str:
    data = json.loads((study / "bench-ladder.json").read_text())
    v, c = data.get("versions") or {}, data.get("config") or {}
    machine = (f"{v.get('gpu')}, driver {v.get('driver')}, torch {v.get('torch')} (CUDA "
               f"{v.get('torch_cuda')}), transformers {v.get('transformers')}, Python "
               f"{v.get('python')}. " if v else "")
    return (
        f"`{study.name}`: {machine}{model_text(data.get('model'))} with seeded random weights, "
        f"{c.get('dtype')} with matmul precision \"{c.get('matmul_precision')}\", batch "
        f"{c.get('batch')}, {c.get('new_tokens')} new tokens unless a table says otherwise, "
        f"empty prompts, greedy decoding; untraced: medians of {c.get('repeats')} runs after a "
        "warm-up, p10–p90 beside them. Each bench file is one `harness bench` process, its "
        f"variants one after another: {bench_processes(b)}. Two variants of one process are "
        "compared by their p10–p90 ranges (apart or overlapping); two of different processes "
        "only outside the spread between processes (part A/A).")


def ladder_sections(study: Path, fig: Path | None) -> list:
    """The part's Markdown from the study's bench files; figures into `fig` when given."""
    from .plots import plot_bars, plot_batch, plot_scale

    b = benches(study)
    if "ladder" not in b:
        return []
    from .aa import floors as aa_floors

    floors = aa_floors()
    parts = [f"## The article's ladder, untraced ({study.name})", ladder_header(study, b),
             *ladder_findings(b, floors), *finish_findings(b, floors)]

    def section(title, table, figure=None):
        image = [f"![{figure.replace('-', ' ')}](figures/{figure}.png)"] if figure else []
        return [title, frame_md_table(table), *image]

    lad = ladder_rows(b)
    c = bench_config(study, "ladder")
    if fig is not None:
        plot_bars(fig / "ladder.png", list(lad.index), list(lad["ms_per_step_median"]),
                  list(lad["ms_per_step_p10"]), list(lad["ms_per_step_p90"]),
                  "ms per step (median, p10–p90)",
                  f"The article's ladder, untraced (batch {c.get('batch')}, "
                  f"{c.get('new_tokens')} tokens, {c.get('dtype')})")
    parts += section(f"### The ladder (batch {c.get('batch')}, {c.get('new_tokens')} new "
                     "tokens)", ladder_table(b, floors.get("eager")), "ladder")
    parts.append(LADDER_NOTE)
    if numbered(b, "scale"):
        if fig is not None:
            plot_scale(fig / "scaling.png", b)
        parts += section("### Naive vs KV cache as the sequence grows (one process a length)",
                         scale_table(b), "scaling")
    if numbered(b, "batch"):
        if fig is not None:
            plot_batch(fig / "batch.png", b)
        parts += section("### The ping-pong by batch (both compiled; one process a batch)",
                         batch_table(b), "batch")
    if "finish" in b:
        f = bench_config(study, "finish")
        parts += section(f"### The ladder finished (stop schedule {f.get('stop')}, batch "
                         f"{f.get('batch')}; one process)", finish_table(b))
        if "lt-off" in b or numbered(b, "branches"):
            parts += section("### The fused step by micro-batches, and graphed off cuBLASLt "
                             "(each its own process)", finish_options_table(b))
    return parts
