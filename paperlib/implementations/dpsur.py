"""DPSUR's DP-SGD step, re-implemented line by line from DPSUR's own source at a pinned commit.

DPSUR (Fu et al., 2024, "DPSUR: Accelerating Differentially Private Stochastic Gradient
Descent Using Selective Update and Release", PVLDB 17(6)) is audited in Wang et al. (2026,
Section 5.3, Figure 4) as an ASGM implementation ("DPSUR manually implements the ASGM
variant of DP-SGD ... we therefore directly audit its implementation"). This module follows
the code of the public repository https://github.com/JeffffffFu/DPSUR at commit
``d738b38e42aa79757104a20e75bde8f8d94676c8`` (2025-01-25, the newest; the step's files last
changed in ``c7e46de``, a comment-only edit of ``train_with_dp.py``). The commit and the
sha256 of every file cited here are stored in ``paperlib/resources/dpsur_source.json``;
:mod:`paperlib.implementations.dpsur_source` downloads those files, verifies them and runs
DPSUR's own step against this one. Citations are ``file:line`` at that commit.

One training round of ``DPSUR()`` (``algorithm/DPSUR.py``), for a dataset of ``N`` records,
sampling rate ``q`` and DPSUR's ``batch_size = q N`` (its sampling rate is
``batch_size / len(dataset)``, ``data/util/sampling.py:19``):

1. ``algorithm/DPSUR.py:87-95``: ``DPSGD_Optimizer(l2_norm_clip=C, noise_multiplier=sigma,
   minibatch_size=batch_size, microbatch_size=1, ...)`` -- an SGD subclass built by
   ``make_optimizer_class`` (``utils/dp_optimizer.py:11-84``); ``minibatch_size`` starts at
   ``batch_size = q N``.
2. ``algorithm/DPSUR.py:105``: ``get_data_loaders_possion(minibatch_size=batch_size,
   microbatch_size=1, iterations=1)``; each round, ``algorithm/DPSUR.py:143`` builds a
   ``DataLoader`` whose batch sampler is ``IIDBatchSampler`` (``data/util/sampling.py:10-24,
   93-100``).
3. **The divisor -- a separate Poisson draw.** ``algorithm/DPSUR.py:145-146`` iterates that
   loader once and sets ``optimizer.minibatch_size = len(data)``. Iterating runs
   ``IIDBatchSampler.__iter__`` (``data/util/sampling.py:16-21``): ``indices =
   np.where(torch.rand(N) < batch_size / N)[0]``, yielded only ``if indices.size > 0``. So
   the divisor is ``m = |B_1|``, the size of a Poisson(``q``) draw ``B_1``; when ``B_1`` is
   empty nothing is yielded and ``minibatch_size`` keeps its value (``q N`` in the first
   round, the previous round's size later).
4. **The batch -- a second, independent draw.** ``algorithm/DPSUR.py:148`` passes the same
   loader to ``train_with_dp`` (``train_and_validation/train_with_dp.py:12-33``), whose
   ``for ... in enumerate(train_loader)`` (line 16) iterates it again: a fresh
   ``IIDBatchSampler.__iter__``, a new ``torch.rand(N)``, the training batch ``B`` (``B``
   and ``B_1`` are independent; ``|B| != m`` in general).
5. **The empty-batch rule.** If ``B`` is empty the sampler yields nothing
   (``data/util/sampling.py:20``), the loop body of ``train_with_dp.py:16-30`` never runs:
   no gradient, no noise, no ``optimizer.step``. The parameters do not move: the update is
   exactly ``0``.
6. Per example ``i`` in ``B`` (``train_with_dp.py:19-29``): cross-entropy loss of the single
   example, ``backward``, then ``microbatch_step`` (``utils/dp_optimizer.py:28-43``): the
   norm over all parameters ``||g_i||`` (``utils/dp_optimizer.py:29-35``) and
   ``accum += g_i * min(C / (||g_i|| + 1e-6), 1)`` (``utils/dp_optimizer.py:36``, added at
   line 41) -- clipping with a ``1e-6`` in the denominator.
7. ``step_dp`` (``utils/dp_optimizer.py:53-65``), per parameter tensor in
   ``model.parameters()`` order: ``grad = accum`` (``utils/dp_optimizer.py:59``),
   ``grad += C * sigma * torch.randn_like(grad)`` (``utils/dp_optimizer.py:61``),
   ``grad *= microbatch_size / minibatch_size = 1 / m`` (``utils/dp_optimizer.py:63``), then
   ``SGD.step`` (``utils/dp_optimizer.py:65``; ``lr``; DPSUR's momentum 0.9 has no effect on
   a first step).

So one round releases ``u = (S_B + G) / m`` with ``S_B = sum_{i in B} gbar_i``,
``G ~ N(0, sigma^2 C^2 I_n)``, ``m = |B_1|`` (``q N`` if ``B_1`` is empty), and ``u = 0``
when ``B`` is empty. This differs from the paper's ASGM (THEORY.md section 2:
``nu = |B|`` of the *same* batch, ``max(|B|, 1)``) in two ways: the divisor comes from
an independent draw (with the same marginal law as ``|B|`` except at ``0``) and an empty
batch releases ``0`` instead of noise. DPSUR's selective update and release (the noisy
validation-loss test of ``algorithm/DPSUR.py:150-180``) acts after the step and is outside
the one-round game. Consequence for a white-box audit scored with the ASGM model: an empty
batch's exact ``0`` (probability ``(1 - q)^N`` on ``D``) looks, to that model, like the
largest divisor, i.e. like ``D'``; it floors the false-positive rate and lowers the audited
``eps_L`` against ASGM's (measured with ``N = 4``, ``sigma = 10``, ``C = 0.1``,
``cnn-mnist``, 10,000 rounds: 2.7 instead of 5.4 at ``q = 0.7``, 4.7 instead of 6.1 at
``q = 0.8``; both far above the SGM claim). The audits therefore score DPSUR's steps with
DPSUR's own rule (:attr:`paperlib.mechanisms.core.Mechanism.DPSUR`: the separate draw, the
no-step atom at 0) and check every real step against it
(:func:`paperlib.implementations.real_audit.check_steps`).

Random draws, in DPSUR's order, per round (DPSUR draws from torch's global generator;
here from the ``generator`` passed in, which gives the same numbers for the same seed):
``torch.empty((), dtype=torch.int64).random_()`` (the ``DataLoader`` iterator's base seed,
``torch/utils/data/dataloader.py``, ``_BaseDataLoaderIter.__init__``), ``torch.rand(N)``
(``B_1``), again a base seed and ``torch.rand(N)`` (``B``), then, only if ``B`` is not
empty, ``torch.randn`` of each parameter's shape in ``model.parameters()`` order (the
noise ``G / (sigma C)``). :func:`dpsur_updates` batches many independent rounds at fixed
parameters and gives the same numbers as calling :func:`dpsur_step` repeatedly with the
same generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from paperlib.implementations.models import per_example_grads

__all__ = ["DPSUR_COMMIT", "CLIP_EPS", "DPSURDraw", "clip_rows", "dpsur_draw", "dpsur_step", "dpsur_step_record",
           "dpsur_updates"]

#: the commit of https://github.com/JeffffffFu/DPSUR this module follows (also in dpsur_source.json)
DPSUR_COMMIT = "d738b38e42aa79757104a20e75bde8f8d94676c8"
#: DPSUR's clipping coefficient is ``min(C / (||g|| + CLIP_EPS), 1)`` (utils/dp_optimizer.py:36)
CLIP_EPS = 1e-6


def clip_rows(grads: torch.Tensor, C: float) -> torch.Tensor:
    """DPSUR's clipping, row by row: ``g_i * min(C / (||g_i|| + 1e-6), 1)``
    (``utils/dp_optimizer.py:29-41``). ``grads``: ``[N, n]``; returns the same shape/dtype.
    The norm is taken in float64, as DPSUR sums the squared per-tensor norms in Python floats."""
    norms = grads.double().norm(dim=1, keepdim=True)
    coef = torch.clamp(float(C) / (norms + CLIP_EPS), max=1.0)
    return grads * coef.to(grads.dtype)


@dataclass
class DPSURDraw:
    """The random part of one DPSUR round: ``divisor_mask`` (``B_1``, bool ``[N]``),
    ``batch_mask`` (``B``, bool ``[N]``), ``divisor`` (``m``: ``|B_1|``, or ``q N`` when
    ``B_1`` is empty) and ``noise`` (``G``, float ``[n]``, ``None`` when ``B`` is empty:
    DPSUR then draws nothing and takes no step)."""

    divisor_mask: torch.Tensor
    batch_mask: torch.Tensor
    divisor: float
    noise: torch.Tensor | None


def _sampler_draw(N: int, threshold: float, generator: torch.Generator) -> torch.Tensor:
    # a DataLoader iterator first draws its base seed from the generator, then the first
    # next() runs IIDBatchSampler.__iter__: torch.rand(N) < minibatch_size / length
    torch.empty((), dtype=torch.int64).random_(generator=generator)
    return torch.rand(N, generator=generator) < threshold


def dpsur_draw(N: int, q: float, shapes, sigma: float, C: float, generator: torch.Generator,
               dtype=torch.float32) -> DPSURDraw:
    """Draw one DPSUR round's randomness in DPSUR's order (module docstring).

    ``N``: records in the dataset; ``q`` in ``(0, 1]``; ``shapes``: the trainable parameter
    shapes in ``model.parameters()`` order (the noise is drawn tensor by tensor, as
    ``torch.randn_like`` in ``utils/dp_optimizer.py:61``); ``sigma >= 0``, ``C > 0``."""
    batch_size = float(q) * int(N)          # DPSUR's batch_size for sampling rate q
    threshold = batch_size / int(N)         # data/util/sampling.py:19
    divisor_mask = _sampler_draw(N, threshold, generator)  # algorithm/DPSUR.py:145-146
    m = int(divisor_mask.sum())
    divisor = float(m) if m > 0 else batch_size  # nothing yielded: minibatch_size keeps q N
    batch_mask = _sampler_draw(N, threshold, generator)    # train_with_dp.py:16, a fresh iteration
    noise = None
    if bool(batch_mask.any()):
        scale = float(C) * float(sigma)      # l2_norm_clip * noise_multiplier, then * randn_like
        noise = torch.cat([(scale * torch.randn(tuple(s), generator=generator, dtype=dtype)).reshape(-1)
                           for s in shapes])
    return DPSURDraw(divisor_mask, batch_mask, divisor, noise)


def _shapes(model: nn.Module):
    return [tuple(p.shape) for p in model.parameters() if p.requires_grad]


def _update(clipped: torch.Tensor, d: DPSURDraw) -> tuple[torch.Tensor, torch.Tensor]:
    n = clipped.shape[1]
    if d.noise is None:  # empty batch: no step at all (train_with_dp.py:16-30 never runs)
        z = torch.zeros(n, dtype=clipped.dtype)
        return z, z.clone()
    S = clipped[d.batch_mask].sum(dim=0)
    return (S + d.noise) * (1.0 / d.divisor), S  # utils/dp_optimizer.py:59-63


def dpsur_step_record(model: nn.Module, X: torch.Tensor, y: torch.Tensor, q: float, sigma: float, C: float,
                      generator: torch.Generator) -> dict:
    """One DPSUR round at the model's current parameters (which it does not change), with
    its parts: ``update`` (``u``, float32 ``[n]``), ``clipped_sum`` (``S_B``; zeros when
    ``B`` is empty), ``divisor`` (``m``), ``batch`` and ``divisor_batch`` (the record
    indices of ``B`` and ``B_1``, lists of int), ``stepped`` (``False`` when ``B`` is empty)."""
    clipped = clip_rows(per_example_grads(model, X, y), C)
    d = dpsur_draw(len(X), q, _shapes(model), sigma, C, generator, clipped.dtype)
    u, S = _update(clipped, d)
    return {"update": u, "clipped_sum": S, "divisor": d.divisor,
            "batch": d.batch_mask.nonzero().reshape(-1).tolist(),
            "divisor_batch": d.divisor_mask.nonzero().reshape(-1).tolist(), "stepped": d.noise is not None}


def dpsur_step(model: nn.Module, X: torch.Tensor, y: torch.Tensor, q: float, sigma: float, C: float,
               generator: torch.Generator) -> torch.Tensor:
    """One DPSUR round at the model's current parameters (which it does not change).
    ``X``: ``[N, ...]`` inputs, ``y``: ``[N]`` labels. Returns the update
    ``u = (S_B + G) / m`` (``0`` when the batch is empty; module docstring) flattened in
    ``model.parameters()`` order: a float32 tensor of length ``n``."""
    return dpsur_step_record(model, X, y, q, sigma, C, generator)["update"]


def dpsur_updates(model: nn.Module, X: torch.Tensor, y: torch.Tensor, q: float, sigma: float, C: float,
                  generator: torch.Generator, trials: int, *, chunk: int = 256, return_divisors: bool = False):
    """``trials`` independent DPSUR rounds at the same (fixed) parameters, each from a fresh
    optimiser (so an empty divisor draw divides by ``q N``): the clipped per-example
    gradients are computed once, each trial draws its randomness in the order of
    :func:`dpsur_step`.

    Returns ``(updates [trials, n] float32, batch_sizes [trials] int64)`` -- ``batch_sizes``
    the realised ``|B|`` of the training batch -- and, with ``return_divisors=True``, also
    ``divisors [trials] float64`` (``m``)."""
    grads = clip_rows(per_example_grads(model, X, y), C)
    N, n = grads.shape
    shapes = _shapes(model)
    out = torch.empty(trials, n, dtype=grads.dtype)
    sizes = torch.empty(trials, dtype=torch.long)
    divisors = torch.empty(trials, dtype=torch.float64)
    for s in range(0, trials, chunk):
        e = min(trials, s + chunk)
        draws = [dpsur_draw(N, q, shapes, sigma, C, generator, grads.dtype) for _ in range(s, e)]
        M = torch.stack([d.batch_mask for d in draws]).to(grads.dtype)
        G = torch.stack([d.noise if d.noise is not None else torch.zeros(n, dtype=grads.dtype) for d in draws])
        inv = torch.tensor([1.0 / d.divisor for d in draws], dtype=grads.dtype).unsqueeze(1)
        stepped = torch.tensor([d.noise is not None for d in draws]).unsqueeze(1)
        out[s:e] = torch.where(stepped, (M @ grads + G) * inv, torch.zeros((), dtype=grads.dtype))
        sizes[s:e] = M.sum(dim=1).long()
        divisors[s:e] = torch.tensor([d.divisor for d in draws], dtype=torch.float64)
    return (out, sizes, divisors) if return_divisors else (out, sizes)
