"""T-fold composition of likelihood-ratio mixtures through dp_accounting's privacy-loss distributions.

One engine for every multi-round result of the project (THEORY.md §11; issue 11 "Build" 3,
issue 12 "Build" 1): the SGM claim ``f_q^{⊗T}``, the ASGM upper bound of Eq. 14 over ``T``
rounds, and the certified ``T``-round guarantee of EASGM/FEASGM/ASGM. Each result carries an
error bracket: an upper end that is a valid bound (never understated) and a lower end that is
a valid bound from the other side, so the truth lies in ``[eps_low, eps_up]``.

What is composed
----------------
A *round law* (:class:`RoundLaw`) is the privacy loss of one round with the component index
revealed (THEORY.md §5, §11): a mixture ``sum_i w_i (pair_i)`` whose components are products
of simple pairs, each given by the law of its privacy loss ``L = log dQ/dP`` under ``Q`` and
under ``P`` (:class:`ShiftLaw` ``G_mu``, :class:`DilutedLaw` ``(P, (1-w)P + wQ)`` — the
subsampled Gaussian is ``DilutedLaw(ShiftLaw(mu), q)`` —, :class:`ScaleShiftLaw`
``T(N(0,1), N(mu, s^2))`` and :class:`Chi2Law` ``T(N(0,I_m), N(0, s^2 I_m))``; the identity
is the empty product). The component ``T(N(0,I_n), N(mu e_1, s^2 I_n))`` of §4 is the product
``ScaleShiftLaw(x, mu) ⊗ Chi2Law(n-1, x)`` (coordinate 1 and the other ``n-1``), so no
noncentral chi-square distribution function with ``n = 10^6`` degrees of freedom is ever
evaluated: the first factor needs normal distribution functions, the second central
chi-square ones (:mod:`paperlib.fdp.tails`). When every component shares the factor
``Chi2Law(n-1, x)`` (EASGM, FEASGM), it is a *common* factor: the ``T``-round law is
``(mixture of first coordinates)^{*T} * Chi2Law(T(n-1), x)``, and the second term is
discretised once, exactly composed.

Two directions are kept: ``Q||P`` (the loss ``L`` under ``Q``) and ``P||Q`` (``-L`` under
``P``); ``delta(eps)`` is the larger of the two hockey-stick divergences, ``epsilon(delta)``
the larger epsilon, as for every profile of :mod:`paperlib.fdp` (THEORY.md §1).

Discretisation (grid ``step``, losses ``j * step``)
---------------------------------------------------
* **Upper end (pessimistic).** The mass of each cell ``(v_j, v_{j+1}]`` is split between its
  two ends so that both its ``U``-mass and its ``e^{-L}``-mass (the other distribution's mass)
  are kept (Doroshenko et al. 2022, "Connect the Dots", computed here from the cell masses
  rather than from differences of ``delta``). By Jensen's inequality on
  ``(1 - x e^{-L})_+`` the hockey-stick divergence of the split pair is at least the true
  one at every ``eps`` (positive or negative), i.e. the split pair dominates the true pair
  (Blackwell): its ``T``-fold composition dominates the true composition. Mass below the
  grid is moved up to its first point, mass above it goes to ``+inf`` (dp_accounting's
  ``infinity_mass``). The error is of second order in ``step``.
* **Lower end (optimistic).** Merging the outcomes of each centred cell
  ``(v_j - step/2, v_j + step/2]`` into one is post-processing; the merged loss ``L*_j`` differs
  from ``v_j`` by ``O(step^2)``. A further garbling puts it exactly on ``v_j``: a cell whose merged
  loss lies below ``v_j`` takes the small fraction of its right neighbour (higher loss) that brings
  it up to ``v_j``, a cell above ``v_j`` the fraction of its left neighbour that brings it down
  (computed so that it never overshoots: the remainder is rounded down, which is valid). Cells
  no neighbour can balance are first merged into their heavier neighbour (again post-processing),
  and one-factor components and identity atoms are garbled together (merging outcomes of
  different components is post-processing too). The first moment of the loss is kept to first
  order, so no bias accumulates over ``T`` rounds. Deficit cells still unbalanced are put at
  the largest grid point at most ``L*_j + c``; shifting the composed losses
  down by ``shift = T c (per factor)`` then gives a pair that the true one dominates:
  ``delta_low(eps) = delta_grid(eps + shift)`` and ``eps_low(delta) = eps_grid(delta) - shift``
  (``c`` balances the shift against the mass rounded down; it is usually 0). Mass below the grid
  is dropped and mass above it put on the last point.
* Both are composed with dp_accounting's ``DensePLDPmf.self_compose`` (FFT, its Chernoff
  truncation ``tail_mass_truncation`` is added to the infinity mass on the upper end and
  subtracted twice on the lower end) and ``compose`` (the common factor).

The grid is chosen from ``T`` and the target accuracy: a coarse pass, then passes on finer
grids (the bracket width shrinks like ``step^2``) until ``eps_up - eps_low <= rel_tol *
max(eps_up, EPS_SCALE_FLOOR)`` at the ``delta`` asked for, or the composed length would
exceed ``max_length``; the achieved bracket is always reported (``meta``), so a result is
either within the stated accuracy or says how far it is from it.

Numerical floor: below ``delta = PLD_DELTA_FLOOR`` the FFT round-off (about ``1e-16`` per
entry) and the truncated tails are no longer negligible, and ValueError is raised.

dp_accounting (the ``[accounting]`` extra) is imported when a composition is built, never at
import time: ``import paperlib.fdp`` does not need it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import signal, special, stats

from paperlib.fdp.progress import progress_bar
from paperlib.fdp.tails import chi2_logcdf, chi2_logsf
from paperlib.fdp.tradeoff import TradeOff, TradeOffCurve, check_tradeoff, lower_convex_envelope
from paperlib.fdp.validation import check_alpha_array, check_delta, check_int, check_positive, check_probability, check_rate

__all__ = [
    "ShiftLaw",
    "DilutedLaw",
    "ScaleShiftLaw",
    "Chi2Law",
    "RoundLaw",
    "round_law_from_mixture",
    "PLDComposition",
    "compose",
    "PLD_DELTA_FLOOR",
    "DEFAULT_REL_TOL",
    "require_dp_accounting",
]

#: Default target: ``eps_up - eps_low <= DEFAULT_REL_TOL * max(eps_up, EPS_SCALE_FLOOR)``.
DEFAULT_REL_TOL = 0.01
#: Below this ``eps`` the tolerance is absolute (``rel_tol * EPS_SCALE_FLOOR``).
EPS_SCALE_FLOOR = 0.1
#: Smallest ``delta`` a composition answers (FFT round-off ~1e-16 per entry lives below).
PLD_DELTA_FLOOR = 1e-10
#: Per-round, per-law mass left beyond the grid (to +inf on the upper end).
ROUND_TAIL = 1e-18
#: dp_accounting's ``tail_mass_truncation`` in each composition.
TRUNCATION = 1e-15
#: Largest composed PMF length (complex FFT of this length: ~130 MB per array).
DEFAULT_MAX_LENGTH = 2**23
#: Coarsest grid the adaptive search starts from.
START_STEP = 0.5
#: Finest grid the adaptive search goes to.
MIN_STEP = 1e-7
#: Largest number of grid passes.
MAX_PASSES = 8


def require_dp_accounting():
    """Import dp_accounting's PLD modules; one-line ModuleNotFoundError naming the extra when absent."""
    try:
        from dp_accounting.pld import common, pld_pmf
    except ImportError:
        raise ModuleNotFoundError(
            "multi-round composition needs the [accounting] extra (dp-accounting is not installed): "
            "pip install 'paperlib[accounting]'", name="dp_accounting") from None
    return pld_pmf, common


