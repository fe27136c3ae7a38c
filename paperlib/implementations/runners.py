"""One real DP-SGD step of each implementation, repeated: the outputs the audits observe.

For the white-box audit of THEORY.md section 9 the model starts from fixed, seeded
parameters ``theta_0`` (:func:`paperlib.implementations.models.build_model`), takes one
DP-SGD step with Poisson sampling and ``loss_reduction="mean"`` (cross-entropy loss) and
an SGD optimiser with learning rate ``lr``, and the adversary sees the update
``u = (theta_0 - theta_1) / lr``, which is the normalised noisy gradient
``(S_B + G) / nu``; ``nu`` is what each implementation divides by (THEORY.md section 2).
:func:`run_steps` repeats the step for ``trials`` independent trials, each from
``theta_0``.

Implementations (:data:`IMPLEMENTATIONS`)
-----------------------------------------
``"opacus-installed"`` (Opacus v1.x, FEASGM, ``nu = floor(N q)``)
    Imported directly, in process. ``PrivacyEngine.make_private`` derives the sampling
    rate from the data loader, ``sample_rate = 1 / len(data_loader)``, which cannot equal
    most ``q`` (0.6, say). So the step is driven through the objects ``make_private``
    builds, with the values it would compute for rate ``q``:
    ``GradSampleModule(model, loss_reduction="mean")`` and
    ``DPOptimizer(SGD, noise_multiplier=sigma, max_grad_norm=C,
    expected_batch_size=int(len(dataset) * q), loss_reduction="mean", generator=...)``
    (``expected_batch_size`` exactly as ``make_private`` computes it), and the batch is
    drawn as ``DPDataLoader``'s ``UniformWithReplacementSampler`` draws it
    (``torch.rand(N) < q``). An empty batch is fed as a zero-row tensor, as
    ``DPDataLoader`` does. With ``floor(N q) = 0`` the optimiser divides by zero: the
    updates contain ``inf``/``nan`` and a note says so (THEORY.md section 0: reproduce,
    do not hide).
``"opacus-1.0.2"`` (FEASGM, ``nu = floor(N q)``): the Opacus v1.0 line the paper audits
    (DP-FETA's code path, Appendix A.3); 1.0.2 is the last release of that line. Installed
    and run in a subprocess as the v0 releases below (same cache, sha256-verified wheel),
    and driven exactly as ``"opacus-installed"`` (the same function runs inside the
    subprocess, with the release first on ``sys.path``).
``"opacus-0.15.0"`` (EASGM, ``nu = N q``) and ``"opacus-0.13.0"`` (ASGM, ``nu = |B|``)
    Installed from the release cache with ``pip install --no-deps --target
    <cache>/opacus-<version>`` (:func:`paperlib.implementations.opacus_code.install_release`) and run in
    ONE subprocess per call, with that folder first on ``PYTHONPATH`` and the
    compatibility shims of :mod:`paperlib.implementations.opacus_code` (torchcsprng stub,
    ``ModuleAttributeError``); the subprocess loops over the trials and returns the
    updates in a ``.npy`` file. v0.15.0:
    ``PrivacyEngine(model, sample_rate=q, sample_size=N, poisson=True,
    noise_multiplier=sigma, max_grad_norm=C).attach(SGD)``. Its optimiser also takes a
    random number of extra noise-only "empty batch" steps after each step (its simulation
    of the empty Poisson batches of later rounds); they belong to other rounds, so the
    count is set to zero (as :func:`paperlib.implementations.opacus_code.step_check` does) and one
    round's update is measured. When the Poisson batch of the round is empty, the
    release's own empty-batch path is used (``optimizer.dp_step(is_empty=True)``, noise
    divided by ``avg_batch_size = N q``). v0.13.0:
    ``PrivacyEngine(model, sample_rate=q, noise_multiplier=sigma,
    max_grad_norm=C).attach(SGD)``; it divides by the realised ``|B|`` but has no
    empty-batch path (its clipper needs per-sample gradients). **Convention**: an empty
    batch gives the noise-only update ``G / 1``, the noise drawn by the release's own
    ``PrivacyEngine._generate_noise`` (std ``sigma C``) and divided by 1 (THEORY.md
    section 0's zero-normaliser convention for ASGM); it is reported in ``notes``.
    The releases' noise RNG is seeded with ``PrivacyEngine._set_seed`` so runs repeat.
``"dpsur"`` (DPSUR's rule, ``nu = |B'|`` of a separate Poisson draw, no step on an empty batch)
    :mod:`paperlib.implementations.dpsur`, in process and batched over trials.
``"opacus-installed+fix"`` (SGM divided by a public constant, ``nu = batch_size``)
    The ``"opacus-installed"`` step with :func:`paperlib.practitioner.fix.fix_normaliser` applied to
    its ``DPOptimizer`` (``expected_batch_size`` set to the configured ``batch_size``,
    a keyword of :func:`run_steps` required for it); same masks and noise for the same
    seed, so the two differ only in the divisor. Documented mechanism SGM: the update
    is the SGM output divided by ``batch_size`` (:func:`output_scale`). Not in
    :data:`IMPLEMENTATIONS` (the releases as shipped); listed in
    :data:`FIXED_IMPLEMENTATIONS`.

Datasets and randomness
-----------------------
``X`` holds ``N + 1`` points; ``dataset="D"`` uses the first ``N``, ``"Dprime"`` all
``N + 1`` (the last is the added point). The batch masks of every implementation come
from ``torch.Generator().manual_seed(seed)`` (the same masks for the same seed across
implementations); the noise from a generator seeded with ``seed + 1`` (DPSUR draws mask
and noise from one generator, see its module). The model's starting parameters are
``build_model(model_name, seed=model_seed)`` with ``model_seed = 0`` unless given.

The normaliser, measured
------------------------
:func:`detect_normaliser` reads ``nu`` off the updates (method in its docstring);
:func:`per_example_gradients` gives the gradients it needs.
"""

