"""Small helpers shared by the book's notebooks.

Nothing here is mathematics: the curves come from :mod:`paperlib.mechanisms.guarantees`,
:mod:`paperlib.fdp.tradeoff` and :mod:`paperlib.fdp.clt`. This module only

* picks mode-dependent sizes (:func:`pick`),
* points ``results/`` and ``figures/`` at the repository root whatever the working
  directory (:func:`setup_output_dirs`),
* wraps :func:`paperlib.artifact.provenance.load_result` / :func:`~paperlib.artifact.provenance.save_result`
  into one call that computes on a cache miss (:func:`cached`),
* samples a curve object into plain ``(alpha, beta)`` arrays (:func:`curve_points`) and
  reads it at a given FNR (:func:`fpr_at_fnr`),
* draws multi-panel trade-off figures in the style of :func:`paperlib.artifact.plotting.new_axes`
  (:func:`new_grid`, :func:`style_axes`, :func:`plot_curve`; several series of one kind
  get :func:`paperlib.artifact.plotting.series_kw`, never shades of one hue),
* formats small result tables (:func:`markdown_table`),
* shows a finished figure in the book's one numbering scheme (:func:`show_figure`): the
  figure is saved, glued for a ``{glue:figure}`` directive (Sphinx numbers it
  "Figure <chapter>.<k>") together with a provenance line (mode, parameters, seed,
  commit), and displayed inline for Jupyter readers.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from paperlib.artifact import plotting
from paperlib.artifact.provenance import RESULTS_ENV, _to_jsonable, load_result, save_result
from paperlib.fdp.tradeoff import TradeOff

__all__ = [
    "MODES",
    "pick",
    "start_notebook",
    "repo_root",
    "setup_output_dirs",
    "cached",
    "curve_points",
    "fpr_at_fnr",
    "style_axes",
    "new_grid",
    "plot_curve",
    "markdown_table",
    "show_figure",
    "provenance_text",
    "INLINE_COPY_KEY",
]

#: Output metadata key of the inline copy that :func:`show_figure` displays for Jupyter
#: readers; :mod:`paperlib.artifact.booktags` strips those outputs from the book's notebooks,
#: where the numbered ``{glue:figure}`` shows the figure instead.
INLINE_COPY_KEY = "paperlib_inline_copy"

# Start of the interval that the next figure's sidecar "wall_time_s" covers: this module's import
# (a notebook's imports cell), then each shown figure.
_CLOCK = {"t": time.perf_counter()}

MODES = ("smoke", "quick", "full")


def pick(mode: str, *, smoke, quick, full):
    """Return the value for ``mode`` (one of :data:`MODES`); ValueError for any other mode."""
    if mode not in MODES:
        raise ValueError(f"MODE must be one of {MODES}, got {mode!r}")
    return {"smoke": smoke, "quick": quick, "full": full}[mode]


def start_notebook(mode: str) -> float:
    """The set-up every notebook runs first; returns its start time (``time.perf_counter()``).

    Checks ``mode`` (one of :data:`MODES`), points ``results/`` and ``figures/`` at the
    repository (:func:`setup_output_dirs`) and starts the clock that the first figure's
    wall time (:func:`show_figure`) is measured from.

    Raises
    ------
    ValueError
        If ``mode`` is not one of :data:`MODES`.
    """
    if mode not in MODES:
        raise ValueError(f"MODE must be one of {MODES}, got {mode!r}")
    setup_output_dirs()
    _CLOCK["t"] = time.perf_counter()
    return _CLOCK["t"]


def repo_root() -> Path | None:
    """The source checkout that holds this package (editable install), or ``None``.

    Recognised by a ``Makefile`` and a ``notebooks/`` folder beside the ``paperlib/``
    package folder.
    """
    root = Path(__file__).resolve().parents[2]
    if (root / "Makefile").is_file() and (root / "notebooks").is_dir():
        return root
    return None


def setup_output_dirs() -> tuple[Path, Path]:
    """Make ``results/`` and ``figures/`` independent of the working directory.

    When ``PAPERLIB_RESULTS`` / ``PAPERLIB_FIGURES`` are unset and the package sits in
    a source checkout, they are set to ``<checkout>/results`` and ``<checkout>/figures``
    (papermill runs notebooks from the repository root, nbval and Jupyter from
    ``notebooks/``; both then write to the same place). Values already set (``make
    test`` sets them) are kept. Returns ``(results_dir, figures_dir)``.
    """
    root = repo_root()
    if root is not None:
        os.environ.setdefault(RESULTS_ENV, str(root / "results"))
        os.environ.setdefault(plotting.FIGURES_ENV, str(root / "figures"))
    from paperlib.artifact.provenance import results_dir

    return results_dir(), plotting.figures_dir()


def cached(name: str, params: dict, compute: Callable[[], Any], *, mode: str, seed: int | None):
    """Return ``(data, info)``: ``results/<name>.json`` if made with ``params``, else ``compute()``.

    On a miss ``compute()`` runs, is timed and stored with :func:`save_result`. The
    data are returned as they read back from JSON in both cases (lists, not numpy
    arrays), so a cache hit and a fresh run behave the same. ``info`` is
    ``{"cached": bool, "wall_time_s": float | None}`` (the time of this run, or
    ``None`` on a hit).
    """
    data = load_result(name, params)
    if data is not None:
        return data, {"cached": True, "wall_time_s": None}
    t0 = time.perf_counter()
    data = compute()
    wall = time.perf_counter() - t0
    save_result(name, params, data, mode=mode, seed=seed, wall_time=wall)
    return json.loads(json.dumps(_to_jsonable(data))), {"cached": False, "wall_time_s": wall}


def curve_points(obj, tol: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """Sampled vertices ``(alpha, beta)`` of a curve object, ``alpha`` ascending from 0 to 1.

    ``obj`` is any :class:`~paperlib.fdp.tradeoff.TradeOff` (an
    :class:`~paperlib.fdp.mixture.LRMixture` is sampled to chord error ``tol``; every type
    takes ``tol``) or anything with ``alpha`` and ``beta`` arrays. Joining the vertices with
    straight lines draws the curve to within ``tol``. Floating-point warnings raised while
    sampling (slopes of curves that fall to 0 within ``alpha`` of order 1e-300) are silenced.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        c = obj.curve(tol) if isinstance(obj, TradeOff) else obj
    return np.asarray(c.alpha, dtype=float), np.asarray(c.beta, dtype=float)


