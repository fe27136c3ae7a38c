"""Adding a mechanism is one entry of the table of mechanisms (issue "One run, one mechanism table").

A toy rule, the noisy sum divided by ``2 B`` with ``B = 50`` the configured batch size (a public
constant fixed before the data), is registered with :func:`register_mechanism` and nothing else; its
one-round guarantee, a ``check`` verdict and a synthetic white-box audit then come through the public
paths. The rule is post-processing of SGM (the divisor does not depend on the data set), so every
answer must be SGM's: against SGM's own numbers (the same code path for a different entry), against
dp_accounting's PLD (an independent accountant), and against the divisor that depends on the data
(EASGM), which must give another answer (so the test can fail).
"""

from __future__ import annotations

import pytest

from paperlib.mechanisms import registry
from paperlib.mechanisms.registry import MechanismSpec, register_mechanism

B = 50
DELTA = 1e-5


def _toy() -> MechanismSpec:
    return MechanismSpec(
        name="public2b", title="PUBLIC-2B", rule="2B", paper=False,
        description=f"divides by 2 B = {2 * B}, a public constant fixed before the data",
        fixed_normaliser=lambda N, q: float(2 * B), sgm_always=True,
        sgm_words=f"the noisy sum is divided by 2 B = {2 * B}, a public constant: SGM",
        normaliser_words=lambda N, q: f"2 B = {2 * B} (a public constant)",
        pair_normalisers=lambda N, q: (float(2 * B), float(2 * B)),
        guarantee="paperlib.mechanisms.guarantees:sgm_guarantee",
        upper="paperlib.mechanisms.guarantees:sgm_guarantee", certificates=("sgm",))


@pytest.fixture
def toy(monkeypatch):
    """The toy registered for one test (the table is restored afterwards)."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    return register_mechanism(_toy())


def test_the_toy_is_refused_before_it_is_registered():
    from paperlib.mechanisms.guarantees import guarantee

    with pytest.raises(ValueError, match="^mechanism must be one of"):
        guarantee("public2b", 1000, 0.05, 1.0, 210)


def test_guarantee_of_the_toy_is_sgm_and_matches_dp_accounting(toy):
    from dp_accounting.pld import privacy_loss_distribution as dpl

    from paperlib.mechanisms.core import Mechanism
    from paperlib.mechanisms.guarantees import guarantee

    g = guarantee("public2b", 1000, 0.05, 1.0, 210)
    assert g.epsilon(DELTA) == pytest.approx(guarantee("sgm", 1000, 0.05, 1.0, 210).epsilon(DELTA), rel=1e-12)
    ref = dpl.from_gaussian_mechanism(1.0, sampling_prob=0.05, value_discretization_interval=1e-4)
    assert g.epsilon(DELTA) == pytest.approx(ref.get_epsilon_for_delta(DELTA), rel=0.01)
    # a data-dependent divisor on the same setting is another mechanism with a larger epsilon
    assert guarantee("easgm", 1000, 0.05, 1.0, 210).epsilon(DELTA) > 1.5 * g.epsilon(DELTA)
    m = Mechanism.parse("PUBLIC2B", allowed="any")
    assert m == "public2b" and m.title == "PUBLIC-2B" and m.fixed_normaliser(1000, 0.05) == 2 * B


def test_check_verdict_of_the_toy(toy):
    """``check`` with the toy: both neighbours 'stands', the numbers of the public divisor (SGM) exactly, and the
    certified epsilon within 1 % of dp_accounting's PLD for SGM over the run's steps."""
    from dp_accounting.pld import privacy_loss_distribution as dpl

    from paperlib.practitioner.check import check_run

    run = dict(opacus_version="1.6.0", dataset_size=1000, batch_size=64, epochs=2, noise_multiplier=1.0,
               n_params=210, delta=DELTA)
    r = check_run(**run, mechanism="public2b")
    sgm = check_run(**run, divisor="public")
    assert r.mechanism == "public2b" and r.inputs["mechanism"] == "public2b"
    assert [e.verdict for e in r.neighbours] == ["stands", "stands"]
    assert r.claimed_epsilon == sgm.claimed_epsilon
    assert r.epsilon_certified == pytest.approx(sgm.epsilon_certified, rel=1e-12)
    assert r.normaliser == f"2 B = {2 * B} (a public constant)"
    q, T = r.accountant_sample_rate, r.steps
    ref = dpl.from_gaussian_mechanism(1.0, sampling_prob=q, value_discretization_interval=1e-4).self_compose(T)
    assert r.epsilon_certified == pytest.approx(ref.get_epsilon_for_delta(DELTA), rel=0.01)
    easgm = check_run(**run, mechanism="easgm")  # the same run dividing by N q: not SGM
    assert {e.verdict for e in easgm.neighbours} != {"stands"}


def test_check_refuses_a_mechanism_and_a_public_divisor_together(toy):
    from paperlib.practitioner.check import check_run

    with pytest.raises(ValueError, match="^mechanism: "):
        check_run("1.6.0", 1000, 64, epochs=2, noise_multiplier=1.0, n_params=210, mechanism="public2b",
                  divisor="public")


def test_synthetic_audit_of_the_toy(toy):
    """The white-box game on the worst-case data: the toy's release is SGM's divided by a constant, so the optimal
    test (scale-free) counts the same errors as on SGM with the same seed, and no violation; EASGM's differs."""
    from paperlib.audit.game import audit_worst_case

    kw = dict(trials=4000, seed=3)
    a = audit_worst_case("public2b", 4, 0.5, 1.0, 2, **kw)
    s = audit_worst_case("sgm", 4, 0.5, 1.0, 2, **kw)
    e = audit_worst_case("easgm", 4, 0.5, 1.0, 2, **kw)
    assert a.mechanism == "public2b" and not a.violation
    assert (a.false_positives, a.false_negatives) == (s.false_positives, s.false_negatives)
    assert (e.false_positives, e.false_negatives) != (s.false_positives, s.false_negatives)


def test_an_entry_with_only_its_rules_gets_an_answer_not_a_crash(monkeypatch):
    """A new entry that gives only its rules (no guarantee, certificate or attack): ``check`` says in words that
    neither end is available (unresolved, the reason in each sentence), and ``guarantee`` names what is missing."""
    from paperlib.mechanisms.guarantees import guarantee
    from paperlib.practitioner.check import check_run

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    register_mechanism(MechanismSpec(name="constdiv", title="CONSTDIV", rule="256", description="divides by 256",
                                     fixed_normaliser=lambda N, q: 256.0))
    r = check_run("1.6.0", 60_000, 256, epochs=1, noise_multiplier=1.1, n_params=26_010, mechanism="constdiv")
    assert [e.verdict for e in r.neighbours] == ["unresolved", "unresolved"] and r.epsilon_certified is None
    assert all("has no guarantee in the table" in e.sentence for e in r.neighbours)
    assert not any("FEASGM" in m for m in r.remedies)
    with pytest.raises(ValueError, match="^mechanism 'constdiv' has no guarantee in the table of mechanisms"):
        guarantee("constdiv", 1000, 0.05, 1.0, 210)
    with pytest.raises(ValueError, match="^name must be one of removal, addition"):
        r.neighbour("foo")
