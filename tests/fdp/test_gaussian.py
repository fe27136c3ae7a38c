"""Tests of paperlib.fdp.gaussian: the likelihood-ratio tail families (THEORY.md sections 3, 4, 7).

Independent references:
* Monte Carlo of the actual test: draw X ~ N(0, I_n) and X ~ N(mu e_1, s^2 I_n), compute
  log dQ/dP from the two Gaussian densities coordinate by coordinate, threshold it;
* closed forms in one and two dimensions derived here (interval test, exponential law);
* a total-variation bound for the s -> 1 limit;
* at the paper's sizes (n up to 1,485,217, noncentrality ~1e7) a quadrature of the
  definition (Z - c)^2 + chi2_{n-1}, with the chi-square density written out in a
  cancellation-free form, and mpmath's incomplete gamma function for the central case.
"""

from __future__ import annotations

import math
import warnings

import mpmath
import numpy as np
import pytest
from scipy import integrate, special, stats
from scipy.stats import norm

from paperlib.fdp.gaussian import (
    GaussShiftFamily,
    GaussVarFamily,
    IdentityFamily,
    SubsampledGaussian,
)
from paperlib.fdp.mixture import LRMixture


# --------------------------------------------------------------------------- Monte Carlo
def mc_llr(n, mu, s, M, rng):
    """log dQ/dP of M draws under P = N(0, I_n) and M under Q = N(mu e_1, s^2 I_n)."""
    xp = rng.standard_normal((M, n))
    xq = s * rng.standard_normal((M, n))
    xq[:, 0] += mu
    loc = np.zeros(n)
    loc[0] = mu

    def llr(x):
        return np.sum(norm.logpdf(x, loc=loc, scale=s) - norm.logpdf(x), axis=1)

    return llr(xp), llr(xq)


CASES = [(0.5, 2.0), (1.5, 5.0), (0.0, 3.0), (2.0, 1.0)]


@pytest.mark.parametrize("n", [1, 3, 20])
@pytest.mark.parametrize("mu,x", CASES)
def test_gauss_var_tails_match_monte_carlo(n, mu, x):
    """alpha(t) = P[L > log t], beta(t) = Q[L <= log t] vs 100k draws a side.

    Thresholds are quantiles of a separate pilot sample (another seed), so they do not
    depend on the sample they are tested on. Each frequency is binomial: tolerance is
    5 standard errors sqrt(p(1-p)/M) (plus 1/M so that p near 0 is not demanded exactly).
    """
    s = x / (x + 1)
    M = 100_000
    pilot_p, pilot_q = mc_llr(n, mu, s, 20_000, np.random.default_rng(7))
    logt = np.unique(np.concatenate([np.quantile(pilot_p, [0.05, 0.3, 0.7, 0.99]),
                                     np.quantile(pilot_q, [0.01, 0.5, 0.95])]))
    lp, lq = mc_llr(n, mu, s, M, np.random.default_rng(1000 + n))
    fam = GaussVarFamily(n, x, [mu], [1.0])
    a, b = fam.tails(logt)
    for lt, ai, bi in zip(logt, a, b):
        a_hat = np.mean(lp > lt)
        b_hat = np.mean(lq <= lt)
        assert abs(a_hat - ai) <= 5 * math.sqrt(ai * (1 - ai) / M) + 1 / M, (lt, a_hat, ai)
        assert abs(b_hat - bi) <= 5 * math.sqrt(bi * (1 - bi) / M) + 1 / M, (lt, b_hat, bi)


