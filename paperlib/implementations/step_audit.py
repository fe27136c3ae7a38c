"""Which normaliser any DP-SGD step applies, read off its own updates (issue 36; THEORY.md §10).

The Opacus code audit knows each release's source. This module asks nothing of the code but one step.

**The protocol.** A *step* is a callable ::

    step(gradients, *, sampling_rate, noise_multiplier, max_grad_norm, seed) -> update  or  (update, batch)

``gradients`` is a float64 array of shape ``(m, n)``: the per-example gradient of each of the ``m`` records of
the data set at the current parameters. The step does what its library does in one DP-SGD round: it samples a
batch (Poisson at ``sampling_rate``, or the library's own way), clips each sampled gradient to norm
``max_grad_norm``, sums them, adds Gaussian noise of standard deviation ``noise_multiplier * max_grad_norm`` per
coordinate, and divides by its normaliser. It returns that noisy gradient estimate, an array of shape ``(n,)``
(the vector the optimiser multiplies by the learning rate, with the sign of a gradient). Where the code exposes
the batch it used, it returns ``(update, batch)`` with ``batch`` the record indices; else ``batch`` is None or
left out. The same ``seed`` gives the same update.

Code that trains a model gets the gradients through a model whose per-example gradient is the record's row:
parameters ``w`` in R^n and per-example loss ``<w, x_i>`` with input ``x_i = gradients[i]`` (a linear layer
without bias whose output is the loss; :func:`linear_probe` builds one in torch).

**The probe.** :func:`classify_step` calls the step ``trials`` times on each of two neighbouring data sets,
``D`` with ``records`` records and ``D'`` with one more. Record ``i`` has the gradient ``2 C e_i``: orthogonal
rows of twice the clip bound, so clipping is exercised and each record's membership reads off its own
coordinate. The other ``noise_dims`` coordinates hold noise only. The noise multiplier is small (default
0.02), so that a membership is read without error; the scale of the noise still shows the normaliser.

**Per trial.** With update ``u``: the residual coordinates give ``nu_noise = sigma C sqrt(k) / ||u_rest||``
(``k`` = ``noise_dims``; relative error about ``1/sqrt(2k)``); record ``i``'s coordinate times ``nu_noise / C``
is 1 when it was sampled and 0 when not (error ``sigma``), which gives the batch ``B``. The members' coordinates
give ``nu_signal = C / mean``; it must agree with ``nu_noise``, or the noise was not ``sigma C`` before the
division. A step whose update is all zeros skipped the round (DPSUR on an empty draw); one that is not finite
divided by zero (Opacus 1.x with ``floor(N q) = 0``).

**The rule.** Per data set of ``m`` records, over its trials: ``|B|`` when ``nu = |B|`` in every trial with a
non-empty batch; a constant when ``nu`` is the same in every trial, named ``N q`` or ``floor(N q)`` when it
equals ``m q`` or ``floor(m q)``; a *separate draw* when ``nu`` is a whole number that differs from ``|B|`` in
some trial (DPSUR's second Poisson draw). Across the two data sets: ``N q`` on both is EASGM, ``floor(N q)`` on
both FEASGM, ``|B|`` ASGM, a separate draw DPSUR's rule, and one constant equal on both a public constant: the
SGM's output post-processed. Anything else fits no known rule: :class:`StepNotClassified` is raised with the
trials that showed it.

**The sampling.** Every accountant of the table assumes Poisson sampling. The batch sizes read on each data set
must be those of Poisson sampling at ``sampling_rate``: two exact tests (:func:`_sampling`) refuse a step whose
batches all have one size (shuffling, sampling without replacement) or whose rate is another, at
:data:`SAMPLING_ALPHA`. The defaults (``records`` = 7, ``sampling_rate`` = 0.5) make ``N q`` and
``floor(N q)`` differ on ``D`` (3.5 and 3) and the floors differ between the neighbours (3 and 4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from scipy import signal, stats

from paperlib.fdp.validation import (ParameterError, check_int, check_positive, check_probability,
                                     check_seed)
from paperlib.mechanisms.core import Mechanism
from paperlib.mechanisms.registry import mechanism_spec

__all__ = ["StepNotClassified", "StepAudit", "classify_step", "linear_probe", "RULE_MECHANISM", "SAMPLING_ALPHA",
           "REFUSAL_REASONS", "probe_options", "StepProtocolError"]

#: a p-value below this in either exact test of the batches' sizes refuses the step as not Poisson sampling at
#: its rate (two tests on each of two data sets: a Poisson step is refused with probability at most 4e-6)
SAMPLING_ALPHA = 1e-6

#: the rule a step's normaliser follows -> the mechanism of the table that runs it
RULE_MECHANISM = {"Nq": Mechanism.EASGM, "floor(Nq)": Mechanism.FEASGM, "|B|": Mechanism.ASGM,
                  "separate draw": Mechanism.DPSUR, "public constant": Mechanism.SGM}


#: why a step is refused, the ``reasons`` of a :class:`StepNotClassified`'s evidence
REFUSAL_REASONS = ("membership unread", "batch misreported", "noise scale", "too few batches", "fixed batch size",
                   "another rate", "no rule")


class StepProtocolError(ValueError):
    """The step does not follow the protocol of the module docstring (its signature, or what it returns)."""


class StepNotClassified(ValueError):
    """The step's normaliser fits no known rule, or its batches are not Poisson sampling's; ``evidence`` holds
    ``reasons`` (from :data:`REFUSAL_REASONS`), each data set's trials and the probe's settings."""

    def __init__(self, message: str, evidence: dict):
        super().__init__(message)
        self.evidence = evidence


@dataclass(frozen=True)
class StepAudit:
    """What :func:`classify_step` found (``to_json`` for a dict).

    ``rule``: ``"Nq"``, ``"floor(Nq)"``, ``"|B|"``, ``"separate draw"`` or ``"public constant"``;
    ``mechanism``: the mechanism of the table that runs it; ``constant``: the divisor of a public constant
    (else None); ``neighbours``: per data set (``"D"``, ``"D'"``) its records, the rule read off it, the
    normaliser and batch size of each trial, and the skipped and non-finite trials; ``probe``: the settings
    of the probe; ``sentence``: the finding in words."""

    rule: str
    mechanism: Mechanism
    constant: float | None
    neighbours: dict
    probe: dict
    sentence: str
    batch_exposed: bool = False

    def to_json(self) -> dict:
        return {"rule": self.rule, "mechanism": self.mechanism.value, "constant": self.constant,
                "neighbours": self.neighbours, "probe": self.probe, "sentence": self.sentence,
                "batch_exposed": self.batch_exposed}

    @classmethod
    def from_json(cls, j: dict) -> "StepAudit":
        """The audit :meth:`to_json` wrote (a subprocess's answer)."""
        return cls(**{**j, "mechanism": Mechanism(j["mechanism"])})


def _call(step: Callable, grads: np.ndarray, *, q: float, sigma: float, C: float, seed: int):
    try:
        out = step(grads, sampling_rate=q, noise_multiplier=sigma, max_grad_norm=C, seed=seed)
    except TypeError as exc:
        raise StepProtocolError(f"step: does not follow the step protocol, step(gradients, *, sampling_rate, "
                                f"noise_multiplier, max_grad_norm, seed) -> update: calling it raised TypeError: "
                                f"{exc}") from exc
    batch = None
    if isinstance(out, tuple):
        if len(out) != 2:
            raise StepProtocolError(f"step: must return update or (update, batch), got a tuple of {len(out)}")
        out, batch = out
    if hasattr(out, "detach"):  # a torch tensor
        out = out.detach().cpu().numpy()
    u = np.asarray(out, dtype=np.float64).reshape(-1)
    if u.shape != (grads.shape[1],):
        raise StepProtocolError(f"step: must return an update of {grads.shape[1]} values (one per parameter), got {u.size}")
    if batch is not None:
        batch = sorted(int(i) for i in np.asarray(batch).reshape(-1))
    return u, batch


def _trial(u: np.ndarray, batch, m: int, *, sigma: float, C: float) -> dict:
    """One update read: ``{"kind": "ok"|"skipped"|"nonfinite", "nu", "B", "nu_signal", "membership"}``."""
    if not np.all(np.isfinite(u)):
        return {"kind": "nonfinite"}
    if not np.any(u):
        return {"kind": "skipped"}
    rest = u[m + 1:]
    nu = sigma * C * math.sqrt(rest.size) / float(np.linalg.norm(rest))
    member = u[:m] * nu / C
    B = [i for i in range(m) if member[i] > 0.5]
    rec = {"kind": "ok", "nu": nu, "B": len(B), "membership": [round(float(x), 3) for x in member]}
    if B:
        rec["nu_signal"] = C / float(np.mean(u[B]))
    if batch is not None:
        rec["batch_agrees"] = batch == B
    return rec


def _size_law(m: int, q: float) -> np.ndarray:
    """``P(|B| = b | |B| >= 1)`` for ``b = 0..m`` under Poisson sampling of ``m`` records at rate ``q``."""
    pmf = stats.binom.pmf(np.arange(m + 1), m, q)
    pmf[0] = 0.0
    return pmf / pmf.sum()


def _min_trials(m: int, q: float) -> float:
    """The fewest non-empty batches with which one fixed size is refused at :data:`SAMPLING_ALPHA` (inf where
    Poisson sampling itself all but fixes the size: a rate near 0 or 1)."""
    top = float(_size_law(m, q).max())
    if top >= 1.0 - 1e-12:
        return math.inf
    return float(math.ceil(math.log(SAMPLING_ALPHA / m) / math.log(top)))


def _sampling(sizes: list[int], m: int, q: float) -> dict:
    """Two exact tests that the non-empty batches' sizes are those of Poisson sampling at rate ``q`` (THEORY.md
    §11.7): ``fixed_size_p``, the chance that one size is drawn as often as the commonest was (a union bound over
    the ``m`` sizes of a binomial tail: a fixed batch size, as shuffling or sampling without replacement gives,
    reads near zero); ``rate_p``, the two-sided chance of a total this far from its mean (the exact law of a sum
    of zero-truncated binomials, by convolution: a step that samples at another rate reads near zero). Batches
    that are empty, or whose round was skipped, are left out on both sides, so a step that skips empty batches
    is read as one that does not."""
    sizes = [b for b in sizes if b > 0]
    law = _size_law(m, q)
    out = {"batches": len(sizes), "needed": int(_min_trials(m, q))}
    if len(sizes) < out["needed"]:
        return out
    counts = np.bincount(sizes, minlength=m + 1)
    out["fixed_size_p"] = float(min(1.0, m * stats.binom.sf(counts.max() - 1, len(sizes), law.max())))
    # the law of the sum of the sizes: powers of ``law`` by squaring (fftconvolve: fast at 10,000 trials)
    total, acc, k = law, np.array([1.0]), len(sizes)
    while k:
        if k & 1:
            acc = np.clip(signal.fftconvolve(acc, total), 0.0, None)
        k >>= 1
        if k:
            total = np.clip(signal.fftconvolve(total, total), 0.0, None)
    acc /= acc.sum()
    s = sum(sizes)
    out["rate_p"] = float(min(1.0, 2 * min(acc[:s + 1].sum(), acc[s:].sum())))
    out["mean_size"] = round(float(s / len(sizes)), 3)
    out["expected_mean_size"] = round(float(law @ np.arange(m + 1)), 3)
    return out


def _fits(nu: float, value: float, tol: float) -> bool:
    return value > 0 and abs(nu - value) <= tol * value


def _rule_of(trials: list[dict], m: int, q: float, tol: float) -> tuple[set[str], float | None]:
    """The labels that fit one data set's trials, and the constant when ``nu`` is one."""
    ok = [t for t in trials if t["kind"] == "ok"]
    if not ok:
        return set(), None
    labels = set()
    nonempty = [t for t in ok if t["B"] > 0]
    if nonempty and all(_fits(t["nu"], t["B"], tol) for t in nonempty):
        labels.add("|B|")
    nus = np.array([t["nu"] for t in ok])
    c = float(np.median(nus))
    const = None
    if all(_fits(x, c, tol) for x in nus) and not ("|B|" in labels and len({t["B"] for t in nonempty}) > 1):
        const = c
        labels.add("constant")
        if _fits(c, m * q, tol):
            labels.add("Nq")
        if _fits(c, math.floor(m * q), tol):
            labels.add("floor(Nq)")
    if ("|B|" not in labels and const is None and all(abs(x - round(x)) <= tol * max(round(x), 1) for x in nus)
            and all(1 <= round(x) <= m for x in nus)):
        labels.add("separate draw")
    return labels, const


def probe_options(*, records: int = 7, sampling_rate: float = 0.5, noise_multiplier: float = 0.02,
                  max_grad_norm: float = 1.0, noise_dims: int = 4000, trials: int = 24, seed: int = 0) -> dict:
    """The probe's options of :func:`classify_step`, checked (its ranges) and returned as a dict: what a caller
    that runs the step elsewhere (a subprocess) checks before it starts.

    Raises
    ------
    ValueError
        An option out of its range, one line naming it.
    """
    records = _int_in("records", records, 2, 64)
    noise_dims = _int_in("noise_dims", noise_dims, 500, 100_000)
    trials = _int_in("trials", trials, 4, 10_000)
    seed = check_seed(seed)
    q = check_probability(sampling_rate, "sampling_rate", open_left=True, open_right=True)
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    if sigma > 0.1:
        raise ParameterError("noise_multiplier", "noise_multiplier must be in (0, 0.1] (small, so that memberships "
                                                 f"read), got {noise_multiplier!r}")
    C = check_positive(max_grad_norm, "max_grad_norm")
    need = max(_min_trials(records, q), _min_trials(records + 1, q))
    if need > 10_000:
        raise ParameterError("sampling_rate", f"sampling_rate {q:g} makes Poisson sampling's batch sizes too alike "
                                              "to tell from a fixed batch size in 10000 trials; take a rate nearer "
                                              "0.5 (the default)")
    if trials < need:
        raise ParameterError("trials", f"trials must be at least {need:.0f} at records {records} and sampling_rate "
                                       f"{q:g} (to tell Poisson sampling from a fixed batch size), got {trials}")
    return {"records": records, "sampling_rate": q, "noise_multiplier": sigma, "max_grad_norm": C,
            "noise_dims": noise_dims, "trials": trials, "seed": seed}


def classify_step(step: Callable, *, records: int = 7, sampling_rate: float = 0.5, noise_multiplier: float = 0.02,
                  max_grad_norm: float = 1.0, noise_dims: int = 4000, trials: int = 24, seed: int = 0) -> StepAudit:
    """Find the normaliser rule of ``step`` (module docstring's protocol) from its updates.

    Parameters
    ----------
    step : callable, the protocol of the module docstring
    records : int in [2, 64], the size of ``D`` (``D'`` has one more); sampling_rate : float in (0, 1)
    noise_multiplier : float in (0, 0.1]: small, so that each membership reads without error
    max_grad_norm : float > 0; noise_dims : int in [500, 100000], the noise-only coordinates
    trials : int in [4, 10000], calls per data set, and at least the number with which one fixed batch size is
        refused (13 at the defaults; the error names it); seed : int >= 0 (trial ``k`` of data set ``j`` uses
        seed ``seed * 1_000_003 + 2 k + j``)

    Returns
    -------
    :class:`StepAudit`.

    Raises
    ------
    ValueError
        A parameter out of its range (one line naming it), or a step that returns something else than the
        protocol's update.
    StepNotClassified
        The updates fit no known rule, or the batches are not Poisson sampling's at ``sampling_rate`` (a fixed
        batch size, or another rate: :data:`SAMPLING_ALPHA`), a ValueError; ``evidence`` holds each data set's
        trials and the two tests of its batches' sizes.
    """
    o = probe_options(records=records, sampling_rate=sampling_rate, noise_multiplier=noise_multiplier,
                      max_grad_norm=max_grad_norm, noise_dims=noise_dims, trials=trials, seed=seed)
    records, q, sigma, C = o["records"], o["sampling_rate"], o["noise_multiplier"], o["max_grad_norm"]
    noise_dims, trials, seed = o["noise_dims"], o["trials"], o["seed"]
    if not callable(step):
        raise ValueError(f"step must be callable (the protocol of paperlib.implementations.step_audit), got {step!r}")
    tol = 5.0 / math.sqrt(2 * noise_dims)  # five standard errors of one trial's nu_noise
    n = records + 1 + noise_dims
    sides, exposed = {}, False
    for j, (name, m) in enumerate((("D", records), ("D'", records + 1))):
        grads = np.zeros((m, n))
        grads[np.arange(m), np.arange(m)] = 2 * C
        rows = []
        for k in range(trials):
            u, batch = _call(step, grads, q=q, sigma=sigma, C=C, seed=seed * 1_000_003 + 2 * k + j)
            exposed = exposed or batch is not None
            rows.append(_trial(u, batch, m, sigma=sigma, C=C))
        labels, const = _rule_of(rows, m, q, tol)
        ok = [t for t in rows if t["kind"] == "ok"]
        side = {"records": m, "labels": sorted(labels), "constant": const,
                "nu": [round(t["nu"], 4) for t in ok], "batch_sizes": [t["B"] for t in ok],
                "skipped": sum(t["kind"] == "skipped" for t in rows),
                "nonfinite": sum(t["kind"] == "nonfinite" for t in rows)}
        unread = [i for i, t in enumerate(ok) if any(0.25 < abs(x) < 0.75 or abs(x) > 1.25 for x in t["membership"])]
        if unread:
            side["unread_trials"] = unread
        if any(t.get("batch_agrees") is False for t in ok):
            side["batch_disagrees"] = True
        side["sampling"] = _sampling(side["batch_sizes"], m, q)
        off = [t for t in ok if "nu_signal" in t and not _fits(t["nu_signal"], t["nu"], 2 * tol + 5 * sigma)]
        if off:
            side["noise_not_sigma_C"] = len(off)
        sides[name] = side
    probe = {"records": records, "sampling_rate": q, "noise_multiplier": sigma, "max_grad_norm": C,
             "noise_dims": noise_dims, "trials": trials, "seed": seed, "tolerance": round(tol, 6)}
    return _decide(sides, probe, exposed)


def _decide(sides: dict, probe: dict, exposed: bool) -> StepAudit:
    D, Dp = sides["D"], sides["D'"]
    problems = []  # (reason, sentence); the reasons are REFUSAL_REASONS
    for name, s in sides.items():
        if s.get("unread_trials"):
            problems.append(("membership unread", f"on {name} a record's coordinate was neither in nor out of the "
                                                  "batch (not clipped to max_grad_norm, or scaled otherwise)"))
        if s.get("batch_disagrees"):
            problems.append(("batch misreported", f"on {name} the batch the step reports is not the one its update "
                                                  "holds"))
        if s.get("noise_not_sigma_C"):
            problems.append(("noise scale", f"on {name} the noise was not noise_multiplier * max_grad_norm before "
                                            f"the division ({s['noise_not_sigma_C']} trials)"))
        problems += _sampling_problems(name, s, probe["sampling_rate"])
    a, b = set(D["labels"]), set(Dp["labels"])
    rule, const = None, None
    if not problems:
        if "|B|" in a and "|B|" in b:
            rule = "|B|"
        elif "Nq" in a and "Nq" in b:
            rule = "Nq"
        elif "floor(Nq)" in a and "floor(Nq)" in b:
            rule = "floor(Nq)"
        elif "constant" in a and "constant" in b and _fits(Dp["constant"], D["constant"], probe["tolerance"]):
            c = (D["constant"] + Dp["constant"]) / 2
            # a whole number within the tolerance is shown as one (a batch size fixed in a configuration)
            rule, const = "public constant", float(round(c)) if _fits(c, round(c), probe["tolerance"]) else round(c, 4)
        elif "separate draw" in a and "separate draw" in b:
            rule = "separate draw"
    if rule is None:
        if not problems:
            problems = [("no rule", f"the normalisers read on D ({_show(D)}) and on D' ({_show(Dp)}) follow none of "
                                    "N q, floor(N q), |B|, a separate draw or one public constant")]
        reasons = list(dict.fromkeys(r for r, _ in problems))
        raise StepNotClassified(f"step: not classified: {'; '.join(w for _, w in problems)}",
                                {"reasons": reasons, "neighbours": sides, "probe": probe})
    mech = RULE_MECHANISM[rule]
    what = {"Nq": "the expected batch size N q of each data set",
            "floor(Nq)": "the floor of the expected batch size, floor(N q), of each data set",
            "|B|": "the size of the batch it drew", "separate draw": "the size of a separate draw, not of its batch",
            "public constant": f"one constant, {const or 0:.3g}, on both neighbouring data sets"}[rule]
    verdict = ("so its update is the SGM's output post-processed, and the SGM claim applies"
               if rule == "public constant" else
               f"so it runs {mechanism_spec(mech).prose_name}, not the SGM that its privacy claim analyses")
    sentence = f"The step divides by {what}, {verdict}."
    return StepAudit(rule=rule, mechanism=mech, constant=const, neighbours=sides, probe=probe, sentence=sentence,
                     batch_exposed=exposed)


def _sampling_problems(name: str, side: dict, q: float) -> list[tuple[str, str]]:
    """Why the batches of one data set are not Poisson sampling's at rate ``q``, as ``(reason, sentence)`` pairs
    (none when they may be)."""
    t = side["sampling"]
    if "fixed_size_p" not in t:
        return [("too few batches", f"on {name} only {t['batches']} trials drew a batch and {t['needed']} are "
                                    "needed to tell Poisson sampling from a fixed batch size (raise trials)")]
    out = []
    if t["fixed_size_p"] < SAMPLING_ALPHA:
        sizes = [b for b in side["batch_sizes"] if b > 0]
        top = max(set(sizes), key=sizes.count)
        out.append(("fixed batch size",
                    f"on {name} {sizes.count(top)} of {len(sizes)} batches held {top} records, which Poisson "
                    f"sampling at rate {q:g} gives with a chance below {t['fixed_size_p']:.1e}: the step draws "
                    "batches of a fixed size (shuffling or sampling without replacement), which the SGM's "
                    "accountant does not cover"))
    if t["rate_p"] < SAMPLING_ALPHA:
        out.append(("another rate",
                    f"on {name} the batches held {t['mean_size']:g} records on average where Poisson sampling at "
                    f"rate {q:g} gives {t['expected_mean_size']:g} (chance {t['rate_p']:.1e}): the step does not "
                    "sample at sampling_rate"))
    return out


def _show(side: dict) -> str:
    nus = side["nu"]
    if not nus:
        return f"no finite update in {side['skipped'] + side['nonfinite']} trials"
    return f"{min(nus):.3g} to {max(nus):.3g} with batches of {min(side['batch_sizes'])} to {max(side['batch_sizes'])}"


def _int_in(name: str, v: Any, lo: int, hi: int) -> int:
    """:func:`~paperlib.fdp.validation.check_int` with an upper end too (the probe's sizes are bounded)."""
    v = check_int(v, name, lo)
    if v > hi:
        raise ParameterError(name, f"{name} must be an integer in [{lo}, {hi}], got {v!r}")
    return v


def linear_probe(gradients):
    """A torch model and data set whose per-example gradients are the rows of ``gradients`` ``(m, n)``: a linear
    layer ``n -> 1`` without bias, at zero, whose output is the per-example loss, and the inputs (a float32 tensor
    ``(m, n)``). Returns ``(model, inputs)``; the loss of a batch is ``model(inputs[batch]).sum()`` (or its mean
    where the library expects a mean, Opacus's ``loss_reduction='mean'``)."""
    import torch

    x = torch.as_tensor(np.asarray(gradients), dtype=torch.float32)
    model = torch.nn.Linear(x.shape[1], 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    return model, x
