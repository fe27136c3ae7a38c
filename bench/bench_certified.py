"""Benchmark: a ``check``-sized computation — both neighbours, certified and forced — for each release family.

MNIST-sized setting: 60,000 records, batch 256 (``q = 256/60000``, Opacus 0.x's rate), sigma = 1.1,
10^6 parameters, delta = 1e-5; ``T = 2,340`` (10 epochs) and ``T = 25,000``. For each family (ASGM: Opacus
0.12-0.13; EASGM: 0.14-0.15; FEASGM: 1.x, floors differ on the removal pair and agree on the addition pair at
this size; DPSUR's own rule) it prints the CPU time (``time.process_time``, one thread) and the wall time of
``certified_for_training_set``, the certified and forced epsilons and their ratio.

Target (issue 19, "Build" 6): ASGM at ``T = 25,000`` under 30 s of CPU. Run by ``make bench``; writes
``results/bench_certified.json``; exits 1 when the target is missed. A benchmark, never a timed test.
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
ROUNDS = (2340, 25_000)
FAMILIES = ("asgm", "easgm", "feasgm", "dpsur")
TARGET = ("asgm", 25_000, 30.0)  # (family, rounds, CPU seconds)


def main() -> int:
    os.environ.setdefault(RESULTS_ENV, str(Path(__file__).resolve().parent.parent / "results"))
    rows, ok_all, total = [], True, 0.0
    for T in ROUNDS:
        for mech in FAMILIES:
            c0, w0 = time.process_time(), time.perf_counter()
            r = certified_for_training_set(mech, N_TRAIN, Q, SIGMA, N_PARAMS, rounds=T, delta=DELTA)
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            total += wall
            row = {"mechanism": mech, "rounds": T, "cpu_seconds": cpu, "wall_seconds": wall}
            if (mech, T) == TARGET[:2]:
                row.update(target_cpu_seconds=TARGET[2], passed=cpu < TARGET[2])
                ok_all &= cpu < TARGET[2]
            mark = f" (target < {TARGET[2]:g} s: {'PASS' if row['passed'] else 'FAIL'})" if "passed" in row else ""
            print(f"  {mech.upper():6s} T = {T:>6,}: {cpu:6.1f} s CPU, {wall:6.1f} s wall{mark}")
            for side in ("removal", "addition"):
                e = getattr(r, side).to_json()
                if "error" in e:
                    print(f"      {side:8s} {tuple(e['pair'])}: {e['error']}")
                    row[side] = {"pair": e["pair"], "error": e["error"]}
                    continue
                c, f = e["epsilon_certified"], e["epsilon_forced"]
                print(f"      {side:8s} {tuple(e['pair'])}: certified {c:.6g} [{e['certified_method'].split(' (')[0]}]  "
                      f"forced {f:.6g} [{e['forced_attack']['name']}]  ratio {c / f:.4f}"
                      + (f"  ({e['case']})" if "case" in e else ""))
                row[side] = {k: e.get(k) for k in ("pair", "epsilon_certified", "epsilon_certified_bracket",
                                                   "certified_method", "epsilon_forced", "epsilon_forced_bracket",
                                                   "forced_method", "accuracy_met", "case")}
                row[side]["forced_attack"] = e["forced_attack"]["name"]
                row[side]["ratio"] = c / f if f > 0 else None
            rows.append(row)
    path = save_result("bench_certified", {"N_train": N_TRAIN, "batch": BATCH, "q": Q, "sigma": SIGMA,
                                           "n": N_PARAMS, "delta": DELTA, "rounds": list(ROUNDS)},
                       {"cases": rows, "threads": 1, "target": list(TARGET)}, mode=MODE, seed=SEED, wall_time=total)
    print(f"  -> {path}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
