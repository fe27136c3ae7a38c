"""Confirmation of the code audit by a real DP-SGD step of an Opacus release.

:func:`step_check` runs one real DP-SGD step of whatever ``opacus`` is importable on a
tiny linear model and reads the divisor off the parameter update, twice: once with zero
noise (the update is ``-lr * |B| / divisor`` exactly) and once with zero gradients and
unit noise over 4,096 coordinates (the update's standard deviation is
``lr * sigma * C / divisor``). With ``N = 10`` and ``q = 0.25`` the three candidates
``|B|``, ``N q = 2.5`` and ``floor(N q) = 2`` differ, so the step tells them apart.
:func:`confirm_release` runs it for an old release installed from its verified wheel
(:func:`~.wheels.install_release`: ``pip install --no-deps --target
<cache>/opacus-<version>``) in a subprocess with that folder first on ``PYTHONPATH``
(:func:`~.wheels.release_env`), after the import shims of :data:`SHIM_PRELUDE`.

References: Wang, Cui, Cui, Yuan (2026), Section 5.5 and Appendix A; Yousefpour et al.
(2021) for Opacus.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping

from .rules import MECHANISM, NOT_SUPPORTED, AuditError
from .wheels import PACKAGE, WheelVerificationError, install_release, release_env

__all__ = [
    "opacus_version",
    "opacus_api",
    "step_check",
    "SHIM_PRELUDE",
    "confirm_release",
    "summarise_confirmation",
]


def opacus_version(opacus) -> str:
    """``opacus.__version__``, or (v0.9-v0.11 have none) the version in the
    ``opacus-*.dist-info`` folder next to the imported package."""
    v = getattr(opacus, "__version__", None)
    if v:
        return str(v)
    site = Path(opacus.__file__).resolve().parents[1]
    for info in sorted(site.glob(f"{PACKAGE}-*.dist-info")):
        m = re.match(rf"{PACKAGE}-(.+)\.dist-info$", info.name)
        if m:
            return m.group(1)
    return "unknown"


def opacus_api(opacus) -> str:
    import inspect

    PE = opacus.PrivacyEngine
    if hasattr(PE, "make_private"):
        return "v1-make_private"
    params = inspect.signature(PE.__init__).parameters
    if "poisson" in params:
        return "v0-poisson"
    if "sample_rate" in params:
        return "v0-sample_rate"
    return "v0-batch_size"


def step_check(*, seed: int = 0, N: int = 10, batch_size: int = 3, d_noise: int = 4096,
               n_batches: int = 6, lr: float = 1.0) -> dict[str, Any]:
    """Run real DP-SGD steps of the importable ``opacus`` and read off the divisor.

    The dataset has ``N`` examples; the sampling rate is ``q = 1 / ceil(N / batch_size)``
    (how Opacus v1.x derives it from a ``DataLoader`` with that batch size; v0.x gets the
    same ``q`` directly; v0.9-v0.11 get ``batch_size`` itself, their upper bound). The
    defaults give ``q = 0.25``, ``N q = 2.5``, ``floor(N q) = 2``.

    Two runs, each over ``n_batches`` non-empty Poisson batches (empty batches are
    skipped and counted: they carry no example):

    * ``signal``: ``Linear(2, 1, bias=False)`` at zero, every example ``x = (1, 0)``,
      loss ``model(x).mean()``, zero noise, clipping norm 10 (no clipping). Each
      per-example gradient is ``(1, 0)``, so the update of the first weight is
      ``-lr |B| / divisor`` and ``divisor = lr |B| / (-update)``.
    * ``noise``: ``Linear(d_noise, 1, bias=False)``, every example ``x = 0`` (zero
      gradients), noise multiplier 1, clipping norm 1. The update is ``-lr G / divisor``
      with ``G ~ N(0, I)``, so ``divisor = lr / std(update)`` (about 1.1% error at 4,096
      coordinates).

    Each measured divisor is matched to the candidates ``A = |B|``, ``EA = N q`` and
    ``FEA = floor(N q)`` (relative tolerance 1e-5 for ``signal``, 7% for ``noise``). A
    batch is decisive when exactly one candidate matches. ``verdict`` is the candidate
    that every batch of both runs matches, provided each run has a decisive batch;
    otherwise ``"inconclusive"``. For v0.9-v0.11 (no Poisson support) a batch of
    ``batch_size + 1`` examples is also fed: ``rejects_larger_batch`` records whether the
    engine raised ``ValueError``, and ``verdict`` becomes ``"Not supported"`` if so.

    v0.14-v0.15 take extra noise-only "empty batch" steps inside ``optimizer.step()``
    (their simulation of empty Poisson batches, each a separate round that uses no
    example); the check sets that count to zero so one round's update is measured.
    """
    import warnings

    import torch
    import opacus

    warnings.simplefilter("ignore")
    api = opacus_api(opacus)
    k = math.ceil(N / batch_size)
    q = 1.0 / k
    Nq = N * q
    cand = {"A": None, "EA": Nq, "FEA": float(math.floor(Nq))}
    t0 = time.perf_counter()
    setting = {"api": api, "seed": seed, "N": N, "q": q, "batch_size": batch_size, "d_noise": d_noise,
               "n_batches": n_batches, "lr": lr, "cand": cand}
    runs = [_run_kind("signal", **setting), _run_kind("noise", **setting)]
    verdict, verdict_poisson = _step_verdict(runs, api)
    return {
        "opacus": opacus_version(opacus),
        "opacus_file": str(Path(opacus.__file__).parent),
        "torch": torch.__version__,
        "api": api,
        "seed": seed,
        "N": N,
        "q": q,
        "Nq": Nq,
        "floor_Nq": math.floor(Nq),
        "runs": runs,
        "verdict": verdict,
        "mechanism": verdict_poisson,
        "wall_time_s": round(time.perf_counter() - t0, 3),
    }


def _run_kind(kind: str, *, api: str, seed: int, N: int, q: float, batch_size: int, d_noise: int,
              n_batches: int, lr: float, cand: dict) -> dict[str, Any]:
    """One run of :func:`step_check` (``kind`` ``"signal"`` or ``"noise"``): its batches and divisors."""
    import torch

    torch.manual_seed(seed + (0 if kind == "signal" else 1))
    gen = torch.Generator().manual_seed(seed + 17)
    d = 2 if kind == "signal" else d_noise
    X = torch.zeros(N, d)
    if kind == "signal":
        X[:, 0] = 1.0
    Y = torch.zeros(N, dtype=torch.long)
    sigma, C = (0.0, 10.0) if kind == "signal" else (1.0, 1.0)
    model = torch.nn.Linear(d, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    ds = torch.utils.data.TensorDataset(X, Y)
    if api == "v1-make_private":
        model, opt, batches, info = _attach_v1(model, opt, ds, batch_size=batch_size, sigma=sigma, C=C)
    else:  # the v0 engine stays referenced here until the run ends
        engine, batches, info = _attach_v0(api, model, opt, X, gen, N=N, q=q, batch_size=batch_size,
                                           sigma=sigma, C=C)
    rows, empty = _measure_batches(model, opt, batches(), kind=kind, n_batches=n_batches, lr=lr, sigma=sigma,
                                   C=C, cand=cand)
    out = {"kind": kind, "noise_multiplier": sigma, "max_grad_norm": C, "dim": d, "batches": rows,
           "empty_batches_skipped": empty, **{k2: v for k2, v in info.items()}}
    if api == "v0-batch_size":
        _feed_larger_batch(model, opt, X[: batch_size + 1], out)
    return out


def _attach_v1(model, opt, ds, *, batch_size: int, sigma: float, C: float):
    """Make ``model`` and ``opt`` private with v1's ``make_private``: ``(model, opt, batches, info)``."""
    import torch
    import opacus

    pe = opacus.PrivacyEngine()
    dl0 = torch.utils.data.DataLoader(ds, batch_size=batch_size)
    model, opt, dl = pe.make_private(module=model, optimizer=opt, data_loader=dl0,
                                     noise_multiplier=sigma, max_grad_norm=C, poisson_sampling=True)
    info = {"expected_batch_size": opt.expected_batch_size, "sample_rate": 1.0 / len(dl0)}

    def batches():
        while True:
            for xb, _ in dl:
                yield xb
    return model, opt, batches, info


