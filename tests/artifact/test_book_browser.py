"""The built book, opened in a real headless Chromium (Debian's chromium, driven by Playwright).

Fails on a missing/broken image, a broken internal link or anchor, a cell that shows an
error, an unresolved reference/glue marker, a formula MathJax did not typeset, a local
resource that failed to load, a table or output wider than its container, a figure PNG
narrower than 1,200 px, a figure without its provenance line, literal Markdown markers
(``**``, backticks, ``$$``) in the rendered text, an absolute path of the build machine
in a page, and, at 1,280 and 390 px, an element outside the viewport that is not inside a
scroll container, a table header broken inside a word, and a figure whose text is below
8 pt at its displayed width (the checks are in tests/artifact/browser_check.py). Every page reachable from the
sidebar navigation is opened; screenshots of the start page, a page with a figure, the
grade page and chapters 4 and 6 go to build/screenshots/ (index.png, figure_page.png,
grade.png, chapter04.png, chapter06.png).

Where the book is: $PAPERLIB_BOOK_HTML (a directory with index.html), default
book/_build/html. Without a built book, chromium or playwright the tests are skipped, or fail
when PAPERLIB_REQUIRE_BROWSER=1.
"""
from __future__ import annotations

import os
import struct
import sys
import zlib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import browser_check  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "build" / "screenshots"
REQUIRE = os.environ.get("PAPERLIB_REQUIRE_BROWSER", "") == "1"


def _unavailable(reason: str):
    if REQUIRE:
        pytest.fail(f"{reason} (PAPERLIB_REQUIRE_BROWSER=1)", pytrace=False)
    pytest.skip(reason)


def _book_dir() -> Path:
    return Path(os.environ.get("PAPERLIB_BOOK_HTML") or ROOT / "book" / "_build" / "html")


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the Python package playwright is not installed "
                     "(pip install -r requirements-lock.txt; no browser download is needed)")
    chromium = browser_check.find_chromium()
    if chromium is None:
        _unavailable("chromium is not installed (apt-get install -y chromium)")
    pw = sync_playwright().start()
    try:
        try:
            b = browser_check.launch_browser(pw, chromium)
        except Exception as exc:  # noqa: BLE001
            _unavailable(f"could not start {chromium}: {str(exc).splitlines()[0]}")
        yield b
        b.close()
    finally:
        pw.stop()


def test_book_in_browser(browser):
    html = _book_dir()
    if not (html / "index.html").is_file():
        _unavailable(f"no built book at {html} (no index.html): build the book first: make book")
    shots = ["index.png", "figure_page.png", *browser_check.SCREENSHOT_PAGES.values()]
    for old in shots:
        (SCREENSHOTS / old).unlink(missing_ok=True)
    visited: list[str] = []
    problems = browser_check.check_site(html, SCREENSHOTS, browser, visited=visited)
    assert not problems, f"{len(problems)} problem(s) in the book at {html}:\n" + "\n".join(problems)
    # The start page, the chapters and the back matter were all opened.
    assert len(visited) >= 2 and any(v.startswith("notebooks/") for v in visited), visited
    assert (SCREENSHOTS / "index.png").is_file()
    assert (SCREENSHOTS / "figure_page.png").is_file(), \
        f"no page among {visited} shows a loaded figure (no figure_page.png)"
    import re

    for pattern, shot in browser_check.SCREENSHOT_PAGES.items():
        if any(re.fullmatch(pattern, v) for v in visited):
            assert (SCREENSHOTS / shot).is_file(), f"{shot} was not saved"


# ---------------------------------------------------------------- the checker can fail

def _png(w: int = 1200, h: int = 3, *, dpi: float | None = 200.0, font_pt: float | None = 8.0) -> bytes:
    """A small valid RGB PNG; with ``dpi`` a pHYs chunk, with ``font_pt`` the smallest-font text key."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\x20\x60\xc0" * w for _ in range(h))
    extra = b""
    if dpi is not None:
        extra += chunk(b"pHYs", struct.pack(">IIB", round(dpi / 0.0254), round(dpi / 0.0254), 1))
    if font_pt is not None:
        extra += chunk(b"tEXt", browser_check.MIN_FONT_KEY.encode("latin-1") + b"\0" + f"{font_pt:.3f}".encode())
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + extra
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


# The book's figure rule (book/_static/paperlib.css): figures shrink to the column but not below
# 672 px, and scroll sideways inside their own box on a narrower screen.
_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title>
<style>figure {{ max-width: 100%; overflow-x: auto; margin: 0; }} figure img {{ max-width: 100%; min-width: 672px; }}</style>
</head><body>
<nav class="bd-docs-nav">{nav}</nav>
<main id="main-content">{body}</main></body></html>"""


