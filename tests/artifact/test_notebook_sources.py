"""The notebook sources are well-formed: paired, parametrised, free of stray control characters."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SOURCES = sorted(NOTEBOOKS.glob("[0-9]*.py"))
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def test_there_are_notebooks():
    assert len(SOURCES) >= 3


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_source_is_clean_and_paired(src):
    text = src.read_text(encoding="utf-8")
    # a "\v" or "\a" in a non-raw string once turned \varepsilon into a control character
    bad = CONTROL.findall(text)
    assert not bad, f"{src.name} contains control characters {sorted(set(map(repr, bad)))}"
    assert re.search(r'^# %%.*tags=\[[^\]]*"parameters"', text, re.M), f"{src.name} has no parameters cell"
    for name in ("MODE", "DEVICE", "SEED"):
        assert re.search(rf"^{name} = ", text, re.M), f"{src.name} does not set {name} in its parameters"
    twin = src.with_suffix(".ipynb")
    assert twin.exists(), f"{src.name} has no paired {twin.name}"
    nb = json.loads(twin.read_text(encoding="utf-8"))
    assert not CONTROL.findall(json.dumps(nb, ensure_ascii=False).replace("\\n", ""))
    outputs = [c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not o for o in outputs), f"{twin.name} is committed with outputs"


def _boolean_names(tree) -> set[str]:
    """Names a notebook assigns a truth value: ``X = all(...)``, ``any(...)``, a comparison, ``not ...``
    (also as either branch of ``... if ... else ...``)."""
    import ast

    def boolean(v) -> bool:
        if isinstance(v, ast.IfExp):
            return boolean(v.body) or boolean(v.orelse)
        return (isinstance(v, ast.Compare) or (isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not))
                or (isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in ("all", "any", "bool")))

    return {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and boolean(node.value)
            for t in node.targets if isinstance(t, ast.Name)}


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_printed_lines_speak_words_not_python(src):
    """A reader sees "yes"/"no" and "so", not Python's True/False or an ASCII "->" (chapter 11 printed
    "fixed within claim: True" and "smallest p = 0.304 -> passed")."""
    import ast

    tree = ast.parse(src.read_text(encoding="utf-8"))
    flags = _boolean_names(tree)
    bad = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"):
            continue
        for part in ast.walk(node):
            if isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name) and part.value.id in flags:
                bad.append(f"line {node.lineno}: prints the truth value {part.value.id} as True/False")
            if isinstance(part, ast.Constant) and isinstance(part.value, str) and " -> " in part.value:
                bad.append(f"line {node.lineno}: prints an ASCII arrow '->' (write '→' or 'so')")
    assert not bad, f"{src.name}: " + "; ".join(bad)


#: calls that return a table or text for Jupyter to show: shown only as a cell's last expression
DISPLAYED_BY_VALUE = {"markdown_table", "Markdown", "HTML"}


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_tables_are_their_cells_last_expression(src):
    """A table built as a bare expression shows only when it ends its cell (chapter 2's table vanished
    when a glue call was added after it)."""
    import ast

    import jupytext

    bad = []
    cells = [c for c in jupytext.read(src).cells if c.cell_type == "code"]
    for k, cell in enumerate(cells, 1):
        body = ast.parse(cell.source).body
        for stmt in body[:-1]:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                f = stmt.value.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if name in DISPLAYED_BY_VALUE:
                    bad.append(f"code cell {k}, line {stmt.lineno}: {name}(...) is not its cell's last expression, "
                               "so it is never shown")
    assert not bad, f"{src.name}: " + "; ".join(bad)
