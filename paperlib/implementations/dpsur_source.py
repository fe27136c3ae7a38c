"""DPSUR's own source at the pinned commit: fetched, verified, its step run in a subprocess.

Wang et al. (2026, Section 5.3) audited DPSUR's own code (https://github.com/JeffffffFu/DPSUR);
:mod:`paperlib.implementations.dpsur` re-implements its step line by line. This module runs
the original where it can be had, and checks the re-implementation against it.

Source files
------------
``paperlib/resources/dpsur_source.json`` pins the commit and stores the sha256 of each
file used (:func:`pinned`). They are looked for in ``<cache>/dpsur/<commit>/<path>``
(``<cache>`` is ``$PAPERLIB_CACHE``, default ``<repo>/.cache``; :func:`source_dir`); with
``download=True`` (full mode, online) missing ones are fetched from
``raw.githubusercontent.com`` at that commit. Every file, cached or downloaded, is checked
against its stored sha256 before anything runs: a mismatch raises
:class:`DPSURSourceError`, one line naming the file, and nothing runs; a downloaded file
enters the cache only once verified. The files are not shipped with paperlib (the
repository has no licence file).

What runs
---------
:func:`run_source_steps` copies the verified bytes into a fresh temporary folder (so no
other file there can shadow a module) and, in ONE subprocess with that folder first on
``sys.path``, imports DPSUR's own ``data/util/sampling.py`` (``get_data_loaders_possion``,
``IIDBatchSampler``), ``utils/dp_optimizer.py`` (``DPSGD_Optimizer``) and
``train_and_validation/train_with_dp.py`` (``train_with_dp``). ``algorithm/DPSUR.py``
itself cannot be imported in isolation (it imports the scattering front end ``kymatio``,
``keras`` and ``torchvision`` data code through ``data/util/get_data.py``), so the
subprocess does what its round does, with DPSUR's own objects: the optimiser as in
``algorithm/DPSUR.py:87-95`` (``minibatch_size = batch_size = q N``, ``microbatch_size=1``,
DPSUR's default momentum 0.9), the loader of line 105 built on the dataset each round
(line 143), the divisor loop of lines 145-146 (``optimizer.minibatch_size = len(data)``)
and ``train_with_dp(model, train_dl, optimizer, device)`` of line 148. Each trial starts
from the same parameters ``theta_0`` with a fresh optimiser (one round of the game);
torch's global generator is seeded once with ``seed``. The record indices of each draw
are observed through the dataset's ``__getitem__`` (DPSUR's code is not changed), the
clipped sum through the optimiser's ``accum_grads``, the released gradient through
``param.grad`` and the update as ``(theta_0 - theta_1) / lr``.

What is compared
----------------
:func:`compare_with_source` runs both on a tiny fixed input (the ``tiny`` model, 4
random images, ``q = 0.35``, 16 trials, chosen so that both draws come out empty in
some trials and the divisor differs from ``|B|`` in others) with the same seed:
the records of the divisor draw and of the training batch and the divisor (exactly
equal: the same random numbers), whether a step was taken, the clipped sum ``S_B`` and
the released update ``(S_B + G) / m`` (equal to float32 rounding: the noise is the same
draws). :func:`dpsur_provenance` says which one ran, for captions;
:func:`dpsur_inputs` gives the ``code``/``code_as_paper`` fields of an audit result.
"""

from __future__ import annotations

from paperlib.fdp.validation import ParameterError
from paperlib.implementations.cache import PACKAGE_PARENT

import hashlib
import importlib.resources
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import torch

__all__ = [
    "DPSURSourceError",
    "DPSURSourceUnavailable",
    "pinned",
    "source_dir",
    "get_source",
    "run_source_steps",
    "compare_with_source",
    "dpsur_provenance",
    "dpsur_inputs",
    "REIMPLEMENTATION_LINES",
    "step_notes",
    "runner_steps",
]

#: the lines of DPSUR's source that :mod:`paperlib.implementations.dpsur` follows
REIMPLEMENTATION_LINES = ("algorithm/DPSUR.py:87-95,105,143-148; data/util/sampling.py:16-21; "
                          "train_and_validation/train_with_dp.py:12-33; utils/dp_optimizer.py:28-65")
