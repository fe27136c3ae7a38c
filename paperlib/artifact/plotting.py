"""One figure style for the whole book.

Every trade-off figure uses :func:`new_axes` (axes FPR (α) / FNR (β) on [0, 1] with
the dashed identity line β = 1 − α, i.e. perfect privacy) and the colours in
:data:`COLORS`, so that "SGM claim", "guarantee", "upper bound", "CLT bound" and
"audit" look the same in every chapter. Several series of one kind (one per q, N or n)
get :func:`series_style` (a colour *and* a marker per series, colour-blind safe).

:func:`savefig` writes ``figures/<name>.png`` (at least :data:`DPI` = 200 dpi and at
least :data:`MIN_PNG_PX` = 1,200 px wide) and a vector copy ``figures/<name>.pdf``; the
directory can be changed with the environment variable ``PAPERLIB_FIGURES``. Before
saving it raises every text smaller than :data:`MIN_FONT_PT` (8 pt) *as displayed at the
book's content width* (:data:`BOOK_WIDTH_IN`; a figure wider than that is shrunk by the
browser, so its fonts must be larger in proportion).

On log axes, values a log scale cannot show (ε_L = 0, an infinite guarantee) are drawn
by :func:`plot_log_series` as marked off-scale points at the axis edge (▼ at the bottom
for 0, ▲ at the top for ∞), and :func:`offscale_handle` gives their legend entry.

The book style (:data:`BOOK_RC`) is applied once, on import. The non-interactive ``Agg``
backend is selected only when no backend was chosen (no ``MPLBACKEND`` and matplotlib not
yet imported with one); notebooks keep their inline backend.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from pathlib import Path

if "matplotlib.pyplot" not in sys.modules and not os.environ.get("MPLBACKEND") and "ipykernel" not in sys.modules:
    import matplotlib

    matplotlib.use("Agg")

import matplotlib as mpl  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["COLORS", "LINESTYLES", "SERIES_COLORS", "SERIES_MARKERS", "SERIES_LINESTYLES", "FIGURES_ENV",
           "DPI", "MIN_PNG_PX", "MIN_FONT_PT", "BOOK_WIDTH_IN", "BOOK_RC", "apply_style", "figures_dir",
           "new_axes", "savefig", "series_style", "sequential_colors", "series_kw", "plot_log_series", "offscale_handle",
           "thousands", "min_display_font_pt", "layout_problems", "fit_titles", "grow_to_fit", "figure_legend", "legend_below",
           "MIN_FONT_KEY"]

FIGURES_ENV = "PAPERLIB_FIGURES"
#: PNG text key (tEXt chunk) holding the smallest font size of a saved figure, in points at
#: the figure's own size: with the PNG's dpi (pHYs chunk) and its displayed width the browser
#: test computes the size a reader sees (tests/artifact/browser_check.py).
MIN_FONT_KEY = "paperlib-min-font-pt"

#: Resolution of the PNG copies (dots per inch); raised for narrow figures so that every
#: PNG is at least :data:`MIN_PNG_PX` wide.
DPI = 200
#: Smallest width of a saved PNG, in pixels.
MIN_PNG_PX = 1200
#: Smallest font size, in points, of any text of a figure as the book displays it.
MIN_FONT_PT = 8.0
#: Width in inches (at 96 CSS px per inch) at which the book shows a figure: sphinx-book-theme
#: draws a figure 672 CSS px wide in the browser test's 1280 px window (774 px in windows of
#: 1440 px and more; measured in Chromium on the smoke book). A PNG wider than that (all are,
#: :data:`MIN_PNG_PX`) is shrunk to it, so a figure ``W`` inches wide is shown at
#: ``BOOK_WIDTH_IN / W`` of its size. Notebooks draw figures this wide (:data:`FIG_WIDTH`),
#: which shows their fonts at their nominal size.
BOOK_WIDTH_IN = 7.0
FIG_WIDTH = BOOK_WIDTH_IN

#: The book style: sizes in points, for a figure :data:`FIG_WIDTH` wide (shown 1:1).
BOOK_RC: dict = {
    "font.size": 9.0,
    "axes.titlesize": 9.5,
    "axes.labelsize": 9.0,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "legend.fontsize": 8.5,
    "legend.title_fontsize": 8.5,
    "figure.titlesize": 10.5,
    "lines.linewidth": 1.6,
    "lines.markersize": 5.0,
    "legend.framealpha": 0.85,
    "savefig.dpi": DPI,
    "figure.dpi": 100,
}


def apply_style() -> None:
    """Set :data:`BOOK_RC` in ``matplotlib.rcParams`` (done once when this module is imported)."""
    mpl.rcParams.update(BOOK_RC)


apply_style()

#: Colour of each kind of curve, the same in every figure (colour-blind-safe Okabe-Ito palette).
COLORS: dict[str, str] = {
    "sgm_claim": "#000000",   # the claimed SGM guarantee (black)
    "tight_claim": "#8A8A8A", # the same claim composed tightly (grey, drawn over the accountant's black)
    "guarantee": "#0072B2",   # corrected f-DP guarantee (blue)
    "upper": "#D55E00",       # upper bound on the true trade-off (vermillion)
    "clt": "#009E73",         # Berry-Esseen / CLT bound (bluish green)
    "audit": "#CC79A7",       # empirical audit points (reddish purple)
    "simulation": "#999999",  # Monte-Carlo simulation (grey)
    "easgm": "#E69F00",       # EASGM: divide by N*q (orange)
    "asgm": "#56B4E9",        # ASGM: divide by |B| (sky blue)
    "feasgm": "#8C564B",      # FEASGM: divide by floor(N*q) (brown)
}

#: Line style of each kind of curve (claims solid, bounds dashed/dotted).
LINESTYLES: dict[str, str] = {
    "sgm_claim": "-",
    "tight_claim": ":",
    "guarantee": "-",
    "upper": "--",
    "clt": ":",
    "audit": "none",
    "simulation": "-.",
    "easgm": "-",
    "asgm": "-",
    "feasgm": "-",
}

#: Colours of series 0, 1, 2, ... of one figure (several q, N or n): Okabe-Ito (Wong 2011,
#: Nature Methods 8:441) without its yellow, which is unreadable on white, then Tol's
#: colour-blind-safe purple and olive.
SERIES_COLORS: tuple[str, ...] = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
                                  "#000000", "#882255", "#999933")
#: Markers of series 0, 1, 2, ...: a second cue, so series differ in shape as well as colour.
SERIES_MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "<", "*")
#: Line styles of series 0, 1, 2, ... (a third cue for lines without markers).
SERIES_LINESTYLES: tuple = ("-", "--", "-.", ":", (0, (5, 1.5, 1, 1.5, 1, 1.5)), (0, (8, 2)),
                            (0, (1, 1)), (0, (3, 1, 3, 3)), (0, (6, 1, 1, 1)))


def sequential_colors(k: int) -> list[str]:
    """``k`` colours in order of one quantity (n = 1, 10, ..., 10,000): viridis from dark purple to
    green (its light yellow end, unreadable on white, left out), so that a reader sees the order
    and any two of up to six differ clearly, with each colour vision (a hue pair such as blue and
    sky blue does not). Pair them with :data:`SERIES_MARKERS` for a second cue."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    from matplotlib.colors import to_hex

    cmap = mpl.colormaps["viridis"]
    return [to_hex(cmap(x)) for x in (np.linspace(0.0, 0.82, k) if k > 1 else [0.0])]


