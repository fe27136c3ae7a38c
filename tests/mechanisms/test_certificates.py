"""Tests of paperlib.mechanisms.certificates: ASGM through (|B|, S_B + G) and DPSUR's own rule (THEORY.md §11.2, §11.4).

Independent references, all written here:

* brute force for small N: every batch enumerated, the output's hockey-stick divergences by quadrature
  (1-D and 2-D), for a dozen gradient configurations (aligned, opposite, identical, zero, random), both
  orders: none exceeds the certificate, and the aligned configuration attains it;
* a seeded Monte Carlo of two rounds of the mechanism (batches drawn, the release's exact likelihood
  ratio from the densities of the drawn vectors), with a confidence bound;
* dp_accounting's own constructors (``create_from_rounded_probability`` with rounding up and down,
  ``create_pmf_pessimistic_connect_dots``) fed with loss probabilities computed here with scipy,
  composed by ``self_compose(T)``, against the project's certified epsilon at T = 1, 100 and 2,340.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

from paperlib.mechanisms.setting import Setting
from paperlib.mechanisms import certificates as CT
from paperlib.mechanisms import certified as CE

DELTA = 1e-5
ISSUE = dict(N=60_000, q=1 / 235, sigma=1.1)  # Opacus 0.13's rate at 60,000 records, batch 256


# --------------------------------------------------------------------------------------
# the certificate's own hockey-stick divergences, from its loss law (exact tails)
# --------------------------------------------------------------------------------------
def _cert_delta(law, eps):
    """``(delta_QP, delta_PQ)`` of one round of a law at each ``eps`` (its exact tails; infinite masses in)."""
    e = np.asarray(eps, dtype=float)
    _, q_gt, _, p_gt = law.log4(e)
    q_le, _, p_le, _ = law.log4(-e)
    q_inf, p_inf = law.inf_masses()
    d_qp = np.exp(q_gt) - np.exp(e + p_gt) + q_inf
    d_pq = np.exp(p_le) - np.exp(e + q_le) + p_inf  # P[L < -eps] - e^eps Q[L < -eps] (continuous here)
    return np.maximum(d_qp, 0), np.maximum(d_pq, 0)


# --------------------------------------------------------------------------------------
# brute force: ASGM, N <= 6, every batch enumerated
# --------------------------------------------------------------------------------------
def _normal_density(x, mean, sd):
    """Isotropic normal density at grid points ``x`` (shape (..., n)) with mean (n,) and sd."""
    n = x.shape[-1]
    z = (x - mean) / sd
    return np.exp(-0.5 * np.sum(z * z, axis=-1)) / (math.sqrt(2 * math.pi) * sd) ** n


def _grid(n, R, h):
    ax = np.arange(-R, R + h / 2, h)
    if n == 1:
        return ax[:, None], h
    X, Y = np.meshgrid(ax, ax, indexing="ij")
    return np.stack([X, Y], axis=-1), h * h


def _asgm_brute(g, q, sigma, eps, release: bool, h):
    """``(delta_QP, delta_PQ)`` at ``eps`` of ASGM's ``(|B|, S_B + G)`` (release False) or of its release
    ``(S_B + G)/max(|B|, 1)`` (True), gradients ``g`` (rows 0..N-1: D; row N: the target; norms <= 1 = C)."""
    N, n = g.shape[0] - 1, g.shape[1]
    d_qp, d_pq = np.zeros(len(eps)), np.zeros(len(eps))
    R = N + 1 + 9 * sigma

    def mix(rows, m):
        subs = list(itertools.combinations(rows, m))
        return [(g[list(b)].sum(axis=0) if m else np.zeros(n)) for b in subs]

    if release:
        x, w = _grid(n, R, h)
        pd, qd = np.zeros(x.shape[:-1]), np.zeros(x.shape[:-1])
        for m in range(N + 2):
            div = max(m, 1)
            if m <= N:
                means = mix(range(N), m)
                pd += stats.binom.pmf(m, N, q) / len(means) * sum(_normal_density(x, s / div, sigma / div) for s in means)
            means = mix(range(N + 1), m)
            qd += stats.binom.pmf(m, N + 1, q) / len(means) * sum(_normal_density(x, s / div, sigma / div) for s in means)
        for i, e in enumerate(eps):
            d_qp[i] = np.sum(np.maximum(qd - math.exp(e) * pd, 0)) * w
            d_pq[i] = np.sum(np.maximum(pd - math.exp(e) * qd, 0)) * w
        return d_qp, d_pq
    for m in range(N + 2):
        pi, pi1 = stats.binom.pmf(m, N, q), stats.binom.pmf(m, N + 1, q)
        if m == N + 1:
            d_qp += pi1  # only D' can sample everyone
            continue
        x, w = _grid(n, R, h)
        pm = sum(_normal_density(x, s, sigma) for s in mix(range(N), m)) / math.comb(N, m)
        qm = sum(_normal_density(x, s, sigma) for s in mix(range(N + 1), m)) / math.comb(N + 1, m)
        for i, e in enumerate(eps):
            d_qp[i] += np.sum(np.maximum(pi1 * qm - math.exp(e) * pi * pm, 0)) * w
            d_pq[i] += np.sum(np.maximum(pi * pm - math.exp(e) * pi1 * qm, 0)) * w
    return d_qp, d_pq


def _unit(v):
    return v / np.linalg.norm(v)


def _configs():
    """A dozen gradient configurations ``(name, N, g)`` (clipped norms <= 1)."""
    rng = np.random.default_rng(20261202)
    out = []
    for N in (2, 3, 5):
        u = np.ones((N + 1, 1))
        out.append((f"aligned N={N}", N, np.vstack([u[:N], -u[N:]])))  # the worst case
    out.append(("identical N=3", 3, np.ones((4, 1))))
    out.append(("zero others N=4", 4, np.vstack([np.zeros((4, 1)), [[1.0]]])))
    for s in range(3):
        N = int(rng.integers(2, 6))
        out.append((f"random 1-D #{s} N={N}", N, rng.uniform(-1, 1, size=(N + 1, 1))))
    for s in range(3):
        N = int(rng.integers(2, 4))
        g = rng.normal(size=(N + 1, 2))
        g = g / np.maximum(1.0, np.linalg.norm(g, axis=1, keepdims=True)) * rng.uniform(0.3, 1, (N + 1, 1))
        out.append((f"random 2-D #{s} N={N}", N, g))
    g = np.array([[1.0, 0.0], [0.0, 1.0], [math.cos(2.5), math.sin(2.5)]])
    out.append(("orthogonal 2-D N=2", 2, g))
    return out


@pytest.mark.parametrize("name,N,g", _configs(), ids=[c[0] for c in _configs()])
@pytest.mark.parametrize("q,sigma", [(0.6, 1.0), (0.3, 2.0)])
def test_asgm_brute_force_never_exceeds_the_count_certificate(name, N, g, q, sigma):
    eps = np.array([0.0, 0.25, 0.5, 1.0, 2.0])
    law = CT.asgm_count_law(N, q, sigma, tail=1e-300)
    c_qp, c_pq = _cert_delta(law, eps)
    n = g.shape[1]
    h = 0.004 * sigma if n == 1 else 0.04 * sigma
    tol = 2e-6 if n == 1 else 3e-4  # trapezoid error of the quadrature (kink of (.)_+)
    b_qp, b_pq = _asgm_brute(g, q, sigma, eps, release=False, h=h)
    assert np.all(b_qp <= c_qp + tol) and np.all(b_pq <= c_pq + tol), (b_qp - c_qp, b_pq - c_pq)
    if name.startswith("aligned"):  # the worst case attains the certificate
        assert np.allclose(b_qp, c_qp, atol=tol) and np.allclose(b_pq, c_pq, atol=tol)
    if n == 1 and N <= 3:  # the release itself is a function of (|B|, S_B + G): below again
        r_qp, r_pq = _asgm_brute(g, q, sigma, eps, release=True, h=0.002 * sigma)
        assert np.all(r_qp <= b_qp + tol) and np.all(r_pq <= b_pq + tol)


def test_brute_force_detects_a_wrong_certificate():
    """The check can fail: a certificate with the shift 2/sigma replaced by 1.5/sigma is exceeded."""
    N, q, sigma = 3, 0.6, 1.0
    wrong = CT.asgm_count_law(N, q, sigma * 2 / 1.5, tail=1e-300)
    eps = np.array([0.25, 0.5, 1.0])
    b_qp, _ = _asgm_brute(np.vstack([np.ones((N, 1)), -np.ones((1, 1))]), q, sigma, eps, release=False, h=0.004)
    assert np.any(b_qp > _cert_delta(wrong, eps)[0] + 1e-3)


# --------------------------------------------------------------------------------------
# the certificate's values
# --------------------------------------------------------------------------------------
def test_asgm_check_value_and_n_free():
    lo, hi = CT.asgm_count_certificate(Setting("asgm", **ISSUE, n=1, rounds=1), rel_tol=1e-3).epsilon_bounds(DELTA)
    assert lo <= 1.1295 <= hi and hi - lo < 2e-3
    law = CT.asgm_count_law(**ISSUE)
    d_qp, d_pq = _cert_delta(law, np.array([1.1295]))
    assert d_qp[0] == pytest.approx(9.9989e-6, rel=2e-4) and d_pq[0] < 1e-8  # the (D', D) order dominates


def test_asgm_small_n_prefers_the_index_revealed_certificate():
    r = CE.certified_interval(Setting("asgm", 3, 0.7, 2.0, 20, rounds=2, delta=DELTA)).to_json()
    assert r["certified_method"] == CE.CERTIFICATES["index"]
    cands = r["certified_candidates"]
    assert cands[CE.CERTIFICATES["count"]][1] == math.inf  # q^(N+1) = 0.24 of infinite loss per round
    assert r["epsilon_certified"] == cands[CE.CERTIFICATES["index"]][1] < math.inf
    r = CE.certified_interval(Setting("asgm", 60_000, 1 / 235, 1.1, 10**6, rounds=1, delta=DELTA)).to_json()
    assert r["certified_method"] == CE.CERTIFICATES["count"] and r["epsilon_certified"] < 1.14


# --------------------------------------------------------------------------------------
# Monte Carlo of two rounds of the mechanism (aligned configuration)
# --------------------------------------------------------------------------------------
def _asgm_two_rounds_llr(N, q, sigma, n, trials, rng, on_d_prime: bool):
    """Two rounds of ASGM's (|B|, S_B + G) with others C u, target -C u (C = 1, u = e_1): the exact log-likelihood
    ratio of each draw, from the densities of the drawn vector (not from the certificate's formula)."""
    total = np.zeros(trials)
    for _ in range(2):
        k = rng.binomial(N, q, trials)  # others sampled
        t = rng.random(trials) < q if on_d_prime else np.zeros(trials, bool)
        m = k + t
        v = rng.normal(0.0, sigma, (trials, n))
        v[:, 0] += k - t  # S_B along u: each other +1, the target -1
        # log dQ/dP: Q_m = (1 - g) N(m u, .) + g N((m - 2) u, .), P_m = N(m u, .), weights Bin(N+1), Bin(N)
        g = m / (N + 1.0)
        log_w = stats.binom.logpmf(m, N + 1, q) - stats.binom.logpmf(m, N, q)
        lp = -0.5 * np.sum((v - np.outer(m, np.eye(n)[0])) ** 2, axis=1) / sigma**2
        ls = -0.5 * np.sum((v - np.outer(m - 2, np.eye(n)[0])) ** 2, axis=1) / sigma**2
        with np.errstate(divide="ignore"):
            lq = np.logaddexp(np.log1p(-g) + lp, np.log(g) + ls)
        total += log_w + lq - lp
    return total


def test_monte_carlo_two_rounds_agrees_with_the_composition():
    N, q, sigma, n, M = 40, 0.3, 1.0, 5, 400_000
    rng = np.random.default_rng(7)
    lq = _asgm_two_rounds_llr(N, q, sigma, n, M, rng, True)
    lp = _asgm_two_rounds_llr(N, q, sigma, n, M, rng, False)
    cert = CT.asgm_count_certificate(Setting("asgm", N, q, sigma, 1, rounds=2), rel_tol=1e-3)
    for e in (0.0, 0.5, 1.0, 1.5):
        a = -np.expm1(np.minimum(e - lq, 0.0))  # delta_QP = E_Q[(1 - e^{eps - L})_+]
        b = -np.expm1(np.minimum(e + lp, 0.0))  # delta_PQ = E_P[(1 - e^{eps + L})_+]
        mc = max(a.mean(), b.mean())
        se = max(a.std(), b.std()) / math.sqrt(M)
        lo, hi = cert.delta_bounds(e)
        assert lo - 5 * se - 1e-6 <= mc <= hi + 5 * se + 1e-6, (e, lo, mc, hi, se)


# --------------------------------------------------------------------------------------
# acceptance: dp_accounting's own constructors, loss probabilities computed here
# --------------------------------------------------------------------------------------
def _sizes(N, q):
    """Sizes m with Bin(m; N+1, q) > 1e-30 (all but ~1e-29 of both laws), m <= N."""
    ms = np.arange(0, N + 1)
    keep = stats.binom.pmf(ms, N + 1, q) > 1e-30
    return ms[keep]


def _y_of(L, c0):
    """``s`` with ``L(m, y) <= L  <=>  mu y - mu^2/2 + log r_m <= s`` (``-inf`` below ``c0 = log(1-q)``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(L > c0, np.log(np.expm1(np.maximum(L - c0, 1e-300))), -np.inf)


def _asgm_hockey(N, q, sigma, eps, direction):
    """The certificate's hockey-stick divergence at each ``eps``, written out with scipy (THEORY.md §11.2):
    QP: ``sum_m pi'_m Q_m[L > eps] - e^eps pi_m P[L > eps]`` (+ ``pi'_{N+1}``, the infinite atom);
    PQ: ``sum_m pi_m P[L < -eps] - e^eps pi'_m Q_m[L < -eps]``."""
    mu, c0 = 2.0 / sigma, math.log1p(-q)
    e = np.asarray(eps, dtype=float)
    out = np.zeros(e.shape)
    for m in _sizes(N, q):
        pi, pi1 = stats.binom.pmf(m, N, q), stats.binom.pmf(m, N + 1, q)
        if m == 0:  # the atom at L = c0 (target not sampled, nobody else either)
            out += np.where(c0 > e, pi1 - np.exp(e) * pi, 0.0) if direction == "QP" else \
                np.where(c0 < -e, pi - np.exp(e) * pi1, 0.0)
            continue
        r, g = m / (N + 1.0 - m), m / (N + 1.0)
        if direction == "QP":
            y = (_y_of(e, c0) - math.log(r) + mu * mu / 2) / mu
            out += pi1 * ((1 - g) * special.ndtr(-y) + g * special.ndtr(mu - y)) - np.exp(e) * pi * special.ndtr(-y)
        else:
            y = (_y_of(-e, c0) - math.log(r) + mu * mu / 2) / mu
            out += pi * special.ndtr(y) - np.exp(e) * pi1 * ((1 - g) * special.ndtr(y) + g * special.ndtr(y - mu))
    if direction == "QP":
        out += stats.binom.pmf(N + 1, N + 1, q)
    return np.clip(out, 0.0, 1.0)


