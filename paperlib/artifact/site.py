"""A self-contained site: the repository files the book refers to ship with it, and no reference is dead.

The book's pages mention the repository's own documents (``THEORY.md``, ``README.md``,
``DATA-LICENSE.md``, ``LICENSE``, ``CITATION.cff``, ``.zenodo.json``), its result files
(``results/grade.json``, ``results/ARTIFACT-APPENDIX.md``, a notebook's ``results/<name>.json``) and
the source files that implement or test a statement (``paperlib/...``, ``tests/...``,
``notebooks/...``). :func:`stage` copies them into ``book/_extra/``, which Sphinx copies to the
site's root (``html_extra_path``), so each is a download of the published site at the path the text
gives. :func:`dead_references` then reads the built HTML and lists every reference the site cannot
serve: a link or image whose local target is missing, and a mention, in the prose, of a repository
file that the site does not hold. Code is left out (notebook input cells, code blocks, and inline
code that is a command such as ``make book/notebooks/NAME.ipynb``: it names what the command makes).

``python -m paperlib.artifact.site stage --root R --results D --out book/_extra`` (run by ``make book``)
and ``python -m paperlib.artifact.site check book/_build/html`` (exit 1 and one line per dead
reference; run by ``make test`` on the test book, ``tests/artifact/test_book_links.py``).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["SHIPPED", "stage", "dead_references", "print_findings", "main"]

#: the repository's documents the site ships at its root
SHIPPED = ("README.md", "THEORY.md", "DATA-LICENSE.md", "LICENSE", "CITATION.cff", ".zenodo.json", "ARTIFACT-APPENDIX.md")
#: the source folders the site ships (their Python sources, and the package's resources), for the pages
#: that name the file implementing or testing a statement
SOURCES = {"paperlib": ("*.py", "*.json", "*.md"), "tests": ("*.py",), "notebooks": ("*.py",)}
#: what of ``results/`` the site ships: the graded results and the appendix (small, plain text)
RESULT_GLOBS = ("*.json", "*.md")
#: a mention of a repository file in the prose: a file under one of the repository's folders, or a root
#: document by name (a folder alone describes the checkout's layout, not a page to open)
_MENTION = re.compile(r"(?<![\w/.-])((?:results|figures|paperlib|notebooks|book|tests|bench)/[\w./-]*\.[A-Za-z]{2,5}"
                      r"|(?:THEORY|DATA-LICENSE|ARTIFACT-APPENDIX)\.md|README\.md|CITATION\.cff|\.zenodo\.json)\b")
#: a placeholder in a path (``NAME``, ``NN``): the text names a pattern
_PLACEHOLDER = re.compile(r"(?<![a-z])(NAME|NN)(?![a-z])")
#: inline code that is a command: it names what it makes or reads in a checkout, not a page
_COMMAND = re.compile(r"^\s*(make|python|python3|git|pip|cd|sha256sum|conda|jupyter-book|pytest)\b")


def stage(root: str | Path, results: str | Path, out: str | Path) -> list[str]:
    """Copy the shipped documents of ``root`` and the result files of ``results`` into ``out`` (emptied
    first); returns the paths written, relative to ``out``. A document absent from ``root`` is skipped
    (a checkout without it has no page that names it)."""
    root, results, out = Path(root), Path(results), Path(out)
    if out.exists():
        shutil.rmtree(out)
    (out / "results").mkdir(parents=True)
    written = []
    for name in SHIPPED:
        if (root / name).is_file():
            shutil.copyfile(root / name, out / name)
            written.append(name)
    for pattern in RESULT_GLOBS:
        for f in sorted(results.glob(pattern)) if results.is_dir() else []:
            shutil.copyfile(f, out / "results" / f.name)
            written.append(f"results/{f.name}")
    for folder, patterns in SOURCES.items():
        for pattern in patterns:
            for f in sorted((root / folder).rglob(pattern)):
                rel = f.relative_to(root)
                if "__pycache__" in rel.parts or any(part.startswith(".") for part in rel.parts):
                    continue
                (out / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, out / rel)
                written.append(rel.as_posix())
    return written


class _Page(HTMLParser):
    """The local link targets of a page and the text of its prose (code and notebook inputs left out)."""

    _SKIP = {"pre", "script", "style"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.targets: list[str] = []
        self.text: list[str] = []
        self._skip = 0  # depth inside code: <pre>, scripts, and notebook input cells
        self._stack: list[bool] = []
        self._code: list[list[str]] = []  # the inline code elements open, their text so far

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("href", "src"):
            if a.get(key):
                self.targets.append(a[key])
        if tag in ("br", "img", "hr", "meta", "link", "input", "wbr", "source"):
            return
        classes = (a.get("class") or "").split()
        skip = tag in self._SKIP or "cell_input" in classes or "highlight" in classes
        self._stack.append(skip)
        self._skip += skip
        if tag == "code" and not self._skip:
            self._code.append([])  # inline code, read whole before it counts as prose

    def handle_endtag(self, tag):
        if tag in ("br", "img", "hr", "meta", "link", "input", "wbr", "source") or not self._stack:
            return
        self._skip -= self._stack.pop()
        if tag == "code" and self._code:
            code = "".join(self._code.pop())
            if not _COMMAND.match(code):
                (self._code[-1] if self._code else self.text).append(code)

    def handle_data(self, data):
        if self._skip:
            return
        (self._code[-1] if self._code else self.text).append(data)


def _local(target: str) -> str | None:
    """The path part of a local link target, or None for an external, anchor-only or data link."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or target.startswith(("#", "mailto:", "javascript:", "data:")):
        return None
    return unquote(parts.path) or None


