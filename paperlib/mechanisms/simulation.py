"""Monte Carlo simulation of one round of SGM/EASGM/ASGM/FEASGM on worst-case data.

This is the independent check of the formulas in :mod:`paperlib.mechanisms.guarantees`: it
draws the mechanism's real output and computes the exact log-likelihood ratio of
the best test, either with the component index revealed (then the empirical
trade-off must match the guarantee curve) or hidden (the real mechanism's
leakage, which must lie on or above the guarantee and, per the paper, below the
SGM claim only for SGM itself).

Worst-case data (THEORY.md section 6): every clipped gradient of D equals ``C u``,
the added point's equals ``-C u``. Output ``O = (S_B + G) / nu`` with the
mechanism's normaliser ``nu`` (section 2). By rotation invariance the output is
summarised without loss by ``o1 = <O, u> / C`` and ``W = ||O - <O,u>u||^2 / C^2``:
``o1 ~ N((k - b)/nu, sigma^2/nu^2)`` and ``W ~ (sigma/nu)^2 chi^2_{n-1}``, with ``k``
sampled points of D and ``b`` whether the added point is sampled. The simulation
draws these two numbers per trial, so any ``n`` costs the same.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from paperlib.mechanisms.core import Mechanism
from paperlib.fdp.validation import check_alpha_array, check_int, check_positive, check_rate

__all__ = ["simulate_llr", "empirical_tradeoff"]


def _component_logpdf(o1, W, mean, scale, m):
    """log density of (o1, W) for o1 ~ N(mean, scale^2), W ~ scale^2 chi^2_m (m may be 0)."""
    lp = stats.norm.logpdf(o1, loc=mean, scale=scale)
    if m > 0:
        lp = lp + stats.chi2.logpdf(W / scale**2, m) - 2 * np.log(scale)
    return lp


def simulate_llr(
    mechanism: str,
    N: int,
    q: float,
    sigma: float,
    n: int,
    trials: int,
    seed: int = 0,
    reveal_index: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``trials`` outputs under D and under D' and return their log-likelihood ratios.

    Parameters
    ----------
    mechanism : {"sgm", "easgm", "asgm", "feasgm"}
    N : int >= 1, |D|;  q : (0, 1];  sigma : > 0;  n : int >= 1 (output dimension)
    trials : int >= 2 per side;  seed : int (numpy ``default_rng``)
    reveal_index : bool
        True: the adversary also sees the component index ``(k, b)`` and uses that
        component's likelihood ratio (the game of Lemma 2.10 whose optimum is the
        guarantee). False: the output alone, scored by the exact ratio of the two
        output mixtures (the Neyman-Pearson test of the real mechanism).

    Returns
    -------
    (llr_P, llr_Q) : two float arrays of shape (trials,), ``log dQ/dP`` of the
    draws made under D (P) and under D' (Q).
    """
    mechanism = Mechanism.parse(mechanism)
    N = check_int(N, "N", 1)
    q = check_rate(q)
    sigma = check_positive(sigma, "sigma")
    n = check_int(n, "n", 1)
    trials = check_int(trials, "trials", 2)
    mechanism.require_defined(N, q)
    rng = np.random.default_rng(seed)
    m = n - 1
    comp = _components(mechanism, N, q)
    res = []
    for under_q in (False, True):
        k, b, o1, W = _draw(rng, comp, N, q, sigma, m, trials, under_q)
        res.append(_llr_revealed(comp, sigma, m, k, b, o1, W) if reveal_index
                   else _llr_hidden(comp, N, q, sigma, m, o1, W))
    return res[0], res[1]


def _components(mechanism: Mechanism, N: int, q: float):
    """All components (k in 0..N for D, (k, b) for D'): ``(ks, logw_k, nu_p, nu_q0, nu_q1)``."""
    ks = np.arange(N + 1)
    logw_k = stats.binom.logpmf(ks, N, q)
    nu_p = mechanism.normaliser(N, ks, q)  # D, batch k
    nu_q0 = mechanism.normaliser(N + 1, ks, q)  # D', new point out
    nu_q1 = mechanism.normaliser(N + 1, ks + 1, q)  # D', new point in
    return ks, logw_k, nu_p, nu_q0, nu_q1


