"""Privacy-loss laws: the pairs a round of the PLD engine is made of (THEORY.md §4, §5, §11).

A *law* is a pair ``(P, Q)`` of (sub-)probability measures given by the law of its privacy loss
``L = log dQ/dP`` under ``Q`` and under ``P``: :meth:`Law.log4` gives the logs of
``Q[L <= v], Q[L > v], P[L <= v], P[L > v]`` (finite losses only), :meth:`Law.inf_masses` the
masses put at infinite loss on the upper end (``Q`` at ``L = +inf``, ``P`` at ``L = -inf``): outcomes
only one side produces (:meth:`Law.exact_inf`, kept there on the lower end too) and mass left out
(at infinite loss on the upper end, dropped on the lower end),
:meth:`Law.span` a range of ``L`` holding all but about ``tail`` of both measures.

* :class:`ShiftLaw` ``G_mu``; :class:`DilutedLaw` ``(P, (1-w)P + wQ)`` of a base law (the subsampled
  Gaussian is ``DilutedLaw(ShiftLaw(mu), q)``); :class:`ScaleShiftLaw` ``T(N(0,1), N(mu, s^2))``;
  :class:`Chi2Law` ``T(N(0,I_m), N(0, s^2 I_m))`` (THEORY.md §4, §7).
* :class:`IndexedDilutedLaw`: subsampled Gaussians indexed by a revealed count ``m`` whose two laws
  differ (ASGM's dominating pair through ``(|B|, S_B + G)``, THEORY.md §11.2).
* :class:`DiscreteLaw`: a pair of discrete (sub-)measures given atom by atom (a binned attack's
  statistic, the count of DPSUR's separate draw, an outcome only one side produces).
* :class:`RoundLaw`: one round, a mixture (index revealed) of products of laws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import special, stats

from paperlib.fdp.tails import chi2_logcdf, chi2_logsf
from paperlib.fdp.validation import ParameterError, check_int, check_positive, check_probability

__all__ = ["ShiftLaw", "DilutedLaw", "ReplaceLaw", "ScaleShiftLaw", "Chi2Law", "IndexedDilutedLaw", "DiscreteLaw", "RoundLaw",
           "round_law_from_mixture"]


# ------------------------------------------------------------------------------- helpers
def _log1mexp(a: np.ndarray) -> np.ndarray:
    """``log(1 - e^a)`` for ``a <= 0`` (``-inf`` at 0), accurate on both sides of ``-log 2``."""
    a = np.minimum(np.asarray(a, dtype=float), 0.0)
    with np.errstate(divide="ignore"):
        return np.where(a > -0.6931471805599453, np.log(-np.expm1(a)), np.log1p(-np.exp(a)))


def _sq_shift_logtails(y: np.ndarray, m: float) -> tuple[np.ndarray, np.ndarray]:
    """``log P[(Z + m)^2 >= y]`` and ``log P[(Z + m)^2 < y]`` for ``Z ~ N(0, 1)``, ``m >= 0``.

    The noncentral chi-square with one degree of freedom, from ``log_ndtr``: both tails keep
    their relative accuracy. ``y <= 0`` gives ``(0, -inf)``, ``y = +inf`` gives ``(-inf, 0)``.
    """
    y = np.asarray(y, dtype=float)
    with np.errstate(invalid="ignore"):
        r = np.sqrt(np.maximum(y, 0.0))
    up = np.logaddexp(special.log_ndtr(-r - m), special.log_ndtr(m - r))
    near = special.log_ndtr(r - m)
    with np.errstate(invalid="ignore"):
        inner = near + _log1mexp(special.log_ndtr(-r - m) - near)  # r <= m: both in the lower tail
    low = np.where(r <= m, inner, _log1mexp(up))
    up = np.where(y <= 0, 0.0, up)
    low = np.where(y <= 0, -np.inf, low)
    return up, low


def _chi2_both(y: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``(log P[chi2_m > y], log P[chi2_m <= y])``: the smaller tail from :mod:`paperlib.fdp.tails`,
    the other as ``log(1 - e^small)`` (accurate: the small tail is below about 1/2)."""
    y = np.asarray(y, dtype=float)
    median = m * (1.0 - 2.0 / (9.0 * m)) ** 3  # Wilson-Hilferty; only picks the smaller tail
    low = y < median
    lsf = np.empty(y.shape)
    lcdf = np.empty(y.shape)
    if low.any():
        lcdf[low] = chi2_logcdf(y[low], m)
        lsf[low] = _log1mexp(lcdf[low])
    if (~low).any():
        lsf[~low] = chi2_logsf(y[~low], m)
        lcdf[~low] = _log1mexp(lsf[~low])
    return lsf, lcdf


