"""The denoisers of DP-FETA and PrivImage, rebuilt from their public code, with their training loss.

Wang et al. (2026, Sections 5.3-5.4, Appendix A.4) audit DP-FETA (Li et al., 2025) and
PrivImage (Li et al., USENIX Security 2024) with "1,485,217-parameter" MNIST models. Both
train a class-conditional diffusion denoiser with DP-SGD: DPDM's NCSN++ network (Song et
al., 2021, as ported by Dockhorn et al.'s DPDM) inside EDM's preconditioning (Karras et
al., 2022), trained with EDM's denoising loss. This module writes that network in our own
code, block by block, from the files below (cited ``file:line`` at each block).

Sources (``SOURCES``; the sha256 of every file read is stored, see :func:`verify_source`)
-----------------------------------------------------------------------------------------
``"dpfeta-mnist"``: https://github.com/SunnierLee/DP-FETA at commit
    ``f95d3a7772ff76a1ff841b85977d1e2d44f470e1`` (2025-06-04, its newest). The MNIST
    fine-tuning config ``configs/mnist_28/train_eps_10.0.yaml:23-31`` builds
    ``EDMDenoiser(NCSNpp(image_size=28, attn_resolutions=[14], ch_mult=[2, 2]))``
    (``runners/finetune_dpp_base.py:42-45``; every other argument is NCSNpp's default,
    ``model/ncsnpp.py:37-59``): **1,485,217 parameters**, the paper's number.
``"privimage-mnist"``: https://github.com/SunnierLee/DP-ImaGen (PrivImage's official code)
    at commit ``3a1d33b781a72b839332b38458f7f5fd746a29a9`` (2023-10-16), the only commit
    with an MNIST config: ``src/PRIVIMAGE+D/configs/mnist_28/train_eps_10.0.yaml:20-26``
    builds ``NCSNpp(image_size=28, attn_resolutions=[7])`` with NCSNpp's default
    ``ch_mult=(1, 2, 2)`` (``src/PRIVIMAGE+D/runners/train_dpdm_base.py``, same
    construction): **1,753,345 parameters** -- not the paper's 1,485,217 (a finding: the
    paper's count is DP-FETA's configuration; PrivImage's own MNIST configuration has a
    third resolution 7x7, attention there, and 268,128 more parameters). The config was
    deleted five days later (commit 43b2cfa); the repository's newest commit has none for
    MNIST. ``model/ncsnpp.py`` at this commit is byte-identical to DP-FETA's (same sha256).
``"privimage-cifar10"``: the same commit; the README's CIFAR-10 run (``README.md:42``) trains
    with ``src/PRIVIMAGE+D/configs/cifar10_32/train_eps_10.0_s.yaml:28-33``:
    ``NCSNpp(image_size=32, num_in_channels=3, num_out_channels=3, attn_resolutions=[16])``,
    ``ch_mult`` and ``nf`` NCSNpp's defaults ``(1, 2, 2)`` and 32: **1,754,499 parameters** (the
    paper gives no size for CIFAR-10). Its loss draws ``n_noise_samples: 8`` (``:65``).
``DP-FETA on CIFAR-10``: cannot be had. DP-FETA's repository has no CIFAR-10 configuration at
    the pinned commit (its newest) or any earlier one (``configs/`` holds ``camelyon_32``,
    ``celeba_32_cond``, ``fmnist_28`` and ``mnist_28``), so no model is built under its name
    for that panel (:data:`UNAVAILABLE`).

Architecture (all three; ``nf = 32``, ``num_res_blocks = 2``, ``resblock_type="biggan"``,
``progressive="none"``, ``embedding_type="positional"``, ``skip_rescale=True``,
``dropout=0``, ``fir=False``, ``label_dim=10`` with classifier-free guidance, SiLU)
-----------------------------------------------------------------------------------
* noise embedding: sinusoidal embedding of ``c_noise`` (width ``nf``; ``layers.py:515-529``),
  plus a class embedding ``Embedding(11, nf)`` (10 labels and the "no label" of CFG),
  then ``Linear(nf, 4nf)``, SiLU, ``Linear(4nf, 4nf)`` (``ncsnpp.py:97-107, 264-282``);
* ``conv3x3(c, nf)`` (``c`` = 1 image channel, 3 on CIFAR-10); per resolution level ``i`` (sizes ``S / 2**i``): ``num_res_blocks``
  BigGAN residual blocks to ``nf * ch_mult[i]`` channels, each followed by self-attention
  when the size is in ``attn_resolutions``; between levels a residual block that
  down-samples (``ncsnpp.py:156-191``);
* middle: residual block, attention, residual block (``ncsnpp.py:193-196``);
* up path: per level, ``num_res_blocks + 1`` residual blocks on the concatenated skip,
  attention at the attention sizes, an up-sampling residual block between levels
  (``ncsnpp.py:198-245``); then ``GroupNorm``, SiLU, ``conv3x3(ch, c)`` (``ncsnpp.py:247-251``);
* BigGAN residual block (``layerspp.py:212-287``): ``GroupNorm(min(c/4, 32))``, SiLU,
  (nearest up-sampling or 2x2 average down-sampling, ``up_or_down_sampling.py:59-69``, of
  both branches), ``conv3x3``, plus ``Linear(4nf, c_out)`` of the SiLU'd embedding,
  ``GroupNorm``, SiLU, ``conv3x3``; skip ``conv1x1`` when the shape changes; output
  ``(skip + h) / sqrt(2)``;
* attention block (``layerspp.py:62-91``): ``GroupNorm``, three ``NIN`` projections
  (``layers.py:557-567``: a per-pixel linear map, written here as the equal ``Conv2d``
  with kernel 1 -- same parameter count ``c*c + c``, and a layer whose per-sample
  gradients every Opacus release computes), softmax over the ``H W`` positions scaled by
  ``c**-0.5``, a fourth projection, ``(x + h) / sqrt(2)``.
* EDM preconditioning (``denoiser.py:7-27``, ``sigma_data = sqrt(1/3)``):
  ``D(x; sigma, y) = c_skip x + c_out F(c_in x, c_noise, y)``.

Initialisation follows the code's ``default_init`` (variance scaling, ``fan_avg``,
uniform; ``layers.py:54-91``; zero biases; scale ``1e-10`` for the convolutions with
``init_scale=0``: the last of each residual block, the fourth attention projection, the
output), drawn under ``torch.manual_seed(seed)`` by
:func:`paperlib.implementations.models.build_model`. The paper's runs fine-tune a
pre-trained checkpoint that is not public; the white-box audit only needs a known
``theta_0`` (THEORY.md section 9).

The loss (:class:`EDMLossModel`)
--------------------------------
The code's training loss is EDM's (``score_losses.py:139-171``, config
``loss: p_mean -1.2, p_std 1.2``): per example, ``log sigma ~ N(p_mean, p_std^2)``, noise
``n ~ N(0, sigma^2 I)``, the label replaced by "no label" with probability 0.1
(``score_losses.py:16-29``), and ``loss = mean_pixels w(sigma) (D(x + n; sigma, y) - x)^2``
with ``w = (sigma^2 + sigma_data^2) / (sigma sigma_data)^2``; the batch loss is the mean
(``runners/finetune_dpp_base.py:239``, ``loss_reduction="mean"``). The audit needs each
record's gradient to be a function of the record (THEORY.md section 9), so the draws are
fixed per record: seeded by the sha256 of the record's bytes and ``LOSS_SEED``
(:func:`loss_draws`). One noise draw per record: the configs draw ``n_noise_samples: 32``
and DP-FETA's patched Opacus averages the 32 per-copy gradients before clipping
(its ``opacus/opacus/optimizers/optimizer.py:406-416``); a stock Opacus release clips each
row, so the audit, which drives stock releases, uses one draw (a stated difference, in
:data:`SUBSTITUTIONS`; the mechanism audited -- clip, sum, add noise, normalise -- is the same).
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["SOURCES", "PAPER_MODELS", "UNAVAILABLE", "SUBSTITUTIONS", "substitutions", "LOSS_SEED", "NCSNpp",
           "EDMDenoiser", "EDMLossModel", "build_paper_model", "loss_draws", "verify_source", "source_dir", "paper_model_info"]

_FETA = "https://github.com/SunnierLee/DP-FETA"
_PRIV = "https://github.com/SunnierLee/DP-ImaGen"

#: every file the architecture and loss were read from, with its sha256 at the pinned commit
SOURCES: dict[str, dict[str, Any]] = {
    "dpfeta-mnist": {
        "method": "DP-FETA", "cite": "Li et al. (2025), DP-FETA", "repository": _FETA,
        "commit": "f95d3a7772ff76a1ff841b85977d1e2d44f470e1", "commit_date": "2025-06-04",
        "config": "configs/mnist_28/train_eps_10.0.yaml",
        "files": {
            "configs/mnist_28/train_eps_10.0.yaml": "fd3a7c19e9a3646187a828c5e46f330f5d980000bcc2b340f2eed981534a7d71",
            "model/ncsnpp.py": "22ac6a1b5ce8ca7ef8e4f0084a2ee480055bddc40f691b0cf51c717708c5c557",
            "model/layerspp.py": "55714531661209ede4c30df64f8660abcf21addc09d6ccf947911dd7e8e8da50",
            "model/layers.py": "4ef3c085a47980f4a26b821d6723948e9395e65af822b7cfafa239f75c583d11",
            "model/up_or_down_sampling.py": "b6c2b3467dc78737748e93034efb9af036d195fa6cdc06ca327dd0a87a0abe07",
            "denoiser.py": "cc9ec2e02cce955ed8ca35850c313966c30f6d0fbbd6cfc54f001fa70f68cde4",
            "score_losses.py": "80f5114a6ef4bcd540afd9eee30031fb8a48a3fc5e9b34f695267e349e285741",
            "runners/finetune_dpp_base.py": "0e7e29b44ea3acfd8842049eed49698cb3b7d07b1b5922d1ecc257562fc7cb1d",
            # imported by ncsnpp.py when the original is built (tests); not cited
            "model/__init__.py": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "model/normalization.py": "0195a2f50be2df649e823a6a2bda91090d54f6c7ab480bbda99376898395c447",
            "model/op/__init__.py": "b6870def7417c01b5a1ee2a4bd3f600810890068b9fc8e536d4486949bb0db70",
            "model/op/mine_fn.py": "5cdf16f00b0b7179284858098c86ee95e230ef4df17781f485509821de57995e",
        },
    },
    "privimage-mnist": {
        "method": "PrivImage", "cite": "Li et al. (USENIX Security 2024), PrivImage", "repository": _PRIV,
        "commit": "3a1d33b781a72b839332b38458f7f5fd746a29a9", "commit_date": "2023-10-16",
        "config": "src/PRIVIMAGE+D/configs/mnist_28/train_eps_10.0.yaml",
        "files": {
            "src/PRIVIMAGE+D/configs/mnist_28/train_eps_10.0.yaml":
                "0ce8c73b65c4a4512c4eca2d0899519a8b3445dc66796835d922f285a1f84dde",
            "src/PRIVIMAGE+D/model/ncsnpp.py": "22ac6a1b5ce8ca7ef8e4f0084a2ee480055bddc40f691b0cf51c717708c5c557",
            "src/PRIVIMAGE+D/model/layerspp.py": "55714531661209ede4c30df64f8660abcf21addc09d6ccf947911dd7e8e8da50",
            "src/PRIVIMAGE+D/model/layers.py": "995e94b53e82f04d33cc4dc0f20ead88e3d744662489e3e3ef1c3a4bfdf37aaf",
            "src/PRIVIMAGE+D/model/up_or_down_sampling.py":
                "b6c2b3467dc78737748e93034efb9af036d195fa6cdc06ca327dd0a87a0abe07",
            "src/PRIVIMAGE+D/denoiser.py": "cc9ec2e02cce955ed8ca35850c313966c30f6d0fbbd6cfc54f001fa70f68cde4",
            "src/PRIVIMAGE+D/score_losses.py": "e06304d1e0749101e4d106d6e24095f8055e6f539ae415acd4d8f0abee5804a8",
            "src/PRIVIMAGE+D/runners/train_dpdm_base.py":
                "7aa4fb6c3c19800bb9064f1fe13c01b01883474682ff243d05c9d32551f35e9d",
            # imported by ncsnpp.py when the original is built (tests); not cited
            "src/PRIVIMAGE+D/model/__init__.py": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "src/PRIVIMAGE+D/model/normalization.py":
                "0195a2f50be2df649e823a6a2bda91090d54f6c7ab480bbda99376898395c447",
            "src/PRIVIMAGE+D/model/op/__init__.py": "b6870def7417c01b5a1ee2a4bd3f600810890068b9fc8e536d4486949bb0db70",
            "src/PRIVIMAGE+D/model/op/mine_fn.py": "5cdf16f00b0b7179284858098c86ee95e230ef4df17781f485509821de57995e",
        },
    },
}
SOURCES["privimage-cifar10"] = {
    **SOURCES["privimage-mnist"], "config": "src/PRIVIMAGE+D/configs/cifar10_32/train_eps_10.0_s.yaml",
    "files": {**{k: v for k, v in SOURCES["privimage-mnist"]["files"].items() if "/configs/" not in k},
              "src/PRIVIMAGE+D/configs/cifar10_32/train_eps_10.0_s.yaml":
                  "c9788e1e38f1da2244a46edf131dca1a1487b2512cf7ccbc9b65d5b9db19cd0c",
              "README.md": "bc2a31803c2fbdf0fc17d1c6215411f467362757773f28894002e3f9e47f8e71"},  # :42 names the config
}

#: (method, panel) pairs of Figure 4 whose own model cannot be had from the method's code, with the reason
UNAVAILABLE: dict[tuple[str, str], str] = {
    ("DP-FETA", "cifar10"): "DP-FETA's public code has no CIFAR-10 configuration, at f95d3a7 or any earlier commit",
}

#: the network arguments each config gives (the rest are NCSNpp's defaults, ncsnpp.py:37-59)
PAPER_MODELS: dict[str, dict[str, Any]] = {
    "dpfeta-mnist": {"image_size": 28, "attn_resolutions": (14,), "ch_mult": (2, 2), "parameters": 1_485_217},
    "privimage-mnist": {"image_size": 28, "attn_resolutions": (7,), "ch_mult": (1, 2, 2), "parameters": 1_753_345},
    "privimage-cifar10": {"image_size": 32, "attn_resolutions": (16,), "ch_mult": (1, 2, 2), "in_ch": 3,
                          "parameters": 1_754_499, "noise_samples": 8},
}

#: what the audit's model and loss do differently from the method's training run (for the grade); the
#: noise draws per record of the config (``n_noise_samples``) go in at {k} (:func:`substitutions`)
SUBSTITUTIONS = (
    "theta_0 is a seeded draw of the code's own initialisation, not the method's (unpublished) pre-trained checkpoint",
    "one EDM noise draw per record, fixed by the record (the config draws {k} and the method's patched Opacus "
    "averages their gradients before clipping)",
    "the NIN projections written as the equal 1x1 convolutions (same function and parameter count)",
)


def substitutions(name: str) -> list[str]:
    """:data:`SUBSTITUTIONS` for the paper model ``name``, with its config's noise draws per record."""
    k = PAPER_MODELS[name].get("noise_samples", 32)  # both MNIST configs: n_noise_samples: 32
    return [t.format(k=k) for t in SUBSTITUTIONS]


