"""Tests of paperlib.mechanisms.sampler: one round of SGM/EASGM/ASGM/FEASGM in torch (THEORY.md section 2).

Checks: the batched path equals the plain per-trial loop for the same draws; the
output law on worst-case data matches the one :mod:`paperlib.mechanisms.simulation` uses
(its ``normaliser``, the mixture of the projection on ``u`` and the chi-square law of
the rest); clipping; the Opacus-style division by zero of FEASGM; bad input.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from scipy import stats

from paperlib.mechanisms import sampler as M
from paperlib.mechanisms.core import MECHANISMS, Mechanism


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _vectors(N=3, n=7, seed=0, scale=1.5):
    return np.random.default_rng(seed).normal(scale=scale, size=(N + 1, n))


def _worst(N, n, C):
    u = np.zeros(n)
    u[0] = 1.0
    v = np.tile(C * u, (N + 1, 1))
    v[N] = -C * u
    return v


# ----------------------------------------------------------------------------- batched == loop
@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("dataset", ["D", "D'"])
def test_batched_equals_loop_same_seed(mechanism, dataset):
    v = _vectors()
    q = 0.6 if mechanism != "feasgm" else 0.5  # floor(3*0.5) = 1, floor(4*0.5) = 2
    a, ba = M.sample(mechanism, v, q, 2.0, 1.0, dataset, 40, torch.Generator().manual_seed(5), chunk_size=1,
                     return_batch_sizes=True)
    b, bb = M.sample_loop(mechanism, v, q, 2.0, 1.0, dataset, 40, torch.Generator().manual_seed(5),
                          return_batch_sizes=True)
    assert a.shape == (40, 7)
    assert torch.equal(ba, bb)
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    # bigger chunks draw in another order, but the same seed gives the same numbers again
    c1 = M.sample(mechanism, v, q, 2.0, 1.0, dataset, 40, torch.Generator().manual_seed(5), chunk_size=16)
    c2 = M.sample(mechanism, v, q, 2.0, 1.0, dataset, 40, torch.Generator().manual_seed(5), chunk_size=16)
    assert torch.equal(c1, c2)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_apply_round_equals_loop_with_explicit_draws(mechanism):
    v = torch.as_tensor(_vectors(N=4, n=9, seed=1))
    g = torch.Generator().manual_seed(0)
    masks = torch.rand((25, 5), generator=g, dtype=torch.float64) < 0.5
    masks[0] = False  # an empty batch (ASGM divides it by 1)
    noise = torch.randn((25, 9), generator=g, dtype=torch.float64)
    a = M.apply_round(mechanism, M.clip(v, 1.0), masks, noise, 0.5, 1.3, 1.0)
    b = M.apply_round_loop(mechanism, v, masks, noise, 0.5, 1.3, 1.0)
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    # hand check of the empty-batch row: noise only, divided by the normaliser
    nu = {"sgm": 1.0, "easgm": 5 * 0.5, "asgm": 1.0, "feasgm": 2.0}[mechanism]
    torch.testing.assert_close(a[0], 1.3 * noise[0] / nu)


def test_normaliser_torch_and_numpy_agree():
    k = np.arange(6)
    for mech in Mechanism:
        for N_data, q in ((5, 0.5), (4, 0.3), (200, 0.005), (140200, 0.005)):
            a = mech.normaliser(N_data, k, q)
            b = mech.normaliser(N_data, torch.as_tensor(k), q)
            np.testing.assert_array_equal(a, b.numpy())
    assert Mechanism.ASGM.normaliser(4, torch.tensor([0, 2, 3]), 0.5).tolist() == [1.0, 2.0, 3.0]


# ----------------------------------------------------------------------------- distribution
@pytest.mark.parametrize("mechanism,q", [("easgm", 0.5), ("asgm", 0.7), ("sgm", 0.3), ("feasgm", 0.5)])
def test_output_law_on_worst_case_data(mechanism, q):
    """Projection on u and the orthogonal rest follow the law simulation.py draws from."""
    N, n, C, sigma, T = 3, 6, 0.5, 2.0, 4000
    v = _worst(N, n, C)
    for dataset, N_data in (("D", N), ("D'", N + 1)):
        x = M.sample(mechanism, v, q, sigma, C, dataset, T, torch.Generator().manual_seed(11)).numpy()
        o1 = x[:, 0] / C
        # mixture over k (kept records of D) and b (added point kept): mean (k - b)/nu, sd sigma/nu
        comps = []
        for k in range(N + 1):
            wk = stats.binom.pmf(k, N, q)
            if N_data == N:
                nu = Mechanism(mechanism).normaliser(N, np.array([k]), q)[0]
                comps.append((wk, k / nu, sigma / nu))
            else:
                for b, wb in ((0, 1 - q), (1, q)):
                    nu = Mechanism(mechanism).normaliser(N + 1, np.array([k + b]), q)[0]
                    comps.append((wk * wb, (k - b) / nu, sigma / nu))

        def cdf(t, comps=comps):
            return sum(w * stats.norm.cdf(t, m, s) for w, m, s in comps)

        assert stats.kstest(o1, cdf).pvalue > 1e-3
        if mechanism in ("easgm", "sgm", "feasgm"):  # fixed normaliser: ||rest||^2 / (sigma C / nu)^2 ~ chi2_{n-1}
            nu = Mechanism(mechanism).fixed_normaliser(N_data, q)
            w = np.sum(x[:, 1:] ** 2, axis=1) / (sigma * C / nu) ** 2
            assert stats.kstest(w, stats.chi2(n - 1).cdf).pvalue > 1e-3


def test_batched_and_loop_agree_in_distribution():
    v = _vectors(N=2, n=5, seed=3)
    a = M.sample("asgm", v, 0.6, 1.0, 1.0, "D'", 3000, torch.Generator().manual_seed(1)).numpy()
    b = M.sample_loop("asgm", v, 0.6, 1.0, 1.0, "D'", 1500, torch.Generator().manual_seed(2)).numpy()
    for j in range(2):
        assert stats.ks_2samp(a[:, j], b[:, j]).pvalue > 1e-3


def test_batch_sizes_are_binomial():
    v = _vectors(N=4, n=3)
    _, bs = M.sample("easgm", v, 0.3, 1.0, 1.0, "D'", 5000, torch.Generator().manual_seed(0),
                     return_batch_sizes=True)
    counts = np.bincount(bs.numpy(), minlength=6)
    expected = 5000 * stats.binom.pmf(np.arange(6), 5, 0.3)
    assert stats.chisquare(counts[:5], expected[:5] * counts[:5].sum() / expected[:5].sum()).pvalue > 1e-3


# ----------------------------------------------------------------------------- clipping, dtype, chunks
def test_clip():
    v = torch.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]], dtype=torch.float64)
    c = M.clip(v, 1.0)
    torch.testing.assert_close(c[0], torch.tensor([0.6, 0.8], dtype=torch.float64))
    torch.testing.assert_close(c[1], v[1])
    torch.testing.assert_close(c[2], v[2])


def test_chunks_cover_all_trials_and_dtype():
    v = _vectors(N=2, n=4)
    chunks = list(M.iter_samples("sgm", v, 0.5, 1.0, 1.0, "D", 10, torch.Generator().manual_seed(0), chunk_size=3,
                                 dtype=torch.float32))
    assert [c.start for c in chunks] == [0, 3, 6, 9]
    assert sum(c.outputs.shape[0] for c in chunks) == 10
    assert all(c.outputs.dtype == torch.float32 for c in chunks)
    assert M.default_chunk_size(10_000) == (1 << 20) // 10_000
    assert M.default_chunk_size(10_000, device="cuda") == (1 << 26) // 10_000


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_cpu_in_law():
    v = _vectors(N=3, n=50)
    x = M.sample("easgm", v, 0.5, 2.0, 1.0, "D", 4000, torch.Generator(device="cuda").manual_seed(0))
    assert x.device.type == "cuda"
    y = M.sample("easgm", v, 0.5, 2.0, 1.0, "D", 4000, torch.Generator().manual_seed(0))
    assert stats.ks_2samp(x[:, 0].cpu().numpy(), y[:, 0].numpy()).pvalue > 1e-3


# ----------------------------------------------------------------------------- FEASGM / 0
def test_feasgm_divides_by_zero_like_opacus():
    v = _vectors(N=3, n=4)
    assert Mechanism("feasgm").divides_by_zero(3, 0.2)  # floor(0.6) = 0
    assert not Mechanism("feasgm").divides_by_zero(4, 0.25)  # floor(1.0) = 1
    assert not Mechanism("easgm").divides_by_zero(3, 0.2)
    assert Mechanism("feasgm").fixed_normaliser(3, 0.2) == 0.0
    for fn in (M.sample, M.sample_loop):
        with pytest.warns(M.ZeroNormaliserWarning, match="divides by zero"):
            x = fn("feasgm", v, 0.2, 1.0, 1.0, "D", 5, torch.Generator().manual_seed(0))
        assert not torch.isfinite(x).any()  # inf (or nan), not silently divided by 1
    # on D' = 4 records floor(0.8) = 0 as well; at q = 0.25 D' is fine while D still divides by 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", M.ZeroNormaliserWarning)
        x = M.sample("feasgm", v, 0.25, 1.0, 1.0, "D'", 5, torch.Generator().manual_seed(0))
    assert torch.isfinite(x).all()
    # Opacus computes int(len(dataset) * sample_rate) in floating point
    assert Mechanism("feasgm").fixed_normaliser(140200, 0.005) == float(int(140200 * 0.005))


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"q": 0.0}, "q"),
        ({"q": 1.5}, "q"),
        ({"q": float("nan")}, "q"),
        ({"sigma": 0.0}, "sigma"),
        ({"C": -1.0}, "C"),
        ({"trials": 0}, "trials"),
        ({"dataset": "E"}, "dataset"),
        ({"mechanism": "dpsgd"}, "mechanism"),
        ({"vectors": np.array([[1.0, np.nan], [0.0, 1.0]])}, "vectors"),
        ({"vectors": np.ones((1, 3))}, "vectors"),
        ({"vectors": np.ones(3)}, "vectors"),
        ({"generator": 0}, "generator"),
    ],
)
def test_bad_input(kwargs, match):
    args = {"mechanism": "easgm", "vectors": _vectors(), "q": 0.5, "sigma": 1.0, "C": 1.0, "dataset": "D",
            "trials": 3, "generator": torch.Generator().manual_seed(0)}
    args.update(kwargs)
    for fn in (M.sample, M.sample_loop):
        with pytest.raises(ValueError, match=match):
            fn(**args)


# ----------------------------------------------------------------------------- projected sampler
def _mixture_cdfs(mechanism, v, q, sigma, C, dataset, basis):
    """Exact cdfs of each basis coordinate and of the squared residual (mixtures over the batch)."""
    import itertools

    g = M.clip(torch.as_tensor(v), C).numpy()
    rows = g[:-1] if dataset == "D" else g
    N_data = rows.shape[0]
    U = basis.numpy()
    n, r = U.shape
    comps = []  # (weight, coords of the mean, scale)
    for mask in itertools.product((0, 1), repeat=N_data):
        m = np.array(mask, dtype=bool)
        k = int(m.sum())
        w = q**k * (1 - q) ** (N_data - k)
        nu = float(Mechanism(mechanism).normaliser(N_data, k, q))
        comps.append((w, rows[m].sum(axis=0) @ U / nu, sigma * C / nu))

    def coord_cdf(j):
        return lambda t: sum(w * stats.norm.cdf(t, mu[j], s) for w, mu, s in comps)

    def res_cdf(t):
        return sum(w * stats.chi2.cdf(np.asarray(t) / s**2, n - r) for w, _, s in comps)

    return [coord_cdf(j) for j in range(r)], res_cdf


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_projected_equals_projection_of_apply_round_with_explicit_draws(mechanism):
    """Same masks and noise: the projected round is exactly U^T x and ||(I - U U^T) x||^2 of the full round."""
    v = torch.as_tensor(_vectors(N=3, n=9, seed=2))
    U = M.span_basis(v, 1.0)
    assert U.shape == (9, 4)
    torch.testing.assert_close(U.T @ U, torch.eye(4, dtype=torch.float64))
    g = torch.Generator().manual_seed(1)
    for rows in (v[:-1], v):  # D and D'
        clipped = M.clip(rows, 1.0)
        masks = torch.rand((30, rows.shape[0]), generator=g, dtype=torch.float64) < 0.5
        masks[0] = False  # an empty batch
        masks[1] = True
        G = torch.randn((30, 9), generator=g, dtype=torch.float64)
        x = M.apply_round(mechanism, clipped, masks, G, 0.5, 1.3, 1.0)
        z = G @ U
        chi2 = (torch.linalg.vector_norm(G - z @ U.T, dim=1) ** 2)
        coords, res = M.apply_round_projected(mechanism, clipped @ U, masks, z, chi2, 0.5, 1.3, 1.0)
        torch.testing.assert_close(coords, x @ U, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(res, torch.linalg.vector_norm(x - (x @ U) @ U.T, dim=1) ** 2, rtol=1e-10,
                                   atol=1e-12)


@pytest.mark.parametrize("mechanism,q", [("sgm", 0.3), ("easgm", 0.5), ("asgm", 0.7), ("feasgm", 0.5)])
def test_projected_law_matches_full_samples(mechanism, q):
    """KS tests: each coefficient and the residual of sample_projected vs the projection of sample (D and D'),
    and both against the exact mixture laws."""
    N, n, sigma, C, T = 3, 9, 0.8, 1.0, 2000
    v = _vectors(N=N, n=n, seed=4, scale=0.8)  # some rows clipped, some not; rank N+1
    U = M.span_basis(v, C)
    for i, dataset in enumerate(("D", "D'")):
        x = M.sample(mechanism, v, q, sigma, C, dataset, T, torch.Generator().manual_seed(20 + i))
        y_full = (x @ U).numpy()
        r_full = (torch.linalg.vector_norm(x - (x @ U) @ U.T, dim=1) ** 2).numpy()
        y, res = M.sample_projected(mechanism, v, q, sigma, C, dataset, T, torch.Generator().manual_seed(30 + i),
                                    basis=U)
        y, res = y.numpy(), res.numpy()
        assert y.shape == (T, N + 1) and res.shape == (T,)
        coord_cdfs, res_cdf = _mixture_cdfs(mechanism, v, q, sigma, C, dataset, U)
        for j in range(N + 1):
            assert stats.ks_2samp(y[:, j], y_full[:, j]).pvalue > 1e-4
            assert stats.kstest(y[:, j], coord_cdfs[j]).pvalue > 1e-4
            assert stats.kstest(y_full[:, j], coord_cdfs[j]).pvalue > 1e-4
        assert stats.ks_2samp(res, r_full).pvalue > 1e-4
        assert stats.kstest(res, res_cdf).pvalue > 1e-4
        assert stats.kstest(r_full, res_cdf).pvalue > 1e-4


def test_projected_defaults_chunks_seed_and_full_rank():
    v = _vectors(N=2, n=6, seed=5)
    a, ra, ba = M.sample_projected("asgm", v, 0.6, 1.0, 1.0, "D'", 50, torch.Generator().manual_seed(3),
                                   return_batch_sizes=True)
    b, rb = M.sample_projected("asgm", v, 0.6, 1.0, 1.0, "D'", 50, torch.Generator().manual_seed(3),
                               basis=M.span_basis(v, 1.0))
    assert torch.equal(a, b) and torch.equal(ra, rb)  # default basis = span_basis
    assert ba.shape == (50,) and int(ba.max()) <= 3
    chunks = list(M.iter_projected("asgm", v, 0.6, 1.0, 1.0, "D", 10, torch.Generator().manual_seed(0),
                                   chunk_size=4, dtype=torch.float32))
    assert [c.start for c in chunks] == [0, 4, 8]
    assert all(c.coords.dtype == torch.float32 and c.coords.shape[1] == 3 for c in chunks)
    assert sum(c.residual.shape[0] for c in chunks) == 10
    # n <= N + 1: the basis spans R^n and the residual is exactly 0
    w = _vectors(N=3, n=3, seed=1)
    y, res = M.sample_projected("easgm", w, 0.5, 1.0, 1.0, "D'", 20, torch.Generator().manual_seed(0))
    assert y.shape == (20, 3) and torch.all(res == 0)


def test_projected_bad_basis_and_bad_input():
    v = _vectors(N=2, n=5)
    U = M.span_basis(v, 1.0)
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="basis"):
        M.sample_projected("easgm", v, 0.5, 1.0, 1.0, "D", 3, g, basis=U[:4])  # wrong n
    with pytest.raises(ValueError, match="orthonormal"):
        M.sample_projected("easgm", v, 0.5, 1.0, 1.0, "D", 3, g, basis=2 * U)
    with pytest.raises(ValueError, match="containing"):
        M.sample_projected("easgm", v, 0.5, 1.0, 1.0, "D'", 3, g, basis=U[:, :2])  # misses the added row
    args = {"mechanism": "easgm", "vectors": v, "q": 0.5, "sigma": 1.0, "C": 1.0, "dataset": "D", "trials": 3,
            "generator": g}
    for change, match in (({"q": 0.0}, "q"), ({"sigma": -1.0}, "sigma"), ({"trials": 0}, "trials"),
                          ({"dataset": "E"}, "dataset"), ({"mechanism": "x"}, "mechanism"),
                          ({"vectors": np.ones(3)}, "vectors"), ({"generator": 1}, "generator")):
        with pytest.raises(ValueError, match=match):
            M.sample_projected(**{**args, **change})


def test_projected_feasgm_divides_by_zero_like_opacus():
    v = _vectors(N=3, n=6)
    with pytest.warns(M.ZeroNormaliserWarning, match="divides by zero"):
        y, res = M.sample_projected("feasgm", v, 0.2, 1.0, 1.0, "D", 5, torch.Generator().manual_seed(0))
    assert not torch.isfinite(y).any() and not torch.isfinite(res).any()
    with warnings.catch_warnings():
        warnings.simplefilter("error", M.ZeroNormaliserWarning)
        y, res = M.sample_projected("feasgm", v, 0.25, 1.0, 1.0, "D'", 5, torch.Generator().manual_seed(0))
    assert torch.isfinite(y).all() and torch.isfinite(res).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_projected_cuda_matches_cpu_in_law():
    v = _vectors(N=3, n=50)
    y, r = M.sample_projected("asgm", v, 0.5, 2.0, 1.0, "D'", 4000, torch.Generator(device="cuda").manual_seed(0))
    assert y.device.type == "cuda" and r.device.type == "cuda"
    y2, r2 = M.sample_projected("asgm", v, 0.5, 2.0, 1.0, "D'", 4000, torch.Generator().manual_seed(0))
    assert stats.ks_2samp(y[:, 0].cpu().numpy(), y2[:, 0].numpy()).pvalue > 1e-3
    assert stats.ks_2samp(r.cpu().numpy(), r2.numpy()).pvalue > 1e-3
