"""Trade-off functions and privacy profiles (f-DP).

Definitions follow Dong, Roth & Su, *Gaussian differential privacy* (JRSSB 2022)
and THEORY.md sections 1 and 3. A trade-off function ``f`` maps a false positive
rate (FPR, type I error) ``alpha`` in [0, 1] to the smallest false negative rate
(FNR, type II error) ``beta`` any test can reach at that FPR.

Everything here is plain numpy/scipy. Curves computed elsewhere are carried as
:class:`TradeOffCurve`: sampled points ``(alpha, beta)`` of a convex,
non-increasing function, optionally with the exact slope at each point, which
lets us bound the interpolation error from both sides.

The trade-off interface
-----------------------
Every curve type of :mod:`paperlib.fdp` (this module's :class:`TradeOffCurve` and
:class:`GaussianTradeOff`, :class:`~paperlib.fdp.mixture.LRMixture`,
:class:`~paperlib.fdp.mixture.PointwiseMixture`, :class:`~paperlib.fdp.chisquare.Chi2Pair`,
:class:`~paperlib.fdp.pld.PLDComposition`,
:class:`~paperlib.fdp.clt.CLTTradeOff`) is a :class:`TradeOff`:

==========================  ===========================================================
``f(alpha)``                FNR at FPR ``alpha`` (array in, array of the same shape out)
``f.curve(tol=1e-6)``       a :class:`TradeOffCurve` within ``tol`` of ``f`` (every type
                            takes ``tol``; exactly sampled types ignore it)
``f.delta(eps)``            privacy profile ``delta_f(eps)``, both directions, vectorised
``f.epsilon(delta)``        its inverse: smallest ``eps >= 0`` with ``delta_f(eps) <= delta``
``f.inverse()``             ``f^{-1}`` (the pair in the other order)
``f.symmetrised()``         ``min{f, f^{-1}}**``
``f.to_dict()``             JSON-ready dict; :func:`from_dict` (or ``TradeOff.from_dict``)
                            brings back a :class:`TradeOff` (a :class:`TradeOffCurve` for
                            sampled types) with the same values
``f.epsilon_bounds(delta)`` ``(eps_low, eps_up)``: the exact epsilon lies inside; a curve
                            computed exactly returns ``(eps, eps)``, a numerical composition
                            (:class:`~paperlib.fdp.pld.PLDComposition`) its error bracket
``f.delta_bounds(eps)``     the same for the privacy profile
``f.beta_bounds(alpha)``    the same for the FNR
``f.accounting_error(d)``   ``eps_up - eps_low`` at ``delta = d`` (0 for an exact curve)
``f.accounting()``          how a numerical composition was computed (grid, passes, accuracy
                            met); ``None`` for a curve computed exactly
``f.progress``              progress bar of a long computation (None, True, False or a
                            callable; :mod:`paperlib.fdp.progress`); unused by the others
``f.label``, ``f.meta``     what it is and how it was computed
==========================  ===========================================================

:func:`check_tradeoff` tests sampled points for the defining properties (THEORY.md
section 1); the library calls it on every curve it samples.
"""

from __future__ import annotations

import abc
import importlib
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special, stats

from paperlib.fdp.validation import ParameterError, check_alpha_array, check_delta, check_positive, check_probability

__all__ = [
    "TradeOff",
    "GaussianTradeOff",
    "gaussian_tradeoff",
    "identity_tradeoff",
    "eps_delta_tradeoff",
    "gaussian_delta",
    "TradeOffCurve",
    "epsilon_from_delta",
    "lower_convex_envelope",
    "check_tradeoff",
    "checked_curve",
    "chord_tangent_gaps",
    "jsonable",
    "from_dict",
    "register_from_dict",
    "DELTA_FLOOR",
    "SAMPLED_DELTA_FLOOR",
    "EPS_MAX",
]

