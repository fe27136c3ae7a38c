"""DPSUR's step: the re-implementation follows DPSUR's source (pinned commit), and agrees with it.

The re-implementation (paperlib.implementations.dpsur) is tested against independent
computations (numpy clipping, autograd gradients, binomial laws); the comparison with
DPSUR's own code runs it in a subprocess from the pinned files, found in a temporary
``$PAPERLIB_CACHE/dpsur/<commit>/``, filled from (in this order) the user's cache, a git
mirror of the repository (``$PAPERLIB_DPSUR_MIRROR`` or ``../.mirror/JeffffffFu+DPSUR/repo``
beside the checkout) or the network; without any of them those tests skip.
"""

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from paperlib.implementations import dpsur as D
from paperlib.implementations import dpsur_source as S
from paperlib.implementations.models import build_model
from paperlib.implementations.normaliser_detection import detect_normaliser
from paperlib.implementations.runners import per_example_gradients

ROOT = Path(__file__).resolve().parents[2]
PIN = S.pinned()
COMMIT = PIN["commit"]
MODEL = "tiny"


@pytest.fixture(scope="module")
def data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(4, 1, 28, 28, generator=g), torch.randint(0, 10, (4,), generator=g)


# ---------------------------------------------------------------------------- the pin


def test_pin_is_complete_and_cited():
    assert re.fullmatch(r"[0-9a-f]{40}", COMMIT) and D.DPSUR_COMMIT == COMMIT
    assert PIN["repository"] == "https://github.com/JeffffffFu/DPSUR"
    for rel, meta in PIN["files"].items():
        assert re.fullmatch(r"[0-9a-f]{64}", meta["sha256"]) and meta["bytes"] > 0, rel
    for rel in S.STEP_MODULES.values():
        assert rel in PIN["files"]
    doc = D.__doc__
    assert COMMIT in doc
    for cite in ("data/util/sampling.py:16-21", "algorithm/DPSUR.py:145-146", "utils/dp_optimizer.py:63",
                 "utils/dp_optimizer.py:36", "train_with_dp.py:16-30"):
        assert cite in doc, cite


# ---------------------------------------------------------------------------- the re-implementation


