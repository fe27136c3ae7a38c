"""Every number in the book's prose is glued from results, not typed (issue 14, item 4).

The test reads every ``notebooks/NN_*.py`` (jupytext percent format) and lists the numbers
typed in what the book renders as prose:

- the Markdown cells, and
- the literal text of strings that a code cell glues (``glue(name, "text ...")``,
  ``glue(name, f"text {x:.2f} ...")``): a glued sentence is prose too, so its literal parts
  must not carry a number either (the ``{x:.2f}`` field is computed, its text is not).

Printed outputs are not prose (they are the code's output under its cell) and are not read.

Not counted as typed numbers: code (fenced code blocks and inline code spans: commands and
identifiers a reader types, not results), anything inside a MyST role (``{glue:text}`key```,
``{glue:}``, ``{cite}``, ``{numref}``, ``{download}`` ...), directive lines and options
(``:name:``, ``:width:``), comments, links, file and module names, version numbers
("Opacus v0.15.0", "Opacus 1.x"), years (1900-2099, also "2020b"), references to numbered
parts of the paper or the book ("Theorem 3.6", "Figure 4", "Eq. 14", "Section 4", "§6",
"Table 2", "chapter 6", "Lemmas 3.14-3.16"), heading and list numbering, and inside maths
the small integers of a formula (``1-\\alpha``, ``2^N``, ``\\Phi^{-1}``; integers below 10).
Everything else, in maths too (``$q = 0.7$``, ``$10^{-5}$``), is checked against
:data:`PAPER_CONSTANTS`: the settings the paper states, each with the paper section it
comes from. A number that the notebook computes must be glued; one that only full mode
computes is glued as "not computed in this mode".

The allow-list is by value, so it cannot tell the paper's ``q = 0.5`` from an unrelated 0.5;
it catches the common fault (a result typed into the text, which then disagrees with the
run) and every new constant.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext")

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SOURCES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))

# ------------------------------------------------------------------ the allow-list
# value (as written, commas and math grouping removed) -> where the paper states it.
PAPER_CONSTANTS: dict[str, str] = {
    # dataset sizes |D| = N of the audits and bounds
    "0": "N = 0 and eps = 0 edge cases; Nq = 0 convention (paper §3)",
    "1": "N = 1 in Fig. 5 (§3.4); q = 1 in Fig. 2 (§4.2); one round",
    "2": "N = 2 in Fig. 2 (§4.2)",
    "3": "N = 3 in Fig. 2 (§4.2); |D| = 3 in Fig. 6 (§5)",
    "4": "N = 4 in Figs. 2, 3, 4 (§4.2, §4.3); |D'| = 4 in Fig. 6 (§5)",
    "5": "N = 5 in Fig. 2 (§4.2); |D'| = 5 and five points in Fig. 4 (§4.3)",
    "999": "N = 999 in Fig. 5 (§3.4)",
    "1000": "N + 1 = 1,000 in Fig. 5 (§3.4); n up to >= 1,000 in Fig. 3 (§4.2)",
    "59999": "N = 59,999 in Fig. 5 (§3.4, full MNIST minus one)",
    "60000": "N_train = 60,000 (MNIST/FMNIST training set, §3.4, §4.3)",
    "140199": "|D| = 140,199 in Fig. 7 (§5)",
    "140200": "|D'| = 140,200 in Fig. 7 (§5)",
    "700": "K = floor(Nq) = 700 in Fig. 7 (§5)",
    "701": "K + 1 = 701 in Fig. 7 (§5)",
    # sampling rates
    "0.005": "q = 0.005: EASGM in Figs. 2, 5 and Fig. 7 (§3.4, §4.2, §5)",
    "0.05": "q = 0.05: EASGM in Fig. 3 (§4.2)",
    "0.1": "q = 0.1: EASGM in Fig. 2 (§4.2); C = 0.1 (§4.1)",
    "0.5": "q = 0.5: Figs. 2 and 6 (§4.2, §5); FNR 0.5 in Fig. 5's reading (§3.4)",
    "0.6": "q = 0.6: Fig. 2 (§4.2)",
    "0.7": "q = 0.7: ASGM in Figs. 2, 3, 4, 5 (§3.4, §4.2, §4.3)",
    "0.8": "q = 0.8: ASGM in Figs. 2 and 4 (§4.2, §4.3)",
    "0.9": "q = 0.9: Fig. 2 (§4.2)",
    "200": "q = 1/200 and 200 rounds in Fig. 7 (§5)",
    # noise and clipping
    "10": "sigma = 10 (§4.1, Figs. 2-7)",
    "0.2": "FPR 0.2 in Fig. 5's reading (§3.4)",
    "0.4": "FPR 0.4 in Fig. 5's reading (§3.4)",
    # model sizes n
    "100": "n = 100 in Fig. 2 (§4.2); n >= 100 in Fig. 3 (§4.2)",
    "26010": "n = 26,010: the CNN of Tramer and Boneh (§3.4, §4.3)",
    "1485217": "n = 1,485,217: the PrivImage/DP-FETA model (§3.4, §4.3)",
    # audit statistics
    "10000": "10,000 trials per audited result (§4.1)",
    "95": "95 % Clopper-Pearson intervals (§4.1)",
    "1e-5": "delta = 1e-5 (§4.1, Eq. 3)",
    # Opacus releases' batch settings in the paper's Fig. 6 / Table 2 discussion
    "256": "batch size 256 of DP-FETA's MNIST run (§5)",
}

# ------------------------------------------------------------------ the parser
_ROLE = re.compile(r"\{[\w:-]+\}`[^`]*`")
# a fenced code block that is not a MyST directive (```python, ```bash, ```): code, not prose
_CODE_BLOCK = re.compile(r"^(\s*)(`{3,}|~{3,})(?!\{)[^\n]*\n.*?^\1\2\s*$", re.M | re.S)
_CODE_SPAN = re.compile(r"`[^`\n]+`")
_FENCE = re.compile(r"^\s*(`{3,}|:{3,}).*$", re.M)
_OPTION = re.compile(r"^\s*:[\w-]+:.*$", re.M)
_COMMENT = re.compile(r"^\s*%.*$", re.M)
_URL = re.compile(r"https?://\S+|\]\([^)]*\)")
_HEADING_NUM = re.compile(r"^(\s*#+\s+)[A-Z]?\d+(\.\d+)*\.?(?=\s)", re.M)
_LIST_NUM = re.compile(r"^(\s*)\d+[.)](?=\s)", re.M)
_FILE = re.compile(r"[\w./-]*\w\.(py|ipynb|json|md|txt|npz|csv|png|svg|pdf|toml|yml|cfg)\b|\b\d\d_\w+")
_VERSION = re.compile(
    r"\bv\d+(\.\d+)*(\.x)?(?:\s*(?:-|–|to|and)\s*v?\d+(\.\d+)*(\.x)?)?|\b\d+\.\d+\.\d+\b|\b\d+\.x\b"
    r"|\b(?:Opacus|Python|PyTorch|torch|dp_accounting|NumPy|numpy|SciPy|scipy|jupytext|Chromium|releases?)"
    r"\s+v?\d+(?:\.\d+)*(?:\.x)?(?:\s*(?:\([^)]*\)\s*)?(?:–|-|,|and|or|to)\s*v?\d+(?:\.\d+)*(?:\.x)?)*",
)
_REF_WORDS = (r"Theorems?|Lemmas?|Corollar(?:y|ies)|Propositions?|Definitions?|Figures?|Figs?\.|Tables?|Eqs?\.|"
              r"Equations?|Sections?|§§?|Chapters?|Appendi(?:x|ces)|Algorithms?|Steps?|Examples?|Remarks?|"
              r"Items?|Panels?|Claims?|Issues?|issue\s+#|PR\s+#|#")
_REF_NUM = r"[A-Z]?\d+(?:\.\d+)*[a-z]?"
_REF = re.compile(rf"(?:{_REF_WORDS})\s*~?\s*{_REF_NUM}(?:\s*(?:,|and|or|–|-|to|&|/)\s*{_REF_NUM})*", re.I)
_YEAR = re.compile(r"(?<![\d.,])(?:19|20)\d\d[a-z]?(?![\d,.]\d)")
_MATH_BLOCK = re.compile(r"\$\$(.+?)\$\$", re.S)
_MATH_INLINE = re.compile(r"(?<!\\)\$(.+?)(?<!\\)\$", re.S)
# a power of ten or of two written in maths or code, e.g. 10^{-5}, 2^{17}, 10**-5
_POWER = re.compile(r"(?<![\w.])(\d+)\s*(?:\^|\*\*)\s*\{?\s*([-−]?\d+)\s*\}?")
_NUMBER = re.compile(
    r"(?<![\w.^])[-−]?(?:\d{1,3}(?:(?:,|\{,\}|\\,)\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:[eE][-+−]?\d+)?)(?![\w])"
)


def _canonical(tok: str) -> str:
    t = tok.replace("{,}", "").replace("\\,", "").replace(",", "").replace("−", "-").lstrip("-")
    m = re.fullmatch(r"(\d+(?:\.\d+)?)[eE]([-+]?\d+)", t)
    if m:
        mant, exp = m.groups()
        mant = mant.rstrip("0").rstrip(".") if "." in mant else mant
        return f"{mant}e{int(exp)}"
    if "." in t:
        t = t.rstrip("0").rstrip(".")
    return t or "0"


def _numbers(text: str, *, math: bool) -> list[str]:
    out = []
    for m in _POWER.finditer(text):
        base, exp = m.group(1), m.group(2).replace("−", "-")
        if base == "10":
            out.append(f"1e{int(exp)}")
        elif not math or int(base) >= 10 or abs(int(exp)) >= 10:
            out.append(f"{base}^{int(exp)}")
    text = _POWER.sub(" ", text)
    for m in _NUMBER.finditer(text):
        tok = _canonical(m.group(0))
        if math and re.fullmatch(r"\d", tok):
            continue  # a formula's small integer: 1 - alpha, 2^N, Phi^{-1}
        out.append(tok)
    return out


def prose_numbers(markdown: str) -> list[str]:
    """The numbers typed in a Markdown text, after removing what is not a typed value."""
    t = _ROLE.sub(" ", markdown)
    t = _CODE_BLOCK.sub(" ", t)
    t = _CODE_SPAN.sub(" ", t)
    t = _COMMENT.sub(" ", t)
    t = _FENCE.sub(" ", t)
    t = _OPTION.sub(" ", t)
    t = _URL.sub(" ", t)
    t = _HEADING_NUM.sub(r"\1", t)
    t = _LIST_NUM.sub(r"\1", t)
    found: list[str] = []
    for rx in (_MATH_BLOCK, _MATH_INLINE):
        for m in rx.finditer(t):
            found += _numbers(m.group(1), math=True)
        t = rx.sub(" ", t)
    t = _FILE.sub(" ", t)
    t = _VERSION.sub(" ", t)
    t = _REF.sub(" ", t)
    t = _YEAR.sub(" ", t)
    found += _numbers(t, math=False)
    return found


def _glued_text(node: ast.AST) -> list[str]:
    """Literal text of a string expression (constants, f-string literal parts, + and %)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    if isinstance(node, ast.BinOp):
        return _glued_text(node.left) + _glued_text(node.right)
    if isinstance(node, (ast.IfExp,)):
        return _glued_text(node.body) + _glued_text(node.orelse)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("join", "format"):
        parts = _glued_text(node.func.value)
        for a in node.args:
            parts += _glued_text(a)
        return parts
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for e in node.elts for s in _glued_text(e)]
    return []