def test_weights_and_components_add():
    """A family of two components is the weighted sum of the two one-component families."""
    logt = np.linspace(-5, 5, 11)
    f2 = GaussVarFamily(4, 3.0, [0.2, 1.1], [0.25, 0.75])
    a1, b1 = GaussVarFamily(4, 3.0, [0.2], [1.0]).tails(logt)
    a2, b2 = GaussVarFamily(4, 3.0, [1.1], [1.0]).tails(logt)
    a, b = f2.tails(logt)
    np.testing.assert_allclose(a, 0.25 * a1 + 0.75 * a2, rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(b, 0.25 * b1 + 0.75 * b2, rtol=1e-14, atol=1e-300)


# --------------------------------------------------------------------------- closed forms
def one_dim_pair(mu, x, r):
    """T(N(0,1), N(mu, s^2)) in 1-D: reject H0 when |X - c| < r, c = mu/(1 - s^2).

    Returns (alpha, beta, log t) with log t the log-likelihood ratio at the boundary
    X = c + r, computed from the two densities.
    """
    s = x / (x + 1)
    c = mu / (1 - s * s)
    alpha = norm.sf(c - r) - norm.sf(c + r)
    beta = 1 - (norm.cdf((c + r - mu) / s) - norm.cdf((c - r - mu) / s))
    logt = norm.logpdf(c + r, loc=mu, scale=s) - norm.logpdf(c + r)
    return alpha, beta, logt


@pytest.mark.parametrize("mu,x", [(0.3, 1.0), (1.0, 4.0), (2.0, 9.0), (0.0, 2.0)])
def test_one_dimension_closed_form(mu, x):
    """n = 1: the rejection region is an interval around c; agreement to 1e-12."""
    r = np.linspace(0.01, 8.0, 60)
    alpha, beta, logt = one_dim_pair(mu, x, r)
    a, b = GaussVarFamily(1, x, [mu], [1.0]).tails(logt)
    np.testing.assert_allclose(a, alpha, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(b, beta, rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("x", [0.5, 2.0, 10.0])
def test_two_dimension_variance_test_closed_form(x):
    """mu = 0, n = 2: ||X||^2 ~ Exp(1/2), so T(a) = (1 - a)^(1/s^2) exactly."""
    s2 = (x / (x + 1)) ** 2
    mix = LRMixture([GaussVarFamily(2, x, [0.0], [1.0])])
    a = np.linspace(0, 1, 1001)
    ref = (1 - a) ** (1 / s2)
    c = mix.curve(1e-6)
    lo, hi = mix(a, tol=1e-6), c(a)
    # the exact curve lies between the tangent envelope and the chord, which are
    # within the requested tolerance of each other
    assert np.all(lo <= ref + 1e-12)
    assert np.all(hi >= ref - 1e-12)
    assert c.max_gap <= 1e-6
    assert np.max(hi - lo) <= c.max_gap * (1 + 1e-9)


def tv_same_mean(s):
    """Total variation between N(0, s^2) and N(0, 1), s < 1, in closed form.

    The densities cross at +-x0 with x0^2 = 2 s^2 log(1/s) / (1 - s^2); TV is the
    difference of the two masses of [-x0, x0].
    """
    x0 = math.sqrt(2 * s * s * math.log(1 / s) / (1 - s * s))
    return (2 * norm.cdf(x0 / s) - 1) - (2 * norm.cdf(x0) - 1)


@pytest.mark.parametrize("mu", [0.5, 1.5])
def test_s_to_one_approaches_gaussian_shift(mu):
    """As x -> inf (s -> 1) T(N(0,1), N(mu, s^2)) -> G_mu.

    Rigorous yardstick: for any test, the FNRs under Q_s and Q_1 differ by at most
    TV(Q_s, Q_1) = TV(N(0,s^2), N(0,1)), so sup_a |T_s(a) - G_mu(a)| <= that TV. The TV is
    ~ (1-s) sqrt(2/(pi e)) ~ 0.48/x, so the check at x = 1e4 demands ~5e-5.
    """
    errs = []
    for x in [10.0, 100.0, 1e3, 1e4]:
        s = x / (x + 1)
        c = mu / (1 - s * s)
        # thresholds spanning the whole curve: boundary of the interval test at radius r
        r = c - mu - np.linspace(-8, 8, 161)
        logt = norm.logpdf(c + r, loc=mu, scale=s) - norm.logpdf(c + r)
        a, b = GaussVarFamily(1, x, [mu], [1.0]).tails(logt)
        err = np.max(np.abs(b - norm.cdf(norm.isf(a) - mu)))
        assert err <= tv_same_mean(s) + 1e-12, (x, err)
        errs.append(err)
    assert errs == sorted(errs, reverse=True)
    assert errs[-1] < 1e-4


def test_gauss_shift_and_identity_and_subsampled_closed_forms():
    logt = np.linspace(-4, 4, 17)
    mu = 1.3
    a, b = GaussShiftFamily([mu], [1.0]).tails(logt)
    z = (logt + mu * mu / 2) / mu  # reject when X > z
    np.testing.assert_allclose(a, norm.sf(z), rtol=1e-12)
    np.testing.assert_allclose(b, norm.cdf(z - mu), rtol=1e-12)
    # identity: L = 0, atom at log t = 0 (not rejected at t = 1: alpha 0, beta w)
    a, b = IdentityFamily(0.3).tails(np.array([-1.0, 0.0, 1.0]))
    np.testing.assert_array_equal(a, [0.3, 0.0, 0.0])
    np.testing.assert_array_equal(b, [0.0, 0.3, 0.3])
    # subsampled Gaussian: the curve is q G_mu + (1 - q) Id pointwise (same P in both parts)
    q = 0.3
    mix = LRMixture([SubsampledGaussian(q, mu)])
    al = np.linspace(0, 1, 501)
    ref = q * norm.cdf(norm.isf(al) - mu) + (1 - q) * (1 - al)
    assert np.all(mix(al, tol=1e-8) <= ref + 1e-12)
    assert np.all(mix.curve(1e-8)(al) >= ref - 1e-12)
    # its tails at a threshold X > x0: alpha = Phi(-x0), beta = (1-q)Phi(x0) + q Phi(x0 - mu)
    x0 = 0.4
    lt = math.log((1 - q) + q * math.exp(mu * x0 - mu * mu / 2))
    a, b = SubsampledGaussian(q, mu).tails(np.array([lt]))
    assert a[0] == pytest.approx(norm.sf(x0), rel=1e-12)
    assert b[0] == pytest.approx((1 - q) * norm.cdf(x0) + q * norm.cdf(x0 - mu), rel=1e-12)


def test_family_input_checks():
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        GaussVarFamily(0, 1.0, [1.0], [1.0])
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        GaussVarFamily(2.5, 1.0, [1.0], [1.0])
    with pytest.raises(ValueError, match="x must be a finite number > 0"):
        GaussVarFamily(2, 0.0, [1.0], [1.0])
    with pytest.raises(ValueError, match="mus"):
        GaussVarFamily(2, 1.0, [-1.0], [1.0])
    with pytest.raises(ValueError, match="weights"):
        GaussVarFamily(2, 1.0, [1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="mus"):
        GaussShiftFamily([0.0], [1.0])
    with pytest.raises(ValueError, match=r"q must be a sampling rate in \(0, 1\]"):
        SubsampledGaussian(0.0, 1.0)
    with pytest.raises(ValueError, match="mu must be a finite number > 0"):
        SubsampledGaussian(0.5, -1.0)


# --------------------------------------------------------------------------- large n
def log_chi2_pdf(y, k):
    """log density of chi2_k at y, free of O(k) cancellations (k up to 1.5e6).

    With u = (y - k)/k and a = k/2: log f = a (log1p(u) - u) - log1p(u) - log(4 pi k)/2 - r(a),
    where r(a) = 1/(12a) - 1/(360a^3) + 1/(1260a^5) is Stirling's remainder of lgamma(a)
    (error < 1/(1680 a^7)). The naive form subtracts numbers of size ~1e7 and loses 1e-9.
    """
    if y <= 0:
        return -math.inf
    a = k / 2.0
    if k < 1000:  # small k: no cancellation to fear, and Stirling's series is not yet accurate
        return (a - 1) * math.log(y) - y / 2 - a * math.log(2) - math.lgamma(a)
    u = (y - k) / k
    l1 = math.log1p(u)
    return a * (l1 - u) - l1 - 0.5 * math.log(4 * math.pi * k) - (1 / (12 * a) - 1 / (360 * a**3) + 1 / (1260 * a**5))


def ncx2_by_quadrature(R, n, c, upper=False):
    """P[(Z + c)^2 + Y <= R] (or > R), Z ~ N(0,1), Y ~ chi2_{n-1}: the definition of chi'^2_n(c^2).

    Integrated over y (the narrower variable at these sizes) with the Z-probability in
    closed form: P[(Z + c)^2 <= r] = Phi(sqrt r - c) - Phi(-sqrt r - c). The integrand is
    located on a grid, then integrated by adaptive quadrature (epsrel 1e-13) over the
    region within e^-50 of its maximum.
    """
    k = n - 1

    def g(r):
        if upper:
            return 1.0 if r <= 0 else special.ndtr(-c - math.sqrt(r)) + special.ndtr(c - math.sqrt(r))
        return 0.0 if r <= 0 else special.ndtr(math.sqrt(r) - c) - special.ndtr(-math.sqrt(r) - c)

    sd = math.sqrt(2 * k)
    ys = np.linspace(max(0.0, k - 40 * sd), k + 40 * sd, 4001)
    li = np.array([log_chi2_pdf(y, k) + (math.log(v) if (v := g(R - y)) > 0 else -math.inf) for y in ys])
    j = int(np.argmax(li))
    peak = li[j]
    ok = np.flatnonzero(li > peak - 50)
    lo, hi = ys[max(ok[0] - 1, 0)], ys[min(ok[-1] + 1, ys.size - 1)]
    pts = [ys[j]] + ([R] if lo < R < hi else [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        val, _ = integrate.quad(lambda y: math.exp(log_chi2_pdf(y, k) - peak) * g(R - y), lo, hi,
                                points=pts, limit=1000, epsabs=0, epsrel=1e-13)
    return val * math.exp(peak)


@pytest.mark.parametrize("k", [26_009, 1_485_216])
def test_log_chi2_pdf_reference(k):
    """The cancellation-free chi-square log density vs mpmath at 30 digits (abs 1e-11 in log)."""
    for z in [-40.0, -6.0, 0.0, 6.0, 40.0]:
        y = k + z * math.sqrt(2 * k)
        with mpmath.workdps(30):
            ref = float((mpmath.mpf(k) / 2 - 1) * mpmath.log(y) - mpmath.mpf(y) / 2
                        - mpmath.mpf(k) / 2 * mpmath.log(2) - mpmath.loggamma(mpmath.mpf(k) / 2))
        assert log_chi2_pdf(y, k) == pytest.approx(ref, abs=1e-11)


def test_quadrature_reference_is_itself_right():
    """The reference agrees with mpmath at 30 digits in a small case (n = 5, c = 2)."""
    n, c, R = 5, 2.0, 6.0
    k = n - 1
    # P[(Z+c)^2 + Y <= R] = int_0^R f_Y(y) P[(Z+c)^2 <= R - y] dy, exactly in mpmath
    f = lambda y: (y ** (mpmath.mpf(k) / 2 - 1) * mpmath.exp(-y / 2) / (2 ** (mpmath.mpf(k) / 2) * mpmath.gamma(mpmath.mpf(k) / 2))  # noqa: E731
                   * (mpmath.ncdf(mpmath.sqrt(R - y) - c) - mpmath.ncdf(-mpmath.sqrt(R - y) - c)))
    with mpmath.workdps(30):
        ref = mpmath.quad(f, mpmath.linspace(0, R, 20))
    assert ncx2_by_quadrature(R, n, c) == pytest.approx(float(ref), rel=1e-10)
    assert ncx2_by_quadrature(R, n, c, upper=True) == pytest.approx(float(1 - ref), rel=1e-10)


# EASGM at full MNIST (Fig. 5 sizes): N = 59,999, sigma = 10, batch k = 300 (q = 0.005)
N_BIG, SIGMA_BIG, K_BIG = 59_999, 10.0, 300


def _big_params(shift):
    x = float(N_BIG)
    one_m_s2 = (2 * x + 1) / (x + 1) ** 2
    s2 = (x / (x + 1)) ** 2
    mu = ((N_BIG + K_BIG) if shift == "mu2" else K_BIG) / ((N_BIG + 1) * SIGMA_BIG)
    return x, s2, one_m_s2, mu


@pytest.mark.parametrize("n", [26_010, 1_485_217])
@pytest.mark.parametrize("shift", ["mu2", "mu1"])
@pytest.mark.parametrize("side", ["P", "Q"])
def test_scipy_ncx2_at_paper_sizes_against_quadrature(n, shift, side):
    """scipy's noncentral chi-square (what GaussVarFamily calls) vs the quadrature.

    mu2 gives lambda ~ 9.1e6 (c ~ 3015), mu1 lambda ~ 225. Points from the bulk to
    tails of ~4e-11 on both sides (mean + z sd, |z| <= 6.5). Tolerance: relative 1e-9.
    The quadrature's own error is ~1e-12 (epsrel 1e-13, log-density rounding ~1e-12,
    confirmed by the small mpmath case above); a normal or Wilson-Hilferty approximation
    would be off by more than 1e-3 relative in these tails and would fail.
    """
    _, s2, one_m_s2, mu = _big_params(shift)
    lam = mu * mu / one_m_s2**2 * (1.0 if side == "P" else s2)
    c = math.sqrt(lam)
    mean, sd = n + lam, math.sqrt(2 * n + 4 * lam)
    for z in [-6.5, -5.0, -2.0, 0.0, 2.0, 5.0, 6.5]:
        R = mean + z * sd
        cdf_ref = ncx2_by_quadrature(R, n, c)
        sf_ref = ncx2_by_quadrature(R, n, c, upper=True)
        assert stats.ncx2.cdf(R, n, lam) == pytest.approx(cdf_ref, rel=1e-9), (z, "cdf")
        assert stats.ncx2.sf(R, n, lam) == pytest.approx(sf_ref, rel=1e-9), (z, "sf")
        assert min(cdf_ref, sf_ref) > 0


@pytest.mark.parametrize("n", [26_010, 1_485_217])
def test_gauss_var_family_tails_at_paper_sizes(n):
    """GaussVarFamily.tails at EASGM/full-MNIST parameters vs the quadrature.

    For each target radius R (bulk and tails of the P and Q laws) the threshold is
    log t = -n log s + mu^2/(2(1-s^2)) - a R/2 (THEORY.md section 4, written out here).
    alpha = P[||X - c||^2 < R] and beta = 1 - P_Q[...] are computed by quadrature.
    Tolerance relative 1e-9 as above (plus the ~1e-13 relative error of the threshold).
    """
    x, s2, one_m_s2, mu = _big_params("mu2")
    a_coef = (2 * x + 1) / (x * x)
    lam_p = mu * mu / one_m_s2**2
    lam_q = lam_p * s2
    fam = GaussVarFamily(n, x, [mu], [1.0])
    radii = []
    for lam, scale in ((lam_p, 1.0), (lam_q, s2)):
        mean, sd = scale * (n + lam), scale * math.sqrt(2 * n + 4 * lam)
        radii += [mean + z * sd for z in (-6.0, 0.0, 6.0)]
    for R in radii:
        logt = n * math.log1p(1 / x) + mu * mu / (2 * one_m_s2) - a_coef * R / 2
        a, b = fam.tails(np.array([logt]))
        a_ref = ncx2_by_quadrature(R, n, math.sqrt(lam_p))
        b_ref = ncx2_by_quadrature(R / s2, n, math.sqrt(lam_q), upper=True)
        assert a[0] == pytest.approx(a_ref, rel=1e-9, abs=1e-300)
        assert b[0] == pytest.approx(b_ref, rel=1e-9, abs=1e-300)


def chi2_mp(x, k):
    """(cdf, sf) of chi2_k at x from mpmath's regularised incomplete gamma at 40 digits.

    The series of the side away from the mode is used (mpmath's lower series does not
    converge above the mode at k ~ 1.5e6); the other side is 1 minus it, which keeps
    more than 25 digits at probabilities ~1e-10.
    """
    with mpmath.workdps(40):
        a, h = mpmath.mpf(k) / 2, mpmath.mpf(x) / 2
        if h < a:
            cdf = mpmath.gammainc(a, 0, h, regularized=True)
            return float(cdf), float(1 - cdf)
        sf = mpmath.gammainc(a, h, mpmath.inf, regularized=True)
        return float(1 - sf), float(sf)


@pytest.mark.parametrize("n", [26_009, 1_485_216])
def test_central_chi2_at_paper_sizes_against_mpmath(n):
    """mu = 0 (the upper bounds of section 7) uses scipy's central chi-square: vs mpmath's
    regularised incomplete gamma at 40 digits (sf = 1 - cdf keeps > 25 digits at 1e-10),
    bulk and tails ~1e-10, relative 1e-10."""
    for z in [-6.3, -3.0, 0.0, 3.0, 6.3]:
        x = n + z * math.sqrt(2 * n)
        cdf, sf = chi2_mp(x, n)
        assert stats.chi2.cdf(x, n) == pytest.approx(cdf, rel=1e-10)
        assert stats.chi2.sf(x, n) == pytest.approx(sf, rel=1e-10)


def test_upper_bound_family_at_paper_size_uses_exact_chi2():
    """GaussVarFamily(mu = 0) at n - 1 = 1,485,216, s = 700/701 (FEASGM, Fig. 7): the tails
    are F_{chi2}(R) and 1 - F_{chi2}(R/s^2) with R = -(2/a)(log t + n log s) (section 7)."""
    m, x = 1_485_216, 700.0
    s2 = (x / (x + 1)) ** 2
    a_coef = (2 * x + 1) / (x * x)
    fam = GaussVarFamily(m, x, [0.0], [1.0])
    for R in [m - 6 * math.sqrt(2 * m), m * s2, m * s2 + 6 * math.sqrt(2 * m) * s2]:
        logt = m * math.log1p(1 / x) - a_coef * R / 2
        a, b = fam.tails(np.array([logt]))
        assert a[0] == pytest.approx(chi2_mp(R, m)[0], rel=1e-9)
        assert b[0] == pytest.approx(chi2_mp(R / s2, m)[1], rel=1e-9)
