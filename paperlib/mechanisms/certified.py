"""Certified T-round guarantee of DP-SGD as it is computed (THEORY.md §11).

The worst-case per-pair guarantee ``f`` of one round (THEORY.md §6: Theorem 3.6 for EASGM,
Theorems A.2/A.3 for FEASGM, the reconstructed ASGM statement; index revealed) holds for every
set of clipped gradients, hence at every round whatever the model state, so ``T`` rounds are
``f^{⊗T}``-DP for the ordered pair ``(D, D')`` (Dong, Roth, Su 2022, Theorem 4 and its adaptive
form); hiding the index is post-processing. This module composes ``f`` over ``T`` rounds with
:mod:`paperlib.fdp.pld` (both orders of the pair, pessimistic discretisation, the bracket of the
accountant's error reported) and puts it next to what the upper bounds of the guarantee force:

* :func:`certified_guarantee` — ``f^{⊗T}`` for the pair of sizes ``(N, N+1)``: its ``epsilon(delta)``
  is a valid upper bound of the run's privacy loss (never understated), ``epsilon_bounds(delta)``
  the accountant's bracket. SGM: its own claim ``f_q^{⊗T}``. FEASGM whose floors agree on the pair
  (``floor(N q) = floor((N+1) q)``): SGM divided by a constant, so the SGM result.
* :func:`certified_interval` — ``eps_cert`` and ``eps_forced``: the epsilon that the T-round upper
  bound of the guarantee (Theorems 3.8, 3.10, A.4 composed:
  :func:`~paperlib.mechanisms.multiround.rounds_upper_bound`) forces, the lower end of its bracket. "The mechanism you ran is
  ``(eps_cert, delta)``-DP for pairs of these sizes; no analysis of it can certify less than
  ``eps_forced``."
* :func:`certified_for_training_set` — both neighbours of a training set of ``N_train`` records:
  removal (sizes ``N_train - 1, N_train``) and addition (``N_train, N_train + 1``).

Note. With the index revealed, the adversary sees in which rounds the added point was sampled,
so the composition of ``f`` does not enjoy the amplification by subsampling that the SGM claim
(index hidden) has: for EASGM and ASGM ``eps_cert`` is much larger than the SGM claim even where
the upper bound forces a smaller epsilon. Both numbers are valid; the truth lies between them.
"""

from __future__ import annotations

import math

from paperlib.fdp.pld import DEFAULT_REL_TOL, PLDComposition, round_law_from_mixture
from paperlib.mechanisms.core import Mechanism, feasgm_floors
from paperlib.mechanisms.guarantees import DEFAULT_TAIL_TOL, guarantee
from paperlib.mechanisms.multiround import rounds_upper_bound, sgm_claim_rounds
from paperlib.fdp.validation import check_delta, check_int, check_positive, check_rate

__all__ = ["certified_guarantee", "certified_interval", "forced_epsilon", "certified_for_training_set"]


def _check(N, q, sigma, n, rounds):
    return (check_int(N, "N", 1), check_rate(q), check_positive(sigma, "sigma"), check_int(n, "n", 1),
            check_int(rounds, "rounds", 1))


