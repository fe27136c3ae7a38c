"""Fixtures the test files share. The tests are grouped like paperlib's layers (README
"Layout"): tests/fdp/, tests/mechanisms/, tests/audit/, tests/implementations/,
tests/artifact/; the command line, the bad-input table, the layering rules and the README
examples are tested here at the top."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def results(tmp_path, monkeypatch):
    """A fresh, empty results folder (``$PAPERLIB_RESULTS``) for one test."""
    from paperlib.artifact import provenance as pv

    d = tmp_path / "results"
    monkeypatch.setenv(pv.RESULTS_ENV, str(d))
    return d


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch CPU thread while the test runs: the test machines are shared, and one
    thread is faster and steadier there (restored afterwards)."""
    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m paperlib ARGS`` in a fresh interpreter from the repository root."""
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
