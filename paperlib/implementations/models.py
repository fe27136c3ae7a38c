"""Models with the paper's parameter counts, built with fixed, seeded starting parameters.

The audits of Section 4 are white box: the adversary knows the starting parameters
``theta_0`` and hence every per-example gradient (THEORY.md section 9). Every model here
is therefore built deterministically from ``(name, seed)``: the default PyTorch
initialisation run under ``torch.manual_seed(seed)`` inside a forked RNG state (the
caller's global RNG is left untouched).

Only layers whose per-sample gradients Opacus computes are used (``Conv2d``, ``Linear``,
``GroupNorm``; ``Tanh`` and ``MaxPool2d`` have no parameters); no ``BatchNorm``.

Names (the table :data:`MODELS` gives each input shape ``(C, H, W)``, count and builder; counts are
trainable parameters, asserted exactly by ``tests/test_models.py``):

``"cnn-mnist"`` -- 26,010 parameters, input 1x28x28.
    The MNIST/FMNIST CNN of Tramer & Boneh (2021), used by DPSGD-HF and DPSUR:
    conv 1->16 k8 s2 p3, tanh, maxpool 2 stride 1, conv 16->32 k4 s2, tanh, maxpool 2
    stride 1, flatten (32*4*4 = 512), linear 512->32, tanh, linear 32->10. (Tramer &
    Boneh's ``MNIST_CNN`` in ``ftramer/Handcrafted-DP/models.py`` pads the first conv by
    2 rather than 3, as in Opacus's MNIST example it is 3; the spatial sizes differ
    (14/13 vs 13/12) but both end at 4x4 and the parameter count is the same.)
``"cnn-cifar10"`` -- 550,570 parameters, input 3x32x32.
    Tramer & Boneh's ``CIFAR10_CNN`` (same repository): conv 3x3 p1 layers
    [32, 32, M, 64, 64, M, 128, 128, M] with tanh and maxpool 2 stride 2, flatten
    (128*4*4 = 2048), linear 2048->128, tanh, linear 128->10.
``"large-mnist"`` -- 1,485,217 parameters, input 1x28x28.
    Stand-in for the PrivImage / DP-FETA model. Its architecture is not in the paper
    copy; only its size ``n`` enters the theory, so this is a model *of exactly that
    size*, not their architecture: conv 1->32 k3 p1, GroupNorm(8, 32), tanh,
    conv 32->64 k3 s2 p1, GroupNorm(8, 64), tanh, conv 64->128 k3 s2 p1,
    GroupNorm(8, 128), tanh, flatten (128*7*7 = 6272), linear 6272->215, tanh,
    linear 215->192, tanh, linear 192->10. (Widths 215 and 192 are the unique pair
    that makes this layout hit 1,485,217 exactly.)
``"tiny"`` -- 430 parameters, input 1x28x28, for fast tests:
    conv 1->2 k7 s3 (2x8x8), tanh, maxpool 2 stride 2 (2x4x4), flatten, linear 32->10.
``"dpfeta-mnist"`` -- 1,485,217 parameters, input 1x28x28: DP-FETA's MNIST denoiser
    (EDM-preconditioned NCSN++), rebuilt from its code at a pinned commit.
``"privimage-mnist"`` -- 1,753,345 parameters, input 1x28x28: PrivImage's MNIST denoiser
    (same network family, its own MNIST config).
``"privimage-cifar10"`` -- 1,754,499 parameters, input 3x32x32: PrivImage's CIFAR-10 denoiser
    (its README's CIFAR-10 config). All three in
    :mod:`paperlib.implementations.paper_models` (sources, sha256, ``file:line`` citations;
    DP-FETA's code has no CIFAR-10 configuration, so there is no DP-FETA CIFAR-10 model).

The classifiers output 10 logits and their loss is the cross-entropy
(``torch.nn.functional.cross_entropy``, mean over the batch). The denoisers output
each example's EDM denoising loss (their code's training loss, with per-record draws;
:class:`paperlib.implementations.paper_models.EDMLossModel`), and the batch loss is
the mean. :func:`training_loss` is the one place that tells the two apart; the runners
and :func:`per_example_grads` go through it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from paperlib.implementations.paper_models import (PAPER_MODELS, build_paper_model, loss_draws,
                                                   paper_model_info)

__all__ = ["ModelSpec", "MODELS", "MODEL_INPUT", "MODEL_PARAMETERS", "MODEL_NAMES", "OFFERED_MODELS", "build_model", "count_parameters",
           "flat_parameters", "per_example_grads", "training_loss", "model_info"]



def _cnn_mnist() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 8, stride=2, padding=3), nn.Tanh(), nn.MaxPool2d(2, 1),
        nn.Conv2d(16, 32, 4, stride=2), nn.Tanh(), nn.MaxPool2d(2, 1),
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 32), nn.Tanh(),
        nn.Linear(32, 10),
    )


def _cnn_cifar10() -> nn.Module:
    layers: list[nn.Module] = []
    c = 3
    for v in (32, 32, "M", 64, 64, "M", 128, 128, "M"):
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(c, int(v), 3, stride=1, padding=1), nn.Tanh()]
            c = int(v)
    layers += [nn.Flatten(), nn.Linear(c * 4 * 4, 128), nn.Tanh(), nn.Linear(128, 10)]
    return nn.Sequential(*layers)


def _large_mnist() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.GroupNorm(8, 32), nn.Tanh(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.GroupNorm(8, 64), nn.Tanh(),
        nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.GroupNorm(8, 128), nn.Tanh(),
        nn.Flatten(),
        nn.Linear(128 * 7 * 7, 215), nn.Tanh(),
        nn.Linear(215, 192), nn.Tanh(),
        nn.Linear(192, 10),
    )


def _tiny() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 2, 7, stride=3), nn.Tanh(), nn.MaxPool2d(2, 2),
        nn.Flatten(),
        nn.Linear(2 * 4 * 4, 10),
    )


@dataclass(frozen=True)
class ModelSpec:
    """One model of the table of models: its ``name``, ``input_shape`` ``(C, H, W)``, the documented number of
    trainable ``parameters`` (asserted exactly by the tests), its ``builder`` (unseeded; :func:`build_model`
    seeds it) and whether the command line offers it (``offered``; ``"tiny"`` is for tests)."""

    name: str
    input_shape: tuple[int, int, int]
    parameters: int
    builder: Callable[[], nn.Module]
    offered: bool = True


#: The table of models (module docstring): every list of model names, shapes and counts is read from it.
MODELS: dict[str, ModelSpec] = {m.name: m for m in (
    ModelSpec("cnn-mnist", (1, 28, 28), 26_010, _cnn_mnist),
    ModelSpec("cnn-cifar10", (3, 32, 32), 550_570, _cnn_cifar10),
    ModelSpec("large-mnist", (1, 28, 28), 1_485_217, _large_mnist),
    ModelSpec("tiny", (1, 28, 28), 430, _tiny, offered=False),
    ModelSpec("dpfeta-mnist", (1, 28, 28), 1_485_217, lambda: build_paper_model("dpfeta-mnist")),
    ModelSpec("privimage-mnist", (1, 28, 28), 1_753_345, lambda: build_paper_model("privimage-mnist")),
    ModelSpec("privimage-cifar10", (3, 32, 32), 1_754_499, lambda: build_paper_model("privimage-cifar10")),
)}
#: views of the table: input shapes, documented counts, every name, the names the command line offers
MODEL_INPUT: dict[str, tuple[int, int, int]] = {k: m.input_shape for k, m in MODELS.items()}
MODEL_PARAMETERS: dict[str, int] = {k: m.parameters for k, m in MODELS.items()}
MODEL_NAMES = tuple(MODELS)
OFFERED_MODELS = tuple(k for k, m in MODELS.items() if m.offered)


def build_model(name: str, seed: int = 0) -> nn.Module:
    """The model ``name`` with starting parameters fixed by ``seed`` (CPU, float32).

    Deterministic: the same ``(name, seed)`` gives bit-identical parameters (on the same
    torch version); the caller's global RNG state is not changed."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = MODELS[name].builder()
    return model.float()


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters ``n`` (the output dimension of one DP-SGD step)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def flat_parameters(model: nn.Module) -> torch.Tensor:
    """The trainable parameters in ``model.parameters()`` order, flattened into one vector
    (the coordinate order of every update and gradient in :mod:`paperlib.implementations`)."""
    return torch.cat([p.detach().reshape(-1) for p in model.parameters() if p.requires_grad])


