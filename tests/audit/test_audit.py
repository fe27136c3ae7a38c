"""Tests of paperlib.audit: the game, both distinguishers, Clopper-Pearson, eps_L (THEORY.md section 9).

The acceptance case (EASGM, N = 3, q = 0.5, sigma = 2, C = 1, n = 20; 20,000 counted
rounds plus 20,000 calibration rounds): the optimal distinguisher's empirical
(FPR, FNR) lies on or above the guarantee curve of Theorem 3.6 within the
Clopper-Pearson box, and its eps_L at delta = 1e-5 exceeds the SGM claim's epsilon.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy import stats

from paperlib import audit as A
from paperlib import cli
from paperlib.mechanisms import simulation
from paperlib.artifact import provenance as pv
from paperlib.artifact import sweeps
from paperlib.mechanisms.guarantees import easgm_guarantee, sgm_claim


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ----------------------------------------------------------------------------- statistics
@pytest.mark.parametrize("k,n", [(0, 1), (0, 50), (3, 50), (25, 50), (50, 50), (1, 10_000), (9_053, 10_000)])
def test_clopper_pearson_matches_scipy_binomtest(k, n):
    for conf in (0.95, 0.99):
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=conf, method="exact")
        lo, hi = A.clopper_pearson(k, n, conf)
        assert lo == pytest.approx(ci.low, abs=1e-12)
        assert hi == pytest.approx(ci.high, abs=1e-12)
    lo, hi = A.clopper_pearson(np.array([0, 3]), np.array([50, 50]))
    assert lo.shape == hi.shape == (2,)


def test_clopper_pearson_bad_input():
    with pytest.raises(ValueError, match="k"):
        A.clopper_pearson(5, 4)
    with pytest.raises(ValueError, match="n"):
        A.clopper_pearson(0, 0)
    with pytest.raises(ValueError, match="confidence"):
        A.clopper_pearson(1, 4, 1.0)


def test_eps_lower_by_hand():
    # alpha_r = 0.01, beta_r = 0.5, delta = 1e-5:
    # log((1 - 1e-5 - 0.01) / 0.5) = log(1.97998) = 0.68308; log((1 - 1e-5 - 0.5) / 0.01) = log(49.999) = 3.91200
    assert A.eps_lower(0.01, 0.5, 1e-5) == pytest.approx(3.912003, abs=1e-6)
    assert A.eps_lower(0.5, 0.01, 1e-5) == pytest.approx(3.912003, abs=1e-6)
    # both rates above 1/2: no evidence at all
    assert A.eps_lower(0.6, 0.6, 1e-5) == 0.0
    # numerator <= 0 is left out: alpha_r = 1 -> only the other term, log((1-1e-5-0.2)/1) < 0 -> 0
    assert A.eps_lower(1.0, 0.2, 1e-5) == 0.0
    # delta_L at eps = 1: max(0, 1 - e*0.01 - 0.5, 1 - e*0.5 - 0.01) = 0.5 - 0.0271828 = 0.4728172
    assert A.delta_lower(0.01, 0.5, 1.0) == pytest.approx(0.4728172, abs=1e-7)
    assert A.delta_lower(0.6, 0.6, 0.0) == 0.0
    # consistency: delta_L at eps_L is delta (the bound is tight at its own epsilon)
    e = A.eps_lower(0.02, 0.3, 1e-3)
    assert A.delta_lower(0.02, 0.3, e) == pytest.approx(1e-3, abs=1e-12)
    with pytest.raises(ValueError, match="delta"):
        A.eps_lower(0.1, 0.1, 0.0)
    with pytest.raises(ValueError, match="eps"):
        A.delta_lower(0.1, 0.1, -1.0)


def test_select_threshold_separated_and_overlapping():
    rng = np.random.default_rng(0)
    sd, sq = rng.normal(0, 1, 500), rng.normal(10, 1, 500)
    thr, info = A.select_threshold(sd, rng.random(500), sq, rng.random(500), delta=1e-5)
    assert info["fpr"] == 0.0 and info["fnr"] == 0.0
    assert sd.max() <= thr[0] < sq.min()
    # identical score laws: no threshold certifies anything
    sd, sq = rng.normal(0, 1, 500), rng.normal(0, 1, 500)
    _, info = A.select_threshold(sd, rng.random(500), sq, rng.random(500), delta=1e-5)
    assert info["value"] < 0.5


# ----------------------------------------------------------------------------- projected LLR
@pytest.mark.parametrize("mechanism", ["sgm", "easgm", "asgm", "feasgm"])
@pytest.mark.parametrize("n", [2, 9])
def test_projected_llr_equals_brute_force(mechanism, n):
    rng = np.random.default_rng(n)
    N, q, sigma, C = 3, 0.6, 0.8, 1.0  # floor(3*0.6) = 1, floor(4*0.6) = 2
    v = rng.normal(scale=0.7, size=(N + 1, n))  # some rows clipped, some not
    x = rng.normal(scale=1.5, size=(30, n)) + v[0]
    model = A.WhiteBoxModel(mechanism, v, q, sigma, C)
    d = A.OptimalDistinguisher()
    d.bind(model)
    xt = torch.as_tensor(x)
    got = d.score(xt, model.project(xt))
    want = A.brute_force_llr(mechanism, v, q, sigma, C, x)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_projected_llr_worst_case_and_q_one():
    v = A.worst_case_vectors(4, 12, 0.1, direction="random", seed=3)
    x = np.random.default_rng(0).normal(scale=2.0, size=(20, 12))
    for mech, q in (("easgm", 1.0), ("asgm", 0.7), ("easgm", 0.005)):
        model = A.WhiteBoxModel(mech, v, q, 10.0, 0.1)
        d = A.OptimalDistinguisher()
        d.bind(model)
        xt = torch.as_tensor(x)
        np.testing.assert_allclose(d.score(xt, model.project(xt)), A.brute_force_llr(mech, v, q, 10.0, 0.1, x),
                                   rtol=1e-9, atol=1e-9)
        # worst-case data: 2^N subsets merge into the N+1 batch sizes (rank-1 span)
        assert model.P.size <= 5 and model.Q.size <= 10


def test_component_pairs():
    v = A.worst_case_vectors(3, 10, 1.0)
    m = A.WhiteBoxModel("asgm", v, 0.5, 2.0, 1.0)
    # ASGM: new point not sampled -> identical pair (P = Q), also for the empty batch (both divide by 1)
    assert m.pairs.identical.sum() == 4  # k = 0, 1, 2, 3 with b = 0
    assert m.pairs.weight.sum() == pytest.approx(1.0)
    assert m.pairs.count.sum() == 16  # 2^(N+1) pairs (B, b)


# ----------------------------------------------------------------------------- the game vs theory
def test_acceptance_easgm_N3():
    """Acceptance: EASGM N=3, q=0.5, sigma=2, C=1, n=20, 20,000 counted + 20,000 calibration rounds."""
    N, q, sigma, C, n, delta = 3, 0.5, 2.0, 1.0, 20, 1e-5
    v = A.worst_case_vectors(N, n, C)
    res = A.audit_distinguishers(v, "easgm", q, sigma, C, trials=20_000, seed=0, delta=delta,
                                 distinguishers={"opt": "optimal", "norm": "normality"})
    r = res["opt"]
    f = easgm_guarantee(N, q, sigma, n)
    claim = sgm_claim(q, sigma).epsilon(delta)
    assert r.trials_D == r.trials_Dprime == 10_000
    assert r.path == res["norm"].path == "projected" and r.batched  # chosen automatically: both allow it
    # on or above the guarantee curve within the Clopper-Pearson box
    assert r.fnr_ci[1] >= f([r.fpr_ci[1]])[0]
    assert r.eps_lower > claim
    assert r.eps_claimed == pytest.approx(claim)
    assert r.violation
    # the normality distinguisher also beats the claim here, and not the optimal one
    assert res["norm"].eps_lower > claim
    assert res["norm"].eps_lower <= r.eps_lower + 0.5


def test_empirical_tradeoff_above_guarantee_at_many_thresholds():
    """The whole empirical curve of the optimal test (index hidden) lies above Theorem 3.6's curve."""
    N, q, sigma, C, n = 3, 0.5, 2.0, 1.0, 20
    v = A.worst_case_vectors(N, n, C)
    model = A.WhiteBoxModel("easgm", v, q, sigma, C)
    d = A.OptimalDistinguisher()
    d.bind(model)
    from paperlib.mechanisms import sampler as M

    lp = d.score(x := M.sample("easgm", v, q, sigma, C, "D", 10_000, torch.Generator().manual_seed(1)),
                 model.project(x))
    lq = d.score(x := M.sample("easgm", v, q, sigma, C, "D'", 10_000, torch.Generator().manual_seed(2)),
                 model.project(x))
    f = easgm_guarantee(N, q, sigma, n)
    for t in np.quantile(np.concatenate([lp, lq]), np.linspace(0.02, 0.98, 25)):
        fp, fn = int((lp > t).sum()), int((lq <= t).sum())
        a_r = A.clopper_pearson(fp, lp.size)[1]
        b_r = A.clopper_pearson(fn, lq.size)[1]
        assert b_r >= f([a_r])[0]


