"""Benchmark: the certified epsilon of a whole training run (issue 12, "Build" 1, 2 and 6).

MNIST-sized setting: 60,000 records, batch 256 (``q = 256/60000``), sigma = 1.1, 10^6
parameters, delta = 1e-5, for EASGM, FEASGM and ASGM; 10 epochs (T = 2,344 rounds; target:
under 10 s per mechanism for both neighbours, removal and addition, on one thread) and
100 epochs (T = 23,438; target under 30 s). For each it prints the time, the certified epsilon
with its bracket and accountant error (``paperlib.mechanisms.certified``, PLD on dp_accounting),
and the epsilon the T-round upper bound forces.

Run by ``make bench``; writes ``results/bench_certified.json``; exits 1 when a target is missed.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from paperlib.artifact.provenance import RESULTS_ENV, save_result  # noqa: E402
from paperlib.mechanisms.certified import certified_for_training_set  # noqa: E402

MODE = os.environ.get("MODE", "quick")
SEED = int(os.environ.get("SEED", "0"))
N_TRAIN, BATCH, SIGMA, N_PARAMS, DELTA = 60_000, 256, 1.1, 10**6, 1e-5
Q = BATCH / N_TRAIN
RUNS = ((10, 2344, 10.0), (100, 23_438, 30.0))  # (epochs, rounds = epochs * ceil(N / B), target seconds)


def main() -> int:
    os.environ.setdefault(RESULTS_ENV, str(Path(__file__).resolve().parent.parent / "results"))
    rows, ok_all, total = [], True, 0.0
    for epochs, T, target in RUNS:
        for mech in ("easgm", "feasgm", "asgm"):
            t0 = time.perf_counter()
            r = certified_for_training_set(mech, N_TRAIN, Q, SIGMA, N_PARAMS, rounds=T, delta=DELTA)
            dt = time.perf_counter() - t0
            total += dt
            ok = dt < target
            ok_all &= ok
            row = {"mechanism": mech, "epochs": epochs, "rounds": T, "seconds": dt, "target_seconds": target,
                   "pass": bool(ok)}
            print(f"  {mech.upper():6s} {epochs:3d} epochs (T = {T:,}): {dt:6.2f} s (target < {target:g} s) "
                  f"{'PASS' if ok else 'FAIL'}")
            for side in ("removal", "addition"):
                e = r[side]
                if "error" in e:
                    print(f"      {side:8s} {tuple(e['pair'])}: {e['error']}")
                    row[side] = {"pair": e["pair"], "error": e["error"]}
                    continue
                lo, hi = e["epsilon_certified_bracket"]
                rel = (hi - lo) / max(hi, 0.1)
                print(f"      {side:8s} {tuple(e['pair'])}: eps_cert = {hi:.6g}  bracket [{lo:.6g}, {hi:.6g}] "
                      f"(error {hi - lo:.3g}, {rel:.2%}; grid {e['certified_grid']:.3g})  "
                      f"eps_forced = {e['epsilon_forced']:.6g}{'  [' + e['case'] + ']' if 'case' in e else ''}")
                row[side] = {k: e.get(k) for k in ("pair", "epsilon_certified", "epsilon_certified_bracket",
                                                   "certified_accounting_error", "epsilon_forced",
                                                   "epsilon_forced_bracket", "accuracy_met", "certified_grid",
                                                   "case")}
            rows.append(row)
    path = save_result("bench_certified", {"N_train": N_TRAIN, "batch": BATCH, "q": Q, "sigma": SIGMA,
                                           "n": N_PARAMS, "delta": DELTA, "runs": [list(r) for r in RUNS]},
                       {"cases": rows, "threads": 1}, mode=MODE, seed=SEED, wall_time=total)
    print(f"  -> {path}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
