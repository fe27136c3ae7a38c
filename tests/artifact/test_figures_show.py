"""Tests for paperlib.artifact.notebook.show_figure / provenance_text (the book's figure captions)."""

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from paperlib.artifact import notebook as pf  # noqa: E402
from paperlib.artifact import plotting  # noqa: E402


def test_provenance_text_orders_and_shortens():
    t = pf.provenance_text({"seed": 3, "N": 3, "q": 0.5, "mode": "quick", "ns": list(range(40))},
                           commit="0123456789abcdef", dirty=True)
    assert t == ("Mode quick, seed 3; N = 3; q = 0.5; ns = [0, 1, 2, …, 39] (40 values); "
                 "commit 0123456789 (uncommitted changes).")
    t = pf.provenance_text({}, commit="unknown", dirty=None)
    assert t == "Mode n/a, seed n/a; commit unknown."


def test_provenance_text_never_cuts_a_value():
    # Figure 4's data sources: a dict whose text runs past any fixed width is written whole,
    # every key with its value (the caption wraps), not "{mnist: …, fmnist: …, c…"
    data = {"mnist": "torchvision full", "fmnist": "torchvision full", "cifar10": "bundled subset",
            "cifar100": "synthetic stand-in"}
    t = pf.provenance_text({"mode": "smoke", "seed": 0, "data": data, "eps": [0.5, 1.0, 2.0]},
                           commit="abcdef0123456", dirty=False)
    assert t == ("Mode smoke, seed 0; data = {mnist: torchvision full, fmnist: torchvision full, "
                 "cifar10: bundled subset, cifar100: synthetic stand-in}; eps = [0.5, 1, 2]; "
                 "commit abcdef0123.")
    assert "wall time" not in t
    # a long list keeps whole items: its first three, its last, and its length
    t = pf.provenance_text({"sigma": [0.123456789 * k for k in range(1, 11)]}, commit="unknown", dirty=None)
    assert "sigma = [0.123457, 0.246914, 0.37037, …, 1.23457] (10 values);" in t


def test_show_figure_writes_files_with_commit_and_wall_time(tmp_path, monkeypatch):
    monkeypatch.setenv(plotting.FIGURES_ENV, str(tmp_path))
    fig, ax = plotting.new_axes()
    assert pf.show_figure(fig, "01_demo", {"mode": "smoke", "seed": 0, "N": 4}) is None
    side = json.loads((tmp_path / "01_demo.json").read_text())
    text = side["provenance"]
    assert side["caption_meta"] == {"mode": "smoke", "seed": 0, "N": 4}
    assert text.startswith("Mode smoke, seed 0; N = 4; commit ") and side["wall_time_s"] >= 0
    assert "wall time" not in text  # kept in the sidecar, not in the reader's caption
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
