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


def test_against_ceiling_one_rule_for_count_and_words():
    """A value is at the ceiling iff within tol (half the last printed decimal); the values not at
    it never print as the ceiling; the words never contradict the count."""
    c = 7.21
    # chapter 4's N = 2: the lowest is 3 below the ceiling, so not "come within 0.02" of all of them
    assert prose.against_ceiling([4.23, 5.10, 7.19], c) == \
        "come within 0.02 of the ceiling of 7.21 at 1 of 3 points (the others 4.23–5.10)"
    # chapter 11: the largest prints as the ceiling -> it reaches it; never "within 0.00"
    assert prose.against_ceiling([7.15, 7.2099], c) == "reach the ceiling of 7.21 at 1 of 2 points (the other 7.15)"
    # chapter 5: a value that prints as 6.29 counts at the ceiling, not among "the others"
    assert prose.against_ceiling([5.22, 6.288, 6.29], 6.29) == \
        "reach the ceiling of 6.29 at 2 of 3 points (the other 5.22)"
    # chapter 7: all three print as the ceiling -> all reach it (no "throughout" next to "2 of 3")
    assert prose.against_ceiling([7.21, 7.21, 7.2051], c, unit="seeds") == "all reach the ceiling of 7.21"
    assert prose.against_ceiling([7.21, 7.20, 7.21], c, unit="seeds") == \
        "reach the ceiling of 7.21 at 2 of 3 seeds (the other 7.20)"
    assert prose.against_ceiling([7.21], c) == "reaches the ceiling of 7.21"
    # none at, all near / none near
    assert prose.against_ceiling([7.0, 7.1], c) == "all come within 0.21 of the ceiling of 7.21 (7.00–7.10)"
    assert prose.against_ceiling([1.0, 2.0], c) == "stay below the ceiling of 7.21 (1.00–2.00)"
    # a value not at the ceiling that would print as it gets more decimals (and the ceiling with it)
    assert prose.against_ceiling([7.2149, 7.2098], 7.2149) == \
        "reach the ceiling of 7.215 at 1 of 2 points (the other 7.210)"
    # one tolerance for counting and wording, stated by the caller
    assert prose.against_ceiling([7.19, 7.0], c, tol=0.02) == \
        "reach the ceiling of 7.21 at 1 of 2 points (the other 7.00)"
    for s in (prose.against_ceiling(v, c) for v in ([7.2, 7.205, 7.0], [7.2049, 6.0], [7.19, 7.2])):
        assert "0.00" not in s and "7.21 at" not in s.split("(")[-1]
    with pytest.raises(ValueError, match="values"):
        prose.against_ceiling([], c)
    with pytest.raises(ValueError, match="fmt"):
        prose.against_ceiling([1.0], c, fmt=".3g")


def test_settings_list_names_every_point():
    # chapter 4's points below the claim: not "the smallest q and the largest N"
    assert prose.settings_list([("asgm", 0.5, 5), ("asgm", 0.5, 4), ("asgm", 0.8, 5)]) == \
        "ASGM at q = 0.5 with N = 4 and 5 and at q = 0.8 with N = 5"
    assert prose.settings_list([("easgm", 0.1, 2), ("asgm", 0.9, 3)]) == \
        "EASGM at q = 0.1 with N = 2 and ASGM at q = 0.9 with N = 3"
    with pytest.raises(ValueError, match="points"):
        prose.settings_list([])


def test_gaps_vs_spread_words_follow_the_numbers():
    # chapter 4's Table 4.3: chi2 weighted 2.86 vs majority 3.69 against an EASGM spread of 0.13
    assert prose.gaps_vs_spread({"chi-square": 3.69 - 2.86, "K²": 0.0}, 0.13) == \
        "by 0.83 (chi-square) and 0.00 (K²), against a run-to-run spread of 0.13: " \
        "more than the spread for chi-square, within it for K²"
    assert prose.gaps_vs_spread({"a": 0.05, "b": 0.13}, 0.13, note="of x") == \
        "by 0.05 (a) and 0.13 (b), against a run-to-run spread of 0.13 (of x): all within it"
    assert prose.gaps_vs_spread({"a": 0.5}, 0.13).endswith(": more than it")
    with pytest.raises(ValueError, match="gaps"):
        prose.gaps_vs_spread({}, 0.1)


