"""The Mechanism value (paperlib.mechanisms.core): names, normalisers, the FEASGM floors
and the rules for an empty batch and a zero floor, against values worked out by hand."""

import json

import numpy as np
import pytest
import torch

from paperlib.mechanisms.core import MECHANISMS, Mechanism, feasgm_floors


def test_names_parse_and_serialise():
    assert MECHANISMS == ("sgm", "easgm", "asgm", "feasgm")
    assert Mechanism.parse("EASGM") is Mechanism.EASGM
    assert Mechanism.parse(" feasgm ") is Mechanism.FEASGM
    assert Mechanism.parse(Mechanism.ASGM) is Mechanism.ASGM
    assert Mechanism.EASGM == "easgm" and f"{Mechanism.EASGM}" == "easgm"
    assert json.dumps({"m": Mechanism.FEASGM}) == '{"m": "feasgm"}'
    assert Mechanism.FEASGM.title == "FEASGM"
    for bad in ("bogus", "", None, 3):
        with pytest.raises(ValueError, match=r"mechanism must be one of sgm, easgm, asgm, feasgm"):
            Mechanism.parse(bad)


def test_dpsur_is_accepted_only_where_asked_for():
    assert Mechanism.parse("DPSUR", allowed=tuple(Mechanism)) is Mechanism.DPSUR
    with pytest.raises(ValueError, match=r"^mechanism must be one of sgm, easgm, asgm, feasgm, got 'dpsur'$"):
        Mechanism.parse("dpsur")
    with pytest.raises(ValueError, match=r"^mechanism must be one of asgm, dpsur, got 'sgm'$"):
        Mechanism.parse("sgm", allowed=("asgm", "dpsur"))
    assert Mechanism.DPSUR.draws_divisor and Mechanism.DPSUR.skips_empty_batch
    assert not any(m.draws_divisor or m.skips_empty_batch for m in Mechanism if m is not Mechanism.DPSUR)
    # the separate draw's size divides; an empty draw keeps DPSUR's first-round divisor N q
    np.testing.assert_allclose(Mechanism.DPSUR.normaliser(4, np.array([0, 1, 3]), 0.7), [2.8, 1.0, 3.0], rtol=1e-15)
    assert Mechanism.DPSUR.fixed_normaliser(4, 0.7) is None


def test_rules_round_trip():
    assert [m.rule for m in Mechanism] == ["1", "Nq", "|B|", "floor(Nq)", "|B'|"]
    for m in Mechanism:
        assert Mechanism.from_rule(m.rule) is m
    with pytest.raises(ValueError, match="rule must be one of"):
        Mechanism.from_rule("N")
    assert Mechanism.SGM.spec.sgm_always and not Mechanism.ASGM.spec.sgm_always


def test_normaliser_values_by_hand():
    k = np.array([0, 1, 2, 5])
    np.testing.assert_array_equal(Mechanism.SGM.normaliser(10, k, 0.3), [1, 1, 1, 1])
    np.testing.assert_allclose(Mechanism.EASGM.normaliser(10, k, 0.3), [3.0] * 4, rtol=1e-15)
    np.testing.assert_array_equal(Mechanism.ASGM.normaliser(10, k, 0.3), [1, 1, 2, 5])  # empty batch: 1
    np.testing.assert_array_equal(Mechanism.FEASGM.normaliser(10, k, 0.35), [3, 3, 3, 3])
    assert Mechanism.ASGM.normaliser(10, 0, 0.3) == 1.0 and isinstance(Mechanism.ASGM.normaliser(10, 4, 0.3), float)
    assert Mechanism.ASGM.fixed_normaliser(10, 0.3) is None
    t = Mechanism.ASGM.normaliser(4, torch.tensor([0, 2, 3]), 0.5)
    assert isinstance(t, torch.Tensor) and t.dtype == torch.float64 and t.tolist() == [1.0, 2.0, 3.0]
    assert Mechanism.FEASGM.normaliser(5, torch.tensor([1.0, 2.0]), 0.5).tolist() == [2.0, 2.0]


def test_feasgm_floors_in_opacus_float_arithmetic():
    # 22 * (15/22) is 14.999999999999998 in float64: int() truncates it to 14, as Opacus does
    assert 22 * (15 / 22) < 15
    assert feasgm_floors(22, 15 / 22)[0] == 14
    assert Mechanism.FEASGM.floors(140_199, 0.005) == (700, 701)  # Figure 7: the floors differ
    assert Mechanism.FEASGM.floors(59_999, 256 / 60_000) == (255, 256)
    with pytest.raises(ValueError, match="floors are defined for feasgm only"):
        Mechanism.EASGM.floors(10, 0.5)
    with pytest.raises(ValueError, match="N must be"):
        feasgm_floors(0, 0.5)
    with pytest.raises(ValueError, match="q"):
        feasgm_floors(3, 1.5)


def test_zero_floor_decided_once():
    assert Mechanism.FEASGM.divides_by_zero(3, 0.2)  # floor(0.6) = 0
    assert not Mechanism.FEASGM.divides_by_zero(4, 0.25)  # floor(1.0) = 1
    assert not Mechanism.EASGM.divides_by_zero(3, 0.2)
    assert Mechanism.FEASGM.normaliser(3, 1, 0.2) == 0.0  # what the code computes
    with pytest.raises(ValueError, match=r"^q: floor\(N\*q\) = 0 for N=3, q=0.2, so FEASGM divides by zero"):
        Mechanism.FEASGM.require_defined(3, 0.2)
    Mechanism.EASGM.require_defined(3, 0.2)  # no error


@pytest.mark.parametrize("entry", ["guarantee", "simulate_llr", "audit_worst_case"])
def test_every_analysis_refuses_a_zero_floor(entry):
    from paperlib.audit import audit_worst_case
    from paperlib.mechanisms.guarantees import guarantee
    from paperlib.mechanisms.simulation import simulate_llr

    call = {"guarantee": lambda: guarantee("feasgm", 3, 0.2, 1.0, 5),
            "simulate_llr": lambda: simulate_llr("feasgm", 3, 0.2, 1.0, 5, 10),
            "audit_worst_case": lambda: audit_worst_case("feasgm", 3, 0.2, 1.0, 5, trials=10)}[entry]
    with pytest.raises(ValueError, match="divides by zero"):
        call()
