"""CLT bounds of the mechanisms' upper bounds (paper Theorems 3.12/3.13, A.7; Corollary B.2).

The CLT numerics (functionals of ``f̄*``, ``mu``, ``gamma``, :func:`~paperlib.fdp.clt.clt_bounds`)
are in :mod:`paperlib.fdp.clt`; this module applies them to EASGM (``s = N/(N+1)``) and
FEASGM (``s = K/(K+1)``, ``K = floor(N q)``), and :func:`clt_bound` gives the CLT curve of
any of EASGM, FEASGM and ASGM (for ASGM the chi-square part of Eq. 14, mixed with the
identity as in Theorem 3.10) as one object with a read-out at a given FNR.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

from paperlib.fdp.clt import CLTBound, CLTTradeOff, clt_bounds
from paperlib.fdp.mixture import PointwiseMixture
from paperlib.fdp.tradeoff import TradeOff, TradeOffCurve
from paperlib.mechanisms.core import Mechanism, feasgm_floors
from paperlib.mechanisms.guarantees import asgm_bound_weight
from paperlib.fdp.validation import ParameterError, check_alpha_array, check_int, check_positive, check_probability, check_rate

__all__ = ["clt_upper_bound_easgm", "clt_upper_bound_feasgm", "CLTCurve", "clt_bound"]


def clt_upper_bound_easgm(alpha, N: int, n: int, rounds: int = 1) -> CLTBound:
    """CLT bound of the EASGM upper bound ``f̄`` (paper Theorems 3.12/3.13).

    ``f̄ = T(P^{⊗(n−1)}, Q_N^{⊗(n−1)})`` per round (Theorem 3.8), with
    ``s = N/(N+1)`` and ``m = rounds·(n − 1)`` coordinates;
    ``f̄^{⊗rounds}(α) ≤ upper(α) = G_μ(α − γ) + γ`` on ``[γ, 1 − γ]``.

    Parameters
    ----------
    alpha : float or array-like in [0, 1]
    N : int ``≥ 1`` (size of ``D``; ``|D'| = N + 1``)
    n : int ``≥ 2`` (output dimension; ``n − 1 ≥ 1`` coordinates enter)
    rounds : int ``≥ 1``

    Returns
    -------
    CLTBound(lower, upper, mu, gamma), as :func:`clt_bounds` (NaN outside
    ``[γ, 1 − γ]``); ``upper`` is the bound the paper draws.

    Raises
    ------
    ValueError naming the offending parameter.
    """
    N = check_int(N, "N", 1)
    n = check_int(n, "n", 2)
    rounds = check_int(rounds, "rounds", 1)
    a = check_alpha_array(alpha)
    return clt_bounds(a if a.ndim else float(a), N / (N + 1), rounds * (n - 1),
                      one_minus_s=1.0 / (N + 1))


def clt_upper_bound_feasgm(alpha, N: int, q: float, n: int, rounds: int = 1) -> CLTBound:
    """CLT bound of the FEASGM upper bound (paper Theorem A.7; Theorem A.4).

    ``K = floor(N q)`` (:func:`~paperlib.mechanisms.core.feasgm_floors`, in floating point as
    Opacus computes ``int(len(dataset) * sample_rate)``); when ``floor((N+1) q) ≠ K`` the
    normalisers differ and ``f̄ = T(P^{⊗(n−1)}, Q_K^{⊗(n−1)})`` per round, so
    ``s = K/(K+1)`` and ``m = rounds·(n − 1)``.

    Parameters
    ----------
    alpha : float or array-like in [0, 1]
    N : int ``≥ 1``
    q : float in (0, 1] (Poisson sampling rate)
    n : int ``≥ 2``
    rounds : int ``≥ 1``

    Returns
    -------
    CLTBound(lower, upper, mu, gamma), as :func:`clt_bounds`.

    Raises
    ------
    ValueError naming the offending parameter; also when ``K = floor(Nq) = 0`` (the
    normaliser of ``D`` is 0: Opacus v1.x divides by zero, ``s = 0`` is outside the
    theorem) and when ``floor((N+1)q) = K`` (both sides divide by the same number, so
    FEASGM is post-processing of SGM and the SGM guarantee holds instead).
    """
    N = check_int(N, "N", 1)
    q = check_rate(q)
    n = check_int(n, "n", 2)
    rounds = check_int(rounds, "rounds", 1)
    a = check_alpha_array(alpha)
    K, K1 = feasgm_floors(N, q)
    if K == 0:
        raise ValueError(
            f"K = floor(N q) = 0 for N = {N}, q = {q}: the FEASGM normaliser of D is 0 "
            "(Opacus v1.x divides by zero); s = K/(K+1) = 0 is outside the CLT bound"
        )
    if K1 == K:
        raise ValueError(
            f"floor(N q) = floor((N+1) q) = {K} for N = {N}, q = {q}: both sides divide "
            "by the same number, FEASGM is post-processing of SGM and the SGM guarantee "
            "holds instead (no FEASGM CLT bound applies)"
        )
    return clt_bounds(a if a.ndim else float(a), K / (K + 1), rounds * (n - 1),
                      one_minus_s=1.0 / (K + 1))


class CLTCurve(TradeOff):
    """The CLT upper curve of a mechanism's one- or T-round upper bound (Figure 5's dashed lines).

    Two readings of the same bound:

    * :meth:`raw` — the theorem's curve as the paper draws it:
      ``min(G_mu(alpha - gamma) + gamma, 1 - alpha)`` on ``[gamma, 1 - gamma]`` and NaN outside
      (the theorem says nothing there); for ASGM mixed as Eq. 14,
      ``w * that + (1 - w)(1 - alpha)`` with ``w = q - q(1-q)^N``.
    * the trade-off interface (``curve(alpha)``, :meth:`curve`, :meth:`delta`, :meth:`epsilon`,
      ...) — the greatest trade-off function below that bound
      (:class:`~paperlib.fdp.clt.CLTTradeOff`, the lower convex hull with ``(0, 1)`` and
      ``(1, 0)``), mixed the same way for ASGM: defined on all of ``[0, 1]``.

    Build it with :func:`clt_bound`. Attributes: ``mu``, ``gamma``, ``weight`` (1 except for
    ASGM), ``label``, ``meta``.
    """

    def __init__(self, mechanism: Mechanism, N: int, q: float | None, n: int, rounds: int):
        self.mechanism = mechanism
        theorem = mechanism.spec.clt  # the registry's: "3.13", "A.7" or "3.13+Eq.14"
        if theorem == "A.7":
            self._theorem = lambda a: clt_upper_bound_feasgm(a, N, q, n, rounds=rounds)
        else:
            self._theorem = lambda a: clt_upper_bound_easgm(a, N, n, rounds=rounds)
        self.weight = asgm_bound_weight(N, q) if theorem == "3.13+Eq.14" else 1.0
        probe = self._theorem(0.5)
        self.mu, self.gamma = float(probe.mu), float(probe.gamma)
        self.label = f"{mechanism.title} upper bound, CLT ({rounds} round{'s' if rounds > 1 else ''})"
        self.meta = {"mechanism": mechanism.value, "bound": "clt", "N": N, "q": q, "n": n, "rounds": rounds,
                     "mu": self.mu, "gamma": self.gamma, "weight_chi2": self.weight}
        hull = CLTTradeOff(self.mu, self.gamma, label=self.label, meta=self.meta)
        self._tradeoff = hull if self.weight == 1.0 else PointwiseMixture(
            [(self.weight, hull), (1.0 - self.weight, "identity")], label=self.label, meta=self.meta)

    # ---------------------------------------------------------------- the trade-off interface
    def __call__(self, alpha):
        return self._tradeoff(alpha)

    def curve(self, tol: float = 1e-6) -> TradeOffCurve:
        return self._tradeoff.curve(tol)

    def delta(self, eps):
        return self._tradeoff.delta(eps)

    # ---------------------------------------------------------------- the theorem's curve
    def raw(self, alpha) -> np.ndarray:
        """The bound as the theorem states it (NaN outside ``[gamma, 1 - gamma]``; see the class)."""
        a = check_alpha_array(alpha)
        up = np.minimum(np.asarray(self.bounds(a).upper, dtype=float), 1.0 - a)  # a trade-off is <= 1 - alpha
        return self.weight * up + (1.0 - self.weight) * (1.0 - a)

    def bounds(self, alpha) -> CLTBound:
        """The theorem's own ``(lower, upper, mu, gamma)`` for the chi-square part (no capping, no
        Eq. 14 mixing), NaN outside ``[gamma, 1 - gamma]``."""
        return self._theorem(alpha)

    def fpr_at_fnr(self, beta: float) -> float:
        """The FPR at which :meth:`raw` reaches FNR ``beta`` (root finding, to 1e-12).

        ``gamma`` when the curve is already at or below ``beta`` at ``alpha = gamma`` (the
        left end of its range); NaN when it is still above ``beta`` at ``1 - gamma``.
        """
        beta = check_probability(beta, "beta")
        lo, hi = self.gamma, 1.0 - self.gamma
        if not lo < hi:
            return float("nan")

        def h(x):
            return float(self.raw(np.array([x]))[0]) - beta

        if h(lo) <= 0:
            return lo
        if h(hi) > 0:
            return float("nan")
        return float(optimize.brentq(h, lo, hi, xtol=1e-12))


def clt_bound(mechanism: Mechanism | str, N: int, q: float | None, sigma: float | None, n: int, *,
              rounds: int = 1) -> CLTCurve:
    """The CLT curve of ``mechanism``'s upper bound over ``rounds`` rounds (:class:`CLTCurve`).

    EASGM (Theorem 3.13 / Corollary B.2; ``q`` and ``sigma`` unused), FEASGM (Theorem A.7;
    needs ``q``, and the floors must differ), ASGM (the chi-square part of Eq. 14 by
    Theorem 3.13, one round). ``N >= 1``, ``n >= 2``, ``rounds >= 1``. Raises ValueError
    naming the parameter; for SGM (no CLT bound of the claim is drawn) and for ASGM with
    ``rounds > 1`` (Eq. 14 does not compose in closed form: use
    :func:`paperlib.mechanisms.multiround.asgm_rounds_upper_bound`).
    """
    mechanism = Mechanism.parse(mechanism)
    theorem = mechanism.spec.clt
    if theorem is None:
        raise ParameterError("mechanism", f"mechanism: the CLT bound is defined for easgm, feasgm and asgm, got {mechanism.value!r}")
    if q is not None or theorem != "3.13":  # Theorem 3.13 does not use q
        q = check_rate(q)
    if sigma is not None:
        check_positive(sigma, "sigma")
    rounds = check_int(rounds, "rounds", 1)
    if theorem == "3.13+Eq.14" and rounds > 1:
        raise ParameterError("rounds", "rounds: the ASGM CLT bound is one-round only (Eq. 14 does not compose in closed form); "
                         "use the numerically composed upper bound instead")
    return CLTCurve(mechanism, N, q, n, rounds)
