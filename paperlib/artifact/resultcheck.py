"""Result files that cannot be read back, found before ``make`` decides what is up to date.

``make`` re-runs a notebook when its source, the modules it imports, the lock,
``MODE``/``DEVICE``/``SEED`` or its data change; a result file damaged after the notebook
ran (truncated, corrupted, edited by hand, deleted) changes none of these. So before the
notebooks are considered, ``make`` runs (once)::

    python -m paperlib.artifact.resultcheck stamps --dir build/results-check NAME...

which looks at what each notebook ``NAME`` wrote into the results folder
(:func:`paperlib.artifact.provenance.results_dir`):

* every ``results/<NN>_*.json`` whose prefix ``NN`` is the notebook's number (the
  notebooks name their results so), and every ``results/real_audit_*.json`` (the cache of
  :func:`paperlib.implementations.real_audit.audit_implementation`, notebooks 06 and 07),
  must be a result record: strict JSON, an object with ``key`` (str), ``code``, ``params``
  (object), ``data`` and ``provenance`` (object), as
  :func:`~paperlib.artifact.provenance.save_result` writes it;
* every claim of :mod:`paperlib.artifact.claims` that names the notebook must not grade
  "not run" once the notebook has run (the notebook itself asserts its claim with
  :func:`~paperlib.artifact.claims.require`, so "not run" means a file went missing or
  lost a key afterwards).

A result file that fails is removed (it is a cache: the notebook recomputes it), one line
per file says so on stderr, and ``DIR/NAME.stamp`` is touched, so ``make`` re-runs the
notebook (its target is older than the stamp); ``DIR/all.txt`` is touched too whenever a
stamp was (``make`` learns from it that stamps changed). With nothing wrong the stamps are
left alone (created with time stamp 0 when absent, so they never trigger a run by
themselves). A committed file a
claim reads (``paperlib/resources/opacus_table2.json``) that cannot be read is not
recomputed by any notebook: the command fails with one line naming the file and the
command that restores it. Only the standard library is used (it runs before any
environment exists, like :mod:`paperlib.artifact.deps`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from paperlib.artifact import provenance as pv
from paperlib.artifact.estimate import REAL_STEP_NOTEBOOKS

__all__ = ["record_problem", "notebook_files", "problems", "stamp", "stamps", "main"]

#: keys of a result record (provenance.save_result) and the JSON types they must have
_RECORD = {"key": str, "code": (str, type(None)), "params": dict, "provenance": dict}
#: the notebooks that read the real-implementation audits' cache files (real_audit_*.json): those that run real
#: steps, as :data:`paperlib.artifact.estimate.REAL_STEP_NOTEBOOKS` lists them (06, 07 and 11)
REAL_AUDIT_NOTEBOOKS = tuple(name.split("_", 1)[0] for name in REAL_STEP_NOTEBOOKS)


def record_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` is not a readable result record (one short phrase), or ``None`` if it is."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"cannot be read ({type(exc).__name__}: {exc.strerror or exc})"
    try:
        doc = json.loads(raw.decode("utf-8"))  # NaN/Infinity allowed: save_result writes them
    except UnicodeDecodeError:
        return "not UTF-8 text"
    except ValueError as exc:
        return f"not valid JSON ({exc})"
    if not isinstance(doc, dict):
        return f"a JSON {type(doc).__name__}, not a result record"
    for k, typ in _RECORD.items():
        if k not in doc:
            return f"no {k!r} field (not a result record)"
        if not isinstance(doc[k], typ):
            return f"its {k!r} field is a {type(doc[k]).__name__}"
    if "data" not in doc or doc["data"] is None:
        return "no 'data' field (not a result record)"
    return None


def notebook_files(name: str, results_dir: str | os.PathLike) -> list[Path]:
    """The result files notebook ``name`` (``NN_title``) writes that exist in ``results_dir``."""
    rd = Path(results_dir)
    m = re.match(r"(\d+)_", name)
    if not m or not rd.is_dir():
        return []
    files = sorted(rd.glob(f"{m.group(1)}_*.json"))
    if m.group(1) in REAL_AUDIT_NOTEBOOKS:
        files += sorted(rd.glob("real_audit_*.json"))
    return [f for f in files if f.is_file()]


def _claims_of(name: str):
    from paperlib.artifact.claims import CLAIMS

    return [c for c in CLAIMS if c.notebook == name]


def problems(name: str, results_dir: str | os.PathLike | None = None, *,
             executed: str | os.PathLike | None = None) -> tuple[list[tuple[Path, str]], list[tuple[str, str]]]:
    """``(result files to remove, committed files that are broken)`` for notebook ``name``.

    Each entry is ``(path, reason)``. Claims are checked only when the executed notebook
    (default ``book/notebooks/NAME.ipynb``) exists: before the first run "not run" is normal.
    """
    rd = Path(results_dir) if results_dir is not None else pv.results_dir()
    executed = Path(executed) if executed is not None else Path("book/notebooks") / f"{name}.ipynb"
    bad: dict[Path, str] = {}
    for f in notebook_files(name, rd):
        why = record_problem(f)
        if why is not None:
            bad[f] = why
    committed = []
    for claim in _claims_of(name):
        for fname in claim.files:
            if "/" in fname:  # committed source data, not a result
                try:
                    json.loads(Path(fname).read_text(encoding="utf-8"))
                except FileNotFoundError:
                    committed.append((fname, "missing"))
                except (OSError, ValueError) as exc:
                    committed.append((fname, f"not readable JSON ({type(exc).__name__}: {exc})"))
        if committed or not executed.is_file():
            continue
        try:
            rec = claim.evaluate(rd)
        except Exception as exc:  # a check that trips over a file of the wrong shape
            rec = {"verdict": "not run", "reason": f"{type(exc).__name__}: {exc}"}
        if rec["verdict"] == "not run":
            for fname in claim.files:
                f = rd / fname
                if f.is_file() and f not in bad:
                    bad[f] = f"claim {claim.id} cannot be graded from it ({rec['reason']})"
            if not any((rd / fname) in bad for fname in claim.files):
                # nothing to remove (the file is missing): the stamp alone re-runs the notebook
                bad[rd / claim.files[0]] = f"missing (claim {claim.id}: {rec['reason']})"
    return sorted(bad.items()), committed


def _touch_old(path: Path) -> None:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        os.utime(path, (0, 0))  # exists, but never newer than an executed notebook


def stamp(name: str, out: str | os.PathLike, results_dir: str | os.PathLike | None = None, *,
          executed: str | os.PathLike | None = None, stream=None) -> int | bool:
    """Check notebook ``name``'s results; touch ``out`` when it must re-run.

    Returns 1 (a committed file is broken, after one line on ``stream``), else whether
    ``out`` was touched (``True``: the notebook must re-run; ``False`` == 0: nothing wrong).
    """
    stream = sys.stderr if stream is None else stream
    out = Path(out)
    bad, committed = problems(name, results_dir, executed=executed)
    if committed:
        fname, why = committed[0]
        stream.write(f"error: {fname} is {why}; notebooks/{name}.py reads it and no notebook recomputes it: "
                     f"restore it with `git checkout -- {fname}` (or redo it online: make opacus-table)\n")
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    if not bad:
        _touch_old(out)
        return False
    for f, why in bad:
        removed = ""
        if f.is_file():
            f.unlink()
            removed = "; removed"
        stream.write(f"{f}: {why}{removed}; notebooks/{name}.py will re-run\n")
    out.touch()
    os.utime(out, None)
    return True


def stamps(names, directory: str | os.PathLike, results_dir: str | os.PathLike | None = None, *,
           stream=None) -> int:
    """:func:`stamp` for every notebook in ``names`` into ``directory/NAME.stamp``; touches
    ``directory/all.txt`` when any stamp was touched. Returns the exit status (1: a committed
    file is broken)."""
    d = Path(directory)
    touched = False
    for name in names:
        r = stamp(name, d / f"{name}.stamp", results_dir, stream=stream)
        if r is not True and r != 0:
            return 1
        touched = touched or r is True
    _touch_old(d / "all.txt")
    if touched:
        os.utime(d / "all.txt", None)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paperlib.artifact.resultcheck", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("stamps", help="check the notebooks' results; touch DIR/NAME.stamp of those that must re-run")
    s.add_argument("names", nargs="+", help="notebook names, e.g. 04_audit_figure2")
    s.add_argument("--dir", required=True, help="folder of the stamp files the executed notebooks depend on")
    s.add_argument("--results", default=None, help="results folder (default: $PAPERLIB_RESULTS or ./results)")
    c = sub.add_parser("check", help="list the problems of every notebook's results (exit 1 if any)")
    c.add_argument("names", nargs="*", help="notebook names (default: every notebooks/NN_*.py)")
    c.add_argument("--results", default=None)
    args = ap.parse_args(argv)
    if args.command == "stamps":
        return stamps(args.names, args.dir, args.results)
    names = args.names or sorted(p.stem for p in Path("notebooks").glob("[0-9]*.py"))
    status = 0
    for name in names:
        bad, committed = problems(name, args.results)
        for f, why in list(bad) + [(Path(f), w) for f, w in committed]:
            print(f"{name}: {f}: {why}")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
