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
:func:`paperlib.implementations.normaliser_detection.detect_normaliser` reads ``nu`` off the
updates; :func:`per_example_gradients` gives the gradients it needs. The old releases'
subprocess and its protocol: :mod:`paperlib.implementations.release_server`.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from paperlib.fdp.validation import ParameterError
from paperlib.implementations.models import build_model, per_example_grads
from paperlib.implementations.opacus_step import run_installed
# the implementations, their mechanisms and releases: one table
from paperlib.implementations.registry import FIXED_IMPLEMENTATIONS, IMPLEMENTATION_MECHANISM, IMPLEMENTATIONS, RELEASES
from paperlib.implementations.release_server import ReleaseNotAvailable, close_release_servers, run_release

__all__ = [
    "IMPLEMENTATIONS",
    "IMPLEMENTATION_MECHANISM",
    "FIXED_IMPLEMENTATIONS",
    "output_scale",
    "RELEASES",
    "ReleaseNotAvailable",
    "run_steps",
    "step_device",
    "close_release_servers",
    "per_example_gradients",
]

DEFAULT_MODEL_SEED = 0


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
        U, sizes, version, notes, timing = run_installed(*args, progress, device=dev, project=project)
    elif implementation == "opacus-installed+fix":
        U, sizes, version, notes, timing = run_installed(*args, progress, fix_batch_size=fix_b, device=dev,
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
        U, sizes, version, notes, timing = run_release(RELEASES[implementation], *args, progress, download,
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
