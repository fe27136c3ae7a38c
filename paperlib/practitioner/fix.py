"""The fix for Opacus 1.x: divide the noisy gradient sum by a public constant.

Why it is a fix (THEORY.md sections 2, 6; paper Appendix A, Theorems A.2/A.3). Opacus
1.x under Poisson sampling with ``loss_reduction="mean"`` releases
``(S_B + G) / floor(N q)`` (FEASGM): the divisor is computed from the size ``N`` of the
training set, so two neighbouring datasets can be divided by different numbers
(``floor(N q) != floor((N + 1) q)``), and the SGM guarantee the accountant reports does
not cover that release. Dividing instead by a number ``c`` fixed before the data are
seen — the batch size the user configured — releases ``(S_B + G) / c``: the SGM output
followed by the same public, data-independent map on both datasets. That is
post-processing (the post-processing property of f-DP, Dong, Roth, Su 2022), so the SGM guarantee
``f_q = q G_{1/sigma} + (1 - q) Id`` (Bu et al. 2020b) holds for it, for every pair.

What divides by what, read from the installed Opacus 1.6.0 source:

* ``opacus/privacy_engine.py``, ``PrivacyEngine.make_private``: ``sample_rate = 1 /
  len(data_loader)`` and ``expected_batch_size = int(len(data_loader.dataset) *
  sample_rate)`` (divided by the world size in distributed training), handed to the
  optimiser by ``PrivacyEngine._prepare_optimizer``;
* ``opacus/optimizers/optimizer.py``, ``DPOptimizer.pre_step``: ``clip_and_accumulate``
  (clipped sum), ``add_noise`` (``p.grad = summed_grad + N(0, (noise_multiplier *
  max_grad_norm)^2)``), then ``scale_grad``, which for ``loss_reduction="mean"`` does
  ``p.grad /= self.expected_batch_size * self.accumulated_iterations`` and nothing for
  ``"sum"``. ``accumulated_iterations`` is 1 under Poisson sampling (``make_private``
  calls ``forbid_grad_accumulation``). Nothing else in Opacus 1.6.0 reads or resets
  ``expected_batch_size`` after construction.

So the smallest fix is one assignment after ``make_private``
(:func:`fix_normaliser`); :func:`fixed_divisor` tells :func:`~paperlib.practitioner.check.check_opacus`
and :class:`~paperlib.practitioner.accountant.CertifiedAccountant` that an optimizer was fixed. The equivalent without touching the optimiser is
``loss_reduction="sum"`` in ``make_private`` (and ``reduction="sum"`` in the loss), with
the learning rate divided by the batch size: ``scale_grad`` then divides by nothing,
and for SGD ``(lr / B) * (S_B + G) = lr * (S_B + G) / B``, the same update
(:func:`sum_reduction_lr`).

What the fix does not change: the sampling rate. ``make_private`` samples at
``1 / len(data_loader) = 1 / ceil(N / B)``, which also depends on ``N``; it is the same
on both datasets of a pair unless ``ceil(N / B)`` changes between them (a batch size
that divides ``N`` or ``N + 1`` exactly). The SGM claim is for one rate; that case is
outside both the claim and this fix.

This module imports torch and Opacus only inside its functions; nothing in
``paperlib.fdp`` or ``paperlib.mechanisms`` imports it. Audited in the book's chapter
11 (``notebooks/11_the_fix.py``) with the game of chapter 7.
"""

from __future__ import annotations

import weakref

from paperlib.fdp.validation import check_int, check_positive

__all__ = ["fix_normaliser", "fixed_divisor", "normaliser_of", "sum_reduction_lr"]

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
    accountant reports holds for the normaliser (see the module docstring for the one
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


def sum_reduction_lr(lr: float, batch_size: int) -> float:
    """The learning rate for ``loss_reduction="sum"`` that gives the update of ``lr`` divided by ``batch_size``.

    With ``make_private(..., loss_reduction="sum")`` and a summed loss
    (``reduction="sum"``), ``DPOptimizer.scale_grad`` divides by nothing, so SGD with
    ``lr / batch_size`` takes the step ``lr * (S_B + G) / batch_size``: the same update as
    :func:`fix_normaliser` with ``lr`` (for SGD, with or without momentum; for adaptive
    optimisers such as Adam the step differs, but is still post-processing of SGM).
    ``lr > 0``, ``batch_size`` an integer >= 1; ValueError naming the parameter otherwise
    (THEORY.md §6: a public divisor is post-processing of SGM).
    """
    return check_positive(lr, "lr") / check_int(batch_size, "batch_size", 1)
