"""Berry-Esseen CLT bounds for the composition of f-DP trade-off functions.

This module implements the central limit theorem with a Berry-Esseen error term of
Dong, Roth and Su (JRSSB 2022, Theorem 5) as the paper uses it to draw its upper
bounds (paper Theorems 3.12, 3.13 and A.7; ``THEORY.md`` section 8).

For symmetric trade-off functions ``f_1, ..., f_m`` define, with ``|f'|`` the absolute
slope on ``(0, 1)``::

    kl(f)  = -∫_0^1 log|f'(α)| dα
    κ₂(f)  =  ∫_0^1 log²|f'(α)| dα
    κ̄₃(f)  =  ∫_0^1 |log|f'(α)| + kl(f)|³ dα

and, with ``V = ‖κ₂‖₁ − ‖kl‖₂²``::

    μ = 2 ‖kl‖₁ / sqrt(V)            γ = 0.56 ‖κ̄₃‖₁ / V^{3/2}

Then for ``α ∈ [γ, 1 − γ]``::

    G_μ(α + γ) − γ  ≤  f_1 ⊗ … ⊗ f_m (α)  ≤  G_μ(α − γ) + γ,

with ``G_μ(α) = Φ(Φ⁻¹(1 − α) − μ)``.

The paper applies it to the per-coordinate function ``f* = T(N(0,1), N(0,s²))``,
``0 < s < 1``, which is not symmetric; it symmetrises it as
``f̄* = max{f*, f*⁻¹} ≥ f*``. Hence ``G_μ(α − γ) + γ`` is an upper bound of
``f̄*^{⊗m} ≥ f*^{⊗m} = T(N(0,I_m), N(0, s² I_m))`` (the exact chi-square curve of
``THEORY.md`` section 7), while the *lower* CLT bound ``G_μ(α + γ) − γ`` bounds
``f̄*^{⊗m}`` only, not ``f*^{⊗m}``.

Parametrisation of ``f*`` (``THEORY.md`` §8): for ``t ≥ 0`` the optimal test rejects
``H0`` when ``|x| < t``, so ``α = 2Φ(t) − 1``, ``β = 2(1 − Φ(t/s))`` and
``log|f*'(α)| = L(t) = −log s − t² (1/s² − 1)/2 = log(q(t)/p(t))`` (``p``, ``q`` the
densities of ``N(0,1)`` and ``N(0,s²)``). ``f*`` and ``f*⁻¹`` cross once (checked
numerically for ``s`` from 0.05 to 0.9999 in ``tests/test_clt.py``), on the diagonal,
at ``t*`` solving ``Φ(−t*/s) + Φ(−t*) = 1/2``; ``f̄* = f*`` on
``α ≤ α* = 2Φ(t*) − 1`` and ``f*⁻¹`` beyond. Mapping the second piece back onto the
first (``α = f*(β)``, ``dα = |f*'(β)| dβ``, ``log|(f*⁻¹)'(α)| = −L``) gives, with
``dα = 2φ(t) dt`` and ``e^L dα = 2φ(t/s)/s dt``::

    kl(f̄*)  = ∫_0^{t*} 2φ(t) · expm1(L) · L dt                 (= ∫_{|x|<t*} (q − p) log(q/p))
    κ₂(f̄*)  = ∫_0^{t*} 2φ(t) · (2 + expm1(L)) · L² dt
    κ̄₃(f̄*)  = ∫_0^{t*} 2φ(t) · (|L + kl|³ + e^L |L − kl|³) dt

These integrands are smooth on a bounded interval (no endpoint divergence) and use
``log1p``/``expm1`` forms, so the functionals keep their relative accuracy when
``1 − s`` is tiny (they scale like ``(1 − s)²``, ``(1 − s)²`` and ``(1 − s)³``).

Public functions
----------------
``functionals_from_log_slope``  generic quadrature for any symmetric ``f``.
``fbar_star_crossing``          ``(t*, α*)`` for ``f̄*``.
``fbar_star_log_slope``         ``log|f̄*'(α)|`` (vectorised).
``fbar_star_functionals``       accurate ``(kl, κ₂, κ̄₃)`` of ``f̄*``.
``clt_mu_gamma``                ``(μ, γ)`` for ``m`` possibly different functions.
``clt_mu_gamma_iid``            ``(μ, γ)`` for ``m`` identical functions (closed form).
``clt_bounds``                  CLT lower/upper curves for ``f̄*^{⊗m}``.
``clt_upper_bound_easgm``       EASGM, ``s = N/(N+1)``, ``m = rounds·(n−1)`` (Thm 3.12/3.13).
``clt_upper_bound_feasgm``      FEASGM, ``s = K/(K+1)``, ``K = floor(Nq)`` (Thm A.7).
``CLTTradeOff``                 the upper bound as a trade-off object (``CLTBound.as_tradeoff()``).
"""

