"""Exact numerics at the edges (issue 11): privacy profiles down to delta = 1e-300, the SGM
claim for tiny q, no NaN for large eps, and every sampled curve a trade-off function.

References are written here, independently of paperlib, at 60 digits with mpmath:

* ``G_mu``: Balle-Wang's profile ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``;
* the SGM claim ``f_q = T(N(0,1), (1-q) N(0,1) + q N(mu,1))``: the hockey-stick
  divergences in both directions by the Neyman-Pearson threshold of ``X``
  (``(1 - q) + q e^{mu x - mu^2/2} = e^{+-eps}``), and ``f_q(alpha) = q G_mu(alpha) +
  (1 - q)(1 - alpha)`` (THEORY.md section 3);
* the EASGM guarantee (THEORY.md sections 4 and 6): ``k ~ Binomial(N, q)`` components
  ``T(N(0, I_n), N(mu e_1, s^2 I_n))`` with the mean shifts of Theorem 3.6, the index
  revealed, so the profile is the weighted sum of the components' hockey-stick divergences;
  each tail is the Poisson mixture of mpmath's regularised incomplete gamma function
  (the side asked for summed directly, never as 1 - the other);

``epsilon`` references are roots of ``log delta(eps) = log delta`` (bisection, or Newton
steps from the library's value with the exact derivative ``-e^eps P[L > eps]``).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paperlib.fdp import tails as T
from paperlib.fdp.chisquare import Chi2Pair
from paperlib.fdp.gaussian import GaussShiftFamily, IdentityFamily, SubsampledGaussian
from paperlib.fdp.mixture import LRMixture, PointwiseMixture
from paperlib.fdp.tradeoff import (DELTA_FLOOR, GaussianTradeOff, TradeOffCurve, check_tradeoff, checked_curve,
                                   epsilon_from_delta, gaussian_delta)
from paperlib.mechanisms import guarantees as G

DPS = 60
DELTAS = [1e-10, 1e-50, 1e-300]


# =============================================================================== references
def mp_bisect_eps(delta_fn, delta, hi=2000):
    """Root of log delta_fn(eps) = log delta on [0, hi] by bisection at the working precision."""
    lo, hi, ld = mp.mpf(0), mp.mpf(hi), mp.log(delta)
    for _ in range(240):
        mid = (lo + hi) / 2
        d = delta_fn(mid)
        if d > 0 and mp.log(d) > ld:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def mp_gauss_delta(eps, mu):
    eps, mu = mp.mpf(eps), mp.mpf(mu)
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def mp_sgm_delta(eps, q, mu):
    """Both directions of the SGM claim's profile from the threshold of X (module docstring)."""
    eps, q, mu = mp.mpf(eps), mp.mpf(q), mp.mpf(mu)
    # direction 1: reject when X > x1, (1 - q) + q e^{mu x1 - mu^2/2} = e^eps
    x1 = (mp.log((mp.exp(eps) - 1 + q) / q) + mu**2 / 2) / mu
    d1 = (1 - q) * mp.ncdf(-x1) + q * mp.ncdf(mu - x1) - mp.exp(eps) * mp.ncdf(-x1)
    # direction 2: reject when X < x2, (1 - q) + q e^{mu x2 - mu^2/2} = e^-eps (if possible)
    d2 = mp.mpf(0)
    r = mp.exp(-eps) - 1 + q
    if r > 0:
        x2 = (mp.log(r / q) + mu**2 / 2) / mu
        d2 = mp.ncdf(x2) - mp.exp(eps) * ((1 - q) * mp.ncdf(x2) + q * mp.ncdf(x2 - mu))
    return max(d1, d2, mp.mpf(0))


def mp_ncx2(x, n, lam, upper):
    """P[chi'^2(n, lam) <= x] (``upper``: > x): Poisson mixture of regularised incomplete gammas."""
    a, z, h = mp.mpf(n) / 2, mp.mpf(x) / 2, mp.mpf(lam) / 2
    if z <= 0:
        return mp.mpf(1) if upper else mp.mpf(0)
    tot, prev, j = mp.mpf(0), mp.mpf(0), 0
    while True:
        lw = -h + (j * mp.log(h) if h > 0 else 0) - mp.loggamma(j + 1)
        g = mp.gammainc(a + j, z, mp.inf, regularized=True) if upper else mp.gammainc(a + j, 0, z, regularized=True)
        t = mp.exp(lw) * g
        tot += t
        if h == 0 or (j > h and t < prev and t < tot * mp.mpf(10) ** (-70)):
            return tot
        prev, j = t, j + 1


