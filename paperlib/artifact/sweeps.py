"""Cached and resumable audits for the book: results in ``results/<name>.json``.

:func:`cached_audit` runs :func:`paperlib.audit.audit_distinguishers` on given vectors,
:func:`audit_sweep` a list of worst-case points, each keyed on every argument (and a
digest of the vectors) through :mod:`paperlib.artifact.provenance`. The audits
themselves are in :mod:`paperlib.audit`; this module only stores and resumes them.
"""

from __future__ import annotations

import json
import time

import numpy as np
from tqdm import tqdm

from paperlib.artifact.provenance import load_result, save_result
from paperlib.audit.game import AUDIT_VERSION, vectors_digest, audit_distinguishers, worst_case_vectors

__all__ = ["cached_audit", "audit_sweep", "audit_point"]


# ---------------------------------------------------------------------------- cached audits
def _jsonable_kwargs(kwargs: dict) -> dict:
    # torch dtypes/devices as their names ("float64", "cpu"), without importing torch here
    return {k: (str(v).replace("torch.", "") if type(v).__module__ == "torch" else v)
            for k, v in kwargs.items() if k != "progress"}


def cached_audit(name: str, vectors, mechanism: str, q: float, sigma: float, C: float, *, trials: int,
                 distinguishers=("optimal",), seed: int = 0, mode: str = "quick", **kwargs) -> dict:
    """:func:`audit_distinguishers` on given vectors, cached in ``results/<name>.json``.

    The cache key covers every argument and a SHA-256 digest of the vectors (float64
    bytes and shape), so other data, another seed or another size re-runs. Returns
    ``{label: AuditResult.to_dict()}`` (plain JSON types, the same on a hit and a miss).
    """
    v = np.asarray(vectors, dtype=np.float64)
    dists = dict(distinguishers) if isinstance(distinguishers, dict) else list(distinguishers)
    params = {"kind": "audit", "version": AUDIT_VERSION, "vectors_sha256": vectors_digest(v), "shape": list(v.shape),
              "mechanism": mechanism, "q": q, "sigma": sigma, "C": C, "trials": trials, "distinguishers": dists,
              "seed": int(seed), "options": _jsonable_kwargs(kwargs)}
    hit = load_result(name, params)
    if hit is not None:
        return hit["results"]
    t0 = time.perf_counter()
    res = audit_distinguishers(v, mechanism, q, sigma, C, trials=trials, distinguishers=distinguishers, seed=seed,
                               **kwargs)
    data = {"results": {k: r.to_dict() for k, r in res.items()}}
    save_result(name, params, data, mode=mode, seed=seed, wall_time=time.perf_counter() - t0)
    return json.loads(json.dumps(data, allow_nan=True))["results"]


# ---------------------------------------------------------------------------- cached sweeps
def _point_seed(seed: int, index: int) -> int:
    return int(np.random.SeedSequence([int(seed), int(index)]).generate_state(1)[0])


def audit_point(point: dict, *, index: int, seed: int = 0, **common) -> dict:
    """Point ``index`` of an :func:`audit_sweep` at ``seed``, run alone (not cached).

    The same vectors and rounds as that sweep's point ``index`` (seed
    ``SeedSequence([seed, index])``), so ``audit_point(points[i], index=i, seed=SEED,
    **common)`` gives what ``audit_sweep(name, points, seed=SEED, **common)`` holds for
    point ``i``, and another ``seed`` re-audits the same setting with other rounds (the
    seed spread of :func:`paperlib.audit.seed_spread`). Returns
    ``{label: AuditResult.to_dict()}``; ``point`` and ``common`` as in :func:`audit_sweep`.
    """
    p = dict(common)
    p.pop("progress", None)
    p.update(point)
    mech, N, n, q = p.pop("mechanism"), p.pop("N"), p.pop("n"), p.pop("q")
    kind = p.pop("kind", "worst")
    direction = p.pop("direction", "e1")
    dists = p.pop("distinguishers", ("optimal",))
    sigma, C = p.pop("sigma"), p.pop("C")
    ps = _point_seed(seed, index)
    v = worst_case_vectors(N, n, C, kind=kind, direction=direction, seed=ps)
    res = audit_distinguishers(v, mech, q, sigma, C, distinguishers=dists, seed=ps, data=kind, **p)
    return {k: r.to_dict() for k, r in res.items()}


def audit_sweep(name: str, points: list, *, seed: int = 0, mode: str = "quick", progress: bool = True,
                **common) -> list:
    """Audit a list of synthetic points, cached and resumable in ``results/<name>.json``.

    Each point is a dict of :func:`worst_case_vectors`/:func:`audit_distinguishers`
    arguments (``mechanism``, ``N``, ``n``, ``q``; optionally ``sigma``, ``C``,
    ``distinguishers``, ``trials`` ...); ``common`` holds the shared ones. Point ``i`` uses
    seed ``SeedSequence([seed, i])``. After every point the results so far are saved
    under the hash of all parameters (:func:`paperlib.artifact.provenance.save_result`), so an
    interrupted sweep resumes at the first missing point and a changed parameter
    starts afresh. Returns one dict per point: the point's parameters and
    ``{"results": {label: AuditResult.to_dict()}}``.
    """
    pts = [dict(p) for p in points]
    params = {"kind": "audit_sweep", "version": AUDIT_VERSION, "seed": int(seed), "points": pts,
              "common": _jsonable_kwargs(common)}
    cached = load_result(name, params)
    done = list(cached["points"]) if cached else []
    if cached and cached.get("complete"):
        return done
    t0 = time.perf_counter()
    prior = float(cached.get("wall_time_s", 0.0)) if cached else 0.0
    it = tqdm(range(len(done), len(pts)), desc=name, unit="point", disable=not progress, initial=len(done),
              total=len(pts))
    for i in it:
        done.append({"point": pts[i], "results": audit_point(pts[i], index=i, seed=seed, **common)})
        data = {"points": done, "complete": len(done) == len(pts), "wall_time_s": prior + time.perf_counter() - t0}
        save_result(name, params, data, mode=mode, seed=seed, wall_time=data["wall_time_s"])
    return done
