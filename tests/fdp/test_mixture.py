"""Tests of paperlib.fdp.mixture (THEORY.md section 5: Lemma 2.10, Lemmas 3.1 and 3.3).

References: closed forms of G_mu, Id and the two-dimensional variance test
((1 - a)^(1/s^2)), a brute-force minimisation over allocations (Lemma 3.1, a convex
problem solved by nested bounded Brent searches), and Balle-Wang's profile.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy.stats import norm

from paperlib.fdp.gaussian import GaussShiftFamily, GaussVarFamily, IdentityFamily, SubsampledGaussian
from paperlib.mechanisms.guarantees import asgm_guarantee, easgm_guarantee, easgm_upper_bound
from paperlib.fdp.mixture import LRMixture, PointwiseMixture
from paperlib.fdp.tradeoff import TradeOffCurve, gaussian_delta


def G(a, mu):
    return norm.cdf(norm.isf(np.asarray(a, float)) - mu)


def var2(a, x):
    """T(N(0, I_2), N(0, s^2 I_2)), s = x/(x+1): ||X||^2 ~ Exp(1/2) gives (1 - a)^(1/s^2)."""
    s2 = (x / (x + 1)) ** 2
    return (1 - np.clip(np.asarray(a, float), 0, 1)) ** (1 / s2)


# --------------------------------------------------------------------------- single component
@pytest.mark.parametrize("mu", [0.3, 1.0, 3.0])
def test_single_gauss_shift_is_g_mu(mu):
    mix = LRMixture([GaussShiftFamily([mu], [1.0])])
    c = mix.curve(1e-6)
    a = np.linspace(0, 1, 5001)
    truth = G(a, mu)
    lo, hi = mix(a), c(a)
    assert c.max_gap <= 1e-6
    # chord above, tangent envelope below, each within tol of the truth
    assert np.all(hi >= truth - 1e-12) and np.all(hi - truth <= 1e-6)
    assert np.all(lo <= truth + 1e-12) and np.all(truth - lo <= 1e-6)
    # slopes are -t at each vertex: compare with G'(a) = -exp(mu z - mu^2/2), z = Phi^-1(1-a)
    inner = (c.alpha > 1e-12) & (c.alpha < 1 - 1e-12) & np.isfinite(c.slope)
    z = norm.isf(c.alpha[inner])
    np.testing.assert_allclose(c.slope[inner], -np.exp(mu * z - mu * mu / 2), rtol=1e-6)
    # profile
    eps = np.array([0.0, 0.5, 1.0, 2.0])
    np.testing.assert_allclose(mix.delta(eps), gaussian_delta(eps, mu), rtol=1e-10, atol=1e-15)
    assert float(mix.delta(1.0)) == pytest.approx(float(gaussian_delta(1.0, mu)), rel=1e-10)


# --------------------------------------------------------------------------- identity atom
def test_identity_atom_draws_the_straight_segment():
    """w1 G_mu + w0 Id at a common threshold: at t = 1 the Id atom moves alpha from
    w1 Phi(-mu/2) to w1 Phi(-mu/2) + w0 along slope -1 (closed form of both ends)."""
    mu, w1, w0 = 1.0, 0.6, 0.4
    mix = LRMixture([GaussShiftFamily([mu], [w1]), IdentityFamily(w0)])
    c = mix.curve(1e-7)
    p = norm.cdf(-mu / 2)  # alpha_G = beta_G = Phi(-mu/2) at log t = 0
    A = (w1 * p, w1 * p + w0)
    B = (w1 * p + w0, w1 * p)
    # both ends are vertices of the sampled curve
    for (ax, bx) in (A, B):
        j = np.argmin(np.abs(c.alpha - ax))
        assert c.alpha[j] == pytest.approx(ax, abs=1e-12)
        assert c.beta[j] == pytest.approx(bx, abs=1e-12)
    inside = np.linspace(A[0], B[0], 41)[1:-1]
    line = A[1] - (inside - A[0])
    np.testing.assert_allclose(mix(inside, tol=1e-7), line, atol=1e-12)
    np.testing.assert_allclose(c(inside), line, atol=1e-12)
    # outside the segment: w1 G(a) + w0 (left) and w1 G(a - w0) (right) in closed form
    left = np.linspace(0.001, A[0] - 0.01, 20)
    right = np.linspace(B[0] + 0.01, 0.999, 20)
    # left: only G is rejected (t > 1), alpha = w1 aG, beta = w1 G(aG) + w0
    np.testing.assert_allclose(mix(left, tol=1e-7), w1 * G(left / w1, mu) + w0, atol=2e-7)
    np.testing.assert_allclose(mix(right, tol=1e-7), w1 * G((right - w0) / w1, mu), atol=2e-7)
    # exact profile at eps = 0 is the total variation of the pair: w1 (2 Phi(mu/2) - 1)
    assert float(mix.delta(0.0)) == pytest.approx(w1 * (2 * norm.cdf(mu / 2) - 1), rel=1e-12)


def test_identity_only_is_identity():
    mix = LRMixture([IdentityFamily(1.0)])
    a = np.linspace(0, 1, 11)
    np.testing.assert_allclose(mix(a), 1 - a, atol=1e-15)
    assert float(mix.delta(0.0)) == 0.0
    assert mix.epsilon(1e-5) == 0.0


# --------------------------------------------------------------------------- Lemma 3.1
def brute_force_allocation(fs, ws, alpha):
    """min over (a_1..a_m) in [0,1]^m with sum w_i a_i = alpha of sum w_i f_i(a_i).

    The objective is convex on an affine set; for m = 2 a bounded Brent search on a_1,
    for m = 3 a nested one (the inner minimum is convex in the outer variable).
    Brent's xatol 1e-11 makes the value error second order (< 1e-12 away from kinks).
    """
    ws = np.asarray(ws, float)
    opts = {"xatol": 1e-11}

    def best_last_two(rest, f1, f2, w1, w2):
        # a_1 in [lo, hi] so that a_2 = (rest - w1 a_1)/w2 stays in [0, 1]
        lo = max(0.0, (rest - w2) / w1)
        hi = min(1.0, rest / w1)
        if hi <= lo:
            a1 = min(max(lo, 0.0), 1.0)
            return w1 * f1(a1) + w2 * f2(min(max((rest - w1 * a1) / w2, 0.0), 1.0))
        obj = lambda a1: w1 * f1(a1) + w2 * f2(min(max((rest - w1 * a1) / w2, 0.0), 1.0))  # noqa: E731
        res = optimize.minimize_scalar(obj, bounds=(lo, hi), method="bounded", options=opts)
        return min(res.fun, obj(lo), obj(hi))

    if len(fs) == 2:
        return best_last_two(alpha, fs[0], fs[1], ws[0], ws[1])
    f0, w0 = fs[0], ws[0]
    rest_w = ws[1] + ws[2]
    lo = max(0.0, (alpha - rest_w) / w0)
    hi = min(1.0, alpha / w0)
    outer = lambda a0: w0 * f0(a0) + best_last_two(alpha - w0 * a0, fs[1], fs[2], ws[1], ws[2])  # noqa: E731
    res = optimize.minimize_scalar(outer, bounds=(lo, hi), method="bounded", options=opts)
    return min(res.fun, outer(lo), outer(hi))


def test_lemma_3_1_two_components_with_identity():
    mu, w1, w0 = 1.5, 0.7, 0.3
    mix = LRMixture([GaussShiftFamily([mu], [w1]), IdentityFamily(w0)])
    fs = [lambda a: float(G(a, mu)), lambda a: 1.0 - a]
    for alpha in [0.02, 0.1, 0.25, 0.4, 0.6, 0.9]:
        ref = brute_force_allocation(fs, [w1, w0], alpha)
        got = float(mix([alpha], tol=1e-7)[0])
        # mix is a lower bound within 1e-7; the brute force is an attained value (>= min)
        assert ref - 1e-7 - 1e-9 <= got <= ref + 1e-9, (alpha, got, ref)


def test_lemma_3_1_three_components():
    """G_0.5 (w .3) + G_2 (w .5) + 2-D variance test x = 2 (w .2), all closed forms."""
    ws = [0.3, 0.5, 0.2]
    mix = LRMixture([GaussShiftFamily([0.5, 2.0], ws[:2]), GaussVarFamily(2, 2.0, [0.0], [ws[2]])])
    fs = [lambda a: float(G(a, 0.5)), lambda a: float(G(a, 2.0)), lambda a: float(var2(a, 2.0))]
    c = mix.curve(1e-7)
    assert c.max_gap <= 1e-7
    worst_pointwise_gain = 0.0
    for alpha in [0.01, 0.05, 0.15, 0.3, 0.5, 0.7, 0.9]:
        ref = brute_force_allocation(fs, ws, alpha)
        got = float(mix([alpha], tol=1e-7)[0])
        assert ref - 1e-7 - 1e-9 <= got <= ref + 1e-9, (alpha, got, ref)
        # Lemma 3.3: at most the pointwise sum (same alpha in every component)
        pointwise = sum(w * f(alpha) for w, f in zip(ws, fs))
        assert got <= pointwise + 1e-12
        worst_pointwise_gain = max(worst_pointwise_gain, pointwise - got)
    # and the common threshold really is better somewhere (the lemma is not vacuous here)
    assert worst_pointwise_gain > 0.01


def test_lemma_3_3_easgm_components():
    """Lemma 3.3 for the EASGM guarantee: below sum_i w_i T_i(alpha), each T_i computed as
    its own one-component mixture."""
    g = easgm_guarantee(2, 0.4, 1.0, 3)
    fam = g.families[0]
    comps = [LRMixture([GaussVarFamily(fam.n, fam.x, [m], [1.0])]) for m in fam.mus]
    a = np.linspace(0.0, 1.0, 201)
    pointwise = sum(w * cm.curve(1e-6)(a) for w, cm in zip(fam.weights, comps))
    got = g(a, tol=1e-6)
    assert np.all(got <= pointwise + 1e-12)
    assert np.max(pointwise - got) > 1e-3


# --------------------------------------------------------------------------- sampling accuracy
MIXTURES = {
    "gshift": lambda: LRMixture([GaussShiftFamily([0.4, 2.5], [0.5, 0.5])]),
    "easgm": lambda: easgm_guarantee(3, 0.5, 2.0, 20),
    "easgm_n1": lambda: easgm_guarantee(3, 0.5, 2.0, 1),
    "asgm_atom": lambda: asgm_guarantee(3, 0.7, 2.0, 5),
    "var_n2": lambda: LRMixture([GaussVarFamily(2, 0.5, [0.0], [1.0])]),
    "subsampled": lambda: LRMixture([SubsampledGaussian(0.2, 2.0)]),
}


@pytest.mark.parametrize("name", sorted(MIXTURES))
@pytest.mark.parametrize("tol", [1e-4, 1e-6])
def test_curve_reaches_tolerance_and_lower_below_chord(name, tol):
    mix = MIXTURES[name]()
    c = mix.curve(tol)
    assert c.max_gap <= tol
    assert c.meta["max_gap"] == c.max_gap
    a = np.linspace(0, 1, 20001)
    lo, hi = c.lower(a), c(a)
    assert np.all(lo <= hi + 1e-15)
    assert np.max(hi - lo) <= tol
    # a convex, non-increasing curve from (0, <= 1) to (1, 0)
    assert np.all(np.diff(c.beta) <= 1e-15)
    # convexity, in absolute terms (robust to rounding of nearly equal alphas): each vertex
    # lies on or below the chord of its two neighbours
    a0, a1, a2 = c.alpha[:-2], c.alpha[1:-1], c.alpha[2:]
    chord = c.beta[:-2] + (c.beta[2:] - c.beta[:-2]) * (a1 - a0) / (a2 - a0)
    assert np.all(c.beta[1:-1] <= chord + 1e-12)
    assert c.alpha[0] == 0.0 and c.alpha[-1] == 1.0 and c.beta[-1] == 0.0
    # the cache returns the same object
    assert mix.curve(tol) is c


def test_first_chord_is_refined_for_bounded_likelihood_ratio():
    """Regression: GaussVarFamily's LR is bounded (log LR <= l_max), so thresholds above
    l_max give alpha = 0 and the first chord from (0, 1) used to stay unrefined (first
    vertex at alpha = 0.34 for N = 4, n = 3, off by 0.03 at alpha = 0.1)."""
    mix = LRMixture([GaussVarFamily(2, 4.0, [0.0], [1.0])])  # = easgm upper bound N=4, n=3
    a = np.array([0.001, 0.01, 0.05, 0.1, 0.2])
    ref = var2(a, 4.0)
    np.testing.assert_allclose(mix(a, tol=1e-6), ref, atol=1e-6)


# --------------------------------------------------------------------------- profiles
@pytest.mark.parametrize("name", ["easgm", "asgm_atom", "subsampled", "easgm_n1"])
def test_exact_delta_between_sampled_curve_bounds(name):
    """Exact delta (tails at log t = +-eps) vs the sampled curve's vertex delta: the chord
    lies above the curve, so its delta is smaller, by at most e^eps * max_gap."""
    mix = MIXTURES[name]()
    c = mix.curve(1e-6)
    for eps in [0.0, 0.3, 1.0, 2.0, 4.0]:
        exact = float(mix.delta(eps))
        sampled = float(c.delta(eps))
        assert sampled <= exact + 1e-12
        assert exact <= sampled + math.exp(eps) * c.max_gap + 1e-12
    # epsilon inverts the exact profile
    for d in [1e-5, 1e-2]:
        e = mix.epsilon(d)
        assert math.isfinite(e)
        assert float(mix.delta(e)) == pytest.approx(d, rel=1e-6)


# --------------------------------------------------------------------------- dropped mass
def test_dropped_mass_keeps_a_lower_bound():
    """Dropping a component (declared as dropped_mass) treats it as perfectly
    distinguishable: the curve can only go down and delta only up, delta >= dropped."""
    full = LRMixture([GaussShiftFamily([0.5, 1.0, 3.0], [0.5, 0.3, 0.2])])
    cut = LRMixture([GaussShiftFamily([0.5, 1.0], [0.5, 0.3])], dropped_mass=0.2)
    a = np.linspace(0, 1, 2001)
    assert np.all(cut.curve(1e-6)(a) <= full(a, tol=1e-6) + 1e-12)
    assert np.all(cut(a, tol=1e-6) <= full(a, tol=1e-6) + 1e-12)
    # closed form: the cut curve is the common-threshold mix of 0.5 G_.5 + 0.3 G_1 only,
    # reaching beta = 0 at alpha = 0.8
    assert float(cut([0.8], tol=1e-6)[0]) == pytest.approx(0.0, abs=1e-6)
    assert float(cut([0.0])[0]) == pytest.approx(0.8)
    eps = np.array([0.0, 0.5, 1.0, 3.0, 8.0])
    assert np.all(cut.delta(eps) >= full.delta(eps) - 1e-15)
    assert np.all(cut.delta(eps) >= 0.2)
    assert cut.meta["dropped_mass"] == 0.2


def test_binomial_truncation_is_a_lower_bound():
    """A guarantee computed with a coarse binomial cut lies below the fine one."""
    coarse = easgm_guarantee(30, 0.3, 1.0, 5, tail_tol=1e-2)
    fine = easgm_guarantee(30, 0.3, 1.0, 5, tail_tol=1e-14)
    assert 0 < coarse.dropped_mass <= 1e-2
    assert fine.dropped_mass <= 1e-14
    a = np.linspace(0, 1, 401)
    assert np.all(coarse(a, tol=1e-6) <= fine(a, tol=1e-6) + 1e-12)
    assert np.max(fine(a, tol=1e-6) - coarse(a, tol=1e-6)) > 1e-4
    e = np.array([0.0, 1.0, 5.0])
    assert np.all(LRMixture.delta(coarse, e) >= coarse.dropped_mass)  # the truncated mixture's own profile
    # the guarantee's delta(eps) refines its truncation to the value it returns (an upper bound still)
    assert np.all(coarse.delta(e) >= fine.delta(e) * (1 - 1e-12)) and np.all(coarse.delta(e) <= fine.delta(e) * 1.002)


# --------------------------------------------------------------------------- pointwise mixture
def test_pointwise_mixture_is_the_weighted_sum():
    w = 0.35
    chi = LRMixture([GaussVarFamily(2, 3.0, [0.0], [1.0])])
    pm = PointwiseMixture([(w, chi), (1 - w, "identity")], tol=1e-7)
    a = np.linspace(0, 1, 501)
    ref = w * var2(a, 3.0) + (1 - w) * (1 - a)
    np.testing.assert_allclose(pm(a), ref, atol=2e-7)
    np.testing.assert_allclose(pm.curve()(a), ref, atol=2e-7)
    # its profile (from the sampled curve) matches a direct numerical sup of the closed form
    fine = np.linspace(0, 1, 2_000_001)
    rf = w * var2(fine, 3.0) + (1 - w) * (1 - fine)
    for eps in [0.0, 0.5, 1.0]:
        d_ref = max(np.max(1 - rf - math.exp(eps) * fine), np.max(1 - fine - math.exp(eps) * rf))
        assert float(pm.delta(eps)) == pytest.approx(d_ref, abs=1e-6)
    # a TradeOffCurve part works too
    tc = TradeOffCurve([0.0, 1.0], [1.0, 0.0])
    pm2 = PointwiseMixture([(0.5, tc), (0.5, "identity")])
    np.testing.assert_allclose(pm2(a), 1 - a, atol=1e-15)


def test_lrmixture_rejects_empty_and_bad_eps():
    with pytest.raises(ValueError):
        LRMixture([])
    mix = LRMixture([GaussShiftFamily([1.0], [1.0])])
    with pytest.raises(ValueError, match="eps"):
        mix.delta(-1.0)
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\]"):
        mix([1.5])
    with pytest.raises(ValueError, match=r"delta must be in \(0, 1\)"):
        mix.epsilon(0.0)


@pytest.mark.parametrize(
    "build",
    [
        lambda: easgm_guarantee(3, 0.5, 2.0, 20),
        lambda: asgm_guarantee(10, 0.3, 1.0, 5),
        lambda: easgm_upper_bound(4, None, None, 3),
        lambda: LRMixture([IdentityFamily(0.4), GaussShiftFamily([1.0], [0.6])]),
    ],
)
def test_beta_exact_matches_fine_curve(build):
    """Root-finding per alpha and the adaptively sampled curve are two routes to one function.

    The sampled curve at tol 1e-8 is within 1e-8 (+ its reported max_gap) of the truth, so the
    two must agree to a few 1e-8; the atom's straight segment is hit exactly by both.
    """
    mix = build()
    alpha = np.array([0.0, 1e-6, 0.01, 0.1, 0.3, 0.5, 0.9, 1.0])
    exact = mix.beta_exact(alpha)
    curve = mix.curve(1e-8)
    assert np.max(np.abs(exact - curve(alpha))) <= 1e-8 + 2 * curve.meta["max_gap"] + 1e-9
    # __call__ with few alphas uses the exact route
    fresh = build()
    assert np.allclose(fresh(alpha), exact, atol=1e-12)