def easgm_components(N, q, sigma):
    """(weight, mean shift) of the EASGM guarantee's components (THEORY.md section 6, Theorem 3.6)."""
    out = []
    for k in range(N + 1):
        pmf = mp.binomial(N, k) * mp.mpf(q) ** k * (1 - mp.mpf(q)) ** (N - k)
        out.append(((1 - mp.mpf(q)) * pmf, mp.mpf(k) / ((N + 1) * mp.mpf(sigma))))
        out.append((mp.mpf(q) * pmf, (N + mp.mpf(k)) / ((N + 1) * mp.mpf(sigma))))
    return [(w, m) for w, m in out if w > 0]


def mp_gaussvar_profile(eps, comps, n, x):
    """(delta, d delta / d eps) of a revealed mixture of T(N(0,I_n), N(mu e_1, s^2 I_n)), s = x/(x+1).

    log LR = -n log s + (mu^2/(1 - s^2) - a ||X - c||^2)/2, a = (1 - s^2)/s^2 (THEORY.md section 4);
    ||X - c||^2 is chi'^2(n, mu^2/(1-s^2)^2) under P and s^2 chi'^2(n, mu^2 s^2/(1-s^2)^2) under Q.
    """
    s = mp.mpf(x) / (x + 1)
    s2 = s * s
    a = (1 - s2) / s2
    eps = mp.mpf(eps)
    d1 = d2 = g1 = g2 = mp.mpf(0)
    for w, mu in comps:
        lam_p, lam_q = mu**2 / (1 - s2) ** 2, mu**2 * s2 / (1 - s2) ** 2
        lmax = -n * mp.log(s) + mu**2 / (2 * (1 - s2))
        r1 = 2 / a * (lmax - eps)  # L > eps  <=>  ||X - c||^2 < r1
        if r1 > 0:
            pu, qu = mp_ncx2(r1, n, lam_p, False), mp_ncx2(r1 / s2, n, lam_q, False)
            d1 += w * (qu - mp.exp(eps) * pu)
            g1 -= w * mp.exp(eps) * pu
        r2 = 2 / a * (lmax + eps)  # L <= -eps  <=>  ||X - c||^2 >= r2
        pl, ql = mp_ncx2(r2, n, lam_p, True), mp_ncx2(r2 / s2, n, lam_q, True)
        d2 += w * (pl - mp.exp(eps) * ql)
        g2 -= w * mp.exp(eps) * ql
    return (d1, g1) if d1 >= d2 else (d2, g2)


# =============================================================================== G_mu
@pytest.mark.parametrize("mu", [0.5, 2.0, 40.0])
@pytest.mark.parametrize("delta", DELTAS)
def test_gaussian_epsilon_to_1e_300_against_mpmath(mu, delta):
    """G_mu: epsilon(delta) to 1e-9 relative (issue: 1e-6) and delta(eps) to 1e-9 there. mu = 40 has
    epsilon above 500, which the old search capped silently at infinity."""
    with mp.workdps(DPS):
        ref = mp_bisect_eps(lambda e: mp_gauss_delta(e, mu), delta, hi=5000)
        got = GaussianTradeOff(mu).epsilon(delta)
        got2 = epsilon_from_delta(lambda e: gaussian_delta(e, mu), delta)
        assert abs(got - ref) / ref < 1e-9 and abs(got2 - ref) / ref < 1e-9, (float(ref), got)
        d_ref = mp_gauss_delta(mp.mpf(got), mu)
        assert abs(float(gaussian_delta(got, mu)) - d_ref) / d_ref < 1e-9


# =============================================================================== SGM claim
@pytest.mark.parametrize("q", [1.0, 0.5, 0.01])
@pytest.mark.parametrize("delta", DELTAS)
def test_sgm_claim_epsilon_to_1e_300_against_mpmath(q, delta):
    """The SGM claim (SubsampledGaussian through LRMixture), sigma = 2. Before: epsilon(1e-50) was
    4.27 at q = 1 (exact 7.4767) and stuck below 1e-17; now within 1e-9 relative."""
    claim = G.sgm_claim(q=q, sigma=2.0)
    with mp.workdps(DPS):
        ref = mp_bisect_eps(lambda e: mp_sgm_delta(e, q, 0.5), delta, hi=200)
        got = claim.epsilon(delta)
        assert abs(got - ref) / ref < 1e-9, (q, delta, float(ref), got)
        d_ref = mp_sgm_delta(mp.mpf(got), q, 0.5)
        assert abs(float(claim.delta(got)) - d_ref) / d_ref < 1e-9


