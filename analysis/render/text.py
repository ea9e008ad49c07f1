"""Analyses as text a person reads in ten seconds (`gapscope analyze`'s default), within
TEXT_WIDTH columns; the unit formatters the Markdown report shares. Numbers stay in ns until here.
"""

import os
import textwrap

import pandas as pd

from ..measures.calls import SHOWN as SHOWN_CALLS
from ..measures.draft import DRAFT_ROW
from ..measures.summary import CAUSES, LEDGER, by_thread
from ..measures.syncs import UNKNOWN
from ..render.palette import LEDGER_WORDS


def us_from_ns(ns) -> str:
    """A duration in ns, for people: `12.3 µs` (n/a for None)."""
    return "n/a" if ns is None else f"{ns / 1e3:.1f} µs"


def ms_from_ns(ns) -> str:
    """A duration in ns, for people: `1.23 ms` (n/a for None)."""
    return "n/a" if ns is None else f"{ns / 1e6:.2f} ms"


def pct(fraction) -> str:
    return "n/a" if fraction is None else f"{fraction:.1%}"


def shares(parts: dict, total: int, names: tuple, words: dict | None = None) -> str:
    if total <= 0:
        return "no idle time"
    pairs = sorted(((parts[n], n) for n in names), reverse=True)
    shown = [(v, n) for v, n in pairs if v or n != "unknown"]
    return "  ".join(f"{(words or {}).get(n, n)} {v / total:.1%}" for v, n in shown)


# Said wherever graph executions were recorded whole: the gaps between their nodes exist, but
# the capture cannot show them (nor the busy time inside, which counts as busy throughout).
GRAPH_NOTES = {
    "graph": "graph: gaps inside a graph are not visible; --cuda-graph-trace=node shows them",
    "mixed": "mixed: gaps inside some graphs are not visible; --cuda-graph-trace=node shows them",
}


# Where the steps came from (summary.steps_from), in words.
STEPS_FROM = {
    "nvtx": "NVTX ranges",
    "function": "calls of a Python function (nsys's function trace or gapscope's hook)",
    "profiler_step": "torch.profiler's ProfilerStep#N ranges (prof.step())",
    "inferred": "inferred from the trace (no step ranges)",
}
# Where the steps came from (summary.steps_from), in a word: compare's row, the timeline's
# track names, gapscope profile's last line.
STEPS_FROM_WORD = {"nvtx": "NVTX", "function": "function", "profiler_step": "ProfilerStep",
                   "inferred": "inferred"}
TEXT_WIDTH = 100
LABEL_WIDTH = 17  # "  idle by cause  ": where a text line's value starts
# How the draft's forwards were told from the target's (summary.draft.found_by), in words.
DRAFT_FOUND_BY = {"ranges": "inside get_candidates or the draft's own generate()",
                  "kernels": "told by their GPU work: the smaller of two groups of forwards by "
                             "ops launched"}


def class_method(name: str) -> str:
    """`Class.method` of a traced method's qualified name (`LlamaForCausalLM.forward`)."""
    return ".".join(name.split(".")[-2:])


def numbering(s: dict, steps: pd.DataFrame | None) -> str:
    """How the steps are numbered (the one rule, METRICS.md "Step numbers"): by the numbers in
    their names, else 1, 2, ... in order within their thread."""
    span = ""
    if steps is not None and len(steps) and "step" in steps:
        span = f" {steps['step'].min()}–{steps['step'].max()}"
    if s.get("step_numbers", "name") == "name":
        return f"numbered{span} by their names"
    return f"numbered{span} in order within their thread"