def _draw(rng, comp, N, q, sigma, m, trials, under_q: bool):
    """Draw ``trials`` summaries ``(k, b, o1, W)`` under D' (``under_q``) or D."""
    _, _, nu_p, nu_q0, nu_q1 = comp
    k = rng.binomial(N, q, size=trials)
    b = (rng.random(trials) < q).astype(int)
    z1 = rng.standard_normal(trials)
    chi = rng.chisquare(m, size=trials) if m > 0 else np.zeros(trials)
    if under_q:
        nu = np.where(b == 1, nu_q1[k], nu_q0[k])
        o1 = (k - b + sigma * z1) / nu
    else:
        nu = nu_p[k]
        o1 = (k + sigma * z1) / nu
    W = (sigma / nu) ** 2 * chi
    return k, b, o1, W


def _llr_revealed(comp, sigma, m, k, b, o1, W):
    """Log-likelihood ratio of the drawn component ``(k, b)`` (index revealed)."""
    _, _, nu_p, nu_q0, nu_q1 = comp
    lp = _component_logpdf(o1, W, k / nu_p[k], sigma / nu_p[k], m)
    nu = np.where(b == 1, nu_q1[k], nu_q0[k])
    lq = _component_logpdf(o1, W, (k - b) / nu, sigma / nu, m)
    # identical components: exact zero, so ties are recognised as the atom they are
    same = np.isclose(k / nu_p[k], (k - b) / nu, rtol=0, atol=0) & (nu_p[k] == nu)
    return np.where(same, 0.0, lq - lp)


def _llr_hidden(comp, N, q, sigma, m, o1, W):
    """Exact log-likelihood ratio of the two output mixtures (index hidden)."""
    ks, logw_k, nu_p, nu_q0, nu_q1 = comp
    # chunked log-sum-exp over components of each mixture
    out = np.empty(o1.size)
    step = max(1, 2_000_000 // (2 * (N + 1)))
    for s in range(0, o1.size, step):
        x = o1[s : s + step, None]
        w = W[s : s + step, None]
        lp = special.logsumexp(logw_k[None, :] + _component_logpdf(x, w, ks / nu_p, sigma / nu_p, m), axis=1)
        q0 = math.log1p(-q) if q < 1 else -np.inf
        lq_terms = [
            logw_k[None, :] + math.log(q) + _component_logpdf(x, w, (ks - 1) / nu_q1, sigma / nu_q1, m)
        ]
        if q < 1:
            lq_terms.append(logw_k[None, :] + q0 + _component_logpdf(x, w, ks / nu_q0, sigma / nu_q0, m))
        lq = special.logsumexp(np.concatenate(lq_terms, axis=1), axis=1)
        out[s : s + step] = lq - lp
    return out


def empirical_tradeoff(llr_p: np.ndarray, llr_q: np.ndarray, alpha) -> np.ndarray:
    """Empirical FNR of the likelihood-ratio test at FPR ``alpha`` (randomised at ties).

    ``llr_p``/``llr_q``: log-likelihood ratios of draws under P and Q. For each target
    ``alpha`` the threshold is the empirical ``1 - alpha`` quantile of ``llr_p``; draws
    equal to it are rejected with the probability that makes the FPR exactly ``alpha``.
    Returns an array shaped like ``alpha``.
    """
    a = check_alpha_array(alpha)
    lp = np.sort(np.asarray(llr_p, dtype=float))
    lq = np.sort(np.asarray(llr_q, dtype=float))
    M, Mq = lp.size, lq.size
    out = np.empty(a.shape)
    for i, ai in np.ndenumerate(a):
        # threshold t: fraction of P strictly above t is <= ai
        idx = min(M - 1, max(0, int(math.ceil((1 - ai) * M)) - 1))
        t = lp[idx]
        gt = (M - np.searchsorted(lp, t, side="right")) / M
        eq = (np.searchsorted(lp, t, side="right") - np.searchsorted(lp, t, side="left")) / M
        c = 0.0 if eq == 0 else min(1.0, max(0.0, (ai - gt) / eq))
        q_lt = np.searchsorted(lq, t, side="left") / Mq
        q_eq = (np.searchsorted(lq, t, side="right") - np.searchsorted(lq, t, side="left")) / Mq
        out[i] = q_lt + (1 - c) * q_eq
    return out