def series_style(i: int) -> tuple[str, str]:
    """``(colour, marker)`` of series ``i`` (0, 1, 2, ...) of one figure.

    Distinct for ``i`` < 9 (:data:`SERIES_COLORS`, :data:`SERIES_MARKERS`); beyond that the
    pairs repeat with a shift, so ``i`` and ``i + 9`` still differ in their marker.

    Raises
    ------
    ValueError
        If ``i`` is not an integer >= 0.
    """
    if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or i < 0:
        raise ValueError(f"series index i must be an integer >= 0, got {i!r}")
    k = len(SERIES_COLORS)
    return SERIES_COLORS[i % k], SERIES_MARKERS[(i + i // k) % len(SERIES_MARKERS)]


def series_kw(i: int, *, line: bool = True, markevery=None) -> dict:
    """Keyword arguments for ``ax.plot`` that draw series ``i`` in its colour and marker.

    With ``line`` the series is a line in the style ``SERIES_LINESTYLES[i]`` with its marker
    every ``markevery`` points (default: about 8 markers per line; pass an int or a list
    for matplotlib's ``markevery``); without, markers only.
    """
    color, marker = series_style(i)
    kw = {"color": color, "marker": marker}
    if line:
        kw["linestyle"] = SERIES_LINESTYLES[i % len(SERIES_LINESTYLES)]
        kw["markevery"] = markevery if markevery is not None else (0.0 + 0.017 * (i % 5), 0.12)
        kw["markersize"] = 4.5
    else:
        kw["linestyle"] = "none"
    return kw


def thousands(x) -> str:
    """``59999`` as ``"59,999"``: a thousands separator without spaces (for labels in TeX mode too,
    use it outside ``$...$``)."""
    return f"{int(x):,d}" if float(x).is_integer() else f"{x:,g}"


def offscale_handle(color: str = "#555555", *, label: str = "off scale (ε = 0: ▼ at the bottom, ∞: ▲ at the top)"):
    """A legend handle for the off-scale markers of :func:`plot_log_series`."""
    from matplotlib.lines import Line2D

    return Line2D([], [], color=color, marker="v", linestyle="none", markersize=6, label=label)


def offscale_handles(off: dict, color: str = "#555555", *, what: str = r"$\varepsilon_L$") -> list:
    """Legend handles for only the off-scale markers that were drawn: ``off`` is the sum of
    :func:`plot_log_series`'s returns (``{"low": k, "high": m}``); ▼ for values at 0 (``what = 0``), ▲ for
    infinite ones; an empty list when neither occurred (a legend never lists a marker the figure lacks)."""
    from matplotlib.lines import Line2D

    out = []
    if off.get("low"):
        out.append(Line2D([], [], color=color, marker="v", linestyle="none", markersize=6,
                          label=f"{what} = 0 (off scale)"))
    if off.get("high"):
        out.append(Line2D([], [], color=color, marker="^", linestyle="none", markersize=6,
                          label="∞ (off scale)"))
    return out


def plot_log_series(ax, x, y, *, color: str, marker: str = "o", label: str | None = None,
                    line: bool = False, axis: str = "y", **kw) -> dict:
    """Plot ``y`` against ``x`` on a log ``axis`` (``"y"`` or ``"x"``), off-scale values marked.

    Positive finite values are plotted as usual (joined by a line if ``line``). Values a log
    axis cannot show are drawn at the axes' edge in the series colour, in axes coordinates
    so that they never move the limits: ``0`` (or negative, e.g. ε_L = 0) as ▼ at the
    bottom (◀ at the left for ``axis="x"``), ``+inf`` as ▲ at the top (▶ at the right). NaN
    is skipped. A line is broken at off-scale values, never drawn to a plateau. Off-scale
    markers of several series at the same position are dodged along the edge (by 1.15 marker
    widths: 0, +1, -1, +2, ...), so none hides another. Add
    :func:`offscale_handle` to the legend when the return value says any were drawn.

    Returns
    -------
    dict
        ``{"low": number of values drawn at the lower edge, "high": number at the upper edge}``.

    Raises
    ------
    ValueError
        If ``x`` and ``y`` differ in length or ``axis`` is not ``"x"``/``"y"``.
    """
    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")
    xv = np.asarray(x, dtype=float)
    yv = np.asarray(y, dtype=float)
    if xv.shape != yv.shape:
        raise ValueError(f"x and y must have the same length, got {xv.shape} and {yv.shape}")
    v = yv if axis == "y" else xv
    low = np.isfinite(v) & (v <= 0) | (v == -np.inf)
    high = v == np.inf
    ok = np.isfinite(v) & (v > 0)
    if axis == "y":
        ax.set_yscale("log")
    else:
        ax.set_xscale("log")
    yd = np.where(ok, yv, np.nan) if axis == "y" else yv
    xd = np.where(ok, xv, np.nan) if axis == "x" else xv
    style = {"color": color, "marker": marker, "linestyle": "-" if line else "none"}
    style.update(kw)
    ax.plot(xd, yd, label=label, **style)
    edge = {"linestyle": "none", "color": color, "markersize": 6.5, "clip_on": False, "zorder": 5,
            "markeredgecolor": "white", "markeredgewidth": 0.6}
    other = xv if axis == "y" else yv
    trans = ax.get_xaxis_transform() if axis == "y" else ax.get_yaxis_transform()
    # Off-scale markers of several series at one position are dodged along the edge (0, +1, -1,
    # +2, ... marker widths), never drawn on each other: the axes remembers the positions taken.
    taken = ax.__dict__.setdefault("_paperlib_offscale", {})
    from matplotlib.transforms import ScaledTranslation

    step_in = 1.15 * edge["markersize"] / 72.0
    for mask, pos, mk in ((low, 0.0, "v" if axis == "y" else "<"), (high, 1.0, "^" if axis == "y" else ">")):
        groups: dict[int, list[float]] = {}
        for o in other[mask]:
            key = (axis, pos, float(o))
            k = taken.get(key, 0)
            taken[key] = k + 1
            groups.setdefault(k, []).append(float(o))
        for k, os_ in groups.items():
            shift = ((k + 1) // 2) * (1 if k % 2 else -1) * step_in
            dx, dy = (shift, 0.0) if axis == "y" else (0.0, shift)
            o = np.asarray(os_)
            e = np.full(o.shape, pos)
            xy = (o, e) if axis == "y" else (e, o)
            ax.plot(*xy, transform=trans + ScaledTranslation(dx, dy, ax.figure.dpi_scale_trans), marker=mk, **edge)
    return {"low": int(low.sum()), "high": int(high.sum())}


def figures_dir() -> Path:
    """Return the figures directory: ``$PAPERLIB_FIGURES`` if set, else ``./figures``."""
    return Path(os.environ.get(FIGURES_ENV) or "figures")


def new_axes(title: str | None = None, *, size: tuple[float, float] = (4.5, 4.5)):
    """Return ``(fig, ax)`` for a trade-off plot.

    The axes are labelled "FPR (α)" and "FNR (β)", limited to [0, 1] with equal
    aspect, and carry the dashed grey identity line β = 1 − α (labelled
    "perfect privacy").
    """
    fig, ax = plt.subplots(figsize=size, constrained_layout=True)
    ax.plot([0, 1], [1, 0], linestyle="--", color="#BBBBBB", linewidth=1.0, label="β = 1 − α", zorder=0)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("FPR (α)")
    ax.set_ylabel("FNR (β)")
    ax.grid(True, alpha=0.3, linewidth=0.5)
    if title:
        ax.set_title(title)
    return fig, ax


def _texts(fig):
    from matplotlib.text import Text

    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def min_display_font_pt(fig) -> float:
    """Smallest size (points) of the visible texts of ``fig`` as shown at :data:`BOOK_WIDTH_IN`.

    A figure ``W`` inches wide is shown ``BOOK_WIDTH_IN / W`` times its size (PNGs are at
    least :data:`MIN_PNG_PX` wide, more than the content column, so the browser scales them
    to the column). Returns ``inf`` for a figure without text.
    """
    scale = BOOK_WIDTH_IN / float(fig.get_figwidth())
    sizes = [t.get_fontsize() for t in _texts(fig)]
    return min(sizes) * scale if sizes else math.inf


def _raise_small_fonts(fig) -> int:
    """Raise every text smaller than :data:`MIN_FONT_PT` as displayed; returns how many were raised."""
    need = MIN_FONT_PT * max(1.0, float(fig.get_figwidth()) / BOOK_WIDTH_IN)
    n = 0
    for ax in fig.axes:  # ticks made at draw time copy these sizes
        for which in ("x", "y"):
            axis = ax.xaxis if which == "x" else ax.yaxis
            labels = axis.get_ticklabels(which="both")
            if labels and min(t.get_fontsize() for t in labels) < need - 1e-9:
                ax.tick_params(axis=which, which="both", labelsize=need)
    for t in _texts(fig):
        if t.get_fontsize() < need - 1e-9:
            t.set_fontsize(need)
            n += 1
    return n


def _wrap_words(text: str) -> list[str]:
    """Words of ``text`` (split at spaces), a ``$...$`` formula kept whole."""
    words, cur = [], []
    for w in text.split(" "):
        cur.append(w)
        if " ".join(cur).count("$") % 2 == 0:
            words.append(" ".join(cur))
            cur = []
    if cur:
        words.append(" ".join(cur))
    return [w for w in words if w]


def _fit_text(t, width_px: float, renderer) -> bool:
    """Re-wrap the lines of text ``t`` at spaces so that none is wider than ``width_px``.

    Returns whether the text changed. A single word wider than ``width_px`` stays as it is
    (:func:`layout_problems` then reports it if it leaves the canvas).
    """
    text = t.get_text()
    if t.get_window_extent(renderer).width <= width_px:
        return False
    lines = []
    for line in text.split("\n"):
        cur = ""
        for w in _wrap_words(line):
            trial = f"{cur} {w}" if cur else w
            t.set_text(trial)
            if cur and t.get_window_extent(renderer).width > width_px:
                lines.append(cur)
                cur = w
            else:
                cur = trial
        lines.append(cur)
    new = "\n".join(lines)
    t.set_text(new)
    return new != text


def _title_room(fig, ax) -> float:
    """Width in pixels a title of ``ax`` may take: its column(s) of the figure's grid, less 8 %.

    Taken from the grid, not from the drawn axes: a constrained layout narrows the axes to make
    room for a long title, so the drawn width would shrink with every wrap.
    """
    ss = ax.get_subplotspec() if hasattr(ax, "get_subplotspec") else None
    if ss is None:
        return float(ax.get_window_extent(fig.canvas.get_renderer()).width)
    ncols = ss.get_gridspec().ncols
    return 0.92 * float(fig.bbox.width) * (ss.colspan.stop - ss.colspan.start) / ncols


def fit_titles(fig) -> int:
    """Wrap every axes title wider than its column of the figure, and a suptitle wider than the figure.

    Titles are wrapped at spaces (a ``$...$`` formula is never split) to the width of the
    axes' grid column(s) less 8 % (:func:`_title_room`), and narrower where the title, centred
    on its axes, would otherwise leave the canvas; the constrained layout then makes room
    for the extra lines. :func:`savefig` calls it, so a long panel title is never clipped by
    the neighbouring panel or the canvas. Returns the number of texts re-wrapped.
    """
    fig.canvas.draw()  # where each axes is: a centred title must also stay inside the canvas
    r = fig.canvas.get_renderer()
    W = float(fig.bbox.width)
    n = 0
    for ax in fig.axes:
        bb = ax.get_window_extent(r)
        centre = (bb.x0 + bb.x1) / 2
        width = min(_title_room(fig, ax), 2 * min(centre, W - centre) - 6)
        for t in (ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None)):
            if t is not None and t.get_visible() and t.get_text().strip():
                n += _fit_text(t, width, r)
    sup = getattr(fig, "_suptitle", None)
    if sup is not None and sup.get_visible() and sup.get_text().strip():
        n += _fit_text(sup, 0.97 * fig.bbox.width, r)
    return n


def grow_to_fit(fig, *, passes: int = 4) -> float:
    """Make ``fig`` taller until nothing drawn leaves it at the top or the bottom.

    A constrained layout cannot always fit tall titles and a legend below square panels into
    a fixed height; it then draws them past the canvas. The height is raised by what sticks
    out (the width, which sets the size at which the book shows the fonts, never changes), and
    the layout drawn again, at most ``passes`` times. :func:`savefig` calls it. Returns the
    inches added.
    """
    added = 0.0
    for _ in range(passes):
        fig.canvas.draw()
        tb = fig.get_tightbbox(fig.canvas.get_renderer())
        height = float(fig.get_figheight())
        over = max(0.0, float(tb.y1) - height) + max(0.0, -float(tb.y0))
        if over <= 0.5 / fig.dpi:
            break
        fig.set_figheight(height + over + 0.04)
        added += over + 0.04
    return added


def legend_below(ax, handles=None, labels=None, *, ncol: int = 2, **kw):
    """A legend of ``ax`` just below its x tick labels and axis label, outside the data.

    Anchored at a fixed distance (in inches) below the axes' lowest text, so it stays in place
    when the constrained layout (which makes room for it) resizes the axes. For one legend
    shared by all panels use :func:`figure_legend`. Returns the legend.

    Raises
    ------
    ValueError
        If ``ncol`` is not an integer >= 1.
    """
    from matplotlib.transforms import ScaledTranslation

    _check_ncol(ncol)
    fig = ax.figure
    if fig.get_layout_engine() is None:
        fig.set_layout_engine("constrained")
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    below = max(0.0, (ax.bbox.y0 - ax.get_tightbbox(r).y0) / fig.dpi) + 0.05
    trans = ax.transAxes + ScaledTranslation(0.0, -below, fig.dpi_scale_trans)
    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    elif labels is None:
        labels = [h.get_label() for h in handles]
    kw.setdefault("frameon", False)
    return ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=trans,
                     ncol=ncol, **kw)


def _check_ncol(ncol) -> None:
    if isinstance(ncol, bool) or not isinstance(ncol, (int, np.integer)) or ncol < 1:
        raise ValueError(f"ncol (legend columns) must be an integer >= 1, got {ncol!r}")


def _legend_pt() -> float:
    from matplotlib.font_manager import FontProperties

    return FontProperties(size=mpl.rcParams["legend.fontsize"]).get_size_in_points()


def figure_legend(fig, handles=None, labels=None, *, ncol: int | None = None, **kw):
    """One legend for the whole figure, below its panels, outside every data area.

    ``handles``/``labels`` default to those of all axes, each label once (labels starting
    with ``_`` are skipped, as matplotlib does). Placed ``"outside lower center"``, which
    needs the constrained layout (:func:`new_axes` and
    :func:`paperlib.artifact.notebook.new_grid` use it; it is switched on here otherwise).
    ``ncol`` defaults to as many columns as fit (at most 4). Returns the legend.

    Raises
    ------
    ValueError
        If the figure has nothing to put in a legend, or ``ncol`` is not an integer >= 1.
    """
    if ncol is not None:
        _check_ncol(ncol)
    if handles is None:
        seen: dict = {}
        for ax in fig.axes:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab and not lab.startswith("_") and lab not in seen:
                    seen[lab] = h
        labels, handles = list(seen), list(seen.values())
    elif labels is None:
        labels = [h.get_label() for h in handles]
    if not handles:
        raise ValueError("figure_legend: handles is empty (the figure has no labelled artist to show in a legend)")
    if fig.get_layout_engine() is None:
        fig.set_layout_engine("constrained")
    if ncol is None:
        longest = max(len(str(lab)) for lab in labels)
        ncol = max(1, min(4, len(labels), int(fig.get_figwidth() * 72 / (_legend_pt() * 0.6)
                                                 // (longest + 6))))
    kw.setdefault("frameon", False)
    return fig.legend(handles, labels, loc="outside lower center", ncol=ncol, **kw)


def _display_points(artist, x, y) -> np.ndarray:
    """``(k, 2)`` display coordinates of the data ``x``, ``y`` of ``artist`` (NaN where not drawable)."""
    xy = np.column_stack([np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()])
    with np.errstate(all="ignore"):
        return artist.get_transform().transform(xy) if len(xy) else xy.reshape(0, 2)


def _segments_hit_box(pts: np.ndarray, box, *, segments: bool) -> bool:
    """Whether a point of ``pts`` (display coordinates), or with ``segments`` a segment joining two
    consecutive points, lies inside ``box = (x0, y0, x1, y1)`` (Liang-Barsky clipping)."""
    x0, y0, x1, y1 = box
    ok = np.all(np.isfinite(pts), axis=1)
    p = pts[ok] if not segments else pts
    if not segments or len(pts) < 2:
        return bool(np.any((p[:, 0] > x0) & (p[:, 0] < x1) & (p[:, 1] > y0) & (p[:, 1] < y1))) if len(p) else False
    a, b = pts[:-1], pts[1:]
    valid = ok[:-1] & ok[1:]
    d = b - a
    t0 = np.zeros(len(a))
    t1 = np.ones(len(a))
    reject = ~valid
    with np.errstate(all="ignore"):
        for pk, qk in ((-d[:, 0], a[:, 0] - x0), (d[:, 0], x1 - a[:, 0]), (-d[:, 1], a[:, 1] - y0), (d[:, 1], y1 - a[:, 1])):
            reject |= (pk == 0) & (qk < 0)
            r = qk / pk
            t0 = np.where(pk < 0, np.maximum(t0, r), t0)
            t1 = np.where(pk > 0, np.minimum(t1, r), t1)
    hit = ~reject & (t0 <= t1)
    # an isolated point (NaN on both sides) is drawn only as a marker: checked as a point
    return bool(np.any(hit)) or _segments_hit_box(pts, box, segments=False)


def _data_in_box(ax, box) -> str | None:
    """The label of the first data artist of ``ax`` drawn inside ``box`` (display coords), or None."""
    from matplotlib.collections import LineCollection, PathCollection
    from matplotlib.patches import Rectangle

    for ln in ax.get_lines():
        if not ln.get_visible() or not len(ln.get_xdata()):
            continue
        pts = _display_points(ln, ln.get_xdata(), ln.get_ydata())
        joined = ln.get_linestyle() not in ("None", "none", "", " ")
        marked = ln.get_marker() not in (None, "", "none", "None", " ")
        if (joined and _segments_hit_box(pts, box, segments=True)) or (marked and _segments_hit_box(pts, box, segments=False)):
            return ln.get_label()
    for c in ax.collections:
        if not c.get_visible():
            continue
        if isinstance(c, PathCollection) and len(c.get_offsets()):
            with np.errstate(all="ignore"):
                pts = c.get_offset_transform().transform(np.asarray(c.get_offsets(), dtype=float))
            if _segments_hit_box(pts, box, segments=False):
                return c.get_label()
        elif isinstance(c, LineCollection):
            for seg in c.get_segments():
                with np.errstate(all="ignore"):
                    pts = c.get_transform().transform(np.asarray(seg, dtype=float))
                if len(pts) and _segments_hit_box(pts, box, segments=True):
                    return c.get_label()
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and patch.get_visible():
            pb = patch.get_window_extent()
            if pb.width > 0 and pb.x0 < box[2] and pb.x1 > box[0] and pb.y0 < box[3] and pb.y1 > box[1]:
                return patch.get_label()
    return None


def _tick_label_drawn(ax, axis, tick) -> bool:
    """Whether matplotlib draws ``tick``'s labels: its location falls inside the axes (in pixels)."""
    loc = tick.get_loc()
    with np.errstate(all="ignore"):
        if axis is ax.xaxis:
            v, lo, hi = ax.get_xaxis_transform().transform((loc, 0.0))[0], ax.bbox.x0, ax.bbox.x1
        else:
            v, lo, hi = ax.get_yaxis_transform().transform((0.0, loc))[1], ax.bbox.y0, ax.bbox.y1
    return bool(np.isfinite(v) and lo - 1.0 <= v <= hi + 1.0)


#: A letter, an underscore and a letter or digit outside mathtext: "ε_L" drawn with its underscore.
_LITERAL_SUBSCRIPT = re.compile(r"[^\W\d_]_[^\W_]")


def layout_problems(fig) -> list[str]:
    """What a reader of the saved PNG would see wrong, from the drawing's bounding boxes.

    Text clipped inside a PNG is not visible to the browser's DOM, so it is checked here, on
    the rendered drawing (display coordinates, pixels). One line per problem (empty: none):

    * **text outside the canvas**: a visible text (title, label, drawn tick label, legend
      entry, annotation) whose box leaves the figure;
    * **legend over data**: a legend (of an axes or of the figure) under which a data line,
      marker, scatter point, error bar or bar of an axes is drawn (segments are clipped to the
      legend's box, so a line crossing it between two points counts);
    * **markers on each other**: two off-scale markers (drawn at an axes' edge with
      ``clip_on=False``, :func:`plot_log_series`) of different series closer than 0.6 marker;
    * **a value drawn at 0**: a finite value <= 0 plotted in data coordinates on a log axis
      (matplotlib drops it silently), or a positive value below 1/20 of a symlog axis's linear
      threshold (drawn indistinguishable from 0);
    * **tick labels on each other**: two drawn tick labels of one axis whose boxes overlap
      (long category names side by side);
    * **a literal subscript**: a text such as ``"ε_L"`` outside ``$...$`` (drawn with its underscore);
    * **small text**: a text below :data:`MIN_FONT_PT` (8 pt) at the book's display width
      (:func:`min_display_font_pt`).
    """
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    hidden = _hidden_tick_labels(fig)
    out = _clipped_texts(fig, r, hidden)
    out += _overlapping_tick_labels(fig, r, hidden)
    out += _literal_subscripts(fig, hidden)
    out += _legends_over_data(fig, r)
    for ax in fig.axes:
        lines = [ln for ln in ax.get_lines() if ln.get_visible() and len(ln.get_xdata())]
        out += _offscale_markers_on_each_other(fig, lines)
        out += _values_drawn_at_zero(ax, lines)
    small = min_display_font_pt(fig)
    if small < MIN_FONT_PT - 1e-6:
        t = min(_texts(fig), key=lambda t: t.get_fontsize())
        out.append(f"text below {MIN_FONT_PT:g} pt at the book's width ({small:.1f} pt): {t.get_text()[:40]!r}")
    return out


def _hidden_tick_labels(fig) -> set:
    """The ids of the tick labels that are not drawn (their tick is outside the view)."""
    hidden = set()
    for ax in fig.axes:  # tick labels of ticks outside the view are not drawn
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not _tick_label_drawn(ax, axis, tick):
                    hidden.update((id(tick.label1), id(tick.label2)))
    return hidden


def _clipped_texts(fig, r, hidden) -> list[str]:
    """:func:`layout_problems`' lines for the drawn texts whose box leaves the figure."""
    W, H = fig.bbox.width, fig.bbox.height
    out = []
    for t in _texts(fig):
        if id(t) in hidden:
            continue
        bb = t.get_window_extent(r)
        if bb.x0 < -1 or bb.y0 < -1 or bb.x1 > W + 1 or bb.y1 > H + 1:
            out.append(f"text clipped by the figure's edge: {t.get_text()[:40]!r}")
    return out


def _overlapping_tick_labels(fig, r, hidden) -> list[str]:
    """:func:`layout_problems`' lines for drawn tick labels of one axis whose boxes overlap."""
    out = []
    for ax in fig.axes:  # tick labels of one axis on each other ("q=0.005q=0.5", "PrivImPrivIm")
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            for which in ("label1", "label2"):
                boxes = []
                for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                    t = getattr(tick, which)
                    if (id(t) in hidden or not t.get_visible() or not t.get_text().strip()
                            or not _tick_label_drawn(ax, axis, tick)):
                        continue
                    boxes.append((t.get_window_extent(r), t.get_text()))
                for i, (b1, t1) in enumerate(boxes):
                    for b2, t2 in boxes[i + 1:]:
                        if (min(b1.x1, b2.x1) - max(b1.x0, b2.x0) > 0.5 and min(b1.y1, b2.y1) - max(b1.y0, b2.y0) > 0.5):
                            out.append(f"tick labels on each other on the {name} axis: {t1[:30]!r} and {t2[:30]!r}")
    return out


def _literal_subscripts(fig, hidden) -> list[str]:
    """:func:`layout_problems`' lines for visible texts with an underscore subscript outside ``$...$``."""
    out = []
    for t in _texts(fig):  # "ε_L" typed as text shows its underscore: subscripts belong in $...$ (mathtext)
        if id(t) in hidden or not t.get_visible():
            continue
        plain = re.sub(r"(?<!\\)\$.*?(?<!\\)\$", "", t.get_text())
        if _LITERAL_SUBSCRIPT.search(plain):
            out.append(f"a literal underscore subscript in {t.get_text()[:40]!r} (write it as $x_L$)")
    return out


def _legends_over_data(fig, r) -> list[str]:
    """:func:`layout_problems`' lines for visible legends drawn over data of an axes."""
    from matplotlib.legend import Legend

    out = []
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    for leg in legends:
        if not isinstance(leg, Legend) or not leg.get_visible():
            continue
        lb = leg.get_window_extent(r)
        for ax in fig.axes:
            ab = ax.bbox  # data outside the axes is clipped: only the common part counts
            box = (max(lb.x0, ab.x0) + 1, max(lb.y0, ab.y0) + 1, min(lb.x1, ab.x1) - 1, min(lb.y1, ab.y1) - 1)
            if box[0] >= box[2] or box[1] >= box[3]:
                continue
            hit = _data_in_box(ax, box)
            if hit is not None:
                out.append(f"legend covers data of {str(hit)[:40]!r}")
                break
    return out


def _offscale_markers_on_each_other(fig, lines) -> list[str]:
    """:func:`layout_problems`' lines for off-scale markers of different series closer than 0.6 marker."""
    out = []
    edge = []
    for ln in lines:
        if ln.get_clip_on() or ln.get_marker() in (None, "", "none"):
            continue
        pts = _display_points(ln, ln.get_xdata(), ln.get_ydata())
        edge += [(tuple(p), ln.get_markersize() * fig.dpi / 72.0, ln) for p in pts if np.all(np.isfinite(p))]
    for i, (p, size, ln) in enumerate(edge):
        for q, size2, ln2 in edge[i + 1:]:
            if ln2 is not ln and np.hypot(p[0] - q[0], p[1] - q[1]) < 0.6 * min(size, size2):
                out.append(f"off-scale markers on each other: {ln.get_label()[:30]!r} and {ln2.get_label()[:30]!r}")
    return out


def _values_drawn_at_zero(ax, lines) -> list[str]:
    """:func:`layout_problems`' lines for values <= 0 on a log axis or below 1/20 of a symlog threshold."""
    out = []
    for name, scale in (("x", ax.get_xscale()), ("y", ax.get_yscale())):
        if scale not in ("log", "symlog"):
            continue
        for ln in lines:
            if ln.get_transform() is not ax.transData:
                continue  # drawn in axes coordinates (an off-scale marker at the edge)
            v = np.asarray(ln.get_xdata() if name == "x" else ln.get_ydata(), dtype=float)
            if scale == "log" and np.any(np.isfinite(v) & (v <= 0)):
                out.append(f"{ln.get_label()[:40]!r}: a value <= 0 drawn as nothing on a log {name} axis "
                           "(use plot_log_series to mark it at the edge)")
            if scale == "symlog":
                thresh = (ax.xaxis if name == "x" else ax.yaxis).get_transform().linthresh
                if np.any((v > 0) & (v < thresh / 20)):
                    out.append(f"{ln.get_label()[:40]!r}: a positive value drawn as 0 on a symlog {name} axis "
                               f"(below {thresh:g}/20)")
    return out


def savefig(fig, name: str, caption_meta: dict | None = None, *, extra: dict | None = None) -> Path:
    """Save *fig* as ``<figures>/<name>.png`` and its vector copy ``<figures>/<name>.pdf``.

    The PNG has :data:`DPI` (200) dots per inch, more where needed for a width of at least
    :data:`MIN_PNG_PX` (1,200) pixels. Texts (tick labels, legends, titles) smaller than
    :data:`MIN_FONT_PT` as the book displays them (:func:`min_display_font_pt`) are raised
    to that size first, so no figure of the book has unreadable text, and titles wider than
    their panel (the suptitle: than the figure) are wrapped (:func:`fit_titles`), and a figure
    whose titles or legend stick out at the top or bottom is made taller (:func:`grow_to_fit`;
    the layout is drawn and checked at the PNG's dpi). The PNG
    records the figure's smallest font size (points at the figure's size) under
    :data:`MIN_FONT_KEY`, for the browser test's check at the displayed width.

    *caption_meta* (e.g. ``{"mode": "quick", "N": 60000, "q": 0.004, "sigma": 1.1}``)
    is stored in the PNG/PDF metadata (``Description`` / ``Subject``) and in
    ``<figures>/<name>.json`` beside them, so a figure can be traced back to its
    parameters. *extra* (e.g. commit and wall time, see
    :func:`paperlib.artifact.notebook.show_figure`) is stored in the JSON sidecar only; the
    sidecar also records ``png_px`` (width, height), ``dpi``, ``vector`` (the PDF's file
    name), ``min_font_pt`` (the smallest displayed font size) and ``layout_problems``
    (:func:`layout_problems`: clipped text, a legend over data, off-scale markers on each
    other, tick labels on each other, a value drawn at 0 on a log or symlog axis, text below 8 pt; the book's tests
    require it empty).

    Returns
    -------
    pathlib.Path
        The PNG path.

    Raises
    ------
    ValueError
        If *name* is empty or contains a path separator.
    TypeError
        If *caption_meta* is not JSON serialisable.
    OSError
        If the files cannot be written.
    """
    if not isinstance(name, str) or not name or "/" in name or "\\" in name:
        raise ValueError(f"figure name must be a non-empty file name without '/', got {name!r}")
    meta = dict(caption_meta or {})
    from paperlib.artifact.provenance import _to_jsonable, write_json_atomic

    meta_json = json.dumps(_to_jsonable(meta), sort_keys=True)
    out = figures_dir()
    out.mkdir(parents=True, exist_ok=True)
    png = out / f"{name}.png"
    pdf = out / f"{name}.pdf"
    _raise_small_fonts(fig)
    width_in = float(fig.get_figwidth())
    dpi = max(DPI, math.ceil(MIN_PNG_PX / width_in))
    # write to temporary names then rename, so a half-written figure never looks complete
    tmp_png = out / f".{name}.tmp.png"
    tmp_pdf = out / f".{name}.tmp.pdf"
    sizes = [t.get_fontsize() for t in _texts(fig)]
    # the layout is drawn, grown and checked at the PNG's own dpi: what layout_problems sees is
    # what the PNG shows (a constrained layout can differ by a few pixels from one dpi to another)
    screen_dpi = fig.get_dpi()
    fig.set_dpi(dpi)
    try:
        fit_titles(fig)  # at the PNG's dpi too: text is a little wider at 200 dpi than at 100
        grow_to_fit(fig)
        fig.savefig(tmp_png, dpi=dpi, metadata={"Description": meta_json, "Software": "paperlib",
                                                MIN_FONT_KEY: f"{min(sizes) if sizes else 0.0:.3f}"})
        problems = layout_problems(fig)
    finally:
        fig.set_dpi(screen_dpi)
    fig.savefig(tmp_pdf, metadata={"Subject": meta_json, "Creator": "paperlib"})
    os.replace(tmp_png, png)
    os.replace(tmp_pdf, pdf)
    px = _png_size(png)
    info = {"png_px": list(px), "dpi": dpi, "vector": pdf.name, "min_font_pt": round(min_display_font_pt(fig), 2),
            "layout_problems": problems}
    write_json_atomic(out / f"{name}.json", {"figure": name, "caption_meta": meta, **info,
                                             **_to_jsonable(dict(extra or {}))})
    return png


def _png_size(path: Path) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's IHDR chunk."""
    import struct

    with open(path, "rb") as fh:
        head = fh.read(24)
    return struct.unpack(">II", head[16:24])
