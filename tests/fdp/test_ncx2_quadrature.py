"""The large-dimension noncentral chi-square of paperlib.fdp.tails (``ncx2_cdf_sf``, ``ncx2_quad_log``)
against independent computations: mpmath's Poisson mixture of regularised incomplete gammas at 30
digits (exact series), mpmath's own quadrature of the convolution ``E[F_A(x - Y)]`` (a different
integrator, mpmath's densities), Boost's ``ncx2`` (scipy), and the old Boost-based curve of the
EASGM guarantee at the paper's model size (new vs old to 1e-9)."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from paperlib.fdp import gaussian as gaussian_mod
from paperlib.fdp.gaussian import GaussVarFamily
from paperlib.fdp.tails import (QUAD_MIN_DOF, ncx2_cdf_sf, ncx2_quad_applies, ncx2_quad_log, ncx2_logcdf,
                                ncx2_logsf)
from paperlib.mechanisms.guarantees import easgm_guarantee


def mp_ncx2(x, k, lam, upper=False, dps=40):
    """``P[X <= x]`` (or ``> x``) by the Poisson mixture ``sum_j Pois(j; lam/2) P(k/2 + j, x/2)`` in mpmath,
    over ``j`` within 12 standard deviations of the Poisson mean (the rest is below 1e-30)."""
    with mp.workdps(dps):
        h, a, z = mp.mpf(lam) / 2, mp.mpf(k) / 2, mp.mpf(x) / 2
        c = float(lam) / 2
        lo, hi = max(0, int(c - 12 * math.sqrt(c) - 30)), int(c + 12 * math.sqrt(c) + 30)
        tot = mp.mpf(0)
        pois = mp.exp(-h + lo * mp.log(h) - mp.loggamma(lo + 1)) if lo > 0 else mp.exp(-h)
        for j in range(lo, hi + 1):
            if upper:
                try:
                    g = mp.gammainc(a + j, z, mp.inf, regularized=True)
                except mp.libmp.NoConvergence:  # its series at large a: the complement at this precision
                    g = 1 - mp.gammainc(a + j, 0, z, regularized=True)
            else:
                g = mp.gammainc(a + j, 0, z, regularized=True)
            tot += pois * g
            pois = pois * h / (j + 1)
        return tot


def mp_convolution(x, k, lam, upper=False, dps=30):
    """The same probability as ``E[F_A(x - Y)]``, ``A = (Z + sqrt(lam))^2``, ``Y ~ chi^2_{k-1}``, by mpmath.quad."""
    with mp.workdps(dps):
        m = mp.mpf(k) - 1
        rl = mp.sqrt(mp.mpf(lam))
        X = mp.mpf(x)

        def f(y):
            dens = mp.exp((m / 2 - 1) * mp.log(y) - y / 2 - (m / 2) * mp.log(2) - mp.loggamma(m / 2))
            c = X - y
            if c <= 0:
                fa = mp.mpf(0)
            else:
                sc = mp.sqrt(c)
                fa = mp.ncdf(sc - rl) - mp.ncdf(-sc - rl)
            return dens * ((1 - fa) if upper else fa)

        sd = mp.sqrt(2 * m)
        pts = [max(mp.mpf(1), m + t * sd) for t in range(-40, 41, 4)]
        return mp.quad(f, pts)


# --------------------------------------------------------------------------- against mpmath
@pytest.mark.parametrize("k,lam", [(1_485_217, 0.5), (1_485_217, 20.0), (10_000, 400.0), (26_010, 3_000.0)])
@pytest.mark.parametrize("z", [-7.0, 0.0, 5.0])
def test_cdf_sf_against_the_mpmath_poisson_mixture(k, lam, z):
    """Both sides relative 1e-10 (each computed directly, so the smaller one is exact relative to itself)."""
    x = k + lam + z * math.sqrt(2 * k + 4 * lam)
    c, s = ncx2_cdf_sf(np.array([x]), k, lam)
    assert c[0] == pytest.approx(float(mp_ncx2(x, k, lam)), rel=1e-10, abs=1e-300)
    assert s[0] == pytest.approx(float(mp_ncx2(x, k, lam, upper=True)), rel=1e-10, abs=1e-300)


@pytest.mark.parametrize("z", [-30.0, -12.0, 0.0, 12.0, 30.0])
def test_quadrature_log_against_mpmath_deep_in_the_tails(z):
    """The privacy-profile path (``ncx2_logcdf``/``logsf``: the quadrature, or the Poisson series where
    a lower tail comes near ``e^{-lam/2}``) down to ~1e-280: log relative 1e-12 of mpmath's series;
    ``ncx2_quad_log`` itself is that accurate or NaN."""
    k, lam = 10_000, 400.0
    assert ncx2_quad_applies(k, np.array([lam]))[0]
    x = k + lam + z * math.sqrt(2 * k + 4 * lam)
    for upper in (False, True):
        ref = float(mp.log(mp_ncx2(x, k, lam, upper=upper, dps=40)))
        got = float((ncx2_logsf if upper else ncx2_logcdf)(np.array([x]), k, lam)[0])
        assert got == pytest.approx(ref, rel=1e-12, abs=1e-12), (z, upper)
        raw = float(ncx2_quad_log(np.array([x]), k, lam, upper)[0])
        assert math.isnan(raw) or raw == pytest.approx(ref, rel=1e-12, abs=1e-12), (z, upper)


@pytest.mark.parametrize("lam", [9.1e6, 1e10, 4e10])
def test_quadrature_beyond_boost_against_mpmath_quad(lam):
    """Noncentralities of EASGM at N = 2e5 (up to 4e10, where Boost fails): ``ncx2_quad_log`` and
    ``ncx2_cdf_sf`` against mpmath's adaptive quadrature of the convolution, relative 1e-9."""
    k = 1_485_217
    sd = math.sqrt(2 * k + 4 * lam)
    for z in (-8.0, 0.0, 8.0):
        x = k + lam + z * sd
        for upper in (False, True):
            ref = mp_convolution(x, k, lam, upper)
            got = float(ncx2_quad_log(np.array([x]), k, lam, upper)[0])
            assert math.exp(got) == pytest.approx(float(ref), rel=1e-9), (z, upper)
            lin = ncx2_cdf_sf(np.array([x]), k, lam)[1 if upper else 0][0]
            assert lin == pytest.approx(float(ref), rel=1e-9), (z, upper)


