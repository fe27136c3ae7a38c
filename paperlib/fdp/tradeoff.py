"""Trade-off functions and privacy profiles (f-DP).

Definitions follow Dong, Roth & Su, *Gaussian differential privacy* (JRSSB 2022)
and THEORY.md sections 1 and 3. A trade-off function ``f`` maps a false positive
rate (FPR, type I error) ``alpha`` in [0, 1] to the smallest false negative rate
(FNR, type II error) ``beta`` any test can reach at that FPR.

Everything here is plain numpy/scipy. Curves computed elsewhere are carried as
:class:`TradeOffCurve`: sampled points ``(alpha, beta)`` of a convex,
non-increasing function, optionally with the exact slope at each point, which
lets us bound the interpolation error from both sides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, stats

from paperlib.validation import check_alpha_array, check_delta, check_positive, check_probability

__all__ = [
    "gaussian_tradeoff",
    "identity_tradeoff",
    "eps_delta_tradeoff",
    "gaussian_delta",
    "TradeOffCurve",
    "epsilon_from_delta",
    "lower_convex_envelope",
]


def gaussian_tradeoff(alpha, mu: float) -> np.ndarray:
    """``G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)``, the trade-off of N(0,1) vs N(mu,1).

    Parameters
    ----------
    alpha : array_like, values in [0, 1]
        FPR values.
    mu : float >= 0
        Mean shift in units of the noise standard deviation.

    Returns
    -------
    ndarray, same shape as ``alpha``: FNR values in [0, 1].

    Raises
    ------
    ValueError if ``mu`` is negative or not finite, or ``alpha`` leaves [0, 1].

    Source: Dong, Roth, Su (2022), Definition 2.7; THEORY.md section 1.
    """
    a = check_alpha_array(alpha)
    if not (isinstance(mu, (int, float, np.floating)) and math.isfinite(mu) and mu >= 0):
        raise ValueError(f"mu must be a finite number >= 0, got {mu!r}")
    # isf(alpha) = Phi^{-1}(1 - alpha) without cancellation for small alpha
    return stats.norm.cdf(stats.norm.isf(a) - mu)


def identity_tradeoff(alpha) -> np.ndarray:
    """``Id(alpha) = 1 - alpha``: the trade-off of two identical distributions (perfect privacy)."""
    a = check_alpha_array(alpha)
    return 1.0 - a


def eps_delta_tradeoff(alpha, eps: float, delta: float) -> np.ndarray:
    """``f_{eps,delta}(alpha) = max{0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha)}``.

    The trade-off function equivalent to (eps, delta)-DP (Dong, Roth, Su 2022,
    Proposition 2.5). ``eps >= 0``, ``delta`` in [0, 1].
    """
    a = check_alpha_array(alpha)
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    check_probability(delta, "delta")
    return np.maximum.reduce(
        [np.zeros_like(a), 1 - delta - math.exp(eps) * a, math.exp(-eps) * (1 - delta - a)]
    )


def gaussian_delta(eps, mu: float) -> np.ndarray:
    """Privacy profile of ``G_mu``: ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``.

    Balle & Wang (ICML 2018), Theorem 8; Dong, Roth, Su (2022), Corollary 2.13.
    ``eps`` array_like of finite reals, ``mu > 0``.
    """
    mu = check_positive(mu, "mu")
    e = np.asarray(eps, dtype=float)
    if not np.all(np.isfinite(e)):
        raise ValueError("eps must be finite")
    # use logs so that e^eps * tiny does not overflow for large eps
    t1 = stats.norm.cdf(-e / mu + mu / 2)
    t2 = np.exp(e + stats.norm.logcdf(-e / mu - mu / 2))
    return np.maximum(t1 - t2, 0.0)


def lower_convex_envelope(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower convex hull of points ``(x, y)`` (x sorted ascending): Andrew's monotone chain."""
    hx: list[float] = []
    hy: list[float] = []
    for xi, yi in zip(x, y):
        while len(hx) >= 2:
            # drop the middle point when it lies on or above the chord
            cross = (hx[-1] - hx[-2]) * (yi - hy[-2]) - (hy[-1] - hy[-2]) * (xi - hx[-2])
            if cross <= 0:
                hx.pop()
                hy.pop()
            else:
                break
        hx.append(float(xi))
        hy.append(float(yi))
    return np.asarray(hx), np.asarray(hy)


