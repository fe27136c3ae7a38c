"""bench/device_check.py (``make device-check``): the smoke run on the CPU, its report, its
comparisons' power, and its table of full-mode work against the notebooks' own parameters.

The script is run as a subprocess (nothing imports it). With ``DEVICE=cpu`` its "device"
side is the CPU with another seed, so the comparisons run and could fail.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG_GUARD_S

from paperlib.artifact.nbparams import notebook_params

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "device_check.py"
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9]*.py"))

DEVICE_PATHS = [
    "mechanisms.sampler.iter_samples",
    "mechanisms.sampler.iter_projected",
    "audit.components.WhiteBoxModel.project",
    "audit.distinguishers.OptimalDistinguisher",
    "audit.distinguishers.NormalityDistinguisher[chi2]",
    "audit.distinguishers.NormalityDistinguisher[ks]",
    "audit.distinguishers.NormalityDistinguisher[normaltest]",
    "audit.game.audit_distinguishers[projected, nb04 Figure 2]",
    "audit.game.audit_distinguishers[projected, nb05 Figure 3]",
    "audit.game.audit_distinguishers[full, nb04 normality tests]",
]
CPU_PATHS = [f"implementations.runners.run_steps[{i}]" for i in ("opacus-installed", "opacus-1.0.2", "opacus-0.15.0",
                                                                  "opacus-0.13.0", "dpsur")]
CPU_PATHS += ["implementations.real_audit.audit_implementation[06]",
              "implementations.real_audit.audit_implementation[07]"]
RELEASE_PATHS = {"implementations.runners.run_steps[opacus-0.15.0]", "implementations.runners.run_steps[opacus-0.13.0]",
                 "implementations.runners.run_steps[opacus-1.0.2]"}


def _run(args=(), timeout=HANG_GUARD_S, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("MODE", "DEVICE", "SEED")}
    e.update(env)
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env=e, cwd=str(ROOT))


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    res = tmp_path_factory.mktemp("results")
    # hang guard only (>= 10x the smoke run's typical 1-2 minutes on a loaded 2-core machine); no time is asserted
    r = _run(timeout=1800, MODE="smoke", DEVICE="cpu", SEED="0", PAPERLIB_RESULTS=str(res), DEVICE_CHECK_BUDGET_S="1800")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return {"proc": r, "report": json.loads((res / "device_check.json").read_text()),
            "md": (res / "device_check.md").read_text()}


def test_smoke_run_passes(smoke):
    rep = smoke["report"]
    assert rep["wall_s"] > 0
    assert (rep["mode"], rep["device"], rep["seed"]) == ("smoke", "cpu", 0)
    assert rep["passed"] is True and rep["failed"] == []
    assert "device check passed (CPU only: no GPU tested)" in smoke["proc"].stdout


def test_every_path_has_status_timing_and_extrapolation(smoke):
    rep = smoke["report"]
    by_id = {e["id"]: e for e in rep["paths"]}
    assert sorted(by_id) == sorted(DEVICE_PATHS + CPU_PATHS)
    assert rep["cuda_paths"] == DEVICE_PATHS
    assert sorted(rep["cpu_only_paths"]) == sorted(CPU_PATHS)
    for pid, e in by_id.items():
        assert e["status"] in ("ok", "skipped"), (pid, e.get("error"), e.get("note"))
        assert "full_mode_s" in e["extrapolation"] and e["extrapolation"]["basis"], pid
        if pid in DEVICE_PATHS:
            # named as a CUDA path, run on the CPU here, compared (CPU with CPU, another seed)
            assert (e["device_support"], e["ran_on"], e["would_run_on_gpu"]) == ("device", "cpu", "cuda"), pid
            assert e["status"] == "ok", pid
        else:
            assert e["ran_on"] == "cpu" and e["would_run_on_gpu"] == "cpu" and "no device" in e["cpu_only_reason"]
            if e["status"] == "skipped":  # only an old release missing from the offline cache may be skipped
                assert pid in RELEASE_PATHS or "opacus-0.15.0" in json.dumps(e["sizes"]), pid
                assert "cache" in e["note"], pid
                continue
        t = e["timing"]
        assert t["seconds"] >= 0 and t["per_trial_s"] is not None, pid
        if pid in DEVICE_PATHS:
            assert t["per_trial_s"] > 0, pid
            assert e["extrapolation"]["full_mode_s"] > 0, pid
            assert e["extrapolation"]["full_mode_rounds"] > 0, pid
            assert e["comparison"]["passed"] is True, pid
            kinds = {c["kind"] for c in e["comparison"]["checks"]}
            assert kinds & {"ks-2samp", "exact", "equal", "clopper-pearson-overlap"}, pid
        else:
            assert e["comparison"]["checks"][0]["kind"] == "normaliser-detection", pid


def test_comparisons_ran_and_their_numbers_are_sane(smoke):
    by_id = {e["id"]: e for e in smoke["report"]["paths"]}
    samp = by_id["mechanisms.sampler.iter_samples"]["comparison"]["checks"]
    exact = next(c for c in samp if c["kind"] == "exact")
    ks = next(c for c in samp if c["kind"] == "ks-2samp")
    assert exact["max_rel_diff"] <= 1e-12  # CPU against CPU: the same draws give the same round
    assert ks["tests"] == 2 * 7 and ks["threshold"] == pytest.approx(1e-3 / 14)
    assert 0 < ks["min_p"] <= 1  # other seed on the "device" side: genuinely different draws
    proj = by_id["mechanisms.sampler.iter_projected"]["comparison"]["checks"]
    assert any("residual" in k for k in next(c for c in proj if c["kind"] == "ks-2samp")["p_values"])
    assert any("sampled residual (0)" in k for k in next(c for c in proj if c["kind"] == "exact")["rel_diff"])
    audit = by_id["audit.game.audit_distinguishers[full, nb04 normality tests]"]
    assert audit["sizes"]["path"] == "full" and audit["sizes"]["distinguishers"] == 9
    assert by_id["audit.game.audit_distinguishers[projected, nb05 Figure 3]"]["sizes"]["path"] == "projected"
    ov = audit["comparison"]["checks"][0]["distinguishers"]
    assert len(ov) == 9 and all(v["reference"][0] <= v["reference"][1] for v in ov.values())


def test_notebook_extrapolation_and_tables(smoke):
    rep, md, out = smoke["report"], smoke["md"], smoke["proc"].stdout
    nbs = {n["notebook"]: n for n in rep["notebooks"]}
    assert sorted(nbs) == NOTEBOOKS
    for name in ("04_audit_figure2", "05_audit_figure3", "06_audit_real_figure4", "07_opacus_feasgm_figure6",
                 "11_the_fix"):
        assert nbs[name]["partial_estimate_s"] > 0 and nbs[name]["representative"] is False
        assert "NOT the full-mode cost" in nbs[name]["basis"]
    w4 = nbs["04_audit_figure2"]["work"]
    assert [w["points"] for w in w4] == [44, 12, 3] and all(w["rounds_per_point"] == 20_000 for w in w4)
    assert sum(w["points"] for w in nbs["06_audit_real_figure4"]["work"]) == 22 + 2  # + the seed spread
    assert nbs["01_tradeoff_basics"]["estimate_s"] is None  # no device path, no full-mode record here
    tot = rep["make_all_full"]
    assert tot["estimate_s"] is None and "01_tradeoff_basics" in tot["not_measured"]
    assert "not measured" in md
    for pid in DEVICE_PATHS + CPU_PATHS:  # the report names every path it would run
        assert f"`{pid.replace('|', chr(92) + '|')}`" in md and pid in out
    assert md.count("| cpu (cuda) |") == len(DEVICE_PATHS)


def test_full_mode_estimate_on_16_workers(smoke):
    """The real steps of notebooks 06, 07 and 11 on 16 workers (and one GPU where measured), by costs.full_mode_estimate."""
    par = smoke["report"]["full_mode_parallel"]
    est = par["estimate"]
    assert par["workers"] == 16 and par["gpus"] == 0  # no GPU here: CPU workers only
    # an audit lacks a measured cost only where its old release could not be installed here (offline, no wheel
    # cache: the release's step path is then skipped with that reason), never for another reason
    skipped = {e["id"].split("[")[1].rstrip("]") for e in smoke["report"]["paths"]
               if e["id"] in RELEASE_PATHS and e["status"] == "skipped"}
    assert all(any(f"{impl} on " in m for impl in skipped) for m in par["missing"]), (par["missing"], skipped)
    assert "no GPU measured" in par["note"] and "not representative" in par["note"]
    # 06: 24 audits (22 points and the seed spread's 2), 07: 2, 11: 1 (the fixed step; the release's audit is
    # chapter 7's), each 2 x 10,000 steps; the estimate counts the steps of every audit with a measured cost
    # (the installed Opacus, which also prices the fixed step, and DPSUR always have one)
    real = ("06_audit_real_figure4", "07_opacus_feasgm_figure6", "11_the_fix")
    work = [w for n in smoke["report"]["notebooks"] if n["notebook"] in real for w in n["work"]]
    assert sum(w["points"] for w in work) == 24 + 2 + 1 and all(w["rounds_per_point"] == 20_000 for w in work)
    [fix] = [w for w in work if w["implementation"] == "opacus-installed+fix"]
    assert fix["what"] not in par["missing"] and fix["measured_model"] in ("tiny", fix["model"])
    assert len(par["missing"]) < len(work)
    assert est["steps"] == sum(w["points"] * 20_000 for w in work if w["what"] not in par["missing"])
    assert est["seconds"] > 0
    assert est["seconds"] == pytest.approx(est["cpu_step_seconds"] / 16 + est["overhead_s"])
    assert par["meets_budget"] == (not par["missing"] and est["seconds"] <= par["budget_s"])  # unmeasured: not met
    assert "full_mode_estimate" in smoke["md"] and "16 workers" in smoke["md"]


def test_self_test_rejects_planted_discrepancies():
    r = _run(["--self-test"], timeout=HANG_GUARD_S)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(r.stdout)
    assert len(res) == 10 and all(res.values()), res


@pytest.mark.parametrize("env, msg", [({"MODE": "huge", "DEVICE": "cpu"}, "MODE='huge' is not allowed"),
                                      ({"MODE": "smoke", "DEVICE": "tpu"}, "DEVICE='tpu' is not allowed"),
                                      ({"MODE": "smoke", "DEVICE": "cpu", "SEED": "x"}, "SEED='x' must be an integer"),
                                      ({"MODE": "smoke", "DEVICE": "cpu", "DEVICE_CHECK_BUDGET_S": "-5"},
                                       "DEVICE_CHECK_BUDGET_S='-5' must be a number of seconds > 0")])
def test_bad_settings_are_one_line(env, msg, tmp_path):
    r = _run(timeout=HANG_GUARD_S, PAPERLIB_RESULTS=str(tmp_path), **env)
    assert r.returncode == 2
    assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "device_check.json").exists()


def test_cuda_without_a_gpu_is_refused(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    r = _run(timeout=HANG_GUARD_S, MODE="smoke", DEVICE="cuda", PAPERLIB_RESULTS=str(tmp_path))
    assert r.returncode == 2 and "torch.cuda.is_available() is False" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------------------- the table of full-mode work
def _lists(x):
    return json.loads(json.dumps(x))  # tuples -> lists, as the script's JSON has them


def _nb(nb: str, mode: str = "full") -> dict:
    return _lists(notebook_params(nb, mode))


@pytest.fixture(scope="module")
def counts():
    r = _run(["--counts"], timeout=HANG_GUARD_S)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_counts_cover_every_notebook(counts):
    assert sorted(set(counts["params"]) | set(counts["host_only"])) == NOTEBOOKS
    assert not set(counts["params"]) & set(counts["host_only"])


def test_params_are_the_notebooks_full_mode(counts):
    """Every value the script uses is the notebook's own, in full mode (nothing copied into the script)."""
    for nb, p in counts["params"].items():
        full = _nb(nb)
        assert p == {k: full[k] for k in p}, nb
        assert p != {k: _nb(nb, "smoke")[k] for k in p}, nb  # the smoke values differ: the mode is read
    src = SCRIPT.read_text(encoding="utf-8")
    assert "10_000" not in src.split("# ============================================================================ settings")[0]
    # the audit notebooks share sigma and C, the script's SIGMA, C
    assert {(_nb(nb)["SIGMA"], _nb(nb)["C"]) for nb in counts["params"]} == {(10.0, 0.1)}


