"""Tests of paperlib.implementations.real_audit, paperlib.audit.audit_outputs and
``python -m paperlib audit-implementation`` (fast: small n, few trials; no real model needed
except in the last, optional end-to-end test)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
from conftest import run_main
import pytest
import torch

from paperlib.mechanisms import sampler as M
from paperlib.audit import audit_distinguishers, audit_outputs
from paperlib.implementations import real_audit as RA

Q, SIGMA, C = 0.5, 10.0, 0.1


def _vectors(N=4, n=40, seed=3):
    return np.random.default_rng(seed).standard_normal((N + 1, n)) * 0.05


def _outputs(mech, v, trials, seed, q=Q):
    g = torch.Generator().manual_seed(seed)
    return {ds: M.sample(mech, v, q, SIGMA, C, ds, trials, g) for ds in ("D", "D'")}


@pytest.mark.parametrize("mech", ["easgm", "asgm", "feasgm"])
def test_check_accepts_the_right_mechanism(mech):
    v = _vectors()
    chk = RA.check_outputs(_outputs(mech, v, 200, 11), v, mech, Q, SIGMA, C, reference_trials=4000, seed=1)
    assert chk["passed"], chk["min_p"]
    assert chk["tests"] == 2 * (v.shape[0] + 1)  # r = N+1 coordinates and the residual, per dataset
    assert chk["threshold"] == pytest.approx(RA.CHECK_LEVEL / chk["tests"])


@pytest.mark.parametrize("run,claim", [("easgm", "asgm"), ("asgm", "easgm"), ("easgm", "feasgm")])
def test_check_rejects_a_wrong_normaliser(run, claim):
    v = _vectors()
    chk = RA.check_outputs(_outputs(run, v, 200, 12), v, claim, Q, SIGMA, C, reference_trials=4000, seed=1)
    assert not chk["passed"]
    assert chk["min_p"] < chk["threshold"]


def test_check_rejects_non_finite_outputs():
    v = _vectors()
    out = _outputs("easgm", v, 50, 1)
    out["D"][0, 0] = float("nan")
    assert not RA.check_outputs(out, v, "easgm", Q, SIGMA, C, reference_trials=100)["passed"]


@pytest.mark.parametrize("mech", ["easgm", "asgm"])
def test_audit_outputs_equals_the_audit_on_the_same_draws(mech):
    v, T, seed = _vectors(N=3, n=30), 400, 7
    dists = ["optimal", "normality"]
    ref = audit_distinguishers(v, mech, Q, 2.0, C, trials=T, distinguishers=dists, seed=seed, path="full")
    g = torch.Generator().manual_seed(seed)
    outs = {ph: {ds: M.sample(mech, v, Q, 2.0, C, ds, cnt, g) for ds, cnt in zip(("D", "D'"), (T // 2, T - T // 2))}
            for ph in ("cal", "count")}
    got = audit_outputs(v, mech, Q, 2.0, C, outs, distinguishers=dists, seed=seed)
    for label in ref:
        a, b = ref[label].to_dict(), got[label].to_dict()
        for k in ("false_positives", "false_negatives", "fpr_ci", "fnr_ci", "eps_lower", "delta_lower", "threshold",
                  "trials", "calibration_trials"):
            assert a[k] == b[k], (label, k)
    # the projected form of the same outputs gives the same counts
    basis = RA.white_box_basis(v, C)
    proj = {ph: {ds: RA.project_outputs(x, basis) for ds, x in side.items()} for ph, side in outs.items()}
    got2 = audit_outputs(v, mech, Q, 2.0, C, proj, distinguishers=dists, seed=seed)
    for label in ref:
        assert got2[label].false_positives == ref[label].false_positives
        assert got2[label].false_negatives == ref[label].false_negatives


def test_audit_outputs_rejects_bad_blocks():
    v = _vectors(N=2, n=10)
    good = np.zeros((5, 10))
    with pytest.raises(ValueError, match="keys 'cal' and 'count'"):
        audit_outputs(v, "easgm", Q, SIGMA, C, {"cal": {}})
    with pytest.raises(ValueError, match="shape"):
        audit_outputs(v, "easgm", Q, SIGMA, C, {"cal": {"D": good, "D'": good},
                                                 "count": {"D": good, "D'": np.zeros((5, 9))}})


def test_audit_implementation_validates_before_loading():
    with pytest.raises(ValueError, match="implementation"):
        RA.audit_implementation("opacus-9", "cnn-mnist", "mnist", N=4, q=0.5, sigma=10, C=0.1, trials=10)
    with pytest.raises(ValueError, match="q"):
        RA.audit_implementation("dpsur", "cnn-mnist", "mnist", N=4, q=1.5, sigma=10, C=0.1, trials=10)
    with pytest.raises(ValueError, match="floor"):
        RA.audit_implementation("opacus-installed", "cnn-mnist", "mnist", N=3, q=0.2, sigma=10, C=0.1, trials=10)


_cli = run_main


BASE = ["audit-implementation", "--implementation", "dpsur", "--model", "cnn-mnist", "--dataset", "mnist",
        "--N", "4", "--q", "0.7", "--sigma", "10", "--C", "0.1", "--trials", "100", "--seed", "0"]


def _with(opt, value):
    argv = list(BASE)
    argv[argv.index(opt) + 1] = value
    return argv


@pytest.mark.parametrize("opt,value", [("--q", "1.5"), ("--q", "0"), ("--sigma", "-1"), ("--C", "0"),
                                       ("--N", "0"), ("--N", "13"), ("--trials", "1"),
                                       ("--implementation", "opacus-1.9"), ("--model", "resnet"),
                                       ("--dataset", "imagenet")])
def test_cli_bad_input_exits_2_with_one_line(opt, value, capsys):
    code, out, err = _cli(_with(opt, value), capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("paperlib: error:")


def test_cli_dataset_unavailable_exits_2_with_one_line(monkeypatch, capsys):
    datasets = pytest.importorskip("paperlib.implementations.datasets")

    def unavailable(*a, **k):
        raise datasets.DatasetUnavailable("MNIST is not on disk and cannot be downloaded (offline).\nsecond line")

    monkeypatch.setattr(RA, "audit_implementation", unavailable)
    code, out, err = _cli(BASE, capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "unavailable" in err and "Traceback" not in err


def test_cli_prints_the_audit_as_json(monkeypatch, capsys):
    fake = {"implementation": "dpsur", "mechanism": "asgm", "path": "implementation-checked + mechanism",
            "normaliser_found": "|B|", "eps_lower": {"optimal": 1.0}, "eps_claimed": 0.5,
            "check": {"passed": True, "min_p": 0.3, "threshold": 1e-4, "tests": 12, "trials": {"D": 50}}}
    monkeypatch.setattr(RA, "audit_implementation", lambda *a, **k: RA.ImplementationAudit.from_json(
        {f.name: None for f in dataclasses.fields(RA.ImplementationAudit)} | fake))
    code, out, err = _cli(BASE, capsys)
    assert code == 0
    d = json.loads(out)
    assert d["normaliser_found"] == "|B|" and d["path"].startswith("implementation-checked")
    assert d["eps_lower"] == {"optimal": 1.0} and d["check"]["passed"]
