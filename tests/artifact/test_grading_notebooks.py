"""The notebooks' own parameters against the paper's setting: everything that differs is listed by the grade.

The parameter cells of the real-implementation chapters (06: Figure 4, 07: Figure 6) are read from the
notebook sources (``pf.pick(MODE, ...)`` evaluated per mode), turned into the result records a run of
them writes (``real_audit.audit_inputs`` and the result keys the grade reads), and graded. For every
model, split, release, code path, real-step share and trial count that differs from the paper's
setting (:data:`paperlib.artifact.grading.setting.SETTINGS`, the one place it is written), the
grade must list that aspect — and nothing the run does not differ in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from paperlib.artifact.grading import setting as S
from paperlib.artifact.nbparams import notebook_params

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ("TRIALS", "CHECK_TRIALS", "CHECK_TRIALS_BIG", "MODEL_OF", "PAPER_MODEL_OF", "PAPER_MODEL_PANELS", "METHODS",
         "MODEL", "N", "Q", "SIGMA", "C", "DATASETS")


def _params(nb: str, mode: str) -> dict:
    """The parameters of *NAMES* that notebook *nb* sets, in *mode* (paperlib.artifact.nbparams; none skipped)."""
    p = notebook_params(nb, mode)
    tree = ast.parse((NOTEBOOKS / f"{nb}.py").read_text(encoding="utf-8"))
    set_here = {t.id for node in tree.body if isinstance(node, ast.Assign) for tt in node.targets
                for t in ast.walk(tt) if isinstance(t, ast.Name)} & set(NAMES)
    unread = sorted(set_here - set(p))
    assert not unread, f"{nb}: notebook_params cannot read {unread} (a parameter built from something else)"
    return {k: p[k] for k in set_here}


def _release_version(impl: str) -> str:
    """The version a run of *impl* records (the installed release: what this environment has)."""
    if impl == "dpsur":
        return "paperlib"  # the re-implementation, unless DPSUR's pinned source runs
    if impl == "opacus-installed":
        return "1.6.0"
    return impl.removeprefix("opacus-")


def _record(impl: str, dataset: str, model: str, mode: str, p: dict, check_trials) -> dict:
    """The result a run writes for one audited point (the keys :func:`setting.run_of_audit` reads)."""
    from paperlib.implementations import real_audit as RA

    rounds = 2 * 2 * p["TRIALS"]  # calibration and counted rounds, on D and on D'
    real = rounds if mode == "full" else 2 * check_trials  # quick: check_trials real steps per dataset
    bundle = None if mode == "full" else {"indices": [1, 2, 3, 4, 5], "split": "test"}  # the shipped test images
    drawn = {"full": True, "indices": [1, 2, 3, 4, 5], "split": "train"} if mode == "full" else None
    version = _release_version(impl)
    inp = RA.audit_inputs(impl, dataset, version=version, bundle=bundle, drawn=drawn, real_rounds=real,
                          rounds=rounds)
    return {"inputs": inp, "model": model, "n": None, "version": version, "implementation": impl,
            "trials": p["TRIALS"], "dataset": dataset, "N": p.get("N"), "sigma": p.get("SIGMA"), "C": p.get("C"),
            "eps_lower": {"optimal": 1.0, S._PAPER_DIST: 1.0}}


def _expected(setting: S.Setting, method: str, rec: dict) -> set[str]:
    """The aspects in which *rec* differs from *setting*, worked out here from the setting's fields."""
    out = set()
    inp = rec["inputs"]
    if setting.split and S.split_of(inp) != setting.split:
        out.add("split")
    table = S.CIFAR_MODELS if "cifar" in rec["dataset"] else setting.models
    for m in (x.strip() for x in method.split("/")):
        want = table.get(m) or setting.models.get(m) or setting.models.get("*")
        if want and rec["model"] not in want[0]:
            out.add("model")
    if setting.releases:
        want = setting.releases.get(rec["implementation"]) or setting.releases.get("*")
        if want and not str(rec["version"]).startswith(want[0]):
            out.add("release")
    if setting.code and not inp["code_as_paper"]:
        out.add("code path")
    if setting.all_rounds_real and inp["real_rounds"] < inp["rounds"]:
        out.add("real steps")
    if setting.trials and rec["trials"] != setting.trials:
        out.add("trials")
    return out


def _points_06(mode: str):
    """Every point notebook 06 audits: ``figure4.model_for(panel, method, ...)`` (None: not audited there)."""
    from paperlib.artifact.figure4 import model_for, own_models

    p = _params("06_audit_real_figure4", mode)
    kw = {"model_of": p["MODEL_OF"], "paper_model_of": p["PAPER_MODEL_OF"], "paper_model_panels": p["PAPER_MODEL_PANELS"]}
    big = own_models(p["PAPER_MODEL_OF"])
    for panel in p["MODEL_OF"]:
        for method, impl, q in p["METHODS"]:
            model = model_for(panel, method, **kw)
            if model is not None:
                ck = p["CHECK_TRIALS_BIG"] if model in big else p["CHECK_TRIALS"]
                yield method, _record(impl, panel, model, mode, p, ck)


def _points_07(mode: str):
    p = _params("07_opacus_feasgm_figure6", mode)
    for impl, ck in p["CHECK_TRIALS"].items():
        if impl == "opacus-1.0.2":  # the paper's release; the installed one is this book's addition
            yield "DP-FETA", _record(impl, "mnist", p["MODEL"], mode, p, ck)


