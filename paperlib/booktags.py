"""Tag executed notebooks for the book: ``python -m paperlib.booktags NOTEBOOK.ipynb``.

Run by ``make figures`` on each notebook that papermill has executed, before the book
renders it. The default-values cell (tag ``parameters``) is removed from the page, since
papermill's ``injected-parameters`` cell below it shows the values actually used; every
other code cell gets ``hide-input``, so a reader sees prose, figures and tables first and
opens the code with one click. The file is rewritten in place (atomically).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path


def tag_notebook(path: str | os.PathLike) -> int:
    """Add the book's display tags to the code cells of ``path``; returns the cells changed."""
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    changed = 0
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        want = "remove-cell" if "parameters" in tags else "hide-input"
        if want not in tags:
            tags.append(want)
            changed += 1
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tags")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(nb, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    os.replace(tmp, path)
    return changed


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        sys.stderr.write("usage: python -m paperlib.booktags NOTEBOOK.ipynb [...]\n")
        return 2
    for p in args:
        tag_notebook(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
