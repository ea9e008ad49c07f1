"""The host table (METRICS.md, "Host time") as text and Markdown: where a step's host time goes,
one line a row (the code that spent it), traced and, where the twin timed it, untraced; and what
removing each row would buy."""

from ..measures.draft import DRAFT_ROW
from ..render.markdown import md_table
from ..render.text import LABEL_WIDTH, TEXT_WIDTH, ms_from_ns, pct

# Rows the text shows; Markdown, JSON and CSV have them all.
TEXT_ROWS = 8
# Below this share of named code the text says how to name more.
NAMED_ENOUGH = 0.9
BOUNDS_SHOWN = 3
NAME_WIDTH = 34


def short_row(name: str) -> str:
    """A row as a reader knows it: `Class.method` of a traced method, `module.function` of a
    function (its package path left out); NVTX ranges as they are; the draft's forwards
    (measures/draft.py) `draft: Class.forward`."""
    if name.startswith(DRAFT_ROW):
        return DRAFT_ROW + short_row(name.removeprefix(DRAFT_ROW))
    parts = name.split(".")
    if len(parts) < 3 or any(not p.isidentifier() for p in parts):
        return name
    return ".".join(parts[-2:])


def cut_row(text: str, width: int) -> str:
    """The row's name in `width` columns: a long class name cut in its middle, the method kept
    whole (`MinNewTokens…itsProcessor.__call__`: two processors that end alike stay apart),
    else the name's end."""
    if len(text) <= width:
        return text
    head, dot, tail = text.rpartition(".")
    room = width - len(tail) - 2  # the ellipsis and the dot
    if dot and room >= 8:
        keep = room // 2
        return f"{head[:keep]}…{head[len(head) - (room - keep):]}.{tail}"
    if dot and room >= 1:  # a long method: its name whole, the end of its class before it
        return f"…{head[len(head) - room:]}.{tail}"
    return "…" + text[len(text) - width + 1:]


def _ms(ns, digits: int = 2) -> str:
    return "" if ns is None else f"{ns / 1e6:.{digits}f}"


def _ms3(ns) -> str:
    """Markdown's ms: three decimals (µs)."""
    return _ms(ns, 3)


def untraced_cell(row: dict) -> str:
    """The untraced twin's figure for a row and the profiler's share of the traced one."""
    if row.get("untraced_ns") is None:
        return ""
    share = row.get("profiler_share")
    return f"{_ms(row['untraced_ns'])}" + ("" if share is None else f" ({share:+.0%})")


def host_lines(s: dict) -> list:
    """analyze's text: the host table's head lines, its top rows, the bounds."""
    h = s.get("host")
    if not h or not h.get("steps"):
        return []
    indent = " " * LABEL_WIDTH
    left = h["steps"] - h["steps_in_means"]
    period = h["period_ns_mean"] or 0
    head = (f"{ms_from_ns(h['period_ns_mean'])} a step on its thread (mean of "
            f"{h['steps_in_means']} steps" + (f"; {left} over 3x the median left out" if left
                                             else "")
            + f"): named code {pct(h['named_share'])}, at least {pct(h['named_share_min'])} of "
            "each step")
    if period:
        head += (f"; python {pct(h['python_ns_mean'] / period)}, CUDA calls "
                 f"{pct(h['cuda_ns_mean'] / period)}, blocked in syncs "
                 f"{pct(h['sync_ns_mean'] / period)}")
    lines = _wrap("  host time      " + head, indent)
    if h.get("why"):
        lines += _wrap(f"{indent}{h['why']}", indent)
    elif h.get("named_share") is not None and h["named_share"] < NAMED_ENOUGH:
        lines += _wrap(f"{indent}{pct(1 - h['named_share'])} of it in no named code (`other`): "
                       "name more functions with --host-function M:Q", indent)
    for line in own_code_lines(h.get("own_code")):
        lines += _wrap(f"{indent}{line}", indent)
    twin = any(r.get("untraced_ns") is not None for r in h["rows"])
    lines.append(f"    {'ms a step (mean)':<{NAME_WIDTH}} {'total':>6} {'python':>6} "
                 f"{'cuda':>6} {'sync':>6} {'share':>6}"
                 + ("  untraced (profiler)" if twin else ""))
    for row in h["rows"][:TEXT_ROWS]:
        lines.append(f"    {cut_row(short_row(row['name']), NAME_WIDTH):<{NAME_WIDTH}} "
                     f"{_ms(row['ns']):>6} {_ms(row['python_ns']):>6} {_ms(row['cuda_ns']):>6} "
                     f"{_ms(row['sync_ns']):>6} {row['share']:>6.1%}"
                     + (f"  {untraced_cell(row)}" if twin else ""))
    if len(h["rows"]) > TEXT_ROWS:
        lines.append(f"    and {len(h['rows']) - TEXT_ROWS} more rows (--format md, or csv "
                     "--table host)")
    if h.get("untraced"):
        u = h["untraced"]
        runs = f"{u['runs']} run{'s' if u['runs'] != 1 else ''}"
        lines += _wrap(f"{indent}untraced: {ms_from_ns(u['period_ns_mean'])} a step on the host "
                       f"({runs}); the profiler's share of the host time "
                       f"{pct(u['profiler_share'])}", indent)
    for i, b in enumerate(h.get("bounds", [])[:BOUNDS_SHOWN]):
        label = f"{'  if':<{LABEL_WIDTH}}" if i == 0 else indent
        lines += _wrap(label + bound_text(b, first=i == 0), indent)
    return lines


