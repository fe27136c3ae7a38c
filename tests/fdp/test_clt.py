"""Tests of paperlib.fdp.clt (Berry-Esseen CLT bounds; THEORY.md section 8).

Every formula is compared with an independent computation: closed forms for G_mu,
an independently built f̄* = max{f*, f*⁻¹} (analytic branch slopes and, separately,
finite differences of the tabulated curve), a 30-digit mpmath quadrature in the alpha
variable, a Monte Carlo estimate, and the exact chi-square curve of THEORY.md §7.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import integrate, optimize
from scipy.stats import chi2, norm

from paperlib.fdp import clt
from paperlib.mechanisms import clt as mclt

# --------------------------------------------------------------------------------------
# independent constructions used by several tests
# --------------------------------------------------------------------------------------


def fstar(a, s):
    """f*(α) = T(N(0,1), N(0,s²))(α): reject H0 when |x| < t, α = 2Φ(t) − 1."""
    t = norm.isf((1.0 - np.asarray(a, float)) / 2.0)
    return 2.0 * norm.sf(t / s)


def fstar_inv(a, s):
    """f*⁻¹(α) = β with f*(β) = α: t_β/s = Φ⁻¹(1 − α/2), β = 2Φ(t_β) − 1."""
    t_beta = s * norm.isf(np.asarray(a, float) / 2.0)
    return 2.0 * norm.cdf(t_beta) - 1.0


def log_q_over_p(x, s):
    """log of N(0,s²)-density over N(0,1)-density at x (written out, no shared helper)."""
    return norm.logpdf(x, scale=s) - norm.logpdf(x)


def fbar_log_slope_independent(a, s):
    """log|f̄*'(α)|, choosing at each α the branch (f* or f*⁻¹) with the larger value."""
    a = float(a)
    t = norm.isf((1.0 - a) / 2.0)
    slope_f = log_q_over_p(t, s)  # f*'(α) = −q(t)/p(t)
    t_beta = s * norm.isf(a / 2.0)
    slope_finv = -log_q_over_p(t_beta, s)  # (f*⁻¹)'(α) = 1/f*'(β), β = 2Φ(t_β) − 1
    return slope_f if fstar(a, s) >= fstar_inv(a, s) else slope_finv


def alpha_star_independent(s):
    return optimize.brentq(lambda a: fstar(a, s) - fstar_inv(a, s), 1e-9, 1 - 1e-9, xtol=1e-15)


def exact_chi2_curve(a, s, m):
    """T(N(0,I_m), N(0,s² I_m)) (THEORY.md §7): α = F(τ), β = 1 − F(τ/s²)."""
    tau = chi2.ppf(a, m)
    return chi2.sf(tau / s**2, m), tau


# 30-digit reference values, computed in the α variable (not the t variable of the
# module), with f̄* built from its definition and α* found by mpmath root-finding.
def mp_functionals(num, den):
    mp = pytest.importorskip("mpmath")
    with mp.workdps(30):
        s = mp.mpf(num) / den
        sq2 = mp.sqrt(2)

        def L(t):
            return -mp.log(s) - t**2 / (2 * s**2) + t**2 / 2

        def fs(a):
            return mp.erfc(mp.erfinv(a) / s)

        a_star = mp.findroot(lambda a: fs(a) - a, mp.mpf("0.45"))

        def ls(a):
            if a <= a_star:
                return L(sq2 * mp.erfinv(a))
            return -L(s * sq2 * mp.erfinv(1 - a))

        kl = -mp.quad(ls, [0, a_star, 1])
        k2 = mp.quad(lambda a: ls(a) ** 2, [0, a_star, 1])
        k3 = mp.quad(lambda a: abs(ls(a) + kl) ** 3, [0, a_star, 1])
        return {"kl": kl, "k2": k2, "k3": k3, "a_star": a_star}


MP_CASES = [(4, 5), (700, 701), (59999, 60000), (200000, 200001)]


@pytest.fixture(scope="module")
def mp_ref():
    return {case: mp_functionals(*case) for case in MP_CASES}


