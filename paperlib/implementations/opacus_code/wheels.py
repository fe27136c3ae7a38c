"""The Opacus release cache: wheels checked against their stored sha256, and installs.

Cache folders (``<cache>`` is ``$PAPERLIB_CACHE``, default ``<repo>/.cache``)
-----------------------------------------------------------------------------
* ``<cache>/opacus-src/opacus-<version>-*.whl``: release wheels, fetched with
  ``pip download --no-deps --only-binary=:all: opacus==<version>``;
* ``<cache>/opacus-<version>/``: the release installed with
  ``pip install --no-deps --no-index --no-compile --target`` from its wheel, run by
  :func:`paperlib.implementations.opacus_code.stepcheck.confirm_release` and
  :mod:`paperlib.implementations.runners` in a subprocess with that folder first on
  ``PYTHONPATH`` (:func:`release_env`).

Verification
------------
The sha256 of every release wheel is stored in the package, in the ``wheel_sha256``
field of each release of ``paperlib/resources/opacus_table2.json`` (written by the
online refresh, ``python -m paperlib.implementations.opacus_code --refresh``). A wheel
is compared with that value (:func:`verify_wheel`) before its source is read or it is
installed; a mismatch, or a release with no stored value, raises
:class:`WheelVerificationError` with one line naming the file, and nothing from the wheel
is read, installed or run. Only the refresh, which records new values, may accept a
release without one (``trust_new=True``), and then only a wheel it has just downloaded
from the package index (pip checks the index's own hash), never one found in the cache.

An installed folder is reused only if it was installed from the verified wheel
(:func:`verify_install`): it holds the marker file :data:`INSTALL_MARKER` with that
wheel's sha256, every file of the wheel with the wheel's bytes, and nothing else but
pip's install metadata. Otherwise it is installed again from the verified wheel, into a
new folder that replaces the old one. This matters because the folder is put first on
``PYTHONPATH``: any module planted in it would shadow the one it names.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.resources
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterable

from paperlib.fdp.validation import InputError, ParameterError
from paperlib.implementations.cache import PACKAGE_PARENT, cache_root

from .rules import SOURCE_FILES, AuditError

__all__ = [
    "PACKAGE",
    "FIRST_VERSION",
    "REFRESH_COMMAND",
    "INSTALL_MARKER",
    "WheelVerificationError",
    "wheel_cache_dir",
    "release_dir",
    "stored_table_path",
    "load_table",
    "stored_sha256",
    "parse_version",
    "is_release",
    "wheel_version",
    "list_versions",
    "cached_wheel",
    "fetch_wheel",
    "sha256_file",
    "verify_wheel",
    "read_sources",
    "verify_install",
    "install_release",
    "release_env",
]

PACKAGE = "opacus"
FIRST_VERSION = "0.9.0"
REFRESH_COMMAND = "python -m paperlib.implementations.opacus_code --refresh   (or: make opacus-table)"
#: File inside ``<cache>/opacus-<version>/`` holding the sha256 of the wheel it was installed from.
INSTALL_MARKER = ".paperlib-wheel-sha256"

# pip's own files in an installed dist-info folder (not in the wheel; RECORD is rewritten).
_PIP_METADATA = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD")


class WheelVerificationError(AuditError, InputError, ValueError):
    """A wheel does not match the sha256 stored for its release, or none is stored.

    Its message is one line naming the file. It is also a ``ValueError`` (a file in the
    user's cache that is refused, like any other refused input), so callers that turn
    ``ValueError`` into a one-line error, such as ``python -m paperlib``, show it as is.
    """


# ---------------------------------------------------------------------------- folders


def wheel_cache_dir() -> Path:
    """Where downloaded release wheels live: ``<cache>/opacus-src/``."""
    return cache_root() / "opacus-src"


def release_dir(version: str) -> Path:
    """Where a release is installed: ``<cache>/opacus-<version>/``."""
    return cache_root() / f"{PACKAGE}-{version}"


# ---------------------------------------------------------------------------- the stored table


def stored_table_path() -> Path:
    """The committed audit table inside the package (``paperlib/resources/opacus_table2.json``)."""
    return Path(str(importlib.resources.files("paperlib") / "resources" / "opacus_table2.json"))


def _stored_table_label() -> str:
    """The stored table's path as the messages show it (relative to the folder holding ``paperlib``)."""
    p = stored_table_path()
    try:
        return p.resolve().relative_to(PACKAGE_PARENT).as_posix()
    except ValueError:
        return str(p)


def _read_table(path: Path) -> dict[str, Any]:
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    raise AuditError(f"no stored Opacus code-audit table at {path}; restore it from the repository, "
                     f"or rebuild it (needs the network): {REFRESH_COMMAND}")


@functools.lru_cache(maxsize=1)
def _stored_table() -> dict[str, Any]:
    return _read_table(stored_table_path())


def load_table(path: Path | None = None) -> dict[str, Any]:
    """The stored audit table (``paperlib/resources/opacus_table2.json`` unless ``path``); no network.

    The one reader of the file (the practitioner's releases, the wheels' stored sha256, the
    grade and the table all read it here). The stored table (no ``path``) is read once per
    process and the same document is returned every time: do not modify it.
    :func:`~.table.save_table` forgets it (``load_table.cache_clear()``) when it writes.

    Raises :class:`~.rules.AuditError` naming the command that rebuilds it when the file
    is missing, ``ValueError`` when it is not JSON. (It is not rebuilt from the wheel cache:
    the sha256 values the wheels are checked against live in this very file.)
    """
    return _stored_table() if path is None else _read_table(Path(path))


load_table.cache_clear = _stored_table.cache_clear  # type: ignore[attr-defined]


def stored_sha256(version: str) -> str | None:
    """The sha256 (64 hex digits) stored for the wheel of ``version``, or ``None`` when the
    stored table has no such release (or is missing or unreadable)."""
    try:
        doc = load_table()
    except (AuditError, OSError, ValueError):
        return None
    for r in doc.get("releases", []) if isinstance(doc, dict) else []:
        if isinstance(r, dict) and r.get("version") == version:
            h = r.get("wheel_sha256")
            if isinstance(h, str) and re.fullmatch(r"[0-9a-f]{64}", h):
                return h
    return None


# ---------------------------------------------------------------------------- versions and wheels

#: a release name: ``[v]MAJOR.MINOR[.MICRO]``, optionally followed by a suffix after ``.``, ``+`` or ``-``
_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?([.+\-].*)?")


def parse_version(version: str) -> tuple[int, int, int]:
    """``(major, minor, micro)`` of a release name such as ``'1.6.0'``, ``'v0.13.0'`` or ``'1.5'``.

    The one version parser: the order of releases, the stored table's keys, the grade's
    Table 2 and the user's ``opacus_version`` all use it. A local or development suffix
    (``'1.6.0+cu121'``) names the release it builds on. Raises ValueError naming
    ``opacus_version`` otherwise.
    """
    if not isinstance(version, str):
        raise ParameterError("opacus_version", f"opacus_version must be a string like '1.6.0', got {version!r}")
    m = _VERSION.fullmatch(version.strip())
    if not m:
        raise ParameterError("opacus_version",
                             f"opacus_version must look like '1.6.0' or 'v0.13.0', got {version!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def is_release(version: str) -> bool:
    """Whether ``version`` is a final release as the package index names it (``'1.5'``,
    ``'1.6.0'``): no ``v``, no pre-release, development, post-release or local part."""
    m = _VERSION.fullmatch(version) if isinstance(version, str) else None
    return m is not None and not version.startswith("v") and m.group(4) is None


def _pip(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True, text=True, timeout=timeout,
    )


#: terminal escape sequences in pip's output (its rich console colours errors even in a pipe):
#: CSI (``ESC [ ... m`` and the like), OSC (``ESC ] ... BEL/ST``), two-character escapes, and
#: an SGR code whose ESC was already dropped (``[0m``)
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\[[0-9][0-9;]*m")


def _strip_ansi(text: str) -> str:
    return _ANSI.sub("", text or "")


def _last_line(text: str) -> str:
    """The last non-empty line of pip's output, without terminal escape sequences (for one-line errors)."""
    lines = [ln.strip() for ln in _strip_ansi(text).strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


def list_versions(first: str = FIRST_VERSION) -> list[str]:
    """Release versions of Opacus on the package index, oldest first, from ``first`` on
    (final releases only, :func:`is_release`). Uses ``pip index versions``, falling back to the version list in
    the error that ``pip download opacus==0`` prints. Needs the network."""
    versions: list[str] = []
    r = _pip("index", "versions", PACKAGE, timeout=300)
    m = re.search(r"Available versions:\s*(.+)", r.stdout)
    if r.returncode == 0 and m:
        versions = [v.strip() for v in m.group(1).split(",") if v.strip()]
    else:
        with tempfile.TemporaryDirectory() as d:
            r2 = _pip("download", "--no-deps", "-d", d, f"{PACKAGE}==0", timeout=300)
        m = re.search(r"\(from versions:\s*([^)]*)\)", r2.stderr + r2.stdout)
        if m is None or not m.group(1).strip() or m.group(1).strip() == "none":
            raise AuditError("cannot list Opacus releases on the package index (no network?): "
                             + _last_line(r.stderr or r2.stderr))
        versions = [v.strip() for v in m.group(1).split(",") if v.strip()]
    lo = parse_version(first)
    keep = [v for v in versions if is_release(v) and parse_version(v) >= lo]
    return sorted(set(keep), key=parse_version)


def wheel_version(path: Path) -> str | None:
    """The version in a wheel's file name (``opacus-1.5.4-py3-none-any.whl`` -> ``"1.5.4"``)."""
    m = re.match(rf"{PACKAGE}-([^-]+)-", Path(path).name)
    return m.group(1) if m else None


def cached_wheel(version: str, cache: Path | None = None) -> Path | None:
    """The cached wheel of ``version`` (exact version string match), or ``None``. Not verified."""
    cache = wheel_cache_dir() if cache is None else Path(cache)
    if not cache.is_dir():
        return None
    for p in sorted(cache.glob(f"{PACKAGE}-*.whl")):
        if wheel_version(p) == version:
            return p
    return None


def sha256_file(path: Path) -> str:
    """The sha256 of a file's bytes, 64 hex digits."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _no_stored_hash(version: str, what: str) -> WheelVerificationError:
    return WheelVerificationError(
        f"{what} is opacus {version}, which has no sha256 stored in {_stored_table_label()}; "
        f"delete it and rerun, or record the release from the package index with: {REFRESH_COMMAND}")


def verify_wheel(wheel: Path, version: str | None = None, *, sha256: str | None = None,
                 trust_new: bool = False) -> str:
    """Check a wheel against the sha256 stored for its release; return the sha256.

    ``version`` defaults to the one in the file name. ``sha256``: the expected value, by
    default :func:`stored_sha256` of the version. ``trust_new``: accept (and return the
    hash of) a release that has no stored value; for the refresh that records it, on a
    wheel it has just downloaded. Reads the file only; nothing in it runs.

    Raises :class:`WheelVerificationError` (one line naming the file) on a mismatch or,
    unless ``trust_new``, when no value is stored; :class:`AuditError` when the file name
    carries no version.
    """
    wheel = Path(wheel)
    version = version or wheel_version(wheel)
    if version is None:
        raise AuditError(f"cannot tell the Opacus version of {wheel.name}")
    want = sha256 if sha256 is not None else stored_sha256(version)
    got = sha256_file(wheel)
    if want is None:
        if trust_new:
            return got
        raise _no_stored_hash(version, f"wheel {wheel}")
    if got != want:
        raise WheelVerificationError(
            f"wheel {wheel} has sha256 {got}, expected {want} for opacus {version} "
            f"(stored in {_stored_table_label()}); delete it and rerun")
    return got


def fetch_wheel(version: str, cache: Path | None = None, *, trust_new: bool = False) -> Path:
    """The release's verified wheel in the cache, downloaded with
    ``pip download --no-deps --only-binary=:all: opacus==VERSION`` if missing.

    A cached wheel is verified (:func:`verify_wheel`) and never replaced: a mismatch is an
    error the user resolves by deleting the file. A download goes to a temporary folder and
    enters the cache only once verified. ``trust_new`` (the refresh): a release with no
    stored sha256 is downloaded afresh and replaces any cached file of that version, whose
    origin is unknown. Needs the network for a download.
    """
    cache = wheel_cache_dir() if cache is None else Path(cache)
    want = stored_sha256(version)
    if want is None and not trust_new:
        raise _no_stored_hash(version, f"release {PACKAGE}=={version}")
    hit = cached_wheel(version, cache)
    if hit is not None and want is not None:
        verify_wheel(hit, version, sha256=want)
        return hit
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=cache) as d:
        r = _pip("download", "--no-deps", "--only-binary=:all:", "-d", d, f"{PACKAGE}=={version}")
        got = cached_wheel(version, Path(d))
        if r.returncode != 0 or got is None:
            raise AuditError(f"pip download of {PACKAGE}=={version} failed: {_last_line(r.stderr)}")
        verify_wheel(got, version, sha256=want, trust_new=trust_new)
        if hit is not None:
            hit.unlink()
        dest = cache / got.name
        os.replace(got, dest)
    return dest


def read_sources(wheel: Path, files: Iterable[str] = SOURCE_FILES) -> dict[str, str]:
    """The text of ``files`` (paths inside the package) that exist in the wheel. Not
    verified: call :func:`verify_wheel` first."""
    out = {}
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for f in files:
            if f in names:
                out[f] = z.read(f).decode("utf-8")
    return out


# ---------------------------------------------------------------------------- installs


def verify_install(target: Path, wheel: Path, sha256: str) -> bool:
    """Whether ``target`` is an install of ``wheel`` (whose sha256 is ``sha256``, already
    verified): the :data:`INSTALL_MARKER` file holds ``sha256``, every file of the wheel is
    there with the wheel's bytes (its ``RECORD`` excepted, which pip rewrites), and no other
    file is, apart from pip's install metadata in the dist-info folder and scripts in
    ``bin/``. ``__pycache__`` folders are deleted first: compiled files are never trusted
    (the release runs with ``PYTHONDONTWRITEBYTECODE``; a stale one is recompiled).
    Symbolic links make it fail."""
    target = Path(target)
    marker = target / INSTALL_MARKER
    try:
        if marker.is_symlink() or marker.read_text().strip() != sha256:
            return False
    except OSError:
        return False
    for d in sorted(target.rglob("__pycache__"), reverse=True):
        if d.is_dir() and not d.is_symlink():
            shutil.rmtree(d)
    expected: dict[str, str | None] = {}
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.is_dir():
                continue
            name = info.filename
            rewritten = re.fullmatch(r"[^/]+\.dist-info/RECORD", name) is not None
            expected[name] = None if rewritten else hashlib.sha256(z.read(info)).hexdigest()
    dist_infos = {n.split("/", 1)[0] for n in expected if re.match(r"[^/]+\.dist-info/", n)}
    allowed = {f"{d}/{m}" for d in dist_infos for m in _PIP_METADATA} | {INSTALL_MARKER}
    found = set()
    for p in target.rglob("*"):
        if p.is_symlink():
            return False
        if p.is_dir():
            continue
        rel = p.relative_to(target).as_posix()
        found.add(rel)
        if rel in allowed or rel.startswith("bin/"):
            continue
        if rel not in expected:
            return False
        if expected[rel] is not None and sha256_file(p) != expected[rel]:
            return False
    return set(expected) <= found


def install_release(version: str, *, cache: Path | None = None, download: bool = False,
                    sha256: str | None = None) -> Path:
    """The folder ``<cache>/opacus-<version>`` holding the release installed from its
    verified wheel; installs it (``pip install --no-deps --no-index --no-compile --target``)
    unless an install made from that wheel is already there (:func:`verify_install`).

    ``cache``: the wheel folder (default :func:`wheel_cache_dir`). ``download=False``: the
    wheel must already be there (no network). ``sha256``: the expected hash of the wheel,
    by default the stored one (the refresh passes the value it has just recorded).

    Raises :class:`WheelVerificationError` (one line naming the wheel) when the wheel does
    not match, before pip or any code of the wheel runs; :class:`AuditError` when the wheel
    is not there or the install fails.
    """
    if download:
        wheel = fetch_wheel(version, cache, trust_new=sha256 is not None)
    else:
        wheel = cached_wheel(version, cache)
        if wheel is None:
            where = wheel_cache_dir() if cache is None else cache
            raise AuditError(f"opacus {version} is not in the wheel cache {where}; fill it with: {REFRESH_COMMAND}")
    sha = verify_wheel(wheel, version, sha256=sha256)
    target = release_dir(version)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / f".{PACKAGE}-{version}.lock"):  # one installer at a time (parallel notebooks)
        if not (target.is_dir() and verify_install(target, wheel, sha)):
            _install(wheel, sha, target)
    return target


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on ``path`` (``fcntl.flock``; no lock where ``fcntl`` is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _install(wheel: Path, sha: str, target: Path) -> None:
    """Install the verified ``wheel`` into a new folder beside ``target``, check it, and put it in
    the place of ``target`` (whatever was there is deleted)."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        r = _pip("install", "--no-deps", "--no-index", "--no-compile", "--target", str(tmp), str(wheel))
        if r.returncode != 0:
            raise AuditError(f"pip install --target {target} {wheel.name} failed: {_last_line(r.stderr)}")
        (tmp / INSTALL_MARKER).write_text(sha + "\n")
        if not verify_install(tmp, wheel, sha):
            raise AuditError(f"pip install --target {target} {wheel.name} did not install exactly the wheel's files")
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def release_env(target: Path) -> dict[str, str]:
    """The environment of a subprocess that runs the release installed in ``target``:
    ``PYTHONPATH`` = ``target``, then the folder holding ``paperlib``, then the caller's;
    no bytecode written (``PYTHONDONTWRITEBYTECODE=1``); ``OMP_NUM_THREADS=1`` unless set."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(target), str(PACKAGE_PARENT)]
                                        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("OMP_NUM_THREADS", "1")
    return env