def glued_prose(code: str) -> list[str]:
    """The literal prose of the strings a code cell glues: ``glue(name, <str expr>, ...)``.

    Strings assigned to a variable that is then glued are followed one step (``s = f"..."``;
    ``glue("k", s)``). Only texts with a space are prose (a lone "0.5" glued is a value).
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    assigned: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for tg in targets:
                if isinstance(tg, ast.Name):
                    assigned.setdefault(tg.id, []).extend(_glued_text(node.value))
    texts: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "glue"):
            continue
        if len(node.args) < 2:
            continue
        val = node.args[1]
        parts = _glued_text(val)
        if isinstance(val, ast.Name):
            parts += assigned.get(val.id, [])
        texts += [p for p in parts if " " in p.strip()]
    return texts


def typed_numbers(path: Path) -> list[tuple[str, str]]:
    """``(number, context)`` for every typed number in ``path``'s prose outside the allow-list."""
    nb = jupytext.read(path)
    bad: list[tuple[str, str]] = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            texts = [cell.source]
        elif cell.cell_type == "code":
            texts = glued_prose(cell.source)
        else:
            continue
        for text in texts:
            for tok in prose_numbers(text):
                if tok not in PAPER_CONSTANTS:
                    bad.append((tok, _context(text, tok)))
    return bad