def _asgm_loss_cells(N, q, sigma, step, direction):
    """Mass of the certificate's privacy loss (QP: ``L`` under ``Q``; PQ: ``-L`` under ``P``) in each cell
    ``(v_i, v_{i+1}]``, ``v_i = (k0 + i) step``, by scipy; ``(k0, masses, mass beyond the grid)``."""
    mu, c0 = 2.0 / sigma, math.log1p(-q)
    lo, hi = (c0 - 0.01, 14.0) if direction == "QP" else (-14.0, -c0 + 0.01)
    k = np.arange(int(math.floor(lo / step)), int(math.ceil(hi / step)) + 1)
    v = k * step
    cells, beyond = np.zeros(k.size - 1), 0.0
    for m in _sizes(N, q):
        if direction == "QP":
            w = stats.binom.pmf(m, N + 1, q)
            if m == 0:
                cells[np.searchsorted(v, c0) - 1] += w  # the atom, in the cell (v_{i}, v_{i+1}] that holds it
                continue
            r, g = m / (N + 1.0 - m), m / (N + 1.0)
            y = (_y_of(v, c0) - math.log(r) + mu * mu / 2) / mu
            sf = (1 - g) * special.ndtr(-y) + g * special.ndtr(mu - y)  # Q_m[L > v]
            cells += w * np.maximum(sf[:-1] - sf[1:], 0.0)
            beyond += w * sf[-1]
        else:  # -L <= v  <=>  L >= -v  <=>  y >= y(-v)
            w = stats.binom.pmf(m, N, q)
            if m == 0:
                cells[np.searchsorted(v, -c0) - 1] += w
                continue
            r = m / (N + 1.0 - m)
            cdf = special.ndtr(-(_y_of(-v, c0) - math.log(r) + mu * mu / 2) / mu)
            cells += w * np.maximum(np.diff(cdf), 0.0)
            beyond += w * cdf[0]  # below the grid
    if direction == "QP":
        beyond += stats.binom.sf(N, N + 1, q)  # m = N + 1: infinite loss
    return int(k[0]), cells, beyond


