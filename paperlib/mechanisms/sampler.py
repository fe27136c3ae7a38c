"""One round of SGM, EASGM, ASGM, FEASGM and DPSUR's rule as batched torch code (THEORY.md section 2).

The input is a fixed matrix of per-example vectors (the white-box audit setting:
the model's starting point is fixed, so every per-example gradient is known)::

    vectors[0 .. N-1]   the records of D
    vectors[N]          the added record d_{N+1}; D' = D plus this row

One round on the dataset ``D`` (``N_data = N`` rows) or ``D'`` (``N_data = N + 1``)
is, per trial:

1. clip every row to norm ``C``: ``g_i / max(1, ||g_i|| / C)``;
2. Poisson sampling: keep each row independently with probability ``q``
   (a Bernoulli mask of ``N_data`` entries);
3. add Gaussian noise ``N(0, sigma^2 C^2 I_n)`` to the sum of the kept rows;
4. divide by the mechanism's normaliser (:meth:`Mechanism.normaliser <paperlib.mechanisms.core.Mechanism.normaliser>`):

   ========  ==================  =========================================
   SGM       1                   Opacus ``loss_reduction="sum"``
   EASGM     ``N_data * q``      Opacus v0.14-v0.15 (Poisson, mean)
   ASGM      ``|B|`` (1 if empty) Opacus v0.12-v0.13; DPSUR as modelled (see implementations.dpsur)
   FEASGM    ``floor(N_data q)`` Opacus v1.x (``int(len(dataset) * q)``)
   DPSUR     ``|B'|``            DPSUR's own code (separate draw ``B'``, below)
   ========  ==================  =========================================

DPSUR's rule (``algorithm/DPSUR.py:145-146`` at the pinned commit; see
:mod:`paperlib.implementations.dpsur`) draws, per trial, the batch mask, then the mask of the
separate draw ``B'`` (``rand(N_data) < q`` again), then the noise; the divisor is ``|B'|``
(``N_data q`` when ``B'`` is empty), so Binomial(N, q) on D and Binomial(N + 1, q) on D',
independent of the batch; a trial whose batch is empty releases exactly 0 (no step).

FEASGM with ``floor(N_data q) = 0`` divides by zero exactly as Opacus v1.x does:
the outputs are ``inf``/``nan``, and a :class:`ZeroNormaliserWarning` says so
(:meth:`~paperlib.mechanisms.core.Mechanism.divides_by_zero` is the same fact as a flag). Nothing is replaced by 1.

Two implementations of the same round:

* :func:`iter_samples` / :func:`sample` — batched: a chunk of trials is one
  ``(trials, N_data)`` Bernoulli mask, one matrix product and one
  ``(trials, n)`` noise draw, on any device; chunks are sized to fit memory.
* :func:`sample_loop` — the plain reference: a Python loop over trials that
  clips, samples and sums record by record.

With ``chunk_size=1`` the batched path consumes the generator in the same order
as the loop (``rand(1, N_data)`` then ``randn(1, n)`` per trial), so both give
the same numbers for the same seed (up to the summation order of floating
point). :func:`apply_round` / :func:`apply_round_loop` take explicit draws, for
tests that feed both paths identical randomness.

A third, exact sampler draws only what the audit's distinguishers look at:

* :func:`iter_projected` / :func:`sample_projected` — with an orthonormal basis ``U``
  (``n x r``) of a space containing the clipped vectors (default: QR of the ``N+1``
  clipped rows, ``r = min(n, N+1)``; :func:`span_basis`), a round's output
  ``x = (S_B + G) / nu`` has coordinates ``U^T x = (U^T S_B + U^T G) / nu`` with
  ``U^T G ~ N(0, sigma^2 C^2 I_r)``, and squared residual
  ``||(I - U U^T) x||^2 = sigma^2 C^2 chi^2_{n-r} / nu^2``, independent of ``U^T G``
  (the noise is isotropic). So per trial it draws the ``N_data`` mask entries,
  ``r`` normals and one chi-square variate (``2 Gamma((n-r)/2)``), never ``n``
  normals: the same joint law of ``(U^T x, ||(I - U U^T) x||^2)`` as the projection
  of :func:`sample`'s outputs, at a cost independent of ``n``. The normaliser is the
  same (ASGM's ``|B|`` per trial, EASGM's/FEASGM's ``N_data q`` for the dataset's
  own ``N_data``; FEASGM with ``floor(N_data q) = 0`` gives inf/nan and the warning).
  :func:`apply_round_projected` takes explicit draws.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import torch

from paperlib.mechanisms.core import ANY, Mechanism
from paperlib.fdp.validation import ParameterError, check_int, check_positive, check_rate

__all__ = [
    "DATASETS",
    "ZeroNormaliserWarning",
    "as_vectors",
    "clip",
    "default_chunk_size",
    "Chunk",
    "iter_samples",
    "sample",
    "sample_loop",
    "apply_round",
    "apply_round_loop",
    "ProjectedChunk",
    "span_basis",
    "apply_round_projected",
    "iter_projected",
    "sample_projected",
]

#: accepted names of the two datasets: D (rows 0..N-1) and D' (all N+1 rows)
DATASETS = ("D", "D'")
_DATASET_ALIASES = {"D": "D", "d": "D", "D'": "D'", "d'": "D'", "Dprime": "D'", "dprime": "D'"}

#: default number of float elements in one chunk of outputs, per device type: on the CPU
#: 2^20 doubles (8 MiB) keep a chunk in cache (measured faster than bigger chunks); a GPU
#: wants large chunks (2^26 doubles = 512 MiB)
DEFAULT_CHUNK_ELEMENTS = {"cpu": 1 << 20, "cuda": 1 << 26}


class ZeroNormaliserWarning(RuntimeWarning):
    """FEASGM with ``floor(N_data q) = 0``: the round divides by zero (inf/nan outputs), as Opacus v1.x."""


def _check_dataset(dataset) -> str:
    if dataset not in _DATASET_ALIASES:
        raise ParameterError("dataset", f"dataset must be 'D' (rows 0..N-1) or \"D'\" (all N+1 rows), got {dataset!r}")
    return _DATASET_ALIASES[dataset]


def as_vectors(vectors, *, device=None, dtype=torch.float64) -> torch.Tensor:
    """Check and convert per-example vectors to a ``(N+1, n)`` tensor on ``device``.

    Raises ValueError (naming ``vectors``) unless the input is 2-D with at least two
    rows (``N >= 1``) and one column, and every entry is finite.
    """
    if isinstance(vectors, torch.Tensor):
        v = vectors.detach()
    else:
        try:
            v = torch.as_tensor(np.asarray(vectors, dtype=float))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"vectors must be a numeric array of shape (N+1, n): {exc}") from None
    if v.ndim != 2 or v.shape[0] < 2 or v.shape[1] < 1:
        raise ValueError(
            f"vectors must have shape (N+1, n) with N >= 1 and n >= 1 (rows 0..N-1 = D, row N = the added point), "
            f"got shape {tuple(v.shape)}"
        )
    v = v.to(device=device if device is not None else v.device, dtype=dtype)
    if not bool(torch.isfinite(v).all()):
        raise ValueError("vectors must be finite (found NaN or inf)")
    return v


def clip(vectors: torch.Tensor, C: float) -> torch.Tensor:
    """Rows clipped to norm ``C``: ``g / max(1, ||g|| / C)`` (per-example clipping)."""
    C = check_positive(C, "C")
    norms = torch.linalg.vector_norm(vectors, dim=-1, keepdim=True)
    return vectors / torch.clamp(norms / C, min=1.0)


def _warn_zero(mechanism, N_data, q, stacklevel=3):
    warnings.warn(
        f"{mechanism}: floor(N_data*q) = floor({N_data}*{q}) = 0, so the round divides by zero as Opacus v1.x "
        "does; the outputs are inf/nan (not replaced)",
        ZeroNormaliserWarning,
        stacklevel=stacklevel,
    )


def default_chunk_size(n: int, N_data: int = 1, max_elements: int | None = None, device="cpu") -> int:
    """Trials per chunk so that one ``(chunk, max(n, N_data))`` array has at most ``max_elements`` entries.

    ``max_elements`` defaults to :data:`DEFAULT_CHUNK_ELEMENTS` of the device type.
    """
    if max_elements is None:
        max_elements = DEFAULT_CHUNK_ELEMENTS.get(torch.device(device).type, DEFAULT_CHUNK_ELEMENTS["cpu"])
    return max(1, int(max_elements) // max(1, n, N_data))


@dataclass
class Chunk:
    """One chunk of trials: ``outputs`` (trials, n) and the realised ``batch_sizes`` (trials,)."""

    outputs: torch.Tensor
    batch_sizes: torch.Tensor
    start: int  # index of the first trial of the chunk


def _rows_for(vectors: torch.Tensor, dataset: str) -> torch.Tensor:
    return vectors[:-1] if dataset == "D" else vectors


def _divisor_draw(mechanism, m: int, N_data: int, q: float, generator: torch.Generator, device):
    """DPSUR's separate Poisson(q) draw ``B'`` of each of ``m`` trials, drawn right after the batch masks
    (``None`` for the other mechanisms, which draw nothing more)."""
    if not Mechanism.parse(mechanism, ANY).draws_divisor:
        return None
    return torch.rand((m, N_data), generator=generator, device=device, dtype=torch.float64) < q


def apply_round(mechanism: str, clipped_rows: torch.Tensor, masks: torch.Tensor, noise: torch.Tensor,
                q: float, sigma: float, C: float, divisor_masks: torch.Tensor | None = None) -> torch.Tensor:
    """Batched round with explicit draws.

    ``clipped_rows`` (N_data, n) already clipped; ``masks`` (trials, N_data) bool;
    ``noise`` (trials, n) standard normal (scaled here by ``sigma C``). Returns
    ``(masks @ rows + sigma C noise) / normaliser`` of shape (trials, n).
    ``divisor_masks`` (trials, N_data) bool: DPSUR's separate Poisson draw ``B'``, required for
    :attr:`Mechanism.DPSUR <paperlib.mechanisms.core.Mechanism.DPSUR>` (refused otherwise): its
    size is the divisor (``N_data q`` when empty) and a trial with an empty batch releases 0
    (no step; ``algorithm/DPSUR.py:145-146``, ``train_with_dp.py:16``).
    """
    mech = Mechanism.parse(mechanism, ANY)
    N_data = clipped_rows.shape[0]
    # sigma C noise + masks @ rows in one pass (the sum of the kept clipped rows, plus noise)
    noisy = torch.addmm(noise.to(clipped_rows.dtype), masks.to(clipped_rows.dtype), clipped_rows, beta=sigma * C)
    nu = _divisor(mech, N_data, masks, divisor_masks, q)
    if isinstance(nu, float):
        return noisy.div_(nu)
    out = noisy.div_(nu.to(noisy.dtype)[:, None])
    if mech.skips_empty_batch:
        out[~masks.any(dim=1)] = 0.0
    return out


def _divisor(mech: Mechanism, N_data: int, masks: torch.Tensor, divisor_masks, q: float):
    """The divisor of each trial: a float when fixed, else a (trials,) tensor (ASGM ``|B|``, DPSUR ``|B'|``)."""
    if mech.draws_divisor:
        if divisor_masks is None or tuple(divisor_masks.shape) != tuple(masks.shape):
            raise ValueError(f"divisor_masks: {mech.value} divides by the size of a separate Poisson draw; give "
                             f"its (trials, N_data) = {tuple(masks.shape)} mask")
        return mech.normaliser(N_data, divisor_masks.sum(dim=1), q)
    if divisor_masks is not None:
        raise ValueError(f"divisor_masks: only dpsur draws its divisor separately, not {mech.value}")
    fixed = mech.fixed_normaliser(N_data, q)
    if fixed is not None:
        return fixed
    return mech.normaliser(N_data, masks.sum(dim=1), q)


def apply_round_loop(mechanism: str, vectors_rows: torch.Tensor, masks: torch.Tensor, noise: torch.Tensor,
                     q: float, sigma: float, C: float, divisor_masks: torch.Tensor | None = None) -> torch.Tensor:
    """Plain per-trial reference of :func:`apply_round` (rows are clipped inside every trial).

    ``vectors_rows`` (N_data, n) *unclipped*. Loops over trials and records. ``divisor_masks``
    as in :func:`apply_round` (DPSUR's separate draw, counted record by record here).
    """
    mech = Mechanism.parse(mechanism, ANY)
    _divisor(mech, vectors_rows.shape[0], masks, divisor_masks, q)  # validates divisor_masks
    trials = masks.shape[0]
    N_data, n = vectors_rows.shape
    out = torch.empty((trials, n), dtype=vectors_rows.dtype, device=vectors_rows.device)
    for t in range(trials):
        s = torch.zeros(n, dtype=vectors_rows.dtype, device=vectors_rows.device)
        k = 0
        for i in range(N_data):
            if bool(masks[t, i]):
                g = vectors_rows[i]
                norm = float(torch.linalg.vector_norm(g))
                s = s + g / max(1.0, norm / C)
                k += 1
        if mech.skips_empty_batch and k == 0:  # DPSUR: no step on an empty batch
            out[t] = 0.0
            continue
        size = sum(bool(divisor_masks[t, i]) for i in range(N_data)) if mech.draws_divisor else k
        noisy = s + (sigma * C) * noise[t].to(vectors_rows.dtype)
        out[t] = noisy / mech.normaliser(N_data, size, q)
    return out


def _prepare(mechanism, vectors, q, sigma, C, dataset, trials, generator, device, dtype):
    mechanism = Mechanism.parse(mechanism, ANY)
    q = check_rate(q)
    sigma = check_positive(sigma, "sigma")
    C = check_positive(C, "C")
    dataset = _check_dataset(dataset)
    trials = check_int(trials, "trials", 1)
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if device is None:
        device = generator.device
    device = torch.device(device)
    if device.type != generator.device.type:
        raise ParameterError("device", f"device {device} does not match the generator's device {generator.device}")
    v = as_vectors(vectors, device=device, dtype=dtype)
    rows = _rows_for(v, dataset)
    return q, sigma, C, dataset, trials, device, rows


def iter_samples(
    mechanism: str,
    vectors,
    q: float,
    sigma: float,
    C: float,
    dataset: str,
    trials: int,
    generator: torch.Generator,
    *,
    device=None,
    dtype: torch.dtype = torch.float64,
    chunk_size: int | None = None,
    max_chunk_elements: int | None = None,
) -> Iterator[Chunk]:
    """Yield the outputs of ``trials`` independent rounds, chunk by chunk.

    Parameters
    ----------
    mechanism : {"sgm", "easgm", "asgm", "feasgm", "dpsur"}
    vectors : array (N+1, n)
        Per-example vectors; rows 0..N-1 are D, row N the added point. Clipped here.
    q : float in (0, 1]; sigma : float > 0; C : float > 0
    dataset : "D" or "D'"
    trials : int >= 1
    generator : torch.Generator
        Source of all randomness; its device is the device of the outputs.
    dtype : torch dtype of the outputs (float64 by default; masks are drawn in float64).
    chunk_size : trials per chunk (default: :func:`default_chunk_size` of ``max_chunk_elements``).

    Yields :class:`Chunk` objects in trial order. Warns :class:`ZeroNormaliserWarning`
    once when FEASGM divides by zero (outputs inf/nan).
    """
    q, sigma, C, dataset, trials, device, rows = _prepare(
        mechanism, vectors, q, sigma, C, dataset, trials, generator, device, dtype
    )
    N_data, n = rows.shape
    if Mechanism.parse(mechanism, ANY).divides_by_zero(N_data, q):
        _warn_zero(mechanism, N_data, q)
    clipped = clip(rows, C)
    if chunk_size is None:
        chunk_size = default_chunk_size(n, N_data, max_chunk_elements, device)
    chunk_size = check_int(chunk_size, "chunk_size", 1)
    start = 0
    while start < trials:
        m = min(chunk_size, trials - start)
        masks = torch.rand((m, N_data), generator=generator, device=device, dtype=torch.float64) < q
        dmasks = _divisor_draw(mechanism, m, N_data, q, generator, device)
        noise = torch.randn((m, n), generator=generator, device=device, dtype=dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out = apply_round(mechanism, clipped, masks, noise, q, sigma, C, dmasks)
        yield Chunk(outputs=out, batch_sizes=masks.sum(dim=1), start=start)
        start += m


def sample(mechanism: str, vectors, q: float, sigma: float, C: float, dataset: str, trials: int,
           generator: torch.Generator, *, device=None, dtype: torch.dtype = torch.float64,
           chunk_size: int | None = None, max_chunk_elements: int | None = None,
           return_batch_sizes: bool = False):
    """All outputs of :func:`iter_samples` as one ``(trials, n)`` tensor (for sizes that fit memory).

    With ``return_batch_sizes=True`` returns ``(outputs, batch_sizes)``.
    """
    outs, bs = [], []
    for ch in iter_samples(mechanism, vectors, q, sigma, C, dataset, trials, generator, device=device,
                           dtype=dtype, chunk_size=chunk_size, max_chunk_elements=max_chunk_elements):
        outs.append(ch.outputs)
        bs.append(ch.batch_sizes)
    out = torch.cat(outs)
    return (out, torch.cat(bs)) if return_batch_sizes else out


def sample_loop(mechanism: str, vectors, q: float, sigma: float, C: float, dataset: str, trials: int,
                generator: torch.Generator, *, device=None, dtype: torch.dtype = torch.float64,
                return_batch_sizes: bool = False):
    """Plain per-trial reference implementation of :func:`sample` (same arguments).

    Per trial: draw ``rand(1, N_data)`` for the Poisson mask and ``randn(1, n)`` for the
    noise (the order :func:`iter_samples` uses with ``chunk_size=1``), then clip and
    sum the kept records one by one, add the noise and divide.
    """
    q, sigma, C, dataset, trials, device, rows = _prepare(
        mechanism, vectors, q, sigma, C, dataset, trials, generator, device, dtype
    )
    N_data, n = rows.shape
    if Mechanism.parse(mechanism, ANY).divides_by_zero(N_data, q):
        _warn_zero(mechanism, N_data, q)
    out = torch.empty((trials, n), dtype=dtype, device=device)
    bs = torch.empty(trials, dtype=torch.int64, device=device)
    for t in range(trials):
        mask = torch.rand((1, N_data), generator=generator, device=device, dtype=torch.float64) < q
        dmask = _divisor_draw(mechanism, 1, N_data, q, generator, device)
        noise = torch.randn((1, n), generator=generator, device=device, dtype=dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out[t] = apply_round_loop(mechanism, rows, mask, noise, q, sigma, C, dmask)[0]
        bs[t] = int(mask.sum())
    return (out, bs) if return_batch_sizes else out



# ---------------------------------------------------------------------------- projected sampler
@dataclass
class ProjectedChunk:
    """One chunk of projected trials.

    ``coords`` (trials, r) = ``U^T x``; ``residual`` (trials,) = ``||x - U U^T x||^2``;
    ``batch_sizes`` (trials,); ``start`` = index of the first trial of the chunk.
    """

    coords: torch.Tensor
    residual: torch.Tensor
    batch_sizes: torch.Tensor
    start: int


def span_basis(vectors, C: float, *, device=None, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Orthonormal basis ``(n, r)``, ``r = min(n, N+1)``, of a space containing the clipped rows.

    The reduced QR factorisation of the ``N+1`` clipped rows (computed in float64 on
    the CPU, like :class:`paperlib.audit.components.WhiteBoxModel`), then moved to
    ``device``/``dtype``. With linearly dependent rows the extra columns are still
    orthonormal; they only carry noise.
    """
    C = check_positive(C, "C")
    v = as_vectors(vectors, device="cpu", dtype=torch.float64)
    q, _ = torch.linalg.qr(clip(v, C).T, mode="reduced")
    return q.to(device=device if device is not None else "cpu", dtype=dtype)


def _check_basis(basis, rows_clipped: torch.Tensor, C: float, device, dtype) -> torch.Tensor:
    """``basis`` as a ``(n, r)`` tensor on device/dtype; ValueError unless orthonormal and containing the rows."""
    n = rows_clipped.shape[1]
    if isinstance(basis, torch.Tensor):
        b = basis.detach()
    else:
        try:
            b = torch.as_tensor(np.asarray(basis, dtype=float))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"basis must be a numeric array of shape (n, r): {exc}") from None
    if b.ndim != 2 or b.shape[0] != n or not (1 <= b.shape[1] <= n):
        raise ValueError(f"basis must have shape (n, r) with n = {n} and 1 <= r <= n, got shape {tuple(b.shape)}")
    b = b.to(device=device, dtype=dtype)
    b64 = b.to(torch.float64)
    if not bool(torch.isfinite(b64).all()):
        raise ValueError("basis must be finite (found NaN or inf)")
    tol = 1e-8 if dtype == torch.float64 else 1e-4
    eye = torch.eye(b.shape[1], dtype=torch.float64, device=device)
    if float((b64.T @ b64 - eye).abs().max()) > tol:
        raise ValueError("basis must have orthonormal columns (basis^T basis = I)")
    rows = rows_clipped.to(device=device, dtype=torch.float64)
    off = rows - (rows @ b64) @ b64.T
    if float(torch.linalg.vector_norm(off, dim=1).max()) > tol * C:
        raise ValueError("basis must span a space containing every clipped per-example vector of the dataset")
    return b


def apply_round_projected(mechanism: str, row_coords: torch.Tensor, masks: torch.Tensor, z: torch.Tensor,
                          chi2: torch.Tensor, q: float, sigma: float, C: float,
                          divisor_masks: torch.Tensor | None = None):
    """Projected round with explicit draws.

    ``row_coords`` (N_data, r) = clipped rows in the basis (``rows @ U``); ``masks``
    (trials, N_data) bool; ``z`` (trials, r) standard normal (the noise's coordinates
    ``U^T G / (sigma C)``); ``chi2`` (trials,) the noise's squared residual
    ``||(I - U U^T) G||^2 / (sigma C)^2`` (chi-square with ``n - r`` degrees of freedom).
    Returns ``(coords, residual)``: ``(masks @ row_coords + sigma C z) / nu`` and
    ``(sigma C)^2 chi2 / nu^2`` — exactly ``U^T x`` and ``||(I - U U^T) x||^2`` of the
    :func:`apply_round` output for the same draws (``divisor_masks`` as there: DPSUR's
    separate draw; an empty batch gives coordinates and residual 0).
    """
    mech = Mechanism.parse(mechanism, ANY)
    N_data = row_coords.shape[0]
    dt = row_coords.dtype
    sc = sigma * C
    coords = torch.addmm(z.to(dt), masks.to(dt), row_coords, beta=sc)
    res = chi2.to(dt) * (sc * sc)
    nu = _divisor(mech, N_data, masks, divisor_masks, q)
    if isinstance(nu, float):
        return coords.div_(nu), res.div_(nu * nu)
    nu = nu.to(dt)
    coords, res = coords.div_(nu[:, None]), res.div_(nu * nu)
    if mech.skips_empty_batch:
        empty = ~masks.any(dim=1)
        coords[empty] = 0.0
        res[empty] = 0.0
    return coords, res


def iter_projected(
    mechanism: str,
    vectors,
    q: float,
    sigma: float,
    C: float,
    dataset: str,
    trials: int,
    generator: torch.Generator,
    *,
    basis=None,
    device=None,
    dtype: torch.dtype = torch.float64,
    chunk_size: int | None = None,
    max_chunk_elements: int | None = None,
) -> Iterator[ProjectedChunk]:
    """Yield the projected statistics of ``trials`` independent rounds, chunk by chunk.

    Same arguments and validation as :func:`iter_samples`, plus ``basis``: an
    orthonormal ``(n, r)`` basis of a space containing the clipped rows (default
    :func:`span_basis`; checked, ValueError otherwise). Per chunk it draws
    ``rand(m, N_data)`` (the masks), ``randn(m, r)`` and, when ``r < n``, ``m``
    Gamma((n - r)/2) variates (times 2: chi-square), all from ``generator``; never an
    ``n``-dimensional vector. The chunk size defaults to :func:`default_chunk_size`
    of ``max(r, N_data)`` elements per trial.

    Yields :class:`ProjectedChunk` objects in trial order, whose ``coords`` and
    ``residual`` have the law of ``U^T x`` and ``||(I - U U^T) x||^2`` for ``x`` from
    :func:`iter_samples`. Warns :class:`ZeroNormaliserWarning` once when FEASGM divides by zero.
    """
    q, sigma, C, dataset, trials, device, rows = _prepare(
        mechanism, vectors, q, sigma, C, dataset, trials, generator, device, dtype
    )
    N_data, n = rows.shape
    if basis is None:
        basis = span_basis(vectors, C, device=device, dtype=dtype)
    clipped = clip(rows, C)
    basis = _check_basis(basis, clipped, C, device, dtype)
    r = basis.shape[1]
    if Mechanism.parse(mechanism, ANY).divides_by_zero(N_data, q):
        _warn_zero(mechanism, N_data, q)
    row_coords = clipped @ basis  # (N_data, r)
    if chunk_size is None:
        chunk_size = default_chunk_size(r, N_data, max_chunk_elements, device)
    chunk_size = check_int(chunk_size, "chunk_size", 1)
    dof = n - r
    start = 0
    while start < trials:
        m = min(chunk_size, trials - start)
        masks = torch.rand((m, N_data), generator=generator, device=device, dtype=torch.float64) < q
        dmasks = _divisor_draw(mechanism, m, N_data, q, generator, device)
        z = torch.randn((m, r), generator=generator, device=device, dtype=dtype)
        if dof > 0:
            alpha = torch.full((m,), 0.5 * dof, device=device, dtype=dtype)
            chi2 = 2.0 * torch._standard_gamma(alpha, generator=generator)
        else:
            chi2 = torch.zeros(m, device=device, dtype=dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            coords, res = apply_round_projected(mechanism, row_coords, masks, z, chi2, q, sigma, C, dmasks)
        yield ProjectedChunk(coords=coords, residual=res, batch_sizes=masks.sum(dim=1), start=start)
        start += m


def sample_projected(mechanism: str, vectors, q: float, sigma: float, C: float, dataset: str, trials: int,
                     generator: torch.Generator, *, basis=None, device=None, dtype: torch.dtype = torch.float64,
                     chunk_size: int | None = None, max_chunk_elements: int | None = None,
                     return_batch_sizes: bool = False):
    """All chunks of :func:`iter_projected` as ``(coords (trials, r), residual (trials,))``.

    With ``return_batch_sizes=True`` returns ``(coords, residual, batch_sizes)``.
    """
    cs, rs, bs = [], [], []
    for ch in iter_projected(mechanism, vectors, q, sigma, C, dataset, trials, generator, basis=basis,
                             device=device, dtype=dtype, chunk_size=chunk_size,
                             max_chunk_elements=max_chunk_elements):
        cs.append(ch.coords)
        rs.append(ch.residual)
        bs.append(ch.batch_sizes)
    out = (torch.cat(cs), torch.cat(rs))
    return out + (torch.cat(bs),) if return_batch_sizes else out
