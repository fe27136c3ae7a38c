"""Tests of the command line ``python -m paperlib tradeoff|epsilon`` (paperlib.cli).

Two tests run the real module in a subprocess (sys.executable); the rest call
``paperlib.cli.main`` in-process and read stdout/stderr with capsys. The SGM claim's
epsilon is compared with an independent computation: THEORY.md section 3's
direction-1 formula q * delta_G(eps') and a numerical supremum for direction 2,
written out here from the closed form f_q = q G_{1/sigma} + (1 - q) Id.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
from conftest import run_main
import pytest
from scipy import optimize
from scipy.stats import norm


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = ["--mechanism", "easgm", "--bound", "guarantee", "--N", "3", "--q", "0.5", "--sigma", "2", "--n", "20"]


run = run_main  # main(argv) -> (exit code, stdout, stderr)


def with_opt(name, value, base=BASE):
    argv = list(base)
    i = argv.index(name)
    argv[i + 1] = value
    return argv


# --------------------------------------------------------------------------- subprocess
def test_subprocess_tradeoff_published_point():
    p = subprocess.run([sys.executable, "-m", "paperlib", "tradeoff", *BASE, "--alpha", "0.1"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["alpha"] == [0.1]
    assert abs(out["beta"][0] - 0.3097) <= 0.002  # the number (index revealed)
    assert out.get("max_error", 0.0) <= 1e-6  # absent when solved exactly per alpha
    assert out["method"].startswith(("exact", "sampled"))
    assert abs(out["sgm_claim_beta"][0] - 0.841) <= 0.0005
    assert p.stdout.count("\n") == 1  # one JSON object on one line


def test_subprocess_bad_alpha_exits_2_with_one_line():
    p = subprocess.run([sys.executable, "-m", "paperlib", "tradeoff", *BASE, "--alpha", "2"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "alpha" in lines[0] and "[0, 1]" in lines[0]


# --------------------------------------------------------------------------- in-process
def test_tradeoff_several_alphas_and_bounds(capsys):
    code, out, err = run(["tradeoff", *BASE, "--alpha", "0.05", "0.1", "0.5"], capsys)
    assert code == 0 and err == ""
    res = json.loads(out)
    assert len(res["beta"]) == 3 and res["beta"] == sorted(res["beta"], reverse=True)
    assert abs(res["beta"][1] - 0.3097) <= 0.002
    # the upper bound (Theorem 3.8) lies above
    code, out, _ = run(["tradeoff", *with_opt("--bound", "upper"), "--alpha", "0.05", "0.1", "0.5"], capsys)
    up = json.loads(out)
    assert code == 0 and all(u >= b for u, b in zip(up["beta"], res["beta"]))
    # FEASGM reports its floors and case
    code, out, _ = run(["tradeoff", *with_opt("--mechanism", "feasgm"), "--alpha", "0.1"], capsys)
    fe = json.loads(out)
    assert code == 0 and (fe["K"], fe["K_prime"], fe["case"]) == (1, 2, "floors differ")


def sgm_claim_delta_independent(eps, q, sigma):
    """delta(eps) of f_q for the ordered pair, both directions (THEORY.md sections 1, 3).

    Direction 1: q * delta_G(eps') with e^eps' = 1 + (e^eps - 1)/q (Balle-Wang for G).
    Direction 2: sup_a 1 - a - e^eps f_q(a), by a grid in log10(a) then bounded Brent
    (the objective is concave in a, so the maximum's error is second order).
    """
    mu = 1 / sigma
    ep = math.log1p(math.expm1(eps) / q)
    d1 = q * (norm.cdf(-ep / mu + mu / 2) - math.exp(ep) * norm.cdf(-ep / mu - mu / 2))

    def h(a):
        a = np.asarray(a, float)
        f = q * norm.cdf(norm.isf(a) - mu) + (1 - q) * (1 - a)
        return 1 - a - math.exp(eps) * f

    grid = np.linspace(-300, 0, 6001)
    vals = h(10.0**grid)
    i = int(np.argmax(vals))
    res = optimize.minimize_scalar(lambda g: -float(h(10.0**g)), bounds=(grid[max(i - 1, 0)], grid[min(i + 1, 6000)]),
                                   method="bounded", options={"xatol": 1e-13})
    d2 = max(-res.fun, float(vals[i]))
    return max(d1, d2, 0.0)


@pytest.mark.parametrize("q,sigma,delta", [(0.5, 2.0, 1e-5), (0.01, 1.0, 1e-5), (0.3, 0.8, 1e-3)])
def test_epsilon_claimed_matches_independent_profile(capsys, q, sigma, delta):
    argv = ["epsilon", *with_opt("--sigma", str(sigma), with_opt("--q", str(q))), "--delta", str(delta), "--claimed"]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    res = json.loads(out)
    assert res["delta"] == delta and res["bound"] == "claim"
    eps = res["epsilon"]
    ref = optimize.brentq(lambda e: sgm_claim_delta_independent(e, q, sigma) - delta, 1e-9, 60, xtol=1e-12)
    assert eps == pytest.approx(ref, rel=1e-6)


def test_epsilon_of_guarantee_exceeds_claim(capsys):
    code, out, _ = run(["epsilon", *BASE, "--delta", "1e-5"], capsys)
    g = json.loads(out)
    code2, out2, _ = run(["epsilon", *BASE, "--delta", "1e-5", "--claimed"], capsys)
    c = json.loads(out2)
    assert code == code2 == 0
    assert set(g) >= {"epsilon", "delta"} and g["delta"] == 1e-5
    # the guarantee is weaker than the claim, so its epsilon is larger
    assert g["epsilon"] > c["epsilon"] > 0


# --------------------------------------------------------------------------- bad input
BAD = [
    ("--q", "0", "q", r"(0, 1]"),
    ("--q", "1.5", "q", r"(0, 1]"),
    ("--q", "nan", "q", r"(0, 1]"),
    ("--sigma", "0", "sigma", "> 0"),
    ("--sigma", "-1", "sigma", "> 0"),
    ("--N", "0", "N", ">= 1"),
    ("--N", "2.5", "--N", "int"),
    ("--n", "0", "n", ">= 1"),
    ("--n", "1.5", "--n", "int"),
]


@pytest.mark.parametrize("opt,value,name,rng", BAD)
@pytest.mark.parametrize("command", ["tradeoff", "epsilon"])
def test_invalid_parameters_exit_2_naming_them(capsys, command, opt, value, name, rng):
    tail = ["--alpha", "0.1"] if command == "tradeoff" else ["--delta", "1e-5"]
    code, out, err = run([command, *with_opt(opt, value), *tail], capsys)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert name in lines[0] and rng in lines[0], lines[0]


@pytest.mark.parametrize("value", ["0", "1", "1.5", "-1e-5"])
def test_invalid_delta(capsys, value):
    code, out, err = run(["epsilon", *BASE, f"--delta={value}"], capsys)  # "=": "-1e-5" is not an option
    assert code == 2 and out == ""
    assert "delta" in err and "(0, 1)" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["-0.1", "1.0001"])
def test_invalid_alpha(capsys, value):
    code, out, err = run(["tradeoff", *BASE, "--alpha", "0.1", value], capsys)
    assert code == 2 and out == ""
    assert "alpha" in err and "[0, 1]" in err


def test_feasgm_floor_zero_exits_2(capsys):
    argv = ["tradeoff", *with_opt("--q", "0.2", with_opt("--mechanism", "feasgm")), "--alpha", "0.1"]
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert "N*q" in err and len(err.strip().splitlines()) == 1


def test_time_budget_refuses_with_the_upper_bound_offered(capsys):
    """A guarantee that does not finish in --max-seconds is one line (status 1) that offers the
    fast upper bound and its epsilon (issue: large-N guarantees answer or say they will not).

    Nothing here depends on the machine's speed: the exact guarantee at N = 200,000, q = 0.5
    sums over ~200,000 batch sizes and ran over 6 minutes here (killed then), far beyond the 3 s
    asked for; that the budget really interrupts a computation is tested with one that never
    ends (next test); the times themselves are measured in bench/bench_sizes.py. In-process
    (``main(argv)``, SIGALRM in this main thread) rather than in four fresh interpreters: the
    same code path, without their start-up time; ``python -m paperlib`` itself is run above."""
    slow = ["epsilon", "--mechanism", "easgm", "--N", "200000", "--q", "0.5", "--sigma", "2", "--n", "20",
            "--delta", "1e-5"]
    code, out, err = run(slow + ["--bound", "guarantee", "--max-seconds", "3"], capsys)
    assert code == 1 and out == "", err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "within --max-seconds 3" in lines[0] and "--bound upper" in lines[0], lines
    ub = float(lines[0].split("gives epsilon ")[1].split()[0])
    code, out, err = run(slow + ["--bound", "upper"], capsys)
    assert code == 0 and abs(ub - json.loads(out)["epsilon"]) <= 1e-5 * ub
    # at the paper's model size (noncentrality 1e10, beyond Boost's range) the large-dimension numerics
    # answer (issue 11, item 7): a finite epsilon above the upper bound's (its time: bench/bench_sizes.py)
    code, out, err = run(["epsilon", "--mechanism", "easgm", "--bound", "guarantee", "--N", "200000", "--q", "0.005",
                          "--sigma", "1", "--n", "1485217", "--delta", "1e-5"], capsys)
    assert code == 0, err
    assert json.loads(out)["epsilon"] > 0.0230852
    code, out, err = run(["epsilon", "--mechanism", "easgm", "--N", "3", "--q", "0.5", "--sigma", "2", "--n", "20",
                          "--delta", "1e-5", "--max-seconds", "-1"], capsys)
    assert code == 2 and "max-seconds" in err


def test_time_budget_interrupts_a_computation_that_never_ends(monkeypatch, capsys):
    """--max-seconds stops a computation that would not end by itself (a stand-in for a slow
    guarantee; the loop's own limit is only a hang guard) and says so in one line."""
    import time

    from paperlib import cli
    from conftest import HANG_GUARD_S

    ran = []

    def never_ends(args):
        ran.append(True)
        deadline = time.monotonic() + HANG_GUARD_S
        while time.monotonic() < deadline:
            time.sleep(0.01)
        return {"epsilon": "the budget never fired"}

    monkeypatch.setattr(cli, "run_epsilon", never_ends)
    code, out, err = run(["epsilon", *BASE, "--delta", "1e-5", "--max-seconds", "0.2"], capsys)
    assert ran and code == 1 and out == "", (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "within --max-seconds 0.2" in lines[0], lines


# --------------------------------------------------------------------------- audit-implementation
AI = ["audit-implementation", "--model", "cnn-mnist", "--N", "3", "--q", "0.5", "--sigma", "10", "--C", "0.1",
      "--trials", "20", "--seed", "0"]


def test_audit_implementation_choices_are_the_runners():
    """One definition: --implementation offers runners.IMPLEMENTATIONS + FIXED_IMPLEMENTATIONS
    (opacus-1.0.2 and the fix among them), --dataset the loader's DATASETS."""
    from paperlib import cli
    from paperlib.implementations import datasets, runners

    sub = next(a for a in cli.build_parser()._actions if a.dest == "command").choices["audit-implementation"]
    opts = {a.dest: a for a in sub._actions}
    assert tuple(opts["implementation"].choices) == runners.IMPLEMENTATIONS + runners.FIXED_IMPLEMENTATIONS
    assert {"opacus-1.0.2", "opacus-installed+fix"} <= set(opts["implementation"].choices)
    assert tuple(opts["dataset"].choices) == datasets.DATASETS
    assert "--batch-size" in sub.format_help() and "opacus-1.0.2" in sub.format_help()


def _fake_audit(seen):
    def audit(implementation, model, dataset, **kw):
        seen.append({"implementation": implementation, "dataset": dataset, **kw})
        from dataclasses import fields

        from paperlib.implementations.real_audit import ImplementationAudit

        return ImplementationAudit.from_json({f.name: None for f in fields(ImplementationAudit)} | {
            "implementation": implementation, "dataset": dataset, "mechanism": "x", "inputs": {"data": "recorded"}})
    return audit


@pytest.mark.parametrize("impl,extra", [("opacus-1.0.2", []), ("opacus-installed+fix", ["--batch-size", "2"]),
                                        ("dpsur", [])])
def test_audit_implementation_points_follow_resolve_points(impl, extra, tmp_path, monkeypatch, capsys):
    """No data folder: the bundled real points (points='bundled', no folder); a data folder that
    resolve_points finds: that folder; synthetic only when named. --batch-size reaches the audit."""
    from paperlib.implementations import datasets as D
    from paperlib.implementations import real_audit as RA

    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "none"))
    monkeypatch.setenv("PAPERLIB_RESULTS", str(tmp_path / "results"))
    seen = []
    monkeypatch.setattr(RA, "audit_implementation", _fake_audit(seen))
    argv = AI + ["--implementation", impl] + extra
    code, out, err = run(argv + ["--dataset", "mnist"], capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["data"] == D.SOURCE_BUNDLED and d["inputs"] == {"data": "recorded"}
    assert "bundled with paperlib" in d["data_note"] and str(tmp_path / "none") in d["data_note"]
    assert seen[-1]["points"] == "bundled" and seen[-1]["data_root"] is None and seen[-1]["dataset"] == "mnist"
    assert seen[-1].get("batch_size") == (2 if extra else None) and d.get("batch_size") == (2 if extra else None)
    assert seen[-1]["implementation"] == impl
    code, out, err = run(argv + ["--dataset", "synthetic"], capsys)
    assert code == 0 and json.loads(out)["data"] == D.SOURCE_SYNTHETIC and seen[-1]["dataset"] == "synthetic"
    monkeypatch.setattr(D, "resolve_points", lambda name, k, seed, mode="quick", root=None:
                        D.PointsChoice(name, tmp_path, D.SOURCE_FULL, "the full dataset"))
    code, out, err = run(argv + ["--dataset", "fmnist"], capsys)
    assert code == 0 and json.loads(out)["data"] == D.SOURCE_FULL
    assert seen[-1]["points"] == "folder" and seen[-1]["data_root"] == tmp_path and seen[-1]["dataset"] == "fmnist"


def test_audit_implementation_fix_runs_on_bundled_points(tmp_path, monkeypatch, capsys):
    """The fix through the command line, offline, tiny (20 trials, 10 real steps per dataset):
    the real Opacus step divides by --batch-size on both datasets, audited as SGM on real points."""
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "none"))
    monkeypatch.setenv("PAPERLIB_RESULTS", str(tmp_path / "results"))
    code, out, err = run(AI + ["--implementation", "opacus-installed+fix", "--batch-size", "2", "--dataset", "mnist"],
                         capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["mechanism"] == "sgm" and d["batch_size"] == 2
    assert d["normaliser_found"] == "2 (the configured batch size)"
    assert d["data"] == "bundled real points" and d["inputs"]["data"] == "bundled real points"
    assert d["inputs"]["real_rounds"] == 20 and d["check"]["passed"]
    assert abs(d["eps_claimed"] - 0.174045) < 1e-5  # the SGM claim at q = 0.5, sigma = 10, delta = 1e-5
    assert not (tmp_path / "none").exists() or not list((tmp_path / "none").iterdir())  # nothing downloaded


def test_epsilon_of_dpsur_own_rule_is_its_certificate(capsys):
    """``epsilon --mechanism dpsur`` answers with DPSUR's own rule's certified guarantee (THEORY.md §11.4):
    the same number as certified_interval, and the named attack's forced epsilon beside it; bounds
    that do not exist for DPSUR are refused in one line naming the bound."""
    from paperlib.mechanisms.certified import certified_interval
    from paperlib.mechanisms.setting import Setting

    argv = ["epsilon", "--mechanism", "dpsur", "--N", "9999", "--q", "0.01", "--sigma", "1.2", "--n", "500",
            "--rounds", "50", "--delta", "1e-5"]
    code, out, err = run_main(argv, capsys)
    assert code == 0, err
    got = json.loads(out)
    want = certified_interval(Setting("dpsur", 9999, 0.01, 1.2, 500, rounds=50, delta=1e-5)).to_json()
    assert got["epsilon"] == pytest.approx(want["epsilon_certified"], rel=1e-9)
    assert got["epsilon_forced"] <= got["epsilon"] and got["epsilon"] / got["epsilon_forced"] < 1.5
    code, out, err = run_main(argv[:3] + ["--bound", "upper"] + argv[3:], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "'upper' is not defined for mechanism dpsur" in err


def test_errors_are_classified_by_class_never_by_name_or_message():
    """The command line maps an exception to its exit status by class (InputError: 2; ComputationError and
    other computation failures: 1): no comparison of an exception's type name, no parsing of a message's
    first word for a parameter name."""
    import ast
    from pathlib import Path

    import paperlib.cli as cli

    tree = ast.parse(Path(cli.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            names = [p for p in parts if isinstance(p, ast.Attribute) and p.attr == "__name__"
                     and isinstance(p.value, ast.Call) and getattr(p.value.func, "id", None) == "type"]
            assert not names, f"cli.py:{node.lineno} compares an exception's type name"
    assert not hasattr(cli, "_names_parameter") and not hasattr(cli, "INPUT_ERRORS")
    from paperlib.fdp.validation import ComputationError, InputError, ParameterError
    from paperlib.implementations.opacus_code.rules import AuditError
    from paperlib.implementations.opacus_code.wheels import WheelVerificationError

    assert issubclass(ParameterError, InputError) and issubclass(WheelVerificationError, InputError)
    assert issubclass(AuditError, ComputationError)


@pytest.mark.parametrize("cmd", ["epsilon", "tradeoff"])
def test_dpsur_certificate_at_tiny_sizes_answers_without_a_traceback(capsys, cmd):
    """N = 1, q = 1 (the separate draw's size tells D' apart surely) used to end in an IndexError inside the PLD
    engine; N = 3, q = 0.5: the certificate's revealed events carry more than delta, and the note says it is the
    certificate (not necessarily the pair) that gives no finite epsilon."""
    tail = ["--delta", "1e-5"] if cmd == "epsilon" else ["--alpha", "0.1", "0.5"]
    for N, q, n in (("1", "1", "5"), ("3", "0.5", "20")):
        code, out, err = run_main([cmd, "--mechanism", "dpsur", "--N", N, "--q", q, "--sigma", "2", "--n", n] + tail,
                                  capsys)
        assert code == 0 and "Traceback" not in err, err
        j = json.loads(out)
        if cmd == "epsilon":
            assert j["epsilon"] is None and "from this certificate" in j["note"]
        else:
            assert all(0.0 <= b <= 1.0 for b in j["beta"])
