"""The artifact appendix, in the forms USENIX Security '26 and PETS ask for.

``python -m paperlib.artifact.appendix`` (``make appendix``, also run by ``make all``) writes,
from the claims registry (:data:`paperlib.artifact.claims.CLAIMS`), the last grade
(``results/grade.json``), the measured runs (:mod:`paperlib.artifact.runlog`) and the
citation metadata (``CITATION.cff``):

* the **USENIX Security '26** artifact appendix: Abstract; Description & Requirements
  (security, privacy and ethical concerns; how to access; hardware; software; benchmarks
  and data); Set-up (installation, basic test); Evaluation workflow (major claims C1, C2,
  ..., one per row of THEORY.md §10, and experiments E1, E2, ..., one per notebook,
  ``E<k>`` is ``notebooks/<kk>_*.py``, each costed per mode as
  ``[N human-minutes + N compute-hours + N GB disk]`` from the measured runs); Limitations;
  Notes on Reusability; Version. Two files with the same content: a book page
  (``book/appendix.md``, links to the chapters) and a standalone file
  (``results/artifact_appendix.md``, links to the notebook sources);
* the **PETS** form (``results/ARTIFACT-APPENDIX.md``, the layout of PETS's
  ``ARTIFACT-APPENDIX.md`` template), from the same records.

Compute time and disk are measured (``not measured`` where a mode has not run on this
machine); human time is an estimate and says so. The URL and DOI come from
``CITATION.cff``; while it has none, a visible placeholder stands in their place. Nothing
else is typed by hand.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from paperlib.artifact import claims as _claims
from paperlib.artifact import estimate as _estimate
from paperlib.artifact import provenance as pv
from paperlib.artifact.grading.render import setting_name as _setting_name
from paperlib.artifact import runlog
from paperlib.artifact.prose import clauses

__all__ = ["experiments", "citation", "cost", "render", "render_pets", "main", "USENIX_SECTIONS",
           "PETS_SECTIONS", "SPREADS", "expected_full_values", "RELEASE_STEP"]

MODES = ("smoke", "quick", "full")
#: What each mode needs and is for (stated, not measured).
MODE_NOTES = {
    "smoke": "every notebook end to end at the smallest sizes; numbers not meaningful (first check)",
    "quick": "reduced sizes, 2 CPU cores, no GPU; the default without a CUDA GPU",
    "full": "the paper's sizes; meant for a CUDA GPU (the default when one is found); downloads MNIST, "
            "Fashion-MNIST, CIFAR-10 and old Opacus releases on first use",
}
#: Our estimate of the attention one experiment needs: start it, then read its verdict and chapter.
HUMAN_MINUTES_PER_EXPERIMENT = 3
#: Our estimate for the set-up: clone, one command, read its last lines.
HUMAN_MINUTES_SETUP = 5
#: Our estimate for the basic test: start it, read the grade table it ends with.
HUMAN_MINUTES_BASIC_TEST = 2
#: How the repository, URL and DOI get into ``CITATION.cff`` (the one place they are read from).
RELEASE_STEP = ("at release, add `repository-code`, `url` and `doi` to `CITATION.cff` (its header comment shows "
                "the three lines; Zenodo assigns the DOI when the GitHub release is archived with `.zenodo.json`), "
                "then `make appendix`")
DOI_PLACEHOLDER = "not yet assigned (placeholder; filled at release: see below)"
URL_PLACEHOLDER = "not yet published (placeholder; filled at release: see below)"

#: The seed-spread result of each audit chapter and the claim whose point it re-runs with other seeds.
SPREADS = {"04_seed_spread.json": "C2", "05_seed_spread.json": "C3", "06_seed_spread.json": "C4",
           "07_seed_spread.json": "C6"}

#: The section headings of the USENIX Security '26 appendix, in order (level, text).
USENIX_SECTIONS = (
    (2, "Abstract"),
    (2, "Description & Requirements"),
    (3, "Security, privacy, and ethical concerns"),
    (3, "How to access"),
    (3, "Hardware dependencies"),
    (3, "Software dependencies"),
    (3, "Benchmarks"),
    (2, "Set-up"),
    (3, "Installation"),
    (3, "Basic test"),
    (2, "Evaluation workflow"),
    (3, "Major claims"),
    (3, "Findings beyond or against the paper"),
    (3, "Expected full-mode values"),
    (3, "What to run for each badge"),
    (3, "Experiments"),
    (3, "Measured tiers"),
    (2, "Limitations"),
    (2, "Notes on Reusability"),
    (2, "Version"),
)
#: The section headings of PETS's ARTIFACT-APPENDIX.md, in order (level, text).
PETS_SECTIONS = (
    (2, "Description"),
    (3, "Security/Privacy Issues and Ethical Concerns"),
    (2, "Basic Requirements"),
    (3, "Hardware Requirements"),
    (3, "Software Requirements"),
    (3, "Estimated Time and Storage Consumption"),
    (2, "Environment"),
    (3, "Accessibility"),
    (3, "Set up the environment"),
    (3, "Testing the Environment"),
    (2, "Artifact Evaluation"),
    (3, "Main Results and Claims"),
    (3, "Experiments"),
    (2, "Limitations"),
    (2, "Notes on Reusability"),
)

_PAPER = ("*Rethinking the Security of DP-SGD: A Corrected Analysis of Differentially Private Machine "
          "Learning* (Wenhao Wang, Shujie Cui, Hui Cui, Xingliang Yuan, 2026, arXiv:2605.15648)")
_INDEPENDENT = ("This is an independent reproduction, not the authors' code. Every mechanism, bound, audit "
                "and figure is re-implemented here from the paper's text, reconstructed where the copy of the "
                "paper lost it (see `THEORY.md`). The real implementations it audits, Opacus releases and a "
                "DPSUR step, are run as published or re-implemented as each chapter says.")


def _title(path: Path) -> str:
    """First Markdown heading of a jupytext percent notebook (``# # Title``)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^#\s+#\s+(.+?)\s*$", line)
        if m:
            return m.group(1)
    return path.stem


def experiments(notebooks_dir: str | Path = "notebooks") -> list[dict]:
    """One experiment per ``notebooks/NN_*.py``, in order: ``{"id", "name", "title", "claims"}``.

    ``id`` is ``E<NN>`` without leading zeros; ``claims`` are the ids of the claims whose
    check reads that notebook's results.
    """
    out = []
    for p in sorted(Path(notebooks_dir).glob("[0-9][0-9]_*.py")):
        k = int(p.name[:2])
        out.append({"id": f"E{k}", "name": p.stem, "title": _title(p), "source": str(p),
                    "claims": [c.id for c in _claims.CLAIMS if c.notebook == p.stem]})
    return out


def _default_citation_file() -> Path:
    """``CITATION.cff`` in the working directory, else in the checkout this module belongs to."""
    here = Path("CITATION.cff")
    if here.is_file():
        return here
    return Path(__file__).resolve().parents[2] / "CITATION.cff"


def citation(path: str | Path | None = None) -> dict:
    """What the appendix needs from ``CITATION.cff``.

    Returns ``{"found", "file", "title", "version", "license", "repository", "url", "doi",
    "paper"}``; absent fields are ``None``, ``paper`` is the first entry of ``references``
    (a dict, or ``None``). ``found`` is False, with ``error`` saying why, when the file is
    missing or is not a YAML mapping; this never raises.
    """
    p = Path(path) if path is not None else _default_citation_file()
    shown = str(path) if path is not None else "CITATION.cff"  # no machine-specific path in the book
    out = {"found": False, "file": str(p), "title": None, "version": None, "license": None,
           "repository": None, "url": None, "doi": None, "paper": None}
    try:
        import yaml  # PyYAML, pinned in the lock (a dependency of the book toolchain)

        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {**out, "error": f"{shown} not found"}
    except Exception as exc:  # unreadable or not YAML: the appendix says so instead of failing
        return {**out, "error": f"{shown} unreadable ({type(exc).__name__})"}
    if not isinstance(doc, dict):
        return {**out, "error": f"{shown} is not a YAML mapping"}

    def s(key):
        v = doc.get(key)
        return str(v).strip() if v not in (None, "") else None

    refs = doc.get("references") if isinstance(doc.get("references"), list) else []
    paper = refs[0] if refs and isinstance(refs[0], dict) else None
    return {**out, "found": True, "title": s("title"), "version": s("version"), "license": s("license"),
            "repository": s("repository-code"), "url": s("url"), "doi": s("doi"), "paper": paper}


def _fmt_s(s: float | None) -> str:
    if s is None:
        return "not measured"
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def _fmt_b(b: int | None) -> str:
    if b is None:
        return "not measured"
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= k:
            return f"{b / k:.1f} {unit}"
    return f"{b} B"


def _num(x: float) -> str:
    """A cost figure: 2 significant digits below 10, whole numbers above."""
    if x >= 10:
        return f"{x:.0f}"
    if x == 0:
        return "0"
    return f"{x:.2g}" if x >= 0.001 else "<0.001"


def cost(human_minutes: float, wall_s: float | None, disk_bytes: int | None) -> str:
    """The USENIX cost bracket ``[N human-minutes + N compute-hours + N GB disk]``.

    ``wall_s`` (seconds) and ``disk_bytes`` are measured values, ``None`` where not measured
    (the bracket then says "not measured" for that figure instead of a number). Human minutes
    are an estimate.
    """
    h = "not measured" if wall_s is None else f"{_num(float(wall_s) / 3600.0)} compute-hours"
    g = "not measured" if disk_bytes is None else f"{_num(float(disk_bytes) / 1e9)} GB disk"
    if wall_s is None and disk_bytes is None:
        return f"[{_num(float(human_minutes))} human-minutes; compute time and disk not measured]"
    return f"[{_num(float(human_minutes))} human-minutes + {h} + {g}]"


def _esc(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _load_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _context(results: Path | None, notebooks_dir, env_record, citation_file) -> dict:
    rd = Path(results) if results is not None else pv.results_dir()
    grade = _load_json(rd / "grade.json") or {}
    exps = experiments(notebooks_dir)
    commit, dirty = pv.git_commit()
    return {
        "results": rd,
        "verdict": {c.get("id"): c for c in grade.get("claims", [])},
        "findings": grade.get("findings") or [],
        "runs": {(r.get("name"), r.get("mode")): r for r in runlog.load_runs("notebook")},
        "tiers": {m: _load_json(runlog.runs_dir() / f"tier-{m}.json") for m in MODES},
        "book": _load_json(runlog.runs_dir() / "book.json"),
        "test": _load_json(runlog.runs_dir() / "test.json"),
        "env": _load_json(Path(env_record)),
        "exps": exps,
        "by_nb": {e["name"]: e for e in exps},
        "commit": commit,
        "dirty": dirty,
        "cite": citation(citation_file),
    }


def _verdict(ctx: dict, cid: str) -> str:
    """The last grade's verdict of claim *cid* as the grade page shows it: the verdict (and mode),
    then, for any verdict but *reproduced*, its reason (the same record, ``results/grade.json``)."""
    ev = ctx["verdict"].get(cid, {})
    v = _claims.verdict_label(ev) if ev else "not graded yet"
    if ev.get("mode") and ev.get("mode") != "n/a":
        v += f" ({ev['mode']})"
    if ev:
        v += ": " + _claims.plain_sentence(ev)
    return _claims.typeset(v)


def _verdict_word(ctx: dict, cid: str) -> str:
    """The last grade's verdict of claim *cid* and its mode, without the reason (table cells)."""
    ev = ctx["verdict"].get(cid, {})
    v = _claims.verdict_label(ev) if ev else "not graded yet"
    return v + (f" ({ev['mode']})" if ev.get("mode") and ev.get("mode") != "n/a" else "")


def _access_lines(ctx: dict) -> list[str]:
    c = ctx["cite"]
    if not c["found"]:
        return [f"- **Citation metadata:** {c.get('error', 'CITATION.cff not found')}; URL and DOI unknown.",
                f"- **URL:** {URL_PLACEHOLDER}", f"- **DOI:** {DOI_PLACEHOLDER}"]
    out = []
    out.append(f"- **Repository:** {c['repository'] or URL_PLACEHOLDER}")
    out.append(f"- **URL (the book online):** {c['url'] or URL_PLACEHOLDER}")
    out.append(f"- **DOI:** {c['doi'] or DOI_PLACEHOLDER}")
    out.append(f"- **Licence:** {c['license'] or 'not stated'} for the code (`LICENSE`); the data sets keep their "
               "own terms (`DATA-LICENSE.md`: MNIST CC BY-SA 3.0, Fashion-MNIST MIT, CIFAR-10 with attribution).")
    out.append("- **How to cite:** `CITATION.cff` (the artifact, and the paper as its reference); `.zenodo.json` "
               "holds the archive's metadata. URL and DOI above are read from `CITATION.cff`"
               + ("." if c["repository"] and c["doi"] else f"; {RELEASE_STEP}."))
    from paperlib.artifact.dist import PUBLISH_STEPS

    out.append("- **How to publish it (`make dist`):** " + " ".join(f"({i}) {s}." for i, s in enumerate(PUBLISH_STEPS, 1)))
    return out


def span(lo: float, hi: float) -> str:
    """``"6.74 to 7.16"``, or one value where the two print alike (never ``"7.21 to 7.21"``)."""
    a, b = f"{lo:.2f}", f"{hi:.2f}"
    return a if a == b else f"{a} to {b}"


def expected_full_values(results: str | Path) -> list[dict]:
    """What full mode is expected to give at each audit chapter's seed-spread point, with a tolerance.

    Each ``results/<NN>_seed_spread.json`` (:data:`SPREADS`) re-runs one point of the chapter with other
    seeds. Returns one row per file and distinguisher: ``{"claim", "point", "label", "trials",
    "full_trials", "seeds", "min", "max", "range", "expected"}``. Where the spread ran at the paper's
    trial count (that of the claim's setting) full mode is expected within the seeds' range widened by
    that range (the spread is the tolerance); where it ran with fewer trials, full mode's tighter
    Clopper-Pearson intervals raise epsilon_L for the same error rates, so only a floor is given
    (``min - range``, at least 0). Missing or unreadable files are left out.
    """
    from paperlib.artifact.grading.setting import SETTINGS
    from paperlib.artifact.grading.stats import ceiling

    rows = []
    for fname, cid in SPREADS.items():
        doc = _load_json(Path(results) / fname)
        if not isinstance(doc, dict) or not isinstance(doc.get("data"), dict):
            continue
        p, d = doc.get("params") or {}, doc["data"]
        trials = p.get("trials") or (p.get("common") or {}).get("trials")
        full = SETTINGS[cid].trials
        pt = p.get("point") or {k: p[k] for k in ("panel", "method", "implementation", "N", "q") if k in p}
        point = ", ".join(_point_item(k, v) for k, v in pt.items())
        for lab in d.get("labels") or []:
            try:
                lo, hi, r = (float(d[k][lab]) for k in ("min", "max", "range"))
            except (KeyError, TypeError, ValueError):
                continue
            # the largest ε_L full mode's trial count can certify at all: no expected value above it
            top = ceiling({"trials": full, "delta": p.get("delta", 1e-5), "confidence": p.get("confidence", 0.95)})
            seeds = f"The seeds gave {span(lo, hi)}"
            if trials == full:
                a, b = max(0.0, lo - r), min(hi + r, top)
                if f"{b:.2f}" == f"{top:.2f}" and f"{a:.2f}" == f"{top:.2f}":
                    exp = (f"ε_L at the ceiling of {top:.2f}, the largest {full:,} trials can certify. {seeds}, "
                           "at the same trial count as full mode.")
                else:
                    exp = (f"ε_L within {span(a, b)}. {seeds} at the same trial count as full mode; the range is "
                           f"widened by their spread {r:.2f}"
                           + (f", then clamped at the ceiling of {top:.2f}, the largest {full:,} trials can certify"
                              if hi + r > top else "") + ".")
            elif lo - r > 0:
                exp = (f"ε_L at least {min(lo - r, top):.2f}. {seeds} at {trials:,} trials. Full mode's {full:,} "
                       "trials tighten the intervals, which raises ε_L for the same error rates, up to the ceiling "
                       f"of {top:.2f}.")
            else:
                exp = (f"No floor. {seeds} at {trials:,} trials, a spread that reaches 0. Full mode's {full:,} "
                       "trials can only raise ε_L for the same error rates.")
            rows.append({"claim": cid, "point": point, "label": lab, "trials": trials, "full_trials": full,
                         "seeds": d.get("seeds"), "min": lo, "max": hi, "range": r, "ceiling": top, "expected": exp})
    return rows


def _point_item(key: str, value) -> str:
    """One parameter of a re-run point in words: ``method = DPSUR (dpsur, q = 0.7)`` for a chapter's
    ``[method, implementation, q]``, else ``key = value``."""
    if key == "method" and isinstance(value, list) and len(value) == 3:
        return f"method = {value[0]} ({value[1]}, q = {value[2]})"
    return f"{key} = {'/'.join(map(str, value)) if isinstance(value, list) else value}"


def _dist_words(label: str) -> str:
    """A distinguisher's key in words: ``normality[chi2,weighted]`` is the paper's normality test."""
    words = {"optimal": "optimal (our addition)", "normality[chi2,weighted]": "normality (the paper's)",
             "normality[chi2,weighted][ties=half]": "normality, ties counted half (our variant)"}
    return words.get(label, label)


def _expected_lines(ctx: dict) -> list[str]:
    rows = expected_full_values(ctx["results"])
    if not rows:
        return ["No seed-spread result yet (chapters 4 to 7 write them); after a run this section gives, per chapter, "
                "what full mode is expected to give at the re-run point and with what tolerance."]
    L = ["From each audit chapter's seed-spread table (one point re-run with other seeds, in the mode that ran "
         "here); the tolerance is the spread across the seeds:", "",
         "| claim | point | distinguisher | this run (seeds) | expected in full mode |", "|---|---|---|---|---|"]
    for r in rows:
        L.append(f"| {r['claim']} | {_esc(r['point'])} | {_esc(_dist_words(r['label']))} | {span(r['min'], r['max'])} at "
                 f"{r['trials']:,} trials ({len(r['seeds'] or [])} seeds) | {_esc(r['expected'])} |")
    return L


def _badge_lines(ctx: dict) -> list[str]:
    c = ctx["cite"]
    smoke, quick = _tier_cold(ctx, "smoke"), _tier_cold(ctx, "quick")
    est = _estimate.notebook_estimates(ctx["results"])

    def measured(t, mode):
        return (f"measured here: {_fmt_s(t.get('wall_s'))} for a cold run on {runlog.hardware_text(t.get('hardware'))}"
                if t else "not measured on this machine yet")

    avail = ("" if c.get("repository") and c.get("doi")
             else f" Until the release they are placeholders: {RELEASE_STEP}.")
    return [
        f"- **Artifacts Available:** nothing to run; check the repository and DOI above, `LICENSE` and "
        f"`DATA-LICENSE.md`.{avail}",
        "- **Artifacts Functional:** `make test` and `make all MODE=smoke` must both end without an error. "
        "`make test` runs the linters and the unit tests. It also runs every notebook through nbval and checks "
        "the smoke book in a browser"
        + (f". Measured here: {_fmt_s(ctx['test'].get('wall_s'))} on {runlog.hardware_text(ctx['test'].get('hardware'))}"
           f", {runlog.short_summary(ctx['test'].get('summary')) or 'summary not recorded'}." if ctx.get("test") else
           ". Its time is recorded when it passes; it has not passed on this machine yet.")
        + f" `make all MODE=smoke`: {measured(smoke, 'smoke')}.",
        f"- **Results Reproduced:** run `make all`, quick mode without a GPU ({measured(quick, 'quick')}). Then "
        "read the grade page, which gives one plain sentence per claim and what differs from the paper's setting. "
        "Compare each claim's values with *Expected full-mode values* above. The paper's sizes are "
        "`make all MODE=full`. "
        + (f"Its real-implementation steps alone take about {_estimate._hm(est['total_s'])} on the CPU; see "
           "Hardware dependencies. The synthetic audits add less on a GPU." if est.get("total_s") is not None else
           "Its time is estimated once chapters 6, 7 and 11 have run here; see Hardware dependencies.")
        + " A claim is *reproduced* only on the paper's setting. So quick mode gives at most *partly reproduced* "
          "where it substitutes, and the grade lists each substitution.",
    ]


def _tier_cold(ctx: dict, mode: str) -> dict | None:
    t = ctx["tiers"].get(mode) or {}
    return t.get("last_cold")


def _experiment_cost_lines(ctx: dict, e: dict, est: dict) -> list[str]:
    out = []
    for m in MODES:
        r = ctx["runs"].get((e["name"], m))
        if r:
            out.append(f"  - {m}: {cost(HUMAN_MINUTES_PER_EXPERIMENT, r.get('wall_s'), r.get('bytes_written'))}. "
                       f"Measured {r.get('finished_utc', '?')}: {_fmt_s(r.get('wall_s'))} of compute on the "
                       f"{r.get('device', '?')}, {_fmt_b(r.get('bytes_written'))} written, peak memory "
                       f"{_fmt_b(r.get('peak_memory_bytes'))}. Machine: {runlog.hardware_text(r.get('hardware'))}.")
        elif m == "full" and e["name"] in est.get("notebooks", {}):
            v = est["notebooks"][e["name"]]
            out.append(f"  - {m}: {cost(HUMAN_MINUTES_PER_EXPERIMENT, None, None)}. Not run here. Its "
                       f"real-implementation steps are estimated at about {_estimate._hm(v['seconds'])} in one "
                       f"process, or {_estimate._hm(v['seconds_reference'])} on {est['reference_workers']} CPU "
                       f"workers, from its {v['mode']} run (see Hardware dependencies).")
        else:
            out.append(f"  - {m}: {cost(HUMAN_MINUTES_PER_EXPERIMENT, None, None)}. Not run on this machine; "
                       f"`make all MODE={m}` measures it.")
    return out


def peak_memory(ctx: dict, modes=("smoke", "quick")) -> tuple[int, str, str] | None:
    """The largest peak memory measured over the notebooks run in *modes*: ``(bytes, notebook, mode)``, or None
    when no run recorded one."""
    best = None
    for (name, mode), r in ctx["runs"].items():
        b = r.get("peak_memory_bytes")
        if mode in modes and isinstance(b, (int, float)) and (best is None or b > best[0]):
            best = (int(b), str(name), str(mode))
    return best


def _tier_table(ctx: dict) -> list[str]:
    """The modes (a list: what each is), their measured runs (a narrow table) and, below it, each cold
    run's machine and disk breakdown (too long for a cell of a table that fits the page)."""
    L = [f"- **{m}**: {MODE_NOTES[m]}" for m in MODES] + [""]
    L += ["| mode | last cold run | notebooks | disk after it | last run |", "|---|---|---|---|---|"]
    notes = []
    for m in MODES:
        t = ctx["tiers"].get(m) or {}
        cold, last = t.get("last_cold"), t.get("last")
        if cold:
            disk = sum(cold.get("disk_bytes", {}).values())
            detail = ", ".join(f"{k} {_fmt_b(v)}" for k, v in cold.get("disk_bytes", {}).items() if v > 10**6)
            row = (f"{_fmt_s(cold.get('wall_s'))} ({cold.get('device')})",
                   f"{len(cold.get('notebooks_executed', []))} of {cold.get('notebooks_total')}",
                   _fmt_b(disk))
            notes.append(f"- {m}, last cold run: finished {cold.get('finished_utc')} on "
                         f"{runlog.hardware_text(cold.get('hardware'))}; disk: {detail or 'nothing above 1 MB'}.")
        else:
            row = ("not measured", "-", "-")
        n_re = len(last.get("notebooks_executed", [])) if last else 0
        lr = (f"{_fmt_s(last.get('wall_s'))}, {n_re} notebook{'' if n_re == 1 else 's'} re-run"
              if last else "not measured")
        L.append(f"| {m} | " + " | ".join(_esc(x) for x in row) + f" | {_esc(lr)} |")
    return L + ([""] + notes if notes else [])


def _env_line(ctx: dict) -> str | None:
    env = ctx["env"]
    if not env:
        return None
    return (f"Installing the locked environment took {_fmt_s(env.get('wall_s'))} and "
            f"{_fmt_b(env.get('bytes'))} on this machine (measured by `make`).")


def _hardware_lines(ctx: dict | None = None) -> list[str]:
    peak = peak_memory(ctx) if ctx else None
    mem = ("Peak memory is measured per notebook (the kernel with every process under it): at most "
           f"{_fmt_b(peak[0])}, in {peak[1]} ({peak[2]} mode)." if peak else
           "Peak memory is measured per notebook once a run has recorded it; none has on this machine yet.")
    out = [f"- `smoke` and `quick`: CPU only; no GPU. {mem}",
           "- `full`: the synthetic audits use a CUDA GPU where there is one. So do the Opacus steps of the "
           "real-implementation audits of chapters 6, 7 and 11, in the subprocesses of the old releases too. "
           "DPSUR's steps stay on the CPU, spread over the Dask workers with the rest. Its measured cost appears "
           "below once it has run.",
           "- `full`, the real-implementation steps (chapters 6, 7, 11): "
           + _estimate.estimate_text(_estimate.notebook_estimates(ctx["results"] if ctx else None))]
    for m in MODES:
        t = _tier_cold(ctx, m) if ctx else None
        if t:
            out.append(f"- Measured `{m}` run ({_fmt_s(t.get('wall_s'))}): "
                       f"{runlog.hardware_text(t.get('hardware'))}.")
    return out


def _software_lines() -> list[str]:
    return ["- Linux (x86-64), Python 3.11 or newer, GNU `make`; every Python package is pinned in "
            "`requirements-lock.txt` and installed into `.venv/` by the first `make` command (PyTorch's "
            "Linux build pulls NVIDIA's libraries itself).",
            "- The browser test of `make test` uses Debian's `chromium` (installed by `make test` when missing "
            "and run as root; skipped with a message otherwise).",
            "- Or Docker: `Dockerfile` (Python 3.11 on Debian bookworm, the lock, the repository, `make all`); "
            "`--gpus all` with the NVIDIA Container Toolkit for `full` mode.",
            "- Old Opacus releases (Table 2, Figures 4 and 6) are installed on demand into `.cache/` with "
            "`pip install --no-deps --target`, each wheel checked against its stored sha256, and run in a "
            "subprocess."]


def _data_lines() -> list[str]:
    return ["- MNIST, Fashion-MNIST and CIFAR-10 through torchvision, downloaded into `data/` (or "
            "`$PAPERLIB_DATA`) on first use in `full` mode; `quick` and `smoke` use what is there. Licences and "
            "attribution: `DATA-LICENSE.md`.",
            "- Everything else is generated: the synthetic worst-case data sets of the audits and every curve "
            "are computed from the paper's parameters and a seed."]


def _risk_lines() -> list[str]:
    return ["- The artifact audits privacy mechanisms on public data sets (and on synthetic data); it needs no "
            "personal data and attacks no system.",
            "- It downloads packages from the Python package index (the lock; old Opacus releases) and data sets "
            "through torchvision, and writes only inside the repository (`.venv/`, `build/`, `results/`, "
            "`figures/`, `book/`, `data/`, `.cache/`). It needs no root access, except that `make test` "
            "installs Debian's `chromium` with apt-get when it runs as root."]


def _limitations(ctx: dict) -> list[str]:
    L = []
    unmeasured = [m for m in MODES if not _tier_cold(ctx, m)]
    if unmeasured:
        L.append("- No cold `make all` measured on this machine in " + ", ".join(f"`{m}`" for m in unmeasured)
                 + " mode; costs of what has not run here read *not measured*.")
    open_claims = []
    for c in _claims.CLAIMS:
        ev = ctx["verdict"].get(c.id)
        if ev is None:
            open_claims.append(f"{c.id} (not graded yet)")
        elif ev.get("verdict") not in ("reproduced", "not applicable"):
            open_claims.append(f"{c.id}: {ev.get('verdict')}")
    if open_claims:
        L.append("- Claims the last grade does not confirm: " + "; ".join(open_claims) + ".")
    L += ["- `quick` mode reduces trial counts and sizes; each chapter says what it reduced. A trial count other "
          "than the paper's is listed with the claim's substitutions, so the claim is at best *partly reproduced*. "
          "A point below its claim that the reduced count cannot resolve is *unresolved*: its point estimate is "
          "above the claim. Every other point below its claim is a violation. The paper's sizes are `full` mode."]
    steps = [(cid, f) for cid, ev in sorted(ctx["verdict"].items())
             for f in ev.get("fidelity") or [] if f.get("aspect") == "real steps"]
    if steps:
        L.append("- In the last grade, part of the rounds of the real-implementation audits were drawn from the "
                 "mechanism that the checked real steps implement, not run by the program:")
        L += [f"  - {cid}: {_esc(_claims.typeset(clauses(f.get('text') or f.get('reason') or '')[0]))}"
              for cid, f in steps]
    L += ["- The audits on real data use a handful of real images shipped with the repository. MNIST's come from "
          "its training split, as the paper's do. Fashion-MNIST's and CIFAR-10's come from their test splits, and "
          "the grade lists that difference; `full` mode downloads the training splits instead.",
          "- The paper's figure images were not available to this project. Each figure is compared with the "
          "paper's text and the numbers it states, not with its plots.",
          "- " + _claims.VERDICT_RULE,
          "- The audits give 95% Clopper-Pearson lower bounds on epsilon from finitely many trials. So a claim "
          "is *reproduced* as a statistical statement at that level, one seed at a time; `SEED=` changes it.",
          "- The copy of the paper this work started from lost the statements of some theorems and its Appendix "
          "C, the audit procedure. `THEORY.md` reconstructs them and says where the paper leaves a choice open. "
          "Each reconstructed statement is checked numerically against a Monte Carlo simulation of the mechanism.",
          "- DPSUR's step is this project's re-implementation, in `paperlib/implementations/dpsur.py`. Its "
          "docstring says how closely it follows DPSUR's source."]
    return L


def _reuse_lines() -> list[str]:
    return ["- The library is usable without the book: `paperlib.fdp` (trade-off functions, numpy and scipy "
            "only), `paperlib.mechanisms` (SGM, EASGM, ASGM, FEASGM guarantees and bounds), `paperlib.audit` "
            "(the game and its distinguishers), `paperlib.practitioner`; and the command line "
            "`python -m paperlib` (`tradeoff`, `epsilon`, `audit`, `audit-implementation`).",
            "- Another setting: change a notebook's parameters cell (`MODE`, `DEVICE`, `SEED`) or add a notebook "
            "`notebooks/NN_name.py`; `make all` executes only what changed (results are cached by parameters "
            "and code) and the appendix lists the new experiment.",
            "- Another claim: add an entry to `paperlib/artifact/claims.py`; `make grade` grades it and this "
            "appendix lists it."]


def _version_lines(ctx: dict) -> list[str]:
    c = ctx["cite"]
    L = [f"- Artifact version {c['version'] or 'unknown'} (`CITATION.cff`), commit `{ctx['commit'][:12]}`"
         + (" with uncommitted changes" if ctx["dirty"] else "") + "."]
    b = ctx["book"]
    if b:
        L.append(f"- The book was last built in `{b.get('mode')}` mode at commit "
                 f"`{str(b.get('git_commit', 'unknown'))[:12]}` ({b.get('finished_utc')}).")
    L.append("- This appendix is regenerated by every `make all`; the online book's `build-info.json` names the "
             "mode, commit and workflow run that built the site.")
    return L


def _h(level: int, text: str) -> str:
    return "#" * level + " " + text


def _abstract_lines() -> list[str]:
    """The Abstract section's paragraphs (after its heading)."""
    return [f"This artifact recomputes every figure and table of {_PAPER}. These are the f-DP guarantees of "
            "DP-SGD as it is implemented (EASGM, FEASGM, ASGM) and the upper bounds that separate them from the "
            "claimed SGM guarantee. They are also the privacy audits of simulated mechanisms and of real "
            "implementations (Opacus releases, DPSUR), the "
            "Opacus code audit and the multi-round bounds. One command runs all notebooks, grades each claim of "
            "the paper and builds an HTML book.", "", _INDEPENDENT, ""]


def _installation_lines(ctx: dict) -> list[str]:
    """The Installation section (after its heading): the command and its measured cost."""
    env = ctx["env"]
    return ["```", "# creates .venv/ from requirements-lock.txt", "# (any later make command does it too)", "make env",
            "```", "",
            f"Cost: {cost(HUMAN_MINUTES_SETUP, env.get('wall_s') if env else None, env.get('bytes') if env else None)}"
            + (" (measured by `make`)." if env else " (installation not measured on this machine)."), ""]


def _basic_test_lines(ctx: dict) -> list[str]:
    """The Basic test section (after its heading): the commands and the smoke run's measured cost."""
    smoke = _tier_cold(ctx, "smoke")
    return ["```", "# the test suite: make lint, unit tests, every notebook through nbval,",
            "# and the book in a browser", "make test",
            "# every notebook end to end at the smallest sizes, the grade, the book", "make all MODE=smoke",
            "```", "",
            "`make all MODE=smoke` ends with the grade table and the path of the book; numbers are not meaningful "
            "in smoke mode, only that every step runs. Cost: "
            + cost(HUMAN_MINUTES_BASIC_TEST, smoke.get("wall_s") if smoke else None,
                   sum(smoke.get("disk_bytes", {}).values()) if smoke else None)
            + (" (measured)." if smoke else "."), ""]


def _major_claims_lines(ctx: dict) -> list[str]:
    """The Major claims section (after its heading): the verdict table, then each claim's statement."""
    # a narrow table (the verdict never hidden by the page width), the statements and reasons below it
    L = ["| claim | paper item | last verdict | experiment |", "|---|---|---|---|"]
    for c in _claims.CLAIMS:
        e = ctx["by_nb"].get(c.notebook)
        L.append(f"| {c.id} | {_esc(_claims.item_label(c))} | {_esc(_verdict_word(ctx, c.id))} | "
                 f"{e['id'] if e else 'none'} |")
    L.append("")
    for c in _claims.CLAIMS:
        L.append(f"- {_esc(_claims.id_item(c))}, {_esc(_verdict(ctx, c.id))}")
        L.append("  - Claim:")
        L += [f"    - {_esc(_claims.typeset(x))}" for x in clauses(c.statement)]
        ev = ctx["verdict"].get(c.id) or {}
        whose = _setting_name({"beyond_paper": c.beyond_paper})
        for f in ev.get("fidelity") or []:  # the same substitutions as grade.json and the grade page
            L.append(f"  - Differs from {whose} ({f['verdict']}):")
            L += [f"    - {_esc(_claims.typeset(x))}" for x in clauses(f["reason"])]
        if ev.get("expected_full"):
            L.append("  - Expected in full mode:")
            L += [f"    - {_esc(_claims.typeset(x))}" for x in clauses(ev["expected_full"])]
    L.append("")
    return L


def _findings_lines(ctx: dict) -> list[str]:
    """The Findings section (after its heading): the last grade's findings, apart from the verdicts."""
    fnd = ctx.get("findings") or []
    L = ["Kept apart from the verdicts (never graded as the paper's statements):", ""]
    L += [f"- {_esc(f['claim'])}: {_esc(_claims.typeset(f['text']))}" for f in fnd] or ["- none in the last grade"]
    L.append("")
    return L


def _experiments_lines(ctx: dict, book: bool) -> list[str]:
    """The Experiments section (after its heading): one subsection per notebook, linked as ``book`` says."""
    def link(e: dict) -> str:
        if book:
            return f"[{e['title']}](notebooks/{e['name']}.ipynb)"
        return f"[{e['title']}]({e['source']})"

    L = ["Each experiment is one notebook; `make all` runs them all. Costs are per mode, as "
         "[human-minutes + compute-hours + GB disk]. Compute time, disk and peak memory are measured on this "
         "machine. Disk counts the files the run wrote under `results/`, `figures/`, `data/` and `.cache/`. "
         "\"Not measured\" means that mode has not run here; full mode's real-implementation steps are then "
         f"estimated. The {HUMAN_MINUTES_PER_EXPERIMENT} human-minutes are our estimate of the attention an "
         "experiment needs: start it, read the verdict and the chapter.", ""]
    est = _estimate.notebook_estimates(ctx["results"])
    for e in ctx["exps"]:
        L += [f"#### {e['id']}: {link(e)}", ""]
        cl = [c for c in _claims.CLAIMS if c.id in e["claims"]]
        L.append(f"- **How to:** `make book/notebooks/{e['name']}.ipynb MODE=quick` (or `MODE=full`), then "
                 "`make grade`: the verdict is printed and written to `results/grade.json`.")
        if cl:
            for c in cl:
                L.append(f"- **Supports {_esc(_claims.id_item(c))}. Expected:** {_esc(_claims.typeset(c.paper))}. "
                         "**Tolerance:**")
                L += [f"  - {_esc(_claims.typeset(x))}" for x in clauses(c.tolerance)]
                cmds = ((ctx["verdict"].get(c.id) or {}).get("values") or {}).get("commands") or {}
                L += [f"  - {_esc(label)}: `{cmd}`" for label, cmd in cmds.items()]  # each graded row, as a command
        else:
            L.append("- **Expected:** the notebook runs to the end; its in-line checks (assertions against "
                     "closed forms, Monte Carlo or published numbers) pass. It supports the book's explanation, "
                     "not a graded claim.")
        L.append("- **Cost:**")
        L += _experiment_cost_lines(ctx, e, est)
        L.append("")
    return L


def _measured_tiers_lines(ctx: dict) -> list[str]:
    """The Measured tiers section (after its heading): the per-mode table and the last book build."""
    L = ["`make all` per mode: the wall time from the start of `make` to the built book, on this machine. A "
         "*cold* run executes every notebook; later runs re-execute only what changed.", ""]
    L += _tier_table(ctx) + [""]
    if ctx["book"]:
        L += [f"The last book build (`jupyter-book build`) took {_fmt_s(ctx['book'].get('wall_s'))}.", ""]
    L += ["A `make all` records its total once the book is built, then rewrites this appendix and refreshes "
          "this page, so the table includes the run that built the book. The time of a cold run includes "
          "creating `.venv` when the run had to (see Installation).", ""]
    return L


def render(*, book: bool, results: Path | None = None, notebooks_dir: str | Path = "notebooks",
           env_record: Path = Path(".venv/install-record.json"), citation_file: str | Path | None = None) -> str:
    """The USENIX Security '26 appendix as Markdown.

    ``book`` selects links to chapters (True, the book page) or to notebook sources (False,
    the standalone file). ``results`` defaults to :func:`paperlib.artifact.provenance.results_dir`,
    ``citation_file`` to ``CITATION.cff`` (working directory, then the checkout).
    """
    ctx = _context(results, notebooks_dir, env_record, citation_file)
    sec = dict((t, lv) for lv, t in USENIX_SECTIONS)

    def H(text: str) -> list[str]:
        return [_h(sec[text], text), ""]

    L: list[str] = ["# Artifact appendix", ""]
    L += ["Generated by `python -m paperlib.artifact.appendix` (`make appendix`, also run by `make all`) from the "
          "claims registry, the last grade, the measured runs on this machine and `CITATION.cff`; do not edit by "
          "hand. The sections follow the USENIX Security '26 artifact appendix; the same content in PETS's form "
          "is `results/ARTIFACT-APPENDIX.md`.", ""]

    L += H("Abstract") + _abstract_lines()

    L += H("Description & Requirements")
    L += H("Security, privacy, and ethical concerns") + _risk_lines() + [""]
    L += H("How to access") + _access_lines(ctx) + [""]
    L += H("Hardware dependencies") + _hardware_lines(ctx) + [""]
    L += H("Software dependencies") + _software_lines() + [""]
    L += H("Benchmarks") + _data_lines() + [""]

    L += H("Set-up")
    L += H("Installation") + _installation_lines(ctx)
    L += H("Basic test") + _basic_test_lines(ctx)

    L += H("Evaluation workflow")
    L += H("Major claims") + _major_claims_lines(ctx)
    L += H("Findings beyond or against the paper") + _findings_lines(ctx)

    L += H("Expected full-mode values") + _expected_lines(ctx) + [""]
    L += H("What to run for each badge") + _badge_lines(ctx) + [""]

    L += H("Experiments") + _experiments_lines(ctx, book)
    L += H("Measured tiers") + _measured_tiers_lines(ctx)

    L += H("Limitations") + _limitations(ctx) + [""]
    L += H("Notes on Reusability") + _reuse_lines() + [""]
    L += H("Version") + _version_lines(ctx) + [""]
    return "\n".join(L)


def _measured_tests_line(ctx: dict) -> str:
    """The measured `make test` and `make all MODE=smoke` of this machine, in one short paragraph."""
    t, smoke = ctx.get("test"), _tier_cold(ctx, "smoke")
    head = (f"Measured here: `make test` took {_fmt_s(t.get('wall_s'))} ({runlog.short_summary(t.get('summary')) or 'no summary'})"
            if t else "`make test` has not passed on this machine yet")
    return head + (f"; `make all MODE=smoke` took {_fmt_s(smoke.get('wall_s'))}." if smoke else
                   "; `make all MODE=smoke` has not run here.")


def _pets_experiments(ctx: dict) -> list[str]:
    """The PETS form's Experiments section (after its heading): per notebook its time, command and claims."""
    L = []
    for e in ctx["exps"]:
        L += [f"#### Experiment {e['id'][1:]}: {_esc(e['title'])}", ""]
        times = []
        for m in MODES:
            r = ctx["runs"].get((e["name"], m))
            times.append(f"{m} {_fmt_s(r.get('wall_s'))} compute, {_fmt_b(r.get('bytes_written'))} written"
                         if r else f"{m} not measured")
        L += [f"- Time: {HUMAN_MINUTES_PER_EXPERIMENT} human-minutes (estimate); compute: " + "; ".join(times) + ".",
              f"- Command: `make book/notebooks/{e['name']}.ipynb MODE=quick` (or `MODE=full`), then `make grade`.",
              "- Supports: " + (", ".join(e["claims"]) if e["claims"] else "the book's explanation (no graded claim)")
              + "."]
        for c in _claims.CLAIMS:
            if c.id in e["claims"]:
                L.append(f"- Expected ({c.id}): {_esc(c.paper)}; tolerance: {_esc(c.tolerance)}.")
        L.append("")
    return L


def _snapshot_lines(ctx: dict) -> list[str]:
    """What the root copy of the PETS-form appendix says of itself: which run it shows, where the current one is."""
    quick = _tier_cold(ctx, "quick")
    return [f"This copy at the repository's root is a snapshot, taken at commit `{ctx['commit'][:12]}` with "
            "`make appendix-snapshot` after "
            + (f"a cold quick run on {runlog.hardware_text(quick.get('hardware'))}" if quick else "the last run")
            + ". Every `make all` writes the current appendix to `results/ARTIFACT-APPENDIX.md`.", ""]


def render_pets(*, results: Path | None = None, notebooks_dir: str | Path = "notebooks",
                env_record: Path = Path(".venv/install-record.json"),
                citation_file: str | Path | None = None, snapshot: bool = False) -> str:
    """The appendix in the layout of PETS's ``ARTIFACT-APPENDIX.md`` template (Markdown). ``snapshot``: the copy
    kept at the repository's root, which says which run it shows and where the current one is written."""
    ctx = _context(results, notebooks_dir, env_record, citation_file)
    sec = dict((t, lv) for lv, t in PETS_SECTIONS)

    def H(text: str) -> list[str]:
        return [_h(sec[text], text), ""]

    L: list[str] = ["# Artifact Appendix", ""]
    L += ["Paper title: **Rethinking the Security of DP-SGD: A Corrected Analysis of Differentially Private "
          "Machine Learning** (Wenhao Wang, Shujie Cui, Hui Cui, Xingliang Yuan, 2026, arXiv:2605.15648)", "",
          "Requested Badge(s):", "  - [x] **Available**", "  - [x] **Functional**", "  - [x] **Reproduced**", "",
          "Generated by `python -m paperlib.artifact.appendix` from the claims registry, the last grade, the "
          "measured runs on this machine and `CITATION.cff`; do not edit by hand. The USENIX-form appendix with "
          "the same content is `results/artifact_appendix.md` (and the book's appendix page).", ""]
    L += _snapshot_lines(ctx) if snapshot else []

    L += H("Description")
    L += [f"1. The paper, {_PAPER}, shows that DP-SGD as implemented does not have the guarantee that the "
          "analysis of the subsampled Gaussian mechanism (SGM) claims for it. Implementations normalise the noisy "
          "sum by the expected batch size, its floor, or the realised batch size: EASGM, FEASGM, ASGM. The paper "
          "derives the corrected guarantees and their upper bounds, and audits synthetic mechanisms and real "
          "implementations.",
          "2. The artifact recomputes each figure and table of the paper in a notebook, grades each claim "
          "against the numbers it computed, and builds an HTML book. " + _INDEPENDENT, ""]
    L += H("Security/Privacy Issues and Ethical Concerns") + _risk_lines() + [""]

    L += H("Basic Requirements")
    L += H("Hardware Requirements") + _hardware_lines(ctx) + [""]
    L += H("Software Requirements") + _software_lines() + _data_lines() + [""]
    L += H("Estimated Time and Storage Consumption")
    L += ["Measured on this machine (`make all` per mode; `not measured` where a mode has not run here):", ""]
    L += _tier_table(ctx) + [""]
    el = _env_line(ctx)
    if el:
        L += [el, ""]

    L += H("Environment")
    L += H("Accessibility") + _access_lines(ctx) + [""]
    L += H("Set up the environment")
    repo = ctx["cite"]["repository"] or "<repository URL: not yet published>"
    L += ["```bash", f"git clone {repo} paperlib && cd paperlib", "make env   # .venv/ from requirements-lock.txt",
          "# or: docker build -t paperlib .", "```", ""]
    L += H("Testing the Environment")
    L += ["```bash", "make test             # make lint, unit tests, every notebook through nbval, the book in a browser",
          "make all MODE=smoke   # every notebook at the smallest sizes, the grade, the book", "```", "",
          "Expected: `make test` ends with pytest's summary line and no failure; `make all MODE=smoke` ends with "
          "the grade table and the path of the book.", "", _measured_tests_line(ctx), ""]

    L += H("Artifact Evaluation")
    L += H("Main Results and Claims")
    for c in _claims.CLAIMS:
        e = ctx["by_nb"].get(c.notebook)
        L += [f"#### Main Result {c.id if c.beyond_paper else c.id[1:]}: {_esc(_claims.item_label(c))}", "",
              f"{_esc(c.statement)} The paper: {_esc(c.paper)}. "
              + (f"Experiment {e['id']} checks it." if e else "Nothing to measure.")
              + f" Last verdict: {_esc(_verdict(ctx, c.id).rstrip('.'))}.", ""]  # one full stop
    L += H("Experiments") + _pets_experiments(ctx)
    L += H("Limitations") + _limitations(ctx) + [""]
    L += H("Notes on Reusability") + _reuse_lines() + [""]
    L += _version_lines(ctx) + [""]
    return "\n".join(L)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paperlib.artifact.appendix", description=__doc__.split("\n")[0])
    ap.add_argument("--book-page", default="book/appendix.md", help="book page to write (default: book/appendix.md)")
    ap.add_argument("--standalone", default=None,
                    help="standalone Markdown file (default: RESULTS/artifact_appendix.md)")
    ap.add_argument("--pets", default=None,
                    help="the PETS-form appendix (default: RESULTS/ARTIFACT-APPENDIX.md)")
    ap.add_argument("--no-book", action="store_true", help="do not write the book page")
    ap.add_argument("--snapshot", default=None,
                    help="also write the PETS-form appendix here, marked as a snapshot of this run "
                         "(make appendix-snapshot: ARTIFACT-APPENDIX.md at the repository's root)")
    ap.add_argument("--notebooks", default="notebooks", help="folder of the notebook sources (default: notebooks)")
    ap.add_argument("--citation", default=None, help="citation metadata (default: CITATION.cff)")
    a = ap.parse_args(argv)
    if not Path(a.notebooks).is_dir():
        ap.error(f"--notebooks {a.notebooks} is not a folder (run from the repository root)")
    if a.citation is not None and not Path(a.citation).is_file():
        ap.error(f"--citation {a.citation} is not a file")
    kw = {"notebooks_dir": a.notebooks, "citation_file": a.citation}
    out = Path(a.standalone) if a.standalone else pv.results_dir() / "artifact_appendix.md"
    _write(out, render(book=False, **kw))
    print(f"wrote {out}")
    pets = Path(a.pets) if a.pets else pv.results_dir() / "ARTIFACT-APPENDIX.md"
    _write(pets, render_pets(**kw))
    print(f"wrote {pets}")
    if a.snapshot:
        _write(Path(a.snapshot), render_pets(snapshot=True, **kw))
        print(f"wrote {a.snapshot}")
    if not a.no_book:
        _write(Path(a.book_page), render(book=True, **kw))
        print(f"wrote {a.book_page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