def fpr_at_fnr(alpha, beta, fnr: float = 0.5) -> float:
    """FPR at which a sampled trade-off curve falls to FNR ``fnr``: ``inf{a : f(a) <= fnr}``.

    ``alpha`` ascending, ``beta`` non-increasing (vertices of a convex curve joined by
    chords). Returns 0 when ``f(0) <= fnr`` and ``nan`` when the curve never gets down
    to ``fnr``. NaN entries (e.g. a CLT bound outside its range) are skipped.
    """
    a = np.asarray(alpha, dtype=float)
    b = np.asarray(beta, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if a.size == 0:
        return float("nan")
    below = np.flatnonzero(b <= fnr)
    if below.size == 0:
        return float("nan")
    j = int(below[0])
    if j == 0:
        return float(a[0])
    a0, a1, b0, b1 = a[j - 1], a[j], b[j - 1], b[j]
    return float(a0 + (b0 - fnr) * (a1 - a0) / (b0 - b1))


def style_axes(ax, title: str | None = None, *, labels: bool = True):
    """Give ``ax`` the look of :func:`paperlib.artifact.plotting.new_axes` (for panels of a grid).

    [0, 1] limits, equal aspect, light grid, dashed grey line beta = 1 - alpha, axis
    labels FPR (α) / FNR (β) unless ``labels`` is False. On an axis already log-scaled the
    limits start at the data instead of 0 and the aspect stays free (a log axis has no 0;
    matplotlib would warn and print this file's path on the page).
    """
    ax.plot([0, 1], [1, 0], linestyle="--", color="#BBBBBB", linewidth=1.0, label="β = 1 − α", zorder=0)
    linear = ax.get_xscale() == "linear" and ax.get_yscale() == "linear"
    if ax.get_xscale() == "linear":
        ax.set_xlim(0, 1)
    if ax.get_yscale() == "linear":
        ax.set_ylim(0, 1)
    if linear:
        ax.set_aspect("equal")
    if labels:
        ax.set_xlabel("FPR (α)")
        ax.set_ylabel("FNR (β)")
    ax.grid(True, alpha=0.3, linewidth=0.5)
    if title:
        ax.set_title(title)
    return ax


def new_grid(nrows: int, ncols: int, titles=None, *, panel: float = 3.3):
    """``(fig, axes)`` with ``nrows x ncols`` trade-off panels (``axes`` a 2-D array).

    Panels are square, ``panel`` inches wide, or narrower so that the figure is at most
    :data:`paperlib.artifact.plotting.FIG_WIDTH` (the book's column) wide. Each panel is styled by :func:`style_axes`; only the outer panels carry axis labels.
    ``titles`` is an optional flat list (row-major) of panel titles.
    """
    import matplotlib.pyplot as plt

    # As wide as the book's column at most (plotting.FIG_WIDTH), so the fonts are shown at
    # their size; more panels per row make each panel smaller, never the fonts.
    side = min(float(panel), plotting.FIG_WIDTH / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(side * ncols, side * nrows + 0.45), squeeze=False, constrained_layout=True
    )
    titles = list(titles or [])
    for i in range(nrows):
        for j in range(ncols):
            k = i * ncols + j
            ax = axes[i, j]
            style_axes(ax, titles[k] if k < len(titles) else None, labels=False)
            if i == nrows - 1:
                ax.set_xlabel("FPR (α)")
            if j == 0:
                ax.set_ylabel("FNR (β)")
    return fig, axes


def plot_curve(ax, x, y, kind: str, label: str | None = None, **kw):
    """Plot a curve with the book-wide colour and line style of ``kind`` (a key of ``COLORS``).

    ``x``, ``y``: FPR and FNR values. Keyword arguments override the defaults (e.g.
    ``color=`` for a series colour of :func:`paperlib.artifact.plotting.series_kw`, ``alpha=`` for
    transparency).
    """
    style = {"color": plotting.COLORS[kind], "linestyle": plotting.LINESTYLES.get(kind, "-"), "linewidth": 1.6}
    if style["linestyle"] == "none":
        style.update(linestyle="none", marker="o", markersize=3)
    style.update(kw)
    return ax.plot(x, y, label=label, **style)


def markdown_table(headers, rows, floatfmt: str = ".4g", *, name: str | None = None, caption: str | None = None):
    """A :class:`paperlib.artifact.tables.Table` of ``rows`` under ``headers`` (HTML in the book and Jupyter).

    ``rows`` is a list of sequences; floats are formatted with ``floatfmt``, ``inf``
    as ``∞`` and NaN as ``–``; everything else with ``str``. With ``name`` and ``caption``
    the table is the chapter's next numbered table ("Table C.k: caption", see
    :func:`paperlib.artifact.tables.show_table`), returned to be displayed; ValueError if
    only one of the two is given.
    """
    if (name is None) != (caption is None):
        raise ValueError("name and caption go together: a numbered table needs both")

    def fmt(v):
        if isinstance(v, (float, np.floating)):
            if np.isnan(v):
                return "–"
            if np.isinf(v):
                return "∞" if v > 0 else "−∞"
            return format(float(v), floatfmt)
        return str(v)

    from paperlib.artifact.tables import Table, show_table

    table = Table(headers, [[fmt(v) for v in r] for r in rows])
    if name is None:
        return table

    return show_table(table, name=name, caption=caption, display=False)


#: Lists longer than this are written as their first and last values and their length.
_LIST_ITEMS = 6


def _fmt_param(v) -> str:
    """``v`` as caption text: whole values only, never cut inside a word or number.

    A float gets 6 significant digits; a list or tuple of more than :data:`_LIST_ITEMS`
    items is written as its first three and last item with its length
    (``[0, 1, 2, …, 39] (40 values)``); a dict lists every key with its value. The
    caption wraps long lines, so nothing else is shortened.
    """
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (float, np.floating)):
        return format(float(v), ".6g")
    if isinstance(v, (list, tuple, np.ndarray)):
        items = [_fmt_param(x) for x in v]
        if len(items) > _LIST_ITEMS:
            return "[" + ", ".join(items[:3]) + f", …, {items[-1]}] ({len(items)} values)"
        return "[" + ", ".join(items) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_fmt_param(x)}" for k, x in v.items()) + "}"
    return str(v)


