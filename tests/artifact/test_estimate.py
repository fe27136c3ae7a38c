"""The one full-mode estimate: summed per notebook from the audits' own measured costs."""

import json

import pytest

from paperlib.artifact import estimate as E


def _audit(s, impl="opacus-0.15.0", q=0.5, trials=10_000, per_step=0.5):
    return {"implementation": impl, "model": "cnn-mnist", "q": q, "full_mode_estimate_s": s, "seconds": 1.0,
            "seconds_per_step": per_step, "trials": trials}


def test_seconds_sums_each_audit_once_and_counts_the_missing():
    a = _audit(100.0)
    assert E.seconds([a, a, _audit(50.0, q=0.005), None, _audit(None, impl="dpsur")]) == (150.0, 1)
    assert E.seconds([]) == (0.0, 0)
    # a smoke run's 1,000-trial game is scaled to full mode's 10,000 trials
    assert E.seconds([_audit(30.0, trials=1_000)]) == (pytest.approx(300.0), 0)
    # spread over workers by the one schedule model (costs.full_mode_estimate: CPU steps / workers)
    assert E.seconds([a, _audit(50.0, q=0.005)], workers=4) == (pytest.approx(37.5), 0)
    with pytest.raises(ValueError, match="workers"):
        E.seconds([a], workers=0)


def _write(rd, name, data, mode="quick", hw=None):
    (rd / name).write_text(json.dumps({"params": {"mode": mode}, "data": data}))


def test_full_mode_estimate_reads_the_notebooks_results(tmp_path):
    rd = tmp_path
    (rd / "runs").mkdir()
    _write(rd, "06_fig4_real_audit.json", {"points": [{"result": _audit(3600.0)}, {"result": _audit(1800.0, q=0.7)},
                                                      {"result": None}]})
    r07 = _audit(600.0, impl="opacus-installed")
    _write(rd, "07_fig6_opacus_feasgm.json", {"result": r07, "installed": r07})  # the installed one stands in
    (rd / "runs" / "notebook-06_audit_real_figure4-quick.json").write_text(json.dumps(
        {"hardware": {"cores": 2, "cpu": "AMD EPYC", "ram_gib": 23.5, "gpu": "none"}}))
    est = E.notebook_estimates(rd)
    assert set(est["notebooks"]) == {"06_audit_real_figure4", "07_opacus_feasgm_figure6"}
    assert est["notebooks"]["06_audit_real_figure4"]["seconds"] == pytest.approx(5400.0)
    assert est["notebooks"]["07_opacus_feasgm_figure6"]["seconds"] == pytest.approx(600.0)
    assert est["total_s"] == pytest.approx(6000.0)
    assert est["total_reference_s"] == pytest.approx(6000.0 / E.REFERENCE_WORKERS)
    text = E.estimate_text(est)
    assert text.startswith("about 1 h 40 min in all in one process, or about 6 min spread over 16 CPU workers "
                           "(`WORKERS=16`).\n  - 06_audit_real_figure4: 1 h 30 min, from its quick run on 2 cores "
                           "of AMD EPYC, 23.5 GiB RAM, no GPU.")
    assert "  - 07_opacus_feasgm_figure6: 10 min, from its quick run on hardware not recorded." in text


def test_no_results_no_number(tmp_path):
    est = E.notebook_estimates(tmp_path)
    assert est["total_s"] is None and E.estimate_text(est).startswith("not estimated yet")


def test_full_trials_are_the_settings():
    from paperlib.artifact.grading.setting import SETTINGS

    assert {SETTINGS[c].trials for c in ("C4", "C6", "X1")} == {E.FULL_TRIALS}
