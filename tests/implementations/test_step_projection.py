"""Steps projected where they run (opacus_step.StepProjection, real_audit.step_options).

An audit of an Opacus implementation no longer carries each ``(m, n)`` block of updates out of the
step loop: every step is projected on the white-box basis as it is taken (in an old release's
subprocess too). What the audit keeps must be what the reduction of the whole updates gives: the
same coordinates, residuals and step check to float rounding, the same first updates bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from paperlib.implementations import opacus_step, parallel, runners
from paperlib.implementations import real_audit as RA

Q, SIGMA, C, N = 0.5, 1.0, 0.5, 3
#: 37 steps: two full blocks of PROJECT_BLOCK rows and a partial one
M = 2 * opacus_step.PROJECT_BLOCK + 5


def _points(seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(N + 1, 1, 28, 28, generator=g), torch.randint(0, 10, (N + 1,), generator=g)


def _shared(X, y):
    grads = np.asarray(runners.per_example_gradients("tiny", X, y, seed=0), dtype=np.float64)
    return RA.reduce_shared(grads, N, C), grads.shape[1]


def _cached_release(impl):
    from paperlib.implementations.opacus_code import AuditError, install_release

    try:
        install_release(runners.RELEASES[impl], download=False)
    except AuditError as exc:
        pytest.skip(f"{impl} is not in the release cache ({str(exc).splitlines()[0]})")


def _chunk(impl, X, y, ds, shared, n, *, seed=7, q=Q, keep=5):
    bs = 3 if impl in runners.FIXED_IMPLEMENTATIONS else None
    call = dict(implementation=impl, model_name="tiny", X=X, y=y, dataset="D" if ds == "D" else "Dprime", q=q,
                sigma=SIGMA, C=C, trials=M, seed=seed, model_seed=0, download=False, batch_size=bs)
    args = RA.reduce_args(impl, "tiny", runners.IMPLEMENTATION_MECHANISM[impl], q, SIGMA, C, ds, M, n, seed, 0, keep,
                          scale=runners.output_scale(impl, bs))
    return call, args


def _same_reduction(projected: dict, whole: dict) -> None:
    np.testing.assert_allclose(projected["coords"], whole["coords"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(projected["residual"], whole["residual"], rtol=1e-10, atol=1e-14)
    assert np.array_equal(projected["first"], whole["first"])  # whole updates, bit for bit
    assert projected["step_check"] == whole["step_check"]


@pytest.mark.parametrize("ds", ["D", "D'"])
@pytest.mark.parametrize("impl", ["opacus-installed", "opacus-installed+fix", "opacus-0.15.0", "opacus-1.0.2"])
def test_steps_projected_where_they_ran_reduce_as_the_whole_updates_do(impl, ds):
    if impl in runners.RELEASES:
        _cached_release(impl)
    X, y = _points(1)
    shared, n = _shared(X, y)
    call, args = _chunk(impl, X, y, ds, shared, n)
    out = runners.run_steps(**call, **RA.step_options(args, shared))
    assert out["updates"] is None and out["projected"]["coords"].shape == (M, N + 1 + (N if ds == "D" else 0))
    projected = parallel.run_reduced(call, RA.reduce_chunk, args, shared, RA.step_options)  # the audit's path
    raw = runners.run_steps(**call)
    whole = RA.reduce_chunk(raw, args, shared)  # the reduction of every update, after the steps
    _same_reduction(projected, whole)
    assert whole["step_check"]["disagreeing"] == 0 and whole["step_check"]["steps"] == M
    assert np.array_equal(projected["first"], raw["updates"][:5])


def test_each_audit_is_projected_on_its_own_basis_in_the_same_processes():
    """A release subprocess and this process keep converted bases by key: a second audit (other
    points, other basis) and then the first again must each be projected on their own."""
    impls = ["opacus-installed"]
    try:
        _cached_release("opacus-0.15.0")
        impls.append("opacus-0.15.0")
    except pytest.skip.Exception:
        pass
    pts = [_points(1), _points(2)]
    for impl in impls:
        for X, y in (pts[0], pts[1], pts[0]):
            shared, n = _shared(X, y)
            for ds in ("D", "D'"):
                call, args = _chunk(impl, X, y, ds, shared, n, keep=0)
                _same_reduction(parallel.run_reduced(call, RA.reduce_chunk, args, shared, RA.step_options),
                                RA.reduce_chunk(runners.run_steps(**call), args, shared))


def test_updates_that_are_not_finite_are_counted_as_without_projection():
    # floor(N q) = floor(3 * 0.2) = 0: Opacus v1.x divides by zero, every update is inf or nan
    X, y = _points(3)
    shared, n = _shared(X, y)
    call, args = _chunk("opacus-installed", X, y, "D", shared, n, q=0.2)
    raw = runners.run_steps(**call)
    got = runners.run_steps(**call, **RA.step_options(args, shared))
    assert np.array_equal(got["projected"]["finite"], np.isfinite(raw["updates"]).all(axis=1))
    assert not got["projected"]["finite"].any()
    assert [s for s in got["notes"] if "not finite" in s] == [s for s in raw["notes"] if "not finite" in s] != []


def test_projection_is_refused_where_whole_updates_are_needed():
    X, y = _points(1)
    shared, n = _shared(X, y)
    call, args = _chunk("dpsur", X, y, "D", shared, n)
    assert RA.step_options(args, shared) == {}  # the audit asks DPSUR for its whole updates
    with pytest.raises(ValueError, match="^project: dpsur"):
        runners.run_steps(**call, project={"basis": shared["basis"], "key": "k"})
    with pytest.raises(ValueError, match="^updates: needed"):
        RA.check_steps(None, shared["grads"][:N], "feasgm", Q, SIGMA, C, batch_sizes=np.ones(3, dtype=int))


def test_chunks_of_projected_steps_follow_the_model_size():
    assert RA.chunk_steps("opacus-0.15.0", 26_010) == RA.STEP_CHUNK
    assert RA.chunk_steps("opacus-0.15.0", 1_485_217) == RA.PROJECTED_ELEMENTS // 1_485_217
    assert RA.chunk_steps("opacus-installed", 10 ** 9) == RA.RELEASE_CHUNK
    assert RA.chunk_steps("dpsur", 1_485_217) == RA.CHUNK_ELEMENTS // 1_485_217  # whole updates: memory-bound


def test_a_call_reports_its_steps_apart_from_its_set_up_and_a_release_start():
    _cached_release("opacus-0.15.0")
    X, y = _points(1)
    runners.close_release_servers()  # the next call starts the release's subprocess
    call = dict(implementation="opacus-0.15.0", model_name="tiny", X=X, y=y, dataset="D", q=Q, sigma=SIGMA, C=C,
                trials=4, seed=1, download=False)
    cold, warm = runners.run_steps(**call), runners.run_steps(**call)
    assert cold["startup_seconds"] > 0 and warm["startup_seconds"] == 0.0
    for r in (cold, warm):
        assert 0 < r["step_seconds"] and r["step_seconds"] + r["startup_seconds"] <= r["seconds"]
    here = runners.run_steps(**dict(call, implementation="opacus-installed"))
    assert here["startup_seconds"] == 0.0 and 0 < here["step_seconds"] <= here["seconds"]


def test_the_full_mode_estimate_counts_full_modes_steps_and_calls():
    r = RA.audit_implementation("opacus-installed", "tiny", "synthetic", N=N, q=Q, sigma=SIGMA, C=C, trials=40, seed=2,
                                mode="quick", check_trials=12, progress=False, cache=None, workers=1).to_json()
    chunk = RA.chunk_steps("opacus-installed", r["n"])
    want = r["seconds_per_step"] * 2 * 40 + r["seconds_per_call"] * 2 * -(-40 // chunk)
    assert r["seconds_per_call"] >= 0 and r["full_mode_estimate_s"] == pytest.approx(want, rel=1e-12)
