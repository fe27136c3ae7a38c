"""Multi-round upper bounds of the mechanisms and the SGM claim composed (Section 7, Figure 7).

The T-round upper bounds (Theorems 3.8, 3.10, A.4 composed; Theorem A.6) with
:func:`rounds_upper_bound` choosing the one of a mechanism, the SGM claim ``f_q^{⊗T}``
composed numerically (:func:`sgm_claim_rounds`), and the exact-versus-CLT comparison
(THEORY.md §8). The chi-square bounds are exact (:class:`~paperlib.fdp.chisquare.Chi2Pair`);
every numerical composition (the SGM claim, the ASGM bound of Eq. 14, FEASGM when its floors
agree) goes through one engine, :mod:`paperlib.fdp.pld` (dp_accounting's PLD), and carries its
error bracket ``epsilon_bounds(delta)``. The accountants' epsilons are in
:mod:`paperlib.mechanisms.claimed`, the certified composition of the guarantee in
:mod:`paperlib.mechanisms.certified`, and the dispatch over mechanisms, bounds and rounds in
:mod:`paperlib.mechanisms.curves` (which imports this module; this module imports neither).
"""

from __future__ import annotations

import numpy as np

from paperlib.fdp.chisquare import Chi2Pair, DilutedFamily
from paperlib.fdp.gaussian import IdentityFamily
from paperlib.fdp.pld import (DEFAULT_MAX_LENGTH, DEFAULT_REL_TOL, ROUND_TAIL, Chi2Law, DilutedLaw, PLDComposition, ReplaceLaw,
                              RoundLaw, ShiftLaw)
from paperlib.fdp.mixture import LRMixture
from paperlib.mechanisms import clt as mclt
from paperlib.mechanisms.core import Mechanism, feasgm_floors
from paperlib.mechanisms.guarantees import asgm_bound_weight
from paperlib.mechanisms.setting import checked
from paperlib.fdp.validation import ParameterError, check_alpha_array, check_int, check_positive, check_rate

__all__ = [
    "sgm_replace_one_rounds",
    "easgm_rounds_upper_bound",
    "feasgm_rounds_upper_bound",
    "asgm_upper_bound_pair",
    "asgm_rounds_upper_bound",
    "rounds_upper_bound",
    "sgm_claim_rounds",
    "exact_vs_clt",
]


# =============================================================================== T-round bounds
def _identity(label, meta):
    return LRMixture([IdentityFamily(1.0)], label=label, meta=meta)


def easgm_rounds_upper_bound(N: int, q: float | None, sigma: float | None, n: int, *, rounds: int):
    """EASGM upper bound over ``T`` rounds: ``T(P^{⊗T(n-1)}, Q_N^{⊗T(n-1)})`` exactly.

    Theorem 3.8 per round, composed (Theorem A.6's argument; Corollary B.2 draws its CLT
    bound). ``N >= 1``, ``n >= 1`` (``n = 1``: identity), ``rounds >= 1``; ``q`` and
    ``sigma`` do not enter the bound (``None`` allowed, validated when given).
    Returns a :class:`Chi2Pair` (or the identity as an LRMixture when ``n = 1``).
    """
    N, n, T = checked(N=N, n=n, rounds=rounds)
    if q is not None:
        check_rate(q)
    if sigma is not None:
        check_positive(sigma, "sigma")
    meta = {"mechanism": "easgm", "bound": "upper", "N": N, "n": n, "rounds": T}
    label = f"EASGM upper bound, {T} round{'s' if T > 1 else ''}"
    if n == 1:
        return _identity(label, meta)
    return Chi2Pair(T * (n - 1), float(N), label=label, meta=meta)


