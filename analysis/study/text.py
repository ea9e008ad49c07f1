"""Numbers into RESULTS.md's sentences: the formats of the tables they summarise, a range over
every run of a kind, and the verdict of a comparison (apart or overlapping).

Every sentence of RESULTS.md that quotes a number is made here from the frames its tables are
made from, so the prose cannot say what the data does not (issue 19).
"""

# The words every part uses alike (RESULTS.md's header defines them).
SAME_PROCESS = "in one process"
BETWEEN_PROCESSES = "between processes"


def num(x: float, spec: str = ".3f") -> str:
    """A number as the tables print it."""
    return format(x, spec)


def fmt_ms(value_ms: float) -> str:
    """A value already in ms (bench's ms_per_step_median), as the tables and sentences print it:
    `1.307`. A value in ns is render/text.ms_from_ns's."""
    return num(value_ms, ".3f")


def span(values, spec: str = ".3f", unit: str = "") -> str:
    """`lo–hi` of the values as the tables print them (one number where both print alike);
    `lo to hi` when a sign is printed, so that a minus is not read as the dash."""
    values = sorted(values)
    lo, hi = num(values[0], spec), num(values[-1], spec)
    if lo == hi:
        return lo + unit
    sep = " to " if lo[0] in "+-" or hi[0] in "+-" else "–"
    return f"{lo}{unit}{sep}{hi}{unit}" if sep == " to " else f"{lo}{sep}{hi}{unit}"


def pct(x: float, digits: int = 1, sign: bool = False) -> str:
    """A share (0.25) as a percentage (`25.0%`, `+25.0%`)."""
    return num(x * 100, f"{'+' if sign else ''}.{digits}f") + "%"


def pct_span(values, digits: int = 1, sign: bool = False) -> str:
    return span([v * 100 for v in values], f"{'+' if sign else ''}.{digits}f", "%")


def apart(a: tuple, b: tuple) -> bool:
    """Whether two (lo, hi) ranges are disjoint: a difference outside that noise."""
    return a[1] < b[0] or b[1] < a[0]


def verdict(a: tuple, b: tuple) -> str:
    return "apart" if apart(a, b) else "overlapping"


def listing(words: list) -> str:
    """`a`, `a and b`, `a, b and c`."""
    words = list(words)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def bullet(title: str, text: str) -> str:
    return f"- **{title}** {text}"


def wrap(block: str, width: int = 100) -> str:
    """A prose block (a paragraph or a bullet) wrapped at `width`, a bullet's lines indented
    under its text; tables, headings, images and markers are left as they are."""
    import textwrap

    if block.startswith(("|", "#", "![", "<!--")) or "\n" in block:
        return block
    indent = "  " if block.startswith("- ") else ""
    return textwrap.fill(block, width, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)