def steps_from(s: dict, steps: pd.DataFrame | None = None) -> str:
    """Where the steps came from, in words (the pattern that took them, what an inference keyed
    on, the function called), and how they are numbered."""
    source = s.get("steps_from", "nvtx")
    if s.get("draft"):
        d = s["draft"]
        return (f"target forwards of speculative decoding, numbered in order within their "
                f"thread: {s['steps']} verifications, each from the draft work that feeds it "
                f"(draft: {d['forwards']} forwards of {class_method(d['name'])}, "
                f"{DRAFT_FOUND_BY[d['found_by']]})")
    by = s.get("steps_inferred_by")
    if source == "function" and s.get("step_functions"):
        by = ", ".join(s["step_functions"])
    elif source in ("nvtx", "profiler_step") and s.get("step_pattern"):
        by = f"'{s['step_pattern']}'"
    return STEPS_FROM[source] + (f": {by}" if by else "") + f"; {numbering(s, steps)}"


def tokens_text(s: dict) -> str | None:
    """Tokens a step and ms a token beside ms a step, where the capture marks the tokens."""
    if s.get("tokens") is None:
        return None
    per_step = s["period_ns_per_token"] * s["tokens_per_step_mean"]
    return (f"{s['tokens']} in {s['token_steps']} steps: {s['tokens_per_step_mean']:.2f} a step "
            f"(median {s['tokens_per_step_median']:g}), {ms_from_ns(s['period_ns_per_token'])} "
            f"a token, {ms_from_ns(per_step)} a step (GPU period, mean)")


def draft_text(s: dict) -> str | None:
    """The draft's share of the steps: its GPU busy time a step and its host row."""
    d = s.get("draft")
    if not d:
        return None
    host = ("" if d["host_ns_mean"] is None else
            f"; host row {DRAFT_ROW}{class_method(d['name'])} "
            f"{ms_from_ns(d['host_ns_mean'])} a step ({pct(d['host_share'])} of the host time)")
    return (f"{ms_from_ns(d['busy_ns_median'])} GPU busy a step (median), "
            f"{pct(d['busy_share'])} of the steps' GPU busy, "
            f"{d['forwards_per_step_mean']:.2f} forwards a step" + host)


def steps_lines(s: dict, steps: pd.DataFrame) -> list:
    """Where the steps came from and how they are numbered."""
    return textwrap.wrap(steps_from(s, steps), TEXT_WIDTH, initial_indent="  steps from     ",
                         subsequent_indent=" " * LABEL_WIDTH, break_on_hyphens=False)


def thread_lines(steps: pd.DataFrame) -> list:
    """Where several threads have steps, one line a thread (after the ten lines every report
    starts with)."""
    lines = []
    for thread, t in by_thread(steps).iterrows():
        lines.append(f"  thread         {thread}: {t['steps']} steps, "
                     f"{ms_from_ns(t['period_ns_median'])} period, "
                     f"{us_from_ns(t['bubble_ns_median'])} bubble (medians)")
    return lines


def check_text(s: dict) -> str:
    """The stop checks' part of the streams line: their median cover, or that the check
    pattern matched no range (summary.checks 0)."""
    if s.get("checks") == 0:
        return "stop checks: no range matches --check"
    return f"stop checks {pct(s['check_cover_median'])} busy (median)"


def no_twin_why(a) -> str | None:
    """Why `gapscope profile` made no untraced twin for this run (run.json's hook.twin.why),
    where the analysis has none."""
    if "untraced" in a.summary or a.run is None:
        return None
    twin = (a.run.info.get("hook") or {}).get("twin") if isinstance(a.run.info, dict) else None
    why = twin.get("why") if isinstance(twin, dict) else None
    return why if isinstance(why, str) and why != "--no-twin" else None


