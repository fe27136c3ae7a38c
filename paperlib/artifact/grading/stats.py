"""Statistics of the grade: from an audit record to the tests its statements need.

Audited values are 95% Clopper-Pearson lower bounds ``eps_L`` (Eq. 3 of the paper). Each
audited point also has an upper end ``eps_U`` (the same formula at the lower ends of the same
intervals; :func:`paperlib.audit.stats.eps_interval`, the audit's own code, which imports no
torch). A step against a stated trend is a violation only when it is beyond the intervals
(:func:`step_against`); a point below its claim is *unresolved* rather than failed when the run
used fewer trials than the paper's and its point estimate is above the claim
(:func:`above_claim`). The helpers at the top read result files for the per-figure checks of
:mod:`paperlib.artifact.grading.checks`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from paperlib.audit import stats as _stats

__all__ = ["VERDICTS", "PAPER_TRIALS", "PAPER_DISTINGUISHER", "TREND_LEVEL", "monotone_fit", "eps_of", "eps_interval", "step_against",
           "above_claim", "trend", "pair_text"]

VERDICTS = ("reproduced", "partly reproduced", "not reproduced", "not run", "not applicable")
#: Verdicts from the worst to the best (a claim takes the worst of its statements).
ORDER = ("not reproduced", "not run", "partly reproduced", "reproduced")
#: The paper's trial count per audited point (Section 5.1: 10,000 trials, 95% intervals).
PAPER_TRIALS = 10_000
#: Label of the paper's distinguisher in the audit results: the normality test of Section 4
#: (chi-square test of each candidate standardisation, outputs aggregated by weight, a
#: uniformly random bit when both or neither pass).
PAPER_DISTINGUISHER = "normality[chi2,weighted]"
#: How the parts' names say which distinguisher graded them.
#: the one name of each distinguisher in statements and findings alike: the paper's normality distinguisher is
#: rebuilt from its description (the paper's Appendix C is lost), so it is never called "the paper's" as is
DIST_LABEL = {"paper": "normality distinguisher rebuilt from the paper", "optimal": "optimal distinguisher, our addition"}


class NotRun(Exception):
    """A result the check needs is missing (file or key)."""


def read_json(path: Path):
    """The JSON document at ``path``; :class:`NotRun` naming the file if absent or unreadable."""
    if not path.is_file():
        raise NotRun(f"{path.name} missing")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotRun(f"{path.name} unreadable ({type(exc).__name__}: {exc})") from None


def load_result(results_dir: Path, name: str) -> tuple[dict, dict, str]:
    """``(data, params, mode)`` of ``results_dir/name``; :class:`NotRun` if absent or unreadable."""
    doc = read_json(Path(results_dir) / name)
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), dict):
        raise NotRun(f"{name} has no 'data' object")
    params = doc.get("params") if isinstance(doc.get("params"), dict) else {}
    prov = doc.get("provenance") if isinstance(doc.get("provenance"), dict) else {}
    mode = prov.get("mode") or params.get("mode") or "unknown"
    return doc["data"], params, str(mode)


def num(x: Any, what: str) -> float:
    """*x* as a float (``inf``/``nan`` allowed); :class:`NotRun` naming *what* otherwise."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise NotRun(f"{what} missing or not a number ({x!r})")
    return float(x)


def get(d: Any, *keys: Any, what: str | None = None) -> Any:
    cur = d
    for k in keys:
        try:
            cur = cur[k]
        except (KeyError, IndexError, TypeError):
            raise NotRun(f"key {what or '/'.join(map(str, keys))} missing") from None
    return cur


def fmt(x: Any, digits: int = 3) -> str:
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "∞" if x > 0 else "−∞"  # read by people (grade page, appendix, terminal table)
        return f"{x:.{digits}g}"
    return str(x)


