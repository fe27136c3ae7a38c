"""The normaliser, measured: which ``nu`` divided the noisy gradient sum, read off the updates.

:func:`detect_normaliser` tells the candidate rules (:data:`CANDIDATES`: ``N q``, ``floor(N q)``,
``|B|``) apart from a run's updates and the per-example gradients at the starting point
(:func:`paperlib.implementations.runners.per_example_gradients`), by the method in its
docstring (THEORY.md section 10).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from paperlib.mechanisms.core import Mechanism

__all__ = ["CANDIDATES", "RULES", "detect_normaliser"]


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.squeeze(m, axis) + np.log(np.sum(np.exp(a - m), axis=axis))


#: the candidate mechanisms :func:`detect_normaliser` tells apart, and their rules
CANDIDATES = (Mechanism.EASGM, Mechanism.FEASGM, Mechanism.ASGM)
RULES = tuple(m.rule for m in CANDIDATES)


def detect_normaliser(updates, grads, *, q: float, sigma: float, C: float, N_data: int,
                      max_subsets: int = 4096) -> dict[str, Any]:
    """Measure from the updates which normaliser ``nu`` produced them.

    (Over 80 lines: about half is this docstring, the method and its statistics, which the code follows step by
    step.)

    Model: ``u = (S_B + G) / nu`` with ``S_B = sum_{i in B} gbar_i`` (clipped rows of
    ``grads[:N_data]``), ``B`` Poisson(``q``) and ``G ~ N(0, sigma^2 C^2 I_n)``.

    Method.

    1. *Scale from the residual.* Orthonormal basis ``Q`` (``n x r``) of the span of the
       clipped gradients (``numpy.linalg.qr``; rank ``r`` from ``|diag R|``). The residual
       ``u - Q Q^T u`` contains no gradient, only noise: its squared norm is
       ``sigma^2 C^2 chi^2_{n-r} / nu^2``, so per trial
       ``nu_hat = sigma C sqrt((n - r) / ||resid||^2)`` (relative error about
       ``1/sqrt(2(n-r))``: accurate for large ``n``).
    2. *Batch from the projection.* The coefficients ``Q^T u`` carry ``S_B / nu``. For each
       candidate rule (``"Nq"``: ``nu = N q``; ``"floor(Nq)"``: ``nu = floor(N q)``;
       ``"|B|"``: ``nu = max(|B|, 1)``), the exact log-likelihood of a trial is the
       log of the Poisson mixture over all ``2^N`` batches,
       ``log sum_B pi(B) N(u; S_B/nu(B), (sigma C/nu(B))^2 I_n)``, computed from inner
       products only (``||nu u - S_B||^2 = nu^2 ||u||^2 - 2 nu <u, S_B> + ||S_B||^2``).
       With ``2^N > max_subsets`` the batches considered are the least-squares roundings
       ``round(argmin_w ||nu_hat u - Gbar^T w||)`` of each trial (an approximation).
    3. *Classify.* ``normaliser`` is the rule with the largest total log-likelihood over
       the finite trials; ``inferred_batch_sizes`` are the per-trial most likely
       ``|B|`` under it; ``agreement`` is the fraction of finite trials whose
       ``nu_hat`` lies within 4 standard errors (``nu/sqrt(2(n-r))``) of the chosen
       rule's ``nu`` for the inferred batch.

    Updates that are not finite (Opacus v1.x with ``floor(N q) = 0``) are counted in
    ``nonfinite_trials`` and left out. Rules that give the same ``nu`` on every trial
    (``N q`` an integer makes ``"Nq"`` and ``"floor(Nq)"`` identical) cannot be told
    apart: ``ties`` lists every rule whose likelihood equals the best one's (then
    ``normaliser`` is the first of them in the order ``Nq``, ``floor(Nq)``, ``|B|``);
    choose ``N q`` non-integer to separate them. If every update is non-finite and
    ``floor(N q) = 0``, the answer is ``"floor(Nq)"`` (division by zero), ``agreement`` 1.

    Returns a dict: ``normaliser``, ``mechanism``, ``log_likelihood`` (per rule),
    ``candidates`` (``Nq``, ``floor(Nq)``), ``nu_hat`` (per trial), ``nu_hat_mean``,
    ``inferred_batch_sizes``, ``agreement``, ``rank``, ``n``, ``trials``,
    ``nonfinite_trials``, ``ties``, ``method``.
    """
    U = np.asarray(updates, dtype=np.float64)
    Gr = np.asarray(grads, dtype=np.float64)[:N_data]
    if U.ndim != 2 or Gr.ndim != 2 or U.shape[1] != Gr.shape[1] or len(Gr) != N_data:
        raise ValueError(f"need updates [T, n] and grads [>= N_data, n]; got {U.shape}, {np.shape(grads)}")
    if not (sigma > 0 and C > 0 and 0 < q <= 1):
        raise ValueError("detect_normaliser needs sigma > 0, C > 0 and 0 < q <= 1")
    T, n = U.shape
    sC = float(sigma) * float(C)
    Nq = Mechanism.EASGM.fixed_normaliser(N_data, q)
    fl = int(Mechanism.FEASGM.fixed_normaliser(N_data, q))  # int(N q) in floating point, as Opacus
    finite = np.isfinite(U).all(axis=1)
    base = {"candidates": {"Nq": Nq, "floor(Nq)": fl}, "n": n, "trials": T,
            "nonfinite_trials": int((~finite).sum()),
            "method": "residual-scale nu_hat + Poisson-mixture likelihood per rule (see docstring)"}
    if not finite.any():
        rule = "floor(Nq)" if fl == 0 else "undetermined"
        return {**base, "normaliser": rule, "mechanism": Mechanism.FEASGM.title if fl == 0 else "unknown",
                "log_likelihood": {}, "nu_hat": [float("nan")] * T, "nu_hat_mean": float("nan"),
                "inferred_batch_sizes": [None] * T, "agreement": 1.0 if fl == 0 else 0.0, "rank": None,
                "ties": [rule] if fl == 0 else []}
    Uf = U[finite]
    norms = np.linalg.norm(Gr, axis=1, keepdims=True)
    Gc = Gr / np.maximum(1.0, norms / C)
    Qm, R = np.linalg.qr(Gc.T)
    d = np.abs(np.diag(R))
    keep = d > 1e-10 * max(d.max(initial=0.0), 1e-300)
    if not keep.all():  # rank deficient: an SVD basis of the span
        Us, s, _ = np.linalg.svd(Gc.T, full_matrices=False)
        Qm = Us[:, s > 1e-10 * max(s.max(initial=0.0), 1e-300)]
    r = Qm.shape[1]
    coef = Uf @ Qm
    uu = np.einsum("ij,ij->i", Uf, Uf)
    resid2 = np.maximum(uu - np.einsum("ij,ij->i", coef, coef), 1e-300)
    nu_hat = sC * np.sqrt((n - r) / resid2)

    # candidate batches
    if 2 ** N_data <= max_subsets:
        masks = ((np.arange(2 ** N_data)[:, None] >> np.arange(N_data)[None, :]) & 1).astype(np.float64)
    else:
        W, *_ = np.linalg.lstsq(Gc.T, (Uf * nu_hat[:, None]).T, rcond=None)
        masks = np.unique(np.clip(np.rint(W.T), 0, 1), axis=0)
    sizes = masks.sum(axis=1)
    with np.errstate(divide="ignore"):
        logprior = sizes * np.log(q) + (N_data - sizes) * (np.log1p(-q) if q < 1 else np.where(sizes < N_data, -np.inf, 0.0))
    ip = (Uf @ Gc.T) @ masks.T                             # <u, S_B>   [T, K]
    SS = np.einsum("kj,kj->k", masks @ (Gc @ Gc.T), masks)  # ||S_B||^2  [K]
    ll, lltab = {}, {}
    for mech in CANDIDATES:
        rule = mech.rule
        nu = np.asarray(mech.normaliser(N_data, sizes, q), dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            quad = (nu[None, :] ** 2 * uu[:, None] - 2 * nu[None, :] * ip + SS[None, :]) / (2 * sC ** 2)
            tab = n * np.log(nu)[None, :] - quad + logprior[None, :]
        tab = np.where(np.isfinite(tab), tab, -np.inf)
        lltab[rule] = tab
        ll[rule] = float(np.sum(_logsumexp(tab, axis=1)))
    best = max(RULES, key=lambda k: ll[k])
    ties = [k for k in RULES if abs(ll[k] - ll[best]) <= 1e-9 * max(1.0, abs(ll[best]))]
    kmap = np.argmax(lltab[best], axis=1)
    bsz = sizes[kmap].astype(int)
    nu_best = np.asarray(Mechanism.from_rule(best).normaliser(N_data, bsz, q), dtype=float)
    se = nu_best / math.sqrt(2.0 * max(n - r, 1))
    agree = float(np.mean(np.abs(nu_hat - nu_best) <= 4 * se))
    inferred = [None] * T
    nh = [float("nan")] * T
    for j, t in enumerate(np.flatnonzero(finite)):
        inferred[t] = int(bsz[j])
        nh[t] = float(nu_hat[j])
    return {**base, "normaliser": best, "mechanism": Mechanism.from_rule(best).title, "log_likelihood": ll,
            "nu_hat": nh, "nu_hat_mean": float(np.mean(nu_hat)), "inferred_batch_sizes": inferred,
            "agreement": agree, "rank": int(r), "ties": ties}
