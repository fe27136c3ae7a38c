"""Open a built jupyter-book (static HTML) in headless Chromium and list what is broken.

Used by tests/artifact/test_book_browser.py; can also be run by hand:

    python tests/artifact/browser_check.py book/_build/html build/screenshots

``check_site(html_dir, screenshots_dir)`` starts at ``index.html`` (following its redirect),
collects every local page linked from the sidebar navigation (and the in-page tables of
contents) of the pages it visits, opens each one as a ``file://`` URL and returns one message
per problem, each naming the page and the broken thing:

* an ``<img>`` that did not load (``naturalWidth == 0``) or whose file does not exist;
* an ``<a href>`` to a local file that does not exist (``_sources/``, ``_downloads/``,
  ``_static/`` included), or to ``page.html#anchor`` / ``#anchor`` where the target page has
  no element with that id (http(s), mailto, ... links are ignored);
* a notebook cell that shows an error (myst-nb ``.output.traceback``/``.output.error``,
  or a stderr/stream output with a Python traceback or an ``...Error``);
* an unresolved-reference / glue marker (docutils ``.system-message``, ``.problematic``,
  a Sphinx ``.xref`` that is not inside a link), a MathJax error (``mjx-merror``) or a
  formula MathJax did not typeset;
* a local resource (script, stylesheet, font) the page failed to load, and an uncaught
  JavaScript error on the page;
* a table or a cell output wider than its container (the element's ``scrollWidth`` above its
  ``clientWidth``, or its box wider than its parent's ``clientWidth``): a column cut off;
* a figure image (in a figure or a cell output) whose PNG/JPEG is narrower than
  :data:`MIN_FIGURE_PX` (1,200 px);
* a figure without its provenance line (:func:`paperlib.artifact.notebook.provenance_text`:
  "Mode <mode>, seed <seed>; ...; commit <sha>."
  followed by "Drawn by <notebook>.ipynb", which booktags appends to every ``{glue:figure}``
  caption), including an image shown in a cell output outside any figure (raster images
  only: an SVG is a drawn diagram, not a computed figure);
* literal Markdown markers in the rendered text (``**``, a backtick, ``$$``) outside code and
  formulas;
* an absolute path of the build machine in the page's text (collapsed code included): the
  book's source checkout, ``/home/``, ``/work/``, ``/tmp/``, ``/root/``, ``/Users/``;
* at each width of :data:`VIEWPORTS` (1,280 and 390 CSS px): an element of the article that
  reaches beyond the viewport and is not inside a container that scrolls sideways (a cut
  table column, equation or caption); a table header, or code in a table cell, broken inside a
  word (its cell narrower than its longest word; in code, a name, number or file:line); a glued
  text of over 40 characters in bold; from :data:`WIDE_VIEWPORT` (1,000 px) on, a figure that
  does not fit its column (it may scroll sideways on a phone only); a figure whose smallest text is below
  :data:`MIN_FIGURE_FONT_PT` (8 pt) at its displayed width (:func:`figure_font_problems`:
  from the PNG's dpi and recorded smallest font, or the SVG's font sizes);
* a figure or table caption whose text has less than :data:`MIN_CAPTION_CONTRAST` (4.5:1) contrast
  against its background, and a grade page whose first 1,280 x 800 screen does not show every
  claim's row of its table of verdicts (:func:`_check_readability`);
* at 390 px, a menu button that does not open the sidebar (:func:`_check_sidebar_on_a_phone`).

It saves full-page screenshots ``index.png`` (the start page), ``figure_page.png`` (the
first visited page with a loaded image in a cell output or figure) and, where those pages
exist, ``grade.png`` (the grade page) and ``chapter04.png`` / ``chapter06.png``
(:data:`SCREENSHOT_PAGES`) into ``screenshots_dir``, and at 390 px ``index_390.png``,
``grade_390.png``, ``chapter04_390.png``, ``chapter06_390.png``.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Error outputs as myst-nb renders them (myst_nb/core/render.py: classes "output traceback",
# "output stderr", "output stream"), and markers of unresolved references / glue keys.
ERROR_SELECTORS = [
    ".output.traceback",
    ".output.error",
    ".cell_output .error",
    ".system-message",
    ".problematic",
    "mjx-merror",
]
_ERROR_TEXT = r"Traceback \(most recent call last\)|\b\w*(Error|Exception)\b"

#: Smallest natural width, in pixels, of a figure's PNG (paperlib.artifact.plotting.MIN_PNG_PX).
MIN_FIGURE_PX = 1200

#: Pages photographed besides the start page: a regular expression on the page's path
#: relative to the book -> screenshot file name.
SCREENSHOT_PAGES = {r"grade\.html": "grade.png", r"notebooks/04_[^/]*\.html": "chapter04.png",
                    r"notebooks/06_[^/]*\.html": "chapter06.png"}

#: Directory prefixes that betray the build machine when they appear in a page (besides the
#: book's own checkout, found from the HTML directory).
MACHINE_PREFIXES = ("/home/", "/work/", "/tmp/", "/root/", "/Users/")

# Hang guards, not speed requirements (a page that is fine returns long before them; a loaded
# machine can take many times a quiet one's ~1 s per page): a page's navigation and actions,
# MathJax's first typesetting pass, the images, and a meta-refresh redirect.
PAGE_TIMEOUT_MS = 120_000
MATHJAX_TIMEOUT_MS = 120_000
IMAGES_TIMEOUT_MS = 120_000
REFRESH_TIMEOUT_MS = 30_000  # waited in full only by a page whose refresh points at itself

# Runs in the page once it has loaded: waits for MathJax and the images, then reports.
_PAGE_JS = r"""
async ([errorSelectors, errorText, mathjaxTimeout, minFigurePx, pathPattern, imagesTimeout]) => {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const text = (el) => el.innerText || el.textContent;
  const excerpt = (s) => (s || "").replace(/\s+/g, " ").trim().slice(0, 200);
  // MathJax 3 (vendored by jupyter-book): wait for its first typesetting pass.
  const t0 = Date.now();
  if (document.querySelector(".math, script[src*='mathjax']")) {
    // tex-chtml.js is a deferred script: it has run by the load event, unless it failed
    // to load; so a short grace period is enough for MathJax.startup to appear.
    while (!(window.MathJax && MathJax.startup && MathJax.startup.promise)
           && Date.now() - t0 < Math.min(mathjaxTimeout, 2000)) await sleep(50);
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      await Promise.race([MathJax.startup.promise.catch(() => {}), sleep(mathjaxTimeout)]);
    }
  }
  // Images: make lazy ones load, then wait until each has loaded or failed.
  const imgs = Array.from(document.images);
  imgs.forEach((img) => { img.loading = "eager"; });
  await Promise.race([
    Promise.all(imgs.map((img) => img.complete ? null :
      new Promise((r) => { img.addEventListener("load", r); img.addEventListener("error", r); }))),
    sleep(imagesTimeout),
  ]);
  const images = imgs.map((img) => ({
    src: img.getAttribute("src") || "", url: img.currentSrc || img.src || "",
    complete: img.complete, naturalWidth: img.naturalWidth,
    inFigure: !!img.closest(".cell_output, figure, .figure"),
  }));
  const links = Array.from(document.querySelectorAll("a[href]")).map((a) => ({
    href: a.getAttribute("href"), url: a.href,
  }));
  const nav = Array.from(document.querySelectorAll(
    "nav.bd-docs-nav a[href], .bd-sidebar-primary nav a[href], .toctree-wrapper a[href]"
  )).map((a) => a.href);
  const errors = [];
  for (const sel of errorSelectors) {
    for (const el of document.querySelectorAll(sel)) {
      errors.push(`${sel}: ${excerpt(text(el))}`);
    }
  }
  const re = new RegExp(errorText);
  for (const el of document.querySelectorAll(".output.stderr")) {
    if (re.test(el.textContent)) errors.push(`.output.stderr: ${excerpt(text(el))}`);
  }
  for (const el of document.querySelectorAll(".cell_output .output:not(.stderr):not(.traceback)")) {
    if (/Traceback \(most recent call last\)/.test(el.textContent))
      errors.push(`cell output with a traceback: ${excerpt(text(el))}`);
  }
  for (const el of document.querySelectorAll(".xref")) {
    if (!el.closest("a")) errors.push(`unresolved reference (.xref): ${excerpt(text(el))}`);
  }
  // Formulas MathJax left untouched (MathJax missing or failed).
  let untypeset = [];
  for (const el of document.querySelectorAll("span.math, div.math")) {
    if (!el.querySelector("mjx-container") && !el.closest("mjx-container")) untypeset.push(el);
  }
  if (untypeset.length) {
    errors.push(`${untypeset.length} formula(s) not typeset by MathJax, e.g. ${excerpt(text(untypeset[0]))}`);
  }
  // ---- what a reader sees in the article (not the sidebars)
  const art = document.querySelector("article.bd-article, main#main-content, [role=main], main") || document.body;
  const faults = [];
  // Tables and outputs wider than their container.
  const cands = Array.from(art.querySelectorAll(
    "table, .cell_output .output, .cell_output pre, .cell_output > div, .output_area, div.output"));
  const wide = [];
  for (const el of cands) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;  // not rendered (a collapsed cell)
    const c = el.parentElement;
    const own = el.scrollWidth - el.clientWidth;
    // a table may be wider than the page inside a wrapper that scrolls sideways (its columns
    // are then reached by scrolling, not cut): only a table outside such a wrapper is cut
    const scrolls = c && /(auto|scroll)/.test(getComputedStyle(c).overflowX);
    const box = c && !scrolls ? r.width - c.clientWidth : 0;
    const over = Math.max(el.tagName === "TABLE" ? 0 : own, box);
    if (over > 1) wide.push([el, Math.round(over)]);
  }
  for (const [el, over] of wide) {
    if (wide.some(([o]) => o !== el && el.contains(o))) continue;  // report the innermost
    const what = el.tagName === "TABLE" ? "table" : (el.tagName === "PRE" ? "printed output" : "output");
    faults.push(`${what} wider than its container by ${over} px: ${excerpt(text(el)).slice(0, 90)}`);
  }
  // Figure images: wide enough, and with their provenance line.
  const provRe = /Mode \S+, seed [^;]*;.*commit [^.;]+\.\s*Drawn by/s;
  const seenFig = new Set();
  for (const img of art.querySelectorAll("img")) {
    const fig = img.closest("figure, div.figure");
    const inOutput = img.closest(".cell_output");
    if (!fig && !inOutput) continue;
    const src = img.getAttribute("src") || "";
    const raster = /\.(png|jpe?g)(\?|#|$)/i.test(src) || src.startsWith("data:image/png");
    if (raster && img.complete && img.naturalWidth > 0 && img.naturalWidth < minFigurePx)
      faults.push(`figure image narrower than ${minFigurePx} px (${img.naturalWidth} px): src=${src.slice(0, 80)}`);
    const key = fig || img;
    if (!raster || seenFig.has(key)) continue;  // an SVG is a drawn diagram, not a result
    seenFig.add(key);
    const cap = fig ? fig.querySelector("figcaption, .caption") : null;
    if (!cap || !provRe.test(cap.textContent.replace(/\s+/g, " "))) {
      const label = fig && fig.id ? `#${fig.id}` : `src=${src.slice(0, 80)}`;
      faults.push(`figure without its provenance line ("Mode ..., seed ...; commit ... Drawn by ..."): ${label}`);
    }
  }
  // Literal Markdown markers in rendered text (outside code and formulas).
  const skip = "code, pre, kbd, samp, script, style, textarea, tt, mjx-container, .math, .MathJax, " +
               ".highlight, .literal, .cell_input, .xref";
  const walker = document.createTreeWalker(art, NodeFilter.SHOW_TEXT);
  let md = 0;
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const p = n.parentElement;
    if (!p || p.closest(skip)) continue;
    const m = /\*\*|`|\$\$/.exec(n.nodeValue);
    if (m && md++ < 5) {
      const v = n.nodeValue, i = m.index;
      faults.push(`literal Markdown marker ${JSON.stringify(m[0])} in the text: ` +
                  `"${excerpt(v.slice(Math.max(0, i - 40), i + 40))}"`);
    }
  }
  // Absolute paths of the build machine, anywhere in the page's text (collapsed cells too).
  if (pathPattern) {
    const pre = new RegExp(pathPattern, "g");
    const body = Array.from(art.querySelectorAll("*")).length ? art.textContent : "";
    let m, k = 0;
    while ((m = pre.exec(body)) && k++ < 3) {
      const i = m.index;
      faults.push(`absolute path of the build machine in the page: "${excerpt(body.slice(Math.max(0, i - 30), i + 60))}"`);
    }
  }
  const ids = Array.from(document.querySelectorAll("[id]")).map((e) => e.id)
    .concat(Array.from(document.querySelectorAll("a[name]")).map((e) => e.getAttribute("name")));
  return {url: location.href, images, links, nav, errors, ids, faults};
}
"""

#: Widths (CSS px) at which every page's layout is checked: a laptop and a phone.
VIEWPORTS = (1280, 390)
#: From this window width (CSS px) on, a figure must fit its column without scrolling.
WIDE_VIEWPORT = 1000
#: Smallest size, in points, of a figure's text as the page displays it.
MIN_FIGURE_FONT_PT = 8.0
#: PNG text key with a figure's smallest font size (paperlib.artifact.plotting.MIN_FONT_KEY).
MIN_FONT_KEY = "paperlib-min-font-pt"

# Runs in a loaded page (after _PAGE_JS, or after waiting for MathJax at another width):
# elements wider than the viewport outside a scroll container, header cells broken inside a
# word, and the displayed width of every figure image (its font size is checked in Python).
_LAYOUT_JS = r"""
async ([mathjaxTimeout, wideViewport]) => {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const t0 = Date.now();
  while (document.querySelector(".math") && !(window.MathJax && MathJax.startup && MathJax.startup.promise)
         && Date.now() - t0 < 2000) await sleep(50);
  if (window.MathJax && MathJax.startup && MathJax.startup.promise)
    await Promise.race([MathJax.startup.promise.catch(() => {}), sleep(mathjaxTimeout)]);
  const imgs = Array.from(document.images);
  imgs.forEach((img) => { img.loading = "eager"; });
  await Promise.race([Promise.all(imgs.map((img) => img.complete ? null :
    new Promise((r) => { img.addEventListener("load", r); img.addEventListener("error", r); }))), sleep(mathjaxTimeout)]);
  const excerpt = (s) => (s || "").replace(/\s+/g, " ").trim().slice(0, 80);
  const vw = document.documentElement.clientWidth;
  // the article itself: the page's table of contents is a drawer off the screen's edge on a phone
  const art = document.querySelector("article.bd-article") ||
              document.querySelector("main#main-content, [role=main], main") || document.body;
  const faults = [];
  const scroller = (el) => /(auto|scroll|hidden)/.test(getComputedStyle(el).overflowX);
  const within = (r) => r.left >= -1 && r.right <= vw + 1;
  const wide = [];
  for (const el of art.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || within(r)) continue;
    if (getComputedStyle(el).visibility === "hidden") continue;
    let ok = false;
    for (let p = el.parentElement; p && p !== document.documentElement; p = p.parentElement) {
      if (scroller(p) && within(p.getBoundingClientRect())) { ok = true; break; }
      if (p === art) break;
    }
    if (!ok) wide.push(el);
  }
  for (const el of wide) {
    if (wide.some((o) => o !== el && o.contains(el))) continue;  // the outermost one
    const r = el.getBoundingClientRect();
    faults.push(`<${el.tagName.toLowerCase()}> reaches ${Math.round(r.left)}..${Math.round(r.right)} px, outside the ` +
                `${vw} px viewport and not inside a scroll container: ${excerpt(el.textContent)}`);
  }
  // a word of a header cell, or of code in a table cell, split over two lines (cell narrower than its
  // longest word: "privacy_en / gine.py:28 / 4", "p.gra / d *=")
  for (const th of art.querySelectorAll("th, td code")) {
    if (!th.getBoundingClientRect().width) continue;
    const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    let broken = null;
    for (let n = walker.nextNode(); n && !broken; n = walker.nextNode()) {
      // a header's word runs to a space, hyphen or slash; in code only an identifier, dotted name, number or
      // file:line must stay whole (a browser may break code after "|", "(" or "*", which splits no name)
      const re = th.tagName === "TH" ? /[^\s\-\u2010-\u2014\/]+/g : /[A-Za-z0-9_.:]+/g;
      let m;
      while ((m = re.exec(n.nodeValue)) && !broken) {
        const rg = document.createRange();
        rg.setStart(n, m.index); rg.setEnd(n, m.index + m[0].length);
        const tops = new Set(Array.from(rg.getClientRects()).filter((q) => q.width > 0).map((q) => Math.round(q.top)));
        if (tops.size > 1) broken = m[0];
      }
    }
    if (broken) faults.push(`table ${th.tagName === "TH" ? "header" : "code cell"} broken inside the word "${broken}" ` +
                            `at ${vw} px: "${excerpt(th.textContent)}"`);
  }
  // a table that scrolls sideways says so above it (book/_static/paperlib.js)
  for (const box of art.querySelectorAll("div.paperlib-table-wrap, .pst-scrollable-table-container")) {
    const prev = box.previousElementSibling;
    if (box.scrollWidth > box.clientWidth + 1 && !(prev && prev.classList.contains("paperlib-scroll-cue")))
      faults.push(`table scrolls sideways at ${vw} px with no cue above it: "${excerpt(box.textContent)}"`);
  }
  // a glued sentence in bold (myst-nb's default for pasted text): a whole paragraph shouted at the reader
  for (const sp of art.querySelectorAll("span.pasted-text")) {
    if (sp.textContent.trim().length > 40 && parseInt(getComputedStyle(sp).fontWeight, 10) >= 600) {
      faults.push(`glued text in bold at ${vw} px: "${excerpt(sp.textContent)}"`);
      break;
    }
  }
  const figures = [];
  for (const img of art.querySelectorAll("img")) {
    if (!img.closest("figure, div.figure, .cell_output") || !img.complete || !img.naturalWidth) continue;
    if (vw >= wideViewport) {  // on a laptop a figure fits its column: it scrolls only on a phone
      const box = img.closest("figure, div.figure, .cell_output");
      const over = img.getBoundingClientRect().width - box.clientWidth;
      if (over > 1) faults.push(`figure scrolls sideways at ${vw} px (${Math.round(over)} px cut): ` +
                                `${(img.getAttribute("src") || "").slice(0, 80)}`);
    }
    figures.push({src: img.getAttribute("src") || "", url: img.currentSrc || img.src || "",
                  width: img.getBoundingClientRect().width, naturalWidth: img.naturalWidth});
  }
  return {faults, figures, vw};
}
"""


def _png_font_info(data: bytes) -> tuple[float | None, float | None]:
    """``(dpi, smallest font pt)`` from a PNG's pHYs and tEXt (:data:`MIN_FONT_KEY`) chunks."""
    import struct

    dpi = font = None
    i = 8
    while i + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[i:i + 8])
        body = data[i + 8:i + 8 + n]
        if kind == b"pHYs" and len(body) == 9 and body[8] == 1:  # unit: metre
            dpi = struct.unpack(">I", body[:4])[0] * 0.0254
        elif kind == b"tEXt" and b"\0" in body:
            key, val = body.split(b"\0", 1)
            if key.decode("latin-1") == MIN_FONT_KEY:
                font = float(val.decode("latin-1"))
        elif kind == b"IEND":
            break
        i += 12 + n
    return dpi, font


def _svg_font_px(text: str) -> tuple[float | None, float | None]:
    """``(viewBox width, smallest font-size)`` of an SVG drawing, in its own units."""
    vb = re.search(r'viewBox="\s*[-\d.]+[\s,]+[-\d.]+[\s,]+([\d.]+)', text)
    width = float(vb.group(1)) if vb else None
    if width is None:
        w = re.search(r'<svg[^>]*\bwidth="([\d.]+)', text)
        width = float(w.group(1)) if w else None
    sizes = [float(x) for x in re.findall(r'font-size(?:="|:\s*)([\d.]+)', text)]
    return width, (min(sizes) if sizes else None)


def figure_font_problems(figures: list[dict], width: int) -> list[str]:
    """Figures whose smallest text is below :data:`MIN_FIGURE_FONT_PT` at their displayed width.

    ``figures``: what :data:`_LAYOUT_JS` reports (``url``, displayed ``width`` in CSS px,
    ``naturalWidth``). A PNG's text size is its smallest font (:data:`MIN_FONT_KEY`, points at
    the figure's size) times displayed inches / drawn inches (natural px / the PNG's dpi); an
    SVG's is its smallest ``font-size`` (user units) times displayed px / viewBox width, in pt
    (0.75 pt per CSS px). A PNG without the key or the dpi is reported (not saved by
    ``paperlib.artifact.plotting.savefig``).
    """
    import base64

    out = []
    for f in figures:
        url, shown = f["url"], float(f["width"])
        if url.startswith("data:image/png;base64,"):
            data, name = base64.b64decode(url.split(",", 1)[1]), "inline PNG"
        else:
            fp = _file_path(url)
            if fp is None or not fp.is_file():
                continue
            data, name = fp.read_bytes(), fp.name
        if data[:8] == b"\x89PNG\r\n\x1a\n":
            dpi, font = _png_font_info(data)
            if dpi is None or font is None:
                out.append(f"figure {name}: its PNG does not record its dpi and smallest font ({MIN_FONT_KEY})")
                continue
            pt = font * (shown / 96.0) / (f["naturalWidth"] / dpi)
        elif name.lower().endswith(".svg"):
            vb, font = _svg_font_px(data.decode("utf-8", "replace"))
            if not vb or font is None:
                continue
            pt = font * shown / vb * 0.75
        else:
            continue
        if pt < MIN_FIGURE_FONT_PT - 0.05:
            out.append(f"figure {name}: smallest text {pt:.1f} pt at its displayed width {shown:.0f} px "
                       f"(window {width} px; at least {MIN_FIGURE_FONT_PT:g} pt)")
    return out


# Uncaught JavaScript errors that come from the toolchain, not from the book, and break
# nothing it needs: sphinx-book-theme and jupyter-book both register sphinx-thebe, so its
# inline `const THEBE_JS_URL = ...` is emitted twice on every page (thebe is disabled).
KNOWN_JS_ERRORS = [re.compile(r"Identifier 'THEBE_JS_URL' has already been declared")]

_REFRESH_RE = re.compile(r"<meta[^>]+http-equiv=[\"']?refresh", re.I)

_IGNORED_SCHEMES = {"http", "https", "mailto", "javascript", "tel", "data", "ftp", "about", "blob"}


class _IdCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if v and (k == "id" or (k == "name" and tag == "a")):
                self.ids.add(v)


def _static_ids(path: Path) -> set[str]:
    p = _IdCollector()
    try:
        p.feed(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return set()
    return p.ids


def _file_path(url: str) -> Path | None:
    """The local path of a file:// URL (no query, no fragment); None for other schemes."""
    parts = urlsplit(url)
    if parts.scheme != "file":
        return None
    return Path(unquote(parts.path))


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return str(path)


def find_chromium() -> str | None:
    """Debian's chromium (or a chromium-browser) on PATH, or $PAPERLIB_CHROMIUM."""
    env = os.environ.get("PAPERLIB_CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else shutil.which(env)
    return shutil.which("chromium") or shutil.which("chromium-browser")


def launch_browser(playwright, executable: str | None = None):
    """Headless Chromium with a fresh temporary profile (Playwright's default for launch())."""
    executable = executable or find_chromium()
    if executable is None:
        raise FileNotFoundError("chromium not found on PATH (apt-get install chromium)")
    return playwright.chromium.launch(executable_path=executable, args=LAUNCH_ARGS, headless=True)


def machine_path_pattern(html_dir: Path) -> str:
    """A JavaScript regular expression that finds the build machine's absolute paths.

    :data:`MACHINE_PREFIXES` and the directories above ``html_dir`` up to its source checkout
    (the first with a ``Makefile`` or ``_config.yml``; a ``.../book/_build/html`` is built from
    ``...``). A prefix counts only where it starts a path (not after a letter, ``.``, ``:`` or
    ``/``, so ``https://x.org/tmp/`` is not one).
    """
    html_dir = Path(html_dir).resolve()
    roots = []
    for p in [html_dir, *html_dir.parents]:
        if (p / "Makefile").is_file() or (p / "_config.yml").is_file():
            roots.append(str(p))
        if (p / "Makefile").is_file():
            break
    prefixes = sorted(set(MACHINE_PREFIXES) | {r.rstrip("/") + "/" for r in roots if r != "/"}, key=len,
                      reverse=True)
    return r"(?<![\w.:/~-])(" + "|".join(re.escape(x) for x in prefixes) + ")"


def check_site(html_dir, screenshots_dir=None, browser=None, visited: list[str] | None = None
               ) -> list[str]:
    """Problems found in the static site ``html_dir`` (empty list: none).

    ``browser``: a Playwright Browser to reuse; without it one is started and closed here.
    ``visited``: if given, the pages opened (paths relative to ``html_dir``) are appended.
    """
    root = Path(html_dir).resolve()
    path_pattern = machine_path_pattern(root)
    index = root / "index.html"
    if not index.is_file():
        return [f"{_rel(index, root)}: no index.html in {root}"]
    if browser is None:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            b = launch_browser(pw)
            try:
                return check_site(root, screenshots_dir, b, visited)
            finally:
                b.close()

    shots = Path(screenshots_dir) if screenshots_dir is not None else None
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    dom_ids: dict[Path, set[str]] = {}
    static_ids: dict[Path, set[str]] = {}
    page_links: list[tuple[str, Path, list[dict]]] = []  # (page name, page path, links)

    context = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=True,
                                  service_workers="block")
    # Nothing leaves the machine: the book must work offline.
    context.route(re.compile(r"^(https?|wss?)://"), lambda route: route.abort())
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    failed_requests: list[tuple[str, str]] = []  # (url, Chromium's reason)
    page_errors: list[str] = []
    page.on("requestfailed", lambda req: failed_requests.append((req.url, req.failure or ""))
            if req.url.startswith("file:") else None)
    page.on("pageerror", lambda exc: page_errors.append(str(exc).splitlines()[0][:200]))

    queue: list[Path] = [index]
    seen: set[Path] = {index}
    layout_pages: list[tuple[str, Path]] = []  # checked again at the narrow widths
    figure_shot_done = False
    try:
        while queue:
            path = queue.pop(0)
            name = _rel(path, root)
            failed_requests.clear()
            page_errors.clear()
            try:
                page.goto(path.as_uri(), wait_until="load")
                if _REFRESH_RE.search(path.read_text(encoding="utf-8", errors="replace")[:4096]):
                    # index.html is usually a meta-refresh redirect to the first page.
                    try:
                        page.wait_for_url(lambda u: u != path.as_uri(), timeout=REFRESH_TIMEOUT_MS)
                    except Exception:  # noqa: BLE001 - the refresh may point at the page itself
                        pass
                    page.wait_for_load_state("load")
                info = page.evaluate(_PAGE_JS, [ERROR_SELECTORS, _ERROR_TEXT, MATHJAX_TIMEOUT_MS,
                                                MIN_FIGURE_PX, path_pattern, IMAGES_TIMEOUT_MS])
            except Exception as exc:  # noqa: BLE001 - reported as a problem of this page
                problems.append(f"{name}: could not be opened/checked: {str(exc).splitlines()[0]}")
                continue
            final = _file_path(info["url"]) or path
            if final != path:
                name = f"{name} (-> {_rel(final, root)})"
                seen.add(final)
            dom_ids[final.resolve()] = set(info["ids"])
            if visited is not None:
                visited.append(_rel(final, root))

            for err in info["errors"]:
                problems.append(f"{name}: error shown on the page: {err}")
            for fault in dict.fromkeys(info["faults"]):
                problems.append(f"{name}: {fault}")
            try:
                lay = page.evaluate(_LAYOUT_JS, [MATHJAX_TIMEOUT_MS, WIDE_VIEWPORT])
            except Exception as exc:  # noqa: BLE001 - reported as a problem of this page
                problems.append(f"{name}: layout could not be checked at {VIEWPORTS[0]} px: {str(exc).splitlines()[0]}")
            else:
                for fault in dict.fromkeys(lay["faults"] + figure_font_problems(lay["figures"], VIEWPORTS[0])):
                    problems.append(f"{name}: {fault}")
            layout_pages.append((name, final))
            for img in info["images"]:
                fp = _file_path(img["url"])
                missing = fp is not None and not fp.is_file()
                broken = img["complete"] and img["naturalWidth"] == 0
                if broken and not missing and fp is not None and fp.suffix.lower() == ".svg" \
                        and fp.stat().st_size > 0:
                    broken = False  # an SVG without intrinsic size can report naturalWidth 0
                if missing:
                    problems.append(f"{name}: image file does not exist: src={img['src']!r} "
                                    f"({_rel(fp, root)})")
                elif broken or not img["complete"]:
                    problems.append(f"{name}: image did not load (naturalWidth 0): src={img['src']!r}")
            image_urls = {urldefrag(i["url"])[0] for i in info["images"]}
            for url, why in dict.fromkeys(failed_requests):
                if urldefrag(url)[0] in image_urls:
                    continue  # reported with the image above
                fp = _file_path(url)
                if "ERR_ABORTED" in why and fp is not None and fp.is_file() and fp.stat().st_size > 0:
                    # the page cancelled a request of a file that is there (MathJax drops a font request it
                    # no longer needs, seen once on a busy machine): not a broken reference
                    continue
                problems.append(f"{name}: local resource failed to load ({why or 'no reason given'}): "
                                f"{_rel(fp or Path(url), root)}")
            for err in dict.fromkeys(page_errors):
                if any(k.search(err) for k in KNOWN_JS_ERRORS):
                    continue
                problems.append(f"{name}: JavaScript error: {err}")
            page_links.append((name, final, info["links"]))

            if shots is not None:
                if path == index:
                    page.screenshot(path=str(shots / "index.png"), full_page=True)
                rel = _rel(final, root)
                for pattern, shot in SCREENSHOT_PAGES.items():
                    if re.fullmatch(pattern, rel):
                        page.screenshot(path=str(shots / shot), full_page=True)
                if not figure_shot_done and any(
                        i["inFigure"] and i["naturalWidth"] > 0 for i in info["images"]):
                    page.screenshot(path=str(shots / "figure_page.png"), full_page=True)
                    figure_shot_done = True

            for url in info["nav"]:
                fp = _file_path(urldefrag(url)[0])
                if fp is None or fp.suffix.lower() not in (".html", ".htm"):
                    continue
                fp = fp.resolve()
                if not fp.is_file():
                    continue  # reported as a broken link below
                try:
                    fp.relative_to(root)
                except ValueError:
                    continue
                if fp not in seen:
                    seen.add(fp)
                    queue.append(fp)
    finally:
        context.close()

    for width in VIEWPORTS[1:]:
        problems += _check_layout_at(browser, root, layout_pages, width, shots)
    problems += _check_readability(browser, root, layout_pages)
    problems += _check_sidebar_on_a_phone(browser, root)

    # Links, checked once every visited page's ids are known.
    for name, page_path, links in page_links:
        reported: set[str] = set()
        for link in links:
            href, url = link["href"], link["url"]
            if href is None or href.strip() in ("", "#"):
                continue
            scheme = urlsplit(url).scheme.lower()
            if scheme in _IGNORED_SCHEMES or scheme != "file":
                continue
            target_url, frag = urldefrag(url)
            target = _file_path(target_url)
            if target is None:
                continue
            if target.is_dir():
                target = target / "index.html"
            key = f"{href}"
            if key in reported:
                continue
            if not target.exists():
                reported.add(key)
                problems.append(f"{name}: broken link href={href!r}: {_rel(target, root)} does not exist")
                continue
            try:
                target.resolve().relative_to(root)
            except ValueError:
                reported.add(key)
                problems.append(f"{name}: link href={href!r} points outside the book ({target})")
                continue
            frag = unquote(frag)
            if frag and target.suffix.lower() in (".html", ".htm"):
                t = target.resolve()
                ids = dom_ids.get(t)
                if ids is None or frag not in ids:
                    if t not in static_ids:
                        static_ids[t] = _static_ids(t)
                    if frag not in static_ids[t] and (ids is None or frag not in ids):
                        reported.add(key)
                        problems.append(f"{name}: broken anchor href={href!r}: "
                                        f"{_rel(t, root)} has no element with id {frag!r}")
    return problems


#: the least contrast of caption text against its background (WCAG 2.x, level AA for body text)
MIN_CAPTION_CONTRAST = 4.5
#: the first screen of the grade page, where every claim's verdict must be (CSS px)
FIRST_SCREEN = (1280, 800)

# Each figure and table caption's contrast ratio (WCAG relative luminance of its computed colour against the
# first opaque background up its ancestors, white when none), and on the grade page the bottom of every row
# of its first table.
_READABILITY_JS = r"""
() => {
  const rgb = s => (s.match(/[\d.]+/g) || []).map(Number);
  const lum = c => { const [r, g, b] = c.slice(0, 3).map(v => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const bg = el => { for (let e = el; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor);
    if (c.length >= 3 && (c.length < 4 || c[3] > 0.5)) return c; } return [255, 255, 255]; };
  const out = {captions: [], rows: []};
  for (const el of document.querySelectorAll("article figcaption, article caption, article .caption-text")) {
    if (!el.innerText.trim()) continue;
    const a = lum(rgb(getComputedStyle(el).color)), b = lum(bg(el));
    out.captions.push({text: el.innerText.trim().slice(0, 50), ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)});
  }
  const t = document.querySelector("article table");
  if (t) for (const tr of t.querySelectorAll("tbody tr"))
    out.rows.push({text: tr.innerText.trim().slice(0, 40), bottom: tr.getBoundingClientRect().bottom + window.scrollY});
  return out;
}
"""


def _check_sidebar_on_a_phone(browser, root: Path) -> list[str]:
    """At 390 px the chapters are reached through the sidebar: the visible menu button must open it (with the
    pinned themes it did nothing, pydata-sphinx-theme issue #2451; ``book/_static/paperlib.js`` relays it)."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, java_script_enabled=True,
                                  service_workers="block")
    context.route(re.compile(r"^(https?|wss?)://"), lambda route: route.abort())
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        page.goto((root / "intro.html").as_uri() if (root / "intro.html").is_file() else (root / "index.html").as_uri(),
                  wait_until="load")
        toggles = page.query_selector_all(".primary-toggle")
        if not toggles:  # a site without the theme's sidebar menu (the checker's own test pages)
            return []
        visible = [b for b in toggles if b.is_visible()]
        if not visible:
            return ["intro.html (at 390 px): no visible button opens the sidebar"]
        visible[0].click()
        page.wait_for_timeout(500)
        opened = page.evaluate("() => { const d = document.querySelector('dialog#pst-primary-sidebar-modal');"
                               " const s = document.querySelector('#pst-primary-sidebar');"
                               " return !!(d && d.open) || !!(s && s.getBoundingClientRect().width > 0 &&"
                               " s.getBoundingClientRect().left >= 0); }")
        return [] if opened else ["intro.html (at 390 px): the menu button does not open the sidebar"]
    except Exception as exc:  # noqa: BLE001 - reported as a problem
        return [f"intro.html (at 390 px): the menu button could not be checked: {str(exc).splitlines()[0]}"]
    finally:
        context.close()


def _check_readability(browser, root: Path, pages: list[tuple[str, Path]]) -> list[str]:
    """Caption contrast on every page (at least :data:`MIN_CAPTION_CONTRAST`), and on the grade page every
    claim's row within the first screen (:data:`FIRST_SCREEN`)."""
    problems: list[str] = []
    w, h = FIRST_SCREEN
    context = browser.new_context(viewport={"width": w, "height": h}, java_script_enabled=True,
                                  service_workers="block")
    context.route(re.compile(r"^(https?|wss?)://"), lambda route: route.abort())
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        for name, path in pages:
            try:
                page.goto(path.as_uri(), wait_until="load")
                info = page.evaluate(_READABILITY_JS)
            except Exception as exc:  # noqa: BLE001 - reported as a problem of this page
                problems.append(f"{name}: readability not checked: {str(exc).splitlines()[0]}")
                continue
            for c in info["captions"]:
                if c["ratio"] < MIN_CAPTION_CONTRAST:
                    problems.append(f"{name}: caption {c['text']!r} has contrast {c['ratio']:.2f}:1, below "
                                    f"{MIN_CAPTION_CONTRAST}:1")
            if _rel(path, root) == "grade.html":
                late = [r["text"] for r in info["rows"] if r["bottom"] > h]
                if not info["rows"] or late:
                    problems.append(f"{name}: the first {w}x{h} screen does not show every claim's verdict"
                                    + (f" (below it: {'; '.join(late)})" if late else " (no table of claims)"))
    finally:
        context.close()
    return problems


def _check_layout_at(browser, root: Path, pages: list[tuple[str, Path]], width: int, shots: Path | None) -> list[str]:
    """The layout checks of :data:`_LAYOUT_JS` on ``pages`` in a window ``width`` CSS px wide.

    Screenshots (full page) of the start page and of :data:`SCREENSHOT_PAGES` are saved as
    ``<name>_<width>.png``.
    """
    problems: list[str] = []
    context = browser.new_context(viewport={"width": width, "height": 844}, java_script_enabled=True,
                                  service_workers="block")
    context.route(re.compile(r"^(https?|wss?)://"), lambda route: route.abort())
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        for k, (name, path) in enumerate(pages):
            try:
                page.goto(path.as_uri(), wait_until="load")
                lay = page.evaluate(_LAYOUT_JS, [MATHJAX_TIMEOUT_MS, WIDE_VIEWPORT])
            except Exception as exc:  # noqa: BLE001 - reported as a problem of this page
                problems.append(f"{name}: could not be checked at {width} px: {str(exc).splitlines()[0]}")
                continue
            for fault in dict.fromkeys(lay["faults"] + figure_font_problems(lay["figures"], width)):
                problems.append(f"{name} (at {width} px): {fault}")
            if shots is not None:
                if k == 0:
                    page.screenshot(path=str(shots / f"index_{width}.png"), full_page=True)
                rel = _rel(path, root)
                for pattern, shot in SCREENSHOT_PAGES.items():
                    if re.fullmatch(pattern, rel):
                        page.screenshot(path=str(shots / shot.replace(".png", f"_{width}.png")), full_page=True)
    finally:
        context.close()
    return problems


def main(argv: list[str]) -> int:
    html_dir = argv[1] if len(argv) > 1 else "book/_build/html"
    shots = argv[2] if len(argv) > 2 else "build/screenshots"
    visited: list[str] = []
    problems = check_site(html_dir, shots, visited=visited)
    print("checked:", " ".join(visited))
    for p in problems:
        print(p)
    print(f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
