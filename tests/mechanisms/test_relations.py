"""The replace-one relation (THEORY.md §11.3d): SGM under substitution, against dp_accounting and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from paperlib.fdp.pld import ReplaceLaw
from paperlib.mechanisms.multiround import sgm_claim_rounds, sgm_replace_one_rounds

pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
from dp_accounting import NeighboringRelation  # noqa: E402


@pytest.mark.parametrize("q,sigma,T", [(0.01, 1.0, 100), (1 / 235, 1.1, 2340), (0.5, 2.0, 10), (0.004, 1.1, 15000)])
def test_replace_one_equals_dp_accounting(q, sigma, T):
    ref = (pld.from_gaussian_mechanism(sigma, sensitivity=1, sampling_prob=q,
                                       neighboring_relation=NeighboringRelation.REPLACE_ONE,
                                       value_discretization_interval=2e-4)
           .self_compose(T).get_epsilon_for_delta(1e-5))
    lo, hi = sgm_replace_one_rounds(q, sigma, rounds=T).epsilon_bounds(1e-5)
    assert lo - 2e-3 <= ref <= hi + 2e-3, (lo, hi, ref)
    assert hi - lo <= 0.01 * max(hi, 0.1)
    # more than add/remove (the swapped pair moves the mean twice as far); about twice at small q
    ar = sgm_claim_rounds(q, sigma, rounds=T).epsilon_bounds(1e-5)[1]
    assert hi > 1.2 * ar


def test_replace_one_at_q_one_is_the_gaussian_with_sensitivity_two():
    sigma, T, delta = 2.0, 5, 1e-5
    mu = 2.0 * math.sqrt(T) / sigma  # N(-1/sigma) vs N(1/sigma), T rounds: GDP mu = 2 sqrt(T)/sigma

    def d(eps):
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta
    exact = optimize.brentq(d, 0.0, 100.0)
    lo, hi = sgm_replace_one_rounds(1.0, sigma, rounds=T).epsilon_bounds(delta)
    assert lo <= exact + 1e-9 and exact <= hi + 1e-9 and hi - lo < 0.01 * exact


@pytest.mark.parametrize("mu,w", [(0.9, 0.01), (0.5, 0.3), (2.0, 1.0), (0.05, 0.001)])
def test_replace_law_tails_match_the_mixture(mu, w):
    """The law's four tails at each loss, from its closed-form inverse, against the loss computed on a grid of x."""
    law = ReplaceLaw(mu, w)
    x = np.linspace(-8, 8, 41)
    b = math.log(w) - mu * mu / 2
    a = math.log1p(-w) if w < 1 else -math.inf
    v = np.logaddexp(a, b + mu * x) - np.logaddexp(a, b - mu * x)
    q_le, q_gt, p_le, p_gt = law.log4(v)
    want_q = (1 - w) * stats.norm.cdf(x) + w * stats.norm.cdf(x - mu)
    want_p = (1 - w) * stats.norm.cdf(x) + w * stats.norm.cdf(x + mu)
    assert np.allclose(np.exp(q_le), want_q, rtol=1e-9, atol=1e-13)
    assert np.allclose(np.exp(p_le), want_p, rtol=1e-9, atol=1e-13)
    assert np.allclose(np.exp(q_gt), 1 - want_q, rtol=1e-6, atol=1e-13)
    assert np.allclose(np.exp(p_gt), 1 - want_p, rtol=1e-6, atol=1e-13)


def test_replace_one_monte_carlo_one_round():
    """One round of the pair, sampled: E_P[(1 - e^{eps - L})_+] agrees with the composition's delta bracket."""
    q, sigma = 0.2, 0.8
    mu = 1 / sigma
    rng = np.random.default_rng(5)
    k = 400_000
    x = rng.standard_normal(k) + np.where(rng.random(k) < q, mu, 0.0)  # draws from Q
    b = math.log(q) - mu * mu / 2
    L = np.logaddexp(math.log1p(-q), b + mu * x) - np.logaddexp(math.log1p(-q), b - mu * x)
    comp = sgm_replace_one_rounds(q, sigma, rounds=1)
    for eps in (0.5, 1.0):
        vals = np.maximum(1 - np.exp(eps - L), 0)
        lo, hi = comp.delta_bounds(np.array([eps]))
        assert lo[0] - 4 * vals.std() / math.sqrt(k) <= vals.mean() <= hi[0] + 4 * vals.std() / math.sqrt(k)
