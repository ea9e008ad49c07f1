"""Study part `family`'s sentences (family.py makes its tables): the untraced ladder by batch,
the captures, `torch.compile`, the ping-pong, the sync bubble once launches are cheap, the
profiler's cost, `hf-generate` and the tokens, each from the tables it summarises.
"""

import pandas as pd

from .captures import kernels_per_step
from .text import (
    BETWEEN_PROCESSES,
    SAME_PROCESS,
    beyond,
    beyond_span,
    bullet,
    floor_note,
    listing,
    pct,
    pct_span,
    span,
    with_floor,
)

EAGER = ("naive", "kv", "static", "pipelined")


def _own(row) -> bool:
    flag = row.get("own_process")
    return bool(pd.notna(flag) and flag)


def _idle(a, cause: str) -> float:
    return a.summary["idle_ns_by_cause"][cause] / (a.summary["idle_ns"] or 1)


def family_floors(by_batch: dict, caps: dict, floors: dict | None = None) -> dict:
    """kind -> the A/A floor (aa.floor) widened by this family's own evidence: where a capture's
    untraced bench (its own process) and the ladder's (one process a batch) timed one variant
    at one batch, their ratio is a spread between two processes of one configuration too."""
    from .aa import floors as aa_floors
    from .captures import kind

    out = dict(aa_floors() if floors is None else floors)
    for (name, batch), (_, run) in caps.items():
        rows = by_batch.get(batch)
        own = run.untraced_ms_per_step()
        if rows is None or name not in rows.index or _own(rows.loc[name]) or not own:
            continue
        ladder = rows.loc[name, "ms_per_step_median"]
        ratio = max(own / ladder, ladder / own)
        # eager and compiled loops are both host-bound: one floor for the two
        for k in (("eager", "compiled") if kind(run) != "graph-replayed" else (kind(run),)):
            if out.get(k) is None or ratio > out[k][0]:
                out[k] = (ratio, f"`{name}` at batch {batch} untraced {own:.3f} ms/step in its "
                          f"capture's bench and {ladder:.3f} in the ladder's, {ratio:.3f}x "
                          "apart", 2)
    return out


