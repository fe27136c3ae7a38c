"""Mixtures of hypothesis pairs (THEORY.md section 5).

:class:`LRMixture` — the index of the component is revealed to the adversary
(Lemma 2.10). The optimal test thresholds every component's likelihood ratio at
the **same** ``t`` (Lemma 3.1), so ``alpha(t) = sum_i w_i alpha_i(t)`` and
``beta(t) = sum_i w_i beta_i(t)``, and the curve has slope ``-t`` there.
Identical components (``L = 0``) form an atom at ``t = 1``; randomising there
draws the straight segment of slope -1 that the curve must contain.

:class:`PointwiseMixture` — ``sum_i w_i f_i(alpha)`` at the same ``alpha`` in every
component: the upper bound of Lemma 3.3 (used by Eq. 14 for ASGM).

Components whose weight was dropped (binomial truncation) are treated as
perfectly distinguishable: they add nothing to ``alpha`` or ``beta``, which keeps
the curve a valid lower bound; ``dropped_mass`` says how much was dropped.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from paperlib.fdp.gaussian import IdentityFamily, LRFamily, diluted_hockey
from paperlib.fdp.progress import progress_bar
from paperlib.fdp.tradeoff import (DELTA_FLOOR, SAMPLED_DELTA_FLOOR, TradeOff, TradeOffCurve, chord_tangent_gaps,
                                   checked_curve)
from paperlib.fdp.validation import check_alpha_array, check_eps

__all__ = ["LRMixture", "PointwiseMixture"]


def _family_hockey(f, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(delta_1, delta_2)`` of one family: its own ``hockey`` (every :class:`LRFamily`) or, for a
    family that only has ``tails``, ``W - beta - e^eps alpha`` with ``e^eps`` applied in log space."""
    if isinstance(f, LRFamily):
        return f.hockey(e)
    W = float(np.sum(f.weights))
    a1, b1 = f.tails(e)
    a2, b2 = f.tails(-e)
    with np.errstate(divide="ignore", over="ignore"):
        ea1 = np.where(a1 > 0, np.exp(np.minimum(e + np.log(np.maximum(a1, 1e-320)), 709.0)), 0.0)
        eb2 = np.where(b2 > 0, np.exp(np.minimum(e + np.log(np.maximum(b2, 1e-320)), 709.0)), 0.0)
    return W - b1 - ea1, W - a2 - eb2


