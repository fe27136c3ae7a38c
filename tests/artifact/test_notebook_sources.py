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
