"""Argument checks shared by every layer, and the one size-limit function.

Each check raises :class:`ValueError` (:class:`TypeError` for a value of the wrong kind where
the kind is the point, :func:`check_bool`) whose message names the parameter and the allowed
range, so that a bad value fails at the call site instead of surfacing as a NaN or a traceback
from deep inside scipy. The module sits in :mod:`paperlib.fdp`, the lowest layer, because every
layer above needs it and it needs nothing but numpy (THEORY.md §0: the parameters and their
ranges).

**Validated once.** A public function checks its arguments. A mechanism's setting is checked
once, when its value is made (:class:`~paperlib.mechanisms.setting.Setting`, with these
functions), and the computations that take the value do not check it again. Limits that depend
on the computation (grid sizes, floors of ``delta``, FEASGM's division by zero) are not checks of
this module and always apply.

**Sizes.** :func:`check_size` is the one limit every size goes through (trials, rounds, ``N``,
``n``, grid points): above its limit it refuses with the estimated cost unless the caller
allows it (``--yes``), and below it a long run can be announced with its estimate.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "ParameterError",
    "InputError",
    "ComputationError",
    "ParameterTypeError",
    "check_probability",
    "check_rate",
    "check_positive",
    "check_int",
    "check_delta",
    "check_bool",
    "check_alpha_array",
    "check_eps",
    "check_nonnegative_array",
    "check_seed",
    "check_size",
    "SizeLimitError",
    "fmt_seconds",
    "fmt_bytes",
    "SEED_LIMIT",
    "NOTICE_SECONDS",
]

class InputError(Exception):
    """Marks an error in what the user gave (a setting, a file in their cache): the command line exits 2 on it,
    with its one-line message. :class:`ParameterError` is one."""


class ComputationError(RuntimeError):
    """Valid inputs whose computation, audit or installation failed (a release that is not available, an
    implementation that does not match its mechanism, a code audit that failed): the command line exits 1
    with its one-line message."""


class ParameterError(InputError, ValueError):
    """A parameter outside its allowed range. ``parameter`` names it (as the function being called
    names it); the message, one line, says the allowed range and the value given. Callers classify
    input errors by this class (the command line exits 2 on it), never by a message's words."""

    def __init__(self, parameter: str, message: str):
        super().__init__(message)
        self.parameter = parameter


class ParameterTypeError(ParameterError, TypeError):
    """A parameter of the wrong kind (a string where a flag is expected, an object of the wrong class):
    a :class:`ParameterError` and a :class:`TypeError`."""


#: seeds are integers in [0, SEED_LIMIT): numpy's SeedSequence takes any non-negative
#: integer, but torch's Generator.manual_seed takes at most 64 bits, and 2^63 keeps a
#: seed a signed 64-bit integer everywhere (JSON readers, Makefile SEED, sub-seeds).
SEED_LIMIT = 2**63


def _is_real(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def check_rate(q, name: str = "q") -> float:
    """Return ``q`` as a float after checking ``q`` in (0, 1]."""
    if not _is_real(q) or not math.isfinite(q) or not (0.0 < q <= 1.0):
        raise ParameterError(name, f"{name} must be a sampling rate in (0, 1], got {q!r}")
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
        raise ParameterError(name, f"{name} must be in {lo}0, 1{hi}, got {p!r}")
    return float(p)


def check_delta(delta, name: str = "delta") -> float:
    """Return ``delta`` after checking delta in (0, 1)."""
    return check_probability(delta, name, open_left=True, open_right=True)


def check_positive(x, name: str) -> float:
    """Return ``x`` as a float after checking it is finite and > 0."""
    if not _is_real(x) or not math.isfinite(x) or x <= 0:
        raise ParameterError(name, f"{name} must be a finite number > 0, got {x!r}")
    return float(x)


def check_int(x, name: str, minimum: int = 1) -> int:
    """Return ``x`` as an int after checking it is an integer >= ``minimum``."""
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        if _is_real(x) and math.isfinite(x) and float(x).is_integer():
            x = int(x)
        else:
            raise ParameterError(name, f"{name} must be an integer >= {minimum}, got {x!r}")
    if x < minimum:
        raise ParameterError(name, f"{name} must be an integer >= {minimum}, got {x!r}")
    return int(x)


def check_alpha_array(alpha, name: str = "alpha") -> np.ndarray:
    """Return ``alpha`` as a float array after checking every entry is in [0, 1]."""
    a = np.asarray(alpha, dtype=float)
    if a.size == 0:
        raise ParameterError(name, f"{name} must hold at least one value in [0, 1]")
    if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a > 1):
        bad = a[~(np.isfinite(a) & (a >= 0) & (a <= 1))].ravel()[0]
        raise ParameterError(name, f"{name} must be in [0, 1] (an FPR), got {float(bad)!r}")
    return a


