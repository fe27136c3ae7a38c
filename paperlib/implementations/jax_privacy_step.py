"""JAX Privacy 2.0.0's DP-SGD gradient behind the step protocol of :mod:`paperlib.implementations.step_audit`.

JAX Privacy is installed on demand, as the old Opacus releases are: its wheel and those of its JAX stack, each
pinned to the sha256 in :data:`PINS` (``pip install --require-hashes --no-deps --target``), into its own folder
under the cache root (``jax-privacy-2.0.0/``). The main environment's NumPy and SciPy serve it. The step then runs
in a subprocess whose path starts with that folder, so JAX never enters this process.

:func:`jax_privacy_step` is the library's own code path for one step: Poisson sampling with
``batch_selection.CyclicPoissonSampling``, the clipped sum divided by ``normalize_by`` with ``clipped_grad``,
and Gaussian noise of standard deviation ``noise_multiplier`` times the clipped function's ``l2_norm_bound`` with
``noise_addition.gaussian_privatizer``. JAX Privacy's pitfalls guide asks for ``normalize_by`` to be a public
constant; its Keras API passes the configured batch size. The two settings classified here are that constant
(``normalize_by=4``, fixed before the data are seen) and the expected batch size computed from the data
(``normalize_by="expected"``: ``len(data) * sampling_rate``).

:func:`classify_jax_privacy` installs the library when it is missing (``download=True``) and returns the
:class:`~paperlib.implementations.step_audit.StepAudit`; without the network and without the installed folder it
raises :class:`JaxPrivacyUnavailable` with the reason.
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
from paperlib.implementations.step_audit import StepAudit, StepNotClassified

__all__ = ["VERSION", "PINS", "JaxPrivacyUnavailable", "install_dir", "ensure_installed", "jax_privacy_step",
           "classify_jax_privacy"]

VERSION = "2.0.0"
#: (distribution, version, sha256 of its CPython 3.11 Linux x86-64 wheel): JAX Privacy and the parts of its
#: dependencies that the locked environment does not hold
PINS = (
    ("jax-privacy", "2.0.0", "2621f70069ffc897d2a1976ff335871d96211cb4c5c927724fc7778306521350"),
    ("jax", "0.10.2", "724d73c4678d8b06f6a6ab4db1b8a2fea8cd4f1e2c2564f99601634ec7b8d1c6"),
    ("jaxlib", "0.10.2", "1faca3c5d4662cb4a6130a68105d68bb520764817e165d6eebfd6786c0d1f30f"),
    ("ml-dtypes", "0.7.0", "d214c910cabaf80aa1ee37b0f25131e20d7a6474182e5293a68985b0421299da"),
    ("optax", "0.2.8", "e3ca2d36c99daab1800ae9dbc0545034382d6bc780b24d969e1b0df65fa31cb4"),
    ("chex", "0.1.92", "f34989d9bff7954edfab09fba7757e3d62404da34577bff0d253599ec5b4f93d"),
    ("pydantic", "2.14.4", "653a2ad9f6d8858529c77c72717d0ea991d6c6837fe683246b2f4b2bbfc3fadc"),
    ("pydantic-core", "2.50.5", "488319076ec92908b91fc6265ce761f1d78748f69f85518564fd16bf333e1b70"),
    ("annotated-types", "0.8.0", "f072f4d804ea359e4eaf198b1af7a8b0943881a87f31bb764f8bf219bb9419e0"),
    ("typing-inspection", "0.4.5", "bc210535442b39e1bf2805e0c7a17dfd6a4ace760c84c7f7d16245d23a6b1c39"),
)
#: the constant ``normalize_by`` of the public-constant setting (a batch size fixed in a configuration)
CONSTANT = 4.0
_MARKER = ".paperlib-pins"


class JaxPrivacyUnavailable(RuntimeError):
    """JAX Privacy cannot be installed or run here (another platform, no network and no installed copy)."""


def install_dir() -> Path:
    """The folder JAX Privacy is installed into: ``<cache root>/jax-privacy-2.0.0``."""
    return cache_root() / f"jax-privacy-{VERSION}"


def _pins_text() -> str:
    return "".join(f"{name}=={ver} --hash=sha256:{sha}\n" for name, ver, sha in PINS)


def ensure_installed(download: bool = True) -> Path:
    """The install folder, installing the pinned wheels first when it is missing or holds other pins.

    Raises
    ------
    JaxPrivacyUnavailable
        Another platform than CPython 3.11+ on Linux x86-64 (the pins' wheels), ``download=False`` with no
        installed copy, or pip failing (offline, a hash that does not match): one line with the reason.
    """
    d = install_dir()
    if (d / _MARKER).is_file() and (d / _MARKER).read_text() == _pins_text():
        return d
    if not (sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")
            and sys.version_info[:2] == (3, 11)):
        raise JaxPrivacyUnavailable(f"JAX Privacy {VERSION}'s pinned wheels are for CPython 3.11 on Linux x86-64, "
                                    f"not Python {platform.python_version()} on {sys.platform} {platform.machine()}")
    if not download:
        raise JaxPrivacyUnavailable(f"JAX Privacy {VERSION} is not installed in {d} (pass download=True)")
    d.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".jax-privacy-{VERSION}-", dir=d.parent))
    try:
        req = tmp / "requirements.txt"
        req.write_text(_pins_text())
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                            "--require-hashes", "--only-binary", ":all:", "--target", str(tmp / "site"), "-r",
                            str(req)], capture_output=True, text=True, timeout=1200)
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise JaxPrivacyUnavailable(f"could not install JAX Privacy {VERSION} from its pinned wheels: {last}")
        (tmp / "site" / _MARKER).write_text(_pins_text())
        if d.exists():
            shutil.rmtree(d)
        os.replace(tmp / "site", d)  # whole or not at all: a half-installed folder is never read
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return d


def jax_privacy_step(gradients, *, sampling_rate, noise_multiplier, max_grad_norm, seed, normalize_by="expected"):
    """One DP-SGD gradient by JAX Privacy's own functions (the module docstring); runs where ``jax_privacy``
    imports (the subprocess of :func:`classify_jax_privacy`). Returns ``(noisy gradient, batch indices)``."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax_privacy import batch_selection, clipped_grad, noise_addition

    x = jnp.asarray(np.asarray(gradients), dtype=jnp.float32)
    m, n = x.shape
    sampler = batch_selection.CyclicPoissonSampling(sampling_prob=float(sampling_rate), iterations=1)
    batch = next(sampler.batch_iterator(m, rng=np.random.default_rng(seed)))
    nu = m * float(sampling_rate) if normalize_by == "expected" else float(normalize_by)

    def loss(params, xi):
        return jnp.sum(xi * params)  # xi keeps a batch axis of one (keep_batch_dim)

    grad_fn = clipped_grad(loss, l2_clip_norm=float(max_grad_norm), normalize_by=nu, batch_argnums=1)
    params = jnp.zeros(n, dtype=jnp.float32)
    summed = grad_fn(params, x[np.asarray(batch, dtype=int)]) if len(batch) else jnp.zeros(n, dtype=jnp.float32)
    privatizer = noise_addition.gaussian_privatizer(stddev=float(noise_multiplier) * grad_fn.l2_norm_bound,
                                                    prng_key=jax.random.key(int(seed) % 2**32))
    noisy, _ = privatizer.update(summed, privatizer.init(summed))
    return np.asarray(noisy, dtype=np.float64), sorted(int(i) for i in batch)


_CHILD = r"""
import functools, json, sys, warnings
warnings.simplefilter("ignore")
from paperlib.implementations.jax_privacy_step import jax_privacy_step
from paperlib.implementations.step_audit import StepNotClassified, classify_step
nb, kw = json.loads(sys.argv[1])
nb = nb if nb == "expected" else float(nb)
try:
    a = classify_step(functools.partial(jax_privacy_step, normalize_by=nb), **kw)
    print(json.dumps({"ok": a.to_json()}))
except StepNotClassified as exc:
    print(json.dumps({"refused": str(exc), "evidence": exc.evidence}))
"""


def classify_jax_privacy(normalize_by="expected", *, download: bool = True, **probe) -> StepAudit:
    """Classify JAX Privacy's step with ``normalize_by`` (``"expected"`` or a number) in a subprocess (module
    docstring). ``probe``: the options of :func:`~paperlib.implementations.step_audit.classify_step`.

    Raises
    ------
    JaxPrivacyUnavailable
        See :func:`ensure_installed`; also when the subprocess fails (its last line of error).
    StepNotClassified
        Its updates fit no known rule.
    """
    if normalize_by != "expected" and not (isinstance(normalize_by, (int, float)) and normalize_by > 0):
        raise ValueError(f"normalize_by must be 'expected' or a number > 0, got {normalize_by!r}")
    d = ensure_installed(download=download)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(d), str(PACKAGE_PARENT)]), JAX_PLATFORMS="cpu",
               XLA_PYTHON_CLIENT_PREALLOCATE="false")
    r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps([normalize_by, probe])], capture_output=True,
                       text=True, env=env, timeout=1800)
    if r.returncode != 0 or not r.stdout.strip():
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise JaxPrivacyUnavailable(f"JAX Privacy {VERSION}'s step did not run: {last}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if "refused" in out:
        raise StepNotClassified(out["refused"], out["evidence"])
    return StepAudit.from_json(out["ok"])