def _tail_z(tail: float) -> float:
    """Normal quantile ``z`` with ``P[Z > z] = tail``."""
    return float(-special.ndtri(tail))


# ------------------------------------------------------------------------------- loss laws
class Law:
    """A pair ``(P, Q)`` given by the law of ``L = log dQ/dP`` under ``Q`` and under ``P``.

    Subclasses give :meth:`log4` (the logs of ``Q[L <= v], Q[L > v], P[L <= v], P[L > v]``,
    arrays of ``v``'s shape, ``v`` may be ``+-inf``) and :meth:`span` (a range of ``L``
    holding all but about ``tail`` of both laws); :meth:`inf_masses`, :meth:`totals` describe
    outcomes only one side produces and sub-probability pairs (default: none, probability laws).
    """

    def log4(self, v):  # pragma: no cover - interface
        raise NotImplementedError

    def span(self, tail: float) -> tuple[float, float]:  # pragma: no cover - interface
        raise NotImplementedError

    def key(self) -> tuple:
        return (type(self).__name__,) + tuple(self.__dict__.values())

    def inf_masses(self) -> tuple[float, float]:
        """``(Q[L = +inf], P[L = -inf])`` on the upper end: outcomes only one side produces and mass left out."""
        return 0.0, 0.0

    def exact_inf(self) -> tuple[float, float]:
        """The part of :meth:`inf_masses` that truly has infinite loss (outcomes only one side produces)."""
        return 0.0, 0.0

    def totals(self) -> tuple[float, float]:
        """Total masses ``(Q, P)``, infinite losses included (1 for a pair of probability laws)."""
        return 1.0, 1.0


class ShiftLaw(Law):
    """``G_mu = T(N(0,1), N(mu,1))``: ``L ~ N(mu^2/2, mu^2)`` under Q, ``N(-mu^2/2, mu^2)`` under P.

    ``mu > 0``. Source: Dong, Roth, Su (2022), Definition 2.7.
    """

    def __init__(self, mu: float):
        self.mu = check_positive(mu, "mu")

    def log4(self, v):
        v = np.asarray(v, dtype=float)
        mu = self.mu
        zq = (v - mu * mu / 2) / mu
        zp = (v + mu * mu / 2) / mu
        return special.log_ndtr(zq), special.log_ndtr(-zq), special.log_ndtr(zp), special.log_ndtr(-zp)

    def span(self, tail):
        z, mu = _tail_z(tail), self.mu
        return -mu * mu / 2 - z * mu, mu * mu / 2 + z * mu