def test_llr_law_matches_simulation_module():
    """Our LLR on real n-dimensional outputs has the law simulation.py draws from (o1, W) (ASGM and EASGM)."""
    from paperlib.mechanisms import sampler as M

    for mech, N, q, sigma, n in (("asgm", 3, 0.7, 2.0, 20), ("easgm", 2, 0.3, 1.0, 8)):
        v = A.worst_case_vectors(N, n, 1.0)
        model = A.WhiteBoxModel(mech, v, q, sigma, 1.0)
        d = A.OptimalDistinguisher()
        d.bind(model)
        ours = []
        for i, ds in enumerate(("D", "D'")):
            x = M.sample(mech, v, q, sigma, 1.0, ds, 6000, torch.Generator().manual_seed(10 + i))
            ours.append(d.score(x, model.project(x)))
        sp, sq = simulation.simulate_llr(mech, N, q, sigma, n, 6000, seed=4, reveal_index=False)
        assert stats.ks_2samp(ours[0], sp).pvalue > 1e-3
        assert stats.ks_2samp(ours[1], sq).pvalue > 1e-3
        if mech == "asgm":  # THEORY.md section 6: simulated optimal test at alpha = 0.1 gives FNR 0.574
            beta = simulation.empirical_tradeoff(ours[0], ours[1], [0.1])[0]
            assert beta == pytest.approx(0.574, abs=0.03)


