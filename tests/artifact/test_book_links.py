"""A self-contained site (issue 34): what the pages name ships with them, and no reference is dead
(:mod:`paperlib.artifact.site`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from paperlib.artifact import site

ROOT = Path(__file__).resolve().parents[2]


def _page(html_dir: Path, name: str, body: str) -> None:
    (html_dir / name).parent.mkdir(parents=True, exist_ok=True)
    (html_dir / name).write_text(f"<html><body>{body}</body></html>", encoding="utf-8")


def test_the_check_finds_dead_links_and_mentions_and_leaves_code_alone(tmp_path):
    s = tmp_path / "html"
    _page(s, "index.html", '<a href="intro.html#top">in</a> <img src="_images/a.png"> <a href="https://x.org/y.md">x</a>')
    _page(s, "intro.html", "<p>See THEORY.md and <code>results/grade.json</code>, and the notebooks/NAME.py pattern."
                           '</p><div class="cell_input"><pre>open("results/nope.json")</pre></div>'
                           "<p>Run <code><span>make</span> <span>book/notebooks/01_x.ipynb</span></code>.</p>"
                           "<p>The code is in paperlib/artifact/site.py.</p>")
    dead = site.dead_references(s)
    assert dead == ["index.html: link to _images/a.png (missing)",
                    "intro.html: mentions THEORY.md, which the site does not contain",
                    "intro.html: mentions paperlib/artifact/site.py, which the site does not contain",
                    "intro.html: mentions results/grade.json, which the site does not contain"], dead
    extra = tmp_path / "extra"
    written = site.stage(ROOT, tmp_path / "no-results", extra)
    assert {"THEORY.md", "README.md", "DATA-LICENSE.md", "paperlib/artifact/site.py"} <= set(written)
    for f in ("THEORY.md", "paperlib/artifact/site.py"):
        (s / f).parent.mkdir(parents=True, exist_ok=True)
        (s / f).write_bytes((extra / f).read_bytes())
    (s / "results").mkdir()
    (s / "results" / "grade.json").write_text("{}")
    (s / "_images").mkdir()
    (s / "_images" / "a.png").write_bytes(b"")
    assert site.dead_references(s) == []
    with pytest.raises(ValueError, match="^html_dir: .* holds no built book"):
        site.dead_references(tmp_path / "empty")


def test_the_built_book_has_no_dead_reference(built_book_html):
    """Run by ``make test`` on the smoke-mode test book ($PAPERLIB_BOOK_HTML); skipped without a built book."""
    dead = site.dead_references(built_book_html)
    assert not dead, "\n".join(dead)