def part(name: str, ok: bool | None, detail: str, graded: bool = True, partial: str | None = None) -> dict:
    """One statement of a claim. ``ok``: holds (True), violated (False), not computable (None).

    ``partial`` (with ``ok`` True): the statement is not violated but the run cannot establish
    it (the reason, shown first in the part's detail); the part's verdict is then
    "partly reproduced". ``verdict`` is the part's own verdict ("info" for ungraded parts).
    """
    if partial and ok is not True:
        partial = None
    if not graded:
        verdict = "info"
    elif ok is False:
        verdict = "not reproduced"
    elif ok is None:
        verdict = "not run"
    else:
        verdict = "partly reproduced" if partial else "reproduced"
    out = {"name": name, "graded": graded, "ok": ok, "verdict": verdict, "detail": detail}
    if partial:
        out["partial"] = partial
    return out


def eps_of(fpr: float, fnr: float, delta: float) -> float:
    """epsilon certified by one (FPR, FNR) point at *delta* (Eq. 3 of the paper), ``>= 0``.

    :func:`paperlib.audit.stats.eps_lower` at scalar rates: ``inf`` for an error rate of 0 with a
    positive numerator. At the upper ends of the Clopper-Pearson intervals this is the audit's
    ``eps_L``; at the point estimates the point estimate of epsilon, at the lower ends ``eps_U``.
    """
    return float(_stats.eps_lower(float(fpr), float(fnr), float(delta)))


def eps_interval(rec: dict) -> tuple[float, float, float]:
    """``(eps_L, eps_hat, eps_U)`` of one audited point: :func:`paperlib.audit.stats.eps_interval`,
    with a record that lacks what it needs reported as the grade's not-run error."""
    try:
        return _stats.eps_interval(rec)
    except KeyError as exc:
        raise NotRun(str(exc.args[0]) if exc.args else "audit record incomplete") from None


def step_against(a: tuple[float, float], b: tuple[float, float], direction: int) -> str:
    """A step from point *a* to point *b*, each ``(eps_L, eps_U)``, read against *direction*.

    ``direction`` -1: the statement says it falls; +1: it rises. Returns ``"with"`` (eps_L
    moves as stated, or stays), ``"within"`` (eps_L moves against it but the two
    Clopper-Pearson intervals overlap: within the statistical resolution) or ``"beyond"``
    (against it, beyond the intervals: a rise with ``b``'s eps_L above ``a``'s eps_U, or a
    fall with ``b``'s eps_U below ``a``'s eps_L).
    """
    (la, ua), (lb, ub) = a, b
    if direction < 0:
        if not lb > la:
            return "with"
        return "beyond" if lb > ua else "within"
    if not lb < la:
        return "with"
    return "beyond" if ub < la else "within"


def above_claim(rec: dict, claim: float | None = None) -> tuple[str, str]:
    """Is audited point *rec* above its SGM claim? ``(status, text)``.

    ``status``: ``"holds"`` (eps_L > claim), ``"unresolved"`` (eps_L <= claim, but the run
    used fewer than :data:`PAPER_TRIALS` counted trials and the point estimate of epsilon is
    above the claim: more trials could certify it, so quick mode cannot resolve the point) or
    ``"fails"``. *claim* defaults to the record's ``eps_claimed``.
    """
    c = num(rec.get("eps_claimed"), "eps_claimed") if claim is None else float(claim)
    e_l, e_hat, _ = eps_interval(rec)
    trials = int(num(rec.get("trials"), "trials"))
    if e_l > c:
        return "holds", f"{e_l:.3g} > {c:.3g}"
    if trials < PAPER_TRIALS and e_hat > c:
        return "unresolved", (f"{e_l:.3g} <= {c:.3g} at {trials:,} trials, point estimate {fmt(e_hat)} above the "
                              f"claim, the paper's {PAPER_TRIALS:,} may certify it")
    return "fails", f"{e_l:.3g} <= {c:.3g} (point estimate {fmt(e_hat)}, {trials:,} trials)"