def model_info(name: str) -> dict:
    """What a result file records of model ``name``: ``name``, ``parameters`` (``n``),
    ``architecture`` (one line) and ``source`` (``repository@commit config`` for the paper's
    models, ``"paperlib.implementations.models"`` for the others); the paper's models add
    ``method``, ``loss`` and ``substitutions``. ValueError for an unknown name."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    if name in PAPER_MODELS:
        p = paper_model_info(name)
        return {"name": name, "parameters": MODEL_PARAMETERS[name], "architecture": p["architecture"],
                "source": f"{p['repository']}@{p['commit'][:7]} {p['config']}", "method": p["method"],
                "loss": p["loss"], "substitutions": p["substitutions"]}
    line = (__doc__ or "").split(f'``"{name}"`` --', 1)[1].split("\n``", 1)[0]
    return {"name": name, "parameters": MODEL_PARAMETERS[name], "architecture": " ".join(line.split()),
            "source": "paperlib.implementations.models", "loss": "cross-entropy"}


def _base(model: nn.Module) -> nn.Module:
    """The module under an Opacus wrapper (``GradSampleModule._module``), else ``model``."""
    return getattr(model, "_module", model)


def _loss_inputs(base: nn.Module, X: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    if getattr(base, "loss_kind", None) == "edm":
        return (X, *loss_draws(X, y))
    return (X, y)


def _batch_loss(forward: Callable, kind: str | None, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    if kind == "edm":  # the model's output is each example's EDM loss; mean over the batch
        return forward(*inputs).mean()
    X, y = inputs
    return nn.functional.cross_entropy(forward(X), y)


def training_loss(model: nn.Module, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The batch's training loss (a scalar; mean over the batch, ``loss_reduction="mean"``).

    ``model``: a model of :func:`build_model`, or the Opacus wrapper around one (its forward
    is the one called, so Opacus's hooks see the layers). Cross-entropy of the logits for
    the classifiers; for the denoisers the mean of the per-example EDM losses with each
    record's fixed draws (:func:`paperlib.implementations.paper_models.loss_draws`). An
    empty batch gives a zero that still depends on the parameters (Opacus needs a backward
    pass through the model)."""
    base = _base(model)
    kind = getattr(base, "loss_kind", None)
    inputs = _loss_inputs(base, X, y)
    if len(X) == 0:
        out = model(*inputs) if kind == "edm" else model(X)
        return out.sum() * 0.0
    return _batch_loss(model, kind, inputs)


