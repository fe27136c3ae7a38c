"""Library pieces that notebook 03 used to compute itself: the Eq. 14 weight, the
scale-shift test of Theorems 3.4/3.5, the CLT curve and its read-out, and the curve
comparisons behind Lemmas 3.14-3.16. Each against an independent computation."""

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from paperlib.fdp.clt import CLTTradeOff
from paperlib.fdp.compare import max_excess, ordering_violation
from paperlib.fdp.tradeoff import TradeOffCurve, gaussian_tradeoff
from paperlib.mechanisms import clt as mclt
from paperlib.mechanisms.guarantees import (asgm_bound_weight, asgm_upper_bound, easgm_upper_bound,
                                            scale_shift_tradeoff, scale_test_tradeoff)

A = np.linspace(0.0, 1.0, 401)[1:-1]


@pytest.mark.parametrize("N,q", [(1, 0.5), (4, 0.7), (999, 0.7), (59_999, 0.005), (10, 1e-12), (3, 1.0)])
def test_asgm_bound_weight_against_mpmath(N, q):
    mp.mp.dps = 50
    ref = mp.mpf(q) - mp.mpf(q) * (1 - mp.mpf(q)) ** N
    assert asgm_bound_weight(N, q) == pytest.approx(float(ref), rel=1e-13)


def test_asgm_bound_weight_is_what_the_bound_uses():
    u = asgm_upper_bound(4, 0.7, None, 50)
    assert u.meta["weight_chi2"] == asgm_bound_weight(4, 0.7)
    with pytest.raises(ValueError, match="q"):
        asgm_bound_weight(4, 0.0)


def test_scale_test_closed_form_by_monte_carlo():
    """The |X| < tau test's (FPR, FNR) sampled: X ~ N(0,1) under D, N(0, s^2) under D'."""
    rng = np.random.default_rng(0)
    s, m = 0.6, 400_000
    x0, x1 = rng.standard_normal(m), s * rng.standard_normal(m)
    for tau in (0.3, 0.8, 1.5):
        fpr, fnr = np.mean(np.abs(x0) < tau), np.mean(np.abs(x1) >= tau)
        beta = float(scale_test_tradeoff(np.array([fpr]), s)[0])
        assert abs(beta - fnr) < 5 * math.sqrt(fnr * (1 - fnr) / m) + 5 * math.sqrt(fpr * (1 - fpr) / m)


def test_scale_shift_tradeoff_reduces_to_the_closed_forms():
    # pure scale: the closed form; pure shift (s -> 1) approaches G_mu
    for s in (0.3, 0.7, 0.9):
        np.testing.assert_allclose(scale_shift_tradeoff(0.0, s)(A), scale_test_tradeoff(A, s), atol=2e-6)
    np.testing.assert_allclose(scale_shift_tradeoff(1.0, 1 - 1e-5)(A), gaussian_tradeoff(A, 1.0), atol=1e-4)
    # Theorem 3.4 (weaker as mu falls) and 3.5 (weaker as s rises), strictly somewhere
    by_mu = [scale_shift_tradeoff(mu, 0.7) for mu in (2.0, 1.0, 0.5, 0.0)]
    by_s = [scale_shift_tradeoff(0.0, s) for s in (0.3, 0.5, 0.7, 0.9)]
    assert ordering_violation(by_mu, A, increasing=True) < 1e-9
    assert ordering_violation(by_s, A, increasing=True) < 1e-9
    assert ordering_violation(by_mu, A, increasing=False) > 0.01  # the reverse order fails
    for bad in ((0.0, 1.0), (0.0, 0.0), (-1.0, 0.5), (float("nan"), 0.5)):
        with pytest.raises(ValueError):
            scale_shift_tradeoff(*bad)


def test_compare_helpers():
    f, g = TradeOffCurve([0, 1], [1, 0]), TradeOffCurve([0, 0.5, 1], [1, 0.25, 0])
    assert max_excess(f, g, A) == pytest.approx(0.25, abs=1e-3)
    assert -0.0013 < max_excess(g, f, A) < 0  # g lies below f between the end points
    assert max_excess(lambda a: np.full_like(a, np.nan), f, A) != max_excess(lambda a: np.full_like(a, np.nan), f, A)
    with pytest.raises(ValueError, match="at least two"):
        ordering_violation([f], A, increasing=True)
    # Lemma 3.14 on the library's bounds: the EASGM bound rises with N; the check fails if reversed
    bounds = [easgm_upper_bound(N, None, None, 100) for N in (1, 4, 16, 64)]
    assert ordering_violation(bounds, A, increasing=True) <= 1e-9
    assert ordering_violation(bounds[::-1], A, increasing=True) > 0.05


def test_clt_bound_easgm_matches_the_theorem_and_reads_out():
    cc = mclt.clt_bound("easgm", 999, 0.005, 10.0, 26_010)
    ref = mclt.clt_upper_bound_easgm(A, 999, 26_010)
    inside = np.isfinite(ref.upper)
    np.testing.assert_allclose(cc.raw(A)[inside], np.minimum(ref.upper, 1 - A)[inside], rtol=1e-12)
    assert np.all(np.isnan(cc.raw(A)[~inside]))
    # as a trade-off function: defined everywhere, never above the theorem's bound, a valid curve
    f = cc(A)
    assert np.all(np.isfinite(f)) and np.all(f <= np.where(inside, cc.raw(A), 1.0) + 1e-9)
    assert np.all(np.diff(f) <= 1e-12) and np.all(f <= 1 - A + 1e-12)
    assert 0 < cc.epsilon(1e-5) < 10
    assert (cc.mu, cc.gamma) == (ref.mu, ref.gamma)
    # the read-out against a dense grid search of the same curve
    x = cc.fpr_at_fnr(0.5)
    grid = np.linspace(cc.gamma, 1 - cc.gamma, 200_001)
    vals = cc.raw(grid)
    assert x == pytest.approx(grid[np.argmax(vals <= 0.5)], abs=1e-5)
    assert float(cc.raw(np.array([x]))[0]) == pytest.approx(0.5, abs=1e-9)


def test_clt_bound_asgm_is_mixed_as_eq14():
    N, q, n = 999, 0.7, 26_010
    cc = mclt.clt_bound("asgm", N, q, None, n)
    w = q - q * (1 - q) ** N
    base = np.minimum(mclt.clt_upper_bound_easgm(A, N, n).upper, 1 - A)
    np.testing.assert_allclose(cc.raw(A), w * base + (1 - w) * (1 - A), rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(cc(A), w * CLTTradeOff(cc.mu, cc.gamma)(A) + (1 - w) * (1 - A), atol=1e-9)
    with pytest.raises(ValueError, match="rounds"):
        mclt.clt_bound("asgm", N, q, None, n, rounds=2)
    with pytest.raises(ValueError, match="sgm"):
        mclt.clt_bound("sgm", N, q, 1.0, n)
    with pytest.raises(ValueError, match="SGM guarantee"):
        mclt.clt_bound("feasgm", 1000, 0.005, None, 100)  # floors agree


def test_clt_readout_edges():
    cc = mclt.clt_bound("easgm", 1, None, None, 26_010)  # N = 1: on the axes, below 0.5 at once
    assert cc.fpr_at_fnr(0.5) == pytest.approx(cc.gamma)
    assert stats.norm.cdf(0) == 0.5  # (sanity of the reference library)