# =============================================================================== helpers
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


# =============================================================================== loss laws
class _Law:
    """A pair ``(P, Q)`` given by the law of ``L = log dQ/dP`` under ``Q`` and under ``P``.

    Subclasses give :meth:`log4` (the logs of ``Q[L <= v], Q[L > v], P[L <= v], P[L > v]``,
    arrays of ``v``'s shape, ``v`` may be ``+-inf``) and :meth:`span` (a range of ``L``
    holding all but about ``tail`` of both laws). Every law here is continuous.
    """

    def log4(self, v):  # pragma: no cover - interface
        raise NotImplementedError

    def span(self, tail: float) -> tuple[float, float]:  # pragma: no cover - interface
        raise NotImplementedError

    def key(self) -> tuple:
        return (type(self).__name__,) + tuple(self.__dict__.values())


class ShiftLaw(_Law):
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


class DilutedLaw(_Law):
    """The pair ``(P, (1 - w) P + w Q)`` of a base pair ``(P, Q)``; ``w`` in (0, 1].

    Its trade-off function is ``w T(P,Q) + (1 - w) Id`` (THEORY.md §3 for SGM, where the base is
    ``G_{1/sigma}`` and ``w = q``; Eq. 14 for ASGM with the chi-square base). The loss
    ``L' = log(1 - w + w e^L)`` is increasing in the base loss ``L``, so ``L' <= v`` exactly when
    ``L <= log((e^v - 1 + w)/w)`` (``v > log(1-w)``; below, never).
    """

    def __init__(self, base: _Law, w: float):
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


class ScaleShiftLaw(_Law):
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
        return _scale_shift_log4(np.asarray(v, dtype=float), self.A, self.d, self.s2, self.m_q, self.m_p)

    def span(self, tail):
        z = _tail_z(tail) + 1.0
        ends = []
        for m, scale in ((self.m_q, self.d / 2.0), (self.m_p, self.d / (2.0 * self.s2))):
            ends.append(self.A - scale * (m + z) ** 2)
            ends.append(self.A - scale * max(m - z, 0.0) ** 2)
        return min(ends), max(ends)


def _scale_shift_log4(v, A, d, s2, m_q, m_p):
    """:meth:`ScaleShiftLaw.log4` with the law's constants as arrays broadcast against ``v`` (batches)."""
    with np.errstate(invalid="ignore"):
        yq = 2.0 * (A - v) / d
    yq = np.where(np.isnan(yq), 0.0, yq)
    q_le, q_gt = _sq_shift_logtails(yq, m_q)
    p_le, p_gt = _sq_shift_logtails(yq * s2, m_p)
    return q_le, q_gt, p_le, p_gt


class Chi2Law(_Law):
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


@dataclass
class RoundLaw:
    """One round's privacy loss with the component index revealed (THEORY.md §5, §11).

    ``parts``: list of ``(weight, factors)``; ``factors`` a tuple of laws whose product is the
    component (``()`` is the identity: loss 0 under both). ``common``: laws that are a factor of
    *every* component (composed exactly over the rounds: only :class:`Chi2Law`). ``dropped``:
    mass left out of the mixture (binomial truncation), treated as perfectly distinguishable on
    the upper end and ignored on the lower end. Weights sum to ``1 - dropped``.
    """

    parts: list
    common: tuple = ()
    dropped: float = 0.0
    description: dict = field(default_factory=dict)


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


# =============================================================================== discretisation
@dataclass
class _Disc:
    """One law, one direction, on the grid: both ends' raw material."""

    i0: int  # grid index of entry 0
    up: np.ndarray  # pessimistic (split) PMF
    up_inf: float  # its mass at +inf
    mass: np.ndarray  # U-mass of the centred cells (same indices as ``up``)
    lmass: np.ndarray  # the other distribution's mass of the same cells
    top: float  # U-mass above the last centred cell (put on the last point, lower end)
    info: dict
    step_: float
    _garbling: "_Garbling | None" = None

    @property
    def garbling(self) -> "_Garbling":
        if self._garbling is None:
            self._garbling = _garble(self.i0, self.mass, self.lmass, self.top, self.step_)
        return self._garbling


def _centred_logt(i0: int, mass: np.ndarray, lmass: np.ndarray, step: float, bound: float | None = None) -> np.ndarray:
    """``log E[e^{v_j - L} | cell j]`` (``-inf`` for empty cells): ``> 0`` when the merged loss lies below
    ``v_j``. For plain centred cells it lies in ``[-step/2, step/2]`` (``bound``; a guard against round-off)."""
    v = (i0 + np.arange(mass.size)) * step
    with np.errstate(divide="ignore", invalid="ignore"):
        lt = v + np.log(lmass) - np.log(mass)
    b = step / 2 if bound is None else bound
    return np.where(mass > 0, np.clip(np.where(np.isfinite(lt), lt, b), -b, b), -np.inf)


def _garble(i0: int, mass: np.ndarray, lmass: np.ndarray, top: float, step: float, passes: int = 3) -> "_Garbling":
    """The lower-end garbling of centred cells, after merging the cells it cannot balance into a neighbour.

    A deficit cell with no higher-loss mass to take, or a surplus cell with no lower-loss mass, would be
    rounded down, shifting the loss by ``mass * offset`` in every round. Merging it into its heavier
    neighbour (post-processing) keeps the first moment instead; the merged outcome is then balanced
    like any other cell. A few passes; cells whose neighbour is itself being merged wait for the next.
    """
    m, lm = mass.astype(float).copy(), lmass.astype(float).copy()
    bound = step / 2
    g = _Garbling(i0, m, _centred_logt(i0, m, lm, step, bound), top, step)
    for _ in range(passes):
        bad = g.fallback | g.unhelped_surplus
        bad &= m > 1e-300
        if not bad.any():
            break
        left = np.concatenate([[0.0], m[:-1]])
        right = np.concatenate([m[1:], [0.0]])
        target = np.where(right >= left, 1, -1)
        idx = np.flatnonzero(bad)
        tgt = idx + target[idx]
        ok = (tgt >= 0) & (tgt < m.size)
        idx, tgt = idx[ok], tgt[ok]
        ok = ~bad[tgt] & (m[tgt] > 0)  # into a cell that stays where it is
        idx, tgt = idx[ok], tgt[ok]
        if idx.size == 0:
            break
        np.add.at(m, tgt, m[idx])
        np.add.at(lm, tgt, lm[idx])
        m[idx] = 0.0
        lm[idx] = 0.0
        bound += step  # a merged cell's loss may now lie up to one more step from its point
        g = _Garbling(i0, m, _centred_logt(i0, m, lm, step, bound), top, step)
    return g


