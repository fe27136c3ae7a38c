"""``paperlib.check`` (``python -m paperlib check``, issue 12 item 3): the claimed epsilon against
Opacus's own accountants (the installed 1.6.0 and, when cached, the 0.13.0/0.15.0 release code),
the certified epsilon against ``certified_for_training_set`` and dp_accounting's SGM PLD, the
verdicts, the statement and its JSON form."""

from __future__ import annotations

import ast
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, run_main

from paperlib.check import check_run, claimed_epsilon, default_accountant, format_statement
from paperlib.mechanisms.certified import certified_for_training_set

ACCEPT = dict(dataset_size=60_000, batch_size=256, epochs=10, noise_multiplier=1.1, n_params=10**6, delta=1e-5)
ACCEPT_ARGV = ["check", "--dataset-size", "60000", "--batch-size", "256", "--epochs", "10", "--noise-multiplier",
               "1.1", "--params", "1000000", "--delta", "1e-5"]


@pytest.fixture(scope="module")
def r015():
    return check_run("0.15.0", **ACCEPT)


@pytest.fixture(scope="module")
def r16():
    return check_run("1.6.0", **ACCEPT)


def _rdp_accountant(q, sigma, steps, delta):
    from opacus.accountants import RDPAccountant

    acc = RDPAccountant()
    for _ in range(3):  # three calls, then the rest at once: the history merges equal steps
        acc.step(noise_multiplier=sigma, sample_rate=q)
    acc.history = [(sigma, q, steps)]
    return float(acc.get_epsilon(delta=delta))


def _release_privacy_analysis(version):
    """The release's own ``privacy_analysis`` module and ``DEFAULT_ALPHAS`` (numpy-only code), or skip."""
    from paperlib.implementations.opacus_code.wheels import cache_root

    folder = cache_root() / f"opacus-{version}" / "opacus"
    if not (folder / "privacy_analysis.py").is_file():
        pytest.skip(f"Opacus {version} is not in the release cache")
    spec = importlib.util.spec_from_file_location(f"_opacus_{version.replace('.', '_')}_pa",
                                                  folder / "privacy_analysis.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tree = ast.parse((folder / "privacy_engine.py").read_text())
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") ==
                "DEFAULT_ALPHAS")
    alphas = eval(compile(ast.Expression(node.value), "alphas", "eval"))  # a list comprehension of literals
    return mod, alphas


def _release_epsilon(version, q, sigma, steps, delta):
    """What ``PrivacyEngine.get_privacy_spent`` of that release prints: rdp(one step) * steps, converted."""
    pa, alphas = _release_privacy_analysis(version)
    rdp = np.asarray(pa.compute_rdp(q, sigma, 1, alphas)) * steps
    return float(pa.get_privacy_spent(alphas, rdp, delta)[0])


# ------------------------------------------------------------------------------ acceptance: 0.15.0
def test_acceptance_0150_claim_equals_opacus_rdp_accountant(r015):
    q, T = 256 / 60_000, 10 * 234
    assert r015["mechanism"] == "easgm" and r015["steps"] == T and r015["sample_rate"] == q
    assert r015["claim"]["accountant"] == "rdp"  # 0.15 has no other
    assert r015["claimed_epsilon"] == pytest.approx(_rdp_accountant(q, 1.1, T, 1e-5), rel=1e-12)


def test_acceptance_0150_claim_equals_the_release_own_code(r015):
    q, T = 256 / 60_000, 10 * 234
    assert r015["claimed_epsilon"] == pytest.approx(_release_epsilon("0.15.0", q, 1.1, T, 1e-5), rel=1e-9)


def test_old_releases_convert_rdp_as_they_did():
    """0.13.0 converts with rdp - log(delta)/(alpha-1) (Mironov), a larger epsilon than 0.14+."""
    q, sigma, T = 256 / 60_000, 1.1, 2340
    old = claimed_epsilon("0.13.0", q, sigma, T, 1e-5, "rdp")["epsilon"]
    new = claimed_epsilon("0.14.0", q, sigma, T, 1e-5, "rdp")["epsilon"]
    assert old > new * 1.05
    assert old == pytest.approx(_release_epsilon("0.13.0", q, sigma, T, 1e-5), rel=1e-9)