def own_code_lines(own: dict | None) -> list:
    """What the hook could not name of the program's own code: where the cap bit, and why the
    script's own functions (`__main__`) were not named (run.json's hook.own_code)."""
    if not own:
        return []
    lines = []
    if own.get("capped_at"):
        lines.append(f"own code: the first {own['functions']} functions named, the cap "
                     f"(--max-own-functions {own['limit']}): {own['left_out']} more from "
                     f"{own['capped_at']} on are `other`")
    if own.get("main_why"):
        lines.append(own["main_why"])
    return lines


def _step(b: dict, prefix: str = "") -> float | None:
    """The step a bound is set against: its `step_ns` (the larger of the host period and its
    GPU busy), or the host period in a summary written before it."""
    return b.get(f"{prefix}step_ns", b.get(f"{prefix}host_period_ns"))


def bound_text(b: dict, first: bool = True) -> str:
    """One scenario of what removing a row buys, in words: its bounds a step, the speed-up they
    give, and (first) the measured step and GPU busy they are set against."""
    name = b["scenario"]
    if name.endswith(" gone") and not name.startswith("other"):
        name = short_row(name.removesuffix(" gone")) + " gone"
    speed = ("" if b["speedup_min"] is None else
             f", {b['speedup_min']:.2f}-{b['speedup_max']:.2f}x")
    now = (f" (now {ms_from_ns(_step(b))}, GPU busy {ms_from_ns(b['busy_ns'])})"
           if first else "")
    untraced = (f"; untraced {_ms(b['untraced_lower_ns'])}-{ms_from_ns(b['untraced_upper_ns'])}"
                f" (now {ms_from_ns(_step(b, 'untraced_'))})"
                if b.get("untraced_lower_ns") is not None and first else "")
    return (f"{name}: {_ms(b['lower_ns'])}-{ms_from_ns(b['upper_ns'])} a step{speed}{now}"
            f"{untraced}")


def _wrap(text: str, indent: str) -> list:
    import textwrap

    return textwrap.wrap(text, TEXT_WIDTH, subsequent_indent=indent) or [text]


def md_host(a) -> str:
    """The host table, every row, and the bounds, as Markdown."""
    h = a.summary.get("host")
    if not h or not h.get("steps"):
        return ""
    twin = any(r.get("untraced_ns") is not None for r in h["rows"])
    header = ["code", "ms a step", "python", "cuda", "sync", "share", "calls a step"]
    header += ["untraced ms", "profiler's share"] if twin else []
    rows = []
    for r in h["rows"]:
        cells = [r["name"], _ms3(r["ns"]), _ms3(r["python_ns"]), _ms3(r["cuda_ns"]),
                 _ms3(r["sync_ns"]), f"{r['share']:.1%}", f"{r['calls']:.2f}"]
        if twin:
            share = r.get("profiler_share")
            cells += [_ms3(r.get("untraced_ns")), "" if share is None else f"{share:.1%}"]
        rows.append(cells)
    left = h["steps"] - h["steps_in_means"]
    text = (f"Host time a step, device {a.device}: {ms_from_ns(h['period_ns_mean'])} on the "
            f"steps' thread (mean of {h['steps_in_means']} steps"
            + (f"; {left} over 3x the median left out" if left else "")
            + f"), named code {pct(h['named_share'])} ({pct(h['named_share_min'])} in the "
            "least):\n\n" + md_table(header, rows))
    if h.get("why"):
        text += f"\n\n{h['why']}."
    for line in own_code_lines(h.get("own_code")):
        text += f"\n\n{line}."
    if h.get("bounds"):
        untraced = any("untraced_lower_ns" in b for b in h["bounds"])
        header = ["if", "lower ms", "upper ms", "now ms", "GPU busy ms", "speed-up"]
        header += ["untraced lower ms", "untraced upper ms", "untraced now ms"] if untraced else []
        rows = []
        for b in h["bounds"]:
            row = [b["scenario"], _ms3(b["lower_ns"]), _ms3(b["upper_ns"]),
                   _ms3(_step(b)), _ms3(b["busy_ns"]), "" if b["speedup_min"] is None
                   else f"{b['speedup_min']:.2f}-{b['speedup_max']:.2f}x"]
            if untraced:
                row += [_ms3(b.get(f"untraced_{k}")) for k in ("lower_ns", "upper_ns")]
                row.append(_ms3(_step(b, "untraced_")))
            rows.append(row)
        text += ("\n\nWhat removing it would buy (medians over the steps; untraced: from the "
                 "twin's means):\n\n" + md_table(header, rows))
    return text