#: Smallest ``delta`` for which ``epsilon(delta)`` is computed by the exact types: their
#: privacy profiles are evaluated in log space and keep ~1e-10 relative accuracy down to
#: here (tested against 60-digit mpmath at 1e-300); below it ValueError.
DELTA_FLOOR = 1e-300
#: Smallest ``delta`` for a sampled :class:`TradeOffCurve`: its ``beta`` values near 1 are
#: stored to ~1e-16 absolute, so its profile is known to ~1e-16 absolute only.
SAMPLED_DELTA_FLOOR = 1e-12
#: Largest ``eps`` the inversion of a privacy profile searches; a profile still 1 there gives
#: ``eps = inf`` (numerically disjoint outputs), one still falling a RuntimeError.
EPS_MAX = float(2**20)
#: Default tolerance of :func:`check_tradeoff` (absolute, on FNR values).
CHECK_TOL = 1e-9


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
        raise ParameterError("eps", f"eps must be a finite number >= 0, got {eps!r}")
    check_probability(delta, "delta")
    return np.maximum.reduce(
        [np.zeros_like(a), 1 - delta - math.exp(eps) * a, math.exp(-eps) * (1 - delta - a)]
    )


def gaussian_delta(eps, mu: float) -> np.ndarray:
    """Privacy profile of ``G_mu``: ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``.

    Balle & Wang (ICML 2018), Theorem 8; Dong, Roth, Su (2022), Corollary 2.13.
    ``eps`` array_like of finite reals, ``mu > 0``; returns an array of ``eps``'s shape,
    finite and in [0, 1] for every ``eps``. Evaluated as ``e^A (-expm1(B - A))`` with
    ``A = log Phi(-eps/mu + mu/2)``, ``B = eps + log Phi(-eps/mu - mu/2)`` (``log_ndtr``):
    relative accuracy ~1e-12 down to ``delta = 1e-300`` and no overflow for large ``eps``.
    """
    mu = check_positive(mu, "mu")
    e = np.asarray(eps, dtype=float)
    if not np.all(np.isfinite(e)):
        raise ParameterError("eps", "eps must be finite")
    la = special.log_ndtr(-e / mu + mu / 2)
    lb = e + special.log_ndtr(-e / mu - mu / 2)
    out = np.zeros(np.broadcast(la, lb).shape)
    ok = np.isfinite(la) & (lb < la)
    out[ok] = np.exp(la[ok]) * -np.expm1(lb[ok] - la[ok])
    return out


