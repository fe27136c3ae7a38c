"""Auditing one round of DP-SGD (paper Sections 4-5; THEORY.md section 9).

* :mod:`~paperlib.audit.components` — the white-box model: both output mixtures,
  projected on the span of the clipped per-example vectors.
* :mod:`~paperlib.audit.distinguishers` — the optimal (likelihood-ratio) distinguisher
  and the paper's normality-test distinguisher.
* :mod:`~paperlib.audit.stats` — Clopper-Pearson intervals, ``eps_L`` and ``delta_L`` (Eq. 3).
* :mod:`~paperlib.audit.spread` — one audit repeated at several seeds: the spread of ``eps_L``.
* :mod:`~paperlib.audit.game` — the balanced game with separate calibration trials,
  worst-case synthetic data, audits of given outputs (:func:`audit_outputs`). The book's
  cached, resumable sweeps are in :mod:`paperlib.artifact.sweeps`. By default the rounds are sampled
  on the *projected* path (only the exact sufficient statistics, no ``n``-dimensional
  noise) whenever the distinguishers allow it; ``path="full"`` forces full outputs.

Typical use::

    from paperlib.audit import audit_worst_case
    r = audit_worst_case("easgm", N=3, n=20, q=0.5, sigma=2.0, C=1.0, trials=20_000, seed=0)
    r.fpr, r.fnr, r.fpr_ci, r.eps_lower, r.eps_claimed
"""

from importlib import import_module

# name -> submodule that defines it, imported on first use (PEP 562), so that
# ``import paperlib.audit.stats`` (the grading of the book) never imports torch.
_EXPORTS = {
    "MAX_N_EXACT": "paperlib.audit.components",
    "WhiteBoxModel": "paperlib.audit.components",
    "AGGREGATIONS": "paperlib.audit.distinguishers",
    "NORMALITY_TESTS": "paperlib.audit.distinguishers",
    "TIES": "paperlib.audit.distinguishers",
    "NormalityDistinguisher": "paperlib.audit.distinguishers",
    "OptimalDistinguisher": "paperlib.audit.distinguishers",
    "brute_force_llr": "paperlib.audit.distinguishers",
    "make_distinguisher": "paperlib.audit.distinguishers",
    "normality_test_specs": "paperlib.audit.distinguishers",
    "AUDIT_VERSION": "paperlib.audit.game",
    "PATHS": "paperlib.audit.game",
    "AuditConfig": "paperlib.audit.game",
    "AuditResult": "paperlib.audit.game",
    "audit": "paperlib.audit.game",
    "audit_distinguishers": "paperlib.audit.game",
    "audit_outputs": "paperlib.audit.game",
    "audit_worst_case": "paperlib.audit.game",
    "resolve_path": "paperlib.audit.game",
    "select_threshold": "paperlib.audit.game",
    "worst_case_vectors": "paperlib.audit.game",
    "seed_spread": "paperlib.audit.spread",
    "spread_rows": "paperlib.audit.spread",
    "spread_seeds": "paperlib.audit.spread",
    "clopper_pearson": "paperlib.audit.stats",
    "cp_upper": "paperlib.audit.stats",
    "delta_lower": "paperlib.audit.stats",
    "eps_lower": "paperlib.audit.stats",
    "eps_interval": "paperlib.audit.stats",
}

__all__ = list(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module 'paperlib.audit' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
