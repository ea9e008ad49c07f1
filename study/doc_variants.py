"""docs/VARIANTS.md's generated blocks (blocks.py): what `graphed` and `fused` show in their
bundled captures and the ladder's bench, the Llama family's fused step and the peer comparison
with gpt-fast, from the committed run directories and JSONs."""

import json
from pathlib import Path

from .text import (
    BETWEEN_PROCESSES,
    SAME_PROCESS,
    between,
    beyond,
    floor_note,
    fmt_ms,
    listing,
    pct,
    pct_span,
)

PEER = "docs/llama-peer-20261201"
PEER_METRICS = "docs/llama-peer-20261201/20261201T180227Z-graphed-metrics"
LADDER = "docs/study-20261130T221926Z"
RUNS = "tests/data/runs"


def _capture(root: Path, name: str):
    from .captures import analysed

    ((run, _, (a, *_), _),) = analysed([root / RUNS / name])
    return a, run


def _per_step(a, kind: str) -> float:
    ops = a.ops[a.ops["step"] >= 0]
    return float((ops["kind"] == kind).groupby(ops["step"]).sum()
                 .reindex(a.steps["step"].unique(), fill_value=0).median())


def graphed_shows(root: Path) -> str:
    """`graphed`'s op records a step in its node-level capture, and its memset nodes."""

    a, _ = _capture(root, "graphed")
    return (f"**Shows:** one graph launch per step: launch overhead gone (the GPU's busy share "
            "in its captures: RESULTS.md); what is left idle is `queued` in the analysis: the "
            f"graph's own latency between its {a.steps['op_records'].median():.0f} op records a "
            f"step, {_per_step(a, 'memset'):.0f} of them the memset nodes that cuBLASLt's split-K "
            f"GEMMs bring (`{RUNS}/graphed`, traced node by node; `fused` has none). The GPU test "
            "replays it under `set_sync_debug_mode(\"error\")`.")


def fused_shows(root: Path) -> str:
    """`fused` against `graphed`: op records (their captures), ms/step (one bench process), busy
    (every node-level capture of it), and two micro-batches (their own process and capture)."""
    from .aa import floor
    from .benches import benches, numbered
    from .overview import every_capture

    f_a, _ = _capture(root, "fused")
    g_a, _ = _capture(root, "graphed")
    b2, _ = _capture(root, "fused-b2")
    b = benches(root / LADDER)
    fin = b["finish"]
    fused, graphed = (fin.loc[v, "ms_per_step_median"] for v in ("fused", "graphed"))
    t = every_capture(root)
    nodes = t[(t["variant"] == "fused") & t["kind"].str.endswith("node by node")
              & (t["branches"].fillna(1) == 1)]
    two = numbered(b, "branches").get(2)
    g = floor(root, "graph-replayed")
    text = (f"**Shows:** {f_a.steps['op_records'].median():.0f} op records a step instead of "
            f"{g_a.steps['op_records'].median():.0f} (their node-level captures); "
            f"{fmt_ms(fused)} against {fmt_ms(graphed)} ms/step for `graphed` on the H200, "
            f"untraced {SAME_PROCESS} (`bench-finish`, GPT-2 batch 32), the GPU busy "
            f"{pct_span(nodes['busy'])} of its {len(nodes)} node-level captures (traced; "
            "docs/RESULTS.md).")
    if two is not None:
        ms2 = two.loc["fused", "ms_per_step_median"]
        text += (" With `--branches 2` the GPU is busier still "
                 f"({pct(b2.summary['busy_share_of_window'])} "
                 f"in its capture) and the step slower untraced ({fmt_ms(ms2)} ms/step in a "
                 f"process of its own, {BETWEEN_PROCESSES}: "
                 + between(ms2 / fused, g, pct(ms2 / fused - 1, sign=True))
                 + "): each micro-batch reads all the weights again.")
    return text + (f" ({floor_note([g])})" if "within noise" in text else "")


def _peer(root: Path) -> dict:
    return json.loads((root / PEER / "peer.json").read_text())


def _kernels(root: Path) -> dict:
    """(variant, batch) -> kernels.json's row (torch.profiler over a whole run)."""
    doc = json.loads((root / PEER / "kernels.json").read_text())
    return {(r["variant"], r["batch"]): r for r in doc["rows"]}


