"""The spread of audited ``eps_L`` across seeds: one audit run at several seeds.

An audit's ``eps_L`` is a random variable (the rounds, and for the real-data audits the
points and the model's starting parameters, are drawn from the seed), so a difference
between two runs means something only against the spread of one run repeated. The
book shows that spread for one representative point per audit figure (issue 14, build
item 7): :func:`seed_spread` calls the audit once per seed and collects ``eps_L`` per
distinguisher, with its minimum and maximum.

The audits themselves are in :mod:`paperlib.audit.game` (and
:mod:`paperlib.implementations.real_audit`); this module only repeats and summarises.
"""

from __future__ import annotations

from paperlib.fdp.validation import ParameterError


import math
from typing import Any, Callable, Mapping, Sequence

__all__ = ["seed_spread", "spread_rows", "spread_seeds"]


def spread_seeds(seed: int, count: int = 3) -> list[int]:
    """The seeds of a spread run derived from a notebook's ``seed``: ``[seed, seed + 1, ..., seed + count - 1]``.

    The first is ``seed`` itself, so the run that a figure shows is one of them.

    Raises
    ------
    ValueError
        If ``seed`` is not an integer >= 0 or ``count`` not an integer >= 2 (a spread needs two runs).
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ParameterError("seed", f"seed must be an integer >= 0, got {seed!r}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 2:
        raise ValueError(f"count must be an integer >= 2 (a spread needs two runs), got {count!r}")
    return [seed + k for k in range(count)]


def _eps_of(value: Any, label: str) -> float:
    if isinstance(value, Mapping):
        if "eps_lower" not in value:
            raise ValueError(f"audit_fn's result for {label!r} has no 'eps_lower' (an AuditResult dict or a number)")
        value = value["eps_lower"]
    try:
        eps = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"audit_fn's eps_L for {label!r} is not a number: {value!r}") from None
    if math.isnan(eps) or eps < 0:
        raise ValueError(f"audit_fn's eps_L for {label!r} must be >= 0 (Eq. 3 clips at 0), got {eps!r}")
    return eps


def seed_spread(audit_fn: Callable[[int], Mapping[str, Any]], seeds: Sequence[int],
                labels: Sequence[str] | None = None) -> dict:
    """Run ``audit_fn(seed)`` for every seed and collect ``eps_L`` per distinguisher.

    Parameters
    ----------
    audit_fn : callable ``seed -> {label: eps_L}``
        One audit at that seed. A value may be ``eps_L`` (a float >= 0) or an
        :class:`~paperlib.audit.AuditResult` dict holding ``"eps_lower"``.
    seeds : sequence of int
        At least two distinct seeds (e.g. :func:`spread_seeds`), in the order of the rows.
    labels : sequence of str, optional
        The distinguisher labels to collect (default: those of the first seed's result);
        every seed's result must hold them.

    Returns
    -------
    dict
        JSON-ready: ``seeds`` (list of int), ``labels``, ``eps`` (label -> list of ``eps_L``,
        one per seed, in the order of ``seeds``), ``min``, ``max`` and ``range``
        (label -> float; ``range = max - min``, the spread).

    Raises
    ------
    ValueError
        If fewer than two seeds or a repeated seed are given, a label is missing from a
        seed's result, or an ``eps_L`` is not a number >= 0.
    """
    seeds = [int(s) for s in seeds]
    if len(seeds) < 2:
        raise ValueError(f"seeds must hold at least two seeds (a spread needs two runs), got {seeds}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {seeds}")
    results = []
    for s in seeds:
        res = audit_fn(s)
        if not isinstance(res, Mapping):
            raise ValueError(f"audit_fn must return a mapping label -> eps_L, got {type(res).__name__}")
        results.append(res)
    labels = list(results[0].keys()) if labels is None else list(labels)
    eps: dict[str, list[float]] = {}
    for lab in labels:
        for s, res in zip(seeds, results):
            if lab not in res:
                raise ValueError(f"audit_fn's result at seed {s} has no distinguisher {lab!r} "
                                 f"(it has {sorted(res)})")
        eps[lab] = [_eps_of(res[lab], lab) for res in results]
    lo = {lab: min(v) for lab, v in eps.items()}
    hi = {lab: max(v) for lab, v in eps.items()}
    return {"seeds": seeds, "labels": labels, "eps": eps, "min": lo, "max": hi,
            "range": {lab: hi[lab] - lo[lab] for lab in labels}}


def spread_rows(spread: Mapping[str, Any], labels: Sequence[str], claim: float,
                extra: Sequence[Any] | None = None) -> list[list]:
    """The rows of a seed-spread table: one per seed, then ``min`` and ``max``.

    Each row is ``[seed (str), eps_L of each label..., claim]`` plus, with ``extra`` (one
    value per seed, e.g. how many rounds were real steps), that value (``"-"`` on the
    ``min``/``max`` rows). ``spread`` is the dict of :func:`seed_spread`; ``labels`` must be
    among its labels. Raises ValueError for an unknown label or an ``extra`` of the wrong length.
    """
    seeds = list(spread["seeds"])
    unknown = [lab for lab in labels if lab not in spread["eps"]]
    if unknown:
        raise ValueError(f"labels must be among {sorted(spread['eps'])}, got {unknown}")
    if extra is not None and len(extra) != len(seeds):
        raise ValueError(f"extra must hold one value per seed ({len(seeds)}), got {len(extra)}")
    tail = [] if extra is None else [[v] for v in extra]
    rows = [[str(s), *(spread["eps"][lab][k] for lab in labels), claim, *(tail[k] if tail else [])]
            for k, s in enumerate(seeds)]
    rows += [[w, *(spread[w][lab] for lab in labels), claim, *(["-"] if tail else [])] for w in ("min", "max")]
    return rows