class DilutedLaw(Law):
    """The pair ``(P, (1 - w) P + w Q)`` of a base pair ``(P, Q)``; ``w`` in (0, 1].

    Its trade-off function is ``w T(P,Q) + (1 - w) Id`` (THEORY.md §3 for SGM, where the base is
    ``G_{1/sigma}`` and ``w = q``; Eq. 14 for ASGM with the chi-square base). The loss
    ``L' = log(1 - w + w e^L)`` is increasing in the base loss ``L``, so ``L' <= v`` exactly when
    ``L <= log((e^v - 1 + w)/w)`` (``v > log(1-w)``; below, never).
    """

    def __init__(self, base: Law, w: float):
        self.base = base
        self.w = check_probability(w, "w", open_left=True)
        self.log_w = math.log(self.w)
        self.log_1mw = math.log1p(-self.w) if self.w < 1 else -math.inf

    def key(self):
        return ("DilutedLaw", self.w) + self.base.key()

    def _inverse(self, v):
        w = self.w
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            small = np.log(np.maximum(np.expm1(np.minimum(v, 1.0)) + w, 0.0)) - self.log_w
            large = v + np.log1p(-(1.0 - w) * np.exp(-np.maximum(v, 1.0))) - self.log_w
        out = np.where(v > 1.0, large, small)
        return np.where(v > self.log_1mw, out, -np.inf)

    def log4(self, v):
        v = np.asarray(v, dtype=float)
        bq_le, bq_gt, bp_le, bp_gt = self.base.log4(self._inverse(v))
        q_le = np.logaddexp(self.log_1mw + bp_le, self.log_w + bq_le)
        q_gt = np.logaddexp(self.log_1mw + bp_gt, self.log_w + bq_gt)
        return q_le, q_gt, bp_le, bp_gt

    def span(self, tail):
        lo, hi = self.base.span(tail)
        return (float(np.logaddexp(self.log_1mw, self.log_w + lo)), float(np.logaddexp(self.log_1mw, self.log_w + hi)))


class ReplaceLaw(Law):
    """The Poisson-subsampled Gaussian under replace-one: ``P = (1 - w) N(0,1) + w N(-mu, 1)`` vs
    ``Q = (1 - w) N(0,1) + w N(mu, 1)``, ``mu > 0``, ``w`` in (0, 1] (THEORY.md §11.3d).

    The record swapped out contributes ``-C u`` and the one swapped in ``C u`` (the others at 0, translated):
    dp_accounting's ``REPLACE_ONE`` pair with sensitivity ``C`` (``mu = 1/sigma``). The loss
    ``L(x) = log(a + b e^{mu x}) - log(a + b e^{-mu x})``, ``a = 1 - w``, ``b = w e^{-mu^2/2}``, is increasing in
    ``x``; ``L = v`` solves ``b t^2 + a (1 - e^v) t - b e^v = 0`` for ``t = e^{mu x}`` in closed form (each root
    written so that nothing cancels), and the tails are normal mixtures.
    """

    def __init__(self, mu: float, w: float):
        self.mu = check_positive(mu, "mu")
        self.w = check_probability(w, "w", open_left=True)
        self.log_w = math.log(self.w)
        self.log_1mw = math.log1p(-self.w) if self.w < 1 else -math.inf

    def key(self):
        return ("ReplaceLaw", self.mu, self.w)

    def _x(self, v):
        """``x`` with ``L(x) = v``."""
        v = np.asarray(v, dtype=float)
        mu, a = self.mu, 1.0 - self.w
        log_b = self.log_w - mu * mu / 2.0
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            ev = np.exp(np.minimum(v, 700.0))
            em1 = np.expm1(np.minimum(v, 700.0))
            root = np.sqrt((a * em1) ** 2 + 4.0 * np.exp(2 * log_b) * ev)
            # v >= 0: t = (a (e^v - 1) + root) / (2 b); v < 0: t = 2 b e^v / (a (1 - e^v) + root)
            log_t = np.where(v >= 0, np.log(a * em1 + root) - math.log(2.0) - log_b,
                             math.log(2.0) + log_b + v - np.log(-a * em1 + root))
            big = v > 600  # e^v overflows: t = a e^v / b (a > 0) or e^{v/2} (a = 0)
            log_t = np.where(big, (v + math.log(a) - log_b) if a > 0 else v / 2.0, log_t)
        return log_t / mu

    def log4(self, v):
        x = self._x(v)
        mu = self.mu
        q_le = np.logaddexp(self.log_1mw + special.log_ndtr(x), self.log_w + special.log_ndtr(x - mu))
        q_gt = np.logaddexp(self.log_1mw + special.log_ndtr(-x), self.log_w + special.log_ndtr(mu - x))
        p_le = np.logaddexp(self.log_1mw + special.log_ndtr(x), self.log_w + special.log_ndtr(x + mu))
        p_gt = np.logaddexp(self.log_1mw + special.log_ndtr(-x), self.log_w + special.log_ndtr(-mu - x))
        return q_le, q_gt, p_le, p_gt

    def _loss(self, x: float) -> float:
        mu, b = self.mu, self.log_w - self.mu ** 2 / 2.0
        return float(np.logaddexp(self.log_1mw, b + mu * x) - np.logaddexp(self.log_1mw, b - mu * x))

    def span(self, tail):
        z = _tail_z(tail) + self.mu + 1.0
        return self._loss(-z), self._loss(z)