def test_clipping_is_dpsurs(data):
    g = torch.Generator().manual_seed(0)
    G = torch.randn(5, 300, generator=g)
    G[0] *= 0.5 / G[0].norm()  # norm exactly C: DPSUR still scales it by C / (C + 1e-6)
    G[1] *= 0.01 / G[1].norm()  # far below C: unchanged
    C = 0.5
    got = D.clip_rows(G, C).double().numpy()
    Gn = G.double().numpy()
    norms = np.linalg.norm(Gn, axis=1, keepdims=True)
    want = Gn * np.minimum(C / (norms + 1e-6), 1.0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    assert got[0] @ got[0] < C ** 2 * (1 - 1e-6)
    np.testing.assert_array_equal(got[1], G[1].numpy())


def test_update_without_noise_is_clipped_sum_over_the_other_draw(data):
    """sigma = 0: u = S_B / m with B and m from the two draws, computed from autograd gradients."""
    X, y = data
    N, q, C = 4, 0.3, 0.3
    model = build_model(MODEL)
    grads = per_example_gradients(MODEL, X, y)
    clipped = grads * np.minimum(C / (np.linalg.norm(grads, axis=1, keepdims=True) + 1e-6), 1.0)
    gen = torch.Generator().manual_seed(0)  # 20 rounds: 3 with an empty divisor draw and a batch, 5 empty batches
    seen_qN = False
    for _ in range(20):
        r = D.dpsur_step_record(model, X, y, q, 0.0, C, gen)
        if not r["batch"]:
            assert not r["stepped"] and (r["update"] == 0).all()
            continue
        m = len(r["divisor_batch"]) or q * N  # empty divisor draw: minibatch_size keeps batch_size = q N
        seen_qN |= not r["divisor_batch"]
        assert r["divisor"] == m
        np.testing.assert_allclose(r["update"].double().numpy(), clipped[r["batch"]].sum(axis=0) / m,
                                   rtol=1e-5, atol=1e-7)
    assert seen_qN


def test_batched_equals_single_steps(data):
    X, y = data
    model = build_model(MODEL)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    U, sizes, m = D.dpsur_updates(model, X, y, 0.4, 2.0, 0.5, g1, trials=12, chunk=5, return_divisors=True)
    for t in range(12):
        r = D.dpsur_step_record(model, X, y, 0.4, 2.0, 0.5, g2)
        torch.testing.assert_close(U[t], r["update"], rtol=1e-5, atol=1e-6)
        assert sizes[t] == len(r["batch"]) and m[t] == r["divisor"]


def test_the_two_draws_are_independent_poisson(data):
    """|B| and the divisor draw are each Binomial(N, q) and independent (DPSUR.py:145-148)."""
    X, y = data
    N, q, T = 4, 0.6, 4000
    model = build_model(MODEL)
    U, sizes, m = D.dpsur_updates(model, X, y, q, 1.0, 0.5, torch.Generator().manual_seed(0), T,
                                  return_divisors=True)
    k1 = np.where(m.numpy() == q * N, 0, m.numpy()).astype(int)  # back to |B_1| (q N = 2.4 marks an empty draw)
    k2 = sizes.numpy()
    pmf = stats.binom.pmf(np.arange(N + 1), N, q)
    for k in (k1, k2):
        obs = np.bincount(k, minlength=N + 1)
        assert stats.chisquare(obs, pmf * T).pvalue > 1e-3
    table = np.zeros((N + 1, N + 1))
    np.add.at(table, (k1, k2), 1)
    assert stats.chi2_contingency(table[1:, 1:]).pvalue > 1e-3  # independent
    assert np.mean(k1 != k2) > 0.5  # the divisor is mostly not |B|
    assert (U[torch.from_numpy(k2 == 0)] == 0).all()  # empty batch: no step


def test_detect_normaliser_reads_off_the_divisor_draw(data):
    """What the update reveals is DPSUR's divisor m, not the size of the batch it summed."""
    X, y = data
    N, q, sigma, C = 4, 0.6, 0.5, 1.0
    model = build_model(MODEL)
    U, sizes, m = D.dpsur_updates(model, X, y, q, sigma, C, torch.Generator().manual_seed(5), 60,
                                  return_divisors=True)
    d = detect_normaliser(U.double().numpy(), per_example_gradients(MODEL, X, y), q=q, sigma=sigma, C=C, N_data=N)
    assert d["normaliser"] == "|B|"
    inferred = np.array(d["inferred_batch_sizes"])
    ok = (sizes.numpy() > 0) & (m.numpy() == np.rint(m.numpy())) & (m.numpy() >= 1)
    assert ok.sum() > 40
    assert np.mean(inferred[ok] == m.numpy()[ok]) >= 0.95
    assert np.mean(inferred[ok] == sizes.numpy()[ok]) < 0.7


# ---------------------------------------------------------------------------- provenance


def test_provenance_says_which_ran():
    short = COMMIT[:7]
    txt = S.dpsur_provenance()
    assert txt.startswith("paperlib's re-implementation of DPSUR's step") and short in txt
    assert "algorithm/DPSUR.py:" not in txt and "(" not in txt  # a sentence; the lines are a source apart
    inp = S.dpsur_inputs()
    assert inp["code"] == txt and inp["code_as_paper"] is False and "JeffffffFu/DPSUR" in inp["paper_code"]
    assert "algorithm/DPSUR.py:" in inp["code_lines"] and "data/util/sampling.py:16-21" in inp["code_lines"]
    own = {"ran": "source", "commit": COMMIT, "how": "downloaded"}
    assert S.dpsur_provenance(own) == f"DPSUR's own step at commit {short} (downloaded, sha256 verified)"
    assert S.dpsur_inputs(own)["code_as_paper"] is True
    checked = dict(own, agreed=True)
    assert S.dpsur_provenance(checked).endswith("sha256 verified): agrees")
    assert S.dpsur_inputs(checked)["code_as_paper"] is False  # only a check ran; the audit used ours


# ---------------------------------------------------------------------------- the source: cache, download, verification


def _source_bytes():
    """The pinned files' bytes from the user's cache, a git mirror or the network; None if none."""
    files = PIN["files"]
    home = S.source_dir(COMMIT)
    if all((home / rel).is_file() for rel in files):
        out = {rel: (home / rel).read_bytes() for rel in files}
        if all(hashlib.sha256(b).hexdigest() == files[rel]["sha256"] for rel, b in out.items()):
            return out
    mirror = os.environ.get("PAPERLIB_DPSUR_MIRROR") or str(ROOT.parent / ".mirror" / "JeffffffFu+DPSUR" / "repo")
    if Path(mirror).is_dir() and shutil.which("git"):
        try:
            return {rel: subprocess.run(["git", "--git-dir", mirror, "show", f"{COMMIT}:{rel}"], capture_output=True,
                                        check=True, timeout=30).stdout for rel in files}
        except (subprocess.SubprocessError, OSError):
            pass
    try:
        return {rel: S._urlopen(PIN["raw_url"].format(commit=COMMIT, path=rel), 5.0) for rel in files}
    except Exception:  # offline
        return None


@pytest.fixture(scope="module")
def source_bytes():
    b = _source_bytes()
    if b is None:
        pytest.skip("DPSUR's source is not in the cache, no git mirror, and no network")
    return b


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERLIB_CACHE", str(tmp_path))
    return tmp_path / "dpsur" / COMMIT


def _fill(folder: Path, contents):
    for rel, b in contents.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(b)


def test_source_step_agrees_with_reimplementation(cache, source_bytes):
    _fill(cache, source_bytes)
    r = S.compare_with_source()
    assert r["agreed"], r
    assert r["same_batches"] and r["same_divisor_batches"] and r["same_divisors"] and r["same_stepped"]
    assert max(r["max_abs_diff"].values()) <= r["tolerance"] <= 1e-5
    c = r["cases"]  # the fixed input exercises both empty draws and m != |B|
    assert c["empty_divisor_draw"] >= 1 and c["empty_batch"] >= 1 and c["divisor_differs_from_batch_size"] >= 1
    assert r["how"] == "local copy" and r["provenance"].endswith("(local copy, sha256 verified): agrees")


def test_download_verifies_before_storing(cache, source_bytes):
    urls = []

    def opener(url, timeout):
        urls.append(url)
        rel = url.split(f"/{COMMIT}/", 1)[1]
        return source_bytes[rel]

    got = S.get_source(download=True, opener=opener)
    assert got["how"] == "downloaded" and len(urls) == len(PIN["files"])
    assert all(u.startswith(f"https://raw.githubusercontent.com/JeffffffFu/DPSUR/{COMMIT}/") for u in urls)
    assert all((cache / rel).read_bytes() == b for rel, b in source_bytes.items())
    assert S.get_source(download=False)["how"] == "local copy"


def test_tampered_download_is_refused_and_not_stored(cache):
    def opener(url, timeout):
        return b"print('not DPSUR')\n"

    with pytest.raises(S.DPSURSourceError) as e:
        S.get_source(download=True, opener=opener)
    msg = str(e.value)
    assert "\n" not in msg and "raw.githubusercontent.com" in msg and "expected" in msg
    assert not cache.exists() or not any(p.is_file() for p in cache.rglob("*"))


def test_tampered_cached_file_gives_one_line_error_and_nothing_runs(cache, monkeypatch):
    rel = "utils/dp_optimizer.py"
    (cache / rel).parent.mkdir(parents=True)
    (cache / rel).write_text("# tampered\n")

    def no_run(*a, **k):
        raise AssertionError("a subprocess ran")

    monkeypatch.setattr(S.subprocess, "run", no_run)
    X, y = S._check_data(4, 1)
    with pytest.raises(S.DPSURSourceError) as e:
        S.run_source_steps(MODEL, X, y, q=0.5, sigma=1.0, C=0.5, trials=2, seed=0, download=True)
    msg = str(e.value)
    assert "\n" not in msg and rel in msg and hashlib.sha256(b"# tampered\n").hexdigest() in msg


def test_missing_source_without_download_is_unavailable(cache):
    with pytest.raises(S.DPSURSourceUnavailable, match="full mode downloads it"):
        S.get_source(download=False)


def test_bad_input_one_line(cache):
    X, y = S._check_data(4, 1)
    with pytest.raises(ValueError, match="q must lie in"):
        S.run_source_steps(MODEL, X, y, q=1.5, sigma=1.0, C=0.5, trials=2, seed=0)


def test_runner_steps_match_the_runners_dpsur_path(cache, source_bytes, data):
    """What runners would get from DPSUR's own step: the re-implementation's numbers, its notes."""
    _fill(cache, source_bytes)
    X, y = data
    U, sizes, version, notes = S.runner_steps(MODEL, X, y, 0.5, 2.0, 0.5, 6, 9, 1.0, 0)
    U2, s2 = D.dpsur_updates(build_model(MODEL), X, y, 0.5, 2.0, 0.5, torch.Generator().manual_seed(9), 6)
    np.testing.assert_allclose(U, U2.double().numpy(), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(sizes, s2.numpy())
    assert version == f"DPSUR {COMMIT[:7]}"
    assert notes[0] == f"DPSUR's own step at commit {COMMIT[:7]} (local copy, sha256 verified)"
