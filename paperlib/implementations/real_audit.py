"""Auditing real DP-SGD implementations on real data points (paper Section 5.1, Appendix A.3).

One audited point: ``N + 1`` random points of a dataset (``D`` = the first ``N``,
``D'`` = all of them), a model at fixed, known parameters ``theta_0`` and one step of
the implementation's DP-SGD at ``lr = 1``. The adversary is white-box: it knows every
per-example gradient at ``theta_0`` (:func:`paperlib.implementations.runners.per_example_gradients`),
hence every Gaussian component of both output distributions of the mechanism the
implementation documents (Opacus installed (v1.x) -> FEASGM, v0.15.0 -> EASGM,
v0.13.0 -> ASGM, DPSUR's own step -> DPSUR's rule, :attr:`Mechanism.DPSUR
<paperlib.mechanisms.core.Mechanism.DPSUR>`: the size of a separate Poisson draw, no step on an
empty batch; the paper analyses it as ASGM). The output of a step is the normalised
noisy gradient ``(theta_0 - theta_1) / lr``; the optimal and the normality
distinguishers (:mod:`paperlib.audit`) score it.

Two modes (:func:`audit_implementation`):

``"full"``
    Every round of the game — calibration and counted, on ``D`` and on ``D'`` — is
    one step of the implementation (:func:`runners.run_steps`); the outputs are
    projected on the span of the clipped gradients at once (the exact sufficient
    statistics of both distinguishers) and scored by :func:`paperlib.audit.audit_outputs`.
    Path ``"implementation"``.
``"quick"``
    The first ``check_trials`` steps per dataset come from the implementation and must
    pass two checks before they may stand for the mechanism's rounds. First, step by step
    (:func:`check_steps`): the divisor read off *every* real step must be the mechanism's for
    that step's batch (and, for DPSUR, whose draws are replayed from the step's seed, the update
    the mechanism's output for the same batch and noise, relative tolerance :data:`STEP_RTOL`);
    one disagreement raises :class:`ImplementationMismatch` naming the step. Second,
    :func:`check_outputs` (its power is stated in the result's ``check["power"]``): two-sample Kolmogorov-Smirnov tests of every projected
    coordinate and of the squared residual norm against the batched mechanism
    (:func:`paperlib.mechanisms.sampler.sample_projected`) with the same gradients,
    Bonferroni-corrected at family level ``check_level`` (0.001). Only if they pass do
    the remaining rounds come from the batched mechanism fed with the same per-example
    gradients (the implementation's steps fill the first counted rounds). Path
    ``"implementation-checked + mechanism"``; a failed check raises
    :class:`ImplementationMismatch` (with the p-values) and audits nothing.

Both modes also run :func:`~paperlib.implementations.normaliser_detection.detect_normaliser` on the implementation's steps
(which of ``N q``, ``floor(N q)``, ``|B|`` the update was divided by) and record the
step-by-step check (``step_check``, ``real_steps_disagreeing``; in full mode nothing is
substituted, so disagreements are counted, not refused); ``normaliser_found`` says what the
code divides by (:func:`normaliser_found`). Results are
cached in ``results/real_audit_<key>.json`` under a hash of every parameter, of the
resolved data folder and of the points actually used (SHA-256 of the loaded images and
labels; :func:`points_sha256`), so a rerun is instant and a result is never reused for
other data (:func:`paperlib.artifact.provenance.save_result`). The points are loaded
before the cache is consulted: a data folder that does not hold the dataset is an
error, never a cache hit. Only ``mode="full"`` downloads a missing dataset.
"""

from __future__ import annotations

import hashlib
import math
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy import stats as sps

from paperlib.implementations.models import MODEL_NAMES
from paperlib.implementations.registry import BY_NAME
from paperlib.implementations.runners import IMPLEMENTATION_MECHANISM
from paperlib.mechanisms import sampler as mech_mod
from paperlib.mechanisms.core import ANY, Mechanism
from paperlib.audit.game import AUDIT_VERSION, audit_outputs
from paperlib.mechanisms.guarantees import sgm_claim
from paperlib.fdp.validation import ComputationError, ParameterError, check_delta, check_int, check_positive, check_rate, check_seed

__all__ = [
    "DOCUMENTED_MECHANISM",
    "MODELS",
    "DATASETS",
    "MODES",
    "REAL_AUDIT_VERSION",
    "ImplementationMismatch",
    "STEP_RTOL",
    "SEPARATE_DRAW",
    "replay_dpsur_draws",
    "check_steps",
    "normaliser_found",
    "white_box_basis",
    "project_outputs",
    "reduce_chunk",
    "reduce_shared",
    "reduce_args",
    "step_options",
    "chunk_steps",
    "check_outputs",
    "audit_implementation",
    "ImplementationAudit",
    "points_sha256",
    "audit_inputs",
]

#: the mechanism each implementation documents (one definition: :mod:`paperlib.implementations.runners`)
DOCUMENTED_MECHANISM = IMPLEMENTATION_MECHANISM
MODELS = MODEL_NAMES  # the table of models (paperlib.implementations.models.MODELS)
DATASETS = ("mnist", "fmnist", "cifar10", "synthetic")
MODES = ("quick", "full")
#: bump when the procedure changes, so cached results are recomputed
REAL_AUDIT_VERSION = 5  # 2: results record their inputs (r["inputs"]); bundled points; 3: DPSUR's rule, step check;
# 4: chunks reduced where they ran (projection in torch); 5: Opacus steps projected at the step (opacus_step.StepProjection)
#: family-wise level of the quick-mode check (Bonferroni over all its KS tests)
CHECK_LEVEL = 1e-3
#: implementation steps per call to run_steps: at most STEP_CHUNK, and at most
#: CHUNK_ELEMENTS / n (bounds the memory of one call's updates, chunk x n floats)
STEP_CHUNK = 500
CHUNK_ELEMENTS = 20_000_000
#: at least this many steps per call of an Opacus implementation (each call builds the model and the engine;
#: an old release's subprocess is started once per process and kept)
RELEASE_CHUNK = 50
#: steps projected where they run (:func:`step_options`) keep no ``chunk x n`` block: their chunks hold
#: about PROJECTED_ELEMENTS / n steps (at least RELEASE_CHUNK, at most STEP_CHUNK): few calls (each builds
#: the model and the engine) while every worker still gets many chunks of a full-mode audit
PROJECTED_ELEMENTS = 150_000_000