class ScaleShiftLaw(Law):
    """``T(N(0,1), N(mu, s^2))`` with ``s = x/(x+1)``, ``mu >= 0``: the first coordinate of §4.

    With ``d = 1 - s^2``, ``A = log(1/s) + mu^2/(2d)``: ``L = A - (d/2) Y_Q`` under Q with
    ``Y_Q = (Z + mu s/d)^2`` and ``L = A - (d/(2 s^2)) Y_P`` under P with ``Y_P = (Z + mu/d)^2``
    (THEORY.md §11 with ``n = 1``). ``x`` rather than ``s`` keeps ``d = (2x+1)/(x+1)^2`` exact.
    """

    def __init__(self, x: float, mu: float):
        self.x = check_positive(x, "x")
        if not (math.isfinite(mu) and mu >= 0):
            raise ValueError(f"mu must be a finite number >= 0, got {mu!r}")
        self.mu = float(mu)
        x = self.x
        self.s2 = (x / (x + 1.0)) ** 2
        self.d = (2.0 * x + 1.0) / (x + 1.0) ** 2
        self.A = math.log1p(1.0 / x) + self.mu**2 / (2.0 * self.d)
        self.m_q = self.mu * math.sqrt(self.s2) / self.d
        self.m_p = self.mu / self.d

    def key(self):
        return ("ScaleShiftLaw", self.x, self.mu)

    def log4(self, v):
        return scale_shift_log4(np.asarray(v, dtype=float), self.A, self.d, self.s2, self.m_q, self.m_p)

    def span(self, tail):
        z = _tail_z(tail) + 1.0
        ends = []
        for m, scale in ((self.m_q, self.d / 2.0), (self.m_p, self.d / (2.0 * self.s2))):
            ends.append(self.A - scale * (m + z) ** 2)
            ends.append(self.A - scale * max(m - z, 0.0) ** 2)
        return min(ends), max(ends)


def scale_shift_log4(v, A, d, s2, m_q, m_p):
    """:meth:`ScaleShiftLaw.log4` with the law's constants as arrays broadcast against ``v`` (batches)."""
    with np.errstate(invalid="ignore"):
        yq = 2.0 * (A - v) / d
    yq = np.where(np.isnan(yq), 0.0, yq)
    q_le, q_gt = _sq_shift_logtails(yq, m_q)
    p_le, p_gt = _sq_shift_logtails(yq * s2, m_p)
    return q_le, q_gt, p_le, p_gt


