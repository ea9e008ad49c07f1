"""A SQLite database file of one integer table, written from numpy columns without SQLite.

Python's sqlite3 binds a value at a time: a million gaps of 14 values each cost about a second and
a half of CPU to insert. Here the file's bytes are made in numpy instead, a few pages at a time
(0.2 s for those gaps), following the documented file format
(https://www.sqlite.org/fileformat2.html): page 1 holds the header and the schema, then the
table's b-tree, leaves in rowid order and interior pages above them. Every value of a column
takes the same serial type (the narrowest integer that holds the column's range) and every rowid
a varint of the same length, so every cell has one size and a page is a block of cells. The
database (results database, analysis.store.db) then copies the rows into its own tables with one
INSERT ... SELECT, in SQLite: the file is scratch, read once and removed.
"""

import sqlite3

import numpy as np

# (bytes, serial type) of the record format's integers, narrowest first.
INT_TYPES = ((1, 1), (2, 2), (3, 3), (4, 4), (6, 5), (8, 6))
LEAF, INTERIOR = 13, 5  # b-tree page types of a table (rowid) b-tree
# Cells of this many pages are made at a time: memory stays a few MiB whatever the table's size.
CHUNK_BYTES = 1 << 22


def varint(v: int) -> bytes:
    """SQLite's varint (big-endian, 7 bits a byte, high bit: more follow) of 0 <= v < 2**56."""
    out = [v & 0x7F]
    v >>= 7
    while v:
        out.append(0x80 | (v & 0x7F))
        v >>= 7
    return bytes(reversed(out))


def varints(v: np.ndarray, length: int) -> np.ndarray:
    """Each of v (all needing exactly `length` bytes) as its varint: rows of `length` bytes."""
    out = np.empty((len(v), length), np.uint8)
    for k in range(length):
        out[:, length - 1 - k] = ((v >> (7 * k)) & 0x7F) | (0x80 if k else 0)
    return out


def int_type(column: np.ndarray) -> tuple:
    """(bytes, serial type) of the narrowest integer holding every value of the column."""
    lo, hi = (int(column.min()), int(column.max())) if len(column) else (0, 0)
    return next((size, t) for size, t in INT_TYPES
                if -(1 << (8 * size - 1)) <= lo and hi < 1 << (8 * size - 1))


def rowid_range(rows: int) -> tuple:
    """(first rowid, varint length): rowids first .. first + rows - 1 all of that length."""
    length = 1
    while rows > (1 << 7 * length) - (1 << 7 * (length - 1)):
        length += 1
    return 1 << 7 * (length - 1), length


def record_header(types: list) -> bytes:
    """A record's header: its own size (a varint, counted in it), then the serial types."""
    body = b"".join(varint(t) for t in types)
    size = len(body) + 1
    while len(varint(size)) + len(body) != size:
        size += 1
    return varint(size) + body


def page(kind: int, cells: np.ndarray, page_size: int, right: int = 0,
         offset: int = 0) -> np.ndarray:
    """One b-tree page: its header at `offset` (100 on page 1, after the file header), the cell
    pointers after it, the cells (rows of one size) in order at the page's end; `right` is an
    interior page's right-most child."""
    out = np.zeros(page_size, np.uint8)
    count, size = cells.shape
    start = page_size - count * size
    out[start:] = cells.reshape(-1)
    out[offset] = kind
    out[offset + 3:offset + 5] = (count >> 8, count & 0xFF)
    out[offset + 5:offset + 7] = ((start >> 8) & 0xFF, start & 0xFF)  # 65536 is written 0
    head = offset + (8 if kind == LEAF else 12)
    if kind == INTERIOR:
        out[offset + 8:offset + 12] = np.frombuffer(right.to_bytes(4, "big"), np.uint8)
    pointers = start + size * np.arange(count)
    out[head:head + 2 * count:2] = pointers >> 8
    out[head + 1:head + 2 * count:2] = pointers & 0xFF
    return out