# ----------------------------------------------------------------------------- projected vs full path
def test_path_resolution():
    v = A.worst_case_vectors(2, 10, 0.1)
    kw = dict(trials=20, seed=0)
    assert A.audit(v, "easgm", 0.5, 10.0, 0.1, **kw).path == "projected"
    assert A.audit(v, "easgm", 0.5, 10.0, 0.1, distinguisher="normality", **kw).path == "projected"
    assert A.audit(v, "easgm", 0.5, 10.0, 0.1, path="full", **kw).path == "full"
    ks = {"name": "normality", "test": "ks"}
    assert A.audit(v, "easgm", 0.5, 10.0, 0.1, distinguisher=ks, **kw).path == "full"
    r = A.audit(v, "easgm", 0.5, 10.0, 0.1, batched=False, **kw)
    assert (r.path, r.batched) == ("full", False)
    assert r.to_dict()["path"] == "full"
    with pytest.raises(ValueError, match="path"):
        A.audit(v, "easgm", 0.5, 10.0, 0.1, distinguisher=ks, path="projected", **kw)
    with pytest.raises(ValueError, match="path"):
        A.audit(v, "easgm", 0.5, 10.0, 0.1, batched=False, path="projected", **kw)
    with pytest.raises(ValueError, match="path"):
        A.audit(v, "easgm", 0.5, 10.0, 0.1, path="fast", **kw)


