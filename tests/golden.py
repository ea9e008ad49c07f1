"""Golden outputs pinned by content. Table rows as values: a test pins every number and word of
a row, not its layout (padding, units, separators, decimals shown), so a change of format alone
breaks no test. A PNG by its size (which figure was drawn; tests of the figure functions check
what is in it).

    | kv | 4.000 | 3.90–4.10 | 1.50x | – | no |   ->   [4.0, 3.9, 4.1, 1.5, None, "no"]
"""

import re

# A sign only where it starts a word: "4.50-5.80" is a range, "-15%" a negative number.
NUMBER = re.compile(r"(?:(?<![\w.])[-+])?\d+(?:\.\d+)?")
NONE = ("", "–", "-", "n/a")


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def values(cells_: list[str]) -> list:
    """A cell's numbers, in order ('3.90–4.10' is 3.9 and 4.1, '+60%' is 60.0); a cell without
    a number is its word ('no'), or None where it says there is none ('–', empty)."""
    out = []
    for cell in cells_:
        found = NUMBER.findall(cell)
        out += [float(n) for n in found] if found else [None if cell in NONE else cell]
    return out


def table_rows(text: str, key: str) -> list[list[str]]:
    """The cells after the first of each Markdown table row whose first cell is `key`."""
    rows = [cells(line) for line in text.splitlines() if line.lstrip().startswith("|")]
    return [r[1:] for r in rows if r[0] == key]


def rows(text: str, key: str) -> list[list]:
    return [values(r) for r in table_rows(text, key)]


def row(text: str, key: str) -> list:
    """The values of the one row keyed `key`."""
    (found,) = rows(text, key)
    return found


def starts(text: str, key: str, count: int) -> list[list]:
    """The first `count` values of each row keyed `key` (for golden rows that pin a row's first
    columns and leave the rest to other tests)."""
    return [r[:count] for r in rows(text, key)]


def png_size(path) -> tuple:
    """(width, height) in pixels, from a PNG's header chunk."""
    with open(path, "rb") as f:
        data = f.read(24)
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path}: not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
