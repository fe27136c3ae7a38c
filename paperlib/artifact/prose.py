"""Sentences that compare numbers, with the comparison word taken from the comparison.

A sentence of the book that compares numbers ("reach the ceiling", "ranges from X to Y",
"far above") is generated here from the numbers it compares, so its words cannot contradict
its data: a range whose ends are equal reads "is X throughout", values that do not reach a
ceiling never "reach" it. Each function returns the phrase and is tested against the data
it describes (``tests/artifact/test_prose.py``).
"""

from __future__ import annotations

import math

__all__ = ["relation", "span", "against_ceiling", "against_claim"]


def _f(x: float, fmt: str) -> str:
    return format(float(x), fmt)


def relation(a: float, b: float, *, rtol: float = 0.02, atol: float = 0.0, far: float = 10.0) -> str:
    """The words that compare *a* with *b*: "far above", "above", "about equal to", "below" or
    "far below".

    "about equal to" when ``|a - b| <= max(atol, rtol * max(|a|, |b|))``; "far above" when
    ``a >= far * b`` with ``b > 0`` ("far below" when ``b >= far * a`` with ``a > 0``); else "above"
    or "below". Infinite values compare as such (``inf`` is far above any finite positive number).

    Raises
    ------
    ValueError
        If *a* or *b* is NaN, ``rtol`` or ``atol`` is negative, or ``far <= 1``.
    """
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        raise ValueError(f"a and b must be numbers, got a={a!r}, b={b!r}")
    if not (rtol >= 0 and atol >= 0):
        raise ValueError(f"rtol and atol must be >= 0, got rtol={rtol!r}, atol={atol!r}")
    if not far > 1:
        raise ValueError(f"far must be > 1, got {far!r}")
    if a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= max(atol, rtol * max(abs(a), abs(b)))):
        return "about equal to"
    if a > b:
        return "far above" if b > 0 and a >= far * b else "above"
    return "far below" if a > 0 and b >= far * a else "below"


def span(values, fmt: str = ".2f") -> str:
    """``"ranges from 0.10 to 0.45"``, or ``"is 7.21 throughout"`` when the ends print alike.

    Raises
    ------
    ValueError
        If *values* is empty or holds a NaN.
    """
    v = [float(x) for x in values]
    if not v or any(math.isnan(x) for x in v):
        raise ValueError(f"values must be a non-empty sequence of numbers, got {values!r}")
    lo, hi = _f(min(v), fmt), _f(max(v), fmt)
    return f"is {lo} throughout" if lo == hi else f"ranges from {lo} to {hi}"


def against_ceiling(values, ceiling: float, *, fmt: str = ".2f", near: float = 0.05) -> str:
    """Where *values* stand against a *ceiling* they cannot exceed, in words.

    "all reach the ceiling of C" when every value is within 1e-9 of it; "reach the ceiling of C
    at k of m points (the others X–Y)" when some do; "come within d of the ceiling of C (X–Y)"
    when the largest is within the fraction *near* of it; else "stay below the ceiling of C
    (X–Y)".
    """
    v = [float(x) for x in values]
    if not v:
        raise ValueError("values must be non-empty")
    c = float(ceiling)
    at = [x for x in v if abs(x - c) <= 1e-9 * max(1.0, abs(c))]
    rest = [x for x in v if x not in at]
    rng = (lambda xs: f"{_f(min(xs), fmt)}–{_f(max(xs), fmt)}" if _f(min(xs), fmt) != _f(max(xs), fmt)
           else _f(xs[0], fmt))
    if len(at) == len(v):
        return f"all reach the ceiling of {_f(c, fmt)}"
    if at:
        return f"reach the ceiling of {_f(c, fmt)} at {len(at)} of {len(v)} points (the others {rng(rest)})"
    if max(v) >= c * (1 - near):
        return f"come within {_f(c - max(v), fmt)} of the ceiling of {_f(c, fmt)} ({rng(v)})"
    return f"stay below the ceiling of {_f(c, fmt)} ({rng(v)})"


def against_claim(values, claim: float, *, fmt: str = ".2f", factor: float = 10.0) -> str:
    """*values* against a *claim*: "all far above" (each at least *factor* times it), "all above",
    "k of m above", or "none above", with the claim printed."""
    v = [float(x) for x in values]
    if not v:
        raise ValueError("values must be non-empty")
    c = float(claim)
    above = [x for x in v if x > c]
    cs = format(c, ".3g")
    if len(above) == len(v):
        return (f"all far above the SGM claim of {cs}" if min(v) >= factor * c and c > 0
                else f"all above the SGM claim of {cs}")
    if above:
        return f"{len(above)} of {len(v)} above the SGM claim of {cs}"
    return f"none above the SGM claim of {cs}"