def _context(text: str, tok: str) -> str:
    flat = " ".join(text.split())
    variants = {tok, tok.replace("e", "e-") if "e-" in tok else tok}
    for v in sorted(variants, key=len, reverse=True):
        i = flat.find(v)
        if i >= 0:
            return flat[max(0, i - 50): i + len(v) + 30]
    return flat[:80]


# Notebooks whose prose other helpers are rewriting in this round (issue 14): listed with
# a reason so that the test says what remains instead of failing the suite. Remove an
# entry once its notebook passes.
PENDING: dict[str, str] = {}


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_no_typed_numbers_in_prose(src):
    bad = typed_numbers(src)
    if bad and src.stem in PENDING:
        pytest.xfail(PENDING[src.stem] + "; found: " + ", ".join(tok for tok, _ in bad))
    assert not bad, (f"{src.name}: numbers typed in the prose (glue them from results, or add a paper "
                     "constant with its section to PAPER_CONSTANTS):\n"
                     + "\n".join(f"  {tok!r:>12}  ...{ctx}..." for tok, ctx in bad))


# ------------------------------------------------------------------ the parser itself
@pytest.mark.parametrize("text, want", [
    ("about 0.44, against 0.47", ["0.44", "0.47"]),
    ("with 10,000 counted rounds about 7.7", ["10000", "7.7"]),
    ("min = -4.9e-08", ["4.9e-8"]),
    ("an FFT length $2^{17}$", ["2^17"]),
    ("$\\delta = 10^{-5}$ and $1 - \\alpha$", ["1e-5"]),
    ("Theorem 3.6, Figure 4, Eq. 14, Lemmas 3.14-3.16, §6 and chapter 6", []),
    ("({cite}`bu2020deep`, 2020) and Dong et al. 2019", []),
    ("{glue:text}`nb05_total` audits, {glue:}`x` and Opacus v0.15.0 or 1.x", []),
    ("Opacus 0.14–0.15 and Opacus 0.14 and 0.15", []),
    ("under Opacus 0.15 (EASGM) and 0.13 (ASGM)", []),
    ("$N = 59{,}999$ and 1,485,217 parameters", ["59999", "1485217"]),
    ("## 3. The claim\n1. first item", []),
    ("run `check --noise-multiplier 1.1` or\n```python\nopt = make(noise=1.1)\n```\nthen", []),
    ("```{glue:figure} k\n:name: x\nCaption with 0.47 typed.\n```", ["0.47"]),
])
def test_parser(text, want):
    assert prose_numbers(text) == want


def test_glued_prose_reads_literal_parts_only():
    code = 'x = 3\nglue("k", f"{x} of those have n ≥ 100 and 7.7 rounds", display=False)\nglue("v", f"{x:.2f}")'
    assert glued_prose(code) == [" of those have n ≥ 100 and 7.7 rounds"]
    assert [t for s in glued_prose(code) for t in prose_numbers(s)] == ["100", "7.7"]