# --------------------------------------------------------------------------------------
# G_mu: closed forms
# --------------------------------------------------------------------------------------


def g_mu_log_slope(mu0):
    # G_μ'(α) = −φ(Φ⁻¹(1−α) − μ)/φ(Φ⁻¹(1−α))  ⇒  log|G_μ'| = μ z − μ²/2, z = Φ⁻¹(1−α)
    def fn(a):
        z = norm.isf(a)
        return norm.logpdf(z - mu0) - norm.logpdf(z)

    return fn


@pytest.mark.parametrize("mu0", [0.3, 1.0, 2.5])
def test_generic_functionals_of_g_mu_closed_forms(mu0):
    f = clt.functionals_from_log_slope(g_mu_log_slope(mu0))
    assert f.kl == pytest.approx(mu0**2 / 2, rel=1e-9)
    assert f.kappa2 == pytest.approx(mu0**2 + mu0**4 / 4, rel=1e-9)
    # log|G_μ'| + kl = μ z with z ~ N(0,1): E|μ z|³ = 2 sqrt(2/π) μ³
    assert f.kappa3bar == pytest.approx(2 * math.sqrt(2 / math.pi) * mu0**3, rel=1e-9)


@pytest.mark.parametrize("mu0", [0.3, 1.0, 2.5])
def test_composition_of_g_mu_gives_sqrt_m_mu(mu0):
    f = clt.functionals_from_log_slope(g_mu_log_slope(mu0))
    for m in (1, 7, 26009):
        mu, gamma = clt.clt_mu_gamma([f.kl] * m, [f.kappa2] * m, [f.kappa3bar] * m)
        assert mu == pytest.approx(math.sqrt(m) * mu0, rel=1e-8)
        assert gamma == pytest.approx(0.56 * 2 * math.sqrt(2 / math.pi) / math.sqrt(m), rel=1e-8)
    for m in (1, 7, 26009, 300_000_000):
        mu, gamma = clt.clt_mu_gamma_iid(f.kl, f.kappa2, f.kappa3bar, m)
        assert mu == pytest.approx(math.sqrt(m) * mu0, rel=1e-8)
        assert gamma == pytest.approx(0.56 * 2 * math.sqrt(2 / math.pi) / math.sqrt(m), rel=1e-8)


def test_mixed_g_mu_composition():
    # G_μ1 ⊗ … ⊗ G_μk = G_sqrt(Σμi²); the CLT μ reproduces it exactly
    mus = np.array([0.2, 0.5, 1.0, 1.7])
    kl = mus**2 / 2
    k2 = mus**2 + mus**4 / 4
    k3 = 2 * math.sqrt(2 / math.pi) * mus**3
    mu, gamma = clt.clt_mu_gamma(kl, k2, k3)
    assert mu == pytest.approx(math.sqrt(np.sum(mus**2)), rel=1e-12)
    assert gamma == pytest.approx(0.56 * k3.sum() / np.sum(mus**2) ** 1.5, rel=1e-12)


# --------------------------------------------------------------------------------------
# f̄* = max{f*, f*⁻¹}
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("s", [0.05, 0.3, 0.8, 0.99, 0.9999])
def test_crossing_is_single_and_on_diagonal(s):
    t_star, a_star = clt.fbar_star_crossing(s)
    # f* − f*⁻¹ is O(1 − s) near α*, so the independent root has error ~eps/(1 − s)
    assert a_star == pytest.approx(alpha_star_independent(s), abs=1e-10)
    assert 2 * norm.cdf(t_star) - 1 == pytest.approx(a_star, abs=1e-15)
    assert fstar(a_star, s) == pytest.approx(a_star, abs=1e-12)
    grid = np.linspace(1e-6, 1 - 1e-6, 200_001)
    diff = fstar(grid, s) - fstar_inv(grid, s)
    sign = np.sign(diff[np.abs(diff) > 1e-13])
    assert np.count_nonzero(np.diff(sign)) == 1
    assert np.all(diff[grid < a_star - 1e-4] > 0) and np.all(diff[grid > a_star + 1e-4] < 0)


