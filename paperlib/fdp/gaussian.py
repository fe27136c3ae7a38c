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
``non_central_chi_squared``), checked against an independent quadrature for ``n``
up to 1.5e6 in ``tests/test_gaussian.py``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from paperlib.validation import check_int, check_positive, check_rate

__all__ = [
    "GaussVarFamily",
    "GaussShiftFamily",
    "SubsampledGaussian",
    "IdentityFamily",
    "gauss_var_tradeoff_points",
]


def _as_weights(weights, size: int) -> np.ndarray:
    w = np.asarray(weights, dtype=float).reshape(-1)
    if w.size != size or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be finite, >= 0, one per component")
    return w


class GaussVarFamily:
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
            a[nc] = stats.ncx2.cdf(rr[nc], self.n, lp)
            b[nc] = stats.ncx2.sf(rr[nc] / self.s2, self.n, lq)
        a = np.where(pos, a, 0.0)
        b = np.where(pos, b, 1.0)
        w = self.weights[:, None]
        return (w * a).sum(axis=0), (w * b).sum(axis=0)

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


class GaussShiftFamily:
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

    def logt_bracket(self):
        m = float(np.max(self.mus))
        return -40 * m - m * m, 40 * m + m * m

    def seed_points(self, per_component: int = 24):
        u = np.linspace(-8, 8, per_component)
        return np.unique((self.mus[:, None] * u[None, :]).ravel())


class SubsampledGaussian:
    """``f_q = T(N(0,1), (1-q) N(0,1) + q N(mu,1))``, the SGM trade-off of Bu et al. (2020).

    ``L = log((1-q) + q exp(mu X - mu^2/2))`` is increasing in ``X``, so the optimal
    test thresholds ``X``. Attained by SGM when the gradients of D are zero
    (THEORY.md section 3). ``q`` in (0, 1], ``mu > 0``, ``weight >= 0``.
    """

    def __init__(self, q: float, mu: float, weight: float = 1.0):
        self.q = check_rate(q)
        self.mu = check_positive(mu, "mu")
        self.weights = _as_weights([weight], 1)

    def _x_threshold(self, logt):
        lt = np.asarray(logt, dtype=float)
        q, mu = self.q, self.mu
        # X > x* where q exp(mu x - mu^2/2) = t - (1 - q); empty when t <= 1 - q
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            log_rest = np.where(
                lt > 0,
                lt + np.log1p(-(1 - q) * np.exp(-np.maximum(lt, 0))),
                np.log(np.maximum(np.exp(np.minimum(lt, 0)) - (1 - q), 0)),
            )
        x = (log_rest - math.log(q) + mu * mu / 2) / mu
        return np.where(np.isfinite(x), x, -np.inf)

    def tails(self, logt):
        x = self._x_threshold(logt)
        q, mu = self.q, self.mu
        a = special.ndtr(-x)
        b = (1 - q) * special.ndtr(x) + q * special.ndtr(x - mu)
        w = self.weights[0]
        return w * a, w * b

    def logt_bracket(self):
        mu = self.mu
        lo = math.log1p(-self.q) if self.q < 1 else -40 * mu - mu * mu
        return lo - 1e-12, 40 * mu + mu * mu

    def seed_points(self, per_component: int = 48):
        xs = np.linspace(-8, 8 + self.mu, per_component)
        q, mu = self.q, self.mu
        return np.log((1 - q) + q * np.exp(mu * xs - mu * mu / 2))


class IdentityFamily:
    """Identical pairs: ``L = 0``, trade-off ``Id(alpha) = 1 - alpha``, total weight ``weight``."""

    def __init__(self, weight: float):
        self.weights = _as_weights([weight], 1)

    def tails(self, logt):
        lt = np.asarray(logt, dtype=float)
        w = self.weights[0]
        return np.where(lt < 0, w, 0.0), np.where(lt >= 0, w, 0.0)

    def logt_bracket(self):
        return -1.0, 1.0

    def seed_points(self, per_component: int = 0):
        return np.array([0.0])


def gauss_var_tradeoff_points(n: int, x: float, mu: float, logt) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha(t), beta(t))`` of ``T(N(0,I_n), N(mu e_1, s^2 I_n))``, ``s = x/(x+1)``.

    Convenience wrapper over :class:`GaussVarFamily` for one component (THEORY.md section 4).
    """
    return GaussVarFamily(n, x, [mu], [1.0]).tails(np.atleast_1d(logt))
