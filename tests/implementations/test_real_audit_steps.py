"""Every substituted round checked step by step (issue 20, Build 2-3), and DPSUR audited as its own rule.

``check_steps`` compares each real step with the mechanism it stands for: for DPSUR by replaying
its draws (divisor and update), for the Opacus releases by reading the divisor off the step's
noise-only residual. The tests feed it real DPSUR steps (paperlib's re-implementation or DPSUR's
own code, same draws), steps divided the wrong way, and sampler outputs of known mechanisms.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import run_main

from paperlib.implementations import real_audit as RA
from paperlib.implementations import runners
from paperlib.mechanisms import sampler as S

ROOT = Path(__file__).resolve().parents[2]
MODEL, N, Q, SIGMA, C = "tiny", 4, 0.45, 2.0, 0.5


@pytest.fixture(scope="module")
def points():
    g = torch.Generator().manual_seed(1)
    return torch.randn(N + 1, 1, 28, 28, generator=g), torch.randint(0, 10, (N + 1,), generator=g)


def _dpsur_steps(points, ds="D", trials=60, seed=9):
    X, y = points
    r = runners.run_steps("dpsur", MODEL, X, y, dataset="D" if ds == "D" else "Dprime", q=Q, sigma=SIGMA, C=C,
                          trials=trials, seed=seed, model_seed=0)
    G = runners.per_example_gradients(MODEL, X, y, seed=0)
    N_data = N if ds == "D" else N + 1
    draws = RA.replay_dpsur_draws(MODEL, N_data, Q, SIGMA, C, seed, trials, 0)
    return r, G[:N_data], draws


@pytest.mark.parametrize("ds", ["D", "D'"])
def test_real_dpsur_steps_agree_with_dpsurs_rule(points, ds):
    r, rows, draws = _dpsur_steps(points, ds)
    chk = RA.check_steps(r["updates"], rows, "dpsur", Q, SIGMA, C, draws=draws)
    assert chk["disagreeing"] == 0 and chk["first_disagreement"] is None, chk
    assert chk["method"] == "replayed draws" and chk["steps"] == 60
    # the replayed batches are the runner's, and the divisor is often not |B|: this is not ASGM
    assert np.array_equal(draws["batch_masks"].sum(axis=1), r["batch_sizes"])
    assert chk["divisor_is_not_batch_size"] > 5
    # the same steps checked as ASGM (divide by |B|) disagree, and the first one is named
    bad = RA.check_steps(r["updates"], rows, "asgm", Q, SIGMA, C, draws=draws)
    assert bad["disagreeing"] >= chk["divisor_is_not_batch_size"] > 0
    t = bad["first_disagreement"]["step"]
    assert bad["first_disagreement"]["divisor_mechanism"] != pytest.approx(bad["first_disagreement"]["divisor_read"])
    assert 0 <= t < 60


def test_dpsurs_own_code_agrees_with_dpsurs_rule_step_by_step(points, tmp_path, monkeypatch):
    """DPSUR's pinned source (run in its subprocess) against the replayed draws: every step agrees."""
    from test_dpsur import COMMIT, _fill, _source_bytes  # the pinned files from a cache, a mirror or the network

    b = _source_bytes()
    if b is None:
        pytest.skip("DPSUR's source is not in the cache, no git mirror, and no network")
    monkeypatch.setenv("PAPERLIB_CACHE", str(tmp_path))
    _fill(tmp_path / "dpsur" / COMMIT, b)
    r, rows, draws = _dpsur_steps(points, "D'", trials=40, seed=12)
    assert r["version"].startswith("DPSUR "), r["version"]
    chk = RA.check_steps(r["updates"], rows, "dpsur", Q, SIGMA, C, draws=draws)
    assert chk["disagreeing"] == 0 and chk["divisor_is_not_batch_size"] > 0, chk


def test_a_step_divided_by_its_own_batch_is_refused(points):
    """Steps with DPSUR's draws but divided by |B| (what the paper's ASGM model assumes) fail DPSUR's rule."""
    r, rows, draws = _dpsur_steps(points)
    clipped = S.clip(torch.as_tensor(rows), C)
    asgm = S.apply_round("asgm", clipped, torch.as_tensor(draws["batch_masks"]), torch.as_tensor(draws["noise"]),
                         Q, SIGMA, C).numpy()
    chk = RA.check_steps(asgm, rows, "dpsur", Q, SIGMA, C, draws=draws)
    assert chk["disagreeing"] > 0
    # one perturbed update (a divisor 0.1 % off) is one disagreement, at that step
    u = r["updates"].copy()
    t = int(np.flatnonzero(np.abs(u).sum(axis=1) > 0)[3])
    u[t] *= 1.001
    one = RA.check_steps(u, rows, "dpsur", Q, SIGMA, C, draws=draws)
    assert one["disagreeing"] == 1 and one["first_disagreement"]["step"] == t


@pytest.mark.parametrize("mech,wrong", [("easgm", "asgm"), ("asgm", "easgm"), ("feasgm", "easgm")])
def test_residual_read_off_accepts_the_mechanism_and_refuses_another(mech, wrong):
    """Without replayable noise the divisor is read off the residual: right mechanism 0 disagreements,
    a wrong one (N q = 1.8 is not an integer, so every rule differs) many."""
    v = np.random.default_rng(3).standard_normal((N + 1, 3000)) * 0.05
    x, b = S.sample(mech, v, Q, SIGMA, C, "D", 300, torch.Generator().manual_seed(4), return_batch_sizes=True)
    ok = RA.check_steps(x.numpy(), v[:N], mech, Q, SIGMA, C, batch_sizes=b.numpy())
    assert ok["disagreeing"] == 0 and ok["method"] == "residual read-off" and ok["resolves_adjacent"]
    bad = RA.check_steps(x.numpy(), v[:N], wrong, Q, SIGMA, C, batch_sizes=b.numpy())
    assert bad["disagreeing"] > 50


