"""The fix of paperlib.practitioner.fix on real Opacus 1.x objects, and its audit runner.

Acceptance: two training sets of sizes N and N + 1 whose Opacus 1.x divisors differ
(``int(N q) != int((N + 1) q)`` at the same sampling rate) are divided by the same
constant, the configured batch size, after ``fix_normaliser``; the divisor is measured on
a real ``make_private`` step (noise off, so the update is the clipped sum over the divisor).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")

from paperlib.practitioner.fix import fix_normaliser, fixed_divisor, normaliser_of, sum_reduction_lr  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
B = 250  # batch size: N = 999 and N + 1 = 1000 both give 4 batches, q = 1/4; int(999/4) = 249, int(1000/4) = 250


def _private(N, *, loss_reduction="mean", lr=1.0, noise=0.0, seed=0):
    """A real make_private on N records (Poisson sampling, the defaults otherwise)."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(seed)
    X = torch.randn(N, 6, generator=g)
    y = torch.randint(0, 3, (N,), generator=g)
    torch.manual_seed(seed)
    model = torch.nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module, opt, dl = PrivacyEngine(accountant="rdp").make_private(
            module=model, optimizer=opt, data_loader=DataLoader(TensorDataset(X, y), batch_size=B),
            noise_multiplier=noise, max_grad_norm=0.5, poisson_sampling=True, loss_reduction=loss_reduction)
    return module, opt, dl, X, y


def _clipped_sum(module, X, y, C=0.5, reduction="mean"):
    """The clipped per-example gradient sum, by per-example autograd (independent of Opacus)."""
    lin = module._module
    rows = []
    for i in range(len(X)):
        w = lin.weight.detach().clone().requires_grad_(True)
        b = lin.bias.detach().clone().requires_grad_(True)
        loss = torch.nn.functional.cross_entropy(X[i:i + 1] @ w.T + b, y[i:i + 1])
        gw, gb = torch.autograd.grad(loss, (w, b))
        g = torch.cat([gw.reshape(-1), gb.reshape(-1)])
        rows.append(g / max(1.0, float(g.norm()) / C))
    return torch.stack(rows).sum(0).double()