# The book's stylesheet, on the good page: its code cells in a table narrower than their words must
# scroll with the table, not break inside "privacy_engine.py:284" or "p.grad" (chapter 8).
_BOOK_CSS = (Path(__file__).resolve().parents[2] / "book" / "_static" / "paperlib.css").read_text(encoding="utf-8")
# and its script, which puts a cue above a table that scrolls sideways (the bad page has no script: no cue)
_BOOK_JS = (Path(__file__).resolve().parents[2] / "book" / "_static" / "paperlib.js").read_text(encoding="utf-8")


def _site(tmp_path: Path, bad: bool) -> Path:
    site = tmp_path / ("bad" if bad else "good")
    (site / "_images").mkdir(parents=True)
    (site / "_images" / "fig.png").write_bytes(_png())
    (site / "_images" / "small.png").write_bytes(_png(846, 3))
    (site / "_images" / "tiny_text.png").write_bytes(_png(1400, 3, dpi=200, font_pt=2.5))  # 7 in drawn
    (site / "_images" / "no_key.png").write_bytes(_png(1200, 3, font_pt=None))
    nav = '<a href="index.html">Home</a> <a href="good.html">Good</a>'
    if bad:
        nav += ' <a href="bad.html">Bad</a>'
    (site / "index.html").write_text(_PAGE.format(title="index", nav=nav, body="<h1 id='top'>Book</h1>"))
    (site / "good.html").write_text(_PAGE.format(title="good", nav=nav, body="""
<section id="sec"><h1>Good</h1>
<p>Some <strong>bold</strong> text, <code>`code`</code> and <code>**kwargs</code>; a path results/x.json
and a link https://example.org/tmp/x.</p>
<figure id="fig-good"><div class="cell_output docutils container"><img src="_images/fig.png" alt="fig"></div>
<figcaption><p>Figure 1.1: A caption. Mode smoke, seed 0; N = 3; commit 1a2b3c4d5e.
Drawn by <a href="good.html">04_x.ipynb</a>.</p></figcaption></figure>
<div class="cell_output docutils container"><div class="output text_html">
<table style="table-layout:fixed;width:100%"><tr><td>a long cell that wraps within the page</td></tr></table>
</div></div>
<div class="cell_output docutils container"><div class="output stream highlight-myst-ansi">
<pre style="white-space:pre-wrap">a printed line</pre></div></div>
<div class="cell_output docutils container">
  <div class="output stderr highlight-myst-ansi"><pre>UserWarning: a harmless warning</pre></div></div>
<style>BOOK_CSS</style>
<div style="width:120px"><div class="paperlib-table-wrap" style="max-width:100%;overflow-x:auto">
<table class="paperlib-table" style="width:100%"><tr><td>a</td><td><code>privacy_engine.py:284</code></td>
<td><code>p.grad *= batch_size</code></td></tr></table></div></div>
<a href="#sec">here</a> <a href="index.html#top">top</a> <a href="https://example.org/x">ext</a>
<a href="mailto:a@b.c">mail</a> <a href="_images/fig.png">png</a></section>
<script>BOOK_JS</script>""".replace("BOOK_CSS", _BOOK_CSS).replace("BOOK_JS", _BOOK_JS)))
    if bad:
        (site / "bad.html").write_text(_PAGE.format(title="bad", nav=nav, body="""
<h1>Bad</h1>
<link rel="stylesheet" href="_static/missing.css">
<img src="_images/missing.png" alt="missing">
<p>The verdict is **reproduced** and `code` not rendered; $$x$$.</p>
<figure id="fig-small"><img src="_images/small.png" alt="small"><figcaption>Figure 2.1: no provenance.</figcaption></figure>
<div class="cell_output docutils container"><div class="output stream highlight-myst-ansi">
<pre style="white-space:pre;overflow-x:auto;width:300px">results -> /work/main/results and a very long line that runs far far far far far far far far far far far far away</pre></div></div>
<div style="width:400px"><table style="width:900px"><tr><td>a table wider than its container</td></tr></table></div>
<figure id="fig-tiny"><img src="_images/tiny_text.png" alt="tiny"><figcaption>Figure 2.2: Mode smoke, seed 0;
commit 1a2b3c4d5e. Drawn by <a href="bad.html">x.ipynb</a>.</figcaption></figure>
<figure id="fig-nokey"><img src="_images/no_key.png" alt="nokey"><figcaption>Figure 2.3: Mode smoke, seed 0;
commit 1a2b3c4d5e. Drawn by <a href="bad.html">x.ipynb</a>.</figcaption></figure>
<figure id="fig-boxed" style="width:300px"><img src="_images/fig.png" alt="boxed"><figcaption>Figure 2.4: Mode smoke,
seed 0; commit 1a2b3c4d5e. Drawn by <a href="bad.html">x.ipynb</a>.</figcaption></figure>
<table style="width:40px"><tr><th style="overflow-wrap:anywhere">Normaliser</th></tr>
<tr><td><code style="overflow-wrap:anywhere">privacy_engine.py:284</code></td></tr></table>
<div style="width:600px">a box as wide as a laptop's column, cut on a phone</div>
<div style="width:120px"><div class="paperlib-table-wrap" style="max-width:100%;overflow-x:auto">
<table style="width:500px"><tr><td>a wide table with no cue</td></tr></table></div></div>
<a href="#nope">dangling anchor</a>
<div class="cell_output docutils container">
  <div class="output traceback highlight-ipythontb"><pre>Traceback (most recent call last)
ValueError: boom</pre></div></div>"""))
    return site


