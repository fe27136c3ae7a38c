"""The bad-input and fault campaign of issue 11 as a table: input -> exit code (or exception) and
the parameter the one-line message names.

Kinds of rows (each a parametrised test below):

* ``CLI`` -- ``python -m paperlib ARGS`` run in-process (``paperlib.cli.main(argv)`` with
  capsys): exit status 2 for invalid input (argparse's status too), 1 for a computation
  that fails on valid input ("could not compute X for these parameters (reason)"). Every
  error row: nothing on stdout, exactly one stderr line, it names the parameter (as a
  word: ``N``, ``--N``, ``N*q``), no "Traceback". Rows whose answer depends on numerics
  another part of the library may still improve (tiny ``sigma``) accept either a finite
  answer (status 0) or the one-line "could not compute" (status 1), never an error that
  names a parameter the user did not give.
* ``API`` -- a Python call -> the exception type and the parameter named in its message.
* ``DATA`` -- a state of the data folder (files written in ``tmp_path`` in torchvision's
  layout, the download mirrors unreachable) -> the error and the file it names.
* ``RESULTS`` -- a damaged result file or grade -> what ``load_result``,
  ``paperlib.artifact.resultcheck`` (the check ``make`` runs before the notebooks) and
  ``python -m paperlib.artifact.claims --show`` do with it.
* ``MAKE`` -- ``make -n help VAR=...`` in the repository: MODE/SEED/DEVICE are checked when
  the Makefile is read, before any notebook runs (status 2, one line naming the variable).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_main

from paperlib import cli

ROOT = Path(__file__).resolve().parents[1]

TR = ["tradeoff", "--mechanism", "easgm", "--bound", "guarantee", "--N", "3", "--q", "0.5", "--sigma", "2",
      "--n", "20", "--alpha", "0.1"]
EP = ["epsilon", "--mechanism", "easgm", "--bound", "guarantee", "--N", "3", "--q", "0.5", "--sigma", "2",
      "--n", "20", "--delta", "1e-5"]
AU = ["audit", "--mechanism", "easgm", "--N", "3", "--q", "0.5", "--sigma", "2", "--C", "1", "--n", "20",
      "--trials", "200", "--distinguisher", "optimal", "--seed", "0"]
AI = ["audit-implementation", "--implementation", "dpsur", "--model", "cnn-mnist", "--dataset", "synthetic",
      "--N", "4", "--q", "0.7", "--sigma", "10", "--C", "0.1", "--trials", "100", "--seed", "0"]
AS = ["audit-step", "paperlib.implementations.step_examples:loop_divide_by_constant", "--trials", "16"]
ASR = AS + ["--dataset-size", "60000", "--sample-rate", "0.004", "--steps", "250", "--noise-multiplier", "1.3",
            "--params", "26010"]
CK = ["check", "--opacus-version", "1.6.0", "--dataset-size", "60000", "--batch-size", "256", "--epochs", "10",
      "--noise-multiplier", "1.1", "--params", "1000000", "--delta", "1e-5"]


def _with(base, **opts):
    """``base`` with options replaced (``N="0"``) or added (``rounds="2"``); ``yes=True`` adds a flag."""
    argv = list(base)
    for key, value in opts.items():
        opt = "--" + key.rstrip("_")
        if value is True:
            argv.append(opt)
        elif opt in argv:
            argv[argv.index(opt) + 1] = value
        else:
            argv += [opt, value]
    return argv


def _without(base, opt):
    argv = list(base)
    i = argv.index(opt)
    del argv[i:i + 2]
    return argv




def names(line: str, param: str) -> bool:
    """``param`` appears in ``line`` as a word (``N`` in "--N", "N*q" or "N = 3", not in "NaN")."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(param)}(?![A-Za-z0-9_])", line) is not None