def text_summary(label: str, s: dict, schema: str, steps: pd.DataFrame | None = None,
                 no_twin: str | None = None) -> str:
    lines = [
        f"{label}: device {s['device']}, {s['steps']} steps, {schema}",
        *steps_lines(s, steps if steps is not None else pd.DataFrame()),
        f"  step time      {ms_from_ns(s['step_cpu_ns_median'])} median on the host, "
        f"{ms_from_ns(s['period_ns_median'])} period on the GPU",
        f"  GPU busy       {pct(s['busy_share_of_window'])} of a {ms_from_ns(s['window_ns'])} "
        "window "
        f"({ms_from_ns(s['busy_ns'])} busy, {ms_from_ns(s['idle_ns'])} idle in {s['gaps']} gaps)",
        f"  bubble         {us_from_ns(s['bubble_ns_median'])} median, "
        f"{us_from_ns(s['bubble_ns_p90'])} p90 between steps",
        f"  idle by cause  {shares(s['idle_ns_by_cause'], s['idle_ns'], CAUSES)}"
        + (" (of the idle)" if s["idle_ns"] > 0 else ""),
        f"  idle ledger    {shares(s['idle_ledger'], s['idle_ns'], LEDGER, LEDGER_WORDS)}"
        + (" (of the idle)" if s["idle_ns"] > 0 else ""),
        f"  sync idle      {pct(s['sync_idle_share_of_window'])} of the window, as traced (not "
        "what hiding "
        + ("the sync buys: see untraced)" if "untraced" in s
           else "the sync buys: no twin here)"),
        f"  streams        {s['streams']}, {ms_from_ns(s['concurrent_ns'])} with two or more "
        "running; " + check_text(s),
        f"  unattributed   {s['unattributed_ops']} ops launched outside the steps"
        + (f", {s['ops_without_launch_call']} without a launch call"
           if s["ops_without_launch_call"] else ""),
        # After the ten lines every report starts with: what this capture has beside.
        *(f"  {label:<15}{text}" for label, text in (("tokens", tokens_text(s)),
                                                      ("draft", draft_text(s))) if text),
        *thread_lines(steps if steps is not None else pd.DataFrame()),
    ]
    if s["cuda_graph_trace"] in GRAPH_NOTES:
        lines.append(f"  CUDA graphs    {GRAPH_NOTES[s['cuda_graph_trace']]}")
    if "untraced" in s:
        u = s["untraced"]
        lines.append(f"  untraced       {ms_from_ns(u['period_ns_median'])} period, "
                     f"{us_from_ns(u['bubble_ns_median'])} bubble median; the profiler's share "
                     f"of the bubble: {share_text(u, 'bubble')}")
        if u.get("period_ns_spread") is not None:
            lines.append(f"                 the profiler's share of the period: "
                         f"{share_text(u, 'period')} ({u['runs']} untraced "
                         f"run{'s' if u['runs'] != 1 else ''})")
    elif no_twin:
        lines += textwrap.wrap(f"no twin: {no_twin}", TEXT_WIDTH,
                               initial_indent="  untraced       ",
                               subsequent_indent=" " * LABEL_WIDTH)
    return "\n".join(lines + calls_lines(s.get("calls")) + metrics_lines(s.get("gpu_metrics"))
                     + floor_lines(s.get("floor")))


def calls_lines(calls: list | None) -> list:
    """The calls of the loop the steps fall in, a line each (measures/calls.py), where there
    are two or more: the medians above mix them."""
    if not calls:
        return []
    lines = [f"  calls          {len(calls)} of {calls[0]['name']} (the medians above mix them)"]
    threads = len({c.get("thread") for c in calls}) > 1
    for c in calls[:SHOWN_CALLS]:
        untraced = c.get("untraced_period_ns_median")
        text = (f"steps {c['first_step']}-{c['last_step']}"
                + (f" of {c['thread']}" if threads else "")
                + f": {ms_from_ns(c['period_ns_median'])} period median"
                + (f", untraced {ms_from_ns(untraced)}" if untraced is not None else "")
                + f", GPU busy {ms_from_ns(c['busy_ns_median'])}")
        label = f"    {'call ' + str(c['call']):<13}"
        lines += textwrap.wrap(text, TEXT_WIDTH, initial_indent=label,
                               subsequent_indent=" " * LABEL_WIDTH)
    if len(calls) > SHOWN_CALLS:
        lines.append(f"    and {len(calls) - SHOWN_CALLS} more (--format json: summary.calls)")
    return lines


