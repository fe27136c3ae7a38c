"""The exact chi-square pair and the diluted pair: the building blocks of the multi-round bounds.

Everything here concerns ``T`` rounds of DP-SGD on the ordered pair ``(D, D')``,
``|D| = N``, ``|D'| = N + 1`` (THEORY.md sections 0, 7, 8 and 10; paper Appendix A.2,
A.4 and Figure 7). Two pairs live here:

1. **Exact T-round upper bounds for EASGM and FEASGM.** The one-round upper bound
   ``f̄ = T(P^{⊗(n-1)}, Q_x^{⊗(n-1)})`` (Theorem 3.8 with ``x = N``; Theorem A.4 with
   ``x = K = floor(N q)`` when the floors differ) is a product of identical Gaussian
   pairs, so its T-fold tensor power is the same pair in ``m = T (n - 1)`` coordinates:
   ``f̄^{⊗T} = T(N(0, I_m), N(0, s² I_m))``, ``s = x/(x+1)``, the chi-square test of
   THEORY.md §7. :class:`Chi2Pair` evaluates it exactly (no interpolation at a given
   ``alpha``) and its privacy profile in log space, so ``epsilon`` in the hundreds is
   fine. Theorem A.6 of the paper (composition of the transparent mechanism, proved by
   induction with Theorem A.5) is what makes ``f̄^{⊗T}`` an upper bound of the T-round
   guarantee. The CLT bound of Theorem A.7 / Corollary B.2 (:mod:`paperlib.fdp.clt`) sits
   above it on ``[gamma, 1 - gamma]``; :func:`exact_vs_clt` puts both side by side.

2. **The diluted pair** ``(P, (1 - w) P + w Q)`` (:class:`DilutedFamily`): the Eq. 14 bound
   ``w T(P^{⊗(n-1)}, Q_N^{⊗(n-1)}) + (1 - w) Id``, ``w = q - q (1-q)^N``, is *exactly* the
   trade-off function of this pair with ``(P, Q)`` the chi-square pair: a test of level
   ``alpha`` has power ``(1 - w) alpha + w (1 - beta_PQ)`` under the alternative, so
   ``T(P, (1-w)P + wQ)(alpha) = w T(P,Q)(alpha) + (1 - w)(1 - alpha)`` — the same construction
   that gives ``f_q = q G + (1 - q) Id`` for SGM. Its ``T``-fold power is composed numerically by
   :mod:`paperlib.fdp.pld` (the one multi-round engine, on dp_accounting), which also composes the
   SGM claim and the certified guarantees, each with its error bracket.

Numerics of the chi-square distribution
---------------------------------------
scipy's ``chi2.cdf`` (``gammainc``) loses accuracy in the lower tail for very many
degrees of freedom: relative error 7.5e-4 at ``m = 5.2e6`` and 0.42 at ``m = 3e8``, five
standard deviations below the mean (checked against a 30-digit quadrature). Figure 7
needs ``m = 200 * 1,485,216 ≈ 3e8``, so :func:`chi2_logcdf` uses Temme's uniform
asymptotic expansion (DLMF 8.12.8-8.12.12, two terms, relative error below 1e-11 for
``m >= 2e5``) there and scipy elsewhere; tests compare both with mpmath. These functions
live in :mod:`paperlib.fdp.tails` (with the log-space deep tails the privacy profiles
need) and are re-exported here.
"""

from __future__ import annotations

import math

import numpy as np

from paperlib.fdp.gaussian import LRFamily, diluted_hockey
from paperlib.fdp.mixture import LRMixture
from paperlib.fdp.tails import TEMME_MIN_DOF, chi2_logcdf, chi2_logsf, chi2_ppf  # noqa: F401 (re-exported)
from paperlib.fdp.tradeoff import TradeOff, TradeOffCurve
from paperlib.fdp.validation import check_alpha_array, check_int, check_positive, check_probability

__all__ = [
    "chi2_logcdf",
    "chi2_logsf",
    "chi2_ppf",
    "Chi2Pair",
    "DilutedFamily",
]

