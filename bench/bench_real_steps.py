"""Benchmark: real implementation steps on 1 and on 2 Dask workers (issue 20, Build 5).

The same list of chunks (calls of :func:`paperlib.implementations.runners.run_steps`, each with
its own seed, as a real audit makes them) runs once in process (``workers=1``) and once on a
local Dask cluster of ``WORKERS_B`` workers (default 2) through
:func:`paperlib.implementations.parallel.run_chunks`, each chunk reduced where it ran exactly as
:func:`paperlib.implementations.real_audit.audit_implementation` does (``reduce_chunk``: the step
check against the documented mechanism, the projection on the gradients, the first updates).
Both sides are warmed first (one chunk and its reduction run in every process: torch, Opacus
and any old release imported, memory grown to a chunk's working set; the cluster started), so
the times are those of an audit's steady state. Reported per implementation: seconds on each
side, the speed-up and whether the reduced chunks (projections, first updates, step checks)
are **bitwise equal** (they must be: each chunk runs on one thread with its own seed), and
that no real step disagreed with the mechanism.

Each side runs ``REPEATS`` times (default 3, ``BENCH_REPEATS``), the two interleaved, and the
least time of each counts (as :mod:`timeit` does: the others measured other jobs as well);
every run's time is in the result. Target: speed-up >= 1.8 with 2 workers (``TARGET``). On a machine shared with other jobs the
speed-up is bounded by the cores actually free: the load average at the start is reported
beside it. Implementations: ``opacus-installed`` and ``dpsur`` always; the old releases when
they are in the release cache (never downloaded here). Model: ``cnn-mnist`` (26,010
parameters, chapter 6's model; ``MODE=smoke``: ``tiny``).

Run by ``make bench``; writes ``results/bench_real_steps.json``; exit status 1 when results
differ between the two sides or the speed-up of the total is below the target.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

TARGET = 1.8
MODE = os.environ.get("MODE", "quick")
SEED = int(os.environ.get("SEED", "0"))
WORKERS_B = int(os.environ.get("BENCH_WORKERS", "2"))
#: runs of each side per implementation (interleaved); the least time of each is reported
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))


def _calls(impl: str, model: str, chunks: int, steps: int) -> tuple:
    """The chunks of an audit of ``impl`` on 5 random points (N = 4) and their reductions' inputs."""
    import torch

    from paperlib.implementations import real_audit as RA
    from paperlib.implementations import runners
    from paperlib.implementations.models import MODEL_INPUT

    g = torch.Generator().manual_seed(SEED)
    X = torch.rand(5, *MODEL_INPUT[model], generator=g)
    y = torch.randint(0, 10, (5,), generator=g)
    q, sigma, C, N = 0.5, 10.0, 0.1, 4
    calls = [dict(implementation=impl, model_name=model, X=X, y=y, dataset="D" if k % 2 == 0 else "Dprime",
                  q=q, sigma=sigma, C=C, trials=steps, seed=SEED * 1000 + k, model_seed=SEED, download=False)
             for k in range(chunks)]
    grads = np.asarray(runners.per_example_gradients(model, X, y, seed=SEED), dtype=np.float64)
    shared = RA.reduce_shared(grads, N, C)
    args = [RA.reduce_args(impl, model, runners.IMPLEMENTATION_MECHANISM[impl], q, sigma, C,
                           "D" if k % 2 == 0 else "D'", steps, grads.shape[1], SEED * 1000 + k, SEED, 20 if k < 2 else 0)
            for k in range(chunks)]
    return calls, args, shared


def _equal(a: dict, b: dict) -> bool:
    return all(np.array_equal(a[k], b[k]) for k in ("coords", "residual", "first")) and a["step_check"] == b["step_check"]


def _available(impl: str) -> str | None:
    from paperlib.implementations import runners

    if impl not in runners.RELEASES:
        return None
    from paperlib.implementations.opacus_code import AuditError, install_release

    try:
        install_release(runners.RELEASES[impl], download=False)
    except AuditError as exc:
        return (str(exc).strip().splitlines() or ["not in the release cache"])[0]
    return None