def test_counts_match_notebook_04(counts):
    from paperlib.audit import AGGREGATIONS, NORMALITY_TESTS, normality_test_specs

    p = _nb("04_audit_figure2")
    assert p["TRIALS"] == 10_000 and p["SENS_N"] == p["N_VALUES"]
    src = (ROOT / "notebooks" / "04_audit_figure2.py").read_text(encoding="utf-8")
    # the notebook's sweeps are built from the names the script reads
    assert "for (m, q) in SENS_SETTINGS for N in SENS_N]" in src and "SPECS = A.normality_test_specs()" in src
    assert '"distinguishers": DISTINGUISHERS}' in src
    work = counts["work"]["04_audit_figure2"]
    assert work[0]["points"] == len(p["N_VALUES"]) * (len(p["Q_EASGM"]) + len(p["Q_ASGM"])) == 44
    assert work[1]["points"] == len(p["SENS_N"]) * len(p["SENS_SETTINGS"]) == 12
    assert all(w["rounds_per_point"] == 2 * p["TRIALS"] for w in work)
    n_specs = len(normality_test_specs())
    assert n_specs == len(NORMALITY_TESTS) * len(AGGREGATIONS) + len(AGGREGATIONS) + 1 == 9
    assert f"{n_specs} distinguishers" in work[1]["what"] and f"{len(p['DISTINGUISHERS'])} distinguishers" in work[0]["what"]


