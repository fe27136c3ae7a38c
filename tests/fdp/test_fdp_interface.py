"""Every curve type of paperlib.fdp through the one trade-off interface (paperlib.fdp.tradeoff.TradeOff).

For each type: ``f(alpha)`` is vectorised and agrees with ``f.curve(tol)`` within the
type's tolerance; the sampled curve is a trade-off function; ``delta`` is vectorised,
finite, in [0, 1] and non-increasing, and the sampled curve's profile sits below it by at
most ``e^eps`` times the chord error; ``epsilon`` inverts ``delta``; ``inverse`` of
``inverse`` is the curve again; ``symmetrised`` is symmetric and below both directions;
``to_dict``/``from_dict`` round-trip to 1e-12 through strict JSON.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import norm

from paperlib.fdp import clt
from paperlib.fdp.chisquare import Chi2Pair
from paperlib.fdp.gaussian import GaussShiftFamily, IdentityFamily, SubsampledGaussian
from paperlib.fdp.mixture import LRMixture, PointwiseMixture
from paperlib.fdp.pld import PLDComposition, RoundLaw, ShiftLaw
from paperlib.fdp.tradeoff import (GaussianTradeOff, TradeOff, TradeOffCurve, check_tradeoff, from_dict,
                                   gaussian_delta)
from paperlib.mechanisms import guarantees as G

TOL = 1e-5
GRID = np.unique(np.concatenate([np.linspace(0, 1, 201), [1e-9, 1e-6, 1e-4, 0.999]]))
EPS = np.array([0.0, 0.1, 0.5, 1.0, 2.0, 5.0, 800.0, 1e6])


def _sampled_g(mu=1.0, m=2000):
    """G_mu sampled here (thresholds z, slopes -exp(mu z - mu^2/2)), written out independently."""
    z = np.linspace(-9.0, 9.0 + mu, m)
    a, b = norm.sf(z), norm.cdf(z - mu)
    s = -np.exp(mu * z - mu * mu / 2)
    return TradeOffCurve(np.concatenate([[0.0], a, [1.0]]), np.concatenate([[1.0], b, [0.0]]),
                         np.concatenate([[-np.inf], s, [0.0]]), label="G_1 sampled", meta={"mu": mu})


def _pld(side="guarantee"):
    # a fixed grid: an adaptive one may refine between two queries (then delta(epsilon(d)) moves within the bracket)
    return PLDComposition(RoundLaw([(1.0, (ShiftLaw(0.5),))]), 4, side=side, step=2e-3, label="G_0.5 composed 4 times")


# name -> (builder, agreement tolerance of f(alpha) with f.curve(TOL)(alpha))
CASES = {
    "TradeOffCurve": (_sampled_g, 0.0),
    "GaussianTradeOff": (lambda: GaussianTradeOff(1.0), TOL),
    "LRMixture/SGM claim": (lambda: G.sgm_claim(q=0.5, sigma=1.0), TOL),
    "LRMixture/EASGM": (lambda: G.easgm_guarantee(N=3, q=0.5, sigma=2.0, n=5), TOL),
    "LRMixture/atom": (lambda: LRMixture([IdentityFamily(0.3), GaussShiftFamily([1.5], [0.7])], label="atom"), TOL),
    "PointwiseMixture/ASGM bound": (lambda: G.asgm_upper_bound(N=5, q=0.3, sigma=1.0, n=8), TOL),
    "PointwiseMixture/two parts": (
        lambda: PointwiseMixture([(0.5, G.sgm_claim(q=1.0, sigma=1.0)), (0.5, GaussianTradeOff(2.0))],
                                 label="two parts", tol=TOL), TOL),
    "Chi2Pair": (lambda: Chi2Pair(50, 10.0), TOL),
    "PLDComposition/guarantee": (_pld, 0.0),
    "PLDComposition/bound": (lambda: _pld("bound"), 1e-4),
    "CLTTradeOff": (lambda: clt.clt_bounds(0.5, 0.8, 400).as_tradeoff(), TOL),
    "CLTCurve/EASGM": (lambda: __import__("paperlib.mechanisms.clt").mechanisms.clt.clt_bound("easgm", 4, 0.5, 1.0, 400), TOL),
    "CLTCurve/ASGM": (lambda: __import__("paperlib.mechanisms.clt").mechanisms.clt.clt_bound("asgm", 4, 0.7, 1.0, 400), TOL),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    build, agree = CASES[request.param]
    return request.param, build(), agree


def test_is_a_tradeoff_with_label_and_meta(case):
    name, f, _ = case
    assert isinstance(f, TradeOff), name
    assert isinstance(f.label, str) and isinstance(f.meta, dict)


def test_call_is_vectorised_and_agrees_with_its_curve(case):
    name, f, agree = case
    c = f.curve(tol=TOL)
    assert isinstance(c, TradeOffCurve)
    assert check_tradeoff(c.alpha, c.beta) is None
    v = np.asarray(f(GRID))
    assert v.shape == GRID.shape
    assert np.all(np.isfinite(v)) and np.all(v >= 0) and np.all(v <= 1 - GRID + 1e-9)
    # a chord of a convex curve lies above it, its tangent envelope below: both within agree
    assert np.max(np.abs(v - c(GRID))) <= agree + 1e-12, name
    two_d = GRID[:200].reshape(20, 10)
    assert np.asarray(f(two_d)).shape == (20, 10)
    assert np.ndim(f(0.25)) == 0
    # every type takes tol, also when it ignores it
    assert isinstance(f.curve(1e-3), TradeOffCurve)


def test_delta_is_vectorised_finite_and_non_increasing(case):
    name, f, _ = case
    d = np.asarray(f.delta(EPS))
    assert d.shape == EPS.shape
    assert np.all(np.isfinite(d)) and np.all(d >= 0) and np.all(d <= 1), name
    assert np.all(np.diff(d) <= 1e-12), name
    assert isinstance(f.delta(0.5), float) or np.ndim(f.delta(0.5)) == 0
    # the sampled curve's profile is the chord's: below the exact one by at most e^eps * gap
    c = f.curve(TOL)
    gap = c.max_gap if c.slope is not None else TOL
    gap = max(gap, TOL) if math.isfinite(gap) else TOL
    for e in (0.0, 0.5, 1.0):
        dc, de = float(c.delta(e)), float(f.delta(e))
        if name == "PLDComposition/bound":
            # two separately valid conservative bounds of the exact composition (the curve from
            # the bracket of f_b, the profile from rounding each loss up): both above delta_lo
            lo, _ = f.pld.delta_bounds(e)
            assert dc >= float(lo) - 1e-9 and de >= float(lo) - 1e-9
            continue
        assert dc <= de + 2e-9, (name, e, dc, de)
        assert dc >= de - math.exp(e) * 2 * gap - 1e-9, (name, e, dc, de)


def test_epsilon_inverts_delta(case):
    name, f, _ = case
    for delta in (1e-2, 1e-5):
        eps = f.epsilon(delta)
        assert math.isfinite(eps) and eps >= 0, name
        if eps > 0:
            assert float(f.delta(eps)) == pytest.approx(delta, rel=1e-6), name
            assert float(f.delta(eps * (1 - 1e-4))) > delta
    with pytest.raises(ValueError, match="delta must be"):
        f.epsilon(1e-320)
    with pytest.raises(ValueError, match=r"delta must be in \(0, 1\)"):
        f.epsilon(0.0)


def test_inverse_of_inverse_and_reflection(case):
    name, f, agree = case
    inv = f.inverse()
    assert isinstance(inv, TradeOff)
    back = inv.inverse()
    a = np.linspace(0, 1, 101)
    # inverse() reflects the default sampling (curve(), chord error 1e-6) or is exact
    assert np.max(np.abs(np.asarray(back(a)) - np.asarray(f(a)))) <= 2e-6 + agree, name
    # reflection in beta = alpha: f^{-1}(f(alpha)) = alpha wherever f is strictly decreasing
    c = f.curve()
    inner = (a > 0.05) & (a < 0.95) & (c(a) > 1e-3) & (c(a) < 1 - 1e-3)
    assert np.allclose(np.asarray(inv(c(a[inner]))), a[inner], atol=1e-6), name


def test_symmetrised_is_symmetric_and_below_both(case):
    name, f, _ = case
    s = f.symmetrised()
    assert isinstance(s, TradeOff)
    a = np.linspace(0, 1, 201)
    sv = np.asarray(s(a))
    c, ci = f.curve(), f.inverse()
    assert np.all(sv <= c(a) + 1e-12) and np.all(sv <= np.asarray(ci(a)) + 1e-12), name
    assert np.max(np.abs(np.asarray(s.inverse()(a)) - sv)) <= 1e-9, name
    sc = s.curve(TOL)
    assert check_tradeoff(sc.alpha, sc.beta) is None


def test_to_dict_from_dict_round_trip(case):
    name, f, _ = case
    d = f.to_dict()
    text = json.dumps(d, allow_nan=False)  # strict JSON
    back = from_dict(json.loads(text))
    assert isinstance(back, TradeOff)
    assert isinstance(TradeOff.from_dict(d), TradeOff)
    a = np.linspace(0, 1, 301)
    ref = f.curve()(a) if isinstance(back, TradeOffCurve) else np.asarray(f(a))
    assert np.max(np.abs(np.asarray(back(a)) - ref)) <= 1e-12, name
    again = back.to_dict()
    for key in ("alpha", "beta"):
        if key in d:
            assert np.max(np.abs(np.asarray(again[key]) - np.asarray(d[key]))) <= 1e-12
    assert again.get("type") == d.get("type") and again.get("label") == d.get("label")
    for e in (0.0, 0.7):
        assert float(back.delta(e)) == pytest.approx(float(from_dict(d).delta(e)), abs=1e-12)


# --------------------------------------------------------------------------- around the interface
def test_from_dict_reads_a_cached_curve_dict():
    """The book's result cache stores curves as {"alpha": [...], "beta": [...]}: from_dict reads
    them as a TradeOffCurve (no interpolation by hand in notebooks)."""
    c = from_dict({"alpha": [0.0, 0.5, 1.0], "beta": [1.0, 0.2, 0.0]})
    assert isinstance(c, TradeOffCurve)
    assert float(c(0.25)) == pytest.approx(0.6)
    with pytest.raises(ValueError, match="type"):
        from_dict({"type": "Nonsense"})
    with pytest.raises(ValueError, match="dict"):
        from_dict([1, 2])


def test_gaussian_tradeoff_object_is_exact():
    f = GaussianTradeOff(1.3)
    a = np.array([1e-8, 0.1, 0.5, 0.9])
    assert np.allclose(f(a), norm.cdf(norm.isf(a) - 1.3), rtol=1e-14)
    assert np.allclose(f.delta(np.array([0.0, 1.0, 3.0])), gaussian_delta(np.array([0.0, 1.0, 3.0]), 1.3),
                       rtol=1e-14)
    assert f.inverse() is f and f.symmetrised() is f
    assert f.curve(1e-6).max_gap <= 1e-6


def test_curve_points_accepts_every_type_with_tol():
    """paperlib.artifact.notebook.curve_points calls curve(tol) on every type (no TypeError catch)."""
    from paperlib.artifact.notebook import curve_points

    for name, (build, _) in CASES.items():
        a, b = curve_points(build(), 1e-4)
        assert a[0] == 0.0 and a[-1] == 1.0 and a.shape == b.shape, name


def test_pointwise_asgm_bound_profile_is_exact_dilution():
    """w T(P,Q) + (1 - w) Id is the trade-off of (P, (1 - w) P + w Q): its profile equals that of the
    SGM-style diluted pair (checked for the Gaussian base, whose diluted pair is SubsampledGaussian)."""
    w, mu = 0.3, 1.2
    pm = PointwiseMixture([(w, LRMixture([GaussShiftFamily([mu], [1.0])])), (1 - w, "identity")])
    ref = LRMixture([SubsampledGaussian(w, mu)])
    e = np.array([0.0, 0.2, 1.0, 3.0, 10.0])
    assert np.allclose(pm.delta(e), ref.delta(e), rtol=1e-12, atol=1e-300)
    a = np.linspace(0, 1, 11)
    assert np.allclose(pm(a), ref(a), atol=1e-9)