# =============================================================================== chi-square pair
class Chi2Pair(LRFamily, TradeOff):
    """``T(N(0, I_m), N(0, s² I_m))``, ``s = x/(x+1)``, evaluated exactly (THEORY.md §7).

    With ``m = T (n - 1)`` this is the T-round EASGM (``x = N``) or FEASGM (``x = K``)
    upper bound ``f̄^{⊗T}`` (Theorems 3.8, A.4, A.6). The log-likelihood ratio is
    ``L = m log(1 + 1/x) - (a/2) ||X||²`` with ``a = (1 - s²)/s²``, so the optimal test
    rejects ``H0`` when ``||X||² < tau``: ``alpha = F_m(tau)``, ``beta = 1 - F_m(tau/s²)``.

    Parameters
    ----------
    m : int >= 1, number of coordinates (degrees of freedom)
    x : float > 0, ``s = x/(x+1)`` (kept as ``x`` so that ``1 - s²`` is exact for large ``x``)
    label, meta : description carried into curves and JSON

    It is also a likelihood-ratio *family* (``tails``, ``logt_bracket``,
    ``seed_points``, ``weights``) so that :class:`~paperlib.fdp.mixture.LRMixture` can sample
    its curve and :class:`DilutedFamily` can use it (the PLD engine composes it as ``Chi2Law``).

    Methods: ``beta = pair(alpha)`` (exact, array in/out), :meth:`curve` (sampled
    :class:`~paperlib.fdp.tradeoff.TradeOffCurve`), :meth:`delta`, :meth:`epsilon`.
    """

    def __init__(self, m: int, x: float, label: str = "", meta: dict | None = None):
        self.m = check_int(m, "m", 1)
        self.x = check_positive(x, "x")
        self.label = label or f"T(P^{self.m}, Q_{self.x:g}^{self.m})"
        self.meta = dict(meta or {})
        self.meta.setdefault("m", self.m)
        self.meta.setdefault("x", self.x)
        self.meta.setdefault("method", "exact chi-square (THEORY.md section 7)")
        self.weights = np.array([1.0])
        x = self.x
        self.inv_s2 = (1.0 + 1.0 / x) ** 2  # 1/s²
        self.a = (2.0 * x + 1.0) / (x * x)  # (1 - s²)/s²
        self.l_max = self.m * math.log1p(1.0 / x)  # sup of L (at X = 0)
        self._mix: LRMixture | None = None

    # ------------------------------------------------------------ family interface
    def radius2(self, logt) -> np.ndarray:
        """``tau(t)``: the test rejects ``H0`` when ``||X||² < tau``; ``L > log t`` there."""
        return (2.0 / self.a) * (self.l_max - np.asarray(logt, dtype=float))

    def tails(self, logt) -> tuple[np.ndarray, np.ndarray]:
        """``alpha = P[L > log t]``, ``beta = Q[L <= log t]`` for a 1-D array of ``log t``."""
        r = np.atleast_1d(self.radius2(logt))
        alpha = np.exp(chi2_logcdf(r, self.m))
        beta = np.exp(chi2_logsf(r * self.inv_s2, self.m))
        beta = np.where(r > 0, beta, 1.0)
        return alpha, beta

    def log_tails(self, logt) -> tuple[np.ndarray, ...]:
        """Logs of ``P[L > lt], Q[L > lt], P[L <= lt], Q[L <= lt]``: chi-square tails at ``tau(t)``
        and ``tau(t)/s^2`` (:mod:`paperlib.fdp.tails`, log space; ``tau <= 0`` gives ``L > lt`` never)."""
        r = np.atleast_1d(self.radius2(logt))
        pos = r > 0
        rr = np.where(pos, r, 1.0)
        lpu = np.where(pos, chi2_logcdf(rr, self.m), -np.inf)
        lqu = np.where(pos, chi2_logcdf(rr * self.inv_s2, self.m), -np.inf)
        lpl = np.where(pos, chi2_logsf(rr, self.m), 0.0)
        lql = np.where(pos, chi2_logsf(rr * self.inv_s2, self.m), 0.0)
        return lpu, lqu, lpl, lql

    def logt_bracket(self) -> tuple[float, float]:
        """Range of ``log t`` outside which both distributions have negligible mass."""
        m, sd = self.m, math.sqrt(2.0 * self.m)
        r_hi = m + 60.0 * sd + 200.0
        r_lo = max(m - 40.0 * sd, 0.0) / self.inv_s2
        return self.l_max - 0.5 * self.a * r_hi, self.l_max - 0.5 * self.a * r_lo

    def seed_points(self, per_component: int = 24) -> np.ndarray:
        u = np.linspace(-8.0, 8.0, per_component)
        m, sd = self.m, math.sqrt(2.0 * self.m)
        r = np.maximum(np.concatenate([m + sd * u, (m + sd * u) / self.inv_s2]), 0.0)
        return np.unique(self.l_max - 0.5 * self.a * r)

    # ------------------------------------------------------------ exact evaluation
    def __call__(self, alpha) -> np.ndarray:
        """``beta`` at ``alpha`` exactly: ``tau = F_m^{-1}(alpha)``, ``beta = 1 - F_m(tau/s²)``."""
        a = check_alpha_array(alpha)
        tau = chi2_ppf(a, self.m)
        beta = np.exp(chi2_logsf(tau * self.inv_s2, self.m))
        return np.where(a <= 0, 1.0, np.where(a >= 1, 0.0, beta))

    def curve(self, tol: float = 1e-6) -> TradeOffCurve:
        """The curve sampled adaptively (chord within ``tol`` of the tangents), for plots."""
        if self._mix is None:
            self._mix = LRMixture([self], label=self.label, meta=self.meta)
        return self._mix.curve(tol)

    def delta(self, eps) -> np.ndarray | float:
        """Privacy profile (both directions) for ``eps >= 0``, in log space (no overflow).

        ``delta_1 = Q[L > eps] - e^eps P[L > eps]``, ``delta_2 = P[L < -eps] - e^eps Q[L < -eps]``
        (:meth:`hockey`, from the four chi-square tails in log space); returns
        ``max(delta_1, delta_2, 0)`` (THEORY.md section 1), accurate down to 1e-300.
        """
        d1, d2 = self.hockey(eps)
        d = np.clip(np.maximum(d1, d2), 0.0, 1.0)
        return d if np.ndim(eps) else float(d[0])

    def delta_limit(self) -> float:
        return 0.0