def test_count_of_says_each_count_once():
    assert prose.count_of(16, 16, 16) == "at all 16 audited points"  # chapter 6: not "16 of the 16 (of 16)"
    assert prose.count_of(3, 16, 16) == "at 3 of the 16 audited points"
    assert prose.count_of(12, 12, 16) == "at all 12 audited points (of 16 in all)"
    assert prose.count_of(0, 4) == "at none of the 4 audited points"
    assert prose.count_of(1, 1) == "at the one audited point"
    with pytest.raises(ValueError):
        prose.count_of(5, 4)


def test_against_claim_words():
    assert prose.against_claim([7.0, 7.2], 0.174) == "all far above the SGM claim of 0.174"
    assert prose.against_claim([0.2, 7.2], 0.174) == "all above the SGM claim of 0.174"
    assert prose.against_claim([0.1, 7.2], 0.174) == "1 of 2 above the SGM claim of 0.174"
    assert prose.against_claim([0.1], 0.174) == "none above the SGM claim of 0.174"


def test_relation_words_follow_the_numbers():
    assert prose.relation(7.19, 7.21) == "about equal to"  # within 2 %
    assert prose.relation(6.18, 7.21) == "below"
    assert prose.relation(73.0, 7.21) == "far above"
    assert prose.relation(72.0, 7.21) == "above"  # 9.99 times: not "far"
    assert prose.relation(0.1, 7.21) == "far below"
    assert prose.relation(float("inf"), 1.0) == "far above"
    assert prose.relation(1.0, 1.05, rtol=0.0, atol=0.1) == "about equal to"
    assert prose.relation(-1.0, 0.0) == "below"  # "far" needs a positive scale
    for bad in ({"rtol": -1}, {"far": 1.0}):
        with pytest.raises(ValueError, match="rtol|far"):
            prose.relation(1.0, 2.0, **bad)
    with pytest.raises(ValueError, match="a and b"):
        prose.relation(float("nan"), 1.0)


# ---------------------------------------------------------------- no comparison typed by hand
import re  # noqa: E402
from pathlib import Path  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
#: Comparison words that, typed next to a glued number, would state a relation the data may not have.
COMPARISON = re.compile(r"\b(far above|far below|well above|well below|much (?:larger|smaller)|above|below|exceeds?|"
                        r"larger|smaller|greater|higher|lower|less than|more than|reach(?:es)?|near|close to|"
                        r"nearly|coincides?|ranges? from|same as|equal to|at most|at least)\b", re.I)
GLUE = re.compile(r"\{glue(?::text)?\}`([^`:]+)[^`]*`")
#: Words next to a glued number that are true by construction, each with why:
#: (notebook prefix, word, glue key).
BY_CONSTRUCTION = {
    ("01", "below", "nb01_demo_tol"): "a tolerance the evaluation is run to",
    ("02", "at most", "nb02_tol"): "a tolerance the evaluation is run to",
    ("03", "below", "nb03_tolub"): "a tolerance the evaluation is run to",
    ("03", "at most", "nb03_gamma_max"): "the glued value is the maximum itself",
    ("03", "reaches", "nb03_fpr_exact_big"): "a read-out (the FPR where the curve reaches FNR 0.5), no comparison",
    ("04", "above", "nb04_opt_above"): "a count of the points above, computed from them",
    ("04", "above", "nb04_over_guar"): "a count of the points above, computed from them",
    ("06", "larger", "nb06_asgm_up"): "a count of the panels where it is larger, computed from them",
    ("07", "more than", "nb07_ceiling"): "the ceiling is by definition the most the trials can certify",
    ("09", "at most", "nb09_eps_tight"): "the glued value is the upper end of a bracket",
    ("09", "at most", "nb09_rel_tol"): "a tolerance the grid is refined to",
    ("09", "at most", "nb09_fft"): "a size limit",
    ("10", "below", "nb10_floor"): "the plotting floor, by definition",
}