def share_text(u: dict, figure: str) -> str:
    """The profiler's share of the traced bubble or period, or "within noise" with the untraced
    runs' range where their own medians lie further apart than traced and untraced do
    (METRICS.md, "Untraced")."""
    if u.get(f"profiler_{figure}_share_within_noise"):
        fmt = us_from_ns if figure == "bubble" else ms_from_ns
        medians = [m for m in u[f"run_{figure}_ns_medians"] if m is not None]
        return f"within noise (untraced runs' medians {fmt(min(medians))} to {fmt(max(medians))})"
    return pct(u[f"profiler_{figure}_share"])


def floor_lines(f: dict | None) -> list:
    """The bandwidth floor (analysis/measures/floor.py), one or two lines; none without
    run.json's."""
    if not f or f["floor_ns_per_step"] is None:
        return []
    parts = [f"{pct(v / 100)} {what}" for v, what in (
        (f["floor_pct_of_period"], "of the GPU period"),
        (f.get("floor_pct_of_untraced_period"), "of the untraced GPU period"),
        (f["floor_pct_of_untraced"], "of the untraced step")) if v is not None]
    lines = [f"  floor          {ms_from_ns(f['floor_ns_per_step'])}/step: "
             f"{f['bytes_per_step'] / 1e6:.0f} MB at the {f['copy_gbps']:.0f} GB/s copy rate "
             f"(KV {f['kv_slots_read']})"]
    if parts:
        lines.append("                 the floor is " + ", ".join(parts))
    if f["dram_read_gbps"] is not None:
        lines.append(f"                 DRAM read measured {f['dram_read_gbps']:.0f} GB/s, "
                     f"{f['dram_read_gbps'] / f['copy_gbps']:.1%} of the copy rate")
    return lines


def pct_value(v) -> str:
    """A value already in percent (12.3), as `12.3%`; pct() takes a fraction."""
    return "n/a" if v is None else f"{v:.1f}%"


def metrics_lines(m: dict | None) -> list:
    """GPU metrics, time-weighted over the window (two lines; none without metrics)."""
    if not m:
        return []

    def gbps(key):
        return "" if m[f"{key}_gbps"] is None else f" ({m[f'{key}_gbps']:.0f} GB/s)"

    peak = ("GB/s unknown: no peak DRAM bandwidth for this GPU" if m["dram_peak_gbps"] is None
            else f"of a {m['dram_peak_gbps']:.0f} GB/s peak")
    return [
        f"  GPU metrics    GR active {pct_value(m['gr_active_pct'])}, SMs active "
        f"{pct_value(m['sm_active_pct'])}, tensor {pct_value(m['tensor_active_pct'])} "
        f"({m['samples']} samples in the window)",
        f"  DRAM           read {pct_value(m['dram_read_pct'])}{gbps('dram_read')}, write "
        f"{pct_value(m['dram_write_pct'])}{gbps('dram_write')} {peak}",
    ]


def metrics_text_summary(label: str, s: dict, schema: str,
                         steps: pd.DataFrame | None = None) -> str:
    lines = [
        f"{label}: device {s['device']}, {s['steps']} steps, {schema}",
        *steps_lines(s, steps if steps is not None else pd.DataFrame()),
        "  GPU metrics only: no CUDA trace, so no gap analysis; steps are their NVTX ranges",
        f"  step time      {ms_from_ns(s['step_cpu_ns_median'])} median on the host, "
        f"{ms_from_ns(s['window_ns'])} window",
        *thread_lines(steps if steps is not None else pd.DataFrame()),
    ]
    if "untraced" in s:
        u = s["untraced"]
        lines.append(f"  untraced       {ms_from_ns(u['period_ns_median'])} GPU period, "
                     f"{us_from_ns(u['bubble_ns_median'])} bubble median (CUDA events, no "
                     "profiler)")
    return "\n".join(lines + metrics_lines(s["gpu_metrics"]) + floor_lines(s.get("floor")))