@pytest.mark.parametrize("s", [0.3, 0.8, 0.99])
def test_specialised_matches_generic_on_independent_fbar(s):
    a_star = alpha_star_independent(s)
    g = clt.functionals_from_log_slope(
        lambda a: fbar_log_slope_independent(a, s), breakpoints=[a_star]
    )
    f = clt.fbar_star_functionals(s)
    assert f.kl == pytest.approx(g.kl, rel=1e-8)
    assert f.kappa2 == pytest.approx(g.kappa2, rel=1e-8)
    assert f.kappa3bar == pytest.approx(g.kappa3bar, rel=1e-8)
    # the module's own log-slope function agrees with the independent one
    for a in (1e-6, 0.1, a_star - 1e-6, a_star + 1e-6, 0.9, 1 - 1e-6):
        assert clt.fbar_star_log_slope(a, s) == pytest.approx(
            fbar_log_slope_independent(a, s), rel=1e-9, abs=1e-12
        )


@pytest.mark.parametrize("s", [0.5, 0.8])
def test_functionals_from_tabulated_curve_by_finite_differences(s):
    # no analytic derivative at all: tabulate f̄* = max{f*, f*⁻¹}, differentiate, integrate
    a = np.linspace(0.0, 1.0, 400_001)
    fbar = np.maximum(fstar(a, s), fstar_inv(a, s))
    log_slope = np.log(-np.diff(fbar) / np.diff(a))
    h = a[1] - a[0]
    kl = -np.sum(log_slope) * h
    k2 = np.sum(log_slope**2) * h
    k3 = np.sum(np.abs(log_slope + kl) ** 3) * h
    f = clt.fbar_star_functionals(s)
    assert f.kl == pytest.approx(kl, rel=1e-4)
    assert f.kappa2 == pytest.approx(k2, rel=1e-4)
    assert f.kappa3bar == pytest.approx(k3, rel=1e-4)


def test_specialised_matches_30_digit_reference(mp_ref):
    for (num, den), ref in mp_ref.items():
        exact_d = clt.fbar_star_functionals(num / den, one_minus_s=1 / den)
        rounded = clt.fbar_star_functionals(num / den)  # 1 − s rounded: rel. error ~eps/d
        for f, rel in ((exact_d, 1e-11), (rounded, 1e-9)):
            assert f.kl == pytest.approx(float(ref["kl"]), rel=rel)
            assert f.kappa2 == pytest.approx(float(ref["k2"]), rel=rel)
            assert f.kappa3bar == pytest.approx(float(ref["k3"]), rel=rel)
        assert clt.fbar_star_crossing(num / den)[1] == pytest.approx(float(ref["a_star"]), abs=1e-13)


def test_small_one_minus_s_scaling():
    # leading order: L(t) ≈ d(1 − t²), so kl/d² → A, κ₂/d² → 2A, κ̄₃/d³ → B
    a = norm.isf(0.25)
    A = integrate.quad(lambda x: 2 * norm.pdf(x) * (1 - x * x) ** 2, 0, a, epsabs=0, epsrel=1e-13)[0]
    B = integrate.quad(
        lambda x: 4 * norm.pdf(x) * abs(1 - x * x) ** 3, 0, a, epsabs=0, epsrel=1e-13
    )[0]
    for N in (59_999, 200_000):
        d = 1 / (N + 1)
        f = clt.fbar_star_functionals(N / (N + 1), one_minus_s=d)
        assert f.kl / d**2 == pytest.approx(A, rel=20 * d)
        assert f.kappa2 / d**2 == pytest.approx(2 * A, rel=20 * d)
        assert f.kappa3bar / d**3 == pytest.approx(B, rel=20 * d)