def llama_fused(root: Path) -> str:
    """The Llama family's fused step measured: its kernels a step and its time, beside
    `graphed`'s, from the peer directory."""
    rows = {(r["side"], r["batch"]): r for r in _peer(root)["rows"]}
    k = _kernels(root)
    batches = sorted({b for _, b in rows})
    fused = listing([f"{rows[('fused', b)]['ms_per_token_median']:.3f} ms/token at batch {b}"
                     for b in batches if ("fused", b) in rows])
    graphed = listing([f"{rows[('graphed', b)]['ms_per_token_median']:.3f}" for b in batches
                       if ("graphed", b) in rows])
    kf = listing(sorted({f"{k[('fused', b)]['kernels_per_step']:.0f}" for b in batches
                         if ("fused", b) in k}))
    kg = listing([f"{k[('graphed', b)]['kernels_per_step']:.0f} at batch {b}" for b in batches
                  if ("graphed", b) in k])
    return (f"Measured on the H200 (`{PEER}`: bf16, the `stories110M` shape, 100 tokens, each "
            "side in 3 processes, CUDA events around the decode; medians over the processes): "
            f"{fused}, against `graphed`'s {graphed}; torch.profiler over a whole run counts "
            f"{kf} kernels a step for `fused` and {kg} for `graphed` (`kernels.json`).")


def peer_block(root: Path) -> str:
    """The table of peer.json: each side's ms/token (median over processes, min–max) and the
    speedup against gpt-fast, by batch."""
    doc = _peer(root)
    c = doc["config"]
    rows = {(r["side"], r["batch"]): r for r in doc["rows"]}
    said = (f"peer.json's `config`: {c['dtype']}, {c['new_tokens']} new tokens, "
            f"{c['processes']} processes a side and batch, gpt-fast's top-k {c['top_k']} "
            f"sampling at temperature {c['temperature']}.")
    lines = [said, "", "| batch | gpt-fast ms/token | `fused` | `graphed` | `fused` vs gpt-fast | "
             "`graphed` vs gpt-fast |", "| --- | --- | --- | --- | --- | --- |"]
    def cell(side: str, b: int) -> str:
        r = rows[(side, b)]
        return f"{r['ms_per_token_median']:.3f} ({r['min']:.3f}-{r['max']:.3f})"

    for b in sorted({b for _, b in rows}):
        lines.append(f"| {b} | {cell('gpt-fast', b)} | {cell('fused', b)} | {cell('graphed', b)} | "
                     f"{rows[('fused', b)]['speedup_vs_gpt_fast']:.2f}x | "
                     f"{rows[('graphed', b)]['speedup_vs_gpt_fast']:.2f}x |")
    from .aa import floor

    g = floor(root, "graph-replayed")
    inside = [f"`{side}` at batch {b}" for (side, b), r in rows.items() if side != "gpt-fast"
              and not beyond(r["speedup_vs_gpt_fast"], g)]
    return "\n".join(lines) + "\n\n" + (
        f"Each ratio is of two sides' processes ({BETWEEN_PROCESSES}): "
        + (f"{listing(inside)} within noise" if inside else "every one beyond the noise")
        + f" ({floor_note([g])}).")


def _embedding_share(shape: dict, variant: str, batch: int, new_tokens: int) -> float:
    """How much lower the floor is with the untied input embedding counted as the rows a step
    reads (one a sequence) instead of whole."""
    from analysis.toolkit import step_bytes

    total = step_bytes(shape, variant, batch, new_tokens, range(new_tokens))["total"]
    row = shape["hidden"] * shape["dtype_bytes"]
    return (shape["vocab"] - batch) * row / total


