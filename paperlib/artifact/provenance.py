"""Provenance of results: parameter keys, atomic writes, and the ``results/`` cache.

Every experiment result is stored as ``results/<name>.json``::

    {
      "key": "<16 hex chars>",          # result_key(params)
      "code": "<16 hex chars>",         # paperlib.artifact.deps.code_fingerprint()
      "params": {...},                  # the parameters that produced the data
      "data": {...},                    # the numbers (JSON only, never pickle)
      "provenance": {
        "git_commit": "<sha>" | "unknown",
        "git_dirty": true | false | null,
        "created_utc": "2026-11-29T13:17:00Z",
        "python": "3.11.7", "numpy": "...", "scipy": "...", "torch": "..." | null,
        "paperlib": "0.1.0",
        "platform": "Linux-x86_64",     # no host name
        "mode": "quick", "seed": 0, "wall_time_s": 12.3,
        "parameters": {...}
      }
    }

A notebook calls :func:`load_result` first and re-computes only on a miss, then
:func:`save_result`; an interrupted ``make all`` therefore resumes, and a changed
parameter re-runs. A result made by other code (another ``code`` fingerprint: a
changed ``paperlib`` source file or numpy/scipy/torch/opacus version) is a cache miss
too, so a notebook that ``make`` re-runs after a library change recomputes its numbers
instead of reading the old ones. The directory is ``results/`` under the current working
directory (``make`` runs notebooks with the repository root as working
directory), or the directory named by the environment variable
``PAPERLIB_RESULTS``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = [
    "RESULTS_ENV",
    "results_dir",
    "result_key",
    "canonical_json",
    "write_json_atomic",
    "save_result",
    "load_result",
    "provenance_block",
    "git_commit",
    "ResultCache",
]

RESULTS_ENV = "PAPERLIB_RESULTS"


def results_dir() -> Path:
    """Return the results directory: ``$PAPERLIB_RESULTS`` if set, else ``./results``."""
    return Path(os.environ.get(RESULTS_ENV) or "results")


def _to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, tuples, paths to plain JSON types (recursively).

    Raises
    ------
    TypeError
        If an object has no JSON representation (e.g. an arbitrary class instance).
    ValueError
        If a float is NaN or infinite inside *params* canonicalisation (see
        :func:`canonical_json`); data written by :func:`write_json_atomic` may hold them.
    """
    if obj is None or isinstance(obj, (bool, str, int)):
        return obj
    if isinstance(obj, float):
        return obj
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise TypeError(f"JSON object keys must be str, got {type(k).__name__}: {k!r}")
            out[k] = _to_jsonable(v)
        return out
    if isinstance(obj, (list, tuple)):
        return [_to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if callable(getattr(obj, "to_json", None)):  # a typed result: its one dict form
        return _to_jsonable(obj.to_json())
    # numpy without importing it unless present
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(obj, np.ndarray):
            return _to_jsonable(obj.tolist())
        if isinstance(obj, np.bool_):
            return bool(obj)
        if isinstance(obj, np.integer):
            return int(obj)
        if isinstance(obj, np.floating):
            return float(obj)
    raise TypeError(f"object of type {type(obj).__name__} is not JSON serialisable: {obj!r}")


def canonical_json(params: dict) -> str:
    """Canonical JSON of *params*: sorted keys, no whitespace, numpy types converted.

    ``1`` and ``1.0`` are different keys on purpose (an int parameter is not a float one).

    Raises
    ------
    TypeError
        If *params* is not a dict, has non-str keys, or holds a non-serialisable value.
    ValueError
        If *params* holds NaN or an infinity (they have no canonical JSON form).
    """
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict, got {type(params).__name__}")
    conv = _to_jsonable(params)

    def _check(x: Any) -> None:
        if isinstance(x, float) and not math.isfinite(x):
            raise ValueError(f"params must not contain NaN or infinity, got {x!r}")
        if isinstance(x, dict):
            for v in x.values():
                _check(v)
        elif isinstance(x, list):
            for v in x:
                _check(v)

    _check(conv)
    return json.dumps(conv, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def result_key(params: dict) -> str:
    """Key of a parameter set: first 16 hex chars of sha256 of :func:`canonical_json`.

    Stable across runs, processes and dict insertion order.

    Raises
    ------
    TypeError, ValueError
        As :func:`canonical_json`.
    """
    return hashlib.sha256(canonical_json(params).encode("ascii")).hexdigest()[:16]


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write *obj* as JSON to *path* atomically, creating parent directories.

    The JSON goes to a temporary file in the same directory, is flushed and
    fsync'ed, then moved over *path* with :func:`os.replace`, so a reader (or an
    interrupted run) sees either the old file or the complete new one, never a
    partial file.

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    TypeError
        If *obj* is not JSON serialisable (nothing is written then).
    OSError
        If the directory cannot be created or the file cannot be written/renamed.
    """
    path = Path(path)
    text = json.dumps(_to_jsonable(obj), indent=1, sort_keys=True)  # TypeError before touching disk
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    # mkstemp creates 0600 files; results are shared artefacts, so use the umask's default
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def git_commit(cwd: str | os.PathLike | None = None) -> tuple[str, bool | None]:
    """Return ``(commit sha, dirty)`` of the git checkout at *cwd*, or ``("unknown", None)``.

    Never raises: no git, no repository or a timeout all give ``"unknown"``.
    """
    if cwd is None:
        cwd = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10
        )
        if sha.returncode != 0:
            return "unknown", None
        st = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd, capture_output=True, text=True, timeout=10,
        )
        dirty = bool(st.stdout.strip()) if st.returncode == 0 else None
        return sha.stdout.strip(), dirty
    except (OSError, subprocess.SubprocessError):
        return "unknown", None


def _version(mod: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(mod)
    except Exception:  # not installed
        return None


def provenance_block(params: dict, *, mode: str, seed: int | None, wall_time: float | None) -> dict:
    """The provenance dict stored with a result (see module docstring).

    The platform string is ``<system>-<machine>`` (e.g. ``Linux-x86_64``), with no
    host name. Versions are those of the installed distributions (``None`` if absent).
    """
    commit, dirty = git_commit()
    return {
        "git_commit": commit,
        "git_dirty": dirty,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "scipy": _version("scipy"),
        "torch": _version("torch"),
        "opacus": _version("opacus"),
        "paperlib": _version("paperlib"),
        "platform": f"{platform.system()}-{platform.machine()}",
        "parameters": _to_jsonable(params),
        "seed": seed,
        "mode": mode,
        "wall_time_s": wall_time,
    }


def _result_path(name: str) -> Path:
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"result name must be a non-empty file name without '/', got {name!r}")
    return results_dir() / f"{name}.json"


def save_result(
    name: str,
    params: dict,
    data: Any,
    *,
    mode: str,
    seed: int | None,
    wall_time: float | None,
) -> Path:
    """Store *data* as ``results/<name>.json`` with its key and a provenance block.

    Parameters
    ----------
    name
        File stem, e.g. ``"fig5_upper_bounds"``.
    params
        Everything that determines *data* (mode-dependent sizes included); its
        :func:`result_key` decides cache hits in :func:`load_result`.
    data
        JSON-serialisable numbers (numpy arrays and scalars are converted).
    mode, seed, wall_time
        Recorded in the provenance block (``wall_time`` in seconds).

    Returns
    -------
    pathlib.Path
        The file written (atomically, see :func:`write_json_atomic`).

    Raises
    ------
    ValueError
        If *name* is empty or contains a path separator, or *params* holds NaN/inf.
    TypeError
        If *params* or *data* is not JSON serialisable.
    OSError
        If the file cannot be written.
    """
    path = _result_path(name)
    key = result_key(params)
    from paperlib.artifact.deps import code_fingerprint

    record = {
        "key": key,
        "code": code_fingerprint(),
        "params": _to_jsonable(params),
        "data": data,
        "provenance": provenance_block(params, mode=mode, seed=seed, wall_time=wall_time),
    }
    return write_json_atomic(path, record)


def load_result(name: str, params: dict) -> Any | None:
    """Return the cached ``data`` of ``results/<name>.json`` if it was made with *params*.

    Returns ``None`` (a cache miss) when the file does not exist, is not valid UTF-8
    JSON (truncated, corrupted, written by hand), is not a record (an object with a
    ``data`` field), its stored key differs from ``result_key(params)``, or it was made
    by other code (its ``code`` differs from
    :func:`paperlib.artifact.deps.code_fingerprint`). The caller then recomputes and
    :func:`save_result` replaces the file; ``make`` also finds such files before it runs
    the notebooks (:mod:`paperlib.artifact.resultcheck`).

    Raises
    ------
    ValueError
        If *name* is empty or contains a path separator, or *params* holds NaN/inf.
    TypeError
        If *params* is not JSON serialisable.
    OSError
        If the file exists but cannot be read.
    """
    path = _result_path(name)
    key = result_key(params)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:  # binary garbage: as unreadable as invalid JSON
        return None
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(record, dict) or record.get("key") != key:
        return None
    from paperlib.artifact.deps import code_fingerprint

    if record.get("code") != code_fingerprint():
        return None
    return record.get("data")


class ResultCache:
    """The results folder as a store for the computing layers (they never import this module).

    ``ResultCache(mode)`` hands :func:`result_key`, :func:`load_result` and
    :func:`save_result` to a function that takes a ``cache=`` argument (for example
    :func:`paperlib.implementations.real_audit.audit_implementation`), recording ``mode``
    in each result's provenance.
    """

    def __init__(self, mode: str):
        self.mode = mode

    def key(self, params: dict) -> str:
        return result_key(params)

    def load(self, name: str, params: dict) -> Any | None:
        return load_result(name, params)

    def save(self, name: str, params: dict, data: Any, *, seed: int | None, wall_time: float | None) -> Path:
        return save_result(name, params, data, mode=self.mode, seed=seed, wall_time=wall_time)