from __future__ import annotations

import math
import numbers
from functools import lru_cache
from typing import Callable, NamedTuple, Sequence

import numpy as np
from scipy import integrate, optimize
from scipy.stats import norm

from paperlib.fdp import tradeoff as _tradeoff
from paperlib.fdp.tradeoff import TradeOff, TradeOffCurve, checked_curve, lower_convex_envelope

__all__ = [
    "BERRY_ESSEEN_CONSTANT",
    "Functionals",
    "CLTBound",
    "functionals_from_log_slope",
    "fbar_star_crossing",
    "fbar_star_log_slope",
    "fbar_star_functionals",
    "clt_mu_gamma",
    "clt_mu_gamma_iid",
    "clt_bounds",
    "CLTTradeOff",
]

#: The constant in γ of Dong, Roth, Su (2022), Theorem 5.
BERRY_ESSEEN_CONSTANT = 0.56

_EPSREL = 1e-12


class Functionals(NamedTuple):
    """The three CLT functionals of one symmetric trade-off function (floats)."""

    kl: float
    kappa2: float
    kappa3bar: float


class CLTBound(NamedTuple):
    """Result of :func:`clt_bounds` and the mechanism wrappers.

    ``lower`` and ``upper`` have the shape of the ``alpha`` given (floats for a scalar
    ``alpha``) and are NaN where ``α ∉ [γ, 1 − γ]``; ``mu`` and ``gamma`` are floats.
    """

    lower: np.ndarray | float
    upper: np.ndarray | float
    mu: float
    gamma: float

    def as_tradeoff(self, label: str = "", meta: dict | None = None) -> "CLTTradeOff":
        """The upper bound as a :class:`CLTTradeOff` (a trade-off object with the full interface)."""
        return CLTTradeOff(self.mu, self.gamma, label=label, meta=meta)


# --------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value}")
    return value


