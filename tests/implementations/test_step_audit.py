"""Any DP-SGD step classified from its own updates (issue 36, :mod:`paperlib.implementations.step_audit`):
each known rule found, a rule outside them refused with its evidence, real code (Opacus, hand-written PyTorch
loops) classified, and the run's report the one ``check`` gives."""

from __future__ import annotations

import math

import numpy as np
import pytest

from paperlib.implementations import step_examples as E
from paperlib.implementations.step_audit import StepNotClassified, classify_step
from paperlib.mechanisms.core import Mechanism


def _poisson(rng, m, q):
    return np.flatnonzero(rng.random(m) < q)


def _shuffle(rng, m, q):
    """A batch of a fixed size, round(m q), drawn without replacement (one batch of a shuffled epoch)."""
    return np.sort(rng.permutation(m)[:round(m * q)])


def _step(nu_of, *, clip=True, noise_scale=1.0, report_batch=None, sample=_poisson):
    """A NumPy DP-SGD step whose normaliser is ``nu_of(m, q, batch_size, rng)`` (0: skip the round) and whose batch
    is ``sample(rng, m, q)``."""
    def step(g, *, sampling_rate, noise_multiplier, max_grad_norm, seed):
        rng = np.random.default_rng(seed)
        m = g.shape[0]
        b = sample(rng, m, sampling_rate)
        rows = g[b]
        if clip:
            rows = rows / np.maximum(1.0, np.linalg.norm(rows, axis=1, keepdims=True) / max_grad_norm)
        s = rows.sum(0) + rng.normal(0.0, noise_scale * noise_multiplier * max_grad_norm, g.shape[1])
        nu = nu_of(m, sampling_rate, len(b), rng)
        u = np.zeros(g.shape[1]) if nu == 0 else s / nu
        return (u, report_batch(b)) if report_batch else u
    return step


RULES = {
    "|B|": (lambda m, q, B, r: max(B, 1), Mechanism.ASGM),
    "Nq": (lambda m, q, B, r: m * q, Mechanism.EASGM),
    "floor(Nq)": (lambda m, q, B, r: math.floor(m * q), Mechanism.FEASGM),
    "public constant": (lambda m, q, B, r: 5.0, Mechanism.SGM),
    "separate draw": (lambda m, q, B, r: int((r.random(m) < q).sum()), Mechanism.DPSUR),
}


@pytest.mark.parametrize("rule", list(RULES))
def test_each_known_rule_is_found_with_its_mechanism(rule):
    nu_of, mech = RULES[rule]
    a = classify_step(_step(nu_of), seed=3)
    assert (a.rule, a.mechanism) == (rule, mech)
    assert a.sentence.startswith("The step divides by")
    if rule == "public constant":
        assert a.constant == 5.0 and "SGM claim applies" in a.sentence
    else:
        assert mech.value.upper() in a.sentence.upper() or "DPSUR" in a.sentence
    # the same seed gives the same reading
    assert classify_step(_step(nu_of), seed=3).to_json() == a.to_json()


def test_nq_and_its_floor_are_told_apart_by_their_values():
    """On the probe's D (7 records, rate 0.5) N q = 3.5 and floor(N q) = 3; the normalisers read say which."""
    a = classify_step(_step(RULES["Nq"][0]))
    b = classify_step(_step(RULES["floor(Nq)"][0]))
    assert np.median(a.neighbours["D"]["nu"]) == pytest.approx(3.5, rel=0.02)
    assert np.median(b.neighbours["D"]["nu"]) == pytest.approx(3.0, rel=0.02)
    assert np.median(b.neighbours["D'"]["nu"]) == pytest.approx(4.0, rel=0.02)


@pytest.mark.parametrize("case,step,why", [
    ("depends on the data set size otherwise", _step(lambda m, q, B, r: m / 3), "follow none of"),
    ("varies at random", _step(lambda m, q, B, r: 2.0 + r.random() * 3), "follow none of"),
    ("does not clip", _step(RULES["|B|"][0], clip=False), "neither in nor out"),
    ("noise of another scale", _step(RULES["Nq"][0], noise_scale=1.2), "noise was not"),
    ("noise far off", _step(RULES["Nq"][0], noise_scale=3.0), "neither in nor out"),
    ("reports another batch", _step(RULES["|B|"][0], report_batch=lambda b: [0]), "batch the step reports"),
])
def test_a_step_that_fits_no_rule_is_refused_with_the_updates_that_showed_it(case, step, why):
    with pytest.raises(StepNotClassified, match=why) as info:
        classify_step(step)
    ev = info.value.evidence
    assert set(ev["neighbours"]) == {"D", "D'"} and ev["neighbours"]["D"]["records"] == 7, case


