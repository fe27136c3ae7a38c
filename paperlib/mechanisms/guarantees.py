"""One-round guarantees of the four mechanisms and their upper bounds.

Ordered pair ``(D, D')`` with ``|D| = N``, ``|D'| = N + 1``; ``P = M(D)``,
``Q = M(D')`` (THEORY.md section 0). Noise multiplier ``sigma``: the Gaussian
noise on the clipped sum has standard deviation ``sigma * C``.

* :func:`sgm_claim` — ``f_q = q G_{1/sigma} + (1 - q) Id`` (Bu et al. 2020; THEORY.md §3),
  the guarantee that DP-SGD analyses claim; :func:`sgm_claim_symmetric` is ``C_q``.
* :func:`easgm_guarantee`, :func:`asgm_guarantee`, :func:`feasgm_guarantee` — the
  per-pair guarantees for worst-case gradients (Theorem 3.6, the reconstructed ASGM
  statement, Theorems A.2/A.3; THEORY.md §6), as common-threshold mixtures.
* :func:`easgm_guarantee_given`, :func:`asgm_guarantee_given` — the same for given
  clipped per-example vectors (the component shifts are the norms of §6).
* :func:`easgm_upper_bound`, :func:`asgm_upper_bound`, :func:`feasgm_upper_bound` —
  Theorems 3.8, 3.10 (Eq. 14) and A.4, evaluated exactly by the chi-square test of §7.

Binomial sums over the batch size ``k ~ Bin(N, q)`` keep the ``k`` whose mass is
not negligible; the dropped mass (at most ``tail_tol``) is treated as perfectly
distinguishable, so the result stays a lower bound, and is reported in ``meta``. The
truncation follows the ``delta`` asked for (:class:`TruncatedGuarantee`): ``epsilon(delta)``
and ``delta(eps)`` rebuild the mixture with ``tail_tol <= TAIL_FRACTION * delta`` (down to
:data:`MIN_TAIL_TOL`) whenever the dropped mass is not negligible there, so ``epsilon`` is
finite wherever the true epsilon is (down to ``delta ~ 1e-297``).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import stats

from paperlib.fdp.gaussian import GaussShiftFamily, GaussVarFamily, IdentityFamily, SubsampledGaussian
from paperlib.fdp.mixture import LRMixture, PointwiseMixture
from paperlib.mechanisms.core import MECHANISMS, Mechanism, feasgm_floors
from paperlib.mechanisms.setting import checked
from paperlib.fdp.validation import ParameterError, check_delta, check_int, check_positive, check_rate

__all__ = [
    "MECHANISMS",
    "sgm_guarantee",
    "TruncatedGuarantee",
    "binomial_support",
    "binomial_pair",
    "sgm_claim",
    "sgm_claim_symmetric",
    "easgm_guarantee",
    "asgm_guarantee",
    "feasgm_guarantee",
    "easgm_guarantee_given",
    "asgm_guarantee_given",
    "easgm_upper_bound",
    "asgm_upper_bound",
    "feasgm_upper_bound",
    "feasgm_floors",
    "asgm_bound_weight",
    "scale_shift_tradeoff",
    "scale_test_tradeoff",
    "guarantee",
    "upper_bound",
]

DEFAULT_TAIL_TOL = 1e-12
#: A guarantee's dropped binomial mass is kept at most this fraction of the delta asked for.
TAIL_FRACTION = 1e-3


#: Smallest positive ``tail_tol`` of :func:`binomial_support`: its tails are computed in double
#: precision (Boost's incomplete beta, relative accuracy ~1e-15 down to ~1e-308).
MIN_TAIL_TOL = 1e-300
#: Most batch sizes :func:`binomial_support` keeps (memory and time of the mixtures built on it).
MAX_SUPPORT = 10_000_000


def _tail_index(N: int, q: float, half: float, upper: bool) -> int:
    """The smallest ``h`` with ``P[K > h] <= half`` (``upper``), or the largest ``l`` with
    ``P[K < l] <= half``, for ``K ~ Bin(N, q)``: bisection on scipy's ``binom.sf``/``cdf``
    (computed directly, accurate deep in the tails; ``binom.isf`` is not, below ~1e-16)."""
    mode = min(N, int(math.floor((N + 1) * q)))
    if upper:
        lo, hi = mode - 1, N  # P[K > N] = 0 <= half; P[K > mode - 1] >= 1/2 > half
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if stats.binom.sf(mid, N, q) <= half:
                hi = mid
            else:
                lo = mid
        return hi
    lo, hi = 0, mode + 1  # P[K < 0] = 0 <= half; P[K < mode + 1] >= 1/2 > half
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if stats.binom.cdf(mid - 1, N, q) <= half:
            lo = mid
        else:
            hi = mid
    return lo


def binomial_support(N: int, q: float, tail_tol: float = DEFAULT_TAIL_TOL):
    """Batch sizes ``k`` of ``K ~ Bin(N, q)`` that carry all but ``<= tail_tol`` of the mass.

    Returns ``(k, pmf, dropped)``: int array, float array of the same length, and the
    dropped mass, a float in ``[0, tail_tol]``. Each tail is cut where its mass is at most
    ``tail_tol / 2``; ``dropped = P[K < k_min] + P[K > k_max]`` is computed from the tail
    probabilities themselves (never as ``1 - sum(pmf)``), so it is right to ~1e-14 relative
    at any size (tested against mpmath at 1e-10, 1e-50 and 1e-300). Atoms inside the
    range whose probability underflows (below ~1e-308) are dropped and counted in
    ``dropped`` as that bound.

    ``N >= 0``; ``q`` in (0, 1]; ``tail_tol`` 0 (keep every ``k``, ``N <= MAX_SUPPORT``) or in
    ``[MIN_TAIL_TOL, 1)``. ValueError naming the parameter otherwise, and when more than
    :data:`MAX_SUPPORT` batch sizes would be kept (``N``).
    """
    N = check_int(N, "N", 0)
    q = check_rate(q)
    if not (isinstance(tail_tol, (int, float)) and (tail_tol == 0 or MIN_TAIL_TOL <= tail_tol < 1)):
        raise ValueError(f"tail_tol must be 0 or in [{MIN_TAIL_TOL:g}, 1) (tails below are not computable in "
                         f"double precision), got {tail_tol!r}")
    if tail_tol == 0:
        lo, hi = 0, N
    else:
        half = tail_tol / 2.0
        lo, hi = _tail_index(N, q, half, upper=False), _tail_index(N, q, half, upper=True)
    if hi - lo + 1 > MAX_SUPPORT:
        raise ParameterError("N", f"N = {N:,} with q = {q:g} needs {hi - lo + 1:,} batch sizes at tail_tol = {tail_tol:g}, "
                         f"more than {MAX_SUPPORT:,}")
    k = np.arange(lo, hi + 1)
    pmf = stats.binom.pmf(k, N, q)
    low = float(stats.binom.cdf(lo - 1, N, q)) if lo > 0 else 0.0
    high = float(stats.binom.sf(hi, N, q)) if hi < N else 0.0
    keep = pmf > 0
    underflow = float(np.count_nonzero(~keep)) * np.finfo(float).tiny  # each below the smallest normal
    return k[keep], pmf[keep], low + high + underflow


def binomial_pair(N: int, q: float, tail_tol: float):
    """Sizes ``m`` of a Poisson(q) draw from ``D`` (``Bin(N, q)``) and ``D'`` (``Bin(N + 1, q)``) that carry
    all but about ``tail_tol`` of each law: the union of the two supports of :func:`binomial_support`.

    Returns ``(m, pmf_D, pmf_D', out_D', out_D)``: int array, the two pmfs on it, and the mass of each law
    outside it (``m = N + 1`` included for ``D'``), from the binomial tails themselves (never ``1 - sum``).
    ``N >= 1``, ``q`` in (0, 1], ``tail_tol`` in ``[MIN_TAIL_TOL, 1)``.
    """
    ka, _, _ = binomial_support(N, q, tail_tol)
    kb, _, _ = binomial_support(N + 1, q, tail_tol)
    lo, hi = int(min(ka[0], kb[0])), int(max(ka[-1], kb[-1]))
    m = np.arange(lo, hi + 1)
    p, pq = stats.binom.pmf(m, N, q), stats.binom.pmf(m, N + 1, q)
    out_q = float((stats.binom.cdf(lo - 1, N + 1, q) if lo > 0 else 0.0)
                  + (stats.binom.sf(hi, N + 1, q) if hi < N + 1 else 0.0))
    out_p = float((stats.binom.cdf(lo - 1, N, q) if lo > 0 else 0.0) + (stats.binom.sf(hi, N, q) if hi < N else 0.0))
    return m, p, pq, out_q, out_p


class TruncatedGuarantee(LRMixture):
    """A one-round guarantee built on a truncated binomial support, whose truncation follows the delta asked for.

    An :class:`~paperlib.fdp.mixture.LRMixture` (index revealed) with ``build(tail_tol)``, the function that
    makes it again with another truncation. ``epsilon(delta)`` answers from a mixture whose dropped mass is at
    most ``TAIL_FRACTION * delta`` (rebuilt with ``tail_tol = max(MIN_TAIL_TOL, TAIL_FRACTION * delta)`` when
    needed, cached); ``delta(eps)`` likewise refines until the dropped mass is at most ``TAIL_FRACTION`` of
    every value returned. The dropped mass counts as perfectly distinguishable, so every answer is a valid
    upper bound of the exact (untruncated) profile, within a relative ``TAIL_FRACTION`` of it.
    """

    def __init__(self, families, *, build, tail_tol: float, label: str = "", meta: dict | None = None,
                 dropped_mass: float = 0.0):
        super().__init__(families, label=label, meta=meta, dropped_mass=dropped_mass)
        self._build = build
        self.tail_tol = float(tail_tol)
        self.meta.setdefault("tail_tol", self.tail_tol)
        self._finer: dict = {}
        self._plain = False

    def for_delta(self, delta: float) -> "TruncatedGuarantee":
        """This guarantee, or the same one with a finer truncation, whose dropped mass is negligible at ``delta``."""
        if self.dropped_mass <= TAIL_FRACTION * delta or self.tail_tol <= MIN_TAIL_TOL:
            return self
        tol = max(MIN_TAIL_TOL, TAIL_FRACTION * float(delta))
        if tol >= self.tail_tol:
            return self
        tol = float(f"{tol:.1e}")  # a few cache keys per decade
        if tol not in self._finer:
            self._finer[tol] = self._build(tol)
        return self._finer[tol].for_delta(delta)

    def epsilon(self, delta: float, progress=None) -> float:
        target = self.for_delta(check_delta(delta))
        target._plain = True  # the root search evaluates far below delta: no refinement there
        try:
            return LRMixture.epsilon(target, delta, progress=progress)
        finally:
            target._plain = False

    def delta(self, eps):
        g = self
        d = LRMixture.delta(g, eps)
        while not self._plain:
            low = float(np.min(d))
            finer = g.for_delta(max(low, MIN_TAIL_TOL / TAIL_FRACTION))
            if finer is g:
                break
            g = finer
            d = LRMixture.delta(g, eps)
        return d


# ----------------------------------------------------------------------------- SGM
def sgm_claim(q: float, sigma: float) -> LRMixture:
    """The SGM guarantee ``f_q = q G_{1/sigma} + (1 - q) Id`` for the ordered pair (D, D').

    Tight for SGM (attained when the gradients of D are zero); this is what the
    analyses of EASGM/ASGM/FEASGM-based DP-SGD claim. ``q`` in (0, 1], ``sigma > 0``.
    Source: Bu et al. (2020b); paper Section 2; THEORY.md section 3.
    """
    q = check_rate(q)
    sigma = check_positive(sigma, "sigma")
    return LRMixture(
        [SubsampledGaussian(q, 1.0 / sigma)],
        label="SGM claim",
        meta={"mechanism": "sgm", "bound": "claim", "q": q, "sigma": sigma},
    )


def sgm_claim_symmetric(q: float, sigma: float, tol: float = 1e-6):
    """``C_q(G_{1/sigma}) = min{f_q, f_q^{-1}}**``: the claim for the unordered pair.

    Returns a :class:`~paperlib.fdp.tradeoff.TradeOffCurve` (sampled). Its privacy profile
    equals that of :func:`sgm_claim` (which already takes both directions).
    """
    return sgm_claim(q, sigma).curve(tol).symmetrised()


# ----------------------------------------------------------------------------- EASGM
def _easgm_like(N_eff: float, k, pmf, q, sigma, n, label, meta, dropped, build, tail_tol):
    """Components of Theorem 3.6 with normaliser scale ``N_eff`` (N for EASGM, K for FEASGM)."""
    s_den = (N_eff + 1.0) * sigma
    mu1 = k / s_den  # new point not sampled
    mu2 = (N_eff + k) / s_den  # new point sampled
    fam = GaussVarFamily(n, N_eff, np.concatenate([mu1, mu2]), np.concatenate([(1 - q) * pmf, q * pmf]))
    # drop zero-weight components (q = 1 makes the first half vanish)
    keep = fam.weights > 0
    dropped += float(np.sum(np.concatenate([(1 - q) * pmf, q * pmf])[~keep]))  # underflowed weights
    fam = GaussVarFamily(n, N_eff, fam.mus[keep], fam.weights[keep])
    return TruncatedGuarantee([fam], build=build, tail_tol=tail_tol, label=label, meta=meta, dropped_mass=dropped)


def easgm_guarantee(N: int, q: float, sigma: float, n: int, *, tail_tol: float = DEFAULT_TAIL_TOL) -> LRMixture:
    """Per-pair EASGM guarantee for worst-case gradients (Theorem 3.6).

    ``f = sum_k Bin(k; N, q) [(1-q) T(P^n, Q_N^{n-1} x Q_N^{mu1_k}) + q T(P^n, Q_N^{n-1} x Q_N^{mu2_k})]``
    with ``mu1_k = k/((N+1) sigma)``, ``mu2_k = (N+k)/((N+1) sigma)``, ``s = N/(N+1)``,
    all components at one likelihood-ratio threshold. Tight at ``q = 1``.

    Parameters: ``N >= 1`` (|D|), ``q`` in (0, 1], ``sigma > 0``, ``n >= 1`` (output
    dimension), ``tail_tol`` (largest binomial mass dropped). Raises ValueError on bad input.
    """
    N, q, sigma, n = checked(N=N, q=q, sigma=sigma, n=n)
    k, pmf, dropped = binomial_support(N, q, tail_tol)
    meta = {"mechanism": "easgm", "bound": "guarantee", "N": N, "q": q, "sigma": sigma, "n": n}
    return _easgm_like(float(N), k.astype(float), pmf, q, sigma, n, "EASGM guarantee", meta, dropped,
                       lambda tol: easgm_guarantee(N, q, sigma, n, tail_tol=tol), tail_tol)


def feasgm_guarantee(N: int, q: float, sigma: float, n: int, *, tail_tol: float = DEFAULT_TAIL_TOL) -> LRMixture:
    """Per-pair FEASGM guarantee (Theorems A.2, A.3): normalisers ``floor(N q)`` and ``floor((N+1) q)``.

    When the floors agree both outputs are the same post-processing of SGM, so the
    SGM claim holds and is returned (``meta['case'] = 'floors agree'``). Otherwise the
    EASGM formula with ``N`` replaced by ``K = floor(N q)`` in ``s`` and the shifts,
    while ``k ~ Bin(N, q)``.

    Raises ValueError when ``floor(N q) = 0``: FEASGM then divides by zero (as Opacus
    v1.x does), so there is no guarantee to compute.
    """
    N, q, sigma, n = checked(N=N, q=q, sigma=sigma, n=n)
    K, K1 = feasgm_floors(N, q)
    Mechanism.FEASGM.require_defined(N, q)
    meta = {"mechanism": "feasgm", "bound": "guarantee", "N": N, "q": q, "sigma": sigma, "n": n, "K": K, "K_prime": K1}
    if K1 == K:
        claim = sgm_claim(q, sigma)
        claim.label = "FEASGM guarantee (floors agree: SGM)"
        claim.meta.update(meta, case="floors agree")
        return claim
    k, pmf, dropped = binomial_support(N, q, tail_tol)
    meta["case"] = "floors differ"
    return _easgm_like(float(K), k.astype(float), pmf, q, sigma, n, "FEASGM guarantee", meta, dropped,
                       lambda tol: feasgm_guarantee(N, q, sigma, n, tail_tol=tol), tail_tol)


# ----------------------------------------------------------------------------- ASGM
def asgm_guarantee(N: int, q: float, sigma: float, n: int, *, tail_tol: float = DEFAULT_TAIL_TOL) -> LRMixture:
    """Per-pair ASGM guarantee for worst-case gradients (THEORY.md section 6, reconstructed).

    Components: ``k >= 1`` and new point not sampled, weight ``(1-q) Bin(k)``: Id;
    ``k >= 1`` and sampled, weight ``q Bin(k)``: ``T(P^n, Q_k^{n-1} x Q_k^{mu_k})`` with
    ``mu_k = 2k/((k+1) sigma)``, ``s = k/(k+1)``; ``k = 0`` (empty batch divides by 1):
    weight ``(1-q)^N`` split into ``(1-q)`` Id and ``q G_{1/sigma}``.
    Parameters as :func:`easgm_guarantee`.
    """
    N, q, sigma, n = checked(N=N, q=q, sigma=sigma, n=n)
    k, pmf, dropped = binomial_support(N, q, tail_tol)
    fams = []
    id_weight = 0.0
    pos = k >= 1
    for kk, w in zip(k[pos], pmf[pos]):
        if q * w > 0:  # (a weight that underflows is dropped: at most ~1e-308)
            fams.append(GaussVarFamily(n, float(kk), [2.0 * kk / ((kk + 1.0) * sigma)], [q * w]))
        else:
            dropped += w
        id_weight += (1 - q) * w
    if np.any(k == 0):
        w0 = float(pmf[k == 0][0])
        id_weight += (1 - q) * w0
        if q * w0 > 0:
            fams.append(GaussShiftFamily([1.0 / sigma], [q * w0]))
    if id_weight > 0:
        fams.append(IdentityFamily(id_weight))
    meta = {"mechanism": "asgm", "bound": "guarantee", "N": N, "q": q, "sigma": sigma, "n": n}
    return TruncatedGuarantee(fams, build=lambda tol: asgm_guarantee(N, q, sigma, n, tail_tol=tol), tail_tol=tail_tol,
                              label="ASGM guarantee", meta=meta, dropped_mass=dropped)


# ----------------------------------------------------------------------------- given gradients
def _clip(g: np.ndarray, C: float) -> np.ndarray:
    norms = np.linalg.norm(g, axis=1, keepdims=True)
    return g / np.maximum(1.0, norms / C)


def _check_gradients(gradients, C, max_N=16):
    g = np.asarray(gradients, dtype=float)
    if g.ndim != 2 or g.shape[0] < 2:
        raise ValueError("gradients must be an array of shape (N+1, n) with N >= 1")
    if not np.all(np.isfinite(g)):
        raise ValueError("gradients must be finite")
    if g.shape[0] - 1 > max_N:
        raise ValueError(f"gradients: N = {g.shape[0] - 1} > {max_N}; subsets are enumerated (2^N of them)")
    C = check_positive(C, "C")
    return _clip(g, C), C


def easgm_guarantee_given(gradients, q: float, sigma: float, C: float) -> LRMixture:
    """EASGM guarantee for given per-example vectors (Theorem 3.6, general form).

    ``gradients``: array (N+1, n); rows 0..N-1 are D, row N is the added point. They
    are clipped to norm ``C``. For every subset B of D (probability ``q^|B| (1-q)^(N-|B|)``)
    the shifts are ``mu1_B = ||S_B|| / ((N+1) C sigma)`` and
    ``mu2_B = ||N g_{N+1} - S_B|| / ((N+1) C sigma)``. ``N <= 16``.
    """
    g, C = _check_gradients(gradients, C)
    q = check_rate(q)
    sigma = check_positive(sigma, "sigma")
    N, n = g.shape[0] - 1, g.shape[1]
    mus1, mus2, ws = [], [], []
    for mask in itertools.product((0, 1), repeat=N):
        m = np.array(mask, dtype=bool)
        kk = int(m.sum())
        w = q**kk * (1 - q) ** (N - kk)
        sb = g[:N][m].sum(axis=0)
        mus1.append(np.linalg.norm(sb) / ((N + 1) * C * sigma))
        mus2.append(np.linalg.norm(N * g[N] - sb) / ((N + 1) * C * sigma))
        ws.append(w)
    ws = np.asarray(ws)
    fam = GaussVarFamily(n, float(N), np.concatenate([mus1, mus2]), np.concatenate([(1 - q) * ws, q * ws]))
    meta = {"mechanism": "easgm", "bound": "guarantee-given", "N": N, "q": q, "sigma": sigma, "n": n, "C": C}
    return LRMixture([fam], label="EASGM guarantee (given gradients)", meta=meta)


def asgm_guarantee_given(gradients, q: float, sigma: float, C: float) -> LRMixture:
    """ASGM guarantee for given per-example vectors (THEORY.md section 6).

    For a non-empty subset B (size k) with the new point sampled the shift is
    ``||k g_{N+1} - S_B|| / ((k+1) C sigma)`` with ``s = k/(k+1)``; with it not sampled
    the pair is identical. The empty batch divides by 1: ``G_{||g_{N+1}||/(C sigma)}``.
    """
    g, C = _check_gradients(gradients, C)
    q = check_rate(q)
    sigma = check_positive(sigma, "sigma")
    N, n = g.shape[0] - 1, g.shape[1]
    fams = []
    id_w = 0.0
    for mask in itertools.product((0, 1), repeat=N):
        m = np.array(mask, dtype=bool)
        kk = int(m.sum())
        w = q**kk * (1 - q) ** (N - kk)
        id_w += (1 - q) * w
        if kk == 0:
            mu0 = np.linalg.norm(g[N]) / (C * sigma)
            if mu0 > 0:
                fams.append(GaussShiftFamily([mu0], [q * w]))
            else:
                id_w += q * w
            continue
        sb = g[:N][m].sum(axis=0)
        mu = np.linalg.norm(kk * g[N] - sb) / ((kk + 1) * C * sigma)
        fams.append(GaussVarFamily(n, float(kk), [mu], [q * w]))
    fams.append(IdentityFamily(id_w))
    meta = {"mechanism": "asgm", "bound": "guarantee-given", "N": N, "q": q, "sigma": sigma, "n": n, "C": C}
    return LRMixture(fams, label="ASGM guarantee (given gradients)", meta=meta)


# ----------------------------------------------------------------------------- upper bounds
def _chi2_pair(m: int, x: float, label: str, meta: dict) -> LRMixture:
    """``T(P^{m}, Q_x^{m})`` exactly (THEORY.md §7); the identity when ``m = 0``."""
    if m == 0:
        return LRMixture([IdentityFamily(1.0)], label=label, meta=meta)
    return LRMixture([GaussVarFamily(m, x, [0.0], [1.0])], label=label, meta=meta)


def easgm_upper_bound(N: int, q: float | None, sigma: float | None, n: int) -> LRMixture:
    """EASGM upper bound ``T(P^{n-1}, Q_N^{n-1})`` (Theorem 3.8), independent of ``q`` and ``sigma``.

    ``N >= 1``, ``n >= 1`` (``n = 1`` gives ``Id``); ``q`` and ``sigma`` do not enter the
    bound and may be ``None`` (validated and recorded in ``meta`` when given). Evaluated
    exactly as a chi-square test (THEORY.md §7).
    """
    N = check_int(N, "N", 1)
    n = check_int(n, "n", 1)
    q, sigma = checked(q=q, sigma=sigma, optional=("q", "sigma"))
    meta = {"mechanism": "easgm", "bound": "upper", "N": N, "n": n, "q": q, "sigma": sigma}
    return _chi2_pair(n - 1, float(N), "EASGM upper bound", meta)


def feasgm_upper_bound(N: int, q: float, sigma: float | None, n: int):
    """FEASGM upper bound ``T(P^{n-1}, Q_K^{n-1})``, ``K = floor(N q)`` (Theorem A.4).

    Only when the floors differ; when they agree the SGM claim holds and is returned
    (then ``sigma`` is needed; otherwise it may be ``None``). Raises ValueError when
    ``floor(N q) = 0`` (division by zero).
    """
    N = check_int(N, "N", 1)
    q = check_rate(q)
    n = check_int(n, "n", 1)
    (sigma,) = checked(sigma=sigma, optional=("sigma",))
    K, K1 = feasgm_floors(N, q)
    Mechanism.FEASGM.require_defined(N, q)
    meta = {"mechanism": "feasgm", "bound": "upper", "N": N, "q": q, "n": n, "K": K, "K_prime": K1}
    if K == K1:
        if sigma is None:
            raise ParameterError("sigma", "sigma is needed when floor(N q) = floor((N+1) q): the bound is then the SGM claim")
        claim = sgm_claim(q, sigma)
        claim.meta.update(meta, case="floors agree")
        return claim
    return _chi2_pair(n - 1, float(K), "FEASGM upper bound", meta)


def asgm_bound_weight(N: int, q: float) -> float:
    """``w = q - q (1 - q)^N``: the weight of the chi-square part of the ASGM bound (Eq. 14).

    The probability that the added point is sampled and at least one of the ``N`` others
    is too (only then does ``|B|`` differ between the neighbours in a way the bound
    charges). Computed as ``-q expm1(N log1p(-q))``, accurate for tiny ``q``.
    ``N >= 1``, ``q`` in (0, 1]; ValueError otherwise.
    """
    N = check_int(N, "N", 1)
    q = check_rate(q)
    return float(-q * math.expm1(N * math.log1p(-q))) if q < 1 else 1.0


def asgm_upper_bound(N: int, q: float, sigma: float | None, n: int) -> PointwiseMixture:
    """ASGM upper bound, Theorem 3.10 (Eq. 14).

    ``w T(P^{n-1}, Q_N^{n-1}) + (1 - w) Id`` with ``w = q - q(1-q)^N``
    (:func:`asgm_bound_weight`), the two parts taken at the same ``alpha`` (Lemma 3.3).
    ``N >= 1``, ``q`` in (0, 1], ``n >= 1``; ``sigma`` does not enter and may be ``None``.
    """
    N = check_int(N, "N", 1)
    q = check_rate(q)
    n = check_int(n, "n", 1)
    (sigma,) = checked(sigma=sigma, optional=("sigma",))
    w = asgm_bound_weight(N, q)
    meta = {"mechanism": "asgm", "bound": "upper", "N": N, "q": q, "n": n, "sigma": sigma, "weight_chi2": w}
    chi = _chi2_pair(n - 1, float(N), "chi-square part", {})
    return PointwiseMixture([(w, chi), (1 - w, "identity")], label="ASGM upper bound", meta=meta)


# ----------------------------------------------------------------------------- dispatch
def sgm_guarantee(N: int, q: float, sigma: float, n: int, *, tail_tol: float = DEFAULT_TAIL_TOL) -> LRMixture:
    """SGM's one-round guarantee and upper bound: its claim :func:`sgm_claim` (Bu et al. 2020); ``N`` and ``n``
    do not enter it but must be valid (``tail_tol`` is not used)."""
    checked(N=N, q=q, sigma=sigma, n=n)
    return sgm_claim(q, sigma)


def guarantee(mechanism: Mechanism | str, N: int, q: float, sigma: float, n: int, *,
              tail_tol: float = DEFAULT_TAIL_TOL):
    """The one-round per-pair guarantee of ``mechanism`` (a :class:`Mechanism` or its name).

    SGM: the claim :func:`sgm_claim` (Bu et al. 2020; ``N`` and ``n`` validated, not used);
    EASGM (Theorem 3.6), ASGM (THEORY.md §6, reconstructed), FEASGM (Theorems A.2/A.3):
    :func:`easgm_guarantee`, :func:`asgm_guarantee`, :func:`feasgm_guarantee`, as the mechanism's
    entry in :mod:`paperlib.mechanisms.registry` names them. For ``T`` rounds and the other bounds,
    :func:`paperlib.mechanisms.curves.curve`.
    """
    spec = Mechanism.parse(mechanism, allowed=Mechanism.having("guarantee"), need="guarantee").spec
    return spec.computation("guarantee")(N, q, sigma, n, tail_tol=tail_tol)


def upper_bound(mechanism: Mechanism | str, N: int, q: float, sigma: float, n: int):
    """The upper bound of the guarantee (Theorems 3.8, 3.10, A.4); for SGM the claim itself."""
    spec = Mechanism.parse(mechanism, allowed=Mechanism.having("upper"), need="upper").spec
    checked(N=N, q=q, sigma=sigma, n=n)
    return spec.computation("upper")(N, q, sigma, n)


# ----------------------------------------------------------------------------- Theorems 3.4, 3.5
def scale_shift_tradeoff(mu: float, s: float, n: int = 1) -> LRMixture:
    """``T(N(0, I_n), N(mu e_1, s^2 I_n))`` for ``0 < s < 1``, ``mu >= 0``: the building block
    of every guarantee (THEORY.md §4; the orderings of Theorems 3.4 and 3.5: weaker as
    ``mu`` falls and as ``s`` rises). Exact likelihood-ratio evaluation
    (:class:`~paperlib.fdp.gaussian.GaussVarFamily`, ``s = x / (x + 1)``).
    Raises ValueError naming the parameter.
    """
    if not (isinstance(s, (int, float)) and 0 < s < 1):
        raise ValueError(f"s must be a number in (0, 1), got {s!r}")
    if not (isinstance(mu, (int, float)) and math.isfinite(mu) and mu >= 0):
        raise ValueError(f"mu must be a finite number >= 0, got {mu!r}")
    n = check_int(n, "n", 1)
    return LRMixture([GaussVarFamily(n, s / (1 - s), [float(mu)], [1.0])], label=f"T(N(0,I), N({mu:g} e1, {s:g}^2 I))",
                     meta={"mu": mu, "s": s, "n": n})


def scale_test_tradeoff(alpha, s: float) -> np.ndarray:
    """Closed form of ``T(N(0, 1), N(0, s^2))`` (``0 < s < 1``): the test rejects D when
    ``|X| < tau``, so ``alpha = 2 Phi(tau) - 1`` and ``beta = 2 (1 - Phi(tau / s))``
    (THEORY.md §7, the pure scale test). ``alpha`` in [0, 1], array in, array out."""
    from paperlib.fdp.validation import check_alpha_array

    if not (isinstance(s, (int, float)) and 0 < s < 1):
        raise ValueError(f"s must be a number in (0, 1), got {s!r}")
    a = check_alpha_array(alpha)
    return 2.0 * stats.norm.sf(stats.norm.ppf((1.0 + a) / 2.0) / s)