@dataclass
class _Garbling:
    """Lower-end construction on centred cells: masses ``mass`` (U) with merged-loss offsets ``logt``."""

    i0: int
    mass: np.ndarray
    logt: np.ndarray
    top: float  # U-mass above the last cell (on the last point)
    step_: float

    def __post_init__(self):
        # Garbling that puts every merged cell's loss L*_j exactly on its grid point v_j:
        # * deficit cell (L*_j < v_j, logt_j > 0) takes the fraction dl_{j+1} of cell j+1 (loss
        #   L*_{j+1} > v_j):  dl_{j+1} u_{j+1} (e^{-v_j} - e^{-L*_{j+1}}) = u_j (e^{-L*_j} - e^{-v_j}).
        #   Computed for the whole cell j although part of it may go elsewhere: the merged loss
        #   then lies above v_j, i.e. v_j rounds it down (valid).
        # * surplus cell (L*_j > v_j, logt_j < 0) takes the fraction dr_{j-1} of cell j-1 (loss
        #   L*_{j-1} < v_j), computed for a lower bound of what cell j keeps, so that the merged loss
        #   stays >= v_j (valid, rounding down the remainder).
        # Merging is post-processing; the first moment of the loss is kept to first order, so no
        # bias accumulates over T rounds (rounding each cell down would shift it by ~|rho'| step^3).
        m, lt, st = self.mass, self.logt, self.step_
        fin = np.isfinite(lt) & (m > 0)
        deficit = fin & (lt > 0)
        surplus = fin & (lt < 0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # donation of cell j+1 to deficit cell j (index j, length K)
            dl = m[:-1] * np.expm1(lt[:-1]) / (m[1:] * -np.expm1(lt[1:] - st))
            # donation of cell j-1 to surplus cell j if cell j kept all of itself (index j-1)
            dr_max = m[1:] * -np.expm1(lt[1:]) / (m[:-1] * np.expm1(lt[:-1] + st))
        ok_l = deficit[:-1] & fin[1:] & np.isfinite(dl) & (dl >= 0)
        ok_r = surplus[1:] & fin[:-1] & np.isfinite(dr_max) & (dr_max >= 0)
        dl = np.where(ok_l, dl, 0.0)
        dr_max = np.where(ok_r, dr_max, 0.0)
        K1 = m.size
        give_left = np.concatenate([[0.0], dl])  # cell k gives give_left[k] of itself to k-1
        give_right_max = np.concatenate([dr_max, [0.0]])  # at most this to k+1
        # capacity: a donor cannot give more than itself; drop the offending requests
        over = give_left + give_right_max > 1.0
        if over.any():
            bad_l = over & (give_left > 0)
            give_left = np.where(bad_l, 0.0, give_left)
            over = give_left + give_right_max > 1.0
            give_right_max = np.where(over, 0.0, give_right_max)
        keep_low = 1.0 - give_left - give_right_max  # lower bound of what each cell keeps
        give_right = give_right_max * np.concatenate([keep_low[1:], [0.0]])  # scaled by the receiver's keep_low
        self.give_left, self.give_right = give_left, give_right
        helped = np.zeros(K1, dtype=bool)
        helped[:-1] |= give_left[1:] > 0
        helped[1:] |= give_right[:-1] > 0
        self.fallback = deficit & ~helped  # deficit cells nobody helped: the shift must cover them
        self.unhelped_surplus = surplus & ~helped  # rounded down (valid), at a first-order cost

    def lower(self, c: float) -> tuple[int, np.ndarray]:
        """Lower-end PMF (index offset, probabilities) for the shift bound ``c``.

        Every cell's merged outcome sits at ``v_j`` (the garbling of ``__post_init__``); deficit
        cells that no neighbour could help ("fallback") sit at ``v_j`` when ``logt <= c``
        (covered by the shift) and at ``v_{j-1}`` otherwise.
        """
        m = self.mass
        own = m * (1.0 - self.give_left - self.give_right)
        received = np.zeros(m.size)
        received[:-1] += self.give_left[1:] * m[1:]
        received[1:] += self.give_right[:-1] * m[:-1]
        down = self.fallback & (self.logt > c)
        # a deficit cell not covered by c goes to the largest grid point at most its merged loss + c
        k = np.where(down, np.ceil(np.where(down, self.logt - c, 0.0) / self.step_ - 1e-12), 0).astype(np.int64)
        k = np.where(down, np.maximum(k, 1), 0)
        pad = int(k.max()) if k.size else 0
        out = np.zeros(m.size + pad)
        out[pad:] += np.where(down, 0.0, own) + received
        np.add.at(out, pad + np.arange(m.size) - k, np.where(down, own, 0.0))
        out[-1] += self.top
        return self.i0 - pad, out

    def shift_entries(self):
        """``(logt, mass)`` of the fallback cells: what the shift bound ``c`` must cover."""
        return self.logt[self.fallback], self.mass[self.fallback]


def _cell_masses(lF: np.ndarray, lS: np.ndarray) -> np.ndarray:
    """Masses of the cells between consecutive points from the log CDF/SF there (relative accuracy)."""
    a_f, b_f = lF[:-1], lF[1:]
    a_s, b_s = lS[:-1], lS[1:]
    with np.errstate(invalid="ignore", over="ignore"):
        from_f = np.exp(b_f) * -np.expm1(np.minimum(a_f - b_f, 0.0))
        from_s = np.exp(a_s) * -np.expm1(np.minimum(b_s - a_s, 0.0))
    use_f = b_f < -0.6931471805599453
    out = np.where(use_f, from_f, from_s)
    return np.where(np.isfinite(out) & (out > 0), out, 0.0)


@dataclass
class _Values:
    """A law's four log tails on the half-grid ``t * step / 2``, ``t = t0 .. t0 + len - 1``."""

    t0: int
    q_le: np.ndarray
    q_gt: np.ndarray
    p_le: np.ndarray
    p_gt: np.ndarray
    i_lo: int  # grid range of the Q||P direction: [i_lo, i_hi]
    i_hi: int


def _grid_range(law: _Law, step: float, tail: float, max_cells: int) -> tuple[int, int]:
    lo, hi = law.span(tail)
    i_lo = int(math.floor(lo / step))
    i_hi = max(int(math.ceil(hi / step)), i_lo + 1)
    if i_hi - i_lo + 1 > max_cells:
        raise _TooLarge(i_hi - i_lo + 1)
    return i_lo, i_hi


def _law_values(law: _Law, step: float, tail: float, max_cells: int) -> _Values:
    i_lo, i_hi = _grid_range(law, step, tail, max_cells)
    t0, t1 = 2 * i_lo - 1, 2 * i_hi + 1
    v = np.arange(t0, t1 + 1) * (step / 2.0)
    q_le, q_gt, p_le, p_gt = law.log4(v)
    return _Values(t0, q_le, q_gt, p_le, p_gt, i_lo, i_hi)


def _batch_values(laws: list, step: float, tail: float, max_cells: int) -> dict:
    """:func:`_law_values` for many :class:`ScaleShiftLaw` at once (one vectorised evaluation)."""
    ranges = [_grid_range(f, step, tail, max_cells) for f in laws]
    lens = np.array([2 * (hi - lo) + 3 for lo, hi in ranges])
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    t = np.concatenate([np.arange(2 * lo - 1, 2 * hi + 2) for lo, hi in ranges])
    rep = np.repeat(np.arange(len(laws)), lens)
    const = {k: np.array([getattr(f, k) for f in laws])[rep] for k in ("A", "d", "s2", "m_q", "m_p")}
    vals = _scale_shift_log4(t * (step / 2.0), const["A"], const["d"], const["s2"], const["m_q"], const["m_p"])
    out = {}
    for j, (f, (lo, hi)) in enumerate(zip(laws, ranges)):
        sl = slice(starts[j], starts[j] + lens[j])
        out[f.key()] = _Values(2 * lo - 1, *(a[sl] for a in vals), lo, hi)
    return out


def _directed(vals: _Values, direction: str):
    """Grid range and ``(log U[L' <= h], log U[L' > h], log Lo[L' <= h], log Lo[L' > h])`` at the
    half-grid points ``h`` of a direction (Q||P: ``L`` under Q; P||Q: ``-L`` under P, read off the
    same values at ``-h``: ``P[-L <= h] = P[L > -h]`` for a continuous law)."""
    if direction == "QP":
        return vals.i_lo, vals.i_hi, (vals.q_le, vals.q_gt, vals.p_le, vals.p_gt)
    return -vals.i_hi, -vals.i_lo, (vals.p_gt[::-1], vals.p_le[::-1], vals.q_gt[::-1], vals.q_le[::-1])


def _discretise(vals: _Values, direction: str, step: float) -> _Disc:
    i_lo, i_hi, (lFU, lSU, lFL, lSL) = _directed(vals, direction)
    K = i_hi - i_lo
    # half-grid points h_t = (i_lo - 1/2 + t/2) step, t = 0 .. 2K + 2
    uh = _cell_masses(lFU, lSU)  # half-cells (h_t, h_{t+1}], t = 0 .. 2K+1
    lh = _cell_masses(lFL, lSL)
    v = (i_lo + np.arange(K + 1)) * step
    # ---- upper end: split cells (v_k, v_{k+1}] = half-cells 2j+1, 2j+2
    u = uh[1:2 * K + 1:2] + uh[2:2 * K + 2:2]
    lo_m = lh[1:2 * K + 1:2] + lh[2:2 * K + 2:2]
    with np.errstate(divide="ignore", invalid="ignore"):
        logt = np.clip(v[:-1] + np.log(lo_m) - np.log(u), -step, 0.0)
    frac = np.where(u > 0, -np.expm1(logt) / -math.expm1(-step), 0.0)
    frac = np.clip(np.where(np.isfinite(frac), frac, 0.0), 0.0, 1.0)
    b = u * frac
    up = np.zeros(K + 1)
    up[:-1] += u - b
    up[1:] += b
    below = float(np.exp(lFU[1]))  # U[L' <= v_{i_lo}]: rounded up to the first point
    up[0] += below
    up_inf = float(np.exp(lSU[2 * K + 1]))  # U[L' > v_{i_hi}]
    # ---- lower end: centred cells (v_j - step/2, v_j + step/2] = half-cells 2j, 2j+1
    mass = uh[0:2 * K + 2:2] + uh[1:2 * K + 2:2]
    lmass = lh[0:2 * K + 2:2] + lh[1:2 * K + 2:2]
    top = float(np.exp(lSU[2 * K + 2]))
    info = {"below": below, "above": up_inf, "dropped_below": float(np.exp(lFU[0])), "cells": K + 1}
    return _Disc(i_lo, up, up_inf, mass, lmass, top, info, step)


class _TooLarge(Exception):
    def __init__(self, length: int):
        super().__init__(length)
        self.length = int(length)


def _conv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.size == 1 or b.size == 1:
        return a * b[0] if b.size == 1 else b * a[0]
    if min(a.size, b.size) <= 64:
        return np.convolve(a, b)
    return np.maximum(signal.fftconvolve(a, b), 0.0)


def _add_into(acc: dict, i0: int, arr: np.ndarray, w: float):
    acc.setdefault("items", []).append((i0, arr, w))


def _assemble(items) -> tuple[int, np.ndarray]:
    lo = min(i for i, _, _ in items)
    hi = max(i + a.size for i, a, _ in items)
    out = np.zeros(hi - lo)
    for i, a, w in items:
        out[i - lo:i - lo + a.size] += w * a
    nz = np.flatnonzero(out > 0)
    if nz.size == 0:
        return 0, np.array([0.0])
    return lo + int(nz[0]), out[nz[0]:nz[-1] + 1]


def _choose_shift(entries, factor_count: int, step: float) -> float:
    """``c`` minimising ``factor_count * c + step * (mass rounded down)`` (per round)."""
    if not entries:
        return 0.0
    lt = np.concatenate([e[0] for e in entries])
    ms = np.concatenate([e[1] for e in entries])
    ok = np.isfinite(lt) & (lt > 0) & (ms > 0)
    lt, ms = lt[ok], ms[ok]
    if lt.size == 0:
        return 0.0
    order = np.argsort(-lt)
    lt, ms = lt[order], ms[order]
    above = np.concatenate([[0.0], np.cumsum(ms)[:-1]])  # mass strictly above candidate i
    cand = factor_count * lt + step * above
    # candidate "round every positive cell down": c = 0
    j = int(np.argmin(cand))
    best = float(lt[j]) if cand[j] <= step * float(np.sum(ms)) else 0.0
    return best


# =============================================================================== queries on a PMF
@dataclass
class _Pmf:
    """A composed PMF: probabilities on losses ``(i0 + j) step``, plus mass at +inf."""

    i0: int
    probs: np.ndarray
    step: float
    inf: float

    def __post_init__(self):
        p = np.maximum(np.asarray(self.probs, dtype=float), 0.0)
        self.probs = p
        self.S1 = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]])
        # R_j = sum_{k >= j} p_k e^{-(k - j) step}: R_j = p_j + e^{-step} R_{j+1}
        r = signal.lfilter([1.0], [1.0, -math.exp(-self.step)], p[::-1])[::-1]
        self.R = np.concatenate([r, [0.0]])

    @property
    def losses(self) -> np.ndarray:
        return (self.i0 + np.arange(self.probs.size)) * self.step

    def delta(self, eps: np.ndarray) -> np.ndarray:
        """``inf + sum_{v_j > eps} p_j (1 - e^{eps - v_j})`` (dp_accounting's formula), vectorised."""
        e = np.asarray(eps, dtype=float)
        J = self.probs.size
        j = np.floor(e / self.step - self.i0).astype(np.int64) + 1
        j = np.clip(j, 0, J)
        # float guards: the first active index j has v_j > eps and v_{j-1} <= eps
        vj = (self.i0 + j) * self.step
        j = np.where((j < J) & (vj <= e), j + 1, j)
        vprev = (self.i0 + j - 1) * self.step
        j = np.where((j > 0) & (vprev > e), j - 1, j)
        j = np.clip(j, 0, J)
        vj = (self.i0 + j) * self.step
        with np.errstate(over="ignore", invalid="ignore"):
            d = self.S1[j] - np.exp(np.minimum(e - vj, 0.0)) * self.R[j]
        d = np.where(j >= J, 0.0, np.maximum(d, 0.0))
        return np.minimum(d + self.inf, 1.0)

    def epsilon(self, delta: float) -> float:
        """Smallest ``eps >= 0`` with ``delta(eps) <= delta``; ``inf`` when the +inf mass exceeds it."""
        if self.inf > delta:
            return math.inf
        J = self.probs.size
        # D_j = delta(v_j) = inf + S1[j+1] - e^{-step} R[j+1], non-increasing in j
        D = self.inf + self.S1[1:] - math.exp(-self.step) * self.R[1:]
        j = int(np.argmax(D <= delta)) if np.any(D <= delta) else J - 1
        num = self.inf + self.S1[j] - delta
        if self.R[j] <= 0 or num <= 0:
            eps = (self.i0 + j) * self.step
        else:
            eps = (self.i0 + j) * self.step + math.log(num / self.R[j])
        if j > 0:  # the root lies in [v_{j-1}, v_j] (D_{j-1} > delta); j = 0: anywhere below v_0
            eps = max(eps, (self.i0 + j - 1) * self.step)
        eps = min(eps, (self.i0 + j) * self.step)
        return max(float(eps), 0.0)

    def chain(self, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Vertices ``(alpha, beta)`` of the trade-off ``T(Lo, U)`` of the discrete pair (losses - shift).

        The likelihood-ratio test rejects for large losses: adding atoms in decreasing loss,
        ``alpha`` gains ``p_j e^{-(v_j - shift)}`` and ``1 - beta`` gains ``p_j``; the mass at +inf is
        rejected first (``alpha = 0``).
        """
        p = self.probs[::-1]
        v = self.losses[::-1] - shift
        with np.errstate(divide="ignore", over="ignore"):
            la = np.where(p > 0, np.log(np.where(p > 0, p, 1.0)) - v, -np.inf)
            da = np.exp(np.minimum(la, 700.0))
        alpha = np.concatenate([[0.0], np.cumsum(da)])
        beta = 1.0 - self.inf - np.concatenate([[0.0], np.cumsum(p)])
        return alpha, np.maximum(beta, 0.0)


@dataclass
class _State:
    """Both ends of a composition on one grid, both directions."""

    step: float
    up: dict  # direction -> _Pmf (pessimistic)
    low: dict  # direction -> _Pmf (optimistic, before the shift)
    shift: dict  # direction -> shift of the lower end
    slack: float  # mass to subtract on the lower end (dp_accounting truncation, aliasing)
    info: dict

    def delta_bounds(self, eps: np.ndarray):
        hi = np.maximum(self.up["QP"].delta(eps), self.up["PQ"].delta(eps))
        lo = np.maximum.reduce([np.maximum(self.low[d].delta(eps + self.shift[d]) - self.slack, 0.0)
                                for d in ("QP", "PQ")])
        return np.minimum(lo, hi), hi

    def epsilon_bounds(self, delta: float):
        hi = max(self.up[d].epsilon(delta) for d in ("QP", "PQ"))
        lo = max(max(self.low[d].epsilon(delta + self.slack) - self.shift[d], 0.0) for d in ("QP", "PQ"))
        return min(lo, hi), hi


# =============================================================================== the engine
class _Engine:
    """Builds :class:`_State` objects for a round law on grids chosen to meet ``rel_tol``."""

    def __init__(self, law: RoundLaw, rounds: int, *, step, rel_tol, max_length, tail):
        self.law = law
        self.rounds = rounds
        self.fixed_step = step is not None
        self.rel_tol = rel_tol
        self.max_length = max_length
        self.tail = tail
        self.state: _State | None = None
        self.passes: list = []
        self._first_step = float(step) if step is not None else self._start_step()
        self.accuracy_met: bool | None = None
        self.progress = None  # progress bar setting of every grid pass (PLDComposition's ``progress``)

    def _start_step(self) -> float:
        return START_STEP

    # ------------------------------------------------------------ one grid
    def build(self, step: float) -> _State:
        """One grid pass at ``step`` (both directions), with a progress bar (``self.progress``,
        :mod:`paperlib.fdp.progress`) over the two directions."""
        with progress_bar(self.progress, total=2, desc=f"PLD composition, {self.rounds:,} rounds, step {step:.2g}",
                          unit=" directions") as bar:
            return self._build(step, bar)

    def _build(self, step: float, bar) -> _State:
        pld_pmf, common = require_dp_accounting()
        T, law, tail = self.rounds, self.law, self.tail
        max_cells = self.max_length
        up, low, shift, info = {}, {}, {}, {}
        values: dict = {}  # each law evaluated once, on a half-grid both directions share
        batch = {f.key(): f for _, fs in law.parts for f in fs if isinstance(f, ScaleShiftLaw)}
        if batch:
            values.update(_batch_values(list(batch.values()), step, tail, max_cells))
        for direction in ("QP", "PQ"):
            discs = {}
            entries = []
            for w, factors in law.parts:
                for f in factors:
                    k = f.key()
                    if k not in discs:
                        if k not in values:
                            values[k] = _law_values(f, step, tail, max_cells)
                        discs[k] = _discretise(values[k], direction, step)
            # lower end: one-factor components and identity atoms are garbled together (merging
            # outcomes of different components is post-processing too, and cells narrower than the
            # grid then find neighbours); products are garbled factor by factor
            single = [(w, f[0] if f else None) for w, f in law.parts if len(f) <= 1]
            multi = [(w, f) for w, f in law.parts if len(f) > 1]
            joint = None
            if single:
                lo_i = min(discs[f.key()].i0 if f is not None else 0 for _, f in single)
                hi_i = max(discs[f.key()].i0 + discs[f.key()].mass.size if f is not None else 1 for _, f in single)
                jm, jl, tops = np.zeros(hi_i - lo_i), np.zeros(hi_i - lo_i), []
                for w, f in single:
                    if f is None:  # identity: loss 0 under both
                        jm[-lo_i] += w
                        jl[-lo_i] += w
                        continue
                    d = discs[f.key()]
                    jm[d.i0 - lo_i:d.i0 - lo_i + d.mass.size] += w * d.mass
                    jl[d.i0 - lo_i:d.i0 - lo_i + d.mass.size] += w * d.lmass
                    tops.append((d.i0 + d.mass.size - 1, w * d.top))
                joint = _garble(lo_i, jm, jl, 0.0, step)
                entries.append(joint.shift_entries())
            for w, factors in multi:
                for f in factors:
                    lt_f, m_f = discs[f.key()].garbling.shift_entries()
                    entries.append((lt_f, w * m_f))
            factor_count = max([len(f) for _, f in multi] + [1])
            c = _choose_shift(entries, factor_count, step)
            items_up, items_low = [], []
            inf_up = law.dropped
            if joint is not None:
                j0, arr = joint.lower(c)
                items_low.append((j0, arr, 1.0))
                items_low.extend((i, np.array([m]), 1.0) for i, m in tops if m > 0)
            for w, factors in law.parts:
                if not factors:
                    items_up.append((0, np.array([1.0]), w))
                    continue
                i_up, a_up, finite = 0, np.array([1.0]), 1.0
                i_lw, a_lw = 0, np.array([1.0])
                for f in factors:
                    d = discs[f.key()]
                    a_up = _conv(a_up, d.up)
                    i_up += d.i0
                    finite *= 1.0 - d.up_inf
                    if len(factors) > 1:
                        j0, arr = d.garbling.lower(c)
                        a_lw = _conv(a_lw, arr)
                        i_lw += j0
                inf_up += w * (1.0 - finite)
                items_up.append((i_up, a_up, w))
                if len(factors) > 1:
                    items_low.append((i_lw, a_lw, w))
            i_u, p_u = _assemble(items_up)
            i_l, p_l = _assemble(items_low)
            length = self._composed_length(common, p_u, T) if T > 1 else p_u.size
            if length > self.max_length:
                raise _TooLarge(length)
            pu = pld_pmf.DensePLDPmf(step, i_u, p_u, min(inf_up, 1.0), True)
            pl = pld_pmf.DensePLDPmf(step, i_l, p_l, 0.0, False)
            if T > 1:
                with np.errstate(all="ignore"):
                    pu = pu.self_compose(T, tail_mass_truncation=TRUNCATION)
                    pl = pl.self_compose(T, tail_mass_truncation=TRUNCATION)
            total_shift = T * factor_count * c
            common_info = []
            for cf in law.common:
                claw = cf.composed(T)
                if claw.key() not in values:
                    values[claw.key()] = _law_values(claw, step, tail, max_cells)
                d = _discretise(values[claw.key()], direction, step)
                c_r = _choose_shift([d.garbling.shift_entries()], 1, step)
                cu = pld_pmf.DensePLDPmf(step, d.i0, d.up, d.up_inf, True)
                j0, arr = d.garbling.lower(c_r)
                nz = np.flatnonzero(arr > 0)
                cl = pld_pmf.DensePLDPmf(step, j0 + int(nz[0]), arr[nz[0]:nz[-1] + 1], 0.0, False)
                if pu.size + cu.size > self.max_length:
                    raise _TooLarge(pu.size + cu.size)
                # no truncation: the result is only queried (dp_accounting's truncation loops in Python)
                pu = pu.compose(cu, tail_mass_truncation=0.0)
                pl = pl.compose(cl, tail_mass_truncation=0.0)
                total_shift += c_r
                common_info.append({"law": str(claw.key()), "cells": d.info["cells"], "shift": c_r,
                                    "tail_to_inf": d.up_inf})
            up[direction] = _Pmf(pu._lower_loss, pu._probs, step, float(pu._infinity_mass))
            low[direction] = _Pmf(pl._lower_loss, pl._probs, step, 0.0)
            shift[direction] = float(total_shift)
            info[direction] = {"round_cells": int(p_u.size), "composed_length": int(pu.size),
                               "infinity_mass": float(pu._infinity_mass), "round_tail_to_inf": float(inf_up),
                               "shift_per_round": float(c), "lower_shift": float(total_shift),
                               "common": common_info}
            bar.update(1)
        # the lower end's self_compose adds TRUNCATION as infinity mass and may alias as much
        slack = 2 * TRUNCATION if T > 1 else 0.0
        return _State(step=step, up=up, low=low, shift=shift, slack=slack, info=info)

    def _composed_length(self, common, probs, T) -> int:
        with np.errstate(all="ignore"):  # its Chernoff bound overflows harmlessly for large orders
            lb, ub = common.compute_self_convolve_bounds(probs, T, TRUNCATION)
        return int(ub - lb + 1)

    # ------------------------------------------------------------ adaptive grid
    def ensure(self) -> _State:
        if self.state is None:
            self.state = self._build_fitting(self._first_step)
        return self.state

    def _build_fitting(self, step: float) -> _State:
        """Build at ``step``; when too large, at the finest step that fits (coarser by the overshoot)."""
        for _ in range(40):
            try:
                st = self.build(step)
                self.passes.append(step)
                return st
            except _TooLarge as exc:
                if self.fixed_step and step == self._first_step and not self.passes:
                    raise ValueError(
                        f"step = {step:g} needs a PMF of length {exc.length} for rounds = {self.rounds} "
                        f"(largest {self.max_length}); use a larger step") from None
                if self.state is not None:
                    raise
                step *= max(1.5, 1.2 * exc.length / self.max_length)
        raise ValueError(f"could not compute the composition for these parameters (no grid fits in "
                         f"{self.max_length} entries for rounds = {self.rounds})")

    def tolerance(self, value: float) -> float:
        return self.rel_tol * max(value, EPS_SCALE_FLOOR)

    def refine(self, width: float, tol: float) -> bool:
        """Move to a finer grid predicted from ``width`` (~step^2); False when none is allowed."""
        if self.fixed_step or len(self.passes) >= MAX_PASSES:
            return False
        st = self.state
        # the bracket shrinks like step^2: aim at half the tolerance, so that one more pass suffices
        ratio = math.sqrt(0.5 * tol / width) if width > 0 and math.isfinite(width) else 0.5
        new = max(st.step * min(max(ratio, 0.03), 0.7), MIN_STEP)
        if new >= st.step:
            return False
        grown = max(st.info[d]["composed_length"] for d in ("QP", "PQ")) * st.step / new
        if grown > self.max_length:
            new = st.step * max(st.info[d]["composed_length"] for d in ("QP", "PQ")) / (0.9 * self.max_length)
            if new >= 0.95 * st.step:
                return False
        try:
            self.state = self.build(new)
        except _TooLarge:
            return False
        self.passes.append(new)
        return True

    def epsilon_bounds(self, delta: float):
        st = self.ensure()
        while True:
            lo, hi = st.epsilon_bounds(delta)
            if not math.isfinite(hi):
                if math.isfinite(lo) and not self.fixed_step and self.refine(1.0, 0.25):
                    st = self.state
                    continue
                self.accuracy_met = not math.isfinite(lo)
                return lo, hi
            tol = self.tolerance(hi)
            if hi - lo <= tol:
                self.accuracy_met = True
                return lo, hi
            if not self.refine(hi - lo, tol):
                self.accuracy_met = False
                return lo, hi
            st = self.state

    def delta_bounds(self, eps: np.ndarray):
        st = self.ensure()
        while True:
            lo, hi = st.delta_bounds(eps)
            width = float(np.max(hi - lo)) if np.size(hi) else 0.0
            tol = self.rel_tol * float(np.max(hi)) if np.size(hi) else 0.0
            if width <= max(tol, 1e-14):
                self.accuracy_met = True
                return lo, hi
            if not self.refine(width, max(tol, 1e-14)):
                self.accuracy_met = False
                return lo, hi
            st = self.state


# =============================================================================== public object
class PLDComposition(TradeOff):
    """The ``T``-fold composition of a round law, with its error bracket (module docstring).

    Parameters
    ----------
    law : :class:`RoundLaw` (or an :class:`~paperlib.fdp.mixture.LRMixture`, converted by
        :func:`round_law_from_mixture`)
    rounds : int >= 1
    side : ``"guarantee"`` (default): ``epsilon``/``delta`` are the upper ends (valid upper bounds on
        the composition's privacy loss, never understated) and the curve is a lower bound of the
        trade-off function; ``"bound"``: for a curve that is itself an *upper bound* of a guarantee
        (the ASGM Eq. 14 bound), ``epsilon``/``delta`` are the lower ends and the curve never lies
        below the composed trade-off.
    step : float > 0 or None — grid of the privacy loss; ``None`` chooses it (coarse pass, then
        finer ones until the bracket meets ``rel_tol``; see the module docstring).
    rel_tol : float in (0, 1) — target bracket width relative to ``max(eps, 0.1)`` (``delta``:
        relative to ``delta``); default 0.01.
    max_length : int — largest composed PMF length (default ``2**23``).
    tail : float — per-round mass left beyond each law's grid (to +inf on the upper end).
    progress : None, bool or callable — progress bar of each grid pass (:mod:`paperlib.fdp.progress`;
        None: on a terminal's stderr only, after a few seconds); also settable as ``.progress``.

    Methods: ``epsilon(delta)``, ``epsilon_bounds(delta)``, ``delta(eps)``, ``delta_bounds(eps)``,
    ``f(alpha)`` (the ordered trade-off ``T(P, Q)`` on this side), ``lower(alpha)``, ``upper(alpha)``,
    ``curve(tol)``, ``max_error()``, ``view(side)``; attributes ``step``, ``rounds``, ``label``,
    ``meta`` (grid, tail and truncation masses, lower-end shift, passes, whether the target
    accuracy was met). ``pld`` is the object itself (the interface of the old ``BoundView``).

    Raises ValueError naming the parameter on bad input, for ``delta < PLD_DELTA_FLOOR``, and
    "could not compute ..." when no grid fits ``max_length``; ModuleNotFoundError naming the
    ``[accounting]`` extra when dp_accounting is missing.
    """

    def __init__(self, law, rounds: int, *, side: str = "guarantee", step: float | None = None,
                 rel_tol: float = DEFAULT_REL_TOL, max_length: int = DEFAULT_MAX_LENGTH, tail: float = ROUND_TAIL,
                 label: str = "", meta: dict | None = None, _engine: _Engine | None = None, progress=None):
        if side not in ("guarantee", "bound"):
            raise ValueError(f"side must be 'guarantee' or 'bound', got {side!r}")
        self.side = side
        self.label = label
        self.meta = dict(meta or {})
        if _engine is None:
            require_dp_accounting()
            if not isinstance(law, RoundLaw):
                law = round_law_from_mixture(law)
            rounds = check_int(rounds, "rounds", 1)
            if step is not None:
                step = check_positive(step, "step")
            if not (isinstance(rel_tol, (int, float)) and 0 < rel_tol < 1):
                raise ValueError(f"rel_tol must be in (0, 1), got {rel_tol!r}")
            max_length = check_int(max_length, "max_length", 256)
            if not (isinstance(tail, (int, float)) and 0 < tail <= 1e-6):
                raise ValueError(f"tail must be in (0, 1e-6], got {tail!r}")
            _engine = _Engine(law, rounds, step=step, rel_tol=float(rel_tol), max_length=max_length,
                              tail=float(tail))
        if progress is not None:
            _engine.progress = progress
        self._engine = _engine
        self.rounds = _engine.rounds
        self._curves: dict = {}

    @property
    def progress(self):
        """Progress bar of each grid pass: None (on a terminal's stderr after a few seconds), True,
        False or a callable ``fn(done, total)`` (:mod:`paperlib.fdp.progress`); settable."""
        return self._engine.progress

    @progress.setter
    def progress(self, value) -> None:
        self._engine.progress = value

    # ------------------------------------------------------------ views and state
    def view(self, side: str, label: str | None = None, meta: dict | None = None) -> "PLDComposition":
        """The same composition (shared grids) seen from ``side``."""
        m = dict(self.meta)
        m.update(meta or {})
        return PLDComposition(None, self.rounds, side=side, label=self.label if label is None else label, meta=m,
                              _engine=self._engine)

    @property
    def pld(self) -> "PLDComposition":
        return self

    @property
    def step(self) -> float:
        return self._engine.ensure().step

    def _state(self) -> _State:
        return self._engine.ensure()

    def accounting(self) -> dict:
        """How the current grid was obtained: step, passes, tail masses, shifts, accuracy met."""
        st = self._state()
        e = self._engine
        return {"engine": "dp_accounting PLD (connect-the-dots upper, merged-cell lower)",
                "step": st.step, "rounds": e.rounds, "passes": list(e.passes), "rel_tol": e.rel_tol,
                "accuracy_met": e.accuracy_met, "tail_per_round": e.tail, "truncation": TRUNCATION,
                "directions": st.info}

    def _meta_update(self):
        self.meta.update(pld=self.accounting())

    # ------------------------------------------------------------ profiles
    def epsilon_bounds(self, delta: float) -> tuple[float, float]:
        """``(eps_low, eps_up)`` with ``eps_low <= eps(delta) <= eps_up`` for the exact composition.

        ``delta`` in ``[PLD_DELTA_FLOOR, 1)``. Refines the grid until the bracket meets ``rel_tol``
        (when the grid was not fixed); ``meta['pld']['accuracy_met']`` says whether it did.
        """
        delta = check_delta(delta)
        if delta < PLD_DELTA_FLOOR:
            raise ValueError(f"delta must be >= {PLD_DELTA_FLOOR:g} for a multi-round composition (FFT "
                             f"round-off and truncated tails are not negligible below), got {delta!r}")
        lo, hi = self._engine.epsilon_bounds(delta)
        self._meta_update()
        return float(lo), float(hi)

    def epsilon(self, delta: float) -> float:
        """Upper end (``side='guarantee'``) or lower end (``side='bound'``) of :meth:`epsilon_bounds`."""
        lo, hi = self.epsilon_bounds(delta)
        return hi if self.side == "guarantee" else lo

    def delta_bounds(self, eps) -> tuple[np.ndarray, np.ndarray]:
        """``(delta_low, delta_up)`` at each ``eps >= 0`` (arrays of ``eps``'s shape)."""
        e = np.asarray(eps, dtype=float)
        if not np.all(np.isfinite(e)) or np.any(e < 0):
            raise ValueError(f"eps must be finite and >= 0, got {eps!r}")
        lo, hi = self._engine.delta_bounds(np.atleast_1d(e))
        self._meta_update()
        return lo.reshape(e.shape), hi.reshape(e.shape)

    def delta(self, eps):
        lo, hi = self.delta_bounds(eps)
        d = hi if self.side == "guarantee" else lo
        return d if np.ndim(eps) else float(d)

    def delta_limit(self) -> float:
        st = self._state()
        return max(st.up[d].inf for d in ("QP", "PQ")) if self.side == "guarantee" else 0.0

    def delta_floor(self) -> float:
        return PLD_DELTA_FLOOR

    # ------------------------------------------------------------ curves (ordered pair T(P, Q))
    def _chains(self):
        """Vertices of the pessimistic curve (a lower bound of ``T(P, Q)``) and of an upper bound.

        The upper bound: the optimistic pair's curve, thinned (its chord only rises), capped by
        ``1 - alpha`` and replaced by its lower convex envelope: every step stays above the true
        (convex) trade-off function, which lies below both ``1 - alpha`` and the optimistic curve.
        """
        st = self._state()
        key = ("chains", st.step)
        if key not in self._curves:
            a_lo, b_lo = st.up["QP"].chain()
            a, b = st.low["QP"].chain(st.shift["QP"])
            idx = _thin(a, b)
            a, b = a[idx], b[idx]
            grid = np.union1d(np.clip(a, 0.0, 1.0), [0.0, 1.0])
            yb = np.clip(np.minimum(np.interp(grid, a, b), 1.0 - grid), 0.0, 1.0)
            a_up, b_up = lower_convex_envelope(grid, yb)
            self._curves[key] = ((a_lo, b_lo), (a_up, b_up))
        return self._curves[key]

    def lower(self, alpha) -> np.ndarray:
        """A lower bound of the composed ``T(P, Q)`` (the pessimistic pair's exact curve)."""
        a = check_alpha_array(alpha)
        (al, bl), _ = self._chains()
        out = np.interp(a, al, bl, right=0.0)
        return np.clip(np.minimum(out, 1.0 - a), 0.0, 1.0)

    def upper(self, alpha) -> np.ndarray:
        """An upper bound of the composed ``T(P, Q)`` (the optimistic, shifted pair's curve)."""
        a = check_alpha_array(alpha)
        _, (au, bu) = self._chains()
        out = np.interp(a, au, bu)
        return np.clip(np.minimum(out, 1.0 - a), 0.0, 1.0)

    def __call__(self, alpha) -> np.ndarray:
        return self.lower(alpha) if self.side == "guarantee" else self.upper(alpha)

    def beta_bounds(self, alpha) -> tuple[np.ndarray, np.ndarray]:
        """``(lower(alpha), upper(alpha))``, refining the grid (when not fixed) until their largest gap is
        at most ``rel_tol * max(beta, 0.1)``; ``meta['pld']['accuracy_met']`` says whether it was reached."""
        a = check_alpha_array(alpha)
        e = self._engine
        e.ensure()
        while True:
            lo, hi = self.lower(a), self.upper(a)
            width = float(np.max(hi - lo))
            tol = e.rel_tol * max(float(np.max(hi)), EPS_SCALE_FLOOR)
            if width <= tol:
                e.accuracy_met = True
                break
            if not e.refine(width, tol):
                e.accuracy_met = False
                break
        self._meta_update()
        return lo, hi

    def max_error(self, grid: int = 2001) -> float:
        """Largest ``upper - lower`` on an alpha grid: the discretisation error of the curve."""
        a = np.linspace(0.0, 1.0, grid)
        return float(np.max(self.upper(a) - self.lower(a)))

    def curve(self, tol: float = 1e-6) -> TradeOffCurve:
        """This side as a :class:`~paperlib.fdp.tradeoff.TradeOffCurve` (checked to be a trade-off function).

        Guarantee side: points of the pessimistic curve thinned to about 25,000 with their exact
        slopes, so ``curve.lower`` stays a valid lower bound (``curve(alpha)`` is the chord, within
        ``max_gap``). Bound side: the optimistic curve's points, thinned (the chord only rises).
        ``tol`` is accepted; the curve's own error is ``max_error()``.
        """
        st = self._state()
        key = (self.side, st.step)
        if key in self._curves:
            return self._curves[key]
        (al, bl), (au, bu) = self._chains()
        a, b = (al, bl) if self.side == "guarantee" else (au, bu)
        if self.side == "guarantee":
            if a[-1] < 1.0:
                a, b = np.append(a, 1.0), np.append(b, 0.0)
            keep = np.ones(a.size, dtype=bool)
            keep[1:] = (np.diff(a) > 0) | (np.diff(b) != 0)
            a, b = a[keep], b[keep]
        slope = None
        if self.side == "guarantee":
            # the outgoing segment's slope of the full (convex) chain: a subgradient at each vertex
            with np.errstate(divide="ignore", invalid="ignore"):
                s = np.diff(b) / np.diff(a)
            full_slope = np.concatenate([np.where(np.isfinite(s), s, -np.inf), [0.0]])
        idx = _thin(a, b)
        a, b = a[idx], b[idx]
        if self.side == "guarantee":
            slope = full_slope[idx]
        meta = dict(self.meta)
        meta.update(side=self.side, max_error=self.max_error(), step=st.step)
        c = TradeOffCurve(a, np.clip(b, 0.0, 1.0), slope, label=self.label, meta=meta)
        why = check_tradeoff(c.alpha, c.beta, 1e-9)
        if why is not None:
            raise RuntimeError(f"could not compute a valid trade-off curve for these parameters ({why})")
        self._curves[key] = c
        return c


def _thin(a: np.ndarray, b: np.ndarray, n: int = 12_000) -> np.ndarray:
    """Indices of vertices to keep: near a dense grid of alpha and of beta levels, plus the ends."""
    if a.size <= 2 * n:
        return np.arange(a.size)
    levels = np.unique(np.concatenate([np.linspace(0, 1, n), np.logspace(-16, 0, 800)]))
    ia = np.searchsorted(a, levels)
    ib = np.searchsorted(-b, -levels)
    idx = np.concatenate([ia, ia - 1, ib, ib - 1, [0, a.size - 1]])
    return np.unique(np.clip(idx, 0, a.size - 1))


def compose(mixture_or_law, rounds: int, *, side: str = "guarantee", label: str = "", meta: dict | None = None,
            **options) -> PLDComposition:
    """``PLDComposition(mixture_or_law, rounds, side=..., **options)`` (see the class)."""
    return PLDComposition(mixture_or_law, rounds, side=side, label=label, meta=meta, **options)