def test_sgm_claim_issue_values():
    """The numbers of issue 11: sgm_claim(1, 2).epsilon(1e-50) = 7.48; sgm_claim(0.5, 2) at 1e-300: 17.888."""
    assert G.sgm_claim(q=1.0, sigma=2.0).epsilon(1e-50) == pytest.approx(7.4767, abs=1e-4)
    assert G.sgm_claim(q=0.5, sigma=2.0).epsilon(1e-300) == pytest.approx(17.888, abs=1e-3)


@pytest.mark.parametrize("q", [1e-4, 1e-8, 1e-12, 1e-15])
def test_sgm_claim_tiny_q_against_mpmath(q):
    """f_q(alpha) = q G_mu(alpha) + (1 - q)(1 - alpha) for tiny q. Before: q = 1e-8 gave
    beta(0.1) = 0.9000047 > 1 - alpha, q = 1e-12 beta(0.1) = 0.943, q = 1e-15 a step curve."""
    mu = 0.5
    claim = G.sgm_claim(q=q, sigma=2.0)
    alphas = np.array([1e-6, 0.1, 0.5, 0.9])
    exact = np.asarray(claim(alphas))
    curve = claim.curve(1e-6)
    assert check_tradeoff(curve.alpha, curve.beta) is None
    with mp.workdps(DPS):
        for a, b in zip(alphas, exact):
            am = mp.mpf(float(a))
            g = mp.ncdf(mp.sqrt(2) * mp.erfinv(1 - 2 * am) - mu)  # G_mu(a) = Phi(Phi^-1(1 - a) - mu)
            ref = q * g + (1 - q) * (1 - am)
            gap = (1 - am) - ref  # = q (1 - a - G_mu(a)): the claim's distance from Id
            # the library's value resolves the gap to 1e-6 of itself, up to double rounding
            assert abs(b - ref) <= 1e-6 * gap + 3e-16, (q, a, b, float(ref))
            assert b <= 1 - a
            assert abs(float(curve(float(a))) - ref) <= 1e-6 + 3e-16
    # its privacy profile for tiny q: delta(0) = q delta_G(0) exactly
    with mp.workdps(DPS):
        assert float(claim.delta(0.0)) == pytest.approx(float(mp_sgm_delta(0, q, mu)), rel=1e-9)
        eps = claim.epsilon(q * 1e-3)
        ref = mp_bisect_eps(lambda e: mp_sgm_delta(e, q, mu), q * 1e-3, hi=100)
        assert abs(eps - ref) / ref < 1e-9


# =============================================================================== a mixture
@pytest.mark.parametrize("delta", DELTAS)
def test_easgm_guarantee_epsilon_to_1e_300_against_mpmath(delta):
    """EASGM guarantee N = 3, q = 0.5, sigma = 2, n = 20 (the issue's case: 42.92 for every delta
    below 1e-17). Reference: Newton steps on the mpmath profile from the library's epsilon."""
    N, q, sigma, n = 3, 0.5, 2.0, 20
    obj = G.easgm_guarantee(N=N, q=q, sigma=sigma, n=n)
    assert obj.dropped_mass == 0.0
    got = obj.epsilon(delta)
    with mp.workdps(DPS):
        comps = easgm_components(N, q, sigma)
        e = mp.mpf(got)
        for _ in range(3):
            d, g = mp_gaussvar_profile(e, comps, n, N)
            e = e - (mp.log(d) - mp.log(delta)) / (g / d)
        assert abs(got - e) / e < 1e-9, (delta, got, float(e))
        d_ref, _ = mp_gaussvar_profile(mp.mpf(got), comps, n, N)
        assert abs(float(obj.delta(got)) - d_ref) / d_ref < 1e-9


def test_easgm_epsilon_keeps_falling_below_1e_17():
    obj = G.easgm_guarantee(N=3, q=0.5, sigma=2.0, n=20)
    eps = [obj.epsilon(d) for d in (1e-15, 1e-17, 1e-20, 1e-100)]
    assert all(b > a + 1 for a, b in zip(eps, eps[1:]))


# =============================================================================== tails
@pytest.mark.parametrize("a,z", [(10.0, 1e-30), (10.0, 800.0), (3.5, 1e-200), (100.5, 2000.0),
                                 (5000.0, 1000.0), (5000.0, 20000.0), (7.4e5, 6.5e5), (7.4e5, 8.5e5)])