def _rounded_reference(N, q, sigma, T, step):
    """``(eps_down, eps_up)``: dp_accounting's composition of the certificate's PMFs rounded down and up
    (``create_from_rounded_probability``; a rigorous bracket of the truth, of width about ``T step``)."""
    from dp_accounting.pld import privacy_loss_distribution as dpl

    out = []
    for pessimistic in (False, True):
        pmfs = {}
        for d in ("QP", "PQ"):
            k0, cells, beyond = _asgm_loss_cells(N, q, sigma, step, d)
            idx = k0 + np.arange(1, cells.size + 1) if pessimistic else k0 + np.arange(cells.size)
            keep = cells > 0
            inf = beyond if (pessimistic or d == "PQ") else 0.0  # PQ: mass below the grid, moved up to it
            pmf = dict(zip(idx[keep].tolist(), cells[keep].tolist()))
            if d == "PQ" and beyond > 0:
                pmf[int(k0)] = pmf.get(int(k0), 0.0) + beyond
                inf = 0.0
            pmfs[d] = (pmf, inf)
        pld = dpl.PrivacyLossDistribution.create_from_rounded_probability(
            pmfs["QP"][0], pmfs["QP"][1], step, pessimistic_estimate=pessimistic,
            rounded_probability_mass_function_add=pmfs["PQ"][0], infinity_mass_add=pmfs["PQ"][1], symmetric=False)
        out.append(pld.self_compose(T).get_epsilon_for_delta(DELTA) if T > 1 else pld.get_epsilon_for_delta(DELTA))
    return tuple(out)


