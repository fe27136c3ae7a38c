"""Multi-round guarantees: exact chi-square bounds, numerical composition, accountants.

Everything here concerns ``T`` rounds of DP-SGD on the ordered pair ``(D, D')``,
``|D| = N``, ``|D'| = N + 1`` (THEORY.md sections 0, 7, 8 and 10; paper Appendix A.2,
A.4 and Figure 7). Three kinds of curves meet:

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

2. **Numerical composition (privacy-loss distribution, PLD) for ASGM** — the case the
   paper leaves open (Section 7, "No privacy-guarantee visualization for multi-round
   ASGM"). The Eq. 14 bound ``w T(P^{⊗(n-1)}, Q_N^{⊗(n-1)}) + (1 - w) Id``,
   ``w = q - q (1-q)^N``, is *exactly* the trade-off function of the pair
   ``(P, (1 - w) P + w Q)`` with ``(P, Q)`` the chi-square pair: for any test of level
   ``alpha`` the alternative rejects with probability ``(1 - w) alpha + w (1 - beta_PQ)``,
   so ``T(P, (1-w)P + wQ)(alpha) = w T(P,Q)(alpha) + (1 - w)(1 - alpha)`` — the same
   construction that gives ``f_q = q G + (1 - q) Id`` for SGM (:class:`DilutedFamily`).
   Its T-fold power is therefore the trade-off of a product of such pairs, composed by
   FFT convolution (now by :mod:`paperlib.fdp.pld`; :class:`ComposedPLD` below is the older engine). The same per-round bound holds for
   every fixed previous transcript (Eq. 14 does not depend on the gradients), so the
   argument of Theorem A.6 carries over and ``f̄^{⊗T}`` bounds the T-round ASGM guarantee.

3. **The claim.** The SGM claim over ``T`` rounds as practitioners get it: Opacus's
   RDP accountant (the paper's baseline for Figure 7; Mironov et al. 2019) and its PRV
   accountant (Gopi et al. 2021), plus this module's own PLD composition of the tight
   one-round claim ``f_q`` (Bu et al. 2020; THEORY.md §3) as a cross-check.

Which direction is conservative
-------------------------------
The point of an *upper* bound ``f̄`` on the guarantee is the sentence "the best
guarantee any analysis can give is at most ``f̄``, and ``f̄`` lies below the claim".
A numerical ``f̄`` must therefore never be *understated* (drawn too low), and an
``epsilon`` reported for it must never be *overstated*. Rounding privacy losses up
(the usual "pessimistic" PLD) does the opposite: it lowers the curve. So
:class:`ComposedPLD` keeps both sides and reports the bracket:

* ``upper`` side — the binned pair. Replacing each round's output by the bin index of
  its privacy loss, and the T-round output by the sum of those indices, is
  post-processing, so the exact trade-off ``f_b`` of the resulting discrete pair satisfies
  ``f_b >= f̄^{⊗T}`` and ``epsilon(f_b) <= epsilon(f̄^{⊗T})``: a valid upper curve and a
  valid *lower* value of the bound's epsilon. Used for the T-round ASGM bound (and for
  FEASGM when its floors agree and the bound is the SGM curve itself).
* ``lower`` side — given the index sum ``S``, every outcome's true privacy loss lies in an
  interval of width ``T * step``; hence ``f̄^{⊗T}(alpha) >= max(e^{-T step} f_b(alpha),
  1 - e^{T step} (1 - f_b(alpha)))`` (up to the clipped and trimmed tail mass), and
  rounding each loss to the unfavourable end of its interval gives ``delta`` and
  ``epsilon`` values that are never understated. Used for guarantees (SGM over T rounds)
  and for the claim when it is compared with an upper bound.

The width of the bracket (``epsilon_upper - epsilon_lower <= T * step`` plus the tail
term) is the discretisation error, reported with every result.

Superseded for every multi-round result: :mod:`paperlib.fdp.pld` (dp_accounting's PLD with
a second-order discretisation on both ends) now composes the SGM claim, the ASGM bound, the
FEASGM floors-agree case and the certified guarantee; its bracket is ``O(step^2)`` where this
one is ``T * step`` (at ``q = 0.005``, ``sigma = 1``, 10,000 rounds this engine printed 38.6
against the true 2.80). :class:`ComposedPLD` and :class:`BoundView` stay as a second,
independent engine for tests; nothing in the library uses them.

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
from scipy import fft as sfft
from scipy import optimize, special

from paperlib.fdp.gaussian import LRFamily, diluted_hockey
from paperlib.fdp.mixture import LRMixture
from paperlib.fdp.tails import TEMME_MIN_DOF, chi2_logcdf, chi2_logsf, chi2_ppf  # noqa: F401 (re-exported)
from paperlib.fdp.tradeoff import DELTA_FLOOR, TradeOff, TradeOffCurve, checked_curve
from paperlib.fdp.validation import check_alpha_array, check_delta, check_int, check_positive, check_probability

__all__ = [
    "chi2_logcdf",
    "chi2_logsf",
    "chi2_ppf",
    "Chi2Pair",
    "DilutedFamily",
    "ComposedPLD",
    "BoundView",
]

#: Default largest FFT length of :class:`ComposedPLD` (about 0.3 GB at the peak, ~2 s).
DEFAULT_MAX_FFT = 2**22
#: Default tail mass left out of the per-round binning, per side.
DEFAULT_TAIL = 1e-15
#: Mass (per side, per end) trimmed from the composed distribution: FFT round-off lives there.
TRIM_MASS = 1e-12


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
    its curve and :class:`ComposedPLD` / :class:`DilutedFamily` can use it.

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


# =============================================================================== PLD
def _eps_for_delta(a: np.ndarray, logb: np.ndarray, delta: float, order: np.ndarray | None = None) -> float:
    """Smallest ``eps >= 0`` with ``sum_i (a_i - e^eps b_i)_+ <= delta``.

    ``a`` are masses (>= 0), ``logb`` log-masses; ``order`` (optional) sorts the outcomes
    by ``log a - log b`` descending (computed when not given). Along that order the left
    side is ``A_k - e^eps B_k`` on each piece, solved exactly on the right piece.
    Returns ``inf`` when ``delta <= 0`` or no finite ``eps`` suffices.
    """
    if delta <= 0:
        return math.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        key = np.log(a) - logb
    if order is None:
        order = np.argsort(-np.where(np.isnan(key), -np.inf, key), kind="stable")
    a, logb, key = a[order], logb[order], key[order]
    keep = a > 0
    a, logb, key = a[keep], logb[keep], key[keep]
    if a.size == 0:
        return 0.0
    A = np.cumsum(a)
    LB = np.logaddexp.accumulate(logb)
    # D[k] = delta at eps = key[k] (the set is the indices < k); D[K] = total (eps -> -inf)
    K = a.size
    D = np.empty(K + 1)
    D[0] = 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        inner = A[:-1] - np.exp(key[1:] + LB[:-1])
    D[1:K] = np.where(np.isposinf(key[1:]), 0.0, inner)
    D[K] = A[-1]
    pos = key > 0
    d0 = float(np.sum(a[pos]) - np.exp(special.logsumexp(logb[pos]))) if pos.any() else 0.0
    if d0 <= delta:
        return 0.0
    hit = D > delta
    if not hit.any():
        return 0.0
    k = int(np.argmax(hit))
    if not np.isfinite(LB[k - 1]):
        return math.inf
    eps = math.log(A[k - 1] - delta) - LB[k - 1]
    return max(float(eps), 0.0)


def _delta_at(a: np.ndarray, logb: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """``sum_i (a_i - e^eps b_i)_+`` for each ``eps`` (direct, vectorised per eps)."""
    out = np.empty(eps.shape)
    with np.errstate(over="ignore", invalid="ignore"):
        for i, e in enumerate(eps.ravel()):
            out.flat[i] = np.sum(np.maximum(a - np.exp(e + logb), 0.0))
    return out


class ComposedPLD(TradeOff):
    """T-fold composition of a pair through its binned privacy-loss distribution.

    Parameters
    ----------
    family : a likelihood-ratio family (``tails(logt) -> (alpha, beta)`` with
        ``alpha = P[L > log t]``, ``beta = Q[L <= log t]``, plus ``logt_bracket`` and
        ``seed_points``): :class:`Chi2Pair`, :class:`DilutedFamily`,
        :class:`~paperlib.fdp.gaussian.GaussShiftFamily`, :class:`~paperlib.fdp.gaussian.SubsampledGaussian`.
    rounds : int >= 1, the number ``T`` of compositions.
    step : float > 0 or None — bin width ``Δ`` of the privacy loss. ``None`` picks the
        finest width whose FFT length ``T (J - 1) + 1`` fits ``max_fft``.
    tail : float in (0, 1e-3] — per round, the probability below the first and above the
        last bin edge is at most ``tail`` under ``P`` and under ``Q``; that mass is merged
        into the end bins (post-processing, so the upper side stays valid) and charged to
        the lower side as ``T * tail`` (``meta['tail_mass_P'/'tail_mass_Q']`` are exact).
    max_fft : int, largest FFT length (default 2**22: about 0.3 GB at the peak, ~2 s).

    Construction
    ------------
    Bin ``j`` collects outputs with ``L in (c_0 + j Δ, c_0 + (j+1) Δ]``; ``p_j``, ``q_j`` are
    its probabilities under ``P`` and ``Q`` (differences of ``tails`` at the edges). The
    T-round statistic ``S`` = sum of the bin indices has laws ``p^{*T}`` and ``q^{*T}``
    (FFT, exact up to rounding ~1e-16). Given ``S``, every T-round output without a clipped
    round has ``L in (T c_0 + S Δ, T c_0 + (S + T) Δ]``.

    Results (both sides; see the module docstring for why both are needed)
    ------------------------------------------------------------------------
    ``upper(alpha)``  — exact trade-off ``f_b`` of the binned pair (chord of its vertices):
                        ``>= f^{⊗T}`` (post-processing).
    ``lower(alpha)``  — ``max(e^{-TΔ} (f_b(alpha') - η_Q), 1 - e^{TΔ} (1 - f_b(alpha') + η_Q))``,
                        ``alpha' = alpha + η_P``, ``η = T * tail mass``: ``<= f^{⊗T}``.
    ``epsilon_bounds(delta)`` — ``(eps_lo, eps_hi)`` with ``eps_lo <= eps(f^{⊗T}) <= eps_hi``:
                        ``eps_lo`` from the binned pair, ``eps_hi`` with every loss rounded to the
                        pessimistic end of its interval plus ``T * tail``. ``eps_hi - eps_lo``
                        is at most about ``T Δ``.
    ``delta_bounds(eps)`` — the matching ``(delta_lo, delta_hi)``.

    Raises ValueError naming the parameter on bad input. Source: the PLD/FFT approach of
    Koskela, Jälkö, Honkela (2020) and Gopi, Lee, Wutschitz (2021); the two-sided
    rounding argument is written out above.
    """

    def __init__(self, family, rounds: int, *, step: float | None = None, tail: float = DEFAULT_TAIL,
                 max_fft: int = DEFAULT_MAX_FFT, label: str = "", meta: dict | None = None):
        self.family = family
        self.rounds = check_int(rounds, "rounds", 1)
        if not (isinstance(tail, (int, float)) and 0 < tail <= 1e-3):
            raise ValueError(f"tail must be in (0, 1e-3], got {tail!r}")
        self.tail = float(tail)
        self.max_fft = check_int(max_fft, "max_fft", 64)
        if step is not None:
            step = check_positive(step, "step")
        self.label = label
        self.meta = dict(meta or {})
        self._build(step)
        self._curve: TradeOffCurve | None = None

    # ------------------------------------------------------------ construction
    def _edge(self, fn, lo, hi, increasing: bool) -> float:
        """Root of a monotone function of ``log t`` in [lo, hi] (an end if it has no sign change)."""
        flo, fhi = fn(lo), fn(hi)
        if increasing:
            if flo >= 0:
                return lo
            if fhi <= 0:
                return hi
        else:
            if fhi >= 0:
                return hi
            if flo <= 0:
                return lo
        return float(optimize.brentq(fn, lo, hi, xtol=1e-13 * (1 + abs(lo) + abs(hi)), maxiter=500))

    def _build(self, step):
        fam, T, tau = self.family, self.rounds, self.tail
        lo, hi = (float(v) for v in fam.logt_bracket())

        def tails1(c):
            a, b = fam.tails(np.array([c]))
            return float(a[0]), float(b[0])

        def g_lo(c):  # P[L <= c], Q[L <= c] reach tau
            a, b = tails1(c)
            return max(1.0 - a, b) - tau

        def g_hi(c):  # P[L > c], Q[L > c] fall to tau
            a, b = tails1(c)
            return max(a, 1.0 - b) - tau

        c_lo = self._edge(g_lo, lo, hi, increasing=True)
        c_hi = self._edge(g_hi, lo, hi, increasing=False)
        if c_hi < c_lo:
            c_lo, c_hi = c_hi, c_lo
        pad = 1e-12 * (1.0 + abs(c_lo) + abs(c_hi))
        c_lo -= pad
        c_hi += pad
        width = c_hi - c_lo
        if step is None:
            J = max(2, (self.max_fft - 1) // T + 1)
            step = width / (J - 1)
        J = max(2, int(math.ceil(width / step)) + 1)
        L_T = T * (J - 1) + 1
        if L_T > 4 * self.max_fft:
            raise ValueError(
                f"step = {step:g} needs an FFT of length {L_T} for rounds = {T}; "
                f"use a larger step or raise max_fft (now {self.max_fft})"
            )
        edges = c_lo + step * np.arange(J + 1)
        a_e, b_e = fam.tails(edges)
        a_e = np.asarray(a_e, dtype=float)
        b_e = np.asarray(b_e, dtype=float)
        p = np.maximum(a_e[:-1] - a_e[1:], 0.0)
        q = np.maximum(b_e[1:] - b_e[:-1], 0.0)
        tau_p = (1.0 - a_e[0]) + a_e[-1]
        tau_q = b_e[0] + (1.0 - b_e[-1])
        p[0] += 1.0 - a_e[0]
        p[-1] += a_e[-1]
        q[0] += b_e[0]
        q[-1] += 1.0 - b_e[-1]
        # drop empty bins at both ends (shift the offset accordingly)
        nz = np.flatnonzero((p > 0) | (q > 0))
        first, last = int(nz[0]), int(nz[-1])
        p, q = p[first:last + 1], q[first:last + 1]
        c_lo = c_lo + first * step
        J = p.size
        L_T = T * (J - 1) + 1
        if T == 1:
            pT, qT = p.copy(), q.copy()
        else:
            nfft = sfft.next_fast_len(L_T, real=True)
            pT = sfft.irfft(sfft.rfft(p, nfft) ** T, nfft)[:L_T]
            qT = sfft.irfft(sfft.rfft(q, nfft) ** T, nfft)[:L_T]
        pT = np.maximum(pT, 0.0)
        qT = np.maximum(qT, 0.0)
        # trim both ends where at most TRIM_MASS of P and of Q lies (mostly FFT round-off):
        # merged into the end entries (post-processing, upper side valid) and charged to
        # the lower side like the clipped tails
        cp, cq = np.cumsum(pT), np.cumsum(qT)
        i0 = int(min(np.searchsorted(cp, TRIM_MASS, "right"), np.searchsorted(cq, TRIM_MASS, "right")))
        rp, rq = np.cumsum(pT[::-1]), np.cumsum(qT[::-1])
        j0 = int(min(np.searchsorted(rp, TRIM_MASS, "right"), np.searchsorted(rq, TRIM_MASS, "right")))
        i1 = pT.size - 1 - j0
        if i1 <= i0:
            i0, i1 = 0, pT.size - 1
        left_p, left_q = (cp[i0 - 1], cq[i0 - 1]) if i0 > 0 else (0.0, 0.0)
        right_p, right_q = (rp[j0 - 1], rq[j0 - 1]) if (j0 > 0 and i1 < pT.size - 1) else (0.0, 0.0)
        pT, qT = pT[i0:i1 + 1].copy(), qT[i0:i1 + 1].copy()
        pT[0] += left_p
        qT[0] += left_q
        pT[-1] += right_p
        qT[-1] += right_q
        self.p, self.q = pT, qT
        self.trimmed_P, self.trimmed_Q = float(left_p + right_p), float(left_q + right_q)
        c_lo_T = T * c_lo + i0 * step
        self.step = float(step)
        self.offset = c_lo_T  # S-th entry: L in (offset + S step, offset + (S + T) step]
        self.bins_per_round = J
        self.tail_mass_P = float(max(tau_p, 0.0))
        self.tail_mass_Q = float(max(tau_q, 0.0))
        self.eta_P = min(1.0, T * self.tail_mass_P + self.trimmed_P)
        self.eta_Q = min(1.0, T * self.tail_mass_Q + self.trimmed_Q)
        self._order = None
        self.meta.update(
            rounds=T, step=self.step, bins_per_round=J, fft_length=L_T,
            loss_range_per_round=[float(c_lo), float(c_lo + J * step)],
            tail_mass_P=self.tail_mass_P, tail_mass_Q=self.tail_mass_Q,
            trimmed_P=self.trimmed_P, trimmed_Q=self.trimmed_Q, stored_length=int(self.p.size),
            max_loss_error=T * self.step,
        )

    def _sorted(self):
        """Order of the entries by ``log q - log p``, descending (cached)."""
        if self._order is None:
            with np.errstate(divide="ignore", invalid="ignore"):
                key = np.log(self.q) - np.log(self.p)
            key = np.where(np.isnan(key), -np.inf, key)
            self._order = np.argsort(-key, kind="stable")
            self._key = key
        return self._order, self._key

    # ------------------------------------------------------------ curves
    def _vertices(self):
        order, key = self._sorted()
        p, q, key = self.p[order], self.q[order], key[order]
        keep = (p > 0) | (q > 0)
        p, q, key = p[keep], q[keep], key[keep]
        alpha = np.concatenate([[0.0], np.cumsum(p)])
        beta = np.concatenate([np.cumsum(q[::-1])[::-1], [0.0]])
        # subgradient at vertex k: slope of the next segment (-e^key[k]); 0 at the end
        with np.errstate(over="ignore"):
            slope = np.concatenate([-np.exp(np.minimum(key, 700.0)), [0.0]])
        slope[:-1] = np.where(np.isposinf(key), -np.inf, slope[:-1])
        return alpha, beta, slope

    def curve(self, tol: float = 1e-6) -> TradeOffCurve:
        """``f_b`` as a :class:`~paperlib.fdp.tradeoff.TradeOffCurve` (vertices thinned to ~40k).

        Dropping vertices of a convex chain only raises the chord, so ``curve(alpha)``
        stays ``>= f_b >= f^{⊗T}``; ``curve.lower`` (tangents) stays ``<= f_b``. ``tol`` is
        accepted for the trade-off interface and ignored (the binned pair is exact).
        """
        if self._curve is not None:
            return self._curve
        alpha, beta, slope = self._vertices()
        levels = np.unique(np.concatenate([np.linspace(0, 1, 20001), np.logspace(-16, 0, 1601)]))
        ia = np.searchsorted(alpha, levels)
        ib = np.searchsorted(-beta, -levels)
        idx = np.unique(np.clip(np.concatenate([ia, ia - 1, ib, ib - 1, [0, alpha.size - 1]]), 0, alpha.size - 1))
        a, b, s = np.minimum(alpha[idx], 1.0), beta[idx], slope[idx]  # cumsum may pass 1 by rounding
        if a[-1] < 1.0:
            a, b, s = np.append(a, 1.0), np.append(b, 0.0), np.append(s, 0.0)
        c = checked_curve(a, np.minimum(b, 1.0), s, label=self.label, meta=self.meta)
        c.meta.update(side="upper (binned pair, post-processing)", max_gap=c.max_gap)
        self._curve = c
        return c

    def __call__(self, alpha) -> np.ndarray:
        """``f_b(alpha)``, the binned pair's exact trade-off (:meth:`upper`)."""
        return self.upper(alpha)

    def upper(self, alpha) -> np.ndarray:
        """``f_b(alpha)`` (chord): never below the exact ``f^{⊗T}``."""
        return self.curve()(alpha)

    def lower(self, alpha) -> np.ndarray:
        """A curve never above the exact ``f^{⊗T}`` (class docstring)."""
        a = check_alpha_array(alpha)
        c = self.curve()
        fb = c.lower(np.minimum(a + self.eta_P, 1.0))
        d = self.rounds * self.step
        lo = np.maximum(math.exp(-d) * (fb - self.eta_Q), 1.0 - math.exp(d) * (1.0 - fb + self.eta_Q))
        return np.clip(lo, 0.0, 1.0 - a)

    def max_error(self, grid: int = 2001) -> float:
        """Largest ``upper - lower`` on an alpha grid: the discretisation error of the curve."""
        a = np.linspace(0, 1, grid)
        return float(np.max(self.upper(a) - self.lower(a)))

    # ------------------------------------------------------------ profiles
    def _loss_ends(self):
        S = np.arange(self.p.size, dtype=float)
        lo = self.offset + S * self.step
        return lo, lo + self.rounds * self.step

    def epsilon_bounds(self, delta: float) -> tuple[float, float]:
        """``(eps_lo, eps_hi)`` bracketing ``epsilon(delta)`` of the exact composition.

        ``delta`` in ``[DELTA_FLOOR, 1)`` (ValueError otherwise); ``eps_hi`` is ``inf`` when
        ``delta`` is below the tail and trimmed mass ``eta`` charged to the upper end."""
        delta = check_delta(delta)
        if delta < DELTA_FLOOR:
            raise ValueError(f"delta must be >= {DELTA_FLOOR:g} (the privacy profile is not computed accurately "
                             f"below), got {delta!r}")
        p, q = self.p, self.q
        with np.errstate(divide="ignore"):
            lp, lq = np.log(p), np.log(q)
        order, _ = self._sorted()
        e_lo = max(_eps_for_delta(q, lp, delta, order), _eps_for_delta(p, lq, delta, order[::-1]))
        l_lo, l_hi = self._loss_ends()
        up = np.arange(p.size)
        e_hi = max(
            _eps_for_delta(q, lq - l_hi, delta - self.eta_Q, up[::-1]),
            _eps_for_delta(p, lp + l_lo, delta - self.eta_P, up),
        )
        return e_lo, max(e_hi, e_lo)

    def delta(self, eps):
        """Privacy profile of the binned pair ``f_b`` (the lower end of :meth:`delta_bounds`)."""
        lo, _ = self.delta_bounds(eps)
        return lo if np.ndim(eps) else float(lo)

    def epsilon(self, delta: float) -> float:
        """``epsilon`` of the binned pair ``f_b`` (the lower end of :meth:`epsilon_bounds`)."""
        return self.epsilon_bounds(delta)[0]

    def delta_bounds(self, eps) -> tuple[np.ndarray, np.ndarray]:
        """``(delta_lo, delta_hi)`` at each ``eps >= 0`` (arrays of ``eps``'s shape)."""
        e = np.asarray(eps, dtype=float)
        if not np.all(np.isfinite(e)) or np.any(e < 0):
            raise ValueError(f"eps must be finite and >= 0, got {eps!r}")
        p, q = self.p, self.q
        with np.errstate(divide="ignore"):
            lp, lq = np.log(p), np.log(q)
        l_lo, l_hi = self._loss_ends()
        d_lo = np.maximum(_delta_at(q, lp, e), _delta_at(p, lq, e))
        d_hi = np.maximum(_delta_at(q, lq - l_hi, e) + self.eta_Q, _delta_at(p, lp + l_lo, e) + self.eta_P)
        return d_lo, np.minimum(d_hi, 1.0)


