"""The docs' one rule, checked by reading them: a measured figure in README.md or docs/*.md
stands in a generated block (`<!-- generated: NAME (...) -->` ... `<!-- /generated -->`, made
again by `python -m study.publish` from committed data), or it is not there.

What counts as a figure (`figures_in`), in the prose left once generated blocks, code (fenced,
indented four spaces, or `in backticks`), HTML comments and link targets are taken out:
- a number with a unit of measure after it: time (ns, µs, ms, s, min), share (%), ratio (x),
  size (B, KB, MB, GB, TB, KiB, MiB, GiB, and per second), rate (Hz), or a count of what a trace
  holds (kernels, ops, op records, launches, launch calls, records, gaps, marks, calls, steps,
  captures, processes, runs, classes, programs, rows);
- any number with a decimal point (`1.087`, `0.0198`), and `N of M` (`99 of 99`);
- a number after `~`, `±` or `about`.
Not figures: versions (`2025.3.1.0`, `torch 2.11`: after a tool's name or with three parts),
dates and times of day (`2026-12-01`, `15:31 UTC`, `20261201T180227Z`), issue numbers, and
numbers spelled in words (write a measured one in digits, so that this check sees it).

Constants of a definition (a threshold, an option's default, a datasheet's peak, a model's
shape, a worked example of a synthetic trace that a test asserts) are figures by the letter
and may stand outside a block: each is listed in doc_constants.py, by a phrase of its file
that holds it and the reason it is a constant, so adding one is a visible act.
"""

import re

GENERATED = re.compile(r"<!-- generated: [^>]*-->.*?<!-- /generated -->", re.S)
COMMENT = re.compile(r"<!--.*?-->", re.S)
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
LINK_TARGET = re.compile(r"\]\([^)]*\)")

UNITS = (r"ns|µs|us|ms|s|sec|min|minutes|seconds|hours|h|%|x|×|B|bytes|KB|kB|MB|GB|TB|KiB|MiB|"
         r"GiB|TiB|Hz|kHz|MHz|GHz|M|K|k|"
         r"kernels?|ops|op records?|launch(?:es| calls?)|records|gaps?|marks?|calls|steps?|"
         r"captures?|processes|runs|classes|programs|rows")
NUMBER = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
FIGURE = re.compile(
    rf"(?<![\w.\-/])(?:(?P<approx>~|±|about |\+|−|-)\s?)?(?P<num>{NUMBER})"
    rf"(?:(?P<range>\s?(?:–|-|to|/)\s?[+\-−]?{NUMBER})*)"
    rf"(?P<unit>\s?(?:{UNITS})(?![\w]))?"
    rf"(?P<of>\s+of\s+(?:the\s+)?{NUMBER})?")
TOOLS = ("torch", "nsys", "Python", "python", "transformers", "Triton", "HTA", "CUDA", "schema",
         "driver", "Kineto", "Systems", "Compute", "v", "version", "numpy", "pandas", "sqlite",
         "SQLite", "gcc", "cu", "nvtx", "matplotlib", "uv", "pip", "Debian", "Ubuntu", "glibc",
         "cuBLAS", "cuDNN", "NCCL", "Nsight", "Python's", "torch's")
VERSION = re.compile(r"\d+(?:\.\d+){2,}|\d+\.x|20\d{2}\.\d+")
DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}(?::\d{2})?|\d{8}T\d{6}Z")
ISSUE = re.compile(r"(?:issue|issues|Issue)[ -]$")


def prose(text: str) -> str:
    """The text with generated blocks, comments, code and link targets blanked (newlines kept,
    so line numbers hold)."""
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    for pattern in (GENERATED, COMMENT, FENCE):
        text = pattern.sub(blank, text)
    lines, out, in_code = text.split("\n"), [], False
    for i, line in enumerate(lines):
        # An indented code block: four spaces after a blank line (or after code), not a list's
        # continuation.
        prev = lines[i - 1] if i else ""
        if line.startswith("    ") and (not prev.strip() or in_code):
            in_code = True
            out.append(" " * len(line))
            continue
        in_code = False
        out.append(line)
    text = "\n".join(out)
    return LINK_TARGET.sub(blank, CODE_SPAN.sub(blank, text))


def figures_in(text: str) -> list:
    """(line number, figure, line) of every figure in the prose of a Markdown text."""
    found = []
    clean = prose(text)
    for n, line in enumerate(clean.split("\n"), 1):
        for m in FIGURE.finditer(line):
            if _is_figure(line, m):
                found.append((n, m.group(0).strip(), m.start(), m.end()))
    return found


def _is_figure(line: str, m: re.Match) -> bool:
    num = m.group("num")
    before = line[:m.start()]
    word = before.rstrip().rsplit(" ", 1)[-1] if before.strip() else ""
    if DATE_TIME.fullmatch(num) or DATE_TIME.match(line[m.start("num"):]):
        return False
    if VERSION.match(line[m.start("num"):]) or (word.strip("(`*") in TOOLS and "." in num):
        return False
    if ISSUE.search(before[-8:]) or before.endswith("#"):
        return False
    if re.match(r"\s*\d+\.\s", line) and m.start() == len(line) - len(line.lstrip()):
        return False  # a numbered list's number
    return bool(m.group("unit") or m.group("approx") and m.group("approx").strip() in
                ("~", "±", "about") or m.group("of") or "." in num)


def stray_figures(text: str, constants: list) -> list:
    """The figures outside generated blocks that no constant's phrase covers:
    (line number, figure, line of the original text)."""
    spans = []
    for phrase, _why in constants:
        spans += [(m.start(), m.end()) for m in re.finditer(re.escape(phrase), text)]
    offsets, pos = [], 0
    for line in text.split("\n"):
        offsets.append(pos)
        pos += len(line) + 1
    lines = text.split("\n")
    out = []
    for n, figure, start, end in figures_in(text):
        a, b = offsets[n - 1] + start, offsets[n - 1] + end
        if not any(lo <= a and b <= hi for lo, hi in spans):
            out.append((n, figure, lines[n - 1].strip()))
    return out


def missing_constants(text: str, constants: list) -> list:
    """The constants' phrases the text no longer holds (a stale entry hides nothing, but says
    what is no longer there)."""
    return [phrase for phrase, _why in constants if phrase not in text]