def assert_one_line_error(code, out, err, expected_code, param):
    assert code == expected_code, (code, err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("paperlib: error: ")
    if param is not None:
        assert names(lines[0], param), (param, lines[0])
    return lines[0]


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover
        return False


# ============================================================================ CLI: invalid input -> 2
BIG = str(10**21)
CLI_INVALID = [
    # --- tradeoff / epsilon: N, q, sigma, n, rounds, alpha, delta, tol, mechanism, bound
    ("N-nan", _with(TR, N="nan"), "N"),
    ("N-negative", _with(TR, N="-1"), "N"),
    ("N-zero", _with(TR, N="0"), "N"),
    ("N-fraction", _with(TR, N="1.5"), "N"),
    ("N-wrong-type", _with(TR, N="three"), "N"),
    ("N-above-2^53", _with(TR, N=BIG, bound="upper"), "N"),
    ("N-guarantee-size-limit", _with(TR, N="1000000000"), "N"),
    ("q-nan", _with(TR, q="nan"), "q"),
    ("q-inf", _with(TR, q="inf"), "q"),
    ("q-zero", _with(TR, q="0"), "q"),
    ("q-negative", _with(TR, q="-0.1"), "q"),
    ("q-above-1", _with(TR, q="1.5"), "q"),
    ("q-wrong-type", _with(TR, q="half"), "q"),
    ("sigma-nan", _with(TR, sigma="nan"), "sigma"),
    ("sigma-inf", _with(TR, sigma="inf"), "sigma"),
    ("sigma-zero", _with(TR, sigma="0"), "sigma"),
    ("sigma-negative", _with(TR, sigma="-1"), "sigma"),
    ("n-zero", _with(TR, n="0"), "n"),
    ("n-negative", _with(TR, n="-5"), "n"),
    ("n-fraction", _with(TR, n="2.5"), "n"),
    ("n-above-2^53", _with(TR, n=BIG), "n"),
    ("rounds-zero", _with(TR, rounds="0"), "rounds"),
    ("rounds-negative", _with(TR, rounds="-1"), "rounds"),
    ("rounds-nan", _with(TR, rounds="nan"), "rounds"),
    ("alpha-nan", _with(TR, alpha="nan"), "alpha"),
    ("alpha-inf", _with(TR, alpha="inf"), "alpha"),
    ("alpha-above-1", _with(TR, alpha="1.5"), "alpha"),
    ("alpha-negative", _with(TR, alpha="-0.1"), "alpha"),
    ("alpha-missing", _without(TR, "--alpha"), "alpha"),
    ("delta-zero", _with(EP, delta="0"), "delta"),
    ("delta-one", _with(EP, delta="1"), "delta"),
    ("delta-nan", _with(EP, delta="nan"), "delta"),
    ("delta-negative", _with(EP, delta="-1e-5"), "delta"),
    ("delta-above-1", _with(EP, delta="2"), "delta"),
    ("delta-wrong-type", _with(EP, delta="small"), "delta"),
    ("tol-zero", _with(TR, tol="0"), "tol"),
    ("tol-nan", _with(TR, tol="nan"), "tol"),
    ("mechanism-unknown", _with(TR, mechanism="dpsgd"), "mechanism"),
    ("bound-unknown", _with(TR, bound="lower"), "bound"),
    ("bound-clt-for-sgm", _with(TR, mechanism="sgm", bound="clt"), "bound"),
    ("n-clt-needs-2", _with(TR, bound="clt", n="1"), "n"),
    ("N-feasgm-floor-zero", _with(TR, mechanism="feasgm", N="1"), "N"),
    ("N-missing", _without(TR, "--N"), "N"),
    ("option-unknown", TR + ["--foo", "1"], "foo"),
    ("claimed-sigma-nan", _with(EP, sigma="nan", claimed=True), "sigma"),
    # --- audit: seed, trials, n, N, C, q, delta, distinguisher, device
    ("audit-seed-negative", _with(AU, seed="-1"), "seed"),
    ("audit-seed-2^70", _with(AU, seed=str(2**70)), "seed"),
    ("audit-seed-2^63", _with(AU, seed=str(2**63)), "seed"),
    ("audit-seed-wrong-type", _with(AU, seed="abc"), "seed"),
    ("audit-seed-fraction", _with(AU, seed="1.5"), "seed"),
    ("audit-trials-one", _with(AU, trials="1"), "trials"),
    ("audit-trials-zero", _with(AU, trials="0"), "trials"),
    ("audit-trials-float-notation", _with(AU, trials="1e9"), "trials"),
    ("audit-trials-size-limit", _with(AU, trials="1000000000"), "trials"),
    ("audit-trials-above-2^53-with-yes", _with(AU, trials=BIG, yes=True), "trials"),
    ("audit-n-size-limit", _with(AU, n="1000000000"), "n"),
    ("audit-N-13", _with(AU, N="13"), "N"),
    ("audit-N-zero", _with(AU, N="0"), "N"),
    ("audit-C-zero", _with(AU, C="0"), "C"),
    ("audit-C-nan", _with(AU, C="nan"), "C"),
    ("audit-C-negative", _with(AU, C="-1"), "C"),
    ("audit-q-zero", _with(AU, q="0"), "q"),
    ("audit-sigma-negative", _with(AU, sigma="-2"), "sigma"),
    ("audit-delta-zero", _with(AU, delta="0"), "delta"),
    ("audit-distinguisher-unknown", _with(AU, distinguisher="bayes"), "distinguisher"),
    ("audit-device-unknown", _with(AU, device="tpu"), "device"),
    ("audit-feasgm-floor-zero", _with(AU, mechanism="feasgm", N="1"), "q"),
    # --- audit-implementation: seed, trials (both modes), N, implementation, model, dataset, mode
    ("impl-seed-negative", _with(AI, seed="-1"), "seed"),
    ("impl-seed-2^64", _with(AI, seed=str(2**64)), "seed"),
    ("impl-trials-size-limit", _with(AI, trials="100000000"), "trials"),
    ("impl-trials-full-mode-limit", _with(AI, trials="100000", mode="full"), "trials"),
    ("impl-trials-one", _with(AI, trials="1"), "trials"),
    ("impl-trials-below-quick-check", _with(AI, trials="10"), "trials"),
    ("impl-N-13", _with(AI, N="13"), "N"),
    ("impl-q-above-1", _with(AI, q="1.5"), "q"),
    ("impl-C-zero", _with(AI, C="0"), "C"),
    ("impl-implementation-unknown", _with(AI, implementation="opacus-9.9"), "implementation"),
    ("impl-model-unknown", _with(AI, model="resnet"), "model"),
    ("impl-dataset-unknown", _with(AI, dataset="imagenet"), "dataset"),
    ("impl-mode-unknown", _with(AI, mode="medium"), "mode"),
    # --batch-size: required by the fix (opacus-installed+fix), refused by the releases as shipped
    ("impl-fix-without-batch-size", _with(AI, implementation="opacus-installed+fix"), "--batch-size"),
    ("impl-batch-size-for-dpsur", _with(AI, **{"batch-size": "2"}), "--batch-size"),
    ("impl-batch-size-for-opacus-1.0.2", _with(AI, implementation="opacus-1.0.2", **{"batch-size": "2"}),
     "--batch-size"),
    ("impl-fix-batch-size-zero", _with(AI, implementation="opacus-installed+fix", **{"batch-size": "0"}),
     "--batch-size"),
    ("impl-fix-batch-size-fraction", _with(AI, implementation="opacus-installed+fix", **{"batch-size": "1.5"}),
     "--batch-size"),
    # --- check (paperlib.practitioner.check_run): the settings of an Opacus run
    ("check-batch-larger-than-dataset", _with(CK, **{"batch-size": "70000"}), "--batch-size"),
    ("check-no-poisson", CK + ["--no-poisson"], "--poisson"),
    ("check-release-2.0", _with(CK, **{"opacus-version": "2.0.0"}), "--opacus-version"),
    ("check-release-0.8", _with(CK, **{"opacus-version": "0.8.0"}), "--opacus-version"),
    ("check-release-unparseable", _with(CK, **{"opacus-version": "banana"}), "--opacus-version"),
    ("check-release-without-poisson", _with(CK, **{"opacus-version": "0.10.0"}), "--poisson"),
    ("check-prv-before-1.3", _with(CK, **{"opacus-version": "1.2.0"}, accountant="prv"), "--accountant"),
    ("check-epochs-and-steps", _with(CK, steps="1000"), "--steps"),
    ("check-neither-epochs-nor-steps", _without(CK, "--epochs"), "--epochs"),
    ("check-batch-and-sample-rate", _with(CK, **{"sample-rate": "0.01"}), "--sample-rate"),
    ("check-sample-rate-above-1", _with(_without(CK, "--batch-size"), **{"sample-rate": "1.5"}), "--sample-rate"),
    ("check-feasgm-divides-by-zero", _with(_without(CK, "--batch-size"), **{"dataset-size": "100",
                                                                           "sample-rate": "0.001"}), "--sample-rate"),
    ("check-steps-above-limit", _with(_without(CK, "--epochs"), steps="10000000"), "--steps"),
    ("check-dataset-size-one", _with(CK, **{"dataset-size": "1", "batch-size": "1"}), "--dataset-size"),
    ("check-dataset-size-fraction", _with(CK, **{"dataset-size": "1.5"}), "--dataset-size"),
    ("check-epochs-zero", _with(CK, epochs="0"), "--epochs"),
    ("check-noise-negative", _with(CK, **{"noise-multiplier": "-1"}), "--noise-multiplier"),
    ("check-prv-grid-too-large", _with(CK, **{"noise-multiplier": "1e-3"}), "--noise-multiplier"),
    ("check-params-zero", _with(CK, params="0"), "--params"),
    ("check-loss-reduction-unknown", _with(CK, **{"loss-reduction": "avg"}), "--loss-reduction"),
    ("check-delta-zero", _with(CK, delta="0"), "--delta"),
    ("check-accountant-unknown", _with(CK, accountant="gdp"), "--accountant"),
    # --- audit-step (paperlib.practitioner.step.audit_step): the target, the probe, the run's settings
    ("step-target-no-function", ["audit-step", "paperlib.implementations.step_examples"], "TARGET"),
    ("step-target-no-module", ["audit-step", "paperlib.no_such_module:f"], "TARGET"),
    ("step-target-not-callable", ["audit-step", "paperlib.implementations.step_examples:LOOP_BATCH_SIZE"], "TARGET"),
    ("step-target-no-file", ["audit-step", "/nonexistent/step.py:f"], "TARGET"),
    # a callable that is not a step: the protocol named, not the probe's options
    ("step-target-not-a-step", ["audit-step", "os:getcwd", "--trials", "16"], "step protocol"),
    ("step-records-one", _with(AS, records="1"), "--records"),
    ("step-probe-rate-one", _with(AS, **{"probe-rate": "1"}), "--probe-rate"),
    ("step-trials-two", _with(AS, trials="2"), "--trials"),
    ("step-trials-too-few-to-test-sampling", _with(AS, trials="8"), "--trials"),
    ("step-seed-negative", _with(AS, seed="-1"), "--seed"),
    ("step-run-settings-partial", AS + ["--dataset-size", "60000"], "--sample-rate"),
    ("step-run-sample-rate-above-1", _with(ASR, **{"sample-rate": "1.5"}), "--sample-rate"),
    ("step-run-params-zero", _with(ASR, params="0"), "--params"),
]


@pytest.mark.parametrize("argv,param", [pytest.param(a, p, id=i) for i, a, p in CLI_INVALID])
def test_cli_invalid_input_is_one_line_naming_the_parameter(argv, param, capsys):
    code, out, err = run_main(argv, capsys)
    line = assert_one_line_error(code, out, err, 2, param)
    if "size limit" in line:  # refused sizes say what they would cost and how to go on
        assert "estimated" in line and "--yes" in line


@pytest.mark.parametrize("value", ["-1e-5", "-0.5", "-1", "-inf"])
def test_cli_a_negative_value_after_its_option_reaches_the_range_check(value, capsys):
    """``--delta -1e-5`` is refused with delta's range, as ``--delta=-1e-5`` is (argparse alone took it for an
    option and said only "expected one argument")."""
    lines = []
    for argv in (_with(EP, delta=value), _without(EP, "--delta") + [f"--delta={value}"]):
        code, out, err = run_main(argv, capsys)
        lines.append(assert_one_line_error(code, out, err, 2, "delta"))
    assert lines[0] == lines[1] and "(0, 1)" in lines[0]


@pytest.mark.skipif(_cuda(), reason="a CUDA GPU is present: --device cuda is valid here")
def test_cli_device_cuda_without_gpu(capsys):
    code, out, err = run_main(_with(AU, device="cuda"), capsys)
    assert_one_line_error(code, out, err, 2, "device")


# ============================================================================ CLI: valid input, numerics
# (argv, what) -- a finite answer, or "could not compute ..." (status 1); never an input error
CLI_NUMERIC = [
    ("tradeoff-easgm-sigma-1e-6", _with(TR, sigma="1e-6")),
    ("tradeoff-feasgm-sigma-1e-6", _with(TR, mechanism="feasgm", sigma="1e-6")),
    ("epsilon-sgm-sigma-1e-6", _with(EP, mechanism="sgm", sigma="1e-6")),
    ("epsilon-claimed-sigma-1e-6", _with(EP, sigma="1e-6", claimed=True)),
    ("audit-sigma-1e-6", _with(AU, sigma="1e-6")),
    ("epsilon-delta-1e-300", _with(EP, delta="1e-300")),
    ("tradeoff-guarantee-2-rounds", _with(TR, rounds="2")),
    # issue 11, item 7: large-N guarantees (formerly refused for noncentrality 4e10, or out of time at sigma 2)
    ("epsilon-easgm-guarantee-N-200000-sigma-0.5", _with(EP, N="200000", q="0.005", sigma="0.5", n="1485217")),
    ("epsilon-easgm-guarantee-N-200000-sigma-2", _with(EP, N="200000", q="0.005", sigma="2", n="1485217")),
]


@pytest.mark.parametrize("argv", [pytest.param(a, id=i) for i, a in CLI_NUMERIC])
def test_cli_valid_input_gives_an_answer_or_could_not_compute(argv, capsys):
    code, out, err = run_main(argv, capsys)
    assert code in (0, 1), err
    assert "Traceback" not in err
    if code == 0:
        res = json.loads(out)
        for key in ("beta", "epsilon", "eps_lower"):
            vals = res.get(key)
            vals = vals if isinstance(vals, list) else [vals]
            for v in vals:
                assert v is None or math.isfinite(v)
        for b in res.get("beta", []):
            assert b is None or 0.0 <= b <= 1.0
    else:
        line = assert_one_line_error(code, out, err, 1, None)
        assert "could not compute" in line
        # the reason may say anything, but never blame an option that was not given
        assert not re.search(r"eps_for_delta|tail_tol|function value at x", line.split("(", 1)[0])


def test_cli_audit_with_a_vacuous_claim_does_not_blame_eps_for_delta(capsys):
    code, out, err = run_main(_with(AU, sigma="1e-6"), capsys)
    assert "eps_for_delta" not in err


# ============================================================================ CLI: faults inside
FAULTS = [
    ("memory-error-tradeoff", TR, "guarantee", MemoryError(), 2, "N"),
    ("memory-error-rounds", _with(TR, bound="upper", rounds="3"), "rounds_upper_bound", MemoryError(), 2, "rounds"),
    ("internal-value-error", TR, "guarantee", ValueError("eps_for_delta must be a finite number >= 0, got None"),
     1, None),
    ("scipy-root-nan", TR, "guarantee", ValueError("The function value at x=-5.6e10 is NaN; solver cannot continue."),
     1, None),
    ("overflow", TR, "guarantee", OverflowError("math range error"), 1, None),
    ("runtime-error", TR, "guarantee", RuntimeError("did not converge"), 1, None),
]


@pytest.mark.parametrize("argv,target,exc,code,param", [pytest.param(*r[1:], id=r[0]) for r in FAULTS])
def test_cli_internal_failures_are_one_line(argv, target, exc, code, param, capsys, monkeypatch):
    def boom(*a, **k):
        raise exc

    import paperlib.mechanisms.curves as curves  # the one dispatch calls the builders by these names

    monkeypatch.setattr(curves, target, boom)
    c, out, err = run_main(argv, capsys)
    line = assert_one_line_error(c, out, err, code, param)
    if code == 1:
        assert "could not compute the EASGM guarantee for these parameters" in line
    else:
        assert "out of memory" in line


@pytest.mark.parametrize("exc,param", [(MemoryError(), "n"), (RuntimeError("DefaultCPUAllocator: can't allocate "
                                                                          "memory: you tried to allocate 80 GB"), "n")])
def test_cli_audit_out_of_memory_names_the_size_parameter(exc, param, capsys, monkeypatch):
    import paperlib.audit as audit_mod

    def boom(*a, **k):
        raise exc

    monkeypatch.setattr(audit_mod, "audit_worst_case", boom)
    code, out, err = run_main(_with(AU, n="10000000", N="3"), capsys)
    line = assert_one_line_error(code, out, err, 2, param)
    assert "out of memory" in line


# ============================================================================ API: exception + parameter
def _api_rows():
    from paperlib import audit_worst_case, check_run, curve, guarantee, sgm_claim, upper_bound
    from paperlib.implementations.datasets import load_points
    import torch

    from paperlib.implementations.real_audit import audit_implementation, check_steps
    from paperlib.implementations.runners import step_device
    from paperlib.mechanisms.claimed import sgm_claim_epsilon
    from paperlib.mechanisms.sampler import apply_round
    from paperlib.fdp.validation import check_seed
    from paperlib.practitioner import examples as fam
    from paperlib.artifact.prose import relation

    aw = dict(C=1.0, trials=100, distinguisher="optimal", seed=0)

    def legend(fn, **kw):  # a figure with one labelled line, closed afterwards
        import matplotlib.pyplot as plt

        from paperlib.artifact import plotting

        fig, ax = plt.subplots()
        try:
            if kw.pop("empty", False):
                return plotting.figure_legend(fig, **kw)
            ax.plot([0, 1], [0, 1], label="a")
            return getattr(plotting, fn)(ax if fn == "legend_below" else fig, **kw)
        finally:
            plt.close(fig)

    return [
        ("guarantee-N-zero", lambda: guarantee("easgm", 0, 0.5, 2.0, 20), ValueError, "N"),
        ("guarantee-mechanism", lambda: guarantee("dpsgd", 3, 0.5, 2.0, 20), ValueError, "mechanism"),
        ("guarantee-q-nan", lambda: guarantee("easgm", 3, float("nan"), 2.0, 20), ValueError, "q"),
        ("guarantee-sigma-inf", lambda: guarantee("easgm", 3, 0.5, float("inf"), 20), ValueError, "sigma"),
        ("upper-n-zero", lambda: upper_bound("easgm", 3, 0.5, 2.0, 0), ValueError, "n"),
        ("claim-q-zero", lambda: sgm_claim(0.0, 2.0), ValueError, "q"),
        ("claim-sigma-negative", lambda: sgm_claim(0.5, -1.0), ValueError, "sigma"),
        ("claim-epsilon-delta-zero", lambda: sgm_claim(0.5, 2.0).epsilon(0.0), ValueError, "delta"),
        ("claim-alpha-above-1", lambda: sgm_claim(0.5, 2.0)(1.5), ValueError, "alpha"),
        ("rounds-zero", lambda: curve("easgm", "upper", 3, 0.5, 2.0, 20, rounds=0), ValueError, "rounds"),
        ("accountant-unknown", lambda: sgm_claim_epsilon(0.01, 1.0, rounds=10, delta=1e-5, accountant="moments"),
         ValueError, "accountant"),
        ("audit-seed-negative", lambda: audit_worst_case("easgm", 3, 0.5, 2.0, 20, **{**aw, "seed": -1}),
         ValueError, "seed"),
        ("audit-seed-2^63", lambda: audit_worst_case("easgm", 3, 0.5, 2.0, 20, **{**aw, "seed": 2**63}),
         ValueError, "seed"),
        ("audit-trials-one", lambda: audit_worst_case("easgm", 3, 0.5, 2.0, 20, **{**aw, "trials": 1}),
         ValueError, "trials"),
        ("audit-N-13", lambda: audit_worst_case("easgm", 13, 0.5, 2.0, 20, **aw), ValueError, "N"),
        ("audit-C-zero", lambda: audit_worst_case("easgm", 3, 0.5, 2.0, 20, **{**aw, "C": 0.0}), ValueError, "C"),
        ("practitioner-prv-9-TiB", lambda: check_run("1.6.0", 60000, 256, epochs=1, noise_multiplier=1e-3,
                                                      n_params=26010), ValueError, "noise_multiplier"),
        ("practitioner-dataset_size", lambda: check_run("1.6.0", 1, 1, epochs=1, noise_multiplier=1.0, n_params=100),
         ValueError, "dataset_size"),
        ("practitioner-delta", lambda: check_run("1.6.0", 60000, 256, epochs=1, noise_multiplier=1.0, n_params=100,
                                                 delta=0.0), ValueError, "delta"),
        ("practitioner-version", lambda: check_run("banana", 60000, 256, epochs=1, noise_multiplier=1.0,
                                                   n_params=100), ValueError, "opacus_version"),
        ("families-batch", lambda: fam.nearest_agreeing_batch(60_000, 0), ValueError, "batch_size"),
        ("families-sigma", lambda: fam.family_row(fam.FAMILIES[0], {**fam.MNIST, "noise_multiplier": -1.0, "epochs": 1}),
         ValueError, "noise_multiplier"),
        ("families-dpsur-steps", lambda: fam.dpsur_row({**fam.DPSUR_DEFAULTS, "steps": 0}), ValueError, "steps"),
        ("check-seed-bool", lambda: check_seed(True), ValueError, "seed"),
        ("load-points-name", lambda: load_points("imagenet", 5), ValueError, "name"),
        ("load-points-k", lambda: load_points("synthetic", 0), ValueError, "k"),
        ("load-points-seed", lambda: load_points("synthetic", 5, seed=-1), ValueError, "seed"),
        ("real-audit-seed", lambda: audit_implementation("dpsur", "tiny", "synthetic", N=4, q=0.5, sigma=1.0, C=1.0,
                                                         trials=100, seed=-1), ValueError, "seed"),
        ("real-audit-mode", lambda: audit_implementation("dpsur", "tiny", "synthetic", N=4, q=0.5, sigma=1.0, C=1.0,
                                                         trials=100, mode="medium"), ValueError, "mode"),
        ("real-audit-dataset", lambda: audit_implementation("dpsur", "tiny", "svhn", N=4, q=0.5, sigma=1.0, C=1.0,
                                                            trials=100), ValueError, "dataset"),
        ("step-check-mechanism", lambda: check_steps(np.zeros((2, 5)), np.ones((3, 5)), "asgmx", 0.5, 1.0, 1.0,
                                                     batch_sizes=[1, 1]), ValueError, "mechanism"),
        ("step-check-shapes", lambda: check_steps(np.zeros((2, 5)), np.ones((3, 4)), "asgm", 0.5, 1.0, 1.0,
                                                  batch_sizes=[1, 1]), ValueError, "updates"),
        ("step-check-batch_sizes", lambda: check_steps(np.zeros((2, 5)), np.ones((3, 5)), "asgm", 0.5, 1.0, 1.0),
         ValueError, "batch_sizes"),
        ("step-check-draws", lambda: check_steps(np.zeros((2, 5)), np.ones((3, 5)), "dpsur", 0.5, 1.0, 1.0,
                                                 draws={"batch_masks": np.ones((2, 2), bool),
                                                        "divisor_masks": np.ones((2, 3), bool),
                                                        "noise": np.zeros((2, 5))}), ValueError, "draws"),
        ("sampler-divisor_masks", lambda: apply_round("dpsur", torch.eye(3), torch.ones(2, 3, dtype=torch.bool),
                                                      torch.zeros(2, 3), 0.5, 1.0, 1.0), ValueError, "divisor_masks"),
        ("prose-relation-nan", lambda: relation(float("nan"), 1.0), ValueError, "a"),
        ("prose-relation-far", lambda: relation(1.0, 2.0, far=1.0), ValueError, "far"),
        ("figure-legend-ncol", lambda: legend("figure_legend", ncol=0), ValueError, "ncol"),
        ("legend-below-ncol", lambda: legend("legend_below", ncol=1.5), ValueError, "ncol"),
        ("figure-legend-empty", lambda: legend("figure_legend", empty=True), ValueError, "handles"),
        ("real-audit-workers", lambda: audit_implementation("dpsur", "tiny", "synthetic", N=4, q=0.5, sigma=1.0,
                                                            C=1.0, trials=100, workers=0), ValueError, "workers"),
        ("real-audit-scheduler", lambda: audit_implementation("dpsur", "tiny", "synthetic", N=4, q=0.5, sigma=1.0,
                                                              C=1.0, trials=100, scheduler="localhost:8786"),
         ValueError, "scheduler"),
        ("run-steps-device", lambda: step_device("tpu"), ValueError, "device"),
        ("export-estimate", lambda: _one_round().to_dp_accounting("tight"), ValueError, "estimate"),
        ("export-interval", lambda: _one_round().to_dp_accounting("pessimistic", -1e-3), ValueError,
         "value_discretization_interval"),
        ("dist-root", lambda: _dist_missing(), ValueError, "root"),
        ("site-check-html_dir", lambda: _site_check_missing(), ValueError, "html_dir"),
        ("classify-step-records", lambda: _classify(records=1), ValueError, "records"),
        ("classify-step-rate", lambda: _classify(sampling_rate=0.0), ValueError, "sampling_rate"),
        ("classify-step-noise", lambda: _classify(noise_multiplier=1.0), ValueError, "noise_multiplier"),
        ("classify-step-trials-too-few", lambda: _classify(trials=8), ValueError, "trials"),
        ("classify-step-rate-1e-12", lambda: _classify(sampling_rate=1e-12), ValueError, "sampling_rate"),
        ("classify-jax-privacy-normalize-by", lambda: _pinned("jax_privacy_step", "classify_jax_privacy", "fixed"),
         ValueError, "normalize_by"),
        ("classify-jax-privacy-trials", lambda: _pinned("jax_privacy_step", "classify_jax_privacy", trials=8),
         ValueError, "trials"),
        ("classify-dp-transformers-trials", lambda: _pinned("dp_transformers_step", "classify_dp_transformers",
                                                            trials=8), ValueError, "trials"),
        ("classify-dp-transformers-sampler", lambda: _pinned("dp_transformers_step", "classify_dp_transformers",
                                                             sampler="shuffle"), ValueError, "sampler"),
        ("classify-dp-transformers-rate", lambda: _pinned("dp_transformers_step", "classify_dp_transformers",
                                                          sampling_rate=1.0), ValueError, "sampling_rate"),
        ("classify-step-not-callable", lambda: _classify(step=3), ValueError, "step"),
        ("classify-step-wrong-length", lambda: _classify(step=lambda g, **k: g[0][:3]), ValueError, "step"),
        ("audit-step-partial-run", lambda: _audit_step(dataset_size=100), ValueError, "sample_rate"),
        ("load-step-target", lambda: _load_step("no colon"), ValueError, "target"),
    ]


def _classify(step=None, **kw):
    from paperlib.implementations.step_audit import classify_step

    return classify_step(step if step is not None else (lambda g, **k: g.sum(0)), **kw)


def _pinned(module, name, *args, **kw):
    """A pinned library's classifier with ``download=False``: a bad option is refused before any install."""
    import importlib

    fn = getattr(importlib.import_module(f"paperlib.implementations.{module}"), name)
    return fn(*args, download=False, **kw)


def _audit_step(**kw):
    from paperlib.practitioner.step import audit_step

    return audit_step(lambda g, **k: g.sum(0), **kw)


def _load_step(target):
    from paperlib.practitioner.step import load_step

    return load_step(target)


def _one_round():
    from paperlib.mechanisms.multiround import sgm_claim_rounds

    return sgm_claim_rounds(0.01, 1.0, rounds=1)


def _dist_missing():
    import tempfile

    from paperlib.artifact.dist import build_dist

    with tempfile.TemporaryDirectory() as d:
        return build_dist(d)


def _site_check_missing():
    import tempfile

    from paperlib.artifact.site import dead_references

    with tempfile.TemporaryDirectory() as d:
        return dead_references(d)


API_IDS = ["guarantee-N-zero", "guarantee-mechanism", "guarantee-q-nan", "guarantee-sigma-inf", "upper-n-zero",
           "claim-q-zero", "claim-sigma-negative", "claim-epsilon-delta-zero", "claim-alpha-above-1", "rounds-zero",
           "accountant-unknown", "audit-seed-negative", "audit-seed-2^63", "audit-trials-one", "audit-N-13",
           "audit-C-zero", "practitioner-prv-9-TiB", "practitioner-dataset_size", "practitioner-delta",
           "practitioner-version", "families-batch", "families-sigma", "families-dpsur-steps", "check-seed-bool",
           "load-points-name", "load-points-k", "load-points-seed",
           "real-audit-seed", "real-audit-mode", "real-audit-dataset", "step-check-mechanism", "step-check-shapes",
           "step-check-batch_sizes", "step-check-draws", "sampler-divisor_masks",
           "prose-relation-nan", "prose-relation-far",
           "figure-legend-ncol", "legend-below-ncol", "figure-legend-empty",
           "real-audit-workers", "real-audit-scheduler", "run-steps-device", "export-estimate", "export-interval",
           "dist-root", "site-check-html_dir", "classify-step-records", "classify-step-rate", "classify-step-noise",
           "classify-step-trials-too-few", "classify-step-rate-1e-12", "classify-jax-privacy-normalize-by", "classify-jax-privacy-trials",
           "classify-dp-transformers-trials", "classify-dp-transformers-sampler",
           "classify-dp-transformers-rate", "classify-step-not-callable", "classify-step-wrong-length", "audit-step-partial-run", "load-step-target"]


@pytest.mark.parametrize("row", API_IDS)
def test_api_bad_input_raises_naming_the_parameter(row):
    rows = {r[0]: r[1:] for r in _api_rows()}
    call, exc_type, param = rows[row]
    with pytest.raises(exc_type) as info:
        call()
    msg = str(info.value)
    assert len(msg.strip().splitlines()) == 1, msg
    assert names(msg, param), (param, msg)


def test_api_rows_are_all_listed():
    assert [r[0] for r in _api_rows()] == API_IDS


# ============================================================================ DATA: the data folder
UNREACHABLE = "http://127.0.0.1:9/"


@pytest.fixture
def offline(monkeypatch):
    """Download mirrors unreachable and any use of the network an error."""
    torchvision = pytest.importorskip("torchvision")
    import urllib.request

    monkeypatch.setattr(torchvision.datasets.MNIST, "mirrors", [UNREACHABLE])
    monkeypatch.setattr(torchvision.datasets.FashionMNIST, "mirrors", [UNREACHABLE])
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "url", UNREACHABLE + "cifar-10-python.tar.gz")

    def no_network(*a, **k):
        raise AssertionError("the network was used")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    monkeypatch.setattr(urllib.request, "urlretrieve", no_network)


