"""Audit throughput: batched rounds vs the plain per-trial loop (``make bench``).

Measures rounds x n per second of the whole audit path (mechanism round on the
device, projection, exact likelihood ratio of both mixtures) for

* the batched path (:func:`paperlib.audit.audit` with its default chunks), and
* the plain per-trial loop (``batched=False``: one round, one projection and one
  likelihood ratio per Python iteration, records clipped and summed one by one),

on the same problem (EASGM, worst-case data, N = 4, q = 0.5, sigma = 10, C = 0.1), at
n = 10,000 (the target size) and at a small n = 100, where per-call overhead rather
than the noise draw dominates. Both are timed in the same run; the ratio is
batched / loop throughput. The time of the noise draw alone (``randn`` of n float64
numbers per round, which every path must pay) is measured too: loop time / noise time
bounds the ratio any batching can reach. On a CPU at n = 10,000 that bound is a few-fold
(torch draws float64 normals serially at tens of ns each), so the 20x target is met
at small n and on a GPU, not at n = 10,000 on a CPU. The result goes to
``results/bench_audit.json`` (:func:`paperlib.provenance.save_result`).

Environment: ``MODE`` (smoke|quick|full: number of rounds), ``DEVICE`` (cpu|cuda; the
CPU is always measured, CUDA too when it is available and DEVICE=cuda or auto),
``SEED``. ``BENCH_THREADS`` sets torch's CPU threads (default 1: the machines this runs
on are shared, and one thread is then faster and steadier).
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

from paperlib.audit import audit, worst_case_vectors
from paperlib.provenance import save_result

MODE = os.environ.get("MODE") or "quick"
DEVICE = os.environ.get("DEVICE") or "cpu"
SEED = int(os.environ.get("SEED") or 0)
THREADS = int(os.environ.get("BENCH_THREADS") or 1)

# rounds in each timed audit (calibration + counted); the loop is timed on fewer rounds
SIZES = {
    "smoke": {"batched": 400, "loop": 40},
    "quick": {"batched": 4000, "loop": 400},
    "full": {"batched": 20000, "loop": 2000},
}
if MODE not in SIZES:
    sys.exit(f"MODE must be one of {tuple(SIZES)}, got {MODE!r}")

PROBLEM = {"mechanism": "easgm", "N": 4, "q": 0.5, "sigma": 10.0, "C": 0.1}


def time_audit(n: int, rounds: int, device: str, batched: bool) -> dict:
    v = worst_case_vectors(PROBLEM["N"], n, PROBLEM["C"])
    half = rounds // 2
    kw = dict(trials=half, calibration_trials=rounds - half, seed=SEED, device=device, batched=batched)
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    r = audit(v, PROBLEM["mechanism"], PROBLEM["q"], PROBLEM["sigma"], PROBLEM["C"], **kw)
    if device == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    return {"n": n, "rounds": rounds, "batched": batched, "wall_s": wall,
            "rounds_per_s": rounds / wall, "elements_per_s": rounds * n / wall, "eps_lower": r.eps_lower}


def time_noise(n: int, rounds: int, device: str) -> float:
    """Seconds per round for the noise draw alone (``randn`` of n float64 numbers): the floor of any path."""
    g = torch.Generator(device=device).manual_seed(SEED)
    chunk = max(1, (1 << 20) // n) if device == "cpu" else max(1, (1 << 26) // n)
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    done = 0
    while done < rounds:
        m = min(chunk, rounds - done)
        torch.randn((m, n), generator=g, device=device, dtype=torch.float64)
        done += m
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / rounds


def main() -> None:
    torch.set_num_threads(THREADS)
    devices = ["cpu"]
    if DEVICE in ("cuda", "auto") and torch.cuda.is_available():
        devices.append("cuda")
    elif DEVICE == "cuda":
        print("DEVICE=cuda but torch.cuda.is_available() is False: measuring the CPU only", file=sys.stderr)
    sz = SIZES[MODE]
    t_start = time.perf_counter()
    rows = []
    for dev in devices:
        for n in (10_000, 100):
            # warm-up (allocations, CUDA context) on a few rounds, not counted
            time_audit(n, 20, dev, True)
            b = time_audit(n, sz["batched"], dev, True)
            lp = time_audit(n, sz["loop"], dev, False)
            ratio = b["elements_per_s"] / lp["elements_per_s"]
            noise_s = time_noise(n, sz["batched"], dev)
            # no path can beat the noise draw: the ratio is at most (loop time per round) / (noise time per round)
            bound = (1.0 / lp["rounds_per_s"]) / noise_s
            rows.append({"device": dev, "n": n, "batched": b, "loop": lp, "ratio": ratio,
                         "noise_s_per_round": noise_s, "ratio_bound_from_noise": bound})
            print(f"{dev:4s} n={n:6d}: batched {b['elements_per_s']:.3e} elem/s ({b['rounds_per_s']:.0f} rounds/s), "
                  f"loop {lp['elements_per_s']:.3e} elem/s ({lp['rounds_per_s']:.0f} rounds/s), ratio {ratio:.1f}x "
                  f"(noise draw alone {noise_s * 1e6:.0f} us/round, so at most {bound:.1f}x)")
    params = {"bench": "audit", "mode": MODE, "devices": devices, "threads": THREADS, "problem": PROBLEM,
              "sizes": sz, "seed": SEED}
    data = {"rows": rows, "target_ratio": 20.0,
            "ratio_cpu_n10000": next(r["ratio"] for r in rows if r["device"] == "cpu" and r["n"] == 10_000)}
    path = save_result("bench_audit", params, data, mode=MODE, seed=SEED, wall_time=time.perf_counter() - t_start)
    print(json.dumps({"ratio_cpu_n10000": data["ratio_cpu_n10000"], "written": str(path)}))


if __name__ == "__main__":
    main()
