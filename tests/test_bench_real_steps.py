"""bench/bench_real_steps.py in smoke mode: it runs, reduces every chunk as an audit does and finds
the two sides bitwise equal (its speed-up is measured by ``make bench``, never asserted in a test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_bench_real_steps_smoke_is_bitwise_equal(tmp_path):
    pytest.importorskip("distributed")
    env = {**os.environ, "MODE": "smoke", "BENCH_REPEATS": "1", "PAPERLIB_RESULTS": str(tmp_path),
           "PYTHONPATH": str(ROOT), "DASK_SCHEDULER": ""}
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_real_steps.py")], capture_output=True,
                       text=True, env=env, timeout=900, cwd=ROOT)
    assert r.returncode in (0, 1), r.stderr[-2000:]  # 1: below the speed-up target on a busy machine
    [path] = list(tmp_path.rglob("bench_real_steps*.json"))
    doc = json.loads(path.read_text())
    rep = doc.get("data", doc)
    assert rep["bitwise_equal"] is True and rep["workers"] == 2
    ran = [row for row in rep["rows"] if "skipped" not in row]
    assert {row["implementation"] for row in ran} >= {"opacus-installed", "dpsur"}
    for row in ran:
        assert row["bitwise_equal"] and row["real_steps_disagreeing"] == 0 and row["steps"] == 40
        assert len(row["seconds_1_runs"]) == len(row["seconds_k_runs"]) == 1
    assert f"speed-up {rep['speedup']:.2f}x" in r.stdout


def test_bench_step_projection_smoke_agrees(tmp_path):
    """bench/bench_step_projection.py in smoke mode: both paths run and reduce alike (no time asserted)."""
    env = {**os.environ, "MODE": "smoke", "PAPERLIB_RESULTS": str(tmp_path), "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_step_projection.py")], capture_output=True,
                       text=True, env=env, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    [path] = list(tmp_path.rglob("bench_step_projection*.json"))
    rep = json.loads(path.read_text())
    rep = rep.get("data", rep)
    assert rep["model"] == "tiny" and [row["q"] for row in rep["rows"]] == [0.005, 0.5]
    assert all(row["agree"] and row["steps"] == 20 for row in rep["rows"])
