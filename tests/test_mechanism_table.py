"""The table of mechanisms (:mod:`paperlib.mechanisms.registry`) is the one place a mechanism's rules are
decided (issue 32): no module elsewhere compares against a mechanism's member or name, and each entry's
rules agree with the paper's definitions computed here by hand."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from paperlib.mechanisms.core import Mechanism
from paperlib.mechanisms.registry import MechanismSpec, mechanism_spec, register_mechanism, registered_mechanisms

PACKAGE = Path(__file__).resolve().parents[1] / "paperlib"
NAMES = {"sgm", "easgm", "asgm", "feasgm", "dpsur"}


def _is_mechanism(node) -> bool:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Mechanism":
        return node.attr.lower() in NAMES
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.lower() in NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_mechanism(e) for e in node.elts)
    return False


def mechanism_comparisons(source: str) -> list[tuple[int, str]]:
    """``(line, code)`` of every comparison against a :class:`Mechanism` member, or of a name such as
    ``"feasgm"`` against anything but an implementation's name (``implementation == "dpsur"`` asks which
    code ran, a question of the table of implementations, :mod:`paperlib.implementations.registry`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        ops = [node.left, *node.comparators]
        member = any(_is_mechanism(x) and "Mechanism." in ast.unparse(x) for x in ops)
        named = any(_is_mechanism(x) for x in ops) and not all(
            "implementation" in ast.unparse(x).lower() for x in ops if not _is_mechanism(x))
        if member or named:
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_scan_finds_what_it_looks_for():
    """The check below can fail: each form a mechanism comparison takes is found, and other code is not."""
    code = ("if mech is Mechanism.FEASGM: pass\n"
            "if run.mechanism in (Mechanism.ASGM, Mechanism.DPSUR): pass\n"
            "if args.mechanism == 'sgm': pass\n"
            "if r.get('mechanism') in ('easgm', 'feasgm'): pass\n"
            "if implementation == 'dpsur': pass\n"  # an implementation's name, not a mechanism's
            "if spec.sgm_always: pass\n"
            "rows = [r for k, r in rs.items() if k[0] == 'easgm']\n"  # a series picked by its name
            "words = 'DPSUR rule' if m == 'dpsur' else m.upper()\n")
    assert sorted(line for line, _ in mechanism_comparisons(code)) == [1, 2, 3, 4, 7, 8]


def test_no_module_outside_the_table_compares_against_a_mechanism():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "registry.py" and path.parent.name == "mechanisms":
            continue
        found = mechanism_comparisons(path.read_text(encoding="utf-8"))
        if found:
            offenders[str(path.relative_to(PACKAGE.parent))] = found
    assert not offenders, f"decide these in paperlib/mechanisms/registry.py: {offenders}"


def test_every_mechanism_has_an_entry_and_reads_its_rules_from_it():
    assert set(registered_mechanisms()) >= {m.value for m in Mechanism}
    for m in Mechanism:
        assert m.spec is mechanism_spec(m) is mechanism_spec(m.value.upper())
        assert (m.title, m.rule) == (m.spec.title, m.spec.rule)


@pytest.mark.parametrize("N,q", [(1, 1.0), (22, 15 / 22), (999, 0.05), (1000, 0.05), (60_000, 0.004), (7, 1e-12)])
def test_the_rules_against_the_paper_by_hand(N, q):
    """Section 3's normalisers, by hand: SGM 1, EASGM N q, FEASGM int(N q) in float64 (Opacus), ASGM |B| with
    1 for an empty batch, DPSUR the separate draw's size with N q for an empty draw."""
    S, E, F, A, D = (Mechanism.SGM.spec, Mechanism.EASGM.spec, Mechanism.FEASGM.spec, Mechanism.ASGM.spec,
                     Mechanism.DPSUR.spec)
    assert S.fixed_normaliser(N, q) == 1.0 and E.fixed_normaliser(N, q) == N * q
    assert F.fixed_normaliser(N, q) == math.floor(N * q) and F.divides_by_zero(N, q) == (math.floor(N * q) == 0)
    assert A.fixed_normaliser is None and A.empty_divisor(N, q) == 1.0 and not A.draws_divisor
    assert D.fixed_normaliser is None and D.empty_divisor(N, q) == N * q and D.draws_divisor and D.skips_empty_batch
    floors_agree = math.floor(N * q) == math.floor((N + 1) * q)
    assert S.equals_sgm(N, q) and not E.equals_sgm(N, q) and not A.equals_sgm(N, q) and not D.equals_sgm(N, q)
    if math.floor(N * q) == 0:
        with pytest.raises(ValueError, match="^q: floor"):
            F.equals_sgm(N, q)
    else:
        assert F.equals_sgm(N, q) == floors_agree


def test_opacus_codes_name_the_paper_table2_mechanisms():
    from paperlib.mechanisms.registry import spec_for_opacus_code

    assert {c: spec_for_opacus_code(c).title for c in ("A", "EA", "FEA")} == {"A": "ASGM", "EA": "EASGM",
                                                                                "FEA": "FEASGM"}
    with pytest.raises(ValueError, match="^code must be one of EA, FEA, A, got .X.$"):
        spec_for_opacus_code("X")


def test_registration_is_checked_and_a_new_entry_is_found_by_name():
    with pytest.raises(TypeError, match="^spec must be a MechanismSpec"):
        register_mechanism({"name": "toy"})
    with pytest.raises(ValueError, match="^name must be"):
        register_mechanism(MechanismSpec(name="Toy", title="TOY", rule="2B", description="x"))
    toy = MechanismSpec(name="public-2b", title="PUBLIC-2B", rule="2B", description="a public constant 2 B",
                        fixed_normaliser=lambda N, q: 2.0 * 64, sgm_always=True, paper=False)
    try:
        register_mechanism(toy)
        assert mechanism_spec("PUBLIC-2B") is toy and toy.equals_sgm(10, 0.5) and "public-2b" in registered_mechanisms()
    finally:
        from paperlib.mechanisms import registry

        registry._REGISTRY.pop("public-2b", None)
    with pytest.raises(ValueError, match="^mechanism must be one of sgm, easgm"):
        mechanism_spec("public-2b")
