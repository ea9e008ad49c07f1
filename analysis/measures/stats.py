"""The project's one median and p90 of a set of values: missing values (None, NA, NaN) left out,
None for an empty set, a plain float otherwise. Every table, summary and RESULTS sentence that
quotes a median takes it from here, so that they agree on the even count (the mean of the two
middle values) and on what is skipped. numpy only: the scripts run it where pandas may be absent
(study/overhead.py merges a capture host's bench files)."""

import numpy as np


def _number(value) -> float:
    try:
        return float(value)
    except TypeError:  # None, pandas' NA
        return np.nan


def _present(values) -> np.ndarray:
    if hasattr(values, "to_numpy"):  # a pandas Series or Index: NA as NaN, no call per value
        v = values.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        v = np.array([_number(x) for x in values], dtype=np.float64)
    return v[~np.isnan(v)]


def median(values) -> float | None:
    """Median (mean of the two middle values for an even count); None when empty."""
    v = _present(values)
    return float(np.median(v)) if len(v) else None


def p90(values) -> float | None:
    """The 90th percentile, linear between the closest ranks (numpy's default); None when empty."""
    v = _present(values)
    return float(np.percentile(v, 90)) if len(v) else None