# =============================================================================== diluted pair
class DilutedFamily(LRFamily):
    """The pair ``(P, (1 - w) P + w Q)`` built from a base pair ``(P, Q)``; index hidden.

    Its trade-off function is exactly ``w T(P,Q) + (1 - w) Id`` (the same ``alpha`` in
    both parts): a test of level ``alpha`` has power ``(1-w) alpha + w (1 - beta_PQ)``
    under the alternative, minimised by the optimal test of ``(P, Q)``. With the
    chi-square base this is the ASGM bound of Eq. 14 (Theorem 3.10), with ``G_{1/sigma}``
    the SGM claim ``f_q`` of Bu et al. (2020).

    Privacy loss ``L' = log(1 - w + w e^L)``, increasing in the base loss ``L``, so
    ``P[L' > c] = P[L > l_c]`` and ``Q'[L' <= c] = (1-w) P[L <= l_c] + w Q[L <= l_c]``
    with ``l_c = log((e^c - 1 + w)/w)`` (``c >= log(1 - w)``; below, ``L' > c`` surely).

    Parameters
    ----------
    base : a family with ``tails``/``logt_bracket``/``seed_points`` (e.g. :class:`Chi2Pair`)
    w : float in (0, 1]
    """

    def __init__(self, base, w: float):
        self.base = base
        self.w = check_probability(w, "w", open_left=True)
        self.log_w = math.log(self.w)
        self.log_1mw = math.log1p(-self.w) if self.w < 1 else -math.inf
        self.weights = np.array([1.0])

    def _base_logt(self, c: np.ndarray) -> np.ndarray:
        w = self.w
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            small = np.log(np.maximum(np.expm1(np.minimum(c, 1.0)) + w, 0.0)) - self.log_w
            large = c + np.log1p(-(1.0 - w) * np.exp(-np.maximum(c, 1.0))) - self.log_w
        return np.where(c > 1.0, large, small)

    def tails(self, logt) -> tuple[np.ndarray, np.ndarray]:
        c = np.atleast_1d(np.asarray(logt, dtype=float))
        surely = c < self.log_1mw  # L' >= log(1 - w) > c always
        lc = self._base_logt(np.where(surely, self.log_1mw + 1.0, c))
        a, b = self.base.tails(lc)
        alpha = np.where(surely, 1.0, a)
        beta = np.where(surely, 0.0, (1.0 - self.w) * (1.0 - a) + self.w * b)
        return np.clip(alpha, 0, 1), np.clip(beta, 0, 1)

    def log_tails(self, logt) -> tuple[np.ndarray, ...]:
        """Logs of ``P[L' > c], Q'[L' > c], P[L' <= c], Q'[L' <= c]`` from the base's at ``l_c``."""
        c = np.atleast_1d(np.asarray(logt, dtype=float))
        surely = c < self.log_1mw
        lc = self._base_logt(np.where(surely, self.log_1mw + 1.0, c))
        lpu, lqu, lpl, lql = self.base.log_tails(lc)
        l1w = self.log_1mw
        qu = np.logaddexp(l1w + lpu, self.log_w + lqu)
        ql = np.logaddexp(l1w + lpl, self.log_w + lql)
        return (np.where(surely, 0.0, lpu), np.where(surely, 0.0, qu),
                np.where(surely, -np.inf, lpl), np.where(surely, -np.inf, ql))

    def hockey(self, eps) -> tuple[np.ndarray, np.ndarray]:
        """Exact profile in both directions from the base's (:func:`~paperlib.fdp.gaussian.diluted_hockey`)."""
        return diluted_hockey(self.base.hockey, self.w, eps)

    def _map(self, lt):
        return np.logaddexp(self.log_1mw, self.log_w + np.asarray(lt, dtype=float))

    def logt_bracket(self) -> tuple[float, float]:
        lo, hi = self.base.logt_bracket()
        lo2 = float(self._map(lo))
        if self.w < 1:
            lo2 = min(lo2, self.log_1mw - 1e-12)
        return lo2, float(self._map(hi))

    def seed_points(self, per_component: int = 24) -> np.ndarray:
        return np.unique(self._map(self.base.seed_points()))
