"""``make dist``: what a Zenodo upload of this artifact takes, built from one commit.

Writes into ``dist/paperlib-<version>-<commit12>/``:

* ``paperlib-<version>-<commit12>-source.tar.gz``: the commit's tree (``git archive``), so the
  archive holds exactly what the commit holds, never an uncommitted file;
* ``paperlib-<version>-<commit12>-book.tar.gz``: the built HTML book (``book/_build/html``), the
  site a reader opens (``index.html`` at its top);
* ``ARTIFACT-APPENDIX.md``: the PETS-form artifact appendix of the run that built the book
  (``results/ARTIFACT-APPENDIX.md``, written by ``make appendix``);
* ``.zenodo.json``: the repository's Zenodo metadata with this ``version`` and the commit in its
  notes (Zenodo reads it when a GitHub release is archived, or it is pasted into the upload form);
* ``SHA256SUMS``: the SHA-256 of each file above (``sha256sum -c SHA256SUMS``).

Refused, with one line naming what to run first: a folder that is not a git checkout, a commit
that is not there, a book that was not built, an appendix that was not written. A working tree
with uncommitted changes is archived at its commit and a note says that the changes are left
out. Nothing here runs an experiment. The steps that publish the archive are in the appendix's
"Available" section (:data:`PUBLISH_STEPS`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
from pathlib import Path

from paperlib.implementations.opacus_code.wheels import sha256_file

__all__ = ["PUBLISH_STEPS", "build_dist", "main"]

#: How a person publishes the archive and where its DOI then appears (the appendix quotes these steps).
PUBLISH_STEPS = (
    "run `make all` and then `make dist`: it writes `dist/paperlib-<version>-<commit>/` with the source "
    "archive of the commit, the built book, the artifact appendix, `.zenodo.json` and `SHA256SUMS`",
    "either push the commit to GitHub, enable the repository in Zenodo's GitHub settings and publish a "
    "GitHub release (Zenodo archives the release and reads `.zenodo.json`), or upload the files of "
    "`dist/` at zenodo.org (New upload) and paste the fields of `.zenodo.json`",
    "Zenodo shows the DOI on the record's page (10.5281/zenodo.N); add it, the repository URL and the "
    "book's URL to `CITATION.cff` (its header shows the three lines), commit, and run `make appendix`: "
    "the appendix and this book then show them",
)


class DistError(ValueError):
    """What ``make dist`` needs is missing (one line naming it and what to run first)."""


def _git(root: Path, *args: str) -> str:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True,
                              timeout=120).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise DistError(f"root: {root} is not a git checkout with a commit ({type(exc).__name__}); make dist "
                        "archives a commit") from None


def _version(root: Path) -> str:
    """The package version from ``pyproject.toml`` (``version = "..."`` of ``[project]``)."""
    import tomllib

    try:
        return str(tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])
    except (OSError, KeyError, ValueError) as exc:
        raise DistError(f"root: {root}/pyproject.toml has no [project] version ({type(exc).__name__})") from None


def build_dist(root: str | Path, *, book_html: str | Path | None = None, appendix: str | Path | None = None,
               out: str | Path | None = None, commit: str = "HEAD") -> dict:
    """Build the upload folder (module docstring) and return ``{"folder", "files": {name: sha256},
    "commit", "version", "notes"}``.

    ``root``: the git checkout; ``book_html``: the built book (default ``root/book/_build/html``);
    ``appendix``: the PETS-form appendix (default ``root/results/ARTIFACT-APPENDIX.md``); ``out``: the
    parent folder (default ``root/dist``); ``commit``: what to archive. Raises :class:`DistError`
    (a ValueError, one line) when any input is missing. The same commit and inputs give the same
    source archive bytes (``git archive`` is deterministic; gzip without a timestamp).
    """
    root = Path(root).resolve()
    full = _git(root, "rev-parse", "--verify", f"{commit}^{{commit}}")
    short = full[:12]
    version = _version(root)
    book_html = Path(book_html) if book_html is not None else root / "book" / "_build" / "html"
    appendix = Path(appendix) if appendix is not None else root / "results" / "ARTIFACT-APPENDIX.md"
    if not (book_html / "index.html").is_file():
        raise DistError(f"book_html: {book_html} holds no built book (index.html); run make all first")
    if not appendix.is_file():
        raise DistError(f"appendix: {appendix} is missing; run make all (or make appendix) first")
    notes = []
    if _git(root, "status", "--porcelain", "--untracked-files=no"):
        notes.append(f"the working tree has uncommitted changes; the source archive holds commit {short} without them")
    name = f"paperlib-{version}-{short}"
    folder = (Path(out) if out is not None else root / "dist") / name
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / f"{name}-source.tar.gz"
    tmp = src.with_suffix(".tmp")
    # gzip -n: no name or time stamp in the header, so the same commit gives the same bytes
    with open(tmp, "wb") as f:
        arch = subprocess.Popen(["git", "-C", str(root), "archive", "--format=tar", f"--prefix={name}/", full],
                                stdout=subprocess.PIPE)
        gz = subprocess.run(["gzip", "-n", "-9"], stdin=arch.stdout, stdout=f, check=True, timeout=600)
        arch.stdout.close()
        if arch.wait(timeout=600) != 0 or gz.returncode != 0:
            raise DistError(f"commit: git archive of {short} failed")
    tmp.replace(src)  # never a half-written archive under the final name
    book = folder / f"{name}-book.tar.gz"
    tmp = book.with_suffix(".tmp")
    with tarfile.open(tmp, "w:gz") as t:
        t.add(book_html, arcname=f"{name}-book")
    tmp.replace(book)
    (folder / "ARTIFACT-APPENDIX.md").write_bytes(appendix.read_bytes())
    meta = json.loads((root / ".zenodo.json").read_text(encoding="utf-8")) if (root / ".zenodo.json").is_file() else {}
    meta["version"] = version
    meta["notes"] = (str(meta.get("notes", "")).rstrip(". ") + f". Commit {full}.").lstrip(". ")
    (folder / ".zenodo.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    files = {p.name: sha256_file(p) for p in sorted(folder.iterdir()) if p.name != "SHA256SUMS" and p.is_file()}
    (folder / "SHA256SUMS").write_text("".join(f"{h}  {n}\n" for n, h in files.items()), encoding="ascii")
    return {"folder": str(folder), "files": files, "commit": full, "version": version, "notes": notes}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paperlib.artifact.dist", description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=".", help="the git checkout (default: the working directory)")
    ap.add_argument("--out", default=None, help="the parent folder of the upload (default: ROOT/dist)")
    a = ap.parse_args(argv)
    try:
        r = build_dist(a.root, out=a.out)
    except DistError as exc:
        print(f"make dist: {exc}", file=sys.stderr)
        return 2
    for note in r["notes"]:
        print(f"note: {note}", file=sys.stderr)
    print(f"wrote {r['folder']}/ ({len(r['files'])} files and SHA256SUMS; commit {r['commit'][:12]}, "
          f"version {r['version']})")
    print("to publish it: " + "; then ".join(PUBLISH_STEPS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
