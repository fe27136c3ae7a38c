"""Tests for paperlib.artifact.plotting."""

import json

import matplotlib
import numpy as np
import pytest

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


def test_savefig_png_wide_enough_and_fonts_readable(tmp_path, monkeypatch):
    """A narrow figure gets more dpi (>= 1,200 px); a wide one with 6 pt legends gets them raised."""
    import matplotlib.pyplot as plt

    monkeypatch.setenv(plotting.FIGURES_ENV, str(tmp_path))
    fig, ax = plt.subplots(figsize=(3.0, 2.5))
    ax.plot([1, 2], [3, 4], label="a")
    ax.legend(fontsize=5)
    plotting.savefig(fig, "narrow")
    side = json.loads((tmp_path / "narrow.json").read_text())
    assert side["png_px"][0] >= plotting.MIN_PNG_PX and side["dpi"] >= 400
    assert side["min_font_pt"] >= plotting.MIN_FONT_PT
    assert side["vector"] == "narrow.pdf" and (tmp_path / "narrow.pdf").read_bytes()[:5] == b"%PDF-"
    plt.close(fig)

    w = 2 * plotting.BOOK_WIDTH_IN  # shown at half size: every text needs >= 16 pt in the figure
    fig, ax = plt.subplots(figsize=(w, 3))
    ax.plot([1, 2], [3, 4], label="b")
    ax.legend(fontsize=6)
    ax.set_title("t", fontsize=7)
    assert plotting.min_display_font_pt(fig) < 4
    plotting.savefig(fig, "wide")
    side = json.loads((tmp_path / "wide.json").read_text())
    assert side["dpi"] == plotting.DPI and side["png_px"][0] == round(w * plotting.DPI)
    assert side["min_font_pt"] >= plotting.MIN_FONT_PT - 1e-6
    assert ax.get_legend().get_texts()[0].get_fontsize() >= 16 - 1e-9
    assert min(t.get_fontsize() for t in ax.get_xticklabels()) >= 16 - 1e-9
    plt.close(fig)


def test_book_style_sizes():
    assert matplotlib.rcParams["legend.fontsize"] >= plotting.MIN_FONT_PT
    assert matplotlib.rcParams["xtick.labelsize"] >= plotting.MIN_FONT_PT
    assert matplotlib.rcParams["savefig.dpi"] == plotting.DPI


def test_series_style_distinct_and_colour_blind_safe():
    import pytest

    styles = [plotting.series_style(i) for i in range(9)]
    assert len({c for c, _ in styles}) == 9 and len({m for _, m in styles}) == 9
    assert "#F0E442" not in {c for c, _ in styles}  # Okabe-Ito yellow: unreadable on white
    assert plotting.series_style(9)[1] != plotting.series_style(0)[1]
    kw = plotting.series_kw(2)
    assert kw["color"] == styles[2][0] and kw["marker"] == styles[2][1] and kw["linestyle"] == "-."
    assert plotting.series_kw(1, line=False)["linestyle"] == "none"
    for bad in (-1, 1.5, True, "0"):
        with pytest.raises(ValueError, match="series index"):
            plotting.series_style(bad)


def test_plot_log_series_marks_zero_and_inf_at_the_edges():
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots()
    n = plotting.plot_log_series(ax, [1, 2, 3, 4, 5], [0.5, 0.0, 2.0, np.inf, np.nan], color="#0072B2", label="s",
                                 line=True)
    assert n == {"low": 1, "high": 1}
    assert ax.get_yscale() == "log"
    main, low, high = ax.get_lines()
    y = np.asarray(main.get_ydata(), dtype=float)
    assert np.isnan(y[1]) and np.isnan(y[3]) and y[0] == 0.5  # broken at off-scale values, no plateau
    assert list(low.get_xdata()) == [2.0] and list(low.get_ydata()) == [0.0] and low.get_marker() == "v"
    assert list(high.get_xdata()) == [4.0] and list(high.get_ydata()) == [1.0] and high.get_marker() == "^"
    # drawn in axes coordinates: the limits come from the finite points only
    fig.canvas.draw()
    lo, hi = ax.get_ylim()
    assert 0.1 < lo < 0.5 and 2.0 < hi < 10
    assert plotting.offscale_handle().get_marker() == "v"
    plt.close(fig)


def test_thousands():
    assert plotting.thousands(59999) == "59,999" and plotting.thousands(999) == "999"
    assert plotting.thousands(1e6) == "1,000,000"


