"""Tests of paperlib.fdp.chisquare (multi-round bounds, PLD composition, accountants, Opacus facts).

Independent references: 30-digit mpmath quadrature of the chi-square density, the
closed form G_{sqrt(T) mu} of composed Gaussian trade-offs (and its Balle-Wang profile),
the exact pointwise form of Eq. 14, the RDP of the subsampled Gaussian at integer orders
written out from Mironov, Talwar, Zhang (2019), Opacus's PRV accountant, and a real
``PrivacyEngine.make_private`` call for the sampling arithmetic of Opacus 1.6.0.
"""

from __future__ import annotations

import json
import math
import warnings

import mpmath as mp
import numpy as np
import pytest
from scipy import special, stats

from conftest import run_cli
from paperlib.fdp import chisquare as C
from paperlib.mechanisms import multiround as MR
from paperlib.mechanisms.core import feasgm_floors
from paperlib.mechanisms import claimed as A
from paperlib.mechanisms import curves
from paperlib.fdp.gaussian import GaussShiftFamily, GaussVarFamily, SubsampledGaussian
from paperlib.mechanisms.guarantees import asgm_upper_bound
from paperlib.fdp.mixture import LRMixture

FIG7 = dict(N=140_199, q=0.005, sigma=10.0, rounds=200)
FIG7_N_PARAMS = (26_010, 1_485_217)
DELTA = 1e-5


# --------------------------------------------------------------------------------------
# chi-square numerics
# --------------------------------------------------------------------------------------


def _mp_chi2_cdf(x: float, m: float) -> mp.mpf:
    """P[chi2_m <= x] by mpmath quadrature of the density (x below the mean), 30 digits."""
    mp.mp.dps = 30
    m_, x_ = mp.mpf(m), mp.mpf(x)
    k = m_ / 2

    def logpdf(t):
        return (k - 1) * mp.log(t) - t / 2 - k * mp.log(2) - mp.loggamma(k)

    l0 = logpdf(x_)
    # the density decays like exp(-rate (x - t)) to the left of x: integrate 400/rate, finely split
    rate = (m_ - 2) / (2 * x_) - mp.mpf(1) / 2
    pts = [x_ - j / rate for j in [400] + list(range(300, -1, -5))]
    pts = [p for p in pts if p > 0]
    return mp.quad(lambda t: mp.exp(logpdf(t) - l0), pts) * mp.exp(l0)


@pytest.mark.parametrize("m,z", [(5_201_800, -8.0), (297_043_200, -5.0), (297_043_200, -12.0), (297_043_200, -30.0), (400_000, -3.0)])
def test_chi2_logcdf_lower_tail_matches_quadrature(m, z):
    x = m + z * math.sqrt(2 * m)
    ref = float(mp.log(_mp_chi2_cdf(x, m)))
    got = float(C.chi2_logcdf(np.array([x]), m)[0])
    assert abs(got - ref) < 1e-10 * max(1.0, abs(ref)), (got, ref)


def test_scipy_lower_tail_is_what_we_avoid():
    # documents why chi2_logcdf exists: scipy is off by > 10 % at m = 3e8, z = -5
    m = 297_043_200
    x = m - 5.0 * math.sqrt(2 * m)
    ref = float(_mp_chi2_cdf(x, m))
    assert abs(stats.chi2.cdf(x, m) / ref - 1) > 0.1
    assert abs(math.exp(C.chi2_logcdf(np.array([x]), m)[0]) / ref - 1) < 1e-9


@pytest.mark.parametrize("m", [26_009, 5_201_800, 297_043_200])
def test_chi2_ppf_round_trip_and_sf(m):
    p = np.array([1e-200, 1e-30, 1e-8, 1e-3, 0.3, 0.5, 0.9, 1 - 1e-9])
    x = C.chi2_ppf(p, m)
    lc = C.chi2_logcdf(x, m)
    assert np.allclose(lc, np.log(p), rtol=0, atol=1e-9)
    # logsf consistent with logcdf
    ls = C.chi2_logsf(x, m)
    assert np.allclose(np.exp(lc) + np.exp(ls), 1.0, atol=1e-13)


def test_chi2_pair_agrees_with_gaussian_family_at_moderate_m():
    m, x = 5000, 40.0
    pair = C.Chi2Pair(m, x)
    ref = LRMixture([GaussVarFamily(m, x, [0.0], [1.0])])
    a = np.linspace(0, 1, 201)
    assert np.max(np.abs(pair(a) - ref(a, tol=1e-8))) < 1e-7
    e = np.array([0.0, 0.5, 1.0, 3.0])
    assert np.allclose(pair.delta(e), ref.delta(e), atol=1e-12)
    assert abs(pair.epsilon(DELTA) - ref.epsilon(DELTA)) < 1e-7


