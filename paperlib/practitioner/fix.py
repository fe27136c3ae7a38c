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

from paperlib.fdp.validation import check_int, check_positive
from paperlib.implementations.opacus_divisor import fix_normaliser, fixed_divisor, normaliser_of

__all__ = ["fix_normaliser", "fixed_divisor", "normaliser_of", "sum_reduction_lr"]

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