def _fresh_scores(model, dist, path, dataset, trials, seed):
    """Optimal-distinguisher scores of fresh rounds sampled on ``path``."""
    from paperlib.mechanisms import sampler as M

    g = torch.Generator().manual_seed(seed)
    v, args = model.clipped, (model.mechanism, model.clipped, model.q, model.sigma, model.C, dataset, trials, g)
    if path == "projected":
        y, res = M.sample_projected(*args, basis=model.on("cpu")["basis"])
        return dist.score(None, A.components.Projection(y, (y * y).sum(dim=1), res))
    x = M.sample(*args)
    assert x.shape[1] == v.shape[1]
    return dist.score(x, model.project(x))


@pytest.mark.parametrize("mechanism,N,q,n", [("easgm", 3, 0.5, 20), ("asgm", 3, 0.7, 50), ("feasgm", 4, 0.5, 30)])
def test_projected_and_full_audits_agree(mechanism, N, q, n):
    """Same problem on both paths: at each audit's threshold, the error counts of the other path's rounds fall
    in compatible Clopper-Pearson intervals, and the score laws agree (two-sample KS)."""
    sigma, C, T = 2.0, 1.0, 4000
    v = A.worst_case_vectors(N, n, C, direction="random", seed=1)
    res = {path: A.audit(v, mechanism, q, sigma, C, trials=T, seed=5, path=path) for path in ("projected", "full")}
    model = A.WhiteBoxModel(mechanism, v, q, sigma, C)
    d = A.OptimalDistinguisher()
    d.bind(model)
    scores = {path: {ds: _fresh_scores(model, d, path, ds, T // 2, seed=100 + 2 * i + j)
                     for j, ds in enumerate(("D", "D'"))} for i, path in enumerate(("projected", "full"))}
    for ds in ("D", "D'"):
        assert stats.ks_2samp(scores["projected"][ds], scores["full"][ds]).pvalue > 1e-4
    for path, r in res.items():
        assert r.path == path
        other = "full" if path == "projected" else "projected"
        fp = int((scores[other]["D"] > r.threshold[0]).sum())
        fn = int((scores[other]["D'"] <= r.threshold[0]).sum())
        lo, hi = A.clopper_pearson(fp, T // 2)
        assert lo <= r.fpr_ci[1] and r.fpr_ci[0] <= hi  # the two FPR intervals overlap
        lo, hi = A.clopper_pearson(fn, T // 2)
        assert lo <= r.fnr_ci[1] and r.fnr_ci[0] <= hi
    # (eps_L itself is not compared: near FNR = 0 it moves by ~1 with a couple of counts, and the two audits
    # choose their thresholds on different calibration rounds)


# ----------------------------------------------------------------------------- reproducibility
def test_same_seed_same_numbers_and_loop_equals_chunk_one():
    v = A.worst_case_vectors(2, 6, 0.1)
    kw = dict(trials=60, calibration_trials=40, distinguishers=["optimal", "normality"], sigma=10.0, C=0.1)
    a = A.audit_distinguishers(v, "asgm", 0.6, seed=3, **kw)
    b = A.audit_distinguishers(v, "asgm", 0.6, seed=3, **kw)
    for k in a:
        da, db = a[k].to_dict(), b[k].to_dict()
        da.pop("wall_time_s"), db.pop("wall_time_s")
        assert da == db
    assert all(a[k].path == "projected" for k in a)
    c = A.audit_distinguishers(v, "asgm", 0.6, seed=3, chunk_size=1, path="full", **kw)
    d = A.audit_distinguishers(v, "asgm", 0.6, seed=3, batched=False, **kw)
    assert all(d[k].path == "full" and not d[k].batched for k in d)
    for k in c:
        assert (c[k].false_positives, c[k].false_negatives, c[k].threshold) == \
               (d[k].false_positives, d[k].false_negatives, d[k].threshold)
    e = A.audit_distinguishers(v, "asgm", 0.6, seed=4, **kw)
    assert any((e[k].threshold, e[k].false_positives) != (a[k].threshold, a[k].false_positives) for k in a)


def test_normality_votes_by_hand():
    """Large n, ASGM worst case: each chi-square test passes exactly when the noise scale matches."""
    N, n, sigma, C = 2, 4000, 10.0, 0.1
    v = A.worst_case_vectors(N, n, C)
    model = A.WhiteBoxModel("asgm", v, 0.5, sigma, C)
    d = A.NormalityDistinguisher(ties="half", aggregation="majority")
    d.bind(model)
    # informative pairs (b = 1): k = 0 (scales sC / sC: P = N(0), Q = N(-Cu)), k = 1 (sC / sC/2), k = 2 (sC/2 / sC/3)
    assert d.n_pairs_used == 3
    from paperlib.mechanisms import sampler as M

    rows = v[:-1]
    g = torch.Generator().manual_seed(0)
    # D with both records sampled: scale sigma C / 2 -> pair k=2 votes D (P passes), pair k=1 votes D' (Q passes)
    x = M.apply_round("asgm", M.clip(torch.as_tensor(rows), C), torch.ones((1, 2), dtype=torch.bool),
                      torch.randn((1, n), generator=g, dtype=torch.float64), 0.5, sigma, C)
    votes, p = d.votes(x, model.project(x), np.random.default_rng(0))
    # identify the pair by its scale ratio nu_Q / nu_P: k = 0 -> 1, k = 1 -> 2, k = 2 -> 3/2
    ratio = np.round(p["scale_p"] / p["scale_q"], 6)
    share = votes[0] / p["count"]  # share of the merged pairs' votes that go to D'
    assert share[ratio == 1.5][0] == 0.0  # k = 2: only the P-standardised vector passes, a vote for D
    assert share[ratio == 2.0][0] == 1.0  # k = 1: only the Q-standardised vector passes, a vote for D'
    assert share[ratio == 1.0][0] == 0.5  # k = 0: both fail (scale sigma C), undecided -> half a vote
    assert p["count"][ratio == 2.0][0] == 2  # the two subsets of size 1 merged


def test_normality_options_and_scores():
    v = A.worst_case_vectors(3, 40, 0.1)
    specs = {f"{t}-{ag}": {"name": "normality", "test": t, "aggregation": ag}
             for t in A.NORMALITY_TESTS for ag in A.AGGREGATIONS}
    res = A.audit_distinguishers(v, "easgm", 0.5, 10.0, 0.1, trials=400, seed=0, distinguishers=specs)
    for k, r in res.items():
        assert 0 <= r.fpr <= 1 and 0 <= r.fnr <= 1 and r.eps_lower >= 0
        assert r.path == "full"  # ks and normaltest need the n-dimensional outputs
        assert r.distinguisher["test"] in A.NORMALITY_TESTS
    # the variance-sensitive chi-square test sees EASGM's scale change; K^2 (shape only) hardly does
    assert res["chi2-weighted"].eps_lower > res["normaltest-weighted"].eps_lower
    with pytest.raises(ValueError, match="test"):
        A.NormalityDistinguisher(test="shapiro")
    with pytest.raises(ValueError, match="ties"):
        A.NormalityDistinguisher(ties="dice")
    with pytest.raises(ValueError, match="aggregation"):
        A.NormalityDistinguisher(aggregation="mean")
    with pytest.raises(ValueError, match="n must be >= 8"):
        A.audit(A.worst_case_vectors(2, 5, 1.0), "easgm", 0.5, 1.0, 1.0, trials=10,
                distinguisher={"name": "normality", "test": "normaltest"})



def test_normality_test_specs():
    """Notebook 04's table: 3 tests x 2 aggregations, chi2 with ties="half" per aggregation, optimal (9)."""
    specs = A.normality_test_specs()
    assert list(specs) == ["chi2/weighted", "chi2/majority", "ks/weighted", "ks/majority", "normaltest/weighted",
                           "normaltest/majority", "chi2/weighted/ties=½", "chi2/majority/ties=½", "optimal"]
    assert specs["ks/majority"] == {"name": "normality", "test": "ks", "aggregation": "majority"}
    assert specs["chi2/majority/ties=½"] == {"name": "normality", "test": "chi2", "aggregation": "majority",
                                             "ties": "half"}
    made = {k: A.make_distinguisher(v) for k, v in specs.items()}
    assert isinstance(made["optimal"], A.OptimalDistinguisher)
    assert made["chi2/weighted/ties=½"].ties == "half" and made["chi2/weighted"].ties == "coin"
    specs["optimal"] = "changed"
    assert A.normality_test_specs()["optimal"] == "optimal"  # a fresh dict each call


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"q": 0.0}, "q"),
        ({"q": 1.01}, "q"),
        ({"trials": 1}, "trials"),
        ({"calibration_trials": 1}, "calibration_trials"),
        ({"vectors": np.array([[0.1, np.inf], [0.0, 0.1]])}, "vectors"),
        ({"vectors": np.ones((14, 3))}, "N"),
        ({"sigma": -1.0}, "sigma"),
        ({"C": 0.0}, "C"),
        ({"delta": 0.0}, "delta"),
        ({"mechanism": "adam"}, "mechanism"),
        ({"distinguisher": "bayes"}, "distinguisher"),
        ({"mechanism": "feasgm", "q": 0.2}, "q"),
    ],
)
def test_audit_bad_input(kwargs, match):
    args = {"vectors": A.worst_case_vectors(3, 4, 1.0), "mechanism": "easgm", "q": 0.5, "sigma": 1.0, "C": 1.0,
            "trials": 10}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        A.audit(**args)