def test_monte_carlo_kl_and_kappa2():
    s = 0.8
    rng = np.random.default_rng(0)
    n = 1_000_000
    x, y = rng.standard_normal(n), s * rng.standard_normal(n)  # X ~ P = N(0,1), Y ~ Q = N(0,s²)
    t_star = norm.isf((1 - alpha_star_independent(s)) / 2)
    lx, ly = log_q_over_p(x, s), log_q_over_p(y, s)
    ix, iy = np.abs(x) < t_star, np.abs(y) < t_star
    f = clt.fbar_star_functionals(s)

    def check(vx, vy, value):
        est = vx.mean() + vy.mean()
        se = math.sqrt(vx.var() / n + vy.var() / n)
        assert abs(est - value) < 4 * se, (est, value, se)
        assert se < 0.02 * value  # the check has teeth

    # kl(f̄*) = E_P[log(p/q); |X|<t*] + E_Q[log(q/p); |Y|<t*]
    check(-lx * ix, ly * iy, f.kl)
    check(lx**2 * ix, ly**2 * iy, f.kappa2)
    check(np.abs(lx + f.kl) ** 3 * ix, np.abs(-ly + f.kl) ** 3 * iy, f.kappa3bar)

    # the f* piece alone: −∫ log|f*'| dα = E_P[log(p/q)] = KL(N(0,1) ‖ N(0,s²))
    kl_closed = math.log(s) + 1 / (2 * s * s) - 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = clt.functionals_from_log_slope(
            lambda a: log_q_over_p(norm.isf((1 - a) / 2), s)
        )
    assert g.kl == pytest.approx(kl_closed, rel=1e-9)
    est, se = (-lx).mean(), (-lx).std() / math.sqrt(n)
    assert abs(est - kl_closed) < 4 * se and se < 0.02 * kl_closed


# --------------------------------------------------------------------------------------
# μ, γ and the bounds
# --------------------------------------------------------------------------------------


def test_iid_closed_form_matches_arrays():
    f = clt.fbar_star_functionals(0.8)
    m = 5000
    a = clt.clt_mu_gamma([f.kl] * m, [f.kappa2] * m, [f.kappa3bar] * m)
    b = clt.clt_mu_gamma_iid(*f, m)
    assert a == pytest.approx(b, rel=1e-12)


# (N or K, n, rounds) -> (mu, gamma) of the paper's cases, from the 30-digit functionals
PAPER_CASES = [((4, 5), 26010, 1), ((59999, 60000), 1485217, 1), ((700, 701), 26010, 200),
               ((700, 701), 1485217, 200)]


def test_mu_gamma_of_paper_cases(mp_ref):
    mp = pytest.importorskip("mpmath")
    for (num, den), n, rounds in PAPER_CASES:
        ref = mp_ref[(num, den)]
        m = rounds * (n - 1)
        with mp.workdps(30):
            var = m * ref["k2"] - m * ref["kl"] ** 2
            mu_ref = float(2 * m * ref["kl"] / mp.sqrt(var))
            gamma_ref = float(mp.mpf("0.56") * m * ref["k3"] / var ** mp.mpf(1.5))
        if den == num + 1 and num != 700:
            r = mclt.clt_upper_bound_easgm(0.5, num, n, rounds=rounds)
        else:  # FEASGM, Figure 7: N = 140,199, q = 0.005, K = 700 vs 701
            r = mclt.clt_upper_bound_feasgm(0.5, 140_199, 0.005, n, rounds=rounds)
        assert r.mu == pytest.approx(mu_ref, rel=1e-10)
        assert r.gamma == pytest.approx(gamma_ref, rel=1e-10)
    # the numbers reported for the paper's settings (regression pins)
    r = mclt.clt_upper_bound_easgm(0.5, 4, 26010)
    assert (r.mu, r.gamma) == pytest.approx((31.26547186, 3.628751099e-3), rel=1e-8)
    r = mclt.clt_upper_bound_easgm(0.5, 59999, 1485217)
    assert (r.mu, r.gamma) == pytest.approx((1.762109999e-2, 4.741030272e-4), rel=1e-8)


