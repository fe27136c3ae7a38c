"""Tail probabilities of the chi-square laws in log space, accurate far into the tails.

The privacy profile ``delta(eps) = Q[L > eps] - e^eps P[L > eps]`` needs both tail
probabilities of the privacy loss ``L`` *relative* to themselves: at ``delta = 1e-300``
the term ``P[L > eps]`` is about ``e^-eps * 1e-300``, far below the smallest double.
scipy's distribution functions return such values as 0 (or as subnormals with a few
digits), and ``1 - cdf`` is 0 from about 1e-17 on. This module gives their logarithms:

* :func:`log_gamma_p`, :func:`log_gamma_q` — the regularised incomplete gamma functions
  ``P(a, z)`` and ``Q(a, z) = 1 - P(a, z)``: scipy's value wherever it is at least
  :data:`TINY` (relative accuracy ~1e-15 there), otherwise the power series of ``P``
  (DLMF 8.11.4 / 8.7.1) or the continued fraction of ``Q`` (DLMF 8.9.2, modified Lentz)
  summed in log space, and Temme's uniform expansion (DLMF 8.12.3-8.12.12) for
  ``a >= TEMME_MIN_DOF / 2``.
* :func:`chi2_logcdf`, :func:`chi2_logsf`, :func:`chi2_ppf` — the central chi-square
  (``P(m/2, x/2)``); for ``m >= TEMME_MIN_DOF`` the lower half uses Temme's expansion
  everywhere, because scipy's own lower tail is off by up to 42 % there (checked against
  a 30-digit quadrature; ``tests/test_composition.py``).
* :func:`ncx2_logcdf`, :func:`ncx2_logsf` — the noncentral chi-square: scipy's (Boost's)
  value where it is at least :data:`TINY`, otherwise its Poisson mixture
  ``sum_j Pois(j; lam/2) P(k/2 + j, x/2)`` (DLMF 8.? / Johnson-Kotz) summed in log space
  over the window of ``j`` that carries all but ``e^-60`` of it.
* :func:`hockey_from_logs` — ``max(e^la - e^lb, 0)`` without overflow or underflow.
* :func:`ncx2_cdf_sf`, :func:`ncx2_quad_log` — the noncentral chi-square at large dimension
  (``k >= QUAD_MIN_DOF``): ``X = (Z + sqrt(lam))^2 + chi^2_{k-1}``, integrated by the trapezoid
  rule over the central part's density when the noncentrality is large (no Boost, no limit on
  ``lam``), and the Poisson mixture by the recurrence of ``P(a + j, z)`` in ``j`` below. Used by
  :class:`~paperlib.fdp.gaussian.GaussVarFamily` and by :func:`ncx2_logcdf`/:func:`ncx2_logsf`.

Every function is checked against mpmath at 60 digits in ``tests/fdp/test_fdp_edges.py`` (the
large-dimension ones in ``tests/fdp/test_ncx2_quadrature.py``).
Only numpy and scipy are used.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from paperlib.fdp.validation import check_positive

__all__ = [
    "TINY",
    "TEMME_MIN_DOF",
    "log_gamma_p",
    "log_gamma_q",
    "chi2_logcdf",
    "chi2_logsf",
    "chi2_ppf",
    "ncx2_logcdf",
    "ncx2_logsf",
    "ncx2_log",
    "hockey_from_logs",
    "QUAD_MIN_DOF",
    "ncx2_quad_applies",
    "ncx2_quad_log",
    "ncx2_cdf_sf",
]

#: Below this value scipy's incomplete gamma / noncentral chi-square values are replaced
#: by the log-space evaluations (above it they carry ~15 significant digits).
TINY = 1e-280
#: Degrees of freedom from which the central chi-square uses Temme's expansion.
TEMME_MIN_DOF = 200_000
#: Largest number of Poisson terms the noncentral deep-tail sum may use.
MAX_POISSON_TERMS = 200_000
#: A log-probability whose Chernoff bound is below this is returned as -inf (the value is
#: below e^-800 ~ 1e-348, i.e. 0 in double precision, and far below any delta >= 1e-300).
NEGLIGIBLE_LOG = -800.0

_EPS = np.finfo(float).eps


# =============================================================================== helpers
def hockey_from_logs(la, lb) -> np.ndarray:
    """``max(e^la - e^lb, 0)`` for arrays of logs (``-inf`` allowed), without overflow.

    Computed as ``e^la * (-expm1(lb - la))``: relative accuracy that of ``lb - la``.
    """
    la, lb = np.broadcast_arrays(np.asarray(la, dtype=float), np.asarray(lb, dtype=float))
    out = np.zeros(la.shape)
    ok = np.isfinite(la) & (lb < la)
    if ok.any():
        out[ok] = np.exp(la[ok]) * -np.expm1(lb[ok] - la[ok])
    return out


def _mu_minus_log1p(mu: np.ndarray) -> np.ndarray:
    """``mu - log(1 + mu)`` without cancellation for small ``|mu|``."""
    mu = np.asarray(mu, dtype=float)
    with np.errstate(divide="ignore"):
        out = mu - np.log1p(mu)
    small = np.abs(mu) < 1e-2
    if small.any():
        m = mu[small]
        s = np.zeros_like(m)
        p = m * m
        for k in range(2, 16):
            s += (-1) ** k * p / k
            p = p * m
        out[small] = s
    return out


# series of Temme's c_0(eta), c_1(eta) near eta = 0 (derived symbolically; DLMF 8.12.12)
_C0_SERIES = (-1 / 3, 1 / 12, -2 / 135, 1 / 864, 1 / 2835, -139 / 777600)
_C1_SERIES = (-1 / 540, -1 / 288, 1 / 378, -77 / 77760, 1 / 4860)


def _temme_log(z: np.ndarray, a, upper: bool) -> np.ndarray:
    """``log P(a, z)`` (``upper=False``, for ``z < a``) or ``log Q(a, z)`` (``z >= a``).

    ``P = erfc(-eta sqrt(a/2))/2 - R_a``, ``Q = erfc(eta sqrt(a/2))/2 + R_a``,
    ``R_a ~ e^{-a eta^2/2}/sqrt(2 pi a) (c_0 + c_1/a)``,
    ``eta = sign(l - 1) sqrt(2 (l - 1 - log l))``, ``l = z/a`` (Temme 1979; DLMF
    8.12.3-8.12.11). The neglected ``c_2/a^2`` term is below 1e-11 relative for ``a >= 1e5``.
    """
    z = np.asarray(z, dtype=float)
    a = np.broadcast_to(np.asarray(a, dtype=float), z.shape)
    mu = (z - a) / a
    eta = np.sign(mu) * np.sqrt(2.0 * _mu_minus_log1p(mu))
    c0 = np.empty_like(mu)
    c1 = np.empty_like(mu)
    near = np.abs(eta) < 1e-2
    with np.errstate(divide="ignore", invalid="ignore"):
        c0[~near] = 1.0 / mu[~near] - 1.0 / eta[~near]
        e, u = eta[~near], mu[~near]
        c1[~near] = 1.0 / e**3 - 1.0 / u**3 - 1.0 / u**2 - 1.0 / (12.0 * u)
    if near.any():
        en = eta[near]
        c0[near] = np.polynomial.polynomial.polyval(en, _C0_SERIES)
        c1[near] = np.polynomial.polynomial.polyval(en, _C1_SERIES)
    r = (c0 + c1 / a) / np.sqrt(2.0 * math.pi * a)
    if upper:
        base = 0.5 * special.erfcx(eta * np.sqrt(a / 2.0)) + r
    else:
        base = 0.5 * special.erfcx(-eta * np.sqrt(a / 2.0)) - r
    return -a * eta * eta / 2.0 + np.log(base)


def _log_p_series(a: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``log P(a, z)`` from ``P = z^a e^-z / Gamma(a+1) * sum_k z^k / ((a+1)...(a+k))`` (DLMF 8.7.1).

    Used where ``P`` is tiny, hence ``z`` well below ``a``: the terms fall geometrically.
    """
    s = np.ones_like(z)
    term = np.ones_like(z)
    k = 0
    active = np.ones(z.shape, dtype=bool)
    while active.any() and k < 100_000:
        k += 1
        term = np.where(active, term * z / (a + k), term)
        s = np.where(active, s + term, s)
        active = active & (term > _EPS * 0.25 * s)
    with np.errstate(divide="ignore"):
        return a * np.log(z) - z - special.gammaln(a + 1.0) + np.log(s)