def test_log_incomplete_gamma_deep_tails_against_mpmath(a, z):
    # the tail away from the mode (mpmath's series for it converges; the other side is ~1)
    with mp.workdps(DPS):
        if z < a:
            small, got = mp.log(mp.gammainc(a, 0, z, regularized=True)), float(T.log_gamma_p(a, z))
        else:
            small, got = mp.log(mp.gammainc(a, z, mp.inf, regularized=True)), float(T.log_gamma_q(a, z))
    assert abs(got - float(small)) <= 1e-12 * max(1.0, abs(float(small))), (got, float(small))


@pytest.mark.parametrize("k,lam,x", [(20, 3.0, 1e-5), (20, 3.0, 1500.0), (1, 2.0, 2090.0),
                                     (20, 50.0, 4100.0), (5, 400.0, 10.0)])
def test_noncentral_deep_tails_against_mpmath(k, lam, x):
    with mp.workdps(DPS):
        lc = float(mp.log(mp_ncx2(x, k, lam, False)))
        ls = float(mp.log(mp_ncx2(x, k, lam, True)))
    got_c = float(T.ncx2_logcdf(np.array([x]), k, lam)[0])
    got_s = float(T.ncx2_logsf(np.array([x]), k, lam)[0])
    assert abs(got_c - lc) <= 1e-12 * max(1.0, abs(lc))
    assert abs(got_s - ls) <= 1e-12 * max(1.0, abs(ls))


def test_hockey_from_logs_never_overflows():
    out = T.hockey_from_logs(np.array([-1.0, -700.0, -np.inf, -1.0]), np.array([-2.0, 800.0, -5.0, -1.0]))
    assert out[0] == pytest.approx(math.exp(-1) - math.exp(-2), rel=1e-15)
    assert list(out[1:]) == [0.0, 0.0, 0.0]


# =============================================================================== no NaN
@pytest.mark.parametrize("build", [
    lambda: G.sgm_claim(q=0.5, sigma=2.0),
    lambda: G.sgm_claim(q=0.5, sigma=2.0).curve(),
    lambda: G.easgm_guarantee(N=3, q=0.5, sigma=2.0, n=20),
    lambda: G.asgm_upper_bound(N=10, q=0.2, sigma=1.0, n=50),
    lambda: G.asgm_upper_bound(N=10, q=0.2, sigma=1.0, n=50).curve(),
    lambda: PointwiseMixture([(0.5, GaussianTradeOff(1.0)), (0.5, GaussianTradeOff(3.0))]),
    lambda: Chi2Pair(20, 3.0),
], ids=["LRMixture", "TradeOffCurve", "LRMixture/EASGM", "PointwiseMixture/ASGM", "its curve",
        "PointwiseMixture/curve", "Chi2Pair"])
def test_delta_at_huge_eps_is_its_limit_not_nan(build):
    """delta(800) and delta(1e6) overflowed to NaN (e^eps * 0); they are the profile's limit."""
    f = build()
    d = np.asarray(f.delta(np.array([700.0, 800.0, 1e6])))
    assert np.all(np.isfinite(d)) and np.all(d >= 0)
    assert d[-1] == pytest.approx(f.delta_limit(), abs=1e-300)
    assert np.isfinite(f.delta(800.0)) and np.isfinite(f.delta(1e6))


def test_dropped_and_atom_mass_are_the_limit():
    """Dropped (binomial tail) mass is perfectly distinguishable: delta(eps) -> dropped_mass; an
    identity atom adds nothing. epsilon below the limit is infinite (honestly, not by a cap)."""
    mix = LRMixture([IdentityFamily(0.3), GaussShiftFamily([1.0], [0.7 - 1e-6])], dropped_mass=1e-6)
    assert float(mix.delta(1e6)) == pytest.approx(1e-6, rel=1e-12)
    assert mix.epsilon(1e-7) == math.inf
    assert math.isfinite(mix.epsilon(2e-6))