def family_findings(by_batch: dict, caps: dict, floors: dict | None = None) -> list:
    """The part's sentences: the untraced ladder by batch (one process a batch, † rows from
    their capture's own process) and the captures (caps: {(name, batch): (analysis, run)})."""
    floors = family_floors(by_batch, caps, floors)
    out = []
    batches = list(by_batch)
    eager = {b: [v for v in EAGER if v in rows.index and not _own(rows.loc[v])]
             for b, rows in by_batch.items()}
    text = "; ".join(
        f"{span(by_batch[b].loc[eager[b], 'ms_per_step_median'])} ms/step at batch {b} "
        f"({listing([f'`{v}`' for v in eager[b]])})" for b in batches if eager[b])
    static = [(b, caps[("static", b)][0]) for b in batches if ("static", b) in caps]
    if static:
        text += (f". In `static`'s captures the GPU is busy "
                 f"{pct_span([a.summary['busy_share_of_window'] for _, a in static])} of the "
                 "window, "
                 f"{pct_span([_idle(a, 'host') for _, a in static], 0)} of its idle the host's, "
                 "launching " + listing([f"{a.steps['op_records'].median():.0f} op records "
                                         f"({kernels_per_step(a):.0f} kernels) a step at batch "
                                         f"{b}" for b, a in static]))
    if text:
        out.append(bullet("The eager rungs are bound by the host:",
                          f"untraced, {SAME_PROCESS} a batch, {text}."))
    comp = []
    for b, rows in by_batch.items():
        if {"compiled", "naive"} <= set(rows.index) and not _own(rows.loc["compiled"]):
            x = rows.loc["naive", "ms_per_step_median"] / rows.loc["compiled", "ms_per_step_median"]
            comp.append(f"{x:.2f}x over `naive` at batch {b}")
    counts = [f"{caps[(v, b)][0].steps['op_records'].median():.0f} op records a step against "
              f"`static`'s {caps[('static', b)][0].steps['op_records'].median():.0f} at batch {b}"
              for b in batches for v in ("compiled",) if (v, b) in caps and ("static", b) in caps]
    if comp:
        out.append(bullet("`torch.compile`:", f"{SAME_PROCESS} a batch, " + listing(comp)
                          + (f"; `compiled` launches {listing(counts)}" if counts else "") + "."))
    out += pingpong_findings(by_batch, caps, floors)
    out += sync_bubble_findings(by_batch, caps)
    prof = [(b, caps[("compiled", b)]) for b in batches if ("compiled", b) in caps]
    from .captures import kind

    overheads = {}
    for _, r in caps.values():
        if r.traced_ms_per_step() and r.untraced_ms_per_step():
            overheads.setdefault(kind(r), []).append(
                r.traced_ms_per_step() / r.untraced_ms_per_step())
    if prof or overheads:
        twinned = [(b, a) for b, (a, _) in prof if a.summary.get("untraced")]
        parts = []
        if twinned:
            parts.append(
                "traced, `compiled`'s captures show a median bubble of " + listing(
                    [f"{a.summary['bubble_ns_median'] / 1e3:.1f} µs at batch {b}"
                     for b, a in twinned])
                + " where their twins see " + listing(
                    [f"{a.summary['untraced']['bubble_ns_median'] / 1e3:.1f}"
                     for _, a in twinned]) + " µs ("
                + listing([pct(a.summary["untraced"]["profiler_bubble_share"], 0)
                           for _, a in twinned]) + " of it the profiler's; the twin runs in "
                "other processes than the capture)")
        if overheads:
            kinds = [k for k in ("eager", "compiled", "graph-replayed") if k in overheads]
            parts.append(
                "traced ms/step ÷ its capture's untraced bench, "
                f"{BETWEEN_PROCESSES}, − 1: nsys adds "
                + listing([f"{k} {beyond_span(overheads[k], floors.get(k))}" for k in kinds])
                + f" ({floor_note([floors.get(k) for k in kinds])})")
        out.append(bullet("The profiler:", "; ".join(parts) + "."))
    fastest = []
    for b, rows in by_batch.items():
        if "hf-generate" in rows.index:
            best = rows["ms_per_step_median"].idxmin()
            hf = rows.loc["hf-generate"]
            fastest.append(f"{hf['ms_per_step_median']:.3f} ms/step at batch {b}"
                           + (f" ({rows.loc['naive', 'ms_per_step_median'] / hf['ms_per_step_median']:.2f}x `naive`)"  # noqa: E501
                              if "naive" in rows.index else "")
                           + ("" if best == "hf-generate" else f", behind `{best}`"))
    if fastest:
        out.append(bullet(
            "`hf-generate`",
            f"(transformers' generate with a static cache, which compiles the forward with CUDA "
            f"graphs, \"reduce-overhead\": read in its source, not traced here): "
            f"{listing(fastest)}. Only a step that replays as a graph leaves the host's pace "
            "behind."))
    differ = [f"`{v}` at batch {b}" for b, rows in by_batch.items() if "kv" in rows.index
              for v in rows.index if rows.loc[v, "tokens_sha256"] != rows.loc["kv",
                                                                              "tokens_sha256"]]
    naive_only = all(d.startswith("`naive` ") for d in differ)
    out.append(bullet(
        "Tokens:",
        "every rung decoded `kv`'s tokens (tokens_sha256)" + (
            f" except {listing(differ)}: under TF32 "
            + ("its whole-sequence recompute rounds" if naive_only
               else "their GEMMs (of other shapes than `kv`'s) round")
            + " differently and some greedy choices differ" if differ else "")
        + "; at \"highest\" the GPU tests check each rung against `kv` for all four families."))
    return out


