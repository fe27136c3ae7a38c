"""Tests for paperlib.artifact.figures.show_figure / provenance_text (the book's figure captions)."""

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from paperlib.artifact import figures as pf  # noqa: E402
from paperlib.artifact import plotting  # noqa: E402


def test_provenance_text_orders_and_shortens():
    t = pf.provenance_text({"seed": 3, "N": 3, "q": 0.5, "mode": "quick", "ns": list(range(40))},
                           commit="0123456789abcdef", dirty=True, wall_time_s=12.34)
    assert t.startswith("Mode quick, seed 3; N = 3; q = 0.5; ns = [0, 1, 2,")
    assert "…" in t
    assert t.endswith("commit 0123456789 (uncommitted changes); 12.3 s wall time since the previous figure.")
    t = pf.provenance_text({}, commit="unknown", dirty=None, wall_time_s=0.0)
    assert t == "Mode n/a, seed n/a; commit unknown; 0.0 s wall time since the previous figure."


def test_show_figure_writes_files_with_commit_and_wall_time(tmp_path, monkeypatch):
    monkeypatch.setenv(plotting.FIGURES_ENV, str(tmp_path))
    fig, ax = plotting.new_axes()
    assert pf.show_figure(fig, "01_demo", {"mode": "smoke", "seed": 0, "N": 4}) is None
    side = json.loads((tmp_path / "01_demo.json").read_text())
    text = side["provenance"]
    assert side["caption_meta"] == {"mode": "smoke", "seed": 0, "N": 4}
    assert text.startswith("Mode smoke, seed 0; N = 4; commit ") and side["wall_time_s"] >= 0
    assert isinstance(side["git_commit"], str) and len(side["git_commit"]) >= 7
    assert (tmp_path / "01_demo.png").stat().st_size > 1000 and (tmp_path / "01_demo.pdf").is_file()
    assert not plt.fignum_exists(fig.number)  # closed


def test_show_figure_rejects_bad_input(tmp_path, monkeypatch):
    monkeypatch.setenv(plotting.FIGURES_ENV, str(tmp_path))
    fig, _ = plotting.new_axes()
    with pytest.raises(ValueError, match="figure name"):
        pf.show_figure(fig, "a b", {"mode": "quick", "seed": 0})
    with pytest.raises(TypeError, match="meta must be a dict"):
        pf.show_figure(fig, "ok", ["mode"])
    plt.close(fig)


def test_start_notebook_checks_mode_and_sets_dirs(tmp_path, monkeypatch):
    from paperlib.artifact import provenance as pv

    monkeypatch.setenv(pv.RESULTS_ENV, str(tmp_path / "r"))
    monkeypatch.setenv(plotting.FIGURES_ENV, str(tmp_path / "f"))
    t0 = pf.start_notebook("smoke")
    assert t0 > 0 and pv.results_dir() == tmp_path / "r"  # values already set are kept
    with pytest.raises(ValueError, match="MODE must be one of"):
        pf.start_notebook("fast")