def test_checker_accepts_a_clean_site(browser, tmp_path):
    visited: list[str] = []
    shots = tmp_path / "shots"
    assert browser_check.check_site(_site(tmp_path, bad=False), shots, browser, visited=visited) == []
    assert visited == ["index.html", "good.html"]
    assert (shots / "index.png").is_file() and (shots / "figure_page.png").is_file()


def test_checker_reports_each_problem(browser, tmp_path):
    problems = browser_check.check_site(_site(tmp_path, bad=True), None, browser)
    text = "\n".join(problems)
    on_bad = [p for p in problems if p.startswith(("bad.html:", "bad.html (at 390 px):"))]
    assert len(on_bad) == len(problems), text
    at_390 = [p for p in on_bad if "(at 390 px)" in p]
    at_1280 = [p for p in on_bad if p not in at_390]
    assert len(at_1280) == 16 and len(at_390) == 7, text
    assert any("local resource failed to load" in p and "_static/missing.css" in p for p in at_1280), text
    assert sum("table scrolls sideways" in p and "no cue" in p for p in on_bad) == 2, text
    assert any("figure scrolls sideways at 1280 px" in p and "fig.png" in p for p in at_1280), text
    assert any("image" in p and "_images/missing.png" in p for p in on_bad), text
    assert any("narrower than 1200 px (846 px)" in p for p in on_bad), text
    assert any("without its provenance line" in p and "#fig-small" in p for p in on_bad), text
    assert sum("literal Markdown marker" in p for p in on_bad) == 1, text  # one text node, first marker
    assert any('literal Markdown marker "**"' in p for p in on_bad), text
    assert any("absolute path of the build machine" in p and "/work/main/results" in p for p in on_bad), text
    assert any("printed output wider than its container" in p for p in on_bad), text
    assert any("table wider than its container" in p for p in on_bad), text
    assert any("broken anchor" in p and "'#nope'" in p for p in on_bad), text
    assert any("error shown on the page" in p and "ValueError: boom" in p for p in on_bad), text
    # the layout checks, at both widths unless the fault exists only on a phone
    for where in (at_1280, at_390):
        assert any('table header broken inside the word "Normaliser"' in p for p in where), text
        assert any('table code cell broken inside the word' in p and "privacy_engine.py:284" in p for p in where), text
        assert any("tiny_text.png: smallest text" in p and "at least 8 pt" in p for p in where), text
        assert any("no_key.png: its PNG does not record its dpi" in p for p in where), text
    assert not any("a box as wide as a laptop" in p for p in at_1280), text
    assert any("<div> reaches" in p and "outside the 390 px viewport" in p and "a box as wide as a laptop" in p
               for p in at_390), text
    assert any("<div> reaches 8..408 px" in p and "a table wider than its container" in p for p in at_390), text
    assert not any("figure fig.png" in p or "small.png: smallest" in p for p in on_bad), text


def test_figure_font_sizes_from_the_png_and_the_svg(tmp_path):
    """8 pt drawn in a 7 in figure is 8 pt at 672 px and 4.6 pt at 390 px; an SVG scales with its viewBox."""
    png = tmp_path / "f.png"
    png.write_bytes(_png(1400, 3, dpi=200, font_pt=8.0))
    fig = {"url": png.as_uri(), "naturalWidth": 1400}
    assert browser_check.figure_font_problems([{**fig, "width": 672}], 1280) == []
    bad = browser_check.figure_font_problems([{**fig, "width": 390}], 390)
    assert len(bad) == 1 and "smallest text 4.6 pt at its displayed width 390 px" in bad[0]
    svg = tmp_path / "d.svg"
    svg.write_text('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 900 400" font-size="16">'
                   '<text font-size="12">a</text><text style="font-size: 15px">b</text></svg>')
    s = {"url": svg.as_uri(), "naturalWidth": 900}
    assert browser_check.figure_font_problems([{**s, "width": 900}], 1280) == []  # 12 px = 9 pt
    assert "smallest text 6.7 pt" in browser_check.figure_font_problems([{**s, "width": 672}], 1280)[0]
