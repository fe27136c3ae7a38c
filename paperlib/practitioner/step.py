"""Check any DP-SGD code from one step of it: which normaliser it applies, read off its own updates, and what
its run really guarantees (issue 36).

:func:`audit_step` runs :func:`~paperlib.implementations.step_audit.classify_step` on the step (the protocol in
that module's docstring) and, given the run's settings, the report :func:`~paperlib.practitioner.check.check_run`
gives for the mechanism found: the SGM claim as an RDP accountant computes it at the run's sampling rate
(Opacus 1.6.0's, the claim a library makes when it analyses its step as the SGM), the certified and forced ε of
each neighbour, and the verdict. The command line is ``python -m paperlib audit-step module:function``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from paperlib.implementations.step_audit import StepAudit, StepNotClassified, classify_step
from paperlib.practitioner.check import check_run
from paperlib.practitioner.report import CheckReport

__all__ = ["StepReport", "StepNotClassified", "audit_step", "load_step", "CLAIM_RELEASE"]

#: whose accountant states the claim of a step analysed as the SGM: Opacus 1.6.0's RDP accountant
CLAIM_RELEASE = "1.6.0"

_RUN_KEYS = ("dataset_size", "sample_rate", "steps", "noise_multiplier", "n_params")


@dataclass(frozen=True)
class StepReport:
    """The step's :class:`~paperlib.implementations.step_audit.StepAudit` and, when the run's settings were
    given, the :class:`~paperlib.practitioner.report.CheckReport` of the run with the mechanism found (else
    None)."""

    audit: StepAudit
    check: CheckReport | None

    def to_json(self) -> dict:
        return {"audit": self.audit.to_json(), "check": None if self.check is None else self.check.to_json(),
                "claim": f"SGM claim from Opacus {CLAIM_RELEASE}'s RDP accountant at the run's sampling rate"}


def audit_step(step: Callable, *, dataset_size: int | None = None, sample_rate: float | None = None,
               steps: int | None = None, noise_multiplier: float | None = None, n_params: int | None = None,
               delta: float = 1e-5, records: int = 7, sampling_rate: float = 0.5, trials: int = 24, seed: int = 0,
               pld_options: dict | None = None) -> StepReport:
    """Classify ``step`` and report on the run it trains.

    Parameters
    ----------
    step : callable, the protocol of :mod:`paperlib.implementations.step_audit`
    dataset_size, sample_rate, steps, noise_multiplier, n_params : the run's settings (all five, or none for the
        classification alone): records >= 2, Poisson rate in (0, 1], optimiser steps >= 1, noise multiplier > 0,
        trainable parameters >= 1
    delta : float in (0, 1/dataset_size]
    records, sampling_rate, trials, seed : the probe's (:func:`~paperlib.implementations.step_audit.classify_step`)

    Returns
    -------
    :class:`StepReport`.

    Raises
    ------
    StepNotClassified
        The step's updates fit no known rule (a ValueError with the trials in ``evidence``).
    ValueError
        A setting out of its range, or some of the run's settings given without the others (one line naming
        them).
    """
    given = {k: v for k, v in zip(_RUN_KEYS, (dataset_size, sample_rate, steps, noise_multiplier, n_params))
             if v is not None}
    if given and len(given) < len(_RUN_KEYS):
        missing = ", ".join(k for k in _RUN_KEYS if k not in given)
        raise ValueError(f"{missing}: give all of the run's settings ({', '.join(_RUN_KEYS)}) or none of them")
    audit = classify_step(step, records=records, sampling_rate=sampling_rate, trials=trials, seed=seed)
    report = None
    if given:
        report = check_run(CLAIM_RELEASE, dataset_size, sample_rate=sample_rate, steps=steps,
                           noise_multiplier=noise_multiplier, n_params=n_params, delta=delta, accountant="rdp",
                           mechanism=audit.mechanism.value, pld_options=pld_options)
    return StepReport(audit=audit, check=report)


def load_step(target: str) -> Callable:
    """The callable named by ``target``: ``package.module:function`` or ``path/to/file.py:function``.

    Raises
    ------
    ValueError
        One line naming ``target``: not of the form ``module:function``, a module that cannot be imported, or a
        name that is not a callable of it.
    """
    if not isinstance(target, str) or target.count(":") != 1 or not all(target.split(":")):
        raise ValueError(f"target must be module:function or path/to/file.py:function, got {target!r}")
    where, name = target.split(":")
    try:
        if where.endswith(".py"):
            path = Path(where)
            if not path.is_file():
                raise ValueError(f"target: no file {where}")
            spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules.setdefault(path.stem, module)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except ValueError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure to import is the target's, said in one line
        raise ValueError(f"target: cannot import {where}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"target: {where} has no callable {name}")
    return fn
