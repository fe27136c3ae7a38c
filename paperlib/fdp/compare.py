"""Comparing trade-off functions on a grid: the orderings the paper's lemmas assert.

A trade-off function ``f`` is *weaker* (more private) than ``g`` where ``f >= g``. The
paper's Figure 5 and Lemmas 3.14-3.16 are statements of this kind; these helpers turn
them into numbers that a check (or a notebook's assertion) can compare with zero.
Every ``curve`` argument is anything callable on an array of FPRs (a
:class:`~paperlib.fdp.tradeoff.TradeOffCurve`, an LRMixture, ...).
"""

from __future__ import annotations

import numpy as np

from paperlib.fdp.validation import check_alpha_array

__all__ = ["max_excess", "ordering_violation"]


def max_excess(f, g, alpha) -> float:
    """``max_alpha (f(alpha) - g(alpha))`` over the FPR grid ``alpha`` (values in [0, 1]).

    Positive where ``f`` lies above ``g`` somewhere (e.g. a claim above an upper bound of
    the real guarantee: the claim is then not a valid guarantee). NaN values (a curve
    undefined there, such as a CLT curve outside ``[gamma, 1 - gamma]``) are left out;
    NaN when nothing is left. Raises ValueError if ``alpha`` leaves [0, 1].
    """
    a = check_alpha_array(alpha)
    d = np.asarray(f(a), dtype=float) - np.asarray(g(a), dtype=float)
    d = d[np.isfinite(d)]
    return float(d.max()) if d.size else float("nan")


def ordering_violation(curves, alpha, *, increasing: bool) -> float:
    """By how much a sequence of curves fails to be ordered pointwise on the grid ``alpha``.

    ``increasing=True`` asks ``curves[k](alpha) <= curves[k+1](alpha)`` for every ``k``
    and ``alpha`` (each curve weaker than the one before: e.g. Lemma 3.14, the EASGM
    bound rises with ``N``); ``False`` asks the opposite. Returns the largest violation
    (a float; ``<= 0`` means the ordering holds, its magnitude is the smallest margin).
    Needs at least two curves; ValueError otherwise.
    """
    a = check_alpha_array(alpha)
    vals = [np.asarray(c(a) if callable(c) else c, dtype=float) for c in curves]
    if len(vals) < 2:
        raise ValueError(f"curves: need at least two curves to compare, got {len(vals)}")
    diffs = [(b - x) if increasing else (x - b) for x, b in zip(vals, vals[1:])]
    return float(max(np.max(-d) for d in diffs))