def test_audit_worst_case_N_limit():
    with pytest.raises(ValueError, match="N = 13 > 12"):
        A.audit_worst_case("easgm", 13, 0.5, 1.0, 4, C=1.0, trials=10)
    with pytest.raises(ValueError, match="direction"):
        A.worst_case_vectors(2, 3, direction="up")


# ----------------------------------------------------------------------------- cache and CLI
def test_sweep_caches_and_resumes(results, monkeypatch):
    pts = [{"mechanism": "easgm", "N": 2, "n": 5, "q": 0.5}, {"mechanism": "asgm", "N": 2, "n": 5, "q": 0.7}]
    common = dict(sigma=10.0, C=0.1, trials=40, distinguishers=["optimal"])
    first = sweeps.audit_sweep("sweep_test", pts, seed=0, progress=False, **common)
    assert len(first) == 2 and (results / "sweep_test.json").exists()
    # interrupted run: keep only the first point, then resume -> only the second is recomputed
    rec = json.loads((results / "sweep_test.json").read_text())
    params = rec["params"]
    pv.save_result("sweep_test", params, {"points": rec["data"]["points"][:1], "complete": False,
                                          "wall_time_s": 0.0}, mode="quick", seed=0, wall_time=0.0)
    calls = []
    orig = sweeps.audit_distinguishers

    def counting(*a, **k):
        calls.append(a[1])
        return orig(*a, **k)

    monkeypatch.setattr(sweeps, "audit_distinguishers", counting)
    again = sweeps.audit_sweep("sweep_test", pts, seed=0, progress=False, **common)
    assert calls == ["asgm"]

    def strip(pts):
        return [{**p, "results": {k: {kk: vv for kk, vv in r.items() if kk != "wall_time_s"}
                                  for k, r in p["results"].items()}} for p in pts]

    assert strip(again) == strip(first)
    # complete: no recomputation at all
    sweeps.audit_sweep("sweep_test", pts, seed=0, progress=False, **common)
    assert calls == ["asgm"]


