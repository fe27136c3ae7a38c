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
    # one folded parameters cell per chapter (issue 34): the values used are appended, the injected cell goes
    assert cells[1]["source"] == "MODE = 'quick'\n\n# Values used in this run (injected by papermill):\nMODE = 'smoke'\n"
    assert cells[2]["metadata"]["tags"] == ["injected-parameters", "remove-cell"]
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
    from paperlib.artifact.notebook import INLINE_COPY_KEY

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


def test_console_lines_kept_out_of_the_book(tmp_path):
    """Run reports ("computed in", "loaded from results/", "finished in") leave the printed
    outputs for the cell's metadata; results printed beside them, tables and glued values stay."""
    from paperlib.artifact.booktags import CONSOLE_KEY

    def stream(text):
        return {"output_type": "stream", "name": "stdout", "text": text}

    table = {"output_type": "display_data", "metadata": {},
             "data": {"text/html": "<table><tr><td>computed in 2 s of GPU time</td></tr></table>"}}
    glued = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "nb01_x"}},
             "data": {"text/plain": "'0.42'"}}
    nb = {"cells": [
        {"cell_type": "code", "metadata": {}, "source": "print(...)", "outputs": [
            stream(["MODE=quick SEED=0: 40001 thresholds for the numerical sup, 30 eps values\n"])]},
        {"cell_type": "code", "metadata": {}, "source": "print(...)", "outputs": [
            stream("Balle-Wang vs numerical sup: max |diff| = 1.2e-12\ncomputed in 2.78 s\n"), table, glued]},
        {"cell_type": "code", "metadata": {}, "source": "print(...)", "outputs": [
            stream("upper bounds: loaded from results/\nexact guarantees: computed in 31.6 s\n"
                   "loaded from results/ (parameters unchanged)\ncached\n")]},
        {"cell_type": "code", "metadata": {}, "source": "print(...)", "outputs": [
            stream("C5 (Fig. 5): reproduced; notebook 03 finished in 39.3 s (MODE=quick)\n"
                   "notebook 01 finished in 12.9 s (MODE=quick)\nnotebook wall time: 4.0 s\n")]},
        {"cell_type": "code", "metadata": {}, "source": "print(...)", "outputs": [
            {"output_type": "stream", "name": "stderr", "text": "UserWarning: kept\n"},
            stream("optimal distinguisher: 5/6 points above the SGM claim\n")]},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    p = tmp_path / "a.ipynb"
    p.write_text(json.dumps(nb))
    tag_notebook(p)
    cells = json.loads(p.read_text())["cells"]
    shown = json.dumps([c["outputs"] for c in cells])
    for word in ("finished in", "loaded from results/", "computed in 2.78", "computed in 31.6", "MODE=quick",
                 "wall time", "cached"):
        assert word not in shown, word
    assert [len(c["outputs"]) for c in cells] == [0, 3, 0, 1, 2]  # emptied streams dropped
    assert cells[1]["outputs"][0]["text"] == "Balle-Wang vs numerical sup: max |diff| = 1.2e-12\n"
    assert cells[1]["outputs"][1:] == [table, glued]  # tables and glued values untouched
    assert cells[3]["outputs"][0]["text"] == "C5 (Fig. 5): reproduced\n"  # the result stays
    assert cells[4]["outputs"] == nb["cells"][4]["outputs"]
    # the run's own record stays in the executed notebook
    assert cells[2]["metadata"][CONSOLE_KEY] == ["upper bounds: loaded from results/",
                                                 "exact guarantees: computed in 31.6 s",
                                                 "loaded from results/ (parameters unchanged)", "cached"]
    assert cells[3]["metadata"][CONSOLE_KEY] == ["notebook 03 finished in 39.3 s (MODE=quick)",
                                                 "notebook 01 finished in 12.9 s (MODE=quick)",
                                                 "notebook wall time: 4.0 s"]
    assert CONSOLE_KEY not in cells[4]["metadata"]
    before = p.read_text()
    assert tag_notebook(p) == 0 and p.read_text() == before  # idempotent
