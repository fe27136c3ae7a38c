"""Fixtures the test files share. The tests are grouped like paperlib's layers (README
"Layout"): tests/fdp/, tests/mechanisms/, tests/audit/, tests/implementations/,
tests/artifact/; the command line, the bad-input table, the layering rules and the README
examples are tested here at the top."""

import os
import subprocess
import sys
from pathlib import Path

# One thread per process for BLAS, OpenMP and torch, set before numpy or torch is imported
# (a value the caller set is kept): pytest-xdist already runs one worker per core, and
# subprocesses inherit it, so two processes that must agree sum in the same order.
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS")
for _var in THREAD_VARS:
    os.environ.setdefault(_var, "1")

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: Hang guard (seconds) for a subprocess or a time budget in a test: never a speed requirement.
#: At least 10x the slowest single step a test waits for on the development machine under load
#: (about 60 s: the paper-size epsilon of tests/test_cli.py with two other processes spinning),
#: so a slow or busy machine never fails a test by time; only a hang does. Timings belong to
#: bench/.
HANG_GUARD_S = 900


@pytest.fixture(autouse=True)
def _cli_time_budget_is_a_hang_guard(monkeypatch):
    """The CLI's default ``--max-seconds`` (40 s) is for people at a terminal; in a test it would
    make an answer depend on the machine's speed, so it is raised to :data:`HANG_GUARD_S`. Tests
    of the budget itself pass ``--max-seconds``."""
    from paperlib import cli

    monkeypatch.setattr(cli, "DEFAULT_MAX_SECONDS", float(HANG_GUARD_S))


@pytest.fixture()
def results(tmp_path, monkeypatch):
    """A fresh, empty results folder (``$PAPERLIB_RESULTS``) for one test."""
    from paperlib.artifact import provenance as pv

    d = tmp_path / "results"
    monkeypatch.setenv(pv.RESULTS_ENV, str(d))
    return d


@pytest.fixture()
def built_book_html():
    """The built book a test reads: $PAPERLIB_BOOK_HTML (``make test`` sets it to the smoke-mode test book), else
    the checkout's book/_build/html; skipped without one, failed when $PAPERLIB_REQUIRE_BROWSER=1."""
    import os
    from pathlib import Path

    html = Path(os.environ.get("PAPERLIB_BOOK_HTML") or Path(__file__).resolve().parents[1] / "book" / "_build" / "html")
    if not (html / "index.html").is_file():
        if os.environ.get("PAPERLIB_REQUIRE_BROWSER", "") == "1":
            pytest.fail(f"no built book at {html} (PAPERLIB_REQUIRE_BROWSER=1)", pytrace=False)
        pytest.skip(f"no built book at {html}: make book (or make test-book) first")
    return html


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch CPU thread while the test runs: the test machines are shared, and one
    thread is faster and steadier there (restored afterwards)."""
    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)


def run_cli(*args: str, timeout: float = HANG_GUARD_S) -> subprocess.CompletedProcess:
    """``python -m paperlib ARGS`` in a fresh interpreter from the repository root. ``tradeoff`` and
    ``epsilon`` get ``--max-seconds HANG_GUARD_S`` unless ARGS give one (see
    :func:`_cli_time_budget_is_a_hang_guard`); ``timeout`` is a hang guard."""
    args = list(args)
    if args[:1] in (["tradeoff"], ["epsilon"]) and "--max-seconds" not in args:
        args += ["--max-seconds", str(HANG_GUARD_S)]
    return subprocess.run([sys.executable, "-m", "paperlib", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


def run_main(argv, capsys):
    """``paperlib.cli.main(argv)`` in this process: ``(exit code, stdout, stderr)``; argparse's
    usage errors (SystemExit) give their exit code too."""
    from paperlib.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err
