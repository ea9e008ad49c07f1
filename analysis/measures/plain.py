"""Values as JSON has them: what every output (JSON, the database, the library's summary) turns
numpy and pandas values into, in one place below the API and the renderers."""

import math

import numpy as np
import pandas as pd


def plain(value):
    """A JSON-ready Python value: numpy scalars unwrapped, NA/NaN as None, whole floats as int."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (np.integer, int)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, (np.floating, float)):
        f = float(value)
        if math.isnan(f):
            return None
        return int(f) if f.is_integer() and abs(f) < 2**53 else f
    if isinstance(value, np.bool_):
        return bool(value)
    return value