class TradeOff(abc.ABC):
    """The trade-off interface every curve type implements (module docstring).

    Subclasses implement :meth:`curve`; the other methods have defaults that go through
    the sampled curve, which exact types override (their own ``__call__``, ``delta``,
    ``delta_limit``). Attributes ``label`` (str) and ``meta`` (dict).
    """

    label = ""
    #: progress bar of a long computation (numerical compositions); other curves ignore it
    progress = None

    @abc.abstractmethod
    def curve(self, tol: float = 1e-6) -> "TradeOffCurve":
        """A :class:`TradeOffCurve` within ``tol`` of this function."""

    def __call__(self, alpha):
        """FNR at FPR ``alpha`` (array_like in [0, 1]; the same shape back)."""
        return self.curve()(alpha)

    def delta(self, eps):
        """Privacy profile ``delta(eps)`` for ``eps >= 0`` (both directions); vectorised."""
        return self.curve().delta(eps)

    def delta_limit(self) -> float:
        """``lim delta(eps)`` as ``eps -> infinity`` (the mass no ``eps`` covers)."""
        return self.curve().delta_limit()

    def delta_floor(self) -> float:
        """Smallest ``delta`` that :meth:`epsilon` accepts."""
        return DELTA_FLOOR

    def epsilon(self, delta: float) -> float:
        """Smallest ``eps >= 0`` with ``delta(eps) <= delta``; ``inf`` when none (THEORY.md section 1).

        ``delta`` in ``[delta_floor(), 1)``; ValueError otherwise. ``inf`` also when the profile is
        still 1 at ``eps = EPS_MAX``: the outputs are disjoint to machine precision
        (:func:`epsilon_from_delta`).
        """
        return epsilon_from_delta(self.delta, delta, delta_inf=self.delta_limit(), floor=self.delta_floor())

    # ------------------------------------------------------------------ accuracy
    def epsilon_bounds(self, delta: float) -> tuple[float, float]:
        """``(eps_low, eps_up)`` with the exact epsilon inside; ``(eps, eps)`` for a curve computed exactly.

        Numerical compositions override it with their error bracket (THEORY.md §11).
        """
        e = float(self.epsilon(delta))
        return e, e

    def delta_bounds(self, eps):
        """``(delta_low, delta_up)`` at each ``eps``; both equal :meth:`delta` for an exact curve."""
        d = self.delta(eps)
        return d, d

    def beta_bounds(self, alpha):
        """``(beta_low, beta_up)`` at each FPR ``alpha``; both equal ``f(alpha)`` for an exact curve."""
        b = self(alpha)
        return b, b

    def accounting_error(self, delta: float) -> float:
        """Width ``eps_up - eps_low`` of :meth:`epsilon_bounds` at ``delta`` (0 when exact, inf when
        an end is infinite and the other is not)."""
        lo, hi = self.epsilon_bounds(delta)
        if lo == hi:
            return 0.0
        return float(hi - lo) if math.isfinite(hi) else math.inf

    def accounting(self) -> dict | None:
        """How a numerical composition was computed (grid, passes, accuracy met); ``None`` for a curve
        computed exactly (to machine precision or in closed form)."""
        return None

    def inverse(self) -> "TradeOff":
        """``f^{-1}``: the trade-off of the pair in the other order (sampled)."""
        return self.curve().inverse()

    def symmetrised(self) -> "TradeOff":
        """``min{f, f^{-1}}**``, the symmetric trade-off of the unordered pair (sampled)."""
        return self.curve().symmetrised()

    def to_dict(self) -> dict:
        """JSON-ready dict of the sampled curve (``from_dict`` gives back a :class:`TradeOffCurve`)."""
        d = self.curve().to_dict()
        d["meta"] = dict(d.get("meta", {}), source=type(self).__name__)
        return d

    @classmethod
    def from_dict(cls, data: dict) -> "TradeOff":
        """The object a :meth:`to_dict` dict describes (see :func:`from_dict`)."""
        return from_dict(data)


# types whose dicts rebuild the exact object; the module is imported on first use
_FROM_DICT_MODULES = {"CLTTradeOff": "paperlib.fdp.clt"}
_FROM_DICT: dict = {}


def register_from_dict(kind: str, build) -> None:
    """Let :func:`from_dict` rebuild dicts whose ``type`` is ``kind`` with ``build(data)``."""
    _FROM_DICT[kind] = build


def from_dict(data: dict) -> TradeOff:
    """Rebuild a :class:`TradeOff` from ``to_dict()`` output or a cached curve dict.

    ``data["type"]`` names the type (``"TradeOffCurve"``, ``"GaussianTradeOff"``,
    ``"CLTTradeOff"``); a dict without ``type`` but with ``alpha`` and ``beta`` lists (how the
    book's result cache stores curves) is a :class:`TradeOffCurve`. ``slope``, ``label``
    and ``meta`` are optional. Raises ValueError for anything else.
    """
    if not isinstance(data, dict):
        raise ValueError(f"data must be a dict from to_dict(), got {type(data).__name__}")
    kind = data.get("type", "TradeOffCurve" if "alpha" in data and "beta" in data else None)
    if kind in _FROM_DICT_MODULES and kind not in _FROM_DICT:
        importlib.import_module(_FROM_DICT_MODULES[kind])
    if kind == "TradeOffCurve":
        if "alpha" not in data or "beta" not in data:
            raise ValueError("a TradeOffCurve dict needs 'alpha' and 'beta'")
        slope = data.get("slope")
        if slope is not None:
            slope = np.array([-np.inf if v is None else float(v) for v in slope])
        return TradeOffCurve(np.asarray(data["alpha"], dtype=float), np.asarray(data["beta"], dtype=float),
                             slope, label=str(data.get("label", "")), meta=dict(data.get("meta") or {}))
    if kind == "GaussianTradeOff":
        return GaussianTradeOff(float(data["mu"]), label=str(data.get("label", "")),
                                meta=dict(data.get("meta") or {}))
    if kind in _FROM_DICT:
        return _FROM_DICT[kind](data)
    raise ValueError(f"data['type'] must be one of TradeOffCurve, GaussianTradeOff, CLTTradeOff, got {kind!r}")