def feasgm_rounds_upper_bound(N: int, q: float, sigma: float | None, n: int, *, rounds: int, **pld_options):
    """FEASGM upper bound over ``T`` rounds (Theorems A.4, A.6; Figure 7).

    When ``K = floor(N q) != floor((N + 1) q)``: ``T(P^{⊗T(n-1)}, Q_K^{⊗T(n-1)})`` exactly
    (a :class:`Chi2Pair`, ``meta['case'] = 'floors differ'``). When the floors agree,
    FEASGM is SGM divided by a constant and its T-round trade-off is ``f_q^{⊗T}``, returned
    as the upper side of :func:`sgm_claim_rounds` (needs ``sigma``).

    Raises ValueError naming the parameter on bad input, when ``floor(N q) = 0``
    (division by zero in Opacus), or when the floors agree and ``sigma`` is missing.
    Normalisers are computed as Opacus does (:func:`paperlib.mechanisms.core.feasgm_floors`).
    """
    N, n, T = checked(N=N, n=n, rounds=rounds)
    q = check_rate(q)
    K, K1 = feasgm_floors(N, q)
    Mechanism.FEASGM.require_defined(N, q)
    meta = {"mechanism": "feasgm", "bound": "upper", "N": N, "q": q, "n": n, "rounds": T, "K": K, "K_prime": K1}
    if K == K1:
        if sigma is None:
            raise ParameterError("sigma", "sigma is needed when floor(N q) = floor((N+1) q): the bound is then the SGM claim")
        view = sgm_claim_rounds(q, sigma, rounds=T, side="upper", **pld_options)
        view.meta.update(meta, case="floors agree")
        view.label = f"FEASGM, floors agree: SGM f_q^(x{T})"
        return view
    meta["case"] = "floors differ"
    label = f"FEASGM upper bound, {T} round{'s' if T > 1 else ''}"
    if n == 1:
        return _identity(label, meta)
    return Chi2Pair(T * (n - 1), float(K), label=label, meta=meta)


def asgm_upper_bound_pair(N: int, q: float, sigma: float | None, n: int) -> LRMixture:
    """The one-round ASGM bound (Eq. 14) as the exact pair ``(P, (1-w)P + wQ)``.

    Same function as :func:`paperlib.mechanisms.guarantees.asgm_upper_bound` (which adds the two
    parts pointwise), but as a likelihood-ratio family, so it can be composed and its
    profile is exact. ``w = q - q (1-q)^N`` (:func:`~paperlib.mechanisms.guarantees.asgm_bound_weight`);
    base ``T(P^{⊗(n-1)}, Q_N^{⊗(n-1)})``; ``sigma`` does not enter (``None`` allowed).
    """
    N = check_int(N, "N", 1)
    q = check_rate(q)
    n = check_int(n, "n", 1)
    w = asgm_bound_weight(N, q)
    meta = {"mechanism": "asgm", "bound": "upper", "N": N, "q": q, "n": n, "weight_chi2": w}
    if n == 1 or w <= 0:
        return _identity("ASGM upper bound (Eq. 14)", meta)
    fam = DilutedFamily(Chi2Pair(n - 1, float(N)), w)
    return LRMixture([fam], label="ASGM upper bound (Eq. 14)", meta=meta)


def asgm_rounds_upper_bound(N: int, q: float, sigma: float | None, n: int, *, rounds: int, step: float | None = None,
                            tail: float = ROUND_TAIL, max_length: int = DEFAULT_MAX_LENGTH,
                            rel_tol: float = DEFAULT_REL_TOL) -> PLDComposition:
    """ASGM upper bound over ``T`` rounds: the Eq. 14 bound composed numerically.

    The paper stops at one round for ASGM (Section 7). Eq. 14 is the trade-off of the
    pair ``(P, (1-w)P + wQ)`` (:class:`~paperlib.fdp.pld.DilutedLaw` of the chi-square pair
    ``T(P^{⊗(n-1)}, Q_N^{⊗(n-1)})``), so ``f̄^{⊗T}`` is that pair's T-fold product, composed by
    :class:`~paperlib.fdp.pld.PLDComposition` on its ``bound`` side: the curve is never below
    ``f̄^{⊗T}`` and ``epsilon`` never above its epsilon; ``epsilon_bounds(delta)`` gives the
    bracket, ``max_error()`` the curve's.

    Parameters: ``N >= 1``, ``q`` in (0, 1], ``n >= 1``, ``rounds >= 1``; ``step``, ``tail``,
    ``max_length`` (largest PMF length) and ``rel_tol`` as in :class:`~paperlib.fdp.pld.PLDComposition`.
    Raises ValueError on bad input.
    """
    N, n, T = checked(N=N, n=n, rounds=rounds)
    q = check_rate(q)
    w = asgm_bound_weight(N, q)
    meta = {"mechanism": "asgm", "bound": "upper", "N": N, "q": q, "n": n, "rounds": T, "weight_chi2": w,
            "method": "PLD composition of the Eq. 14 pair (dp_accounting)"}
    label = f"ASGM upper bound, {T} round{'s' if T > 1 else ''} (PLD)"
    if n == 1 or w <= 0:
        law, T = RoundLaw([(1.0, ())]), 1
    else:
        law = RoundLaw([(1.0, (DilutedLaw(Chi2Law(n - 1, float(N)), w),))])
    return PLDComposition(law, T, side="bound", label=label, meta=meta, step=step, tail=tail, max_length=max_length, rel_tol=rel_tol)