def _attach_v0(api: str, model, opt, X, gen, *, N: int, q: float, batch_size: int, sigma: float, C: float):
    """Attach a v0.x ``PrivacyEngine`` of the ``api`` form to ``opt``: ``(engine, batches, info)``."""
    import opacus

    if api == "v0-batch_size":
        engine = opacus.PrivacyEngine(model, batch_size=batch_size, sample_size=N, alphas=[2.0, 8.0],
                                      noise_multiplier=sigma, max_grad_norm=C)
    elif api == "v0-sample_rate":
        engine = opacus.PrivacyEngine(model, sample_rate=q, noise_multiplier=sigma, max_grad_norm=C)
    else:
        engine = opacus.PrivacyEngine(model, sample_rate=q, sample_size=N, poisson=True,
                                      noise_multiplier=sigma, max_grad_norm=C)
        engine._sample_poisson_empty_batches = lambda: 0
    engine.attach(opt)
    info = {k2: getattr(engine, k2) for k2 in ("sample_rate", "avg_batch_size", "batch_size")
            if getattr(engine, k2, None) is not None}
    sampler = None
    try:
        from opacus.utils.uniform_sampler import UniformWithReplacementSampler

        sampler = UniformWithReplacementSampler(num_samples=N, sample_rate=q, generator=gen)
        info["sampler"] = "opacus.utils.uniform_sampler.UniformWithReplacementSampler"
    except ImportError:
        info["sampler"] = "torch.rand(N) < q (the release ships no Poisson sampler)"

    def indices():
        if sampler is None:
            yield from _poisson_batches(gen, N, q)
        while True:  # one pass of the sampler is one epoch; keep going
            yield from sampler

    def batches():
        for idx in indices():
            if api == "v0-batch_size" and len(idx) > batch_size:
                continue  # fed separately by _feed_larger_batch (the engine rejects it)
            yield X[idx]
    return engine, batches, info


