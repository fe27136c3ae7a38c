"""Benchmark: ``python -m paperlib check`` for an MNIST-sized run (issue 12; issue 33, "Build" 7).

60,000 records, sigma = 1.1, 10^6 parameters, delta = 1e-5, under every family a release runs: Opacus 0.13
(ASGM), 0.15 (EASGM: the chain certificate, THEORY.md §11.3b), 1.6 at batch 256 (FEASGM whose floors agree:
SGM), 1.6 at batch 250 (FEASGM, removal floors differ: 249/250; the added dataset runs another number of
steps), 1.6 at batch 240 (60,000 a multiple of the batch: the added neighbour's updates are counted,
THEORY.md §11.3c), 1.6 with loss_reduction='sum' (SGM) and DPSUR's own code. Each: the release's default
accountant for the claim (RDP before 1.3, PRV from 1.3), both neighbours, both relations (add/remove and
replace-one, §11.3d), certified and forced epsilon. Target: every case under 10 s of CPU at 10 and at 100
epochs (up to 25,000 steps) on one thread (:func:`paperlib.practitioner.check.check_run`; CPU seconds of this
process and wall time both reported; the target is on CPU seconds, which a shared machine does not inflate).
For each it prints the times, the claimed epsilon, and per neighbour the verdict, the certified epsilon with
its accountant error (PLD bracket width) and the forced epsilon.

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
         ("1.6.0", 240, "mean"), ("1.6.0", 256, "sum"), ("dpsur", 256, "mean"))
RUNS = ((10, 10.0), (100, 10.0))  # (epochs, target CPU seconds)


def main() -> int:
    os.environ.setdefault(RESULTS_ENV, str(Path(__file__).resolve().parent.parent / "results"))
    rows, ok_all, total = [], True, 0.0
    for epochs, target in RUNS:
        for version, batch, red in CASES:
            w0, c0 = time.perf_counter(), time.process_time()
            code = dict(implementation="dpsur") if version == "dpsur" else dict(opacus_version=version)
            r = check_run(dataset_size=N_TRAIN, batch_size=batch, epochs=epochs, noise_multiplier=SIGMA,
                          n_params=N_PARAMS, loss_reduction=red, delta=DELTA, **code).to_json()  # as --json gives it
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            total += wall
            ok = cpu < target
            ok_all &= ok
            row = {"opacus_version": version, "batch_size": batch, "loss_reduction": red, "epochs": epochs,
                   "steps": r["steps"], "mechanism": r["mechanism"], "cpu_seconds": cpu, "wall_seconds": wall,
                   "target_seconds": target, "pass": bool(ok), "claim": r["claim"],
                   "epsilon_certified": r["epsilon_certified"], "epsilon_forced": r["epsilon_forced"],
                   "replace_one": r.get("replace_one", {}).get("epsilon")}
            print(f"  {version} batch {batch} {red:4s} -> {r['mechanism'].upper():6s} {epochs:3d} epochs "
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
