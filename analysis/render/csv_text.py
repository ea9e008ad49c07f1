"""CSV text of a frame of integer and string columns, as pandas' `to_csv(index=False)` writes its
rows, made in numpy: every cell goes into a fixed-width byte block of its column (digits right-
aligned, two at a time; strings as they are), the blocks one above the other with their
separators, turned into rows, and the filler bytes dropped, so that a million rows take no
Python call per value (render/records.py's csv_chunks; pandas' to_csv takes seconds).
"""

import numpy as np
import pandas as pd

FILL = 0  # a byte no cell holds (a string with a NUL goes through pandas)
# Two digits at a time: the tens and the units of 0..99, as bytes.
TENS = np.frombuffer("".join(f"{i:02d}"[0] for i in range(100)).encode(), np.uint8)
UNITS = np.frombuffer("".join(f"{i:02d}"[1] for i in range(100)).encode(), np.uint8)
POWERS = 10 ** np.arange(1, 19, dtype=np.int64)
INT64_MIN = np.iinfo(np.int64).min


def csv_field(text: str) -> str:
    """A string as pandas' to_csv writes it (the csv module's QUOTE_MINIMAL)."""
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def int_block(values: np.ndarray) -> np.ndarray:
    """[width, rows] bytes, a row of bytes per character position: each integer's decimal
    digits (a leading '-' below zero), right-aligned, FILL before them."""
    values = values.astype(np.int64, copy=False)
    negative = values < 0
    rest = np.abs(values)
    digits = np.searchsorted(POWERS, rest, side="right") + 1
    width = int((digits + negative).max()) if len(values) else 1
    block = np.empty((width, len(values)), np.uint8)
    for d in range(0, int(digits.max()) if len(values) else 0, 2):
        # rest // 100 by a constant is cheap in numpy; rest % 100 is not
        high = rest // 100
        pair = rest - high * 100
        block[width - 1 - d] = UNITS.take(pair)
        if d + 1 < width:
            block[width - 2 - d] = TENS.take(pair)
        rest = high
    for j in range(width):  # no digit here: FILL
        block[j][digits < width - j] = FILL
    rows = np.flatnonzero(negative)
    block[width - 1 - digits[rows], rows] = ord("-")
    return block


class Unwritable(ValueError):
    """A cell this module cannot write (a NUL in a string): the caller asks pandas."""


def text_block(series: pd.Series) -> np.ndarray:
    """[width, rows] bytes of a column of strings (or categories, or anything formatted by
    str()): each distinct value's CSV field once, left-aligned, FILL after it; NA empty."""
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    cells = [csv_field(str(u)).encode() for u in uniques.tolist()] + [b""]
    if any(b"\x00" in cell for cell in cells):
        raise Unwritable("a NUL in a string")
    width = max(1, *map(len, cells))
    table = np.full((width, len(cells)), FILL, np.uint8)
    for i, cell in enumerate(cells):
        table[:len(cell), i] = np.frombuffer(cell, np.uint8)
    return table.take(np.where(codes < 0, len(cells) - 1, codes), axis=1)  # NA: empty


def is_int(series: pd.Series) -> bool:
    """A column int_block writes: numpy integers but uint64 (beyond int64) and int64's least
    value (its magnitude is beyond int64 too)."""
    values = series.to_numpy()
    return (isinstance(values.dtype, np.dtype) and values.dtype.kind in "iu"
            and (values.dtype.kind == "i" or values.dtype.itemsize < 8)
            and not (len(values) and values.min() == INT64_MIN))


def _text(blocks: list, seps: list) -> str:
    """The blocks' cells row by row, each cell followed by its separator."""
    rows = blocks[0].shape[1]
    parts = [part for block, sep in zip(blocks, seps, strict=True)
             for part in (block, np.full((1, rows), ord(sep), np.uint8))]
    block = np.ascontiguousarray(np.concatenate(parts).T)  # a row of bytes per row
    return block[block != FILL].tobytes().decode()


def int_list(series: pd.Series, chunk_rows: int = 200_000) -> str:
    """The integers (is_int) as a JSON list, the digits pandas' to_json writes."""
    values = series.to_numpy()
    text = "".join(_text([int_block(values[i:i + chunk_rows])], [","])
                   for i in range(0, len(values), chunk_rows))
    return "[" + text[:-1] + "]"


def csv_rows(frame: pd.DataFrame) -> str:
    """The frame's rows as to_csv writes them (no header), each ended by a newline. Raises
    Unwritable for a string with a NUL."""
    if not len(frame):
        return ""
    blocks = [int_block(frame[c].to_numpy()) if is_int(frame[c]) else text_block(frame[c])
              for c in frame.columns]
    return _text(blocks, [","] * (len(blocks) - 1) + ["\n"])