def test_counts_match_notebook_05(counts):
    p = _nb("05_audit_figure3")
    src = (ROOT / "notebooks" / "05_audit_figure3.py").read_text(encoding="utf-8")
    assert '"distinguishers": DISTINGUISHERS}' in src and "for (m, q) in SETTINGS for n in N_DIMS]" in src
    work = counts["work"]["05_audit_figure3"]
    assert work[0]["points"] == len(p["SETTINGS"]) * len(p["N_DIMS"]) == 18
    assert all(f"{len(p['DISTINGUISHERS'])} distinguishers" in w["what"] for w in work) and len(p["DISTINGUISHERS"]) == 3


def test_counts_match_notebooks_06_07(counts):
    from paperlib.artifact.figure4 import model_for

    p = _nb("06_audit_real_figure4")
    assert p["AUDIT_MODE"] == "full"  # every round an implementation step
    src = (ROOT / "notebooks" / "06_audit_real_figure4.py").read_text(encoding="utf-8")
    assert "def " not in src.split("# ## 1. The data points")[0]  # model_for is paperlib's, not the notebook's
    assert "figure4.model_for(name, label, model_of=MODEL_OF, paper_model_of=PAPER_MODEL_OF," in src
    kw = {"model_of": p["MODEL_OF"], "paper_model_of": p["PAPER_MODEL_OF"], "paper_model_panels": p["PAPER_MODEL_PANELS"]}
    want = [(impl, model_for(ds, label, **kw)) for ds in p["DATASETS"] for label, impl, _ in p["METHODS"]]
    want = [w for w in want if w[1] is not None]
    w = counts["work"]["06_audit_real_figure4"]
    assert [(x["implementation"], x["model"]) for x in w[:-1]] == want
    assert len(w) == len(want) + 1 == 23 and all(x["rounds_per_point"] == 2 * p["TRIALS"] == 20_000 for x in w)
    p = _nb("07_opacus_feasgm_figure6")
    assert p["AUDIT_MODE"] == "full"
    src = (ROOT / "notebooks" / "07_opacus_feasgm_figure6.py").read_text(encoding="utf-8")
    # chapter 7 audits Opacus 1.0.2 (the paper's release) and the installed Opacus on MODEL, one per IMPLEMENTATIONS
    assert src.count("for impl in IMPLEMENTATIONS:") == 2 and "impl, MODEL, DATASET" in src
    w7 = counts["work"]["07_opacus_feasgm_figure6"]
    assert [x["implementation"] for x in w7] == p["IMPLEMENTATIONS"] == ["opacus-1.0.2", "opacus-installed"]
    assert all(x["model"] == p["MODEL"] and x["rounds_per_point"] == 2 * p["TRIALS"] for x in w7)