@pytest.mark.parametrize("rule", ["|B|", "public constant", "Nq"])
def test_batches_of_a_fixed_size_are_refused_whatever_the_divisor(rule):
    """Shuffling (dp-transformers 1.0.0's trainer) draws round(N q) records every round; the SGM's accountant
    assumes Poisson sampling. Without the sampling test the |B| step read as ASGM and the constant one as SGM."""
    with pytest.raises(StepNotClassified, match="fixed size") as info:
        classify_step(_step(RULES[rule][0], sample=_shuffle))
    t = info.value.evidence["neighbours"]["D"]["sampling"]
    assert t["fixed_size_p"] < 1e-12 and t["batches"] == 24


def test_a_step_sampling_at_another_rate_is_refused():
    step = _step(RULES["|B|"][0], sample=lambda rng, m, q: _poisson(rng, m, q / 2))
    with pytest.raises(StepNotClassified, match="does not sample at sampling_rate") as info:
        classify_step(step, trials=48)
    t = info.value.evidence["neighbours"]["D'"]["sampling"]
    assert t["rate_p"] < 1e-6 and t["mean_size"] < 0.7 * t["expected_mean_size"]


def test_too_few_batches_to_test_the_sampling_are_refused_not_passed():
    """A step that skips most rounds leaves too few batches to tell Poisson sampling from a fixed size."""
    step = _step(lambda m, q, B, r: float(B) if r.random() < 0.3 else 0)
    with pytest.raises(StepNotClassified, match="raise trials"):
        classify_step(step)
    with pytest.raises(ValueError, match="trials must be at least 13 at records 7"):
        classify_step(_step(RULES["|B|"][0]), trials=12)


def test_the_sampling_tests_against_the_binomial_law_and_monte_carlo():
    """``rate_p`` is the exact two-sided binomial test where an empty batch is negligible (64 records at 0.5:
    the total of T batches is Binomial(64 T, 0.5)); under Poisson sampling neither test refuses more often than
    its level (Monte Carlo over 4,000 seeded probes of 24 batches at 7 records)."""
    from scipy import stats

    from paperlib.implementations.step_audit import _sampling

    rng = np.random.default_rng(11)
    for T in (13, 24, 500):
        sizes = list(rng.binomial(64, 0.5, T))
        want = stats.binomtest(sum(sizes), 64 * T, 0.5).pvalue
        assert _sampling(sizes, 64, 0.5)["rate_p"] == pytest.approx(want, rel=1e-6)
    low = {"fixed_size_p": 0, "rate_p": 0}
    for _ in range(4000):
        t = _sampling(list(rng.binomial(7, 0.5, 24)), 7, 0.5)
        for k in low:
            low[k] += t[k] < 0.05
    assert low["fixed_size_p"] / 4000 <= 0.05  # a union bound: conservative
    assert 0.03 <= low["rate_p"] / 4000 <= 0.06  # exact, up to the discreteness of the total


def test_hand_written_pytorch_loops_are_classified():
    a = classify_step(E.loop_divide_by_batch)
    assert (a.rule, a.mechanism, a.batch_exposed) == ("|B|", Mechanism.ASGM, True)
    b = classify_step(E.loop_divide_by_constant)
    assert (b.rule, b.mechanism, b.constant) == ("public constant", Mechanism.SGM, float(E.LOOP_BATCH_SIZE))


def test_installed_opacus_is_classified_as_feasgm():
    """Opacus 1.x divides by floor(N q) (paper Table 2, chapter 8's code audit), found here from its updates."""
    pytest.importorskip("opacus")
    a = classify_step(E.opacus_step)
    assert (a.rule, a.mechanism) == ("floor(Nq)", Mechanism.FEASGM)
    assert a.neighbours["D"]["skipped"] == a.neighbours["D"]["nonfinite"] == 0


def test_the_run_report_is_the_one_check_gives():
    """audit_step on Opacus's step, with the run's settings, reports what check gives for Opacus 1.6.0."""
    pytest.importorskip("opacus")
    from paperlib.practitioner.check import check_run
    from paperlib.practitioner.step import audit_step

    run = dict(dataset_size=60_000, sample_rate=0.004, steps=250, noise_multiplier=1.3, n_params=26_010)
    r = audit_step(E.opacus_step, **run)
    ref = check_run("1.6.0", run["dataset_size"], sample_rate=run["sample_rate"], steps=run["steps"],
                    noise_multiplier=run["noise_multiplier"], n_params=run["n_params"], accountant="rdp")
    got, want = r.check.to_json(), ref.to_json()
    for k in ("claimed_epsilon", "epsilon_certified", "epsilon_forced", "claim_stands", "mechanism"):
        assert got[k] == want[k], k
    assert [n["verdict"] for n in got["neighbours"]] == [n["verdict"] for n in want["neighbours"]]
    assert r.to_json()["audit"]["mechanism"] == "feasgm"


