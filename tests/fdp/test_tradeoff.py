"""Tests of paperlib.fdp.tradeoff (THEORY.md sections 1 and 3).

Every formula is checked against an independent computation: a Monte Carlo of the
Neyman-Pearson test, a 30-digit mpmath evaluation, a numerical supremum over alpha,
the exact trade-off of a finite pair of distributions, or a closed form derived in
the test itself. Monte Carlo tolerances are a few standard errors (stated at each use).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import optimize
from scipy.stats import norm

from paperlib.fdp.mixture import LRMixture
from paperlib.fdp.gaussian import GaussShiftFamily
from paperlib.fdp.tradeoff import (
    TradeOffCurve,
    eps_delta_tradeoff,
    epsilon_from_delta,
    gaussian_delta,
    gaussian_tradeoff,
    identity_tradeoff,
    lower_convex_envelope,
)



# --------------------------------------------------------------------------- helpers
def G(a, mu):
    """G_mu written out here (not paperlib's): Phi(Phi^-1(1 - a) - mu)."""
    return norm.cdf(norm.isf(np.asarray(a, float)) - mu)


def balle_wang_mp(eps, mu):
    """Balle-Wang delta at 30 digits: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)."""
    with mpmath.workdps(30):
        e, m = mpmath.mpf(eps), mpmath.mpf(mu)
        return +(mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2))