def write_mnist(root: Path, n_images=12, labels=None, truncate=0, magic=0x00000803, folder="MNIST", seed=0):
    raw = root / folder / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for split in ("train", "t10k"):
        imgs = np.random.default_rng(seed).integers(0, 256, size=(n_images, 28, 28), dtype=np.uint8)
        data = struct.pack(">IIII", magic, n_images, 28, 28) + imgs.tobytes()
        (raw / f"{split}-images-idx3-ubyte").write_bytes(data[:len(data) - truncate])
        lab = np.arange(n_images) % 10 if labels is None else np.asarray(labels)
        (raw / f"{split}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 0x00000801, len(lab))
                                                         + lab.astype(np.uint8).tobytes())
    return raw


DATA_ROWS = [
    ("labels-shorter-than-images", dict(labels=np.arange(8) % 10), "train-labels-idx1-ubyte", "labels"),
    ("label-outside-0-9", dict(labels=[252] * 12), "train-labels-idx1-ubyte", "252"),
    ("images-truncated", dict(truncate=7), "train-images-idx3-ubyte", "truncated"),
    ("images-not-idx", dict(magic=0x00000802), "train-images-idx3-ubyte", "magic"),
]


@pytest.mark.parametrize("state,file,word", [pytest.param(*r[1:], id=r[0]) for r in DATA_ROWS])
def test_data_files_are_validated_one_line_naming_the_file(state, file, word, tmp_path, offline):
    from paperlib.implementations.datasets import DatasetUnavailable, load_points

    raw = write_mnist(tmp_path, **state)
    with pytest.raises(DatasetUnavailable) as info:
        load_points("mnist", 5, 0, root=tmp_path, download=False)
    first = str(info.value).splitlines()[0]
    assert str(raw / file) in first and word in first, first