def chunk_steps(implementation: str, n: int) -> int:
    """Steps per :func:`runners.run_steps` call of an audit of ``implementation`` on an ``n``-parameter
    model (one definition: the audit and ``make device-check``'s count of calls). It fixes the chunks'
    seeds, so it depends on nothing but these two."""
    n = max(int(n), 1)
    if implementation == "dpsur":  # its (chunk, n) updates are kept for the replayed check
        return max(1, min(STEP_CHUNK, CHUNK_ELEMENTS // n))
    return min(STEP_CHUNK, max(RELEASE_CHUNK, PROJECTED_ELEMENTS // n))  # projected at the step (step_options)


class ImplementationMismatch(ComputationError):
    """The implementation's outputs do not match the mechanism it documents (quick-mode check failed).

    ``check`` holds the p-values (:func:`check_outputs`), ``normaliser`` what
    :func:`~paperlib.implementations.normaliser_detection.detect_normaliser` found.
    """

    def __init__(self, message: str, check: dict | None = None, normaliser: dict | None = None):
        super().__init__(message)
        self.check = check or {}
        self.normaliser = normaliser or {}


# ---------------------------------------------------------------------------- projections
def white_box_basis(vectors, C: float) -> np.ndarray:
    """Orthonormal ``(n, r)`` basis of the span of the clipped vectors, ``r = min(n, N+1)``.

    Computed exactly as :class:`paperlib.audit.WhiteBoxModel` computes its basis (numpy
    reduced QR of the clipped rows in float64), so projected outputs in this basis can be
    handed to :func:`paperlib.audit.audit_outputs`.
    """
    v = mech_mod.as_vectors(vectors, device="cpu", dtype=torch.float64)
    clipped = mech_mod.clip(v, check_positive(C, "C")).numpy()
    basis, _ = np.linalg.qr(clipped.T, mode="reduced")
    return np.ascontiguousarray(basis)


def project_outputs(x, basis: np.ndarray) -> dict:
    """``{"coords": x U (m, r), "residual": ||x||^2 - ||x U||^2 (m,)}`` in float64.

    The product runs in torch on copies in torch's own memory: called on one thread
    (:func:`paperlib.implementations.parallel.one_thread`, as the audit's chunks are), it gives
    the same bits in every process, whatever numpy's BLAS threads and the arrays' alignment."""
    t = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    t = np.asarray(t, dtype=np.float64)
    if t.ndim != 2 or t.shape[1] != basis.shape[0]:
        raise ValueError(f"outputs must have shape (m, n={basis.shape[0]}), got {t.shape}")
    y = (torch.tensor(t, dtype=torch.float64) @ torch.tensor(np.asarray(basis), dtype=torch.float64)).numpy()
    return {"coords": y, "residual": _residual(np.einsum("ij,ij->i", t, t), y, basis.shape[0])}


def _residual(sq_norm, coords, n: int) -> np.ndarray:
    """``||x||^2 - ||x U||^2`` from the squared norms and the coordinates in an orthonormal ``U``
    (``(m, r)``), clipped at 0; 0 where ``U`` spans everything (``r = n``)."""
    coords = np.asarray(coords, dtype=np.float64)
    res = np.asarray(sq_norm, dtype=np.float64) - np.einsum("ij,ij->i", coords, coords)
    if coords.shape[1] == n:
        res = np.zeros_like(res)
    return np.maximum(res, 0.0)


def _concat(blocks: list) -> dict:
    return {"coords": np.concatenate([b["coords"] for b in blocks]),
            "residual": np.concatenate([b["residual"] for b in blocks])}


def _mechanism_projected(mechanism, vectors, basis, q, sigma, C, dataset, trials, gen) -> dict:
    coords, res = mech_mod.sample_projected(mechanism, vectors, q, sigma, C, dataset, trials, gen,
                                            basis=torch.as_tensor(basis))
    return {"coords": coords.numpy(), "residual": res.numpy()}


# ---------------------------------------------------------------------------- the check
def check_outputs(outputs: dict, vectors, mechanism: str, q: float, sigma: float, C: float, *,
                  reference_trials: int = 20_000, level: float = CHECK_LEVEL, seed: int = 0) -> dict:
    """Do given outputs follow one round of ``mechanism`` on ``vectors``? (KS tests, Bonferroni).

    ``outputs`` maps ``"D"`` and/or ``"D'"`` to full outputs ``(m, n)`` (or to projected
    blocks ``{"coords", "residual"}`` in :func:`white_box_basis`). For each dataset,
    ``reference_trials`` rounds of the batched mechanism
    (:func:`paperlib.mechanisms.sampler.sample_projected`, same vectors and basis, a torch
    generator seeded with ``seed``) are compared with the given ones by two-sample
    Kolmogorov-Smirnov tests: one per projected coordinate and one for the squared
    residual norm (when ``r < n``); the residual is where a wrong normaliser shows most
    (it is ``sigma^2 C^2 chi^2_{n-r} / nu^2``, nearly deterministic for large ``n``).
    The check passes when every p-value is at least ``level / (number of tests)``.

    Returns ``{"mechanism", "p_values": {ds: {test: p}}, "min_p", "tests", "level",
    "threshold", "passed", "trials": {ds: m}, "reference_trials"}``.
    """
    mechanism = Mechanism.parse(mechanism, ANY)
    reference_trials = check_int(reference_trials, "reference_trials", 10)
    if not (0 < level < 1):
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if not outputs or not set(outputs) <= {"D", "D'"}:
        raise ValueError("outputs must map 'D' and/or \"D'\" to the outputs of that dataset")
    basis = white_box_basis(vectors, C)
    n, r = basis.shape
    gen = torch.Generator().manual_seed(int(seed))
    pvals: dict = {}
    trials = {}
    for ds in ("D", "D'"):
        if ds not in outputs:
            continue
        x = outputs[ds]
        blk = x if isinstance(x, dict) else project_outputs(x, basis)
        if not (np.all(np.isfinite(blk["coords"])) and np.all(np.isfinite(blk["residual"]))):
            pvals[ds] = {"finite": 0.0}
            trials[ds] = int(np.asarray(blk["coords"]).shape[0])
            continue
        ref = _mechanism_projected(mechanism, vectors, basis, q, sigma, C, ds, reference_trials, gen)
        p = {}
        for j in range(r):
            p[f"coord_{j}"] = float(sps.ks_2samp(blk["coords"][:, j], ref["coords"][:, j]).pvalue)
        if r < n:
            p["residual"] = float(sps.ks_2samp(blk["residual"], ref["residual"]).pvalue)
        pvals[ds] = p
        trials[ds] = int(blk["coords"].shape[0])
    n_tests = sum(len(p) for p in pvals.values())
    min_p = min(min(p.values()) for p in pvals.values())
    thr = level / n_tests
    # power: the KS distance (between the steps' law and the mechanism's, in one coordinate or the
    # residual) that this many steps notice at the Bonferroni threshold; smaller differences pass
    m_min = min(trials.values())
    en = max(1, int(round(m_min * reference_trials / (m_min + reference_trials))))
    d_min = float(sps.kstwo.isf(thr, en))
    power = (f"KS tests of {m_min} steps against {reference_trials} mechanism rounds at family level {level:g} "
             f"({n_tests} tests) notice only a KS distance of at least {d_min:.2f} between the laws; the "
             "step-by-step check (step_check) is what refuses a substitution")
    return {"mechanism": mechanism, "p_values": pvals, "min_p": min_p, "tests": n_tests, "level": level,
            "threshold": thr, "passed": bool(min_p >= thr), "trials": trials, "reference_trials": reference_trials,
            "min_detectable_ks_distance": d_min, "power": power}


# ---------------------------------------------------------------------------- step by step
#: relative float tolerance of the replayed check: DPSUR steps in float32 (rounding ~1e-7 of the
#: noise's scale) and clips with ``+1e-6`` in the denominator (``utils/dp_optimizer.py:36``, a relative
#: change below 1e-5 at ``||g|| >= C >= 0.1``); a divisor off by one shows up to divisors of 10^4
STEP_RTOL = 1e-4
#: standard errors the residual read-off of a divisor may miss by (per step: a false alarm has
#: probability 2e-9, so under 1e-4 for 40,000 steps)
STEP_Z = 6.0
#: what :func:`normaliser_found` writes for DPSUR's rule when every step matched it
SEPARATE_DRAW = "size of a separate Poisson draw (|B'|)"
#: rows of a chunk checked at once by the replayed check (bounds its temporaries to CHECK_BLOCK x n)
CHECK_BLOCK = 16


def replay_dpsur_draws(model: str, N_data: int, q: float, sigma: float, C: float, seed: int, trials: int,
                       model_seed: int) -> dict:
    """The draws of ``trials`` DPSUR rounds that ``run_steps("dpsur", ..., seed=seed)`` made.

    DPSUR draws from one generator seeded with ``seed``, round by round in the order of
    :func:`paperlib.implementations.dpsur.dpsur_draw` (its own code and paperlib's re-implementation
    alike; :mod:`paperlib.implementations.dpsur_source`). Returns ``{"batch_masks", "divisor_masks"}``
    (bool ``(trials, N_data)``: ``B`` and the separate draw ``B'``) and ``"noise"`` (float64
    ``(trials, n)``, standard normal ``G / (sigma C)`` as DPSUR drew it in float32; 0 where ``B`` is
    empty, as DPSUR draws none).
    """
    return next(_dpsur_draw_blocks(model, N_data, q, sigma, C, seed, trials, model_seed, block=max(1, int(trials))))


def _dpsur_draw_blocks(model: str, N_data: int, q: float, sigma: float, C: float, seed: int, trials: int,
                       model_seed: int, block: int):
    """:func:`replay_dpsur_draws` in consecutive blocks of at most ``block`` rounds (one generator
    throughout, so the blocks concatenated are the draws of all ``trials`` rounds): a chunk's check
    then holds ``block x n`` noise at a time, not ``trials x n``). ``trials = 0``: one empty block."""
    from paperlib.implementations.dpsur import dpsur_draw
    from paperlib.implementations.models import build_model

    shapes = [tuple(p.shape) for p in build_model(model, seed=model_seed).parameters() if p.requires_grad]
    n = sum(int(np.prod(s)) for s in shapes)
    gen = torch.Generator().manual_seed(int(seed))
    for a in range(0, int(trials), int(block)) or [0]:
        k = min(int(block), int(trials) - a)
        bm = np.zeros((k, N_data), dtype=bool)
        dm = np.zeros((k, N_data), dtype=bool)
        noise = np.zeros((k, n), dtype=np.float64)
        for t in range(k):
            d = dpsur_draw(N_data, q, shapes, sigma, C, gen)
            bm[t], dm[t] = d.batch_mask.numpy(), d.divisor_mask.numpy()
            if d.noise is not None:
                noise[t] = d.noise.double().numpy() / (float(sigma) * float(C))
        yield {"batch_masks": bm, "divisor_masks": dm, "noise": noise}


def check_steps(updates, grads_rows, mechanism, q: float, sigma: float, C: float, *, draws: dict | None = None,
                batch_sizes=None, rows_basis=None, rows_projection=None) -> dict:
    """Does every real step divide as ``mechanism`` does for that step's batch? (issue 20, Build 2).

    ``updates`` ``(m, n)``: the steps' outputs (already multiplied by any public output scale), or
    ``None`` for the residual read-off when ``rows_projection`` is given (it is all that method reads);
    ``grads_rows`` ``(N_data, n)``: the per-example gradients of the dataset stepped on (clipped here).

    With ``draws`` (:func:`replay_dpsur_draws`: the steps' batch masks, separate draws and noise),
    each step ``t`` is compared with the mechanism's output for the same batch and noise,
    ``x_t = apply_round(mechanism, ...)`` (:func:`paperlib.mechanisms.sampler.apply_round`): the
    divisor read off the step, ``nu_t = <S_B + G, u_t> / <u_t, u_t>`` (exact for
    ``u_t = (S_B + G) / nu``), must equal the mechanism's within :data:`STEP_RTOL`, the update must
    equal ``x_t`` within ``STEP_RTOL * max|x_t|``, and a no-step release (``u_t = 0``) must
    happen exactly where the mechanism releases 0. Method ``"replayed draws"``.

    Without ``draws`` (an Opacus release: its noise is drawn inside the library) the divisor is
    read off the part of the step orthogonal to the gradients, which holds noise only:
    ``nu_t = sigma C sqrt((n - r) / ||resid_t||^2)``, and must lie within :data:`STEP_Z`
    standard errors (``nu / sqrt(2 (n - r))``) of the mechanism's divisor for the step's
    realised batch size ``batch_sizes[t]``; the update is not compared (``rows_basis``: the
    orthonormal basis of the clipped rows, :func:`white_box_basis` of ``grads_rows``, and
    ``rows_projection``, :func:`project_outputs` of ``updates`` in it, when the caller has them;
    computed here otherwise). Method
    ``"residual read-off"``; ``resolves_adjacent`` says whether that band separates the
    divisors ``nu`` and ``nu + 1`` at the largest divisor seen.

    Returns ``{"steps", "disagreeing", "first_disagreement" (None or {"step", "divisor_read",
    "divisor_mechanism", "update_error"}), "method", "tolerance", "resolves_adjacent",
    "divisor_is_not_batch_size" (steps whose divisor differs from their ``|B|``; replayed draws only)}``.
    """
    mech = Mechanism.parse(mechanism, ANY)
    R = np.asarray(grads_rows, dtype=np.float64)
    if updates is None:
        if draws is not None or rows_projection is None:
            raise ValueError("updates: needed unless the residual read-off is given rows_projection")
        U = None
        m, n = int(np.shape(rows_projection["residual"])[0]), (R.shape[1] if R.ndim == 2 else -1)
    else:
        U = np.asarray(updates, dtype=np.float64)
        m, n = U.shape if U.ndim == 2 else (-1, -1)
    if n < 0 or R.ndim != 2 or n != R.shape[1] or R.shape[0] < 1:
        raise ValueError(f"updates must have shape (m, n) and grads_rows (N_data, n) with the same n, got "
                         f"{None if U is None else U.shape} and {R.shape}")
    rows = mech_mod.clip(torch.as_tensor(R), check_positive(C, "C"))
    N_data = rows.shape[0]
    if draws is not None and any(np.shape(draws[k]) != (m, N_data if k != "noise" else n)
                                 for k in ("batch_masks", "divisor_masks", "noise")):
        raise ValueError(f"draws must hold batch_masks and divisor_masks of shape {(m, N_data)} and noise of "
                         f"shape {(m, n)} (replay_dpsur_draws)")
    if draws is not None:
        ok, nu_read, nu_m, err, not_b, method, tol, resolves = _replayed_check(U, rows, mech, draws, q, sigma, C)
    else:
        ok, nu_read, nu_m, err, not_b, method, tol, resolves = _residual_check(
            U, rows, mech, q, sigma, C, batch_sizes, rows_basis, rows_projection, m, n)
    first = None
    bad = int((~ok).sum())
    if bad:
        t = int(np.flatnonzero(~ok)[0])
        first = {"step": t, "divisor_read": _jsonnum(nu_read[t]), "divisor_mechanism": _jsonnum(nu_m[t]),
                 "update_error": _jsonnum(err[t])}
    return {"steps": int(m), "disagreeing": bad, "first_disagreement": first, "method": method,
            "tolerance": tol, "resolves_adjacent": resolves, "divisor_is_not_batch_size": not_b}


def _replayed_check(U, rows, mech, draws: dict, q, sigma, C) -> tuple:
    """:func:`check_steps` with replayed draws: each step against the mechanism's output for its batch and noise."""
    from paperlib.mechanisms import sampler as S

    m, N_data = U.shape[0], rows.shape[0]
    bm = torch.as_tensor(draws["batch_masks"])
    dm = torch.as_tensor(draws["divisor_masks"]) if mech.draws_divisor else None
    nu_m = np.asarray(S._divisor(mech, N_data, bm, dm, q), dtype=float) * np.ones(m)
    uu, un, err, zero_x = np.empty(m), np.empty(m), np.empty(m), np.empty(m, dtype=bool)
    # blocks of rows: the (block, n) temporaries stay in cache (one (m, n) pass each was memory-bound)
    for a in range(0, m, CHECK_BLOCK):
        b = min(m, a + CHECK_BLOCK)
        Ub = U[a:b]
        x = S.apply_round(mech, rows, bm[a:b], torch.as_tensor(draws["noise"][a:b]), q, sigma, C,
                          None if dm is None else dm[a:b]).numpy()
        noisy = (bm[a:b].double() @ rows).numpy() + float(sigma) * float(C) * draws["noise"][a:b]
        uu[a:b] = np.einsum("ij,ij->i", Ub, Ub)
        un[a:b] = np.einsum("ij,ij->i", noisy, Ub)
        err[a:b] = np.abs(Ub - x).max(axis=1) / np.maximum(np.abs(x).max(axis=1), 1e-300)
        zero_x[a:b] = ~np.any(x != 0, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        nu_read = np.where(uu > 0, un / uu, np.nan)
    zero_u = uu == 0
    ok_div = np.where(zero_x, zero_u, np.abs(nu_read / nu_m - 1) <= STEP_RTOL)
    ok = ok_div & np.where(zero_x, zero_u, err <= STEP_RTOL)
    sizes = bm.sum(dim=1).numpy()
    not_b = int(np.sum(~zero_x & (np.abs(nu_m - np.maximum(sizes, 1)) > 0)))
    return ok, nu_read, nu_m, err, not_b, "replayed draws", f"relative {STEP_RTOL:g} (divisor and update)", True


def _residual_check(U, rows, mech, q, sigma, C, batch_sizes, rows_basis, rows_projection, m: int, n: int) -> tuple:
    """:func:`check_steps` without draws: the divisor read off the noise-only residual of each step."""
    N_data = rows.shape[0]
    if batch_sizes is None:
        raise ValueError("batch_sizes: the residual read-off needs each step's realised |B|")
    # span of the dataset's clipped rows
    basis = np.linalg.qr(rows.numpy().T, mode="reduced")[0] if rows_basis is None else np.asarray(rows_basis)
    if basis.shape[0] != n:
        raise ValueError(f"rows_basis must have shape (n={n}, r), got {basis.shape}")
    r = basis.shape[1]
    if n - r < 1:
        raise ParameterError("n", f"n: the residual read-off needs n > N_data (n = {n}, N_data = {N_data})")
    proj = project_outputs(U, basis) if rows_projection is None else rows_projection
    res = np.maximum(proj["residual"], 1e-300)
    nu_read = float(sigma) * float(C) * np.sqrt((n - r) / res)
    nu_m = np.asarray(mech.normaliser(N_data, np.asarray(batch_sizes), q), dtype=float)
    nu_m = nu_m * np.ones(m)
    rel = STEP_Z / math.sqrt(2.0 * (n - r))
    ok = np.abs(nu_read / nu_m - 1) <= rel
    err = np.full(m, np.nan)
    method, tol = "residual read-off", f"{STEP_Z:g} standard errors (relative {rel:.3g})"
    return ok, nu_read, nu_m, err, None, method, tol, bool(rel * (1 + float(np.nanmax(nu_m))) < 0.5)


def _merge_step_checks(parts: list, offsets: list) -> dict:
    """One summary of :func:`check_steps` over consecutive chunks (step numbers counted across them)."""
    out = dict(parts[0])
    out["steps"] = sum(p["steps"] for p in parts)
    out["disagreeing"] = sum(p["disagreeing"] for p in parts)
    out["resolves_adjacent"] = all(p["resolves_adjacent"] for p in parts)
    nb = [p["divisor_is_not_batch_size"] for p in parts]
    out["divisor_is_not_batch_size"] = None if any(v is None for v in nb) else int(sum(nb))
    out["first_disagreement"] = None
    for p, off in zip(parts, offsets):
        if p["first_disagreement"] is not None:
            out["first_disagreement"] = dict(p["first_disagreement"], step=off + p["first_disagreement"]["step"])
            break
    return out


# ---------------------------------------------------------------------------- the audit
def _jsonnum(x):
    x = float(x)
    return x if math.isfinite(x) else None


def _sub_seed(seed: int, *keys: int) -> int:
    return int(np.random.SeedSequence([int(seed), *[int(k) for k in keys]]).generate_state(1)[0])


def points_sha256(X, y) -> str:
    """SHA-256 (hex) of the points an audit uses: shapes, dtypes and bytes of images and labels."""
    h = hashlib.sha256()
    for t in (X, y):
        a = np.ascontiguousarray(t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t))
        h.update(f"{a.dtype.str}{a.shape}".encode("ascii"))
        h.update(a.tobytes())
    return h.hexdigest()


def _load_points(datasets, dataset: str, model: str, k: int, seed: int, root, download: bool = False):
    """``datasets.load_points``; ``"synthetic"`` points take the model's input shape.

    The loader's synthetic points have MNIST's shape; for a model with another input
    (``cnn-cifar10``: 3 x 32 x 32) the same recipe is applied here at that shape: uniform
    pixels in [0, 1] from ``seed``, normalised with CIFAR-10's constants, uniform labels.
    """
    from paperlib.implementations.models import MODEL_INPUT

    shape = tuple(MODEL_INPUT[model])
    if dataset == "synthetic" and shape != tuple(datasets.DATASET_SHAPES["synthetic"]):
        g = torch.Generator().manual_seed(int(seed))
        pixels = torch.rand((k, *shape), generator=g, dtype=torch.float32)
        labels = torch.randint(0, 10, (k,), generator=g, dtype=torch.int64)
        mean, std = datasets.NORMALIZATION["cifar10"]
        m = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
        sd = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
        return (pixels - m) / sd, labels
    X, y = datasets.load_points(dataset, k, seed, root=root, download=download)
    if tuple(X.shape[1:]) != shape:
        raise ParameterError("model", f"model {model!r} takes inputs of shape {shape}, dataset {dataset!r} has {tuple(X.shape[1:])}")
    return X, y


def _normaliser_summary(found: dict) -> str:
    """One string for the normalisers found on D and D' (``"Nq"`` and ``"floor(Nq)"`` are
    the same rule where ``N q`` is an integer, so they are merged there)."""
    sets, kinds = [], {}
    for ds, f in found.items():
        k = f.get("normaliser", f.get("kind")) if isinstance(f, dict) else None
        kinds[ds] = k
        c = (f.get("candidates") or {}) if isinstance(f, dict) else {}
        same = k in ("Nq", "floor(Nq)") and c.get("Nq") is not None and c.get("Nq") == c.get("floor(Nq)")
        sets.append({"Nq", "floor(Nq)"} if same else {k})
    common = set.intersection(*sets) if sets else set()
    if len(common) == 1:
        return str(common.pop())
    if common == {"Nq", "floor(Nq)"}:
        return "Nq = floor(Nq)"
    return ", ".join(f"{ds}: {k}" for ds, k in kinds.items())


def _fmt(x) -> str:
    return "nothing (no step)" if x is None else f"{x:.6g}"


def _check_chunk(implementation, model, updates, rows, mechanism, q, sigma, C, step_seed, model_seed, batch_sizes,
                 rows_basis=None, rows_projection=None):
    """:func:`check_steps` of one :func:`runners.run_steps` call (DPSUR's draws replayed from its seed)."""
    if implementation == "dpsur":  # replayed block by block: the noise of CHECK_BLOCK rounds at a time
        parts, offsets = [], []
        for i, draws in enumerate(_dpsur_draw_blocks(model, rows.shape[0], q, sigma, C, step_seed, updates.shape[0],
                                                      model_seed, CHECK_BLOCK)):
            a = i * CHECK_BLOCK
            parts.append(check_steps(updates[a:a + CHECK_BLOCK], rows, mechanism, q, sigma, C, draws=draws))
            offsets.append(a)
        return _merge_step_checks(parts, offsets)
    return check_steps(updates, rows, mechanism, q, sigma, C, batch_sizes=batch_sizes, rows_basis=rows_basis,
                       rows_projection=rows_projection)


def reduce_shared(grads, N: int, C: float, basis=None) -> dict:
    """The read-only inputs of :func:`reduce_chunk`, sent to each worker once: ``grads``
    (``(N + 1, n)``), ``N``, ``basis`` (:func:`white_box_basis` of all rows; pass it when already
    computed), ``basis_D`` (of the first ``N``), ``both`` (the two side by side, ``(n, r + r_D)``:
    what a step on D is projected on, :func:`step_options`) and ``key`` (a content key of the
    gradients, ``N`` and ``C``, which fix the bases: a process converts a basis once per key)."""
    grads = np.asarray(grads, dtype=np.float64)
    basis = white_box_basis(grads, C) if basis is None else np.asarray(basis, dtype=np.float64)
    basis_D = white_box_basis(grads[:N], C)
    h = hashlib.sha256(np.ascontiguousarray(grads).tobytes())
    h.update(f"|{int(N)}|{float(C)!r}|{grads.shape}".encode())
    return {"grads": grads, "N": int(N), "basis": basis, "basis_D": basis_D,
            "both": np.ascontiguousarray(np.concatenate([basis, basis_D], axis=1)), "key": h.hexdigest()}


def step_options(args: dict, shared: dict) -> dict:
    """The keywords :func:`runners.run_steps` gets for a chunk reduced by :func:`reduce_chunk`
    (passed with :func:`reduce_chunk` to ``parallel.run_chunks``): ``project`` (each step projected
    where it ran, :class:`opacus_step.StepProjection`: on D on ``basis`` and ``basis_D`` side by side, on
    D' on ``basis``; scaled by ``args["scale"]``; the first ``args["keep"]`` updates kept whole). None
    for ``"dpsur"``, whose replayed check needs every update whole."""
    if args["implementation"] == "dpsur":
        return {}
    D = args["ds"] == "D"
    return {"project": {"basis": shared["both"] if D else shared["basis"], "key": f"{shared['key']}:{args['ds']}",
                        "scale": float(args["scale"]), "keep": int(args["keep"])}}


def reduce_args(implementation: str, model: str, mechanism, q: float, sigma: float, C: float, ds: str, m: int,
                n: int, step_seed: int, model_seed: int, keep: int, scale: float = 1.0) -> dict:
    """The per-chunk inputs of :func:`reduce_chunk` (its docstring names them)."""
    return dict(implementation=implementation, model=model, mechanism=mechanism, q=q, sigma=sigma, C=C, ds=ds,
                m=int(m), n=int(n), scale=scale, step_seed=int(step_seed), model_seed=int(model_seed), keep=int(keep))


def reduce_chunk(out: dict, args: dict, shared: dict) -> dict:
    """What an audit keeps of one chunk of real steps, computed where the chunk ran
    (:func:`paperlib.implementations.parallel.run_chunks` with ``reduce=``), so that only this
    comes back to the audit, not the chunk's ``(m, n)`` updates.

    ``args`` (:func:`reduce_args`): ``implementation``, ``model``, ``mechanism``, ``q``, ``sigma``, ``C``, ``ds``
    (``"D"`` or ``"D'"``), ``m`` and ``n`` (the expected shape), ``scale`` (the public output
    scale), ``step_seed`` and ``model_seed`` (to replay DPSUR's draws), ``keep`` (how many of the
    first updates to return, for :func:`~paperlib.implementations.normaliser_detection.detect_normaliser`). ``shared`` (:func:`reduce_shared`): ``grads``
    (``(N + 1, n)`` per-example gradients), ``N``, ``basis`` (:func:`white_box_basis` of all of
    them) and ``basis_D`` (of the first ``N``).

    ``out`` holds either the ``(m, n)`` updates (``"dpsur"``) or, for the Opacus implementations,
    their projection made where the steps ran (``out["projected"]``, asked for by
    :func:`step_options`, which ``parallel.run_chunks`` passes to the steps):
    the same quantities, without carrying the updates out of the step loop.

    Returns ``{"coords", "residual"}`` (:func:`project_outputs` of the scaled updates),
    ``step_check`` (:func:`check_steps`), ``first`` (the first ``keep`` unscaled updates) and the
    chunk's ``seconds``, ``implementation``, ``version``, ``normaliser_rule``, ``notes`` and ``device``.
    Raises RuntimeError when the updates (or projections) do not have ``m`` rows of ``n`` parameters.
    """
    m, n = int(args["m"]), int(args["n"])
    D = args["ds"] == "D"
    rows = shared["grads"][:shared["N"]] if D else shared["grads"]
    rows_basis = shared["basis_D"] if D else shared["basis"]
    if out.get("projected") is not None:  # projected where the steps ran (step_options)
        p = out["projected"]
        r = shared["basis"].shape[1]
        if p["coords"].shape != (m, r + (rows_basis.shape[1] if D else 0)) or int(p["n"]) != n:
            raise RuntimeError(f"run_steps returned projections of shape {p['coords'].shape} (n = {p['n']}), "
                               f"expected {m} rows of n = {n}")
        proj = {"coords": p["coords"][:, :r], "residual": _residual(p["sq_norm"], p["coords"][:, :r], n)}
        rows_proj = {"residual": _residual(p["sq_norm"], p["coords"][:, r:], n)} if D else proj
        check = check_steps(None, rows, args["mechanism"], args["q"], args["sigma"], args["C"],
                            batch_sizes=out.get("batch_sizes"), rows_basis=rows_basis, rows_projection=rows_proj)
        red = dict(proj, step_check=check, first=np.asarray(p["first"]))
    else:
        upd = np.asarray(out["updates"])
        if upd.shape != (m, n):
            raise RuntimeError(f"run_steps returned updates of shape {upd.shape}, expected {(m, n)}")
        scaled = upd * args["scale"] if args["scale"] != 1.0 else upd
        proj = project_outputs(scaled, shared["basis"])  # on D' also the residual read-off's (same rows, same basis)
        check = _check_chunk(args["implementation"], args["model"], scaled, rows, args["mechanism"], args["q"],
                             args["sigma"], args["C"], args["step_seed"], args["model_seed"], out.get("batch_sizes"),
                             rows_basis=rows_basis, rows_projection=None if D else proj)
        red = dict(proj, step_check=check, first=np.array(upd[:max(0, int(args["keep"]))]))
    for k in ("seconds", "step_seconds", "startup_seconds", "implementation", "version", "normaliser_rule", "notes",
              "device"):
        red[k] = out.get(k)
    return red




def normaliser_found(mechanism, normaliser: dict, steps_check: dict) -> str:
    """What the code divides by, in words, for the result's ``normaliser_found``.

    DPSUR's rule (:attr:`Mechanism.draws_divisor`) is named :data:`SEPARATE_DRAW` when every real
    step's divisor, read off with the replayed draws, is that of the separate draw
    (:func:`check_steps`); otherwise the rule :func:`~paperlib.implementations.normaliser_detection.detect_normaliser` found (of ``N q``,
    ``floor(N q)``, ``|B|``) on D and D', with the count of steps that disagree with ``mechanism``.
    """
    mech = Mechanism.parse(mechanism, ANY)
    bad = sum(c["disagreeing"] for c in steps_check.values())
    replayed = all(c["method"] == "replayed draws" for c in steps_check.values())
    if mech.draws_divisor and replayed and bad == 0:
        return SEPARATE_DRAW
    found = _normaliser_summary(normaliser)
    return found if bad == 0 else f"{found} ({bad} real steps disagree with {mech.title}'s rule)"


def audit_implementation(implementation: str, model: str, dataset: str, *, N: int, q: float, sigma: float,
                         C: float, trials: int, seed: int = 0, mode: str = "quick",
                         distinguishers=("optimal", "normality"), delta: float = 1e-5,
                         check_trials: int | None = None, progress: bool = True, reference_trials: int = 20_000,
                         check_level: float = CHECK_LEVEL, cache=None, data_root=None, points="folder",
                         batch_size: int | None = None, workers: int | None = None,
                         scheduler: str | None = None) -> "ImplementationAudit":
    """Audit one step of a real DP-SGD implementation on ``N + 1`` random points (see the module docstring).

    ``implementation``: one of :data:`runners.IMPLEMENTATIONS`; ``model``: one of :data:`MODELS` (built at
    ``seed``); ``dataset``: one of :data:`DATASETS` (``N + 1`` points drawn with ``seed``); ``N, q, sigma, C``:
    ``|D|`` (``|D'| = N + 1``), sampling rate, noise multiplier, clipping norm; ``trials``: counted rounds (half
    on D, half on D'; as many again calibrate the threshold); ``mode``: ``"quick"`` (checked implementation
    steps + batched mechanism) or ``"full"`` (every round an implementation step); ``check_trials``:
    implementation steps per dataset in quick mode (default ``min(200, trials // 2)``); ``reference_trials``:
    mechanism rounds per dataset the check compares with; ``cache``: None or a result store with ``key``,
    ``load`` and ``save`` (:class:`paperlib.artifact.provenance.ResultCache`; the key covers every argument,
    the resolved data folder and :func:`points_sha256`); ``data_root``: the datasets folder (default
    ``$PAPERLIB_DATA`` or ``<repo>/data``; only full mode downloads); ``points``: ``"folder"`` or ``"bundled"``
    (the real points shipped with the package); ``batch_size``: the public constant ``"opacus-installed+fix"``
    divides by (then the audit is SGM's, and the result holds ``divisor_measured``); ``workers``,
    ``scheduler``: where the steps run (:func:`paperlib.implementations.parallel.run_chunks`; bitwise the same
    result for any, so not in the cache key); ``progress``: a tqdm bar on stderr.

    Returns an :class:`ImplementationAudit` (its fields: what ran, the normaliser found, each real step's
    check, per-distinguisher ``fpr``/``fnr``/CIs/``eps_lower``/``violation``, ``eps_claimed``, costs and
    ``inputs``); :meth:`ImplementationAudit.to_json` is its one dict form. Raises ValueError for bad input, ``DatasetUnavailable`` when the data cannot be
    had, :class:`ImplementationMismatch` when the quick check fails.
    """
    s = _audit_setting(implementation, model, dataset, N=N, q=q, sigma=sigma, C=C, trials=trials, seed=seed,
                       mode=mode, distinguishers=distinguishers, delta=delta, check_trials=check_trials,
                       batch_size=batch_size, workers=workers, scheduler=scheduler, points=points)
    t0 = time.perf_counter()
    X, y, bundle, drawn, data_key = _audit_points(s, data_root)
    params = _cache_params(s, X, y, data_key, reference_trials=reference_trials, check_level=check_level)
    if cache is not None:
        name = "real_audit_" + cache.key(params)
        hit = cache.load(name, params)
        if isinstance(hit, dict):
            try:
                return ImplementationAudit.from_json(dict(hit, cached=True))
            except TypeError:  # a stored audit of another layout (fields missing): computed again, never half-read
                pass
    from paperlib.implementations import runners

    grads = np.asarray(runners.per_example_gradients(model, X, y, seed=s["seed"]), dtype=np.float64)  # theta_0
    if grads.shape[0] != s["N"] + 1:
        raise RuntimeError(f"per_example_gradients returned {grads.shape[0]} rows, expected N + 1 = {s['N'] + 1}")
    steps = _RealSteps(s, X, y, grads, progress=progress, workers=workers, scheduler=scheduler)
    if mode == "full":
        outputs, check, path = _full_outputs(s, steps), None, "implementation"
    else:
        outputs, check = _quick_outputs(s, steps, reference_trials=reference_trials, check_level=check_level)
        path = "implementation-checked + mechanism"
    res = audit_outputs(grads, s["mechanism"], s["q"], s["sigma"], s["C"], outputs, distinguishers=s["dists"],
                        delta=s["delta"], seed=s["seed"], data=f"{dataset} ({model} gradients at theta_0)", source=path)
    wall = time.perf_counter() - t0
    data = _audit_record(s, steps, res, check=check, path=path, wall=wall)
    audit = ImplementationAudit(**data, points_sha256=params["points_sha256"], inputs=audit_inputs(
        implementation, dataset, version=steps.info.get("version"), bundle=bundle, drawn=drawn,
        real_rounds=steps.count, rounds=2 * s["trials"]))
    if cache is not None:
        cache.save(name, params, audit.to_json(), seed=s["seed"], wall_time=wall)
    return audit


def _audit_setting(implementation, model, dataset, *, N, q, sigma, C, trials, seed, mode, distinguishers, delta,
                   check_trials, batch_size, workers, scheduler, points) -> dict:
    """Every argument of :func:`audit_implementation` checked once (ValueError naming it), and what follows."""
    if implementation not in DOCUMENTED_MECHANISM:
        raise ParameterError("implementation", f"implementation must be one of {tuple(DOCUMENTED_MECHANISM)}, got {implementation!r}")
    if model not in MODELS:
        raise ParameterError("model", f"model must be one of {MODELS}, got {model!r}")
    if dataset not in DATASETS:
        raise ParameterError("dataset", f"dataset must be one of {DATASETS}, got {dataset!r}")
    if mode not in MODES:
        raise ParameterError("mode", f"mode must be one of {MODES}, got {mode!r}")
    N = check_int(N, "N", 1)
    q = check_rate(q)
    sigma = check_positive(sigma, "sigma")
    C = check_positive(C, "C")
    trials = check_int(trials, "trials", 2)
    delta = check_delta(delta)
    mechanism = DOCUMENTED_MECHANISM[implementation]
    from paperlib.implementations.runners import output_scale

    scale = output_scale(implementation, batch_size)  # 1 except for the fix (validates batch_size)
    if mechanism.divides_by_zero(N, q):
        raise ParameterError("q", f"q: floor(N*q) = floor({N}*{q}) = 0, so {implementation} ({mechanism}) divides by zero on D; "
                         "choose N*q >= 1")
    if mode == "quick" and trials < 20:  # the check needs 10 implementation steps per dataset
        raise ParameterError("trials", f"trials must be >= 20 in quick mode (10 checked implementation steps per dataset), "
                         f"got {trials}")
    if mode == "quick":
        if check_trials is None:
            check_trials = min(200, trials // 2)
        check_trials = min(check_int(check_trials, "check_trials", 10), trials // 2)
    else:  # full mode checks nothing: every round is an implementation step
        check_trials = 0
    seed = check_seed(seed)
    from paperlib.implementations import parallel

    parallel.resolve_workers(workers)  # bad values fail here, before any work
    parallel.resolve_scheduler(scheduler, dask_config=False)
    if points not in ("folder", "bundled"):
        raise ValueError(f"points must be 'folder' or 'bundled', got {points!r}")
    half = (trials // 2, trials - trials // 2)
    return {"implementation": implementation, "model": model, "dataset": dataset, "N": N, "q": q, "sigma": sigma,
            "C": C, "trials": trials, "delta": delta, "mechanism": mechanism, "scale": scale, "mode": mode,
            "check_trials": check_trials, "seed": int(seed), "dists": list(distinguishers), "points": points,
            "halves": {"cal": half, "count": half}, "batch_size": batch_size}


def _audit_points(s: dict, data_root):
    """``(X, y, bundle, drawn, data_key)``: the ``N + 1`` points, where they came from, and the cache's data key.

    The points come first: the cache key holds the folder they came from and their hash, so a result is
    reused only for the same data, and a missing dataset fails before the cache."""
    from paperlib.implementations import datasets  # imported here: the runners pull in torch models and Opacus

    dataset, model, N, seed = s["dataset"], s["model"], s["N"], s["seed"]
    root, bundle, drawn = None, None, None
    if dataset != "synthetic" and s["points"] == "folder":
        root = Path(data_root if data_root is not None else datasets.data_root()).expanduser().resolve()
    if dataset != "synthetic" and s["points"] == "bundled":
        X, y, bundle = datasets.load_bundled(dataset, N + 1, seed)
        from paperlib.implementations.models import MODEL_INPUT

        if tuple(X.shape[1:]) != tuple(MODEL_INPUT[model]):
            raise ParameterError("model", f"model {model!r} takes inputs of shape {tuple(MODEL_INPUT[model])}, dataset "
                             f"{dataset!r} has {tuple(X.shape[1:])}")
        data_key = f"bundled:{bundle['file']}:{bundle['sha256']}"
    else:
        X, y = _load_points(datasets, dataset, model, N + 1, seed, root, download=(s["mode"] == "full"))
        data_key = None if root is None else str(root)
        if root is not None:
            drawn = datasets.drawn_indices(dataset, N + 1, seed, root=root)
    return X, y, bundle, drawn, data_key


def _cache_params(s: dict, X, y, data_key, *, reference_trials: int, check_level: float) -> dict:
    """The parameters a result is cached under (every argument, the data folder and the points' hash)."""
    quick = s["mode"] == "quick"
    params = {"kind": "real_audit", "data_root": data_key,
              "points_sha256": points_sha256(X, y), "version": REAL_AUDIT_VERSION, "audit_version": AUDIT_VERSION,
              "implementation": s["implementation"], "model": s["model"], "dataset": s["dataset"], "N": s["N"],
              "q": s["q"], "sigma": s["sigma"], "C": s["C"], "trials": s["trials"], "seed": s["seed"],
              "mode": s["mode"], "distinguishers": s["dists"], "delta": s["delta"],
              "check_trials": s["check_trials"] if quick else None,
              "reference_trials": reference_trials if quick else None,
              "check_level": check_level if quick else None}
    if s["batch_size"] is not None:  # only for the fix, so the other results keep their keys
        params["batch_size"] = int(s["batch_size"])
    return params


class _RealSteps:
    """The implementation's real steps of one audit: run in chunks (on Dask workers), each reduced where it ran
    (projection on the white-box basis, step check, first updates), with what they cost."""

    def __init__(self, s: dict, X, y, grads, *, progress: bool, workers, scheduler):
        from tqdm import tqdm

        self.s, self.X, self.y, self.grads = s, X, y, grads
        self.workers, self.scheduler = workers, scheduler
        self.n = int(grads.shape[1])
        self.basis = white_box_basis(grads, s["C"])
        self.step_kw = {"q": s["q"], "sigma": s["sigma"], "C": s["C"]}
        if s["implementation"] == "dpsur":  # DPSUR's own source is fetched in full mode only (network)
            self.step_kw["source_download"] = s["mode"] == "full"
        if s["batch_size"] is not None:
            self.step_kw["batch_size"] = int(s["batch_size"])
        self.info: dict = {}
        self.loop_seconds, self.count, self.setups = 0.0, 0, []
        self.checks: dict = {"D": [], "D'": []}
        self.offsets: dict = {"D": [], "D'": []}
        self.first: dict = {}
        total = 2 * s["trials"] if s["mode"] == "full" else 2 * s["check_trials"]
        # (the chunk also fixes the sub-seeds of the steps: never made to depend on the bar)
        self.chunk = chunk_steps(s["implementation"], self.n)
        self.bar = tqdm(total=total, desc=f"{s['implementation']} steps", unit="step", disable=not progress,
                        leave=False, file=sys.stderr)
        self.keep_total = max(20, min(200, CHUNK_ELEMENTS // max(self.n, 1)))  # first steps kept for detection
        # large read-only inputs of every chunk's reduction: sent to each worker once
        self.shared = reduce_shared(grads, s["N"], s["C"], basis=self.basis)

    def projected(self, counts: dict) -> dict:
        """{ds: steps} -> {ds: projected block}; the chunks of both datasets run in parallel and are
        reduced where they ran (paperlib.implementations.parallel: the same bits for any worker count)."""
        from paperlib.implementations import parallel

        s, chunk, seed = self.s, self.chunk, self.s["seed"]
        ds_names = {"D": "D", "D'": "Dprime"}
        # (dataset, its index, chunk number, first step of the chunk, steps in it)
        labels = [(ds, index, part, done, min(chunk, count - done)) for index, (ds, count) in enumerate(counts.items())
                  for part, done in enumerate(range(0, count, chunk))]
        calls = [dict(implementation=s["implementation"], model_name=s["model"], X=self.X, y=self.y,
                      dataset=ds_names[ds], trials=m, seed=_sub_seed(seed, index, part), model_seed=seed,
                      progress=False, **self.step_kw)
                 for ds, index, part, _, m in labels]
        args = [reduce_args(s["implementation"], s["model"], s["mechanism"], s["q"], s["sigma"], s["C"], ds, m,
                            self.n, _sub_seed(seed, index, part), seed, min(m, max(0, self.keep_total - done)),
                            scale=s["scale"])
                for ds, index, part, done, m in labels]
        blocks = {ds: [] for ds in counts}
        for (ds, index, part, done, m), out in zip(labels, parallel.run_chunks(
                calls, workers=self.workers, scheduler=self.scheduler, bar=self.bar, reduce=reduce_chunk,
                reduce_args=args, shared=self.shared, step_options=step_options)):
            self._record(ds, done, m, out)
            blocks[ds].append({"coords": out["coords"], "residual": out["residual"]})
        return {ds: _concat(b) for ds, b in blocks.items()}

    def _record(self, ds: str, done: int, m: int, out: dict) -> None:
        """Keep a reduced chunk's costs, step check, first updates and the implementation's own description."""
        loop = float(out.get("step_seconds") or 0.0)
        self.loop_seconds += loop
        self.setups.append(max(float(out.get("seconds") or 0.0) - loop - float(out.get("startup_seconds") or 0.0),
                               0.0))
        self.checks[ds].append(out["step_check"])
        self.offsets[ds].append(done)
        self.count += m
        for k in ("implementation", "version", "normaliser_rule", "notes", "device"):
            self.info.setdefault(k, out.get(k))
        if out["first"].shape[0]:
            self.first[ds] = out["first"] if ds not in self.first else np.concatenate([self.first[ds], out["first"]])

    def detect(self, ds: str) -> dict:
        """:func:`~paperlib.implementations.normaliser_detection.detect_normaliser` on the first updates of ``ds`` (an error is reported, not raised)."""
        from paperlib.implementations.normaliser_detection import detect_normaliser

        s = self.s
        N = s["N"]
        rows = self.grads[:N] if ds == "D" else self.grads
        try:
            f = detect_normaliser(self.first[ds], rows, q=s["q"], sigma=s["sigma"], C=s["C"],
                                  N_data=N if ds == "D" else N + 1)
        except Exception as exc:  # report, do not fail the audit on a diagnostic
            return {"normaliser": None, "error": f"{type(exc).__name__}: {exc}"}
        keep = ("normaliser", "mechanism", "agreement", "nu_hat_mean", "candidates", "log_likelihood", "trials",
                "nonfinite_trials", "rank")
        return {k: f.get(k) for k in keep}

    def findings(self) -> tuple[dict, dict]:
        """``(normaliser, steps_check)`` per dataset: what the steps were divided by, and the step-by-step check."""
        normaliser = {ds: self.detect(ds) for ds in ("D", "D'")}
        steps_check = {ds: _merge_step_checks(self.checks[ds], self.offsets[ds]) for ds in ("D", "D'")}
        self.normaliser, self.steps_check = normaliser, steps_check
        return normaliser, steps_check


def _full_outputs(s: dict, steps: _RealSteps) -> dict:
    """Full mode: every calibration and counted round of both datasets is a real step."""
    halves = s["halves"]
    outputs = {"cal": {}, "count": {}}
    try:
        blks = steps.projected({ds: halves["cal"][i] + halves["count"][i] for i, ds in enumerate(("D", "D'"))})
        for i, ds in enumerate(("D", "D'")):
            cal_n, blk = halves["cal"][i], blks[ds]
            outputs["cal"][ds] = {"coords": blk["coords"][:cal_n], "residual": blk["residual"][:cal_n]}
            outputs["count"][ds] = {"coords": blk["coords"][cal_n:], "residual": blk["residual"][cal_n:]}
    finally:
        steps.bar.close()
    steps.findings()
    return outputs


def _quick_outputs(s: dict, steps: _RealSteps, *, reference_trials: int, check_level: float) -> tuple[dict, dict]:
    """Quick mode: ``check_trials`` real steps per dataset, checked step by step and against the mechanism
    (:class:`ImplementationMismatch` otherwise), then the batched mechanism fills the other rounds."""
    implementation, mechanism, check_trials = s["implementation"], s["mechanism"], s["check_trials"]
    grads, basis, seed, halves = steps.grads, steps.basis, s["seed"], s["halves"]
    q, sigma, C = s["q"], s["sigma"], s["C"]
    try:
        impl_blocks = steps.projected({"D": check_trials, "D'": check_trials})
    finally:
        steps.bar.close()
    normaliser, steps_check = steps.findings()
    for ds in ("D", "D'"):  # first check: every real step divides as the substituted mechanism does
        f = steps_check[ds]["first_disagreement"]
        if f is not None:
            raise ImplementationMismatch(
                f"{implementation}: real step {f['step']} on {ds} divides by {_fmt(f['divisor_read'])}, "
                f"{mechanism.title}'s rule by {_fmt(f['divisor_mechanism'])} for that step's batch "
                f"({steps_check[ds]['disagreeing']} of {steps_check[ds]['steps']} steps disagree); "
                "substitution refused, not audited", check={"steps": steps_check}, normaliser=normaliser)
    check = check_outputs(impl_blocks, grads, mechanism, q, sigma, C, reference_trials=reference_trials,
                          level=check_level, seed=_sub_seed(seed, 7))
    if not check["passed"]:
        raise ImplementationMismatch(
            f"{implementation}: its steps do not match {mechanism.upper()} on these gradients "
            f"(smallest KS p-value {check['min_p']:.3g} < {check['threshold']:.3g}; normaliser found: "
            f"{_normaliser_summary(normaliser)}); not audited", check=check, normaliser=normaliser)
    gen = torch.Generator().manual_seed(int(seed))
    outputs = {"cal": {}, "count": {}}
    for i, ds in enumerate(("D", "D'")):
        outputs["cal"][ds] = _mechanism_projected(mechanism, grads, basis, q, sigma, C, ds, halves["cal"][i], gen)
    for i, ds in enumerate(("D", "D'")):
        rest = halves["count"][i] - check_trials
        parts = [impl_blocks[ds]]
        if rest > 0:
            parts.append(_mechanism_projected(mechanism, grads, basis, q, sigma, C, ds, rest, gen))
        outputs["count"][ds] = _concat(parts)
    return outputs, check


@dataclass
class ImplementationAudit:
    """One audit of a real implementation's step (:func:`audit_implementation`), field by field.

    What ran: ``implementation``, ``version`` (the Opacus release, DPSUR's commit or ``"paperlib"``), ``model``,
    ``dataset``, ``model_info`` (size, architecture, source), ``N`` (``|D|``), ``n`` (parameters), ``q``,
    ``sigma``, ``C``, ``delta``, ``seed``, ``mode`` (``"quick"``/``"full"``), ``mechanism`` (documented),
    ``normaliser_rule``, ``implementation_notes``, ``step_device``, ``path`` (``"implementation"`` or
    ``"implementation-checked + mechanism"``), ``inputs`` (:func:`audit_inputs`: data, code, real rounds),
    ``points_sha256``. The normaliser: ``normaliser`` (detected per data set), ``normaliser_found`` (one
    line), ``step_check`` (each real step against its mechanism), ``real_steps_disagreeing``, ``check``
    (quick mode's two-sample check, None in full mode). The audit: ``claim`` (what is audited against),
    ``trials``, ``calibration_trials``, ``implementation_steps``, per distinguisher ``fpr``, ``fnr``,
    ``fpr_ci``, ``fnr_ci``, ``eps_lower``, ``violation`` (``eps_lower > eps_claimed``) and ``results``
    (the game's whole result), ``eps_claimed``. Costs: ``seconds``, ``seconds_per_step``, ``seconds_per_call``,
    ``full_mode_estimate_s``; ``cached`` (read from the result cache). The fix only (``batch_size`` given):
    ``batch_size`` and ``divisor_measured``.
    """

    implementation: str
    version: Any
    model: str
    dataset: str
    model_info: dict
    N: int
    n: int
    q: float
    sigma: float
    C: float
    delta: float
    seed: int
    mode: str
    mechanism: Any
    normaliser_rule: Any
    implementation_notes: Any
    step_device: Any
    normaliser: dict
    normaliser_found: str
    step_check: dict
    real_steps_disagreeing: int
    claim: str
    path: str
    check: dict | None
    trials: int
    calibration_trials: int
    implementation_steps: int
    fpr: dict
    fnr: dict
    fpr_ci: dict
    fnr_ci: dict
    eps_lower: dict
    violation: dict
    eps_claimed: float | None
    results: dict
    seconds: float
    seconds_per_step: float | None
    seconds_per_call: float | None
    full_mode_estimate_s: float | None
    cached: bool = False
    batch_size: int | None = None
    divisor_measured: dict | None = None
    points_sha256: str | None = None
    inputs: dict | None = None

    def to_json(self) -> dict:
        """The audit as a dict of JSON values (the result file's and the command line's form); the fix's
        ``batch_size`` and ``divisor_measured`` only where a batch size was given."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if not (f.name in ("batch_size", "divisor_measured") and self.batch_size is None)}

    @classmethod
    def from_json(cls, data: dict) -> "ImplementationAudit":
        """The audit from its :meth:`to_json` form (a result file read back)."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


def _audit_record(s: dict, steps: _RealSteps, res: dict, *, check, path: str, wall: float) -> dict:
    """The audit's fields (:class:`ImplementationAudit`), before ``points_sha256`` and ``inputs`` join them."""
    from paperlib.implementations.models import model_info

    trials, mechanism, normaliser, steps_check = s["trials"], s["mechanism"], steps.normaliser, steps.steps_check
    per_step = steps.loop_seconds / steps.count if steps.count else float("nan")
    per_call = min(steps.setups) if steps.setups else float("nan")  # the least: a cold first call is not the rule
    full_rounds = 2 * trials  # calibration + counted, both datasets
    full_calls = 2 * math.ceil(trials / steps.chunk)  # each dataset's trials steps, in chunks as full mode cuts them
    results = {label: r.to_dict() for label, r in res.items()}
    eps_claimed = float(sgm_claim(s["q"], s["sigma"]).epsilon(s["delta"]))
    info = steps.info
    data = {
        "implementation": s["implementation"], "version": info.get("version"), "model": s["model"],
        "dataset": s["dataset"],
        "model_info": model_info(s["model"]),  # size, architecture and its source, for the grade
        "N": s["N"], "n": steps.n, "q": s["q"], "sigma": s["sigma"], "C": s["C"], "delta": s["delta"],
        "seed": s["seed"], "mode": s["mode"],
        "mechanism": mechanism, "normaliser_rule": info.get("normaliser_rule"),
        "implementation_notes": info.get("notes"),
        "step_device": info.get("device"),  # where the real steps ran (runners.step_device)
        "normaliser": normaliser, "normaliser_found": normaliser_found(mechanism, normaliser, steps_check),
        "step_check": steps_check,
        "real_steps_disagreeing": int(sum(c["disagreeing"] for c in steps_check.values())),
        "claim": "SGM (the privacy analysis at q, sigma and delta, which every audited code relies on)",
        "path": path, "check": check, "trials": trials, "calibration_trials": trials,
        "implementation_steps": steps.count,
        "fpr": {k: r["fpr"] for k, r in results.items()}, "fnr": {k: r["fnr"] for k, r in results.items()},
        "fpr_ci": {k: r["fpr_ci"] for k, r in results.items()}, "fnr_ci": {k: r["fnr_ci"] for k, r in results.items()},
        "eps_lower": {k: r["eps_lower"] for k, r in results.items()},
        "violation": {k: bool(r["eps_lower"] > eps_claimed) for k, r in results.items()},
        "eps_claimed": _jsonnum(eps_claimed), "results": results,
        "seconds": wall, "seconds_per_step": _jsonnum(per_step), "seconds_per_call": _jsonnum(per_call),
        "full_mode_estimate_s": _jsonnum(per_step * full_rounds + per_call * full_calls),
        "cached": False,
    }
    if s["batch_size"] is not None:
        data.update(_fix_divisor(s["batch_size"], normaliser, steps.n))
    return data


def _fix_divisor(batch_size: int, normaliser: dict, n: int) -> dict:
    """The fix: one public divisor, measured on both sides (``divisor_measured``, ``normaliser_found``)."""
    measured = {ds: _jsonnum((normaliser[ds] or {}).get("nu_hat_mean", float("nan"))) for ds in ("D", "D'")}
    # nu_hat of one step has relative error 1/sqrt(2(n - r)); the mean over the steps, 4 standard errors
    tol = {ds: 4.0 / math.sqrt(2.0 * max(n - int((normaliser[ds] or {}).get("rank") or 0), 1)
                               * max(int((normaliser[ds] or {}).get("trials") or 0), 1)) for ds in ("D", "D'")}
    ok = all(v is not None and abs(v / batch_size - 1) <= tol[ds] for ds, v in measured.items())
    found = (f"{int(batch_size)} (the configured batch size)" if ok else ", ".join(
        f"{ds}: {v}" for ds, v in measured.items()) + f" (not the batch size {batch_size})")
    return {"batch_size": int(batch_size), "divisor_measured": measured, "normaliser_found": found}


def audit_inputs(implementation: str, dataset: str, *, version, bundle=None, drawn=None, real_rounds: int,
                 rounds: int) -> dict:
    """What an audit really ran on (``r["inputs"]``), for captions and the grade.

    ``{"data": "full dataset" | "bundled real points" | "synthetic stand-in" | "data folder
    sample", "data_detail": one line (split, indices in it, checksum state), "code": what
    ran, "code_as_paper": whether that is the code the paper audited, "paper_code": what
    the paper ran (the implementation table's ``paper_code``), "real_rounds": rounds (calibration and counted, D
    and D') that were steps of the implementation, "rounds": all rounds of the game}``.
    ``bundle``: the info of :func:`datasets.load_bundled`; ``drawn``: that of
    :func:`datasets.drawn_indices` for a data folder.
    """
    from paperlib.implementations import datasets as D

    if dataset == "synthetic":
        data = D.SOURCE_SYNTHETIC
        detail = D.describe_points(dataset, data, [], split="")
    elif bundle is not None:
        data = D.SOURCE_BUNDLED
        detail = D.describe_points(dataset, data, bundle["indices"], split=bundle["split"], sha_ok=True)
    else:
        full = bool(drawn and drawn.get("full"))
        data = D.SOURCE_FULL if full else D.SOURCE_FOLDER_SAMPLE
        idx = drawn["indices"] if drawn else []
        detail = D.describe_points(dataset, D.SOURCE_FULL, idx, split=(drawn or {}).get("split", "train"))
        if not full:
            detail = detail.replace("(full dataset in the data folder)",
                                    f"(a data folder of {(drawn or {}).get('n', '?')} images, not the full split)")
    v = str(version) if version is not None else "unknown"
    lines = None
    if implementation == "dpsur":
        from paperlib.implementations.dpsur_source import REIMPLEMENTATION_LINES, dpsur_provenance

        code = (dpsur_provenance() if v == "paperlib"
                else f"DPSUR's own step ({v}, pinned source sha256-verified, run in a subprocess)")
        as_paper = v != "paperlib"
        lines = REIMPLEMENTATION_LINES if v == "paperlib" else None
    elif implementation == "opacus-installed":
        code, as_paper = f"Opacus {v} DPOptimizer step (the installed release)", False
    elif BY_NAME[implementation].as_paper:
        step = "DPOptimizer" if v.startswith("1.") else "PrivacyEngine"
        code = f"Opacus {v} {step} step (installed on demand from its sha256-verified wheel, run in a subprocess)"
        as_paper = True
    else:  # a variant the paper did not run (e.g. paperlib's fix)
        code, as_paper = f"{implementation} (Opacus {v})", False
    out = {"data": data, "data_detail": detail, "code": code, "code_as_paper": bool(as_paper),
           "paper_code": BY_NAME[implementation].paper_code or "none (not in the paper)",
           "real_rounds": int(real_rounds), "rounds": int(rounds)}
    if lines:  # the source of a re-implementation: the lines it follows, apart from the sentence
        out["code_lines"] = lines
    return out