def sup_over_alpha(fun):
    """sup over alpha in (0,1) of a concave function of alpha, by bounded Brent in log10(alpha)."""
    grid = np.linspace(-300, 0, 3001)
    vals = fun(10.0**grid)  # fun is vectorised
    i = int(np.argmax(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = optimize.minimize_scalar(lambda g: -float(fun(10.0**g)), bounds=(lo, hi), method="bounded",
                                   options={"xatol": 1e-13})
    return max(-res.fun, float(vals[i]))


def discrete_tradeoff(p, q, alpha):
    """Exact T(P, Q) of two distributions on finitely many points (randomised NP test).

    Sort the outcomes by likelihood ratio q/p (largest first), reject them in that
    order; the vertices are the cumulative sums, and T interpolates linearly.
    """
    p, q = np.asarray(p, float), np.asarray(q, float)
    with np.errstate(divide="ignore"):
        lr = np.where(p > 0, q / np.where(p > 0, p, 1), np.inf)
    order = np.argsort(-lr, kind="stable")
    va = np.concatenate([[0.0], np.cumsum(p[order])])
    vb = 1.0 - np.concatenate([[0.0], np.cumsum(q[order])])
    # several vertices may share alpha (outcomes with p = 0): keep the smallest beta
    out = []
    for a in np.atleast_1d(alpha):
        j = np.searchsorted(va, a, side="right") - 1
        j = min(j, va.size - 2)
        # advance to the last vertex with this alpha
        while j + 1 < va.size and va[j + 1] == va[j]:
            j += 1
        if j == va.size - 1:
            out.append(vb[j])
            continue
        w = va[j + 1] - va[j]
        out.append(vb[j] + (vb[j + 1] - vb[j]) * (a - va[j]) / w)
    return np.asarray(out)


def fstar(a, s):
    """T(N(0,1), N(0,s^2))(a) for s < 1: reject H0 when |x| < t with a = 2 Phi(t) - 1."""
    t = norm.isf((1.0 - np.asarray(a, float)) / 2.0)
    return 2.0 * norm.sf(t / s)


def fstar_inv(a, s):
    """T(N(0,s^2), N(0,1))(a) = fstar^{-1}(a): reject H0 when |x| > r, a = 2 Phi(-r/s)."""
    r = s * norm.isf(np.asarray(a, float) / 2.0)
    return 2.0 * norm.cdf(r) - 1.0


def fstar_curve(s, m=4000):
    """Sampled fstar with exact slopes f'(a) = -phi(t/s) / (s phi(t))."""
    t = np.concatenate([[0.0], np.geomspace(1e-6, 12.0, m)])
    a = 2.0 * norm.cdf(t) - 1.0
    b = 2.0 * norm.sf(t / s)
    slope = -np.exp(norm.logpdf(t / s) - norm.logpdf(t)) / s
    a = np.concatenate([a, [1.0]])
    b = np.concatenate([b, [0.0]])
    slope = np.concatenate([slope, [0.0]])
    return TradeOffCurve(a, b, slope, label="fstar")


def gmu_curve(mu, m=3000):
    """Sampled G_mu through its threshold z (reject when x > z), with slopes -exp(mu z - mu^2/2)."""
    z = np.linspace(-9.0, 9.0 + mu, m)
    a = norm.sf(z)
    b = norm.cdf(z - mu)
    slope = -np.exp(mu * z - mu * mu / 2)
    return TradeOffCurve(np.concatenate([[0.0], a, [1.0]]), np.concatenate([[1.0], b, [0.0]]),
                         np.concatenate([[-np.inf], slope, [0.0]]), label=f"G_{mu}")


# --------------------------------------------------------------------------- G_mu, Id
@pytest.mark.parametrize("mu", [0.5, 1.0, 2.5])
def test_gaussian_tradeoff_matches_monte_carlo_of_np_test(mu):
    """G_mu vs the empirical Neyman-Pearson test N(0,1) vs N(mu,1) (200k draws a side).

    The test rejects H0 when x exceeds the empirical (1 - alpha) quantile of the H0
    sample (x is monotone in the likelihood ratio). The FNR estimate has variance
    beta(1-beta)/M + G'(alpha)^2 alpha(1-alpha)/M (sampling of Q, and of the
    threshold); the tolerance is 5 such standard errors.
    """
    rng = np.random.default_rng(12345)
    M = 200_000
    x0 = rng.standard_normal(M)
    x1 = mu + rng.standard_normal(M)
    alphas = np.array([0.01, 0.05, 0.1, 0.3, 0.5, 0.8])
    got = gaussian_tradeoff(alphas, mu)
    for a, g in zip(alphas, got):
        thr = np.quantile(x0, 1 - a)
        beta_hat = np.mean(x1 <= thr)
        slope = math.exp(mu * norm.isf(a) - mu * mu / 2)
        se = math.sqrt(g * (1 - g) / M + slope**2 * a * (1 - a) / M)
        assert abs(beta_hat - g) < 5 * se, (a, beta_hat, g, se)


def test_gaussian_tradeoff_endpoints_and_identity():
    # G_mu(0) = 1, G_mu(1) = 0, G_0 = Id, and G_mu <= Id
    assert gaussian_tradeoff([0.0], 1.3)[0] == pytest.approx(1.0, abs=1e-15)
    assert gaussian_tradeoff([1.0], 1.3)[0] == pytest.approx(0.0, abs=1e-15)
    a = np.linspace(0, 1, 101)
    np.testing.assert_allclose(gaussian_tradeoff(a, 0.0), 1 - a, atol=1e-14)
    np.testing.assert_allclose(identity_tradeoff(a), 1 - a, atol=0)
    assert np.all(gaussian_tradeoff(a, 0.7) <= 1 - a + 1e-15)
    # the value at a point checked by hand: G_1(0.05) = Phi(1.6448536 - 1) = 0.740405...
    with mpmath.workdps(30):
        ref = float(mpmath.ncdf(-mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.mpf("0.05") - 1) - 1))
    assert gaussian_tradeoff([0.05], 1.0)[0] == pytest.approx(ref, rel=1e-12)


# --------------------------------------------------------------------------- Balle-Wang
@pytest.mark.parametrize("mu", [0.3, 1.0, 3.0])
def test_gaussian_delta_matches_mpmath_and_numerical_sup(mu):
    """gaussian_delta vs (i) the closed form at 30 digits, (ii) sup_a 1 - G_mu(a) - e^eps a.

    (ii) is maximised by bounded Brent on log10(alpha) (xatol 1e-13): the objective is
    concave in alpha, so the error of the maximum is second order (< 1e-12 absolute).
    """
    for eps in [0.0, 0.1, 0.5, 1.0, 2.0, 4.0]:
        d = float(gaussian_delta(eps, mu))
        ref = float(balle_wang_mp(eps, mu))
        assert d == pytest.approx(ref, rel=1e-10, abs=1e-300)
        if ref < 1e-9:
            continue
        e = math.exp(eps)
        sup1 = sup_over_alpha(lambda a: 1 - G(a, mu) - e * a)
        sup2 = sup_over_alpha(lambda a: 1 - a - e * G(a, mu))
        assert max(sup1, sup2) == pytest.approx(d, rel=1e-7, abs=1e-12)


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_gaussian_delta_equals_lrmixture_delta(mu):
    """LRMixture.delta evaluates the tails at log t = +-eps: must equal Balle-Wang to 1e-12."""
    mix = LRMixture([GaussShiftFamily([mu], [1.0])])
    eps = np.array([0.0, 0.25, 1.0, 3.0, 6.0])
    np.testing.assert_allclose(mix.delta(eps), [float(balle_wang_mp(e, mu)) for e in eps],
                               rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(mix.delta(eps), gaussian_delta(eps, mu), rtol=1e-9, atol=1e-15)


# --------------------------------------------------------------------------- f_{eps,delta}
@pytest.mark.parametrize("eps,delta", [(0.0, 0.0), (0.5, 0.0), (1.0, 1e-5), (2.0, 0.1), (0.3, 0.4)])
def test_eps_delta_tradeoff_is_the_canonical_pair(eps, delta):
    """f_{eps,delta} equals T(P, Q) of the 4-point pair that attains (eps, delta)-DP.

    P = (delta, (1-delta) e^eps/(1+e^eps), (1-delta)/(1+e^eps), 0) and Q its reverse
    (Kairouz, Oh, Viswanath 2015): the trade-off is computed from the discrete
    Neyman-Pearson lemma (exact to rounding).
    """
    e = math.exp(eps)
    p = np.array([delta, (1 - delta) * e / (1 + e), (1 - delta) / (1 + e), 0.0])
    q = p[::-1].copy()
    a = np.linspace(0, 1, 1001)
    np.testing.assert_allclose(eps_delta_tradeoff(a, eps, delta), discrete_tradeoff(p, q, a), atol=1e-13)


def test_eps_delta_tradeoff_properties():
    eps, delta = 0.8, 0.05
    a = np.linspace(0, 1, 20001)
    f = eps_delta_tradeoff(a, eps, delta)
    assert f[0] == pytest.approx(1 - delta)
    assert f[-1] == 0.0
    assert np.all(f <= 1 - a + 1e-15)
    assert np.all(np.diff(f) <= 1e-15)  # non-increasing
    assert np.all(f[:-2] - 2 * f[1:-1] + f[2:] >= -1e-12)  # convex
    # symmetric: f(f(a)) = a wherever f is strictly decreasing (a < 1 - delta)
    inner = a[a < 1 - delta - 1e-9]
    np.testing.assert_allclose(eps_delta_tradeoff(eps_delta_tradeoff(inner, eps, delta), eps, delta), inner,
                               atol=1e-12)
    # the kink is the fixed point (1 - delta)/(1 + e^eps)
    ks = (1 - delta) / (1 + math.exp(eps))
    assert eps_delta_tradeoff([ks], eps, delta)[0] == pytest.approx(ks, abs=1e-15)
    # (eps, delta) = (0, 0) is Id
    np.testing.assert_allclose(eps_delta_tradeoff(a, 0.0, 0.0), 1 - a, atol=1e-15)


def test_gaussian_is_eps_delta_dp_at_its_profile():
    """G_mu >= f_{eps, delta(eps)} (the profile is the smallest such delta), tight at one point."""
    mu = 1.2
    a = np.linspace(0, 1, 200001)
    for eps in [0.2, 1.0, 2.5]:
        d = float(balle_wang_mp(eps, mu))
        gap = G(a, mu) - eps_delta_tradeoff(a, eps, d)
        assert gap.min() >= -1e-12
        assert gap.min() < 1e-6  # touches: a smaller delta would fail
        assert np.min(G(a, mu) - eps_delta_tradeoff(a, eps, max(d - 1e-4, 0))) < 0


# --------------------------------------------------------------------------- TradeOffCurve
def test_curve_interpolation_brackets_truth():
    """Chord >= G_mu >= tangent envelope, and chord - envelope <= max_gap."""
    mu = 1.5
    c = gmu_curve(mu, m=200)
    a = np.linspace(0, 1, 50001)
    truth = G(a, mu)
    chord, low = c(a), c.lower(a)
    assert np.all(chord >= truth - 1e-13)
    assert np.all(low <= truth + 1e-13)
    assert np.max(chord - low) <= c.max_gap * (1 + 1e-9) + 1e-15
    assert c.max_gap > 0
    # the envelope of the two neighbouring tangents is within max_gap of the truth
    assert np.max(truth - low) <= c.max_gap + 1e-15
    # without slopes lower() is the chord and max_gap is unknown
    c2 = TradeOffCurve(c.alpha, c.beta)
    np.testing.assert_array_equal(c2.lower(a), c2(a))
    assert math.isnan(c2.max_gap)


def test_curve_constructor_sorts_and_keeps_smallest_beta():
    c = TradeOffCurve([1.0, 0.0, 0.5, 0.5], [0.0, 1.0, 0.4, 0.3])
    np.testing.assert_array_equal(c.alpha, [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(c.beta, [1.0, 0.3, 0.0])
    with pytest.raises(ValueError):
        TradeOffCurve([0.0], [1.0])
    with pytest.raises(ValueError):
        TradeOffCurve([0.0, 1.0], [1.0, 0.5, 0.0])


@pytest.mark.parametrize("s", [0.5, 0.8])
def test_inverse_is_reflection_and_matches_closed_form(s):
    """f^{-1}(f(a)) = a on the strictly decreasing part; f^{-1} = T(N(0,s^2), N(0,1))."""
    c = fstar_curve(s)
    inv = c.inverse()
    a = np.linspace(0.0, 0.999, 2001)
    fa = c(a)
    # reflection of a piecewise-linear graph: exact up to rounding where f is strictly decreasing
    np.testing.assert_allclose(inv(fa), a, atol=1e-12)
    # closed form of the reverse pair (derived independently in fstar_inv)
    b = np.linspace(0.001, 0.999, 999)
    assert np.max(np.abs(inv(b) - fstar_inv(b, s))) <= inv.max_gap + 1e-12
    # slopes invert
    finite = np.isfinite(c.slope) & (c.slope != 0)
    np.testing.assert_allclose(inv.slope[::-1][finite], 1.0 / c.slope[finite], rtol=1e-14)
    # each reflected point carries the reciprocal of its own slope: tangents of the inverse
    # are reflected tangents, so the envelope brackets the closed form
    assert inv.max_gap > 0
    assert np.all(inv.lower(b) <= fstar_inv(b, s) + 1e-12)
    assert np.all(inv(b) >= fstar_inv(b, s) - 1e-12)
    # the ordered pair is not symmetric
    assert np.max(np.abs(inv(b) - c(b))) > 0.01


@pytest.mark.parametrize("s", [0.5, 0.8])
def test_symmetrised_is_convex_below_both_and_symmetric(s):
    c = fstar_curve(s)
    sym = c.symmetrised()
    a = np.linspace(0, 1, 4001)
    y = sym(a)
    assert np.all(y <= c(a) + 1e-12)
    assert np.all(y <= c.inverse()(a) + 1e-12)
    # convex: second differences of the sampled chord curve are >= 0
    assert np.all(y[:-2] - 2 * y[1:-1] + y[2:] >= -1e-12)
    # vertices: slopes non-decreasing
    sl = np.diff(sym.beta) / np.diff(sym.alpha)
    assert np.all(np.diff(sl) >= -1e-9)
    # symmetric: its inverse is itself
    np.testing.assert_allclose(sym.inverse()(a), y, atol=1e-9)
    # and it touches min{f, f^-1} (closed forms) where that is convex; the sampled chords
    # lie above the truth by at most the sampled curves' interpolation bound
    err = max(c.max_gap, c.inverse().max_gap)
    m = np.minimum(fstar(a[1:-1], s), fstar_inv(a[1:-1], s))
    assert np.min(m - y[1:-1]) >= -err - 1e-12
    assert np.min(np.abs(m - y[1:-1])) <= err


@pytest.mark.parametrize("q,mu", [(0.5, 0.5), (0.1, 2.0)])
def test_symmetrised_subsampled_gaussian_matches_dong_roth_su_closed_form(q, mu):
    """C_q(G_mu): f_q on [0, x*], slope -1 to (f_q(x*), x*), f_q^{-1} after; x* = Phi(-mu/2).

    Dong, Roth, Su (2022), Proposition for C_p(f) with the fixed point x* of G_mu.
    f_q(a) = q G_mu(a) + (1-q)(1-a) and its inverse are computed here (brentq).
    """
    fq = lambda a: q * G(a, mu) + (1 - q) * (1 - a)  # noqa: E731
    z = np.linspace(-10, 10 + mu, 8001)
    a_pts = np.concatenate([[0.0], norm.sf(z), [1.0]])
    b_pts = fq(a_pts)
    c = TradeOffCurve(a_pts, b_pts)
    sym = c.symmetrised()
    xs = float(norm.cdf(-mu / 2))
    fxs = float(fq(xs))

    def fq_inv(b):
        return optimize.brentq(lambda a: float(fq(a)) - b, 0.0, 1.0, xtol=1e-15)

    for a in np.linspace(0.001, 0.999, 97):
        if a <= xs:
            ref = float(fq(a))
        elif a <= fxs:
            ref = fxs - (a - xs)
        else:
            ref = fq_inv(a)
        # the sampled chord is within ~1e-6 of the truth with 8000 points
        assert float(sym([a])[0]) == pytest.approx(ref, abs=2e-6)


@pytest.mark.parametrize("mu", [0.5, 1.0, 3.0])
def test_curve_delta_close_to_balle_wang(mu):
    """Sampled-curve delta is a lower estimate, below the truth by at most e^eps * max_gap."""
    c = gmu_curve(mu, m=400)
    for eps in [0.0, 0.5, 1.0, 2.0]:
        d_true = float(balle_wang_mp(eps, mu))
        d = float(c.delta(eps))
        assert d <= d_true + 1e-13
        assert d >= d_true - math.exp(eps) * c.max_gap - 1e-13
    # vectorised call returns an array of the same length
    assert c.delta(np.array([0.0, 1.0])).shape == (2,)


def test_curve_delta_of_eps_delta_curve_is_delta():
    """The profile of f_{eps0, delta0} at eps0 is exactly delta0 (piecewise linear: no gap)."""
    eps0, d0 = 0.7, 0.02
    a = np.linspace(0, 1, 10001)
    a = np.union1d(a, [(1 - d0) / (1 + math.exp(eps0)), 1 - d0])
    c = TradeOffCurve(a, eps_delta_tradeoff(a, eps0, d0))
    assert float(c.delta(eps0)) == pytest.approx(d0, abs=1e-12)
    # the profile is flat (= d0) beyond eps0 because f(0) = 1 - d0, so invert just above d0
    # (d delta / d eps = e^eps * kink ~ 0.66 there: eps moves by ~1.5e-9)
    assert c.epsilon(d0 + 1e-9) == pytest.approx(eps0, abs=1e-7)


# --------------------------------------------------------------------------- epsilon
@pytest.mark.parametrize("mu,delta", [(0.5, 1e-5), (1.0, 1e-5), (2.0, 1e-3), (1.0, 0.2)])
def test_epsilon_from_delta_inverts_balle_wang(mu, delta):
    eps = epsilon_from_delta(lambda e: gaussian_delta(e, mu), delta)
    # independent root at 30 digits
    with mpmath.workdps(30):  # delta is decreasing in eps: bisect at 30 digits
        lo, hi = mpmath.mpf(0), mpmath.mpf(40)
        for _ in range(120):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if balle_wang_mp(mid, mu) > delta else (lo, mid)
        ref = (lo + hi) / 2
    assert eps == pytest.approx(float(ref), rel=1e-8)
    assert float(gaussian_delta(eps, mu)) == pytest.approx(delta, rel=1e-7)


def test_epsilon_from_delta_edges():
    # delta already reached at eps = 0
    assert epsilon_from_delta(lambda e: 0.0, 1e-5) == 0.0
    # never reached: inf
    assert epsilon_from_delta(lambda e: 0.5, 1e-5) == math.inf
    # a profile with a known inverse: delta(eps) = e^-eps
    assert epsilon_from_delta(lambda e: math.exp(-e), 1e-3) == pytest.approx(math.log(1e3), rel=1e-9)


def test_lower_convex_envelope():
    x = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 1.0])
    y = np.array([1.0, 0.5, 0.6, 0.2, 0.2, 0.0])
    hx, hy = lower_convex_envelope(x, y)
    # every input point lies on or above the hull, and the hull is convex
    assert np.all(np.interp(x, hx, hy) <= y + 1e-15)
    sl = np.diff(hy) / np.diff(hx)
    assert np.all(np.diff(sl) > 0)
    np.testing.assert_array_equal(hx, [0.0, 0.1, 0.3, 1.0])


# --------------------------------------------------------------------------- bad input
_CURVE = TradeOffCurve([0.0, 0.5, 1.0], [1.0, 0.3, 0.0], [-2.0, -0.7, -0.1])
ALPHA_FNS = {  # each takes an array of FPR values
    "gaussian_tradeoff": lambda a: gaussian_tradeoff(a, 1.0),
    "identity_tradeoff": lambda a: identity_tradeoff(a),
    "eps_delta_tradeoff": lambda a: eps_delta_tradeoff(a, 1.0, 0.1),
    "curve.__call__": lambda a: _CURVE(a),
    "curve.lower": lambda a: _CURVE.lower(a),
    "curve.symmetrised.__call__": lambda a: _CURVE.symmetrised()(a),
}
DELTA_FNS = {
    "epsilon_from_delta": lambda d: epsilon_from_delta(lambda e: 0.5, d),
    "curve.epsilon": lambda d: _CURVE.epsilon(d),
    "lrmixture.epsilon": lambda d: LRMixture([GaussShiftFamily([1.0], [1.0])]).epsilon(d),
}


@pytest.mark.parametrize("name", sorted(ALPHA_FNS))
@pytest.mark.parametrize("a", [-0.1, 1.1, float("nan"), float("inf")])
def test_bad_alpha(name, a):
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\]"):
        ALPHA_FNS[name]([0.2, a])
    with pytest.raises(ValueError, match="alpha"):
        ALPHA_FNS[name]([])  # empty is not an FPR either


@pytest.mark.parametrize("name", sorted(DELTA_FNS))
@pytest.mark.parametrize("d", [0.0, 1.0, -0.5, 1.5, float("nan")])
def test_bad_delta(name, d):
    with pytest.raises(ValueError, match=r"delta must be in \(0, 1\)"):
        DELTA_FNS[name](d)


def test_bad_other_parameters():
    with pytest.raises(ValueError, match="mu must be a finite number >= 0"):
        gaussian_tradeoff([0.1], -1.0)
    with pytest.raises(ValueError, match="mu must be a finite number > 0"):
        gaussian_delta(1.0, 0.0)
    with pytest.raises(ValueError, match="eps must be a finite number >= 0"):
        eps_delta_tradeoff([0.1], -1.0, 0.1)
    with pytest.raises(ValueError, match=r"delta must be in \[0, 1\]"):
        eps_delta_tradeoff([0.1], 1.0, 1.5)  # delta = 0 is pure DP, allowed here
    with pytest.raises(ValueError, match="eps must be finite and >= 0"):
        _CURVE.delta(-0.5)
