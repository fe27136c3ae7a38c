"""One figure style for the whole book.

Every trade-off figure uses :func:`new_axes` (axes FPR (α) / FNR (β) on [0, 1] with
the dashed identity line β = 1 − α, i.e. perfect privacy) and the colours in
:data:`COLORS`, so that "SGM claim", "guarantee", "upper bound", "CLT bound" and
"audit" look the same in every chapter. :func:`savefig` writes
``figures/<name>.png`` (150 dpi) and ``.pdf``; the directory can be changed with
the environment variable ``PAPERLIB_FIGURES``.

The non-interactive ``Agg`` backend is selected only when no backend was chosen
(no ``MPLBACKEND`` and matplotlib not yet imported with one); notebooks keep
their inline backend.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

if "matplotlib.pyplot" not in sys.modules and not os.environ.get("MPLBACKEND") and "ipykernel" not in sys.modules:
    import matplotlib

    matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["COLORS", "LINESTYLES", "FIGURES_ENV", "figures_dir", "new_axes", "savefig"]

FIGURES_ENV = "PAPERLIB_FIGURES"

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


def savefig(fig, name: str, caption_meta: dict | None = None, *, extra: dict | None = None) -> Path:
    """Save *fig* as ``<figures>/<name>.png`` (dpi 150) and ``<figures>/<name>.pdf``.

    *caption_meta* (e.g. ``{"mode": "quick", "N": 60000, "q": 0.004, "sigma": 1.1}``)
    is stored in the PNG/PDF metadata (``Description`` / ``Subject``) and in
    ``<figures>/<name>.json`` beside them, so a figure can be traced back to its
    parameters. *extra* (e.g. commit and wall time, see
    :func:`paperlib.artifact.figures.show_figure`) is stored in the JSON sidecar only.

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
    # write to temporary names then rename, so a half-written figure never looks complete
    tmp_png = out / f".{name}.tmp.png"
    tmp_pdf = out / f".{name}.tmp.pdf"
    fig.savefig(tmp_png, dpi=150, metadata={"Description": meta_json, "Software": "paperlib"})
    fig.savefig(tmp_pdf, metadata={"Subject": meta_json, "Creator": "paperlib"})
    os.replace(tmp_png, png)
    os.replace(tmp_pdf, pdf)
    write_json_atomic(out / f"{name}.json", {"figure": name, "caption_meta": meta, **_to_jsonable(dict(extra or {}))})
    return png
