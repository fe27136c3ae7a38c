"""The divisor of an Opacus 1.x ``DPOptimizer``: read it, and set it to a public constant (the fix).

The practitioner's fix (:mod:`paperlib.practitioner.fix`, which documents it and re-exports
these functions) and the audit of the fixed step (:mod:`.opacus_step`) call the same code, kept
here so that the audit does not import from the practitioner layer above it. Opacus is imported
inside the functions only.
"""

from __future__ import annotations

import weakref

from paperlib.fdp.validation import check_int

__all__ = ["fix_normaliser", "fixed_divisor", "normaliser_of"]

# optimizer -> the public constant fix_normaliser set (weak: forgotten with the optimizer)
_FIXED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _dp_optimizer_class():
    try:
        import opacus
        from opacus.optimizers import DPOptimizer
    except ImportError as exc:  # pragma: no cover - the [audit] extra is missing
        raise ImportError("paperlib.practitioner.fix needs Opacus 1.x (pip install 'opacus>=1,<2')") from exc
    major = str(getattr(opacus, "__version__", "0")).split(".")[0]
    if major != "1":
        raise ValueError(f"optimizer: paperlib.practitioner.fix is for Opacus 1.x, the installed Opacus is "
                         f"{opacus.__version__}")
    return DPOptimizer


def _check_optimizer(optimizer):
    DPOptimizer = _dp_optimizer_class()
    if not isinstance(optimizer, DPOptimizer):
        raise TypeError("optimizer: expected the opacus.optimizers.DPOptimizer that PrivacyEngine.make_private "
                        f"returns (Opacus 1.x), got {type(optimizer).__name__}")
    if hasattr(optimizer, "world_size"):  # DistributedDPOptimizer, DistributedPerLayerOptimizer, ...
        raise ValueError(f"optimizer: {type(optimizer).__name__} is distributed, which fix_normaliser does not "
                         "cover; use loss_reduction='sum' with the learning rate divided by the batch size")
    return optimizer


def fix_normaliser(optimizer, batch_size: int):
    """Make an Opacus 1.x ``DPOptimizer`` divide by the configured batch size, a public constant.

    Sets ``optimizer.expected_batch_size = batch_size``, the number that
    ``DPOptimizer.scale_grad`` (``opacus/optimizers/optimizer.py``, Opacus 1.6.0) divides
    the noisy clipped sum by under ``loss_reduction="mean"`` (``p.grad /=
    expected_batch_size * accumulated_iterations``; ``accumulated_iterations`` is 1 under
    Poisson sampling). ``PrivacyEngine.make_private`` (``opacus/privacy_engine.py``) sets
    it to ``int(len(dataset) * sample_rate)``, which depends on the dataset size (FEASGM;
    THEORY.md section 6); after this call the step releases ``(S_B + G) / batch_size`` on
    every dataset, the SGM output post-processed by a constant, so the SGM guarantee the
    accountant reports holds for the normaliser (see :mod:`paperlib.practitioner.fix` for the one
    thing it does not change, the sampling rate).

    Call it once, right after ``make_private``, with the ``batch_size`` given to the
    ``DataLoader`` (any positive integer fixed without looking at the data works; the
    learning rate then has the meaning it has with that batch size). Under
    ``loss_reduction="sum"`` Opacus divides by nothing and the value is unused (already
    SGM); it is set anyway.

    Parameters
    ----------
    optimizer : opacus.optimizers.DPOptimizer
        Non-distributed (``DPOptimizer``, ``DPPerLayerOptimizer``, ``AdaClipDPOptimizer``,
        the fast-gradient-clipping optimiser; all share ``scale_grad``).
    batch_size : int >= 1
        The configured batch size (a public constant).

    Returns
    -------
    The same optimizer (changed in place).

    Raises
    ------
    ValueError
        ``batch_size`` not an integer >= 1 (checked before the optimizer is touched); a distributed
        ``DPOptimizer`` (use ``loss_reduction="sum"``); an Opacus release other than 1.x installed.
    TypeError
        ``optimizer`` not an Opacus 1.x ``DPOptimizer``.
    """
    batch_size = check_int(batch_size, "batch_size", 1)
    _check_optimizer(optimizer).expected_batch_size = batch_size
    _FIXED[optimizer] = batch_size
    return optimizer


def fixed_divisor(optimizer) -> int | None:
    """The public constant :func:`fix_normaliser` made ``optimizer`` divide by, or None.

    None also when ``expected_batch_size`` was changed again afterwards (the optimizer no longer
    divides by the constant the fix set). Any object is accepted (None for one never fixed).
    """
    try:
        b = _FIXED.get(optimizer)
    except TypeError:  # not weak-referenceable: never fixed
        return None
    return b if b is not None and getattr(optimizer, "expected_batch_size", None) == b else None


def normaliser_of(optimizer) -> float:
    """The number an Opacus 1.x ``DPOptimizer`` step divides the noisy sum by (one accumulated batch).

    ``expected_batch_size`` under ``loss_reduction="mean"``, 1 under ``"sum"``
    (``DPOptimizer.scale_grad``, ``opacus/optimizers/optimizer.py``). TypeError/ValueError as
    :func:`fix_normaliser` for anything else.
    """
    opt = _check_optimizer(optimizer)
    return 1.0 if opt.loss_reduction == "sum" else float(opt.expected_batch_size)
