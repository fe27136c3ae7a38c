"""Progress bars of the long numerics (paperlib.fdp.progress): shown on stderr with ``progress=True``,
never with ``progress=False``, not by default under pytest (stderr is not a terminal), a callable
instead of a bar, and no bar (same numbers) without tqdm."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from paperlib.fdp.progress import progress_bar
from paperlib.mechanisms.guarantees import asgm_guarantee, easgm_guarantee

ALPHA = np.linspace(0, 1, 40)


def _mix():
    return easgm_guarantee(40, 0.3, 1.0, 20)


def test_progress_true_writes_a_tqdm_bar_to_stderr(capsys):
    beta = _mix()(ALPHA, tol=1e-5, progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert "EASGM guarantee: curve" in err and "evaluations" in err  # tqdm's line: desc, count, unit
    assert "\r" in err or "it/s" in err or "evaluations/s" in err
    np.testing.assert_allclose(beta, _mix()(ALPHA, tol=1e-5, progress=False), rtol=0, atol=0)


@pytest.mark.parametrize("progress", [False, None])
def test_progress_false_or_default_writes_nothing(capsys, progress):
    _mix()(ALPHA, tol=1e-5, progress=progress)
    _mix().epsilon(1e-5, progress=progress)
    assert capsys.readouterr() == ("", "")


def test_epsilon_of_an_asgm_mixture_shows_its_profile_evaluations(capsys):
    g = asgm_guarantee(30, 0.5, 1.0, 10)
    eps = g.epsilon(1e-5, progress=True)
    err = capsys.readouterr().err
    assert "ASGM guarantee: epsilon" in err and "profile evaluations" in err
    assert eps == pytest.approx(asgm_guarantee(30, 0.5, 1.0, 10).epsilon(1e-5), rel=0, abs=0)


def test_a_callable_receives_the_counts(capsys):
    seen = []
    _mix()(ALPHA, tol=1e-5, progress=lambda done, total: seen.append(done))
    assert seen and seen == sorted(seen) and seen[-1] > 0
    assert capsys.readouterr() == ("", "")


def test_no_tqdm_no_bar_same_numbers(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    beta = _mix()(ALPHA, tol=1e-5, progress=True)
    assert capsys.readouterr().err == ""
    monkeypatch.undo()
    np.testing.assert_allclose(beta, _mix()(ALPHA, tol=1e-5, progress=False), rtol=0, atol=0)


def test_nested_bars_show_only_the_outermost(capsys):
    with progress_bar(True, total=2, desc="outer") as outer:
        with progress_bar(True, total=3, desc="inner") as inner:
            inner.update(3)
        outer.update(2)
    err = capsys.readouterr().err
    assert "outer" in err and "inner" not in err


def test_pld_composition_shows_its_grid_passes(capsys):
    pytest.importorskip("dp_accounting")
    from paperlib.mechanisms.curves import curve

    c = curve("sgm", "guarantee", 100, 0.01, 1.0, 10, rounds=50, progress=True)
    c.epsilon(1e-5)
    err = capsys.readouterr().err
    assert "PLD composition, 50 rounds" in err and "directions" in err
    c2 = curve("sgm", "guarantee", 100, 0.01, 1.0, 10, rounds=50, progress=False)
    assert c2.epsilon(1e-5) == pytest.approx(c.epsilon(1e-5), rel=1e-12)
    assert capsys.readouterr().err == ""
