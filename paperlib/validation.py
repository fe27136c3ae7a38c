"""Argument checks shared by every public function.

Each check raises :class:`ValueError` whose message names the parameter and the
allowed range, so that a bad value fails at the call site instead of surfacing
as a NaN or a traceback from deep inside scipy.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "check_probability",
    "check_rate",
    "check_positive",
    "check_int",
    "check_delta",
    "check_alpha_array",
    "check_nonnegative_array",
    "check_seed",
    "SEED_LIMIT",
]

#: seeds are integers in [0, SEED_LIMIT): numpy's SeedSequence takes any non-negative
#: integer, but torch's Generator.manual_seed takes at most 64 bits, and 2^63 keeps a
#: seed a signed 64-bit integer everywhere (JSON readers, Makefile SEED, sub-seeds).
SEED_LIMIT = 2**63


def _is_real(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def check_rate(q, name: str = "q") -> float:
    """Return ``q`` as a float after checking ``q`` in (0, 1]."""
    if not _is_real(q) or not math.isfinite(q) or not (0.0 < q <= 1.0):
        raise ValueError(f"{name} must be a sampling rate in (0, 1], got {q!r}")
    return float(q)


def check_probability(p, name: str, *, open_left=False, open_right=False) -> float:
    """Return ``p`` as a float after checking it lies in [0, 1] (ends as asked)."""
    lo = "(" if open_left else "["
    hi = ")" if open_right else "]"
    ok = _is_real(p) and math.isfinite(p) and 0.0 <= p <= 1.0
    if ok and open_left and p == 0.0:
        ok = False
    if ok and open_right and p == 1.0:
        ok = False
    if not ok:
        raise ValueError(f"{name} must be in {lo}0, 1{hi}, got {p!r}")
    return float(p)


def check_delta(delta, name: str = "delta") -> float:
    """Return ``delta`` after checking delta in (0, 1)."""
    return check_probability(delta, name, open_left=True, open_right=True)


def check_positive(x, name: str) -> float:
    """Return ``x`` as a float after checking it is finite and > 0."""
    if not _is_real(x) or not math.isfinite(x) or x <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {x!r}")
    return float(x)


def check_int(x, name: str, minimum: int = 1) -> int:
    """Return ``x`` as an int after checking it is an integer >= ``minimum``."""
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        if _is_real(x) and math.isfinite(x) and float(x).is_integer():
            x = int(x)
        else:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {x!r}")
    if x < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {x!r}")
    return int(x)


def check_alpha_array(alpha, name: str = "alpha") -> np.ndarray:
    """Return ``alpha`` as a float array after checking every entry is in [0, 1]."""
    a = np.asarray(alpha, dtype=float)
    if a.size == 0:
        raise ValueError(f"{name} must hold at least one value in [0, 1]")
    if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a > 1):
        bad = a[~(np.isfinite(a) & (a >= 0) & (a <= 1))].ravel()[0]
        raise ValueError(f"{name} must be in [0, 1] (an FPR), got {float(bad)!r}")
    return a


def check_nonnegative_array(x, name: str) -> np.ndarray:
    """Return ``x`` as a float array after checking entries are finite and >= 0."""
    a = np.asarray(x, dtype=float)
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError(f"{name} must hold finite values >= 0, got {x!r}")
    return a


def check_seed(seed, name: str = "seed") -> int:
    """Return ``seed`` as an int after checking it is an integer with ``0 <= seed < 2**63``.

    Floats that are whole numbers (``3.0``) are accepted; booleans, strings, NaN and
    fractions are not. Raises ValueError naming ``name`` and the range.
    """
    ok = not isinstance(seed, bool) and (
        isinstance(seed, numbers.Integral)
        or (_is_real(seed) and math.isfinite(seed) and float(seed).is_integer()))
    if ok:
        seed = int(seed)
        ok = 0 <= seed < SEED_LIMIT
    if not ok:
        raise ValueError(f"{name} must be an integer with 0 <= {name} < 2^63, got {seed!r}")
    return seed
