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

from paperlib.audit.components import MAX_N_EXACT, WhiteBoxModel
from paperlib.audit.distinguishers import (
    AGGREGATIONS,
    NORMALITY_TESTS,
    TIES,
    NormalityDistinguisher,
    OptimalDistinguisher,
    brute_force_llr,
    make_distinguisher,
)
from paperlib.audit.game import (
    AUDIT_VERSION,
    PATHS,
    AuditConfig,
    AuditResult,
    audit,
    audit_distinguishers,
    audit_outputs,
    audit_worst_case,
    resolve_path,
    select_threshold,
    worst_case_vectors,
)
from paperlib.audit.spread import seed_spread, spread_rows, spread_seeds
from paperlib.audit.stats import clopper_pearson, cp_upper, delta_lower, eps_lower

__all__ = [
    "MAX_N_EXACT",
    "WhiteBoxModel",
    "AGGREGATIONS",
    "NORMALITY_TESTS",
    "TIES",
    "NormalityDistinguisher",
    "OptimalDistinguisher",
    "brute_force_llr",
    "make_distinguisher",
    "AUDIT_VERSION",
    "PATHS",
    "AuditConfig",
    "AuditResult",
    "audit",
    "audit_distinguishers",
    "audit_outputs",
    "audit_worst_case",
    "resolve_path",
    "select_threshold",
    "worst_case_vectors",
    "clopper_pearson",
    "cp_upper",
    "delta_lower",
    "eps_lower",
    "seed_spread",
    "spread_rows",
    "spread_seeds",
]