def test_chi2_pair_large_epsilon_no_overflow():
    # Figure 7, n = 1,485,217: epsilon in the hundreds (beyond the 500 cap of epsilon_from_delta)
    pair = MR.feasgm_rounds_upper_bound(FIG7["N"], FIG7["q"], None, 1_485_217, rounds=FIG7["rounds"])
    e = pair.epsilon(DELTA)
    assert 100 < e < 1e5 and math.isfinite(e)
    assert abs(pair.delta(e) - DELTA) < 1e-9
    assert pair.delta(e * 0.99) > DELTA


# --------------------------------------------------------------------------------------
# exact T-round bound vs the CLT bound (Figure 7 settings)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["feasgm", "easgm"])
@pytest.mark.parametrize("n", FIG7_N_PARAMS)
def test_exact_never_above_clt_upper_bound(mechanism, n):
    alpha = np.linspace(0, 1, 4001)
    res = MR.exact_vs_clt(mechanism, FIG7["N"], FIG7["q"], None, n, rounds=FIG7["rounds"], alpha=alpha)
    inside = (alpha >= res["gamma"]) & (alpha <= 1 - res["gamma"])
    assert inside.sum() > 3000
    assert np.all(np.isfinite(res["clt"][inside]))
    assert np.all(res["exact"][inside] <= res["clt"][inside] + 1e-12), np.min(res["gap"][inside])
    assert res["m"] == FIG7["rounds"] * (n - 1)


def test_rounds_equal_more_coordinates():
    # f̄^{⊗T} of T(P^{n-1}, Q^{n-1}) is the same pair with T(n-1) coordinates
    one = MR.easgm_rounds_upper_bound(50, None, None, 31, rounds=1)
    three = MR.easgm_rounds_upper_bound(50, None, None, 91, rounds=1)
    assert MR.easgm_rounds_upper_bound(50, None, None, 31, rounds=3).m == three.m == 3 * one.m


def test_200_rounds_large_model_is_a_tradeoff_function():
    """Figure 7's 200 rounds at the large model answer: a trade-off function and a finite epsilon
    (its time, formerly asserted here, is measured by bench/bench_multiround.py)."""
    pair = MR.feasgm_rounds_upper_bound(FIG7["N"], FIG7["q"], None, 1_485_217, rounds=FIG7["rounds"])
    alpha = np.linspace(0, 1, 1001)
    beta = np.asarray(pair(alpha))
    assert np.all(np.isfinite(beta)) and np.all((0 <= beta) & (beta <= 1 - alpha + 1e-12))
    assert np.all(np.diff(beta) <= 1e-12)  # non-increasing
    pair.curve()
    eps = pair.epsilon(DELTA)
    assert math.isfinite(eps) and eps > 0


# --------------------------------------------------------------------------------------
# PLD composition
# --------------------------------------------------------------------------------------


# (the Gaussian closed form G_{sqrt(T) mu} against the one engine: tests/fdp/test_pld.py)


def test_diluted_family_is_the_subsampled_gaussian():
    # (P, (1-q)P + qQ) with Q the shifted Gaussian is f_q of Bu et al.: two independent codes
    q, mu = 0.3, 1.2
    dil = C.DilutedFamily(GaussShiftFamily([mu], [1.0]), q)
    ref = SubsampledGaussian(q, mu)
    lt = np.linspace(math.log1p(-q) + 1e-9, 4.0, 101)
    a1, b1 = dil.tails(lt)
    a2, b2 = ref.tails(lt)
    assert np.allclose(a1, a2, atol=1e-12) and np.allclose(b1, b2, atol=1e-12)


