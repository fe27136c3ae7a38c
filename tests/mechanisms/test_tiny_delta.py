"""Tiny delta: the one-round guarantees' binomial truncation follows the delta asked for (paperlib.mechanisms.guarantees).

Independent reference: mpmath at 60 digits, the full binomial sum (no truncation) of the index-revealed
mixture's hockey-stick divergences (THEORY.md §5, §6) with ``n = 1``, where each component's likelihood-ratio
region is an interval between the roots of a quadratic. The project's epsilon at delta is checked to be the
root: ``delta_exact(eps) = delta`` to within the truncation's stated accuracy (``TAIL_FRACTION``).
"""

from __future__ import annotations

import json
import math

import mpmath as mp
import pytest

from conftest import run_cli
from paperlib.mechanisms import guarantees as G
from paperlib.mechanisms.core import feasgm_floors

mp.mp.dps = 60  # every probability from its own tail: no 1 - p cancellation
N, Q, SIGMA = 299, 0.05, 1.1  # floor(299 * 0.05) = 14 != floor(300 * 0.05) = 15: FEASGM's weak case


def _components(mech):
    """``(weight, mu, s)`` of the exact (untruncated) one-round mixture; ``s = 1`` a shift, ``mu = 0, s = 1`` identity."""
    N1, q, sg = mp.mpf(N), mp.mpf(Q), mp.mpf(SIGMA)
    pmf = [mp.binomial(N, k) * q**k * (1 - q) ** (N - k) for k in range(N + 1)]
    out = []
    if mech in ("easgm", "feasgm"):
        x = N1 if mech == "easgm" else mp.mpf(feasgm_floors(N, Q)[0])
        for k, w in enumerate(pmf):
            out.append(((1 - q) * w, k / ((x + 1) * sg), x / (x + 1)))
            out.append((q * w, (x + k) / ((x + 1) * sg), x / (x + 1)))
        return out
    for k, w in enumerate(pmf):  # asgm
        out.append(((1 - q) * w, mp.mpf(0), mp.mpf(1)))
        out.append((q * w, 1 / sg, mp.mpf(1)) if k == 0 else (q * w, 2 * k / ((k + 1) * sg), mp.mpf(k) / (k + 1)))
    return out


def _region_prob(a, b, c, mean, sd, outside=False):
    """``P[a x^2 + b x + c > 0]`` (``outside``: ``P[... < 0]``, computed directly, not as ``1 -``) for
    ``x ~ N(mean, sd^2)``, ``a <= 0``."""
    cdf = lambda t: mp.ncdf((t - mean) / sd)  # noqa: E731
    sf = lambda t: mp.ncdf(-(t - mean) / sd)  # noqa: E731
    if a == 0:
        if b == 0:
            return mp.mpf(int((c > 0) != outside))
        r = -c / b
        return (sf(r) if b > 0 else cdf(r)) if not outside else (cdf(r) if b > 0 else sf(r))
    disc = b * b - 4 * a * c
    if disc <= 0:
        return mp.mpf(int(outside))
    r1, r2 = sorted([(-b - mp.sqrt(disc)) / (2 * a), (-b + mp.sqrt(disc)) / (2 * a)])
    return cdf(r1) + sf(r2) if outside else cdf(r2) - cdf(r1)


def _sgm_delta(eps):
    """The SGM claim's pair ``(N(0,1), (1-q) N(0,1) + q N(1/sigma, 1))`` (index hidden): ``L = log(1 - q + q e^{mu x
    - mu^2/2})`` is increasing in ``x``, so both regions are half-lines (THEORY.md §3)."""
    q, mu = mp.mpf(Q), 1 / mp.mpf(SIGMA)
    x_up = (mp.log((mp.exp(eps) - 1 + q) / q) + mu * mu / 2) / mu  # L > eps  <=>  x > x_up
    d1 = (1 - q) * mp.ncdf(-x_up) + q * mp.ncdf(mu - x_up) - mp.exp(eps) * mp.ncdf(-x_up)
    d2 = mp.mpf(0)
    if mp.exp(-eps) > 1 - q:  # L < -eps  <=>  x < x_lo
        x_lo = (mp.log((mp.exp(-eps) - 1 + q) / q) + mu * mu / 2) / mu
        d2 = mp.ncdf(x_lo) - mp.exp(eps) * ((1 - q) * mp.ncdf(x_lo) + q * mp.ncdf(x_lo - mu))
    return max(d1, d2)