def _connect_dots_reference(N, q, sigma, T, step):
    """dp_accounting's pessimistic connect-the-dots PMF (``create_pmf_pessimistic_connect_dots``) from the
    hockey-stick divergences computed here, each direction composed by ``self_compose(T)``: an upper bound
    of the truth within ``O(step^2)``."""
    from dp_accounting.pld import pld_pmf

    c0 = math.log1p(-q)
    eps = []
    for d in ("QP", "PQ"):
        lo, hi = (c0 - 0.01, 14.0) if d == "QP" else (-14.0, -c0 + 0.01)
        k = np.arange(int(math.floor(lo / step)), int(math.ceil(hi / step)) + 1)
        pmf = pld_pmf.create_pmf_pessimistic_connect_dots(step, k, _asgm_hockey(N, q, sigma, k * step, d))
        eps.append((pmf.self_compose(T) if T > 1 else pmf).get_epsilon_for_delta(DELTA))
    return max(eps)


@pytest.mark.parametrize("T", [1, 100, 2340])
def test_acceptance_certified_epsilon_within_its_bracket_of_dp_accountings(T):
    """Measured: T = 1: ours [1.12741, 1.13178], connect-the-dots 1.12946; T = 100: [3.22344, 3.22364], 3.22365;
    T = 2,340: [6.71613, 6.71698], 6.71740 (rounded down/up at 5e-5: 6.6585 / 6.7755)."""
    ref_down, ref_up = _rounded_reference(ISSUE["N"], ISSUE["q"], ISSUE["sigma"], T, 1e-4)
    ref_cd = _connect_dots_reference(ISSUE["N"], ISSUE["q"], ISSUE["sigma"], T, 1e-3)
    lo, hi = CT.asgm_count_certificate(Setting("asgm", **ISSUE, n=1, rounds=T)).epsilon_bounds(DELTA)
    # validity: every lower end below every upper end (they all bracket the same truth)
    assert ref_down <= ref_cd and ref_down <= ref_up and lo <= ref_cd and lo <= ref_up and ref_down <= hi
    # accuracy: the certified epsilon is within its own bracket of the connect-the-dots value
    assert abs(hi - ref_cd) <= (hi - lo) + 1e-3 * hi, (lo, hi, ref_cd, ref_down, ref_up)
    assert hi - lo <= 0.01 * hi


