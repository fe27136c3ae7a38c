"""Benchmark: a 200-point EASGM guarantee curve at the size of the large model.

Times ``easgm_guarantee(N, 0.005, 10, 1_485_217)(alpha, tol=TOL)`` for 200 values of
``alpha`` in [0, 1] (Theorem 3.6: a common-threshold mixture of noncentral chi-square
components in dimension 1,485,217) on one thread, for

* ``N = 4``       target < 5 s  (10 components, all far apart: the curve is ~0),
* ``N = 59,999``  target < 2 s (494 binomial components; issue 12, item 6: was 10-17 s with
  Boost's noncentral chi-square, now the large-dimension numerics of ``paperlib.fdp.tails``).

The error achieved is reported two ways: the sampled curve's chord error (``max_gap``, at most
``TOL``), and the numerics' own error, the largest difference of ``alpha(t)``, ``beta(t)`` from
Boost's ``scipy.stats.ncx2`` (the code before the change) at 20 of the thresholds the curve used.

Run by ``make bench`` (MODE/DEVICE/SEED arrive as environment variables; the
computation is deterministic and CPU-only, so they are only recorded). Prints one
line per case with time, tolerance, number of likelihood-ratio thresholds evaluated
and PASS/FAIL, stores the numbers in ``results/bench_guarantee.json`` and exits with
status 1 when a target is missed.
"""

from __future__ import annotations

import os

# one thread, set before numpy/scipy are imported
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
             "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_var] = "1"

import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from paperlib.mechanisms import guarantees  # noqa: E402
from paperlib.artifact.provenance import RESULTS_ENV, save_result  # noqa: E402

MODE = os.environ.get("MODE", "quick")
DEVICE = os.environ.get("DEVICE", "cpu")
SEED = int(os.environ.get("SEED", "0"))

Q, SIGMA, N_PARAMS = 0.005, 10.0, 1_485_217
N_ALPHA = 200
TOL = 1e-5  # chord error of the sampled curve (the value is within TOL of the exact one)
CASES = [(4, 5.0), (59_999, 2.0)]  # (N, target seconds)


def _error_against_boost(g, curve, points: int = 20) -> float:
    """Largest |alpha(t) - alpha_Boost(t)|, |beta(t) - beta_Boost(t)| at ``points`` thresholds of the curve."""
    from paperlib.fdp import gaussian

    lt = np.log(-curve.slope[(curve.slope < 0) & np.isfinite(curve.slope)])
    if lt.size < points:  # few vertices (N = 4: the curve is ~0): thresholds across the families' range
        lo = min(f.logt_bracket()[0] for f in g.families)
        hi = max(f.logt_bracket()[1] for f in g.families)
        lt = np.concatenate([lt, np.linspace(lo, hi, points)])
    lt = np.sort(lt)[np.linspace(0, lt.size - 1, points).astype(int)]
    new = g.tails(lt)
    saved = gaussian.QUAD_MIN_DOF
    gaussian.QUAD_MIN_DOF = 10**18  # GaussVarFamily.tails on scipy's (Boost's) ncx2, as before
    try:
        old = g.tails(lt)
    finally:
        gaussian.QUAD_MIN_DOF = saved
    return float(max(np.max(np.abs(new[0] - old[0])), np.max(np.abs(new[1] - old[1]))))


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    os.environ.setdefault(RESULTS_ENV, str(root / "results"))
    try:
        from threadpoolctl import threadpool_limits  # optional: caps pools already started
    except ImportError:
        threadpool_limits = None
    alpha = np.linspace(0.0, 1.0, N_ALPHA)
    rows = []
    ok_all = True
    print(f"EASGM guarantee, q={Q}, sigma={SIGMA:g}, n={N_PARAMS:,}, {N_ALPHA} alpha values, tol={TOL:g}, "
          f"one thread ({platform.processor() or platform.machine()}; MODE={MODE})")
    for N, target in CASES:
        g = guarantees.easgm_guarantee(N, Q, SIGMA, N_PARAMS)  # fresh object: no cached curve
        t0, c0 = time.perf_counter(), time.process_time()
        if threadpool_limits is not None:
            with threadpool_limits(limits=1):
                beta = g(alpha, tol=TOL)
        else:
            beta = g(alpha, tol=TOL)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0  # CPU time: the machine's load aside
        curve = g.curve(TOL)  # cached by the call above
        numerics_error = _error_against_boost(g, curve)
        ok = dt < target and np.all(np.isfinite(beta)) and numerics_error <= 1e-10
        ok_all &= bool(ok)
        row = {
            "N": N,
            "seconds": dt,
            "cpu_seconds": cpu,
            "target_seconds": target,
            "pass": bool(ok),
            "tol": TOL,
            "evaluations": int(curve.meta["evaluations"]),
            "vertices": int(curve.alpha.size),
            "max_gap": float(curve.meta["max_gap"]),
            "components": int(sum(np.size(f.weights) for f in g.families)),
            "dropped_mass": float(g.dropped_mass),
            "numerics_error_vs_boost": numerics_error,
            "beta_at_alpha_0.1_0.5": [float(g(0.1, tol=TOL)), float(g(0.5, tol=TOL))],
        }
        rows.append(row)
        print(f"  N={N:>6,}: {dt:7.2f} s (CPU {cpu:.2f} s; target < {target:g} s) {'PASS' if ok else 'FAIL'}; "
              f"{row['evaluations']} thresholds evaluated, {row['components']} components, "
              f"chord error {row['max_gap']:.1e}, numerics vs Boost {numerics_error:.1e}, "
              f"beta(0.1)={row['beta_at_alpha_0.1_0.5'][0]:.4f}, "
              f"beta(0.5)={row['beta_at_alpha_0.1_0.5'][1]:.4f}")
    params = {"q": Q, "sigma": SIGMA, "n": N_PARAMS, "n_alpha": N_ALPHA, "tol": TOL, "N": [c[0] for c in CASES]}
    path = save_result("bench_guarantee", params,
                       {"cases": rows, "threads": 1, "threadpoolctl": threadpool_limits is not None,
                        "device": DEVICE, "python": sys.version.split()[0]},
                       mode=MODE, seed=SEED, wall_time=sum(r["seconds"] for r in rows))
    print(f"  -> {path}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
