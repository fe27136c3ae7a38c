"""riskcal reads paperlib's exported privacy loss (issue 36, interop): the trade-off curve riskcal computes from the
PLD that ``PLDComposition.to_dp_accounting`` exports lies within paperlib's own bracket of the same curve."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dp_accounting")
riskcal = pytest.importorskip("riskcal")
from riskcal import analysis  # noqa: E402

import paperlib as pl  # noqa: E402
from paperlib.mechanisms.multiround import sgm_claim_rounds  # noqa: E402

ALPHA = np.array([1e-4, 1e-3, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9])


@pytest.mark.parametrize("name,make,h", [
    ("SGM claim, one round", lambda: sgm_claim_rounds(0.01, 1.0, rounds=1), 1e-4),
    ("certified EASGM, one round", lambda: pl.certified_guarantee(pl.Setting("easgm", 1000, 0.05, 1.0, 100,
                                                                             delta=1e-5)), 1e-3),
])
def test_riskcal_curve_from_the_export_lies_in_paperlibs_bracket(name, make, h):
    comp = make()
    lo, hi = comp.beta_bounds(ALPHA)
    pes = analysis.get_beta_from_pld(comp.to_dp_accounting("pessimistic", h), alpha=ALPHA)
    opt = analysis.get_beta_from_pld(comp.to_dp_accounting("optimistic", h), alpha=ALPHA)
    slack = 2 * h  # the export's own grid (interval h in the privacy loss)
    assert np.all(pes <= opt + 1e-9), name  # the pessimistic curve is the lower one
    assert np.all(pes >= lo - slack) and np.all(pes <= hi + slack), (name, lo, pes, hi)
    assert np.all(opt >= lo - slack) and np.all(opt <= hi + slack), (name, lo, opt, hi)
    # a curve that is not this mechanism's falls outside the bracket: the check can fail
    other = analysis.get_beta_from_pld(sgm_claim_rounds(0.02, 1.0, rounds=1).to_dp_accounting("pessimistic", 1e-4),
                                       alpha=ALPHA)
    assert np.any(other < lo - slack) or np.any(other > hi + slack), name