class Chi2Law(Law):
    """``T(N(0, I_m), N(0, s^2 I_m))``, ``s = x/(x+1)``: the other ``m`` coordinates (§7, §11).

    ``L = m log(1/s) - (d/2) V`` under Q and ``m log(1/s) - (d/(2 s^2)) V`` under P, ``V ~ chi^2_m``,
    ``d = 1 - s^2``; central chi-square tails from :mod:`paperlib.fdp.tails` (Temme's expansion
    for large ``m``). Its ``T``-fold composition is ``Chi2Law(T m, x)`` exactly.
    """

    def __init__(self, m: int, x: float):
        self.m = check_int(m, "m", 1)
        self.x = check_positive(x, "x")
        x = self.x
        self.s2 = (x / (x + 1.0)) ** 2
        self.d = (2.0 * x + 1.0) / (x + 1.0) ** 2
        self.A = self.m * math.log1p(1.0 / x)

    def key(self):
        return ("Chi2Law", self.m, self.x)

    def composed(self, rounds: int) -> "Chi2Law":
        return Chi2Law(self.m * rounds, self.x)

    def log4(self, v):
        v = np.asarray(v, dtype=float)
        with np.errstate(invalid="ignore"):
            yq = 2.0 * (self.A - v) / self.d
        yq = np.where(np.isnan(yq), 0.0, yq)
        yp = yq * self.s2
        q_sf, q_cdf = _chi2_both(yq, self.m)
        p_sf, p_cdf = _chi2_both(yp, self.m)
        return q_sf, q_cdf, p_sf, p_cdf

    def span(self, tail):
        m = self.m
        lo_v = float(stats.chi2.ppf(tail, m))
        hi_v = float(stats.chi2.isf(tail, m))
        if not (math.isfinite(lo_v) and math.isfinite(hi_v)):  # pragma: no cover - scipy fallback
            sd = math.sqrt(2.0 * m)
            lo_v, hi_v = max(m - 12 * sd, 0.0), m + 14 * sd + 100
        ends = []
        for scale in (self.d / 2.0, self.d / (2.0 * self.s2)):
            ends += [self.A - scale * hi_v, self.A - scale * lo_v]
        return min(ends), max(ends)


def _log_sum(a: np.ndarray) -> np.ndarray:
    """``log`` of a non-negative array (``-inf`` at 0), without a warning."""
    with np.errstate(divide="ignore"):
        return np.log(np.maximum(a, 0.0))


def _array_key(*arrays) -> tuple:
    return tuple(np.ascontiguousarray(a, dtype=float).tobytes() for a in arrays)


