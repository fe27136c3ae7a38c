import json
import pytest

from paperlib.artifact.booktags import tag_notebook


def test_tags_parameters_collapsed_and_code_hidden(tmp_path):
    nb = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "# t"},
        {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "MODE = 'quick'", "outputs": []},
        {"cell_type": "code", "metadata": {"tags": ["injected-parameters"]}, "source": "MODE = 'smoke'", "outputs": []},
        {"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": []},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    p = tmp_path / "a.ipynb"
    p.write_text(json.dumps(nb))
    assert tag_notebook(p) == 3
    cells = json.loads(p.read_text())["cells"]
    assert "tags" not in cells[0]["metadata"]
    assert cells[1]["metadata"]["tags"] == ["parameters", "hide-cell"]  # collapsed, never removed
    assert cells[2]["metadata"]["tags"] == ["injected-parameters", "hide-input"]
    assert cells[3]["metadata"]["tags"] == ["hide-input"]
    assert tag_notebook(p) == 0  # idempotent
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind


def test_a_cell_the_reader_edits_stays_open(tmp_path):
    """Chapter 10's "your run" cell (tag ``edit-here``) is neither collapsed nor its input hidden."""
    nb = {"cells": [{"cell_type": "code", "metadata": {"tags": ["edit-here"]}, "source": "N = 1", "outputs": []},
                    {"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": []}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    p = tmp_path / "a.ipynb"
    p.write_text(json.dumps(nb))
    assert tag_notebook(p) == 1
    cells = json.loads(p.read_text())["cells"]
    assert cells[0]["metadata"]["tags"] == ["edit-here"] and cells[1]["metadata"]["tags"] == ["hide-input"]


def test_inline_figure_copies_dropped_and_captions_get_provenance(tmp_path):
    from paperlib.artifact.booktags import PROV_MARK, caption_provenance
    from paperlib.artifact.figures import INLINE_COPY_KEY

    img = {"output_type": "display_data", "data": {"image/png": "AA=="}, "metadata": {INLINE_COPY_KEY: True}}
    txt = {"output_type": "stream", "name": "stdout", "text": "done\n"}
    cap = "Intro.\n\n```{glue:figure} 04_fig\n:name: fig-04-fig\n\nThe caption.\n```\nAfter."
    nb = {"cells": [
        {"cell_type": "code", "metadata": {}, "source": "show()", "outputs": [img, txt]},
        {"cell_type": "markdown", "metadata": {}, "source": cap},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    p = tmp_path / ".04_audit.tmp.ipynb"  # as make calls it, before the rename
    p.write_text(json.dumps(nb))
    tag_notebook(p)
    cells = json.loads(p.read_text())["cells"]
    assert cells[0]["outputs"] == [txt]
    src = cells[1]["source"]
    lines = src.split("\n")
    # the provenance paragraph sits inside the directive, just before its closing fence
    close = lines.index("```")
    assert lines[close - 1] == ("{glue:text}`04_fig_prov` Drawn by {download}`04_audit.ipynb <04_audit.ipynb>`.")
    assert lines[close - 2] == PROV_MARK and lines[-1] == "After."
    assert caption_provenance(src, "04_audit") == src  # idempotent
    with pytest.raises(ValueError, match="no closing"):
        caption_provenance("```{glue:figure} x\n:name: y\ncaption", "nb")


def test_caption_links_the_vector_copy(tmp_path, monkeypatch):
    from paperlib.artifact import plotting

    figs = tmp_path / "figs"
    figs.mkdir()
    (figs / "04_fig.pdf").write_bytes(b"%PDF-1.4\n")
    monkeypatch.setenv(plotting.FIGURES_ENV, str(figs))
    cap = "```{glue:figure} 04_fig\n:name: fig-04-fig\n\nThe caption.\n```"
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": cap}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    book = tmp_path / "book"
    book.mkdir()
    p = book / "04_audit.ipynb"
    p.write_text(json.dumps(nb))
    tag_notebook(p)
    src = json.loads(p.read_text())["cells"][0]["source"]
    assert ("{glue:text}`04_fig_prov` Drawn by {download}`04_audit.ipynb <04_audit.ipynb>`; "
            "vector copy {download}`04_fig.pdf <figures/04_fig.pdf>`.") in src
    assert (book / "figures" / "04_fig.pdf").read_bytes() == b"%PDF-1.4\n"