def _mismatches(claim: str, pts) -> tuple[list[str], set[str]]:
    """(what the grade fails to list or lists without cause, every aspect it lists)."""
    bad, listed = [], set()
    for method, rec in pts:
        got = {f["aspect"] for f in S.substitutions(S.SETTINGS[claim], [S.run_of_audit(rec, method)])}
        want = _expected(S.SETTINGS[claim], method, rec)
        if not want <= got:
            bad.append(f"{claim} {method} {rec['implementation']} {rec['dataset']}: not listed: {sorted(want - got)}")
        if not got <= want | {"parameters"}:
            bad.append(f"{claim} {method} {rec['implementation']}: listed without a difference: {sorted(got - want)}")
        listed |= got
    return bad, listed


@pytest.mark.parametrize("mode", ["quick", "full"])
@pytest.mark.parametrize("claim, points", [("C4", _points_06), ("C6", _points_07)])
def test_every_difference_of_a_notebook_from_the_paper_is_listed(claim, points, mode):
    pts = list(points(mode))
    assert pts, f"{claim}: no audited point read from the notebook"
    bad, listed = _mismatches(claim, pts)
    assert not bad, "\n".join(bad)
    if mode == "quick":  # quick mode substitutes at least the real steps and the points' split
        assert {"real steps", "split"} <= listed


def test_the_listing_check_can_fail(monkeypatch):
    """A grade that stopped listing an aspect (here: every aspect) fails the check above."""
    pts = list(_points_06("quick"))
    assert not _mismatches("C4", pts)[0]
    monkeypatch.setattr(S, "_one", lambda setting, run: [])
    bad, _ = _mismatches("C4", pts)
    assert bad and all("not listed" in b for b in bad)


def test_real_steps_name_the_mechanism_each_result_substituted():
    """One "real steps" entry per claim, naming what filled the other rounds as the results record it
    (DPSUR's rounds are DPSUR's rule once real_audit says so; nothing is assumed here)."""
    p = _params("06_audit_real_figure4", "quick")
    runs = []
    for mech, impl in (("easgm", "opacus-0.15.0"), ("dpsur", "dpsur"), ("dpsur", "dpsur")):
        rec = _record(impl, "mnist", "cnn-mnist", "quick", p, 30) | {"mechanism": mech}
        runs.append(S.run_of_audit(rec, "DPSGD-HF" if impl != "dpsur" else "DPSUR"))
    real = [f for f in S.substitutions(S.SETTINGS["C4"], runs) if f["aspect"] == "real steps"]
    assert len(real) == 1 and real[0]["points"] == "3/3"
    assert "(EASGM at 1 point, DPSUR's rule at 2 points)" in real[0]["text"]
    one = S.substitutions(S.SETTINGS["C4"], runs[1:2])
    assert "implement (DPSUR's rule);" in next(f["text"] for f in one if f["aspect"] == "real steps")
    assert "\x00" not in " ".join(f["reason"] for f in S.substitutions(S.SETTINGS["C4"], runs))


def test_every_aspect_has_plain_words():
    """The grade's first sentence names each substitution in words a reader outside the field understands."""
    from paperlib.artifact.grading import render

    assert set(S.ASPECTS) <= set(render.PLAIN_ASPECT)
    rec = {"verdict": "partly reproduced", "plain": "Programs leak more than promised",
           "fidelity": [{"aspect": "split"}, {"aspect": "real steps"}], "reasons": []}
    s = render.plain_sentence(rec)
    assert s == ("Programs leak more than promised. Nothing measured contradicts it. The run differs from the "
                 "paper's setting in 2 ways: images from another split of the data set and some training steps "
                 "simulated.")


def test_a_methods_own_model_of_another_size_is_a_finding():
    """PrivImage's model from its code has 1,753,345 parameters where the paper says 1,485,217: a finding (the
    paper's model is what ran), never a substitution; DP-FETA's matches and says nothing."""
    runs = [S.run_of_audit({"model": "privimage-mnist", "n": 1_753_345}, "PrivImage"),
            S.run_of_audit({"model": "dpfeta-mnist", "n": 1_485_217}, "DP-FETA"),
            S.run_of_audit({"model": "large-mnist", "n": 1_485_217}, "DP-FETA"),
            # the CNN standing for all three methods is a model substitution, not "DP-FETA's own model"
            S.run_of_audit({"model": "cnn-mnist", "n": 26_010}, "DP-FETA / PrivImage"),
            S.run_of_audit({"model": "cnn-cifar10", "n": 550_570}, "PrivImage")]
    assert S.size_findings(runs) == ["PrivImage's own model (privimage-mnist, built from its public code) has "
                                     "1,753,345 parameters, not the 1,485,217 the paper gives for it (Section 5.3)"]
    full = [rec for m, rec in _points_06("full") if m == "PrivImage"]
    # notebook 06 audits PrivImage's own models, on CIFAR-10 too, and none is a model substitution
    assert {rec["model"] for rec in full} == {"privimage-mnist", "privimage-cifar10"}
    for rec in full:
        assert not {f["aspect"] for f in S.substitutions(S.SETTINGS["C4"], [S.run_of_audit(rec, "PrivImage")])
                    } & {"model"}, rec["model"]
