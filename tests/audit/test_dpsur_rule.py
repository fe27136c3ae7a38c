"""DPSUR's own rule in the batched sampler and the white-box model (issue 20, Build 1).

The rule (``algorithm/DPSUR.py:145-146`` at the pinned commit): the divisor is the size of a
separate Poisson(q) draw of the same dataset (``N_data q`` when that draw is empty), independent
of the batch; an empty batch releases exactly 0. Checked against its exact law by Monte Carlo
(seeded, with tolerances that fail for ASGM's rule), and against DPSUR's step
(:func:`paperlib.implementations.dpsur.dpsur_step_record`) fed the same draws.
"""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from paperlib.mechanisms import sampler as S
from paperlib.mechanisms.core import Mechanism

SIG_TINY = 1e-9  # noise so small that the batch and the divisor can be read off each output


def _basis_vectors(N, n=None):
    """N + 1 orthonormal rows (coordinates 0..N), so output coordinate i is 1/nu exactly when i is in B."""
    n = n or N + 3
    v = torch.zeros(N + 1, n, dtype=torch.float64)
    v[torch.arange(N + 1), torch.arange(N + 1)] = 1.0
    return v


def _read(x, N_data):
    """(batch size, divisor) per trial of near-noiseless outputs; divisor nan for an exact-zero release."""
    c = x[:, :N_data].numpy()
    inb = c > 1e-6
    k = inb.sum(axis=1)
    nu = np.where(k > 0, 1.0 / np.where(inb, c, np.inf).min(axis=1), np.nan)
    return k, nu, (np.abs(x.numpy()).sum(axis=1) == 0)


def _sample(mech, N, q, ds, trials, seed, projected):
    v = _basis_vectors(N)
    g = torch.Generator().manual_seed(seed)
    if projected:  # back to R^n from the basis coordinates (the basis spans the rows here)
        basis = S.span_basis(v, 1.0)
        coords, res = S.sample_projected(mech, v, q, SIG_TINY, 1.0, ds, trials, g, basis=basis)
        return coords @ basis.T, res
    return S.sample(mech, v, q, SIG_TINY, 1.0, ds, trials, g), None


def _law_pvalues(k, nu, zero, N_data, q):
    """p-values of: the empty-batch rate, the divisor's law given a step, and its independence of |B|."""
    trials = k.size
    p_empty = stats.binomtest(int(zero.sum()), trials, (1 - q) ** N_data).pvalue
    step = ~zero
    m = np.where(np.isclose(nu[step], N_data * q) & ~np.isclose(nu[step], np.rint(nu[step])), 0,
                 np.rint(nu[step])).astype(int)
    # m = 0 stands for an empty separate draw, divided by N_data q (chosen non-integer in the tests)
    expected = stats.binom.pmf(np.arange(N_data + 1), N_data, q) * step.sum()
    obs = np.bincount(m, minlength=N_data + 1)
    p_law = stats.chisquare(obs, expected).pvalue
    table = np.zeros((N_data + 1, N_data + 1))
    np.add.at(table, (k[step], m), 1)
    table = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
    p_indep = stats.chi2_contingency(table).pvalue
    return p_empty, p_law, p_indep


@pytest.mark.parametrize("projected", [False, True])
@pytest.mark.parametrize("ds,N_data", [("D", 3), ("D'", 4)])
def test_sampler_draws_dpsurs_rule(ds, N_data, projected):
    q, trials = 0.45, 20_000  # N_data q = 1.35 / 1.8: an empty separate draw shows as a non-integer divisor
    x, res = _sample("dpsur", 3, q, ds, trials, seed=11, projected=projected)
    k, nu, zero = _read(x, N_data)
    # an empty batch releases exactly 0, and only an empty batch does
    assert np.array_equal(zero, k == 0)
    if res is not None:
        assert np.all(res.numpy()[zero] == 0.0)
    # the divisor is an integer 1..N_data or N_data q (empty separate draw)
    step = ~zero
    ok = np.isclose(nu[step], np.rint(nu[step]), rtol=1e-6) | np.isclose(nu[step], N_data * q, rtol=1e-6)
    assert ok.all()
    p_empty, p_law, p_indep = _law_pvalues(k, nu, zero, N_data, q)
    assert min(p_empty, p_law, p_indep) > 1e-4, (p_empty, p_law, p_indep)


def test_the_law_test_rejects_asgm():
    """The same checks reject ASGM's rule (divisor = |B|, noise on an empty batch): they have power."""
    q, N_data = 0.45, 3
    x, _ = _sample("asgm", 3, q, "D", 20_000, seed=11, projected=False)
    k, nu, zero = _read(x, N_data)
    assert zero.sum() == 0  # ASGM releases noise on an empty batch, never an exact 0
    step = k > 0
    table = np.zeros((N_data + 1, N_data + 1))
    np.add.at(table, (k[step], np.rint(nu[step]).astype(int)), 1)
    table = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
    assert stats.chi2_contingency(table).pvalue < 1e-100