# --------------------------------------------------------------------------- against Boost
@pytest.mark.parametrize("lam", [85.0, 470.0, 5e3, 5e4, 9e6])
def test_cdf_sf_against_boost_on_a_grid(lam):
    """200 points across the bulk and the tails (|z| <= 9): absolute 1e-11 of Boost (whose own error at
    k = 1.5e6 is ~3e-12: see the mpmath test), the two sides adding to 1 within 1e-13."""
    k = 1_485_217
    x = k + lam + math.sqrt(2 * k + 4 * lam) * np.linspace(-9, 9, 200)
    c, s = ncx2_cdf_sf(x, k, lam)
    np.testing.assert_allclose(c, stats.ncx2.cdf(x, k, lam), rtol=0, atol=1e-11)
    np.testing.assert_allclose(s, stats.ncx2.sf(x, k, lam), rtol=0, atol=1e-11)
    np.testing.assert_allclose(c + s, 1.0, rtol=0, atol=1e-13)
    assert np.all(np.diff(c) >= -1e-15)


def test_log_functions_use_the_quadrature_consistently():
    """ncx2_logcdf/logsf at large dimension agree with the linear functions (exp) where both apply."""
    k, lam = 1_485_217, 9.1e6
    x = k + lam + math.sqrt(2 * k + 4 * lam) * np.linspace(-6, 6, 25)
    c, s = ncx2_cdf_sf(x, k, lam)
    np.testing.assert_allclose(np.exp(ncx2_logcdf(x, k, lam)), c, rtol=1e-11)
    np.testing.assert_allclose(np.exp(ncx2_logsf(x, k, lam)), s, rtol=1e-11)


def test_refuses_outside_its_domain():
    with pytest.raises(ValueError, match="dof"):
        ncx2_cdf_sf(np.array([1.0]), QUAD_MIN_DOF - 1, 1.0)
    with pytest.raises(ValueError, match="noncentrality"):
        ncx2_quad_log(np.array([1.0]), 1_000_000, 1.0, upper=False)


# --------------------------------------------------------------------------- the curve, new vs old
def test_easgm_curve_at_the_paper_model_size_equals_the_boost_curve(monkeypatch):
    """EASGM guarantee (q = 0.005, sigma = 10, n = 1,485,217, N = 999): the tails at every threshold the
    sampled curve used, and the curve at 200 FPR values, with the new numerics and with Boost's
    (the code before the change) agree to 1e-12 and 1e-9."""
    alpha = np.linspace(0, 1, 200)
    new = easgm_guarantee(999, 0.005, 10.0, 1_485_217)
    beta_new = new(alpha, tol=1e-5)
    curve = new.curve(1e-5)
    monkeypatch.setattr(gaussian_mod, "QUAD_MIN_DOF", 10**12)  # GaussVarFamily.tails back on Boost
    old = easgm_guarantee(999, 0.005, 10.0, 1_485_217)
    beta_old = old(alpha, tol=1e-5)
    np.testing.assert_allclose(beta_new, beta_old, rtol=0, atol=1e-9)
    lt = np.linspace(*new.families[0].logt_bracket(), 60)
    for got, ref in zip(new.tails(lt), old.tails(lt)):
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
    assert curve.meta["max_gap"] <= 1e-5


def test_noncentrality_above_boosts_limit_is_accepted_at_large_dimension():
    """x = 2e5, mu = 1 (noncentrality 1e10): refused at n = 1 (Boost), computed at n = 26,010 (quadrature),
    where the pair is nearly G_1 composed with the scale test, within [0, 1 - alpha]."""
    with pytest.raises(ValueError, match="noncentrality"):
        GaussVarFamily(1, 2e5, [1.0], [1.0])
    fam = GaussVarFamily(26_010, 2e5, [1.0], [1.0])
    lt = np.linspace(*fam.logt_bracket(), 50)
    a, b = fam.tails(lt)
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))
    assert np.all(np.diff(a) <= 1e-15) and np.all(np.diff(b) >= -1e-15)
    assert np.all(b <= 1 - a + 1e-12)
