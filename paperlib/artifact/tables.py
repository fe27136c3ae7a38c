"""Tables a reader can read: :func:`show_table` shows rows as a numbered HTML table.

The book shows a notebook's ``text/html`` output as it is, inside the content column; a
plain ``<table>`` with many columns runs off the right edge there and hides the columns
that carry the verdict. The tables made here never do:

* at 100 % of the column, cells wrap (at any character if need be: ``overflow-wrap:
  anywhere``, which lets a column shrink below its longest word), the font shrinks for many
  columns;
  the style is inline, so it holds in Jupyter too, and ``book/_static/paperlib.css`` adds
  the book's look (class ``paperlib-table``);
* a caption ``"Table <chapter>.<k>: ..."`` numbered within its chapter: the chapter is the
  two-digit prefix of the table's ``name`` (``"04_normality_tests"`` is in chapter 4, the
  notebook ``04_...``), ``k`` counts the chapter's tables in the order they are shown
  (Sphinx's ``numfig`` cannot number a table that a notebook prints, so a number typed in
  the prose would drift; this one cannot);
* numbers rounded to what the measurement supports: ``digits`` significant digits (per
  column or for all), or a format per column (``formats``); ``inf`` is ``∞``, NaN ``–``.

The HTML element has the id ``tab-<name>`` (``_`` as ``-``), for a link from the prose.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = ["LINE_BREAK", "SOFT_BREAK", "show_table", "number_of", "Table", "render_html", "format_value", "chapter_of", "reset_numbering"]

# name -> number "C.k", and the last k per chapter (the kernel's tables so far)
_NUMBERS: dict[str, str] = {}
_COUNT: dict[int, int] = {}

# Automatic layout at the column's width: columns get what their content needs and, when the
# row is too long, shrink down to their longest word. Numbers never break, words break only at
# spaces (a header broken letter by letter is unreadable); only a token longer than
# _LONG_TOKEN characters (a path, an identifier) may break anywhere. A table whose columns
# still do not fit scrolls sideways inside its wrapper (overflow-x:auto).
_LONG_TOKEN = 30
_TABLE_STYLE = ("table-layout:auto;width:100%;border-collapse:collapse;"
                "overflow-wrap:normal;word-break:normal;font-size:{size}")
_CELL_STYLE = "padding:0.2em 0.3em;vertical-align:top;border-bottom:1px solid #ddd;text-align:{align}{wrap}"


def _wrap(text: str, numeric: bool, longest: int) -> str:
    """Per-cell wrapping: numbers never break; words break only when longer than ``longest``."""
    if numeric:
        return ";white-space:nowrap"
    if any(len(w) > longest for w in text.split()):
        return ";overflow-wrap:anywhere"
    return ";overflow-wrap:break-word"


def reset_numbering() -> None:
    """Forget the tables shown so far (numbering restarts at ``k = 1`` in every chapter)."""
    _NUMBERS.clear()
    _COUNT.clear()


def number_of(name: str) -> str:
    """The number ``"C.k"`` that :func:`show_table` gave the table ``name`` (to glue into the prose).

    Raises
    ------
    KeyError
        If no table of that name was shown yet.
    """
    if name not in _NUMBERS:
        raise KeyError(f"no table named {name!r} was shown yet (show_table(..., name={name!r}) first)")
    return _NUMBERS[name]


def chapter_of(name: str) -> int:
    """The chapter of a table or figure named ``"NN_..."``: ``int(NN)``.

    Raises
    ------
    ValueError
        If ``name`` does not start with two digits and ``_`` or uses characters other than
        letters, digits, ``_`` and ``-``.
    """
    m = re.fullmatch(r"(\d{2})_[A-Za-z0-9_-]+", name) if isinstance(name, str) else None
    if not m:
        raise ValueError(f"table name must look like 'NN_words' (NN the notebook's two-digit number; "
                         f"letters, digits, '_' and '-'), got {name!r}")
    return int(m.group(1))


def format_value(v: Any, spec: str | Callable[[Any], str] | None = None, digits: int | None = 3) -> str:
    """One cell as text.

    ``spec``: a format spec (``".2f"``, ``",d"``) or a callable, used for every non-missing
    value. Otherwise floats get ``digits`` significant digits (``None``: ``str``), integers a
    thousands separator; ``inf`` is ``∞``, NaN and ``None`` are ``–``; booleans ``yes``/``no``.
    """
    if v is None:
        return "–"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if math.isnan(f):
            return "–"
        if math.isinf(f):
            return "∞" if f > 0 else "−∞"
    if callable(spec):
        return str(spec(v))
    if spec is not None:
        return format(v, spec)
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,d}"
    if isinstance(v, (float, np.floating)):
        if digits is None:
            return str(float(v))
        f = float(v)
        if f != 0 and f.is_integer() and abs(f) < 10 ** digits:
            return f"{int(f):,d}"
        return _sig(f, digits)
    return str(v)


def _sig(f: float, digits: int) -> str:
    if f == 0:
        return "0"
    mag = math.floor(math.log10(abs(f)))
    if -4 <= mag < 6:
        decimals = max(digits - 1 - mag, 0)
        return f"{round(f, decimals):,.{decimals}f}"
    return f"{f:.{max(digits - 1, 0)}e}"


#: A number in e-notation ("1e-05", "2.5e+3"): a browser breaks a line after its hyphen ("δ = 1e-" /
#: "05" in a narrow header), so it is kept on one line.
_E_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?e[-+−]\d+(?![\w.])")


def _keep_numbers_whole(escaped: str) -> str:
    return _E_NUMBER.sub(lambda m: f'<span style="white-space:nowrap">{m.group(0)}</span>', escaped)


LINE_BREAK = "\n"
"""In a markup cell: a line break (``<br>`` in HTML, a space in Markdown)."""
SOFT_BREAK = "\u200b"
"""In a markup cell: where a long token may break if it must (``<wbr>`` in HTML, nothing in
Markdown), e.g. after each ``\\s*`` of a regular expression, which has no spaces to break at."""


def _cell_html(text: str, markup: bool) -> str:
    if not markup:
        return _keep_numbers_whole(html.escape(text))
    out = []
    for i, part in enumerate(text.split("`")):  # odd parts are code
        part = html.escape(part)
        out.append(f"<code>{part}</code>" if i % 2
                   else _keep_numbers_whole(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", part)))
    return "".join(out).replace(LINE_BREAK, "<br>").replace(SOFT_BREAK, "<wbr>")


def _cell_markdown(text: str) -> str:
    """A cell of a Markdown table: pipes escaped, line breaks as spaces, soft breaks dropped."""
    return text.replace("|", "\\|").replace(LINE_BREAK, " ").replace(SOFT_BREAK, "")


def _header_html(text: str, markup: bool) -> str:
    """A header cell: as :func:`_cell_html`, and a line may also break after a ``/`` (``<wbr>``), so
    that a header such as "ε_L chi2/probability/ties=½" wraps at its slashes, never letter by letter."""
    return re.sub(r"(?<!<)/", "/<wbr>", _cell_html(text, markup))


def _numeric(text: str) -> bool:
    return bool(re.fullmatch(r"[−+-]?[\d,.]+(e[−+-]?\d+)?%?|∞|−∞|–", text.strip()))


def render_html(headers: Sequence[str], rows: Sequence[Sequence[str]], *, caption: str | None = None,
                table_id: str | None = None, markup: bool = False) -> str:
    """An HTML table of already formatted cells that wraps instead of overflowing its container.

    ``markup``: cells may hold ```code```, ``**bold**``, :data:`LINE_BREAK` and :data:`SOFT_BREAK`
    (rendered as such); otherwise all text is escaped.
    """
    ncol = max(len(headers), 1)
    size = "100%" if ncol <= 6 else ("90%" if ncol <= 9 else "80%")
    numeric = [all(_numeric(r[j]) for r in rows if j < len(r)) and bool(rows) for j in range(len(headers))]
    style = _TABLE_STYLE.format(size=size)
    ident = f' id="{html.escape(table_id)}"' if table_id else ""
    cap = (f'<caption style="caption-side:top;text-align:left;padding:0.3em 0">{html.escape(caption)}</caption>'
           if caption else "")
    head = "".join(f'<th style="{_CELL_STYLE.format(align="right" if numeric[j] else "left", wrap=_wrap(h, False, _LONG_TOKEN))}">'
                   f"{_header_html(h, markup)}</th>" for j, h in enumerate(headers))

    def td(j, c):
        num = j < len(numeric) and numeric[j]
        style = _CELL_STYLE.format(align="right" if num else "left", wrap=_wrap(c, num and _numeric(c), _LONG_TOKEN))
        return f'<td style="{style}">{_cell_html(c, markup)}</td>'

    body = "".join("<tr>" + "".join(td(j, c) for j, c in enumerate(r)) + "</tr>" for r in rows)
    return (f'<div class="paperlib-table-wrap" style="max-width:100%;overflow-x:auto">'
            f'<table class="paperlib-table"{ident} style="{style}">{cap}<thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


class Table:
    """The one table of the book and the command line: formatted cells under headers.

    HTML for the book and Jupyter (:func:`render_html`: it wraps within the page width; myst-nb
    prefers ``text/html``, and renders Markdown outputs as CommonMark, which has no tables), Markdown
    as text (:meth:`markdown`: pipes escaped). ``caption`` and ``table_id`` are set by
    :func:`show_table` for a numbered table; ``markup`` lets cells hold ```code```, ``**bold**``
    and the line breaks of this module. Made by :func:`show_table` and
    :func:`paperlib.artifact.notebook.markdown_table`.
    """

    def __init__(self, headers, rows, *, caption: str | None = None, table_id: str | None = None,
                 markup: bool = False):
        self.headers = [str(h) for h in headers]
        self.rows = [[str(c) for c in r] for r in rows]
        self.caption = caption
        self.table_id = table_id
        self.markup = markup

    def _repr_html_(self) -> str:
        return render_html(self.headers, self.rows, caption=self.caption, table_id=self.table_id,
                           markup=self.markup)

    def markdown(self) -> str:
        """The table as Markdown text (caption in bold above it)."""
        lines = ([f"**{self.caption}**", ""] if self.caption else [])
        lines += ["| " + " | ".join(map(_cell_markdown, self.headers)) + " |", "|" + "---|" * len(self.headers)]
        lines += ["| " + " | ".join(map(_cell_markdown, r)) + " |" for r in self.rows]
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        return self.markdown()


def show_table(rows, columns: Sequence[str] | Mapping[str, str] | None = None, *, name: str, caption: str,
               digits: int | Mapping[str, int] | None = 3,
               formats: Mapping[str, str | Callable[[Any], str]] | None = None,
               markup: bool = False, display: bool = True) -> Table | None:
    """Show ``rows`` as the next numbered table of its chapter ("Table <chapter>.<k>: caption").

    Parameters
    ----------
    rows : list of dict, list of sequences, or an object with ``header``/``headers`` and ``rows``
        One entry per row. For dicts, ``columns`` picks and orders the keys (default: the
        first row's keys); for sequences, ``columns`` names the columns (required).
    columns : sequence of str, or dict key -> header
        The columns, or (a dict) the keys to show and the header of each.
    name : str
        ``"NN_words"``: NN is the chapter (the notebook's number); also the id ``tab-NN-words``.
        Showing the same name again keeps its number.
    caption : str
        Plain text after "Table C.k: ".
    digits : int, dict column -> int, or None
        Significant digits of float cells (default 3), for all columns or per column (by key
        or header); columns not in the dict get 3.
    formats : dict column -> format spec or callable
        Overrides ``digits`` for those columns (e.g. ``{"N": ",d", "ε_L": ".2f"}``).
    markup : bool
        Cells may hold ```code```, ``**bold**``, :data:`LINE_BREAK` and :data:`SOFT_BREAK`.
    display : bool
        Display the table (IPython) and return ``None`` (default); else return it.

    Raises
    ------
    ValueError
        If ``name`` is malformed, ``caption`` is empty, sequence rows come without
        ``columns``, or a row has another number of cells than there are columns.
    """
    chapter = chapter_of(name)
    if not isinstance(caption, str) or not caption.strip():
        raise ValueError("caption must be a non-empty string (what the table shows)")
    keys, headers, table = _table_columns(rows, columns)
    formats = dict(formats or {})

    def col_opt(opts, j, default):
        if not isinstance(opts, Mapping):
            return opts
        for k in (keys[j], headers[j]):
            if k in opts:
                return opts[k]
        return default

    cells = [[format_value(v, col_opt(formats, j, None), col_opt(digits, j, 3)) for j, v in enumerate(r)]
             for r in table]
    if name not in _NUMBERS:
        _COUNT[chapter] = _COUNT.get(chapter, 0) + 1
        _NUMBERS[name] = f"{chapter}.{_COUNT[chapter]}"
    out = Table(headers, cells, caption=f"Table {_NUMBERS[name]}: {caption.strip()}",
                    table_id="tab-" + name.replace("_", "-"), markup=markup)
    if not display:
        return out
    _display_table(out)
    return None


def _table_columns(rows, columns):
    """The keys, headers and cell values (one list per row) of :func:`show_table`'s ``rows``."""
    if hasattr(rows, "rows") and (hasattr(rows, "header") or hasattr(rows, "headers")):
        heads = list(getattr(rows, "headers", None) or rows.header)
        rows, columns = [list(r) for r in rows.rows], heads
    rows = list(rows)
    if rows and isinstance(rows[0], Mapping):
        if columns is None:
            columns = list(rows[0].keys())
        keys = list(columns.keys()) if isinstance(columns, Mapping) else list(columns)
        headers = [columns[k] for k in keys] if isinstance(columns, Mapping) else keys
        table = [[r.get(k) for k in keys] for r in rows]
    else:
        if columns is None:
            raise ValueError("columns is required when rows are sequences (one header per cell)")
        keys = list(columns.keys()) if isinstance(columns, Mapping) else list(columns)
        headers = [columns[k] for k in keys] if isinstance(columns, Mapping) else keys
        table = [list(r) for r in rows]
        for i, r in enumerate(table):
            if len(r) != len(keys):
                raise ValueError(f"row {i} has {len(r)} cells, expected {len(keys)} (one per column)")
    return keys, headers, table


def _display_table(out: Table) -> None:
    """Display ``out`` in IPython, or print its Markdown outside a notebook."""
    try:
        from IPython import get_ipython
        from IPython.display import display as ipy_display
    except ImportError:
        print(out._repr_markdown_())
        return
    if get_ipython() is None:
        print(out._repr_markdown_())
    else:
        ipy_display(out)
