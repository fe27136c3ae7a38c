"""Likelihood-ratio tails of the Gaussian building blocks (THEORY.md sections 3, 4 and 7).

Each *family* below is a set of hypothesis pairs ``(P_i, Q_i)`` with weights
``w_i``. For the log-likelihood ratio ``L_i = log dQ_i/dP_i`` a family returns,
for thresholds ``log t``,

* ``alpha(log t) = sum_i w_i P_i[L_i > log t]``  (FPR of the Neyman-Pearson test), and
* ``beta(log t)  = sum_i w_i Q_i[L_i <= log t]`` (its FNR).

These are the ingredients of a common-threshold mixture (Lemma 2.10 / Lemma 3.1,
see :mod:`paperlib.fdp.mixture`): the slope of the resulting curve at threshold ``t``
is exactly ``-t``.

Families
--------
:class:`GaussVarFamily`
    ``T(N(0, I_n), N(mu e_1, s^2 I_n))`` with ``s = x/(x+1)`` (the variance-shrunk
    Gaussian of EASGM/ASGM/FEASGM). The optimal test thresholds ``||X - c||^2`` with
    ``c = mu/(1 - s^2) e_1``, whose law is noncentral chi-square (THEORY.md section 4).
    ``mu = 0`` gives the pure variance test of section 7 (central chi-square).
:class:`GaussShiftFamily`
    ``G_mu = T(N(0,1), N(mu,1))``.
:class:`SubsampledGaussian`
    ``f_q = T(N(0,1), (1-q) N(0,1) + q N(mu,1))``: the SGM claim (Bu et al. 2020, THEORY.md section 3).
:class:`IdentityFamily`
    Identical pairs (``L = 0``, an atom at ``log t = 0``).

The noncentral chi-square distribution functions are scipy's (Boost's
``non_central_chi_squared``) for ``n < 5000``, checked against an independent quadrature for ``n``
up to 1.5e6 in ``tests/fdp/test_gaussian.py``. From ``n >= 5000`` on (the paper's models) they are
:func:`paperlib.fdp.tails.ncx2_cdf_sf` (curves) and the log-space functions of that module
(profiles): a quadrature over the central part for large noncentrality and a vectorised Poisson
recurrence below, 10-35 times faster and without Boost's limit at noncentrality 6e9
(``tests/fdp/test_ncx2_quadrature.py``: mpmath, Boost, the old curve to 1e-9).

Privacy profiles
----------------
Besides ``tails`` (for sampling curves) every family gives

* ``log_tails(logt) -> (log P[L > lt], log Q[L > lt], log P[L <= lt], log Q[L <= lt])``,
  the four tail probabilities computed directly in log space (never as ``1 - cdf``;
  :mod:`paperlib.fdp.tails`), and ``upper_tails(logt) -> (alpha, 1 - beta)``;
* ``hockey(eps) -> (delta_1, delta_2)`` for ``eps >= 0``: the weighted hockey-stick
  divergences ``sum_i w_i (Q_i[L_i > eps] - e^eps P_i[L_i > eps])`` and
  ``sum_i w_i (P_i[L_i < -eps] - e^eps Q_i[L_i < -eps])`` (THEORY.md section 1: with the
  component revealed the privacy profile is additive over components). Computed as
  ``e^A (-expm1(B - A))`` from the logs, so they keep their relative accuracy down to
  ``1e-300`` and never overflow; the subsampled Gaussian uses the exact reduction to
  ``G_mu`` at a transformed ``eps`` instead (no cancellation for tiny ``q``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from paperlib.fdp.tails import (QUAD_MIN_DOF, TINY, hockey_from_logs, ncx2_log, ncx2_cdf_sf, ncx2_log_deep,
                                ncx2_quad_applies)
from paperlib.fdp.validation import check_eps, check_int, check_positive, check_rate

__all__ = [
    "GaussVarFamily",
    "GaussShiftFamily",
    "SubsampledGaussian",
    "IdentityFamily",
    "LRFamily",
    "gauss_shift_hockey",
    "diluted_hockey",
]


def _as_weights(weights, size: int) -> np.ndarray:
    w = np.asarray(weights, dtype=float).reshape(-1)
    if w.size != size or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be finite, >= 0, one per component")
    return w


def _weighted_logsum(logw: np.ndarray, logp: np.ndarray) -> np.ndarray:
    """``log sum_i w_i p_i`` over the first axis (components), -inf when all terms are 0."""
    terms = logw[:, None] + logp
    top = np.max(terms, axis=0)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(np.isfinite(top), safe + np.log(np.sum(np.exp(terms - safe), axis=0)), -np.inf)


def gauss_shift_hockey(eps, mu: float) -> np.ndarray:
    """``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``, the profile of ``G_mu`` (Balle-Wang).

    ``eps`` array (any reals, ``mu > 0``), evaluated as ``e^A (-expm1(B - A))`` with
    ``A, B`` from ``log_ndtr``: relative accuracy ~1e-12 down to values ~1e-300 and below,
    no overflow for any ``eps``. Balle & Wang (ICML 2018), Theorem 8.
    """
    e = np.asarray(eps, dtype=float)
    la = special.log_ndtr(-e / mu + mu / 2)
    lb = e + special.log_ndtr(-e / mu - mu / 2)
    return hockey_from_logs(la, lb)


def diluted_hockey(base_hockey, w: float, eps) -> tuple[np.ndarray, np.ndarray]:
    """Hockey-stick divergences of ``(P, (1 - w) P + w Q)`` from those of ``(P, Q)``.

    ``delta_1(eps) = w delta_1^{PQ}(eps')`` with ``e^eps' = 1 + (e^eps - 1)/w`` and
    ``delta_2(eps) = c delta_2^{PQ}(eps'')`` with ``c = 1 - e^eps (1 - w)`` (0 when
    ``c <= 0``) and ``e^eps'' = e^eps w / c`` (both ``eps', eps'' >= eps >= 0``): expand
    ``(q' - e^eps p)_+`` and ``(p - e^eps q')_+`` with ``q' = (1 - w) p + w q``. Exact; no
    cancellation for tiny ``w`` (THEORY.md section 3 gives the first for the SGM claim).

    ``base_hockey(eps_array) -> (delta_1, delta_2)``; ``w`` in (0, 1]; ``eps`` array >= 0.
    """
    e = check_eps(eps)
    if w >= 1.0:
        return base_hockey(e)
    lw, l1w = math.log(w), math.log1p(-w)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        e1 = np.where(e > 1.0, e - lw + np.log1p(-(1.0 - w) * np.exp(-np.maximum(e, 1.0))),
                      np.log1p(np.expm1(np.minimum(e, 1.0)) / w))
        c = -np.expm1(e + l1w)
        ok = c > 0
        e2 = np.where(ok, e + lw - np.log(np.where(ok, c, 1.0)), 0.0)
    d1 = w * base_hockey(np.maximum(e1, 0.0))[0]
    d2 = np.where(ok, np.where(ok, c, 0.0) * base_hockey(np.maximum(e2, 0.0))[1], 0.0)
    return d1, d2


class LRFamily:
    """Shared part of the likelihood-ratio families: profiles from ``log_tails``.

    A subclass gives ``tails``, ``log_tails``, ``logt_bracket``, ``seed_points`` and
    ``weights``; this base derives ``upper_tails`` and ``hockey`` (module docstring).
    ``l_max`` bounds the log likelihood ratio of every component (``inf`` unless a subclass
    knows a bound).
    """

    l_max = math.inf

    def upper_tails(self, logt) -> tuple[np.ndarray, np.ndarray]:
        """``(alpha, 1 - beta) = (P[L > lt], Q[L > lt])`` computed directly (no ``1 - beta``)."""
        lpu, lqu, _, _ = self.log_tails(np.atleast_1d(np.asarray(logt, dtype=float)))
        return np.exp(lpu), np.exp(lqu)

    def log_side(self, logt, upper: bool) -> tuple[np.ndarray, np.ndarray]:
        """``(log P[L > lt], log Q[L > lt])`` (``upper``) or ``(log P[L <= lt], log Q[L <= lt])``."""
        lpu, lqu, lpl, lql = self.log_tails(logt)
        return (lpu, lqu) if upper else (lpl, lql)

    def hockey(self, eps) -> tuple[np.ndarray, np.ndarray]:
        """``(delta_1(eps), delta_2(eps))``, weighted hockey-stick divergences (module docstring)."""
        e = check_eps(eps)
        lpu, lqu = self.log_side(e, True)
        lpl, lql = self.log_side(-e, False)
        with np.errstate(over="ignore", invalid="ignore"):
            d1 = hockey_from_logs(lqu, e + lpu)
            d2 = hockey_from_logs(lpl, e + lql)
        return d1, d2


#: Largest noncentrality (mu^2 / (1 - s^2)^2) a :class:`GaussVarFamily` component accepts when
#: ``n < QUAD_MIN_DOF`` (Boost's noncentral chi-square; larger ``n`` use the quadrature, unlimited).
MAX_NONCENTRALITY = 6e9


class GaussVarFamily(LRFamily):
    """Components ``T(N(0, I_n), N(mu_i e_1, s^2 I_n))`` sharing ``n`` and ``s = x/(x+1)``.

    Parameters
    ----------
    n : int >= 1
        Dimension (number of model parameters, or ``n - 1`` for the upper bounds).
    x : float > 0
        Shrink parameter: ``s = x / (x + 1)`` (``x = N`` for EASGM, ``K`` for FEASGM,
        ``k`` for an ASGM batch of size ``k``). Passing ``x`` rather than ``s`` keeps
        ``1 - s^2 = (2x + 1)/(x + 1)^2`` exact when ``x`` is 2e5.
    mus : array_like (m,), values >= 0
        Mean shifts (in units of the noise standard deviation of P).
    weights : array_like (m,), values >= 0

    Source: THEORY.md section 4 (checked by Monte Carlo there and in the tests).
    """

    def __init__(self, n: int, x: float, mus, weights):
        self.n = check_int(n, "n", 1)
        self.x = check_positive(x, "x")
        self.mus = np.atleast_1d(np.asarray(mus, dtype=float))
        if not np.all(np.isfinite(self.mus)) or np.any(self.mus < 0):
            raise ValueError("mus must be finite and >= 0")
        self.weights = _as_weights(weights, self.mus.size)
        x = self.x
        self.s2 = (x / (x + 1.0)) ** 2
        self.one_minus_s2 = (2.0 * x + 1.0) / (x + 1.0) ** 2
        self.a = (2.0 * x + 1.0) / (x * x)  # (1 - s^2) / s^2
        self.log_inv_s = math.log1p(1.0 / x)  # -log s
        self.lam_p = self.mus**2 / self.one_minus_s2**2
        self.lam_q = self.mus**2 * self.s2 / self.one_minus_s2**2
        lam = float(np.max(self.lam_p[self.weights > 0], initial=0.0))
        if lam > MAX_NONCENTRALITY and self.n < QUAD_MIN_DOF:
            # measured: from 1e10 (x = 2e5, mu = 1) on, scipy's noncentral chi-square fails at some alpha (NaN; at 2.5e13 a
            # silently wrong curve); up to 5.6e9 (x = 1.5e5) every alpha agrees with the G_mu limit to 1e-3. From
            # n >= QUAD_MIN_DOF on the quadrature of paperlib.fdp.tails is used instead, with no such limit
            raise ValueError(
                f"could not compute this trade-off: a component's noncentrality mu^2/(1-s^2)^2 = {lam:.3g} is "
                f"above {MAX_NONCENTRALITY:.0e}, where the noncentral chi-square numerics are not accurate "
                f"(x = {x:.6g}: the dataset is too large for this noise); use the upper bound instead")
        # log LR = L_max - (a/2) ||X - c||^2, with L_max its supremum
        self.l_max = self.n * self.log_inv_s + self.mus**2 / (2.0 * self.one_minus_s2)

    def radius2(self, logt) -> np.ndarray:
        """``R(t)``: reject H0 when ``||X - c||^2 < R``; shape (m, G)."""
        lt = np.asarray(logt, dtype=float)[None, :]
        return (2.0 / self.a) * (self.l_max[:, None] - lt)

    def tails(self, logt) -> tuple[np.ndarray, np.ndarray]:
        """Weighted ``(alpha, beta)`` at thresholds ``logt`` (1-D array); each shape (G,)."""
        r = self.radius2(logt)
        pos = r > 0
        rr = np.where(pos, r, 1.0)
        lam_p = self.lam_p[:, None]
        lam_q = self.lam_q[:, None]
        central = self.mus == 0
        a = np.empty_like(rr)
        b = np.empty_like(rr)
        if central.any():
            a[central] = stats.chi2.cdf(rr[central], self.n)
            b[central] = stats.chi2.sf(rr[central] / self.s2, self.n)
        nc = ~central
        if nc.any():
            lp = np.broadcast_to(lam_p, rr.shape)[nc]
            lq = np.broadcast_to(lam_q, rr.shape)[nc]
            if self.n >= QUAD_MIN_DOF:
                # large dimension: paperlib.fdp.tails.ncx2_cdf_sf (~1e-14 absolute, ~1-5 us a value;
                # Boost's Poisson sum costs ~85 us at noncentrality 9e6 and fails beyond 6e9)
                a[nc] = ncx2_cdf_sf(rr[nc], self.n, lp, which="cdf")[0]
                b[nc] = ncx2_cdf_sf(rr[nc] / self.s2, self.n, lq, which="sf")[1]
            else:
                a[nc] = stats.ncx2.cdf(rr[nc], self.n, lp)
                b[nc] = stats.ncx2.sf(rr[nc] / self.s2, self.n, lq)
        a = np.where(pos, a, 0.0)
        b = np.where(pos, b, 1.0)
        w = self.weights[:, None]
        return (w * a).sum(axis=0), (w * b).sum(axis=0)

    def log_tails(self, logt) -> tuple[np.ndarray, ...]:
        """``log`` of ``P[L > lt], Q[L > lt], P[L <= lt], Q[L <= lt]`` (weighted sums), each (G,).

        ``P[L > lt] = F(R; n, lam_P)``, ``Q[L > lt] = F(R/s^2; n, lam_Q)`` and the
        complements as survival functions, all from :mod:`paperlib.fdp.tails` (log space,
        accurate far into the tails); ``R <= 0`` (``lt`` above the supremum ``l_max``)
        gives ``P[L > lt] = Q[L > lt] = 0``.
        """
        return self.log_side(logt, True) + self.log_side(logt, False)

    def log_side(self, logt, upper: bool) -> tuple[np.ndarray, np.ndarray]:
        """One side of :meth:`log_tails`: ``(log P[L > lt], log Q[L > lt])`` when ``upper``, else
        ``(log P[L <= lt], log Q[L <= lt])`` (half the work when only one side is needed)."""
        lt = np.atleast_1d(np.asarray(logt, dtype=float))
        keep = self.weights > 0
        r = self.radius2(lt)[keep]
        logw = np.log(self.weights[keep])
        shape = r.shape
        fill = -np.inf if upper else 0.0  # R <= 0: L > lt never happens
        out = [np.full(shape, fill), np.full(shape, fill)]
        pos = r > 0
        if pos.any():
            # L > lt  <=>  ||X - c||^2 < R: a cdf for the upper side, an sf for the lower one
            for o, lam, scale in ((out[0], self.lam_p, 1.0), (out[1], self.lam_q, self.s2)):
                lam_full = np.broadcast_to(lam[keep][:, None], shape)
                o[pos] = ncx2_log(r[pos] / scale, self.n, lam_full[pos], upper=not upper, deep=False)
                self._fill_deep(o, logw, r / scale, lam_full, upper=not upper)
        return tuple(_weighted_logsum(logw, o) for o in out)

    def _fill_deep(self, o, logw, x, lam, upper):
        """Evaluate the entries below TINY (NaN) that can matter: a term whose bound
        ``w_i * TINY`` is below e^-50 of the column's other terms is left out (set to -inf)."""
        deep = np.isnan(o)
        if not deep.any():
            return
        total = _weighted_logsum(logw, np.where(deep, -np.inf, o))  # the column without its deep terms
        for i, g in zip(*np.nonzero(deep)):
            if logw[i] + math.log(TINY) < total[g] - 50.0:
                o[i, g] = -np.inf
            else:
                o[i, g] = ncx2_log_deep(float(x[i, g]), float(self.n), float(lam[i, g]), upper)

    def logt_bracket(self) -> tuple[float, float]:
        """A range of ``log t`` holding all but a negligible part of each component's mass."""
        n, a = self.n, self.a
        lo, hi = np.inf, -np.inf
        for lam, scale in ((self.lam_p, 1.0), (self.lam_q, self.s2)):
            mean = scale * (n + lam)
            sd = scale * np.sqrt(2 * n + 4 * lam)
            # generous: chi-square upper tails are heavier than normal ones
            r_hi = mean + 60 * sd + 200 * scale
            lo = min(lo, float(np.min(self.l_max - 0.5 * a * r_hi)))
            r_lo = np.maximum(mean - 40 * sd, 0.0)
            hi = max(hi, float(np.max(self.l_max - 0.5 * a * r_lo)))
        return lo, min(hi, float(np.max(self.l_max)))

    def seed_points(self, per_component: int = 24) -> np.ndarray:
        """Starting thresholds around each component's bulk (quantiles of L under P and Q)."""
        pts = []
        u = np.linspace(-8, 8, per_component)
        for lam, scale in ((self.lam_p, 1.0), (self.lam_q, self.s2)):
            mean = scale * (self.n + lam)
            sd = scale * np.sqrt(2 * self.n + 4 * lam)
            r = np.maximum(mean[:, None] + sd[:, None] * u[None, :], 0.0)
            pts.append((self.l_max[:, None] - 0.5 * self.a * r).ravel())
        return np.unique(np.concatenate(pts))


class GaussShiftFamily(LRFamily):
    """Components ``G_mu = T(N(0,1), N(mu,1))``; ``L = mu X - mu^2/2``.

    ``mus`` (m,) values > 0 (use :class:`IdentityFamily` for mu = 0), ``weights`` (m,).
    Source: Dong, Roth, Su (2022), Definition 2.7.
    """

    def __init__(self, mus, weights):
        self.mus = np.atleast_1d(np.asarray(mus, dtype=float))
        if not np.all(np.isfinite(self.mus)) or np.any(self.mus <= 0):
            raise ValueError("mus must be finite and > 0 for a Gaussian shift")
        self.weights = _as_weights(weights, self.mus.size)

    def tails(self, logt):
        lt = np.asarray(logt, dtype=float)[None, :]
        mu = self.mus[:, None]
        z = (lt + mu**2 / 2) / mu
        a = special.ndtr(-z)
        b = special.ndtr(z - mu)
        w = self.weights[:, None]
        return (w * a).sum(axis=0), (w * b).sum(axis=0)

    def log_tails(self, logt):
        """Logs of ``P[L > lt], Q[L > lt], P[L <= lt], Q[L <= lt]`` (``log_ndtr``), each (G,)."""
        lt = np.atleast_1d(np.asarray(logt, dtype=float))[None, :]
        mu = self.mus[:, None]
        z = (lt + mu**2 / 2) / mu
        logw = np.log(np.where(self.weights > 0, self.weights, 1.0))
        logw = np.where(self.weights > 0, logw, -np.inf)
        parts = (special.log_ndtr(-z), special.log_ndtr(mu - z), special.log_ndtr(z), special.log_ndtr(z - mu))
        return tuple(_weighted_logsum(logw, p) for p in parts)

    def hockey(self, eps):
        """``sum_i w_i delta_{G_mu_i}(eps)`` in both directions (``G_mu`` is symmetric)."""
        e = check_eps(eps)
        d = np.zeros(e.shape)
        for mu, w in zip(self.mus, self.weights):
            if w > 0:
                d = d + w * gauss_shift_hockey(e, float(mu))
        return d, d.copy()

    def logt_bracket(self):
        m = float(np.max(self.mus))
        return -40 * m - m * m, 40 * m + m * m

    def seed_points(self, per_component: int = 24):
        u = np.linspace(-8, 8, per_component)
        return np.unique((self.mus[:, None] * u[None, :]).ravel())


class SubsampledGaussian(LRFamily):
    """``f_q = T(N(0,1), (1-q) N(0,1) + q N(mu,1))``, the SGM trade-off of Bu et al. (2020).

    ``L = log((1-q) + q exp(mu X - mu^2/2))`` is increasing in ``X``, so the optimal
    test thresholds ``X``. Attained by SGM when the gradients of D are zero
    (THEORY.md section 3). ``q`` in (0, 1], ``mu > 0``, ``weight >= 0``.
    """

    def __init__(self, q: float, mu: float, weight: float = 1.0):
        self.q = check_rate(q)
        self.mu = check_positive(mu, "mu")
        self.weights = _as_weights([weight], 1)

    def _log_excess(self, logt):
        """``log((t - (1 - q)) / q)`` for ``t = e^lt`` (``-inf`` where ``t <= 1 - q``).

        This is ``mu x - mu^2/2`` at the threshold ``x`` of the likelihood ratio. Written with
        ``expm1``/``log1p`` so that it keeps its relative accuracy for any ``q`` in (0, 1]
        (``1 - q`` rounds to 1 for ``q < 1e-16``) and any ``lt``: ``t - 1 + q = expm1(lt) + q``,
        a sum of two positive numbers for ``lt >= 0``.
        """
        lt = np.asarray(logt, dtype=float)
        q = self.q
        log_q = math.log(q)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # lt > 1: (e^lt - 1 + q)/q = e^lt/q * (1 - (1 - q) e^-lt)
            large = lt - log_q + np.log1p(-(1.0 - q) * np.exp(-np.maximum(lt, 1.0)))
            # lt <= 1: log1p(expm1(lt)/q); expm1(lt) + q >= 0 is needed (t >= 1 - q)
            em = np.expm1(np.minimum(lt, 1.0))
            small = np.where(em + q > 0, np.log1p(em / q), -np.inf)
        return np.where(lt > 1.0, large, small)

    def _x_threshold(self, logt):
        """Threshold ``x``: ``L > lt`` exactly when ``X > x`` (``-inf`` when ``t <= 1 - q``)."""
        mu = self.mu
        x = (self._log_excess(logt) + mu * mu / 2) / mu
        return np.where(np.isnan(x), -np.inf, x)

    def tails(self, logt):
        x = self._x_threshold(logt)
        q, mu = self.q, self.mu
        a = special.ndtr(-x)
        b = (1 - q) * special.ndtr(x) + q * special.ndtr(x - mu)
        w = self.weights[0]
        return w * a, w * b

    def log_tails(self, logt):
        """Logs of ``P[L > lt], Q[L > lt], P[L <= lt], Q[L <= lt]`` with ``Q = (1-q) P + q N(mu, 1)``."""
        x = self._x_threshold(np.atleast_1d(np.asarray(logt, dtype=float)))
        q, mu = self.q, self.mu
        lw = math.log(self.weights[0]) if self.weights[0] > 0 else -math.inf
        l1q = math.log1p(-q) if q < 1 else -math.inf
        lq = math.log(q)
        lpu, lpl = special.log_ndtr(-x), special.log_ndtr(x)
        lqu = np.logaddexp(l1q + lpu, lq + special.log_ndtr(mu - x))
        lql = np.logaddexp(l1q + lpl, lq + special.log_ndtr(x - mu))
        return lw + lpu, lw + lqu, lw + lpl, lw + lql

    def hockey(self, eps):
        """Both directions from ``G_mu`` exactly (THEORY.md section 3), no cancellation for tiny ``q``.

        ``delta_1(eps) = q delta_G(eps')`` with ``e^eps' = 1 + (e^eps - 1)/q``;
        ``delta_2(eps) = c delta_G(eps'')`` with ``c = 1 - e^eps (1 - q)`` (0 when negative) and
        ``e^eps'' = e^eps q / c``: the hockey-stick divergences of ``(P, (1-q) P + q G)``
        written as those of ``(P, G)`` (``P = N(0,1)``, ``G = N(mu, 1)``).
        """
        mu, w = self.mu, float(self.weights[0])

        def g_mu(e):
            d = gauss_shift_hockey(e, mu)
            return d, d

        d1, d2 = diluted_hockey(g_mu, self.q, eps)
        return w * d1, w * d2

    def logt_bracket(self):
        mu = self.mu
        lo = math.log1p(-self.q) if self.q < 1 else -40 * mu - mu * mu
        return lo - 1e-12, 40 * mu + mu * mu

    def seed_points(self, per_component: int = 48):
        xs = np.linspace(-8, 8 + self.mu, per_component)
        q, mu = self.q, self.mu
        # log((1 - q) + q e^{mu x - mu^2/2}) = log1p(q expm1(mu x - mu^2/2)), exact for tiny q
        with np.errstate(over="ignore"):
            return np.log1p(q * np.expm1(mu * xs - mu * mu / 2))


class IdentityFamily(LRFamily):
    """Identical pairs: ``L = 0``, trade-off ``Id(alpha) = 1 - alpha``, total weight ``weight``."""

    def __init__(self, weight: float):
        self.weights = _as_weights([weight], 1)

    def tails(self, logt):
        lt = np.asarray(logt, dtype=float)
        w = self.weights[0]
        return np.where(lt < 0, w, 0.0), np.where(lt >= 0, w, 0.0)

    def log_tails(self, logt):
        lt = np.atleast_1d(np.asarray(logt, dtype=float))
        lw = math.log(self.weights[0]) if self.weights[0] > 0 else -math.inf
        up = np.where(lt < 0, lw, -np.inf)
        lo = np.where(lt >= 0, lw, -np.inf)
        return up, up.copy(), lo, lo.copy()

    def hockey(self, eps):
        """Identical distributions: ``(1 - e^eps)_+ w = 0`` for every ``eps >= 0``, both directions."""
        e = check_eps(eps)
        return np.zeros(e.shape), np.zeros(e.shape)

    def logt_bracket(self):
        return -1.0, 1.0

    def seed_points(self, per_component: int = 0):
        return np.array([0.0])