def per_example_grads(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *, chunk: int = 64) -> torch.Tensor:
    """Unclipped per-example gradients ``[len(X), n]`` of the model's training loss
    (:func:`training_loss` on one example) at the model's current parameters, by
    ``torch.func.vmap(torch.func.grad(...))``; rows in the order of ``X``, columns in
    :func:`flat_parameters` order."""
    from torch.func import functional_call, grad, vmap

    names = [k for k, p in model.named_parameters() if p.requires_grad]
    params = {k: p.detach() for k, p in model.named_parameters() if p.requires_grad}
    buffers = {k: b.detach() for k, b in model.named_buffers()}
    kind = getattr(model, "loss_kind", None)
    inputs = _loss_inputs(model, torch.as_tensor(X), torch.as_tensor(y))

    def loss(ps, *one):
        return _batch_loss(lambda *a: functional_call(model, (ps, buffers), a), kind, tuple(t.unsqueeze(0) for t in one))

    g = vmap(grad(loss), in_dims=(None,) + (0,) * len(inputs))
    rows = []
    for s in range(0, len(X), chunk):
        gs = g(params, *(t[s:s + chunk] for t in inputs))
        rows.append(torch.cat([gs[k].reshape(gs[k].shape[0], -1) for k in names], dim=1))
    if not rows:
        return torch.zeros(0, count_parameters(model))
    return torch.cat(rows, dim=0)
