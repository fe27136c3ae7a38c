"""Tests for paperlib.artifact.runlog (measured runs) and paperlib.artifact.appendix (the artifact appendix)."""

import json
import time
from pathlib import Path

import pytest

from paperlib.artifact import appendix, claims, provenance as pv, runlog

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture()
def results(tmp_path, monkeypatch):
    d = tmp_path / "results"
    monkeypatch.setenv(pv.RESULTS_ENV, str(d))
    monkeypatch.chdir(tmp_path)
    return d


def test_notebook_record_counts_bytes_written_during_the_run(results):
    (results / "old.json").parent.mkdir(parents=True)
    (results / "old.json").write_text("x" * 500)
    start = time.time() + 1  # files modified before the start do not count
    time.sleep(1.05)
    (results / "new.json").write_text("y" * 1234)
    p = runlog.record_notebook("04_audit_figure2", mode="quick", device="cpu", seed=0, start_s=start, wall_s=12.34)
    rec = json.loads(p.read_text())
    assert p.name == "notebook-04_audit_figure2-quick.json"
    assert rec["bytes_written"] == 1234 and rec["wall_s"] == 12.3 and rec["kind"] == "notebook"


def test_tier_keeps_the_last_cold_run(results):
    start = time.time() - 5
    for name in ("01_a", "02_b"):
        runlog.record_notebook(name, mode="smoke", device="cpu", seed=0, start_s=start, wall_s=1.0)
    doc = json.loads(runlog.record_tier(mode="smoke", device="cpu", start_s=start, notebooks=2).read_text())
    assert doc["last"]["cold"] and doc["last_cold"] == doc["last"] and doc["last"]["wall_s"] >= 5
    # a warm run (nothing executed after its start) is recorded, the cold one is kept
    doc = json.loads(runlog.record_tier(mode="smoke", device="cpu", start_s=time.time() + 5,
                                        notebooks=2).read_text())
    assert not doc["last"]["cold"] and doc["last"]["notebooks_executed"] == []
    assert doc["last_cold"]["notebooks_executed"] == ["01_a", "02_b"]


def test_experiments_follow_the_notebooks():
    exps = appendix.experiments(ROOT / "notebooks")
    assert [e["id"] for e in exps] == [f"E{k}" for k in range(1, len(exps) + 1)]
    by_id = {e["id"]: e for e in exps}
    # every claim with a check is supported by exactly the experiment its notebook is
    for c in claims.CLAIMS:
        if c.check is not None:
            assert c.id in by_id[f"E{int(c.notebook[:2])}"]["claims"], c.id
    assert all(e["title"] and not e["title"].startswith("#") for e in exps)


def test_render_uses_the_records(results):
    start = time.time() - 2
    runlog.record_notebook("04_audit_figure2", mode="quick", device="cpu", seed=0, start_s=start, wall_s=95.0)
    runlog.record_tier(mode="quick", device="cpu", start_s=start, notebooks=1)
    pv.write_json_atomic(results / "grade.json", {"claims": [{"id": "C2", "verdict": "reproduced", "mode": "quick"}]})
    text = appendix.render(book=False, notebooks_dir=ROOT / "notebooks")
    e4 = text.split("### E4:")[1].split("### E5:")[0]
    assert "quick 1.6 min compute" in e4 and "smoke not measured" in e4 and "full not measured" in e4
    assert "Supports C2 (Fig. 2)" in e4 and "Tolerance:" in e4
    assert "| C2 | Fig. 2 |" in text and "reproduced (quick)" in text
    quick_row = next(line for line in text.splitlines() if line.startswith("| quick |"))
    assert "1 of 1" in quick_row
    assert next(line for line in text.splitlines() if line.startswith("| full |")).count("not measured") == 2
    # the two forms differ only in their links
    assert "(notebooks/04_audit_figure2.ipynb)" in appendix.render(book=True, notebooks_dir=ROOT / "notebooks")
    assert f"({ROOT / 'notebooks' / '04_audit_figure2.py'})" in text


def test_main_writes_both_files(results, tmp_path):
    book = tmp_path / "book" / "appendix.md"
    assert appendix.main(["--book-page", str(book), "--notebooks", str(ROOT / "notebooks")]) == 0
    assert book.read_text().startswith("# Artifact appendix")
    assert (results / "artifact_appendix.md").is_file()
    with pytest.raises(SystemExit):
        appendix.main(["--notebooks", str(tmp_path / "none")])


def test_failed_cell_names_the_cell(tmp_path):
    nb = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "# t"},
        {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": "x = 1", "outputs": []},
        {"cell_type": "code", "execution_count": 2, "metadata": {}, "source": ["# why\n", "assert x == 2, 'x'\n"],
         "outputs": [{"output_type": "error", "ename": "AssertionError", "evalue": "x", "traceback": []}]},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    p = tmp_path / "f.ipynb"
    p.write_text(json.dumps(nb))
    assert runlog.failed_cell(p) == "cell 3 (In [2]): assert x == 2, 'x' -> AssertionError: x"
    nb["cells"][2]["outputs"] = []
    p.write_text(json.dumps(nb))
    assert runlog.failed_cell(p) is None