class IndexedDilutedLaw(Law):
    """Subsampled Gaussians indexed by a revealed count whose law differs between the two sides.

    Outcomes ``(m, y)``. Under ``P`` the index ``m`` has weights ``p_m`` and ``y ~ N(0, 1)``; the
    privacy loss is ``L(m, y) = c0 + log(1 + r_m exp(mu y - mu^2/2))`` and ``Q = e^L P``, i.e. given
    ``m`` the measure ``Q`` is ``e^{c0} p_m [N(0, 1) + r_m N(mu, 1)]``. With ``c0 = log(1 - q)``,
    ``p_m = Bin(m; N, q)`` and ``r_m = m/(N + 1 - m)`` this is the pair that dominates ASGM's
    ``(|B|, S_B + G)`` (THEORY.md §11.2: ``e^{c0} p_m = pi'_m (1 - gamma_m)``,
    ``e^{c0} p_m r_m = pi'_m gamma_m``); with one index it is ``DilutedLaw(ShiftLaw(mu), q)``.

    ``r_m = 0`` puts an atom at ``L = c0``. ``q_inf``: ``Q``'s mass at ``L = +inf`` (an index only ``Q``
    has); ``q_drop``, ``p_drop``: masses of indices left out (infinite loss on the upper end, dropped on
    the lower end). Because ``L`` increases with
    ``s = mu y + log r_m``, every tail is a sum over ``m`` of normal distribution functions
    (computed in linear space with ``ndtr`` of both signs: relative accuracy in both tails).
    """

    def __init__(self, c0: float, mu: float, r, p, q_inf: float = 0.0, q_drop: float = 0.0, p_drop: float = 0.0):
        if not math.isfinite(c0):
            raise ValueError(f"c0 must be finite, got {c0!r}")
        self.c0 = float(c0)
        self.mu = check_positive(mu, "mu")
        r, p = np.asarray(r, dtype=float).ravel(), np.asarray(p, dtype=float).ravel()
        if r.shape != p.shape or r.size == 0:
            raise ValueError("r and p must be 1-D arrays of the same positive length")
        if not (np.all(np.isfinite(r)) and np.all(r >= 0) and np.all(np.isfinite(p)) and np.all(p >= 0)):
            raise ValueError("r and p must be finite and >= 0")
        keep = p > 0
        self.atom_p = float(np.sum(p[keep & (r == 0)]))  # r = 0: loss c0 exactly
        live = keep & (r > 0)
        self.r, self.p = r[live], p[live]
        with np.errstate(divide="ignore"):
            self.b = np.log(self.r) - 0.5 * self.mu**2  # L <= v  <=>  mu y <= s(v) - b_m
        self.q_inf, self.q_drop, self.p_drop = float(q_inf), float(q_drop), float(p_drop)
        self.ec0 = math.exp(self.c0)

    def key(self):
        return (("IndexedDilutedLaw", self.c0, self.mu, self.atom_p, self.q_inf, self.q_drop, self.p_drop)
                + _array_key(self.r, self.p))

    def inf_masses(self):
        return self.q_inf + self.q_drop, self.p_drop

    def exact_inf(self):
        return self.q_inf, 0.0

    def totals(self):
        p_tot = float(np.sum(self.p)) + self.atom_p
        return self.ec0 * (p_tot + float(np.sum(self.p * self.r))) + self.q_inf + self.q_drop, p_tot + self.p_drop

    def _s(self, v: np.ndarray) -> np.ndarray:
        """``s(v) = log(e^{v - c0} - 1)`` (``-inf`` for ``v <= c0``): ``L <= v`` exactly when ``s <= s(v)``."""
        x = v - self.c0
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            small = np.log(np.expm1(np.minimum(x, 1.0)))
            large = x + np.log1p(-np.exp(-np.maximum(x, 1.0)))
        return np.where(x > 1.0, large, np.where(x > 0, small, -np.inf))

    def log4(self, v, chunk: int = 4096):
        v = np.asarray(v, dtype=float)
        flat = v.ravel()
        out = [np.empty(flat.size) for _ in range(4)]
        mu, p, pr = self.mu, self.p, self.p * self.r
        for i in range(0, flat.size, chunk):
            s = self._s(flat[i:i + chunk])
            t = (s[:, None] - self.b[None, :]) / mu
            lo, hi = special.ndtr(t), special.ndtr(-t)
            p_le, p_gt = lo @ p, hi @ p
            q_le = self.ec0 * (p_le + special.ndtr(t - mu) @ pr)
            q_gt = self.ec0 * (p_gt + special.ndtr(mu - t) @ pr)
            at = flat[i:i + chunk] >= self.c0  # the atom at c0 counts in "<= v"
            p_le = p_le + np.where(at, self.atom_p, 0.0)
            p_gt = p_gt + np.where(at, 0.0, self.atom_p)
            q_le = q_le + np.where(at, self.ec0 * self.atom_p, 0.0)
            q_gt = q_gt + np.where(at, 0.0, self.ec0 * self.atom_p)
            for k, a in enumerate((q_le, q_gt, p_le, p_gt)):
                out[k][i:i + chunk] = _log_sum(a)
        return tuple(o.reshape(v.shape) for o in out)

    def span(self, tail):
        z, mu = _tail_z(tail), self.mu
        if self.r.size == 0:
            return self.c0, self.c0
        s_hi = float(np.max(self.b)) + mu * mu + z * mu  # Q's shifted part: y ~ N(mu, 1)
        s_lo = float(np.min(self.b)) - z * mu
        lo = self.c0 + float(np.logaddexp(0.0, s_lo))
        return min(lo, self.c0), self.c0 + float(np.logaddexp(0.0, s_hi))


