"""Benchmark: a real step of a 1.5-million-parameter model, projected where it runs or carried out whole.

An audit keeps of each real step only its projection on the white-box basis, its squared norm
and a few whole updates (:func:`paperlib.implementations.real_audit.reduce_chunk`). Until
REAL_AUDIT_VERSION 5 every ``(m, n)`` block of float64 updates was carried out of the step loop
(out of an old release's subprocess as a ``.npy`` file) and projected afterwards; now each step is
projected in the loop (:class:`paperlib.implementations.opacus_step.StepProjection`). This bench times
one full-mode chunk (:func:`~paperlib.implementations.real_audit.chunk_steps` steps) of DP-FETA's
denoiser (``dpfeta-mnist``, 1,485,217 parameters) both ways, at chapter 6's two sampling rates
(q = 0.005: nearly every batch empty, so the step is Opacus's noise and little else; q = 0.5), each
call warmed first, in this process (one thread), and checks that the two reductions agree
(coordinates and residuals to rounding, step checks equal).

Implementation: ``opacus-0.15.0`` (chapter 6's code path, its own subprocess) when it is in the
release cache, else the installed Opacus. ``MODE=smoke``: the 430-weight ``tiny`` model, 20 steps.
Target: the projected path at least ``TARGET`` times as fast at q = 0.005 (measured 2026-12-05 on
2 cores: about 5x). Run by ``make bench``; writes ``results/bench_step_projection.json``; exit
status 1 when the reductions differ or the target is missed.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

TARGET = 2.0
MODE = os.environ.get("MODE", "quick")
SEED = int(os.environ.get("SEED", "0"))


def _implementation() -> str:
    from paperlib.implementations.opacus_code import AuditError, install_release

    try:
        install_release("0.15.0", download=False)
        return "opacus-0.15.0"
    except AuditError:
        return "opacus-installed"


def _agree(a: dict, b: dict) -> bool:
    return (np.allclose(a["coords"], b["coords"], rtol=1e-12, atol=1e-14)
            and np.allclose(a["residual"], b["residual"], rtol=1e-10, atol=1e-14) and a["step_check"] == b["step_check"])


def main() -> int:
    import torch

    from paperlib.artifact.provenance import save_result
    from paperlib.implementations import real_audit as RA
    from paperlib.implementations import runners
    from paperlib.implementations.models import MODEL_INPUT

    torch.set_num_threads(1)
    model = "tiny" if MODE == "smoke" else "dpfeta-mnist"
    impl = _implementation()
    g = torch.Generator().manual_seed(SEED)
    X = torch.rand(5, *MODEL_INPUT[model], generator=g)
    y = torch.randint(0, 10, (5,), generator=g)
    N, sigma, C = 4, 10.0, 0.1
    grads = np.asarray(runners.per_example_gradients(model, X, y, seed=SEED), dtype=np.float64)
    n = grads.shape[1]
    shared = RA.reduce_shared(grads, N, C)
    m = 20 if MODE == "smoke" else RA.chunk_steps(impl, n)
    rows, ok = [], True
    for q in (0.005, 0.5):
        call = dict(implementation=impl, model_name=model, X=X, y=y, dataset="D", q=q, sigma=sigma, C=C, trials=m,
                    seed=SEED + 1, model_seed=SEED, download=False)
        args = RA.reduce_args(impl, model, runners.IMPLEMENTATION_MECHANISM[impl], q, sigma, C, "D", m, n, SEED + 1,
                              SEED, 0)
        opts = RA.step_options(args, shared)
        runners.run_steps(**dict(call, trials=2), **opts)  # warm: release started, basis loaded, buffers faulted in
        runners.run_steps(**dict(call, trials=2))
        t0 = time.perf_counter()
        whole = RA.reduce_chunk(runners.run_steps(**call), args, shared)
        t_whole = time.perf_counter() - t0
        t0 = time.perf_counter()
        projected = RA.reduce_chunk(runners.run_steps(**call, **opts), args, shared)
        t_proj = time.perf_counter() - t0
        agree = _agree(projected, whole)
        ratio = t_whole / t_proj
        ok = ok and agree and (MODE == "smoke" or q != 0.005 or ratio >= TARGET)
        rows.append({"q": q, "steps": m, "whole_per_step_s": t_whole / m, "projected_per_step_s": t_proj / m,
                     "speedup": ratio, "agree": bool(agree)})
        print(f"{impl} {model} q = {q}: {m} steps, whole updates {t_whole / m * 1e3:7.1f} ms/step, projected at the "
              f"step {t_proj / m * 1e3:7.1f} ms/step ({ratio:.2f}x); reductions agree: {agree}", flush=True)
    runners.close_release_servers()
    report = {"mode": MODE, "implementation": impl, "model": model, "n": int(n), "rows": rows, "target": TARGET,
              "passed": bool(ok)}
    save_result("bench_step_projection", {"mode": MODE, "seed": SEED}, report, mode=MODE, seed=SEED,
                wall_time=sum(r["steps"] * (r["whole_per_step_s"] + r["projected_per_step_s"]) for r in rows))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