# =============================================================================== floors and caps
def test_epsilon_floors_and_no_silent_cap():
    with pytest.raises(ValueError, match=r"delta must be >= 1e-300"):
        G.sgm_claim(q=1.0, sigma=1.0).epsilon(1e-301)
    with pytest.raises(ValueError, match=r"delta must be >= 1e-12"):
        G.sgm_claim(q=1.0, sigma=1.0).curve().epsilon(1e-13)
    # still falling at eps_max: refused, not capped at infinity as before (eps_max was 500)
    with pytest.raises(RuntimeError, match="could not compute epsilon"):
        epsilon_from_delta(lambda e: 0.5 / (1.0 + e), 1e-9)
    # still 1 at eps_max (numerically disjoint outputs): no finite epsilon, the answer is inf
    assert epsilon_from_delta(lambda e: 1.0, 1e-5) == math.inf
    assert DELTA_FLOOR == 1e-300


def test_check_tradeoff_reasons_and_checked_curve():
    a = np.array([0.0, 0.5, 1.0])
    assert check_tradeoff(a, np.array([1.0, 0.3, 0.0])) is None
    assert "1 - alpha" in check_tradeoff(a, np.array([1.0, 0.6, 0.0]))
    assert "increases" in check_tradeoff(np.array([0.0, 0.2, 0.5, 1.0]), np.array([1.0, 0.3, 0.35, 0.0]))
    assert "convex" in check_tradeoff(np.array([0.0, 0.1, 0.2, 1.0]), np.array([1.0, 0.85, 0.5, 0.0]))
    assert "beta" in check_tradeoff(a, np.array([1.2, 0.3, 0.0]))
    with pytest.raises(RuntimeError, match=r"could not compute a valid trade-off curve for these parameters \(not convex"):
        checked_curve(np.array([0.0, 0.1, 0.2, 1.0]), np.array([1.0, 0.85, 0.5, 0.0]))


# =============================================================================== property-based
@settings(max_examples=6, deadline=None, derandomize=True, database=None)
@given(
    log_q=st.floats(-12.0, 0.0),
    sigma=st.floats(0.5, 20.0),
    N=st.integers(1, 50),
    log_n=st.floats(0.0, 6.0),
)
def test_every_curve_is_a_tradeoff_function(log_q, sigma, N, log_n):
    """SGM claim, EASGM and ASGM guarantees over q in [1e-12, 1], sigma in [0.5, 20], N in [1, 50],
    n in [1, 10^6] (derandomized draws): sampled curves are trade-off functions (they would raise
    RuntimeError otherwise), and 0 <= delta(eps) <= 1, finite, non-increasing."""
    q, n = min(10.0**log_q, 1.0), max(1, int(round(10.0**log_n)))
    eps = np.array([0.0, 0.1, 1.0, 10.0, 100.0, 800.0, 1e6])
    for f in (G.sgm_claim(q=q, sigma=sigma), G.easgm_guarantee(N=N, q=q, sigma=sigma, n=n),
              G.asgm_guarantee(N=N, q=q, sigma=sigma, n=n)):
        c = f.curve(1e-4)
        assert check_tradeoff(c.alpha, c.beta) is None, (f.label, q, sigma, N, n)
        b = np.asarray(f(np.array([0.0, 0.01, 0.5, 1.0])))
        assert np.all(b >= 0) and np.all(b <= 1 - np.array([0.0, 0.01, 0.5, 1.0]) + 1e-12)
        d = np.asarray(f.delta(eps))
        assert np.all(np.isfinite(d)) and np.all(d >= 0) and np.all(d <= 1), (f.label, d)
        assert np.all(np.diff(d) <= 1e-12)
        e = f.epsilon(1e-5)
        assert e >= 0 and not math.isnan(e)


def test_subsampled_gaussian_threshold_is_exact_for_tiny_q():
    """log((e^lt - 1 + q)/q) (the threshold's mu x - mu^2/2) against mpmath for q down to 1e-15."""
    for q in (1e-15, 1e-8, 0.3, 1.0):
        fam = SubsampledGaussian(q, 0.5)
        lt = np.array([-q / 2, 1e-17, q, 1e-3, 0.5, 3.0, 50.0])
        got = fam._log_excess(lt)
        with mp.workdps(DPS):
            for x, g in zip(lt, got):
                ref = mp.log((mp.exp(mp.mpf(float(x))) - 1 + mp.mpf(q)) / mp.mpf(q))
                assert abs(g - float(ref)) <= 1e-13 * max(1.0, abs(float(ref))), (q, x, g, float(ref))


def test_tradeoffcurve_delta_of_big_eps_regression():
    c = TradeOffCurve(np.array([0.0, 0.2, 1.0]), np.array([0.9, 0.1, 0.0]))
    assert float(c.delta(1e6)) == pytest.approx(0.1)
    assert c.delta_limit() == pytest.approx(0.1)