def test_bounds_formula_and_nan_outside():
    s, m = 0.9, 400
    f = clt.fbar_star_functionals(s)
    mu, gamma = clt.clt_mu_gamma_iid(*f, m)
    a = np.array([0.0, gamma / 2, gamma, 0.1, 0.5, 0.9, 1 - gamma, 1 - gamma / 2, 1.0])
    r = clt.clt_bounds(a, s, m)
    assert (r.mu, r.gamma) == (mu, gamma)
    inside = (a >= gamma) & (a <= 1 - gamma)
    assert np.all(np.isnan(r.lower[~inside])) and np.all(np.isnan(r.upper[~inside]))
    ai = a[inside]
    # G_μ(α) = Φ(Φ⁻¹(1 − α) − μ), written with ppf/cdf here
    gm = lambda x: norm.cdf(norm.ppf(1 - x) - mu)  # noqa: E731
    np.testing.assert_allclose(r.upper[inside], gm(ai - gamma) + gamma, rtol=1e-12)
    np.testing.assert_allclose(r.lower[inside], gm(np.minimum(ai + gamma, 1)) - gamma, rtol=1e-12)
    assert np.all(r.lower[inside] <= r.upper[inside])
    # scalar in, float out
    r0 = clt.clt_bounds(0.3, s, m)
    assert isinstance(r0.upper, float) and isinstance(r0.lower, float)
    assert r0.upper == pytest.approx(gm(0.3 - gamma) + gamma, rel=1e-12)
    # shape preserved
    assert clt.clt_bounds(np.full((2, 3), 0.4), s, m).upper.shape == (2, 3)


@pytest.mark.parametrize(
    "s, m",
    [(0.8, 50), (4 / 5, 26009), (59999 / 60000, 1_485_216), (700 / 701, 200 * 26009)],
)
def test_upper_bound_lies_above_exact_chi2_curve(s, m):
    gamma = clt.clt_bounds(0.5, s, m).gamma
    a = np.linspace(gamma, 1 - gamma, 401)
    r = clt.clt_bounds(a, s, m)
    exact, tau = exact_chi2_curve(a, s, m)
    np.testing.assert_allclose(chi2.cdf(tau, m), a, rtol=1e-10)  # the reference is sound
    assert np.all(np.isfinite(r.upper))
    assert np.all(r.upper >= exact)
    # and not vacuously: the bound is below the trivial 1 − α + γ somewhere inside
    assert np.any(r.upper < 1 - a)


def test_large_m_upper_bound_vs_exact_gap():
    # N = 59,999, n = 1,485,217 (Figure 5, full MNIST): exact chi-square ≈ G_{sqrt(2m)(1−s)}
    # and the CLT curve of the symmetrised f̄* is weaker (μ ≈ sqrt(2 A m)(1−s), A ≈ 0.376)
    r = mclt.clt_upper_bound_easgm(0.5, 59999, 1485217)
    exact, _ = exact_chi2_curve(0.5, 59999 / 60000, 1485216)
    assert exact == pytest.approx(norm.cdf(norm.ppf(0.5) - math.sqrt(2 * 1485216) / 60000), abs=2e-4)
    assert 0.0 < r.upper - exact < 0.01


# --------------------------------------------------------------------------------------
# mechanism wrappers
# --------------------------------------------------------------------------------------


def test_easgm_wrapper():
    a = np.linspace(0.05, 0.95, 7)
    for N, n, rounds in [(1, 100, 1), (4, 26010, 1), (999, 26010, 3)]:
        r = mclt.clt_upper_bound_easgm(a, N, n, rounds=rounds)
        ref = clt.clt_bounds(a, N / (N + 1), rounds * (n - 1))
        np.testing.assert_allclose(r.upper, ref.upper, rtol=1e-12, equal_nan=True)
        assert r.mu == pytest.approx(ref.mu, rel=1e-12)