def test_style_axes_on_a_log_axis_does_not_warn():
    import warnings

    import matplotlib.pyplot as plt

    from paperlib.artifact import notebook as pf

    fig, ax = plt.subplots()
    ax.set_yscale("log")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pf.style_axes(ax, "t")
    assert ax.get_xlim() == (0.0, 1.0) and ax.get_aspect() == "auto"
    plt.close(fig)


def test_layout_problems_catch_each_class():
    """Each defect class is found on a figure that has it, and none on a clean one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from paperlib.artifact.plotting import layout_problems

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1], label="a")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))  # outside the data
    fig.tight_layout()
    fig.subplots_adjust(right=0.7)
    assert layout_problems(fig) == []
    ax.set_title("a panel title far too long to fit inside this narrow figure, so it is clipped at both ends")
    assert any("clipped" in p for p in layout_problems(fig))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot(np.linspace(0, 1, 50), np.linspace(1, 0, 50), "o", label="data")
    ax.legend(loc="upper left")  # over the first points
    assert any("legend covers data" in p for p in layout_problems(fig))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2], [1, 2])
    ax.plot([2], [1], "v", clip_on=False, label="off 1")
    ax.plot([2], [1], "v", clip_on=False, label="off 2")
    assert any("on each other" in p for p in layout_problems(fig))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2], [0.000925, 5.0], "o", label="claim")
    ax.set_yscale("symlog", linthresh=0.1)
    assert any("drawn as 0" in p for p in layout_problems(fig))
    ax.set_yscale("log")
    assert not any("drawn as 0" in p for p in layout_problems(fig))
    plt.close(fig)


def test_savefig_records_layout_problems(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setenv(plotting.FIGURES_ENV, str(tmp_path))
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_title("x" * 200)
    plotting.savefig(fig, "clipped")
    side = json.loads((tmp_path / "clipped.json").read_text())
    assert side["layout_problems"] and "clipped" in side["layout_problems"][0]
    plt.close(fig)


def test_built_figures_have_no_layout_problems():
    """Every figure the book build wrote has an empty layout_problems list in its sidecar.

    Which build: ``$PAPERLIB_BOOK_FIGURES`` (``make test`` points it at the smoke-mode
    test book it has just built), else the checkout's ``figures/`` (``make all``).
    """
    import os
    from pathlib import Path

    where = os.environ.get("PAPERLIB_BOOK_FIGURES") or Path(__file__).resolve().parents[2] / "figures"
    sides = sorted(Path(where).glob("*.json"))
    if not sides:
        pytest.skip("no built figures (run make all or make test-book first)")
    bad = {p.name: json.loads(p.read_text())["layout_problems"] for p in sides
           if json.loads(p.read_text()).get("layout_problems")}
    missing = [p.name for p in sides if "layout_problems" not in json.loads(p.read_text())]
    assert not bad and not missing, (bad, missing)


def test_layout_problems_new_classes_fail_on_broken_figures():
    """A line crossing a legend between two points, a 0 on a log axis and text below 8 pt are found."""
    import matplotlib.pyplot as plt

    from paperlib.artifact.plotting import layout_problems

    # two far-apart points: no vertex under the legend, but the segment joining them crosses it
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([0, 1], [1.0, 1.0], label="crossing")
    ax.set_ylim(0, 2)
    leg = ax.legend(loc="center")
    fig.canvas.draw()
    lb = leg.get_window_extent()
    y_mid = ax.transData.inverted().transform(((lb.x0 + lb.x1) / 2, (lb.y0 + lb.y1) / 2))[1]
    ax.lines[0].set_ydata([y_mid, y_mid])
    assert any("legend covers data of 'crossing'" in p for p in layout_problems(fig))
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    assert not any("legend covers" in p for p in layout_problems(fig))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar([0, 1, 2], [3, 3, 3], label="bars")
    fig.legend(loc="center")  # a figure legend over the bars
    assert any("legend covers data of" in p for p in layout_problems(fig))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([1, 2, 3], [0.0, 1.0, 10.0], "o-", label="has a zero")
    ax.set_yscale("log")
    assert any("'has a zero': a value <= 0 drawn as nothing on a log y axis" in p for p in layout_problems(fig))
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4))
    plotting.plot_log_series(ax, [1, 2, 3], [0.0, 1.0, 10.0], color="k", label="marked")
    assert layout_problems(fig) == []  # the 0 is an off-scale marker in axes coordinates
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(2 * plotting.BOOK_WIDTH_IN, 4))  # shown at half size
    ax.plot([0, 1], [0, 1])
    ax.tick_params(labelsize=10)  # 5 pt as displayed
    probs = layout_problems(fig)
    assert any("text below 8 pt at the book's width (5.0 pt)" in p for p in probs), probs
    ax.tick_params(labelsize=16)
    assert not any("below 8 pt" in p for p in layout_problems(fig))
    plt.close(fig)


def test_ticks_outside_a_log_view_are_not_reported_clipped():
    """A log axis places tick labels beyond its limits (1e-14 under 1e-12); they are not drawn."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    ax.semilogy([0, 1], [1e-12, 1])
    ax.set_ylim(1e-12, 1)
    assert plotting.layout_problems(fig) == []
    plt.close(fig)


