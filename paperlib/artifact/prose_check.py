"""One style for the book's prose, checked on the built site: short sentences, no nested parentheses,
no code constants or file:line references in the text a reader reads.

:func:`problems` reads every page of a built book and returns one line per sentence that breaks a rule:

- a sentence of more than :data:`MAX_WORDS` words;
- a parenthesis opened inside another one, "(as in (this))" (a function's argument such as "δ(ε)" or
  "floor(Nq)" is notation, not a parenthesis);
- an identifier of the code in the prose: a name in capitals with an underscore (``CHECK_TRIALS``), or a
  module-level constant or notebook parameter of this repository written in capitals (``SEED``);
- a reference to a line of a file (``algorithm/DPSUR.py:87``).

What is not prose is left out: code (inline and blocks), notebook input cells, mathematics, the site's
navigation, and a folded block titled "Sources" (where the files and lines behind a statement belong).
The rules apply to every page, generated text and written text alike.

``python -m paperlib.artifact.prose_check book/_build/html`` prints one line per problem (exit 1 when
there is one); ``tests/artifact/test_book_prose.py`` runs it on the book ``make test`` builds.
"""

from __future__ import annotations

import argparse
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

__all__ = ["MAX_WORDS", "SOURCES_TITLE", "sentences", "sentence_problems", "problems", "code_constants", "main"]

#: the longest sentence the book may print, in words
MAX_WORDS = 45
#: the title of a folded block whose content is a list of sources (files, lines, commits), not prose
SOURCES_TITLE = "Sources"

_ROOT = Path(__file__).resolve().parents[2]
#: names in capitals that the code defines as constants and that are also the field's (a data set, a method, a
#: claim's label): prose may use them
FIELD_NAMES = frozenset({"DPSUR", "MNIST", "CIFAR", "SGM", "ASGM", "EASGM", "FEASGM", "DP", "SGD", "PLD", "PRV",
                         "RDP", "CNN", "MLP", "GPU", "CPU", "CUDA", "DPI"})
_CLAIM_LABEL = re.compile(r"^[A-Z]\d+$")
_BLOCKS = {"p", "li", "dt", "dd", "td", "th", "caption", "figcaption", "h1", "h2", "h3", "h4", "h5", "h6",
           "summary", "div", "section", "blockquote", "tr", "table", "ul", "ol", "dl"}
_VOID = {"br", "img", "hr", "meta", "link", "input", "wbr", "source", "col", "area", "base", "embed", "param",
         "track"}
#: elements, and classes, whose text is not prose
_SKIP_TAGS = {"pre", "script", "style", "code", "nav", "header", "footer", "svg", "math", "button", "kbd", "samp"}
_SKIP_CLASSES = {"cell_input", "highlight", "math", "MathJax", "headerlink", "bd-sidebar-primary",
                 "bd-sidebar-secondary", "bd-header", "prev-next-area", "bd-footer", "bd-footer-content",
                 "header-article", "bd-header-article", "sd-summary-up", "sd-summary-down", "toctree-wrapper",
                 "citation", "footnote", "bibliography", "cell_output-stderr", "output_stderr", "stderr",
                 "paperlib-sources"}
#: a reference to lines of a file: ``name.py:87`` or ``name.py:87-95``
_FILE_LINE = re.compile(r"[\w./-]+\.(?:py|md|ipynb|json|txt|yml|yaml|toml|cfg|c|h|cpp|js):\d+")
_CAPS_UNDERSCORE = re.compile(r"(?<![\w\\])[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9](?!\w)")
_CAPS = re.compile(r"(?<![\w\\])[A-Z][A-Z0-9]{1,}(?![\w])")
#: abbreviations after which a full stop does not end a sentence
_ABBREV = re.compile(r"(?:\b(?:e\.g|i\.e|et al|cf|vs|resp|approx|Fig|Figs|Eq|Eqs|Sec|Thm|Def|Prop|Lem|No|no|"
                     r"Alg|App|Ch|Tab|ca|etc)\.|\b[A-Z]\.)$")


def code_constants(root: str | Path = _ROOT) -> frozenset[str]:
    """The module-level constants of ``paperlib/`` and the parameters of ``notebooks/*.py`` whose names are in
    capitals (``SEED``, ``CHECK_TRIALS``): names a reader of the prose should never meet. Names that are
    also the field's abbreviations (``SGM``, ``PLD``) are not constants of the code and are never listed,
    because the code names none that way."""
    root = Path(root)
    names: set[str] = set()
    pat = re.compile(r"^([A-Z][A-Z0-9_]*[A-Z0-9])\s*(?::[^=]*)?=", re.M)
    for folder, glob in (("paperlib", "**/*.py"), ("notebooks", "*.py")):
        for f in sorted((root / folder).glob(glob)):
            names.update(pat.findall(f.read_text(encoding="utf-8", errors="replace")))
    return frozenset(n for n in names if n not in FIELD_NAMES and not _CLAIM_LABEL.match(n))