def test_feasgm_wrapper_and_refusals():
    a = np.linspace(0.05, 0.95, 7)
    r = mclt.clt_upper_bound_feasgm(a, 140_199, 0.005, 26010, rounds=200)  # K = 700 vs 701
    ref = clt.clt_bounds(a, 700 / 701, 200 * 26009)
    np.testing.assert_allclose(r.upper, ref.upper, rtol=1e-12, equal_nan=True)
    assert r.mu == pytest.approx(ref.mu, rel=1e-12)
    # Figure 6: N = 3, q = 0.5 -> K = 1 vs floor(2) = 2
    r = mclt.clt_upper_bound_feasgm(0.5, 3, 0.5, 100)
    assert r.mu == pytest.approx(clt.clt_bounds(0.5, 0.5, 99).mu, rel=1e-12)
    with pytest.raises(ValueError, match="K = floor"):
        mclt.clt_upper_bound_feasgm(0.5, 10, 0.05, 100)  # K = 0
    with pytest.raises(ValueError, match="SGM guarantee"):
        mclt.clt_upper_bound_feasgm(0.5, 1000, 0.005, 100)  # floor(5) = floor(5.005)


# --------------------------------------------------------------------------------------
# input validation
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: clt.clt_bounds(0.5, 0.0, 10), "`s`"),
        (lambda: clt.clt_bounds(0.5, 1.0, 10), "`s`"),
        (lambda: clt.clt_bounds(0.5, float("nan"), 10), "`s`"),
        (lambda: clt.clt_bounds(0.5, "0.5", 10), "`s`"),
        (lambda: clt.clt_bounds(0.5, 0.8, 0), "`m`"),
        (lambda: clt.clt_bounds(0.5, 0.8, 2.0), "`m`"),
        (lambda: clt.clt_bounds(0.5, 0.8, True), "`m`"),
        (lambda: clt.clt_bounds(1.5, 0.8, 10), "`alpha`"),
        (lambda: clt.clt_bounds([0.1, float("nan")], 0.8, 10), "`alpha`"),
        (lambda: clt.clt_bounds(-0.1, 0.8, 10), "`alpha`"),
        (lambda: mclt.clt_upper_bound_easgm(0.5, 0, 100), "^N must"),
        (lambda: mclt.clt_upper_bound_easgm(0.5, 4, 1), "^n must"),
        (lambda: mclt.clt_upper_bound_easgm(0.5, 4, 100, rounds=0), "^rounds must"),
        (lambda: mclt.clt_upper_bound_easgm(2.0, 4, 100), "^alpha must"),
        (lambda: mclt.clt_upper_bound_feasgm(0.5, 100, 0.0, 100), "^q must"),
        (lambda: mclt.clt_upper_bound_feasgm(0.5, 100, 1.5, 100), "^q must"),
        (lambda: mclt.clt_upper_bound_feasgm(0.5, 100, float("nan"), 100), "^q must"),
        (lambda: mclt.clt_upper_bound_feasgm(0.5, 0, 0.5, 100), "^N must"),
        (lambda: mclt.clt_upper_bound_feasgm(0.5, 100, 0.5, 1), "^n must"),
        (lambda: mclt.clt_upper_bound_feasgm(0.5, 101, 0.5, 100, rounds=-1), "^rounds must"),
        (lambda: clt.clt_mu_gamma_iid(0.1, 0.5, 0.1, 0), "`m`"),
        (lambda: clt.clt_mu_gamma_iid(-0.1, 0.5, 0.1, 5), "`kl`"),
        (lambda: clt.clt_mu_gamma_iid(0.5, 0.25, 0.1, 5), "`kappa2`"),
        (lambda: clt.clt_mu_gamma_iid(0.1, 0.5, float("inf"), 5), "`kappa3bar`"),
        (lambda: clt.clt_mu_gamma([0.1, 0.2], [0.5], [0.1]), "same length"),
        (lambda: clt.clt_mu_gamma([], [], []), "`kls`"),
        (lambda: clt.clt_mu_gamma([0.0], [0.0], [0.0]), "positive"),
        (lambda: clt.fbar_star_functionals(1.2), "`s`"),
        (lambda: clt.fbar_star_functionals(0.8, one_minus_s=0.3), "`one_minus_s`"),
        (lambda: clt.fbar_star_crossing(-1), "`s`"),
        (lambda: clt.functionals_from_log_slope(lambda a: float("nan")), "log_abs_slope_fn"),
    ],
)
def test_invalid_input_raises_value_error(call, name):
    with pytest.raises(ValueError, match=name):
        call()
