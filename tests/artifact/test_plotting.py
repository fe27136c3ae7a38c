"""Tests for paperlib.artifact.plotting."""

import json

import matplotlib

from paperlib.artifact import plotting


def test_colors_complete():
    for k in ("sgm_claim", "guarantee", "upper", "clt", "audit", "simulation", "easgm", "asgm", "feasgm"):
        assert k in plotting.COLORS
        assert matplotlib.colors.is_color_like(plotting.COLORS[k])


def test_new_axes():
    fig, ax = plotting.new_axes("t")
    assert ax.get_xlabel() == "FPR (α)" and ax.get_ylabel() == "FNR (β)"
    assert tuple(ax.get_xlim()) == (0, 1) and tuple(ax.get_ylim()) == (0, 1)
    assert ax.get_title() == "t"
    line = ax.get_lines()[0]
    assert line.get_linestyle() == "--"
    assert list(line.get_xdata()) == [0, 1] and list(line.get_ydata()) == [1, 0]
    matplotlib.pyplot.close(fig)


def test_savefig_writes_files(tmp_path, monkeypatch):
    monkeypatch.setenv(plotting.FIGURES_ENV, str(tmp_path / "figs"))
    fig, ax = plotting.new_axes()
    ax.plot([0, 1], [1, 0], color=plotting.COLORS["guarantee"])
    png = plotting.savefig(fig, "demo", {"mode": "quick", "N": 10})
    matplotlib.pyplot.close(fig)
    assert png == tmp_path / "figs" / "demo.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pdf = tmp_path / "figs" / "demo.pdf"
    assert pdf.read_bytes()[:5] == b"%PDF-"
    meta = json.loads((tmp_path / "figs" / "demo.json").read_text())
    assert meta["caption_meta"] == {"mode": "quick", "N": 10}
    assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == ["demo.json", "demo.pdf", "demo.png"]