def test_cached_audit_of_given_vectors(results, monkeypatch):
    v = A.worst_case_vectors(2, 6, 0.1, kind="random", seed=1)
    kw = dict(trials=40, distinguishers=["optimal"], seed=2, mode="smoke", dtype=torch.float64)
    first = sweeps.cached_audit("given_test", v, "easgm", 0.5, 10.0, 0.1, **kw)
    calls = []
    monkeypatch.setattr(sweeps, "audit_distinguishers", lambda *a, **k: calls.append(1))
    assert sweeps.cached_audit("given_test", v, "easgm", 0.5, 10.0, 0.1, **kw) == first
    assert calls == []  # served from results/given_test.json
    with pytest.raises(AttributeError):  # other vectors: a cache miss, so the (patched) audit runs
        sweeps.cached_audit("given_test", v * 0.5, "easgm", 0.5, 10.0, 0.1, **kw)
    assert calls == [1]


def test_cli_audit(capsys):
    argv = ["audit", "--mechanism", "easgm", "--N", "2", "--q", "0.5", "--sigma", "10", "--C", "0.1", "--n", "30",
            "--trials", "400", "--distinguisher", "optimal", "--seed", "1"]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("fpr", "fnr", "eps_lower", "delta", "trials", "eps_claimed"):
        assert key in out
    assert out["trials"] == 400 and out["delta"] == 1e-5
    assert out["eps_claimed"] == pytest.approx(sgm_claim(0.5, 10.0).epsilon(1e-5))
    assert cli.main(argv) == 0
    assert json.loads(capsys.readouterr().out) == out  # same seed, same numbers


