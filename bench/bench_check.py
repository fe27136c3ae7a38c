"""Benchmark: ``python -m paperlib check`` for an MNIST-sized run (issue 12, "Build" 3 and 6).

60,000 records, batch 256, sigma = 1.1, 10^6 parameters, delta = 1e-5, under every mechanism an
Opacus release runs: 0.13 (ASGM), 0.15 (EASGM), 1.6 (FEASGM; Opacus's rule gives q = 1/235 and
int(N q) = 255 on both datasets, so SGM), 1.6 with batch 250 (FEASGM, removal floors differ:
249/250) and 1.6 with loss_reduction='sum' (SGM). Each with the release's default accountant for
the claim (RDP before 1.3, PRV from 1.3), both neighbours, certified and forced epsilon. Targets:
10 epochs under 10 s, 100 epochs under 30 s per case on one thread
(:func:`paperlib.practitioner.check.check_run`, CPU seconds of this process and wall time both reported; the
target is on CPU seconds, which a shared machine does not inflate). For each it prints the times,
the claimed epsilon, and per neighbour the verdict, the certified epsilon with its accountant
error (PLD bracket width) and the forced epsilon.

Run by ``make bench``; writes ``results/bench_check.json``; exits 1 when a target is missed.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from paperlib.artifact.provenance import RESULTS_ENV, save_result  # noqa: E402
from paperlib.practitioner.check import check_run  # noqa: E402

MODE = os.environ.get("MODE", "quick")
SEED = int(os.environ.get("SEED", "0"))
N_TRAIN, SIGMA, N_PARAMS, DELTA = 60_000, 1.1, 10**6, 1e-5
CASES = (("0.13.0", 256, "mean"), ("0.15.0", 256, "mean"), ("1.6.0", 256, "mean"), ("1.6.0", 250, "mean"),
         ("1.6.0", 256, "sum"))
RUNS = ((10, 10.0), (100, 30.0))  # (epochs, target seconds)


def main() -> int:
    os.environ.setdefault(RESULTS_ENV, str(Path(__file__).resolve().parent.parent / "results"))
    rows, ok_all, total = [], True, 0.0
    for epochs, target in RUNS:
        for version, batch, red in CASES:
            w0, c0 = time.perf_counter(), time.process_time()
            r = check_run(version, N_TRAIN, batch, epochs=epochs, noise_multiplier=SIGMA, n_params=N_PARAMS,
                          loss_reduction=red, delta=DELTA).to_json()  # the report as the CLI's --json gives it
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            total += wall
            ok = cpu < target
            ok_all &= ok
            row = {"opacus_version": version, "batch_size": batch, "loss_reduction": red, "epochs": epochs,
                   "steps": r["steps"], "mechanism": r["mechanism"], "cpu_seconds": cpu, "wall_seconds": wall,
                   "target_seconds": target, "pass": bool(ok), "claim": r["claim"],
                   "epsilon_certified": r["epsilon_certified"], "epsilon_forced": r["epsilon_forced"]}
            print(f"  Opacus {version} batch {batch} {red:4s} -> {r['mechanism'].upper():6s} {epochs:3d} epochs "
                  f"(T = {r['steps']:,}): {cpu:6.2f} s CPU, {wall:6.2f} s wall (target < {target:g} s) "
                  f"{'PASS' if ok else 'FAIL'}; claimed {r['claimed_epsilon']:.4g} ({r['claim']['accountant']})")
            for e in r["neighbours"]:
                c = e.get("epsilon_certified")
                err = e.get("certified_accounting_error")
                cs = "-" if c is None else f"{c:.6g} (error {err:.3g}, {err / max(c, 0.1):.2%})"
                fs = "-" if e.get("epsilon_forced") is None else f"{e['epsilon_forced']:.6g}"
                print(f"      {e['name']:8s} {tuple(e['sizes'])}: {e['verdict']:11s} eps_cert = {cs}  "
                      f"eps_forced = {fs}")
                row[e["name"]] = {k: e.get(k) for k in ("sizes", "verdict", "epsilon_certified",
                                                        "epsilon_certified_bracket", "certified_accounting_error",
                                                        "epsilon_forced", "epsilon_forced_bracket", "case")}
            rows.append(row)
    path = save_result("bench_check", {"N_train": N_TRAIN, "sigma": SIGMA, "n": N_PARAMS, "delta": DELTA,
                                       "cases": [list(c) for c in CASES], "runs": [list(r) for r in RUNS]},
                       {"cases": rows, "threads": 1}, mode=MODE, seed=SEED, wall_time=total)
    print(f"  -> {path}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