def check_tradeoff(alpha, beta, tol: float = CHECK_TOL) -> str | None:
    """Why sampled points ``(alpha, beta)`` are not on a trade-off function, or ``None``.

    Checks, within the absolute tolerance ``tol`` (THEORY.md section 1): every value finite,
    ``alpha`` in [0, 1] ascending; ``beta(0) <= 1``; ``0 <= beta <= 1 - alpha``;
    non-increasing; convex (each point on or below the chord of its neighbours).
    ``alpha``, ``beta`` 1-D arrays of one length >= 2. Returns a short reason or ``None``.
    """
    a = np.asarray(alpha, dtype=float)
    b = np.asarray(beta, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        return "alpha and beta are not 1-D arrays of one length >= 2"
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return "a value is not finite"
    if np.any(np.diff(a) < 0) or a[0] < -tol or a[-1] > 1 + tol:
        return "alpha is not ascending in [0, 1]"
    if b[0] > 1 + tol or np.any(b < -tol):
        return f"beta leaves [0, 1] (beta(0) = {b[0]:.6g}, min {b.min():.6g})"
    over = b - (1 - a)
    if np.any(over > tol):
        i = int(np.argmax(over))
        return f"beta > 1 - alpha at alpha = {a[i]:.6g} (beta = {b[i]:.10g})"
    if np.any(np.diff(b) > tol):
        i = int(np.argmax(np.diff(b)))
        return f"beta increases at alpha = {a[i]:.6g}"
    if a.size >= 3:
        a0, a1, a2 = a[:-2], a[1:-1], a[2:]
        w = a2 - a0
        ok = w > 0
        t = np.where(ok, (a1 - a0) / np.where(ok, w, 1.0), 0.0)
        chord = b[:-2] + (b[2:] - b[:-2]) * t
        above = np.where(ok, b[1:-1] - chord, 0.0)
        if np.any(above > tol):
            i = int(np.argmax(above)) + 1
            return f"not convex at alpha = {a[i]:.6g} ({above[i - 1]:.3g} above the chord)"
    return None


def checked_curve(alpha, beta, slope=None, *, label: str = "", meta: dict | None = None,
                  tol: float = CHECK_TOL) -> "TradeOffCurve":
    """A :class:`TradeOffCurve` from computed points, after :func:`check_tradeoff`.

    Raises RuntimeError "could not compute a valid trade-off curve for these parameters
    (reason)" when the points are not on a trade-off function within ``tol``.
    """
    c = TradeOffCurve(alpha, beta, slope, label=label, meta=dict(meta or {}))
    why = check_tradeoff(c.alpha, c.beta, tol)
    if why is not None:
        raise RuntimeError(f"could not compute a valid trade-off curve for these parameters ({why})")
    return c


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
class TradeOffCurve(TradeOff):
    """A trade-off function sampled at points, evaluated by interpolation (THEORY.md section 1).

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
            raise ParameterError("alpha", "alpha and beta must be 1-D arrays of the same length >= 2")
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

    def curve(self, tol: float = 1e-6) -> "TradeOffCurve":
        """The curve itself (already sampled; ``tol`` is accepted and ignored)."""
        return self

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
        g = chord_tangent_gaps(self.alpha, self.beta, self.slope)
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
        true profile, below it by at most ``e^eps * max_gap``. Finite in [0, 1] for every
        finite ``eps >= 0`` (``e^eps`` is applied in log space: no ``inf * 0``).
        """
        e = np.atleast_1d(np.asarray(eps, dtype=float))
        if not np.all(np.isfinite(e)) or np.any(e < 0):
            raise ParameterError("eps", f"eps must be finite and >= 0, got {eps!r}")
        out = np.empty(e.shape)
        a, b = self.alpha, self.beta
        with np.errstate(divide="ignore", over="ignore"):
            la, lb = np.log(a), np.log(b)
        for i, ei in enumerate(e.ravel()):
            with np.errstate(over="ignore"):
                ea = np.where(a > 0, np.exp(np.minimum(ei + la, 709.0)), 0.0)
                eb = np.where(b > 0, np.exp(np.minimum(ei + lb, 709.0)), 0.0)
            d1 = np.max(1 - b - ea)
            d2 = np.max(1 - a - eb)
            out.flat[i] = max(d1, d2, 0.0)
        out = np.minimum(out, 1.0)
        return out if np.ndim(eps) else out[0]

    def delta_limit(self) -> float:
        """``lim delta(eps)``: ``max(1 - f(0), 1 - min{a : f(a) = 0})`` (reached at finite ``eps``)."""
        zero = np.flatnonzero(self.beta <= 0)
        a0 = float(self.alpha[zero[0]]) if zero.size else 1.0
        return max(1.0 - float(self.beta[0]), 1.0 - a0, 0.0)

    def delta_floor(self) -> float:
        return SAMPLED_DELTA_FLOOR

    def to_dict(self) -> dict:
        """JSON-ready form: ``{"type": "TradeOffCurve", "alpha": [...], "beta": [...], "slope":
        [...] or None, "label": ..., "meta": ...}`` (infinite slopes as ``None``)."""
        slope = None
        if self.slope is not None:
            slope = [float(v) if np.isfinite(v) else None for v in self.slope]
        return {
            "type": "TradeOffCurve",
            "alpha": self.alpha.tolist(),
            "beta": self.beta.tolist(),
            "slope": slope,
            "label": self.label,
            "meta": jsonable(self.meta),
        }


class GaussianTradeOff(TradeOff):
    """``G_mu = T(N(0,1), N(mu,1))``, mu-GDP (Dong, Roth, Su 2022, Definition 2.7), exactly.

    ``f(alpha)`` is :func:`gaussian_tradeoff`, ``f.delta(eps)`` :func:`gaussian_delta`
    (Balle-Wang, log space); ``G_mu`` is symmetric, so ``inverse()`` and ``symmetrised()``
    return it. ``mu > 0``.
    """

    def __init__(self, mu: float, label: str = "", meta: dict | None = None):
        self.mu = check_positive(mu, "mu")
        self.label = label or f"G_{self.mu:g}"
        self.meta = dict(meta or {})
        self._curves: dict = {}

    def __call__(self, alpha):
        return gaussian_tradeoff(alpha, self.mu)

    def curve(self, tol: float = 1e-6) -> "TradeOffCurve":
        """Sampled at thresholds ``z`` (reject when ``x > z``), refined until chord error <= ``tol``."""
        key = float(tol)
        if key not in self._curves:
            mu = self.mu
            z = np.linspace(-40.0, 40.0 + mu, 801)
            for _ in range(30):
                a, b = stats.norm.sf(z), stats.norm.cdf(z - mu)
                slope = -np.exp(np.minimum(mu * z - mu * mu / 2, 700.0))
                va = np.concatenate([[0.0], a[::-1], [1.0]])
                vb = np.concatenate([[1.0], b[::-1], [0.0]])
                vs = np.concatenate([[-np.inf], slope[::-1], [0.0]])
                gaps = chord_tangent_gaps(va, vb, vs)[1:-1]
                bad = np.flatnonzero(gaps > tol)
                if bad.size == 0:
                    break
                zz = z[::-1]
                z = np.union1d(z, 0.5 * (zz[bad] + zz[bad + 1]))
            self._curves[key] = checked_curve(va, vb, vs, label=self.label, meta=dict(self.meta, tol=tol))
        return self._curves[key]

    def delta(self, eps):
        e = np.asarray(eps, dtype=float)
        if not np.all(np.isfinite(e)) or np.any(e < 0):
            raise ParameterError("eps", f"eps must be finite and >= 0, got {eps!r}")
        d = gaussian_delta(e, self.mu)
        return d if np.ndim(eps) else float(d)

    def delta_limit(self) -> float:
        return 0.0

    def inverse(self) -> "GaussianTradeOff":
        return self

    def symmetrised(self) -> "GaussianTradeOff":
        return self

    def to_dict(self) -> dict:
        return {"type": "GaussianTradeOff", "mu": self.mu, "label": self.label, "meta": jsonable(self.meta)}


def jsonable(obj):
    """``obj`` with numpy arrays and scalars turned into lists and Python numbers (for JSON)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def chord_tangent_gaps(alpha, beta, slope) -> np.ndarray:
    """Per-interval bound on ``|chord - f|`` of a convex curve from the tangents at both ends.

    ``alpha``, ``beta``, ``slope``: arrays of one length ``m`` (points and slopes, ``alpha``
    ascending); returns ``m - 1`` gaps >= 0 (THEORY.md section 1: chord above, tangents below).
    """
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


def epsilon_from_delta(delta_fn, delta: float, eps_max: float = EPS_MAX, *, delta_inf: float | None = None,
                       floor: float = DELTA_FLOOR) -> float:
    """Invert a non-increasing privacy profile: smallest ``eps >= 0`` with ``delta_fn(eps) <= delta``.

    Parameters
    ----------
    delta_fn : callable float -> float
        The privacy profile ``delta(eps)`` (finite, in [0, 1]).
    delta : float in ``[floor, 1)``
    eps_max : float > 0, search limit (default ``2**20``).
    delta_inf : float or None
        ``lim delta(eps)`` as ``eps -> infinity`` when known: ``inf`` is returned when it
        exceeds ``delta``. When not given, a profile that stays exactly constant above
        ``delta`` over three doublings of ``eps`` (below ``1 - 1e-9``) is taken to have
        reached its limit (a privacy profile is convex in ``e^eps``).
    floor : smallest ``delta`` accepted (default :data:`DELTA_FLOOR`).

    Returns ``eps`` (float, relative accuracy ~1e-12 of the root of ``log delta(eps) =
    log delta``, Brent's method) or ``inf``: when the limit exceeds ``delta``, when the
    profile is flat above it (see ``delta_inf``), and when it is still 1 (to 1e-9) at
    ``eps_max``: the two outputs are then disjoint to machine precision, and no finite
    epsilon is the answer.

    Raises ValueError when ``delta`` is outside ``[floor, 1)``; RuntimeError "could not
    compute epsilon for these parameters (...)" when ``delta_fn`` returns a value that is
    not finite, or is still falling but above ``delta`` at ``eps_max`` (a finite epsilon
    beyond the search range: never capped silently). No curve of this package reaches that
    case at ``delta >= DELTA_FLOOR``.
    """
    delta = check_delta(delta)
    if delta < floor:
        raise ParameterError("delta", f"delta must be >= {floor:g} (the privacy profile is not computed accurately "
                         f"below), got {delta!r}")

    def d(e):
        v = float(np.asarray(delta_fn(float(e))).reshape(-1)[0])
        if not math.isfinite(v):
            raise RuntimeError(f"could not compute epsilon for these parameters (delta({e:g}) = {v})")
        return max(v, 0.0)

    if delta_inf is not None and delta_inf > delta:
        return math.inf
    lo, dlo = 0.0, d(0.0)
    if dlo <= delta:
        return 0.0
    hi, dhi = 1.0, d(1.0)
    flat = 0
    while dhi > delta:
        flat = flat + 1 if dhi == dlo and dhi < 1 - 1e-9 else 0
        if delta_inf is None and flat >= 3:
            return math.inf
        if hi >= eps_max:
            if dhi >= 1 - 1e-9:
                # delta(2^20) = 1 to machine precision: the outputs are numerically disjoint
                return math.inf
            raise RuntimeError(f"could not compute epsilon for these parameters (delta(eps) = {dhi:.6g} > "
                               f"{delta:g} still at eps = {hi:g})")
        lo, dlo = hi, dhi
        hi = min(2.0 * hi, eps_max)
        dhi = d(hi)
    ld = math.log(delta)

    def g(e):
        v = d(e)
        return (math.log(v) if v > 0 else -800.0) - ld

    if g(hi) == 0:
        return hi
    # relative tolerance only: epsilon of a tiny-q claim can be ~1e-15
    return float(optimize.brentq(g, lo, hi, xtol=1e-300, rtol=1e-13, maxiter=500))
