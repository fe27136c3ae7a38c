"""Tests of paperlib.mechanisms.simulation (Monte Carlo of one round on worst-case data).

* reproducibility: the same seed gives the same numbers; different seeds agree within
  Monte Carlo error;
* empirical_tradeoff: exact answers on constructed samples with ties (identity atoms,
  randomised response), and a Monte Carlo of G_mu + Id against its closed form;
* the sufficient-statistic shortcut of simulation.py (o1, W) against a full n-dimensional
  simulation written here: Poisson subsets, real normalisers, exact mixture densities by
  log-sum-exp over all subsets, index hidden;
* SGM on worst-case data is a post-processing of the subsampled Gaussian, so its simulated
  trade-off lies above the claim f_q.

Tolerances are 5 Monte Carlo standard errors of an empirical FNR at a fixed FPR:
SE^2 = beta(1 - beta)/M + f'(alpha)^2 alpha(1 - alpha)/M (threshold error included).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import norm

from paperlib.mechanisms.simulation import empirical_tradeoff, simulate_llr

ALPHAS = np.array([0.02, 0.1, 0.3, 0.6])


def simulate_tradeoff(mechanism, N, q, sigma, n, alpha, trials=100_000, seed=0, reveal_index=False):
    """The tests' reference curve: FNR of the simulated optimal test at FPR ``alpha``
    (``empirical_tradeoff(*simulate_llr(...), alpha)``; also used by test_guarantees.py)."""
    lp, lq = simulate_llr(mechanism, N, q, sigma, n, trials, seed=seed, reveal_index=reveal_index)
    return empirical_tradeoff(lp, lq, alpha)


def G(a, mu):
    return norm.cdf(norm.isf(np.asarray(a, float)) - mu)


def se_from_curve(curve, alpha, M, M2=None):
    """SE of the empirical FNR of the LR test at alpha; curve is a vectorised function."""
    M2 = M if M2 is None else M2
    h = 2e-3
    lo, hi = max(alpha - h, 0.0), min(alpha + h, 1.0)
    slope = (curve(hi) - curve(lo)) / (hi - lo)
    b = curve(alpha)
    return math.sqrt(b * (1 - b) / M2 + slope**2 * alpha * (1 - alpha) / M)


# --------------------------------------------------------------------------- reproducibility
@pytest.mark.parametrize("reveal", [False, True])
def test_same_seed_same_numbers(reveal):
    a1 = simulate_llr("easgm", 3, 0.5, 2.0, 20, 5000, seed=42, reveal_index=reveal)
    a2 = simulate_llr("easgm", 3, 0.5, 2.0, 20, 5000, seed=42, reveal_index=reveal)
    np.testing.assert_array_equal(a1[0], a2[0])
    np.testing.assert_array_equal(a1[1], a2[1])
    b = simulate_llr("easgm", 3, 0.5, 2.0, 20, 5000, seed=43, reveal_index=reveal)
    assert not np.array_equal(a1[0], b[0])
    t1 = simulate_tradeoff("asgm", 3, 0.7, 2.0, 5, ALPHAS, trials=5000, seed=7)
    t2 = simulate_tradeoff("asgm", 3, 0.7, 2.0, 5, ALPHAS, trials=5000, seed=7)
    np.testing.assert_array_equal(t1, t2)


@pytest.mark.parametrize("mech", ["easgm", "asgm", "feasgm", "sgm"])
def test_different_seeds_agree_within_mc_error(mech):
    """Two independent runs of 100k: |difference| <= 5 sqrt(2) SE (SE from a pooled run)."""
    M = 100_000
    r1 = simulate_tradeoff(mech, 3, 0.5, 2.0, 5, ALPHAS, trials=M, seed=1)
    r2 = simulate_tradeoff(mech, 3, 0.5, 2.0, 5, ALPHAS, trials=M, seed=2)
    # the SE needs the curve's slope: estimate it from a third run
    lp, lq = simulate_llr(mech, 3, 0.5, 2.0, 5, M, seed=3)
    curve = lambda a: float(empirical_tradeoff(lp, lq, [a])[0])  # noqa: E731
    for a, x, y in zip(ALPHAS, r1, r2):
        assert abs(x - y) <= 5 * math.sqrt(2) * se_from_curve(curve, a, M), (mech, a, x, y)


# --------------------------------------------------------------------------- empirical_tradeoff
def test_empirical_tradeoff_all_ties_is_identity():
    z = np.zeros(1000)
    a = np.linspace(0, 1, 101)
    np.testing.assert_allclose(empirical_tradeoff(z, z, a), 1 - a, atol=1e-15)


def test_empirical_tradeoff_randomised_response_is_exact():
    """P: 200 draws at +eps, 800 at -eps; Q: 800 at +eps, 200 at -eps (LR 4 and 1/4).

    The exact trade-off of this two-point pair is f_{log 4, 0}: 1 - 4a for a <= 0.2,
    (1 - a)/4 after; the empirical samples are exactly these distributions, so the
    randomised test must reproduce it to rounding.
    """
    e = math.log(4.0)
    lp = np.concatenate([np.full(200, e), np.full(800, -e)])
    lq = np.concatenate([np.full(800, e), np.full(200, -e)])
    rng = np.random.default_rng(0)
    lp, lq = rng.permutation(lp), rng.permutation(lq)
    a = np.linspace(0, 1, 1001)
    ref = np.maximum(1 - 4 * a, (1 - a) / 4)
    np.testing.assert_allclose(empirical_tradeoff(lp, lq, a), ref, atol=1e-12)


def test_empirical_tradeoff_gauss_plus_identity_atom():
    """Component revealed: with prob w0 an identical pair (LLR exactly 0 on both sides),
    else N(0,1) vs N(mu,1) (LLR mu x - mu^2/2). The exact curve is the common-threshold
    mixture with the straight segment at t = 1 (closed form below)."""
    mu, w0, M = 1.0, 0.4, 200_000
    rng = np.random.default_rng(5)

    def draw(shift):
        x = rng.standard_normal(M) + shift
        llr = mu * x - mu * mu / 2
        return np.where(rng.random(M) < w0, 0.0, llr)

    lp, lq = draw(0.0), draw(mu)
    w1 = 1 - w0
    p = norm.cdf(-mu / 2)

    def exact(a):
        if a <= w1 * p:
            return w1 * float(G(a / w1, mu)) + w0
        if a <= w1 * p + w0:
            return w1 * p + w0 - (a - w1 * p)
        return w1 * float(G((a - w0) / w1, mu))

    alphas = [0.05, 0.2, 0.3, 0.45, 0.6, 0.8]  # 0.3 and 0.45 lie on the segment [0.185, 0.585]
    got = empirical_tradeoff(lp, lq, alphas)
    for a, gval in zip(alphas, got):
        assert abs(gval - exact(a)) <= 5 * se_from_curve(exact, a, M), (a, gval, exact(a))


def test_empirical_tradeoff_gaussian_shift():
    """No ties: the empirical LR test of N(0,1) vs N(mu,1) within 5 SE of G_mu."""
    mu, M = 1.5, 200_000
    rng = np.random.default_rng(9)
    lp = mu * rng.standard_normal(M) - mu * mu / 2
    lq = mu * (mu + rng.standard_normal(M)) - mu * mu / 2
    a = np.array([0.01, 0.1, 0.5, 0.9, 1.0])
    got = empirical_tradeoff(lp, lq, a)
    for ai, gi in zip(a, got):
        assert abs(gi - float(G(ai, mu))) <= 5 * se_from_curve(lambda x: float(G(x, mu)), ai, M) + 1 / M
    assert got[-1] == 0.0
    # alpha = 0 rejects only Q draws above every P draw: beta = fraction of Q <= max(P)
    assert float(empirical_tradeoff(lp, lq, [0.0])[0]) == pytest.approx(np.mean(lq <= lp.max()), abs=1e-15)
    assert empirical_tradeoff(lp, lq, 0.2).shape == ()


# --------------------------------------------------------------------------- full-vector check
def _norm_of(mech, N, q):
    """Normalisers as functions of the batch size, THEORY.md section 2 (written out here)."""
    if mech == "sgm":
        return lambda k, Nd: 1.0
    if mech == "easgm":
        return lambda k, Nd: Nd * q
    if mech == "asgm":
        return lambda k, Nd: max(k, 1)
    if mech == "feasgm":
        return lambda k, Nd: int(Nd * q)
    raise ValueError(mech)


def hidden_llr_full(mech, N, q, sigma, n, M, seed):
    """Full n-dimensional simulation of the real mechanism on worst-case data (C = 1):
    D = N copies of u, D' adds -u. The output is scored by the exact ratio of the two
    output mixtures, each a sum over all Poisson subsets (log-sum-exp)."""
    rng = np.random.default_rng(seed)
    nu = _norm_of(mech, N, q)
    u = np.zeros(n)
    u[0] = 1.0
    grads = np.vstack([np.tile(u, (N, 1)), -u])
    # components of P (subsets of D) and Q (subsets of D'): log weight, mean, scale
    comps = {}
    for side, Nd in (("P", N), ("Q", N + 1)):
        lw, means, scales = [], [], []
        for mask in itertools.product((0, 1), repeat=Nd):
            m = np.array(mask, bool)
            k = int(m.sum())
            lw.append(k * math.log(q) + ((Nd - k) * math.log1p(-q) if q < 1 else (0.0 if Nd == k else -np.inf)))
            v = nu(k, Nd)
            means.append(grads[:Nd][m].sum(axis=0) / v)
            scales.append(sigma / v)
        comps[side] = (np.array(lw), np.array(means), np.array(scales))

    def logmix(o, side):
        lw, means, scales = comps[side]
        # log N(o; m, s^2 I) = -n log(s sqrt(2 pi)) - ||o - m||^2 / (2 s^2)
        d2 = (o**2).sum(1)[:, None] - 2 * o @ means.T + (means**2).sum(1)[None, :]
        lpdf = -n * np.log(scales * math.sqrt(2 * math.pi))[None, :] - d2 / (2 * scales[None, :] ** 2)
        return logsumexp(lw[None, :] + lpdf, axis=1)

    out = []
    for side, Nd in (("P", N), ("Q", N + 1)):
        mask = rng.random((M, Nd)) < q
        k = mask.sum(1)
        S = mask.astype(float) @ grads[:Nd]
        v = np.array([nu(int(kk), Nd) for kk in k], float)
        o = (S + sigma * rng.standard_normal((M, n))) / v[:, None]
        out.append(logmix(o, "Q") - logmix(o, "P"))
    return out


@pytest.mark.parametrize("mech,N,q,sigma,n", [
    ("easgm", 3, 0.5, 2.0, 20),
    ("asgm", 3, 0.7, 2.0, 20),
    ("feasgm", 3, 0.5, 2.0, 3),
    ("sgm", 2, 0.5, 1.0, 4),
])
def test_hidden_simulation_matches_full_vector_simulation(mech, N, q, sigma, n):
    """Two independent Monte Carlo estimates (100k a side each): |diff| <= 5 sqrt(2) SE."""
    M = 100_000
    lp, lq = hidden_llr_full(mech, N, q, sigma, n, M, seed=31)
    full = empirical_tradeoff(lp, lq, ALPHAS)
    ours = simulate_tradeoff(mech, N, q, sigma, n, ALPHAS, trials=M, seed=32)
    curve = lambda a: float(empirical_tradeoff(lp, lq, [a])[0])  # noqa: E731
    for a, f, o in zip(ALPHAS, full, ours):
        assert abs(f - o) <= 5 * math.sqrt(2) * se_from_curve(curve, a, M), (a, f, o)


def test_hidden_llr_is_the_exact_log_ratio():
    """Beyond the trade-off: the per-draw scores of simulation.py are log dQ/dP, so their
    exponential has mean 1 under P (E_P[dQ/dP] = 1) and E_Q[dP/dQ] = 1, within 5 SE."""
    M = 200_000
    lp, lq = simulate_llr("easgm", 3, 0.5, 2.0, 5, M, seed=8)
    for x in (np.exp(lp), np.exp(-lq)):
        assert abs(x.mean() - 1) <= 5 * x.std() / math.sqrt(M)


def test_sgm_on_worst_case_data_is_above_the_claim():
    """SGM with nonzero gradients in D is f_q post-processed (adding the independent sum of
    D's sampled gradients), so its optimal test is no better than f_q: above it within MC."""
    M = 100_000
    q, sigma = 0.5, 1.0
    sim = simulate_tradeoff("sgm", 3, q, sigma, 5, ALPHAS, trials=M, seed=13)
    claim = lambda a: float(q * G(a, 1 / sigma) + (1 - q) * (1 - a))  # noqa: E731
    for a, s in zip(ALPHAS, sim):
        assert s >= claim(a) - 5 * se_from_curve(claim, a, M)


# --------------------------------------------------------------------------- small pieces
def test_simulation_input_checks():
    with pytest.raises(ValueError, match="mechanism"):
        simulate_llr("nope", 3, 0.5, 1.0, 5, 100)
    with pytest.raises(ValueError, match="trials must be an integer >= 2"):
        simulate_llr("easgm", 3, 0.5, 1.0, 5, 1)
    with pytest.raises(ValueError, match=r"floor\(N\*q\) = 0"):
        simulate_llr("feasgm", 3, 0.2, 1.0, 5, 100)