def _exact_delta(mech, eps):
    """``max(delta_QP, delta_PQ)`` of the untruncated mixture at ``eps`` (mpmath). Component: P = N(0,1),
    Q = N(mu, s^2); L(x) = -log s - (x - mu)^2/(2 s^2) + x^2/2."""
    eps = mp.mpf(eps)
    if mech == "sgm":
        return _sgm_delta(eps)
    d1 = d2 = mp.mpf(0)
    for w, mu, s in _components(mech):
        if w == 0 or (mu == 0 and s == 1):
            continue
        a = mp.mpf(1) / 2 - 1 / (2 * s * s)
        b = mu / (s * s)
        c0 = -mp.log(s) - mu * mu / (2 * s * s)
        # L > eps and L < -eps (the latter: -L > eps, i.e. -a x^2 - b x - c0 - eps > 0 has a >= 0: use the complement)
        up_p, up_q = _region_prob(a, b, c0 - eps, 0, 1), _region_prob(a, b, c0 - eps, mu, s)
        lo_p = _region_prob(a, b, c0 + eps, 0, 1, outside=True)  # L < -eps (ties have measure 0)
        lo_q = _region_prob(a, b, c0 + eps, mu, s, outside=True)
        d1 += w * (up_q - mp.exp(eps) * up_p)
        d2 += w * (lo_p - mp.exp(eps) * lo_q)
    return max(d1, d2)


@pytest.mark.parametrize("mech", ["easgm", "asgm", "feasgm", "sgm"])
@pytest.mark.parametrize("delta", [1e-13, 1e-30, 1e-100])
def test_epsilon_is_the_exact_root_at_tiny_delta(mech, delta):
    g = G.guarantee(mech, N, Q, SIGMA, 1)
    eps = g.epsilon(delta)
    assert math.isfinite(eps) and eps > 0
    at = _exact_delta(mech, eps)
    # our profile is an upper bound of the exact one, above it by at most TAIL_FRACTION * delta
    assert delta * (1 - 2 * G.TAIL_FRACTION) <= at <= delta * (1 + 1e-6), (float(at), delta)
    assert _exact_delta(mech, eps * (1 - 1e-3)) > delta  # and it is the root, not just any epsilon above it
    if mech != "sgm" and delta < G.DEFAULT_TAIL_TOL:
        assert g.for_delta(delta).dropped_mass <= G.TAIL_FRACTION * delta


def test_delta_queries_refine_too():
    g = G.guarantee("easgm", N, Q, SIGMA, 1)
    e = g.epsilon(1e-30)
    d = float(g.delta(e))
    assert d == pytest.approx(1e-30, rel=1e-6) and d < G.DEFAULT_TAIL_TOL  # not the 1e-12 of dropped mass


def test_the_issue_command_gives_the_finite_epsilon():
    r = run_cli("epsilon", "--mechanism", "easgm", "--N", "1000", "--q", "0.01", "--sigma", "1.1", "--n", "1000",
                "--delta", "1e-13")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["epsilon"] == pytest.approx(6.35, abs=0.01)


@pytest.mark.parametrize("tail_tol", [-1.0, 1e-301, 1.0, "small"])
def test_bad_tail_tol_is_one_line(tail_tol):
    with pytest.raises(ValueError, match=r"^tail_tol must be 0 or in \[1e-300, 1\)") as e:
        G.easgm_guarantee(10, 0.5, 1.0, 5, tail_tol=tail_tol)
    assert "\n" not in str(e.value)


def test_tail_tol_zero_keeps_every_batch_size_and_works():
    """``tail_tol = 0``: the whole support (an underflowing weight is dropped, not a numpy error)."""
    g = G.asgm_guarantee(1000, 0.01, 1.1, 5, tail_tol=0)
    assert math.isfinite(g.epsilon(1e-5)) and g.dropped_mass < 1e-300
    assert G.easgm_guarantee(10, 0.5, 1.0, 5, tail_tol=0).dropped_mass == 0.0
