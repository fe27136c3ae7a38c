"""Tag executed notebooks for the book: ``python -m paperlib.artifact.booktags NOTEBOOK.ipynb``.

Run by ``make figures`` on each notebook that papermill has executed, before the book
renders it. The default-values cell (tag ``parameters``) is collapsed entirely
(``hide-cell``: one click shows it), not removed: the visible code uses the names it
defines, so every name stays on the page; papermill's ``injected-parameters`` cell, the values
actually used, is appended to it (:func:`_merge_parameters`), so each chapter has one folded
parameters cell. Every other code cell gets ``hide-input``, so a reader
sees prose, figures and tables first and opens the code with one click, except a cell tagged
``edit-here`` (a cell the reader is asked to edit, e.g. chapter 10's "your run"): it stays open.

Figures: :func:`paperlib.artifact.notebook.show_figure` displays an inline copy of each figure for
Jupyter readers; here those copies are dropped, because the book shows the figure
through its numbered ``{glue:figure}`` directive. The caption of every such directive
gets the figure's provenance line (glued as ``<name>_prov``) and a download link to the
executed notebook appended, so every figure in the book states its mode, parameters,
seed and commit and where it was drawn, and a download link to its vector copy
(``figures/<name>.pdf``, copied to ``figures/`` beside the notebook) when there is one.

Console lines: the lines a notebook prints for whoever runs it (its mode/seed echo, "computed
in 2.8 s", "upper bounds: loaded from results/", "notebook 01 finished in 12.9 s (MODE=quick)",
"notebook wall time: ...") say how this run went, not what the chapter found; they are taken
out of the printed outputs (:func:`strip_console_lines`) and kept in the cell's metadata
(key :data:`CONSOLE_KEY`), so the executed notebook still holds them and the measured times
stay in ``results/runs/`` (:mod:`paperlib.artifact.runlog`). The file is rewritten in place
(atomically).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path


from paperlib.artifact.notebook import INLINE_COPY_KEY

_FIG_OPEN = re.compile(r"^(?P<fence>`{3,}|:{3,})\{glue:figure\}\s+(?P<name>\S+)\s*$")
PROV_MARK = "% paperlib: provenance line"
#: Cell metadata key holding the console lines taken out of the cell's printed output.
CONSOLE_KEY = "paperlib_console"
# Whole printed lines that report the run, not a result (see the module docstring).
_CONSOLE_LINE = re.compile(
    r"^(?:MODE=\S+(?: DEVICE=\S+)? SEED=\S+: .*"                     # parameter echo
    r"|(?:[^:\n]*: )?(?:loaded from results/.*|cached|computed in [\d.]+ s)"  # cache hit / miss
    r"|notebook wall time: [\d.]+ s)\s*$")
# The end-of-notebook timing, also when it ends a line that holds a result (chapter 3's C5 line).
_FINISHED = re.compile(r"(?:;\s*|^)notebook \w+ finished in [\d.]+ s \(MODE=\S+\)")
EDIT_TAG = "edit-here"  # a code cell the reader is asked to edit: its input stays shown  # a MyST comment: invisible, marks the caption as done


def caption_provenance(source: str, notebook_stem: str, vectors: dict[str, str] | None = None) -> str:
    """Append the provenance line and notebook link to each ``{glue:figure}`` caption.

    ``source`` is a Markdown cell; a directive opened by a line ```` ```{glue:figure} NAME````
    (or a ``:::`` fence) gets, before its closing fence, a paragraph with
    ``{glue:text}`NAME_prov``` and a ``{download}`` link to ``<notebook_stem>.ipynb``.
    ``vectors`` maps a figure name to the path (relative to the notebook) of its vector copy,
    which is linked too. Idempotent (a marker comment records that it was done).

    Raises
    ------
    ValueError
        If a ``{glue:figure}`` directive is never closed.
    """
    lines = source.split("\n")
    out, i = [], 0
    while i < len(lines):
        m = _FIG_OPEN.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        fence, name = m.group("fence"), m.group("name")
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            j += 1
        if j == len(lines):
            raise ValueError(f"{notebook_stem}: the {{glue:figure}} {name} directive has no closing {fence}")
        body = lines[i:j]
        if PROV_MARK not in "\n".join(body):
            vec = (vectors or {}).get(name)
            link = f"; vector copy {{download}}`{Path(vec).name} <{vec}>`" if vec else ""
            body += ["", PROV_MARK, f"{{glue:text}}`{name}_prov` Drawn by "
                     f"{{download}}`{notebook_stem}.ipynb <{notebook_stem}.ipynb>`{link}."]
        out += body + [lines[j]]
        i = j + 1
    return "\n".join(out)


def strip_console_lines(text: str) -> tuple[str, list[str]]:
    """Split printed ``text`` into what the book shows and the console lines it drops.

    Returns ``(kept_text, dropped)``: ``dropped`` holds each whole console line and each
    "notebook NN finished in ... s (MODE=...)" fragment, in order; a line that held only
    such a fragment is dropped whole, one that also held a result keeps the result.
    """
    kept, dropped = [], []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\n")
        if _CONSOLE_LINE.match(body):
            dropped.append(body)
            continue
        m = _FINISHED.search(body)
        if m:
            dropped.append(m.group(0).lstrip("; "))
            body = (body[:m.start()] + body[m.end():]).rstrip()
            if not body:
                continue
            line = body + ("\n" if line.endswith("\n") else "")
        kept.append(line)
    return "".join(kept), dropped


def _strip_console(cell: dict) -> bool:
    """Move the console lines of ``cell``'s stdout outputs into its metadata; True if any moved."""
    outs, moved = [], []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream" and o.get("name") == "stdout":
            text = o.get("text", "")
            text = "".join(text) if isinstance(text, list) else text
            kept, dropped = strip_console_lines(text)
            if dropped:
                moved += dropped
                if not kept:
                    continue
                o = dict(o, text=kept)
        outs.append(o)
    if not moved:
        return False
    cell["outputs"] = outs
    meta = cell.setdefault("metadata", {})
    meta[CONSOLE_KEY] = list(meta.get(CONSOLE_KEY, [])) + moved
    return True


def tag_notebook(path: str | os.PathLike) -> int:
    """Prepare the executed notebook ``path`` for the book; returns the cells changed.

    Code cells get display tags (``hide-cell`` for the default parameters, else
    ``hide-input``) and lose the inline figure copies and their console lines
    (:func:`strip_console_lines`, kept in the cell's metadata); Markdown cells with a
    ``{glue:figure}`` get the provenance line (:func:`caption_provenance`) and, where
    ``<figures>/<name>.pdf`` exists (:func:`paperlib.artifact.plotting.figures_dir`), a link to
    its copy in ``figures/`` beside the notebook.
    """
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    # make tags papermill's temporary output (.NAME.tmp.ipynb) before renaming it to NAME.ipynb
    stem = path.stem[1:-4] if path.stem.startswith(".") and path.stem.endswith(".tmp") else path.stem
    changed = _merge_parameters(nb.get("cells", []))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            src = cell.get("source", "")
            src = "".join(src) if isinstance(src, list) else src
            new = caption_provenance(src, stem, _vector_copies(src, path.parent))
            if new != src:
                cell["source"] = new
                changed += 1
            continue
        if cell.get("cell_type") != "code":
            continue
        outs = cell.get("outputs", [])
        kept = [o for o in outs if not (o.get("metadata") or {}).get(INLINE_COPY_KEY)]
        if len(kept) != len(outs):
            cell["outputs"] = kept
            changed += 1
        if _strip_console(cell):
            changed += 1
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if EDIT_TAG in tags or "remove-cell" in tags:  # the reader edits it, or it is not on the page
            continue
        want = "hide-cell" if "parameters" in tags else "hide-input"
        if "parameters" in tags and "remove-cell" in tags:  # tagged by an older booktags
            tags.remove("remove-cell")
            changed += 1
        if want not in tags:
            tags.append(want)
            changed += 1
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tags")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(nb, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    os.replace(tmp, path)
    return changed


#: the line that separates a parameters cell's defaults from the values papermill injected for this run
INJECTED_HEADER = "# Values used in this run (injected by papermill):"


def _merge_parameters(cells: list) -> int:
    """One parameters cell per chapter: papermill's ``injected-parameters`` cell (the values this run used)
    is appended to the ``parameters`` cell below :data:`INJECTED_HEADER` and removed from the page
    (``remove-cell``; it still runs in Jupyter), so a reader finds one folded cell. Returns 1 when it
    merged, else 0 (no injected cell, or merged already)."""
    params = next((c for c in cells if c.get("cell_type") == "code"
                   and "parameters" in (c.get("metadata") or {}).get("tags", [])), None)
    injected = next((c for c in cells if c.get("cell_type") == "code"
                     and "injected-parameters" in (c.get("metadata") or {}).get("tags", [])), None)
    if params is None or injected is None:
        return 0
    src = "".join(params["source"]) if isinstance(params.get("source"), list) else params.get("source", "")
    if INJECTED_HEADER in src:
        return 0
    inj = "".join(injected["source"]) if isinstance(injected.get("source"), list) else injected.get("source", "")
    body = "\n".join(line for line in inj.splitlines() if line.strip() and not line.startswith("# Parameters"))
    params["source"] = src.rstrip("\n") + f"\n\n{INJECTED_HEADER}\n{body}\n"
    tags = injected.setdefault("metadata", {}).setdefault("tags", [])
    if "remove-cell" not in tags:
        tags.append("remove-cell")
    return 1


def _vector_copies(source: str, dest: Path) -> dict[str, str]:
    """Copy the PDF of each ``{glue:figure}`` in ``source`` to ``dest/figures/``; name -> relative path."""
    import shutil

    from paperlib.artifact.plotting import figures_dir

    out = {}
    for line in source.split("\n"):
        m = _FIG_OPEN.match(line)
        if not m:
            continue
        name = m.group("name")
        pdf = figures_dir() / f"{name}.pdf"
        if pdf.is_file():
            (dest / "figures").mkdir(exist_ok=True)
            shutil.copyfile(pdf, dest / "figures" / pdf.name)
            out[name] = f"figures/{pdf.name}"
    return out


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        sys.stderr.write("usage: python -m paperlib.artifact.booktags NOTEBOOK.ipynb [...]\n")
        return 2
    for p in args:
        tag_notebook(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