def test_data_intact_files_load(tmp_path, offline):
    from paperlib.implementations.datasets import load_points

    write_mnist(tmp_path)
    X, y = load_points("mnist", 5, 0, root=tmp_path, download=False)
    assert tuple(X.shape) == (5, 1, 28, 28) and int(y.min()) >= 0 and int(y.max()) <= 9


def test_data_cli_quick_mode_never_downloads_and_missing_folder_is_one_line(tmp_path, offline, monkeypatch, capsys):
    """``PAPERLIB_DATA`` at a folder that does not exist: quick mode downloads nothing and audits the
    real points bundled with the package (datasets.resolve_dataset), never the synthetic stand-in;
    with the bundle damaged as well: status 2, one line naming the dataset and the folder."""
    from paperlib.implementations import datasets as D

    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "does-not-exist"))
    monkeypatch.setenv("PAPERLIB_RESULTS", str(tmp_path / "results"))
    code, out, err = run_main(_with(AI, dataset="mnist", trials="20"), capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["data"] == D.SOURCE_BUNDLED and d["inputs"]["data"] == D.SOURCE_BUNDLED
    assert not (tmp_path / "does-not-exist").exists()

    def damaged(*a, **k):
        raise D.DatasetUnavailable("bundled points mnist.npz: sha256 mismatch\nsecond line")

    monkeypatch.setattr(D, "load_bundled", damaged)
    code, out, err = run_main(_with(AI, dataset="mnist", trials="20"), capsys)
    line = assert_one_line_error(code, out, err, 2, "dataset")
    assert str(tmp_path / "does-not-exist") in line and "sha256 mismatch" in line
    assert not (tmp_path / "does-not-exist").exists()


class _RecordingCache:
    """A result store that answers every lookup with a hit and records the parameters asked for."""

    def __init__(self):
        self.params = []

    def key(self, params):
        from paperlib.artifact.provenance import result_key

        return result_key(params)

    def load(self, name, params):
        from dataclasses import fields

        from paperlib.implementations.real_audit import ImplementationAudit

        self.params.append(params)  # a stored audit: every field, its implementation marked
        return {f.name: ("hit" if f.name == "implementation" else None) for f in fields(ImplementationAudit)}

    def save(self, *a, **k):  # pragma: no cover - never reached: every lookup hits
        raise AssertionError("save called")


def test_data_cache_key_holds_the_resolved_folder_and_the_points(tmp_path, offline, monkeypatch):
    from paperlib.implementations.datasets import DatasetUnavailable
    from paperlib.implementations.real_audit import audit_implementation

    a, b = tmp_path / "a", tmp_path / "b"
    write_mnist(a, seed=0)
    write_mnist(b, seed=1)  # same layout and labels, other pixels
    cache = _RecordingCache()
    kw = dict(N=4, q=0.5, sigma=1.0, C=1.0, trials=100, seed=0, cache=cache, progress=False)
    for folder in (a, b, a):
        monkeypatch.setenv("PAPERLIB_DATA", str(folder))  # data_root=None: $PAPERLIB_DATA, resolved
        hit = audit_implementation("dpsur", "cnn-mnist", "mnist", **kw)
        assert (hit.implementation, hit.cached) == ("hit", True)
    pa, pb, pa2 = cache.params
    assert pa["data_root"] == str(a.resolve()) and pb["data_root"] == str(b.resolve())
    assert pa["points_sha256"] != pb["points_sha256"] and pa == pa2
    assert len(pa["points_sha256"]) == 64
    # the same points under another folder name: same hash, other key (the folder is part of it)
    shutil.copytree(a, tmp_path / "c")
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "c"))
    audit_implementation("dpsur", "cnn-mnist", "mnist", **kw)
    assert cache.params[-1]["points_sha256"] == pa["points_sha256"] and cache.key(cache.params[-1]) != cache.key(pa)
    # a folder that does not exist is an error, never a hit
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "missing"))
    n_before = len(cache.params)
    with pytest.raises(DatasetUnavailable):
        audit_implementation("dpsur", "cnn-mnist", "mnist", **kw)
    assert len(cache.params) == n_before


def test_data_resolve_dataset_names_the_folder_it_used(tmp_path, offline, monkeypatch):
    """Notebook 06 prints the folder resolve_dataset returns: the $PAPERLIB_DATA folder itself."""
    from paperlib.implementations.datasets import resolve_dataset

    write_mnist(tmp_path / "env")
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "env"))
    name, root, note = resolve_dataset("mnist", 5, 0, mode="quick", extra_roots=[])
    assert (name, note) == ("mnist", "data folder sample") and root == (tmp_path / "env").resolve()


# ============================================================================ DATA (suite): used as given or refused
# A data folder that holds the dataset is used as it is or refused in one line naming the file
# and the problem -- through $PAPERLIB_DATA, through --data-dir and through the Python API --
# never silently replaced by the bundled points. The bundled points are used only when no
# folder holds the dataset, and the output says so in words (data_note).
def _mnist_state(root: Path, state: str, folder: str = "MNIST") -> Path:
    """Write MNIST-like files under ``root`` broken as ``state``; returns the path the error must name."""
    if state == "folder-is-a-file":
        root.parent.mkdir(parents=True, exist_ok=True)
        root.write_bytes(b"not a folder")
        return root
    if state == "dataset-folder-is-a-file":
        root.mkdir(parents=True)
        (root / folder).write_bytes(b"not a folder")
        return root / folder
    kw = {"labels-shorter-than-images": dict(labels=np.arange(8) % 10), "label-outside-0-9": dict(labels=[252] * 12),
          "images-truncated": dict(truncate=7), "bad-magic": dict(magic=0x00000802)}.get(state, {})
    raw = write_mnist(root, folder=folder, **kw)
    img, lab = raw / "train-images-idx3-ubyte", raw / "train-labels-idx1-ubyte"
    if state == "garbage":
        img.write_bytes(np.random.default_rng(1).bytes(5000))
    elif state == "empty-file":
        img.write_bytes(b"")
    elif state == "trailing-bytes":
        img.write_bytes(img.read_bytes() + b"\0" * 28)
    elif state == "wrong-image-size":
        img.write_bytes(struct.pack(">IIII", 0x00000803, 12, 32, 32) + bytes(12 * 32 * 32))
    elif state == "file-missing":
        (raw / "t10k-labels-idx1-ubyte").unlink()
        return raw / "t10k-labels-idx1-ubyte"
    elif state == "file-is-a-folder":
        img.unlink()
        img.mkdir()
    elif state == "test-split-truncated":
        t = raw / "t10k-images-idx3-ubyte"
        t.write_bytes(t.read_bytes()[:-100])
        return t
    return lab if state in ("labels-shorter-than-images", "label-outside-0-9") else img


def _cifar_state(root: Path, state: str) -> Path:
    """CIFAR-10 batches (random pixels: their md5s cannot be the originals) broken as ``state``."""
    import pickle

    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for f in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        entry = {"data": np.random.default_rng(0).integers(0, 256, (4, 3072), dtype=np.uint8), "labels": [1, 2, 3, 4]}
        (folder / f).write_bytes(pickle.dumps(entry, protocol=2))
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": [str(i) for i in range(10)]}, protocol=2))
    if state == "cifar-meta-missing":
        (folder / "batches.meta").unlink()
        return folder / "batches.meta"
    if state == "cifar-garbage-batch":
        (folder / "data_batch_1").write_bytes(np.random.default_rng(2).bytes(3000))
    return folder / "data_batch_1"


# (id, dataset, state, a word of the problem the line must hold)
FOLDER_STATES = [
    ("mnist-labels-shorter-than-images", "mnist", "labels-shorter-than-images", "8 labels"),
    ("mnist-label-outside-0-9", "mnist", "label-outside-0-9", "outside the classes 0-9"),
    ("mnist-images-truncated", "mnist", "images-truncated", "truncated"),
    ("mnist-bad-magic", "mnist", "bad-magic", "magic number"),
    ("mnist-garbage", "mnist", "garbage", "magic number"),
    ("mnist-empty-file", "mnist", "empty-file", "too short"),
    ("mnist-trailing-bytes", "mnist", "trailing-bytes", "truncated or corrupt"),
    ("mnist-wrong-image-size", "mnist", "wrong-image-size", "32 x 32 pixels"),
    ("mnist-file-missing", "mnist", "file-missing", "is missing"),
    ("mnist-file-is-a-folder", "mnist", "file-is-a-folder", "is a folder, not a file"),
    ("mnist-test-split-truncated", "mnist", "test-split-truncated", "truncated"),
    ("mnist-folder-is-a-file", "mnist", "folder-is-a-file", "is a file, not a folder"),
    ("mnist-dataset-folder-is-a-file", "mnist", "dataset-folder-is-a-file", "is a file, not a folder"),
    ("fmnist-images-truncated", "fmnist", "images-truncated", "truncated"),
    ("fmnist-label-outside-0-9", "fmnist", "label-outside-0-9", "outside the classes 0-9"),
    ("cifar10-not-the-original-md5", "cifar10", "cifar-random-batches", "md5"),
    ("cifar10-garbage-batch", "cifar10", "cifar-garbage-batch", "md5"),
    ("cifar10-meta-missing", "cifar10", "cifar-meta-missing", "is missing"),
]


def _broken_folder(root: Path, dataset: str, state: str) -> Path:
    if dataset == "cifar10":
        return _cifar_state(root, state)
    return _mnist_state(root, state, folder={"mnist": "MNIST", "fmnist": "FashionMNIST"}[dataset])


def _ai_for(dataset: str, **opts):
    return _with(AI, dataset=dataset, model="cnn-cifar10" if dataset == "cifar10" else "cnn-mnist", trials="20",
                 **opts)


@pytest.mark.parametrize("how", ["PAPERLIB_DATA", "--data-dir"])
@pytest.mark.parametrize("dataset,state,word", [pytest.param(*r[1:], id=r[0]) for r in FOLDER_STATES])
def test_data_folder_that_cannot_be_read_is_refused_in_one_line(dataset, state, word, how, tmp_path, offline,
                                                                 monkeypatch, capsys):
    """audit-implementation with a named folder holding a broken dataset: status 2, one line
    naming the file and the problem, no audit run and nothing written into the folder."""
    root = tmp_path / "data"
    bad = _broken_folder(root, dataset, state)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    monkeypatch.setenv("PAPERLIB_RESULTS", str(tmp_path / "results"))
    if how == "PAPERLIB_DATA":
        monkeypatch.setenv("PAPERLIB_DATA", str(root))
        argv = _ai_for(dataset)
    else:
        monkeypatch.delenv("PAPERLIB_DATA", raising=False)
        argv = _ai_for(dataset, **{"data-dir": str(root)})
    code, out, err = run_main(argv, capsys)
    line = assert_one_line_error(code, out, err, 2, "dataset")
    assert str(bad) in line and word in line, line
    assert "bundled" not in line
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "results" not in p.parts) == before


