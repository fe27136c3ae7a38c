"""The comparison words of the book's sentences come from the numbers they compare."""

import pytest

from paperlib.artifact import prose


def test_span_says_throughout_when_the_ends_print_alike():
    assert prose.span([7.2101, 7.2099]) == "is 7.21 throughout"  # chapter 7's "ranges from 7.21 to 7.21"
    assert prose.span([0.1, 0.45]) == "ranges from 0.10 to 0.45"
    with pytest.raises(ValueError, match="values"):
        prose.span([])


def test_against_ceiling_never_says_reach_below_it():
    # chapter 4's N = 2 points: 6.18-7.19 against 7.21 do not reach the ceiling
    s = prose.against_ceiling([6.18, 7.19], 7.21)
    assert "reach" not in s and s.startswith("come within 0.02 of the ceiling of 7.21")
    assert prose.against_ceiling([7.21, 7.21], 7.21) == "all reach the ceiling of 7.21"
    assert prose.against_ceiling([7.21, 6.0], 7.21).startswith("reach the ceiling of 7.21 at 1 of 2 points")
    # chapter 5's ASGM from n = 100: 3.47-4.39 against 6.29 is not "at or near"
    assert prose.against_ceiling([3.47, 4.39], 6.29) == "stay below the ceiling of 6.29 (3.47–4.39)"


def test_against_claim_words():
    assert prose.against_claim([7.0, 7.2], 0.174) == "all far above the SGM claim of 0.174"
    assert prose.against_claim([0.2, 7.2], 0.174) == "all above the SGM claim of 0.174"
    assert prose.against_claim([0.1, 7.2], 0.174) == "1 of 2 above the SGM claim of 0.174"
    assert prose.against_claim([0.1], 0.174) == "none above the SGM claim of 0.174"
