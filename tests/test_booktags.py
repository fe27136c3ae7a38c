import json

from paperlib.booktags import tag_notebook


def test_tags_parameters_removed_and_code_hidden(tmp_path):
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
    assert cells[1]["metadata"]["tags"] == ["parameters", "remove-cell"]
    assert cells[2]["metadata"]["tags"] == ["injected-parameters", "hide-input"]
    assert cells[3]["metadata"]["tags"] == ["hide-input"]
    assert tag_notebook(p) == 0  # idempotent
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind
