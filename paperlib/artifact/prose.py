"""Sentences that compare numbers, with the comparison word taken from the comparison.

A sentence of the book that compares numbers ("reach the ceiling", "ranges from X to Y",
"far above") is generated here from the numbers it compares, so its words cannot contradict
its data: a range whose ends are equal reads "is X throughout", values that do not reach a
ceiling never "reach" it. Each function returns the phrase and is tested against the data
it describes (``tests/artifact/test_prose.py``).
"""

from __future__ import annotations

import math
import re

__all__ = ["clauses", "relation", "span", "against_ceiling", "against_claim", "and_join", "count_of", "settings_list", "gaps_vs_spread"]


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


def _decimals(fmt: str) -> int:
    m = re.fullmatch(r"\.(\d+)f", fmt)
    if not m:
        raise ValueError(f"fmt must be a fixed-point format such as '.2f', got {fmt!r}")
    return int(m.group(1))


def against_ceiling(values, ceiling: float, *, fmt: str = ".2f", tol: float | None = None, near: float = 0.05,
                    unit: str = "points") -> str:
    """Where *values* stand against a *ceiling* they cannot exceed, in words.

    One rule decides both the count and the words: a value is *at the ceiling* iff it lies
    within *tol* of it (default: half a unit of the last decimal of *fmt*, 0.005 for ``".2f"``,
    so a value at the ceiling prints as the ceiling). The values not at the ceiling are printed
    with as many more decimals as it takes for none of them to print as the ceiling (or as
    their gap to it as zero), and the ceiling with them. *unit* names what the values are
    ("points", "seeds").

    - every value at it: "all reach the ceiling of C" (one value: "reaches the ceiling of C");
    - some: "reach the ceiling of C at k of m points (the others X–Y)";
    - none, some within the fraction *near* of it: "come within d of the ceiling of C at k of m
      points (the others X–Y)", d the largest gap among those k ("all come within d of the
      ceiling of C (X–Y)" when k = m);
    - none near: "stay below the ceiling of C (X–Y)".

    Raises
    ------
    ValueError
        If *values* is empty or holds a NaN, *tol* is negative, or *fmt* is not fixed-point.
    """
    v = [float(x) for x in values]
    if not v or any(math.isnan(x) for x in v):
        raise ValueError(f"values must be a non-empty sequence of numbers, got {values!r}")
    d0 = _decimals(fmt)
    tol = 0.5 * 10.0 ** -d0 if tol is None else float(tol)
    if not tol >= 0:
        raise ValueError(f"tol must be >= 0, got {tol!r}")
    c = float(ceiling)
    at = [x for x in v if abs(c - x) <= tol]
    rest = [x for x in v if abs(c - x) > tol]
    # the precision of the values not at the ceiling: none of them (nor its gap) prints as the ceiling
    d = d0
    while d < d0 + 6 and any(_f(x, f".{d}f") == _f(c, f".{d}f") or float(_f(c - x, f".{d}f")) == 0 for x in rest):
        d += 1
    rf = f".{d}f"
    cs = _f(c, rf)  # the ceiling at the precision of the values compared with it

    def rng(xs):
        lo, hi = _f(min(xs), rf), _f(max(xs), rf)
        return lo if lo == hi else f"{lo}–{hi}"

    def others(xs):
        return f"the other {rng(xs)}" if len(xs) == 1 else f"the others {rng(xs)}"

    def of(k):
        return f"at {k} of {len(v)} {unit}"

    if not rest:
        return f"reaches the ceiling of {cs}" if len(v) == 1 else f"all reach the ceiling of {cs}"
    if at:
        return f"reach the ceiling of {cs} {of(len(at))} ({others(rest)})"
    close = [x for x in v if x >= c - abs(c) * near]
    if close:
        gap = _f(c - min(close), rf)
        if len(close) == len(v):
            return f"all come within {gap} of the ceiling of {cs} ({rng(v)})"
        return (f"come within {gap} of the ceiling of {cs} {of(len(close))} "
                f"({others([x for x in v if x not in close])})")
    return f"stay below the ceiling of {cs} ({rng(v)})"


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