def test_acceptance_0150_certified_interval_and_verdicts(r015):
    direct = certified_for_training_set("easgm", 60_000, 256 / 60_000, 1.1, 10**6, rounds=2340, delta=1e-5)
    assert r015["epsilon_certified"] == pytest.approx(direct["epsilon_certified"], rel=1e-12)
    assert r015["epsilon_forced"] == pytest.approx(direct["epsilon_forced"], rel=1e-12)
    for e, side in zip(r015["neighbours"], ("removal", "addition")):
        assert e["name"] == side and e["sizes"] == direct[side]["pair"]
        lo, hi = e["epsilon_certified_bracket"]
        assert lo <= hi == e["epsilon_certified"] and (hi - lo) / hi < 0.01
        assert e["epsilon_forced"] <= e["epsilon_certified"]
        # the forced epsilon (Theorem 3.8 over T rounds) exceeds the claim: refuted
        assert e["epsilon_forced"] > r015["claimed_epsilon"] and e["verdict"] == "refuted" and not e["claim_stands"]
    assert r015["interval"] == [r015["epsilon_forced"], r015["epsilon_certified"]]
    assert not r015["claim_stands"] and any("loss_reduction='sum'" in m for m in r015["remedies"])
    assert any("paperlib.fix" in m for m in r015["remedies"])


def test_acceptance_0150_cli_prints_claim_certified_interval_and_verdicts(r015, capsys):
    code, out, err = run_main(ACCEPT_ARGV + ["--opacus-version", "0.15.0"], capsys)
    assert code == 0, err
    assert f"Claimed: epsilon = {r015['claimed_epsilon']:.4g}" in out
    assert "EASGM" in out
    for e in r015["neighbours"]:
        row = next(ln for ln in out.splitlines() if ln.startswith(e["name"] + " "))
        assert "REFUTED" in row and f"{e['epsilon_certified']:.4g}" in row and f"{e['epsilon_forced']:.4g}" in row
    assert f"({r015['epsilon_certified']:.4g}, 1e-05)-DP" in out
    assert max(len(ln) for ln in out.splitlines()) <= 100


# ------------------------------------------------------------------------------ acceptance: 1.6.0
def test_acceptance_16_floors_agree_claim_stands_and_certified_is_sgm(r16):
    assert r16["mechanism"] == "feasgm" and r16["sample_rate"] == 1 / 235 and r16["steps"] == 2350
    assert r16["claim"]["accountant"] == "prv" == default_accountant("1.6.0")
    for e in r16["neighbours"]:
        assert e["normalisers"] == [255, 255] and e["floors_agree"] and e["verdict"] == "stands" and e["claim_stands"]
    assert r16["claim_stands"] and r16["remedies"] == []
    # the certified epsilon is the SGM epsilon: against Opacus's PRV claim (eps_error 0.01) ...
    cert, err = r16["epsilon_certified"], r16["neighbours"][0]["certified_accounting_error"]
    assert abs(cert - r16["claimed_epsilon"]) <= 0.01 + err
    # ... and against dp_accounting's own PLD of the subsampled Gaussian, composed 2350 times
    from dp_accounting.pld import privacy_loss_distribution as pld

    # (pessimistic, grid 2e-4: an upper bound within ~1e-3 of the truth; 1e-3 gives 0.9205, looser)
    ref = pld.from_gaussian_mechanism(1.1, sampling_prob=1 / 235, value_discretization_interval=2e-4,
                                      use_connect_dots=True).self_compose(2350).get_epsilon_for_delta(1e-5)
    lo, hi = r16["neighbours"][0]["epsilon_certified_bracket"]
    assert lo <= ref <= hi + 1e-3 and hi - lo < 0.01 * hi
    # and the claimed PRV epsilon is Opacus's own accountant
    from opacus.accountants import PRVAccountant

    a = PRVAccountant()
    a.history = [(1.1, 1 / 235, 2350)]
    assert r16["claimed_epsilon"] == pytest.approx(a.get_epsilon(delta=1e-5), rel=1e-9)