def test_timed_steps_use_the_notebooks_models_and_settings():
    """The models and (N, q) of each implementation's timed steps are those its notebook audits."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import device_check as dc
    finally:
        sys.path.remove(str(SCRIPT.parent))
    p6, p7 = notebook_params("06_audit_real_figure4"), notebook_params("07_opacus_feasgm_figure6")
    assert {i: dc.full_models(i) for i in ("opacus-installed", "opacus-1.0.2", "opacus-0.15.0", "dpsur")} == {
        "opacus-installed": [p7["MODEL"]], "opacus-1.0.2": [p7["MODEL"]],
        "opacus-0.15.0": ["cnn-mnist", "cnn-cifar10", "dpfeta-mnist", "privimage-mnist", "privimage-cifar10"],
        "dpsur": ["cnn-mnist", "cnn-cifar10"]}
    assert dc.full_models("opacus-0.13.0") == [dc.ASGM_RELEASE_MODEL]  # in no notebook
    for impl in p7["IMPLEMENTATIONS"]:
        assert dc.STEP_SETTING[impl] == (p7["N"], p7["Q"])
    for impl in ("opacus-0.15.0", "dpsur"):
        N, q = dc.STEP_SETTING[impl]
        assert N == p6["N"] and any(m[1:] == (impl, q) for m in p6["METHODS"]), impl
    assert (dc.SIGMA, dc.C) == (p6["SIGMA"], p6["C"])