@pytest.mark.parametrize("dataset,state,word", [pytest.param(*r[1:], id=r[0]) for r in FOLDER_STATES])
def test_data_folder_that_cannot_be_read_is_refused_by_resolve_dataset(dataset, state, word, tmp_path, offline,
                                                                      monkeypatch):
    """The same through the Python API, in every mode (full mode never downloads over a dataset
    that is present): DatasetUnavailable, one line naming the file and the problem."""
    from paperlib.implementations.datasets import DatasetUnavailable, resolve_dataset, resolve_points

    root = tmp_path / "data"
    bad = _broken_folder(root, dataset, state)
    monkeypatch.setenv("PAPERLIB_DATA", str(root))
    for mode in ("quick", "full"):
        with pytest.raises(DatasetUnavailable) as info:
            resolve_dataset(dataset, 5, 0, mode=mode)
        msg = str(info.value)
        assert "\n" not in msg and str(bad) in msg and word in msg, msg
    monkeypatch.delenv("PAPERLIB_DATA")
    with pytest.raises(DatasetUnavailable) as info:  # the folder as an argument
        resolve_points(dataset, 5, 0, root=root)
    assert "\n" not in str(info.value) and str(bad) in str(info.value)


def test_data_no_folder_named_uses_the_bundle_and_says_so(tmp_path, offline, monkeypatch, capsys):
    """No $PAPERLIB_DATA and no dataset in the default folder: the bundled points, and the
    output's data_note says so in words and names the folder looked in."""
    from paperlib.implementations import datasets as D

    monkeypatch.delenv("PAPERLIB_DATA", raising=False)
    monkeypatch.setattr(D, "_repo_root", lambda: tmp_path / "clone")  # <clone>/data: the default folder
    monkeypatch.setenv("PAPERLIB_RESULTS", str(tmp_path / "results"))
    code, out, err = run_main(_ai_for("mnist"), capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["data"] == D.SOURCE_BUNDLED
    note = d["data_note"]
    assert "bundled with paperlib" in note and "no MNIST dataset in " + str(tmp_path / "clone" / "data") in note
    assert "default data folder" in note and "does not exist" in note


def test_data_named_folder_that_holds_the_dataset_is_used_and_said(tmp_path, offline, monkeypatch, capsys):
    from paperlib.implementations import datasets as D

    write_mnist(tmp_path / "mine")
    monkeypatch.setenv("PAPERLIB_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv("PAPERLIB_DATA", raising=False)
    code, out, err = run_main(_ai_for("mnist", **{"data-dir": str(tmp_path / "mine")}), capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["data"] == D.SOURCE_FOLDER_SAMPLE and d["inputs"]["data"] == D.SOURCE_FOLDER_SAMPLE
    assert str((tmp_path / "mine").resolve()) in d["data_note"] and "12 images" in d["data_note"]


# audit-implementation options of this block (bad values -> 2, one line naming the option)
CLI_INVALID_DATA = [
    ("impl-N-10-with-10-bundled-points", _with(AI, dataset="mnist", N="10"), "--N", "<= 9"),
    ("impl-data-dir-empty", _with(AI, dataset="mnist", **{"data-dir": " "}), "--data-dir", "empty"),
    ("impl-data-dir-missing-value", AI + ["--data-dir"], "--data-dir", "expected one argument"),
    ("impl-sigma-zero", _with(AI, sigma="0"), "sigma", "> 0"),
    ("impl-sigma-nan", _with(AI, sigma="nan"), "sigma", None),
    ("impl-delta-one", _with(AI, delta="1"), "delta", None),
    ("impl-delta-wrong-type", _with(AI, delta="small"), "delta", None),
    ("impl-yes-with-a-value", AI + ["--yes=no"], "yes", None),
    ("impl-model-for-other-input", _with(AI, dataset="cifar10"), "model", None),
]


@pytest.mark.parametrize("argv,param,word", [pytest.param(*r[1:], id=r[0]) for r in CLI_INVALID_DATA])
def test_data_cli_options_are_one_line_naming_the_option(argv, param, word, tmp_path, offline, monkeypatch, capsys):
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "none"))
    monkeypatch.setenv("PAPERLIB_RESULTS", str(tmp_path / "results"))
    code, out, err = run_main(argv, capsys)
    line = assert_one_line_error(code, out, err, 2, param)
    assert word is None or word in line, line


def test_data_cli_N_above_a_small_data_folder_names_N(tmp_path, offline, monkeypatch, capsys):
    write_mnist(tmp_path / "small", n_images=6)
    monkeypatch.setenv("PAPERLIB_RESULTS", str(tmp_path / "results"))
    code, out, err = run_main(_with(AI, dataset="mnist", N="8", **{"data-dir": str(tmp_path / "small")}), capsys)
    line = assert_one_line_error(code, out, err, 2, "--N")
    assert "<= 5" in line and str(tmp_path / "small") in line


def test_data_cli_given_folder_that_does_not_exist(tmp_path, offline, monkeypatch, capsys):
    """--data-dir at a folder that does not exist (quick mode): refused, nothing created."""
    monkeypatch.setenv("PAPERLIB_RESULTS", str(tmp_path / "results"))
    code, out, err = run_main(_with(AI, dataset="mnist", **{"data-dir": str(tmp_path / "typo")}), capsys)
    line = assert_one_line_error(code, out, err, 2, "dataset")
    assert str(tmp_path / "typo") in line and "does not exist" in line
    assert not (tmp_path / "typo").exists()


def test_data_every_audit_implementation_option_has_a_bad_input_row():
    """The table grows with the surface: each option of audit-implementation is the parameter of
    at least one bad-input row (CLI_INVALID or CLI_INVALID_DATA), -h aside."""
    parser = cli.build_parser()
    sub = next(a for a in parser._subparsers._group_actions if a.dest == "command").choices["audit-implementation"]
    options = {a.option_strings[-1] for a in sub._actions if a.option_strings and a.dest != "help"}
    rows = [(argv, param) for _, argv, param in CLI_INVALID if argv[0] == "audit-implementation"]
    rows += [(argv, param) for _, argv, param, _ in CLI_INVALID_DATA]
    covered = {"--" + p.lstrip("-") for _, p in rows}
    assert options - covered == set(), f"options without a bad-input row: {sorted(options - covered)}"


# ---------------------------------------------------------------------------- the dataset functions
def _data_api_rows(tmp: Path):
    from paperlib.implementations import datasets as D

    f = tmp / "a-file"
    f.write_text("x")
    return [
        # (id, function, parameter, call, exception)
        ("load_points-name", "load_points", "name", lambda: D.load_points("imagenet", 5), ValueError),
        ("load_points-k", "load_points", "k", lambda: D.load_points("synthetic", 0), ValueError),
        ("load_points-seed", "load_points", "seed", lambda: D.load_points("synthetic", 5, -1), ValueError),
        ("load_points-root-type", "load_points", "root", lambda: D.load_points("mnist", 5, root=3), TypeError),
        ("load_points-root-empty", "load_points", "root", lambda: D.load_points("mnist", 5, root=""), ValueError),
        ("load_points-root-a-file", "load_points", "root", lambda: D.load_points("mnist", 5, root=f, download=False),
         D.DatasetUnavailable),
        ("load_points-train-string", "load_points", "train", lambda: D.load_points("synthetic", 5, train="no"),
         TypeError),
        ("load_points-download-string", "load_points", "download",
         lambda: D.load_points("synthetic", 5, download="yes"), TypeError),
        ("resolve_points-name", "resolve_points", "name", lambda: D.resolve_points("svhn", 5), ValueError),
        ("resolve_points-k", "resolve_points", "k", lambda: D.resolve_points("mnist", 2.5), ValueError),
        ("resolve_points-k-above-bundle", "resolve_points", "k", lambda: D.resolve_points("mnist", 11), ValueError),
        ("resolve_points-seed", "resolve_points", "seed", lambda: D.resolve_points("mnist", 5, -3), ValueError),
        ("resolve_points-mode", "resolve_points", "mode", lambda: D.resolve_points("mnist", 5, mode="medium"),
         ValueError),
        ("resolve_points-root-type", "resolve_points", "root", lambda: D.resolve_points("mnist", 5, root=1.5),
         TypeError),
        ("resolve_points-root-missing", "resolve_points", "root",
         lambda: D.resolve_points("mnist", 5, root=tmp / "typo"), D.DatasetUnavailable),
        ("resolve_points-extra_roots-string", "resolve_points", "extra_roots",
         lambda: D.resolve_points("mnist", 5, extra_roots=str(tmp)), TypeError),
        ("resolve_points-extra_roots-item", "resolve_points", "extra_roots",
         lambda: D.resolve_points("mnist", 5, extra_roots=[None]), TypeError),
        ("resolve_dataset-name", "resolve_dataset", "name", lambda: D.resolve_dataset(None, 5), ValueError),
        ("resolve_dataset-k", "resolve_dataset", "k", lambda: D.resolve_dataset("mnist", True), ValueError),
        ("resolve_dataset-seed", "resolve_dataset", "seed", lambda: D.resolve_dataset("mnist", 5, "0"), ValueError),
        ("resolve_dataset-mode", "resolve_dataset", "mode", lambda: D.resolve_dataset("mnist", 5, mode=None),
         ValueError),
        ("resolve_dataset-root", "resolve_dataset", "root", lambda: D.resolve_dataset("mnist", 5, root=b"/tmp"),
         TypeError),
        ("resolve_dataset-extra_roots", "resolve_dataset", "extra_roots",
         lambda: D.resolve_dataset("mnist", 5, extra_roots=7), TypeError),
        ("bundle_info-name", "bundle_info", "name", lambda: D.bundle_info("synthetic"), ValueError),
        ("bundle_info-folder", "bundle_info", "folder", lambda: D.bundle_info("mnist", folder=["x"]), TypeError),
        ("load_bundled-name", "load_bundled", "name", lambda: D.load_bundled("svhn", 5), ValueError),
        ("load_bundled-k", "load_bundled", "k", lambda: D.load_bundled("mnist", 11), ValueError),
        ("load_bundled-seed", "load_bundled", "seed", lambda: D.load_bundled("mnist", 5, 1.5), ValueError),
        ("load_bundled-folder", "load_bundled", "folder", lambda: D.load_bundled("mnist", 5, folder=""), ValueError),
        ("build_bundle-source", "build_bundle", "source", lambda: D.build_bundle(None, tmp / "out"), TypeError),
        ("build_bundle-out", "build_bundle", "out", lambda: D.build_bundle(tmp, 5), TypeError),
        ("drawn_indices-name", "drawn_indices", "name", lambda: D.drawn_indices("synthetic", 5, root=tmp), ValueError),
        ("drawn_indices-k", "drawn_indices", "k", lambda: D.drawn_indices("mnist", 0, root=tmp), ValueError),
        ("drawn_indices-seed", "drawn_indices", "seed", lambda: D.drawn_indices("mnist", 5, -1, root=tmp), ValueError),
        ("drawn_indices-root", "drawn_indices", "root", lambda: D.drawn_indices("mnist", 5, root=4), TypeError),
        ("drawn_indices-train", "drawn_indices", "train", lambda: D.drawn_indices("mnist", 5, root=tmp, train=1),
         TypeError),
        ("dataset_present-name", "dataset_present", "name", lambda: D.dataset_present("svhn", tmp), ValueError),
        ("dataset_present-root", "dataset_present", "root", lambda: D.dataset_present("mnist", None), TypeError),
        ("describe_points-name", "describe_points", "name",
         lambda: D.describe_points("svhn", D.SOURCE_BUNDLED, [1], split="test"), ValueError),
        ("describe_points-source", "describe_points", "source",
         lambda: D.describe_points("mnist", "somewhere", [1], split="test"), ValueError),
        ("describe_points-indices", "describe_points", "indices",
         lambda: D.describe_points("mnist", D.SOURCE_BUNDLED, [-1], split="test"), ValueError),
        ("describe_points-split", "describe_points", "split",
         lambda: D.describe_points("mnist", D.SOURCE_BUNDLED, [1], split=None), TypeError),
        ("describe_points-sha_ok", "describe_points", "sha_ok",
         lambda: D.describe_points("mnist", D.SOURCE_BUNDLED, [1], split="test", sha_ok="yes"), TypeError),
        ("describe_points-root", "describe_points", "root",
         lambda: D.describe_points("mnist", D.SOURCE_BUNDLED, [1], split="test", root=3), TypeError),
    ]


@pytest.fixture
def data_api_rows(tmp_path, offline, monkeypatch):
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "none"))
    return {r[0]: r[1:] for r in _data_api_rows(tmp_path)}


