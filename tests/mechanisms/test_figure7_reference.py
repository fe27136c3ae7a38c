"""Figure 7's FEASGM bound at n = 1,485,217 (200 rounds, K = 700): its privacy profile at the
epsilon the library reports, against an independent 30-digit quadrature of the chi-square
tails (m = 200 (n - 1) = 297,043,200 degrees of freedom, 4.2 standard deviations out).

Earlier code put epsilon at 754.55: its upper chi-square tail was about 13% off there.
"""

import mpmath as mp
import pytest

from paperlib.mechanisms.multiround import feasgm_rounds_upper_bound

M = 200 * (1_485_217 - 1)


def _tail(t, upper: bool):
    """log P[chi2_M < t] (or > t) by quadrature of the log-density from t outwards."""
    a = mp.mpf(M) / 2
    lnorm = a * mp.log(2) + mp.loggamma(a)

    def logf(y):
        return (a - 1) * mp.log(y) - y / 2 - lnorm

    g = abs((a - 1) / t - mp.mpf(1) / 2)
    sc, sign = 1 / g, (1 if upper else -1)
    integral = mp.quad(lambda u: mp.e ** (logf(t + sign * u) - logf(t)), [0, sc, 5 * sc, 20 * sc, 80 * sc, 400 * sc])
    return logf(t) + mp.log(integral)


def _delta(eps):
    """Both directions of T(N(0, I_M), N(0, s^2 I_M)), s = 700/701 (THEORY.md §7, §11)."""
    x = mp.mpf(700)
    s = x / (x + 1)
    A = -M * mp.log(s)
    cQ, cP = (1 - s**2) / 2, (1 - s**2) / (2 * s**2)
    e = mp.mpf(eps)
    d1 = mp.e ** _tail((A - e) / cQ, False) - mp.e ** (e + _tail((A - e) / cP, False))
    d2 = mp.e ** _tail((A + e) / cP, True) - mp.e ** (e + _tail((A + e) / cQ, True))
    return max(d1, d2)


def test_figure7_large_model_epsilon_against_quadrature():
    mp.mp.dps = 30
    bound = feasgm_rounds_upper_bound(140_199, 0.005, 10.0, 1_485_217, rounds=200)
    eps = bound.epsilon(1e-5)
    assert eps == pytest.approx(753.6043, abs=1e-3)
    assert float(_delta(eps)) == pytest.approx(1e-5, rel=1e-6)
    assert float(_delta(754.5475186933147)) < 0.9e-5  # the old value is not the epsilon at 1e-5