def _markdown_sentences(path: Path):
    cells = re.split(r"^# %%.*$", path.read_text(encoding="utf-8"), flags=re.M)
    for cell in cells[1:]:
        if not cell.lstrip("\n").startswith("#"):
            continue  # a code cell
        text = " ".join(line[2:] if line.startswith("# ") else line[1:] for line in cell.splitlines()
                        if line.startswith("#"))
        yield from re.split(r"(?<=[.;:])\s+", text)


def _hand_typed(path: Path):
    """(word, glue key, sentence) for every comparison word within 25 characters of a glued value."""
    for sent in _markdown_sentences(path):
        gs = list(GLUE.finditer(sent))
        for m in COMPARISON.finditer(sent):
            for g in gs:
                if 0 <= m.start() - g.end() <= 25 or 0 <= g.start() - m.end() <= 25:
                    yield m.group(0).lower(), g.group(1), sent


def test_no_notebook_types_a_comparison_next_to_a_glued_number():
    """A sentence comparing glued numbers takes its words from the comparison (prose.relation & co.)."""
    bad, used = [], set()
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py")):
        for word, key, sent in _hand_typed(path):
            k = (path.name[:2], word, key)
            if k in BY_CONSTRUCTION:
                used.add(k)
            else:
                bad.append(f"{path.name}: '{word}' next to {key}: {sent[:160]}")
    assert not bad, "comparison words typed by hand next to glued numbers (glue prose.relation's words):\n" + \
        "\n".join(bad)
    assert used == set(BY_CONSTRUCTION), f"stale exceptions: {set(BY_CONSTRUCTION) - used}"


def test_the_hand_typed_check_can_fail(tmp_path):
    nb = tmp_path / "04_x.py"
    nb.write_text("# %% [markdown]\n# The bound ({glue:text}`nb04_a`) is far above the claim.\n\n# %%\nx = 1\n")
    assert [w for w, _, _ in _hand_typed(nb)] == ["far above"]
    nb.write_text("# %% [markdown]\n# The bound is {glue:text}`nb04_rel` the claim.\n")
    assert list(_hand_typed(nb)) == []


def test_chapters_number_their_sections():
    """From a chapter's first numbered section on, every section is numbered 1, 2, ... (chapters 7 and 8 were
    not), and Figure 4's table of points sits in the data-points section, not under "2. The audits"."""
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py")):
        heads = [h for h in re.findall(r"^# ## (.+)$", path.read_text(encoding="utf-8"), flags=re.M)]
        nums = [re.match(r"(\d+)\. ", h) for h in heads]
        first = next((i for i, m in enumerate(nums) if m), None)
        assert first is not None, f"{path.name}: no numbered section"
        after = [(h, m) for h, m in zip(heads[first:], nums[first:]) if h != "Summary"]
        assert [int(m.group(1)) if m else None for _, m in after] == list(range(1, len(after) + 1)), \
            f"{path.name}: sections {[h for h, _ in after]}"
    src = (NOTEBOOKS / "06_audit_real_figure4.py").read_text(encoding="utf-8")
    assert src.index('name="06_points"') < src.index("# ## 2. The audits") < src.index('name="06_fig4_audits"')


def test_claims_in_tables_keep_their_significant_digits():
    """Table 6.2 printed the EASGM q = 0.005 claim 0.000925 as 0.001 (fixed decimals): a claim column is shown
    to significant digits."""
    assert format(0.000925, ".3g") == "0.000925" and format(0.000925, ".3f") == "0.001"
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py")):
        bad = re.findall(r'"claim": "\.\df"', path.read_text(encoding="utf-8"))
        assert not bad, f"{path.name}: claim column formatted {bad}"
