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
           "new_axes", "savefig", "series_style", "series_kw", "plot_log_series", "offscale_handle",
           "thousands", "min_display_font_pt", "layout_problems"]

FIGURES_ENV = "PAPERLIB_FIGURES"

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


def plot_log_series(ax, x, y, *, color: str, marker: str = "o", label: str | None = None,
                    line: bool = False, axis: str = "y", **kw) -> dict:
    """Plot ``y`` against ``x`` on a log ``axis`` (``"y"`` or ``"x"``), off-scale values marked.

    Positive finite values are plotted as usual (joined by a line if ``line``). Values a log
    axis cannot show are drawn at the axes' edge in the series colour, in axes coordinates
    so that they never move the limits: ``0`` (or negative, e.g. ε_L = 0) as ▼ at the
    bottom (◀ at the left for ``axis="x"``), ``+inf`` as ▲ at the top (▶ at the right). NaN
    is skipped. A line is broken at off-scale values, never drawn to a plateau. Add
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
    for mask, pos, mk in ((low, 0.0, "v" if axis == "y" else "<"), (high, 1.0, "^" if axis == "y" else ">")):
        if mask.any():
            o = other[mask]
            e = np.full(o.shape, pos)
            xy = (o, e) if axis == "y" else (e, o)
            ax.plot(*xy, transform=trans, marker=mk, **edge)
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


def layout_problems(fig) -> list[str]:
    """What a reader of the saved PNG would see wrong, from the drawing's bounding boxes.

    Text clipped by the canvas is not visible to the browser's DOM (it is inside the image), so
    it is checked here, on the rendered drawing: every visible text (titles, labels, ticks,
    legend entries) must lie inside the figure; a legend inside an axes must not cover a data
    point of that axes; two off-scale markers (drawn at an axes' edge, ``clip_on=False``) must
    not sit on each other; and on a symlog axis a positive value far below the linear
    threshold is drawn as 0, so none may be plotted there. Returns one line per problem
    (empty when there is none).
    """
    from matplotlib.legend import Legend
    from matplotlib.lines import Line2D

    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    W, H = fig.bbox.width, fig.bbox.height
    out = []
    ticks = set()
    for ax in fig.axes:  # tick labels of ticks outside the view are not drawn
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                inside = lo - 1e-9 * max(1.0, abs(lo)) <= tick.get_loc() <= hi + 1e-9 * max(1.0, abs(hi))
                for lab in (tick.label1, tick.label2):
                    ticks.add((id(lab), inside))
    hidden = {i for i, inside in ticks if not inside}
    for t in _texts(fig):
        if not t.get_visible() or not t.get_text().strip() or id(t) in hidden:
            continue
        bb = t.get_window_extent(r)
        if bb.x0 < -1 or bb.y0 < -1 or bb.x1 > W + 1 or bb.y1 > H + 1:
            out.append(f"text clipped by the figure's edge: {t.get_text()[:40]!r}")
    for ax in fig.axes:
        lines = [ln for ln in ax.get_lines() if ln.get_visible() and len(ln.get_xdata())]
        leg = ax.get_legend()
        if isinstance(leg, Legend) and leg.get_visible():
            lb = leg.get_window_extent(r)
            if ax.bbox.contains(lb.x0 + 1, lb.y0 + 1) or ax.bbox.contains(lb.x1 - 1, lb.y1 - 1):
                for ln in lines:
                    pts = ln.get_transform().transform(np.column_stack([ln.get_xdata(), ln.get_ydata()]).astype(float))
                    inside = [p for p in pts if np.all(np.isfinite(p)) and ax.bbox.contains(*p)]
                    if any(lb.contains(*p) for p in inside):
                        out.append(f"legend covers data of {ln.get_label()[:40]!r}")
                        break
        edge = []
        for ln in lines:
            if ln.get_clip_on() or ln.get_marker() in (None, "", "none"):
                continue
            pts = ln.get_transform().transform(np.column_stack([ln.get_xdata(), ln.get_ydata()]).astype(float))
            edge += [(tuple(p), ln.get_markersize() * fig.dpi / 72.0, ln) for p in pts if np.all(np.isfinite(p))]
        for i, (p, size, ln) in enumerate(edge):
            for q, size2, ln2 in edge[i + 1:]:
                if ln2 is not ln and np.hypot(p[0] - q[0], p[1] - q[1]) < 0.6 * min(size, size2):
                    out.append(f"off-scale markers on each other: {ln.get_label()[:30]!r} and {ln2.get_label()[:30]!r}")
        if ax.get_yscale() == "symlog":
            thresh = ax.yaxis.get_transform().linthresh
            for ln in lines:
                y = np.asarray(ln.get_ydata(), dtype=float)
                if np.any((y > 0) & (y < thresh / 20)):
                    out.append(f"{ln.get_label()[:40]!r}: a positive value drawn as 0 on a symlog axis "
                               f"(below {thresh:g}/20)")
    return out


def savefig(fig, name: str, caption_meta: dict | None = None, *, extra: dict | None = None) -> Path:
    """Save *fig* as ``<figures>/<name>.png`` and its vector copy ``<figures>/<name>.pdf``.

    The PNG has :data:`DPI` (200) dots per inch, more where needed for a width of at least
    :data:`MIN_PNG_PX` (1,200) pixels. Texts (tick labels, legends, titles) smaller than
    :data:`MIN_FONT_PT` as the book displays them (:func:`min_display_font_pt`) are raised
    to that size first, so no figure of the book has unreadable text.

    *caption_meta* (e.g. ``{"mode": "quick", "N": 60000, "q": 0.004, "sigma": 1.1}``)
    is stored in the PNG/PDF metadata (``Description`` / ``Subject``) and in
    ``<figures>/<name>.json`` beside them, so a figure can be traced back to its
    parameters. *extra* (e.g. commit and wall time, see
    :func:`paperlib.artifact.figures.show_figure`) is stored in the JSON sidecar only; the
    sidecar also records ``png_px`` (width, height), ``dpi``, ``vector`` (the PDF's file
    name), ``min_font_pt`` (the smallest displayed font size) and ``layout_problems``
    (:func:`layout_problems`: clipped text, a legend over data, off-scale markers on each
    other, a value drawn at 0 on a symlog axis; the book's tests require it empty).

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
    fig.savefig(tmp_png, dpi=dpi, metadata={"Description": meta_json, "Software": "paperlib"})
    fig.savefig(tmp_pdf, metadata={"Subject": meta_json, "Creator": "paperlib"})
    os.replace(tmp_png, png)
    os.replace(tmp_pdf, pdf)
    px = _png_size(png)
    info = {"png_px": list(px), "dpi": dpi, "vector": pdf.name, "min_font_pt": round(min_display_font_pt(fig), 2),
            "layout_problems": layout_problems(fig)}
    write_json_atomic(out / f"{name}.json", {"figure": name, "caption_meta": meta, **info,
                                             **_to_jsonable(dict(extra or {}))})
    return png


def _png_size(path: Path) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's IHDR chunk."""
    import struct

    with open(path, "rb") as fh:
        head = fh.read(24)
    return struct.unpack(">II", head[16:24])
