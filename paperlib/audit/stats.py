"""From error counts to privacy lower bounds (THEORY.md section 9; paper Eq. 3).

* :func:`clopper_pearson` — exact two-sided binomial confidence interval
  (Clopper and Pearson 1934), from beta quantiles; it equals
  ``scipy.stats.binomtest(k, n).proportion_ci(confidence_level, method="exact")``.
* :func:`eps_lower` — ``eps_L = max{log((1-delta-alpha_r)/beta_r), log((1-delta-beta_r)/alpha_r), 0}``
  with the *upper* Clopper-Pearson limits ``alpha_r``, ``beta_r`` of the FPR and FNR.
* :func:`eps_interval` — ``(eps_L, eps_hat, eps_U)`` of one audited point: Eq. 3 at the upper
  limits, at the point estimates and at the lower limits of the two intervals.
* :func:`delta_lower` — ``delta_L = max{0, 1 - e^eps alpha_r - beta_r, 1 - e^eps beta_r - alpha_r}``.

A pair ``(alpha, beta)`` that some test attains is impossible under
``(eps, delta)``-DP when ``beta < 1 - delta - e^eps alpha`` or
``alpha < 1 - delta - e^eps beta`` (the two lines of ``f_{eps,delta}``); solving for
``eps`` at the worst end of the confidence box gives ``eps_L``, which therefore
holds with the confidence of the two intervals (two-sided 95% each by default,
so each upper limit errs with probability at most 2.5%).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from paperlib.fdp.validation import ParameterError, check_delta, check_probability

__all__ = ["clopper_pearson", "cp_upper", "eps_lower", "delta_lower", "eps_interval"]


def _check_counts(k, trials):
    k = np.asarray(k)
    trials = np.asarray(trials)
    if not (np.issubdtype(k.dtype, np.integer) or np.all(np.equal(np.mod(k, 1), 0))):
        raise ValueError(f"k must be integer counts, got {k!r}")
    if not (np.issubdtype(trials.dtype, np.integer) or np.all(np.equal(np.mod(trials, 1), 0))):
        raise ParameterError("trials", f"trials must be integer counts, got {trials!r}")
    k = k.astype(np.int64)
    trials = trials.astype(np.int64)
    if np.any(trials < 1):
        raise ParameterError("trials", f"trials (the number of trials) must be >= 1, got {trials!r}")
    if np.any(k < 0) or np.any(k > trials):
        raise ValueError(f"k must satisfy 0 <= k <= trials, got k={k!r}, trials={trials!r}")
    return k, trials


def clopper_pearson(k, trials, confidence: float = 0.95):
    """Exact two-sided Clopper-Pearson interval ``(lower, upper)`` for ``k`` successes in ``trials`` trials.

    ``lower = Beta(a/2; k, trials-k+1)`` quantile (0 when ``k = 0``), ``upper = Beta(1-a/2; k+1,
    trials-k)`` quantile (1 when ``k = trials``), ``a = 1 - confidence`` (Clopper and Pearson 1934;
    the confidence intervals of the audit's FPR and FNR, THEORY.md §9 and paper Eq. 3). Works
    elementwise on arrays; ValueError naming ``k``, ``trials`` or ``confidence`` otherwise.
    """
    k, n = _check_counts(k, trials)
    conf = check_probability(confidence, "confidence", open_left=True, open_right=True)
    a = 1.0 - conf
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k == 0, 0.0, stats.beta.ppf(a / 2, np.maximum(k, 1), n - k + 1))
        hi = np.where(k == n, 1.0, stats.beta.ppf(1 - a / 2, k + 1, np.maximum(n - k, 1)))
    if lo.ndim == 0:
        return float(lo), float(hi)
    return lo, hi


def cp_upper(k, trials, confidence: float = 0.95):
    """Upper limit of :func:`clopper_pearson` (elementwise)."""
    return clopper_pearson(k, trials, confidence)[1]


def eps_lower(alpha_r, beta_r, delta: float):
    """Empirical lower bound on epsilon (paper Eq. 3) from upper limits ``alpha_r``, ``beta_r``.

    ``max{log((1 - delta - alpha_r)/beta_r), log((1 - delta - beta_r)/alpha_r), 0}``; a term
    whose numerator is <= 0 is left out (it certifies nothing). Elementwise on arrays.
    ``beta_r = 0`` or ``alpha_r = 0`` (only possible for point estimates) gives ``inf``.
    """
    delta = check_delta(delta)
    a = np.asarray(alpha_r, dtype=float)
    b = np.asarray(beta_r, dtype=float)
    if np.any((a < 0) | (a > 1) | ~np.isfinite(a)) or np.any((b < 0) | (b > 1) | ~np.isfinite(b)):
        raise ValueError("alpha_r and beta_r must be error rates in [0, 1]")
    with np.errstate(divide="ignore", invalid="ignore"):
        num1 = 1.0 - delta - a
        num2 = 1.0 - delta - b
        t1 = np.where(num1 > 0, np.log(np.where(num1 > 0, num1, 1.0)) - np.log(b), -np.inf)
        t2 = np.where(num2 > 0, np.log(np.where(num2 > 0, num2, 1.0)) - np.log(a), -np.inf)
    out = np.maximum(np.maximum(t1, t2), 0.0)
    return float(out) if out.ndim == 0 else out


def delta_lower(alpha_r, beta_r, eps: float):
    """Empirical lower bound on delta at a fixed ``eps >= 0``: ``max{0, 1 - e^eps a - b, 1 - e^eps b - a}``."""
    e = float(eps)
    if not np.isfinite(e) or e < 0:
        raise ParameterError("eps", f"eps must be a finite number >= 0, got {eps!r}")
    a = np.asarray(alpha_r, dtype=float)
    b = np.asarray(beta_r, dtype=float)
    if np.any((a < 0) | (a > 1) | ~np.isfinite(a)) or np.any((b < 0) | (b > 1) | ~np.isfinite(b)):
        raise ValueError("alpha_r and beta_r must be error rates in [0, 1]")
    ee = np.exp(e)
    out = np.maximum(0.0, np.maximum(1.0 - ee * a - b, 1.0 - ee * b - a))
    return float(out) if out.ndim == 0 else out


def eps_interval(record: dict) -> tuple[float, float, float]:
    """``(eps_L, eps_hat, eps_U)`` of one audited point (THEORY.md section 9, paper Eq. 3).

    *record*: an audit result as a dict with ``eps_lower``, ``fpr``, ``fnr``, ``delta`` (default
    1e-5) and either ``fpr_ci``/``fnr_ci`` (two-sided Clopper-Pearson intervals) or the counts
    ``false_positives``/``false_negatives`` with ``trials_D``/``trials_Dprime`` (and
    ``confidence``, default 0.95). ``eps_L`` is the stored lower bound (Eq. 3 at the upper
    limits), ``eps_hat`` is Eq. 3 at the point estimates (``inf`` when an error rate is 0) and
    ``eps_U`` Eq. 3 at the lower limits, at least ``eps_L``: the same formula read at the other
    end of the confidence box, so ``[eps_L, eps_U]`` is the range of epsilon the box allows.

    Raises
    ------
    KeyError
        If the record lacks ``eps_lower``, ``fpr``, ``fnr`` or both the intervals and the counts.
    ValueError
        If a rate is outside [0, 1] or ``delta`` outside (0, 1).
    """
    def _rate(key):
        v = record.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
            raise KeyError(f"{key} missing or not a number ({v!r})")
        return float(v)

    e_l = _rate("eps_lower")
    delta = float(record.get("delta", 1e-5))
    lower = []
    for ci, count, trials in (("fpr_ci", "false_positives", "trials_D"),
                              ("fnr_ci", "false_negatives", "trials_Dprime")):
        v = record.get(ci)
        if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
            lower.append(float(v[0]))
        elif isinstance(record.get(count), (int, float)) and isinstance(record.get(trials), (int, float)):
            lower.append(clopper_pearson(int(record[count]), int(record[trials]),
                                         float(record.get("confidence", 0.95)))[0])
        else:
            raise KeyError(f"{ci} (or {count} and {trials}) missing")
    e_hat = eps_lower(_rate("fpr"), _rate("fnr"), delta)
    return e_l, e_hat, max(eps_lower(lower[0], lower[1], delta), e_l)
