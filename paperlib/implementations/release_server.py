"""The old Opacus releases' subprocess: one long-lived server per release and process.

An old release (v0.x, or the v1.0 line) cannot be imported next to the installed Opacus, so
its steps run in a subprocess of this interpreter with the release first on ``sys.path``
(the release cache of :mod:`paperlib.implementations.opacus_code.wheels`, every wheel
checked against its stored sha256) and the compatibility shims of
:data:`paperlib.implementations.opacus_code.stepcheck.SHIM_PRELUDE`.

The protocol (:func:`_legacy_serve` in the subprocess, :func:`run_release` in the parent):

1. the parent starts ``python -c SHIM_PRELUDE + _SERVE_CALL`` once per process and release
   (:func:`_release_server`); the subprocess imports the release, then writes ``ready`` on
   its stdout (everything the release prints goes to stderr);
2. for each call the parent writes a *spec* -- a JSON file: the release, the model and its
   seed, ``q``, ``sigma``, ``C``, ``lr``, ``trials``, ``seed``, the device, the paths of the
   data (``X.npy``, ``y.npy``) and of the outputs (``out``, ``sizes``, ``meta``), and an
   optional projection (its basis as a ``.npy`` file, :func:`_basis_file`) -- and sends
   the spec's path as one line on the subprocess's stdin;
3. the subprocess runs the steps (:func:`_legacy_worker`) and answers one line, ``ok`` or
   ``error <message>``; the parent reads the outputs back and raises
   :class:`ReleaseNotAvailable` on an error;
4. the servers end when their stdin closes: :func:`close_release_servers`, also at exit.

The step itself (how each release is driven) is documented in
:mod:`paperlib.implementations.runners`.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from paperlib.fdp.validation import ComputationError
from paperlib.implementations.models import build_model, training_loss
from paperlib.implementations.opacus_step import StepProjection, record_step, run_installed

__all__ = ["ReleaseNotAvailable", "run_release", "close_release_servers"]


class ReleaseNotAvailable(ComputationError):
    """An old Opacus release is not in the cache (offline) or does not run here."""


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
        out, sizes, _, notes, timing = run_installed(spec["model_name"], Xd, yd, q, sigma, C, trials, seed, lr,
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
        record_step(out, proj, t, flat0, params, lr)
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


_SERVE_CALL = "from paperlib.implementations.release_server import _legacy_serve\n_legacy_serve()\n"
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


#: the folders of projection bases, one per process: ``<tmp>/paperlib-bases-<pid>-<random>``
BASIS_PREFIX = "paperlib-bases-"


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def remove_stale_basis_folders(tmp: str | os.PathLike | None = None) -> int:
    """Delete the basis folders of processes that have ended without their exit handler (a Dask worker is
    terminated at shutdown, so its ``atexit`` never runs; each folder may hold hundreds of MB). Returns how
    many it deleted. A folder of a live process, or one whose name holds no process id, is kept."""
    import shutil

    gone = 0
    for d in Path(tmp or tempfile.gettempdir()).glob(f"{BASIS_PREFIX}*-*"):
        pid = d.name[len(BASIS_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _process_alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)
            gone += 1
    return gone


def _basis_file(project: dict) -> str:
    """``project``'s basis as a ``.npy`` file a release subprocess can load (written once per key and
    process; the files of at most two keys are kept, one audit's D and D'). The folder is this process's
    (deleted at exit); folders left by processes that ended without exiting are deleted first."""
    import shutil

    if "dir" not in _BASIS_FILES:
        remove_stale_basis_folders()
        _BASIS_FILES["dir"] = tempfile.mkdtemp(prefix=f"{BASIS_PREFIX}{os.getpid()}-")
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


def run_release(version, model_name, Xd, yd, q, sigma, C, trials, seed, lr, model_seed, progress, download,
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