class DiscreteLaw(Law):
    """A pair of discrete (sub-)measures given atom by atom: ``Q`` masses ``q_i``, ``P`` masses ``p_i``.

    The loss of atom ``i`` is ``log(q_i / p_i)``; atoms with ``p_i = 0 < q_i`` are at ``L = +inf``,
    those with ``q_i = 0 < p_i`` at ``L = -inf`` (exactly: kept there on both ends). ``q_drop``, ``p_drop``:
    masses of outcomes left out (infinite loss on the upper end, dropped on the lower end). The masses may
    sum to less than 1. Tails are prefix and suffix sums over the atoms sorted by loss
    (each computed from its own end). Use: the cells of a binned statistic (an attack whose cell
    probabilities are computed exactly), the count of an independent Poisson draw, a degenerate
    outcome such as DPSUR's "no step".
    """

    def __init__(self, q, p, q_drop: float = 0.0, p_drop: float = 0.0):
        q, p = np.asarray(q, dtype=float).ravel(), np.asarray(p, dtype=float).ravel()
        if q.shape != p.shape:
            raise ParameterError("q", "q and p must have the same shape")
        if not (np.all(np.isfinite(q)) and np.all(q >= 0) and np.all(np.isfinite(p)) and np.all(p >= 0)):
            raise ParameterError("q", "q and p must be finite and >= 0")
        both = (q > 0) & (p > 0)
        self.q_inf = float(np.sum(q[(q > 0) & (p == 0)]))
        self.p_inf = float(np.sum(p[(p > 0) & (q == 0)]))
        self.q_drop, self.p_drop = float(q_drop), float(p_drop)
        loss = np.log(q[both]) - np.log(p[both])
        order = np.argsort(loss, kind="stable")
        self.loss, self.q, self.p = loss[order], q[both][order], p[both][order]
        zero = np.zeros(1)
        self._q_pre = np.concatenate([zero, np.cumsum(self.q)])
        self._p_pre = np.concatenate([zero, np.cumsum(self.p)])
        self._q_suf = np.concatenate([np.cumsum(self.q[::-1])[::-1], zero])
        self._p_suf = np.concatenate([np.cumsum(self.p[::-1])[::-1], zero])

    def key(self):
        return ("DiscreteLaw", self.q_inf, self.p_inf, self.q_drop, self.p_drop) + _array_key(self.q, self.p)

    def inf_masses(self):
        return self.q_inf + self.q_drop, self.p_inf + self.p_drop

    def exact_inf(self):
        return self.q_inf, self.p_inf

    def totals(self):
        q_tot, p_tot = self.inf_masses()
        return float(self._q_pre[-1]) + q_tot, float(self._p_pre[-1]) + p_tot

    def log4(self, v):
        v = np.asarray(v, dtype=float)
        j = np.searchsorted(self.loss, v, side="right")  # atoms with loss <= v: 0 .. j-1
        return (_log_sum(self._q_pre[j]), _log_sum(self._q_suf[j]), _log_sum(self._p_pre[j]),
                _log_sum(self._p_suf[j]))

    def span(self, tail):
        if self.loss.size == 0:
            return 0.0, 0.0
        ends = []
        for pre, suf in ((self._q_pre, self._q_suf), (self._p_pre, self._p_suf)):
            i = int(np.searchsorted(pre[1:], tail / 2, side="right"))  # first atom whose prefix exceeds tail/2
            k = int(np.searchsorted(-suf[:-1], -tail / 2, side="left")) - 1  # last atom whose suffix exceeds it
            ends += [self.loss[min(i, self.loss.size - 1)], self.loss[max(k, 0)]]
        return float(min(ends)), float(max(ends))