_DATA_API_ROW_IDS = [
    "load_points-name", "load_points-k", "load_points-seed", "load_points-root-type", "load_points-root-empty",
    "load_points-root-a-file", "load_points-train-string", "load_points-download-string", "resolve_points-name",
    "resolve_points-k", "resolve_points-k-above-bundle", "resolve_points-seed", "resolve_points-mode",
    "resolve_points-root-type", "resolve_points-root-missing", "resolve_points-extra_roots-string",
    "resolve_points-extra_roots-item", "resolve_dataset-name", "resolve_dataset-k", "resolve_dataset-seed",
    "resolve_dataset-mode", "resolve_dataset-root", "resolve_dataset-extra_roots", "bundle_info-name",
    "bundle_info-folder", "load_bundled-name", "load_bundled-k", "load_bundled-seed", "load_bundled-folder",
    "build_bundle-source", "build_bundle-out", "drawn_indices-name", "drawn_indices-k", "drawn_indices-seed",
    "drawn_indices-root", "drawn_indices-train", "dataset_present-name", "dataset_present-root",
    "describe_points-name", "describe_points-source", "describe_points-indices", "describe_points-split",
    "describe_points-sha_ok", "describe_points-root",
]


@pytest.mark.parametrize("row", _DATA_API_ROW_IDS)
def test_data_api_bad_input_raises_naming_the_parameter(row, data_api_rows, tmp_path):
    func, param, call, exc_type = data_api_rows[row]
    with pytest.raises(exc_type) as info:
        call()
    msg = str(info.value)
    assert len(msg.strip().splitlines()) == 1, msg
    assert names(msg, param) or (param == "root" and str(tmp_path) in msg), (param, msg)
    assert "Traceback" not in msg


def test_data_api_rows_cover_every_parameter_of_every_dataset_function(tmp_path):
    """Every parameter of every public function of paperlib.implementations.datasets has a row."""
    import inspect

    from paperlib.implementations import datasets as D

    rows = _data_api_rows(tmp_path)
    assert [r[0] for r in rows] == _DATA_API_ROW_IDS
    covered = {(r[1], r[2]) for r in rows}
    wanted = {(fname, p) for fname in D.__all__ if inspect.isfunction(getattr(D, fname))
              for p in inspect.signature(getattr(D, fname)).parameters}
    assert wanted - covered == set(), f"without a bad-input row: {sorted(wanted - covered)}"


# ---------------------------------------------------------------------------- the bundle, tampered
def _tampered_bundle(folder: Path, name="mnist", **arrays):
    """A copy of the bundle whose ``name`` file holds ``arrays`` in place of its own, with
    SHA256SUMS rewritten to match: what a checksum file beside the data cannot catch."""
    import hashlib

    from paperlib.implementations import datasets as D

    shutil.copytree(D.bundle_dir(), folder)
    path = folder / f"{name}.npz"
    with np.load(path, allow_pickle=False) as z:
        content = {k: z[k] for k in z.files}
    content.update(arrays)
    content = {k: v for k, v in content.items() if v is not None}
    np.savez(path, **content)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    lines = [ln if not ln.endswith(path.name) else f"{digest}  {path.name}"
             for ln in (folder / "SHA256SUMS").read_text().splitlines()]
    (folder / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    return path, digest


def test_data_tampered_bundle_with_rewritten_checksum_file_is_refused(tmp_path, offline, monkeypatch, capsys):
    """Labels changed to floats and SHA256SUMS rewritten: refused against the hash held in the
    code, in one line, by the API and by audit-implementation (status 2)."""
    from paperlib.implementations import datasets as D

    folder = tmp_path / "points"
    with np.load(D.bundle_dir() / "mnist.npz") as z:
        labels = z["labels"].astype(np.float64) + 0.5
    path, _ = _tampered_bundle(folder, labels=labels)
    with pytest.raises(D.DatasetUnavailable) as info:
        D.load_bundled("mnist", 5, folder=folder)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg and "sha256" in msg and "held in paperlib" in msg
    monkeypatch.setattr(D, "bundle_dir", lambda: folder)
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "none"))
    monkeypatch.setenv("PAPERLIB_RESULTS", str(tmp_path / "results"))
    code, out, err = run_main(_ai_for("mnist"), capsys)
    line = assert_one_line_error(code, out, err, 2, "dataset")
    assert str(path) in line and "sha256" in line
    D.load_bundled("fmnist", 5, folder=folder)  # the files left alone still load


# arrays a bundle must not hold even when its hash were the one in the code (the checks after the hash)
BAD_BUNDLE_ARRAYS = [
    ("labels-float", dict(labels="float"), "labels float64"),
    ("label-outside-0-9", dict(labels="12"), "outside the classes 0-9"),
    ("pixels-wrong-shape", dict(pixels="flat"), "pixels"),
    ("pixels-float", dict(pixels="float"), "pixels float32"),
    ("indices-repeated", dict(indices="repeat"), "distinct"),
    ("split-test", dict(split=np.array("test")), "split"),  # MNIST's bundle holds training images
    ("extra-array", dict(extra=np.zeros(3)), "arrays"),
    ("labels-missing", dict(labels=None), "arrays"),
    ("labels-pickled-objects", dict(labels="object"), "cannot be read"),
]


@pytest.mark.parametrize("change,word", [pytest.param(*r[1:], id=r[0]) for r in BAD_BUNDLE_ARRAYS])
def test_data_bundle_arrays_checked_after_the_hash(change, word, tmp_path, monkeypatch):
    from paperlib.implementations import datasets as D

    with np.load(D.bundle_dir() / "mnist.npz") as z:
        orig = {k: z[k] for k in z.files}
    made = {"float": {"labels": orig["labels"].astype(np.float64), "pixels": orig["pixels"].astype(np.float32)},
            "12": {"labels": np.full(10, 12, np.uint8)}, "flat": {"pixels": orig["pixels"].reshape(10, -1)},
            "repeat": {"indices": np.zeros(10, np.int64)},
            "object": {"labels": np.array([1, "a"] * 5, dtype=object)}}
    arrays = {k: (made[v][k] if isinstance(v, str) else v) for k, v in change.items()}
    folder = tmp_path / "points"
    if any(isinstance(v, np.ndarray) and v.dtype == object for v in arrays.values()):
        shutil.copytree(D.bundle_dir(), folder)
        path = folder / "mnist.npz"
        np.savez(path, **{**orig, **arrays})  # np.savez pickles object arrays
        import hashlib

        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    else:
        path, digest = _tampered_bundle(folder, **arrays)
    monkeypatch.setitem(D.BUNDLE_SHA256, "mnist.npz", digest)  # as if the code's table had been changed too
    with pytest.raises(D.DatasetUnavailable) as info:
        D.bundle_info("mnist", folder)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg and word in msg, msg


# ============================================================================ RESULTS: damaged files
def _record(tmp_results, name="03_figure5_readout"):
    from paperlib.artifact import provenance as pv

    pv.save_result(name, {"mode": "smoke"}, {"x": 1}, mode="smoke", seed=0, wall_time=0.1)
    return tmp_results / f"{name}.json"


DAMAGE = [
    ("truncated", lambda p: p.write_bytes(p.read_bytes()[:40]), "not valid JSON"),
    ("binary-garbage", lambda p: p.write_bytes(b"\xff\xfe\x00garbage"), "not UTF-8"),
    ("wrong-schema-list", lambda p: p.write_text("[1, 2, 3]"), "not a result record"),
    ("wrong-schema-no-data", lambda p: p.write_text(json.dumps({"key": "k", "code": "c", "params": {},
                                                                "provenance": {}})), "'data'"),
    ("empty-file", lambda p: p.write_bytes(b""), "not valid JSON"),
]


@pytest.mark.parametrize("damage,reason", [pytest.param(*r[1:], id=r[0]) for r in DAMAGE])
def test_results_damaged_file_is_a_miss_and_reruns_its_notebook(damage, reason, results, tmp_path, monkeypatch):
    from paperlib.artifact import provenance as pv
    from paperlib.artifact import resultcheck as rc

    path = _record(results)
    assert pv.load_result("03_figure5_readout", {"mode": "smoke"}) == {"x": 1}
    damage(path)
    assert pv.load_result("03_figure5_readout", {"mode": "smoke"}) is None  # the notebook recomputes
    # make's check: the file is removed, its notebook's stamp touched, one line says so
    monkeypatch.chdir(tmp_path)
    (tmp_path / "book" / "notebooks").mkdir(parents=True)
    (tmp_path / "book" / "notebooks" / "03_figure5_upper_bounds.ipynb").write_text("{}")
    (tmp_path / "paperlib" / "resources").mkdir(parents=True)
    shutil.copy(ROOT / "paperlib" / "resources" / "opacus_table2.json", tmp_path / "paperlib" / "resources")
    import io

    stream = io.StringIO()
    assert rc.stamps(["03_figure5_upper_bounds", "04_audit_figure2"], tmp_path / "stamps", results,
                     stream=stream) == 0
    lines = stream.getvalue().strip().splitlines()
    assert lines and str(path) in lines[0] and reason in lines[0] and "re-run" in lines[0]
    assert not path.exists()
    st = tmp_path / "stamps"
    assert (st / "03_figure5_upper_bounds.stamp").stat().st_mtime > 0  # newer than the notebook: it re-runs
    assert (st / "04_audit_figure2.stamp").stat().st_mtime == 0  # nothing wrong there: never triggers
    assert (st / "all.txt").stat().st_mtime > 0


def test_results_intact_files_leave_the_stamps_alone(results, tmp_path, monkeypatch):
    from paperlib.artifact import resultcheck as rc

    _record(results, "01_tradeoff_basics")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "book" / "notebooks").mkdir(parents=True)
    (tmp_path / "book" / "notebooks" / "01_tradeoff_basics.ipynb").write_text("{}")
    assert rc.stamps(["01_tradeoff_basics"], tmp_path / "stamps", results) == 0
    assert (tmp_path / "stamps" / "01_tradeoff_basics.stamp").stat().st_mtime == 0
    assert (tmp_path / "stamps" / "all.txt").stat().st_mtime == 0


def test_results_broken_committed_table_fails_with_the_fix(results, tmp_path, monkeypatch):
    import io

    from paperlib.artifact import resultcheck as rc

    monkeypatch.chdir(tmp_path)
    (tmp_path / "paperlib" / "resources").mkdir(parents=True)
    (tmp_path / "paperlib" / "resources" / "opacus_table2.json").write_text('{"releases": [')
    stream = io.StringIO()
    assert rc.stamps(["08_opacus_code_audit"], tmp_path / "stamps", results, stream=stream) == 1
    lines = stream.getvalue().strip().splitlines()
    assert len(lines) == 1 and "paperlib/resources/opacus_table2.json" in lines[0]
    assert "git checkout -- paperlib/resources/opacus_table2.json" in lines[0]


