"""What a notebook or a result depends on: the ``paperlib`` modules it imports, transitively.

Two users:

* ``make`` re-runs a notebook only when something it depends on changed. ``python -m
  paperlib.artifact.deps --make build/deps/NAME.d notebooks/NAME.py`` writes a make rule naming
  the notebook's own source, every ``paperlib`` file in its import closure (package
  ``__init__`` files and the data files a module reads from ``paperlib/resources/``
  included) and, when the closure reaches :mod:`paperlib.implementations.datasets`,
  the stamp of the input data (``build/data-stamp.txt``, see :func:`data_listing`).
  Changing one module therefore re-runs exactly the notebooks that import it, directly
  or through another module.
* :mod:`paperlib.artifact.provenance` stores a *code fingerprint* (:func:`code_fingerprint`) with
  every cached result and treats a result made by other code as a cache miss, so a
  re-run notebook recomputes instead of reading numbers that older code produced.

The import closure is found statically (:mod:`ast`, every ``import`` statement in a
module, including those inside functions), never by importing anything, so it costs
milliseconds and cannot run notebook code.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import os
import sys
from functools import lru_cache
from pathlib import Path

__all__ = [
    "PACKAGE_DIR",
    "module_file",
    "imported_modules",
    "closure",
    "notebook_dependencies",
    "code_fingerprint",
    "data_listing",
    "main",
]

#: The ``paperlib`` package folder.
PACKAGE_DIR: Path = Path(__file__).resolve().parents[1]
_PKG = "paperlib"
#: Distributions whose version changes what the code computes (recorded in the fingerprint).
_FINGERPRINT_DISTS = ("numpy", "scipy", "torch", "torchvision", "opacus", "dp-accounting", "statsmodels")


def module_file(name: str) -> Path | None:
    """The source file of the ``paperlib`` module ``name`` (``paperlib.x.y``), or ``None``.

    A package maps to its ``__init__.py``. Names outside ``paperlib`` give ``None``.
    """
    parts = name.split(".")
    if parts[0] != _PKG:
        return None
    base = PACKAGE_DIR.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    f = base.with_suffix(".py")
    return f if f.is_file() else None


def _module_name(path: Path) -> str | None:
    """``paperlib.x.y`` for a file inside the package, else ``None``."""
    try:
        rel = Path(path).resolve().relative_to(PACKAGE_DIR)
    except ValueError:
        return None
    parts = list(rel.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([_PKG, *parts])


def imported_modules(source: str, current: str | None = None, *, is_package: bool = False) -> set[str]:
    """The ``paperlib`` modules that the Python ``source`` imports (not transitively).

    ``current`` is the dotted name of the module the source belongs to (needed for
    relative imports; ``None`` for a notebook or script). ``from paperlib import x``
    yields ``paperlib.x`` when ``x`` is a submodule and ``paperlib`` otherwise. Every
    parent package of a module is included, because importing ``a.b.c`` runs
    ``a/__init__.py`` and ``a/b/__init__.py``.

    Raises
    ------
    SyntaxError
        If ``source`` does not parse.
    """
    tree = ast.parse(source)
    found: set[str] = set()
    pkg = current if is_package else (current.rpartition(".")[0] if current else None)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if not pkg:
                    continue
                parts = pkg.split(".")
                if node.level > 1:
                    parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            lazy = _lazy_exports(base)
            for alias in node.names:
                found.add(f"{base}.{alias.name}")
                if alias.name in lazy:
                    found.add(lazy[alias.name])
    out: set[str] = set()
    for name in found:
        parts = name.split(".")
        if parts[0] != _PKG:
            continue
        for k in range(1, len(parts) + 1):
            sub = ".".join(parts[:k])
            if module_file(sub) is not None:
                out.add(sub)
    return out


@lru_cache(maxsize=None)
def _lazy_exports(package: str) -> dict[str, str]:
    """``{name: module}`` of a package that imports its names on first use (PEP 562).

    Read from a module-level ``_EXPORTS = {"name": "paperlib.x.y", ...}`` literal in its
    ``__init__.py``; ``from package import name`` then depends on that module, which no
    ``import`` statement names. Empty for any other module.
    """
    f = module_file(package)
    if f is None or f.name != "__init__.py":
        return {}
    for node in ast.parse(f.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets)
                and isinstance(node.value, ast.Dict)):
            return {k.value: v.value for k, v in zip(node.value.keys, node.value.values)
                    if isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and isinstance(v.value, str)}
    return {}


def _resources_used(source: str) -> list[Path]:
    """Data files under ``paperlib/resources/`` named in ``source`` (by file name)."""
    res = PACKAGE_DIR / "resources"
    if not res.is_dir():
        return []
    return sorted(p for p in res.rglob("*") if p.is_file() and p.name in source)


@lru_cache(maxsize=None)
def _direct(path: Path) -> tuple[frozenset, tuple]:
    src = path.read_text(encoding="utf-8")
    name = _module_name(path)
    mods = imported_modules(src, name, is_package=path.name == "__init__.py")
    return frozenset(mods), tuple(_resources_used(src))


def closure(modules) -> list[Path]:
    """Files of the ``paperlib`` modules in ``modules`` and of all they import, sorted.

    Includes the package ``__init__.py`` files that importing them runs and the
    ``paperlib/resources/`` files whose names appear in their source.
    """
    todo = [m for m in modules if module_file(m) is not None]
    seen: set[str] = set()
    files: set[Path] = set()
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        f = module_file(m)
        files.add(f)
        mods, resources = _direct(f)
        files.update(resources)
        todo.extend(mods - seen)
    return sorted(files)


def notebook_dependencies(notebook: str | os.PathLike) -> list[Path]:
    """The ``paperlib`` files a notebook (jupytext ``.py`` source) depends on; see :func:`closure`.

    Raises
    ------
    FileNotFoundError
        If ``notebook`` does not exist.
    SyntaxError
        If it is not valid Python (Markdown cells of a percent-format file are comments).
    """
    src = Path(notebook).read_text(encoding="utf-8")
    return closure(imported_modules(src))


#: What computes the numbers in results/: the computing layers (the shared input checks are
#: ``fdp/validation.py``), the practitioner package, the stored data they read, and the one
#: artifact module that derives per-point seeds for the cached sweeps. The book machinery (the
#: rest of ``artifact/``) and the command line are left out: editing them changes no number.
FINGERPRINT_PARTS = ("fdp", "mechanisms", "audit", "implementations", "practitioner", "resources",
                     "artifact/sweeps.py")


def _package_files() -> list[Path]:
    """The files :func:`code_fingerprint` hashes by default (see :data:`FINGERPRINT_PARTS`)."""
    out = []
    for part in FINGERPRINT_PARTS:
        base = PACKAGE_DIR / part
        files = [base] if base.is_file() else base.rglob("*")
        out += [p for p in files if p.is_file() and "__pycache__" not in p.parts
                and (p.suffix == ".py" or part == "resources")]
    return sorted(out)


def code_fingerprint(files=None) -> str:
    """A 16-hex-digit hash of the code that produces results.

    Covers the contents of ``files`` (default: the computing layers, see
    :data:`FINGERPRINT_PARTS`), with their paths relative to the package, and the
    installed versions of the numerical libraries (:data:`_FINGERPRINT_DISTS`).
    Stored with each cached result by :func:`paperlib.artifact.provenance.save_result`; a
    different fingerprint makes :func:`paperlib.artifact.provenance.load_result` recompute.
    """
    files = _package_files() if files is None else [Path(f) for f in files]
    # re-hashed only when a file's size or modification time changed
    stats = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    return _fingerprint(stats)


@lru_cache(maxsize=64)
def _fingerprint(stats: tuple) -> str:
    h = hashlib.sha256()
    for name, _, _ in stats:
        f = Path(name)
        f = Path(f)
        try:
            label = str(f.resolve().relative_to(PACKAGE_DIR))
        except ValueError:  # a file outside the package (tests)
            label = f.name
        h.update(label.encode())
        h.update(b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    from importlib.metadata import PackageNotFoundError, version

    for dist in _FINGERPRINT_DISTS:
        try:
            v = version(dist)
        except PackageNotFoundError:
            v = "-"
        h.update(f"{dist}={v}\0".encode())
    return h.hexdigest()[:16]


def data_listing(roots) -> str:
    """One line per file under the existing folders ``roots``: path, size, mtime (ns).

    The Makefile writes this to ``build/data-stamp.txt`` only when it changes, so a
    notebook that reads datasets re-runs when a dataset file appears, changes or goes.
    """
    lines = []
    for r in roots:
        r = Path(r)
        if not r.is_dir():
            lines.append(f"{r}\tabsent")
            continue
        for p in sorted(r.rglob("*")):
            if p.is_file():
                st = p.stat()
                lines.append(f"{p}\t{st.st_size}\t{st.st_mtime_ns}")
    return "\n".join(lines) + "\n"


def _write_if_changed(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _rule_sources(text: str) -> list[str]:
    """The notebook and library files a rule written by ``make`` names as prerequisites."""
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    if not lines or ":" not in lines[0]:
        return []
    return [f for f in lines[0].split(":", 1)[1].split() if f.startswith(("paperlib/", "notebooks/"))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paperlib.artifact.deps", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make", help="write the make rule of one notebook")
    mk.add_argument("notebook", help="notebooks/NAME.py")
    mk.add_argument("--target", required=True, help="the executed notebook, e.g. book/notebooks/NAME.ipynb")
    mk.add_argument("--out", required=True, help="the .d file to write (rewritten only when it changes)")
    mk.add_argument("--data-stamp", default="build/data-stamp.txt",
                    help="prerequisite added when the notebook reads datasets")
    ls = sub.add_parser("list", help="print the paperlib files a notebook depends on")
    ls.add_argument("notebook")
    pr = sub.add_parser("prune", help="delete the rules that name a file which no longer exists")
    pr.add_argument("rules", nargs="*", help="build/deps/NAME.d files")
    pr.add_argument("--dry-run", action="store_true", help="delete nothing; print the rules that would be kept")
    st = sub.add_parser("data-stamp", help="write the listing of the dataset folders (only when it changes)")
    st.add_argument("--out", required=True)
    st.add_argument("roots", nargs="*")
    args = ap.parse_args(argv)
    root = PACKAGE_DIR.parent
    if args.cmd == "prune":
        kept = []
        for rule in map(Path, args.rules):
            if not rule.is_file():
                continue
            if all((root / f).exists() for f in _rule_sources(rule.read_text())):
                kept.append(str(rule))
            elif not args.dry_run:
                rule.unlink()  # written before a module was deleted or renamed: make writes it again
        if args.dry_run:
            print(" ".join(kept))
        return 0
    if args.cmd == "data-stamp":
        _write_if_changed(Path(args.out), data_listing(args.roots))
        return 0
    nb = Path(args.notebook)
    if not nb.is_file():
        ap.error(f"notebook {nb} does not exist")
    files = notebook_dependencies(nb)

    def rel(p: Path) -> str:
        try:
            return str(p.resolve().relative_to(root))
        except ValueError:
            return str(p)

    if args.cmd == "list":
        print("\n".join(rel(f) for f in files))
        return 0
    prereq = [rel(f) for f in files]
    ds = module_file("paperlib.implementations.datasets")
    if ds is not None and ds in files:
        prereq.append(args.data_stamp)
    # each library file also as a target without a recipe (as gcc -MP writes): a module deleted or renamed
    # since this file was written is then out of date, not a missing prerequisite, so make rewrites the rule
    # instead of stopping with "No rule to make target" in a checkout updated by git pull
    text = (f"# generated by python -m paperlib.artifact.deps from {args.notebook}; do not edit\n"
            f"{args.target} {args.out}: {args.notebook} " + " ".join(prereq) + "\n"
            + "".join(f"{p}:\n" for p in prereq if p != args.data_stamp))
    _write_if_changed(Path(args.out), text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