def peer_notes(root: Path) -> str:
    """The floor shares of peer.json, what counting the input embedding as read does to them,
    the tokens against `kv`, and what bounds `graphed` (its GPU-metrics capture, kernels.json)."""
    from .captures import analysed

    doc = _peer(root)
    rows = {(r["side"], r["batch"]): r for r in doc["rows"]}
    batches = sorted({b for _, b in rows})
    ((run, _, (m, *_), _),) = analysed([root / PEER_METRICS])
    shape = run.info["floor"]["shape"]
    emb = shape["vocab"] * shape["hidden"] * shape["dtype_bytes"]
    lower = [_embedding_share(shape, v, b, doc["config"]["new_tokens"])
             for v in ("fused", "graphed") for b in batches]

    def shares(side: str) -> str:
        return listing([f"{rows[(side, b)]['floor_pct']:.1f}%" for b in batches])

    gm = m.summary["gpu_metrics"]
    copy = json.loads((root / PEER_METRICS / "untraced.json").read_text())["copy_bytes_per_s"]
    k = _kernels(root)
    g1 = k[("graphed", batches[0])]
    return (
        f"`fused` is {shares('fused')} of the bandwidth floor (harness/floor.py at the copy rate "
        f"measured in each process; batch {listing([str(b) for b in batches])}), gpt-fast "
        f"{shares('gpt-fast')}, `graphed` {shares('graphed')}. That floor counts the untied "
        f"input embedding whole ({emb / 1e6:.1f} of the model's "
        f"{shape['weight_bytes'] / 1e6:.1f} MB in bf16) though a step reads one row of it a "
        "sequence (METRICS.md, Bandwidth floor): counted as read, the floor and each share of "
        f"`fused` and `graphed` here would be {pct_span(lower, 0)} lower (the same model's "
        "bytes, worked out for these batches). In bf16 our rungs' greedy tokens equal `kv`'s "
        "(same process, same weights) in "
        + listing(sorted({f"{rows[(v, b)]['tokens_equal_kv'] * 100:.0f}% of places for `{v}`"
                          for v in ("graphed", "fused") for b in batches}))
        + " (rounding differs where HF's modules and our kernels differ); at fp32 \"highest\" "
        "both give `kv`'s tokens (tests/test_gpu_llama.py). **`graphed` misses gpt-fast** at "
        f"every batch here. What bounds it, from a GPU-metrics capture of `graphed` at batch "
        f"{run.info['config']['batch']} (`{PEER_METRICS}`, `profile.sh graphed --metrics`): "
        f"GR active {gm['gr_active_pct']:.1f}% of the steps (the GPU is never without a "
        f"kernel: no launch gaps, one graph a step) but SMs active {gm['sm_active_pct']:.1f}%, "
        f"tensor {gm['tensor_active_pct']:.1f}%, DRAM read {gm['dram_read_gbps']:.0f} GB/s "
        f"({pct(gm['dram_read_gbps'] * 1e9 / copy, 0)} of the copy rate its bench measured); "
        f"torch.profiler over a whole run (`kernels.json`) counts "
        f"{g1['kernels_per_step']:.0f} kernels a step at batch {g1['batch']}"
        + "".join(f" and {k[('graphed', b)]['kernels_per_step']:.0f} at batch {b}"
                  for b in batches[1:] if ("graphed", b) in k)
        + f", {g1['ms_per_step_median'] * 1e3 / g1['kernels_per_step']:.1f} µs of the step "
        "each on average there: most of them GEMVs and elementwise kernels too small to fill the "
        "SMs. It is bound by the count and latency of small kernels; `fused` "
        f"({k[('fused', batches[0])]['kernels_per_step']:.0f} kernels) and gpt-fast's inductor "
        "(fused kernels) are not.")


SIZES = "docs/sizes-20261202"
# fold.json's ways: GEMV_TUNED's launches and which kernels sit between the GEMVs.
FOLD_WAYS = (
    ("rule", "our Triton GEMVs only (GEMV_TUNED empty), norm and silu in their prologues", 5),
    ("mix", "cuBLAS QKV and gate/up, split-K o and down, a norm kernel of its own", 10),
    ("folded", "the same, the split sums making the next norm (the step now)", 8),
)


PEER_8B = "docs/ladder8b-20261202/peer.json"  # the run quoted; SIZES/peer.json the call before