def test_offscale_markers_of_several_series_are_dodged():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for k in range(3):
        c, m = plotting.series_style(k)
        plotting.plot_log_series(ax, [1, 2, 3], [0.0, 1.0 + k, 0.0], color=c, marker=m, label=f"s{k}", line=True)
    fig.canvas.draw()
    edge = [ln for ln in ax.get_lines() if not ln.get_clip_on()]
    xs = sorted(round(float(ln.get_transform().transform((1.0, 0.0))[0]), 1) for ln in edge
                if list(ln.get_xdata()) == [1.0, 3.0])
    assert len(xs) == 3 and min(np.diff(xs)) >= 0.6 * 6.5 * fig.dpi / 72  # apart by more than the check's radius
    assert not any("on each other" in p for p in plotting.layout_problems(fig))
    plt.close(fig)


def test_fit_titles_wraps_at_spaces_and_keeps_formulas_whole():
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(7, 3), layout="constrained")
    title = "EASGM: N = 10, q = 0.1, σ = 1, n = 100 and $f_{\\varepsilon, \\delta}$ claim from the paper"
    axes[1].set_title(title)
    assert plotting.fit_titles(fig) >= 1
    new = axes[1].get_title()
    assert "\n" in new and new.replace("\n", " ") == title
    assert all(line.count("$") % 2 == 0 for line in new.split("\n"))
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    assert axes[1].title.get_window_extent(r).width <= fig.bbox.width / 3  # within its column
    assert plotting.layout_problems(fig) == []
    assert plotting.fit_titles(fig) == 0  # nothing left to wrap
    # wrapped to the column, not to the axes the layout narrowed: three short lines at most
    assert len(new.split("\n")) <= 3
    plt.close(fig)


def test_figure_legend_and_legend_below_keep_legends_off_the_data():
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(7, 3), layout="constrained")
    for ax in axes:
        for k in range(3):
            ax.plot(np.linspace(0, 1, 40), np.linspace(0, 1, 40) ** (k + 1), label=f"series {k}", **plotting.series_kw(k))
    leg = plotting.figure_legend(fig)
    assert [t.get_text() for t in leg.get_texts()] == ["series 0", "series 1", "series 2"]  # each label once
    assert plotting.layout_problems(fig) == []
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    ax.plot([0, 1], [0, 1], label="a")
    ax.set_xlabel("x")
    leg = plotting.legend_below(ax)
    fig.canvas.draw()
    assert leg.get_window_extent().y1 <= ax.xaxis.label.get_window_extent().y0 + 1  # under the axis label
    assert plotting.layout_problems(fig) == []
    plt.close(fig)
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="no labelled artist"):
        plotting.figure_legend(fig)
    plt.close(fig)


def test_savefig_records_the_smallest_font_in_the_png(tmp_path, monkeypatch):
    """The browser test reads MIN_FONT_KEY and the dpi from the PNG to get the displayed size."""
    import matplotlib.pyplot as plt
    from PIL import Image

    monkeypatch.setenv(plotting.FIGURES_ENV, str(tmp_path))
    fig, ax = plt.subplots(figsize=(plotting.BOOK_WIDTH_IN, 3))
    ax.plot([0, 1], [0, 1])
    ax.set_title("t", fontsize=12)
    ax.tick_params(labelsize=9)
    plotting.savefig(fig, "f")
    img = Image.open(tmp_path / "f.png")
    assert float(img.text[plotting.MIN_FONT_KEY]) == pytest.approx(9.0)
    assert img.info["dpi"][0] == pytest.approx(json.loads((tmp_path / "f.json").read_text())["dpi"], abs=0.5)
    plt.close(fig)


