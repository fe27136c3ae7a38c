"""Tests of paperlib.mechanisms.certified: the certified T-round guarantee (THEORY.md §11, issue 12).

Independent references: the one-round guarantee's exact privacy profile (``LRMixture.delta``,
log space), a direct numeric convolution written here (each component's loss law from scipy's
noncentral chi-square of the full n-dimensional pair, plain rounding up and down on a grid, numpy
FFT, dp_accounting's delta formula evaluated by hand), the exact chi-square upper bounds
(``Chi2Pair``), and a Monte Carlo simulation of the two-round mechanism with the index revealed
(``paperlib.mechanisms.simulation``) whose likelihood-ratio tests are checked against the
certified curve with Clopper-Pearson intervals.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import optimize, stats

from conftest import run_cli
from paperlib.mechanisms.setting import Setting
from paperlib.fdp.chisquare import Chi2Pair
from paperlib.mechanisms import attacks as AT
from paperlib.mechanisms import certified as CE
from paperlib.mechanisms import multiround as MR
from paperlib.mechanisms.guarantees import guarantee
from paperlib.mechanisms.simulation import simulate_llr

DELTA = 1e-5


# --------------------------------------------------------------------------------------
# T = 1: the certified epsilon is the one-round guarantee's
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("mech,N,q,sigma,n", [
    ("easgm", 3, 0.5, 2.0, 20),  # THEORY.md §11 check value: 17.544
    ("feasgm", 3, 0.5, 2.0, 20),  # floors 1 and 2 differ
    ("asgm", 3, 0.7, 2.0, 20),
    ("sgm", 3, 0.5, 2.0, 20),
    ("easgm", 500, 0.02, 1.0, 2000),
    ("asgm", 200, 0.05, 1.0, 1000),
])
def test_one_round_equals_the_one_round_guarantee(mech, N, q, sigma, n):
    exact = guarantee(mech, N, q, sigma, n).epsilon(DELTA)
    c = CE.certified_guarantee(Setting(mech, N, q, sigma, n, rounds=1), certificate="index")  # ASGM: the §6 one
    lo, hi = c.epsilon_bounds(DELTA)
    assert lo <= exact <= hi, (lo, exact, hi)
    assert hi - lo <= 0.01 * max(hi, 0.1) and c.epsilon(DELTA) == hi
    e = np.array([0.5 * exact, exact])
    d_lo, d_hi = c.delta_bounds(e)
    g = guarantee(mech, N, q, sigma, n)
    ref = g.delta(e)  # counts its own binomial truncation (1e-12, the certified one cuts at 1e-13) fully
    slack = getattr(g, "dropped_mass", 0.0) + 1e-14
    assert np.all(d_lo <= ref * (1 + 1e-8) + 1e-14) and np.all(ref <= d_hi * (1 + 1e-8) + slack)


def test_theory_check_value():
    lo, hi = CE.certified_guarantee(Setting("easgm", 3, 0.5, 2.0, 20, rounds=1), rel_tol=1e-4).epsilon_bounds(DELTA)
    assert lo <= 17.5441 <= hi and abs(hi - 17.545) < 2e-3
    eps = [CE.certified_guarantee(Setting("easgm", 3, 0.5, 2.0, 20, rounds=T)).epsilon(DELTA) for T in (1, 2, 5)]
    assert eps[0] < eps[1] < eps[2]  # larger as T grows


# --------------------------------------------------------------------------------------
# an independent computation: direct numeric convolution of the discretised losses
# --------------------------------------------------------------------------------------
def _direct_bracket(mix, T: int, step: float, delta: float) -> tuple[float, float]:
    """``(eps_low, eps_up)`` of the T-fold index-revealed composition of a one-family GaussVar mixture.

    Per component ``T(N(0,I_n), N(mu e_1, s^2 I_n))`` the loss is ``A - (d/2) Y``, ``Y ~ ncx2(n, mu^2 s^2/d^2)``
    under Q and ``-L = -A + (d/(2 s^2)) Y``, ``Y ~ ncx2(n, mu^2/d^2)`` under P (THEORY.md §11), taken
    from scipy's distribution functions of the whole n-dimensional law; cells ``(v_j, v_{j+1}]`` are
    rounded up (upper) or down (lower), tails to +inf / the last point; ``p^{*T}`` by numpy FFT;
    ``delta(eps) = inf + sum p_j (1 - e^{eps - v_j})_+``; both directions, the larger epsilon.
    """
    (fam,) = mix.families
    n, x = fam.n, fam.x
    s2, d = (x / (x + 1)) ** 2, (2 * x + 1) / (x + 1) ** 2
    ends = {0: [], 1: []}
    for direction in ("QP", "PQ"):
        items = []
        for mu, w in zip(fam.mus, fam.weights):
            A = n * math.log1p(1 / x) + mu ** 2 / (2 * d)
            lam = mu ** 2 * (s2 if direction == "QP" else 1.0) / d ** 2
            scale = d / 2 if direction == "QP" else d / (2 * s2)
            dist = stats.ncx2(n, lam) if lam > 0 else stats.chi2(n)
            y = np.array([dist.ppf(1e-17), dist.isf(1e-17)])
            lv = A - scale * y if direction == "QP" else -(A - scale * y)
            items.append((w, A, scale, dist, math.floor(lv.min() / step), math.ceil(lv.max() / step)))
        j0, j1 = min(it[4] for it in items), max(it[5] for it in items)
        up, dn, inf = np.zeros(j1 - j0 + 1), np.zeros(j1 - j0 + 1), 0.0
        for w, A, scale, dist, a, b in items:
            v = np.arange(a, b + 1) * step
            F = dist.sf(np.maximum((A - v) / scale, 0)) if direction == "QP" else dist.cdf(np.maximum((A + v) / scale, 0))
            cell = np.maximum(np.diff(F), 0.0)
            i = a - j0
            up[i + 1:i + 1 + cell.size] += w * cell
            up[i] += w * F[0]
            dn[i:i + cell.size] += w * cell
            dn[i + cell.size] += w * (1 - F[-1])
            inf += w * (1 - F[-1])
        L = T * (up.size - 1) + 1
        nfft = 1 << (L - 1).bit_length()
        vT = (T * j0 + np.arange(L)) * step
        for p, inf_T, side in ((up, 1 - (1 - inf) ** T, 1), (dn, 0.0, 0)):
            pT = np.maximum(np.fft.irfft(np.fft.rfft(p, nfft) ** T, nfft)[:L], 0.0)

            def excess(e):
                m = vT > e
                return inf_T + np.sum(pT[m] * -np.expm1(e - vT[m])) - delta

            ends[side].append(0.0 if excess(0.0) <= 0 else optimize.brentq(excess, 0.0, vT[-1], xtol=1e-10))
    return max(ends[0]), max(ends[1])


@pytest.mark.parametrize("mech,N,q,sigma,n,T,step", [
    ("easgm", 3, 0.5, 2.0, 20, 10, 2e-3),
    ("easgm", 200, 0.05, 2.0, 10_000, 100, 4e-3),  # n >= 10,000 and T >= 100
    ("feasgm", 199, 0.05, 2.0, 20, 20, 2e-3),  # floors 9 and 10
])
def test_agrees_with_a_direct_convolution(mech, N, q, sigma, n, T, step):
    lo_d, hi_d = _direct_bracket(guarantee(mech, N, q, sigma, n), T, step, DELTA)
    assert hi_d - lo_d <= 0.01 * hi_d  # the reference itself is accurate to 1 %
    lo, hi = CE.certified_guarantee(Setting(mech, N, q, sigma, n, rounds=T)).epsilon_bounds(DELTA)
    assert lo <= hi_d and lo_d <= hi  # the two brackets overlap: both hold the truth
    assert abs(hi / hi_d - 1) < 0.01 and abs(hi / (0.5 * (lo_d + hi_d)) - 1) < 0.01


# --------------------------------------------------------------------------------------
# Monte Carlo: the two-round mechanism's likelihood-ratio tests never beat the certified curve
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("mech,N,q,sigma,n,reveal", [
    ("easgm", 3, 0.5, 2.0, 20, True),
    ("asgm", 3, 0.7, 2.0, 20, True),
    ("feasgm", 3, 0.5, 2.0, 10, True),  # floors 1 and 2 differ: the revealed mixture
    ("sgm", 4, 0.5, 2.0, 5, False),  # the claim is for the mechanism itself (index hidden)
])
def test_monte_carlo_two_rounds_never_below_the_certified_curve(mech, N, q, sigma, n, reveal):
    M = 200_000
    lp, lq = simulate_llr(mech, N, q, sigma, n, 2 * M, seed=20261201, reveal_index=reveal)
    sp, sq = lp[:M] + lp[M:], lq[:M] + lq[M:]  # two independent rounds: the log-likelihood ratios add
    cert = CE.certified_guarantee(Setting(mech, N, q, sigma, n, rounds=2))
    levels = np.array([0.001, 0.01, 0.05, 0.1, 0.2, 0.4])
    cert.beta_bounds(levels)
    conf = 1e-4  # per one-sided limit; 24 limits in this test
    for t in np.quantile(sp, 1 - levels) + 1e-9:  # reject "D" when the ratio exceeds t (ties are not rejected)
        kf, kb = int(np.sum(sp > t)), int(np.sum(sq <= t))
        fpr_hi = stats.beta.ppf(1 - conf, kf + 1, M - kf)  # Clopper-Pearson limits
        fnr_hi = stats.beta.ppf(1 - conf, kb + 1, M - kb)
        fpr_lo = stats.beta.ppf(conf, kf, M - kf + 1) if kf else 0.0
        fnr_lo = stats.beta.ppf(conf, kb, M - kb + 1) if kb else 0.0
        # no test does better than the certified T(P, Q): FNR >= f(FPR) within the intervals
        assert fnr_hi >= cert(np.array([fpr_hi]))[0], (t, kf / M, kb / M)
        if reveal:  # and the certificate is tight: the optimal (revealed) test reaches its upper end
            assert fnr_lo <= cert.upper(np.array([fpr_lo]))[0] + 1e-3, (t, kf / M, kb / M)


# --------------------------------------------------------------------------------------
# the interval, both neighbours, FEASGM cases
# --------------------------------------------------------------------------------------
def test_interval_forced_below_certified_and_exact_for_easgm():
    r = CE.certified_interval(Setting("easgm", 200, 0.05, 2.0, 1000, rounds=50, delta=DELTA)).to_json()
    lo, hi = r["epsilon_certified_bracket"]
    assert r["epsilon_certified"] == hi and hi - lo <= 0.01 * hi and r["accuracy_met"]
    # the scale attack: all n = 1000 coordinates of all 50 rounds, both orders (not n - 1: 7.5749)
    exact = Chi2Pair(50 * 1000, 200.0).epsilon(DELTA)
    scale = AT.scale_attack("easgm", 200, 0.05, 1000, rounds=50)
    assert scale.epsilon_bounds(DELTA)[0] == pytest.approx(exact, rel=1e-12)
    assert exact > Chi2Pair(50 * 999, 200.0).epsilon(DELTA)
    # the forced end is the stronger of the two real attacks (others 0 with the target's shift, here)
    target = AT.scaled_target_attack(Setting("easgm", 200, 0.05, 2.0, 1000, rounds=50)).epsilon_bounds(DELTA)[0]
    assert r["epsilon_forced"] == pytest.approx(max(exact, target), rel=1e-12) and r["epsilon_forced"] >= exact
    assert r["epsilon_forced"] <= lo and r["forced_attack"]["gradients"].startswith("every record of D: 0")
    assert r["pair"] == [200, 201] and "forces epsilon >=" in r["statement"]
    # the smaller valid certificate is reported, both are listed
    cands = r["certified_candidates"]
    assert set(cands) == {CE.CERTIFICATES["chain"], CE.CERTIFICATES["index"]}
    assert r["epsilon_certified"] == min(c[1] for c in cands.values())
    r = CE.certified_interval(Setting("asgm", 200, 0.05, 2.0, 1000, rounds=50, delta=DELTA)).to_json()
    f_lo, f_hi = r["epsilon_forced_bracket"]
    c_lo, c_hi = r["epsilon_certified_bracket"]
    assert f_lo <= f_hi and f_lo <= c_hi and c_lo <= c_hi and r["certified_method"] == CE.CERTIFICATES["count"]
    assert c_hi <= 1.05 * f_lo  # the aligned attack is nearly tight (n = 1000 reads the batch size well)


def test_training_set_neighbours_and_feasgm_floors():
    # q = 0.05 on 200 records: removal pair (199, 200) has floors 9, 10; addition (200, 201) 10, 10
    r = CE.certified_for_training_set("feasgm", 200, 0.05, 1.0, 50, rounds=30, delta=DELTA).to_json()
    assert r["removal"]["pair"] == [199, 200] and r["removal"]["case"] == "floors differ"
    assert r["addition"]["pair"] == [200, 201] and r["addition"]["case"] == "floors agree"
    sgm = MR.sgm_claim_rounds(0.05, 1.0, rounds=30).epsilon_bounds(DELTA)
    assert r["addition"]["epsilon_certified_bracket"] == pytest.approx(list(sgm), rel=1e-12)
    assert r["addition"]["epsilon_forced_bracket"] == pytest.approx(list(sgm), rel=1e-12)
    assert r["epsilon_certified"] == max(r["removal"]["epsilon_certified"], r["addition"]["epsilon_certified"])
    assert r["removal"]["epsilon_certified"] > r["addition"]["epsilon_certified"]
    # a removal pair on which FEASGM divides by zero is reported, not raised
    r = CE.certified_for_training_set("feasgm", 20, 0.05, 1.0, 5, rounds=3, delta=DELTA).to_json()
    assert "divides by zero" in r["removal"]["error"] and r["addition"]["epsilon_certified"] > 0


def test_sgm_certified_is_its_claim():
    c = CE.certified_guarantee(Setting("sgm", 10, 0.01, 1.0, 5, rounds=100))
    assert c.epsilon_bounds(DELTA) == MR.sgm_claim_rounds(0.01, 1.0, rounds=100).epsilon_bounds(DELTA)


def test_many_rounds_and_tiny_rates():
    r = CE.certified_interval(Setting("easgm", 1000, 0.01, 1.0, 100, rounds=10_000, delta=DELTA)).to_json()
    lo, hi = r["epsilon_certified_bracket"]
    assert 0 < r["epsilon_forced"] <= lo <= hi < math.inf and r["accuracy_met"]
    lo, hi = CE.certified_guarantee(Setting("asgm", 60_000, 1e-6, 1.0, 1000, rounds=10_000)).epsilon_bounds(DELTA)
    assert 0 <= lo <= hi < math.inf


@pytest.mark.parametrize("call,name", [
    (lambda: CE.certified_guarantee(Setting("easgm", 0, 0.5, 1.0, 5, rounds=2)), "N"),
    (lambda: CE.certified_guarantee(Setting("easgm", 3, 0.5, 1.0, 5, rounds=0)), "rounds"),
    (lambda: CE.certified_guarantee(Setting("adam", 3, 0.5, 1.0, 5, rounds=2)), "mechanism"),
    (lambda: CE.certified_guarantee(Setting("feasgm", 3, 0.1, 1.0, 5, rounds=2)), "q"),
    (lambda: CE.certified_interval(Setting("easgm", 3, 0.5, 1.0, 5, rounds=2, delta=0.0)), "delta"),
    (lambda: CE.certified_for_training_set("easgm", 1, 0.5, 1.0, 5, rounds=2), "N_train"),
])
def test_errors_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# --------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------
def test_cli_epsilon_guarantee_rounds_prints_certified_and_forced():
    r = run_cli("epsilon", "--mechanism", "easgm", "--bound", "guarantee", "--N", "200", "--q", "0.05",
                "--sigma", "2", "--n", "1000", "--rounds", "50", "--delta", "1e-5")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    ref = CE.certified_interval(Setting("easgm", 200, 0.05, 2.0, 1000, rounds=50, delta=DELTA)).to_json()
    assert j["epsilon"] == pytest.approx(ref["epsilon_certified"], rel=1e-9)
    assert j["epsilon_bracket"] == pytest.approx(ref["epsilon_certified_bracket"], rel=1e-9)
    assert j["epsilon_forced"] == pytest.approx(ref["epsilon_forced"], rel=1e-9) and j["pair"] == [200, 201]
    assert "certified" in j["curve"] and "warning" not in r.stderr


def test_cli_tradeoff_guarantee_rounds_prints_the_composed_curve():
    r = run_cli("tradeoff", "--mechanism", "asgm", "--bound", "guarantee", "--N", "3", "--q", "0.7", "--sigma", "2",
                "--n", "20", "--rounds", "2", "--alpha", "0.01", "0.1")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    cert = CE.certified_guarantee(Setting("asgm", 3, 0.7, 2.0, 20, rounds=2))
    cert.beta_bounds(np.array([0.01, 0.1]))
    for b, (lo, hi), a in zip(j["beta"], j["beta_bracket"], (0.01, 0.1)):
        assert b == lo <= hi <= lo + 0.01 * max(hi, 0.1)
        assert cert.lower(np.array([a]))[0] <= hi and lo <= cert.upper(np.array([a]))[0]


def test_results_are_typed_and_become_dicts_once():
    """certified_interval, forced_epsilon and certified_for_training_set return dataclasses; each has one
    to_json (issue 32): the same numbers as the attributes, FEASGM's case only where it applies."""
    s = Setting("feasgm", 199, 0.05, 2.0, 100, rounds=5, delta=DELTA)
    r = CE.certified_interval(s)
    assert isinstance(r, CE.CertifiedInterval) and r.case is not None and r.K == 9 and r.K_prime == 10
    d = r.to_json()
    assert d["epsilon_certified"] == r.epsilon_certified and d["K"] == 9 and d["pair"] == [199, 200]
    assert r.epsilon_forced <= r.epsilon_certified and d["statement"].startswith("FEASGM over 5 rounds")
    e = CE.certified_interval(Setting("easgm", 199, 0.05, 2.0, 100, rounds=5, delta=DELTA)).to_json()
    assert not {"case", "K", "K_prime"} & set(e)
    f = CE.forced_epsilon(s)
    assert isinstance(f, CE.ForcedEpsilon) and f.to_json()["epsilon_forced"] == f.epsilon_forced
    t = CE.certified_for_training_set("feasgm", 20, 0.05, 1.0, 5, rounds=3, delta=DELTA)
    assert isinstance(t.removal, CE.PairError) and isinstance(t.addition, CE.CertifiedInterval)
    j = t.to_json()
    assert j["removal"]["error"].startswith("q: floor") and j["epsilon_certified"] == t.addition.epsilon_certified