# --------------------------------------------------------------------------------------
# DPSUR's own rule
# --------------------------------------------------------------------------------------
def _dpsur_release_brute(g, q, sigma, eps, h=0.002):
    """One round of DPSUR's release (1-D): divisor m = |B'| (N q if B' is empty), 0 exactly if B is empty."""
    N = g.shape[0] - 1
    R = N + 2 + 9 * sigma
    x = np.arange(-R, R + h / 2, h)
    out = []
    dens, atoms = {}, {}
    for side, rows in (("P", range(N)), ("Q", range(N + 1))):
        size = len(rows)
        d = np.zeros(x.size)
        atom = (1 - q) ** size
        for mb in range(size + 1):  # the separate draw's size
            w_m = stats.binom.pmf(mb, size, q)
            div = mb if mb > 0 else N * q
            for r in range(1, size + 1):  # the batch B, not empty
                for b in itertools.combinations(rows, r):
                    wb = q**r * (1 - q) ** (size - r)
                    d += w_m * wb * stats.norm.pdf(x, g[list(b), 0].sum() / div, sigma / div)
        dens[side], atoms[side] = d, atom
    for e in eps:
        qp = np.sum(np.maximum(dens["Q"] - math.exp(e) * dens["P"], 0)) * h + max(atoms["Q"] - math.exp(e) * atoms["P"], 0)
        pq = np.sum(np.maximum(dens["P"] - math.exp(e) * dens["Q"], 0)) * h + max(atoms["P"] - math.exp(e) * atoms["Q"], 0)
        out.append((qp, pq))
    return np.array(out)