# Colour-vision-deficiency simulation, written here independently of paperlib: Machado, Oliveira
# and Fernandes (2009, IEEE TVCG 15:1291), severity 1.0, applied to linear RGB; CIELAB (D65) distance.
_CVD = {"normal": np.eye(3),
        "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
        "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
        "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]]}


def _lab(hex_colour, vision):
    from matplotlib.colors import to_rgb

    c = np.asarray(to_rgb(hex_colour))
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    lin = np.clip(np.asarray(_CVD[vision]) @ lin, 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ lin
    t = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > (6 / 29) ** 3, np.cbrt(t), t / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def _closest_pair(colours, vision):
    import itertools

    labs = [_lab(c, vision) for c in colours]
    return min(float(np.linalg.norm(a - b)) for a, b in itertools.combinations(labs, 2))


def test_series_colours_told_apart_with_each_colour_vision():
    """The first six series colours (a figure's usual maximum) stay >= 15 CIELAB units apart for normal
    vision and simulated protanopia, deuteranopia and tritanopia; all nine >= 12. Six tints of one hue
    (what Figure 5.1 had) fail the same check, so the check can fail."""
    for vision in _CVD:
        assert _closest_pair(plotting.SERIES_COLORS[:6], vision) >= 15, vision
        assert _closest_pair(plotting.SERIES_COLORS, vision) >= 12, vision
    from matplotlib.colors import to_hex, to_rgb

    base = np.asarray(to_rgb(plotting.COLORS["audit"]))
    tints = [to_hex(base * (1 - t) + t) for t in np.linspace(0.75, 0.0, 6)]  # the old shades()
    assert _closest_pair(tints, "normal") < 15 and _closest_pair(tints, "deuteranopia") < 15


def test_savefig_grows_a_figure_whose_titles_stick_out(tmp_path, monkeypatch):
    """Three square panels, a three-line title and a legend below do not fit 2.8 in: drawn once, the
    constrained layout puts the title past the top (Figure 2.3 in the book). savefig makes the figure
    taller, never wider, and checks the layout it saved."""
    from paperlib.artifact import notebook as pf

    def figure():
        fig, axes = pf.new_grid(1, 3, panel=3.6)
        for ax, extra in zip(axes[0], ["", "", ": SGM claim holds"]):
            ax.plot([0, 1], [1, 0], label="x")
            ax.set_title(f"FEASGM: N=4, q=0.5, σ=2, n=20\n(⌊Nq⌋ = 2, ⌊(N+1)q⌋ = 2{extra})", fontsize=8.5)
        plotting.figure_legend(fig)
        return fig

    fig = figure()
    for ax in fig.axes:  # the three-line title the book had, drawn once
        ax.set_title(ax.get_title().replace(": SGM claim holds", ": SGM\nclaim holds"), fontsize=8.5)
    assert any("clipped" in p for p in plotting.layout_problems(fig))  # what the book showed
    matplotlib.pyplot.close(fig)

    fig = figure()
    for ax in fig.axes:
        ax.set_title(ax.get_title().replace(": SGM claim holds", ": SGM\nclaim holds"), fontsize=8.5)
    width, height = fig.get_figwidth(), fig.get_figheight()
    assert plotting.grow_to_fit(fig) > 0.05
    assert fig.get_figwidth() == width and fig.get_figheight() > height + 0.05
    assert plotting.layout_problems(fig) == []
    matplotlib.pyplot.close(fig)

    monkeypatch.setenv(plotting.FIGURES_ENV, str(tmp_path))
    fig = figure()
    plotting.savefig(fig, "grown")
    side = json.loads((tmp_path / "grown.json").read_text())
    assert side["layout_problems"] == []
    assert side["png_px"][1] == pytest.approx(fig.get_figheight() * side["dpi"], abs=2)
    matplotlib.pyplot.close(fig)


def test_fit_titles_keeps_a_centred_title_inside_the_canvas():
    """The right panel of a grid sits near the figure's edge (y labels only on the left): its title,
    narrower than its column, would still leave the canvas (Figure 3.2's right titles)."""
    from paperlib.artifact import notebook as pf

    fig, axes = pf.new_grid(2, 2, panel=4.3)
    fig.set_size_inches(plotting.FIG_WIDTH, plotting.FIG_WIDTH + 0.9)
    for ax in axes.flat:
        ax.set_title("EASGM bound, n = 1,485,217, N = 59,999\nCLT: μ = 0.01762, γ = 0.00047; largest gap 0.005")
    fig.set_dpi(200)  # the PNG's dpi, at which the book's PNG showed the clipping
    assert any("clipped" in p for p in plotting.layout_problems(fig))
    assert plotting.fit_titles(fig) >= 1
    assert plotting.layout_problems(fig) == []
    matplotlib.pyplot.close(fig)


def test_layout_problems_catch_tick_labels_on_each_other(tmp_path, monkeypatch):
    """Figure 6.1's x tick labels ran into each other ("q=0.005q=0.5", "PrivImPrivIm"): two tick labels of
    one axis whose boxes overlap are a layout problem, recorded by savefig; rotated labels are not."""
    import matplotlib.pyplot as plt

    monkeypatch.setenv(plotting.FIGURES_ENV, str(tmp_path))
    names = [f"PrivImage\nq={q:g}" for q in (0.005, 0.5, 0.7, 0.8, 0.005, 0.5, 0.7, 0.8)]
    fig, ax = plt.subplots(figsize=(3.0, 2.5), layout="constrained")
    ax.plot(range(len(names)), range(len(names)))
    ax.set_xticks(range(len(names)), names)
    probs = plotting.layout_problems(fig)
    assert any("tick labels on each other on the x axis" in p and "PrivImage" in p for p in probs), probs
    plotting.savefig(fig, "ticks_overlap")
    side = json.loads((tmp_path / "ticks_overlap.json").read_text())
    assert any("tick labels on each other" in p for p in side["layout_problems"])
    ax.set_xticks(range(len(names)), names, rotation=90)
    assert not any("tick labels" in p for p in plotting.layout_problems(fig))
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(4.0, 3.0), layout="constrained")  # ordinary numeric ticks: no problem
    ax.plot([0, 1], [0, 1])
    assert not any("tick labels" in p for p in plotting.layout_problems(fig))
    plt.close(fig)


def test_layout_problems_catch_a_literal_underscore_subscript():
    """Legends of Figures 4.1-7.1 showed "ε_L" with its underscore; "$\\varepsilon_L$" (mathtext) is fine."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.0, 3.0), layout="constrained")
    ax.plot([0, 1], [0, 1], label="largest certifiable ε_L (100 trials)")
    ax.legend(loc="lower right")
    assert any("literal underscore" in p and "ε_L" in p for p in plotting.layout_problems(fig))
    ax.get_lines()[0].set_label(r"largest certifiable $\varepsilon_L$ (100 trials), 1e-5")
    ax.legend(loc="lower right")
    assert not any("literal underscore" in p for p in plotting.layout_problems(fig))
    plt.close(fig)


def test_sequential_colors_step_clearly_in_lightness_and_hue():
    """Figure 5.1's n = 1 (blue) and n = 10,000 (sky blue) were hard to tell apart: the sequential palette
    darkens with the index in clear steps, and any two of six stay >= 12 CIELAB units apart with each
    colour vision."""
    cols = plotting.sequential_colors(6)
    assert len(set(cols)) == 6
    lightness = [_lab(c, "normal")[0] for c in cols]
    assert all(b - a >= 8 for a, b in zip(lightness, lightness[1:])), lightness
    for vision in _CVD:
        assert _closest_pair(cols, vision) >= 12, vision
    assert _closest_pair([plotting.SERIES_COLORS[0], plotting.SERIES_COLORS[5]], "normal") > 0  # sanity
    with pytest.raises(ValueError):
        plotting.sequential_colors(0)


def test_offscale_legend_lists_only_the_markers_drawn():
    """Issue 34: a legend listed "▲ ∞" where no infinite value was drawn; the handles follow the counts."""
    from paperlib.artifact import plotting

    assert plotting.offscale_handles({"low": 0, "high": 0}) == []
    low = plotting.offscale_handles({"low": 2, "high": 0})
    assert [h.get_marker() for h in low] == ["v"] and "= 0" in low[0].get_label()
    both = plotting.offscale_handles({"low": 1, "high": 3})
    assert [h.get_marker() for h in both] == ["v", "^"] and "∞" in both[1].get_label()