@pytest.mark.parametrize("N,q,n", [(999, 0.7, 26_010), (59_999, 0.7, 26_010), (4, 0.5, 100)])
def test_asgm_one_round_reproduces_eq14(N, q, n):
    a = np.linspace(0, 1, 1001)
    w = q - q * (1 - q) ** N
    exact = w * C.Chi2Pair(n - 1, float(N))(a) + (1 - w) * (1 - a)  # Eq. 14, pointwise
    # the pair (P, (1-w)P + wQ) realises Eq. 14 exactly
    pair = MR.asgm_upper_bound_pair(N, q, None, n)
    gap = pair.curve(1e-9).meta["max_gap"]
    assert np.max(np.abs(pair(a, tol=1e-9) - exact)) <= max(gap, 1e-9) + 1e-12
    # and the existing pointwise implementation agrees with it
    assert np.max(np.abs(asgm_upper_bound(N, q, None, n)(a) - exact)) < 5e-6
    # T = 1 through the PLD code: upper >= exact >= lower, close together
    v = MR.asgm_rounds_upper_bound(N, q, None, n, rounds=1, max_length=2**16)
    assert np.all(v.pld.upper(a) >= exact - 1e-10)
    assert np.all(v.pld.lower(a) <= exact + 1e-10)
    e_lo, e_hi = v.epsilon_bounds(DELTA)
    e_ex = pair.epsilon(DELTA)
    assert e_lo <= e_ex + 1e-8 and (e_ex <= e_hi + 1e-8 or math.isinf(e_hi))


def test_asgm_rounds_bracket_and_monotone_in_rounds():
    N, q, n = 999, 0.7, 26_010
    e_prev = 0.0
    for T in (1, 5, 20):
        v = MR.asgm_rounds_upper_bound(N, q, None, n, rounds=T, max_length=2**19)
        lo, hi = v.epsilon_bounds(DELTA)
        assert lo <= hi <= lo + T * v.pld.step + 1e-6
        assert lo >= e_prev - 1e-6
        e_prev = lo
        assert v.pld.max_error() < 0.02


# --------------------------------------------------------------------------------------
# accountants
# --------------------------------------------------------------------------------------


def _rdp_subsampled_gaussian_integer(q: float, sigma: float, alpha: int) -> float:
    """RDP of the Poisson-subsampled Gaussian at integer order alpha (Mironov et al. 2019, Sec. 3.3).

    A_alpha = sum_k C(alpha, k) (1-q)^(alpha-k) q^k exp((k^2 - k) / (2 sigma^2)); eps = log(A)/(alpha-1).
    """
    terms = [
        special.gammaln(alpha + 1) - special.gammaln(k + 1) - special.gammaln(alpha - k + 1)
        + (alpha - k) * math.log1p(-q) + k * math.log(q) + (k * k - k) / (2 * sigma**2)
        for k in range(alpha + 1)
    ]
    return float(special.logsumexp(terms)) / (alpha - 1)