from __future__ import annotations

from paperlib.fdp.validation import ComputationError, ParameterError

import hashlib
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from paperlib.implementations.models import build_model, per_example_grads, training_loss
# the implementations, their mechanisms and releases: one table
from paperlib.implementations.registry import FIXED_IMPLEMENTATIONS, IMPLEMENTATION_MECHANISM, IMPLEMENTATIONS, RELEASES
from paperlib.mechanisms.core import Mechanism

__all__ = [
    "IMPLEMENTATIONS",
    "IMPLEMENTATION_MECHANISM",
    "FIXED_IMPLEMENTATIONS",
    "output_scale",
    "CANDIDATES",
    "RELEASES",
    "ReleaseNotAvailable",
    "run_steps",
    "step_device",
    "close_release_servers",
    "per_example_gradients",
    "detect_normaliser",
]

DEFAULT_MODEL_SEED = 0


class ReleaseNotAvailable(ComputationError):
    """An old Opacus release is not in the cache (offline) or does not run here."""


def step_device(device=None) -> torch.device:
    """The torch device real steps run on: the one place that chooses it.

    ``None`` (default): ``"cuda"`` when torch sees a GPU, else ``"cpu"``; ``"cpu"``,
    ``"cuda"`` or ``"cuda:<k>"`` to force one (a CUDA device without a visible GPU is a
    ValueError naming ``device``). The batch masks are drawn on the CPU either way (the same
    masks on every device); the noise comes from a generator on the device, so CPU and CUDA
    runs of one seed differ in their noise draws (compared as distributions by
    ``bench/device_check.py``).
    """
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ParameterError("device", f"device must be 'cpu', 'cuda' or 'cuda:<k>', not {device!r}") from exc
    if dev.type not in ("cpu", "cuda"):
        raise ParameterError("device", f"device must be 'cpu', 'cuda' or 'cuda:<k>', not {device!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ParameterError("device", f"device: {device!r} asked for, but torch sees no GPU here; use 'cpu' or leave it unset")
    return dev


# ---------------------------------------------------------------------------- projection at the step
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


def _check(implementation, model_name, X, y, dataset, q, sigma, C, trials, lr):
    from paperlib.implementations.models import MODEL_INPUT

    if implementation not in IMPLEMENTATION_MECHANISM:
        raise ParameterError("implementation", f"implementation must be one of {tuple(IMPLEMENTATION_MECHANISM)}, not {implementation!r}")
    if model_name not in MODEL_INPUT:
        raise ValueError(f"unknown model {model_name!r}; choose one of {', '.join(MODEL_INPUT)}")
    if dataset not in ("D", "Dprime"):
        raise ParameterError("dataset", f"dataset must be 'D' or 'Dprime', not {dataset!r}")
    if not 0.0 < q <= 1.0:
        raise ParameterError("q", f"q must lie in (0, 1], not {q}")
    if sigma < 0 or C <= 0 or lr <= 0 or trials < 1:
        raise ValueError("need sigma >= 0, C > 0, lr > 0, trials >= 1")
    if X.ndim != 4 or tuple(X.shape[1:]) != MODEL_INPUT[model_name] or len(y) != len(X) or len(X) < 2:
        raise ValueError(f"X must be [N+1, {MODEL_INPUT[model_name]}] with N >= 1 and y [N+1]; "
                         f"got X {tuple(X.shape)}, y {tuple(y.shape)}")


def _data(X, y, dataset):
    X = torch.as_tensor(X, dtype=torch.float32).detach().cpu()
    y = torch.as_tensor(y, dtype=torch.long).detach().cpu()
    N_data = len(X) - 1 if dataset == "D" else len(X)
    return X[:N_data].contiguous(), y[:N_data].contiguous()


# ---------------------------------------------------------------------------- installed Opacus


def _run_installed(model_name, Xd, yd, q, sigma, C, trials, seed, lr, model_seed, progress, fix_batch_size=None,
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
        from paperlib.practitioner.fix import fix_normaliser, normaliser_of

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
        _record(out, proj, t, flat0, params, lr)
        if progress and time.perf_counter() - t_last > 5:
            print(f"opacus-installed: trial {t + 1}/{trials}", file=sys.stderr, flush=True)
            t_last = time.perf_counter()
    if dev.type != "cpu":
        notes.append(f"run on {dev} (noise from a {dev.type} generator seeded with seed + 1; masks from the CPU one)")
    out = out if proj is None else proj.result()
    return out, sizes, str(opacus.__version__), notes, {"step_seconds": time.perf_counter() - t_loop}


def _record(out, proj, t: int, flat0: torch.Tensor, params, lr: float) -> None:
    """Step ``t``'s update ``(theta_0 - theta_1) / lr`` (float64): into row ``t`` of ``out``, or projected."""
    flat1 = torch.cat([p.detach().reshape(-1) for p in params])
    if proj is not None:
        proj.add(flat0, flat1, lr)
    else:
        out[t] = ((flat0 - flat1.double()) / lr).cpu().numpy()


# ---------------------------------------------------------------------------- old releases


def _legacy_worker(spec_path: str) -> None:
    """Runs inside the subprocess (old release first on ``sys.path``).

    (Over 80 lines: the subprocess's whole request loop under the old release's interpreter, in one function so
    that nothing at module level runs before the release is first on ``sys.path``.)"""
    import warnings

    import opacus

    from paperlib.implementations.opacus_code.stepcheck import opacus_api, opacus_version

    warnings.simplefilter("ignore")
    spec = json.loads(Path(spec_path).read_text())
    version = opacus_version(opacus)
    if version != spec["version"]:
        raise RuntimeError(f"imported opacus {version} from {opacus.__file__}, not {spec['version']}")
    api = opacus_api(opacus)
    torch.set_num_threads(int(spec.get("threads", 1)))  # one thread: the same float sums in every process
    dev = torch.device(spec.get("device", "cpu"))
    Xd = torch.from_numpy(np.load(spec["X"]))
    yd = torch.from_numpy(np.load(spec["y"]))
    N, q, sigma, C, lr, trials, seed = (len(Xd), spec["q"], spec["sigma"], spec["C"], spec["lr"],
                                        spec["trials"], spec["seed"])
    project = spec.get("project")  # {"basis": .npy path, "key", "scale", "keep"}: project at the step
    if api == "v1-make_private":  # v1.x: the installed-Opacus driver, run against this release
        out, sizes, _, notes, timing = _run_installed(spec["model_name"], Xd, yd, q, sigma, C, trials, seed, lr,
                                                      spec["model_seed"], bool(spec.get("progress")), device=dev,
                                                      project=project)
        _save_steps(spec, out)
        np.save(spec["sizes"], sizes)
        Path(spec["meta"]).write_text(json.dumps({"version": version, "api": api, "notes": notes,
                                                  "torch": torch.__version__, **timing}))
        return
    model = build_model(spec["model_name"], seed=spec["model_seed"]).to(dev)  # before the engine reads its device
    Xd, yd = Xd.to(dev), yd.to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    notes = []
    if api == "v0-poisson":
        engine = opacus.PrivacyEngine(model, sample_rate=q, sample_size=N, poisson=True,
                                      noise_multiplier=sigma, max_grad_norm=C)
        engine._sample_poisson_empty_batches = lambda: 0
        notes.append("v0.15 poisson: extra noise-only 'empty batch' steps after each step (other rounds) "
                     "switched off, one round measured; an empty batch of this round goes through the "
                     "release's own dp_step(is_empty=True) (noise / avg_batch_size)")
    elif api == "v0-sample_rate":
        engine = opacus.PrivacyEngine(model, sample_rate=q, noise_multiplier=sigma, max_grad_norm=C)
        notes.append("v0.13 has no empty-batch path; convention: an empty Poisson batch gives the "
                     "noise-only update G/1 (G from the release's PrivacyEngine._generate_noise, std sigma*C; "
                     "THEORY.md section 0 zero-normaliser convention for ASGM)")
    else:
        raise RuntimeError(f"opacus {version}: API {api} is not handled by this runner")
    engine.attach(opt)
    if dev.type == "cpu":
        engine.random_number_generator = engine._set_seed(seed + 1)
    else:  # the release's _set_seed seeds the CPU generator; its noise is drawn on engine.device
        engine.random_number_generator = torch.Generator(device=dev).manual_seed(seed + 1)
        notes.append(f"run on {dev} (noise from a {dev.type} generator seeded with seed + 1; masks from the CPU one)")
    params = [p for p in model.parameters() if p.requires_grad]
    theta0 = [p.detach().clone() for p in params]
    flat0 = torch.cat([t.reshape(-1) for t in theta0]).double()
    mask_gen = torch.Generator().manual_seed(seed)
    proj = None if project is None else StepProjection(project, trials, flat0.numel(), dev)
    out = np.empty((trials, flat0.numel()), dtype=np.float64) if proj is None else None
    sizes = np.empty(trials, dtype=np.int64)
    empty = 0
    t_loop = time.perf_counter()
    for t in range(trials):
        with torch.no_grad():
            for p, p0 in zip(params, theta0):
                p.copy_(p0)
        opt.zero_grad()
        idx = (torch.rand(N, generator=mask_gen) < q).nonzero().reshape(-1).to(dev)
        sizes[t] = len(idx)
        if len(idx) == 0:
            empty += 1
            if api == "v0-poisson":
                for p in params:
                    p.grad = torch.zeros_like(p)
                opt.dp_step(closure=None, is_empty=True)
            else:
                for p in params:
                    p.grad = torch.zeros_like(p)  # _generate_noise reads reference.grad's shape
                    p.grad = p.grad + engine._generate_noise(C, p) / 1.0
                opt.original_step()
        else:
            loss = training_loss(model, Xd[idx], yd[idx])
            loss.backward()
            opt.step()
        _record(out, proj, t, flat0, params, lr)
        if spec.get("progress") and (t + 1) % max(1, trials // 10) == 0:
            print(f"opacus {version}: trial {t + 1}/{trials}", file=sys.stderr, flush=True)
    notes.append(f"{empty} of {trials} trials had an empty Poisson batch")
    out = out if proj is None else proj.result()
    step_seconds = time.perf_counter() - t_loop
    _save_steps(spec, out)
    np.save(spec["sizes"], sizes)
    Path(spec["meta"]).write_text(json.dumps({"version": version, "api": api, "notes": notes,
                                              "torch": torch.__version__, "step_seconds": step_seconds}))


def _save_steps(spec: dict, out) -> None:
    """The subprocess's steps to ``spec["out"]``: the ``(m, n)`` updates (``.npy``), or their projection
    (:class:`StepProjection`'s result, an uncompressed ``.npz``)."""
    if isinstance(out, dict):
        with open(spec["out"], "wb") as f:
            np.savez(f, **out)
    else:
        np.save(spec["out"], out)


def _legacy_serve() -> None:
    """Runs inside a long-lived release subprocess: the release is imported once (then ``ready``
    on the original stdout: the parent times this start-up apart from the steps), then each
    line on stdin is a spec path, run by :func:`_legacy_worker`; the answer is one line on
    the original stdout, ``ok`` or ``error <message>`` (everything else the release prints
    goes to stderr, so the protocol cannot be garbled)."""
    import os
    import signal

    # an interrupt meant for the parent (Ctrl-C, a Dask worker's shutdown) reaches the whole process
    # group: this server ends when its stdin closes instead, after the step in hand, with no traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # prints of the release go to stderr
    try:  # what every first step would import: the release, and torch's optimiser machinery
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import opacus  # noqa: F401

            torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    except Exception:  # a release that does not import says so on its first spec, in _legacy_worker
        pass
    proto.write("ready\n")
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        try:
            _legacy_worker(path)
            proto.write("ok\n")
        except BaseException as exc:  # reported to the parent, which raises ReleaseNotAvailable
            msg = " ".join(f"{type(exc).__name__}: {exc}".split())
            proto.write(f"error {msg[:500]}\n")


_SERVE_CALL = "from paperlib.implementations.runners import _legacy_serve\n_legacy_serve()\n"
#: the live release subprocesses of this process, by (version, folder): each loads its release once
_SERVERS: dict = {}


def _release_server(version: str, target: Path, env: dict) -> tuple[subprocess.Popen, float]:
    """This process's subprocess of the release, and the seconds it took to start (0 when it was
    already running): started once per process, it imports the release before its first step."""
    from paperlib.implementations.opacus_code.stepcheck import SHIM_PRELUDE

    key = (version, str(target))
    proc = _SERVERS.get(key)
    startup = 0.0
    if proc is None or proc.poll() is not None:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", SHIM_PRELUDE + _SERVE_CALL], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=None, text=True, env=env, cwd=str(target),
                                bufsize=1)
        proc.stdout.readline()  # "ready" (or nothing: it died, and the first spec reports it)
        startup = time.perf_counter() - t0
        _SERVERS[key] = proc
        if len(_SERVERS) == 1:
            import atexit

            atexit.register(close_release_servers)
    return proc, startup


#: this process's projection bases as files for its release subprocesses: {"dir": folder, "keys": [key, ...]}
_BASIS_FILES: dict = {}


def _basis_file(project: dict) -> str:
    """``project``'s basis as a ``.npy`` file a release subprocess can load (written once per key and
    process; the files of at most two keys are kept, one audit's D and D')."""
    import shutil

    if "dir" not in _BASIS_FILES:
        _BASIS_FILES["dir"] = tempfile.mkdtemp(prefix="paperlib-bases-")
        _BASIS_FILES["keys"] = []
        import atexit

        atexit.register(shutil.rmtree, _BASIS_FILES["dir"], True)
    def path_of(key: str) -> Path:  # a file name from the key (which holds characters a name may not)
        return Path(_BASIS_FILES["dir"]) / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.npy"

    key = str(project["key"])
    path = path_of(key)
    if key not in _BASIS_FILES["keys"]:
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, np.asarray(project["basis"], dtype=np.float64))
        tmp.replace(path)  # never half-written where a subprocess reads it
        _BASIS_FILES["keys"].append(key)
        while len(_BASIS_FILES["keys"]) > 2:
            path_of(_BASIS_FILES["keys"].pop(0)).unlink(missing_ok=True)
    return str(path)


def close_release_servers() -> None:
    """End the release subprocesses this process started (they also end when it exits)."""
    while _SERVERS:
        _, proc = _SERVERS.popitem()
        if proc.poll() is None:
            try:
                proc.stdin.close()
                proc.wait(timeout=30)
            except Exception:  # a release that hangs on exit is killed: it holds no result
                proc.kill()


def _run_release(version, model_name, Xd, yd, q, sigma, C, trials, seed, lr, model_seed, progress, download,
                 device="cpu", project=None):
    """One call's steps in this process's subprocess of the release (started on first use and
    kept, so the release is imported once per process: one per Dask worker)."""
    from paperlib.implementations.opacus_code import AuditError, WheelVerificationError, install_release
    from paperlib.implementations.opacus_code.wheels import REFRESH_COMMAND, release_env

    try:
        target = install_release(version, download=download)  # the wheel is checked against its stored sha256
    except WheelVerificationError:
        raise  # one line naming the wheel; nothing of it ran
    except AuditError as exc:
        reason = (str(exc).strip().splitlines() or ["unknown reason"])[0]
        raise ReleaseNotAvailable(
            f"opacus {version} is not in the release cache and cannot be installed ({reason}); "
            f"fill the cache (needs the network) with: {REFRESH_COMMAND}") from exc
    env = release_env(target)
    with tempfile.TemporaryDirectory(prefix="paperlib-release-") as d:
        d = Path(d)
        np.save(d / "X.npy", Xd.numpy())
        np.save(d / "y.npy", yd.numpy())
        spec = {"version": version, "model_name": model_name, "model_seed": model_seed, "q": q, "sigma": sigma,
                "C": C, "lr": lr, "trials": trials, "seed": seed, "progress": progress,
                "device": str(device), "threads": 1, "X": str(d / "X.npy"), "y": str(d / "y.npy"), "out": str(d / "updates.npy"),
                "sizes": str(d / "sizes.npy"), "meta": str(d / "meta.json")}
        if project is not None:  # projected in the subprocess, at each step: only that comes back
            spec["project"] = {"basis": _basis_file(project), "key": str(project["key"]),
                               "scale": float(project.get("scale", 1.0)), "keep": int(project.get("keep", 0))}
            spec["out"] = str(d / "steps.npz")
        (d / "spec.json").write_text(json.dumps(spec))
        proc, startup = _release_server(version, target, env)
        try:
            proc.stdin.write(str(d / "spec.json") + "\n")
            proc.stdin.flush()
            answer = proc.stdout.readline().strip()
        except (BrokenPipeError, OSError) as exc:
            answer = f"error {type(exc).__name__}: {exc}"
        if not answer:  # the subprocess died (its stderr went to ours)
            proc.wait(timeout=30)
            answer = f"error exited with status {proc.returncode} (its output is above)"
        if answer != "ok" or not (d / "meta.json").is_file():
            raise ReleaseNotAvailable(f"opacus {version} failed in its subprocess: {answer.removeprefix('error ')[:300]}")
        meta = json.loads((d / "meta.json").read_text())
        if project is not None:
            with np.load(spec["out"]) as z:
                steps = {k: z[k] for k in z.files}
        else:
            steps = np.load(spec["out"])
        timing = {"step_seconds": float(meta["step_seconds"]), "startup_seconds": startup}
        return steps, np.load(d / "sizes.npy"), meta["version"], meta["notes"], timing


# ---------------------------------------------------------------------------- DPSUR


def _run_dpsur(model_name, Xd, yd, q, sigma, C, trials, seed, lr, model_seed, source_download=False):
    """DPSUR's own step (its pinned source, sha256-verified, in a subprocess) when that source is in
    the cache or ``source_download`` may fetch it; else paperlib's line-by-line re-implementation
    (:mod:`paperlib.implementations.dpsur`), which gives the same draws for the same seed. A source
    file that fails its sha256 raises (one line; nothing runs)."""
    from paperlib.implementations import dpsur_source
    from paperlib.implementations.dpsur import dpsur_updates

    try:
        return dpsur_source.runner_steps(model_name, Xd, yd, q, sigma, C, trials, seed, lr, model_seed,
                                         download=source_download)
    except dpsur_source.DPSURSourceUnavailable:
        pass
    model = build_model(model_name, seed=model_seed)
    gen = torch.Generator().manual_seed(seed)
    U, sizes, m = dpsur_updates(model, Xd, yd, q, sigma, C, gen, trials, return_divisors=True)
    notes = dpsur_source.step_notes(sizes, m, len(Xd), q) + [
        "batched over trials at fixed theta_0; draws from one generator seeded with seed, in DPSUR's order; "
        "the update does not depend on lr (u = (theta_0 - theta_1)/lr exactly)"]
    return U.double().numpy(), sizes.numpy() if hasattr(sizes, "numpy") else np.asarray(sizes), "paperlib", notes


# ---------------------------------------------------------------------------- public API


def run_steps(implementation: str, model_name: str, X, y, *, dataset: str, q: float, sigma: float, C: float,
              trials: int, seed: int, lr: float = 1.0, progress: bool = False, model_seed: int = DEFAULT_MODEL_SEED,
              download: bool = True, batch_size: int | None = None, source_download: bool = False,
              device: str | None = None, project: dict | None = None) -> dict[str, Any]:
    """Run ``trials`` one-round DP-SGD steps of ``implementation`` from fixed ``theta_0``.

    (Over 80 lines: the step driver's one dispatch over the installed release, an old release's subprocess and
    DPSUR's source, kept together so that each path's set-up, timing and projection read side by side.)

    ``X``: ``[N+1, C, H, W]`` float tensor, ``y``: ``[N+1]`` long; ``dataset="D"`` uses
    the first ``N`` points, ``"Dprime"`` all ``N+1``. Returns a dict:

    * ``updates``: ``np.ndarray`` float64 ``[trials, n]``, ``u = (theta_0 - theta_1)/lr``
      in ``model.parameters()`` order (``None`` with ``project``);
    * ``projected``: with ``project``, :class:`StepProjection`'s result (each update projected on
      ``project["basis"]`` where and as the step ran, and its squared norm; the first
      ``project["keep"]`` updates whole), else ``None``;
    * ``implementation``, ``version`` (the Opacus version that ran, or ``"paperlib"``);
    * ``normaliser_rule``: what the code is documented to divide by:
      ``"floor(Nq)"``, ``"Nq"`` or ``"|B|"``;
    * ``notes``: list of strings (how it was driven, empty batches, division by zero);
    * ``seconds``: wall time; ``step_seconds``: the part spent in the loop of steps (the rest is the
      call's set-up: model, engine, data and results moved); ``startup_seconds``: the part spent
      starting an old release's subprocess (once per process; 0 otherwise);
    * also ``batch_sizes`` (the realised ``|B|`` per trial), ``N_data``, ``n``, ``q``,
      ``sigma``, ``C``, ``lr``, ``seed``, ``model_seed``, ``dataset``, ``model_name``,
      ``mechanism``.

    Old releases: ``download=True`` (default) installs a missing release into the cache on
    demand (``pip install --no-deps --target``; needs the network once); ``download=False``
    uses only the cache. Either way a release that cannot be had raises
    :class:`ReleaseNotAvailable` naming the command that fills the cache.

    ``source_download``: ``"dpsur"`` only: fetch DPSUR's pinned source when it is not in the cache
    (full mode; needs the network). With the source present DPSUR's own step runs (``version``
    ``"DPSUR <commit>"``), else paperlib's re-implementation (``version`` ``"paperlib"``).

    ``batch_size``: the configured batch size that ``"opacus-installed+fix"`` divides by
    (required there, an integer >= 1; ``normaliser_rule`` is then ``"<batch_size>"``);
    must be ``None`` for the other implementations.

    ``device``: where the steps run, chosen by :func:`step_device` (default: CUDA when torch
    sees a GPU, else the CPU), in process and in the old releases' subprocess alike; the
    result's ``device`` names it. ``"dpsur"`` runs on the CPU (its draws come from one CPU
    generator in DPSUR's order; a note says so when a GPU was asked for).

    ``project``: keep only what a white-box audit uses of each step (:class:`StepProjection`:
    ``basis``, ``key``, ``scale``, ``keep``), computed on the step's device in the step loop (in
    an old release's subprocess too), instead of returning every update. Not for ``"dpsur"``,
    whose step-by-step check compares whole updates with its replayed draws (ValueError).
    """
    t0 = time.perf_counter()
    _check(implementation, model_name, X, y, dataset, q, sigma, C, trials, lr)
    fix_b = _check_batch_size(implementation, batch_size)
    if project is not None and implementation == "dpsur":
        raise ValueError("project: dpsur's steps are checked against its replayed draws, which needs every update "
                         "whole; leave project unset for it")
    dev = step_device(device)
    Xd, yd = _data(X, y, dataset)
    args = (model_name, Xd, yd, float(q), float(sigma), float(C), int(trials), int(seed), float(lr), int(model_seed))
    if implementation == "opacus-installed":
        U, sizes, version, notes, timing = _run_installed(*args, progress, device=dev, project=project)
    elif implementation == "opacus-installed+fix":
        U, sizes, version, notes, timing = _run_installed(*args, progress, fix_batch_size=fix_b, device=dev,
                                                          project=project)
    elif implementation == "dpsur":
        t_dpsur = time.perf_counter()
        U, sizes, version, notes = _run_dpsur(*args, source_download=source_download)
        timing = {"step_seconds": time.perf_counter() - t_dpsur}  # batched over the steps: no set-up apart
        if dev.type != "cpu":
            notes = list(notes) + [f"run on the CPU although {dev} is available: DPSUR's draws come from one CPU "
                                   "generator in DPSUR's order"]
            dev = torch.device("cpu")
    else:
        U, sizes, version, notes, timing = _run_release(RELEASES[implementation], *args, progress, download,
                                                        device=dev, project=project)
    documented = IMPLEMENTATION_MECHANISM[implementation]
    projected = U if isinstance(U, dict) else None
    bad = int((~projected["finite"]).sum()) if projected is not None else int((~np.isfinite(U).all(axis=1)).sum())
    if bad:
        notes = list(notes) + [f"{bad} of {trials} updates are not finite (inf/nan)"]
    return {
        "updates": None if projected is not None else np.ascontiguousarray(U, dtype=np.float64),
        "projected": projected,
        "implementation": implementation,
        "version": version,
        "normaliser_rule": documented.rule if fix_b is None else str(fix_b),
        "mechanism": documented.title,
        "notes": list(notes),
        "device": str(dev),
        "seconds": time.perf_counter() - t0,
        "step_seconds": float(timing["step_seconds"]),
        "startup_seconds": float(timing.get("startup_seconds", 0.0)),
        "batch_sizes": np.asarray(sizes, dtype=np.int64),
        "N_data": len(Xd),
        "n": int(projected["n"]) if projected is not None else int(U.shape[1]),
        "model_name": model_name,
        "dataset": dataset,
        "q": float(q), "sigma": float(sigma), "C": float(C), "lr": float(lr),
        "seed": int(seed), "model_seed": int(model_seed),
    }


def _check_batch_size(implementation: str, batch_size) -> int | None:
    if implementation in FIXED_IMPLEMENTATIONS:
        if batch_size is None:
            raise ParameterError("batch_size", f"batch_size: {implementation} divides by the configured batch size; give it "
                             "(an integer >= 1)")
        from paperlib.fdp.validation import check_int

        return check_int(batch_size, "batch_size", 1)
    if batch_size is not None:
        raise ParameterError("batch_size", f"batch_size: only {', '.join(FIXED_IMPLEMENTATIONS)} takes a batch size, "
                         f"not {implementation}")
    return None


def output_scale(implementation: str, batch_size: int | None = None) -> float:
    """The public factor that turns an update of ``implementation`` into an output of its documented mechanism.

    ``batch_size`` for :data:`FIXED_IMPLEMENTATIONS` (their update is the SGM output
    divided by that constant, so the adversary, who knows it, multiplies it back: an
    invertible post-processing), 1 for the others. ValueError as :func:`run_steps` for
    a missing or misplaced ``batch_size``.
    """
    if implementation not in IMPLEMENTATION_MECHANISM:
        raise ParameterError("implementation", f"implementation must be one of {tuple(IMPLEMENTATION_MECHANISM)}, not {implementation!r}")
    b = _check_batch_size(implementation, batch_size)
    return 1.0 if b is None else float(b)


def per_example_gradients(model_name: str, X, y, seed: int = DEFAULT_MODEL_SEED) -> np.ndarray:
    """Unclipped per-example gradients ``[len(X), n]`` (float64) of the model's training loss
    (:func:`paperlib.implementations.models.training_loss`) at ``theta_0 = build_model(model_name, seed)``, in the runners' parameter order.
    (``seed`` here is the *model* seed, ``model_seed`` of :func:`run_steps`.)"""
    model = build_model(model_name, seed=seed)
    X = torch.as_tensor(X, dtype=torch.float32)
    y = torch.as_tensor(y, dtype=torch.long)
    return per_example_grads(model, X, y).double().numpy()


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