def write_table(path, name: str, columns: dict, page_size: int = 65536) -> int:
    """A new database file at `path` with one table `name` of these integer columns (numpy
    arrays of one length): row i has rowid first + i. Returns first."""
    names = list(columns)
    data = [np.asarray(columns[c], dtype=np.int64) for c in names]
    rows = len(data[0]) if data else 0
    first, rowid_bytes = rowid_range(rows)
    types = [int_type(c) for c in data]
    header = record_header([t for _, t in types])
    payload = len(header) + sum(size for size, _ in types)
    if payload > page_size - 35:  # the most a table leaf holds in the page (no overflow pages)
        raise ValueError(f"a row of {payload} bytes does not fit a page of {page_size}")
    prefix = varint(payload)
    cell = len(prefix) + rowid_bytes + payload
    per_leaf = (page_size - 8) // (cell + 2)
    leaves = max(1, -(-rows // per_leaf))
    with open(path, "wb") as f:
        f.seek(page_size)  # page 1 last, once the root is known
        chunk = max(1, CHUNK_BYTES // page_size)
        for p0 in range(0, leaves, chunk):
            r0, r1 = p0 * per_leaf, min(rows, (p0 + chunk) * per_leaf)
            cells = np.empty((r1 - r0, cell), np.uint8)
            cells[:, :len(prefix)] = np.frombuffer(prefix, np.uint8)
            at = len(prefix)
            cells[:, at:at + rowid_bytes] = varints(np.arange(r0, r1) + first, rowid_bytes)
            at += rowid_bytes
            cells[:, at:at + len(header)] = np.frombuffer(header, np.uint8)
            at += len(header)
            for column, (size, _) in zip(data, types, strict=True):
                cells[:, at:at + size] = (column[r0:r1].astype(">i8").view(np.uint8)
                                          .reshape(-1, 8)[:, 8 - size:])
                at += size
            for k in range(0, max(1, len(cells)), per_leaf):
                f.write(page(LEAF, cells[k:k + per_leaf], page_size))
        root, pages = _interior(f, [(2 + i, first + min(rows, (i + 1) * per_leaf) - 1)
                                    for i in range(leaves)], rowid_bytes, page_size)
        f.seek(0)
        f.write(_first_page(name, names, root, pages, page_size))
    return first


def _interior(f, children: list, rowid_bytes: int, page_size: int) -> tuple:
    """Interior pages over (page, largest rowid under it) children, level by level, written
    after the leaves; returns (root page, pages in the file). An interior cell is the child's
    page and its largest rowid; each page's last child is its right-most pointer instead."""
    per_page = (page_size - 12) // (4 + rowid_bytes + 2) + 1
    pages = 1 + len(children)
    while len(children) > 1:
        above = []
        for k in range(0, len(children), per_page):
            group = children[k:k + per_page]
            child = np.array([c for c, _ in group[:-1]], dtype=">u4").view(np.uint8)
            keys = varints(np.array([key for _, key in group[:-1]], dtype=np.int64), rowid_bytes)
            cells = np.hstack([child.reshape(-1, 4), keys])
            pages += 1
            f.write(page(INTERIOR, cells, page_size, right=group[-1][0]))
            above.append((pages, group[-1][1]))
        children = above
    return children[0][0], pages


def _text_record(values: list) -> bytes:
    """A record of text and 4-byte integer values (the schema table's row)."""
    types, body = [], b""
    for v in values:
        if isinstance(v, int):
            types.append(4)
            body += v.to_bytes(4, "big")
        else:
            types.append(2 * len(v.encode()) + 13)
            body += v.encode()
    return record_header(types) + body


def _first_page(name: str, columns: list, root: int, pages: int, page_size: int) -> bytes:
    """Page 1: the 100-byte file header, then the schema table, a leaf of one row."""
    sql = f"CREATE TABLE [{name}] ({', '.join(f'[{c}]' for c in columns)})"
    record = _text_record(["table", name, name, root, sql])
    cell = np.frombuffer(varint(len(record)) + varint(1) + record, np.uint8)
    out = page(LEAF, cell.reshape(1, -1), page_size, offset=100)
    major, minor, patch = sqlite3.sqlite_version_info
    header = b"".join([
        b"SQLite format 3\0",
        (page_size if page_size < 65536 else 1).to_bytes(2, "big"),
        bytes([1, 1, 0, 64, 32, 32]),  # rollback journal; no reserved bytes; fixed fractions
        (1).to_bytes(4, "big"),  # change counter
        pages.to_bytes(4, "big"),
        bytes(8),  # no free pages
        (1).to_bytes(4, "big"),  # schema cookie
        (4).to_bytes(4, "big"),  # schema format 4
        bytes(8),  # default cache size; no auto-vacuum
        (1).to_bytes(4, "big"),  # UTF-8
        bytes(32),  # user version, incremental vacuum, application id, reserved
        (1).to_bytes(4, "big"),  # version-valid-for: the page count above is valid
        (major * 1_000_000 + minor * 1000 + patch).to_bytes(4, "big"),
    ])
    out[:100] = np.frombuffer(header, np.uint8)
    return out.tobytes()
