"""Tests for paperlib.artifact.deps: static import closure, make rules, code fingerprint."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from paperlib.artifact import deps

ROOT = Path(deps.PACKAGE_DIR).parent


def test_imported_modules_absolute_and_from_forms():
    src = ("import numpy as np\nfrom paperlib.artifact import notebook as pf\nfrom paperlib.audit import cp_upper\n"
           "import paperlib.fdp.tradeoff\nfrom paperlib.artifact.provenance import save_result\n")
    got = deps.imported_modules(src)
    # a name a lazy package (PEP 562 _EXPORTS) imports on first use maps to the module defining it
    assert got == {"paperlib", "paperlib.artifact", "paperlib.artifact.notebook", "paperlib.audit", "paperlib.fdp",
                   "paperlib.fdp.tradeoff", "paperlib.artifact.provenance", "paperlib.audit.stats"}


def test_lazy_package_exports_are_dependencies(tmp_path, monkeypatch):
    """``from pkg import name`` of a lazy package depends on the module its _EXPORTS names, and
    a name that is neither exported nor a submodule maps to the package only."""
    pkg = tmp_path / "paperlib" / "lazy"
    pkg.mkdir(parents=True)
    (tmp_path / "paperlib" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text('_EXPORTS = {"f": "paperlib.lazy.impl", "g": 3}\n')
    (pkg / "impl.py").write_text("def f():\n    pass\n")
    monkeypatch.setattr(deps, "PACKAGE_DIR", tmp_path / "paperlib")
    deps._lazy_exports.cache_clear()
    try:
        assert deps.imported_modules("from paperlib.lazy import f\n") == {"paperlib", "paperlib.lazy",
                                                                          "paperlib.lazy.impl"}
        assert deps.imported_modules("from paperlib.lazy import g\n") == {"paperlib", "paperlib.lazy"}
    finally:
        deps._lazy_exports.cache_clear()


def test_imported_modules_relative_and_lazy():
    src = "from ..audit.game import audit_outputs\nfrom . import datasets\n\ndef f():\n    from ..audit import stats\n"
    got = deps.imported_modules(src, "paperlib.implementations.real_audit")
    assert got == {"paperlib", "paperlib.audit.game", "paperlib.implementations",
                   "paperlib.implementations.datasets", "paperlib.audit", "paperlib.audit.stats"}
    # in a package's __init__, "." is the package itself
    got = deps.imported_modules("from .game import audit_outputs\n", "paperlib.audit", is_package=True)
    assert got == {"paperlib", "paperlib.audit", "paperlib.audit.game"}


def test_closure_is_transitive_and_includes_resources():
    files = {str(p.relative_to(ROOT)) for p in deps.closure({"paperlib.implementations.real_audit"})}
    # real_audit -> runners -> opacus_code (a package) -> its stored table; the audit package through its __init__
    assert {"paperlib/implementations/runners.py", "paperlib/implementations/opacus_code/wheels.py",
            "paperlib/resources/opacus_table2.json", "paperlib/audit/__init__.py",
            "paperlib/__init__.py", "paperlib/implementations/__init__.py"} <= files
    assert "paperlib/cli.py" not in files and "paperlib/artifact/claims.py" not in files


def test_notebook_dependencies_differ_per_notebook():
    nb = ROOT / "notebooks"
    code_audit = {p.name for p in deps.notebook_dependencies(nb / "08_opacus_code_audit.py")}
    practitioners = {p.name for p in deps.notebook_dependencies(nb / "10_practitioners.py")}
    assert {"rules.py", "table.py", "wheels.py"} <= code_audit and "game.py" not in code_audit
    assert "releases.py" in practitioners and "releases.py" not in code_audit


def test_fingerprint_follows_file_contents(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    b.write_text("y = 2\n")
    f1 = deps.code_fingerprint([a, b])
    assert f1 == deps.code_fingerprint([a, b]) and len(f1) == 16
    a.write_text("x = 10\n")
    os.utime(a, ns=(1, 10**18))  # a new mtime: the memo must not return the old hash
    assert deps.code_fingerprint([a, b]) != f1
    assert deps.code_fingerprint() == deps.code_fingerprint()  # the whole package, stable


def test_make_rule_written_only_when_changed(tmp_path):
    out = tmp_path / "d" / "nb.d"
    nb = "notebooks/06_audit_real_figure4.py"
    args = ["make", nb, "--target", "book/notebooks/06_audit_real_figure4.ipynb", "--out", str(out)]
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        assert deps.main(args) == 0
        text = out.read_text()
        assert text.splitlines()[1].startswith(f"book/notebooks/06_audit_real_figure4.ipynb {out}: {nb} ")
        assert "paperlib/implementations/datasets.py" in text and "build/data-stamp.txt" in text
        os.utime(out, ns=(1, 1))
        assert deps.main(args) == 0
        assert out.stat().st_mtime_ns == 1  # unchanged content: not rewritten, so make does not restart
    finally:
        os.chdir(cwd)
    r = subprocess.run([sys.executable, "-m", "paperlib.artifact.deps", "make", "notebooks/nope.py", "--target", "x",
                        "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and "notebooks/nope.py does not exist" in r.stderr


def test_data_listing(tmp_path):
    (tmp_path / "MNIST").mkdir()
    (tmp_path / "MNIST" / "x.gz").write_bytes(b"abc")
    text = deps.data_listing([tmp_path, tmp_path / "absent"])
    lines = text.strip().splitlines()
    assert lines[0].startswith(f"{tmp_path / 'MNIST' / 'x.gz'}\t3\t")
    assert lines[1] == f"{tmp_path / 'absent'}\tabsent"


def test_syntax_error_is_reported(tmp_path):
    p = tmp_path / "bad.py"
    p.write_text("def (:\n")
    with pytest.raises(SyntaxError):
        deps.notebook_dependencies(p)


def test_fingerprint_covers_the_computing_layers_only():
    files = {str(p.relative_to(deps.PACKAGE_DIR)) for p in deps._package_files()}
    assert {"fdp/tradeoff.py", "mechanisms/core.py", "audit/game.py", "implementations/runners.py",
            "resources/opacus_table2.json", "fdp/validation.py", "practitioner/check.py", "artifact/sweeps.py"} <= files
    assert not {"artifact/claims.py", "artifact/booktags.py", "artifact/notebook.py", "cli.py"} & files


def test_a_module_deleted_since_the_rule_was_written_does_not_stop_make(tmp_path):
    """A checkout updated by git pull keeps build/deps/NAME.d, which may name a module the update deleted
    (artifact/figures.py became artifact/notebook.py): make must rewrite the rule, not stop with "No rule to
    make target". Each library file is also written as a target without a recipe (gcc -MP); checked with make."""
    import shutil

    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    out = tmp_path / "nb.d"
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        assert deps.main(["make", "notebooks/01_tradeoff_basics.py", "--target", "out.txt", "--out", str(out)]) == 0
    finally:
        os.chdir(cwd)
    rule = out.read_text()
    assert "\npaperlib/fdp/tradeoff.py:\n" in rule and "build/data-stamp.txt:" not in rule
    gone = "paperlib/artifact/no_such_module.py"  # a prerequisite the update deleted
    (tmp_path / "nb.d").write_text(rule.replace(" paperlib/fdp/tradeoff.py", f" {gone}")
                                   .replace("\npaperlib/fdp/tradeoff.py:\n", f"\n{gone}:\n"))
    (tmp_path / "Makefile").write_text(f"include nb.d\nout.txt:\n\t@echo built > $@\n")
    for name in ("notebooks", "paperlib"):
        (tmp_path / name).symlink_to(ROOT / name)
    r = subprocess.run(["make", "-s", "out.txt"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and (tmp_path / "out.txt").read_text() == "built\n", r.stderr
    (tmp_path / "nb.d").write_text(rule.replace(" paperlib/fdp/tradeoff.py", f" {gone}").split("\npaperlib/")[0] + "\n")
    r = subprocess.run(["make", "-s", "out.txt"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "No rule to make target" in r.stderr  # the old form, without the empty targets


def test_prune_deletes_a_rule_that_names_a_missing_file(tmp_path):
    """``deps prune`` (run by make before it reads the rules): a rule naming a deleted module goes, a
    current one stays."""
    old = tmp_path / "old.d"
    old.write_text("# generated\nbook/notebooks/a.ipynb old.d: notebooks/01_tradeoff_basics.py "
                   "paperlib/artifact/figures.py paperlib/fdp/tradeoff.py\n")
    new = tmp_path / "new.d"
    new.write_text("# generated\nbook/notebooks/a.ipynb new.d: notebooks/01_tradeoff_basics.py "
                   "paperlib/fdp/tradeoff.py build/data-stamp.txt\npaperlib/fdp/tradeoff.py:\n")
    dry = subprocess.run([sys.executable, "-m", "paperlib.artifact.deps", "prune", "--dry-run", str(old), str(new)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert dry.stdout.split() == [str(new)] and old.exists()  # make -n reads the current rules only
    r = subprocess.run([sys.executable, "-m", "paperlib.artifact.deps", "prune", str(old), str(new),
                        str(tmp_path / "absent.d")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "" and not old.exists() and new.exists()


def test_make_tells_a_dry_run_from_a_real_one(tmp_path):
    """The Makefile's DRY_RUN is "n" under make -n only. Its first form also matched the n of the long option
    --no-builtin-rules that the Makefile adds to MAKEFLAGS, so every run counted as a dry run: the dependency rules
    were never written, and a notebook did not run again when a module it imports changed."""
    import re
    import shutil

    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    flags = re.search(r"^MAKEFLAGS \+= .*$", text, flags=re.M).group(0)
    dry = re.search(r"^DRY_RUN := .*$", text, flags=re.M).group(0)
    (tmp_path / "Makefile").write_text(f"{flags}\n{dry}\n$(info dry=[$(DRY_RUN)])\nall:\n\t@:\n")
    for args, want in (([], "dry=[]"), (["-s"], "dry=[]"), (["-n"], "dry=[n]"), (["-s", "-k"], "dry=[]"),
                       (["-ns"], "dry=[n]"), (["-s", "-j2"], "dry=[]")):
        r = subprocess.run(["make", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                           env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")})
        assert want in r.stdout, (args, r.stdout, r.stderr)
