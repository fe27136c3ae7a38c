"""Opacus 1.x's DP-SGD step, driven as ``PrivacyEngine.make_private`` builds it, and what is kept of each step.

:func:`run_installed` repeats one step of the Opacus 1.x in this interpreter (the installed
release, or the v1.0 line inside its release subprocess, :mod:`.release_server`) from fixed
``theta_0``; with ``fix_batch_size`` the optimizer is first patched by
:func:`paperlib.implementations.opacus_divisor.fix_normaliser` (the practitioner's fix,
:mod:`paperlib.practitioner.fix`). :class:`StepProjection` keeps only what a white-box audit
uses of each update, computed where the step ran. How each implementation is driven:
:mod:`paperlib.implementations.runners`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

from paperlib.implementations.models import build_model, training_loss
from paperlib.implementations.opacus_divisor import fix_normaliser, normaliser_of

__all__ = ["PROJECT_BLOCK", "StepProjection", "run_installed", "record_step"]


#: rows of updates projected at once (a (PROJECT_BLOCK, n) buffer on the step's device, reused)
PROJECT_BLOCK = 16
#: projection bases held per process (by content key): one audit's D and D' bases
_BASES: dict = {}
#: the block buffer of StepProjection, kept per process for the last (n, device): a fresh (16, n) buffer
#: is faulted in page by page at its first rows (~30 ms per 12 MB row on these machines), once per process
_BUFFERS: dict = {}


def _step_buffer(n: int, dev: torch.device) -> torch.Tensor:
    key = (int(n), str(dev))
    buf = _BUFFERS.get(key)
    if buf is None:
        _BUFFERS.clear()
        buf = _BUFFERS[key] = torch.empty((PROJECT_BLOCK, int(n)), dtype=torch.float64, device=dev)
    return buf


def _basis_tensor(project: dict, dev: torch.device) -> torch.Tensor:
    """The projection's basis as a float64 tensor on ``dev``, converted once per process and key."""
    key = (str(project["key"]), str(dev))
    t = _BASES.get(key)
    if t is None:
        b = project["basis"]
        if isinstance(b, (str, Path)):  # a release subprocess gets the basis as a .npy file
            b = np.load(b)
        t = torch.tensor(np.asarray(b, dtype=np.float64), dtype=torch.float64, device=dev)
        while len(_BASES) >= 2:  # one audit at a time: its D and D' bases
            _BASES.pop(next(iter(_BASES)))
        _BASES[key] = t
    return t


class StepProjection:
    """What an audit keeps of each step, computed on the step's device as the steps are taken.

    The white-box audit only uses the projection of each update on a few directions and its
    squared norm (:func:`paperlib.implementations.real_audit.reduce_chunk`); for a model of
    ``n`` = 1.5 million parameters an update is 12 MB of float64, and carrying ``m`` of them out
    of the step loop (to numpy, out of a release's subprocess, into the reduction) cost several
    times the step. ``project`` (built by :func:`paperlib.implementations.real_audit.step_options`):
    ``basis`` (``(n, k)`` float64 array, or a ``.npy`` path in a release subprocess), ``key`` (a
    content key of that basis: it is converted once per process), ``scale`` (the public output
    scale applied before projecting), ``keep`` (how many of the first updates to return whole,
    unscaled). Rows are projected ``PROJECT_BLOCK`` at a time (one matrix product per block: the
    same bits for the same chunk wherever it runs, on one thread).

    :meth:`result` gives ``coords`` ``(m, k)`` (scaled update times basis), ``sq_norm`` ``(m,)``
    (squared norm of the scaled update), ``finite`` ``(m,)`` bool (every entry finite) and
    ``first`` ``(keep, n)`` float64 (numpy).
    """

    def __init__(self, project: dict, m: int, n: int, dev: torch.device):
        self.B = _basis_tensor(project, dev)
        if self.B.ndim != 2 or self.B.shape[0] != n:
            raise ValueError(f"project: basis must have shape (n={n}, k), got {tuple(self.B.shape)}")
        self.scale = float(project.get("scale", 1.0))
        self.m, self.n = int(m), int(n)
        self.keep = max(0, min(self.m, int(project.get("keep", 0))))
        self.first = np.empty((self.keep, self.n), dtype=np.float64)
        self.buf = _step_buffer(self.n, dev)
        self.coords = torch.empty((self.m, self.B.shape[1]), dtype=torch.float64, device=dev)
        self.sq = torch.empty(self.m, dtype=torch.float64, device=dev)
        self.finite = torch.empty(self.m, dtype=torch.bool, device=dev)
        self.t = 0

    def add(self, flat0: torch.Tensor, flat1: torch.Tensor, lr: float) -> None:
        """The next step: ``theta_0`` (float64) and ``theta_1`` (the parameters, flat); its update
        ``(theta_0 - theta_1) / lr`` is formed in float64 in the buffer (the same values as
        ``(flat0 - flat1.double()) / lr``, without allocating a vector per step)."""
        t, row = self.t, self.t % self.buf.shape[0]
        u = self.buf[row]
        u.copy_(flat1)
        torch.sub(flat0, u, out=u)
        if lr != 1.0:  # dividing by 1 changes no bit
            u.div_(lr)
        if t < self.keep:
            self.first[t] = u.cpu().numpy()
        if self.scale != 1.0:
            u.mul_(self.scale)
        sq = torch.dot(u, u)
        self.sq[t] = sq
        # a square sum is finite exactly when every entry is, unless it overflowed: then look at the entries
        fin = torch.isfinite(sq)
        self.finite[t] = fin if bool(fin) else torch.isfinite(u).all()
        self.t += 1
        if row == self.buf.shape[0] - 1 or self.t == self.m:
            a = self.t - row - 1
            self.coords[a:self.t] = self.buf[:row + 1] @ self.B

    def result(self) -> dict:
        if self.t != self.m:
            raise RuntimeError(f"StepProjection: {self.t} steps added, {self.m} expected")
        return {"coords": self.coords.cpu().numpy(), "sq_norm": self.sq.cpu().numpy(),
                "finite": self.finite.cpu().numpy(), "first": self.first, "n": np.int64(self.n)}