def test_16_batch_dividing_the_dataset_removal_refuted_addition_not_covered():
    r = check_run("1.6.0", 60_000, 250, epochs=1, noise_multiplier=1.1, n_params=26_010, accountant="rdp")
    rem, add = r["neighbours"]
    assert rem["normalisers"] == [249, 250] and not rem["floors_agree"]
    assert rem["verdict"] == "refuted" and rem["epsilon_forced"] > r["claimed_epsilon"]
    assert add["verdict"] == "not covered" and "different sampling rate" in add["why"]
    assert r["epsilon_certified"] is None and r["epsilon_forced"] == rem["epsilon_forced"]
    suggestion = next(m for m in r["remedies"] if "batch size for which int(N q)" in m)
    for b in (int(x) for x in suggestion.split("e.g. ")[1].split(" (")[0].split(", ")):
        again = check_run("1.6.0", 60_000, b, epochs=1, noise_multiplier=1.1, n_params=26_010, accountant="rdp")
        assert again["claim_stands"], b


def test_loss_reduction_sum_is_sgm_and_stands():
    r = check_run("0.13.0", 60_000, 256, epochs=1, noise_multiplier=1.1, n_params=10**6, loss_reduction="sum")
    assert r["mechanism"] == "sgm" and r["claim_stands"]
    assert all(e["verdict"] == "stands" for e in r["neighbours"])
    # the certified SGM epsilon (PLD) never exceeds Opacus 0.13's (loose) RDP claim here
    assert r["epsilon_certified"] <= r["claimed_epsilon"]


def test_asgm_release_verdicts_and_claim():
    r = check_run("0.13.0", 60_000, 256, epochs=1, noise_multiplier=1.1, n_params=26_010)
    assert r["mechanism"] == "asgm"
    for e in r["neighbours"]:
        assert e["epsilon_forced"] <= e["epsilon_certified"]
        assert e["verdict"] in ("unresolved", "refuted", "holds")
        assert not e["claim_stands"] or e["epsilon_certified"] <= r["claimed_epsilon"]


def test_own_poisson_sampler_on_an_old_release_is_asgm():
    r = check_run("0.10.0", 2_000, 64, epochs=1, noise_multiplier=2.0, n_params=100, poisson=True)
    assert r["mechanism"] == "asgm" and "own Poisson sampler" in r["mechanism_note"]


def test_numerics_out_of_range_are_reported_not_raised(monkeypatch):
    """Where the certified numerics refuse (e.g. a noncentrality out of the chi-square code's range), the
    neighbour says so and the forced epsilon still decides; nothing is raised."""
    import paperlib.mechanisms.certified as cm

    def refuse(*a, **k):
        raise ValueError("could not compute this trade-off: a component's noncentrality is out of range")

    monkeypatch.setattr(cm, "certified_interval", refuse)
    r = check_run("0.15.0", 60_000, 256, epochs=1, noise_multiplier=1.1, n_params=10**6)
    for e in r["neighbours"]:
        assert e["epsilon_certified"] is None and "noncentrality" in e["certified_error"]
        assert e["epsilon_forced"] > r["claimed_epsilon"] and e["verdict"] == "refuted"
    assert r["epsilon_certified"] is None
    text = format_statement(r)
    assert "REFUTED" in text and "not computed" in text


