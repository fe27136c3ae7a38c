"""bench/device_check.py (``make device-check``): the smoke run on the CPU, its report, its
comparisons' power, and its table of full-mode work against the notebooks' own parameters.

The script is run as a subprocess (nothing imports it). With ``DEVICE=cpu`` its "device"
side is the CPU with another seed, so the comparisons run and could fail.
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG_GUARD_S

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
    for name in ("04_audit_figure2", "05_audit_figure3", "06_audit_real_figure4", "07_opacus_feasgm_figure6"):
        assert nbs[name]["partial_estimate_s"] > 0 and nbs[name]["representative"] is False
        assert "NOT the full-mode cost" in nbs[name]["basis"]
    w4 = nbs["04_audit_figure2"]["work"]
    assert [w["points"] for w in w4] == [44, 12, 3] and all(w["rounds_per_point"] == 20_000 for w in w4)
    assert sum(w["points"] for w in nbs["06_audit_real_figure4"]["work"]) == 20 + 2  # + the seed spread
    assert nbs["01_tradeoff_basics"]["estimate_s"] is None  # no device path, no full-mode record here
    tot = rep["make_all_full"]
    assert tot["estimate_s"] is None and "01_tradeoff_basics" in tot["not_measured"]
    assert "not measured" in md
    for pid in DEVICE_PATHS + CPU_PATHS:  # the report names every path it would run
        assert f"`{pid.replace('|', chr(92) + '|')}`" in md and pid in out
    assert md.count("| cpu (cuda) |") == len(DEVICE_PATHS)


def test_full_mode_estimate_on_16_workers(smoke):
    """The real steps of notebooks 06/07 on 16 workers (and one GPU where measured), by costs.full_mode_estimate."""
    par = smoke["report"]["full_mode_parallel"]
    est = par["estimate"]
    assert par["workers"] == 16 and par["gpus"] == 0 and par["missing"] == []  # no GPU here: CPU workers only
    assert "no GPU measured" in par["note"] and "not representative" in par["note"]
    # 06: 22 audits (20 points and the seed spread's 2), 07: 2, each 2 x 10,000 steps
    assert est["steps"] == (22 + 2) * 20_000 and est["seconds"] > 0
    assert est["seconds"] == pytest.approx(est["cpu_step_seconds"] / 16 + est["overhead_s"])
    assert par["meets_budget"] == (est["seconds"] <= par["budget_s"])
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
def _top_level(nb: str) -> dict:
    """Top-level assignments of a notebook: ``{name: ast value}`` (tuple targets unpacked)."""
    tree = ast.parse((ROOT / "notebooks" / f"{nb}.py").read_text(encoding="utf-8"))
    out = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for t in node.targets:
            if isinstance(t, ast.Name):
                out[t.id] = node.value
            elif isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple):
                for n, v in zip(t.elts, node.value.elts):
                    if isinstance(n, ast.Name):
                        out[n.id] = v
    return out


def _full(node):
    """The value a notebook has in full mode: ``pf.pick(..., full=X)`` -> X, else the literal."""
    if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "pick":
        return ast.literal_eval(next(k.value for k in node.keywords if k.arg == "full"))
    return ast.literal_eval(node)


def _lists(x):
    return json.loads(json.dumps(x))  # tuples -> lists, as the script's JSON has them


@pytest.fixture(scope="module")
def counts():
    r = _run(["--counts"], timeout=HANG_GUARD_S)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_counts_cover_every_notebook(counts):
    assert sorted(set(counts["params"]) | set(counts["host_only"])) == NOTEBOOKS
    assert not set(counts["params"]) & set(counts["host_only"])


def test_counts_match_notebook_04(counts):
    p, a = counts["params"]["04_audit_figure2"], _top_level("04_audit_figure2")
    for k in ("TRIALS", "N_VALUES", "Q_EASGM", "Q_ASGM", "N_DIM", "SIGMA", "C", "DELTA"):
        assert _lists(_full(a[k])) == p[k], k
    assert ast.unparse(a["SENS_N"]) == "N_VALUES if MODE == 'full' else [3]"
    settings = next(n for n in ast.walk(a["SENS_POINTS"]) if isinstance(n, ast.Tuple) and len(n.elts) == 3)
    assert _lists(ast.literal_eval(settings)) == p["SENS_SETTINGS"]
    from paperlib.audit import AGGREGATIONS, NORMALITY_TESTS

    src = (ROOT / "notebooks" / "04_audit_figure2.py").read_text(encoding="utf-8")
    assert "for t in A.NORMALITY_TESTS for ag in A.AGGREGATIONS}" in src and 'SPECS["optimal"] = "optimal"' in src
    assert p["SENS_DISTINGUISHERS"] == len(NORMALITY_TESTS) * len(AGGREGATIONS) + len(AGGREGATIONS) + 1
    work = counts["work"]["04_audit_figure2"]
    assert work[0]["points"] == len(p["N_VALUES"]) * (len(p["Q_EASGM"]) + len(p["Q_ASGM"])) == 44
    assert work[1]["points"] == len(p["N_VALUES"]) * len(p["SENS_SETTINGS"]) == 12
    assert all(w["rounds_per_point"] == 2 * p["TRIALS"] for w in work)


def test_counts_match_notebook_05(counts):
    p, a = counts["params"]["05_audit_figure3"], _top_level("05_audit_figure3")
    for k in ("TRIALS", "N_SET", "SIGMA", "C", "DELTA", "N_DIMS", "SETTINGS"):
        assert _lists(_full(a[k])) == p[k], k
    common = a["COMMON"]
    dists = next(v for k, v in zip(common.keys, common.values) if ast.literal_eval(k) == "distinguishers")
    assert len(ast.literal_eval(dists)) == p["DISTINGUISHERS"]
    assert counts["work"]["05_audit_figure3"][0]["points"] == len(p["SETTINGS"]) * len(p["N_DIMS"]) == 18


def test_counts_match_notebooks_06_07(counts):
    p, a = counts["params"]["06_audit_real_figure4"], _top_level("06_audit_real_figure4")
    assert ast.unparse(a["AUDIT_MODE"]) == "'full' if MODE == 'full' else 'quick'"
    for k in ("TRIALS", "N", "SIGMA", "C", "MODEL_OF", "PAPER_MODEL_OF", "PAPER_MODEL_PANELS"):
        assert _lists(_full(a[k])) == p[k], k
    assert list(ast.literal_eval(a["DATASETS"])) == p["DATASETS"]
    assert _lists(ast.literal_eval(a["METHODS"])) == p["METHODS"]
    # the notebook's own model_for, run in full mode, picks the model the work list counts
    src = (ROOT / "notebooks" / "06_audit_real_figure4.py").read_text(encoding="utf-8")
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "model_for")
    env = {"PAPER_MODEL_OF": p["PAPER_MODEL_OF"], "PAPER_MODEL_PANELS": tuple(p["PAPER_MODEL_PANELS"]),
           "MODEL_OF": p["MODEL_OF"]}
    exec(compile(ast.Module([fn], []), "model_for", "exec"), env)
    want = [(ds, label, impl, q, env["model_for"](ds, label)) for ds in p["DATASETS"] for label, impl, q in p["METHODS"]]
    want = [w for w in want if w[4] is not None]
    w = counts["work"]["06_audit_real_figure4"]
    assert [(x["implementation"], x["model"]) for x in w[:-1]] == [(impl, m) for _, _, impl, _, m in want]
    assert len(w) == len(want) + 1 == 21 and all(x["rounds_per_point"] == 20_000 for x in w)
    p, a = counts["params"]["07_opacus_feasgm_figure6"], _top_level("07_opacus_feasgm_figure6")
    assert ast.unparse(a["AUDIT_MODE"]) == "'full' if MODE == 'full' else 'quick'"
    for k in ("TRIALS", "N", "Q", "SIGMA", "C", "MODEL"):
        assert _lists(_full(a[k])) == p[k], k
    src = (ROOT / "notebooks" / "07_opacus_feasgm_figure6.py").read_text(encoding="utf-8")
    # chapter 7 audits Opacus 1.0.2 (the paper's release) and the installed Opacus on MODEL
    assert 'for impl in ("opacus-1.0.2", "opacus-installed"):' in src and "impl, MODEL, DATASET" in src
    loop = "for impl in (" + ", ".join(f'"{i}"' for i in p["IMPLEMENTATIONS"]) + "):"
    assert loop in src, loop
    w7 = counts["work"]["07_opacus_feasgm_figure6"]
    assert [x["implementation"] for x in w7] == p["IMPLEMENTATIONS"] == ["opacus-1.0.2", "opacus-installed"]
    assert all(x["model"] == p["MODEL"] and x["rounds_per_point"] == 2 * p["TRIALS"] for x in w7)