def _log_q_cf(a: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``log Q(a, z)`` from its continued fraction (DLMF 8.9.2; modified Lentz), ``z > a - 1``."""
    tiny = 1e-300
    b = z + 1.0 - a
    c = np.full_like(z, 1.0 / tiny)
    d = 1.0 / np.where(np.abs(b) < tiny, tiny, b)
    h = d.copy()
    active = np.ones(z.shape, dtype=bool)
    i = 0
    while active.any() and i < 100_000:
        i += 1
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = np.where(np.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = np.where(np.abs(c) < tiny, tiny, c)
        d = 1.0 / d
        dl = d * c
        h = np.where(active, h * dl, h)
        active = active & (np.abs(dl - 1.0) > _EPS)
    return a * np.log(z) - z - special.gammaln(a) + np.log(h)


def _log_gamma(a, z, upper: bool) -> np.ndarray:
    a, z = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(z, dtype=float))
    a, z = a.astype(float), z.astype(float)
    out = np.empty(z.shape)
    zero = z <= 0
    inf = np.isposinf(z)
    out[zero] = -np.inf if not upper else 0.0
    out[inf] = 0.0 if not upper else -np.inf
    rest = ~(zero | inf)
    if not rest.any():
        return out
    ar, zr = a[rest], z[rest]
    res = np.empty(zr.shape)
    big = ar >= TEMME_MIN_DOF / 2
    small = ~big
    if small.any():
        a_s, z_s = ar[small], zr[small]
        p = special.gammainc(a_s, z_s)
        q = special.gammaincc(a_s, z_s)
        # the side that is the smaller probability is what scipy computes directly
        with np.errstate(divide="ignore"):
            lp = np.where(p <= 0.5, np.log(np.maximum(p, 1e-320)), np.log1p(-np.minimum(q, 0.5)))
            lq = np.where(q <= 0.5, np.log(np.maximum(q, 1e-320)), np.log1p(-np.minimum(p, 0.5)))
        deep_p = p < TINY
        deep_q = q < TINY
        if deep_p.any():
            lp[deep_p] = _log_p_series(a_s[deep_p], z_s[deep_p])
            lq[deep_p] = np.log1p(-np.exp(lp[deep_p]))
        if deep_q.any():
            lq[deep_q] = _log_q_cf(a_s[deep_q], z_s[deep_q])
            lp[deep_q] = np.log1p(-np.exp(lq[deep_q]))
        res[small] = lq if upper else lp
    if big.any():
        a_b, z_b = ar[big], zr[big]
        low = z_b < a_b
        lp = np.empty(z_b.shape)
        lq = np.empty(z_b.shape)
        with np.errstate(divide="ignore"):
            for side in (True, False):
                sel = low if side else ~low
                if not sel.any():
                    continue
                # Temme for the smaller side, its complement for the larger one; far below
                # the mode (z < a/2) the series converges in a few dozen terms
                vals = _temme_log(z_b[sel], a_b[sel], upper=not side)
                if side:
                    far = z_b[sel] < 0.5 * a_b[sel]
                    if far.any():
                        vals[far] = _log_p_series(a_b[sel][far], z_b[sel][far])
                    lp[sel] = vals
                    lq[sel] = np.log1p(-np.exp(vals))
                else:
                    lq[sel] = vals
                    lp[sel] = np.log1p(-np.exp(vals))
        res[big] = lq if upper else lp
    out[rest] = res
    return out


def log_gamma_p(a, z) -> np.ndarray:
    """``log P(a, z)``, the regularised lower incomplete gamma function, in log space.

    ``a > 0`` and ``z`` (any real; ``z <= 0`` gives ``-inf``) broadcast together. Relative
    accuracy about 1e-14 for ``P`` down to the smallest values representable in log space
    (``log P`` of -1e6 is fine); see the module docstring for the methods.
    """
    return _log_gamma(a, z, upper=False)


def log_gamma_q(a, z) -> np.ndarray:
    """``log Q(a, z) = log(1 - P(a, z))`` in log space (see :func:`log_gamma_p`)."""
    return _log_gamma(a, z, upper=True)


# =============================================================================== chi-square
def chi2_logcdf(x, m: float) -> np.ndarray:
    """``log P[chi^2_m <= x]``, accurate in the lower tail for any number of degrees of freedom.

    Parameters
    ----------
    x : array_like of floats (any real; ``x <= 0`` gives ``-inf``, ``+inf`` gives 0)
    m : float > 0, degrees of freedom (up to 1e9 tested)

    Returns
    -------
    ndarray of ``x``'s shape.

    For ``m < TEMME_MIN_DOF`` this is ``log P(m/2, x/2)`` of :func:`log_gamma_p` (scipy's
    value above :data:`TINY`, the log-space series below). Above, the lower half
    (``x < m``) uses Temme's expansion and the upper half ``log1p(-sf)``; scipy's own lower
    tail is off by up to 42 % there (module docstring).
    """
    m = check_positive(m, "m")
    x = np.asarray(x, dtype=float)
    out = np.full(x.shape, -np.inf)
    big = np.isposinf(x)
    out[big] = 0.0
    rest = (x > 0) & ~big
    if not rest.any():
        return out
    xr = x[rest]
    if m < TEMME_MIN_DOF:
        out[rest] = log_gamma_p(m / 2.0, xr / 2.0)
        return out
    res = np.empty_like(xr)
    low = xr < m
    if (~low).any():
        res[~low] = np.log1p(-np.exp(chi2_logsf(xr[~low], m)))
    if low.any():
        res[low] = log_gamma_p(m / 2.0, xr[low] / 2.0)  # Temme (series far below the mode)
    out[rest] = res
    return out


def chi2_logsf(x, m: float) -> np.ndarray:
    """``log P[chi^2_m > x]`` (see :func:`chi2_logcdf`): scipy's upper tail where it is at least
    :data:`TINY`, the continued fraction (``m < TEMME_MIN_DOF``) or Temme's expansion below."""
    m = check_positive(m, "m")
    x = np.asarray(x, dtype=float)
    out = np.zeros(x.shape)
    out[np.isposinf(x)] = -np.inf
    rest = (x > 0) & np.isfinite(x)
    if not rest.any():
        return out
    xr = x[rest]
    if m < TEMME_MIN_DOF:
        out[rest] = log_gamma_q(m / 2.0, xr / 2.0)
        return out
    res = np.empty_like(xr)
    up = xr >= m
    if up.any():
        sf = stats.chi2.sf(xr[up], m)
        ls = np.log(np.maximum(sf, 1e-320))
        deep = sf < TINY
        if deep.any():
            ls[deep] = _temme_log(xr[up][deep] / 2.0, m / 2.0, upper=True)
        res[up] = ls
    if (~up).any():
        res[~up] = np.log1p(-np.exp(chi2_logcdf(xr[~up], m)))
    out[rest] = res
    return out


def chi2_ppf(p, m: float) -> np.ndarray:
    """Quantile of ``chi^2_m`` at ``p`` in [0, 1], consistent with :func:`chi2_logcdf`.

    scipy's ``chi2.ppf`` is the starting point; for ``m >= TEMME_MIN_DOF`` Newton steps
    on ``log F`` (``p < 1/2``) or ``log(1 - F)`` (``p >= 1/2``) make it agree with the
    accurate distribution functions to ~1e-13 relative.
    """
    m = check_positive(m, "m")
    p = np.asarray(p, dtype=float)
    if np.any(~np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
        raise ValueError("p must be in [0, 1]")
    x = np.asarray(stats.chi2.ppf(p, m), dtype=float)
    if m < TEMME_MIN_DOF:
        return x
    inner = (p > 0) & (p < 1)
    if not inner.any():
        return x
    xi, pi = x[inner], p[inner]
    low = pi < 0.5
    lp = np.where(low, np.log(np.where(low, pi, 0.5)), np.log1p(-np.where(low, 0.5, pi)))
    for _ in range(60):
        lpdf = stats.chi2.logpdf(xi, m)
        lc = chi2_logcdf(xi, m)
        ls = chi2_logsf(xi, m)
        # Newton on log F (lower) / log(1 - F) (upper): x <- x - g/g'
        step = np.where(low, (lc - lp) * np.exp(lc - lpdf), -(ls - lp) * np.exp(ls - lpdf))
        step = np.where(np.isfinite(step), step, 0.0)
        # keep x > 0 (halve overshoots towards 0)
        xn = np.where(xi - step > 0, xi - step, xi / 2)
        done = np.all(np.abs(xn - xi) <= 1e-14 * xi)
        xi = xn
        if done:
            break
    x = x.copy()
    x[inner] = xi
    return x


# =============================================================================== noncentral
def _ncx2_chernoff(x: float, k: float, lam: float, upper: bool) -> float:
    """Chernoff bound on ``log P[X >= x]`` (``upper``) or ``log P[X <= x]``, ``X ~ chi'^2(k, lam)``.

    ``log E e^{theta X} = lam theta/(1 - 2 theta) - (k/2) log(1 - 2 theta)``, minimised at
    ``u = 1/(1 - 2 theta)`` solving ``lam u^2 + k u - x = 0``. Returns 0 when the bound is vacuous.
    """
    if x <= 0:
        return 0.0 if upper else -math.inf
    u = 2.0 * x / (k + math.sqrt(k * k + 4.0 * lam * x))  # root without cancellation
    if (upper and u <= 1.0) or (not upper and u >= 1.0):
        return 0.0
    theta = 0.5 * (1.0 - 1.0 / u)
    return min(0.0, -theta * x + lam * theta * u + 0.5 * k * math.log(u))


def _ncx2_deep(x: float, k: float, lam: float, upper: bool) -> float:
    """``log P[X <= x]`` or ``log P[X > x]`` by the Poisson mixture, summed in log space."""
    a, z, h = k / 2.0, x / 2.0, lam / 2.0
    # the terms Pois(j; h) P(a + j, z) peak near (j + 1)(a + j) = h z (ratio of successive
    # terms ~ h z / ((j + 1)(a + j))); their spread in j is at most sqrt(j)
    jstar = max(0.0, 0.5 * (-(a + 1.0) + math.sqrt((a + 1.0) ** 2 + 4.0 * (h * z - a))))
    width = int(12.0 * math.sqrt(jstar + 1.0) + 40.0)
    lo, hi = max(0, int(jstar) - width), int(jstar) + width
    for _ in range(8):
        if hi - lo + 1 > MAX_POISSON_TERMS:
            if _ncx2_chernoff(x, k, lam, upper) < NEGLIGIBLE_LOG:
                return -math.inf  # below e^-800: 0 in double precision, negligible next to 1e-300
            raise RuntimeError(
                f"could not compute a noncentral chi-square tail for these parameters (below {TINY:g} at "
                f"x = {x:.6g}, dof = {k:g}, noncentrality = {lam:.6g}: its Poisson sum needs more than "
                f"{MAX_POISSON_TERMS} terms)"
            )
        j = np.arange(lo, hi + 1, dtype=float)
        lpois = -h + special.xlogy(j, h) - special.gammaln(j + 1.0)
        lg = log_gamma_q(a + j, z) if upper else log_gamma_p(a + j, z)
        terms = lpois + lg
        top = float(np.max(terms))
        if not np.isfinite(top):
            return -math.inf
        # widen until both ends are negligible (e^-60 of the largest term) or at j = 0
        left_ok = lo == 0 or terms[0] < top - 60.0
        right_ok = terms[-1] < top - 60.0
        if left_ok and right_ok:
            return float(special.logsumexp(terms))
        span = hi - lo
        if not left_ok:
            lo = max(0, lo - span)
        if not right_ok:
            hi = hi + span
    raise RuntimeError(
        f"could not compute a noncentral chi-square tail for these parameters (x = {x:.6g}, "
        f"dof = {k:g}, noncentrality = {lam:.6g}: its Poisson sum did not settle)"
    )


def _scipy_ncx2(fn, x: np.ndarray, k: float, lam: np.ndarray) -> np.ndarray:
    """scipy's ncx2 cdf/sf; where Boost overflows (far tails) the value is marked 0 (deep)."""
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            return np.asarray(fn(x, k, lam), dtype=float)
        except (OverflowError, FloatingPointError, ValueError):
            out = np.zeros(x.shape)
            for i, (xi, li) in enumerate(zip(x, lam)):
                try:
                    out[i] = float(fn(xi, k, li))
                except (OverflowError, FloatingPointError, ValueError):
                    out[i] = 0.0
            return out


def ncx2_log(x, k: float, lam, upper: bool, deep: bool = True) -> np.ndarray:
    """Log CDF (``upper=False``) or log SF (``upper=True``) of the noncentral chi-square: the two public
    functions above; with ``deep=False`` the values below :data:`TINY` are left NaN
    (the caller evaluates only those that matter, with :func:`ncx2_log_deep`)."""
    x, lam = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(lam, dtype=float))
    flat, lflat = x.ravel(), lam.ravel()
    res = np.empty(flat.shape)
    central = lflat == 0
    if central.any():
        res[central] = chi2_logsf(flat[central], k) if upper else chi2_logcdf(flat[central], k)
    nc = ~central
    zero = nc & (flat <= 0)
    inf = nc & np.isposinf(flat)
    res[zero] = 0.0 if upper else -np.inf
    res[inf] = -np.inf if upper else 0.0
    rest = nc & ~(zero | inf)
    if rest.any() and k >= QUAD_MIN_DOF:
        # large dimension: the quadrature (large noncentrality, any depth) and the Poisson recurrence
        # (both sides computed directly), not Boost (~85 us a value at 9e6, wrong beyond 6e9)
        xr, lr = flat[rest], lflat[rest]
        val = np.empty(xr.shape)
        quad = ncx2_quad_applies(k, lr)
        if quad.any():
            vq = ncx2_quad_log(xr[quad], k, lr[quad], upper)
            for i in np.flatnonzero(np.isnan(vq)):  # a lower tail near e^{-lam/2}: the Poisson series
                vq[i] = _ncx2_deep(float(xr[quad][i]), float(k), float(lr[quad][i]), upper) if deep else np.nan
            val[quad] = vq
        if (~quad).any():
            c, s = ncx2_cdf_sf(xr[~quad], k, lr[~quad])
            mine, other = (s, c) if upper else (c, s)
            with np.errstate(divide="ignore"):
                v = np.where(mine > 0.5, np.log1p(-np.minimum(other, 0.5)), np.log(np.maximum(mine, 1e-320)))
            for i in np.flatnonzero(mine < TINY):
                v[i] = _ncx2_deep(float(xr[~quad][i]), float(k), float(lr[~quad][i]), upper) if deep else np.nan
            val[~quad] = v
        res[rest] = val
    elif rest.any():
        xr, lr = flat[rest], lflat[rest]
        # the side asked for, computed directly; its complement only where that side is > 1/2
        mine = _scipy_ncx2(stats.ncx2.sf if upper else stats.ncx2.cdf, xr, k, lr)
        mine = np.clip(np.nan_to_num(mine, nan=0.0), 0.0, 1.0)
        with np.errstate(divide="ignore"):
            val = np.log(np.maximum(mine, 1e-320))
        big = mine > 0.5
        if big.any():
            other = _scipy_ncx2(stats.ncx2.cdf if upper else stats.ncx2.sf, xr[big], k, lr[big])
            val[big] = np.log1p(-np.clip(np.nan_to_num(other, nan=0.0), 0.0, 0.5))
        is_deep = mine < TINY
        for i in np.flatnonzero(is_deep):
            val[i] = _ncx2_deep(float(xr[i]), float(k), float(lr[i]), upper) if deep else np.nan
        res[rest] = val
    return res.reshape(x.shape)


def ncx2_logcdf(x, k: float, lam) -> np.ndarray:
    """``log P[X <= x]`` for ``X ~ chi'^2(k, lam)`` (``k > 0`` dof, noncentrality ``lam >= 0``;
    ``x`` and ``lam`` broadcast together).

    scipy's (Boost's) value where it is at least :data:`TINY`; below, the Poisson mixture
    ``sum_j e^{-lam/2} (lam/2)^j / j! P(k/2 + j, x/2)`` in log space (values below e^-800
    by the Chernoff bound are returned as ``-inf``). Raises RuntimeError when that sum
    would need more than :data:`MAX_POISSON_TERMS` terms (noncentrality ~1e10 and a tail
    below :data:`TINY`).
    """
    return ncx2_log(x, float(k), lam, upper=False)


def ncx2_logsf(x, k: float, lam) -> np.ndarray:
    """``log P[X > x]`` for ``X ~ chi'^2(k, lam)`` (see :func:`ncx2_logcdf`)."""
    return ncx2_log(x, float(k), lam, upper=True)


def ncx2_log_deep(x: float, k: float, lam: float, upper: bool) -> float:
    """``log P[X > x]`` (``upper``) or ``log P[X <= x]`` by the log-space Poisson sum (for values
    below :data:`TINY`; see :func:`ncx2_logcdf`)."""
    if lam == 0:
        return float((chi2_logsf if upper else chi2_logcdf)(np.array([x]), k)[0])
    return _ncx2_deep(float(x), float(k), float(lam), upper)


# =============================================================================== large noncentrality
#: The quadrature :func:`ncx2_quad_log` is used for ``X ~ chi'^2(k, lam)`` when ``k >= QUAD_MIN_DOF``
#: and ``lam >= max(QUAD_MIN_NONCENTRALITY, (k - 1) / QUAD_DOF_RATIO)``: there Boost's Poisson sum
#: costs ~85 us a value (lam ~ 1e7) and fails beyond ~6e9, while the quadrature costs ~1 us.
QUAD_MIN_DOF = 5_000
QUAD_MIN_NONCENTRALITY = 200.0
QUAD_DOF_RATIO = 128.0
#: Half-width (in standard deviations of ``chi^2_{k-1}``) of the quadrature around the peak of its
#: integrand: the integrand is log-concave there with width >= 0.24 of them, so e^-200 and less is left out.
QUAD_HALF_WIDTH = 14.0


def ncx2_quad_applies(k: float, lam) -> np.ndarray:
    """Where :func:`ncx2_quad_log` is used (boolean array of ``lam``'s shape); see :data:`QUAD_MIN_DOF`."""
    lam = np.asarray(lam, dtype=float)
    if k < QUAD_MIN_DOF:
        return np.zeros(lam.shape, dtype=bool)
    return lam >= max(QUAD_MIN_NONCENTRALITY, (k - 1.0) / QUAD_DOF_RATIO)


def _ncx2_chernoff_array(x: np.ndarray, k: float, lam: np.ndarray, upper: bool) -> np.ndarray:
    """:func:`_ncx2_chernoff` for arrays (``x > 0``): an upper bound on the log tail probability."""
    x = np.maximum(np.asarray(x, dtype=float), 1e-300)
    u = 2.0 * x / (k + np.sqrt(k * k + 4.0 * lam * x))
    theta = 0.5 * (1.0 - 1.0 / u)
    bound = np.minimum(0.0, -theta * x + lam * theta * u + 0.5 * k * np.log(u))
    vacuous = (u <= 1.0) if upper else (u >= 1.0)
    return np.where(vacuous, 0.0, bound)


def _quad_nodes(m: float, h_u: float, u_lo: float, u_hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Trapezoid nodes ``y_j = m + sqrt(2m) u_j`` (``u_j`` spaced ``h_u``) and ``log`` of their weights
    ``h_y f_{chi^2_m}(y_j)`` (scipy's chi-square log-density: exact, no tail probability)."""
    sy = math.sqrt(2.0 * m)
    j_lo, j_hi = math.floor(u_lo / h_u), math.ceil(u_hi / h_u)
    u = np.arange(j_lo, j_hi + 1, dtype=float) * h_u
    y = m + sy * u
    y = y[y > 0]
    return y, math.log(h_u * sy) + _chi2_logpdf_large(y, m)


def _chi2_logpdf_large(y: np.ndarray, m: float) -> np.ndarray:
    """``log f_{chi^2_m}(y)`` for large ``m`` without cancellation.

    With ``a = m/2`` and ``y = m (1 + v)``: ``log f = -log 2 - log(2 pi a)/2 - c(a) - a (v - log(1 + v))
    - log(1 + v)``, ``c(a)`` Stirling's correction of ``log Gamma(a)``. scipy's ``logpdf`` adds terms of
    size ``m`` and loses ~1e-9 of absolute accuracy at ``m ~ 1e6``, which the quadrature would carry.
    """
    a = 0.5 * m
    v = (y - m) / m
    corr = 1.0 / (12.0 * a) - 1.0 / (360.0 * a**3) + 1.0 / (1260.0 * a**5)
    return -math.log(2.0) - 0.5 * math.log(2.0 * math.pi * a) - corr - a * _mu_minus_log1p(v) - np.log1p(v)


def ncx2_quad_log(x, k: float, lam, upper: bool, chunk: int = 1 << 21) -> np.ndarray:
    """``log P[X <= x]`` (``upper=False``) or ``log P[X > x]`` for ``X ~ chi'^2(k, lam)`` by quadrature.

    (Over 80 lines: one quadrature whose nodes, weights and chunked log-sum share their local state; split, the
    error analysis below would no longer read against one body.)

    ``X = A + Y`` with ``A = (Z + sqrt(lam))^2`` (``Z ~ N(0, 1)``) and ``Y ~ chi^2_{k-1}``
    independent, so ``P[X <= x] = E[F_A(x - Y)]`` with the closed form
    ``F_A(c) = Phi(sqrt(c) - sqrt(lam)) - Phi(-sqrt(c) - sqrt(lam))`` (``c > 0``; 0 otherwise), and
    the same with ``1 - F_A`` for the upper tail. The expectation is the trapezoid rule over ``y``
    in log space (``logsumexp``), with spacing half the smaller of the standard deviations of ``Y``
    (``sqrt(2(k-1))``) and of ``A`` (``~2 sqrt(lam)``), over :data:`QUAD_HALF_WIDTH` of ``Y``'s
    standard deviations each side of the integrand's peak (Gaussian estimate). The integrand is
    smooth and log-concave there (``F_A``'s branch point at ``c = 0`` carries ``e^{-lam/2}``), so the
    rule converges geometrically: relative error ~1e-12 (measured against mpmath;
    ``tests/fdp/test_ncx2_quadrature.py``) down to probabilities ~1e-280 and below. A lower tail
    below ``e^{60 - lam/2}`` (near ``F_A``'s branch point) is returned as NaN: not resolved here.

    ``x`` and ``lam`` broadcast together; ``k >= QUAD_MIN_DOF`` and every ``lam`` with
    :func:`ncx2_quad_applies` (ValueError otherwise). Returns an array of their shape.
    """
    x, lam = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(lam, dtype=float))
    shape = x.shape
    x, lam = x.ravel(), lam.ravel()
    if x.size == 0:
        return np.empty(shape)
    if not np.all(ncx2_quad_applies(k, lam)):
        raise ValueError(f"ncx2_quad_log needs dof >= {QUAD_MIN_DOF} and a noncentrality >= "
                         f"max({QUAD_MIN_NONCENTRALITY:g}, (dof - 1)/{QUAD_DOF_RATIO:g})")
    m = float(k) - 1.0
    sy = math.sqrt(2.0 * m)
    sa = np.sqrt(2.0 + 4.0 * lam)
    h_u = 0.5 * min(1.0, float(np.min(sa)) / sy)
    # the peak of y -> f_Y(y) F_A(x - y) (Gaussian estimate): y* - m = (x - mean) sy^2 / (sy^2 + sa^2)
    sx2 = sy * sy + sa * sa
    u_star = (x - (m + 1.0 + lam)) * sy / sx2
    if upper:  # the upper tail's integrand is f_Y(y) S_A(x - y): its peak lies at or above x's
        u_star = np.maximum(u_star, 0.0)
    else:
        u_star = np.minimum(u_star, 0.0)
    out = np.full(x.shape, np.nan)
    # values whose Chernoff bound is below e^-800 are 0 in double precision (and far below 1e-300)
    neg = _ncx2_chernoff_array(x, float(k), lam, upper) < NEGLIGIBLE_LOG
    out[neg] = -np.inf
    todo = np.flatnonzero(~neg)
    for _ in range(20):
        if todo.size == 0:
            break
        # group values whose peaks are close, so that each group shares one grid of nodes
        us = u_star[todo]
        order = todo[np.argsort(us)]
        us = u_star[order]
        redo = []
        start = 0
        while start < order.size:
            stop = int(np.searchsorted(us, us[start] + 8.0, side="right"))
            idx = order[start:stop]
            u_lo = max(float(us[start]) - QUAD_HALF_WIDTH, -(m / sy) * (1 - 1e-12))
            u_hi = float(us[stop - 1]) + QUAD_HALF_WIDTH
            y, logw = _quad_nodes(m, h_u, u_lo, u_hi)
            step = max(1, chunk // max(y.size, 1))
            for c0 in range(0, idx.size, step):
                ii = idx[c0:c0 + step]
                val, peak, edge = _quad_sum(x[ii], lam[ii], y, logw, upper)
                out[ii] = val
                # the window must hold the integrand's peak with e^-50 of it left at both ends;
                # where the Gaussian estimate of the peak missed, centre the window on the peak found
                if edge.any():
                    # beyond the window's end the peak lies further out: move past the end
                    u_peak = (y[peak[edge]] - m) / sy
                    past = np.where(peak[edge] == 0, -QUAD_HALF_WIDTH, np.where(peak[edge] == y.size - 1,
                                                                                QUAD_HALF_WIDTH, 0.0))
                    u_star[ii[edge]] = u_peak + past
                    redo.append(ii[edge])
            start = stop
        if not redo:
            break
        todo = np.concatenate(redo)
    else:
        raise RuntimeError("could not compute a noncentral chi-square tail for these parameters (the "
                           f"quadrature did not find its integrand's peak; dof = {k:g})")
    if not upper:
        # F_A has a branch point at c = 0 of size ~e^{-lam/2}: a lower tail not far above it is not
        # resolved by the rule (NaN: the caller uses the Poisson series, paperlib.fdp.tails._ncx2_deep)
        out[out < -0.5 * lam + 60.0] = np.nan
    return out.reshape(shape)


def _quad_sum(x: np.ndarray, lam: np.ndarray, y: np.ndarray, logw: np.ndarray, upper: bool) -> np.ndarray:
    """``log sum_j w_j F_A(x - y_j)`` (or ``1 - F_A``) for each ``x`` (rows) over the nodes (columns),
    the node of each row's largest term and whether a window end is within e^50 of it."""
    rl = np.sqrt(lam)[:, None]
    c = x[:, None] - y[None, :]
    pos = c > 0
    sc = np.sqrt(np.where(pos, c, 0.0))
    # sqrt(c) - sqrt(lam) without cancellation: (c - lam) / (sqrt(c) + sqrt(lam))
    d1 = ((x - lam)[:, None] - y[None, :]) / (sc + rl)
    d2 = -sc - rl
    with np.errstate(divide="ignore", invalid="ignore"):
        if upper:
            # 1 - F_A(c) = Phi(-d1) + Phi(d2); c <= 0: 1
            lf = np.where(pos, np.logaddexp(special.log_ndtr(-d1), special.log_ndtr(d2)), 0.0)
        else:
            l1 = special.log_ndtr(d1)
            l2 = special.log_ndtr(d2)
            lf = np.where(pos, l1 + np.log1p(-np.exp(np.minimum(l2 - l1, 0.0))), -np.inf)
    terms = logw[None, :] + lf
    val = special.logsumexp(terms, axis=1)
    peak = np.argmax(terms, axis=1)
    top = terms[np.arange(terms.shape[0]), peak]
    # a window cut by y > 0 at its lower end is complete there (no mass below 0)
    low_open = y[0] - 2.0 * (y[1] - y[0] if y.size > 1 else 1.0) > 0
    edge = np.isfinite(top) & ((terms[:, -1] > top - 50.0) | (low_open & (terms[:, 0] > top - 50.0)))
    return val, peak, edge


#: :func:`ncx2_cdf_sf` leaves fewer values than this below the quadrature's range to Boost (a Python
#: loop over the Poisson terms costs more than Boost's C++ for few values)
POISSON_MIN_VALUES = 256


def ncx2_cdf_sf(x, k: float, lam, which: str = "both") -> tuple[np.ndarray, np.ndarray]:
    """``(P[X <= x], P[X > x])`` for ``X ~ chi'^2(k, lam)``, ``k >= QUAD_MIN_DOF``, each side computed directly.

    For sampling trade-off curves (``GaussVarFamily.tails``; the privacy profile uses the log-space
    functions, which also reach below 1e-300). ``x`` and ``lam > 0`` broadcast together.
    ``which``: ``"both"``, or ``"cdf"``/``"sf"`` to compute one side only (the other is returned as NaN).

    * ``lam`` with :func:`ncx2_quad_applies`: the trapezoid rule over ``Y ~ chi^2_{k-1}`` of
      :func:`ncx2_quad_log` in linear space, on ``Y``'s bulk (10 standard deviations each side;
      ``Y``'s mass beyond is below 1e-18 for ``k >= QUAD_MIN_DOF``);
    * smaller ``lam``: the Poisson mixture ``sum_j Pois(j; lam/2) P(k/2 + j, x/2)`` over the ``j``
      that carry all but e^-60 of the Poisson mass, with ``P(a + 1, z) = P(a, z) - z^a e^-z /
      Gamma(a + 1)`` (DLMF 8.8.5) from one scipy ``gammainc`` per value (vectorised over values).

    Both sides are sums of positive terms (no complement), so each is accurate relative to itself
    (~1e-12; the quadrature's lower tail down to ``e^{-lam/2}``) and to ~1e-14 absolute: checked against mpmath and Boost's ``ncx2`` (scipy) in
    ``tests/fdp/test_ncx2_quadrature.py``, at
    ~1 us a value instead of up to ~85 us (``lam ~ 1e7``), and go beyond Boost's range (``lam > 6e9``).
    """
    x, lam = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(lam, dtype=float))
    shape = x.shape
    x, lam = x.ravel(), lam.ravel()
    if k < QUAD_MIN_DOF:
        raise ValueError(f"ncx2_cdf_sf needs dof >= {QUAD_MIN_DOF}, got {k!r}")
    if np.any(lam <= 0):
        raise ValueError("ncx2_cdf_sf needs a noncentrality > 0 (use the central chi-square)")
    if which not in ("both", "cdf", "sf"):
        raise ValueError(f"which must be 'both', 'cdf' or 'sf', got {which!r}")
    want_cdf, want_sf = which != "sf", which != "cdf"
    cdf = np.full(x.shape, np.nan)
    sf = np.full(x.shape, np.nan)
    big = ncx2_quad_applies(k, lam)
    if big.any():
        cdf[big], sf[big] = _quad_linear(x[big], float(k), lam[big], want_cdf, want_sf)
    small = ~big
    if small.any():
        if np.count_nonzero(small) < POISSON_MIN_VALUES:
            # a few values (below the quadrature's range, lam < (k - 1)/128): Boost is faster there (the
            # recurrence's Python loop over ~2 (9 sqrt(lam/2) + 30) terms pays off only vectorised)
            with np.errstate(over="ignore", invalid="ignore"):
                if want_cdf:
                    cdf[small] = stats.ncx2.cdf(x[small], k, lam[small])
                if want_sf:
                    sf[small] = stats.ncx2.sf(x[small], k, lam[small])
        else:
            cdf[small], sf[small] = _poisson_linear(x[small], float(k), lam[small], want_cdf, want_sf)
    return np.clip(cdf, 0.0, 1.0).reshape(shape), np.clip(sf, 0.0, 1.0).reshape(shape)


def _quad_linear(x: np.ndarray, k: float, lam: np.ndarray, want_cdf: bool = True, want_sf: bool = True,
                 chunk: int = 1 << 21):
    m = k - 1.0
    sy = math.sqrt(2.0 * m)
    h_u = 0.5 * min(1.0, float(np.min(np.sqrt(2.0 + 4.0 * lam))) / sy)
    y, logw = _quad_nodes(m, h_u, -10.0, 10.0)
    w = np.exp(logw)
    cdf = np.full(x.shape, np.nan)
    sf = np.full(x.shape, np.nan)
    step = max(1, chunk // y.size)
    for c0 in range(0, x.size, step):
        xs, ls = x[c0:c0 + step], lam[c0:c0 + step]
        rl = np.sqrt(ls)[:, None]
        c = xs[:, None] - y[None, :]
        sc = np.sqrt(np.maximum(c, 0.0))
        d1 = ((xs - ls)[:, None] - y[None, :]) / (sc + rl)
        # F_A(c) = Phi(d1) - Phi(-sqrt(c) - sqrt(lam)) and 1 - F_A(c) = Phi(-d1) + Phi(-sqrt(c) - sqrt(lam)):
        # the second terms are below Phi(-sqrt(200)) ~ 1e-45. Both sides summed directly (sums of
        # positive terms: relative accuracy in either tail, no complement)
        pos = c > 0
        if want_cdf:
            cdf[c0:c0 + step] = np.where(pos, special.ndtr(d1), 0.0) @ w
        if want_sf:
            sf[c0:c0 + step] = np.where(pos, special.ndtr(-d1), 1.0) @ w
    return cdf, sf


def _log_power_term(a: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``log(z^a e^-z / Gamma(a + 1))`` (a Poisson log-pmf in ``a``), without the cancellation of
    ``a log z - z - log Gamma(a + 1)`` at large ``a``: with ``z = a (1 + v)`` it is
    ``-log(2 pi a)/2 - c(a) - a (v - log(1 + v))``, ``c`` Stirling's correction (``a >= 10``)."""
    a, z = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(z, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = special.xlogy(a, z) - z - special.gammaln(a + 1.0)
        big = (a >= 10.0) & (z > 0)
        if big.any():
            ab, zb = a[big], z[big]
            v = (zb - ab) / ab
            corr = 1.0 / (12.0 * ab) - 1.0 / (360.0 * ab**3) + 1.0 / (1260.0 * ab**5)
            out[big] = -0.5 * np.log(2.0 * math.pi * ab) - corr - ab * _mu_minus_log1p(v)
    return out


def _poisson_linear(x: np.ndarray, k: float, lam: np.ndarray, want_cdf: bool = True, want_sf: bool = True):
    a, z, h = k / 2.0, x / 2.0, lam / 2.0
    # Poisson mass beyond 9 standard deviations (+30 for small means) is below 1e-17
    width = np.ceil(9.0 * np.sqrt(h) + 30.0)
    j0 = np.maximum(0.0, np.floor(h - width))
    steps = int(np.max(np.floor(h + width) - j0)) + 1
    aj = a + j0
    d = np.exp(_log_power_term(aj, z))  # z^aj e^-z / Gamma(aj + 1)
    pois = np.exp(_log_power_term(j0, h))  # h^j0 e^-h / j0!
    out = []
    # P(a + 1, z) = P(a, z) - d (a ratio ~ z/a per step, no cancellation), Q(a + 1, z) = Q(a, z) + d
    for want, sign, start in ((want_cdf, -1.0, special.gammainc), (want_sf, 1.0, special.gammaincc)):
        if not want:
            out.append(np.full(x.shape, np.nan))
            continue
        g = start(aj, z)
        dd, po, a_j, j = d.copy(), pois.copy(), aj.copy(), j0.copy()
        acc = np.zeros(x.shape)
        for _ in range(steps):
            acc += po * g
            g = np.maximum(g + sign * dd, 0.0)
            a_j += 1.0
            dd *= z / a_j
            j += 1.0
            po *= h / j
        out.append(acc)
    return out[0], out[1]