def test_jax_privacy_is_classified_for_both_of_its_normalize_by_settings():
    """JAX Privacy 2.0.0 (installed on demand from pinned wheels): normalize_by fixed in advance is a public
    constant (the SGM claim applies); the expected batch size computed from the data is EASGM."""
    from paperlib.implementations.jax_privacy_step import CONSTANT, JaxPrivacyUnavailable, classify_jax_privacy

    try:
        a = classify_jax_privacy("expected", trials=16)
    except JaxPrivacyUnavailable as exc:
        pytest.skip(str(exc))
    assert (a.rule, a.mechanism, a.batch_exposed) == ("Nq", Mechanism.EASGM, True)
    b = classify_jax_privacy(CONSTANT, trials=16)
    assert (b.rule, b.mechanism, b.constant) == ("public constant", Mechanism.SGM, CONSTANT)


def test_dp_transformers_trainer_is_refused_for_its_fixed_size_batches():
    """dp-transformers 1.0.0's OpacusDPTrainer, run for real (its pinned wheels, in a subprocess): its sampler
    shuffles and cuts batches of per_device_train_batch_size, so every batch has round(N q) = 4 records, on D (7)
    and D' (8) alike; it divides by that configured size (a constant, equal to |B| here)."""
    from paperlib.implementations.dp_transformers_step import DpTransformersUnavailable, classify_dp_transformers

    try:
        with pytest.raises(StepNotClassified, match="fixed size") as info:
            classify_dp_transformers(trials=16)
    except DpTransformersUnavailable as exc:
        pytest.skip(str(exc))
    ev = info.value.evidence
    assert ev["reasons"] == ["fixed batch size"]
    for side in ev["neighbours"].values():
        assert set(side["batch_sizes"]) == {4} and side["sampling"]["fixed_size_p"] < 1e-6
        assert {"constant", "|B|"} <= set(side["labels"]) and np.median(side["nu"]) == pytest.approx(4, rel=0.02)
        assert not side.get("batch_disagrees")  # the records the trainer read are the ones its update holds


def test_dp_transformers_with_its_own_poisson_sampler_is_the_sgm_post_processed():
    """The remedy chapter 12 gives its users: the same trainer with the library's PoissonAuthorSampler in place of
    the shuffling one draws batches of varying size and divides by the configured batch size, 4: SGM."""
    from paperlib.implementations.dp_transformers_step import DpTransformersUnavailable, classify_dp_transformers

    try:
        a = classify_dp_transformers(sampler="poisson", trials=16)
    except DpTransformersUnavailable as exc:
        pytest.skip(str(exc))
    assert (a.rule, a.mechanism, a.constant) == ("public constant", Mechanism.SGM, 4.0)
    assert len(set(a.neighbours["D"]["batch_sizes"])) > 1 and a.neighbours["D"]["sampling"]["fixed_size_p"] > 1e-3


def test_opacus_under_distributed_data_parallel_is_still_feasgm():
    """Opacus 1.6.0 under DPDDP, world size 2 on gloo: each rank divides by int(N q) / 2 and the summed gradients
    are divided by 2 again, so the run divides by floor(N q), as one process does (not by a smaller number)."""
    pytest.importorskip("opacus")
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available here")
    with E.OpacusDDPStep(world_size=2) as step:
        a = classify_step(step, trials=16)
    assert (a.rule, a.mechanism, a.batch_exposed) == ("floor(Nq)", Mechanism.FEASGM, True)
    assert np.median(a.neighbours["D"]["nu"]) == pytest.approx(3.0, rel=0.02)
    with pytest.raises(ValueError, match="world_size"):
        E.OpacusDDPStep(world_size=1)


def test_the_command_line_takes_a_step_class_and_closes_it(capsys):
    """``audit-step module:Class`` makes the step with no arguments and closes it (OpacusDDPStep's processes)."""
    pytest.importorskip("opacus")
    from paperlib.cli import main

    assert main(["audit-step", "paperlib.implementations.step_examples:OpacusDDPStep", "--trials", "13",
                 "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["audit"]["mechanism"] == "feasgm" and out["check"] is None