class BoundView(TradeOff):
    """One side of a :class:`ComposedPLD`, with the interface the CLI and notebooks use.

    ``side = "upper"``: ``view(alpha)`` is ``pld.upper`` and ``view.epsilon(delta)`` the
    lower end of the bracket (for upper bounds: neither understated curve nor overstated
    epsilon). ``side = "lower"``: ``pld.lower`` and the upper end (for guarantees and
    for a claim compared with an upper bound).
    """

    def __init__(self, pld: ComposedPLD, side: str, label: str = "", meta: dict | None = None):
        if side not in ("upper", "lower"):
            raise ValueError(f"side must be 'upper' or 'lower', got {side!r}")
        self.pld, self.side = pld, side
        self.label = label or pld.label
        self.meta = dict(pld.meta)
        self.meta.update(meta or {})
        self.meta["side"] = side

    def __call__(self, alpha) -> np.ndarray:
        return self.pld.upper(alpha) if self.side == "upper" else self.pld.lower(alpha)

    def epsilon(self, delta: float) -> float:
        lo, hi = self.pld.epsilon_bounds(delta)
        return lo if self.side == "upper" else hi

    def epsilon_bounds(self, delta: float) -> tuple[float, float]:
        return self.pld.epsilon_bounds(delta)

    def delta(self, eps):
        """This side's privacy profile: ``delta_lo`` (upper side) or ``delta_hi`` (lower side)."""
        lo, hi = self.pld.delta_bounds(eps)
        d = lo if self.side == "upper" else hi
        return d if np.ndim(eps) else float(d)

    def curve(self, tol: float = 1e-6) -> TradeOffCurve:
        """This side as a :class:`~paperlib.fdp.tradeoff.TradeOffCurve` (``tol`` accepted, ignored:
        the upper side is the binned pair's vertices, the lower side 4,400 points of ``pld.lower``)."""
        if self.side == "upper":
            return self.pld.curve()
        if getattr(self, "_lower_curve", None) is None:
            a = np.unique(np.concatenate([np.linspace(0, 1, 4001), np.logspace(-12, 0, 400)]))
            self._lower_curve = checked_curve(a, self.pld.lower(a), None, label=self.label, meta=self.meta)
        return self._lower_curve