def _check_real(name: str, value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"`{name}` must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"`{name}` must be finite, got {value}")
    return value


def _check_s(s) -> float:
    s = _check_real("s", s)
    if not 0.0 < s < 1.0:
        raise ValueError(f"`s` must lie in the open interval (0, 1), got {s}")
    return s


def _check_one_minus_s(s: float, one_minus_s) -> float:
    if one_minus_s is None:
        return 1.0 - s
    d = _check_real("one_minus_s", one_minus_s)
    if not 0.0 < d < 1.0:
        raise ValueError(f"`one_minus_s` must lie in the open interval (0, 1), got {d}")
    if abs((1.0 - d) - s) > 4 * np.finfo(float).eps:
        raise ValueError(f"`one_minus_s` = {d} is inconsistent with `s` = {s}")
    return d


def _check_alpha(alpha) -> np.ndarray:
    try:
        a = np.asarray(alpha, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`alpha` must be a real number or array in [0, 1]: {exc}") from None
    if a.size and (not np.all(np.isfinite(a)) or np.any(a < 0.0) or np.any(a > 1.0)):
        raise ValueError("`alpha` must lie in [0, 1] (finite, no NaN)")
    return a


def _out(x: np.ndarray):
    return float(x) if x.ndim == 0 else x


# --------------------------------------------------------------------------------------
# functionals
# --------------------------------------------------------------------------------------


def _quad(fn, a, b, points=None, epsrel=_EPSREL, limit=500):
    pts = None
    if points:
        pts = sorted(p for p in points if a < p < b)
        pts = pts or None
    val, _err = integrate.quad(fn, a, b, points=pts, epsabs=0.0, epsrel=epsrel, limit=limit)
    return val


def functionals_from_log_slope(
    log_abs_slope_fn: Callable[[float], float],
    *,
    breakpoints: Sequence[float] = (),
    epsrel: float = 1e-11,
    u_max: float = 8.0,
) -> Functionals:
    """``(kl, κ₂, κ̄₃)`` of a symmetric trade-off function given through ``log|f'|``.

    Parameters
    ----------
    log_abs_slope_fn
        Scalar function ``α ↦ log|f'(α)|`` on ``(0, 1)``. It may diverge at the
        endpoints (integrably; e.g. ``log|G_μ'|`` grows like ``Φ⁻¹(α)``).
    breakpoints
        α-values in ``(0, 1)`` where ``log|f'|`` is discontinuous or has a kink (for
        ``f̄* = max{f*, f*⁻¹}`` the crossing ``α*``, where it jumps from ``L`` to ``−L``).
    epsrel
        Relative tolerance passed to ``scipy.integrate.quad`` (``epsabs = 0``, so tiny
        functionals keep their relative accuracy).
    u_max
        Integration cut-off in the variable below; the neglected uniform mass is
        ``2Φ(−u_max)`` (``≈ 1.2e−15`` by default). At most 8.2, so that
        ``α = Φ(u_max)`` stays below 1 in double precision.

    Returns
    -------
    Functionals
        ``kl = −∫ log|f'|``, ``κ₂ = ∫ log²|f'|``, ``κ̄₃ = ∫ |log|f'| + kl|³`` (floats).

    Notes
    -----
    The change of variables ``α = Φ(u)``, ``dα = φ(u) du`` turns the endpoint
    divergences into Gaussian-weighted tails, which ``quad`` integrates accurately.
    Symmetry of ``f`` is not checked. Source: ``THEORY.md`` §8; Dong, Roth, Su (2022),
    Theorem 5.
    """
    epsrel = _check_real("epsrel", epsrel)
    if not 0.0 < epsrel < 1.0:
        raise ValueError(f"`epsrel` must lie in (0, 1), got {epsrel}")
    u_max = _check_real("u_max", u_max)
    if not 0.0 < u_max <= 8.2:
        raise ValueError(f"`u_max` must lie in (0, 8.2], got {u_max}")
    pts_u = []
    for b in breakpoints:
        b = _check_real("breakpoints", b)
        if not 0.0 < b < 1.0:
            raise ValueError(f"`breakpoints` must lie in (0, 1), got {b}")
        pts_u.append(float(norm.ppf(b)))

    def L(u):
        v = float(log_abs_slope_fn(float(norm.cdf(u))))
        if not math.isfinite(v):
            raise ValueError(
                f"`log_abs_slope_fn` returned {v} at alpha = {float(norm.cdf(u))!r}; it "
                "must be finite on the open interval (0, 1)"
            )
        return v

    phi = norm.pdf
    kl = -_quad(lambda u: L(u) * phi(u), -u_max, u_max, pts_u, epsrel)
    k2 = _quad(lambda u: L(u) ** 2 * phi(u), -u_max, u_max, pts_u, epsrel)
    k3 = _quad(lambda u: abs(L(u) + kl) ** 3 * phi(u), -u_max, u_max, pts_u, epsrel)
    for name, v in (("kl", kl), ("kappa2", k2), ("kappa3bar", k3)):
        if not math.isfinite(v):
            raise ValueError(f"{name} is not finite: `log_abs_slope_fn` is not integrable")
    return Functionals(kl, k2, k3)


def _L_coeffs(s: float, d: float):
    """``L(t) = c0 − c1 t²`` with ``c0 = −log s``, ``c1 = (1/s² − 1)/2``, from ``d = 1 − s``."""
    c0 = -math.log1p(-d)
    c1 = d * (1.0 + s) / (2.0 * s * s)
    return c0, c1


@lru_cache(maxsize=256)
def _crossing(s: float) -> float:
    # Φ(−t/s) + Φ(−t) = 1/2  ⇔  f*(α) = α with α = 2Φ(t) − 1.  g(0) = 1/2 > 0, and
    # g(Φ⁻¹(3/4)) = Φ(−t/s) − 1/4 < 0 because t/s > t; g is decreasing.
    def g(t):
        return norm.sf(t / s) + norm.sf(t) - 0.5

    hi = float(norm.isf(0.25))
    return optimize.brentq(g, 0.0, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)


def fbar_star_crossing(s: float) -> tuple[float, float]:
    """Crossing of ``f* = T(N(0,1), N(0,s²))`` with its inverse ``f*⁻¹``.

    Parameters
    ----------
    s : float in (0, 1)

    Returns
    -------
    (t_star, alpha_star) : floats
        ``t*`` solves ``Φ(−t*/s) + Φ(−t*) = 1/2`` (the fixed point ``f*(α*) = α*``),
        ``α* = 2Φ(t*) − 1``. ``f̄* = f*`` on ``[0, α*]`` and ``f*⁻¹`` on ``[α*, 1]``.

    Raises
    ------
    ValueError if ``s`` is not in ``(0, 1)``.
    """
    s = _check_s(s)
    t = _crossing(s)
    return t, float(2.0 * norm.cdf(t) - 1.0)


def fbar_star_log_slope(alpha, s: float):
    """``log|f̄*'(α)|`` for ``f̄* = max{f*, f*⁻¹}``, ``f* = T(N(0,1), N(0,s²))``.

    Parameters
    ----------
    alpha : float or array in [0, 1]
    s : float in (0, 1)

    Returns
    -------
    float or array of ``alpha``'s shape: ``L(t(α))`` for ``α ≤ α*`` with
    ``t(α) = Φ⁻¹((1+α)/2)``, and ``−L(t_β)`` for ``α > α*`` with
    ``t_β = −s Φ⁻¹(α/2)`` (the ``t`` of ``β = f*⁻¹(α)``). Bounded on ``[0, 1]``:
    ``|log|f̄*'|| ≤ −log s`` (slope ``−1/s`` at ``α = 0``, ``−s`` at ``α = 1``), with a
    jump from ``L(t*)`` to ``−L(t*)`` at ``α*``.

    Raises
    ------
    ValueError for ``s`` outside ``(0, 1)`` or ``alpha`` outside ``[0, 1]``.
    """
    s = _check_s(s)
    a = _check_alpha(alpha)
    c0, c1 = _L_coeffs(s, 1.0 - s)
    t_star, a_star = fbar_star_crossing(s)
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = norm.isf((1.0 - a) / 2.0)  # Φ⁻¹((1+α)/2), accurate near α = 1
        t2 = -s * norm.ppf(a / 2.0)
        out = np.where(a <= a_star, c0 - c1 * t1 * t1, -(c0 - c1 * t2 * t2))
    return _out(np.asarray(out, dtype=float))


@lru_cache(maxsize=256)
def _fbar_functionals(s: float, d: float) -> Functionals:
    c0, c1 = _L_coeffs(s, d)
    t_star = _crossing(s)
    two_phi = lambda t: 2.0 * math.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)  # noqa: E731

    def L(t):
        return c0 - c1 * t * t

    kl = _quad(lambda t: two_phi(t) * math.expm1(L(t)) * L(t), 0.0, t_star)
    k2 = _quad(lambda t: two_phi(t) * (2.0 + math.expm1(L(t))) * L(t) ** 2, 0.0, t_star)
    # kinks of |L ± kl|: L(t) = ∓kl  ⇔  t² = (c0 ± kl)/c1
    pts = [math.sqrt(v / c1) for v in (c0 + kl, c0 - kl) if v > 0.0]
    k3 = _quad(
        lambda t: two_phi(t) * (abs(L(t) + kl) ** 3 + math.exp(L(t)) * abs(L(t) - kl) ** 3),
        0.0,
        t_star,
        pts,
    )
    return Functionals(kl, k2, k3)


def fbar_star_functionals(s: float, *, one_minus_s: float | None = None) -> Functionals:
    """Accurate ``(kl, κ₂, κ̄₃)`` of ``f̄* = max{f*, f*⁻¹}``, ``f* = T(N(0,1), N(0,s²))``.

    Parameters
    ----------
    s : float in (0, 1)
    one_minus_s : float, optional
        ``1 − s`` computed exactly by the caller (e.g. ``1/(N+1)`` for ``s = N/(N+1)``);
        avoids the rounding of ``1 − s`` when ``s`` is close to 1. Must agree with ``s``.

    Returns
    -------
    Functionals (floats). For ``1 − s → 0``: ``kl ≈ A(1−s)²``, ``κ₂ ≈ 2A(1−s)²``,
    ``κ̄₃ = O((1−s)³)`` with ``A = ∫_{|x|<Φ⁻¹(3/4)} φ(x)(1 − x²)² dx``; the evaluation keeps
    relative accuracy (``~1e−12``) there.

    Raises
    ------
    ValueError for ``s`` outside ``(0, 1)``.

    Notes
    -----
    Integrates in ``t`` on ``[0, t*]`` the forms given in the module docstring (the
    second piece of ``f̄*`` is mapped onto the first). Source: ``THEORY.md`` §8, paper
    Theorems 3.12/3.13/A.7.
    """
    s = _check_s(s)
    d = _check_one_minus_s(s, one_minus_s)
    return _fbar_functionals(s, d)


# --------------------------------------------------------------------------------------
# μ and γ
# --------------------------------------------------------------------------------------


def _mu_gamma(sum_kl, var, sum_k3):
    if not (var > 0.0 and math.isfinite(var)):
        raise ValueError(
            "‖κ₂‖₁ − ‖kl‖₂² must be positive and finite (it is 0 only when every "
            f"log|f_i'| is constant, e.g. f_i = ID), got {var}"
        )
    mu = 2.0 * sum_kl / math.sqrt(var)
    gamma = BERRY_ESSEEN_CONSTANT * sum_k3 / var**1.5
    return float(mu), float(gamma)


def clt_mu_gamma(kls, kappa2s, kappa3bars) -> tuple[float, float]:
    """``(μ, γ)`` of Dong-Roth-Su Theorem 5 for ``m`` possibly different functions.

    Parameters
    ----------
    kls, kappa2s, kappa3bars : 1-D array-likes of the same length ``m ≥ 1``
        ``kl(f_i) ≥ 0``, ``κ₂(f_i) ≥ 0``, ``κ̄₃(f_i) ≥ 0``, finite.

    Returns
    -------
    (mu, gamma) : floats, ``μ = 2‖kl‖₁/sqrt(‖κ₂‖₁ − ‖kl‖₂²)``,
    ``γ = 0.56 ‖κ̄₃‖₁ / (‖κ₂‖₁ − ‖kl‖₂²)^{3/2}``.

    Raises
    ------
    ValueError on shape mismatch, empty, negative or non-finite entries, or when
    ``‖κ₂‖₁ − ‖kl‖₂² ≤ 0``.
    """
    arrs = []
    for name, x in (("kls", kls), ("kappa2s", kappa2s), ("kappa3bars", kappa3bars)):
        try:
            a = np.asarray(x, dtype=float).reshape(-1) if np.ndim(x) <= 1 else None
        except (TypeError, ValueError):
            a = None
        if a is None:
            raise ValueError(f"`{name}` must be a 1-D array of real numbers")
        if a.size == 0:
            raise ValueError(f"`{name}` must have length m >= 1")
        if not np.all(np.isfinite(a)) or np.any(a < 0):
            raise ValueError(f"`{name}` must be finite and >= 0")
        arrs.append(a)
    if not (arrs[0].size == arrs[1].size == arrs[2].size):
        raise ValueError("`kls`, `kappa2s` and `kappa3bars` must have the same length m")
    kl, k2, k3 = arrs
    var = math.fsum(k2) - math.fsum(kl * kl)
    return _mu_gamma(math.fsum(kl), var, math.fsum(k3))


def clt_mu_gamma_iid(kl: float, kappa2: float, kappa3bar: float, m: int) -> tuple[float, float]:
    """``(μ, γ)`` for ``m`` identical functions, without arrays of size ``m``.

    Uses ``‖kl‖₁ = m·kl``, ``‖kl‖₂² = m·kl²``, ``‖κ₂‖₁ = m·κ₂``, ``‖κ̄₃‖₁ = m·κ̄₃``:
    ``μ = 2√m·kl/sqrt(κ₂ − kl²)``, ``γ = 0.56 κ̄₃ / (√m (κ₂ − kl²)^{3/2})``.

    Parameters
    ----------
    kl, kappa2, kappa3bar : finite floats ``≥ 0`` with ``κ₂ > kl²``
    m : integer ``≥ 1`` (may be ``3·10⁸`` or more)

    Returns
    -------
    (mu, gamma) : floats

    Raises
    ------
    ValueError naming the offending parameter.
    """
    m = _check_int("m", m, 1)
    vals = []
    for name, x in (("kl", kl), ("kappa2", kappa2), ("kappa3bar", kappa3bar)):
        x = _check_real(name, x)
        if x < 0:
            raise ValueError(f"`{name}` must be >= 0, got {x}")
        vals.append(x)
    kl, k2, k3 = vals
    v1 = k2 - kl * kl
    if not v1 > 0.0:
        raise ValueError(f"`kappa2` must exceed kl² (κ₂ − kl² = {v1} is not positive)")
    sm = math.sqrt(m)
    mu = 2.0 * sm * kl / math.sqrt(v1)
    gamma = BERRY_ESSEEN_CONSTANT * k3 / (sm * v1**1.5)
    return float(mu), float(gamma)


# --------------------------------------------------------------------------------------
# bounds
# --------------------------------------------------------------------------------------


def _g_mu(alpha: np.ndarray, mu: float) -> np.ndarray:
    """``G_μ(α) = Φ(Φ⁻¹(1 − α) − μ)`` via ``isf``/``sf`` (accurate in both tails)."""
    return norm.sf(mu - norm.isf(alpha))


def clt_bounds(alpha, s: float, m: int, *, one_minus_s: float | None = None) -> CLTBound:
    """CLT bounds on ``f̄*^{⊗m}``, ``f̄* = max{f*, f*⁻¹}``, ``f* = T(N(0,1), N(0,s²))``.

    Parameters
    ----------
    alpha : float or array-like in [0, 1] (type I error / FPR)
    s : float in (0, 1)
        Scale of the alternative ``N(0, s²)`` per coordinate.
    m : int ``≥ 1``
        Number of composed coordinates (``n − 1`` per round, times the rounds).
    one_minus_s : float, optional
        Exact ``1 − s`` (see :func:`fbar_star_functionals`).

    Returns
    -------
    CLTBound(lower, upper, mu, gamma)
        ``lower = G_μ(α + γ) − γ`` and ``upper = G_μ(α − γ) + γ`` for
        ``α ∈ [γ, 1 − γ]``, with the shape of ``alpha``; **NaN outside that interval**
        (where Theorem 5 says nothing; all NaN when ``γ > 1/2``). The values are the
        theorem's expressions, not clipped: ``lower`` may be negative and ``upper`` may
        exceed ``1 − α`` (clip to ``[0, 1 − α]`` for display if wanted).
        ``upper`` bounds ``f̄*^{⊗m} ≥ f*^{⊗m} = T(N(0,I_m), N(0,s² I_m))`` from above;
        ``lower`` bounds ``f̄*^{⊗m}`` only (not the non-symmetric ``f*^{⊗m}``).

    Raises
    ------
    ValueError for ``s`` outside ``(0, 1)``, ``m`` not an integer ``≥ 1``, or
    ``alpha`` outside ``[0, 1]`` / NaN.

    Notes
    -----
    Source: ``THEORY.md`` §8; Dong, Roth, Su (JRSSB 2022) Theorem 5; paper Theorems
    3.12, 3.13 and A.7.
    """
    s = _check_s(s)
    m = _check_int("m", m, 1)
    a = _check_alpha(alpha)
    f = fbar_star_functionals(s, one_minus_s=one_minus_s)
    mu, gamma = clt_mu_gamma_iid(f.kl, f.kappa2, f.kappa3bar, m)
    inside = (a >= gamma) & (a <= 1.0 - gamma)
    lo_arg = np.clip(a + gamma, 0.0, 1.0)
    up_arg = np.clip(a - gamma, 0.0, 1.0)
    lower = np.where(inside, _g_mu(lo_arg, mu) - gamma, np.nan)
    upper = np.where(inside, _g_mu(up_arg, mu) + gamma, np.nan)
    return CLTBound(_out(np.asarray(lower)), _out(np.asarray(upper)), mu, gamma)


# --------------------------------------------------------------------------------------
# the upper bound as a trade-off function
# --------------------------------------------------------------------------------------


class CLTTradeOff(TradeOff):
    """The CLT upper bound ``u(α) = G_μ(α − γ) + γ`` (``α ∈ [γ, 1 − γ]``) as a trade-off function.

    Theorem 5 bounds a trade-off function ``f`` (here ``f̄*^{⊗m}``) from above by ``u`` on
    ``[γ, 1 − γ]`` only, and ``u`` itself exceeds ``1 − α`` near ``α = γ``. Every trade-off
    function also has ``f(0) ≤ 1`` and ``f(1) = 0``; being convex, ``f`` then lies below the
    greatest convex minorant of these bounds: the lower convex hull of ``(0, 1)``, ``(1, 0)``
    and the graph of ``u``. That hull is this object: a trade-off function, never below
    ``f``, equal to ``u`` wherever ``u`` is on its hull (between the tangent from ``(0, 1)``
    and the tangent to ``(1, 0)``), and ``Id`` when ``γ ≥ 1/2``.

    Parameters: ``mu > 0``, ``gamma >= 0`` (from :func:`clt_bounds`; ``CLTBound.as_tradeoff()``).
    ``raw(alpha)`` is the theorem's expression (NaN outside ``[γ, 1 − γ]``). Evaluation
    interpolates the hull sampled to chord error 1e-10; the privacy profile is that of
    the sampled hull. Source: ``THEORY.md`` §8; Dong, Roth, Su (2022), Theorem 5.
    """

    _EVAL_TOL = 1e-10

    def __init__(self, mu: float, gamma: float, label: str = "", meta: dict | None = None):
        self.mu = _check_real("mu", mu)
        if not self.mu > 0:
            raise ValueError(f"`mu` must be > 0, got {self.mu}")
        self.gamma = _check_real("gamma", gamma)
        if self.gamma < 0:
            raise ValueError(f"`gamma` must be >= 0, got {self.gamma}")
        self.label = label or f"CLT upper bound (mu = {self.mu:.4g}, gamma = {self.gamma:.3g})"
        self.meta = dict(meta or {})
        self.meta.setdefault("mu", self.mu)
        self.meta.setdefault("gamma", self.gamma)
        self._curves: dict = {}

    def raw(self, alpha):
        """``G_μ(α − γ) + γ`` on ``[γ, 1 − γ]``, NaN outside (the theorem's statement)."""
        a = _check_alpha(alpha)
        g = self.gamma
        inside = (a >= g) & (a <= 1.0 - g)
        return _out(np.where(inside, _g_mu(np.clip(a - g, 0.0, 1.0), self.mu) + g, np.nan))

    def curve(self, tol: float = 1e-6) -> TradeOffCurve:
        """The hull, sampled so that its chords are within ``tol`` of ``u`` where ``u`` is on it."""
        key = float(tol)
        if key in self._curves:
            return self._curves[key]
        g, mu = self.gamma, self.mu
        if g >= 0.5:
            c = TradeOffCurve(np.array([0.0, 1.0]), np.array([1.0, 0.0]), None, label=self.label,
                              meta=dict(self.meta, tol=tol))
            self._curves[key] = c
            return c
        width = 1.0 - 2.0 * g  # u at alpha = g + a for a in [0, width]
        z = np.linspace(float(norm.isf(width)), 40.0 + mu, 801)
        for _ in range(40):
            a = norm.sf(z)  # G_mu(a) = Phi(z - mu) at a = Phi(-z)
            u = norm.cdf(z - mu) + g
            slope = -np.exp(np.minimum(mu * z - mu * mu / 2.0, 700.0))
            # chord-tangent gaps between consecutive samples (ascending alpha = descending z)
            gaps = _tradeoff.chord_tangent_gaps(a[::-1], u[::-1], slope[::-1])
            bad = np.flatnonzero(gaps > tol)
            if bad.size == 0:
                break
            zz = z[::-1]
            z = np.union1d(z, 0.5 * (zz[bad] + zz[bad + 1]))
        x = np.concatenate([[0.0], g + a[::-1], [1.0]])
        y = np.concatenate([[1.0], u[::-1], [0.0]])
        order = np.argsort(x, kind="stable")
        hx, hy = lower_convex_envelope(x[order], y[order])
        c = checked_curve(hx, np.minimum(hy, 1.0 - hx), None, label=self.label, meta=dict(self.meta, tol=tol))
        self._curves[key] = c
        return c

    def __call__(self, alpha):
        """The hull at ``alpha`` (array of ``alpha``'s shape), within 1e-10 of its exact value."""
        return self.curve(self._EVAL_TOL)(alpha)

    def delta(self, eps):
        return self.curve(self._EVAL_TOL).delta(eps)

    def delta_limit(self) -> float:
        return self.curve(self._EVAL_TOL).delta_limit()

    def delta_floor(self) -> float:
        return _tradeoff.SAMPLED_DELTA_FLOOR

    def to_dict(self) -> dict:
        """``{"type": "CLTTradeOff", "mu", "gamma", "label", "meta"}`` (``from_dict`` rebuilds it exactly)."""
        return {"type": "CLTTradeOff", "mu": self.mu, "gamma": self.gamma, "label": self.label,
                "meta": _tradeoff.jsonable(self.meta)}


_tradeoff.register_from_dict("CLTTradeOff", lambda d: CLTTradeOff(
    float(d["mu"]), float(d["gamma"]), label=str(d.get("label", "")), meta=dict(d.get("meta") or {})))