#: the step's own modules, imported in the subprocess (their imports need the other stored files)
STEP_MODULES = {"data.util.sampling": "data/util/sampling.py", "utils.dp_optimizer": "utils/dp_optimizer.py",
                "train_and_validation.train_with_dp": "train_and_validation/train_with_dp.py"}


class DPSURSourceError(ValueError):
    """A DPSUR source file does not match the sha256 stored for it (one line naming the file)."""


class DPSURSourceUnavailable(RuntimeError):
    """DPSUR's source is not in the cache and may not or cannot be downloaded, or its step failed to run."""


def pinned() -> dict[str, Any]:
    """The stored pin (``paperlib/resources/dpsur_source.json``): ``repository``, ``commit``,
    ``raw_url``, ``files`` (``{path: {"sha256", "bytes", "role"}}``), ``citations``."""
    path = importlib.resources.files("paperlib") / "resources" / "dpsur_source.json"
    return json.loads(path.read_text())


def _short(commit: str) -> str:
    return commit[:7]


def source_dir(commit: str | None = None) -> Path:
    """``<cache>/dpsur/<commit>/``: where the pinned files are looked for and downloaded to."""
    from paperlib.implementations.cache import cache_root

    return cache_root() / "dpsur" / (commit or pinned()["commit"])


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _mismatch(what: str, got: str, want: str, commit: str) -> DPSURSourceError:
    return DPSURSourceError(f"DPSUR source file {what} has sha256 {got}, expected {want} (commit {_short(commit)}, "
                            "stored in paperlib/resources/dpsur_source.json); delete it and rerun")