def _round_law_delta(law, eps):
    """One round of a RoundLaw (index revealed) composed with its common factor, by the engine at T = 1."""
    from paperlib.fdp.pld import PLDComposition

    c = PLDComposition(law, 1, step=2e-4)
    return c.delta_bounds(np.asarray(eps))


@pytest.mark.parametrize("g", [np.array([[0.0], [0.0], [1.0]]), np.array([[1.0], [-0.5], [1.0]]),
                               np.array([[0.3], [0.9], [0.2], [-1.0]]), np.array([[1.0], [1.0], [1.0], [-1.0]])])
def test_dpsur_release_never_exceeds_its_certificate(g):
    q, sigma = 0.5, 1.0
    N = g.shape[0] - 1
    eps = np.array([0.0, 0.3, 0.7, 1.5])
    brute = _dpsur_release_brute(g, q, sigma, eps)
    _, hi = _round_law_delta(CT.dpsur_round_law(N, q, sigma, tail=1e-300), eps)
    assert np.all(brute.max(axis=1) <= hi + 2e-6), (brute, hi)


def test_dpsur_defaults_bracket_and_ratio():
    """DPSUR's defaults (batch 256 of MNIST's 60,000, sigma 1.23, 25,543 steps, 26,010 parameters)."""
    r = CE.certified_interval(Setting("dpsur", 60_000, 256 / 60_000, 1.23, 26_010, rounds=25_543, delta=DELTA)).to_json()
    assert r["certified_method"] == CE.CERTIFICATES["dpsur"]
    assert 0 < r["epsilon_forced"] <= r["epsilon_certified"] <= 1.5 * r["epsilon_forced"]
    assert r["epsilon_certified"] / r["epsilon_forced"] < 1.02  # measured 1.006
    from paperlib.mechanisms.multiround import sgm_claim_rounds

    lo, hi = sgm_claim_rounds(256 / 60_000, 1.23, rounds=25_543).epsilon_bounds(DELTA)
    assert r["epsilon_certified_bracket"][1] >= lo  # the count can only add to the SGM step's leakage
