"""Tests for paperlib.artifact.claims: each check on synthetic result files (holds / violated / missing)."""

import json

import pytest

from paperlib.artifact import claims as cl
from paperlib.artifact import provenance as pv


@pytest.fixture()
def rd(tmp_path, monkeypatch):
    d = tmp_path / "results"
    d.mkdir()
    monkeypatch.setenv(pv.RESULTS_ENV, str(d))
    monkeypatch.setattr(cl, "TABLE2_PATH", tmp_path / "opacus_table2.json")
    return d


def _write(d, name, data, params=None, mode="quick"):
    doc = {"key": "0" * 16, "params": params or {"mode": mode}, "data": data, "provenance": {"mode": mode}}
    (d / name).write_text(json.dumps(doc))


def _claim(cid):
    return next(c for c in cl.CLAIMS if c.id == cid)


def _rec(eps, claim, trials=10000):
    return {"eps_lower": eps, "eps_claimed": claim, "trials": trials, "confidence": 0.95, "delta": 1e-5}


# ---------------------------------------------------------------- Fig. 2
def _fig2(d, easgm_eps, asgm_eps=None):
    pts = []
    for q in (0.005, 0.5):
        for N, e in zip((2, 3, 4, 5), easgm_eps):
            pts.append({"point": {"mechanism": "easgm", "q": q, "N": N, "n": 100}, "results": {"optimal": _rec(e, 0.1)}})
    for q, es in zip((0.5, 0.9), asgm_eps or ((3.0, 2.5, 2.0, 1.5), (5.0, 4.0, 3.5, 3.0))):
        for N, e in zip((2, 3, 4, 5), es):
            pts.append({"point": {"mechanism": "asgm", "q": q, "N": N, "n": 100}, "results": {"optimal": _rec(e, 0.2)}})
    _write(d, "04_fig2_audit.json", {"complete": True, "points": pts})


def test_fig2(rd):
    _fig2(rd, (7.21, 5.8, 6.2, 5.5))  # at the ceiling, then falling with one bump
    r = _claim("C2").evaluate(rd)
    assert r["verdict"] == "reproduced", r
    assert r["mode"] == "quick"
    _fig2(rd, (4.0, 5.0, 6.0, 7.0))  # rises with N
    assert _claim("C2").evaluate(rd)["verdict"] == "not reproduced"
    _fig2(rd, (7.0, 6.0, 5.0, 4.0), asgm_eps=((3.0, 2.5, 2.0, 0.1), (5.0, 4.0, 3.5, 3.0)))  # one point below claim
    assert _claim("C2").evaluate(rd)["verdict"] == "not reproduced"


def test_fig2_all_at_ceiling_is_not_a_violation(rd):
    _fig2(rd, (7.21, 7.2, 7.19, 7.21))
    assert _claim("C2").evaluate(rd)["verdict"] == "reproduced"


# ---------------------------------------------------------------- Fig. 3
def _fig3(d, eps_by_n):
    pts = []
    for mech, q, claim in (("asgm", 0.7, 0.24), ("easgm", 0.05, 0.0144)):
        for n, e in eps_by_n.items():
            pts.append({"point": {"mechanism": mech, "q": q, "N": 4, "n": n}, "results": {"optimal": _rec(e, claim)}})
    _write(d, "05_fig3_audit.json", {"complete": True, "points": pts})


def test_fig3(rd):
    _fig3(rd, {1: 0.0, 10: 0.2, 100: 3.0, 1000: 4.0})  # small n below the claim is allowed
    assert _claim("C3").evaluate(rd)["verdict"] == "reproduced"
    _fig3(rd, {1: 0.0, 10: 0.2, 100: 0.1, 1000: 4.0})
    assert _claim("C3").evaluate(rd)["verdict"] == "not reproduced"
    _fig3(rd, {1: 0.5, 10: 0.9})  # no n >= 100
    assert _claim("C3").evaluate(rd)["verdict"] == "not run"


