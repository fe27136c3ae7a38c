"""Tests for paperlib.artifact.tables (numbered tables that wrap within the page)."""

import math

import pytest

from paperlib.artifact import tables


@pytest.fixture(autouse=True)
def _fresh_numbering():
    tables.reset_numbering()
    yield
    tables.reset_numbering()


def test_numbered_within_chapter_and_stable_per_name():
    t1 = tables.show_table([{"a": 1}], name="04_first", caption="One.", display=False)
    t2 = tables.show_table([{"a": 1}], name="04_second", caption="Two.", display=False)
    t3 = tables.show_table([{"a": 1}], name="05_other", caption="Three.", display=False)
    again = tables.show_table([{"a": 2}], name="04_first", caption="One again.", display=False)
    assert t1.caption == "Table 4.1: One." and t2.caption == "Table 4.2: Two."
    assert t3.caption == "Table 5.1: Three." and again.caption.startswith("Table 4.1:")
    assert 'id="tab-04-first"' in t1._repr_html_()
    assert tables.number_of("04_second") == "4.2"
    with pytest.raises(KeyError, match="no table named"):
        tables.number_of("04_never")


def test_rounding_per_column_and_special_values():
    rows = [{"mech": "ASGM", "N": 59999, "eps": 0.123456, "fpr": 1.23456e-7, "g": math.inf, "x": math.nan,
             "ok": True}]
    t = tables.show_table(rows, {"mech": "mechanism", "N": "N", "eps": "ε_L", "fpr": "FPR", "g": "ε guarantee",
                                 "x": "x", "ok": "verdict"},
                          name="04_t", caption="c", digits={"ε_L": 2}, formats={"fpr": ".1e"}, display=False)
    assert t.headers == ["mechanism", "N", "ε_L", "FPR", "ε guarantee", "x", "verdict"]
    assert t.rows == [["ASGM", "59,999", "0.12", "1.2e-07", "∞", "–", "yes"]]
    assert tables.format_value(3.14159) == "3.14" and tables.format_value(1234.5) == "1,234"
    assert tables.format_value(2.0) == "2" and tables.format_value(0.0) == "0"
    assert tables.format_value(1.5e-9) == "1.50e-09"


def test_html_wraps_and_escapes():
    t = tables.show_table([["<b>", "`code` and **bold**"]], ["h1", "h2"], name="08_x", caption="c",
                          display=False)
    h = t._repr_html_()
    assert "width:100%" in h and "max-width:100%;overflow-x:auto" in h  # scrolls in its wrapper if it must
    assert "overflow-wrap:anywhere" not in h  # short words and headers break at spaces only
    assert "&lt;b&gt;" in h and "`code`" in h  # no markup unless asked
    h = tables.show_table([["`code` and **bold**"]], ["h"], name="08_y", caption="c", markup=True,
                          display=False)._repr_html_()
    assert "<code>code</code>" in h and "<strong>bold</strong>" in h
    assert "<caption" in h and "Table 8.2: c" in h
    h = tables.show_table([["results/04_audit_figure2/a_very_long_file_name.json"]], ["Clopper-Pearson intervals"],
                          name="08_z", caption="c", display=False)._repr_html_()
    th, td = h.split("<th ")[1].split(">")[0], h.split("<td ")[1].split(">")[0]
    assert "overflow-wrap:break-word" in th and "overflow-wrap:anywhere" in td  # only a path may break anywhere
    h = tables.show_table([[1.0]], ["ε_L chi2/probability/ties=½"], name="08_w", caption="c",
                          display=False)._repr_html_()
    assert ">ε_L chi2/<wbr>probability/<wbr>ties=½</th>" in h  # a header may break at its slashes
    h = tables.show_table([["x"]], ["`a/b` code"], name="08_v", caption="c", markup=True, display=False)._repr_html_()
    assert "<code>a/<wbr>b</code> code</th>" in h  # never inside a closing tag


def test_line_and_soft_breaks_in_markup_cells():
    """A markup cell's LINE_BREAK is <br> and its SOFT_BREAK <wbr> in HTML; Markdown gets a space and
    nothing, so a pipe table stays one line per row and a regular expression reads as it matches."""
    cell = f"`a.py:3`{tables.LINE_BREAK}`x /= n`"
    regex = "`" + "\\s*" + tables.SOFT_BREAK + "p\\.grad|q`"
    t = tables.show_table([[cell, regex]], ["where", "pattern"], name="08_br", caption="c", markup=True,
                          display=False)
    h = t._repr_html_()
    assert "<code>a.py:3</code><br><code>x /= n</code>" in h
    assert "<code>\\s*<wbr>p\\.grad|q</code>" in h
    md = t._repr_markdown_().splitlines()
    assert md[-1] == "| `a.py:3` `x /= n` | `\\s*p\\.grad\\|q` |"
    # without markup the characters are not markup: escaped text, no tags made from them
    plain = tables.render_html(["h"], [[f"a{tables.LINE_BREAK}b"]])
    assert "<br>" not in plain


def test_table_like_objects_and_bad_input():
    class Obj:
        header = ["a", "b"]
        rows = [["1", "2"]]

    assert tables.show_table(Obj(), name="08_obj", caption="c", display=False).rows == [["1", "2"]]
    with pytest.raises(ValueError, match="table name"):
        tables.show_table([{"a": 1}], name="table", caption="c")
    with pytest.raises(ValueError, match="caption"):
        tables.show_table([{"a": 1}], name="04_a", caption=" ")
    with pytest.raises(ValueError, match="columns is required"):
        tables.show_table([[1, 2]], name="04_a", caption="c")
    with pytest.raises(ValueError, match="row 0 has 1 cells, expected 2"):
        tables.show_table([[1]], ["a", "b"], name="04_a", caption="c")


def test_markdown_table_numbered_with_a_caption():
    """A result table with name and caption is the chapter's next numbered table; one without both is refused."""
    from paperlib.artifact.notebook import markdown_table

    t = markdown_table(["a", "b"], [[1.23456, "x"]], name="09_numbered", caption="what it shows")
    h = t._repr_html_()
    assert "Table 9." in h and ": what it shows</caption>" in h and ">1.235<" in h
    with pytest.raises(ValueError, match="name and caption go together"):
        markdown_table(["a"], [[1]], name="09_half")


def test_markdown_table_html_wraps_too():
    from paperlib.artifact.notebook import markdown_table

    h = markdown_table(["a", "b"], [[1.23456, "x"]])._repr_html_()
    assert "overflow-x:auto" in h and "white-space:nowrap" in h and ">1.235<" in h


def test_e_notation_is_kept_on_one_line_in_headers_and_cells():
    """The header "ε at δ = 1e-05" broke after its hyphen (chapter 11 at 1,280 px, chapter 10 at 390 px)."""
    out = tables.render_html(["step", "ε at δ = 1e-05"], [["a", "x 2.5e+3 y"]])
    assert '<span style="white-space:nowrap">1e-05</span>' in out
    assert '<span style="white-space:nowrap">2.5e+3</span>' in out
    plain = tables.render_html(["name"], [["file-name", "e-5"]])
    assert "nowrap\">e" not in plain and "nowrap\">file" not in plain