def test_the_chunk_check_block_by_block_is_the_one_shot_check(points, monkeypatch):
    """An audit checks a DPSUR chunk CHECK_BLOCK rounds at a time (the noise of one block in memory): its
    summary is that of one check_steps over all the chunk's steps with all its draws replayed at once."""
    r, rows, draws = _dpsur_steps(points, "D'", trials=45)
    blocks = list(RA._dpsur_draw_blocks(MODEL, N + 1, Q, SIGMA, C, 9, 45, 0, block=RA.CHECK_BLOCK))
    assert [b["noise"].shape[0] for b in blocks] == [16, 16, 13]
    for k in ("batch_masks", "divisor_masks", "noise"):
        assert np.array_equal(np.concatenate([b[k] for b in blocks]), draws[k])
    for mech in ("dpsur", "asgm"):  # agreeing, and disagreeing (the first disagreement numbered across blocks)
        one = RA.check_steps(r["updates"], rows, mech, Q, SIGMA, C, draws=draws)
        chunk = RA._check_chunk("dpsur", MODEL, r["updates"], rows, mech, Q, SIGMA, C, 9, 0, r["batch_sizes"])
        assert chunk == one, (chunk, one)
    assert RA.replay_dpsur_draws(MODEL, N + 1, Q, SIGMA, C, 9, 0, 0)["noise"].shape == (0, draws["noise"].shape[1])


def test_quick_audit_refuses_a_substitution_naming_the_step(points, monkeypatch):
    """run_steps whose DPSUR steps divide by |B| (the paper's model): quick mode refuses in one line."""
    real = runners.run_steps

    def asgm_divided(implementation, model_name, X, y, *, dataset, q, sigma, C, trials, seed, **kw):
        model = model_name
        out = real(implementation, model, X, y, dataset=dataset, q=q, sigma=sigma, C=C, trials=trials, seed=seed, **kw)
        N_data = len(X) - 1 if dataset == "D" else len(X)
        d = RA.replay_dpsur_draws(model, N_data, q, sigma, C, seed, trials, kw.get("model_seed", 0))
        G = runners.per_example_gradients(model, X, y, seed=kw.get("model_seed", 0))[:N_data]
        out["updates"] = S.apply_round("asgm", S.clip(torch.as_tensor(G), C), torch.as_tensor(d["batch_masks"]),
                                       torch.as_tensor(d["noise"]), q, sigma, C).numpy()
        return out

    monkeypatch.setattr(runners, "run_steps", asgm_divided)
    monkeypatch.setenv("WORKERS", "1")  # in process: the patched run_steps is not in Dask's worker processes
    with pytest.raises(RA.ImplementationMismatch, match=r"real step \d+ on D divides by .*substitution refused"):
        RA.audit_implementation("dpsur", MODEL, "synthetic", N=3, q=0.5, sigma=10, C=0.1, trials=40, seed=3,
                                progress=False)


def test_small_real_audit_has_no_disagreeing_steps():
    """A small quick audit of DPSUR's code: DPSUR's rule substituted, every real step agrees, and the
    normaliser found is the separate draw (with steps whose divisor is not |B|)."""
    r = RA.audit_implementation("dpsur", MODEL, "synthetic", N=3, q=0.5, sigma=10, C=0.1, trials=200, seed=3,
                                progress=False).to_json()
    assert r["mechanism"] == "dpsur" and r["path"] == "implementation-checked + mechanism"
    assert r["real_steps_disagreeing"] == 0
    assert r["normaliser_found"] == RA.SEPARATE_DRAW
    assert sum(c["divisor_is_not_batch_size"] for c in r["step_check"].values()) > 0
    assert r["check"]["passed"] and 0 < r["check"]["min_detectable_ks_distance"] < 1
    assert "SGM" in r["claim"]


def _result_files():
    d = Path(os.environ.get("PAPERLIB_RESULTS", ROOT / "results"))
    return sorted(d.glob("real_audit_*.json")) if d.is_dir() else []


def test_every_stored_real_audit_has_no_disagreeing_steps():
    """The real-audit results a quick run wrote (results/real_audit_*.json, this procedure's version):
    0 real steps whose divisor disagrees with the substituted mechanism, in each."""
    files = []
    for f in _result_files():
        rec = json.loads(f.read_text())
        if (rec.get("params") or {}).get("version") == RA.REAL_AUDIT_VERSION:
            files.append((f.name, rec["data"]))
    if not files:
        pytest.skip("no real-audit results of this version in results/ (run a quick make all)")
    for name, data in files:
        assert data["real_steps_disagreeing"] == 0, name
        if data["implementation"] == "dpsur":
            assert data["mechanism"] == "dpsur" and data["normaliser_found"] == RA.SEPARATE_DRAW, name


@pytest.mark.slow
def test_acceptance_command_audits_dpsur_in_default_mode(capsys, results):
    """Issue 20's acceptance command exits 0 in its default (quick) mode and names the separate draw."""
    argv = ["audit-implementation", "--implementation", "dpsur", "--model", "cnn-mnist", "--dataset", "synthetic",
            "--N", "3", "--q", "0.5", "--sigma", "10", "--C", "0.1", "--trials", "400", "--seed", "3"]
    code, out, err = run_main(argv, capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["mode"] == "quick" and d["mechanism"] == "dpsur"
    assert d["normaliser_found"] == RA.SEPARATE_DRAW
    assert d["real_steps_disagreeing"] == 0
    assert "power" in d["check"] and "SGM" in d["claim"]