def sgm_claim_rounds(q: float, sigma: float, *, rounds: int, side: str = "lower", step: float | None = None,
                     tail: float = ROUND_TAIL, max_length: int = DEFAULT_MAX_LENGTH,
                     rel_tol: float = DEFAULT_REL_TOL) -> PLDComposition:
    """The SGM claim ``f_q^{⊗T}`` (Bu et al. 2020, composed) by :class:`~paperlib.fdp.pld.PLDComposition`.

    ``f_q = T(P, (1-q)P + q G)`` is the pair :class:`~paperlib.fdp.pld.DilutedLaw` of ``G_{1/sigma}``.
    ``side='lower'`` (default): the curve never overstates the claim and ``epsilon`` never
    understates it (the upper end of ``epsilon_bounds``): a valid T-round guarantee of SGM, the
    conservative side when the claim is compared with an upper bound. ``side='upper'``: the other
    end (used when ``f_q^{⊗T}`` is itself an upper bound, FEASGM with agreeing floors).
    ``q`` in (0, 1], ``sigma > 0``, ``rounds >= 1``. Tested against dp_accounting's own
    ``from_gaussian_mechanism(sigma, sampling_prob=q)`` (within 1 % at 200 to 10,000 rounds).
    """
    q = check_rate(q)
    sigma = check_positive(sigma, "sigma")
    T = check_int(rounds, "rounds", 1)
    if side not in ("lower", "upper"):
        raise ValueError(f"side must be 'upper' or 'lower', got {side!r}")
    meta = {"mechanism": "sgm", "bound": "claim", "q": q, "sigma": sigma, "rounds": T,
            "method": "PLD composition of f_q (dp_accounting)"}
    label = f"SGM claim f_q^(x{T}) (PLD)"
    law = RoundLaw([(1.0, (DilutedLaw(ShiftLaw(1.0 / sigma), q),))])
    return PLDComposition(law, T, side="guarantee" if side == "lower" else "bound", label=label, meta=meta,
                          step=step, tail=tail, max_length=max_length, rel_tol=rel_tol)


def sgm_replace_one_rounds(q: float, sigma: float, *, rounds: int, rel_tol: float = DEFAULT_REL_TOL,
                           **pld_options) -> PLDComposition:
    """SGM over ``T`` rounds under the replace-one (substitution) relation, the data-set size public (THEORY.md
    §11.3d): the pair ``(1-q) N(0,1) + q N(-1/sigma, 1)`` vs ``(1-q) N(0,1) + q N(1/sigma, 1)`` composed
    (:class:`~paperlib.fdp.pld.ReplaceLaw`, both orders; the upper end of ``epsilon_bounds`` is valid). With ``q``,
    the normaliser and ``T`` fixed by the public size, EASGM and FEASGM are SGM post-processed, so this is their
    exact epsilon under replace-one. Tested against dp_accounting's ``NeighboringRelation.REPLACE_ONE``
    (``from_gaussian_mechanism(sigma, sensitivity=1, sampling_prob=q)``) and, at ``q = 1``, the Gaussian
    mechanism with sensitivity 2. ``q`` in (0, 1], ``sigma > 0``, ``rounds >= 1``."""
    q = check_rate(q)
    sigma = check_positive(sigma, "sigma")
    T = check_int(rounds, "rounds", 1)
    meta = {"mechanism": "sgm", "relation": "replace-one", "q": q, "sigma": sigma, "rounds": T,
            "method": "PLD composition of the replace-one pair (dp_accounting PMFs)"}
    return PLDComposition(RoundLaw([(1.0, (ReplaceLaw(1.0 / sigma, q),))]), T, side="guarantee",
                          label=f"SGM under replace-one, {T} round{'s' * (T > 1)} (PLD)", meta=meta, rel_tol=rel_tol,
                          **pld_options)


