"""The DPSUR-style ASGM step, written from the DPSUR paper's description.

DPSUR (Fu et al., 2024, "DPSUR: Accelerating Differentially Private Stochastic Gradient
Descent Using Selective Update and Release") trains with DP-SGD under Poisson sampling;
its gradient step, as the paper describes it and as Wang et al. (2026, Section 5) read
its code, is the ASGM of THEORY.md section 2:

1. draw the batch ``B`` by Poisson sampling: each of the ``N`` examples is kept
   independently with probability ``q``;
2. compute the per-example gradients ``g_i`` (cross-entropy loss) at the current
   parameters and clip each: ``gbar_i = g_i / max(1, ||g_i|| / C)``;
3. add Gaussian noise ``G ~ N(0, sigma^2 C^2 I_n)`` to the sum ``S_B = sum_{i in B} gbar_i``;
4. divide by the *realised* batch size ``|B|`` -- by 1 when ``B`` is empty (the zero
   normaliser convention of THEORY.md section 0; an empty batch gives the noise-only
   update ``G``).

The returned update is ``u = (S_B + G) / max(|B|, 1)``; an SGD step with learning rate
``lr`` moves the parameters to ``theta_0 - lr * u``. DPSUR's selective-update/release
logic (which decides whether to accept a step) acts after this step and is outside the
one-round game audited here.

Random draws, in this order per step, from the ``generator`` passed in: the batch mask
``torch.rand(N, generator) < q`` (as Opacus's ``UniformWithReplacementSampler`` draws it),
then the noise ``torch.normal(0, sigma*C, (n,), generator)``. :func:`dpsur_updates`
batches many independent steps at fixed parameters and gives the same numbers as
calling :func:`dpsur_step` repeatedly with the same generator.
"""

from __future__ import annotations

import torch
from torch import nn

from paperlib.implementations.models import count_parameters, per_example_grads

__all__ = ["clip_rows", "dpsur_step", "dpsur_updates"]


def clip_rows(grads: torch.Tensor, C: float) -> torch.Tensor:
    """``g_i / max(1, ||g_i|| / C)`` row by row."""
    norms = grads.norm(dim=1, keepdim=True)
    return grads / torch.clamp(norms / C, min=1.0)


def _draw(N: int, n: int, q: float, sigma: float, C: float, generator: torch.Generator, dtype):
    mask = torch.rand(N, generator=generator) < q
    noise = torch.normal(0.0, float(sigma) * float(C), (n,), generator=generator).to(dtype) if sigma * C > 0 \
        else torch.zeros(n, dtype=dtype)
    return mask, noise


def dpsur_step(model: nn.Module, X: torch.Tensor, y: torch.Tensor, q: float, sigma: float, C: float,
               generator: torch.Generator) -> torch.Tensor:
    """One DPSUR-style ASGM step at the model's current parameters (which it does not
    change). Returns the update ``u = (S_B + G) / max(|B|, 1)`` flattened in
    ``model.parameters()`` order (a float32 tensor of length ``n``)."""
    grads = clip_rows(per_example_grads(model, X, y), C)
    mask, noise = _draw(len(X), count_parameters(model), q, sigma, C, generator, grads.dtype)
    B = int(mask.sum())
    return (grads[mask].sum(dim=0) + noise) / max(B, 1)


def dpsur_updates(model: nn.Module, X: torch.Tensor, y: torch.Tensor, q: float, sigma: float, C: float,
                  generator: torch.Generator, trials: int, *, chunk: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """``trials`` independent steps at the same (fixed) parameters, batched: the clipped
    per-example gradients are computed once, each trial draws its mask and noise in the
    order :func:`dpsur_step` does. Returns ``(updates [trials, n] float32,
    batch_sizes [trials] int64)``."""
    grads = clip_rows(per_example_grads(model, X, y), C)
    N, n = grads.shape[0], count_parameters(model)
    out = torch.empty(trials, n, dtype=grads.dtype)
    sizes = torch.empty(trials, dtype=torch.long)
    for s in range(0, trials, chunk):
        e = min(trials, s + chunk)
        masks, noises = zip(*(_draw(N, n, q, sigma, C, generator, grads.dtype) for _ in range(s, e)))
        M = torch.stack(masks).to(grads.dtype)
        B = M.sum(dim=1)
        out[s:e] = (M @ grads + torch.stack(noises)) / torch.clamp(B, min=1.0).unsqueeze(1)
        sizes[s:e] = B.long()
    return out, sizes
