"""Which model each method of Figure 4 is audited with (notebook 06): the book's choice of panels.

:func:`model_for` decides, for a dataset panel and a method's label, the model its real steps
run (the shared CNN, the method's own model, or none); :func:`own_models` lists the methods'
own models, whose audits run more real steps in quick mode. The audit itself
(:func:`paperlib.implementations.real_audit.audit_implementation`) takes the model by name.
"""

from __future__ import annotations

__all__ = ["own_models", "model_for"]


def own_models(paper_model_of) -> set:
    """Every model name in ``paper_model_of`` (``{method: {panel: model}}``, notebook 06's
    ``PAPER_MODEL_OF``): the methods' own models, whose audits run fewer real steps in quick mode."""
    return {m for per_panel in paper_model_of.values() for m in per_panel.values()}


def model_for(panel: str, method: str, *, model_of, paper_model_of, paper_model_panels):
    """The model ``method`` is audited with on dataset ``panel`` in Figure 4 (notebook 06), or None.

    The figure's methods are labels: ``"DPSGD-HF / DP-FETA / PrivImage"`` (one row for the
    three, on the shared CNN), ``"DPSGD-HF"``, the methods with their own models (the keys of
    ``paper_model_of``: DP-FETA, PrivImage) and the others (DPSUR). On a panel of
    ``paper_model_panels`` the methods of ``paper_model_of`` are audited with their own model
    for that panel (None where their code has none: ``paper_models.UNAVAILABLE`` says why)
    and DPSGD-HF alone on the CNN, so the combined row is not audited there (None); on any
    other panel the paper models are not audited (None), DPSGD-HF has no row of its own (None)
    and the combined row stands for all three on the CNN. Every other method gets the CNN,
    ``model_of[panel]``.

    Parameters
    ----------
    panel
        A dataset, a key of ``model_of`` (``"mnist"``, ``"fmnist"``, ``"cifar10"`` in notebook 06).
    method
        The method's label (the first field of notebook 06's ``METHODS``).
    model_of
        ``{panel: CNN model name}`` (notebook 06's ``MODEL_OF``).
    paper_model_of
        ``{method: {panel: its own model name}}`` (notebook 06's ``PAPER_MODEL_OF``); a panel
        missing from a method's mapping has no model of that method.
    paper_model_panels
        Panels on which the methods of ``paper_model_of`` are audited with their own models
        (notebook 06's ``PAPER_MODEL_PANELS``, per mode); any container.

    Returns
    -------
    str or None
        A model name of :data:`paperlib.implementations.models.MODELS`, or None where ``method`` is not audited on ``panel``.

    Raises
    ------
    ValueError
        ``panel`` is not a key of ``model_of`` (one line naming ``panel``).
    """
    if panel not in model_of:
        raise ValueError(f"panel must be one of {', '.join(map(str, model_of))}, got {panel!r}")
    own = panel in paper_model_panels
    if method in paper_model_of:
        return paper_model_of[method].get(panel) if own else None
    if method.startswith("DPSGD-HF") and (method == "DPSGD-HF") != own:
        return None  # the CNN row stands for all three only where the denoisers are not audited
    return model_of[panel]