def test_rdp_epsilon_matches_independent_integer_order_computation():
    from opacus.accountants import RDPAccountant

    q, sigma, T = 0.01, 1.1, 1000
    orders = list(range(2, 64))
    rdp = np.array([_rdp_subsampled_gaussian_integer(q, sigma, a) for a in orders]) * T
    o = np.array(orders, dtype=float)
    eps_ref = float(np.min(rdp - (math.log(DELTA) + np.log(o)) / (o - 1) + np.log((o - 1) / o)))
    acc = RDPAccountant()
    acc.history = [(sigma, q, T)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eps_int = acc.get_epsilon(delta=DELTA, alphas=orders)
    assert abs(eps_int - eps_ref) < 1e-9
    # the default orders include fractional ones, so the library value is at most this
    eps = A.sgm_claim_epsilon(q, sigma, rounds=T, delta=DELTA, accountant="rdp")
    assert eps <= eps_ref + 1e-12 and eps > 0.5 * eps_ref


def test_prv_and_our_pld_agree_on_the_claim():
    from opacus.accountants import PRVAccountant

    q, sigma, T = FIG7["q"], FIG7["sigma"], FIG7["rounds"]
    acc = PRVAccountant()
    acc.history = [(sigma, q, T)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dprv = acc._get_dprv(eps_error=0.01, delta_error=DELTA / 1000)
        prv_lo, prv_est, prv_hi = dprv.compute_epsilon(DELTA, DELTA / 1000, 0.01)
    lo, hi = MR.sgm_claim_rounds(q, sigma, rounds=T, max_length=2**21).epsilon_bounds(DELTA)
    assert prv_lo <= hi and lo <= prv_hi, (prv_lo, prv_est, prv_hi, lo, hi)
    assert abs(prv_est - lo) < 2e-3


def test_claim_curve_from_rdp_is_an_envelope_of_its_eps_delta_pairs():
    c = A.claim_curve_from_accountant(0.005, 10.0, rounds=200, accountant="rdp")
    a = np.linspace(0, 1, 101)
    b = c(a)
    assert np.all(b <= 1 - a + 1e-12) and np.all(np.diff(b) <= 1e-12)
    eps = A.sgm_claim_epsilon(0.005, 10.0, rounds=200, delta=DELTA, accountant="rdp")
    from paperlib.fdp.tradeoff import eps_delta_tradeoff

    # at delta = 1e-5 the claimed pair is on or below the envelope (grid of deltas contains 1e-5 nearby)
    assert np.all(c(a) >= eps_delta_tradeoff(a, eps * 1.2, DELTA * 1.3) - 1e-9)


# --------------------------------------------------------------------------------------
# Figure 7
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", FIG7_N_PARAMS)
def test_figure7_feasgm_bound_weaker_than_rdp_claim(n):
    K, K1 = feasgm_floors(FIG7["N"], FIG7["q"])
    assert (K, K1) == (700, 701)
    r = A.multiround_comparison("feasgm", n=n, delta=DELTA, accountants=("rdp",), **FIG7)
    eps_bound, eps_rdp = r["epsilon_upper_bound"], r["claimed"]["rdp"]
    assert eps_bound > eps_rdp, f"n={n}: FEASGM upper-bound eps {eps_bound:.6g} vs Opacus RDP claim {eps_rdp:.6g}"
    # the curve lies below the RDP claim curve somewhere, too
    a = np.linspace(0.01, 0.99, 99)
    claim = A.claim_curve_from_accountant(FIG7["q"], FIG7["sigma"], rounds=FIG7["rounds"], accountant="rdp")
    pair = MR.feasgm_rounds_upper_bound(FIG7["N"], FIG7["q"], None, n, rounds=FIG7["rounds"])
    assert np.any(pair(a) < claim(a) - 0.1), f"n={n}: eps {eps_bound:.6g} vs RDP {eps_rdp:.6g}"


# --------------------------------------------------------------------------------------
# input checks and the command line
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: C.Chi2Pair(0, 3.0), "m"),
        (lambda: C.Chi2Pair(10, -1.0), "x"),
        (lambda: MR.easgm_rounds_upper_bound(10, None, None, 5, rounds=0), "rounds"),
        (lambda: MR.feasgm_rounds_upper_bound(10, 0.05, None, 5, rounds=3), "N\\*q"),
        (lambda: MR.asgm_rounds_upper_bound(10, 1.5, None, 5, rounds=3), "q"),
        (lambda: A.sgm_claim_epsilon(0.1, 1.0, rounds=10, delta=1.5), "delta"),
        (lambda: A.sgm_claim_epsilon(0.1, 1.0, rounds=10, delta=1e-5, accountant="moments"), "accountant"),
        (lambda: C.DilutedFamily(GaussShiftFamily([1.0], [1.0]), 0.0), "w"),
        (lambda: curves.curve("asgm", "guarantee", 10, 0.5, 1.0, 5, rounds=0), "rounds"),
    ],
)
def test_errors_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def _cli(*args):
    p = run_cli(*args)
    return p.returncode, p.stdout, p.stderr


def test_cli_rounds():
    common = ["--N", "140199", "--q", "0.005", "--sigma", "10", "--n", "26010", "--rounds", "200"]
    rc, out, err = _cli("epsilon", "--mechanism", "feasgm", "--bound", "upper", *common, "--delta", "1e-5")
    assert rc == 0, err
    j = json.loads(out)
    assert j["rounds"] == 200 and j["epsilon"] > 1.0
    rc, out, err = _cli("epsilon", "--mechanism", "feasgm", *common, "--delta", "1e-5", "--claimed")
    assert rc == 0, err
    j = json.loads(out)
    assert j["accountant"] == "rdp" and "RDP" in j["curve"] and 0 < j["epsilon"] < 1.0
    # the T-round guarantee is the certified composition (paperlib.mechanisms.certified), with its bracket
    rc, out, err = _cli("tradeoff", "--mechanism", "easgm", "--bound", "guarantee", *common, "--alpha", "0.1")
    assert rc == 0, err
    j = json.loads(out)
    (lo, hi), = j["beta_bracket"]
    assert lo == j["beta"][0] <= hi and hi - lo <= 0.01 * max(hi, 0.1)
    rc, out, err = _cli("tradeoff", "--mechanism", "asgm", "--bound", "upper", "--N", "999", "--q", "0.7",
                        "--sigma", "10", "--n", "1000", "--rounds", "10", "--alpha", "0.1", "0.5")
    assert rc == 0, err
    j = json.loads(out)
    assert len(j["beta"]) == 2 and 0 <= j["beta"][1] <= j["beta"][0] <= 0.9