def certified_guarantee(mechanism: Mechanism | str, N: int, q: float, sigma: float, n: int, *, rounds: int,
                        rel_tol: float = DEFAULT_REL_TOL, **pld_options) -> PLDComposition:
    """The certified ``T``-round guarantee ``f^{⊗T}`` of ``mechanism`` for pairs of sizes ``(N, N+1)``.

    Parameters
    ----------
    mechanism : a :class:`~paperlib.mechanisms.core.Mechanism` or its name (sgm, easgm, feasgm, asgm)
    N : int >= 1 (``|D|``; ``|D'| = N + 1``); q : sampling rate in (0, 1]; sigma : noise multiplier > 0;
    n : int >= 1, number of parameters; rounds : int >= 1
    rel_tol, **pld_options : accuracy target and grid options of :class:`~paperlib.fdp.pld.PLDComposition`

    Returns a :class:`~paperlib.fdp.pld.PLDComposition` on its guarantee side: ``epsilon(delta)``
    (upper end: valid, never understated), ``epsilon_bounds(delta)``, ``delta(eps)``, ``f(alpha)`` (a
    lower bound of the composed trade-off ``T(P, Q)`` of the ordered pair), ``curve()``, ``meta``
    (mechanism, case, and ``meta['pld']``: grid, tail masses, passes, accuracy met).

    The per-round mixture is that of :func:`~paperlib.mechanisms.guarantees.guarantee`, with its
    binomial truncation set to ``max(1e-15, min(1e-12, 1e-13 / rounds))`` (dropped mass counts as
    perfectly distinguishable, i.e. adds ``rounds * tail_tol`` to ``delta``). Raises ValueError naming the parameter on bad input, and for FEASGM with
    ``floor(N q) = 0`` (division by zero).
    """
    mech = Mechanism.parse(mechanism)
    N, q, sigma, n, T = _check(N, q, sigma, n, rounds)
    meta = {"mechanism": mech.value, "bound": "certified", "N": N, "q": q, "sigma": sigma, "n": n, "rounds": T,
            "pair": [N, N + 1]}
    plural = "s" if T > 1 else ""
    if mech is Mechanism.FEASGM:
        mech.require_defined(N, q)
        K, K1 = feasgm_floors(N, q)
        meta.update(K=K, K_prime=K1, case="floors agree" if K == K1 else "floors differ")
    if mech is Mechanism.SGM or meta.get("case") == "floors agree":
        c = sgm_claim_rounds(q, sigma, rounds=T, side="lower", rel_tol=rel_tol, **pld_options)
        c.meta.update(meta)
        c.label = (f"SGM f_q^(x{T}) (certified, PLD)" if mech is Mechanism.SGM
                   else f"FEASGM certified, {T} round{plural} (floors agree: SGM f_q^(x{T}))")
        return c
    # dropped binomial mass counts as +inf loss in every round: keep T * tail_tol far below delta;
    # not below 1e-15 (scipy's binom.isf returns N for tails under ~1e-16)
    tail_tol = max(1e-15, min(DEFAULT_TAIL_TOL, 1e-13 / T))
    one = guarantee(mech, N, q, sigma, n, tail_tol=tail_tol)
    meta["binomial_dropped_per_round"] = float(getattr(one, "dropped_mass", 0.0))
    law = round_law_from_mixture(one)
    return PLDComposition(law, T, side="guarantee", rel_tol=rel_tol,
                          label=f"{mech.title} certified guarantee, {T} round{plural} (PLD)", meta=meta, **pld_options)


def certified_interval(mechanism: Mechanism | str, N: int, q: float, sigma: float, n: int, *, rounds: int,
                       delta: float, rel_tol: float = DEFAULT_REL_TOL, **pld_options) -> dict:
    """``eps_cert`` (the certified T-round epsilon) and ``eps_forced`` (what the T-round upper bound forces).

    For the pair of sizes ``(N, N+1)`` at ``delta``: ``epsilon_certified`` is the upper end of the
    certified composition's bracket (a valid upper bound of the run's privacy loss);
    ``epsilon_forced`` the lower end of the bracket of the T-round upper bound's epsilon
    (Theorems 3.8, A.4 composed exactly, Theorem 3.10 composed by PLD; for SGM and for FEASGM with
    agreeing floors the SGM composition itself), so ``epsilon_forced <= true epsilon <=
    epsilon_certified``. Returns a dict with both, their brackets and accountant errors
    (``*_accounting_error = hi - lo``), whether the accuracy target was met, the case (FEASGM),
    a one-sentence ``statement`` and the parameters.
    """
    mech = Mechanism.parse(mechanism)
    N, q, sigma, n, T = _check(N, q, sigma, n, rounds)
    delta = check_delta(delta)
    cert = certified_guarantee(mech, N, q, sigma, n, rounds=T, rel_tol=rel_tol, **pld_options)
    c_lo, c_hi = cert.epsilon_bounds(delta)
    forced = forced_epsilon(mech, N, q, sigma, n, rounds=T, delta=delta, certified=cert, rel_tol=rel_tol,
                            **pld_options)
    f_lo, f_hi = forced["epsilon_forced_bracket"]
    out = {"mechanism": mech.value, "N": N, "pair": [N, N + 1], "q": q, "sigma": sigma, "n": n, "rounds": T,
           "delta": delta,
           "epsilon_certified": c_hi, "epsilon_certified_bracket": [c_lo, c_hi],
           "certified_accounting_error": _err(c_lo, c_hi),
           "epsilon_forced": f_lo, "epsilon_forced_bracket": [f_lo, f_hi],
           "forced_accounting_error": _err(f_lo, f_hi), "forced_method": forced["forced_method"],
           "accuracy_met": cert.meta.get("pld", {}).get("accuracy_met"),
           "certified_label": cert.label, "forced_label": forced["forced_label"],
           "certified_grid": cert.meta.get("pld", {}).get("step")}
    for k in ("case", "K", "K_prime"):
        if k in cert.meta:
            out[k] = cert.meta[k]
    out["statement"] = (f"{mech.title} over {T} round{'s' if T > 1 else ''} is ({_fmt(c_hi)}, {delta:g})-DP for "
                        f"datasets of sizes {N} and {N + 1}; no analysis of it can certify an epsilon below "
                        f"{_fmt(f_lo)} at this delta.")
    return out


