"""analysis.store.sqlite_image: database files written in numpy read back by SQLite as written."""

import sqlite3

import numpy as np
import pytest

from analysis.store.sqlite_image import rowid_range, varint, write_table


def read(path, sql):
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("rows, page_size", [
    (0, 512),        # an empty leaf as the root
    (1, 512),
    (127, 512),      # the last count of 1-byte rowids
    (128, 512),      # 2-byte rowids from 128
    (20_000, 512),   # 1,334 leaves of 15 rows, 24 interior pages above them, the root
    (40_000, 65536), # one leaf level under one root; the 64 KiB page size written as 1
])
def test_sqlite_reads_every_row_and_finds_the_file_sound(tmp_path, rows, page_size):
    rng = np.random.default_rng(rows)
    columns = {
        "row": np.arange(rows),
        "wide": rng.integers(-(2**63), 2**63 - 1, rows, endpoint=True),
        "small": rng.integers(-128, 128, rows),
        "constant": np.full(rows, 281497575621955),
        "flag": rng.integers(0, 2, rows).astype(bool),
    }
    path = tmp_path / "image.db"
    first = write_table(path, "t", columns, page_size)
    assert read(path, "PRAGMA integrity_check") == [("ok",)]
    assert read(path, "PRAGMA page_size") == [(page_size,)]
    assert read(path, "SELECT sql FROM sqlite_master") == [
        ("CREATE TABLE [t] ([row], [wide], [small], [constant], [flag])",)]
    expected = [(first + i, *(int(c[i]) for c in columns.values())) for i in range(rows)]
    assert read(path, "SELECT rowid, * FROM t ORDER BY rowid") == expected
    if rows:  # a lookup by rowid goes down the interior pages
        middle = rows // 2
        assert read(path, f"SELECT wide FROM t WHERE rowid = {first + middle}") == [
            (int(columns["wide"][middle]),)]


@pytest.mark.parametrize("value", [-(2**63), -(2**47) - 1, -(2**47), -129, -128, -1, 0, 1, 127,
                                   128, 2**15, 2**23 - 1, 2**23, 2**31, 2**47, 2**63 - 1])
def test_each_integer_width_holds_its_extremes(tmp_path, value):
    path = tmp_path / "image.db"
    first = write_table(path, "t", {"v": np.array([value, 0], dtype=np.int64)}, 512)
    assert read(path, "SELECT rowid, v FROM t") == [(first, value), (first + 1, 0)]
    assert read(path, "PRAGMA integrity_check") == [("ok",)]


def test_each_column_takes_its_narrowest_integer(tmp_path):
    path = tmp_path / "image.db"
    write_table(path, "t", {"v": np.arange(1000)}, 512)
    # A cell: payload size (1 byte), rowid (2), record header (2), value (2 bytes, not 8):
    # 7 bytes and a 2-byte pointer, 56 cells a leaf: 18 leaves, their root and page 1.
    assert read(path, "PRAGMA page_count") == [(20,)]


def test_rowids_all_have_one_varint_length():
    assert rowid_range(0) == (1, 1)
    assert rowid_range(127) == (1, 1)
    assert rowid_range(128) == (128, 2)
    assert rowid_range(1_176_000) == (16384, 3)
    assert [varint(v) for v in (0, 127, 128, 16383, 16384)] == [
        b"\x00", b"\x7f", b"\x81\x00", b"\xff\x7f", b"\x81\x80\x00"]


def test_a_row_wider_than_a_page_is_refused(tmp_path):
    columns = {f"c{i}": np.array([2**62]) for i in range(60)}  # 60 x 8 bytes > 512 - 35
    with pytest.raises(ValueError, match="does not fit a page of 512"):
        write_table(tmp_path / "image.db", "t", columns, 512)