def test_cli_json_is_the_report(capsys):
    argv = ["check", "--opacus-version", "1.6.0", "--dataset-size", "60000", "--batch-size", "256", "--epochs", "1",
            "--noise-multiplier", "1.1", "--params", "26010", "--accountant", "rdp", "--json"]
    code, out, err = run_main(argv, capsys)
    assert code == 0, err
    got = json.loads(out)
    want = check_run("1.6.0", 60_000, 256, epochs=1, noise_multiplier=1.1, n_params=26_010, accountant="rdp")
    for k in ("mechanism", "claimed_epsilon", "epsilon_certified", "epsilon_forced", "steps", "claim_stands"):
        assert got[k] == pytest.approx(want[k], rel=1e-12) if isinstance(want[k], float) else got[k] == want[k]
    assert [e["verdict"] for e in got["neighbours"]] == ["stands", "stands"]
    assert got["statement"] == format_statement(want)


def test_check_of_an_mnist_sized_run_answers():
    """An MNIST-sized run (10^6 parameters) gets a finite certified epsilon and reports its time;
    the time's target is bench/bench_check.py's (no test asserts a speed)."""
    r = check_run("1.6.0", 60_000, 256, epochs=1, noise_multiplier=1.1, n_params=10**6, accountant="rdp")
    assert r["seconds"] > 0 and math.isfinite(r["epsilon_certified"])


def test_readme_check_section_is_what_check_prints(r015):
    """README "Check your own run": its command is the acceptance run and its output lines are what
    format_statement prints for it; it names check_opacus and CertifiedAccountant."""
    import re
    import shlex

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    body = text.split("## Check your own run\n", 1)[1].split("\n## ", 1)[0]
    cmd = re.search(r"```bash\n(.*?)```", body, re.S).group(1).replace("\\\n", " ")
    argv = shlex.split(cmd)
    assert argv[:4] == ["python", "-m", "paperlib", "check"]
    opts = dict(zip(argv[4::2], argv[5::2]))
    want = dict(zip(ACCEPT_ARGV[1::2], ACCEPT_ARGV[2::2]), **{"--opacus-version": "0.15.0"})
    assert opts == want
    shown = re.search(r"```text\n(.*?)```", body, re.S).group(1).splitlines()
    printed = format_statement(r015).splitlines()
    for line in shown:
        if line.strip() and not line.endswith("...") and line != "...":
            assert line in printed, line
    assert "check_opacus" in body and "CertifiedAccountant" in body


def test_default_accountant_by_release():
    assert [default_accountant(v) for v in ("0.13.0", "0.15.0", "1.0.2", "1.2.0", "1.3.0", "1.6.0")] == \
        ["rdp", "rdp", "rdp", "rdp", "prv", "prv"]


def test_given_rate_and_steps_equal_the_derived_run():
    """A rate and a step count given as Opacus 1.6.0 derives them give the same report."""
    by_batch = check_run("1.6.0", 60_000, 256, epochs=2, noise_multiplier=1.1, n_params=26_010, accountant="rdp")
    by_rate = check_run("1.6.0", 60_000, sample_rate=1 / 235, steps=470, noise_multiplier=1.1, n_params=26_010,
                        accountant="rdp")
    for k in ("sample_rate", "accountant_sample_rate", "steps", "claimed_epsilon", "epsilon_certified",
              "epsilon_forced"):
        assert by_rate[k] == by_batch[k], k


def test_opacus1_float_quirk_charges_one_over_len_of_the_dp_loader():
    """int(1/(1/93)) = 92 in floating point: the DPDataLoader runs 92 steps, Opacus charges 1/92 and divides
    by int(N/92); check uses the charged rate and says so."""
    r = check_run("1.6.0", 9_300, sample_rate=1 / 93, epochs=1, noise_multiplier=1.0, n_params=100, accountant="rdp")
    assert r["steps_per_epoch"] == 92 and r["accountant_sample_rate"] == 1 / 92 and r["sample_rate"] == 1 / 93
    assert any("charges the accountant" in n for n in r["notes"])
    acc = check_run("1.6.0", 9_300, sample_rate=1 / 92, steps=92, noise_multiplier=1.0, n_params=100,
                    accountant="rdp", charged_rate=True)
    assert acc["claimed_epsilon"] == r["claimed_epsilon"] and acc["epsilon_certified"] == r["epsilon_certified"]