def provenance_text(meta: dict, *, commit: str, dirty: bool | None) -> str:
    """The provenance line of a figure caption, as plain text.

    ``meta`` is the figure's parameter dict (as given to :func:`show_figure`; ``mode``
    and ``seed`` are taken out and put first); values are written whole, long lists as
    their ends and length (:func:`_fmt_param`). Example: ``"Mode quick, seed 0; N = 3;
    q = 0.5; commit 1a2b3c4d5e (uncommitted changes)."``. The run's wall time is kept in
    the figure's JSON sidecar, not in the caption: it describes this machine's run, not
    the figure.
    """
    meta = dict(meta)
    mode = meta.pop("mode", None)
    seed = meta.pop("seed", None)
    head = f"Mode {mode if mode is not None else 'n/a'}, seed {seed if seed is not None else 'n/a'}"
    params = "; ".join(f"{k} = {_fmt_param(v)}" for k, v in meta.items())
    sha = commit[:10] if commit and commit != "unknown" else "unknown"
    if dirty:
        sha += " (uncommitted changes)"
    parts = [head] + ([params] if params else []) + [f"commit {sha}"]
    return "; ".join(parts) + "."


def show_figure(fig, name: str, meta: dict, *, close: bool = True) -> None:
    """Save, glue and display a finished figure.

    Returns nothing, so that a call ending a notebook cell displays nothing more; the
    provenance line is in ``figures/<name>.json`` (key ``provenance``).

    ``fig`` (a matplotlib figure) is written by :func:`paperlib.artifact.plotting.savefig` as
    ``figures/<name>.png``/``.pdf`` with a ``<name>.json`` sidecar holding ``meta``, the
    commit and the wall time. The saved PNG (not a new rendering of ``fig``) is then glued
    (myst-nb) under the key ``name`` and its
    provenance line (:func:`provenance_text`) under ``name + "_prov"``, so that a
    Markdown cell ::

        ```{glue:figure} <name>
        :name: fig-<name>

        Caption text.
        ```

    shows it as a numbered figure ("Figure <chapter>.<k>", Sphinx ``numfig``);
    :mod:`paperlib.artifact.booktags` appends the provenance line and a link to the notebook to
    that caption. A copy is also displayed inline (output metadata
    :data:`INLINE_COPY_KEY`) for readers of the notebook in Jupyter; the book drops it.

    The sidecar's wall time is the time since the previous figure of this notebook, or
    since this module was imported: the cells that computed and drew this figure (a few
    seconds when their results came from the ``results/`` cache). It is not in the
    caption.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    name : str
        File stem and glue key: letters, digits, ``_`` and ``-`` only.
    meta : dict
        JSON-serialisable parameters; should hold ``mode`` and ``seed``.
    close : bool
        Close ``fig`` afterwards (default), so Jupyter does not draw it a second time.

    Raises
    ------
    ValueError
        If ``name`` holds other characters.
    TypeError
        If ``meta`` is not a dict or not JSON serialisable.
    """
    import re

    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", name):
        raise ValueError(f"figure name must use letters, digits, '_' and '-' only, got {name!r}")
    if not isinstance(meta, dict):
        raise TypeError(f"meta must be a dict of the figure's parameters, got {type(meta).__name__}")
    from paperlib.artifact.provenance import git_commit

    now = time.perf_counter()
    wall = now - _CLOCK["t"]
    commit, dirty = git_commit()
    text = provenance_text(meta, commit=commit, dirty=dirty)
    plotting.savefig(fig, name, meta, extra={"git_commit": commit, "git_dirty": dirty,
                                             "wall_time_s": wall, "provenance": text})
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
        from myst_nb import glue
    except ImportError:  # plain Python: the files are written, nothing to show
        ipy = None
    else:
        ipy = get_ipython()
    if ipy is not None:
        png = plotting.figures_dir() / f"{name}.png"
        # glue the saved PNG (200 dpi, >= 1,200 px), not the figure object, which the inline
        # backend would render again at its own, lower resolution
        glue(name, Image(filename=str(png)), display=False)
        glue(f"{name}_prov", text, display=False)
        display(Image(filename=str(png)), metadata={INLINE_COPY_KEY: True})
    if close:
        import matplotlib.pyplot as plt

        plt.close(fig)
    _CLOCK["t"] = time.perf_counter()