def _step(module, opt, X, y, idx, reduction="mean"):
    """One optimiser step on the batch idx from the current parameters; returns theta_0 - theta_1."""
    params = [p for p in module.parameters() if p.requires_grad]
    theta0 = torch.cat([p.detach().reshape(-1) for p in params]).double()
    opt.zero_grad(set_to_none=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = module(X[idx])
        # an empty batch is fed as DPDataLoader feeds it (zero rows); its loss is 0, as in the runners
        loss = torch.nn.functional.cross_entropy(out, y[idx], reduction=reduction) if len(idx) else out.sum() * 0.0
        loss.backward()
        opt.step()
    theta1 = torch.cat([p.detach().reshape(-1) for p in params]).double()
    return theta0 - theta1


def _divisor(module, opt, X, y, reduction="mean"):
    idx = torch.arange(37)  # any batch: the divisor does not depend on it
    S = _clipped_sum(module, X[idx], y[idx])
    u = _step(module, opt, X, y, idx, reduction)
    # u = S / divisor exactly (noise off); check the direction too, then read the divisor off
    cos = float(u @ S / (u.norm() * S.norm()))
    assert cos > 1 - 1e-6
    return float(S.norm() / u.norm())


def test_make_private_floors_differ_before_the_fix():
    """The setting is the weak case: same sampling rate, different divisors (249 vs 250)."""
    _, opt_a, dl_a, *_ = _private(999)
    _, opt_b, dl_b, *_ = _private(1000)
    assert dl_a.sample_rate == dl_b.sample_rate == 0.25
    assert (opt_a.expected_batch_size, opt_b.expected_batch_size) == (249, 250)
    assert int(999 * 0.25) != int(1000 * 0.25)


def test_fixed_step_divides_by_the_batch_size_on_both_datasets():
    measured = {}
    for N in (999, 1000):
        module, opt, dl, X, y = _private(N)
        unfixed = _divisor(module, opt, X, y)
        assert fix_normaliser(opt, B) is opt
        assert normaliser_of(opt) == B
        fixed = _divisor(module, opt, X, y)
        measured[N] = (unfixed, fixed)
    # before the fix: the dataset's floor (a check that the measurement can fail)
    assert measured[999][0] == pytest.approx(249, rel=1e-5)
    assert measured[1000][0] == pytest.approx(250, rel=1e-5)
    # after: the configured batch size on both, independent of the dataset size
    assert measured[999][1] == pytest.approx(B, rel=1e-5)
    assert measured[1000][1] == pytest.approx(B, rel=1e-5)


def test_sum_reduction_with_scaled_lr_gives_the_same_update():
    idx = torch.arange(20)
    m1, o1, _, X, y = _private(999)
    fix_normaliser(o1, B)
    u_fix = _step(m1, o1, X, y, idx)
    m2, o2, _, X2, y2 = _private(999, loss_reduction="sum", lr=sum_reduction_lr(1.0, B))
    assert normaliser_of(o2) == 1.0
    u_sum = _step(m2, o2, X2, y2, idx, reduction="sum")
    torch.testing.assert_close(u_sum, u_fix, rtol=1e-5, atol=1e-9)


def test_noise_is_divided_by_the_constant_too():
    """Empty batches (noise only): the update is N(0, sigma^2 C^2) / B, whatever the dataset size."""
    module, opt, dl, X, y = _private(999, noise=3.0)
    fix_normaliser(opt, 5)
    torch.manual_seed(1)
    params = [p for p in module.parameters() if p.requires_grad]
    draws = []
    for _ in range(300):
        u = _step(module, opt, X, y, torch.arange(0))  # an empty batch, as DPDataLoader feeds it
        draws.append(u)
        with torch.no_grad():  # back to theta_0
            off = 0
            for p in params:
                k = p.numel()
                p.add_(u[off:off + k].reshape(p.shape).to(p.dtype))
                off += k
    sd = float(torch.stack(draws).std())
    assert sd == pytest.approx(3.0 * 0.5 / 5, rel=0.05)  # sigma * C / B; unfixed would be / 249


def test_bad_inputs_name_the_parameter():
    model = torch.nn.Linear(2, 2)
    for wrong in (torch.optim.SGD(model.parameters(), lr=0.1), object(), "optimizer", None):
        with pytest.raises(TypeError, match="^optimizer: expected the opacus.optimizers.DPOptimizer"):
            fix_normaliser(wrong, 4)
        with pytest.raises(TypeError, match="^optimizer"):
            normaliser_of(wrong)
        assert fixed_divisor(wrong) is None
    _, opt, *_ = _private(999)
    for bad in (0, -3, 2.5, True, "256"):
        with pytest.raises(ValueError, match="^batch_size must be an integer >= 1"):
            fix_normaliser(opt, bad)
    assert opt.expected_batch_size == 249 and fixed_divisor(opt) is None  # untouched by the refused calls
    for bad in (0.0, -1.0, float("nan"), "0.1", True):
        with pytest.raises(ValueError, match="^lr must be"):
            sum_reduction_lr(bad, 4)
    for bad in (0, 2.5, "4", False):
        with pytest.raises(ValueError, match="^batch_size"):
            sum_reduction_lr(0.1, bad)


def test_fixed_divisor_records_the_fix_until_it_is_undone():
    _, opt, *_ = _private(999)
    assert fixed_divisor(opt) is None
    fix_normaliser(opt, 64)
    assert fixed_divisor(opt) == 64
    opt.expected_batch_size = 249  # set back by hand: no longer the fix's constant
    assert fixed_divisor(opt) is None
    with pytest.raises(ValueError, match="^lr must be"):
        sum_reduction_lr(0.0, 4)
    with pytest.raises(ValueError, match="^batch_size"):
        sum_reduction_lr(0.1, 0)


def test_distributed_optimizer_is_refused():
    from opacus.optimizers import DPOptimizer

    class FakeDistributed(DPOptimizer):  # what the distributed optimisers add: a world size
        world_size = 2

    model = torch.nn.Linear(2, 2)
    opt = FakeDistributed(torch.optim.SGD(model.parameters(), lr=0.1), noise_multiplier=1.0, max_grad_norm=1.0,
                          expected_batch_size=3)
    with pytest.raises(ValueError, match="^optimizer: FakeDistributed is distributed"):
        fix_normaliser(opt, 4)


def test_import_is_light_and_core_layers_do_not_use_it():
    r = subprocess.run([sys.executable, "-c", "import sys, paperlib.practitioner.fix; "
                        "assert not [m for m in ('torch', 'opacus') if m in sys.modules]"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    for layer in ("fdp", "mechanisms"):
        for f in (ROOT / "paperlib" / layer).rglob("*.py"):
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom):
                    assert not (node.module or "").startswith("paperlib.practitioner"), f
                elif isinstance(node, ast.Import):
                    assert all(not a.name.startswith("paperlib.practitioner") for a in node.names), f


# ------------------------------------------------------------------------------ the runner
@pytest.fixture(scope="module")
def points():
    g = torch.Generator().manual_seed(1)
    return torch.randn(5, 1, 28, 28, generator=g), torch.randint(0, 10, (5,), generator=g)


def test_fixed_runner_differs_from_the_release_only_in_the_divisor(points):
    from paperlib.implementations.runners import output_scale, run_steps

    X, y = points
    kw = dict(dataset="D", q=0.6, sigma=0.5, C=1.0, trials=12, seed=4)  # D: N = 4, int(4 * 0.6) = 2
    a = run_steps("opacus-installed", "tiny", X, y, **kw)
    b = run_steps("opacus-installed+fix", "tiny", X, y, batch_size=3, **kw)
    assert b["mechanism"] == "SGM" and b["normaliser_rule"] == "3" and a["normaliser_rule"] == "floor(Nq)"
    np.testing.assert_array_equal(a["batch_sizes"], b["batch_sizes"])  # same masks
    np.testing.assert_allclose(b["updates"] * 3, a["updates"] * 2, rtol=1e-5, atol=1e-7)  # same noise
    assert output_scale("opacus-installed+fix", 3) == 3.0 and output_scale("opacus-installed") == 1.0
    with pytest.raises(ValueError, match="^batch_size: opacus-installed\\+fix divides by the configured"):
        run_steps("opacus-installed+fix", "tiny", X, y, **kw)
    with pytest.raises(ValueError, match="^batch_size: only opacus-installed\\+fix"):
        run_steps("opacus-installed", "tiny", X, y, batch_size=3, **kw)
    with pytest.raises(ValueError, match="^batch_size must be an integer >= 1"):
        run_steps("opacus-installed+fix", "tiny", X, y, batch_size=0, **kw)


def test_audit_of_the_fix_keeps_the_claim_and_the_release_breaks_it():
    """Chapter 7's pair (|D| = 3, |D'| = 4, q = 0.5: divisors 1 and 2) on the tiny model."""
    from paperlib.implementations.real_audit import audit_implementation

    kw = dict(N=3, q=0.5, sigma=10.0, C=0.1, trials=2000, seed=0, mode="quick", check_trials=10, progress=False,
              distinguishers=("optimal",))
    bad = audit_implementation("opacus-installed", "tiny", "synthetic", **kw).to_json()
    good = audit_implementation("opacus-installed+fix", "tiny", "synthetic", batch_size=2, **kw).to_json()
    assert bad["mechanism"] == "feasgm" and good["mechanism"] == "sgm"
    assert good["eps_claimed"] == bad["eps_claimed"]
    assert bad["violation"]["optimal"] and bad["eps_lower"]["optimal"] > 2 * bad["eps_claimed"]
    assert not good["violation"]["optimal"] and good["eps_lower"]["optimal"] <= good["eps_claimed"]
    assert good["check"]["passed"] and good["normaliser_found"] == "2 (the configured batch size)"
    for v in good["divisor_measured"].values():
        assert v == pytest.approx(2.0, rel=0.05)
    with pytest.raises(ValueError, match="^batch_size"):
        audit_implementation("opacus-installed+fix", "tiny", "synthetic", **kw)
