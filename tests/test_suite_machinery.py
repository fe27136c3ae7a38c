"""The machinery around the suite itself: ``make test-loaded`` (``make test`` with the CPUs kept
busy) and ``.ci/run`` (the CI entry point, which runs the README's test command).

``make test-loaded`` is run with ``MAKE=true`` / ``MAKE=false`` standing in for the inner
``make test``: what is tested is that the busy loops start, that the inner status comes out
unchanged, and that the loops end with it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[1]


def _make(*args):
    if shutil.which("make") is None:
        pytest.skip("GNU make is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=HANG_GUARD_S)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a process of another user took the pid
        return False
    return True


@pytest.mark.parametrize("inner,status", [("true", 0), ("false", 1)])
def test_make_test_loaded_keeps_the_status_and_ends_its_busy_loops(inner, status):
    if not Path("/proc/loadavg").is_file():
        pytest.skip("no /proc/loadavg (not Linux)")
    r = _make("test-loaded", f"MAKE={inner}", "LOAD_PROCS=2")
    assert (r.returncode == 0) == (status == 0), r.stdout + r.stderr
    first = re.search(r"== make test with 2 busy loops \(pids (\d+) (\d+); load average now: [\d.]+ ", r.stdout)
    assert first, r.stdout
    assert f"== make test under load: status {status} after " in r.stdout and "load average" in r.stdout
    pids = [int(p) for p in first.groups()]
    assert not any(_alive(p) for p in pids), f"busy loops left running: {pids}"


def test_ci_run_installs_what_it_needs_then_runs_make_test():
    script = ROOT / ".ci" / "run"
    assert os.access(script, os.X_OK)
    r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert r.returncode == 0, r.stderr
    lines = [ln.strip() for ln in script.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines[-1] == "make test"  # the README's test command, last, so its status is the script's
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.search(r"^make test\s+#", readme, re.M)
    text = script.read_text()
    for tool in ("make", "git", "python3-venv"):
        assert tool in text


def test_make_test_fails_when_pytest_collects_nothing():
    """pytest's status 5 (no tests collected) is reported in one line and fails make test."""
    recipe = (ROOT / "Makefile").read_text()
    block = recipe.split("\ntest: ", 1)[1].split("\n\n", 1)[0]
    assert "rc -eq 5" in block and "collected no tests" in block and "exit $$rc" in block