def dead_references(html_dir: str | Path) -> list[str]:
    """Every reference of the built site at ``html_dir`` that it cannot serve, one line each: ``page:
    link to X (missing)`` or ``page: mentions X, which the site does not contain``. Empty when none."""
    site = Path(html_dir)
    if not (site / "index.html").is_file():
        raise ValueError(f"html_dir: {site} holds no built book (index.html); build it first (make book)")
    dead = []
    for page in sorted(site.rglob("*.html")):
        rel = page.relative_to(site)
        if rel.parts[0] in ("_static", "_sources", "_downloads"):
            continue
        p = _Page()
        p.feed(page.read_text(encoding="utf-8", errors="replace"))
        for t in sorted(set(p.targets)):
            path = _local(t)
            if path is None:
                continue
            target = (site / path.lstrip("/")) if path.startswith("/") else (page.parent / path)
            if not target.exists():
                dead.append(f"{rel}: link to {t} (missing)")
        for m in sorted(set(_MENTION.findall(" ".join(p.text)))):
            m = m.rstrip(".,;:)")
            if _PLACEHOLDER.search(m):  # notebooks/NAME.py: a pattern the text explains, not a file
                continue
            if not (site / m).exists():
                dead.append(f"{rel}: mentions {m}, which the site does not contain")
    return dead


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paperlib.artifact.site", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("stage", help="copy the shipped documents and results into the site's extra folder")
    st.add_argument("--root", required=True)
    st.add_argument("--results", required=True)
    st.add_argument("--out", required=True)
    ck = sub.add_parser("check", help="list the references of a built site that it cannot serve")
    ck.add_argument("html_dir")
    a = ap.parse_args(argv)
    if a.cmd == "stage":
        stage(a.root, a.results, a.out)
        return 0
    return print_findings("site check", dead_references, a.html_dir)


def print_findings(label: str, find, html_dir) -> int:
    """Run a check of the built site (``find(html_dir)`` -> lines) for a command line: each line printed, exit
    status 1 when there is one, 0 when none, 2 (one line on stderr, after ``label``) when it cannot run."""
    try:
        found = find(html_dir)
    except ValueError as exc:
        print(f"{label}: {exc}", file=sys.stderr)
        return 2
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