def monotone(seq: list[tuple[Any, dict]], direction: int) -> dict:
    """Read a sequence ``[(x, rec)]`` (x ascending) against a stated *direction*.

    Returns ``{"strict": bool, "ok": bool, "against": [text], "beyond": [text]}``: ``strict``
    when eps_L never moves against the direction, ``ok`` when no step is beyond the intervals.
    """
    iv = [(x, eps_interval(r)) for x, r in seq]
    against, beyond = [], []
    for (xa, (la, _, ua)), (xb, (lb, _, ub)) in zip(iv, iv[1:]):
        st = step_against((la, ua), (lb, ub), direction)
        if st != "with":
            txt = f"{xa}->{xb}: {la:.2f}->{lb:.2f}"
            against.append(txt + (" (within CP)" if st == "within" else " (beyond CP)"))
            if st == "beyond":
                beyond.append(txt)
    return {"strict": not against, "ok": not beyond, "against": against, "beyond": beyond}


def pair_text(a: float, b: float, ceil: float | None = None) -> str:
    """``"a->b"`` with enough decimals (2 to 6) that two different values print differently;
    ``"stays at a"`` when they are equal; ``" (at the ceiling of c)"`` added when both are within
    0.01 of the largest certifiable value *ceil*."""
    if a == b:
        txt = f"stays at {a:.2f}"
    else:
        d = 2
        while d < 6 and f"{a:.{d}f}" == f"{b:.{d}f}":
            d += 1
        txt = f"{a:.{d}f}->{b:.{d}f}"
    if ceil is not None and min(a, b) >= ceil - 0.01:
        txt += f" (at the ceiling of {ceil:.2f})"
    return txt


def _two(x: float) -> str:
    """An interval end to two decimals; an unbounded one as ∞ (the upper end at the ceiling)."""
    return "∞" if math.isinf(x) else f"{x:.2f}"


#: level of the all-points test of a stated trend (:func:`monotone_fit`)
TREND_LEVEL = 0.05
#: the normal quantile that turns a 95 % interval into a standard error
_Z95 = 1.959963984540054