class LRMixture(TradeOff):
    """Common-threshold mixture of likelihood-ratio families (Lemma 2.10 / 3.1).

    Parameters
    ----------
    families : list
        Objects with ``tails(logt) -> (alpha, beta)``, ``logt_bracket()`` and
        ``seed_points()``, and for exact profiles ``hockey(eps)`` (see
        :mod:`paperlib.fdp.gaussian`).
    label : str
    meta : dict
        Parameters and provenance, copied into the curve.
    dropped_mass : float
        Weight left out of ``families`` (treated as perfectly distinguishable).

    A :class:`~paperlib.fdp.tradeoff.TradeOff`: ``mix(alpha)`` for FNR values (exact for a
    few values, otherwise a lower bound within ``tol``), :meth:`curve` for the sampled
    curve, :meth:`delta` for the exact privacy profile (log space, accurate down to
    ``delta = 1e-300``) and :meth:`epsilon` for its inverse.
    """

    def __init__(self, families, label: str = "", meta: dict | None = None, dropped_mass: float = 0.0):
        if not families:
            raise ValueError("an LRMixture needs at least one family")
        self.families = list(families)
        self.label = label
        self.meta = dict(meta or {})
        self.dropped_mass = float(dropped_mass)
        self.meta.setdefault("dropped_mass", self.dropped_mass)
        self.total_weight = float(sum(float(np.sum(f.weights)) for f in self.families))
        self.atom_weight = float(
            sum(float(np.sum(f.weights)) for f in self.families if isinstance(f, IdentityFamily))
        )
        # supremum of log LR over all components (inf when unbounded): the curve's slope at
        # alpha = 0 is -exp of it, a supporting line that lets the first chord be refined
        sups = []
        for f in self.families:
            if isinstance(f, IdentityFamily):
                sups.append(0.0)
            elif isinstance(f, LRFamily):  # GaussVarFamily, Chi2Pair: log LR <= l_max per component
                sups.append(float(np.max(f.l_max)))
            else:
                sups.append(math.inf)
        self.sup_logt = max(sups)
        self._curves: dict[float, TradeOffCurve] = {}

    # ---------------------------------------------------------------- exact parts
    def tails(self, logt, _bar=None) -> tuple[np.ndarray, np.ndarray]:
        """``alpha = sum w P[L > log t]``, ``beta = sum w Q[L <= log t]`` for an array of ``log t``.

        ``_bar`` (internal): a progress bar advanced by one per component and threshold evaluated.
        """
        lt = np.atleast_1d(np.asarray(logt, dtype=float))
        a = np.zeros(lt.shape)
        b = np.zeros(lt.shape)
        for f in self.families:
            fa, fb = f.tails(lt)
            a += fa
            b += fb
            if _bar is not None:
                _bar.update(lt.size * int(np.size(f.weights)))
        return np.clip(a, 0, 1), np.clip(b, 0, 1)

    @property
    def components(self) -> int:
        """Number of components over all families."""
        return int(sum(int(np.size(f.weights)) for f in self.families))

    def hockey(self, eps) -> tuple[np.ndarray, np.ndarray]:
        """``(delta_1(eps), delta_2(eps))``: the profile in each direction, arrays of ``eps``'s size.

        ``delta_1 = 1 - beta(eps) - e^eps alpha(eps)`` and ``delta_2 = 1 - alpha(-eps) -
        e^eps beta(-eps)`` (the supremum over the curve sits where its slope is ``-e^eps``,
        resp. ``-e^-eps``; THEORY.md section 1). With the component revealed these add over
        components, so each is ``dropped_mass + sum`` of the families' hockey-stick
        divergences, computed from complementary tails in log space (never ``1 - cdf``).
        """
        e = check_eps(eps)
        d1 = np.full(e.shape, self.dropped_mass)
        d2 = np.full(e.shape, self.dropped_mass)
        for f in self.families:
            h1, h2 = _family_hockey(f, e)
            d1 = d1 + h1
            d2 = d2 + h2
        return np.clip(d1, 0.0, 1.0), np.clip(d2, 0.0, 1.0)

    def delta(self, eps):
        """Exact privacy profile ``delta(eps) = max(delta_1, delta_2)`` for ``eps >= 0`` (:meth:`hockey`).

        Finite and in [0, 1] for every finite ``eps >= 0`` (``dropped_mass`` for huge ``eps``);
        relative accuracy ~1e-10 down to ``1e-300`` (tested against mpmath).
        """
        d1, d2 = self.hockey(eps)
        d = np.maximum(d1, d2)
        return d if np.ndim(eps) else float(d[0])

    def delta_limit(self) -> float:
        """``lim delta(eps) = dropped_mass`` (every family's privacy loss is finite almost surely)."""
        return self.dropped_mass

    def epsilon(self, delta: float, progress=None) -> float:
        """Smallest ``eps >= 0`` with ``delta(eps) <= delta`` (:meth:`TradeOff.epsilon`).

        ``progress``: None (a bar on a terminal's stderr after a few seconds), True, False or a
        callable ``fn(done, total)`` (:mod:`paperlib.fdp.progress`); it counts profile evaluations
        (about 40 for a root to 1e-13).
        """
        from paperlib.fdp.tradeoff import epsilon_from_delta

        with progress_bar(progress, total=None, desc=f"{self.label or 'mixture'}: epsilon",
                          unit=" profile evaluations") as bar:
            def d(e):
                v = self.delta(e)
                bar.update(1)
                return v

            return epsilon_from_delta(d, delta, delta_inf=self.delta_limit(), floor=self.delta_floor())

    # ---------------------------------------------------------------- sampled curve
    def curve(self, tol: float = 1e-6, max_points: int = 6000, progress=None) -> TradeOffCurve:
        """The trade-off curve sampled adaptively until chord and tangents differ by <= ``tol``.

        Points are exact ``(alpha(t), beta(t))`` with slope ``-t``; intervals are split
        (in ``log t``) while the gap between the chord and the tangent envelope exceeds
        ``tol``. ``curve.meta['max_gap']`` reports the error bound reached, and
        ``meta['evaluations']`` the number of thresholds evaluated.

        ``progress``: None (a bar on a terminal's stderr after a few seconds), True, False or a
        callable ``fn(done, total)`` (:mod:`paperlib.fdp.progress`); it counts component
        evaluations (components x thresholds; the number of thresholds grows with the refinement).
        """
        key = float(tol)
        if key in self._curves:
            return self._curves[key]
        with progress_bar(progress, total=None, desc=f"{self.label or 'mixture'}: curve",
                          unit=" evaluations") as bar:
            return self._sample(tol, max_points, bar)

    def _sample(self, tol: float, max_points: int, bar) -> TradeOffCurve:
        key = float(tol)
        lo, hi = math.inf, -math.inf
        seeds = [np.array([0.0])]
        for f in self.families:
            flo, fhi = f.logt_bracket()
            lo, hi = min(lo, flo), max(hi, fhi)
            seeds.append(np.asarray(f.seed_points(), dtype=float))
        seeds = np.unique(np.concatenate(seeds))
        if seeds.size > 64:
            # large families: start from quantiles of their seeds, refinement does the rest
            seeds = np.quantile(seeds, np.linspace(0, 1, 64))
        grid = np.unique(np.concatenate([seeds, np.linspace(lo, hi, 33)]))
        grid = grid[(grid >= lo) & (grid <= hi)]
        grid = np.unique(np.concatenate([grid, [lo, hi, 0.0]]))
        a, b = self.tails(grid, bar)
        evaluations = grid.size
        for _ in range(200):
            pa, pb, ps = self._vertices(grid, a, b)
            gaps = chord_tangent_gaps(pa, pb, ps)
            # map vertex intervals back to grid intervals: split where any gap is large
            bad_vertex = np.flatnonzero(gaps > tol)
            if bad_vertex.size == 0 or evaluations >= max_points:
                break
            # vertex i corresponds to grid index (descending log t); find the log t of each end
            lt_of_vertex = self._vertex_logt
            l0 = lt_of_vertex[bad_vertex].copy()
            l1 = lt_of_vertex[bad_vertex + 1].copy()
            # the end points (alpha = 0 at t = inf, beta = 0 at t = 0) carry no threshold;
            # split such an interval towards the nearest evaluated threshold beyond its
            # other end (a bounded likelihood ratio, e.g. GaussVarFamily's, otherwise
            # leaves the first chord unrefined: alpha up to 0.34 for n = 3)
            up = np.isposinf(l0) & np.isfinite(l1)
            if up.any():
                j = np.searchsorted(grid, l1[up], side="right")
                l0[up] = np.where(j < grid.size, grid[np.minimum(j, grid.size - 1)],
                                  l1[up] + 1.0 + np.abs(l1[up]))
            down = np.isneginf(l1) & np.isfinite(l0)
            if down.any():
                j = np.searchsorted(grid, l0[down], side="left") - 1
                l1[down] = np.where(j >= 0, grid[np.maximum(j, 0)], l0[down] - 1.0 - np.abs(l0[down]))
            ok = np.isfinite(l0) & np.isfinite(l1) & (np.abs(l0 - l1) > 1e-12 * (1 + np.abs(l0)))
            new = 0.5 * (l0[ok] + l1[ok])
            new = np.setdiff1d(np.unique(new), grid)
            if new.size == 0:
                break
            na, nb = self.tails(new, bar)
            evaluations += new.size
            grid = np.concatenate([grid, new])
            a = np.concatenate([a, na])
            b = np.concatenate([b, nb])
            order = np.argsort(grid)
            grid, a, b = grid[order], a[order], b[order]
        pa, pb, ps = self._vertices(grid, a, b)
        curve = checked_curve(pa, pb, ps, label=self.label, meta=self.meta)
        curve.meta.update(max_gap=curve.max_gap, evaluations=int(evaluations), tol=tol)
        self._curves[key] = curve
        return curve

    def _vertices(self, grid, a, b):
        """Curve vertices in increasing alpha (decreasing log t), with the t = 1 atom split."""
        order = np.argsort(-grid)
        lt = grid[order]
        va, vb = a[order], b[order]
        slope = -np.exp(np.minimum(lt, 700.0))
        w = self.atom_weight
        if w > 0:
            z = np.flatnonzero(lt == 0.0)
            if z.size:
                i = int(z[0])
                # tails at 0 give the c = 0 end (atom in beta); add the c = 1 end
                va = np.insert(va, i + 1, va[i] + w)
                vb = np.insert(vb, i + 1, vb[i] - w)
                slope = np.insert(slope, i + 1, -1.0)
                lt = np.insert(lt, i + 1, 0.0)
        # end points: alpha = 0 (t = infinity) and beta = 0 (t = 0)
        tw = self.total_weight
        va = np.concatenate([[0.0], va, [tw, 1.0]])
        vb = np.concatenate([[tw], vb, [0.0, 0.0]])
        s0 = -math.exp(self.sup_logt) if self.sup_logt < 700.0 else -np.inf
        slope = np.concatenate([[s0], slope, [0.0, 0.0]])
        self._vertex_logt = np.concatenate([[np.inf], lt, [-np.inf, -np.inf]])
        keep = np.ones(va.size, dtype=bool)
        # drop repeated points (same alpha and beta) produced by saturated tails
        keep[1:] = (np.diff(va) != 0) | (np.diff(vb) != 0)
        self._vertex_logt = self._vertex_logt[keep]
        return np.clip(va[keep], 0, 1), np.clip(vb[keep], 0, 1), slope[keep]

    #: at most this many FPR values are each solved exactly by :meth:`__call__` (more: the sampled curve)
    EXACT_BELOW = 8

    def __call__(self, alpha, tol: float = 1e-6, exact_below: int = EXACT_BELOW, progress=None) -> np.ndarray:
        """FNR at FPR ``alpha`` (array_like in [0, 1]; returns the same shape).

        With at most ``exact_below`` values (and no sampled curve cached for ``tol``) each
        is solved exactly by root-finding the common threshold (:meth:`beta_exact`), which
        costs a few dozen evaluations instead of a whole curve. Otherwise the sampled curve's
        tangent-envelope lower bound, within ``tol`` of the exact value. ``progress`` as in
        :meth:`curve`.
        """
        a = check_alpha_array(alpha)
        if a.size <= exact_below and float(tol) not in self._curves:
            return self.beta_exact(a)
        return self.curve(tol, progress=progress).lower(a)

    def beta_exact(self, alpha) -> np.ndarray:
        """FNR at each FPR in ``alpha`` by solving ``alpha(t) = alpha`` for the common threshold.

        Brent's method on ``log t`` (``alpha(t)`` is non-increasing); at the identity atom
        (``t = 1``) the randomised test gives the straight segment of slope -1 exactly.
        Accurate to about 1e-10 in ``log t``; cost about 30 evaluations of :meth:`tails` per value.
        """
        a_in = check_alpha_array(alpha)
        lo, hi = math.inf, -math.inf
        for f in self.families:
            flo, fhi = f.logt_bracket()
            lo, hi = min(lo, flo), max(hi, fhi)
        lo, hi = min(lo, -1.0), max(hi, 1.0)
        a_lo, b_lo = (float(v[0]) for v in self.tails([lo]))
        a0, b0 = (float(v[0]) for v in self.tails([0.0]))  # strict alpha, beta with the atom
        w = self.atom_weight
        out = np.empty(a_in.shape)
        for i, target in np.ndenumerate(a_in):
            target = float(target)
            if target == 0.0:
                out[i] = self.total_weight
            elif target >= a_lo:
                out[i] = max(b_lo - (target - a_lo), 0.0) if target <= self.total_weight else 0.0
            elif w > 0 and a0 <= target <= a0 + w:
                out[i] = b0 - (target - a0)  # randomising at t = 1 between the atom's two ends
            else:
                # the root lies on the side of 0 where alpha crosses the target
                left, right = (lo, 0.0) if target > a0 + w else (0.0, hi)
                if w == 0:
                    left, right = lo, hi

                def g(lt):
                    return float(self.tails([lt])[0][0]) - target

                if g(right) > 0:  # bracket too narrow on the right: widen
                    while g(right) > 0 and right < 1e12:
                        right = right + max(1.0, abs(right))
                # full relative precision in log t: the thresholds of a tiny-q SGM claim
                # are themselves ~q, so an absolute tolerance would move alpha
                root = optimize.brentq(g, left, right, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)
                out[i] = float(self.tails([root])[1][0])
        return np.clip(out, 0.0, 1.0)