def pingpong_findings(by_batch: dict, caps: dict, floors: dict | None = None) -> list:
    floor = (floors or {}).get("compiled")
    out = []
    batches = list(by_batch)
    syncs = {v: [a.summary["sync_idle_share_of_window"] for (n, _), (a, _) in caps.items()
                 if n == v]
             for v in ("compiled", "pipelined+compile")}
    text = []
    if all(syncs.values()):
        text.append(f"`compiled`'s captures put {pct_span(syncs['compiled'])} of the window in "
                    f"sync idle, `pipelined+compile`'s {pct_span(syncs['pipelined+compile'])}")
    for b in batches:
        rows = by_batch[b]
        if "pipelined+compile" not in rows.index or "compiled" not in rows.index:
            continue
        p = rows.loc["pipelined+compile", "ms_per_step_median"]
        procs = [rows.loc["compiled", "ms_per_step_median"]]
        if ("compiled", b) in caps and caps[("compiled", b)][1].untraced_ms_per_step():
            procs.append(caps[("compiled", b)][1].untraced_ms_per_step())
        where = ("slower than" if p > max(procs) else "faster than" if p < min(procs)
                 else "between")
        outside = all(beyond(p / x, floor) for x in procs)
        word = (f"{where} {'both' if len(procs) == 2 and where != 'between' else 'them'}"
                if outside or where == "between" else "within noise")
        text.append(f"untraced at batch {b}, `pipelined+compile` ran {p:.3f} ms/step in a process "
                    f"of its own against `compiled`'s {listing([f'{x:.3f}' for x in procs])} in "
                    f"{len(procs)} other process{'es' if len(procs) > 1 else ''} "
                    f"({BETWEEN_PROCESSES}): {word}")
    twins = {v: [a.summary["untraced"]["bubble_ns_median"] / 1e3 for (n, _), (a, _)
                 in caps.items() if n == v and a.summary.get("untraced")]
             for v in ("compiled", "pipelined+compile")}
    if all(twins.values()):
        text.append(f"the twin's bubble is {span(twins['pipelined+compile'], '.1f')} µs for the "
                    f"ping-pong against {span(twins['compiled'], '.1f')} for `compiled`")
    if text:
        out.append(bullet("The ping-pong, compiled:", with_floor(
            "; ".join(text) + " (each twin from its own capture's process)", [floor]) + "."))
    return out


def sync_bubble_findings(by_batch: dict, caps: dict) -> list:
    """`graphed-sync` against `graphed` untraced (the ladder's process at each batch) beside
    `graphed-sync`'s bubble in its captures, traced and in the capture's untraced twin."""
    pairs = []
    for b, rows in by_batch.items():
        if not {"graphed-sync", "graphed"} <= set(rows.index) or any(
                _own(rows.loc[v]) for v in ("graphed-sync", "graphed")):
            continue
        s, g = (rows.loc[v, "ms_per_step_median"] for v in ("graphed-sync", "graphed"))
        pairs.append(f"{s:.3f} against {g:.3f} ms/step at batch {b}: {(s - g) * 1e3:.1f} µs a "
                     f"step, {pct((s - g) / g)} of `graphed`'s step")
    bubbles = []
    for b in by_batch:
        if ("graphed-sync", b) not in caps:
            continue
        a = caps[("graphed-sync", b)][0]
        level = "graph by graph" if a.summary.get("cuda_graph_trace") == "graph" else "node by node"
        twin = (a.summary.get("untraced") or {}).get("bubble_ns_median")
        bubbles.append(f"{a.summary['bubble_ns_median'] / 1e3:.1f} µs traced ({level}) against "
                       + ("no untraced twin" if twin is None else f"{twin / 1e3:.1f} µs in its "
                          "untraced twin") + f" at batch {b}")
    if not pairs and not bubbles:
        return []
    text = []
    if pairs:
        text.append(f"untraced, {SAME_PROCESS} a batch, `graphed-sync` (one CUDA graph a step, "
                    "`.item()` after each) against `graphed` (the flag read a step late) ran "
                    + "; ".join(pairs))
    if bubbles:
        text.append("`graphed-sync`'s median bubble between steps in its captures: "
                    + listing(bubbles))
    return [bullet("The sync bubble, once launches are cheap:", ". ".join(text) + ".")]