def forced_epsilon(mechanism: Mechanism | str, N: int, q: float, sigma: float, n: int, *, rounds: int, delta: float,
                   certified: PLDComposition | None = None, rel_tol: float = DEFAULT_REL_TOL, **pld_options) -> dict:
    """The epsilon that the T-round upper bound of the guarantee forces, for the pair ``(N, N+1)``.

    EASGM (Theorem 3.8) and FEASGM with differing floors (Theorem A.4) composed exactly (chi-square
    pair with ``T (n-1)`` coordinates); ASGM (Theorem 3.10, Eq. 14) composed by PLD, the lower end of
    its bracket; SGM and FEASGM with agreeing floors: the SGM composition itself (``certified``
    when given, so it is not computed twice). Returns ``{"epsilon_forced": lo,
    "epsilon_forced_bracket": [lo, hi], "forced_method": ..., "forced_label": ...}``.
    """
    mech = Mechanism.parse(mechanism)
    N, q, sigma, n, T = _check(N, q, sigma, n, rounds)
    delta = check_delta(delta)
    agree = mech is Mechanism.FEASGM and feasgm_floors(N, q)[0] == feasgm_floors(N, q)[1]
    if mech is Mechanism.SGM or agree:
        if certified is None:
            certified = certified_guarantee(mech, N, q, sigma, n, rounds=T, rel_tol=rel_tol, **pld_options)
        bound = certified.view("bound", label=f"{certified.label} (its own upper bound)")  # the same composition
    elif _exact_upper(mech, N, q):
        bound = rounds_upper_bound(mech, N, q, sigma, n, rounds=T)
    else:
        bound = rounds_upper_bound(mech, N, q, sigma, n, rounds=T, rel_tol=rel_tol, **pld_options)
    lo, hi = bound.epsilon_bounds(delta)
    method = "PLD (lower end of its bracket)" if bound.accounting() is not None else "exact chi-square"
    return {"epsilon_forced": lo, "epsilon_forced_bracket": [lo, hi], "forced_method": method,
            "forced_label": getattr(bound, "label", "")}


def _exact_upper(mech: Mechanism, N: int, q: float) -> bool:
    """True when the T-round upper bound is an exact chi-square pair (takes no PLD options)."""
    if mech is Mechanism.FEASGM:
        K, K1 = feasgm_floors(N, q)
        return K != K1
    return mech is Mechanism.EASGM


def _err(lo: float, hi: float) -> float | None:
    return float(hi - lo) if math.isfinite(hi) and math.isfinite(lo) else None


def _fmt(x: float) -> str:
    return f"{x:.4g}" if math.isfinite(x) else "inf"


def certified_for_training_set(mechanism: Mechanism | str, N_train: int, q: float, sigma: float, n: int, *,
                               rounds: int, delta: float = 1e-5, rel_tol: float = DEFAULT_REL_TOL,
                               **pld_options) -> dict:
    """Both neighbours of a training set of ``N_train`` records (THEORY.md §11).

    ``removal``: the pair of sizes ``(N_train - 1, N_train)``; ``addition``: ``(N_train, N_train + 1)``;
    each the dict of :func:`certified_interval` (or ``{"error": ...}`` where FEASGM divides by zero
    on that pair). ``epsilon_certified`` is the larger of the two (the run's certified epsilon
    for add/remove neighbours), ``epsilon_forced`` the larger forced epsilon.
    ``N_train >= 2``; other parameters as :func:`certified_guarantee`.
    """
    mech = Mechanism.parse(mechanism)
    N_train = check_int(N_train, "N_train", 2)
    delta = check_delta(delta)
    out = {"mechanism": mech.value, "N_train": N_train, "q": q, "sigma": sigma, "n": n, "rounds": rounds,
           "delta": delta}
    eps_c, eps_f = [], []
    for name, N in (("removal", N_train - 1), ("addition", N_train)):
        try:
            r = certified_interval(mech, N, q, sigma, n, rounds=rounds, delta=delta, rel_tol=rel_tol, **pld_options)
        except ValueError as exc:
            if mech is Mechanism.FEASGM and mech.divides_by_zero(N, q):
                out[name] = {"pair": [N, N + 1], "error": str(exc).splitlines()[0]}
                continue
            raise
        out[name] = r
        eps_c.append(r["epsilon_certified"])
        eps_f.append(r["epsilon_forced"])
    out["epsilon_certified"] = max(eps_c) if eps_c else None
    out["epsilon_forced"] = max(eps_f) if eps_f else None
    return out
