"""Audit throughput: the batched paths vs the plain per-trial loop (``make bench``).

Measures rounds x n per second of the whole audit (mechanism rounds on the device,
projection, exact likelihood ratio of both mixtures, threshold choice, intervals) for

(a) the batched *projected* path (``path="projected"``): per round only the Poisson
    mask, ``r <= N+1`` normals and one chi-square variate are drawn — the exact
    sufficient statistics of the optimal distinguisher
    (:func:`paperlib.mechanisms.sampler.iter_projected`), so the cost does not grow with n;
(b) the batched *full-dimensional* path (``path="full"``): ``(chunk, n)`` noise draws,
    then the projection (:func:`paperlib.mechanisms.sampler.iter_samples`);
(c) the plain per-trial loop (``batched=False``): one full n-dimensional round, one
    projection and one likelihood ratio per Python iteration, records clipped and
    summed one by one,

on the same problem (EASGM, worst-case data, N = 4, q = 0.5, sigma = 10, C = 0.1), at
n = 10,000 (the target size) and at a small n = 100, all in one run. The ratios a/c
and b/c are throughput ratios. The PASS/FAIL line checks the 20x target at
n = 10,000 on the CPU for the path the audit takes by default for the optimal
distinguisher (``path="auto"`` -> projected). The time of the noise draw alone
(``randn`` of n float64 numbers per round) is measured too: loop time / noise time
bounds what the full-dimensional path (b) can reach (a few-fold on a CPU at
n = 10,000); the projected path does not draw that noise at all.
The result goes to ``results/bench_audit.json`` (:func:`paperlib.artifact.provenance.save_result`).

Environment: ``MODE`` (smoke|quick|full: number of rounds), ``DEVICE`` (cpu|cuda|auto,
default auto: the CPU is always measured, CUDA too when it is available and DEVICE is
cuda or auto; ``BENCH_CUDA=1`` adds the CUDA rows whatever DEVICE says, ``BENCH_CUDA=0``
drops them), ``SEED``. ``BENCH_THREADS`` sets torch's CPU threads
(default 1: the machines this runs on are shared, and one thread is then faster and
steadier).
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

from paperlib.audit import audit, worst_case_vectors
from paperlib.artifact.provenance import save_result

MODE = os.environ.get("MODE") or "quick"
DEVICE = os.environ.get("DEVICE") or "auto"
SEED = int(os.environ.get("SEED") or 0)
THREADS = int(os.environ.get("BENCH_THREADS") or 1)
BENCH_CUDA = os.environ.get("BENCH_CUDA", "")

# rounds in each timed audit (calibration + counted), per path: the projected path is
# timed on many more rounds so that its run is long enough to measure
SIZES = {
    "smoke": {"projected": 4_000, "full": 400, "loop": 40},
    "quick": {"projected": 200_000, "full": 4_000, "loop": 400},
    "full": {"projected": 2_000_000, "full": 20_000, "loop": 2_000},
}
if MODE not in SIZES:
    sys.exit(f"MODE must be one of {tuple(SIZES)}, got {MODE!r}")

PROBLEM = {"mechanism": "easgm", "N": 4, "q": 0.5, "sigma": 10.0, "C": 0.1}
TARGET = 20.0
N_VALUES = (10_000, 100)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_audit(n: int, rounds: int, device: str, path: str | None) -> dict:
    """One audit of ``rounds`` rounds; ``path`` None = the default, ``"loop"`` = ``batched=False``."""
    v = worst_case_vectors(PROBLEM["N"], n, PROBLEM["C"])
    half = rounds // 2
    kw = dict(trials=half, calibration_trials=rounds - half, seed=SEED, device=device)
    if path == "loop":
        kw["batched"] = False
    elif path is not None:
        kw["path"] = path
    _sync(device)
    t0 = time.perf_counter()
    r = audit(v, PROBLEM["mechanism"], PROBLEM["q"], PROBLEM["sigma"], PROBLEM["C"], **kw)
    _sync(device)
    wall = time.perf_counter() - t0
    return {"n": n, "rounds": rounds, "path": r.path, "batched": r.batched, "wall_s": wall,
            "rounds_per_s": rounds / wall, "elements_per_s": rounds * n / wall, "eps_lower": r.eps_lower}


def time_noise(n: int, rounds: int, device: str) -> float:
    """Seconds per round for the noise draw alone (``randn`` of n float64 numbers): the floor of the full path."""
    g = torch.Generator(device=device).manual_seed(SEED)
    chunk = max(1, (1 << 20) // n) if device == "cpu" else max(1, (1 << 26) // n)
    _sync(device)
    t0 = time.perf_counter()
    done = 0
    while done < rounds:
        m = min(chunk, rounds - done)
        torch.randn((m, n), generator=g, device=device, dtype=torch.float64)
        done += m
    _sync(device)
    return (time.perf_counter() - t0) / rounds


def _devices() -> list:
    devices = ["cpu"]
    want_cuda = BENCH_CUDA == "1" or (BENCH_CUDA != "0" and DEVICE in ("cuda", "auto"))
    if want_cuda and torch.cuda.is_available():
        devices.append("cuda")
    elif DEVICE == "cuda":
        print("DEVICE=cuda but torch.cuda.is_available() is False: measuring the CPU only", file=sys.stderr)
    return devices


def main() -> None:
    torch.set_num_threads(THREADS)
    devices = _devices()
    sz = SIZES[MODE]
    t_start = time.perf_counter()
    rows = []
    default_path = None
    for dev in devices:
        for n in N_VALUES:
            # warm-up (allocations, CUDA context) on a few rounds, not counted; it also tells the default path
            warm = time_audit(n, 20, dev, None)
            default_path = default_path or warm["path"]
            time_audit(n, 20, dev, "full")
            a = time_audit(n, sz["projected"], dev, "projected")
            b = time_audit(n, sz["full"], dev, "full")
            c = time_audit(n, sz["loop"], dev, "loop")
            ra = a["elements_per_s"] / c["elements_per_s"]
            rb = b["elements_per_s"] / c["elements_per_s"]
            noise_s = time_noise(n, sz["full"], dev)
            # the full path cannot beat its noise draw: its ratio is at most (loop time per round) / (noise time)
            bound = (1.0 / c["rounds_per_s"]) / noise_s
            rows.append({"device": dev, "n": n, "projected": a, "full": b, "loop": c,
                         "ratio_projected_vs_loop": ra, "ratio_full_vs_loop": rb,
                         "noise_s_per_round": noise_s, "full_ratio_bound_from_noise": bound})
            print(f"{dev:4s} n={n:6d}: (a) projected {a['elements_per_s']:.3e} elem/s ({a['rounds_per_s']:.3g} rounds/s)"
                  f" | (b) full {b['elements_per_s']:.3e} elem/s ({b['rounds_per_s']:.3g} rounds/s)"
                  f" | (c) loop {c['elements_per_s']:.3e} elem/s ({c['rounds_per_s']:.3g} rounds/s)"
                  f" | a/c {ra:.1f}x, b/c {rb:.1f}x (noise draw alone {noise_s * 1e6:.0f} us/round: b/c <= {bound:.1f}x)")
    cpu_big = next(r for r in rows if r["device"] == "cpu" and r["n"] == 10_000)
    key = "ratio_projected_vs_loop" if default_path == "projected" else "ratio_full_vs_loop"
    ratio = cpu_big[key]
    passed = bool(ratio >= TARGET)
    print(f"{'PASS' if passed else 'FAIL'}: default audit path ({default_path}) is {ratio:.1f}x the per-trial loop "
          f"on the CPU at n = 10,000 (target >= {TARGET:.0f}x)")
    params = {"bench": "audit", "mode": MODE, "devices": devices, "threads": THREADS, "problem": PROBLEM,
              "sizes": sz, "seed": SEED}
    data = {"rows": rows, "target_ratio": TARGET, "default_path": default_path,
            "ratio_cpu_n10000": ratio,
            "ratio_cpu_n10000_projected": cpu_big["ratio_projected_vs_loop"],
            "ratio_cpu_n10000_full": cpu_big["ratio_full_vs_loop"],
            "pass": passed}
    path = save_result("bench_audit", params, data, mode=MODE, seed=SEED, wall_time=time.perf_counter() - t_start)
    print(json.dumps({"ratio_cpu_n10000": ratio, "default_path": default_path, "pass": passed,
                      "written": str(path)}))


if __name__ == "__main__":
    main()