def test_results_truncated_grade_does_not_crash_show(results, capsys):
    from paperlib.artifact import claims

    results.mkdir(parents=True, exist_ok=True)
    (results / "grade.json").write_text('{"schema": 1, "claims": [{"id": "C1"')
    assert claims.main(["--show", "--results", str(results)]) == 0
    out, err = capsys.readouterr()
    assert "C8" in out and "not run" in out
    assert len(err.strip().splitlines()) == 1 and "grade.json" in err and "Traceback" not in err


def test_results_wrong_schema_grade_does_not_crash_show(results, capsys):
    from paperlib.artifact import claims

    results.mkdir(parents=True, exist_ok=True)
    (results / "grade.json").write_text('{"claims": "none", "counts": {}}')
    assert claims.main(["--show", "--results", str(results)]) == 0
    out, _ = capsys.readouterr()
    assert "C1" in out


# ============================================================================ MAKE: variables up front
MAKE_ROWS = [
    ("SEED-abc", ["SEED=abc"], 2, "SEED"),
    ("SEED-negative", ["SEED=-1"], 2, "SEED"),
    ("SEED-fraction", ["SEED=1.5"], 2, "SEED"),
    ("SEED-float-notation", ["SEED=1e3"], 2, "SEED"),
    ("SEED-empty", ["SEED="], 2, "SEED"),
    ("SEED-2^63", [f"SEED={2**63}"], 2, "SEED"),
    ("SEED-20-digits", ["SEED=12345678901234567890"], 2, "SEED"),
    ("SEED-leading-zero", ["SEED=007"], 2, "SEED"),
    ("SEED-two-words", ["SEED=1 2"], 2, "SEED"),
    ("DEVICE-tpu", ["DEVICE=tpu"], 2, "DEVICE"),
    ("DEVICE-two-words", ["DEVICE=cpu cuda"], 2, "DEVICE"),
    ("MODE-unknown", ["MODE=medium"], 2, "MODE"),
    ("SEED-2^63-1-ok", [f"SEED={2**63 - 1}"], 0, None),
    ("SEED-zero-ok", ["SEED=0"], 0, None),
    ("DEVICE-cpu-ok", ["DEVICE=cpu", "SEED=7"], 0, None),
    ("WORKERS-zero", ["WORKERS=0"], 2, "WORKERS"),
    ("WORKERS-word", ["WORKERS=two"], 2, "WORKERS"),
    ("DASK_SCHEDULER-no-protocol", ["DASK_SCHEDULER=localhost:8786"], 2, "DASK_SCHEDULER"),
    ("WORKERS-scheduler-ok", ["WORKERS=3", "DASK_SCHEDULER=tcp://127.0.0.1:8786"], 0, None),
]


def _make(*variables):
    if shutil.which("make") is None:
        pytest.skip("GNU make is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "SEED", "DEVICE",
                                                             "MODE", "WORKERS", "DASK_SCHEDULER")}
    return subprocess.run(["make", "--no-print-directory", "-n", "help", *variables], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("variables,code,var", [pytest.param(*r[1:], id=r[0]) for r in MAKE_ROWS])
def test_make_variables_checked_before_anything_runs(variables, code, var):
    r = _make(*variables)
    assert r.returncode == code, r.stderr
    if code:
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
        assert f"{var}=" in lines[0] and "not allowed" in lines[0]
        assert "papermill" not in r.stdout and "executing" not in r.stdout


@pytest.mark.skipif(_cuda(), reason="a CUDA GPU is present: DEVICE=cuda is valid here")
def test_make_device_cuda_without_gpu():
    r = _make("DEVICE=cuda")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "DEVICE=cuda" in lines[0]
    assert "torch.cuda.is_available()" in lines[0]


@pytest.mark.skipif(_cuda() or os.path.exists("/dev/nvidia0") or shutil.which("nvidia-smi") is not None,
                    reason="an NVIDIA GPU is present")
def test_make_device_cuda_refused_before_an_environment_exists(tmp_path):
    """A fresh clone (no environment to ask torch): DEVICE=cuda on a machine without an NVIDIA GPU is refused when
    the Makefile is read, in one line, and nothing is created (it used to create .venv and start the install)."""
    before = set(os.listdir(ROOT))
    r = _make("DEVICE=cuda", f"PY={tmp_path / 'no-env' / 'python'}")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "DEVICE=cuda is not available" in lines[0], r.stderr
    assert "no NVIDIA GPU" in lines[0] and set(os.listdir(ROOT)) == before


def test_make_notebooks_depend_on_the_results_check():
    """Each executed notebook depends on its results-check stamp, which the check touches."""
    if shutil.which("make") is None:
        pytest.skip("GNU make is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    r = subprocess.run(["make", "--no-print-directory", "-p", "-n", "help"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    db = r.stdout
    assert re.search(r"^book/notebooks/%\.ipynb:.*build/results-check/%\.stamp", db, re.M)
    assert re.search(r"^build/results-check/all\.txt: FORCE", db, re.M)


# ----------------------------------------------------------------------------- the campaign's silent wrong answers
# Each finding of the bad-input campaign that used to give a valid-looking wrong number, with
# the value it must give now (references: 60-digit mpmath, dp_accounting's PLD, closed forms).
WRONG_BEFORE = [
    # (id, argv, JSON key, expected value, relative tolerance)
    ("delta-1e-300-claimed", _with(EP, delta="1e-300", claimed=True), "epsilon", 17.887714, 1e-6),  # was 3.4965
    ("delta-1e-17-moves", _with(EP, delta="1e-17"), "epsilon", 46.46, 1e-3),  # was 42.92 for every delta < 1e-17
    ("sgm-10000-rounds", ["epsilon", "--mechanism", "sgm", "--N", "200000", "--q", "0.005", "--sigma", "1", "--n",
                          "1000", "--rounds", "10000", "--delta", "1e-5"], "epsilon", 2.801, 0.01),  # was 38.63
    ("sgm-3000-rounds", ["epsilon", "--mechanism", "sgm", "--N", "200000", "--q", "0.005", "--sigma", "1", "--n",
                         "1000", "--rounds", "3000", "--delta", "1e-5"], "epsilon", 1.483, 0.01),  # was 4.234
]


@pytest.mark.parametrize("case", WRONG_BEFORE, ids=[c[0] for c in WRONG_BEFORE])
def test_formerly_wrong_answers_are_right(case, capsys):
    _, argv, key, expected, rtol = case
    code, out, err = run_main(argv, capsys)
    assert code == 0, err
    got = json.loads(out)[key]
    assert got == pytest.approx(expected, rel=rtol)
    if "--rounds" in argv:  # multi-round results carry their accounting error
        lo, hi = json.loads(out)["epsilon_bracket"]
        assert lo <= got <= hi and (hi - lo) <= 0.01 * hi


def test_tiny_q_claim_is_a_tradeoff_function(capsys):
    """q = 1e-8 gave beta(0.1) = 0.9000047 > 1 - alpha; q = 1e-12 gave 0.943."""
    for q in ("1e-8", "1e-12"):
        code, out, err = run_main(["tradeoff", "--mechanism", "sgm", "--N", "10", "--q", q, "--sigma", "1", "--n",
                                   "5", "--alpha", "0.1", "0.5"], capsys)
        assert code == 0, err
        beta = json.loads(out)["sgm_claim_beta"]
        assert beta[0] <= 0.9 and beta[1] <= 0.5
        assert beta[0] == pytest.approx(0.9, abs=1e-6) and beta[1] == pytest.approx(0.5, abs=1e-6)


# ============================================================================ core: the practitioner boundary,
# every option of `check`, `epsilon --rounds`, the one size limit (rows of helper `core`, kept in one block)
CK1 = _with(CK, epochs="1")
CORE_CLI_INVALID = [
    ("check-release-1.6.1-not-audited", _with(CK1, **{"opacus-version": "1.6.1"}), "--opacus-version"),
    ("check-release-1.7.0-not-audited", _with(CK1, **{"opacus-version": "1.7.0"}), "--opacus-version"),
    ("check-release-1.99.0-not-audited", _with(CK1, **{"opacus-version": "1.99.0"}), "--opacus-version"),
    ("check-release-2.0-even-assumed", _with(CK1, **{"opacus-version": "2.0.0"}) + ["--assume-release"],
     "--opacus-version"),
    ("check-release-missing", _without(CK1, "--opacus-version"), "--opacus-version"),
    ("check-dpsur-with-opacus-version", _with(CK1, implementation="dpsur"), "--opacus-version"),
    ("check-dpsur-public-divisor", _with(_without(CK1, "--opacus-version"), implementation="dpsur",
                                         divisor="public"), "--divisor"),
    ("check-dpsur-prv", _with(_without(CK1, "--opacus-version"), implementation="dpsur", accountant="prv"),
     "--accountant"),
    ("check-dpsur-loss-sum", _with(_without(CK1, "--opacus-version"), implementation="dpsur",
                                   **{"loss-reduction": "sum"}), "--loss-reduction"),
    ("check-implementation-unknown", _with(CK1, implementation="tf-privacy"), "implementation"),
    ("check-divisor-unknown", _with(CK1, divisor="constant"), "divisor"),
    ("check-delta-0.5", _with(CK1, delta="0.5"), "--delta"),
    ("check-delta-above-1-over-N", _with(CK1, delta="2e-5"), "--delta"),
    ("check-delta-one", _with(CK1, delta="1"), "--delta"),
    ("check-delta-nan", _with(CK1, delta="nan"), "--delta"),
    ("check-steps-1e6-prv-names-steps", _with(_without(CK1, "--epochs"), steps="1000000"), "--steps"),
    ("check-sigma-0.3-100-epochs-prv-names-epochs-steps", _with(CK, epochs="100", **{"noise-multiplier": "0.3"}),
     "--steps"),
    ("check-steps-above-10^6", _with(_without(CK1, "--epochs"), steps="1000001", accountant="rdp"), "--steps"),
    ("check-dataset-size-2^60", _with(CK1, **{"dataset-size": str(2**60)}), "--dataset-size"),
    ("check-batch-size-zero", _with(CK1, **{"batch-size": "0"}), "--batch-size"),
    ("check-sample-rate-zero", _with(_without(CK1, "--batch-size"), **{"sample-rate": "0"}), "--sample-rate"),
    ("check-sample-rate-nan", _with(_without(CK1, "--batch-size"), **{"sample-rate": "nan"}), "--sample-rate"),
    ("check-steps-zero", _with(_without(CK1, "--epochs"), steps="0"), "--steps"),
    ("check-noise-inf", _with(CK1, **{"noise-multiplier": "inf"}), "--noise-multiplier"),
    ("check-noise-zero", _with(CK1, **{"noise-multiplier": "0"}), "--noise-multiplier"),
    ("check-params-2^60", _with(CK1, params=str(2**60)), "--params"),
    ("check-drop-last-too-large-batch", _with(CK1, **{"batch-size": "60000", "dataset-size": "60000"})
     + ["--drop-last"], "--batch-size"),
    ("epsilon-rounds-zero", _with(EP, rounds="0"), "rounds"),
    ("epsilon-rounds-negative", _with(EP, rounds="-3"), "rounds"),
    ("epsilon-rounds-2^60", _with(EP, rounds=str(2**60)), "rounds"),
    ("epsilon-rounds-fraction", _with(EP, rounds="2.5"), "rounds"),
    ("epsilon-rounds-above-limit-asgm-upper", _with(EP, mechanism="asgm", bound="upper", rounds="1000000000"),
     "rounds"),
    ("epsilon-rounds-above-limit-guarantee", _with(EP, rounds="2000000"), "rounds"),
    ("epsilon-rounds-clt-sgm", _with(EP, mechanism="sgm", bound="clt", rounds="3"), "bound"),
]


@pytest.mark.parametrize("argv,param", [pytest.param(a, p, id=i) for i, a, p in CORE_CLI_INVALID])
def test_core_cli_invalid_input_is_one_line(argv, param, capsys):
    code, out, err = run_main(argv, capsys)
    line = assert_one_line_error(code, out, err, 2, param)
    if "size limit" in line:
        assert "estimated" in line and "--yes" in line


CORE_CLI_ANSWERS = [
    # (id, argv, what the answer must show): valid settings that once crashed or misled now answer
    ("check-1.6.0-1600-16-3-epochs-1e6-params", ["check", "--opacus-version", "1.6.0", "--dataset-size", "1600",
                                                 "--batch-size", "16", "--epochs", "3", "--noise-multiplier", "1.0",
                                                 "--params", "1000000"], "REFUTED"),
    ("check-release-1.7.0-assumed", _with(CK1, **{"opacus-version": "1.7.0"}) + ["--assume-release"], "ASSUMED"),
    ("check-dpsur", _with(_without(CK1, "--opacus-version"), implementation="dpsur"), "Mechanism run: DPSUR"),
    ("check-public-divisor", _with(CK1, divisor="public"), "STANDS"),
    ("epsilon-rounds-limit-passed-with-yes", _with(EP, mechanism="easgm", bound="upper", rounds="2000000"),
     '"epsilon"'),  # an exact chi-square pair composes any number of rounds: no limit
]


@pytest.mark.parametrize("argv,shown", [pytest.param(a, w, id=i) for i, a, w in CORE_CLI_ANSWERS])
def test_core_cli_formerly_broken_settings_answer(argv, shown, capsys):
    code, out, err = run_main(argv, capsys)
    assert code == 0, err
    assert shown in out and "Traceback" not in err


def test_audit_at_the_trials_limit_says_its_estimate(capsys, monkeypatch):
    """audit --trials 10,000,000 (the limit) is allowed, and says what it will cost before it runs (on a
    terminal, where it then shows its progress)."""
    import paperlib.audit as audit_mod

    monkeypatch.setattr(audit_mod, "audit_worst_case", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("stop")))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, out, err = run_main(_with(AU, trials="10000000"), capsys)
    lines = err.strip().splitlines()
    assert lines[0].startswith("paperlib: note: trials = 10,000,000: estimated") and "progress" in lines[0]
    assert code == 1 and len(lines) == 2  # the note, then the (injected) failure in one line
    code, out, err = run_main(_with(AU, trials="10000001"), capsys)
    assert_one_line_error(code, out, err, 2, "trials")
    # not on a terminal (a script, a CI log): the estimate still comes first, without the progress promise
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    code, out, err = run_main(_with(AU, trials="10000000"), capsys)
    lines = err.strip().splitlines()
    assert lines[0].startswith("paperlib: note: trials = 10,000,000: estimated") and "progress" not in lines[0]


def _core_api_rows():
    import torch
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    from paperlib import CertifiedAccountant, check_opacus, check_run, curve, fix_normaliser, sum_reduction_lr
    from paperlib.fdp.validation import check_bool, check_size
    from paperlib.practitioner import Run, normaliser_of, normaliser_scan, opacus1_rates, opacus_release

    model = torch.nn.Linear(3, 2)
    engine = PrivacyEngine(accountant="rdp")
    _, opt, loader = engine.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                         data_loader=DataLoader(TensorDataset(torch.zeros(100, 3),
                                                                              torch.zeros(100, dtype=torch.long)),
                                                                batch_size=10),
                                         noise_multiplier=1.0, max_grad_norm=1.0, poisson_sampling=True)
    ck = dict(dataset_size=60000, batch_size=256, epochs=1, noise_multiplier=1.1, n_params=100)
    run = dict(dataset_size=60000, noise_multiplier=1.1, n_params=100, opacus_version="1.6.0", batch_size=256,
               epochs=1)
    return [
        ("check_opacus-engine-object", lambda: check_opacus(object(), opt, loader, epochs=1, delta=1e-5), TypeError,
         "privacy_engine"),
        ("check_opacus-engine-string", lambda: check_opacus("engine", opt, loader, epochs=1, delta=1e-5), TypeError,
         "privacy_engine"),
        ("check_opacus-model-string", lambda: check_opacus(engine, opt, loader, epochs=1, delta=1e-5, model="m"),
         TypeError, "model"),
        ("check_opacus-optimizer-none", lambda: check_opacus(engine, None, loader, epochs=1, delta=1e-5), TypeError,
         "optimizer"),
        ("check_opacus-loader-list", lambda: check_opacus(engine, opt, [1], epochs=1, delta=1e-5), TypeError,
         "data_loader"),
        ("check_opacus-delta", lambda: check_opacus(engine, opt, loader, epochs=1, delta=0.5), ValueError, "delta"),
        ("check_opacus-allow-large", lambda: check_opacus(engine, opt, loader, epochs=1, delta=1e-5,
                                                          allow_large="yes"), TypeError, "allow_large"),
        ("accountant-delta-before-a-step", lambda: CertifiedAccountant(dataset_size=100, n_params=3).get_epsilon(-1),
         ValueError, "delta"),
        ("accountant-dataset-size", lambda: CertifiedAccountant(dataset_size=1.5, n_params=3), ValueError,
         "dataset_size"),
        ("accountant-pld-options", lambda: CertifiedAccountant(dataset_size=100, n_params=3, pld_options="x"),
         TypeError, "pld_options"),
        ("accountant-release", lambda: CertifiedAccountant(opacus_version="1.7.0", dataset_size=100, n_params=3),
         ValueError, "opacus_version"),
        ("accountant-relation", lambda: CertifiedAccountant(dataset_size=100, n_params=3).get_epsilon(
            1e-3, relation="swap"), ValueError, "relation"),
        ("accountant-n-params-zero", lambda: CertifiedAccountant(dataset_size=100, n_params=0), ValueError,
         "n_params"),
        ("register-accountant-dataset-size", lambda: _register(dataset_size=1), ValueError, "dataset_size"),
        ("register-accountant-name", lambda: _register(dataset_size=100, name=" "), ValueError, "name"),
        ("chain-certificate-sgm", lambda: _chain("sgm"), ValueError, "mechanism"),
        ("replace-one-q-zero", lambda: _replace_one(0.0), ValueError, "q"),
        ("fix-optimizer-object", lambda: fix_normaliser(object(), 4), TypeError, "optimizer"),
        ("fix-batch-size-bool", lambda: fix_normaliser(opt, True), ValueError, "batch_size"),
        ("normaliser-of-string", lambda: normaliser_of("opt"), TypeError, "optimizer"),
        ("sum-lr-string", lambda: sum_reduction_lr("0.1", 4), ValueError, "lr"),
        ("sum-lr-batch-zero", lambda: sum_reduction_lr(0.1, 0), ValueError, "batch_size"),
        ("check-run-drop-last-string", lambda: check_run("1.6.0", drop_last="no", **ck), TypeError, "drop_last"),
        ("check-run-poisson-string", lambda: check_run("1.6.0", poisson="yes", **ck), TypeError, "poisson"),
        ("check-run-pld-options", lambda: check_run("1.6.0", pld_options=3, **ck), TypeError, "pld_options"),
        ("check-run-1.7.0", lambda: check_run("1.7.0", **ck), ValueError, "opacus_version"),
        ("check-run-delta-0.5", lambda: check_run("1.6.0", delta=0.5, **ck), ValueError, "delta"),
        ("check-run-implementation", lambda: check_run("1.6.0", implementation="jax", **ck), ValueError,
         "implementation"),
        ("run-charged-without-rate", lambda: Run(**run, charged_rate=True), ValueError, "sample_rate"),
        ("run-assume-string", lambda: Run(**dict(run, opacus_version="1.7.0"), assume_release="yes"), TypeError,
         "assume_release"),
        ("release-version-number", lambda: opacus_release(1.6), ValueError, "opacus_version"),
        ("release-assume-int", lambda: opacus_release("1.7.0", assume=1), TypeError, "assume_release"),
        ("rates-drop-last-string", lambda: opacus1_rates(100, 10, "no"), TypeError, "drop_last"),
        ("scan-drop-last-string", lambda: normaliser_scan(100, [10], "no"), TypeError, "drop_last"),
        ("curve-dpsur-unregistered", lambda: curve("dpsur", "upper", 3, 0.5, 1.0, 2), ValueError, "bound"),
        ("curve-bound-unknown", lambda: curve("easgm", "exact", 3, 0.5, 1.0, 2), ValueError, "bound"),
        ("curve-rounds-bool", lambda: curve("easgm", "upper", 3, 0.5, 1.0, 2, rounds=True), ValueError, "rounds"),
        ("check-bool-int", lambda: check_bool(1, "flag"), TypeError, "flag"),
        ("check-size-above", lambda: check_size("trials", 11, 10, estimate="1 s"), ValueError, "trials"),
    ]