@dataclass
class RoundLaw:
    """One round's privacy loss (THEORY.md §5, §11): a mixture, index revealed, of products of laws.

    ``parts``: list of ``(weight, factors)``; ``factors`` a tuple of laws whose product is the
    component (``()`` is the identity: loss 0 under both); the weight multiplies both sides.
    ``common``: laws that are a factor of *every* component; composed exactly over the rounds when
    they have ``composed(T)`` (:class:`Chi2Law`), otherwise by their own ``T``-fold self-composition.
    ``dropped``: mass left out of the mixture (binomial truncation of a revealed index), treated as
    perfectly distinguishable on the upper end and ignored on the lower end (dropping revealed
    outcomes is valid there). ``latent_defect``: ``(eta_Q, eta_P)``, per-round masses of a *hidden*
    event left out of the laws (an attack's statistic computed on ``m`` in a range); hidden mass
    cannot simply be dropped on the lower end: there ``delta_true(eps) >= delta_kept(eps) - e^eps
    T eta`` (``eta_P`` for ``Q||P``, ``eta_Q`` for ``P||Q``), which the engine subtracts.
    """

    parts: list
    common: tuple = ()
    dropped: float = 0.0
    description: dict = field(default_factory=dict)
    latent_defect: tuple = (0.0, 0.0)


def round_law_from_mixture(mixture) -> RoundLaw:
    """The :class:`RoundLaw` of an :class:`~paperlib.fdp.mixture.LRMixture` (or a list of families).

    Reads the families' public attributes: ``GaussVarFamily`` (``n, x, mus, weights``) becomes
    ``ScaleShiftLaw(x, mu) ⊗ Chi2Law(n-1, x)`` per component, ``GaussShiftFamily`` ``ShiftLaw``,
    ``SubsampledGaussian`` ``DilutedLaw(ShiftLaw(mu), q)``, ``IdentityFamily`` the identity,
    ``DilutedFamily`` (base ``Chi2Pair`` or one of these) ``DilutedLaw``, ``Chi2Pair``
    ``Chi2Law``. When every component carries the same ``Chi2Law`` it becomes the common factor.
    Raises ValueError for a family of another type.
    """
    families = list(getattr(mixture, "families", mixture))
    dropped = float(getattr(mixture, "dropped_mass", 0.0) or 0.0)
    parts: list = []
    for fam in families:
        parts.extend(_family_parts(fam))
    parts = [(w, f) for w, f in parts if w > 0]
    if not parts:
        raise ValueError("the mixture has no component of positive weight")
    tails = {f[-1].key() if f and isinstance(f[-1], Chi2Law) else None for _, f in parts}
    common: tuple = ()
    if len(tails) == 1 and None not in tails:
        common = (parts[0][1][-1],)
        parts = [(w, f[:-1]) for w, f in parts]
    return RoundLaw(parts=parts, common=common, dropped=dropped)


def _family_parts(fam) -> list:
    name = type(fam).__name__
    if name == "GaussVarFamily":
        n, x = int(fam.n), float(fam.x)
        rest = (Chi2Law(n - 1, x),) if n > 1 else ()
        return [(float(w), (ScaleShiftLaw(x, float(mu)),) + rest) for mu, w in zip(fam.mus, fam.weights)]
    if name == "GaussShiftFamily":
        return [(float(w), (ShiftLaw(float(mu)),)) for mu, w in zip(fam.mus, fam.weights)]
    if name == "SubsampledGaussian":
        return [(float(fam.weights[0]), (DilutedLaw(ShiftLaw(float(fam.mu)), float(fam.q)),))]
    if name == "IdentityFamily":
        return [(float(fam.weights[0]), ())]
    if name == "Chi2Pair":
        return [(1.0, (Chi2Law(int(fam.m), float(fam.x)),))]
    if name == "DilutedFamily":
        base = _family_parts(fam.base)
        if len(base) != 1 or len(base[0][1]) != 1:
            raise ValueError("DilutedFamily: only a one-component base can be composed")
        return [(float(fam.weights[0]), (DilutedLaw(base[0][1][0], float(fam.w)),))]
    raise ValueError(f"cannot compose a family of type {name}")