def check_eps(eps) -> np.ndarray:
    """Return ``eps`` as a float array of at least one dimension after checking every entry is finite
    and >= 0 (the argument of a privacy profile ``delta(eps)``)."""
    e = np.atleast_1d(np.asarray(eps, dtype=float))
    if not np.all(np.isfinite(e)) or np.any(e < 0):
        raise ParameterError("eps", f"eps must be finite and >= 0, got {eps!r}")
    return e


def check_nonnegative_array(x, name: str) -> np.ndarray:
    """Return ``x`` as a float array after checking entries are finite and >= 0."""
    a = np.asarray(x, dtype=float)
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ParameterError(name, f"{name} must hold finite values >= 0, got {x!r}")
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
        raise ParameterError(name, f"{name} must be an integer with 0 <= {name} < 2^63, got {seed!r}")
    return seed


def check_bool(x, name: str) -> bool:
    """Return ``x`` as a bool after checking it is one (``True``/``False``, or a numpy bool).

    Strings such as ``'no'`` and numbers are refused with TypeError naming ``name``: taking
    ``bool('no')`` would silently mean True.
    """
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    raise ParameterTypeError(name, f"{name} must be True or False, got {x!r}")


# ------------------------------------------------------------------------------ sizes
#: a run estimated to take at least this many seconds is announced with its estimate
NOTICE_SECONDS = 20.0


class SizeLimitError(ParameterError):
    """A size above its limit, refused with its estimated cost (:func:`check_size`)."""


def fmt_seconds(s: float) -> str:
    """A duration for a message: ``'42 s'``, ``'3.5 min'``, ``'2.1 h'``, ``'4 days'``."""
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if s >= 2 * size:
            return f"{s / size:.3g} {unit}"
    return f"{s:.2g} s"


def fmt_bytes(b: float) -> str:
    """A memory size for a message, in KiB, MiB, GiB or TiB."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if b >= size:
            return f"{b / size:.3g} {unit}"
    return f"{b / 1024:.3g} KiB"


def check_size(name: str, value, limit, *, estimate: str, allow: bool = False, what: str = "", shown=None,
               seconds: float | None = None, notice=None, override: str = "--yes") -> None:
    """The one size limit: refuse ``value > limit`` with its estimated cost, unless ``allow``.

    Parameters
    ----------
    name : the parameter the message names (the one that sets the size)
    value, limit : the size and its limit (same unit); ``shown``: what the message says the
        parameter is (default ``value``)
    estimate : the estimated cost, in words (``fmt_seconds``, ``fmt_bytes``)
    allow : run anyway (the command line's ``--yes``); ``override`` names that switch in the message
    what : what the limit is on, as the start of the parenthesis (``"(N+1)*n = 1,000 floats, "``)
    seconds, notice : when the estimated time is at least :data:`NOTICE_SECONDS` and the size is
        allowed, ``notice(line)`` is called with the estimate (the command line writes it to stderr,
        so a long run is never silent)

    Raises :class:`SizeLimitError` (a ValueError) naming ``name``.
    """
    shown = value if shown is None else shown
    if value > limit and not allow:
        raise SizeLimitError(name, f"{name} = {shown:,} is above the size limit ({what}at most {limit:,}; estimated "
                             f"{estimate}); pass {override} to run it anyway")
    if notice is not None and seconds is not None and seconds >= NOTICE_SECONDS:
        notice(f"{name} = {shown:,}: estimated {estimate}")
