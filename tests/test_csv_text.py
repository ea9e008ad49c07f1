"""render/csv_text.py writes what pandas' to_csv writes, for the columns it takes."""

import numpy as np
import pandas as pd

from analysis.render.csv_text import csv_rows
from analysis.render.records import csv_chunks


def body(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False).split("\n", 1)[1]


def test_integers_of_every_width_and_sign_as_pandas_writes_them():
    values = np.array([0, -1, 9, 10, -10, 99, 100, 12345, -987654321, 10**18, -(10**18) + 7,
                       np.iinfo(np.int64).max, np.iinfo(np.int64).min + 1], dtype=np.int64)
    frame = pd.DataFrame({"a": values, "b": values[::-1].copy(),
                          "c": np.arange(len(values), dtype=np.int32),
                          "d": np.arange(len(values), dtype=np.uint64) * (2**63 // 7)})
    assert csv_rows(frame) == body(frame)
    assert csv_rows(frame).startswith("0,-9223372036854775807,0,0\n-1,9223372036854775807,1,")


def test_strings_categories_and_na_as_pandas_writes_them():
    frame = pd.DataFrame({
        "s": pd.Series(["a,b", 'q"q', None, "ü", ""], dtype=object),
        "t": pd.array(["x", None, "y\nz", "x", "x"], dtype="str"),
        "k": pd.Categorical(["host", "sync", None, "host", "host"]),
        "n": np.array([np.iinfo(np.int64).min, 1, 2, 3, 4], dtype=np.int64),
    })
    assert csv_rows(frame) == body(frame)


def test_a_nul_in_a_string_goes_through_pandas():
    from analysis.measures.analysis import Analysis

    gaps = pd.DataFrame({"next_op": ["a\x00b", "c"], "gap_ns": [1, 2]})
    a = Analysis(0, {}, pd.DataFrame(), gaps=gaps)
    assert "".join(csv_chunks([a], "gaps")) == gaps.assign(device=0).to_csv(index=False)
