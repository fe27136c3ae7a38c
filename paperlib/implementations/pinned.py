"""A library installed on demand from hash-pinned wheels into a folder of its own, and a step of it classified in
a subprocess whose path starts with that folder (issue 36: JAX Privacy, dp-transformers).

Each library lists its wheels as ``(distribution, version, sha256)``: the library and the parts of its
dependencies that the locked environment does not hold (or holds at a version it cannot use). They are installed
with ``pip install --require-hashes --no-deps --only-binary :all: --target`` into
``<cache root>/<label>/``, written whole or not at all (a temporary folder renamed into place, with a marker of
the pins), so a half-installed folder is never read. The library never enters this process: the step runs in a
subprocess, which prints the :class:`~paperlib.implementations.step_audit.StepAudit` (or the refusal) as JSON.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from paperlib.implementations.cache import PACKAGE_PARENT, cache_root
from paperlib.implementations.step_audit import StepAudit, StepNotClassified, probe_options

__all__ = ["LibraryUnavailable", "pinned_dir", "ensure_pinned", "classify_in_subprocess"]

_MARKER = ".paperlib-pins"


class LibraryUnavailable(RuntimeError):
    """A pinned library cannot be installed or run here (another platform, no network and no installed copy, or
    its step failing), with the reason in one line."""


def pinned_dir(label: str) -> Path:
    """The folder a pinned library is installed into: ``<cache root>/<label>`` (e.g. ``jax-privacy-2.0.0``)."""
    return cache_root() / label


def _pins_text(pins) -> str:
    return "".join(f"{name}=={ver} --hash=sha256:{sha}\n" for name, ver, sha in pins)


def ensure_pinned(label: str, what: str, pins, *, download: bool = True, error=LibraryUnavailable) -> Path:
    """The install folder of ``pins``, installing them first when it is missing or holds other pins.

    ``label``: the folder's name; ``what``: the library in words (``"JAX Privacy 2.0.0"``); ``pins``: tuples
    ``(distribution, version, sha256)`` of CPython 3.11 Linux x86-64 wheels; ``error``: the exception raised (a
    subclass of :class:`LibraryUnavailable`).

    Raises
    ------
    LibraryUnavailable
        Another platform than CPython 3.11 on Linux x86-64 (the pins' wheels), ``download=False`` with no
        installed copy, or pip failing (offline, a hash that does not match): one line with the reason.
    """
    d, text = pinned_dir(label), _pins_text(pins)
    if (d / _MARKER).is_file() and (d / _MARKER).read_text() == text:
        return d
    if not (sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")
            and sys.version_info[:2] == (3, 11)):
        raise error(f"{what}'s pinned wheels are for CPython 3.11 on Linux x86-64, "
                    f"not Python {platform.python_version()} on {sys.platform} {platform.machine()}")
    if not download:
        raise error(f"{what} is not installed in {d} (pass download=True)")
    d.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{label}-", dir=d.parent))
    try:
        req = tmp / "requirements.txt"
        req.write_text(text)
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                            "--require-hashes", "--only-binary", ":all:", "--target", str(tmp / "site"), "-r",
                            str(req)], capture_output=True, text=True, timeout=1200)
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise error(f"could not install {what} from its pinned wheels: {last}")
        (tmp / "site" / _MARKER).write_text(text)
        if d.exists():
            shutil.rmtree(d)
        os.replace(tmp / "site", d)  # whole or not at all: a half-installed folder is never read
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return d


_CHILD = r"""
import functools, importlib, json, sys, warnings
warnings.simplefilter("ignore")
from paperlib.implementations.step_audit import StepNotClassified, classify_step
module, name, kwargs, probe = json.loads(sys.argv[1])
step = functools.partial(getattr(importlib.import_module(module), name), **kwargs)
try:
    a = classify_step(step, **probe)
    out = {"ok": a.to_json()}
except StepNotClassified as exc:
    out = {"refused": str(exc), "evidence": exc.evidence}
except ValueError as exc:  # a probe option out of its range: the caller's error, not the library's
    out = {"invalid": str(exc)}
print("\n" + json.dumps(out))
"""


def classify_in_subprocess(site: Path, what: str, step: str, kwargs: dict, probe: dict, *, env: dict | None = None,
                           error=LibraryUnavailable) -> StepAudit:
    """Classify the step ``"module:function"`` (called with ``kwargs`` besides the protocol's) in a subprocess
    whose path starts with ``site``; ``probe``: the options of
    :func:`~paperlib.implementations.step_audit.classify_step`; ``env``: further environment variables.

    Raises
    ------
    LibraryUnavailable
        The subprocess failed (its last line of error), as ``error``.
    StepNotClassified
        The step's updates fit no known rule.
    ValueError
        A probe option out of its range (the message of :func:`~paperlib.implementations.step_audit.classify_step`).
    """
    probe = probe_options(**probe)  # a bad option is the caller's, said here before anything starts
    module, name = step.split(":")
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(PACKAGE_PARENT)]), **(env or {}))
    r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps([module, name, kwargs, probe])], capture_output=True,
                       text=True, env=full_env, timeout=1800)
    if r.returncode != 0 or not r.stdout.strip():
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise error(f"{what}'s step did not run: {last}")
    out = json.loads(r.stdout.strip().splitlines()[-1])  # the library may print before the answer
    if "refused" in out:
        raise StepNotClassified(out["refused"], out["evidence"])
    if "invalid" in out:
        raise ValueError(out["invalid"])
    return StepAudit.from_json(out["ok"])