def peer_8b(root: Path) -> str:
    """The peer table at llama-3-8b (PEER_8B): each side's ms/token (the median over processes of
    each one's median) with the spread between its processes, the speedup and the floor shares,
    by batch; then the earlier call's one-process figures (SIZES/peer.json) beside them."""
    doc = json.loads((root / PEER_8B).read_text())
    rows = {(r["side"], r["batch"]): r for r in doc["rows"]}
    batches = sorted({b for _, b in rows})
    procs = doc["config"]["processes"]
    lines = [f"| batch | gpt-fast ms/token ({procs} processes) | `fused` ms/token ({procs} "
             "processes) | `fused` vs gpt-fast | gpt-fast % floor | `fused` % floor |",
             "| --- | --- | --- | --- | --- | --- |"]

    from .peer import best_rates, ms_cell

    for b in batches:
        lines.append(f"| {b} | {ms_cell(rows[('gpt-fast', b)])} | {ms_cell(rows[('fused', b)])} | "
                     f"{rows[('fused', b)]['speedup_vs_gpt_fast']:.2f}x | "
                     f"{rows[('gpt-fast', b)]['floor_pct']:.1f} | "
                     f"{rows[('fused', b)]['floor_pct']:.1f} |")
    from .aa import floor

    g = floor(root, "graph-replayed")
    inside = [f"batch {b}" for b in batches
              if not beyond(rows[("fused", b)]["speedup_vs_gpt_fast"], g)]
    rates = [r["copy_bytes_per_s"] / 1e9 for rs in doc["runs"].values() for r in rs
             if r.get("copy_bytes_per_s")]
    best = {int(b): rate / 1e9 for b, rate in best_rates(doc["runs"]).items()}
    old = json.loads((root / SIZES / "peer.json").read_text())
    was = {(r["side"], r["batch"]): r["ms_per_token_median"] for r in old["rows"]}
    change = {(side, b): rows[(side, b)]["ms_per_token_median"] / was[(side, b)] - 1
              for side in ("gpt-fast", "fused") for b in batches if (side, b) in was}
    moved = listing([f"{side} {was[(side, b)]:.3f} at batch {b} ({change[side, b]:+.1%} now)"
                     for side, b in change])
    most = {side: max(abs(c) for (s_, _), c in change.items() if s_ == side)
            for side in ("gpt-fast", "fused") if any(s_ == side for s_, _ in change)}
    return "\n".join(lines) + "\n\n" + (
        f"{procs} processes a side and batch, {doc['config']['repeats']} timed runs in each, "
        "the sides and batches interleaved process by process (in brackets: the processes' "
        f"medians, lowest and highest; {PEER_8B}, `scripts/sizes-h200.sh peer`). Each ratio is "
        f"of two processes ({BETWEEN_PROCESSES}): "
        + (f"{listing(inside)} within noise" if inside else "every one beyond the noise")
        + f" ({floor_note([g])}). The processes' own copy rates ran {min(rates):.0f}-"
        f"{max(rates):.0f} GB/s; every row of a batch takes its floor at the highest of them "
        "(study/peer.py, best_rates: "
        + listing([f"{best[b]:.0f} GB/s at batch {b}" for b in batches]) + "). "
        f"An earlier session's call, one process a side ({SIZES}/peer.json), measured "
        f"{moved}: between sessions gpt-fast's decode moved up to {most['gpt-fast']:.1%}, "
        f"`fused`'s up to {most['fused']:.1%}, so a ratio is its own run's, not a constant.")


