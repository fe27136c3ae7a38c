"""Certificates that keep the amplification by subsampling: ASGM through ``(|B|, S_B + G)`` and DPSUR's rule.

A certificate is a per-round pair that dominates the mechanism's pair for *every* set of clipped
gradients, so it composes over ``T`` adaptive rounds (Dong, Roth, Su 2022, Thm 4; dominating pairs:
Zhu, Dong, Wang 2022); each order of the pair is composed separately, the larger epsilon reported
(Lebeda, Regehr, Kamath, Steinke 2024). Revealing more than the release is post-processing in reverse:
a certificate of "release + extra" holds for the release. THEORY.md §11.2 and §11.4 give the proofs.

* :func:`asgm_count_law` / :func:`asgm_count_certificate` — ASGM's release ``(S_B + G)/max(|B|, 1)`` is a
  function of ``(|B|, S_B + G)``. Given ``|B| = m`` the pair is ``P_m`` vs ``(1 - gamma_m) P_m + gamma_m
  R_m`` with ``gamma_m = m/(N + 1)`` and ``R_m`` a mean shift of at most ``2C`` (coupling: replace a uniform
  member of the batch by the target); joint convexity and a rotation give the dominating pair
  ``N(0,1)`` vs ``(1 - gamma_m) N(0,1) + gamma_m N(2/sigma, 1)``, weighted by ``Bin(m; N, q)`` and
  ``Bin(m; N + 1, q)``: :class:`~paperlib.fdp.pld.IndexedDilutedLaw`. Its epsilon does not depend on
  the number of parameters ``n``. ``m = N + 1`` (only on ``D'``) is an outcome of infinite loss with
  mass ``q^{N+1}``: for small ``N`` the index-revealed certificate of THEORY.md §6 is smaller.
* :func:`dpsur_round_law` / :func:`dpsur_certificate` — DPSUR's release is a function of the separate
  draw's size ``|B'|`` (with the history) and ``M_2 = (none if B is empty else S_B + G)``, independent:
  the product of the count pair ``(Bin(N, q), Bin(N + 1, q))`` and ``M_2``'s pair; revealing whether
  ``B`` holds one of the ``N`` others (same law on both sides) splits ``M_2`` into the SGM pair
  ``(N(0,1), (1 - q) N(0,1) + q N(1/sigma, 1))`` and, when none is sampled, "no step" vs "no step or
  the target alone" (mass ``q`` of infinite loss).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from paperlib.fdp.pld import DEFAULT_REL_TOL, DilutedLaw, DiscreteLaw, IndexedDilutedLaw, PLDComposition, RoundLaw, \
    ShiftLaw
from paperlib.mechanisms.guarantees import binomial_pair
from paperlib.fdp.validation import ParameterError
from paperlib.mechanisms.setting import Setting

__all__ = ["asgm_count_law", "asgm_count_certificate", "count_law", "dpsur_round_law", "dpsur_certificate",
           "certificate_tail"]


def certificate_tail(rounds: int) -> float:
    """Binomial mass left out per round and side (counted as infinite loss on the upper end, so it adds at
    most ``rounds`` times this to ``delta``): ``min(1e-16, 1e-13 / rounds)``, far below the engine's
    smallest ``delta`` (1e-10)."""
    return min(1e-16, 1e-13 / rounds)


def asgm_count_law(N: int, q: float, sigma: float, tail: float = 1e-16) -> IndexedDilutedLaw:
    """ASGM's per-round dominating pair through ``(|B|, S_B + G)`` (THEORY.md §11.2).

    Privacy loss (``D'`` over ``D``) ``L(m, y) = log(1 - q) + log(1 + m/(N + 1 - m) exp(mu y - mu^2/2))``,
    ``mu = 2/sigma``; ``m ~ Bin(N, q)``, ``y ~ N(0, 1)`` on ``D``. Sizes beyond the binomial support at
    ``tail`` (and ``m = N + 1``) are outcomes of infinite loss on the upper end. ``N >= 1``, ``q`` in
    (0, 1), ``sigma > 0``.
    """
    k, p, pq, out_q, out_p = binomial_pair(N, q, tail)
    full = k == N + 1  # everyone sampled: only D' can (infinite loss)
    if full.any():
        everyone = float(np.sum(pq[full]))
    else:  # beyond the support: binomial_pair counted it in out_q
        everyone = float(stats.binom.pmf(N + 1, N + 1, q))
        out_q = max(out_q - everyone, 0.0)
    k, p = k[~full], p[~full]
    return IndexedDilutedLaw(math.log1p(-q), 2.0 / sigma, k / (N + 1.0 - k), p, q_inf=everyone, q_drop=out_q,
                             p_drop=out_p)


def asgm_count_certificate(setting: Setting, *, rel_tol: float = DEFAULT_REL_TOL, **pld_options) -> PLDComposition:
    """The certified ``T``-round guarantee of ASGM through ``(|B|, S_B + G)``, pair ``(N, N + 1)``; n-free
    (``setting``: a :class:`~paperlib.mechanisms.setting.Setting` with ``q < 1``; its ``n`` does not enter).

    A :class:`~paperlib.fdp.pld.PLDComposition` on its guarantee side: ``epsilon(delta)`` is a valid upper
    bound of the run's epsilon for every gradient configuration, ``epsilon_bounds(delta)`` the accountant's
    bracket. Check value (THEORY.md §11.2): ``N = 60,000``, ``q = 1/235``, ``sigma = 1.1``, one round,
    ``delta = 1e-5``: ``epsilon = 1.1295``.
    """
    N, q, sigma, T = setting.N, setting.q, setting.sigma, setting.rounds
    if q >= 1:
        raise ParameterError("q", f"q must be < 1 for this certificate (at q = 1 the batch size tells D' apart), got {q!r}")
    law = asgm_count_law(N, q, sigma, certificate_tail(T))
    meta = {"mechanism": "asgm", "bound": "certified", "certificate": "count revealed (|B|, S_B + G)", "N": N,
            "q": q, "sigma": sigma, "rounds": T, "pair": [N, N + 1], "sizes_kept": int(law.r.size),
            "infinite_mass_per_round": law.q_inf, "left_out_per_round": [law.q_drop, law.p_drop]}
    return PLDComposition(RoundLaw([(1.0, (law,))]), T, side="guarantee", rel_tol=rel_tol,
                          label=f"ASGM certified through (|B|, S_B + G), {T} round{'s' if T > 1 else ''} (PLD)",
                          meta=meta, **pld_options)


def count_law(N: int, q: float, tail: float = 1e-16) -> DiscreteLaw:
    """The pair ``(Bin(N, q), Bin(N + 1, q))``: the size of an independent Poisson draw from ``D`` and ``D'``.

    Loss ``log((1 - q)(N + 1)/(N + 1 - m))``; ``m = N + 1`` and sizes beyond the support at ``tail`` are
    outcomes only one side produces (infinite losses on the upper end).
    """
    k, p, pq, out_q, out_p = binomial_pair(N, q, tail)
    # m = N + 1 (only on D'): an atom with p = 0 (infinite loss) when kept, else left out with the tail
    return DiscreteLaw(pq, p, q_drop=out_q, p_drop=out_p)


def dpsur_round_law(N: int, q: float, sigma: float, tail: float = 1e-16) -> RoundLaw:
    """DPSUR's per-round dominating pair (THEORY.md §11.4): count ``⊗`` (SGM pair, or the empty case).

    With ``e = (1 - q)^N`` (no other record in the batch, the same on both sides): weight ``1 - e`` the SGM
    pair ``DilutedLaw(ShiftLaw(1/sigma), q)``; weight ``e`` the pair "no step" vs "no step (``1 - q``) or
    the target alone (``q``, infinite loss)". The count of the separate draw is a common factor of both,
    composed by its own ``T``-fold self-composition.
    """
    e = math.exp(N * math.log1p(-q)) if q < 1 else 0.0
    parts = [(1.0 - e, (DilutedLaw(ShiftLaw(1.0 / sigma), q),))]
    if e > 0:
        parts.append((e, (DiscreteLaw([1.0 - q, q], [1.0, 0.0]),)))  # the target alone: only D' (infinite)
    return RoundLaw(parts, common=(count_law(N, q, tail),))


def dpsur_certificate(setting: Setting, *, rel_tol: float = DEFAULT_REL_TOL, **pld_options) -> PLDComposition:
    """The certified ``T``-round guarantee of DPSUR's own rule for the pair ``(N, N + 1)`` (THEORY.md §11.4).

    Valid for every gradient configuration and any number of parameters (the release's dimension, the
    setting's ``n``, does not enter). ``setting``: a :class:`~paperlib.mechanisms.setting.Setting`.
    """
    N, q, sigma, T = setting.N, setting.q, setting.sigma, setting.rounds
    law = dpsur_round_law(N, q, sigma, certificate_tail(T))
    meta = {"mechanism": "dpsur", "bound": "certified", "certificate": "separate count x SGM step", "N": N,
            "q": q, "sigma": sigma, "rounds": T, "pair": [N, N + 1]}
    return PLDComposition(law, T, side="guarantee", rel_tol=rel_tol,
                          label=f"DPSUR certified (count of B' x SGM step), {T} round{'s' if T > 1 else ''} (PLD)",
                          meta=meta, **pld_options)
