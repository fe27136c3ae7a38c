"""Benchmark: a 200-round upper-bound curve at n = 1,485,217 (Figure 7 setting).

Times, on one thread, the FEASGM T-round upper bound of Theorems A.4/A.6 evaluated
exactly as a chi-square test in T(n-1) = 297,043,200 coordinates
(``multiround.feasgm_rounds_upper_bound``) at 200 values of alpha plus its epsilon at
delta = 1e-5 (target: under 10 s), and, for information, the numerical composition of
the one-round ASGM bound (Eq. 14) over the same 200 rounds at n = 26,010.

Run by ``make bench``; writes ``results/bench_multiround.json``; exits 1 when the
target is missed.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from paperlib.mechanisms import multiround as composition  # noqa: E402
from paperlib.artifact.provenance import RESULTS_ENV, save_result  # noqa: E402

MODE = os.environ.get("MODE", "quick")
SEED = int(os.environ.get("SEED", "0"))
N, Q, SIGMA, T, DELTA = 140_199, 0.005, 10.0, 200, 1e-5
TARGET = 10.0


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> int:
    os.environ.setdefault(RESULTS_ENV, str(Path(__file__).resolve().parent.parent / "results"))
    alpha = np.linspace(0.0, 1.0, 200)
    rows = []

    def feasgm():
        b = composition.feasgm_rounds_upper_bound(N, Q, None, 1_485_217, rounds=T)
        return b(alpha), b.epsilon(DELTA)

    (beta, eps), dt = _timed(feasgm)
    ok = dt < TARGET and np.all(np.isfinite(beta))
    rows.append({"case": "feasgm upper, n=1,485,217", "seconds": dt, "target_seconds": TARGET, "pass": bool(ok),
                 "epsilon": float(eps), "beta_at_0.5": float(np.interp(0.5, alpha, beta))})
    print(f"  FEASGM {T}-round upper bound, n=1,485,217: {dt:6.2f} s (target < {TARGET:g} s) "
          f"{'PASS' if ok else 'FAIL'}; epsilon(1e-5) = {eps:.4g}")

    def asgm():
        b = composition.asgm_rounds_upper_bound(999, 0.7, None, 26_010, rounds=T)
        return b(alpha), b.epsilon(DELTA)

    (beta_a, eps_a), dt_a = _timed(asgm)
    rows.append({"case": "asgm upper (PLD), N=999, q=0.7, n=26,010", "seconds": dt_a, "epsilon": float(eps_a)})
    print(f"  ASGM {T}-round upper bound by PLD composition, N=999, q=0.7, n=26,010: {dt_a:6.2f} s "
          f"(information); epsilon(1e-5) = {eps_a:.4g}")
    path = save_result("bench_multiround", {"N": N, "q": Q, "sigma": SIGMA, "rounds": T, "delta": DELTA},
                       {"cases": rows, "threads": 1}, mode=MODE, seed=SEED, wall_time=dt + dt_a)
    print(f"  -> {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
