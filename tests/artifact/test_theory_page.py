"""The book's mathematical appendix (book/theory.md) and its references (issue 14, items 8 and 9).

book/theory.md is its own page, written for readers (THEORY.md stays the implementer's
contract): its tables must survive MyST's table syntax (a ``|`` inside maths splits a
cell, so absolute values are written ``\\lvert B\\rvert``), every test it names as the check
of a reconstructed statement must exist, the sampling rule it states for Opacus 1.x must
be the one paperlib implements, and every citation in the book must resolve.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "book" / "theory.md"
BIB = ROOT / "book" / "references.bib"


def _page() -> str:
    return PAGE.read_text(encoding="utf-8")


def _bib_keys() -> set[str]:
    return set(re.findall(r"^@\w+\{([^,\s]+),", BIB.read_text(encoding="utf-8"), re.M))


def _strip_inline(row: str) -> str:
    """A table row without its maths and code spans (where a `|` would be content, not a separator)."""
    return re.sub(r"`[^`]*`", "C", re.sub(r"\$[^$]*\$", "M", row))


def test_page_is_its_own_text_not_an_include_of_the_contract():
    text = _page()
    assert "{include}" not in text and "THEORY.md\n:heading-offset" not in text
    assert text.startswith("# Mathematical appendix")


def test_sections_are_numbered_as_in_the_contract():
    """The page says it follows THEORY.md's numbering, and the chapters cite "THEORY.md §k": the
    page's numbered sections are THEORY.md's, in the same order, on the same topics (a reader who
    looks up §6 must land on the per-pair guarantees, not on the mixtures before them)."""
    assert "follows its numbering of the topics" in _page()
    heads = lambda text: re.findall(r"(?m)^## (\d+)\. (.+)$", text)  # noqa: E731
    page, contract = heads(_page()), heads((ROOT / "THEORY.md").read_text(encoding="utf-8"))
    assert [int(k) for k, _ in page] == [int(k) for k, _ in contract] == list(range(len(contract)))
    # one word that names each topic in both titles
    topics = ["setting", "trade-off", "four mechanisms", "sgm", "building block", "mixtures", "per-pair",
              "upper bounds", "clt", "audit", "experiments", "round"]
    for (k, a), (_, b), word in zip(page, contract, topics, strict=True):
        assert word in a.lower() and word in b.lower(), (k, a, b)


def test_tables_keep_their_columns():
    tables, block = [], []
    for line in _page().splitlines() + [""]:
        if line.startswith("|"):
            block.append(line)
        elif block:
            tables.append(block)
            block = []
    assert len(tables) >= 5
    for rows in tables:
        assert re.fullmatch(r"\|(\s*-+\s*\|)+", rows[1]), rows[:2]
        width = rows[1].count("|")
        for line in rows:
            assert _strip_inline(line).count("|") == width, f"table row split by a '|' inside its cells: {line[:90]}"
            # absolute values inside maths must not use a bare |
            for m in re.findall(r"\$[^$]*\$", line):
                assert "|" not in m, f"use \\lvert ... \\rvert in a table: {m}"


def test_maths_is_myst_not_pseudo_tex():
    text = _page()
    assert text.count("$$") >= 20 and text.count("$") > 200
    # formulas are not set in code spans (the old page's `T(P,Q)(α) = ...`)
    code = re.findall(r"`([^`]+)`", text)
    assert not [c for c in code if re.search(r"[α-ωΦ]|\\frac|\^\{", c)], "a formula in a code span"


def test_every_named_check_exists():
    """The reconstruction section names a test for each rebuilt statement; each must exist in its file."""
    section = _page().split("(theory-reconstructed)=", 1)[1]
    items = re.split(r"(?m)^- ", section)[1:]
    assert len(items) >= 10
    n = 0
    current = None
    for item in items:
        for m in re.finditer(r"`(tests/[\w/]+\.py)`|`(test_\w+)`", item):
            if m.group(1):
                current = m.group(1)
                continue
            assert current is not None, m.group(2)
            src = (ROOT / current).read_text(encoding="utf-8")
            assert re.search(rf"^def {m.group(2)}\(", src, re.M), f"{m.group(2)} is not a test in {current}"
            n += 1
    assert n > 25


def test_opacus_sampling_rule_as_stated_is_paperlibs():
    """Section 7's numbers for Opacus 1.x are those of paperlib.practitioner.opacus1_rates."""
    from paperlib.practitioner import opacus1_rates

    text = _page()
    assert "`len(data_loader)`" in text and "q = \\frac{1}{\\ell}" in text
    q, q_acc, steps = opacus1_rates(60_000, 256, drop_last=False)
    assert steps == 235 and "235 batches" in text
    assert {int(N * q_acc) for N in (59_999, 60_000, 60_001)} == {255} and "normaliser 255" in text
    _, q_acc, _ = opacus1_rates(60_000, 250, drop_last=False)
    assert (int(59_999 * q_acc), int(60_000 * q_acc)) == (249, 250) and "249 against 250" in text
    assert opacus1_rates(9_300, 100, drop_last=False)[2] == 92 and "e.g. 93" in text  # len 93, 92 steps


def _cite_keys(text: str) -> set[str]:
    keys = set()
    for m in re.finditer(r"\{cite(?::\w+)?\}`([^`]+)`", text):
        keys |= {k.strip() for k in m.group(1).split(",")}
    return keys


@pytest.mark.parametrize("path", sorted(ROOT.glob("notebooks/[0-9]*.py")) + sorted(ROOT.glob("book/*.md")),
                         ids=lambda p: p.name)
def test_every_citation_resolves(path):
    missing = _cite_keys(path.read_text(encoding="utf-8")) - _bib_keys()
    assert not missing, f"{path.name} cites keys missing from book/references.bib: {sorted(missing)}"


def test_the_works_the_issue_names_are_in_the_bibliography_and_cited():
    keys = _bib_keys()
    wanted = {"fu2024dpsur", "li2025feta", "li2024privimage", "tramer2021differentially", "lebeda2025pitfalls",
              "cebere2025tighter", "opacus571", "wang2023unified", "gopi2021numerical", "clopper1934use"}
    assert wanted <= keys
    cited = set()
    for p in [*ROOT.glob("notebooks/[0-9]*.py"), *ROOT.glob("book/*.md")]:
        cited |= _cite_keys(p.read_text(encoding="utf-8"))
    assert wanted <= cited, f"in the bibliography but cited nowhere: {sorted(wanted - cited)}"


def test_bibliography_has_no_invented_identifiers():
    """DOIs only where they were there before this page (issue 14: take facts from the paper, invent none)."""
    text = BIB.read_text(encoding="utf-8")
    assert set(re.findall(r"doi\s*=\s*\{([^}]+)\}", text)) <= {
        "10.1111/rssb.12454", "10.1162/99608f92.cfc5dd25", "10.1145/2976749.2978318"}