def _poisson_batches(gen, N: int, q: float):
    """Endless Poisson batches (index lists) of ``N`` examples at rate ``q``, drawn with ``gen``."""
    import torch

    while True:
        mask = torch.rand(N, generator=gen) < q
        yield mask.nonzero(as_tuple=False).reshape(-1).tolist()


def _measure_batches(model, opt, batches, *, kind: str, n_batches: int, lr: float, sigma: float, C: float,
                     cand: dict) -> tuple[list[dict], int]:
    """Take one step per non-empty batch and read off its divisor: ``(rows, empty batches skipped)``."""
    import torch

    rows, empty = [], 0
    for xb in batches:
        if len(rows) >= n_batches:
            break
        if xb.shape[0] == 0:
            empty += 1
            if empty > 1000:
                raise RuntimeError("only empty batches")
            continue
        with torch.no_grad():
            next(model.parameters()).zero_()
        opt.zero_grad()
        w0 = next(model.parameters()).detach().clone()
        loss = model(xb).mean()
        loss.backward()
        opt.step()
        upd = (next(model.parameters()).detach() - w0).reshape(-1)
        B = int(xb.shape[0])
        if kind == "signal":
            div = lr * B / float(-upd[0])
            tol = 1e-5
        else:
            div = lr * sigma * C / float(upd.std())
            tol = 0.07
        cands = dict(cand, A=float(B))
        match = sorted(lbl for lbl, v in cands.items() if abs(div - v) <= tol * v)
        rows.append({"batch_size": B, "divisor": div, "matches": match})
    return rows, empty


def _feed_larger_batch(model, opt, xb, out: dict) -> None:
    """Feed v0.9-v0.11 a batch above their ``batch_size``; record in ``out`` whether it is rejected."""
    opt.zero_grad()
    try:
        model(xb).mean().backward()
        opt.step()
        out["rejects_larger_batch"] = False
    except ValueError as exc:
        out["rejects_larger_batch"] = True
        out["rejection_message"] = str(exc).splitlines()[0][:200]


def _step_verdict(runs: list[dict], api: str) -> tuple[str, str]:
    """The candidate every batch of both runs matches (or "inconclusive"), and its mechanism."""
    verdict = "inconclusive"
    common = None
    for r in runs:
        for b in r["batches"]:
            common = set(b["matches"]) if common is None else common & set(b["matches"])
    decisive_each = all(any(len(b["matches"]) == 1 for b in r["batches"]) for r in runs)
    if common is not None and len(common) == 1 and decisive_each:
        verdict = common.pop()
    if api == "v0-batch_size" and all(r.get("rejects_larger_batch") for r in runs):
        verdict_poisson = NOT_SUPPORTED
    else:
        verdict_poisson = MECHANISM.get(verdict, "inconclusive")
    return verdict, verdict_poisson


