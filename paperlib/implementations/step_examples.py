"""Real DP-SGD code behind the step protocol of :mod:`paperlib.implementations.step_audit`.

Each function here is one library's step, or a hand-written training loop, wrapped in the protocol: it trains
the probe model of :func:`~paperlib.implementations.step_audit.linear_probe` for one step with the library's
own code and returns the noisy gradient estimate it applied (and the batch where the code exposes it). They are
what :func:`~paperlib.implementations.step_audit.classify_step` is tested on, and examples of how to wrap
one's own code.

- :func:`opacus_step`: Opacus (the installed release), ``PrivacyEngine.make_private`` with Poisson sampling and
  ``loss_reduction='mean'``, an SGD optimiser at learning rate 1.
- :func:`loop_divide_by_batch`: a hand-written PyTorch loop that divides the noisy sum by the size of the batch
  it drew (``torch.func`` per-example gradients, a Poisson mask).
- :func:`loop_divide_by_constant`: the same loop dividing by a batch size fixed in its configuration
  (:data:`LOOP_BATCH_SIZE`) before it sees the data.
"""

from __future__ import annotations

from paperlib.implementations.step_audit import linear_probe

__all__ = ["LOOP_BATCH_SIZE", "opacus_step", "loop_divide_by_batch", "loop_divide_by_constant"]

#: the batch size the hand-written loop's configuration fixes in advance (a public constant)
LOOP_BATCH_SIZE = 4


def _rows_to_indices(x, batch) -> list[int]:
    """The record indices of a batch of probe inputs (the rows are distinct, so each is found exactly)."""
    import torch

    return sorted(int(torch.nonzero((x == row).all(dim=1))[0, 0]) for row in batch)


def opacus_step(gradients, *, sampling_rate, noise_multiplier, max_grad_norm, seed):
    """One step of the installed Opacus: ``make_private(poisson_sampling=True)`` on the probe, the loss the batch
    mean (``loss_reduction='mean'``, Opacus's default). Opacus sets its sampling rate to ``1 / len(loader)``, so
    the loader's batch size is ``round(sampling_rate * m)`` and the rate the step runs at is the one that gives
    (0.5 for the probe's defaults)."""
    import torch
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    model, x = linear_probe(gradients)
    loader = DataLoader(TensorDataset(x), batch_size=max(1, round(sampling_rate * len(x))))
    torch.manual_seed(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    engine = PrivacyEngine(accountant="rdp")
    model, optimizer, loader = engine.make_private(module=model, optimizer=optimizer, data_loader=loader,
                                                   noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm,
                                                   poisson_sampling=True)
    (xb,) = next(iter(loader))
    optimizer.zero_grad()
    if len(xb):
        model(xb).mean().backward()
    optimizer.step()
    update = -model._module.weight.detach().reshape(-1)  # from zero at learning rate 1
    return update.double().numpy(), _rows_to_indices(x, xb)


def _loop(gradients, sampling_rate, noise_multiplier, max_grad_norm, seed, divisor):
    """A plain PyTorch DP-SGD step: Poisson mask, per-example gradients with ``torch.func``, clip, sum, noise,
    divide by ``divisor(batch_size)``."""
    import torch
    from torch.func import functional_call, grad, vmap

    model, x = linear_probe(gradients)
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(len(x), generator=g) < sampling_rate
    xb = x[mask]
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, xi):
        return functional_call(model, p, (xi.unsqueeze(0),)).sum()

    total = torch.zeros(x.shape[1])
    if len(xb):
        per = vmap(grad(loss), in_dims=(None, 0))(params, xb)["weight"].reshape(len(xb), -1)
        scale = torch.clamp(max_grad_norm / per.norm(dim=1).clamp_min(1e-12), max=1.0)
        total = (per * scale[:, None]).sum(0)
    noisy = total.double() + torch.normal(0.0, noise_multiplier * max_grad_norm, (x.shape[1],), generator=g,
                                          dtype=torch.float64)
    return (noisy / divisor(int(mask.sum()))).numpy(), torch.nonzero(mask).reshape(-1).tolist()


def loop_divide_by_batch(gradients, *, sampling_rate, noise_multiplier, max_grad_norm, seed):
    """The hand-written loop dividing by the size of the batch it drew (an empty batch divides by 1)."""
    return _loop(gradients, sampling_rate, noise_multiplier, max_grad_norm, seed, lambda b: max(b, 1))


def loop_divide_by_constant(gradients, *, sampling_rate, noise_multiplier, max_grad_norm, seed):
    """The hand-written loop dividing by :data:`LOOP_BATCH_SIZE`, fixed before it sees the data."""
    return _loop(gradients, sampling_rate, noise_multiplier, max_grad_norm, seed, lambda b: float(LOOP_BATCH_SIZE))