@pytest.mark.parametrize(
    "change,word",
    [(("--q", "0"), "q"), (("--trials", "1"), "trials"), (("--N", "20"), "N"), (("--C", "-1"), "C"),
     (("--delta", "2"), "delta"), (("--sigma", "0"), "sigma")],
)
def test_cli_audit_bad_input(capsys, change, word):
    argv = ["audit", "--mechanism", "asgm", "--N", "2", "--q", "0.5", "--sigma", "10", "--C", "0.1", "--n", "30",
            "--trials", "40", "--distinguisher", "normality", "--seed", "0"]
    if change[0] in argv:
        argv[argv.index(change[0]) + 1] = change[1]
    else:
        argv += list(change)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and word in err[0]


def test_audit_config_value_equals_keywords_and_names_unknown_knobs():
    v = A.worst_case_vectors(3, 20, 1.0)
    by_cfg = A.game.audit_distinguishers(v, "easgm", 0.5, 2.0, 1.0, config=A.game.AuditConfig(trials=400, seed=1))
    by_kw = A.game.audit_distinguishers(v, "easgm", 0.5, 2.0, 1.0, trials=400, seed=1)
    assert by_cfg["optimal"].to_dict() | {"wall_time_s": 0} == by_kw["optimal"].to_dict() | {"wall_time_s": 0}
    # a keyword replaces the config's value
    other = A.game.audit_distinguishers(v, "easgm", 0.5, 2.0, 1.0, config=A.game.AuditConfig(trials=400, seed=1),
                                        seed=2)
    assert other["optimal"].seed == 2
    with pytest.raises(ValueError, match="unknown audit option.*sed"):
        A.game.audit_distinguishers(v, "easgm", 0.5, 2.0, 1.0, trials=400, sed=1)
    with pytest.raises(ValueError, match="trials"):
        A.game.audit_distinguishers(v, "easgm", 0.5, 2.0, 1.0)