def rounds_upper_bound(mechanism: Mechanism | str, N: int, q: float, sigma: float, n: int, *, rounds: int,
                       **pld_options):
    """The T-round upper bound of ``mechanism``'s guarantee (``T >= 1``; Theorems 3.8, 3.10, A.4, A.6).

    EASGM and FEASGM exact (:func:`easgm_rounds_upper_bound`, :func:`feasgm_rounds_upper_bound`:
    chi-square pairs with ``T (n-1)`` coordinates; FEASGM with agreeing floors ``f_q^{⊗T}``), ASGM
    numerical (:func:`asgm_rounds_upper_bound`), SGM its own claim ``f_q^{⊗T}`` on its upper side.
    ``pld_options`` go to the numerical compositions (ignored by the exact ones). ``sigma > 0`` is
    required (it is the claim's noise where the floors agree). Raises ValueError naming the parameter.
    """
    spec = Mechanism.parse(mechanism).spec
    if spec.sgm_always:
        return sgm_rounds_upper_bound(N, q, sigma, n, rounds=rounds, **pld_options)
    check_positive(sigma, "sigma")
    return spec.computation("rounds_upper")(N, q, sigma, n, rounds=rounds, **pld_options)


def easgm_rounds_upper(N: int, q: float, sigma: float, n: int, *, rounds: int, **pld_options):
    """:func:`easgm_rounds_upper_bound` as the table of mechanisms calls it: ``q`` required, the PLD options of
    a numerical composition ignored (the bound is exact)."""
    return easgm_rounds_upper_bound(N, check_rate(q), sigma, n, rounds=rounds)


def sgm_rounds_upper_bound(N: int, q: float, sigma: float, n: int, *, rounds: int, **pld_options):
    """SGM's T-round upper bound: its own claim ``f_q^{⊗T}`` on its upper side (``N`` and ``n`` not used)."""
    return sgm_claim_rounds(q, sigma, rounds=rounds, side="upper", **pld_options)


def exact_vs_clt(mechanism: Mechanism | str, N: int, q: float | None, sigma: float | None, n: int, *, rounds: int,
                 alpha) -> dict:
    """Exact T-round chi-square bound and the CLT bound side by side (THEORY.md §8).

    Parameters
    ----------
    mechanism : 'easgm' (``s = N/(N+1)``, Theorem 3.13 / Corollary B.2) or 'feasgm'
        (``s = K/(K+1)``, Theorem A.7; needs ``q`` and differing floors)
    N, n (>= 2), rounds : ints; ``q`` (FEASGM only) and ``sigma`` (unused) may be ``None``
    alpha : array_like in [0, 1]

    Returns
    -------
    dict with ``alpha`` (array), ``exact`` (array), ``clt`` (array, NaN outside
    ``[gamma, 1-gamma]``), ``gap = clt - exact`` (>= 0 where defined), ``mu``, ``gamma``,
    ``m = rounds (n - 1)``, ``x``.
    """
    a = check_alpha_array(alpha)
    N, n, T = checked(N=N, n=n, rounds=rounds)
    if n < 2:
        raise ParameterError("n", f"n must be >= 2 for the CLT bound, got {n}")
    try:
        theorem = Mechanism.parse(mechanism).spec.clt
    except ValueError:
        theorem = None
    if theorem == "3.13":
        pair = easgm_rounds_upper_bound(N, q, sigma, n, rounds=T)
        res = mclt.clt_upper_bound_easgm(a, N, n, rounds=T)
    elif theorem == "A.7":
        if q is None:
            raise ParameterError("q", f"q is needed for mechanism {mechanism}")
        pair = feasgm_rounds_upper_bound(N, q, None, n, rounds=T)  # raises when the floors agree (no sigma)
        res = mclt.clt_upper_bound_feasgm(a, N, q, n, rounds=T)
    else:
        raise ParameterError("mechanism", f"mechanism must be 'easgm' or 'feasgm' for the CLT bound, got {mechanism!r}")
    exact = pair(a)
    upper = np.asarray(res.upper, dtype=float)
    return {"alpha": a, "exact": exact, "clt": upper, "gap": upper - exact, "mu": res.mu, "gamma": res.gamma,
            "m": pair.m, "x": pair.x}