def _register(**kw):
    from paperlib.practitioner import register_certified_accountant
    return register_certified_accountant(**kw)


def _chain(mechanism):
    from paperlib.mechanisms.chain import chain_certificate
    from paperlib.mechanisms.setting import Setting
    return chain_certificate(Setting(mechanism, 100, 0.1, 1.0, 10, rounds=3))


def _replace_one(q):
    from paperlib.mechanisms.multiround import sgm_replace_one_rounds
    return sgm_replace_one_rounds(q, 1.0, rounds=3)


CORE_API_IDS = ["check_opacus-engine-object", "check_opacus-engine-string", "check_opacus-model-string",
                "check_opacus-optimizer-none", "check_opacus-loader-list", "check_opacus-delta",
                "check_opacus-allow-large", "accountant-delta-before-a-step", "accountant-dataset-size",
                "accountant-pld-options", "accountant-release", "accountant-relation", "accountant-n-params-zero",
                "register-accountant-dataset-size", "register-accountant-name", "chain-certificate-sgm",
                "replace-one-q-zero", "fix-optimizer-object", "fix-batch-size-bool",
                "normaliser-of-string", "sum-lr-string", "sum-lr-batch-zero", "check-run-drop-last-string",
                "check-run-poisson-string", "check-run-pld-options", "check-run-1.7.0", "check-run-delta-0.5",
                "check-run-implementation", "run-charged-without-rate", "run-assume-string", "release-version-number",
                "release-assume-int", "rates-drop-last-string", "scan-drop-last-string", "curve-dpsur-unregistered",
                "curve-bound-unknown", "curve-rounds-bool", "check-bool-int", "check-size-above"]


@pytest.fixture(scope="module")
def core_api_rows():
    pytest.importorskip("opacus")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {r[0]: r[1:] for r in _core_api_rows()}


@pytest.mark.parametrize("row", CORE_API_IDS)
def test_core_api_bad_input_raises_naming_the_argument(row, core_api_rows):
    call, exc_type, param = core_api_rows[row]
    with pytest.raises(exc_type) as info:
        call()
    assert type(info.value) is exc_type or issubclass(type(info.value), exc_type)
    msg = str(info.value)
    assert len(msg.strip().splitlines()) == 1, msg
    assert names(msg.split(":")[0].split(" ")[0], param) or msg.startswith(param), (param, msg)


def test_core_api_rows_are_all_listed(core_api_rows):
    assert list(core_api_rows) == CORE_API_IDS


def test_make_dry_run_writes_nothing(tmp_path):
    """`make -n all` used to write build/ (the notebooks' dependency files: make remakes an included makefile even
    under -n); a dry run now reads the ones that exist and creates nothing."""
    if shutil.which("make") is None:
        pytest.skip("GNU make is not installed")
    for name in ("Makefile", "pyproject.toml", "requirements-lock.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    shutil.copytree(ROOT / "paperlib", tmp_path / "paperlib", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "SEED", "DEVICE",
                                                             "MODE", "WORKERS", "DASK_SCHEDULER")}
    before = sorted(p.name for p in tmp_path.iterdir())
    r = subprocess.run(["make", "--no-print-directory", "-n", "all", "MODE=quick", "DEVICE=cpu"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before and not (tmp_path / "build").exists()