def test_batched_and_loop_samplers_agree_for_dpsur():
    v = torch.randn(4, 7, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    a = S.sample("dpsur", v, 0.4, 1.3, 0.7, "D'", 50, torch.Generator().manual_seed(5), chunk_size=1)
    b = S.sample_loop("dpsur", v, 0.4, 1.3, 0.7, "D'", 50, torch.Generator().manual_seed(5))
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert (a.abs().sum(dim=1) == 0).any()  # some empty batches at this q


def test_divisor_masks_are_required_for_dpsur_and_refused_otherwise():
    rows = torch.eye(3, dtype=torch.float64)
    masks = torch.ones(2, 3, dtype=torch.bool)
    noise = torch.zeros(2, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="divisor_masks"):
        S.apply_round("dpsur", rows, masks, noise, 0.5, 1.0, 1.0)
    with pytest.raises(ValueError, match="divisor_masks"):
        S.apply_round("asgm", rows, masks, noise, 0.5, 1.0, 1.0, divisor_masks=masks)


def test_sampler_equals_dpsurs_step_on_the_same_draws():
    """apply_round with DPSUR's rule, fed the draws of dpsur_draw, gives DPSUR's step (float32 rounding)."""
    from paperlib.implementations import dpsur as D
    from paperlib.implementations.models import build_model, per_example_grads

    g = torch.Generator().manual_seed(1)
    X, y = torch.randn(4, 1, 28, 28, generator=g), torch.randint(0, 10, (4,), generator=g)
    model = build_model("tiny", seed=0)
    q, sigma, C = 0.35, 2.0, 0.5
    shapes = [tuple(p.shape) for p in model.parameters() if p.requires_grad]
    grads = per_example_grads(model, X, y).double()
    clipped = S.clip(grads, C)
    seen_empty = seen_differ = 0
    for seed in range(40):
        rec = D.dpsur_step_record(model, X, y, q, sigma, C, torch.Generator().manual_seed(seed))
        d = D.dpsur_draw(len(X), q, shapes, sigma, C, torch.Generator().manual_seed(seed))
        noise = (torch.zeros(grads.shape[1]) if d.noise is None else d.noise).double() / (sigma * C)
        x = S.apply_round("dpsur", clipped, d.batch_mask[None], noise[None], q, sigma, C, d.divisor_mask[None])[0]
        u = rec["update"].double()
        scale = float(x.abs().max()) or 1.0
        assert float((u - x).abs().max()) <= 1e-5 * scale, seed
        seen_empty += not rec["stepped"]
        seen_differ += rec["stepped"] and len(rec["batch"]) != rec["divisor"]
    assert seen_empty and seen_differ  # both features of the rule were exercised


def test_mechanism_parse_accepts_dpsur_in_the_sampler():
    with pytest.raises(ValueError, match="mechanism"):
        S.sample("dpsurx", torch.eye(3), 0.5, 1.0, 1.0, "D", 2, torch.Generator())
    assert Mechanism.DPSUR.draws_divisor and Mechanism.DPSUR.skips_empty_batch
    assert math.isclose(Mechanism.DPSUR.normaliser(4, 0, 0.45), 1.8)


# ---------------------------------------------------------------------------- the white-box model


def _small(seed=4, N=3, n=6):
    return torch.randn(N + 1, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_optimal_llr_equals_brute_force_enumeration_for_dpsur():
    """The merged-mixture LLR (binomial law of |B'|, atom at 0) equals enumerating every (B, B')."""
    from paperlib.audit.components import Projection, WhiteBoxModel
    from paperlib.audit.distinguishers import OptimalDistinguisher, brute_force_llr

    v = _small()
    q, sigma, C = 0.4, 0.8, 0.9
    model = WhiteBoxModel("dpsur", v, q, sigma, C)
    d = OptimalDistinguisher()
    d.bind(model)
    x = torch.cat([S.sample("dpsur", v, q, sigma, C, ds, 30, torch.Generator().manual_seed(i))
                   for i, ds in enumerate(("D", "D'"))])
    assert (x.abs().sum(dim=1) == 0).any()  # some atoms among them
    got = d.score(x, model.project(x))
    want = brute_force_llr("dpsur", v.numpy(), q, sigma, C, x.numpy())
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    assert math.isclose(float(got[(x.abs().sum(dim=1) == 0).numpy()][0]), math.log1p(-q), rel_tol=1e-12)
    # the atoms' probabilities are (1 - q)^N and (1 - q)^(N + 1)
    desc = model.describe()
    assert math.isclose(desc["atom_D"], (1 - q) ** 3) and math.isclose(desc["atom_Dprime"], (1 - q) ** 4)
    assert "atom_D" not in WhiteBoxModel("asgm", v, q, sigma, C).describe()


def test_dpsur_audit_given_outputs_equals_the_batched_audit():
    """The game audits DPSUR's rule on its projected and full paths, and outputs of the sampler handed
    to audit_outputs give the batched full path's counts (same draws, atoms scored alike)."""
    from paperlib.audit.game import audit_distinguishers, audit_outputs

    v = _small(N=2, n=5)
    kw = dict(trials=2000, seed=3, distinguishers={"opt": "optimal", "nor": "normality"})
    a = audit_distinguishers(v, "dpsur", 0.5, 1.0, 1.0, path="projected", **kw)
    b = audit_distinguishers(v, "dpsur", 0.5, 1.0, 1.0, path="full", **kw)
    for k in a:
        assert 0.0 <= a[k].fpr <= 1 and 0.0 <= b[k].fnr <= 1
    # full outputs of the sampler given to audit_outputs score as the batched full path does
    g = torch.Generator().manual_seed(3)
    outs = {ph: {ds: S.sample("dpsur", v, 0.5, 1.0, 1.0, ds, 1000, g) for ds in ("D", "D'")} for ph in ("cal", "count")}
    c = audit_outputs(v, "dpsur", 0.5, 1.0, 1.0, outs, distinguishers=kw["distinguishers"], seed=3)
    assert (c["opt"].false_positives, c["opt"].false_negatives) == (b["opt"].false_positives,
                                                                    b["opt"].false_negatives)