# Compatibility shims for running v0.9-v0.11 on current torch, applied only inside the
# subprocess that runs an old release (confirm_release here, the runners' old-release
# worker) and recorded in its output as ``shims``. Neither touches the code path under
# test: torchcsprng is imported at module level but used only with secure_rng=True, and
# ModuleAttributeError was an AttributeError subclass that torch later removed.
SHIM_PRELUDE = r"""
import sys, types, warnings
warnings.simplefilter("ignore")
shims = []
try:
    import opacus  # noqa: F401
except ImportError:
    for name in [m for m in sys.modules if m == "opacus" or m.startswith("opacus.")]:
        del sys.modules[name]
    try:
        import torchcsprng  # noqa: F401
    except ImportError:
        m = types.ModuleType("torchcsprng")
        def _unavailable(*a, **k):
            raise RuntimeError("torchcsprng stub: secure_rng is not available in this check")
        m.create_random_device_generator = _unavailable
        m.create_mt19937_generator = _unavailable
        sys.modules["torchcsprng"] = m
        shims.append("torchcsprng: stub module (the release imports it; it is used only with secure_rng=True)")
    import torch.nn.modules.module as _mm
    if not hasattr(_mm, "ModuleAttributeError"):
        _mm.ModuleAttributeError = AttributeError
        shims.append("torch.nn.modules.module.ModuleAttributeError = AttributeError (removed from torch)")
    import opacus  # noqa: F401
"""
_STEP_CHECK_CALL = r"""
import json
from paperlib.implementations.opacus_code.stepcheck import step_check
out = step_check(seed=int(sys.argv[1]))
out["shims"] = shims
print("@@RESULT@@" + json.dumps(out))
"""


def confirm_release(version: str, *, seed: int = 0, timeout: float = 300, download: bool = False,
                    sha256: str | None = None) -> dict[str, Any]:
    """Install ``version`` into the cache from its verified wheel and run :func:`step_check`
    in a subprocess with that folder first on ``PYTHONPATH``.

    ``download``: fetch a missing wheel (network). ``sha256``: the wheel's expected hash,
    by default the stored one (the refresh passes the value it has just recorded).
    Returns the check's result, or a dict with ``verdict: "error"`` and the reason when
    the release is not in the cache or does not run here.

    Raises :class:`~.wheels.WheelVerificationError` (one line naming the wheel) when the
    wheel does not match its sha256: then nothing of the release is installed or run.
    """
    t0 = time.perf_counter()
    try:
        target = install_release(version, download=download, sha256=sha256)
    except WheelVerificationError:
        raise
    except AuditError as exc:
        return {"opacus": version, "verdict": "error", "mechanism": "error", "error": str(exc)}
    try:
        r = subprocess.run([sys.executable, "-c", SHIM_PRELUDE + _STEP_CHECK_CALL, str(seed)], capture_output=True,
                           text=True, timeout=timeout, env=release_env(target), cwd=str(target))
    except subprocess.TimeoutExpired:
        return {"opacus": version, "verdict": "error", "mechanism": "error", "error": f"timed out after {timeout} s"}
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("@@RESULT@@")), None)
    if r.returncode != 0 or line is None:
        err = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return {"opacus": version, "verdict": "error", "mechanism": "error", "error": err[:500],
                "wall_time_s": round(time.perf_counter() - t0, 3)}
    out = json.loads(line[len("@@RESULT@@"):])
    if out["opacus"] != version:
        out["verdict"] = "error"
        out["error"] = f"imported opacus {out['opacus']} from {out['opacus_file']}, not {version}"
    out["subprocess_wall_time_s"] = round(time.perf_counter() - t0, 3)
    return out


def summarise_confirmation(c: Mapping[str, Any], how: str) -> dict[str, Any]:
    """The part of a step check that is stored in the table (the batches, compactly)."""
    keep = {k: c.get(k) for k in ("opacus", "torch", "api", "seed", "N", "q", "Nq", "floor_Nq",
                                  "verdict", "mechanism", "error", "shims") if k in c}
    keep["how"] = how
    if "runs" in c:
        keep["runs"] = [{"kind": r["kind"],
                         "batches": [{"size": b["batch_size"], "divisor": round(b["divisor"], 6),
                                      "matches": ",".join(b["matches"]) or "none"} for b in r["batches"]],
                         "empty_batches_skipped": r["empty_batches_skipped"],
                         **({"rejects_larger_batch": r["rejects_larger_batch"]} if "rejects_larger_batch" in r else {})}
                        for r in c["runs"]]
    return keep