def to_text(label: str, analyses: list, schema: str, more=None) -> str:
    """`more(a)`: lines to add under a traced analysis' own (render/report.py: the host table)."""
    return fit_width("\n\n".join(
        metrics_text_summary(label, a.summary, schema, a.steps)
        if not a.traced
        else "\n".join([text_summary(label, a.summary, schema, a.steps, no_twin_why(a)),
                        *sync_lines(a.syncs, a.summary["steps"]),
                        *(more(a) if more else [])])
        for a in analyses))


def fit_width(text: str, width: int = TEXT_WIDTH) -> str:
    """Each line longer than `width` wrapped at its words, its continuation lines indented to
    where its value starts (LABEL_WIDTH, or further in for an indented line): a terminal of 100
    columns reads every line."""
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        indent = len(line) - len(line.lstrip(" "))
        more = LABEL_WIDTH if indent <= LABEL_WIDTH else indent + 2
        out += textwrap.wrap(line, width, subsequent_indent=" " * more,
                             break_long_words=False, break_on_hyphens=False) or [line]
    return "\n".join(out)


# The syncs table's text: the sites that block longest, then how many more there are.
SYNC_SITES_SHOWN = 3
SYNC_HINT = "capture with `gapscope profile` to name the lines: it marks each sync"


def short_path(path: str) -> str:
    """A source file as a reader finds it: within its installed package (after `site-packages/`
    or `dist-packages/`), else relative to the working directory, else the path itself."""
    for root in ("site-packages/", "dist-packages/"):
        if root in path:
            return path.rsplit(root, 1)[1]
    try:
        return os.path.relpath(path) if os.path.isabs(path) and not os.path.relpath(
            path).startswith("..") else path
    except ValueError:
        return path


def sync_where(row) -> str:
    """A sync site as file:line in function, or why it has none."""
    if row.file == UNKNOWN:
        return "unknown (no mark)"
    return f"{short_path(row.file)}:{row.line} in {row.function}"


def _fit(indent: str, text: str) -> str:
    """indent + text in TEXT_WIDTH columns, a long path cut from its start ("…" for it)."""
    room = TEXT_WIDTH - len(indent)
    return indent + (text if len(text) <= room else "…" + text[len(text) - room + 1:])


def sync_lines(syncs: pd.DataFrame, steps: int) -> list:
    """The blocking calls inside the steps (analysis/measures/syncs.py): totals, then the sites that
    block longest, each its line and its numbers."""
    if syncs is None or syncs.empty:
        return ["  syncs          no blocking call inside the steps"]
    calls = int(syncs["calls"].sum())
    lines = [f"  syncs          {calls / steps:.2f} blocking calls a step ({calls}): "
             f"{ms_from_ns(int(syncs['blocked_ns'].sum()))} host blocked, "
             f"{ms_from_ns(int(syncs['gpu_idle_after_ns'].sum()))} GPU idle after"]
    threads = syncs["tid"].nunique() > 1
    for row in syncs.head(SYNC_SITES_SHOWN).itertuples(index=False):
        thread_steps = row.calls / row.calls_per_step
        thread = f", thread {row.thread}" if threads else ""
        lines += [_fit("    ", sync_where(row) + thread),
                  f"      {row.call} {row.calls_per_step:.2f}/step: "
                  f"{us_from_ns(row.blocked_ns_median)} host blocked (median), "
                  f"{us_from_ns(row.gpu_idle_after_ns / thread_steps)}/step GPU idle after"]
    if len(syncs) > SYNC_SITES_SHOWN:
        lines.append(f"    and {len(syncs) - SYNC_SITES_SHOWN} more (--format md, or csv "
                     "--table syncs)")
    if (syncs["file"] == UNKNOWN).all():
        lines.append(f"    {SYNC_HINT}")
    return lines