def monotone_fit(points: list[tuple[float, float, float]], direction: int) -> dict:
    """Are all the points together consistent with a series that moves only in *direction*?

    *points*: ``(eps_L, eps_hat, eps_U)`` per point, in order of x (:func:`eps_interval`). Each point's
    estimate ``eps_hat`` gets the standard error ``(eps_U - eps_L) / (2 z_0.975)`` of its 95 % interval
    (a point with an unbounded interval or estimate, at the ceiling of its trial counts, carries no weight).
    The weighted monotone (isotonic, pool-adjacent-violators) fit in *direction* is compared with the
    estimates: ``chi2 = sum (eps_hat - fit)^2 / se^2`` on ``df`` = the weighted points minus the fit's
    distinct levels (at least 1; a conservative reference for the chi-bar-squared law of this statistic,
    Robertson, Wright, Dykstra 1988). ``rejected``: ``p < TREND_LEVEL``, the points move against
    *direction* beyond their uncertainty somewhere in the series, not only between two of them.
    Returns ``{"chi2", "df", "p", "rejected", "weighted", "estimates"}``.
    """
    from scipy import stats as sps

    blocks = []  # [sum w*y, sum w, count], pooled while they violate the direction
    ys = []
    for lo, est, hi in points:
        se = (hi - lo) / (2 * _Z95) if math.isfinite(hi) and math.isfinite(est) else math.inf
        if not (se > 0 and math.isfinite(se)):
            continue
        w, y = 1.0 / se ** 2, est * direction  # fit a non-decreasing series of direction * eps_hat
        ys.append((y, w))
        blocks.append([w * y, w, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            wy, ww, c = blocks.pop()
            blocks[-1][0] += wy
            blocks[-1][1] += ww
            blocks[-1][2] += c
    fit = [b[0] / b[1] for b in blocks for _ in range(b[2])]
    chi2 = float(sum(w * (y - f) ** 2 for (y, w), f in zip(ys, fit)))
    df = max(len(ys) - len(blocks), 1)
    pval = float(sps.chi2.sf(chi2, df))
    return {"chi2": chi2, "df": df, "p": pval, "rejected": bool(len(ys) >= 3 and pval < TREND_LEVEL),
            "weighted": len(ys), "estimates": [est for _, est, _ in points]}


def trend(seq: list[tuple[Any, dict]], direction: int, label: str = "") -> dict:
    """Is there evidence that eps_L moves in *direction* (+1 rises, -1 falls) along ``[(x, rec)]``
    (x ascending)?

    A rise is evidenced when the last point's eps_L is above the first point's eps_U (a fall: the
    last point's eps_U below the first point's eps_L): the two Clopper-Pearson intervals do not
    overlap. A significant move against it is a later point whose eps_U is below an earlier
    point's eps_L (for a rise; for a fall a later eps_L above an earlier eps_U), for any two
    points, not only neighbours. All the points are also tested together (:func:`monotone_fit`: the
    weighted monotone fit of the estimates, rejected at :data:`TREND_LEVEL`), so that a noisy series
    that moves up and down beyond its uncertainty fails even when no two intervals are disjoint.
    ``status``: ``"fails"`` with a significant move against or the monotone fit rejected, ``"holds"``
    with evidence and neither, ``"unresolved"`` otherwise (the intervals cannot tell a rise from a
    flat or non-monotone series). Also returned: ``"against"`` (texts of the significant moves
    against), ``"within"`` (neighbouring steps against the direction that are within the
    intervals), ``"strict"`` (eps_L never moves against it), ``"fit"`` (:func:`monotone_fit`'s
    result), ``"text"`` (the evidence, or its absence, and the all-points test, in words). *label*
    names x in the texts ("n=", "N=").
    """
    iv = [(f"{x:,}" if isinstance(x, int) else f"{x:g}" if isinstance(x, float) else x, eps_interval(r), ceiling(r))
          for x, r in seq]
    ceil = max(c for _, _, c in iv) if iv else None
    (x0, (l0, _, u0), _), (x1, (l1, _, u1), _) = iv[0], iv[-1]
    if direction > 0:
        evidence = l1 > u0
        text = (f"{'a' if evidence else 'no'} rise beyond the intervals from {label}{x0} to {label}{x1}: eps_L at "
                f"{label}{x1} {_two(l1)} {'above' if evidence else 'not above'} eps_U at {label}{x0} {_two(u0)}")
    else:
        evidence = u1 < l0
        text = (f"{'a' if evidence else 'no'} fall beyond the intervals from {label}{x0} to {label}{x1}: eps_U at "
                f"{label}{x1} {_two(u1)} {'below' if evidence else 'not below'} eps_L at {label}{x0} {_two(l0)}")
    against, within = [], []
    for i, (xa, (la, _, ua), _) in enumerate(iv):
        for xb, (lb, _, ub), _ in iv[i + 1:]:
            if (direction > 0 and ub < la) or (direction < 0 and lb > ua):
                against.append(f"{label}{xa}->{label}{xb}: eps_L {pair_text(la, lb)}, eps_"
                               f"{'U' if direction > 0 else 'L'} at {label}{xb} {'below' if direction > 0 else 'above'}"
                               f" eps_{'L' if direction > 0 else 'U'} at {label}{xa}")
    for (xa, (la, _, ua), _), (xb, (lb, _, ub), _) in zip(iv, iv[1:]):
        if step_against((la, ua), (lb, ub), direction) == "within":
            within.append(f"{label}{xa}->{label}{xb}: {pair_text(la, lb, ceil)}")
    fit = monotone_fit([i for _, i, _ in iv], direction) if len(iv) >= 3 else None
    if fit is not None:
        move = "rising" if direction > 0 else "falling"
        text += (f", and all {len(iv)} points together {'are not' if fit['rejected'] else 'are'} consistent with a "
                 f"{move} series (weighted monotone fit of the estimates, chi-square {fit['chi2']:.2f} on "
                 f"{fit['df']} df, p = {fit['p']:.2g})")
        if fit["rejected"]:
            against.append(f"the estimates {', '.join(_two(e) for e in fit['estimates'])} move against it beyond "
                           f"their uncertainty (p = {fit['p']:.2g} < {TREND_LEVEL:g})")
    status = "fails" if against else "holds" if evidence else "unresolved"
    return {"status": status, "evidence": evidence, "against": against, "within": within,
            "strict": not within and not against, "fit": fit, "text": text}


def dist_recs(res: dict) -> dict[str, dict]:
    """``{"paper": rec, "optimal": rec}`` of one audited point's results (absent ones left out)."""
    out = {}
    if isinstance(res.get("optimal"), dict):
        out["optimal"] = res["optimal"]
    if isinstance(res.get(PAPER_DISTINGUISHER), dict):
        out["paper"] = res[PAPER_DISTINGUISHER]
    else:
        key = next((k for k in res if k.startswith("normality") and "ties" not in k and isinstance(res[k], dict)), None)
        if key is not None:
            out["paper"] = res[key]
    return out


def flat_record(r: dict, dist: str) -> dict | None:
    """A real-audit result (values keyed by distinguisher) as one flat audit record for *dist*."""
    key = "optimal" if dist == "optimal" else (
        PAPER_DISTINGUISHER if PAPER_DISTINGUISHER in (r.get("eps_lower") or {}) else
        next((k for k in (r.get("eps_lower") or {}) if k.startswith("normality") and "ties" not in k), None))
    if key is None or not isinstance(r.get("eps_lower"), dict) or key not in r["eps_lower"]:
        return None
    out = {"eps_lower": r["eps_lower"][key], "eps_claimed": r.get("eps_claimed"), "delta": r.get("delta", 1e-5),
           "trials": r.get("trials"), "confidence": r.get("confidence", 0.95)}
    for k in ("fpr", "fnr", "fpr_ci", "fnr_ci"):
        v = r.get(k)
        out[k] = v.get(key) if isinstance(v, dict) else None
    return out


def ceiling(rec: dict) -> float:
    """Largest eps_L the trial counts of audit record *rec* can certify (no error of either kind).

    ``log((1 - delta - u_D') / u_D)`` with ``u = 1 - ((1-c)/2)^(1/m)`` the two-sided
    Clopper-Pearson upper limit for 0 errors in m trials (as ``audit.cp_upper(0, m)``).
    """
    trials = int(num(rec.get("trials"), "trials"))
    n_d = int(rec.get("trials_D") or trials // 2)
    n_dp = int(rec.get("trials_Dprime") or trials - n_d)
    conf = float(rec.get("confidence", 0.95))
    delta = float(rec.get("delta", 1e-5))
    u_d = 1.0 - ((1.0 - conf) / 2.0) ** (1.0 / n_d)
    u_dp = 1.0 - ((1.0 - conf) / 2.0) ** (1.0 / n_dp)
    return max(math.log((1.0 - delta - u_dp) / u_d), math.log((1.0 - delta - u_d) / u_dp), 0.0)


def sweep_points(data: dict, name: str) -> list[tuple[dict, dict]]:
    """``[(point, results_by_distinguisher)]`` of an ``audit_sweep`` result."""
    pts = data.get("points")
    if not isinstance(pts, list) or not pts:
        raise NotRun(f"{name}: no audited points")
    out = []
    for rec in pts:
        if isinstance(rec, dict) and isinstance(rec.get("point"), dict) and isinstance(rec.get("results"), dict):
            out.append((rec["point"], rec["results"]))
    if not out:
        raise NotRun(f"{name}: no audited points with results")
    return out


def by_dist(pts: list[tuple[dict, dict]], var: str) -> dict[str, dict[tuple, dict]]:
    """``{"paper"|"optimal": {(mechanism, q, var): rec}}`` of an audit sweep."""
    out: dict[str, dict[tuple, dict]] = {"paper": {}, "optimal": {}}
    for p, res in pts:
        key = (str(p.get("mechanism")), float(num(p.get("q"), "q")), int(num(p.get(var), var)))
        for d, rec in dist_recs(res).items():
            out[d][key] = rec
    return out


def trials_text(rs: dict) -> str:
    """"10,000 trials per point, the paper's count," for the records *rs* of one sweep."""
    t = sorted({int(r.get("trials", 0)) for r in rs.values()})
    txt = "/".join(f"{x:,}" for x in t) + " trials per point"
    return txt + (", the paper's count," if t and min(t) >= PAPER_TRIALS else ", fewer than the paper's,")
