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
from paperlib.practitioner.examples import MNIST
from paperlib.practitioner.report import CheckReport

__all__ = ["StepReport", "StepNotClassified", "audit_step", "load_step", "CLAIM_RELEASE", "CODE_PATHS", "ADVICE",
           "PATH_ADVICE",
           "BEYOND_SETTING", "LOADER_PATHS", "LOADER_SETTING", "classify_code_path", "beyond_opacus"]

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
        The step's updates fit no known rule, or its batches are not Poisson sampling's (a ValueError with the
        reasons and the trials in ``evidence``).
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
    """The callable named by ``target``: ``package.module:function`` or ``path/to/file.py:function``. A class
    (``step_examples:OpacusDDPStep``) is made with no arguments; call its ``close`` when done, if it has one.

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
    if isinstance(fn, type):  # a step that keeps state between calls (processes, a session): one instance
        try:
            fn = fn()
        except Exception as exc:  # noqa: BLE001 - said in one line, naming the target
            raise ValueError(f"target: {name}() cannot be made without arguments: {type(exc).__name__}: {exc}") from None
    return fn


# ------------------------------------------------------------------------------------- beyond Opacus
#: the code paths the book's "Beyond Opacus" chapter classifies: key -> (library, how the step runs, the rule its
#: updates should show, or the reason the probe refuses it). The version is read from the installed package (JAX
#: Privacy and dp-transformers: the pinned one).
CODE_PATHS = {
    "jax-privacy-constant": ("JAX Privacy", "normalize_by fixed in advance", "public constant"),
    "jax-privacy-expected": ("JAX Privacy", "normalize_by = the expected batch size, from the data", "Nq"),
    "opacus": ("Opacus", "make_private with Poisson sampling, one process", "floor(Nq)"),
    "opacus-ddp": ("Opacus", "DistributedDataParallel, two processes on gloo", "floor(Nq)"),
    "loop-batch": ("PyTorch loop", "written by hand, divides by the batch it drew", "|B|"),
    "loop-constant": ("PyTorch loop", "written by hand, divides by a configured batch size", "public constant"),
    "dp-transformers": ("dp-transformers", "its trainer, with its own sampler", "fixed batch size"),
    "dp-transformers-poisson": ("dp-transformers", "its trainer, with its Poisson sampler put in", "public constant"),
}
#: what a user of code with each rule does (one sentence each)
ADVICE = {
    "public constant": "Nothing to change: the divisor is fixed before the data are seen, so the claim applies.",
    "Nq": "Fix the divisor before seeing the data, for example the configured batch size, instead of computing "
          "it from the data set's size.",
    "floor(Nq)": "Divide by the configured batch size: call paperlib.practitioner.fix_normaliser(optimizer, "
                 "batch_size) after make_private. Pick a batch size that divides neither the data set's size nor "
                 "one less, so that neighbouring data sets get the same number of steps.",
    "|B|": "Divide by a batch size fixed in advance, not by the size of the batch drawn.",
    "separate draw": "Divide by a batch size fixed in advance, not by the size of a separate draw.",
    "fixed batch size": "Draw each batch by Poisson sampling at the rate the accountant is given, as Opacus's "
                        "DPDataLoader does; a claim computed for Poisson sampling is not proven for batches of a "
                        "fixed size.",
}
#: what a user of one code path does, where its own library offers the remedy (else :data:`ADVICE` of its rule)
PATH_ADVICE = {
    "dp-transformers": "Its divisor, the configured batch size, is already public. Return the library's own "
                       "PoissonAuthorSampler from the trainer's _get_train_sampler, as the next code path does.",
}
#: the one setting every code path's run is checked at: Opacus's MNIST example, one epoch
BEYOND_SETTING = {"dataset_size": MNIST["dataset_size"], "sample_rate": MNIST["sample_rate"], "steps": 250,
                  "noise_multiplier": 1.3, "n_params": MNIST["n_params"]}
#: the code paths whose sampling rate is ``1/len(data_loader)`` (Opacus 1.x's ``make_private``): their run is
#: checked as ``check --batch-size`` checks it, at the batch size and epochs that give :data:`BEYOND_SETTING`
#: (:data:`LOADER_SETTING`), so that a neighbouring data set's own loader, and its number of steps, count too
LOADER_PATHS = ("opacus", "opacus-ddp")
#: the batch size and epochs of :data:`LOADER_PATHS`' run: those that give :data:`BEYOND_SETTING`
LOADER_SETTING = {"batch_size": MNIST["batch_size"], "epochs": round(BEYOND_SETTING["steps"] * MNIST["sample_rate"])}


def _version(package: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def classify_code_path(key: str, *, trials: int = 24, seed: int = 0) -> tuple[StepAudit, str]:
    """Classify one of :data:`CODE_PATHS` from its updates; returns ``(audit, version)``.

    Raises
    ------
    ValueError
        An unknown ``key`` (one line naming the keys).
    StepNotClassified
        The probe refuses the code path (dp-transformers' fixed-size batches); ``evidence["version"]`` is set.
    RuntimeError
        The code cannot run here (a pinned library not installable; Opacus's DDP group not starting), with the
        reason.
    """
    from paperlib.implementations import dp_transformers_step as T
    from paperlib.implementations import jax_privacy_step as J
    from paperlib.implementations import step_examples as E

    if key not in CODE_PATHS:
        raise ValueError(f"key must be one of {', '.join(CODE_PATHS)}, got {key!r}")
    library = CODE_PATHS[key][0]  # the pinned libraries' versions, else the installed one's
    version = {"JAX Privacy": J.VERSION, "dp-transformers": T.VERSION}.get(library) or \
        _version("opacus" if library == "Opacus" else "torch")
    try:
        if key.startswith("jax-privacy"):
            nb = J.CONSTANT if key.endswith("constant") else "expected"
            return J.classify_jax_privacy(nb, trials=trials, seed=seed), version
        if key.startswith("dp-transformers"):
            sampler = "poisson" if key.endswith("poisson") else "own"
            return T.classify_dp_transformers(sampler=sampler, trials=trials, seed=seed), version
        if key == "opacus-ddp":
            with E.OpacusDDPStep(world_size=2) as step:
                return classify_step(step, trials=trials, seed=seed), version
        step = {"opacus": E.opacus_step, "loop-batch": E.loop_divide_by_batch,
                "loop-constant": E.loop_divide_by_constant}[key]
        return classify_step(step, trials=trials, seed=seed), version
    except StepNotClassified as exc:
        exc.evidence["version"] = version
        raise


def _report(reports: dict, mech: str, loader: bool = False) -> dict:
    """The run at :data:`BEYOND_SETTING` checked as ``mech`` (computed once per mechanism and way of sampling):
    at its sampling rate and steps, or (``loader``: :data:`LOADER_PATHS`) at the batch size and epochs that give
    them."""
    key = (mech, loader)
    if key not in reports:
        s = BEYOND_SETTING
        how = dict(LOADER_SETTING) if loader else {"sample_rate": s["sample_rate"], "steps": s["steps"]}
        reports[key] = check_run(CLAIM_RELEASE, s["dataset_size"], accountant="rdp", mechanism=mech,
                                 noise_multiplier=s["noise_multiplier"], n_params=s["n_params"], **how).to_json()
    return reports[key]


def _refused_row(row: dict, exc: StepNotClassified, sgm: dict, seconds: float) -> dict:
    """A code path the probe refuses: the first reason as its finding, the batch sizes it drew on each data set,
    the claim it makes (the SGM's) and no bracket (no mechanism of the table runs it)."""
    ev = exc.evidence
    reason = (ev.get("reasons") or ["no rule"])[0]
    sizes = {name: sorted(set(side["batch_sizes"])) for name, side in ev["neighbours"].items()}
    shown = " and ".join(f"{', '.join(map(str, v))} of {ev['neighbours'][k]['records']}" for k, v in sizes.items())
    sentence = (f"Its updates show batches of one size on both neighbouring data sets ({shown}), where Poisson "
                "sampling varies the size. Its accountant analyses Poisson sampling, so none of the mechanisms "
                "analysed here runs it, and its claim is not proven for this run."
                if reason == "fixed batch size" else f"Not classified: {exc}")
    row.update(rule=reason, mechanism=None, refused=str(exc), version=ev.get("version", row.get("version")),
               batch_sizes=sizes, sentence=sentence, claimed=sgm["claimed_epsilon"], claim_stands=None,
               neighbours=[{"name": n["name"], "verdict": "not covered", "forced": None, "certified": None}
                           for n in sgm["neighbours"]],
               advice=PATH_ADVICE.get(row["key"], ADVICE.get(reason, "")), seconds=seconds)
    return row


def beyond_opacus(*, trials: int = 24, seed: int = 0, keys=None) -> dict:
    """Every code path of :data:`CODE_PATHS` classified, and its run at :data:`BEYOND_SETTING` checked as the
    mechanism found (the report of :func:`audit_step`). Returns ``{"setting", "rows"}``; a row holds the key,
    library, version, how it runs, the rule expected and found, the mechanism, the constant, the claim, each
    neighbour's verdict with its bracket [forced, certified], the advice and the seconds; a code path the probe
    refuses has ``refused`` (the probe's message), its reason as ``rule``, its ``batch_sizes``, no mechanism and
    the verdict "not covered" without a bracket; one that cannot run here has ``error`` (its reason) and no
    finding."""
    import time

    rows, reports = [], {}
    for key in keys or CODE_PATHS:
        library, how, want = CODE_PATHS[key]
        row = {"key": key, "library": library, "how": how, "expected_rule": want}
        t0 = time.perf_counter()
        try:
            audit, row["version"] = classify_code_path(key, trials=trials, seed=seed)
        except StepNotClassified as exc:
            rows.append(_refused_row(row, exc, _report(reports, "sgm"), time.perf_counter() - t0))
            continue
        except (RuntimeError, OSError) as exc:
            row.update(error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__, seconds=time.perf_counter() - t0)
            rows.append(row)
            continue
        mech = audit.mechanism.value
        rep = _report(reports, mech, loader=key in LOADER_PATHS)
        row.update(rule=audit.rule, mechanism=mech, constant=audit.constant, sentence=audit.sentence,
                   claimed=rep["claimed_epsilon"], claim_stands=rep["claim_stands"],
                   neighbours=[{"name": n["name"], "verdict": n["verdict"],
                                "forced": n["epsilon_forced"], "certified": n["epsilon_certified"]}
                               for n in rep["neighbours"]],
                   advice=PATH_ADVICE.get(key, ADVICE[audit.rule]), seconds=time.perf_counter() - t0)
        rows.append(row)
    return {"setting": dict(BEYOND_SETTING), "claim": f"the SGM's, from Opacus {CLAIM_RELEASE}'s RDP accountant",
            "rows": rows}
