"""Real steps in parallel (paperlib.implementations.parallel): the same bits for any worker count or scheduler.

The audits are small (the 430-weight ``tiny`` model, a few chunks of a few steps), so the
work is spread over more than one chunk per dataset and really goes to the workers; the
comparisons are exact (``==`` on every number of the result except wall times).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from paperlib.implementations import parallel, release_server, runners
from paperlib.implementations import real_audit as RA

ROOT = Path(__file__).resolve().parents[2]
#: wall-clock keys of a result (they differ run to run; everything else must be equal)
_TIMES = ("seconds", "step_seconds", "startup_seconds", "seconds_per_step", "seconds_per_call", "full_mode_estimate_s",
          "wall_time_s")
AUDIT = dict(N=3, q=0.5, sigma=2.0, C=0.5, trials=40, seed=11, mode="full", progress=False, cache=None)


def _strip(x):
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in _TIMES}
    if isinstance(x, (list, tuple)):
        return [_strip(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return "nan"  # nan == nan for the comparison
    return x


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(RA, "STEP_CHUNK", 7)  # 20 steps per dataset -> 3 chunks each, 6 in all
    monkeypatch.delenv("DASK_SCHEDULER", raising=False)
    monkeypatch.delenv("WORKERS", raising=False)


@pytest.fixture(scope="module")
def local_cluster():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    yield cluster
    cluster.close()


def _audit(impl, **kw):
    return RA.audit_implementation(impl, "tiny", "synthetic", **{**AUDIT, **kw}).to_json()


def _cached_release(impl):
    from paperlib.implementations.opacus_code import AuditError, install_release

    try:
        install_release(runners.RELEASES[impl], download=False)
    except AuditError as exc:
        pytest.skip(f"{impl} is not in the release cache ({str(exc).splitlines()[0]})")


@pytest.mark.parametrize("impl,mode", [("opacus-installed", "full"), ("opacus-installed", "quick"),
                                       ("opacus-0.15.0", "full")])
def test_one_and_two_workers_give_the_same_audit(impl, mode, small_chunks):
    if impl in runners.RELEASES:
        _cached_release(impl)
    kw = {"mode": mode, "check_trials": 20, "trials": 200} if mode == "quick" else {}
    one = _audit(impl, workers=1, **kw)
    two = _audit(impl, workers=2, **kw)
    try:
        assert parallel._LOCAL.get("workers") == 2  # the two-worker run went to a local Dask cluster
    finally:
        parallel.close_cluster()
    assert one["implementation_steps"] == two["implementation_steps"] == (40 if mode == "quick" else 2 * AUDIT["trials"])
    assert _strip(one) == _strip(two)
    assert np.isfinite(one["eps_lower"]["optimal"])  # a real audit, not an empty result


def test_an_existing_cluster_serves_the_audit_through_dask_scheduler(small_chunks, local_cluster, monkeypatch):
    default = _audit("opacus-installed", workers=1)
    monkeypatch.setenv("DASK_SCHEDULER", local_cluster.scheduler_address)
    served = _audit("opacus-installed")
    assert "run_reduced" in local_cluster.scheduler.task_prefixes  # the chunks ran (and were reduced) on that cluster
    assert _strip(served) == _strip(default)


def _calls(impl, k=3, m=4):
    g = torch.Generator().manual_seed(5)
    X = torch.rand(4, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (4,), generator=g)
    return [dict(implementation=impl, model_name="tiny", X=X, y=y, dataset="D" if i % 2 else "Dprime", q=0.5,
                 sigma=1.0, C=0.5, trials=m, seed=100 + i, download=False) for i in range(k)]


def test_run_chunks_in_order_and_the_bar_counts_rounds(local_cluster):
    calls = _calls("opacus-installed", k=5, m=3)

    class Bar:
        n = 0

        def update(self, k):
            self.n += k

    bar = Bar()
    got = list(parallel.run_chunks(calls, scheduler=local_cluster.scheduler_address, bar=bar))
    want = [parallel.run_chunk(c) for c in calls]
    assert bar.n == 15
    for g, w in zip(got, want):
        assert np.array_equal(g["updates"], w["updates"]) and np.array_equal(g["batch_sizes"], w["batch_sizes"])
        assert g["seed"] == w["seed"]


def _reduce_inputs(calls):
    X, y = calls[0]["X"], calls[0]["y"]
    grads = np.asarray(runners.per_example_gradients("tiny", X, y, seed=0), dtype=np.float64)
    N, C = X.shape[0] - 1, calls[0]["C"]
    shared = RA.reduce_shared(grads, N, C)
    args = [RA.reduce_args(c["implementation"], "tiny", runners.IMPLEMENTATION_MECHANISM[c["implementation"]], c["q"],
                           c["sigma"], C, "D" if c["dataset"] == "D" else "D'", c["trials"], grads.shape[1], c["seed"],
                           0, 2) for c in calls]
    return shared, args


def test_reduced_chunks_are_the_same_on_the_cluster_and_equal_the_reduction_here(local_cluster):
    calls = [dict(c, model_seed=0) for c in _calls("opacus-installed", k=4, m=3)]  # D uses the first N points
    shared, args = _reduce_inputs(calls)
    here = list(parallel.run_chunks(calls, workers=1, reduce=RA.reduce_chunk, reduce_args=args, shared=shared,
                                step_options=RA.step_options))
    there = list(parallel.run_chunks(calls, scheduler=local_cluster.scheduler_address, reduce=RA.reduce_chunk,
                                     reduce_args=args, shared=shared, step_options=RA.step_options))
    raw = [parallel.run_chunk(c) for c in calls]
    for h, t, r in zip(here, there, raw):
        assert all(np.array_equal(h[k], t[k]) for k in ("coords", "residual", "first"))
        assert h["step_check"] == t["step_check"] and h["step_check"]["disagreeing"] == 0
        # the reduction is the projection of the steps' own updates (computed independently here; the
        # steps were projected as they ran, in another order of sums: equal to rounding)
        p = RA.project_outputs(r["updates"], shared["basis"])
        np.testing.assert_allclose(h["coords"], p["coords"], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(h["residual"], p["residual"], rtol=1e-10)
        assert np.array_equal(h["first"], r["updates"][:2]) and "updates" not in h
    with pytest.raises(ValueError, match="reduce_args must hold one entry per call"):
        list(parallel.run_chunks(calls, workers=1, reduce=RA.reduce_chunk, reduce_args=args[:1], shared=shared))


def test_one_worker_runs_in_process_without_dask():
    code = ("import sys, torch\n"
            "from paperlib.implementations import parallel\n"
            "X = torch.rand(4, 1, 28, 28); y = torch.randint(0, 10, (4,))\n"
            "calls = [dict(implementation='opacus-installed', model_name='tiny', X=X, y=y, dataset='D', q=0.5,\n"
            "              sigma=1.0, C=0.5, trials=2, seed=s) for s in range(3)]\n"
            "out = list(parallel.run_chunks(calls, workers=1))\n"
            "assert len(out) == 3 and all(o['updates'].shape == (2, o['n']) for o in out)\n"
            "assert 'dask' not in sys.modules and 'distributed' not in sys.modules, 'dask imported'\n"
            "print('ok')\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASK_SCHEDULER": ""}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_one_thread_is_restored():
    before = torch.get_num_threads()
    with parallel.one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("env,workers,want", [("3", None, 3), ("", None, None), ("3", 2, 2)])
def test_resolve_workers(env, workers, want, monkeypatch):
    monkeypatch.setenv("WORKERS", env)
    assert parallel.resolve_workers(workers) == (want if want is not None else parallel.default_workers())


@pytest.mark.parametrize("env,arg,msg", [("0", None, "WORKERS"), ("two", None, "WORKERS"), ("", 0, "workers"),
                                         ("", 1.5, "workers")])
def test_bad_workers_are_one_line(env, arg, msg, monkeypatch):
    monkeypatch.setenv("WORKERS", env)
    with pytest.raises(ValueError, match=msg):
        parallel.resolve_workers(arg)


def test_resolve_scheduler(monkeypatch):
    monkeypatch.setenv("DASK_SCHEDULER", "tcp://10.0.0.1:8786")
    assert parallel.resolve_scheduler() == "tcp://10.0.0.1:8786"
    assert parallel.resolve_scheduler("tls://h:1") == "tls://h:1"
    monkeypatch.setenv("DASK_SCHEDULER", "")
    dask = pytest.importorskip("dask")
    with dask.config.set({"scheduler-address": "tcp://from-config:8786"}):
        assert parallel.resolve_scheduler() == "tcp://from-config:8786"
        assert parallel.resolve_scheduler(dask_config=False) is None
    for bad in ("localhost:8786", "tcp://"):
        with pytest.raises(ValueError, match="scheduler"):
            parallel.resolve_scheduler(bad)


# ---------------------------------------------------------------------------- the device of a step
def test_step_device_choice():
    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert runners.step_device().type == want
    assert runners.step_device("cpu").type == "cpu"
    for bad in ("tpu", "gpu0", 3):
        with pytest.raises(ValueError, match="device"):
            runners.step_device(bad)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no GPU"):
            runners.step_device("cuda")


def test_cpu_device_is_the_default_here():
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the default is CUDA (test_cuda_steps_equal_cpu_steps)")
    c = _calls("opacus-installed", k=1)[0]
    a, b = runners.run_steps(**c), runners.run_steps(**c, device="cpu")
    assert a["device"] == b["device"] == "cpu" and np.array_equal(a["updates"], b["updates"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible to torch")
@pytest.mark.parametrize("impl", ["opacus-installed", "opacus-1.0.2", "opacus-0.15.0"])
def test_cuda_steps_equal_cpu_steps(impl):
    """sigma = 0: no noise, so the CUDA step (same CPU masks) equals the CPU step up to float32 rounding."""
    c = {**_calls(impl, k=1, m=6)[0], "sigma": 0.0}
    try:
        cpu = runners.run_steps(**c, device="cpu")
    except runners.ReleaseNotAvailable as exc:
        pytest.skip(str(exc))
    gpu = runners.run_steps(**c, device="cuda")
    assert gpu["device"].startswith("cuda")
    assert np.array_equal(cpu["batch_sizes"], gpu["batch_sizes"])
    scale = np.abs(cpu["updates"]).max()
    assert np.abs(cpu["updates"] - gpu["updates"]).max() <= 1e-4 * scale


# ---------------------------------------------------------------------------- old releases: one subprocess each
def test_release_subprocess_is_kept_and_gives_the_same_steps():
    runners.close_release_servers()  # an earlier test in this process may have left another release's server
    calls = _calls("opacus-0.15.0", k=2, m=3)
    try:
        first = runners.run_steps(**calls[0])
    except runners.ReleaseNotAvailable as exc:
        pytest.skip(f"opacus 0.15.0 not in the release cache: {exc}")
    procs = list(release_server._SERVERS.values())
    assert len(procs) == 1 and procs[0].poll() is None  # one live subprocess, kept for the next call
    runners.run_steps(**calls[1])
    assert list(release_server._SERVERS.values()) == procs  # the same subprocess served the second call
    again = runners.run_steps(**calls[0])
    assert np.array_equal(first["updates"], again["updates"])
    runners.close_release_servers()
    assert procs[0].poll() is not None and not release_server._SERVERS
    fresh = runners.run_steps(**calls[0])  # a new subprocess: the same bits
    assert np.array_equal(first["updates"], fresh["updates"])
    runners.close_release_servers()


# ---------------------------------------------------------------------------- the full-mode estimate
def test_full_mode_estimate_by_hand():
    from paperlib.implementations.costs import full_mode_estimate

    work = [{"implementation": "opacus-0.15.0", "model": "cnn-mnist", "points": 3, "steps_per_point": 1000},
            {"implementation": "dpsur", "model": "cnn-mnist", "points": 2, "steps_per_point": 500}]
    cpu = {("opacus-0.15.0", "cnn-mnist"): 0.02, ("dpsur", "cnn-mnist"): 0.004}
    r = full_mode_estimate(work, cpu, workers=4, overhead_s=7.0)
    # 3 * 1000 * 0.02 = 60 s and 2 * 500 * 0.004 = 4 s of steps, over 4 workers, plus 7 s
    assert r["cpu_step_seconds"] == pytest.approx(64.0) and r["seconds"] == pytest.approx(64.0 / 4 + 7.0)
    assert r["steps"] == 4000 and r["gpu_seconds"] == 0.0 and [x["device"] for x in r["rows"]] == ["cpu", "cpu"]
    g = full_mode_estimate(work, cpu, workers=4, gpus=1, gpu_step_costs={("opacus-0.15.0", "cnn-mnist"): 0.005})
    # the release's 3,000 steps on the one GPU (15 s), DPSUR's 1,000 on the CPU workers (4 s / 4)
    assert g["gpu_seconds"] == pytest.approx(15.0) and g["cpu_seconds"] == pytest.approx(1.0)
    assert g["seconds"] == pytest.approx(16.0) and [x["device"] for x in g["rows"]] == ["cuda", "cpu"]
    assert full_mode_estimate(work, cpu, workers=1)["seconds"] == pytest.approx(64.0)


@pytest.mark.parametrize("kw,msg", [({"workers": 0}, "workers"), ({"workers": 2, "gpus": -1}, "gpus"),
                                    ({"workers": 2, "gpus": 1}, "gpu_step_costs"),
                                    ({"workers": 2, "overhead_s": -1.0}, "overhead_s")])
def test_full_mode_estimate_bad_input(kw, msg):
    from paperlib.implementations.costs import full_mode_estimate

    work = [{"implementation": "dpsur", "model": "tiny", "points": 1, "steps_per_point": 10}]
    with pytest.raises(ValueError, match=msg):
        full_mode_estimate(work, {("dpsur", "tiny"): 0.1}, **kw)
    with pytest.raises(ValueError, match="per_step_costs"):
        full_mode_estimate(work, {}, workers=2)
    with pytest.raises(ValueError, match="per_step_costs"):
        full_mode_estimate(work, {("dpsur", "tiny"): float("nan")}, workers=2)


def test_local_cluster_logs_nothing_at_info_even_with_a_root_info_handler():
    """Chapter 11's audit showed distributed's INFO lines ("Scheduler at: tcp://127.0.0.1:...", "Start
    Nanny at", "Receive client connection: Client-...") in the notebook: the kernel's root logger had an
    INFO handler and distributed's loggers propagated to it. The cluster path the notebooks use
    (run_chunks -> _local_client) must emit nothing below WARNING, starting or closing."""
    pytest.importorskip("distributed")
    code = ("import logging\n"
            "logging.basicConfig(level=logging.INFO, format='%(levelname)s %(name)s %(message)s')\n"
            "from paperlib.implementations import parallel\n"
            "client = parallel._local_client(2)\n"
            "assert client.status == 'running'\n"
            "import os\n"
            "env = client.run(lambda: (os.environ.get('MALLOC_TRIM_THRESHOLD_'), os.environ.get('MALLOC_MMAP_THRESHOLD_')))\n"
            "assert set(env.values()) == {(str(1 << 30), str(32 << 20))}, env  # workers keep freed memory\n"
            "parallel.close_cluster()\n"
            "print('done')\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("done")
    noisy = [ln for ln in out.stderr.splitlines() if ln.startswith(("INFO", "DEBUG")) or "Scheduler at" in ln
             or "Nanny" in ln or "dashboard at" in ln.lower() or "Client-" in ln]
    assert not noisy, "\n".join(noisy[:10])


def test_worker_count_has_a_limit(monkeypatch):
    """WORKERS=10000 started 10,000 processes ("Too many open files"); now one line naming WORKERS, before any."""
    from paperlib.fdp.validation import ParameterError
    from paperlib.implementations import parallel as P

    limit = P.MAX_WORKERS_PER_CORE * P.default_workers()
    monkeypatch.setenv("WORKERS", str(limit + 1))
    with pytest.raises(ParameterError, match="^WORKERS = .* is more than"):
        P.resolve_workers()
    monkeypatch.setenv("WORKERS", str(limit))
    assert P.resolve_workers() == limit
    with pytest.raises(ParameterError, match="^workers"):
        P.resolve_workers(10 * limit)


def test_a_scheduler_address_nobody_answers_is_one_line_after_the_timeout(monkeypatch):
    pytest.importorskip("distributed")
    import time

    from paperlib.fdp.validation import ParameterError
    from paperlib.implementations import parallel as P

    monkeypatch.setattr(P, "CONNECT_TIMEOUT", 2)
    t0 = time.perf_counter()
    with pytest.raises(ParameterError, match="^DASK_SCHEDULER: no Dask scheduler answered at tcp://127.0.0.1:9 within 2 s"):
        P._remote_client("tcp://127.0.0.1:9")
    assert time.perf_counter() - t0 < 60  # a hang guard, not a timing target


def test_stale_basis_folders_of_ended_processes_are_removed(tmp_path):
    """A Dask worker terminated at shutdown never runs its exit handler, so its basis folder (up to hundreds
    of MB) stayed in the temporary folder; the next process that writes a basis deletes the folders of ended
    processes and keeps those of live ones."""
    import subprocess

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()  # a process that has ended
    for name in (f"paperlib-bases-{dead}-abc", f"paperlib-bases-{os.getpid()}-def", "paperlib-bases-old"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "b.npy").write_bytes(b"x")
    assert release_server.remove_stale_basis_folders(tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"paperlib-bases-{os.getpid()}-def", "paperlib-bases-old"]