def main() -> int:
    from paperlib.artifact.provenance import save_result
    from paperlib.implementations import parallel, runners
    from paperlib.implementations import real_audit as RA

    model = "tiny" if MODE == "smoke" else "cnn-mnist"
    # 250 steps per chunk: an audit's chunks hold up to 500 (STEP_CHUNK), a quick check 100 to 500 per dataset
    chunks, steps = (4, 10) if MODE == "smoke" else (8, 250)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    rows, t1_all, t2_all, equal_all = [], 0.0, 0.0, True
    for impl in ("opacus-installed", "dpsur", "opacus-1.0.2", "opacus-0.15.0", "opacus-0.13.0"):
        why = _available(impl)
        if why:
            rows.append({"implementation": impl, "skipped": why})
            print(f"{impl:17s} skipped: {why[:90]}", flush=True)
            continue
        calls, args, shared = _calls(impl, model, chunks, steps)
        kw = dict(reduce=RA.reduce_chunk, reduce_args=args, shared=shared, step_options=RA.step_options)
        # steady state on both sides: every process has run one chunk and its reduction (imports, memory)
        parallel.warm(calls[0], workers=1, reduce=RA.reduce_chunk, reduce_arg=args[0], shared=shared,
                      step_options=RA.step_options)
        parallel.warm(calls[0], workers=WORKERS_B, reduce=RA.reduce_chunk, reduce_arg=args[0], shared=shared,
                      step_options=RA.step_options)
        times1, timesk, equal = [], [], True
        for _ in range(REPEATS):  # the two sides interleaved; the least time of each (timeit's rule)
            t0 = time.perf_counter()
            one = list(parallel.run_chunks(calls, workers=1, **kw))
            times1.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            two = list(parallel.run_chunks(calls, workers=WORKERS_B, **kw))
            timesk.append(time.perf_counter() - t0)
            equal = equal and all(_equal(a, b) for a, b in zip(one, two))
        t1, t2 = min(times1), min(timesk)
        disagreeing = sum(o["step_check"]["disagreeing"] for o in one)
        # run_steps's own seconds, summed: the steps' compute on each side (above it on k workers means the
        # cores were not free -- other jobs -- rather than Dask's overhead)
        c1, ck = sum(o["seconds"] for o in one), sum(o["seconds"] for o in two)
        rows.append({"implementation": impl, "model": model, "n": int(shared["grads"].shape[1]), "chunks": chunks,
                     "steps": chunks * steps, "seconds_1": t1, "seconds_k": t2, "speedup": t1 / t2,
                     "per_step_s_1": t1 / (chunks * steps), "compute_s_1": c1, "compute_s_k": ck,
                     "seconds_1_runs": times1, "seconds_k_runs": timesk,
                     "bitwise_equal": bool(equal), "real_steps_disagreeing": int(disagreeing)})
        t1_all, t2_all, equal_all = t1_all + t1, t2_all + t2, equal_all and equal and disagreeing == 0
        print(f"{impl:17s} {chunks * steps} steps of {model}: 1 worker {t1:7.2f} s, {WORKERS_B} workers {t2:7.2f} s, "
              f"speed-up {t1 / t2:4.2f}x (steps' own compute {c1:.2f} s and {ck:.2f} s), bitwise equal: {equal}",
              flush=True)
    parallel.close_cluster()
    runners.close_release_servers()
    speedup = t1_all / t2_all if t2_all else float("nan")
    passed = bool(equal_all and speedup >= TARGET)
    report = {"mode": MODE, "workers": WORKERS_B, "cores": parallel.default_workers(), "load_average_1min": load,
              "rows": rows, "seconds_1": t1_all, "seconds_k": t2_all, "speedup": speedup, "target": TARGET,
              "bitwise_equal": bool(equal_all), "passed": passed}
    save_result("bench_real_steps", {"mode": MODE, "seed": SEED, "workers": WORKERS_B}, report, mode=MODE,
                seed=SEED, wall_time=sum(sum(r.get("seconds_1_runs", [])) + sum(r.get("seconds_k_runs", [])) for r in rows))
    print(f"total: speed-up {speedup:.2f}x with {WORKERS_B} workers (target {TARGET}x) on "
          f"{parallel.default_workers()} cores, load average {load if load is None else round(load, 2)} at the "
          f"start; results bitwise equal: {equal_all}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
