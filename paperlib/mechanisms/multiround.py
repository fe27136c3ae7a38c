"""Multi-round bounds of the mechanisms and the accountants' claims (Section 7, Figure 7).

The T-round upper bounds (Theorems 3.8, 3.10, A.4 composed; Theorem A.6), the SGM claim
``f_q^{⊗T}`` composed numerically, the exact-versus-CLT comparison (THEORY.md §8) and the
Opacus accountants' epsilon (RDP, PRV) that DP-SGD users are shown. The chi-square bounds are
exact (:class:`~paperlib.fdp.composition.Chi2Pair`); every numerical composition (the SGM claim,
the ASGM bound of Eq. 14, FEASGM when its floors agree, and the certified guarantee of
:mod:`paperlib.mechanisms.certified`) goes through one engine, :mod:`paperlib.fdp.pld`
(dp_accounting's PLD), and carries its error bracket ``epsilon_bounds(delta)``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from paperlib.fdp.composition import Chi2Pair, DilutedFamily
from paperlib.fdp.gaussian import IdentityFamily
from paperlib.fdp.pld import (DEFAULT_MAX_LENGTH, DEFAULT_REL_TOL, ROUND_TAIL, Chi2Law, DilutedLaw, PLDComposition,
                              RoundLaw, ShiftLaw)
from paperlib.fdp.mixture import LRMixture
from paperlib.fdp.tradeoff import TradeOffCurve, eps_delta_tradeoff
from paperlib.mechanisms import clt as mclt
from paperlib.mechanisms.core import Mechanism, feasgm_floors
from paperlib.mechanisms.guarantees import asgm_bound_weight
from paperlib.fdp.validation import check_alpha_array, check_delta, check_int, check_positive, check_rate

__all__ = [
    "easgm_rounds_upper_bound",
    "feasgm_rounds_upper_bound",
    "asgm_upper_bound_pair",
    "asgm_rounds_upper_bound",
    "sgm_claim_rounds",
    "rounds_curve",
    "exact_vs_clt",
    "sgm_claim_epsilon",
    "claim_curve_from_accountant",
    "multiround_comparison",
]


# =============================================================================== T-round bounds
def _check_rounds_common(N, n, rounds):
    return check_int(N, "N", 1), check_int(n, "n", 1), check_int(rounds, "rounds", 1)


def _identity(label, meta):
    return LRMixture([IdentityFamily(1.0)], label=label, meta=meta)


def easgm_rounds_upper_bound(N: int, q: float | None, sigma: float | None, n: int, *, rounds: int):
    """EASGM upper bound over ``T`` rounds: ``T(P^{⊗T(n-1)}, Q_N^{⊗T(n-1)})`` exactly.

    Theorem 3.8 per round, composed (Theorem A.6's argument; Corollary B.2 draws its CLT
    bound). ``N >= 1``, ``n >= 1`` (``n = 1``: identity), ``rounds >= 1``; ``q`` and
    ``sigma`` do not enter the bound (``None`` allowed, validated when given).
    Returns a :class:`Chi2Pair` (or the identity as an LRMixture when ``n = 1``).
    """
    N, n, T = _check_rounds_common(N, n, rounds)
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
    N, n, T = _check_rounds_common(N, n, rounds)
    q = check_rate(q)
    K, K1 = feasgm_floors(N, q)
    Mechanism.FEASGM.require_defined(N, q)
    meta = {"mechanism": "feasgm", "bound": "upper", "N": N, "q": q, "n": n, "rounds": T, "K": K, "K_prime": K1}
    if K == K1:
        if sigma is None:
            raise ValueError("sigma is needed when floor(N q) = floor((N+1) q): the bound is then the SGM claim")
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


def _pld_kwargs(step, tail, max_fft, rel_tol) -> dict:
    """Options of :class:`~paperlib.fdp.pld.PLDComposition` (``max_fft`` is the old name of ``max_length``)."""
    return {"step": step, "tail": tail, "max_length": max_fft, "rel_tol": rel_tol}


def asgm_rounds_upper_bound(N: int, q: float, sigma: float | None, n: int, *, rounds: int, step: float | None = None,
                            tail: float = ROUND_TAIL, max_fft: int = DEFAULT_MAX_LENGTH,
                            rel_tol: float = DEFAULT_REL_TOL) -> PLDComposition:
    """ASGM upper bound over ``T`` rounds: the Eq. 14 bound composed numerically.

    The paper stops at one round for ASGM (Section 7). Eq. 14 is the trade-off of the
    pair ``(P, (1-w)P + wQ)`` (:class:`~paperlib.fdp.pld.DilutedLaw` of the chi-square pair
    ``T(P^{⊗(n-1)}, Q_N^{⊗(n-1)})``), so ``f̄^{⊗T}`` is that pair's T-fold product, composed by
    :class:`~paperlib.fdp.pld.PLDComposition` on its ``bound`` side: the curve is never below
    ``f̄^{⊗T}`` and ``epsilon`` never above its epsilon; ``epsilon_bounds(delta)`` gives the
    bracket, ``max_error()`` the curve's.

    Parameters: ``N >= 1``, ``q`` in (0, 1], ``n >= 1``, ``rounds >= 1``; ``step``, ``tail``,
    ``max_fft`` (largest PMF length) and ``rel_tol`` as in :class:`~paperlib.fdp.pld.PLDComposition`.
    Raises ValueError on bad input.
    """
    N, n, T = _check_rounds_common(N, n, rounds)
    q = check_rate(q)
    w = asgm_bound_weight(N, q)
    meta = {"mechanism": "asgm", "bound": "upper", "N": N, "q": q, "n": n, "rounds": T, "weight_chi2": w,
            "method": "PLD composition of the Eq. 14 pair (dp_accounting)"}
    label = f"ASGM upper bound, {T} round{'s' if T > 1 else ''} (PLD)"
    if n == 1 or w <= 0:
        law, T = RoundLaw([(1.0, ())]), 1
    else:
        law = RoundLaw([(1.0, (DilutedLaw(Chi2Law(n - 1, float(N)), w),))])
    return PLDComposition(law, T, side="bound", label=label, meta=meta, **_pld_kwargs(step, tail, max_fft, rel_tol))


def sgm_claim_rounds(q: float, sigma: float, *, rounds: int, side: str = "lower", step: float | None = None,
                     tail: float = ROUND_TAIL, max_fft: int = DEFAULT_MAX_LENGTH,
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
                          **_pld_kwargs(step, tail, max_fft, rel_tol))


def rounds_curve(mechanism: Mechanism | str, bound: str, N: int, q: float, sigma: float, n: int, *, rounds: int,
                 progress=None, **pld_options):
    """The T-round curve behind ``python -m paperlib ... --rounds T`` (``T >= 1``).

    ``bound='upper'``: EASGM/FEASGM exact (:class:`Chi2Pair`), ASGM numerical
    (:func:`asgm_rounds_upper_bound`), SGM its own claim ``f_q^{⊗T}`` (upper side).
    ``bound='guarantee'``: SGM ``f_q^{⊗T}`` (lower side); EASGM, FEASGM, ASGM the certified T-round
    guarantee (:func:`paperlib.mechanisms.certified.certified_guarantee`, pair ``(N, N+1)``).
    Every returned object has ``obj(alpha)``, ``obj.epsilon(delta)``, ``label``, ``meta``; the
    numerical ones also ``epsilon_bounds(delta)`` (their error bracket). ``progress`` (None, True,
    False or a callable ``fn(done, total)``; :mod:`paperlib.fdp.progress`) sets the progress bar of
    a PLD composition's grid passes (None: shown on a terminal's stderr only).
    """
    curve = _rounds_curve(mechanism, bound, N, q, sigma, n, rounds=rounds, **pld_options)
    # a PLD composition draws a bar for each grid pass (paperlib.fdp.progress): None = on a terminal only
    if progress is not None and hasattr(type(curve), "progress"):
        curve.progress = progress
    return curve


def _rounds_curve(mechanism: Mechanism | str, bound: str, N: int, q: float, sigma: float, n: int, *, rounds: int,
                  **pld_options):
    mechanism = Mechanism.parse(mechanism)
    if bound not in ("upper", "guarantee"):
        raise ValueError(f"bound must be 'upper' or 'guarantee' here, got {bound!r}")
    if mechanism == "sgm":
        side = "upper" if bound == "upper" else "lower"
        return sgm_claim_rounds(q, sigma, rounds=rounds, side=side, **pld_options)
    if bound == "guarantee":
        from paperlib.mechanisms.certified import certified_guarantee

        return certified_guarantee(mechanism, N, q, sigma, n, rounds=rounds, **pld_options)
    if mechanism == "easgm":
        check_rate(q)
        check_positive(sigma, "sigma")
        return easgm_rounds_upper_bound(N, q, sigma, n, rounds=rounds)
    if mechanism == "feasgm":
        check_positive(sigma, "sigma")
        return feasgm_rounds_upper_bound(N, q, sigma, n, rounds=rounds, **pld_options)
    check_positive(sigma, "sigma")
    return asgm_rounds_upper_bound(N, q, sigma, n, rounds=rounds, **pld_options)


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
    N, n, T = _check_rounds_common(N, n, rounds)
    if n < 2:
        raise ValueError(f"n must be >= 2 for the CLT bound, got {n}")
    if mechanism == "easgm":
        pair = easgm_rounds_upper_bound(N, q, sigma, n, rounds=T)
        res = mclt.clt_upper_bound_easgm(a, N, n, rounds=T)
    elif mechanism == "feasgm":
        if q is None:
            raise ValueError("q is needed for mechanism feasgm")
        pair = feasgm_rounds_upper_bound(N, q, None, n, rounds=T)  # raises when the floors agree (no sigma)
        res = mclt.clt_upper_bound_feasgm(a, N, q, n, rounds=T)
    else:
        raise ValueError(f"mechanism must be 'easgm' or 'feasgm' for the CLT bound, got {mechanism!r}")
    exact = pair(a)
    upper = np.asarray(res.upper, dtype=float)
    return {"alpha": a, "exact": exact, "clt": upper, "gap": upper - exact, "mu": res.mu, "gamma": res.gamma,
            "m": pair.m, "x": pair.x}


# =============================================================================== accountants
def _opacus_version() -> str:
    try:
        import opacus

        return str(getattr(opacus, "__version__", "unknown"))
    except ImportError:  # pragma: no cover
        return "not installed"


def sgm_claim_epsilon(q: float, sigma: float, *, rounds: int, delta: float, accountant: str = "rdp", **kwargs) -> float:
    """Epsilon of the SGM claim over ``T`` rounds, as an accountant reports it.

    Parameters
    ----------
    q : float in (0, 1], sampling rate; sigma : float > 0, noise multiplier;
    rounds : int >= 1; delta : float in (0, 1)
    accountant :
        ``'rdp'`` — Opacus's ``RDPAccountant`` (``history = [(sigma, q, rounds)]``, its
        default orders, Balle et al. 2020 conversion); the paper's Figure 7 baseline.
        ``'prv'`` — Opacus's ``PRVAccountant`` (Gopi et al. 2021): the upper end of its
        estimate, with its default ``eps_error = 0.01`` unless given in ``kwargs``.
        ``'pld'`` — this module (:func:`sgm_claim_rounds`, both directions): the upper end
        of its bracket (``kwargs`` go to :func:`sgm_claim_rounds`).

    Returns the epsilon (float, ``inf`` when none). Raises ValueError naming the
    parameter on bad input. Opacus's warning that the best order is at the end of its
    list is silenced (it is Opacus's default behaviour that the claim reproduces).
    """
    q = check_rate(q)
    sigma = check_positive(sigma, "sigma")
    T = check_int(rounds, "rounds", 1)
    delta = check_delta(delta)
    if accountant == "rdp":
        from opacus.accountants import RDPAccountant

        acc = RDPAccountant()
        acc.history = [(sigma, q, T)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return float(acc.get_epsilon(delta=delta, **kwargs))
    if accountant == "prv":
        from opacus.accountants import PRVAccountant

        acc = PRVAccountant()
        acc.history = [(sigma, q, T)]
        with warnings.catch_warnings():  # its domain size is found with the RDP code
            warnings.simplefilter("ignore", UserWarning)
            return float(acc.get_epsilon(delta=delta, **kwargs))
    if accountant == "pld":
        return sgm_claim_rounds(q, sigma, rounds=T, side="lower", **kwargs).epsilon(delta)
    raise ValueError(f"accountant must be 'rdp', 'prv' or 'pld', got {accountant!r}")


def claim_curve_from_accountant(q: float, sigma: float, *, rounds: int, accountant: str = "rdp",
                                deltas=None) -> TradeOffCurve:
    """The claim as a trade-off curve: ``sup_delta f_{eps(delta), delta}`` (DRS 2022, Prop. 2.12).

    An accountant certifies ``(eps(delta), delta)`` for every ``delta``; the tightest curve
    it implies is the upper envelope of the ``f_{eps,delta}`` over ``delta``. Evaluated on a
    grid of ``delta`` (default 160 log-spaced values in [1e-12, 0.95] for RDP, 40 for PRV)
    and a dense alpha grid; ``eps < 0`` from the RDP conversion is clipped to 0 (a weaker
    claim, the safe side for showing that a bound lies below it).

    Returns a :class:`~paperlib.fdp.tradeoff.TradeOffCurve` with ``meta['deltas']``,
    ``meta['epsilons']``. ``accountant`` in {'rdp', 'prv'}.
    """
    q = check_rate(q)
    sigma = check_positive(sigma, "sigma")
    T = check_int(rounds, "rounds", 1)
    if deltas is None:
        deltas = np.logspace(-12, math.log10(0.95), 160 if accountant == "rdp" else 40)
    deltas = np.asarray(deltas, dtype=float)
    if deltas.ndim != 1 or deltas.size == 0 or np.any(~(deltas > 0)) or np.any(~(deltas < 1)):
        raise ValueError("deltas must be a 1-D array of values in (0, 1)")
    if accountant == "rdp":
        from opacus.accountants import RDPAccountant
        from opacus.accountants.analysis import rdp as rdp_analysis

        orders = RDPAccountant.DEFAULT_ALPHAS
        rdp = rdp_analysis.compute_rdp(q=q, noise_multiplier=sigma, steps=T, orders=orders)
        eps = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            for d in deltas:
                e, _ = rdp_analysis.get_privacy_spent(orders=orders, rdp=rdp, delta=float(d))
                eps.append(float(e))
    elif accountant == "prv":
        eps = [sgm_claim_epsilon(q, sigma, rounds=T, delta=float(d), accountant="prv") for d in deltas]
    else:
        raise ValueError(f"accountant must be 'rdp' or 'prv', got {accountant!r}")
    eps = np.maximum(np.asarray(eps, dtype=float), 0.0)
    ok = np.isfinite(eps)
    alpha = np.unique(np.concatenate([np.linspace(0, 1, 4001), np.logspace(-14, 0, 600)]))
    beta = np.zeros_like(alpha)
    for e, d in zip(eps[ok], deltas[ok]):
        beta = np.maximum(beta, eps_delta_tradeoff(alpha, float(e), float(d)))
    meta = {"accountant": accountant, "opacus": _opacus_version(), "q": q, "sigma": sigma, "rounds": T,
            "deltas": deltas.tolist(), "epsilons": eps.tolist()}
    return TradeOffCurve(alpha, beta, None, label=f"SGM claim ({accountant.upper()} accountant)", meta=meta)


def multiround_comparison(mechanism: Mechanism | str, N: int, q: float, sigma: float, n: int, *, rounds: int,
                          delta: float = 1e-5, accountants=("rdp", "prv", "pld"), **pld_options) -> dict:
    """Epsilon of the T-round upper bound next to the claimed epsilons (Figure 7's numbers).

    Returns a dict: ``epsilon_upper_bound`` (for EASGM/FEASGM exact; for ASGM the lower end
    of the PLD bracket, so never overstated), ``epsilon_upper_bound_bracket`` (ASGM only),
    ``claimed`` ({accountant: epsilon}; 'pld' is the upper end of its bracket),
    ``bound_exceeds_claim`` ({accountant: bool}), plus the parameters.
    """
    obj = rounds_curve(mechanism, "upper", N, q, sigma, n, rounds=rounds, **pld_options)
    delta = check_delta(delta)
    out = {"mechanism": mechanism, "N": N, "q": q, "sigma": sigma, "n": n, "rounds": rounds, "delta": delta,
           "curve": getattr(obj, "label", "")}
    for k in ("K", "K_prime", "case"):
        if k in getattr(obj, "meta", {}):
            out[k] = obj.meta[k]
    if hasattr(obj, "epsilon_bounds"):
        lo, hi = obj.epsilon_bounds(delta)
        out["epsilon_upper_bound"] = lo
        out["epsilon_upper_bound_bracket"] = [lo, hi]
    else:
        out["epsilon_upper_bound"] = obj.epsilon(delta)
    claimed = {a: sgm_claim_epsilon(q, sigma, rounds=rounds, delta=delta, accountant=a) for a in accountants}
    out["claimed"] = claimed
    out["bound_exceeds_claim"] = {a: bool(out["epsilon_upper_bound"] > e) for a, e in claimed.items()}
    return out