def fused_8b(root: Path) -> str:
    """fold.json: `fused` at llama:8b three ways in one process, interleaved: ms/token (min-max
    over the rounds) and the floor share at that process's copy rate; and the dropped fold."""
    doc = json.loads((root / SIZES / "fold.json").read_text())
    glu = json.loads((root / SIZES / "fold-glu.json").read_text())
    s = doc["summary"]
    rounds = len(doc["rows"]["rule/b1"])
    lines = ["| the step | kernels a layer | b1 ms/token | b1 % floor | b8 ms/token | b8 % floor |",
             "| --- | --- | --- | --- | --- | --- |"]
    for way, what, kernels in FOLD_WAYS:
        cells = " | ".join(f"{s[f'{way}/b{b}']['ms']:.3f} ({s[f'{way}/b{b}']['min']:.3f}-"
                           f"{s[f'{way}/b{b}']['max']:.3f}) | {s[f'{way}/b{b}']['floor_pct']:.1f}"
                           for b in (1, 8))
        lines.append(f"| `{way}`: {what} | {kernels} | {cells} |")
    g = glu["summary"]
    k = {r["name"]: r for r in doc["kernels_folded_b1"]}
    busy = sum(r["us_per_step"] for r in k.values())
    step_us = s["folded/b1"]["ms"] * 1e3

    def share(*prefixes: str) -> str:
        us = sum(r["us_per_step"] for n, r in k.items() if n.startswith(prefixes))
        return f"{us:.0f} µs ({pct(us / step_us, 1)})"

    attn, total = k["_rope_attention_kernel"], k["_split_sum_norm_kernel"]
    return "\n".join(lines) + "\n\n" + (
        f"bf16, 100 tokens, CUDA events around the decode, {rounds} rounds {SAME_PROCESS} with "
        "the three ways interleaved, each built, warmed and timed in turn "
        f"({SIZES}/fold.py, fold.log; floor at the {doc['copy_bytes_per_s'] / 1e9:.0f} GB/s that "
        "process measured). Also tried, and dropped: silu(gate) * up made in the down GEMV's "
        f"prologue as well (7 kernels a layer) ran {g['folded/b1']['ms']:.3f} ms a token at "
        f"batch 1 against {g['mix/b1']['ms']:.3f} for `mix` in that call (fold-glu.log: its "
        "GEMV reads the weights far slower). What bounds `folded` at batch 1, from torch.profiler "
        f"over one run (fold.json's kernel table, µs a step of the {step_us:.0f} µs step): "
        f"kernels ran {busy:.0f} µs of it, back to back; cuBLAS's GEMMs "
        f"{share('nvjet')} and our GEMVs (o, down, the head) {share('_gemv')}, the weights' reads; "
        f"the attention kernel {share('_rope_attention')} "
        f"({attn['us_each']:.1f} µs a layer, one program a query head and sequence over a "
        f"few hundred cache slots) and the split sums with the norm {share('_split_sum_norm')} "
        f"({total['us_each']:.1f} µs each, one program a row): the latency-bound rest, where "
        "a step of this shape still has time to win.")


METRICS_8B = "docs/ladder8b-20261202/metrics"


def metrics_8b(root: Path) -> str:
    """The GPU-metrics captures of graphed and fused at llama:8b batch 1 (METRICS_8B): per rung
    the twin's period, the floor's share of it, and the medians over the steps of DRAM read
    (GB/s, and its share of the copy rate the run measured), SMs and GR active."""
    from .captures import analysed

    runs = sorted((root / METRICS_8B).glob("*Z-*-8b-metrics"))
    lines = ["| rung | untraced ms/step | % floor | DRAM read GB/s (median step) | of the copy "
             "rate | SMs active | GR active |", "| --- | --- | --- | --- | --- | --- | --- |"]
    first = None
    for run, _, (a, *_), _ in analysed(runs):
        s, steps = a.summary, a.steps
        copy = s["floor"]["copy_gbps"]
        read = float(steps["dram_read_gbps"].median())
        lines.append(f"| `{run.info['config']['variant']}` | "
                     f"{s['untraced']['period_ns_median'] / 1e6:.3f} | "
                     f"{s['floor']['floor_pct_of_untraced_period']:.1f} | {read:.0f} | "
                     f"{pct(read / copy, 1)} | {steps['sm_active_pct'].median():.1f}% | "
                     f"{steps['gr_active_pct'].median():.1f}% |")
        if first is None:
            first = (run, a)
    run, a = first
    c, gm = run.info["config"], a.summary["gpu_metrics"]
    start, stop = (int(x) for x in c["window"].split(":"))
    per_layer = dict((way, k) for way, _, k in FOLD_WAYS)["folded"]
    return "\n".join(lines) + "\n\n" + (
        f"`scripts/profile.sh RUNG --metrics --model llama:8b --dtype bf16 --batch {c['batch']} "
        f"--new-tokens {c['new_tokens']} --window {c['window']}`: nsys's GPU metrics at "
        f"{1e9 / gm['sample_period_ns_median']:.0f} samples a second over steps "
        f"{start + 1}-{stop} (no CUDA trace), each with its untraced twin "
        f"({METRICS_8B}). DRAM read is the median over the steps (the first step of a window "
        "is partly before sampling starts); the floor's share is of the twin's period, at the "
        "copy rate each run measured. Both graphs keep the GPU busy (GR active); what separates "
        "them is how much of the step the SMs spend reading the weights: `graphed`'s small "
        f"kernels between its GEMMs leave DRAM idle, `fused`'s {per_layer} kernels a layer "
        "leave it far less.")
