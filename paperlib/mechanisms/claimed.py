"""The epsilon an accountant reports for the SGM claim: the one wrapper around Opacus's accountants.

Every claimed epsilon of the package comes from :func:`sgm_claim_epsilon` (the command line's
``epsilon --claimed``, the practitioner's ``check``, Figure 7's baselines). It is the epsilon of
the subsampled Gaussian mechanism ``f_q^{⊗T}`` (THEORY.md §3, §10) as

* ``'rdp'`` — Opacus's RDP analysis (Mironov, Talwar, Zhang 2019: ``compute_rdp``), converted to
  ``(eps, delta)`` either by Balle et al. (2020, Theorem 21; Opacus from 0.14, DPSUR's
  ``compute_eps``) or by Mironov (2017, Proposition 3: ``eps = rdp - log(delta)/(alpha - 1)``;
  Opacus up to 0.13), at Opacus's default orders or the ones given (DPSUR's);
* ``'prv'`` — Opacus's ``PRVAccountant`` (Gopi, Lee, Wutschitz 2021), the upper end of its
  estimate at ``eps_error = 0.01`` unless given; its grid is sized first (:func:`prv_grid`) and a
  grid above :data:`PRV_MAX_BYTES` is refused with its estimate unless allowed;
* ``'pld'`` — this package's PLD composition (:func:`~paperlib.mechanisms.multiround.sgm_claim_rounds`),
  the upper end of its bracket.

:func:`claim_curve_from_accountant` turns an accountant's epsilons into the trade-off curve they
imply, :func:`multiround_comparison` puts the T-round upper bound beside them (Figure 7).

Opacus is imported inside the functions (the ``[audit]`` extra); dp_accounting for ``'pld'``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from paperlib.fdp.tradeoff import TradeOffCurve, eps_delta_tradeoff
from paperlib.fdp.validation import ParameterError, check_delta, check_int, check_positive, check_rate, check_size, fmt_bytes
from paperlib.mechanisms.core import Mechanism
from paperlib.mechanisms.multiround import rounds_upper_bound, sgm_claim_rounds

__all__ = ["sgm_claim_epsilon", "check_prv_grid", "prv_grid", "rdp_epsilons", "claim_curve_from_accountant", "multiround_comparison",
           "ACCOUNTANTS", "RDP_CONVERSIONS", "PRV_EPS_ERROR", "PRV_MAX_BYTES"]

#: the accountants :func:`sgm_claim_epsilon` knows
ACCOUNTANTS = ("rdp", "prv", "pld")
#: how RDP is turned into (eps, delta): Balle et al. 2020 (Thm 21), or Mironov 2017 (Prop. 3)
RDP_CONVERSIONS = ("balle2020", "mironov2017")
#: the error Opacus's ``PRVAccountant.get_epsilon`` targets by default (``eps_error``)
PRV_EPS_ERROR = 0.01
#: largest memory the PRV grid may ask for without an explicit allowance (tiny noise multipliers or
#: very many steps make it astronomically fine: sigma = 0.001 over one MNIST epoch asks ~1.3e12 points)
PRV_MAX_BYTES = 4 * 2**30
#: bytes per point of the PRV grid, measured (peak RSS of Opacus 1.6's get_epsilon, about 140 bytes
#: per point at 1.3e7 points), rounded up
PRV_BYTES_PER_POINT = 160


def prv_grid(q: float, sigma: float, rounds: int, delta: float, eps_error: float = PRV_EPS_ERROR) -> tuple[int, int]:
    """``(points, bytes)`` of the grid Opacus's ``PRVAccountant.get_epsilon`` builds for ``T`` rounds.

    Opacus's own sizing (``PRVAccountant``'s domain, Gopi et al. 2021, Remark 5.6): half-width
    ``L = compute_safe_domain_size(...)`` (its RDP-based truncation, a public function of
    ``opacus.accountants.analysis.prv``) and mesh ``eps_error / sqrt(T log(12/delta_error) / 2)``
    with ``delta_error = delta / 1000`` (Opacus's defaults), aligned by ``Domain.create_aligned``.
    Computing it costs milliseconds and allocates nothing; ``bytes`` is ``points`` times
    :data:`PRV_BYTES_PER_POINT`. A test compares it with the accountant's own domain, so a
    change upstream fails it.
    """
    from opacus.accountants.analysis.prv import Domain, PoissonSubsampledGaussianPRV, compute_safe_domain_size

    delta_error = delta / 1000
    with warnings.catch_warnings():  # the domain size is found with the RDP code (order warnings)
        warnings.simplefilter("ignore")
        L = compute_safe_domain_size(prvs=[PoissonSubsampledGaussianPRV(q, sigma)], max_self_compositions=[rounds],
                                     eps_error=eps_error, delta_error=delta_error)
    mesh = eps_error / np.sqrt(rounds * np.log(12 / delta_error) / 2)
    points = int(Domain.create_aligned(-L, L, mesh).size)
    return points, points * PRV_BYTES_PER_POINT


def check_prv_grid(q: float, sigma: float, rounds: int, delta: float, eps_error: float = PRV_EPS_ERROR, *,
                   allow: bool = False, sigma_name: str = "sigma", rounds_name: str = "rounds",
                   override: str = "--yes") -> None:
    """Opacus's PRV grid for the claim through the one size limit (:func:`~paperlib.fdp.validation.check_size`).

    Raises :class:`~paperlib.fdp.validation.SizeLimitError` naming the noise multiplier when one round alone
    is too fine, else the number of rounds; ``sigma_name``, ``rounds_name`` and ``override`` are the words
    of the caller that checks before it computes (the practitioner's ``noise_multiplier``, ``steps`` and
    ``allow_large=True``); :func:`sgm_claim_epsilon` checks with its own names. Inputs already checked.
    """
    points, nbytes = prv_grid(q, sigma, rounds, delta, eps_error)
    limit = PRV_MAX_BYTES // PRV_BYTES_PER_POINT
    if points <= limit or allow:
        return
    one, _ = prv_grid(q, sigma, 1, delta, eps_error)
    if one > limit:  # even one round is too fine: the noise multiplier sets the grid
        name, shown, other = sigma_name, sigma, f"{rounds_name} = {rounds:,}"
    else:  # the number of rounds sets it
        name, shown, other = rounds_name, rounds, f"{sigma_name} = {sigma:g}"
    check_size(name, points, limit, shown=shown,
               what=f"Opacus's PRV grid with {other} would hold {points:,} points, ",
               estimate=f"{fmt_bytes(nbytes)} of memory; accountant 'rdp' needs none",
               override=override)


def rdp_epsilons(q: float, sigma: float, rounds: int, deltas, *, conversion: str = "balle2020",
                 orders=None) -> np.ndarray:
    """The RDP accountant's epsilon at each ``delta`` (Opacus's ``compute_rdp``, converted as asked).

    ``conversion``: ``'balle2020'`` (Opacus's ``get_privacy_spent``, Balle et al. 2020, Thm 21) or
    ``'mironov2017'`` (``min_alpha rdp - log(delta)/(alpha - 1)``, Mironov 2017, Prop. 3, as Opacus up
    to 0.13 converted); ``orders`` default ``RDPAccountant.DEFAULT_ALPHAS``. ``inf`` where no order
    gives a finite value. Inputs are not re-checked here (:func:`sgm_claim_epsilon` does).
    """
    from opacus.accountants import RDPAccountant
    from opacus.accountants.analysis import rdp as rdp_analysis

    if conversion not in RDP_CONVERSIONS:
        raise ValueError(f"conversion must be one of {', '.join(RDP_CONVERSIONS)}, got {conversion!r}")
    orders = np.asarray(RDPAccountant.DEFAULT_ALPHAS if orders is None else orders, dtype=float)
    rdp = np.asarray(rdp_analysis.compute_rdp(q=q, noise_multiplier=sigma, steps=rounds, orders=orders))
    out = []
    for d in np.atleast_1d(np.asarray(deltas, dtype=float)):
        if conversion == "mironov2017":
            with np.errstate(invalid="ignore"):
                vals = rdp - math.log(d) / (orders - 1)
            out.append(float(np.nanmin(vals)) if not np.isnan(vals).all() else math.inf)
        else:
            with warnings.catch_warnings():  # "optimal order is the largest": Opacus's default behaviour
                warnings.simplefilter("ignore")
                out.append(float(rdp_analysis.get_privacy_spent(orders=orders, rdp=rdp, delta=float(d))[0]))
    return np.asarray(out)


def sgm_claim_epsilon(q: float, sigma: float, *, rounds: int, delta: float, accountant: str = "rdp",
                      conversion: str = "balle2020", orders=None, eps_error: float | None = None,
                      allow_large: bool = False, **pld_options) -> float:
    """Epsilon of the SGM claim ``f_q^{⊗T}`` over ``T`` rounds, as an accountant reports it (module docstring).

    The claim is the subsampled Gaussian mechanism's (Bu et al. 2020; THEORY.md §3, §10); RDP by
    Mironov, Talwar, Zhang (2019) converted by Balle et al. (2020, Thm 21) or Mironov (2017,
    Prop. 3); PRV by Gopi, Lee, Wutschitz (2021).

    Parameters
    ----------
    q : float in (0, 1], sampling rate; sigma : float > 0, noise multiplier; rounds : int >= 1;
    delta : float in (0, 1)
    accountant : ``'rdp'`` (Opacus's RDP analysis; the paper's Figure 7 baseline), ``'prv'`` (Opacus's
        ``PRVAccountant``, upper end at ``eps_error``, default 0.01) or ``'pld'`` (this package's PLD,
        the upper end of its bracket; ``pld_options`` go to
        :func:`~paperlib.mechanisms.multiround.sgm_claim_rounds`)
    conversion, orders : the RDP conversion and orders (:func:`rdp_epsilons`; RDP only)
    allow_large : run the PRV accountant even when its grid exceeds :data:`PRV_MAX_BYTES` (a caller
        with its own parameter names checks first with :func:`check_prv_grid`, then passes True)

    Returns the epsilon (float, ``inf`` when none). Raises ValueError naming the parameter on bad
    input; :class:`~paperlib.fdp.validation.SizeLimitError` (a ValueError naming the noise
    multiplier or the number of rounds, whichever sets the grid) when the PRV grid is too large.
    Opacus's warning that the best order is at the end of its list is silenced (the claim
    reproduces Opacus's default behaviour).
    """
    q = check_rate(q)
    sigma = check_positive(sigma, "sigma")
    T = check_int(rounds, "rounds", 1)
    delta = check_delta(delta)
    if accountant == "rdp":
        return float(rdp_epsilons(q, sigma, T, [delta], conversion=conversion, orders=orders)[0])
    if accountant == "prv":
        from opacus.accountants import PRVAccountant

        err = PRV_EPS_ERROR if eps_error is None else check_positive(eps_error, "eps_error")
        check_prv_grid(q, sigma, T, delta, err, allow=allow_large)
        acc = PRVAccountant()
        acc.history = [(sigma, q, T)]
        with warnings.catch_warnings():  # its domain size is found with the RDP code
            warnings.simplefilter("ignore")
            return float(acc.get_epsilon(delta=delta, eps_error=err))
    if accountant == "pld":
        return sgm_claim_rounds(q, sigma, rounds=T, side="lower", **pld_options).epsilon(delta)
    raise ParameterError("accountant", f"accountant must be 'rdp', 'prv' or 'pld', got {accountant!r}")


def _opacus_version() -> str:
    try:
        import opacus

        return str(getattr(opacus, "__version__", "unknown"))
    except ImportError:  # pragma: no cover
        return "not installed"


def claim_curve_from_accountant(q: float, sigma: float, *, rounds: int, accountant: str = "rdp",
                                deltas=None) -> TradeOffCurve:
    """The claim as a trade-off curve: ``sup_delta f_{eps(delta), delta}`` (DRS 2022, Prop. 2.12).

    An accountant certifies ``(eps(delta), delta)`` for every ``delta``; the tightest curve
    it implies is the upper envelope of the ``f_{eps,delta}`` over ``delta``. Evaluated on a
    grid of ``delta`` (default 160 log-spaced values in [1e-12, 0.95] for RDP, 40 for PRV)
    and a dense alpha grid; ``eps < 0`` from the RDP conversion is clipped to 0 (a weaker
    claim, the safe side for showing that a bound lies below it).

    Returns a :class:`~paperlib.fdp.tradeoff.TradeOffCurve` with ``meta['deltas']``,
    ``meta['epsilons']``. ``accountant`` in {'rdp', 'prv'}; epsilons from :func:`sgm_claim_epsilon`'s
    accountants (:func:`rdp_epsilons` for RDP).
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
        eps = rdp_epsilons(q, sigma, T, deltas)
    elif accountant == "prv":
        eps = [sgm_claim_epsilon(q, sigma, rounds=T, delta=float(d), accountant="prv") for d in deltas]
    else:
        raise ParameterError("accountant", f"accountant must be 'rdp' or 'prv', got {accountant!r}")
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

    The bound is :func:`~paperlib.mechanisms.multiround.rounds_upper_bound`. Returns a dict:
    ``epsilon_upper_bound`` (for EASGM/FEASGM exact; for ASGM the lower end of the PLD bracket, so
    never overstated), ``epsilon_upper_bound_bracket`` (numerical compositions only), ``claimed``
    ({accountant: epsilon}; 'pld' is the upper end of its bracket), ``bound_exceeds_claim``
    ({accountant: bool}), plus the parameters.
    """
    obj = rounds_upper_bound(mechanism, N, q, sigma, n, rounds=rounds, **pld_options)
    delta = check_delta(delta)
    out = {"mechanism": mechanism, "N": N, "q": q, "sigma": sigma, "n": n, "rounds": rounds, "delta": delta,
           "curve": obj.label}
    for k in ("K", "K_prime", "case"):
        if k in obj.meta:
            out[k] = obj.meta[k]
    lo, hi = obj.epsilon_bounds(delta)
    out["epsilon_upper_bound"] = lo
    if obj.accounting() is not None:
        out["epsilon_upper_bound_bracket"] = [lo, hi]
    claimed = {a: sgm_claim_epsilon(q, sigma, rounds=rounds, delta=delta, accountant=a) for a in accountants}
    out["claimed"] = claimed
    out["bound_exceeds_claim"] = {a: bool(out["epsilon_upper_bound"] > e) for a, e in claimed.items()}
    return out
