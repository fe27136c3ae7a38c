"""One style for the book's prose (issue 34): short sentences, no nested parentheses, no code constants or
file:line references outside code and Sources blocks (:mod:`paperlib.artifact.prose_check`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from paperlib.artifact import prose_check
from paperlib.artifact.prose import clauses

ROOT = Path(__file__).resolve().parents[2]


def test_sentences_split_at_full_stops_but_not_after_abbreviations():
    s = prose_check.sentences("It holds, e.g. at q = 0.5. Then Fig. 2 shows it (see Wang et al. 2026). Done! 3 left.")
    assert s == ["It holds, e.g. at q = 0.5.", "Then Fig. 2 shows it (see Wang et al. 2026).", "Done!", "3 left."]


def test_each_rule_finds_what_it_names_and_nothing_else():
    consts = frozenset({"SEED", "MODE"})
    ok = "The noise multiplier is 1.3, and δ(ε) at ε = 1 is floor(Nq) (the SGM claim, on MNIST)."
    assert prose_check.sentence_problems(ok, consts) == []
    long = " ".join(["word"] * 46) + "."
    assert prose_check.sentence_problems(long, consts) == [f"46 words (at most {prose_check.MAX_WORDS})"]
    assert prose_check.sentence_problems(" ".join(["word"] * 45) + ".", consts) == []
    assert prose_check.sentence_problems("A step (here: the rebuilt step (commit d738b)) ran.", consts) == [
        "nested parentheses"]
    assert prose_check.sentence_problems("Only the first CHECK_TRIALS steps use SEED.", consts) == [
        "code identifier CHECK_TRIALS, SEED"]
    assert prose_check.sentence_problems("It follows algorithm/DPSUR.py:87-95 line by line.", consts) == [
        "file:line reference algorithm/DPSUR.py:87"]


def test_the_code_constants_are_read_from_the_code_and_leave_the_fields_names_alone():
    consts = prose_check.code_constants(ROOT)
    assert {"SEED", "MODE", "DEVICE"} <= consts  # notebook parameters
    assert {"DPSUR", "MNIST", "C5"}.isdisjoint(consts)  # a method, a data set, a claim's label


def _page(html_dir: Path, name: str, body: str) -> None:
    (html_dir / name).parent.mkdir(parents=True, exist_ok=True)
    (html_dir / name).write_text(f"<html><body><nav><p>{'nav ' * 60}</p></nav><article class='bd-article'>{body}"
                                 "</article></body></html>", encoding="utf-8")


def test_the_check_reads_the_prose_and_leaves_code_math_and_sources_alone(tmp_path):
    site = tmp_path / "html"
    code = " ".join(["x"] * 60)
    _page(site, "index.html", f"<p>Short. <code>{code}</code> <span class='math notranslate'>{code}</span></p>"
                              f"<div class='cell_input'><pre>SEED = 0 # {code}</pre></div>"
                              "<details><summary>Sources</summary><p>algorithm/DPSUR.py:87-95 (at (commit))</p></details>"
                              "<details><summary>More</summary><p>See x.py:3.</p></details>"
                              f"<ul><li>{' '.join(['y'] * 30)}<ul><li>{' '.join(['z'] * 30)}</li></ul></li></ul>")
    found = prose_check.problems(site, frozenset({"SEED"}))
    assert found == ['index.html: file:line reference x.py:3: "See x.py:3."'], found
    with pytest.raises(ValueError, match="^html_dir: .* holds no built book"):
        prose_check.problems(tmp_path / "empty")


def test_clauses_split_a_detail_at_semicolons_outside_parentheses():
    assert clauses("1/6 q; q=0.5: x (a; b); q=0.6: y;") == ["1/6 q", "q=0.5: x (a; b)", "q=0.6: y"]
    assert clauses("one") == ["one"]


def test_the_built_book_reads_in_one_style(built_book_html):
    """Run by ``make test`` on the smoke-mode test book ($PAPERLIB_BOOK_HTML), and on the quick book after
    ``make all``; skipped without a built book."""
    found = prose_check.problems(built_book_html)
    assert not found, f"{len(found)} sentences break the book's style:\n" + "\n".join(found)