@dataclass
class TradeOffCurve:
    """A trade-off function sampled at points, evaluated by interpolation.

    Attributes
    ----------
    alpha, beta : ndarray (m,)
        Points on the curve, ``alpha`` ascending from 0 to 1, ``beta`` non-increasing.
    slope : ndarray (m,) or None
        Exact derivative ``f'(alpha)`` at each point (``-t`` for a likelihood-ratio
        threshold ``t``). With slopes, :meth:`lower` gives a rigorous lower bound
        (the envelope of tangents) and :attr:`max_gap` bounds the interpolation error.
    label : str
        What the curve is (shown in plots and JSON).
    meta : dict
        How it was computed (parameters, truncated mass, ...).

    Evaluation ``curve(alpha)`` interpolates linearly between the points (the chord,
    an upper bound of a convex function); ``curve.lower(alpha)`` uses tangents when
    slopes are known. Both agree to within ``max_gap``.
    """

    alpha: np.ndarray
    beta: np.ndarray
    slope: np.ndarray | None = None
    label: str = ""
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        a = np.asarray(self.alpha, dtype=float)
        b = np.asarray(self.beta, dtype=float)
        if a.shape != b.shape or a.ndim != 1 or a.size < 2:
            raise ValueError("alpha and beta must be 1-D arrays of the same length >= 2")
        order = np.argsort(a, kind="stable")
        a, b = a[order], b[order]
        s = None if self.slope is None else np.asarray(self.slope, dtype=float)[order]
        # for equal alphas keep the smallest beta (T(alpha) is an infimum)
        keep = np.ones(a.size, dtype=bool)
        keep[1:] = np.diff(a) > 0
        if not keep.all():
            idx = np.flatnonzero(keep)
            b = np.minimum.reduceat(b, idx)
            a = a[idx]
            s = None if s is None else s[idx]
        self.alpha, self.beta, self.slope = a, np.clip(b, 0.0, 1.0), s

    # ------------------------------------------------------------------ evaluation
    def __call__(self, alpha) -> np.ndarray:
        """FNR at the given FPR values (linear interpolation between sampled points)."""
        a = check_alpha_array(alpha)
        return np.interp(a, self.alpha, self.beta)

    def lower(self, alpha) -> np.ndarray:
        """Rigorous lower bound of the curve at ``alpha``: the envelope of its tangents.

        Falls back to linear interpolation when no slopes are known.
        """
        a = check_alpha_array(alpha)
        if self.slope is None:
            return np.interp(a, self.alpha, self.beta)
        j = np.clip(np.searchsorted(self.alpha, a), 1, self.alpha.size - 1)
        out = np.interp(a, self.alpha, self.beta)
        # tangent lines at the two neighbouring sampled points bound a convex f from below;
        # their maximum (the tangent envelope) is the tightest such bound, within max_gap
        # of the chord (taking the minimum, as before, could be 2x max_gap or more low)
        best = np.full(a.shape, -np.inf)
        for idx in (j - 1, j):
            s = self.slope[idx]
            ok = np.isfinite(s)
            val = self.beta[idx] + np.where(ok, s, 0.0) * (a - self.alpha[idx])
            best = np.where(ok, np.maximum(best, val), best)
        out = np.where(np.isfinite(best), np.minimum(out, best), out)
        return np.clip(np.maximum(out, 0.0), 0.0, 1.0)

    @property
    def max_gap(self) -> float:
        """Largest difference between chord and tangent envelope (interpolation error bound)."""
        if self.slope is None:
            return float("nan")
        g = _chord_tangent_gaps(self.alpha, self.beta, self.slope)
        return float(np.max(g)) if g.size else 0.0

    # ------------------------------------------------------------------ operations
    def inverse(self) -> "TradeOffCurve":
        """``f^{-1}``: reflection of the graph in the line beta = alpha (THEORY.md section 1)."""
        slope = None
        if self.slope is not None:
            # reflected points are listed in reverse order, so their slopes must be too;
            # a flat piece (slope 0) becomes a vertical one (slope -inf)
            with np.errstate(divide="ignore"):
                slope = np.where(self.slope == 0, -np.inf, 1.0 / self.slope)[::-1].copy()
        return TradeOffCurve(
            self.beta[::-1].copy(), self.alpha[::-1].copy(), slope,
            label=f"inverse of {self.label}", meta=dict(self.meta),
        )

    def symmetrised(self) -> "TradeOffCurve":
        """``min{f, f^{-1}}**``: the lower convex envelope of the two directions.

        This is the symmetric trade-off of the unordered pair (Dong, Roth, Su 2022,
        Proposition F.2; the SGM claim ``C_q`` of Bu et al. 2020 is this of ``f_q``).
        """
        inv = self.inverse()
        grid = np.union1d(self.alpha, inv.alpha)
        y = np.minimum(np.interp(grid, self.alpha, self.beta), np.interp(grid, inv.alpha, inv.beta))
        hx, hy = lower_convex_envelope(grid, y)
        return TradeOffCurve(hx, hy, None, label=f"symmetrised {self.label}", meta=dict(self.meta))

    # ------------------------------------------------------------------ profiles
    def delta(self, eps) -> np.ndarray:
        """Privacy profile ``delta_f(eps)`` of the sampled curve (both directions).

        ``delta_f(eps) = max(sup_a [1 - f(a) - e^eps a], sup_a [1 - a - e^eps f(a)])``
        (THEORY.md section 1). On a piecewise-linear curve the suprema sit at the
        sampled points, so this is exact for the chord and a lower estimate of the
        true profile, below it by at most ``e^eps * max_gap``.
        """
        e = np.atleast_1d(np.asarray(eps, dtype=float))
        if not np.all(np.isfinite(e)) or np.any(e < 0):
            raise ValueError(f"eps must be finite and >= 0, got {eps!r}")
        ee = np.exp(e)[:, None]
        a, b = self.alpha[None, :], self.beta[None, :]
        d1 = np.max(1 - b - ee * a, axis=1)
        d2 = np.max(1 - a - ee * b, axis=1)
        out = np.maximum(np.maximum(d1, d2), 0.0)
        return out if np.ndim(eps) else out[0]

    def epsilon(self, delta: float) -> float:
        """Smallest ``eps >= 0`` with ``delta_f(eps) <= delta`` (``inf`` when none)."""
        return epsilon_from_delta(self.delta, delta)

    def to_dict(self) -> dict:
        """JSON-ready form: ``{"alpha": [...], "beta": [...], "label": ..., "meta": ...}``."""
        return {
            "alpha": self.alpha.tolist(),
            "beta": self.beta.tolist(),
            "label": self.label,
            "meta": _jsonable(self.meta),
        }


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def _chord_tangent_gaps(alpha, beta, slope) -> np.ndarray:
    """Per-interval bound on |chord - f| from the two end tangents of a convex curve."""
    a0, a1 = alpha[:-1], alpha[1:]
    b0, b1 = beta[:-1], beta[1:]
    s0, s1 = slope[:-1], slope[1:]
    width = a1 - a0
    ok = np.isfinite(s0) & np.isfinite(s1) & (width > 0)
    # where the two tangents meet; the gap is largest there
    with np.errstate(divide="ignore", invalid="ignore"):
        ax = (b1 - b0 + s0 * a0 - s1 * a1) / (s0 - s1)
    ax = np.where(ok & np.isfinite(ax), np.clip(ax, a0, a1), a0)
    tangent = np.maximum(b0 + np.where(ok, s0, 0) * (ax - a0), b1 + np.where(ok, s1, 0) * (ax - a1))
    chord = b0 + (b1 - b0) * np.where(width > 0, (ax - a0) / np.where(width > 0, width, 1), 0)
    gaps = np.where(ok, np.maximum(chord - tangent, 0.0), 0.0)
    # an end with an infinite slope: the chord is off by at most the interval's drop
    return np.where(~ok & (width > 0), np.abs(b0 - b1), gaps)


def epsilon_from_delta(delta_fn, delta: float, eps_max: float = 500.0) -> float:
    """Invert a non-increasing privacy profile: smallest ``eps >= 0`` with ``delta_fn(eps) <= delta``.

    Parameters
    ----------
    delta_fn : callable float -> float
        The privacy profile ``delta(eps)``.
    delta : float in (0, 1)
    eps_max : search limit; ``inf`` is returned when ``delta_fn(eps_max) > delta``.

    Raises ValueError when ``delta`` is outside (0, 1).
    """
    delta = check_delta(delta)

    def g(e):
        return float(delta_fn(float(e))) - delta

    if g(0.0) <= 0:
        return 0.0
    hi = 1.0
    while g(hi) > 0:
        hi *= 2
        if hi > eps_max:
            return math.inf
    return float(optimize.brentq(g, 0.0, hi, xtol=1e-10, rtol=1e-10))
