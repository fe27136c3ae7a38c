"""The one full-mode time estimate of the real-implementation chapters (issue 21).

Full mode runs every round of the real-implementation audits (chapters 6, 7 and 11) as a step of
the implementation; quick mode measures the cost of its own real steps. Each audit result of
:func:`paperlib.implementations.real_audit.audit_implementation` records
``full_mode_estimate_s``: its measured seconds per real step times the rounds a full-mode run
needs (calibration and counted, on both datasets), in one process on the device the run used.
:func:`seconds` spreads those of one notebook's audits over workers (the chapters glue it);
:func:`notebook_estimates` reads them back from ``results/`` for the appendix and README. The
schedule over workers is :func:`paperlib.implementations.costs.full_mode_estimate`'s (the one
model, shared with ``make device-check``), so the chapters, the appendix, the README and the
device check cannot disagree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

__all__ = ["REAL_STEP_NOTEBOOKS", "seconds", "notebook_estimates", "estimate_text"]


def _audits_06(d: dict) -> list:
    return [p.get("result") for p in d.get("points") or [] if isinstance(p, dict)]


def _audits_07(d: dict) -> list:
    return [d.get("result"), d.get("installed")]


def _audits_11(d: dict) -> list:
    return list((d.get("audits") or {}).values())


#: notebook -> (its result file, the audits in it): the notebooks whose audits run real steps.
REAL_STEP_NOTEBOOKS = {
    "06_audit_real_figure4": ("06_fig4_real_audit.json", _audits_06),
    "07_opacus_feasgm_figure6": ("07_fig6_opacus_feasgm.json", _audits_07),
    "11_the_fix": ("11_fix_audit.json", _audits_11),
}


#: CPU workers of the machine ``make device-check`` is written for (16 cores and one data-centre GPU)
REFERENCE_WORKERS = 16

#: Counted trials per audited point in full mode (the paper's; ``SETTINGS[...].trials`` of C4, C6, X1).
FULL_TRIALS = 10_000


def seconds(audits: Iterable[Any], *, full_trials: int = FULL_TRIALS, workers: int = 1) -> tuple[float, int]:
    """``(seconds, missing)``: the full-mode time of *audits* (``audit_implementation``'s results, or their
    dicts read back from a result file; ``None`` entries, audits that did not run, are skipped) on ``workers``
    CPU worker processes, and how many ran without a measured cost.

    Each audit's ``full_mode_estimate_s`` (its measured cost per step and per call, at the
    ``2 trials`` steps of its game), spread over the ``2 full_trials`` steps full mode runs (so a
    smoke run's smaller game is extrapolated to full mode's), is handed to
    :func:`paperlib.implementations.costs.full_mode_estimate`, the one model of how the steps
    spread over the workers. An audit listed twice (equal records) counts once. ValueError naming
    ``workers`` unless it is an integer >= 1.
    """
    from paperlib.implementations.costs import full_mode_estimate as _schedule

    work, cost, missing, seen = [], {}, 0, set()
    for r in audits:
        if callable(getattr(r, "to_json", None)):  # an ImplementationAudit: its dict form, as a result file holds it
            r = r.to_json()
        if not isinstance(r, dict):
            continue
        key = json.dumps(r, sort_keys=True, default=str)  # 07 stores the installed release twice when it stands in
        if key in seen:
            continue
        seen.add(key)
        v, t, c = r.get("full_mode_estimate_s"), r.get("trials"), r.get("seconds_per_step")
        if not (isinstance(v, (int, float)) and v == v and v >= 0 and isinstance(c, (int, float)) and c == c and c > 0):
            missing += 1
            continue
        if not (isinstance(t, (int, float)) and t > 0):
            missing += 1
            continue
        # full mode's steps of this audit, each at its share of the estimate (step and call set-up)
        steps = 2 * int(full_trials)
        ident = (str(r.get("implementation")), f"{r.get('model')} #{len(work)}")  # each audit its own measured cost
        cost[ident] = float(v) / (2.0 * float(t))
        work.append({"implementation": ident[0], "model": ident[1], "points": 1, "steps_per_point": steps})
    if not work:
        return 0.0, missing
    return _schedule(work, cost, workers=workers)["seconds"], missing


def _hardware(results: Path, name: str, mode: str) -> dict | None:
    p = results / "runs" / f"notebook-{name}-{mode}.json"
    try:
        return json.loads(p.read_text(encoding="utf-8")).get("hardware")
    except (OSError, ValueError, AttributeError):
        return None


def notebook_estimates(results_dir: str | Path | None = None) -> dict:
    """The full-mode time of the real-implementation notebooks, from the result files.

    Returns ``{"notebooks": {name: {"seconds", "seconds_reference", "missing", "mode",
    "hardware"}}, "total_s", "total_reference_s", "reference_workers", "basis"}``
    (``*_reference``: on :data:`REFERENCE_WORKERS` CPU workers): per notebook that has a result, the summed estimate of its audits (seconds), how
    many of its audits recorded none, the mode it was measured in and the hardware of that run
    (``results/runs/``, ``None`` when not recorded); ``total_s`` is ``None`` when no notebook has a
    result. Never raises on missing or unreadable files (they are left out).
    """
    from paperlib.artifact import provenance

    results = Path(results_dir) if results_dir is not None else provenance.results_dir()
    out: dict[str, Any] = {}
    for name, (fname, audits) in REAL_STEP_NOTEBOOKS.items():
        try:
            doc = json.loads((results / fname).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(data, dict):
            continue
        mode = str((doc.get("params") or {}).get("mode") or (doc.get("provenance") or {}).get("mode") or "?")
        s, missing = seconds(audits(data))
        s_ref, _ = seconds(audits(data), workers=REFERENCE_WORKERS)
        out[name] = {"seconds": s, "seconds_reference": s_ref, "missing": missing, "mode": mode,
                     "hardware": _hardware(results, name, mode)}
    return {"notebooks": out, "total_s": sum(v["seconds"] for v in out.values()) if out else None,
            "total_reference_s": sum(v["seconds_reference"] for v in out.values()) if out else None,
            "reference_workers": REFERENCE_WORKERS,
            "basis": f"measured seconds per real implementation step in a quick or smoke run, times the rounds "
                     f"full mode runs as real steps: {FULL_TRIALS:,} counted trials per point and as many for "
                     "calibration. This is on the CPU of the measured run, spread over the workers as "
                     "`paperlib.implementations.costs.full_mode_estimate` models it. Where torch sees a GPU the "
                     "Opacus steps run on it instead, and DPSUR's stay on the CPU; make device-check "
                     "measures that case"}


def _hm(s: float) -> str:
    m = int(round(s / 60))
    return f"{m // 60} h {m % 60:02d} min" if m >= 60 else f"{m} min"


def estimate_text(est: dict) -> str:
    """The appendix's estimate: the total, then each notebook's share with the hardware measured on, then the basis,
    as a Markdown list item's text followed by its sub-items (two spaces of indent)."""
    from paperlib.artifact import runlog

    if not est.get("notebooks"):
        return ("not estimated yet: no real-implementation notebook (06, 07, 11) has run here; after one has, this "
                "line gives " + est["basis"])
    parts = []
    for name, v in est["notebooks"].items():
        extra = f"; {v['missing']} audit(s) without a measured cost" if v["missing"] else ""
        parts.append(f"  - {name}: {_hm(v['seconds'])}, from its {v['mode']} run on "
                     f"{runlog.hardware_text(v['hardware'])}{extra}.")
    return (f"about {_hm(est['total_s'])} in all in one process, or about {_hm(est['total_reference_s'])} spread "
            f"over {est['reference_workers']} CPU workers (`WORKERS={est['reference_workers']}`).\n"
            + "\n".join(parts) + f"\n  - Basis: {est['basis']}.")