def run_installed(model_name, Xd, yd, q, sigma, C, trials, seed, lr, model_seed, progress, fix_batch_size=None,
                   device="cpu", project=None):
    import warnings

    import opacus
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    N = len(Xd)
    ebs = int(N * q)  # PrivacyEngine.make_private: int(len(data_loader.dataset) * sample_rate)
    notes = [
        "driven through GradSampleModule + DPOptimizer with sample_rate=q and "
        f"expected_batch_size=int(N*q)={ebs}, the value make_private computes (make_private itself "
        "derives sample_rate=1/len(data_loader), which cannot equal every q); Poisson masks "
        "torch.rand(N) < q as DPDataLoader's UniformWithReplacementSampler draws them",
    ]
    if ebs == 0:
        notes.append(f"floor(N q) = floor({N}*{q}) = 0: Opacus divides the noisy sum by zero "
                     "(DPOptimizer.scale_grad: p.grad /= expected_batch_size); the updates are inf/nan")
    dev = torch.device(device)
    model = build_model(model_name, seed=model_seed).to(dev)
    Xd, yd = Xd.to(dev), yd.to(dev)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gsm = GradSampleModule(model, loss_reduction="mean")
        noise_gen = torch.Generator(device=dev).manual_seed(seed + 1)  # DPOptimizer draws noise on the parameters' device
        opt = DPOptimizer(torch.optim.SGD(gsm.parameters(), lr=lr), noise_multiplier=sigma, max_grad_norm=C,
                          expected_batch_size=ebs, loss_reduction="mean", generator=noise_gen)
    if fix_batch_size is not None:  # the fix: divide by the configured batch size on every dataset
        fix_normaliser(opt, fix_batch_size)
        notes.append(f"fixed with paperlib.practitioner.fix_normaliser(optimizer, {fix_batch_size}): the step divides by "
                     f"{normaliser_of(opt):g} (the configured batch size) instead of int(N*q)={ebs}")
        notes = [s for s in notes if "divides the noisy sum by zero" not in s]  # gone with the fix
    params = [p for p in gsm.parameters() if p.requires_grad]
    theta0 = [p.detach().clone() for p in params]
    flat0 = torch.cat([t.reshape(-1) for t in theta0]).double()
    mask_gen = torch.Generator().manual_seed(seed)  # on the CPU: the same masks on every device
    proj = None if project is None else StepProjection(project, trials, flat0.numel(), dev)
    out = np.empty((trials, flat0.numel()), dtype=np.float64) if proj is None else None
    sizes = np.empty(trials, dtype=np.int64)
    t_last = time.perf_counter()
    # Opacus 1.0.x cannot run a zero-row batch (its conv grad sampler and clipper reshape a
    # 0-element tensor with -1): an empty Poisson batch is fed to its own DPOptimizer.step as
    # one all-zero per-sample gradient, whose clipped sum is 0 -- the step then adds the
    # release's noise and divides by expected_batch_size, as it would for an empty batch.
    zero_row_empty = str(opacus.__version__).startswith("1.0.")
    if zero_row_empty:
        notes.append("Opacus 1.0.x fails on a zero-row batch; an empty Poisson batch is passed to its "
                     "DPOptimizer.step as one all-zero per-sample gradient (clipped sum 0, then the release's "
                     "noise and division by expected_batch_size)")
    t_loop = time.perf_counter()
    for t in range(trials):
        with torch.no_grad():
            for p, p0 in zip(params, theta0):
                p.copy_(p0)
        opt.zero_grad(set_to_none=True)
        idx = (torch.rand(N, generator=mask_gen) < q).nonzero().reshape(-1).to(dev)
        sizes[t] = len(idx)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if len(idx) == 0 and zero_row_empty:
                for p in params:  # one all-zero per-sample gradient: clipped sum 0, as for an empty batch
                    p.grad_sample = torch.zeros((1, *p.shape), dtype=p.dtype, device=dev)
                opt.step()
            else:
                loss = training_loss(gsm, Xd[idx], yd[idx])  # the model's own loss (0 with a graph when empty)
                loss.backward()
                opt.step()
        record_step(out, proj, t, flat0, params, lr)
        if progress and time.perf_counter() - t_last > 5:
            print(f"opacus-installed: trial {t + 1}/{trials}", file=sys.stderr, flush=True)
            t_last = time.perf_counter()
    if dev.type != "cpu":
        notes.append(f"run on {dev} (noise from a {dev.type} generator seeded with seed + 1; masks from the CPU one)")
    out = out if proj is None else proj.result()
    return out, sizes, str(opacus.__version__), notes, {"step_seconds": time.perf_counter() - t_loop}


def record_step(out, proj, t: int, flat0: torch.Tensor, params, lr: float) -> None:
    """Step ``t``'s update ``(theta_0 - theta_1) / lr`` (float64): into row ``t`` of ``out``, or projected."""
    flat1 = torch.cat([p.detach().reshape(-1) for p in params])
    if proj is not None:
        proj.add(flat0, flat1, lr)
    else:
        out[t] = ((flat0 - flat1.double()) / lr).cpu().numpy()
