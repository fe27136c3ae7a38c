"""Gaussian components with a scale ratio s = x/(x+1) very close to 1 (huge datasets): accurate
up to the documented noncentrality limit, refused beyond it (no silently wrong curve)."""

import numpy as np
import pytest

from paperlib.fdp.gaussian import MAX_NONCENTRALITY, GaussVarFamily
from paperlib.fdp.tradeoff import gaussian_tradeoff
from paperlib.mechanisms.guarantees import scale_shift_tradeoff

A = np.array([0.001, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 0.99])


def test_accurate_below_the_limit():
    # s -> 1 with a unit shift tends to G_1; at x = 1.5e5 (noncentrality 5.6e9) it is within 1e-5
    f = scale_shift_tradeoff(1.0, 1.5e5 / (1.5e5 + 1))
    np.testing.assert_allclose(f(A), gaussian_tradeoff(A, 1.0), atol=1e-5)


@pytest.mark.parametrize("x", [2e5, 5e5, 1e7])
def test_refused_above_the_limit(x):
    with pytest.raises(ValueError, match=r"^could not compute this trade-off: a component's noncentrality"):
        GaussVarFamily(1, x, [1.0], [1.0])
    # a pure scale test has noncentrality 0 and stays available at any x
    GaussVarFamily(10, x, [0.0], [1.0])
    assert MAX_NONCENTRALITY == 6e9
