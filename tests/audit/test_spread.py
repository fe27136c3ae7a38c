"""seed_spread / spread_seeds (paperlib.audit.spread)."""

import pytest

from paperlib.audit import seed_spread, spread_seeds
from paperlib.audit.game import audit_distinguishers, worst_case_vectors


def test_spread_seeds_starts_at_seed():
    assert spread_seeds(7) == [7, 8, 9]
    assert spread_seeds(0, 4) == [0, 1, 2, 3]
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="seed"):
            spread_seeds(bad)
    with pytest.raises(ValueError, match="count"):
        spread_seeds(0, 1)


def test_seed_spread_collects_min_max_per_label():
    table = {3: {"a": 1.0, "b": {"eps_lower": 0.5}}, 4: {"a": 2.5, "b": {"eps_lower": 0.0}},
             5: {"a": 1.5, "b": {"eps_lower": 0.25}}}
    s = seed_spread(lambda seed: table[seed], [3, 4, 5])
    assert s["seeds"] == [3, 4, 5] and s["labels"] == ["a", "b"]
    assert s["eps"] == {"a": [1.0, 2.5, 1.5], "b": [0.5, 0.0, 0.25]}
    assert s["min"] == {"a": 1.0, "b": 0.0} and s["max"] == {"a": 2.5, "b": 0.5}
    assert s["range"] == {"a": 1.5, "b": 0.5}
    assert seed_spread(lambda seed: table[seed], [3, 4], labels=["b"])["eps"] == {"b": [0.5, 0.0]}


def test_seed_spread_refuses_bad_input():
    with pytest.raises(ValueError, match="at least two"):
        seed_spread(lambda s: {"a": 1.0}, [0])
    with pytest.raises(ValueError, match="distinct"):
        seed_spread(lambda s: {"a": 1.0}, [0, 0])
    with pytest.raises(ValueError, match="no distinguisher 'b'"):
        seed_spread(lambda s: {"a": 1.0}, [0, 1], labels=["b"])
    with pytest.raises(ValueError, match=">= 0"):
        seed_spread(lambda s: {"a": float("nan")}, [0, 1])
    with pytest.raises(ValueError, match="eps_lower"):
        seed_spread(lambda s: {"a": {"fpr": 0.1}}, [0, 1])


def test_seed_spread_of_real_audits_matches_independent_runs():
    # the spread of the worst-case audit equals the audits run one by one at the same seeds,
    # and different seeds give different rounds (a spread of exactly 0 would mean the seed is ignored)
    v = worst_case_vectors(3, 20, 1.0, kind="worst", seed=0)

    def run(seed):
        return {k: r.to_dict() for k, r in audit_distinguishers(v, "asgm", 0.5, 2.0, 1.0, trials=2_000,
                                                                distinguishers=["optimal"], seed=seed).items()}

    s = seed_spread(run, [10, 11, 12])
    assert s["eps"]["optimal"] == [run(k)["optimal"]["eps_lower"] for k in (10, 11, 12)]
    assert len(set(s["eps"]["optimal"])) > 1
    assert 0 < s["min"]["optimal"] <= s["max"]["optimal"] < 10


def test_spread_rows_one_row_per_seed_then_min_and_max():
    from paperlib.audit import seed_spread, spread_rows

    table = {3: {"optimal": 1.5, "normality": 0.25}, 4: {"optimal": 2.0, "normality": 0.0},
             5: {"optimal": 1.0, "normality": 0.5}}
    sp = seed_spread(lambda s: table[s], [3, 4, 5])
    rows = spread_rows(sp, ["optimal", "normality"], 0.2, extra=["a", "b", "c"])
    assert rows == [["3", 1.5, 0.25, 0.2, "a"], ["4", 2.0, 0.0, 0.2, "b"], ["5", 1.0, 0.5, 0.2, "c"],
                    ["min", 1.0, 0.0, 0.2, "-"], ["max", 2.0, 0.5, 0.2, "-"]]
    assert spread_rows(sp, ["normality"], 0.2)[-1] == ["max", 0.5, 0.2]
    with pytest.raises(ValueError, match="labels"):
        spread_rows(sp, ["ties"], 0.2)
    with pytest.raises(ValueError, match="extra"):
        spread_rows(sp, ["optimal"], 0.2, extra=["a"])