#: seed of the per-record loss draws (sigma, noise, label dropout); part of the audit's fixed setting
LOSS_SEED = 0
P_MEAN, P_STD, SIGMA_DATA, LABEL_DROP = -1.2, 1.2, math.sqrt(1.0 / 3.0), 0.1  # configs' loss:, score_losses.py:140
N_CLASSES, NF = 10, 32


# ---------------------------------------------------------------------------- initialisation


def _default_init_(w: torch.Tensor, scale: float = 1.0) -> None:
    """The code's ``default_init`` (layers.py:54-91): uniform with variance ``scale / fan_avg``,
    ``fan = channels * receptive field`` (axis 1 in, axis 0 out); scale 0 becomes 1e-10."""
    scale = 1e-10 if scale == 0 else scale
    shape = w.shape
    receptive = int(np.prod(shape[2:])) if w.ndim > 2 else 1
    fan_avg = (shape[0] + shape[1]) * receptive / 2.0
    with torch.no_grad():
        w.copy_((torch.rand(shape, dtype=w.dtype) * 2.0 - 1.0) * math.sqrt(3.0 * scale / fan_avg))


def _conv(c_in: int, c_out: int, k: int, scale: float = 1.0) -> nn.Conv2d:
    """ddpm_conv3x3 / ddpm_conv1x1 (layers.py:100-124): padding k//2, default_init weights, zero bias."""
    conv = nn.Conv2d(c_in, c_out, k, padding=k // 2)
    _default_init_(conv.weight, scale)
    nn.init.zeros_(conv.bias)
    return conv


def _dense(c_in: int, c_out: int) -> nn.Linear:
    lin = nn.Linear(c_in, c_out)  # ncsnpp.py:102-107, layerspp.py:227-229
    _default_init_(lin.weight)
    nn.init.zeros_(lin.bias)
    return lin


def _norm(c: int) -> nn.GroupNorm:
    return nn.GroupNorm(min(c // 4, 32), c, eps=1e-6)  # layerspp.py:66, 222


# ---------------------------------------------------------------------------- blocks


class _ResBlock(nn.Module):
    """BigGAN residual block with skip rescaling (layerspp.py:212-287; fir=False, dropout 0)."""

    def __init__(self, c_in: int, c_out: int | None = None, temb_dim: int = 4 * NF, up: bool = False,
                 down: bool = False):
        super().__init__()
        c_out = c_out or c_in
        self.up, self.down = up, down
        self.GroupNorm_0 = _norm(c_in)
        self.Conv_0 = _conv(c_in, c_out, 3)
        self.Dense_0 = _dense(temb_dim, c_out)
        self.GroupNorm_1 = _norm(c_out)
        self.Conv_1 = _conv(c_out, c_out, 3, scale=0.0)  # init_scale=0 (ncsnpp.py:55, 141-149)
        self.Conv_2 = _conv(c_in, c_out, 1) if (c_in != c_out or up or down) else None

    @staticmethod
    def _resample(x: torch.Tensor, up: bool, down: bool) -> torch.Tensor:
        if up:  # naive_upsample_2d (up_or_down_sampling.py:59-63): nearest, factor 2
            return x.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)
        if down:  # naive_downsample_2d (up_or_down_sampling.py:66-69): mean of 2x2 blocks
            return F.avg_pool2d(x, 2)
        return x

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        h = F.silu(self.GroupNorm_0(x))
        h = self._resample(h, self.up, self.down)
        x = self._resample(x, self.up, self.down)
        h = self.Conv_0(h) + self.Dense_0(F.silu(temb))[:, :, None, None]
        h = self.Conv_1(F.silu(self.GroupNorm_1(h)))
        if self.Conv_2 is not None:
            x = self.Conv_2(x)
        return (x + h) / math.sqrt(2.0)


class _AttnBlock(nn.Module):
    """Self-attention over the H*W positions (layerspp.py:62-91); NIN (layers.py:557-567) as 1x1 convs."""

    def __init__(self, c: int):
        super().__init__()
        self.GroupNorm_0 = _norm(c)
        # NIN(in, out, init_scale=0.1) draws W of shape (in, out): the same fans as a 1x1 conv
        self.NIN_0, self.NIN_1, self.NIN_2 = (_conv(c, c, 1, scale=0.1) for _ in range(3))
        self.NIN_3 = _conv(c, c, 1, scale=0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        h = self.GroupNorm_0(x)
        q, k, v = self.NIN_0(h).flatten(2), self.NIN_1(h).flatten(2), self.NIN_2(h).flatten(2)  # [B, C, HW]
        w = torch.softmax(torch.einsum("bcp,bcs->bps", q, k) * C ** -0.5, dim=-1)  # [B, HW(query), HW(key)]
        h = torch.einsum("bps,bcs->bcp", w, v).reshape(B, C, H, W)
        return (x + self.NIN_3(h)) / math.sqrt(2.0)


def _timestep_embedding(t: torch.Tensor, dim: int, max_positions: int = 10_000) -> torch.Tensor:
    """Sinusoidal embedding [sin, cos] of ``t`` ([B] -> [B, dim]; layers.py:515-529, dim even here)."""
    half = dim // 2
    freqs = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(max_positions) / (half - 1)))
    arg = t.float()[:, None] * freqs[None, :]
    return torch.cat([torch.sin(arg), torch.cos(arg)], dim=1)


class NCSNpp(nn.Module):
    """DPDM's NCSN++ (ncsnpp.py:34-401) for the settings the configs of :data:`PAPER_MODELS` use.

    ``forward(x, c_noise, y)``: ``x`` ``[B, in_ch, S, S]`` float, ``c_noise`` ``[B]``, ``y`` ``[B]``
    long in ``0..10`` (10 = no label) -> ``[B, in_ch, S, S]`` (``num_in_channels`` =
    ``num_out_channels`` = ``in_ch`` in every config). The submodules sit in
    ``all_modules`` in the code's order, so parameter names and order follow it.
    """

    def __init__(self, image_size: int, attn_resolutions: tuple[int, ...], ch_mult: tuple[int, ...],
                 nf: int = NF, num_res_blocks: int = 2, in_ch: int = 1, label_dim: int = N_CLASSES):
        super().__init__()
        self.nf, self.num_res_blocks, self.attn = nf, num_res_blocks, tuple(attn_resolutions)
        self.levels = len(ch_mult)
        sizes = [image_size // 2 ** i for i in range(self.levels)]
        m: list[nn.Module] = [nn.Embedding(label_dim + 1, nf), _dense(nf, 4 * nf), _dense(4 * nf, 4 * nf)]
        m.append(_conv(in_ch, nf, 3))
        skips, c = [nf], nf
        for i in range(self.levels):  # ncsnpp.py:164-191
            for _ in range(num_res_blocks):
                m.append(_ResBlock(c, nf * ch_mult[i]))
                c = nf * ch_mult[i]
                if sizes[i] in self.attn:
                    m.append(_AttnBlock(c))
                skips.append(c)
            if i != self.levels - 1:
                m.append(_ResBlock(c, down=True))
                skips.append(c)
        m += [_ResBlock(c), _AttnBlock(c), _ResBlock(c)]  # ncsnpp.py:193-196
        for i in reversed(range(self.levels)):  # ncsnpp.py:200-243
            for _ in range(num_res_blocks + 1):
                m.append(_ResBlock(c + skips.pop(), nf * ch_mult[i]))
                c = nf * ch_mult[i]
            if sizes[i] in self.attn:
                m.append(_AttnBlock(c))
            if i != 0:
                m.append(_ResBlock(c, up=True))
        assert not skips
        m += [_norm(c), _conv(c, in_ch, 3, scale=0.0)]  # ncsnpp.py:247-251
        self.all_modules = nn.ModuleList(m)

    def forward(self, x: torch.Tensor, c_noise: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        mods = iter(self.all_modules)
        temb = _timestep_embedding(c_noise, self.nf) + next(mods)(y)  # ncsnpp.py:264-282
        temb = next(mods)(temb)
        temb = next(mods)(F.silu(temb))
        hs = [next(mods)(x)]
        for i in range(self.levels):
            for _ in range(self.num_res_blocks):
                h = next(mods)(hs[-1], temb)
                if h.shape[-1] in self.attn:
                    h = next(mods)(h)
                hs.append(h)
            if i != self.levels - 1:
                hs.append(next(mods)(hs[-1], temb))
        h = next(mods)(hs[-1], temb)
        h = next(mods)(h)
        h = next(mods)(h, temb)
        for i in reversed(range(self.levels)):
            for _ in range(self.num_res_blocks + 1):
                h = next(mods)(torch.cat([h, hs.pop()], dim=1), temb)
            if h.shape[-1] in self.attn:
                h = next(mods)(h)
            if i != 0:
                h = next(mods)(h, temb)
        h = F.silu(next(mods)(h))
        return next(mods)(h)


class EDMDenoiser(nn.Module):
    """EDM preconditioning (denoiser.py:7-27): ``D(x; sigma, y) = c_skip x + c_out F(c_in x, log(sigma)/4, y)``.
    ``x`` ``[B, c, S, S]``, ``sigma`` ``[B, 1, 1, 1]`` (> 0), ``y`` ``[B]`` long."""

    def __init__(self, net: nn.Module, sigma_data: float = SIGMA_DATA):
        super().__init__()
        self.sigma_data = sigma_data
        self.model = net

    def forward(self, x: torch.Tensor, sigma: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        sd2 = self.sigma_data ** 2
        c_skip = sd2 / (sigma ** 2 + sd2)
        c_out = sigma * self.sigma_data / torch.sqrt(sd2 + sigma ** 2)
        c_in = 1.0 / torch.sqrt(sd2 + sigma ** 2)
        return c_skip * x + c_out * self.model(c_in * x, (0.25 * torch.log(sigma)).reshape(-1), y)


class EDMLossModel(nn.Module):
    """The denoiser with EDM's loss as its output: ``forward(x, y, noise, sigma) -> [B]`` per-example losses.

    ``x`` ``[B, c, S, S]``; ``y`` ``[B]`` long (after label dropout, 10 = no label); ``noise``
    ``[B, c, S, S]`` standard normal; ``sigma`` ``[B]`` > 0. Loss of score_losses.py:148-171
    with one noise sample: ``mean_pixels w(sigma) (D(x + sigma noise; sigma, y) - x)^2``.
    The batch loss is the mean of the output (:func:`paperlib.implementations.models.training_loss`);
    the per-record draws come from :func:`loss_draws`.
    """

    loss_kind = "edm"

    def __init__(self, name: str):
        super().__init__()
        cfg = PAPER_MODELS[name]
        self.name = name
        self.denoiser = EDMDenoiser(NCSNpp(cfg["image_size"], cfg["attn_resolutions"], cfg["ch_mult"],
                                           in_ch=cfg.get("in_ch", 1)))

    def forward(self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        s = sigma.reshape(-1, 1, 1, 1)
        w = (s ** 2 + SIGMA_DATA ** 2) / (s * SIGMA_DATA) ** 2
        err = w * (self.denoiser(x + s * noise, s, y) - x) ** 2
        return err.flatten(1).mean(dim=1)


def build_paper_model(name: str) -> EDMLossModel:
    """``EDMLossModel(name)`` for ``name`` in :data:`PAPER_MODELS`, parameters drawn from torch's
    global generator (seed and fork it around the call: :func:`paperlib.implementations.models.build_model`)."""
    if name not in PAPER_MODELS:
        raise ValueError(f"unknown paper model {name!r}; choose one of {', '.join(PAPER_MODELS)}")
    return EDMLossModel(name)


def loss_draws(X: torch.Tensor, y: torch.Tensor, seed: int = LOSS_SEED) -> tuple[torch.Tensor, ...]:
    """The per-record draws of EDM's loss, fixed by each record: ``(y_used, noise, sigma)``.

    For record ``i`` a generator is seeded with the first 8 bytes of
    ``sha256(seed, x_i as float32 bytes, y_i)``; it draws ``log sigma ~ N(P_MEAN, P_STD^2)``,
    the label dropout (probability ``LABEL_DROP``, label -> 10) and ``noise ~ N(0, I)`` of
    ``x_i``'s shape (score_losses.py:16-29, 148-162). The same record gives the same draws
    in any batch, so its gradient is a function of the record (THEORY.md section 9).
    ``X`` ``[B, c, S, S]``, ``y`` ``[B]``; returns ``[B]`` long, ``[B, c, S, S]``, ``[B]`` float32.
    """
    X = torch.as_tensor(X, dtype=torch.float32).detach().cpu()
    y = torch.as_tensor(y, dtype=torch.long).detach().cpu()
    ys, noises, sigmas = [], [], []
    for xi, yi in zip(X, y):
        h = hashlib.sha256(int(seed).to_bytes(8, "little", signed=True) + xi.contiguous().numpy().tobytes()
                           + int(yi).to_bytes(8, "little", signed=True)).digest()
        g = torch.Generator().manual_seed(int.from_bytes(h[:8], "little") & (2 ** 63 - 1))
        log_sigma = P_MEAN + P_STD * torch.randn((), generator=g)
        drop = bool(torch.rand((), generator=g) < LABEL_DROP)
        noises.append(torch.randn(xi.shape, generator=g))
        sigmas.append(log_sigma.exp())
        ys.append(N_CLASSES if drop else int(yi))
    if not ys:
        return torch.zeros(0, dtype=torch.long), torch.zeros((0, *X.shape[1:])), torch.zeros(0)
    return torch.tensor(ys, dtype=torch.long), torch.stack(noises), torch.stack(sigmas).float()


def paper_model_info(name: str) -> dict[str, Any]:
    """Provenance for result files and the grade: ``method``, ``repository``, ``commit``,
    ``config``, ``architecture`` (one line), ``loss``, ``substitutions``."""
    src, cfg = SOURCES[name], PAPER_MODELS[name]
    return {"method": src["method"], "repository": src["repository"], "commit": src["commit"],
            "config": src["config"],
            "architecture": (f"EDM-preconditioned NCSN++ (DPDM), {cfg['image_size']}x{cfg['image_size']}x"
                             f"{cfg.get('in_ch', 1)}, nf 32, ch_mult {list(cfg['ch_mult'])}, "
                             f"2 residual blocks per level, attention at {list(cfg['attn_resolutions'])}, "
                             "class-conditional (10 labels + no-label)"),
            "loss": "EDM denoising loss (score_losses.py EDMLoss), one fixed noise draw per record",
            "substitutions": substitutions(name)}


# ---------------------------------------------------------------------------- source verification


def source_dir(name: str) -> Path:
    """``<cache>/paper-models/<owner>+<repo>/<commit>/``: where a copy of the source is looked for."""
    from paperlib.implementations.cache import cache_root

    src = SOURCES[name]
    owner_repo = src["repository"].rstrip("/").split("github.com/")[1].replace("/", "+")
    return cache_root() / "paper-models" / owner_repo / src["commit"]


def verify_source(name: str, root: str | Path | None = None) -> dict[str, str]:
    """Check the files ``name`` was read from against their stored sha256.

    ``root``: a checkout (or export) of the repository at the pinned commit; default
    :func:`source_dir`. Returns ``{path: "ok" | "missing"}``; raises ``ValueError`` (one
    line naming the file) when a present file's sha256 differs."""
    if name not in SOURCES:
        raise ValueError(f"name: unknown paper model {name!r}; choose one of {', '.join(SOURCES)}")
    base = Path(root) if root is not None else source_dir(name)
    out = {}
    for rel, want in SOURCES[name]["files"].items():
        p = base / rel
        if not p.is_file():
            out[rel] = "missing"
            continue
        got = hashlib.sha256(p.read_bytes()).hexdigest()
        if got != want:
            raise ValueError(f"{name} source file {p} has sha256 {got[:16]}..., expected {want[:16]}... "
                             f"(commit {SOURCES[name]['commit'][:7]})")
        out[rel] = "ok"
    return out