# ---------------------------------------------------------------- Fig. 4
def _fig4(d, asgm_eps, error=None):
    pts = []
    for panel in ("mnist", "fmnist"):
        for mech, q, claim, e in (("easgm", 0.005, 0.0009, 7.2), ("asgm", 0.7, 0.24, asgm_eps), ("asgm", 0.8, 0.28, 5.0)):
            pts.append({"panel": panel, "method": mech, "impl": "x", "q": q, "error": error,
                        "result": None if error else {"dataset": panel, "mechanism": mech, "eps_claimed": claim,
                                                      "eps_lower": {"optimal": e}, "check": {"passed": True}}})
    _write(d, "06_fig4_real_audit.json", {"points": pts})


def test_fig4(rd):
    _fig4(rd, 4.0)
    assert _claim("C4").evaluate(rd)["verdict"] == "reproduced"
    _fig4(rd, 0.1)
    assert _claim("C4").evaluate(rd)["verdict"] == "not reproduced"
    _fig4(rd, 4.0, error="boom")
    assert _claim("C4").evaluate(rd)["verdict"] == "not run"


# ---------------------------------------------------------------- Fig. 5
def _fig5(d, low_fpr, easgm_full_gap=0.01):
    rows = []
    for n in (26010, 1485217):
        for N, fpr_up, gap_e, gap_a in ((1, 0.0, 1.0, 0.5), (4, 0.0, 1.0, 0.7), (999, low_fpr, 0.6, 0.4),
                                        (59999, 0.49, easgm_full_gap, 0.0)):
            rows.append({"mechanism": "easgm", "n": n, "N": N, "fpr_upper": fpr_up if N > 4 else low_fpr,
                         "fpr_claim": 0.4998, "max_claim_minus_upper": gap_e})
            rows.append({"mechanism": "asgm", "n": n, "N": N, "fpr_upper": 0.49 if N == 59999 else 0.3,
                         "fpr_claim": 0.472, "max_claim_minus_upper": gap_a})
    _write(d, "03_figure5_readout.json", {"fnr": 0.5, "delta": 1e-5, "readout": rows}, {"mode": "quick", "tol_g": 1e-5})


def test_fig5(rd):
    _fig5(rd, 0.05)
    assert _claim("C5").evaluate(rd)["verdict"] == "reproduced"
    _fig5(rd, 0.3)  # no FPR below 0.2 anywhere
    assert _claim("C5").evaluate(rd)["verdict"] == "not reproduced"
    _fig5(rd, 0.05, easgm_full_gap=0.0)  # EASGM on full MNIST not weaker
    assert _claim("C5").evaluate(rd)["verdict"] == "not reproduced"


# ---------------------------------------------------------------- Fig. 6
def test_fig6(rd):
    def w(e):
        _write(rd, "07_fig6_opacus_feasgm.json", {"dataset": "mnist", "error": None, "result": {
            "eps_claimed": 0.174, "eps_lower": {"optimal": e, "normality[chi2,weighted]": e},
            "check": {"passed": True}, "version": "1.6.0", "q": 0.5, "n": 10}})

    w(7.2)
    assert _claim("C6").evaluate(rd)["verdict"] == "reproduced"
    w(0.1)
    assert _claim("C6").evaluate(rd)["verdict"] == "not reproduced"
    _write(rd, "07_fig6_opacus_feasgm.json", {"dataset": "mnist", "error": "no opacus", "result": None})
    assert _claim("C6").evaluate(rd)["verdict"] == "not run"


# ---------------------------------------------------------------- Fig. 7
def test_fig7(rd):
    def w(e_small, e_big):
        _write(rd, "09_multiround_summary.json", {"claim": {"rdp": 0.104, "prv": 0.03},
                                                  "figure7": {"26010": {"eps_upper_bound": e_small},
                                                              "1485217": {"eps_upper_bound": e_big}}})

    w(29.6, 754.0)
    assert _claim("C7").evaluate(rd)["verdict"] == "reproduced"
    w(0.05, 754.0)
    assert _claim("C7").evaluate(rd)["verdict"] == "not reproduced"
    (rd / "09_multiround_summary.json").unlink()
    # fallback to the full figure file
    _write(rd, "09_figure7.json", {"claim": {"rdp": {"eps": 0.104}},
                                   "feasgm": {"26010": {"eps": 29.6}, "1485217": {"eps": 754.0}}})
    assert _claim("C7").evaluate(rd)["verdict"] == "reproduced"


