"""One implementation per meaning: the median, the Markdown table and the two ms formatters (a
value in ns, a value already in ms), each with values worked out by hand."""

import numpy as np
import pandas as pd

from analysis.measures.stats import median, p90
from analysis.render.markdown import frame_md_table, md_table
from analysis.render.text import ms_from_ns, us_from_ns
from study.text import fmt_ms


def test_the_median_skips_what_is_missing_and_averages_an_even_count():
    assert median([4, None, 1, float("nan"), 3, 2]) == 2.5  # 1 2 3 4
    assert median(pd.Series([5, pd.NA, 1, 3], dtype="Float64")) == 3.0
    assert median(np.array([7.0])) == 7.0
    assert median([]) is None and median([None, pd.NA]) is None
    # p90 of 0..10: rank 0.9 x 10 = 9 exactly; of 0..9: between 8 and 9 at 0.1 -> 8.1.
    assert p90(range(11)) == 9.0 and p90(range(10)) == 8.1
    assert p90([]) is None


def test_a_markdown_table_from_lists_and_from_a_frame_is_the_same_table():
    expected = "| a | b |\n| --- | --- |\n| 1 | x |\n| 2 | y |"
    assert md_table(["a", "b"], [(1, "x"), (2, "y")]) == expected
    assert frame_md_table(pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})) == expected


def test_an_ms_formatter_says_which_unit_it_takes():
    assert ms_from_ns(1_234_567) == "1.23 ms" and us_from_ns(1_260) == "1.3 µs"
    assert ms_from_ns(None) == "n/a"
    assert fmt_ms(1.3074) == "1.307"  # bench's ms/step, already in ms
