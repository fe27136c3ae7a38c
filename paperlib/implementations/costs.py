"""The full-mode time of the real-code audits, from measured per-step costs and the workers that run them.

One definition (:func:`full_mode_estimate`) for ``make device-check``
(``bench/device_check.py``), the README and the chapters: full mode makes every round of
every real-implementation audit a real step (:mod:`paperlib.implementations.real_audit`), so
its time is the number of steps of each (implementation, model) times the cost of one step,
spread over the workers (:mod:`paperlib.implementations.parallel`).

The model of the schedule (stated, so the estimate can be checked against a run):

* steps of an implementation that runs on the CPU (``"dpsur"`` always; every implementation
  without a GPU) are spread evenly over ``workers`` worker processes of one thread each:
  ``cpu_s = sum(steps * cost_cpu) / workers`` (the chunks are many and equal, see
  ``real_audit.STEP_CHUNK``, so the last wave is short);
* with ``gpus >= 1``, the other implementations' steps run on the GPUs, taken to do one step
  at a time each (concurrent kernels of several workers can only make it faster, so this is
  an upper bound on that part): ``gpu_s = sum(steps * cost_cuda) / gpus``;
* the two parts are added (no overlap assumed: an upper bound) together with
  ``overhead_s``, the once-per-run cost (worker start, release imports; measured by the
  caller).
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

__all__ = ["CPU_ONLY", "full_mode_estimate"]

#: implementations whose steps run on the CPU even when a GPU is there (runners.run_steps)
CPU_ONLY = ("dpsur",)


def _cost(table: Mapping, key, what: str) -> float:
    if key not in table:
        raise ValueError(f"per_step_costs: no {what} cost for {key[0]} on {key[1]}; measure it (make device-check)")
    c = float(table[key])
    if not (math.isfinite(c) and c >= 0):
        raise ValueError(f"per_step_costs: the {what} cost of {key[0]} on {key[1]} must be a finite number >= 0, "
                         f"not {table[key]!r}")
    return c


def full_mode_estimate(work: Iterable[Mapping], per_step_costs: Mapping, *, workers: int, gpus: int = 0,
                       gpu_step_costs: Mapping | None = None, overhead_s: float = 0.0) -> dict:
    """Seconds of full mode's real steps on ``workers`` CPU workers and ``gpus`` GPUs (model in the module docstring).

    Parameters
    ----------
    work : items with ``implementation``, ``model``, ``points`` (audits) and
        ``steps_per_point`` (real steps per audit: ``2 x trials`` in full mode).
    per_step_costs : ``{(implementation, model): seconds}``, one step on one CPU thread.
    workers : CPU worker processes (an integer >= 1).
    gpus : GPUs (an integer >= 0); with ``gpus >= 1``, ``gpu_step_costs`` gives
        ``{(implementation, model): seconds}`` of one step on one GPU for every
        implementation not in :data:`CPU_ONLY`.
    overhead_s : once-per-run seconds added (>= 0).

    Returns a dict: ``seconds`` (the estimate), ``cpu_seconds`` and ``gpu_seconds`` (the two
    parts after dividing by ``workers``/``gpus``), ``cpu_step_seconds`` and
    ``gpu_step_seconds`` (the same before dividing), ``steps``, ``workers``, ``gpus``,
    ``overhead_s`` and ``rows`` (per item: ``device``, ``steps``, ``step_s``, ``seconds`` of
    one worker or GPU). ValueError naming the parameter for bad input or a missing cost.
    """
    from paperlib.fdp.validation import check_int

    workers = check_int(workers, "workers", 1)
    gpus = check_int(gpus, "gpus", 0)
    if not (isinstance(overhead_s, (int, float)) and math.isfinite(overhead_s) and overhead_s >= 0):
        raise ValueError(f"overhead_s must be a finite number >= 0, not {overhead_s!r}")
    if gpus and gpu_step_costs is None:
        raise ValueError("gpu_step_costs: needed with gpus >= 1 (the CUDA cost of one step of each implementation)")
    rows, cpu, gpu, total_steps = [], 0.0, 0.0, 0
    for item in work:
        impl, model = item["implementation"], item["model"]
        steps = check_int(item["points"], "points", 0) * check_int(item["steps_per_point"], "steps_per_point", 0)
        on_gpu = gpus > 0 and impl not in CPU_ONLY
        c = _cost(gpu_step_costs, (impl, model), "GPU") if on_gpu else _cost(per_step_costs, (impl, model), "CPU")
        if on_gpu:
            gpu += steps * c
        else:
            cpu += steps * c
        total_steps += steps
        rows.append({"implementation": impl, "model": model, "device": "cuda" if on_gpu else "cpu", "steps": steps,
                     "step_s": c, "seconds": steps * c})
    cpu_s, gpu_s = cpu / workers, (gpu / gpus if gpus else 0.0)
    return {"seconds": cpu_s + gpu_s + float(overhead_s), "cpu_seconds": cpu_s, "gpu_seconds": gpu_s,
            "cpu_step_seconds": cpu, "gpu_step_seconds": gpu, "steps": total_steps, "workers": workers,
            "gpus": gpus, "overhead_s": float(overhead_s), "rows": rows}
