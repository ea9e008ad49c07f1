"""measures/compare.py's bootstrap medians are np.median of the resamples the seeded generator
draws, whatever the count of steps (odd, even, one) and with ties."""

import numpy as np
import pytest

from analysis.measures.compare import BOOTSTRAP_SAMPLES, bootstrap_medians


@pytest.mark.parametrize("n", [1, 2, 7, 20, 500, 501])
def test_bootstrap_medians_are_the_medians_of_the_seeded_resamples(n):
    values = np.random.default_rng(n).normal(8.5e6, 1e5, n).round()
    values[::5] = values[0]  # ties
    picks = np.random.default_rng(0).integers(0, n, size=(BOOTSTRAP_SAMPLES, n))
    expected = np.median(values[picks], axis=1)
    assert np.array_equal(bootstrap_medians(values, np.random.default_rng(0)), expected)
