"""paperlib: the f-DP guarantees of DP-SGD as it is really run (Wang, Cui, Cui, Yuan 2026).

The names a practitioner needs are here; each is imported on first use, so
``import paperlib`` costs nothing and needs no optional dependency::

    import paperlib as pl
    g = pl.guarantee("easgm", N=999, q=0.005, sigma=10, n=26_010)   # one round, per pair
    g.epsilon(1e-5), pl.sgm_claim(0.005, 10).epsilon(1e-5)          # real vs claimed

Layers (a test enforces that no computing layer imports ``paperlib.artifact``):
:mod:`paperlib.fdp` (trade-off functions; numpy + scipy), :mod:`paperlib.mechanisms`
(SGM/EASGM/ASGM/FEASGM, guarantees, bounds), :mod:`paperlib.audit` (the game; torch),
:mod:`paperlib.implementations` (real DP-SGD steps; torch, Opacus),
:mod:`paperlib.practitioner` (what a run guarantees: releases, the validated ``Run``, the
check, the certified accountant, the fix) and :mod:`paperlib.artifact` (the book and ``make``
only). Nothing else sits at the top of the package but ``cli`` (``python -m paperlib``).
"""

from importlib import import_module

__version__ = "0.1.0"

# name -> module that defines it (imported lazily by __getattr__, PEP 562)
_EXPORTS = {
    "Mechanism": "paperlib.mechanisms.core",
    "MECHANISMS": "paperlib.mechanisms.core",
    "TradeOffCurve": "paperlib.fdp.tradeoff",
    "gaussian_tradeoff": "paperlib.fdp.tradeoff",
    "sgm_claim": "paperlib.mechanisms.guarantees",
    "guarantee": "paperlib.mechanisms.guarantees",
    "upper_bound": "paperlib.mechanisms.guarantees",
    "curve": "paperlib.mechanisms.curves",
    "sgm_claim_epsilon": "paperlib.mechanisms.claimed",
    "Setting": "paperlib.mechanisms.setting",
    "certified_guarantee": "paperlib.mechanisms.certified",
    "certified_interval": "paperlib.mechanisms.certified",
    "certified_for_training_set": "paperlib.mechanisms.certified",
    "check_run": "paperlib.practitioner.check",
    "check_opacus": "paperlib.practitioner.check",
    "audit_step": "paperlib.practitioner.step",
    "CertifiedAccountant": "paperlib.practitioner.accountant",
    "register_certified_accountant": "paperlib.practitioner.accountant",
    "fix_normaliser": "paperlib.practitioner.fix",
    "sum_reduction_lr": "paperlib.practitioner.fix",
    "audit_worst_case": "paperlib.audit",
    "clopper_pearson": "paperlib.audit.stats",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module 'paperlib' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
