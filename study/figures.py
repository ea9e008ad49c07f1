"""The documents' one rule, checked by reading them: a number in README.md, docs/**/*.md,
tests/data/README.md and the other documents (blocks.document_paths) stands in a generated block
(`<!-- generated: NAME (...) -->` ... `<!-- /generated -->`, made again by `python -m
study.publish` from committed data), or it is a constant that doc_constants.py lists, or it is
not there.

What counts as a figure (`figures_in`), once generated blocks, HTML comments, link targets and
addresses are taken out:
- in prose (and in a table's cells, and in the comment of a command line), every number: an
  integer before any noun or none (`177 for 12 layers`, `exited 143`), a decimal (`1.087`), a
  number with a unit of measure (`9.5 µs`, `+11.6%`, `5x`, `2.2 GB`), after `~`, `±` or `about`,
  a version (`Triton 3.9`), and a number written as a word from three up (`seven`, `twelve`)
  or `two` before a noun that counts what was run or captured (`two twin runs`);
- in backticks, a number with a unit or a decimal point, unless the span is a command, an
  option or code (`--window 30:50`, `a.step(40)`): what one types is not a measurement;
- in an indented or fenced block, every number on a line that is output (not a command, a
  comment or code): quoted output is a measurement, so it is a generated block made from the
  committed log it quotes (blocks.py), or it goes.
Not figures: dates and times of day (`2026-12-01`, `15:31 UTC`, `20261201T180227Z`), issue
numbers (`issue 19`, `#31`), a numbered list's or a heading's number, the exit statuses of the
house's contract after `exit` (0 done, 1 a check failed, 2 bad input), and digits inside a name
(`fp32`, `H200`, `bench-b1.json`, `Llama-3-8B`).

Constants (a threshold, an option's default, a model's shape, a version the code pins, a
datasheet's peak, the arithmetic of a definition, a worked example a test asserts) are figures
by the letter and may stand outside a block: each is listed in doc_constants.py, by a phrase of
its file that holds it and what pins it, so adding one is a visible act; where the code pins it
by name the check reads that value and refuses a phrase that no longer says it.
"""

import re

GENERATED = re.compile(r"<!-- generated: [^>]*-->.*?<!-- /generated -->", re.S)
COMMENT = re.compile(r"<!--.*?-->", re.S)
FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1[^\n]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
LINK_TARGET = re.compile(r"\]\([^)]*\)")
ADDRESS = re.compile(r"\b(?:https?://|www\.)\S+|\b[\w.-]+@[\w.-]+")

UNITS = (r"ns|µs|us|ms|s|sec|min|minutes|seconds|hours|h|%|x|×|B|bytes|KB|kB|MB|GB|TB|KiB|MiB|"
         r"GiB|TiB|Hz|kHz|MHz|GHz|GB/s|TB/s|M|K|k|"
         r"kernels?|ops|op records?|launch(?:es| calls?)|records|gaps?|marks?|calls|steps?|"
         r"captures?|processes|runs|classes|programs|rows|repeats|tokens|layers")
NUMBER = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)*"
# A number standing on its own: not inside a name (fp32, H200, bench-b1, v2, 1b, 0x1f, a/1.png).
FIGURE = re.compile(
    rf"(?<![\w.\-/\\:#@$=])(?:(?P<approx>~|±|about |\+|−|-)\s?)?(?P<num>{NUMBER})"
    rf"(?:(?P<range>\s?(?:–|-|to|/)\s?[+\-−]?{NUMBER})*)"
    rf"(?P<unit>\s?(?:{UNITS})(?![\w]))?"
    rf"(?P<of>\s+of\s+(?:the\s+)?{NUMBER})?"
    r"(?![\w]|\.\w|-\w|/\w|:\w)")
WORDS = ("three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
         "sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|"
         "ninety")
# what was run or captured, counted: `two` before one of these is a figure (`two twin runs`);
# elsewhere `two` is mostly the definition's (two streams, two threads, between two steps)
COUNTED = (r"(?:twin |untraced |traced |node-level |graph-level |eager |A/A )?"
           r"(?:runs?|processes|captures|repeats|rounds|GPUs|sessions|device calls|twins)\b")
WORD = re.compile(rf"\b(?:(?:{WORDS})|two(?=\s+{COUNTED}))\b", re.I)
DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}(?::\d{2})?|\d{8}T\d{6}Z")
ISSUE = re.compile(r"(?:issues?|Issues?|PR|#)[ -]?(?:\d+,? (?:and )?)*$")
YEAR = re.compile(r"\b(?:January|February|March|April|May|June|July|August|September|October|"
                  r"November|December|before|after|since|until|in|of)\s$")
EXIT = re.compile(r"\b(?:exit|exits|exited|exited with|exit status|status)\s$", re.I)
CONTRACT = {"0", "1", "2"}  # the exit statuses of the house (cli/base.py: 2 bad input)

# What one types, in backticks or on a block's line: a command, an option, code, a name.
COMMAND_WORDS = ("make", "gapscope", "python", "python3", "bash", "sh", "nsys", "pip", "uv",
                 "git", "cd", "cp", "export", "torchrun", "nvidia-smi", "ncu", "harness", "xz",
                 "sha256sum",
                 "for", "do", "done", "if", "then", "fi", "with", "from", "import", "def", "return",
                 "print", "else", "elif", "try", "except", "while", "sudo", "env", "ls", "cat",
                 "scripts/", "./", ".venv/", "$", "NS", "time", "pytest", "ruff", "curl", "mkdir",
                 "SELECT", "FROM", "WHERE", "GROUP", "ORDER", "JOIN", "LIMIT", "UNION", "HAVING")