def _urlopen(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 (a fixed https URL)
        return r.read()


def get_source(*, download: bool = False, opener: Callable[[str, float], bytes] | None = None,
               timeout: float = 30.0) -> dict[str, Any]:
    """The pinned DPSUR files, verified: ``{"dir", "commit", "how", "contents"}``.

    ``contents`` maps each stored path to its verified bytes; ``how`` is ``"local copy"``
    (every file was in :func:`source_dir`) or ``"downloaded"`` (some were fetched).
    ``download``: fetch missing files from ``raw_url`` (full mode, online); ``opener``
    (tests) replaces the HTTP fetch, ``opener(url, timeout) -> bytes``.

    Raises :class:`DPSURSourceError` (one line naming the file) when a cached or downloaded
    file does not match its sha256 -- nothing is stored or run then -- and
    :class:`DPSURSourceUnavailable` when files are missing and ``download`` is off or the
    download fails.
    """
    pin = pinned()
    commit, folder = pin["commit"], source_dir(pin["commit"])
    contents: dict[str, bytes] = {}
    missing = []
    for rel, meta in pin["files"].items():
        p = folder / rel
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            if _sha(data) != meta["sha256"]:
                raise _mismatch(str(p), _sha(data), meta["sha256"], commit)
            contents[rel] = data
        else:
            missing.append(rel)
    how = "local copy"
    if missing:
        if not download:
            raise DPSURSourceUnavailable(
                f"DPSUR's source at commit {_short(commit)} is not in {folder} (missing {len(missing)} of "
                f"{len(pin['files'])} files, e.g. {missing[0]}); full mode downloads it when online")
        fetch = opener or _urlopen
        got: dict[str, bytes] = {}
        for rel in missing:
            url = pin["raw_url"].format(commit=commit, path=rel)
            try:
                data = fetch(url, timeout)
            except (urllib.error.URLError, OSError, TimeoutError) as exc:
                raise DPSURSourceUnavailable(f"cannot download DPSUR's source file {url}: "
                                             f"{getattr(exc, 'reason', exc)}") from exc
            if _sha(data) != pin["files"][rel]["sha256"]:
                raise _mismatch(url, _sha(data), pin["files"][rel]["sha256"], commit)
            got[rel] = data
        for rel, data in got.items():  # all verified: now they enter the cache
            dest = folder / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(dest.name + ".part")
            tmp.write_bytes(data)
            os.replace(tmp, dest)
        contents.update(got)
        how = "downloaded"
    return {"dir": folder, "commit": commit, "how": how, "contents": contents}


# ---------------------------------------------------------------------------- the subprocess


def _source_worker(spec_path: str) -> None:
    """Runs inside the subprocess: DPSUR's own step (module docstring), ``trials`` times.

    (Over 80 lines: the subprocess's whole request loop with DPSUR's code first on ``sys.path``, in one function
    so that nothing at module level runs before it.)"""
    import warnings

    from paperlib.implementations.models import build_model

    warnings.simplefilter("ignore")
    spec = json.loads(Path(spec_path).read_text())
    src = spec["src"]
    sys.path.insert(0, src)
    import importlib

    mods = {}
    for name, rel in STEP_MODULES.items():
        mods[name] = importlib.import_module(name)
        f = Path(mods[name].__file__).resolve()
        if f != (Path(src) / rel).resolve():
            raise RuntimeError(f"imported {name} from {f}, not from DPSUR's verified {rel}")
    get_data_loaders_possion = mods["data.util.sampling"].get_data_loaders_possion
    DPSGD_Optimizer = mods["utils.dp_optimizer"].DPSGD_Optimizer
    train_with_dp = mods["train_and_validation.train_with_dp"].train_with_dp

    X = torch.from_numpy(np.load(spec["X"]))
    y = torch.from_numpy(np.load(spec["y"]))
    N, q, sigma, C, lr, trials = len(X), spec["q"], spec["sigma"], spec["C"], spec["lr"], spec["trials"]
    batch_size = q * N  # DPSUR samples at batch_size / len(dataset) (data/util/sampling.py:19)

    class Recorded(torch.utils.data.Dataset):
        """The records, with the indices the sampler asks for (DPSUR's code untouched)."""

        def __init__(self):
            self.log: list[int] = []

        def __len__(self):
            return N

        def __getitem__(self, i):
            self.log.append(int(i))
            return X[i], y[i]

    data = Recorded()
    model = build_model(spec["model_name"], seed=spec["model_seed"])
    params = [p for p in model.parameters() if p.requires_grad]
    theta0 = [p.detach().clone() for p in params]
    flat0 = torch.cat([t.reshape(-1) for t in theta0]).double()
    n = flat0.numel()
    minibatch_loader_for_train, _ = get_data_loaders_possion(minibatch_size=batch_size, microbatch_size=1,
                                                             iterations=1)  # algorithm/DPSUR.py:105
    updates = np.empty((trials, n), dtype=np.float64)
    grads = np.zeros((trials, n), dtype=np.float32) if spec["record"] else None
    sums = np.zeros((trials, n), dtype=np.float32) if spec["record"] else None
    batches, divisor_batches, divisors, stepped = [], [], [], []
    torch.manual_seed(spec["seed"])
    for t in range(trials):
        with torch.no_grad():
            for p, p0 in zip(params, theta0):
                p.copy_(p0)
                p.grad = None
        optimizer = DPSGD_Optimizer(l2_norm_clip=C, noise_multiplier=sigma, minibatch_size=batch_size,
                                    microbatch_size=1, params=model.parameters(), lr=lr,
                                    momentum=spec["momentum"])  # algorithm/DPSUR.py:87-95
        train_dl = minibatch_loader_for_train(data)  # algorithm/DPSUR.py:143
        data.log = []
        for _, (d, _t) in enumerate(train_dl):  # algorithm/DPSUR.py:145-146
            optimizer.minibatch_size = len(d)
        divisor_batches.append(sorted(data.log))
        divisors.append(float(optimizer.minibatch_size))
        data.log = []
        train_with_dp(model, train_dl, optimizer, "cpu")  # algorithm/DPSUR.py:148
        batches.append(sorted(data.log))
        stepped.append(bool(data.log))
        flat1 = torch.cat([p.detach().reshape(-1) for p in params]).double()
        updates[t] = ((flat0 - flat1) / lr).numpy()
        if spec["record"] and data.log:
            grads[t] = torch.cat([p.grad.detach().reshape(-1) for p in params]).numpy()
            sums[t] = torch.cat([a.detach().reshape(-1) for a in optimizer.param_groups[0]["accum_grads"]
                                 if a is not None]).numpy()
    np.save(spec["out"], updates)
    if spec["record"]:
        np.save(spec["grads"], grads)
        np.save(spec["sums"], sums)
    Path(spec["meta"]).write_text(json.dumps({"batches": batches, "divisor_batches": divisor_batches,
                                              "divisors": divisors, "stepped": stepped,
                                              "torch": torch.__version__}))


_WORKER_CALL = ("import sys\nfrom paperlib.implementations.dpsur_source import _source_worker\n"
                "_source_worker(sys.argv[1])\n")


def run_source_steps(model_name: str, X, y, *, q: float, sigma: float, C: float, trials: int, seed: int,
                     lr: float = 1.0, model_seed: int = 0, momentum: float = 0.9, download: bool = False,
                     record: bool = False, timeout: float = 600.0, opener=None) -> dict[str, Any]:
    """``trials`` rounds of DPSUR's own step (module docstring) in one subprocess.

    ``X``: ``[N, ...]`` the dataset's inputs (all ``N`` records; ``build_model(model_name)``'s
    input shape), ``y``: ``[N]`` labels; ``q`` in ``(0, 1]``; DPSUR's ``batch_size`` is
    ``q N``. Returns ``updates`` (float64 ``[trials, n]``, ``(theta_0 - theta_1) / lr``),
    ``batch_sizes`` (``|B|``, int64), ``divisors`` (``m``, float64), ``batches`` and
    ``divisor_batches`` (record indices), ``stepped`` (bool per trial), with
    ``record=True`` also ``grads`` (the released ``param.grad``) and ``clipped_sums``
    (``accum_grads``, float32 ``[trials, n]``); and ``commit``, ``how`` (``"local copy"`` or
    ``"downloaded"``), ``provenance`` (:func:`dpsur_provenance`), ``seconds``.

    Raises :class:`DPSURSourceError` (tampered file; nothing runs),
    :class:`DPSURSourceUnavailable` (no source, or the subprocess failed: its last line).
    """
    if not 0.0 < float(q) <= 1.0:
        raise ParameterError("q", f"q must lie in (0, 1], got {q}")
    if float(sigma) < 0 or float(C) <= 0 or float(lr) <= 0 or int(trials) < 1:
        raise ValueError("need sigma >= 0, C > 0, lr > 0 and trials >= 1")
    t0 = time.perf_counter()
    src = get_source(download=download, opener=opener)
    Xt = torch.as_tensor(X, dtype=torch.float32).detach().cpu().contiguous()
    yt = torch.as_tensor(y, dtype=torch.long).detach().cpu().contiguous()
    if len(Xt) != len(yt) or len(Xt) < 1:
        raise ValueError(f"X and y must hold the same number (>= 1) of records; got {len(Xt)} and {len(yt)}")
    with tempfile.TemporaryDirectory(prefix="paperlib-dpsur-") as d:
        d = Path(d)
        for rel, data in src["contents"].items():  # the verified bytes, nothing else
            (d / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / "src" / rel).write_bytes(data)
        np.save(d / "X.npy", Xt.numpy())
        np.save(d / "y.npy", yt.numpy())
        spec = {"src": str(d / "src"), "model_name": model_name, "model_seed": int(model_seed), "q": float(q),
                "sigma": float(sigma), "C": float(C), "lr": float(lr), "momentum": float(momentum),
                "trials": int(trials), "seed": int(seed), "record": bool(record), "X": str(d / "X.npy"),
                "y": str(d / "y.npy"), "out": str(d / "updates.npy"), "grads": str(d / "grads.npy"),
                "sums": str(d / "sums.npy"), "meta": str(d / "meta.json")}
        (d / "spec.json").write_text(json.dumps(spec))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_PARENT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                                                       else []))
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.setdefault("OMP_NUM_THREADS", "1")
        try:
            r = subprocess.run([sys.executable, "-c", _WORKER_CALL, str(d / "spec.json")], capture_output=True,
                               text=True, env=env, cwd=str(d), timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise DPSURSourceUnavailable(f"DPSUR's own step timed out after {timeout:.0f} s") from exc
        if r.returncode != 0 or not (d / "meta.json").is_file():
            last = ([ln for ln in r.stderr.strip().splitlines() if ln.strip()] or ["no output"])[-1]
            raise DPSURSourceUnavailable(f"DPSUR's own step failed in its subprocess (exit {r.returncode}): "
                                         f"{last[:300]}")
        meta = json.loads((d / "meta.json").read_text())
        out = {"updates": np.load(d / "updates.npy"),
               "batch_sizes": np.array([len(b) for b in meta["batches"]], dtype=np.int64),
               "divisors": np.asarray(meta["divisors"], dtype=np.float64), "batches": meta["batches"],
               "divisor_batches": meta["divisor_batches"], "stepped": np.asarray(meta["stepped"], dtype=bool)}
        if record:
            out["grads"] = np.load(d / "grads.npy")
            out["clipped_sums"] = np.load(d / "sums.npy")
    out.update({"ran": "source", "commit": src["commit"], "how": src["how"], "torch": meta["torch"],
                "seconds": time.perf_counter() - t0})
    out["provenance"] = dpsur_provenance(out)
    return out


# ---------------------------------------------------------------------------- the check

#: the tiny fixed input of :func:`compare_with_source` (seed 3 gives, over 16 trials, empty
#: divisor draws, empty training batches and divisors that differ from |B|)
CHECK_INPUT = {"model_name": "tiny", "N": 4, "q": 0.35, "sigma": 1.0, "C": 0.5, "trials": 16, "seed": 3,
               "data_seed": 1}


def _check_data(N: int, data_seed: int):
    g = torch.Generator().manual_seed(int(data_seed))
    return torch.randn(N, 1, 28, 28, generator=g), torch.randint(0, 10, (N,), generator=g)


def compare_with_source(*, download: bool = False, opener=None, **overrides) -> dict[str, Any]:
    """Run DPSUR's own step (:func:`run_source_steps`) and :func:`paperlib.implementations.dpsur.dpsur_step_record`
    on :data:`CHECK_INPUT` (``overrides`` replace its entries) with the same seed, and compare.

    Returns ``agreed`` (bool), ``compared`` (what, in words), ``same_batches``,
    ``same_divisor_batches``, ``same_divisors``, ``same_stepped`` (bools),
    ``max_abs_diff`` (``{"clipped_sum", "grad", "update"}``), ``tolerance``, ``cases``
    (counts of trials with an empty divisor draw, an empty batch, ``m != |B|``), ``input``,
    ``commit``, ``how``, ``provenance`` and ``seconds``. Raises as :func:`run_source_steps`.
    """
    from paperlib.implementations.dpsur import dpsur_step_record
    from paperlib.implementations.models import build_model

    cfg = {**CHECK_INPUT, **overrides}
    X, y = _check_data(cfg["N"], cfg["data_seed"])
    src = run_source_steps(cfg["model_name"], X, y, q=cfg["q"], sigma=cfg["sigma"], C=cfg["C"],
                           trials=cfg["trials"], seed=cfg["seed"], download=download, record=True, opener=opener)
    model = build_model(cfg["model_name"], seed=0)
    gen = torch.Generator().manual_seed(int(cfg["seed"]))
    ours = [dpsur_step_record(model, X, y, cfg["q"], cfg["sigma"], cfg["C"], gen) for _ in range(cfg["trials"])]
    U = np.stack([o["update"].double().numpy() for o in ours])
    S = np.stack([o["clipped_sum"].double().numpy() for o in ours])
    scale = max(1.0, float(np.abs(U).max()))
    tol = 1e-6 * scale
    diffs = {"clipped_sum": float(np.abs(S - src["clipped_sums"]).max()),
             "grad": float(np.abs(U - src["grads"]).max()),
             "update": float(np.abs(U - src["updates"]).max())}
    same = {"same_batches": [o["batch"] for o in ours] == src["batches"],
            "same_divisor_batches": [o["divisor_batch"] for o in ours] == src["divisor_batches"],
            "same_divisors": [o["divisor"] for o in ours] == src["divisors"].tolist(),
            "same_stepped": [o["stepped"] for o in ours] == src["stepped"].tolist()}
    cases = {"empty_divisor_draw": sum(not o["divisor_batch"] for o in ours),
             "empty_batch": sum(not o["batch"] for o in ours),
             "divisor_differs_from_batch_size": sum(o["stepped"] and o["divisor"] != len(o["batch"]) for o in ours)}
    agreed = all(same.values()) and all(v <= tol for v in diffs.values())
    return {"agreed": bool(agreed), **same, "max_abs_diff": diffs, "tolerance": tol, "cases": cases,
            "compared": ("same seed, each trial: the records of DPSUR's divisor draw and of its training batch, "
                         "the divisor m, whether a step was taken (exactly equal); the clipped sum S_B "
                         "(optimizer accum_grads), the released gradient (S_B + G)/m (param.grad) and the "
                         f"update (theta_0 - theta_1)/lr (each within {tol:.1e})"),
            "input": cfg, "commit": src["commit"], "how": src["how"], "seconds": src["seconds"],
            "provenance": dpsur_provenance({**src, "agreed": bool(agreed)})}


# ---------------------------------------------------------------------------- provenance


def dpsur_provenance(result: Mapping[str, Any] | None = None) -> str:
    """Which DPSUR step ran, in one sentence for a caption.

    ``result``: the dict of :func:`run_source_steps` (DPSUR's own step ran) or of
    :func:`compare_with_source`, or ``None`` (only the re-implementation ran):

    * ``"DPSUR's own step at commit d738b38 (downloaded, sha256 verified)"``;
    * ``"paperlib's re-implementation of DPSUR's step, line by line from its code at commit d738b38"`` (the
      lines it follows are :data:`REIMPLEMENTATION_LINES`, kept apart as a source, never in the sentence),
      followed by ``"; checked against DPSUR's own step ... : agrees"`` (or ``": DISAGREES"``)
      when a comparison ran.
    """
    commit = _short((result or {}).get("commit") or pinned()["commit"])
    if result is not None and result.get("ran") == "source" and "agreed" not in result:
        return f"DPSUR's own step at commit {commit} ({result.get('how', 'local copy')}, sha256 verified)"
    text = f"paperlib's re-implementation of DPSUR's step, line by line from its code at commit {commit}"
    if result is not None and "agreed" in result:
        text += (f"; checked against DPSUR's own step at commit {commit} ({result.get('how', 'local copy')}, "
                 f"sha256 verified): {'agrees' if result['agreed'] else 'DISAGREES'}")
    return text


def dpsur_inputs(result: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``code`` fields of an audit result's ``inputs`` for a DPSUR point.

    ``result`` as for :func:`dpsur_provenance`; ``code_lines``: the lines of DPSUR's code the
    re-implementation follows, where it ran. ``code_as_paper`` is ``True`` only when the
    audited updates came from DPSUR's own step (``result["ran"] == "source"`` and no
    comparison dict); ``paper_code`` names what the paper audited."""
    own = result is not None and result.get("ran") == "source" and "agreed" not in result
    pin = pinned()
    out = {"code": dpsur_provenance(result), "code_as_paper": bool(own),
           "paper_code": f"DPSUR's own code ({pin['repository']}; pinned here at commit {_short(pin['commit'])})"}
    if not own:  # the source of the re-implementation: the lines of DPSUR's code it follows
        out["code_lines"] = REIMPLEMENTATION_LINES
    return out


# ---------------------------------------------------------------------------- for the runners


def step_notes(batch_sizes, divisors, N: int, q: float, ran: Mapping[str, Any] | None = None) -> list[str]:
    """The ``notes`` of a run of DPSUR's step (either one): which ran (:func:`dpsur_provenance`),
    its rule, and how many trials hit its two special cases."""
    b = np.asarray(batch_sizes)
    m = np.asarray(divisors, dtype=float)
    qN = float(q) * int(N)
    stepped = b > 0
    return [dpsur_provenance(ran),
            "DPSUR's rule: clip by min(C/(||g||+1e-6), 1), add N(0, sigma^2 C^2), divide by m = the size of a "
            "separate Poisson draw (q N when that draw is empty); an empty training batch takes no step (update 0)",
            f"{int((~stepped).sum())} of {len(b)} trials had an empty training batch (update 0); "
            f"{int((stepped & (m == qN) & (m != b)).sum())} divided by q N = {qN:g} (empty divisor draw); "
            f"{int((stepped & (m != b)).sum())} divided by a number other than |B|"]


def runner_steps(model_name: str, Xd, yd, q: float, sigma: float, C: float, trials: int, seed: int, lr: float,
                 model_seed: int, *, download: bool = False):
    """DPSUR's own step for :mod:`paperlib.implementations.runners`: ``(updates float64 [trials, n],
    batch_sizes int64 [trials], version, notes)``, as the runner's in-process DPSUR path returns
    them; ``version`` is ``"DPSUR <commit[:7]>"``. The same seed gives the same random draws
    as the re-implementation fed ``torch.Generator().manual_seed(seed)`` (equal updates to
    float32 rounding). Raises as :func:`run_source_steps`."""
    r = run_source_steps(model_name, Xd, yd, q=q, sigma=sigma, C=C, trials=trials, seed=seed, lr=lr,
                         model_seed=model_seed, download=download)
    return (r["updates"], r["batch_sizes"], f"DPSUR {_short(r['commit'])}",
            step_notes(r["batch_sizes"], r["divisors"], len(Xd), q, r))
