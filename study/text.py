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

    if block.startswith(("|", "#", "![", "<!--", "    ")) or "\n" in block:
        return block
    indent = "  " if block.startswith("- ") else ""
    return textwrap.fill(block, width, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)


def beyond(ratio: float, floor: tuple | None) -> bool:
    """Whether a ratio of two processes' figures lies beyond the A/A floor (aa.floor: the
    largest ratio two processes of one configuration came out apart); True without a floor."""
    if floor is None or not ratio or ratio <= 0:
        return True
    return max(ratio, 1 / ratio) > floor[0]


def between(ratio: float, floor: tuple | None, number: str) -> str:
    """A figure from two processes: `number` where their ratio lies beyond the A/A floor, else
    `within noise` (issue 31); the sentence names the floor once (with_floor)."""
    return number if beyond(ratio, floor) else "within noise"


def with_floor(text: str, floors: list) -> str:
    """`text` (a sentence without its full stop) with floor_note in brackets where it says
    `within noise`."""
    return text + (f" ({floor_note(floors)})" if "within noise" in text else "")


def beyond_span(ratios: list, floor, digits: int = 0, what: str = "capture") -> str:
    """Ratios of two processes' figures (traced ÷ untraced, say) as shares r − 1: the range of
    those beyond the A/A floor (one for all, or a list: one a ratio) with their count, and how
    many more lie within it."""
    def count(n: int) -> str:
        return f"{n} {what}{'' if n == 1 else 'es' if what.endswith('s') else 's'}"

    ratios = list(ratios)
    each = floor if isinstance(floor, list) else [floor] * len(ratios)
    out = [r for r, f in zip(ratios, each, strict=True) if beyond(r, f)]
    inside = len(ratios) - len(out)
    if not out:
        return f"within noise ({count(len(ratios))})"
    return (f"{pct_span([r - 1 for r in out], digits, sign=True)} ({count(len(out))}"
            + (f"; {inside} more within noise)" if inside else ")"))


def floor_note(floors: list) -> str:
    """The A/A floors a sentence's `within noise` rests on, each once: `the A/A floor: two
    `static` processes up to 1.535x apart`."""
    seen = []
    for f in floors:
        if f is not None and f not in seen:
            seen.append(f)
    if not seen:
        return "no A/A floor measured"
    return "the floor between processes: " + listing(
        [words for _, words, _ in seen])