CODE_LINE = re.compile(
    r"^\s*(?:#|\$ |[A-Z_][A-Z0-9_]*=|(?:" + "|".join(re.escape(w) for w in COMMAND_WORDS)
    + r")(?:\s|$)|[A-Za-z_][\w.]*\s*(?:\(|=[^=]|\.\w+\()|[\w./-]+\.(?:sh|py)\b|--?\w|\.\.\."
    r"|[)\]}])")


def _blank(m: re.Match) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def is_code(line: str) -> bool:
    """A command, an option, a comment or a line of code: what one types."""
    return bool(CODE_LINE.match(line))


def _code_line(line: str) -> str:
    """A command or code line with all but its comment blanked (`make x  # three runs`: the
    comment is prose)."""
    cut = re.search(r"(?:^|\s)(#)\s", line)
    if cut is None or line.lstrip().startswith("#!"):
        return " " * len(line)
    return " " * (cut.start(1) + 1) + line[cut.start(1) + 1:]


def _block(lines: list) -> list:
    """A code block's lines as the check reads them: a command's comment as prose, an output
    line whole (marked, so that every number on it counts), the rest blanked."""
    out, going_on = [], False
    for line in lines:
        if not line.strip():
            out.append(line)
        elif line.lstrip().startswith("#") or is_code(line) or going_on:
            out.append(_code_line(line))
        else:
            out.append("\0" + line[1:] if line else line)
        # a command continued on the next line (a trailing backslash) is still what one types
        going_on = line.rstrip().endswith("\\") and (going_on or is_code(line))
    return out


def _span(m: re.Match) -> str:
    """A code span: blanked where it is what one types; else kept for its units and decimals."""
    body = m.group(2)
    keep = not (is_code(body) or re.search(r"[=(\[{]|^-|_\w|\w/\w.*\.\w+$", body))
    if not keep:
        return _blank(m)
    ticks = " " * len(m.group(1))

    def measured(f: re.Match) -> str:  # in backticks, a number with a unit or a decimal point
        return f.group(0) if f.group("unit") or "." in f.group("num") else _blank(f)

    return ticks + FIGURE.sub(measured, WORD.sub(_blank, body)) + ticks


def _fenced(m: re.Match) -> str:
    opening, *body, closing = m.group(0).split("\n")
    return "\n".join([" " * len(opening), *_block(body), " " * len(closing)])


def prose(text: str) -> str:
    """The text as the check reads it: generated blocks, comments, link targets and addresses
    blanked; code blocks read line by line (_block); code spans kept only where they are not
    what one types. Newlines kept, so that line numbers hold; an output line starts with NUL."""
    for pattern in (GENERATED, COMMENT, ADDRESS):
        text = pattern.sub(_blank, text)
    text = FENCE.sub(_fenced, text)
    lines, out, in_code = text.split("\n"), [], []
    for i, line in enumerate(lines):
        # An indented code block: four spaces after a blank line (or after code), not a list's
        # continuation.
        prev = lines[i - 1] if i else ""
        if line.startswith("    ") and (not prev.strip() or in_code):
            in_code.append(line)
            continue
        if in_code:
            out += _block(in_code)
            in_code = []
        out.append(line)
    out += _block(in_code)
    text = "\n".join(out)
    return LINK_TARGET.sub(_blank, CODE_SPAN.sub(_span, text))


def figures_in(text: str) -> list:
    """(line number, figure, start, end) of every figure in a Markdown text."""
    found = []
    for n, line in enumerate(prose(text).split("\n"), 1):
        output = line.startswith("\0")
        for m in FIGURE.finditer(line):
            if output or _is_figure(line, m):
                found.append((n, m.group(0).strip(), m.start(), m.end()))
        found += [(n, m.group(0), m.start(), m.end()) for m in WORD.finditer(line)]
    return sorted(found, key=lambda f: (f[0], f[2]))


def _is_figure(line: str, m: re.Match) -> bool:
    num = m.group("num")
    before = line[:m.start()]
    if DATE_TIME.fullmatch(num) or DATE_TIME.match(line[m.start("num"):]):
        return False
    if ISSUE.search(before[-24:]):
        return False
    if re.fullmatch(r"(?:19|20)\d\d", num) and YEAR.search(before[-12:]):
        return False  # a year: April 2024, before 2024
    if num in CONTRACT and EXIT.search(before[-16:]) and not m.group("unit"):
        return False
    stripped = line.lstrip()
    if m.start() == len(line) - len(stripped) and re.match(r"\d+\.\s", stripped):
        return False  # a numbered list's number
    if re.match(r"#+\s", stripped) and re.match(r"#+\s+$", before.lstrip()):
        return False  # a heading's number
    return True


def stray_figures(text: str, constants: list) -> list:
    """The figures outside generated blocks that no constant's phrase covers:
    (line number, figure, line of the original text)."""
    spans = []
    for entry in constants:
        spans += [(m.start(), m.end()) for m in re.finditer(re.escape(entry[0]), text)]
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
    return [entry[0] for entry in constants if entry[0] not in text]