def sentences(text: str) -> list[str]:
    """Split a block of prose into sentences: at ".", "?" or "!" (or ":" before a list's item is not a
    stop) followed by a space and a capital letter, a digit or an opening quote, unless the full stop
    ends a known abbreviation ("e.g.", "et al.", "Fig.") or an initial."""
    text = re.sub(r"\s+", " ", text).strip()
    out, start = [], 0
    for m in re.finditer(r"[.?!](?:[)\"'”’])?\s+(?=[A-Z0-9“\"'(])", text):
        head = text[start:m.start() + 1]
        if text[m.start()] == "." and _ABBREV.search(head):
            continue
        out.append(head.strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return [s for s in out if re.search(r"[A-Za-z]", s)]


def _words(sentence: str) -> int:
    return sum(1 for w in sentence.split() if re.search(r"[\w]", w))


def _nested(sentence: str) -> bool:
    """True when a parenthesis opens inside another. An opening parenthesis glued to the word before it
    (``δ(ε)``, ``floor(Nq)``) is notation and counts for depth but never as a parenthetical remark."""
    depth = 0
    for i, ch in enumerate(sentence):
        if ch == "(":
            glued = i > 0 and not sentence[i - 1].isspace() and sentence[i - 1] not in "([{\"'“‘—–-"
            if depth >= 1 and not glued:
                return True
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
    return False


def sentence_problems(sentence: str, constants: frozenset[str] = frozenset()) -> list[str]:
    """What is wrong with one sentence, in words (empty when nothing is)."""
    found = []
    n = _words(sentence)
    if n > MAX_WORDS:
        found.append(f"{n} words (at most {MAX_WORDS})")
    if _nested(sentence):
        found.append("nested parentheses")
    ids = set(_CAPS_UNDERSCORE.findall(sentence)) | {w for w in _CAPS.findall(sentence) if w in constants}
    if ids:
        found.append("code identifier " + ", ".join(sorted(ids)))
    lines = _FILE_LINE.findall(sentence)
    if lines:
        found.append("file:line reference " + ", ".join(sorted(set(lines))))
    return found


class _Prose(HTMLParser):
    """The prose blocks of a page's article: one string per block element, code and math left out."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self._buf: list[str] = []
        self._stack: list[tuple[str, bool, bool]] = []  # (tag, skips, is a Sources dropdown)
        self._skip = 0
        self._in_article = 0
        self._summary: list[str] | None = None
        self._sources_pending: list[int] = []  # stack indices of dropdowns whose title we are reading

    def _flush(self):
        text = "".join(self._buf).strip()
        if text:
            self.blocks.append(text)
        self._buf = []

    def handle_starttag(self, tag, attrs):
        if tag in _VOID:
            if tag == "br":
                self._buf.append(" ")
            return
        a = dict(attrs)
        classes = set((a.get("class") or "").split())
        article = tag == "article" or "bd-article" in classes
        skip = tag in _SKIP_TAGS or bool(classes & _SKIP_CLASSES)
        dropdown = tag == "details"
        self._stack.append((tag, skip, dropdown))
        self._skip += skip
        self._in_article += article
        if dropdown:
            self._sources_pending.append(len(self._stack) - 1)
        if tag == "summary":
            self._summary = []
        if tag in _BLOCKS:
            self._flush()

    def handle_endtag(self, tag):
        if tag in _VOID or not self._stack:
            return
        # close up to the matching tag (tolerates unclosed elements)
        while self._stack:
            t, skip, dropdown = self._stack.pop()
            self._skip -= skip
            if t == "article":
                self._in_article -= 1
            if t == "summary" and self._summary is not None:
                title = "".join(self._summary).strip()
                self._summary = None
                if title == SOURCES_TITLE and self._sources_pending:
                    # the rest of this dropdown is a list of sources: skip it
                    i = self._sources_pending[-1]
                    tg, _, dd = self._stack[i]
                    self._stack[i] = (tg, True, dd)
                    self._skip += 1
            if dropdown and self._sources_pending:
                self._sources_pending.pop()
            if t in _BLOCKS:
                self._flush()
            if t == tag:
                break

    def handle_data(self, data):
        if self._summary is not None:
            self._summary.append(data)
        if self._skip or not self._in_article:
            return
        self._buf.append(data)

    def close(self):
        super().close()
        self._flush()


def page_sentences(html: str) -> list[str]:
    """The sentences of one page's article, in order."""
    p = _Prose()
    p.feed(html)
    p.close()
    return [s for block in p.blocks for s in sentences(block)]


def problems(html_dir: str | Path, constants: frozenset[str] | None = None) -> list[str]:
    """Every sentence of the built site at ``html_dir`` that breaks a rule, one line each: ``page: what:
    "the sentence"``. Empty when none.

    Raises
    ------
    ValueError
        If ``html_dir`` holds no built book (no ``index.html``).
    """
    site = Path(html_dir)
    if not (site / "index.html").is_file():
        raise ValueError(f"html_dir: {site} holds no built book (index.html); build it first (make book)")
    constants = code_constants() if constants is None else constants
    found = []
    for page in sorted(site.rglob("*.html")):
        rel = page.relative_to(site)
        if rel.parts[0] in ("_static", "_sources", "_downloads") or rel.name in ("genindex.html", "search.html"):
            continue
        for s in page_sentences(page.read_text(encoding="utf-8", errors="replace")):
            for what in sentence_problems(s, constants):
                shown = s if len(s) <= 160 else s[:157] + "..."
                found.append(f'{rel}: {what}: "{shown}"')
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paperlib.artifact.prose_check", description=__doc__.split("\n")[0])
    ap.add_argument("html_dir", help="the built book (book/_build/html)")
    a = ap.parse_args(argv)
    from paperlib.artifact.site import print_findings

    return print_findings("prose check", problems, a.html_dir)


if __name__ == "__main__":
    sys.exit(main())
