"""JAX Privacy 2.0.0's DP-SGD gradient behind the step protocol of :mod:`paperlib.implementations.step_audit`.

JAX Privacy is installed on demand, as the old Opacus releases are: its wheel and those of its JAX stack, each
pinned to the sha256 in :data:`PINS`, into its own folder under the cache root (``jax-privacy-2.0.0/``;
:mod:`paperlib.implementations.pinned`). The main environment's NumPy and SciPy serve it. The step then runs in a
subprocess whose path starts with that folder, so JAX never enters this process.

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

from pathlib import Path

from paperlib.implementations.pinned import LibraryUnavailable, classify_in_subprocess, ensure_pinned, pinned_dir
from paperlib.implementations.step_audit import StepAudit, probe_options

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
_LABEL = f"jax-privacy-{VERSION}"


class JaxPrivacyUnavailable(LibraryUnavailable):
    """JAX Privacy cannot be installed or run here (another platform, no network and no installed copy)."""


def install_dir() -> Path:
    """The folder JAX Privacy is installed into: ``<cache root>/jax-privacy-2.0.0``."""
    return pinned_dir(_LABEL)


def ensure_installed(download: bool = True) -> Path:
    """The install folder, installing the pinned wheels first when it is missing or holds other pins
    (:func:`~paperlib.implementations.pinned.ensure_pinned`).

    Raises
    ------
    JaxPrivacyUnavailable
        Another platform than CPython 3.11+ on Linux x86-64 (the pins' wheels), ``download=False`` with no
        installed copy, or pip failing (offline, a hash that does not match): one line with the reason.
    """
    return ensure_pinned(_LABEL, f"JAX Privacy {VERSION}", PINS, download=download, error=JaxPrivacyUnavailable)


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


def classify_jax_privacy(normalize_by="expected", *, download: bool = True, **probe) -> StepAudit:
    """Classify JAX Privacy's step with ``normalize_by`` (``"expected"`` or a number) in a subprocess (module
    docstring). ``probe``: the options of :func:`~paperlib.implementations.step_audit.classify_step`.

    Raises
    ------
    ValueError
        ``normalize_by`` or a probe option out of its range (one line naming it), before anything is installed.
    JaxPrivacyUnavailable
        See :func:`ensure_installed`; also when the subprocess fails (its last line of error).
    StepNotClassified
        Its updates fit no known rule.
    """
    if normalize_by != "expected" and not (isinstance(normalize_by, (int, float)) and normalize_by > 0):
        raise ValueError(f"normalize_by must be 'expected' or a number > 0, got {normalize_by!r}")
    probe = probe_options(**probe)  # before installing anything
    return classify_in_subprocess(ensure_installed(download=download), f"JAX Privacy {VERSION}",
                                  "paperlib.implementations.jax_privacy_step:jax_privacy_step",
                                  {"normalize_by": normalize_by}, probe,
                                  env={"JAX_PLATFORMS": "cpu", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
                                  error=JaxPrivacyUnavailable)