class PointwiseMixture(TradeOff):
    """``f(alpha) = sum_i w_i f_i(alpha)`` (same alpha in every component; Lemma 3.3).

    ``parts`` is a list of ``(weight, curve)`` where ``curve`` is a
    :class:`~paperlib.fdp.tradeoff.TradeOff` (e.g. a
    :class:`~paperlib.fdp.tradeoff.TradeOffCurve` or an :class:`LRMixture`) or the string
    ``"identity"``. The sampled curve lives on the union of the parts' sampled alphas;
    slopes add. ``tol`` is the default tolerance of the parts' curves.

    Privacy profile: when the parts are one likelihood-ratio part (an object with
    ``hockey``) of weight ``w`` and identity parts of weight ``1 - w`` (the ASGM bound of
    Eq. 14), ``f`` is exactly the trade-off of ``(P, (1 - w) P + w Q)`` (for every test the
    identity part's FNR is ``1 - alpha``), whose profile is exact
    (:func:`~paperlib.fdp.gaussian.diluted_hockey`). Otherwise it is the sampled curve's.
    """

    def __init__(self, parts, label: str = "", meta: dict | None = None, tol: float = 1e-6):
        self.parts = list(parts)
        self.label = label
        self.meta = dict(meta or {})
        self.tol = tol
        self._curves: dict[float, TradeOffCurve] = {}
        self._diluted = self._diluted_pair()

    def _diluted_pair(self):
        """``(w, part)`` when the mixture is ``w part + (1 - w) Id`` with an exact part, else None."""
        lr = [(w, c) for w, c in self.parts if not (isinstance(c, str) and c == "identity") and w > 0]
        if len(lr) != 1 or not isinstance(lr[0][1], (LRMixture, LRFamily)):
            return None
        total = math.fsum(float(w) for w, _ in self.parts)
        w = float(lr[0][0])
        if abs(total - 1.0) > 1e-12 or not 0 < w <= 1:
            return None
        return w, lr[0][1]

    def curve(self, tol: float | None = None) -> TradeOffCurve:
        """The sampled curve: the parts' curves (``tol``, default the constructor's) added pointwise."""
        tol = self.tol if tol is None else float(tol)
        if tol in self._curves:
            return self._curves[tol]
        curves = []
        for w, c in self.parts:
            if isinstance(c, str) and c == "identity":
                curves.append((w, TradeOffCurve([0.0, 1.0], [1.0, 0.0], [-1.0, -1.0], label="Id")))
            elif isinstance(c, TradeOff):
                curves.append((w, c.curve(tol)))
            else:
                curves.append((w, c))
        curves = [(w, c) for w, c in curves if w > 0]
        grid = np.unique(np.concatenate([c.alpha for _, c in curves]))
        beta = np.zeros_like(grid)
        slope = np.zeros_like(grid)
        for w, c in curves:
            beta += w * np.interp(grid, c.alpha, c.beta)
            if c.slope is None or slope is None:
                slope = None
                continue
            # exact slope at c's own points, the slope of c's chord in between (computed on
            # c's vertices, not on the union grid: its spacings can be ~1e-250 near alpha = 0)
            j = np.clip(np.searchsorted(c.alpha, grid, side="right") - 1, 0, c.alpha.size - 2)
            width = c.alpha[j + 1] - c.alpha[j]
            with np.errstate(divide="ignore", invalid="ignore"):
                chord = np.where(width > 0, (c.beta[j + 1] - c.beta[j]) / np.where(width > 0, width, 1.0), -np.inf)
            slope = slope + w * np.where(c.alpha[j] == grid, c.slope[j], chord)
        curve = checked_curve(grid, beta, slope, label=self.label, meta=self.meta)
        curve.meta.update(tol=tol)
        self._curves[tol] = curve
        return curve

    def __call__(self, alpha) -> np.ndarray:
        """``sum_i w_i f_i(alpha)`` from the parts' own evaluations (array of ``alpha``'s shape)."""
        a = check_alpha_array(alpha)
        out = np.zeros_like(a)
        for w, c in self.parts:
            if isinstance(c, str):
                out += w * (1 - a)
            else:
                out += w * np.asarray(c(a))
        return out

    def hockey(self, eps) -> tuple[np.ndarray, np.ndarray]:
        """Both directions of the exact profile (only for ``w part + (1 - w) Id``; class docstring)."""
        if self._diluted is None:
            raise ValueError("hockey needs a mixture of one likelihood-ratio part and identity parts")
        w, part = self._diluted
        return diluted_hockey(part.hockey, w, eps)

    def delta(self, eps):
        """Privacy profile: exact for ``w part + (1 - w) Id`` (class docstring), otherwise the
        sampled curve's (a lower estimate; see TradeOffCurve.delta)."""
        if self._diluted is None:
            return self.curve().delta(eps)
        d1, d2 = self.hockey(eps)
        d = np.clip(np.maximum(d1, d2), 0.0, 1.0)
        return d if np.ndim(eps) else float(d[0])

    def delta_limit(self) -> float:
        if self._diluted is None:
            return self.curve().delta_limit()
        w, part = self._diluted
        # a likelihood-ratio family's privacy loss is finite almost surely: no mass at infinity
        return w * float(part.delta_limit()) if isinstance(part, TradeOff) else 0.0

    def delta_floor(self) -> float:
        return SAMPLED_DELTA_FLOOR if self._diluted is None else DELTA_FLOOR
