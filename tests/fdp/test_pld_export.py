"""A composition exported to dp_accounting (issue 36, interop): ``PLDComposition.to_dp_accounting``."""

from __future__ import annotations

import pytest

pytest.importorskip("dp_accounting")
from dp_accounting.pld import privacy_loss_distribution as PLD  # noqa: E402

from paperlib.mechanisms.multiround import sgm_claim_rounds  # noqa: E402

H = 1e-4  # the interval of dp_accounting's own event


@pytest.mark.parametrize("q,sigma", [(0.01, 1.0), (0.5, 0.8)])
def test_exported_sgm_round_matches_dp_accountings_own_and_composes_with_it(q, sigma):
    """One SGM round exported at dp_accounting's interval: each direction equals dp_accounting's own
    Poisson-subsampled Gaussian (connect-the-dots) to the grid (a swap of remove and add fails at q = 0.5,
    where the two differ); the optimistic export stays below and the pessimistic above it over 1,000
    compositions; composed with dp_accounting's own event, the two rounds give paperlib's two-round bracket."""
    one = sgm_claim_rounds(q, sigma, rounds=1)
    pes, opt = one.to_dp_accounting("pessimistic", H), one.to_dp_accounting("optimistic", H)
    ref = PLD.from_gaussian_mechanism(sigma, sampling_prob=q, value_discretization_interval=H)
    for eps in (0.1, 0.5, 1.0):
        for side in ("_pmf_remove", "_pmf_add"):  # each direction on its own
            a = getattr(pes, side).get_delta_for_epsilon(eps)
            b = getattr(ref, side).get_delta_for_epsilon(eps)
            assert abs(a - b) <= 2e-4 * max(b, 1e-12) + 1e-12, (side, eps, a, b)
    if q == 0.5:  # the directions differ here, so a swapped export could not pass the loop above
        d_rm, d_add = ref._pmf_remove.get_delta_for_epsilon(0.5), ref._pmf_add.get_delta_for_epsilon(0.5)
        assert abs(d_rm - d_add) > 1e-3
    lo, hi = sgm_claim_rounds(q, sigma, rounds=1000).epsilon_bounds(1e-5)
    e_opt = opt.self_compose(1000).get_epsilon_for_delta(1e-5)
    e_pes = pes.self_compose(1000).get_epsilon_for_delta(1e-5)
    e_ref = ref.self_compose(1000).get_epsilon_for_delta(1e-5)
    assert e_opt <= e_ref * (1 + 1e-6) and e_pes >= e_ref * (1 - 1e-6)  # both ends around dp_accounting's own
    assert e_opt <= hi * (1 + 1e-6) and e_pes >= lo * (1 - 1e-6) and lo * (1 - 1e-3) <= e_ref <= hi * (1 + 1e-3)
    two_lo, two_hi = sgm_claim_rounds(q, sigma, rounds=2).epsilon_bounds(1e-5)
    mixed = pes.compose(ref).get_epsilon_for_delta(1e-5)
    assert two_lo - 1e-3 <= mixed <= two_hi + 1e-3


def test_export_options_are_checked():
    one = sgm_claim_rounds(0.01, 1.0, rounds=1)
    with pytest.raises(ValueError, match="^estimate must be 'pessimistic' or 'optimistic', got 'tight'$"):
        one.to_dp_accounting("tight")
    with pytest.raises(ValueError, match="^value_discretization_interval"):
        one.to_dp_accounting("pessimistic", 0.0)
    many = sgm_claim_rounds(0.01, 1.0, rounds=50)  # composed: the lower end subtracts the truncated mass
    with pytest.raises(ValueError, match="^estimate: the optimistic end of this composition subtracts a mass"):
        many.to_dp_accounting("optimistic")
    assert many.to_dp_accounting("pessimistic").get_epsilon_for_delta(1e-5) >= many.epsilon_bounds(1e-5)[1] - 1e-9