# ---------------------------------------------------------------- Table 2
def _table(path, override=None):
    vers = ["0.9.0", "0.12.0", "0.13.0", "0.14.0", "0.15.0", "1.0.0", "1.5.4", "1.6.0"]
    rels = []
    for v in vers:
        norm, pois = cl.table2_expected(v)
        rels.append({"version": v, "normalisation": (override or {}).get(v, norm), "poisson_usable": pois})
    path.write_text(json.dumps({"first_version": "0.9.0", "paper_last_version": "1.5.4", "releases": rels}))


def test_table2(rd):
    assert cl.table2_expected("0.11.0") == ("A", False)
    assert cl.table2_expected("0.12.0") == ("A", True)
    assert cl.table2_expected("0.15.0") == ("EA", True)
    assert cl.table2_expected("1.5") == ("FEA", True)
    _table(cl.TABLE2_PATH)
    assert _claim("C8").evaluate(rd)["verdict"] == "reproduced"
    _table(cl.TABLE2_PATH, {"0.14.0": "A"})
    assert _claim("C8").evaluate(rd)["verdict"] == "not reproduced"
    _table(cl.TABLE2_PATH, {"1.6.0": "XX"})  # beyond the paper's range: not graded
    assert _claim("C8").evaluate(rd)["verdict"] == "reproduced"


# ---------------------------------------------------------------- missing, grade, main
def test_missing_files_not_run(rd):
    g = cl.grade()
    by = {c["id"]: c for c in g["claims"]}
    assert by["C1"]["verdict"] == "not applicable"
    for cid in ("C2", "C3", "C4", "C5", "C6", "C7", "C8"):
        assert by[cid]["verdict"] == "not run", by[cid]
        assert "missing" in by[cid]["reason"]
    assert g["counts"]["not run"] == 7


def test_missing_keys_not_run(rd):
    _write(rd, "07_fig6_opacus_feasgm.json", {"error": None, "result": {"eps_lower": {}}})
    _write(rd, "09_multiround_summary.json", {"claim": {}})
    by = {c["id"]: c for c in cl.grade(rd)["claims"]}
    assert by["C6"]["verdict"] == "not run"
    assert by["C7"]["verdict"] == "not run"


def test_main_writes_grade_json_and_page(rd, tmp_path, capsys):
    _fig2(rd, (4.0, 5.0, 6.0, 7.0))  # a "not reproduced" claim must not fail the command
    book = tmp_path / "book"
    book.mkdir()
    assert cl.main(["--book-md", str(book / "grade.md")]) == 0
    out = capsys.readouterr().out
    assert "C2" in out and "not reproduced" in out
    g = json.loads((rd / "grade.json").read_text())  # strict JSON
    assert [c["id"] for c in g["claims"]] == [f"C{i}" for i in range(1, 9)]
    md = (book / "grade.md").read_text()
    assert md.startswith("# ") and "| claim | item | verdict | mode | paper | measured |" in md
    assert not list(rd.glob(".*tmp"))


def test_show_prints_without_writing(rd, capsys):
    assert cl.main(["--show"]) == 0
    assert "not run" in capsys.readouterr().out
    assert not (rd / "grade.json").exists()
    assert cl.main(["--no-book"]) == 0
    capsys.readouterr()
    assert cl.main(["--show"]) == 0
    assert "C8" in capsys.readouterr().out


def test_require_is_the_grade_and_can_fail(rd):
    """A notebook's closing check (claims.require) gives the grade's verdict and stops on a failure."""
    with pytest.raises(cl.ClaimNotReproduced, match="no result to grade"):
        cl.require("C5", rd)
    _fig5(rd, 0.05)
    assert cl.require("C5", rd)["verdict"] == "reproduced" == _claim("C5").evaluate(rd)["verdict"]
    _fig5(rd, 0.3)
    with pytest.raises(cl.ClaimNotReproduced, match=r"C5 \(Fig. 5\) not reproduced in quick mode: violated"):
        cl.require("C5", rd)
    # smoke-mode sizes are too small for the statements: the verdict is returned, not raised
    rows = json.loads((rd / "03_figure5_readout.json").read_text())
    _write(rd, "03_figure5_readout.json", rows["data"], {"mode": "smoke", "tol_g": 1e-5}, mode="smoke")
    assert cl.require("C5", rd)["verdict"] == "not reproduced"
    with pytest.raises(ValueError, match="claim_id must be one of"):
        cl.require("C9", rd)