def clauses(text: str) -> list[str]:
    """The clauses of a generated detail, split at each semicolon outside parentheses: ``"1/6 q; q=0.5: x (a;
    b); q=0.6: y"`` -> ``["1/6 q", "q=0.5: x (a; b)", "q=0.6: y"]``. A detail is written as clauses so that a page
    can show it as a list of short items instead of one long sentence."""
    out, depth, cur = [], 0, []
    text = str(text)
    i = 0
    while i < len(text):
        ch = text[i]
        depth += (ch == "(") - (ch == ")" and depth > 0)
        if ch == ";" and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            i += 1
            continue
        cur.append(ch)
        i += 1
    out.append("".join(cur).strip())
    return [c for c in out if c]


def and_join(items) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``."""
    items = [str(x) for x in items]
    if not items:
        raise ValueError("items must be non-empty")
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def settings_list(points) -> str:
    """Audited settings ``(mechanism, q, N)`` in words, grouped by mechanism and q in the order
    given: ``"ASGM at q = 0.5 with N = 4 and 5 and at q = 0.8 with N = 5"``.

    Raises
    ------
    ValueError
        If *points* is empty.
    """
    groups: dict = {}
    for m, q, n in points:
        groups.setdefault(str(m).upper(), {}).setdefault(float(q), []).append(n)
    if not groups:
        raise ValueError("points must be non-empty")
    parts = []
    for m, by_q in groups.items():
        qs = [f"q = {q:g} with N = {and_join(sorted(set(ns)))}" for q, ns in by_q.items()]
        parts.append(f"{m} at " + " and at ".join(qs))
    return and_join(parts)


def gaps_vs_spread(gaps: dict, spread: float, *, fmt: str = ".2f", note: str = "") -> str:
    """Differences *gaps* (``{label: gap}``, each >= 0) against a run-to-run *spread*, in words:
    ``"by 0.83 (chi2) and 0.05 (ks), against a run-to-run spread of 0.13: more than the spread
    for chi2, within it for ks"``; "all within it" / "all more than it" when all agree. A gap
    is within the spread iff ``gap <= spread`` (compared as printed with *fmt*). *note*, if
    given, follows the spread in parentheses (what the spread is of).

    Raises
    ------
    ValueError
        If *gaps* is empty or *spread* is NaN.
    """
    if not gaps:
        raise ValueError("gaps must be non-empty")
    if math.isnan(float(spread)):
        raise ValueError("spread must be a number")
    sp = _f(spread, fmt)
    g = {k: _f(abs(float(v)), fmt) for k, v in gaps.items()}
    within = [k for k, v in g.items() if float(v) <= float(sp)]
    over = [k for k in g if k not in within]
    sp_note = f"{sp} ({note})" if note else sp
    head = f"by {and_join(f'{v} ({k})' for k, v in g.items())}, against a run-to-run spread of {sp_note}: "
    if not over:
        return head + ("within it" if len(g) == 1 else "all within it")
    if not within:
        return head + ("more than it" if len(g) == 1 else "all more than it")
    return head + f"more than the spread for {and_join(over)}, within it for {and_join(within)}"


def count_of(k: int, n: int, total: int | None = None, noun: str = "audited points") -> str:
    """``"at all 16 audited points"`` (k = n), ``"at 3 of the 16 audited points"``, with
    ``" (of 20 in all)"`` appended when only *n* of *total* were run.

    Raises
    ------
    ValueError
        If not ``0 <= k <= n <= total``.
    """
    total = n if total is None else total
    if not 0 <= k <= n <= total:
        raise ValueError(f"need 0 <= k <= n <= total, got k={k}, n={n}, total={total}")
    if n == 1:
        head = f"at the one {noun.rstrip('s')}" if k == 1 else f"at none of the one {noun.rstrip('s')}"
    elif k == n:
        head = f"at all {n} {noun}"
    elif k == 0:
        head = f"at none of the {n} {noun}"
    else:
        head = f"at {k} of the {n} {noun}"
    return head + (f" (of {total} in all)" if n < total else "")
