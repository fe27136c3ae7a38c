"""Models with the paper's parameter counts, built with fixed, seeded starting parameters.

The audits of Section 4 are white box: the adversary knows the starting parameters
``theta_0`` and hence every per-example gradient (THEORY.md section 9). Every model here
is therefore built deterministically from ``(name, seed)``: the default PyTorch
initialisation run under ``torch.manual_seed(seed)`` inside a forked RNG state (the
caller's global RNG is left untouched).

Only layers whose per-sample gradients Opacus computes are used (``Conv2d``, ``Linear``,
``GroupNorm``; ``Tanh`` and ``MaxPool2d`` have no parameters); no ``BatchNorm``.

Names (``MODEL_INPUT`` gives the input shape ``(C, H, W)``; counts are trainable
parameters, asserted exactly by ``tests/test_models.py``):

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

All models output 10 logits; the loss everywhere is the cross-entropy
(``torch.nn.functional.cross_entropy``, mean over the batch).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

__all__ = ["MODEL_INPUT", "MODEL_PARAMETERS", "MODEL_NAMES", "build_model", "count_parameters",
           "flat_parameters", "per_example_grads"]

MODEL_INPUT: dict[str, tuple[int, int, int]] = {
    "cnn-mnist": (1, 28, 28),
    "cnn-cifar10": (3, 32, 32),
    "large-mnist": (1, 28, 28),
    "tiny": (1, 28, 28),
}
# the documented counts (asserted by the tests)
MODEL_PARAMETERS: dict[str, int] = {
    "cnn-mnist": 26_010,
    "cnn-cifar10": 550_570,
    "large-mnist": 1_485_217,
    "tiny": 430,
}
MODEL_NAMES = tuple(MODEL_INPUT)


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


_BUILDERS: dict[str, Callable[[], nn.Module]] = {
    "cnn-mnist": _cnn_mnist,
    "cnn-cifar10": _cnn_cifar10,
    "large-mnist": _large_mnist,
    "tiny": _tiny,
}


def build_model(name: str, seed: int = 0) -> nn.Module:
    """The model ``name`` with starting parameters fixed by ``seed`` (CPU, float32).

    Deterministic: the same ``(name, seed)`` gives bit-identical parameters (on the same
    torch version); the caller's global RNG state is not changed."""
    if name not in _BUILDERS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(_BUILDERS)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = _BUILDERS[name]()
    return model.float()


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters ``n`` (the output dimension of one DP-SGD step)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def flat_parameters(model: nn.Module) -> torch.Tensor:
    """The trainable parameters in ``model.parameters()`` order, flattened into one vector
    (the coordinate order of every update and gradient in :mod:`paperlib.implementations`)."""
    return torch.cat([p.detach().reshape(-1) for p in model.parameters() if p.requires_grad])


def per_example_grads(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *, chunk: int = 64) -> torch.Tensor:
    """Unclipped per-example gradients ``[len(X), n]`` of the cross-entropy loss at the
    model's current parameters, by ``torch.func.vmap(torch.func.grad(...))``; rows in the
    order of ``X``, columns in :func:`flat_parameters` order."""
    from torch.func import functional_call, grad, vmap

    names = [k for k, p in model.named_parameters() if p.requires_grad]
    params = {k: p.detach() for k, p in model.named_parameters() if p.requires_grad}
    buffers = {k: b.detach() for k, b in model.named_buffers()}

    def loss(ps, x, t):
        out = functional_call(model, (ps, buffers), (x.unsqueeze(0),))
        return nn.functional.cross_entropy(out, t.unsqueeze(0))

    g = vmap(grad(loss), in_dims=(None, 0, 0))
    rows = []
    for s in range(0, len(X), chunk):
        gs = g(params, X[s:s + chunk], y[s:s + chunk])
        rows.append(torch.cat([gs[k].reshape(gs[k].shape[0], -1) for k in names], dim=1))
    if not rows:
        return torch.zeros(0, count_parameters(model))
    return torch.cat(rows, dim=0)
