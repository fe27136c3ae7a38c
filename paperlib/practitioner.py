"""What the paper's analysis says about an Opacus training run (for practitioners).

Which mechanism an Opacus release runs (paper Table 2, THEORY.md section 10), how a
given Opacus derives its sampling rate and normaliser, and the verdict for both
neighbouring pairs of a training set (removal and addition): does the SGM claim stand,
and if not, what the corrected T-round upper bound of the guarantee says
(:mod:`paperlib.fdp.composition`).

The full check of a run — claimed, certified and forced epsilon per neighbour, verdict and
remedies — is :func:`paperlib.check.check_run` (``python -m paperlib check``,
:func:`paperlib.check.check_opacus`, the book's practitioner page), built on the release rules
here.
"""

from __future__ import annotations

import re
import warnings

from paperlib.fdp.composition import Chi2Pair
from paperlib.mechanisms.core import Mechanism, feasgm_floors
from paperlib.mechanisms.multiround import asgm_rounds_upper_bound, sgm_claim_epsilon
from paperlib.fdp.validation import check_delta, check_int, check_positive, check_rate

__all__ = ["OPACUS_TABLE2", "PRV_MAX_BYTES", "opacus_mechanism", "opacus1_rates", "opacus_sampling",
           "prv_grid_bytes", "practitioner_report"]

#: Largest memory the claimed epsilon of Opacus's PRV accountant may ask for; above it
#: :func:`practitioner_report` refuses (tiny noise multipliers make its grid astronomically
#: fine: sigma = 0.001 over one MNIST epoch asks for about 1.3e12 points).
PRV_MAX_BYTES = 4 * 2**30
#: bytes per point of the PRV grid, measured (peak RSS of Opacus 1.6's get_epsilon, about
#: 140 bytes per point at 1.3e7 points), rounded up
_PRV_BYTES_PER_POINT = 160


def prv_grid_bytes(q: float, sigma: float, rounds: int, delta: float, eps_error: float = 0.01) -> tuple[int, int]:
    """``(points, bytes)`` of the grid Opacus's ``PRVAccountant.get_epsilon`` would build.

    The domain is Opacus's own (``PRVAccountant._get_domain``, Gopi et al. 2021: its
    RDP-based truncation ``L`` and mesh ``eps_error / sqrt(T log(12/delta_error) / 2)``
    with ``delta_error = delta / 1000``, Opacus's defaults); computing it costs
    milliseconds and allocates nothing. ``bytes`` is ``points`` times the peak memory per
    point measured here (:data:`_PRV_BYTES_PER_POINT`).
    """
    from opacus.accountants import PRVAccountant
    from opacus.accountants.analysis.prv import PoissonSubsampledGaussianPRV

    with warnings.catch_warnings():  # its domain size is found with the RDP code (order warnings)
        warnings.simplefilter("ignore")
        dom = PRVAccountant()._get_domain(prvs=[PoissonSubsampledGaussianPRV(q, sigma)], num_self_compositions=[rounds],
                                          eps_error=eps_error, delta_error=delta / 1000)
    points = int(dom.size)
    return points, points * _PRV_BYTES_PER_POINT


#: Table 2 of the paper (THEORY.md §10): normalisation under Poisson sampling and
#: ``loss_reduction='mean'``, by release range (inclusive, as (major, minor)).
OPACUS_TABLE2 = (
    ((0, 9), (0, 11), "unsupported", "A (normalises by |B|) but no built-in Poisson sampling"),
    ((0, 12), (0, 13), "asgm", "A: divides by the realised batch size |B|"),
    ((0, 14), (0, 15), "easgm", "EA: divides by sample_rate * sample_size (N q)"),
    ((1, 0), (1, 99), "feasgm", "FEA: divides by int(len(dataset) * sample_rate) (floor(N q))"),
)


def _parse_version(version: str) -> tuple[int, int, int]:
    if not isinstance(version, str):
        raise ValueError(f"opacus_version must be a string like '1.6.0', got {version!r}")
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.+\-].*)?", version.strip())
    if not m:
        raise ValueError(f"opacus_version must look like '1.6.0' or 'v0.13.0', got {version!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def opacus_mechanism(version: str, loss_reduction: str = "mean") -> tuple[str, str]:
    """Which mechanism an Opacus release runs under Poisson sampling (paper Table 2).

    Returns ``(mechanism, note)`` with mechanism in {'asgm', 'easgm', 'feasgm', 'sgm',
    'unsupported'}. ``loss_reduction='sum'`` leaves the noisy sum unnormalised: SGM.
    Raises ValueError for an unparseable version, a release outside 0.9-1.x, or a bad
    ``loss_reduction``.
    """
    if loss_reduction not in ("mean", "sum"):
        raise ValueError(f"loss_reduction must be 'mean' or 'sum', got {loss_reduction!r}")
    major, minor, _ = _parse_version(version)
    for lo, hi, mech, note in OPACUS_TABLE2:
        if lo <= (major, minor) <= hi:
            if loss_reduction == "sum" and mech != "unsupported":
                return "sgm", "loss_reduction='sum': the noisy sum is not normalised (SGM)"
            return mech, note
    raise ValueError(f"opacus_version {version!r} is outside the releases of Table 2 (0.9.0 to 1.x)")


def opacus1_rates(size: int, batch_size: int, drop_last: bool) -> tuple[float, float, int]:
    """Opacus 1.6.0 ``make_private(poisson_sampling=True)`` on a dataset of ``size`` records.

    Returns ``(q_sample, q_account, steps)``: ``DPDataLoader.from_data_loader`` samples
    with ``q_sample = 1/len(data_loader)`` (``len = ceil(size/batch)``, ``floor`` with
    ``drop_last``); its sampler runs ``steps = int(1/q_sample)`` batches per epoch (one
    fewer than ``len`` for some lengths, e.g. 93, in floating point); ``make_private``
    then charges the accountant ``q_account = 1/steps`` and divides by
    ``int(size * q_account)``. Read from the installed Opacus 1.6.0 source
    (privacy_engine.py, data_loader.py, utils/uniform_sampler.py) and checked against a
    real ``make_private`` call in the tests.
    """
    size = check_int(size, "size", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    n_batches = size // batch_size if drop_last else -(-size // batch_size)
    if n_batches < 1:
        raise ValueError(f"batch_size = {batch_size} exceeds the dataset size {size} with drop_last=True")
    q_sample = 1 / n_batches
    steps = int(1 / q_sample)
    return q_sample, 1 / steps, steps


def opacus_sampling(N_train: int, batch_size: int, opacus_version: str = "1.6.0", *, sample_rate: float | None = None,
                    drop_last: bool = False) -> dict:
    """Sampling rate, steps per epoch and normaliser of a run, as the given Opacus computes them.

    With ``sample_rate=None``: v1.x follows :func:`opacus1_rates`; v0.x releases took
    ``sample_rate`` from the user, assumed here to be ``batch_size / N_train``. An explicit
    ``sample_rate`` overrides the rule (then sampling and accounting use the same rate and
    steps per epoch are ``int(1 / sample_rate)``, as Opacus's sampler counts them).

    Returns ``{'sample_rate' (Poisson rate of the loader), 'accountant_sample_rate',
    'steps_per_epoch', 'expected_batch_size' (the FEASGM normaliser on D_train), 'rule'}``.
    """
    N_train = check_int(N_train, "N_train", 2)
    batch_size = check_int(batch_size, "batch_size", 1)
    major, _, _ = _parse_version(opacus_version)
    if sample_rate is not None:
        q = q_acc = check_rate(sample_rate, "sample_rate")
        rule = "given sample_rate"
        steps = int(1 / q)
    elif major >= 1:
        q, q_acc, steps = opacus1_rates(N_train, batch_size, drop_last)
        rule = ("Opacus 1.x: sample_rate = 1/len(data_loader), len = " + ("floor" if drop_last else "ceil")
                + "(N/batch); accountant and normaliser use 1/int(1/sample_rate)")
    else:
        q = q_acc = batch_size / N_train
        rule = "Opacus 0.x: user-supplied sample_rate, assumed batch_size/N_train"
        steps = int(1 / q)
    return {"sample_rate": q, "accountant_sample_rate": q_acc, "steps_per_epoch": max(steps, 1),
            "expected_batch_size": int(Mechanism.FEASGM.fixed_normaliser(N_train, q_acc)), "rule": rule}


_WITNESS = ("when every clipped per-example gradient is zero, each released noisy gradient is N(0, (sigma C)^2 I_n) "
            "divided by {a} on the smaller dataset and by {b} on the larger, in every round; that pair of T n "
            "coordinates lies below the bound, so the mechanism itself does not meet any (eps, delta) with eps below "
            "corrected_epsilon for these dataset sizes")


def practitioner_report(N_train: int, batch_size: int, epochs: int, noise_multiplier: float, n_params: int,
                        opacus_version: str = "1.6.0", *, delta: float = 1e-5, sample_rate: float | None = None,
                        loss_reduction: str = "mean", drop_last: bool = False, steps: int | None = None,
                        claim_accountants=("rdp", "prv"), pld_options: dict | None = None) -> dict:
    """What the paper's analysis says about one Opacus training run.

    Parameters
    ----------
    N_train : int >= 2, training-set size; batch_size : int >= 1; epochs : int >= 1
    noise_multiplier : float > 0; n_params : int >= 1 (trainable parameters = output dimension n)
    opacus_version : str, e.g. '1.6.0' (Table 2 decides the mechanism)
    delta : float in (0, 1)
    sample_rate : float or None — None: as that Opacus derives it (:func:`opacus_sampling`)
    loss_reduction : 'mean' (default in Opacus) or 'sum' (SGM)
    drop_last : bool, the data loader's flag (Opacus 1.x rule)
    steps : int or None — total optimiser steps; None: ``epochs * steps_per_epoch``
    claim_accountants : accountants for the claimed epsilon (:func:`sgm_claim_epsilon`);
        ``'prv'`` is refused (ValueError naming ``noise_multiplier``) when its grid would need
        more than :data:`PRV_MAX_BYTES` (:func:`prv_grid_bytes`)

    Returns
    -------
    dict with ``inputs``; ``mechanism`` ('asgm', 'easgm', 'feasgm', 'sgm' or
    'unsupported') and ``mechanism_note``; ``sample_rate`` (the loader's Poisson rate),
    ``accountant_sample_rate`` (the rate Opacus charges; equal except for a rounding
    quirk of Opacus 1.x), ``sample_rate_rule``; ``rounds`` (T); ``expected_batch_size``
    (``int(N q)``) and ``normaliser`` (what the mechanism divides by on ``D_train``);
    ``claimed_epsilon`` ({accountant: eps}), ``claimed_epsilon_max``,
    ``default_accountant``; ``neighbours``: a list of two dicts, ``removal``
    (``D_train`` minus one record vs ``D_train``) and ``addition`` (``D_train`` vs
    ``D_train`` plus one record), each with ``sizes``, ``normalisers`` and
    ``floors_agree`` (FEASGM only), ``sgm_claim_supported`` (bool),
    ``corrected_epsilon`` (epsilon of the T-round upper bound of the guarantee, a value
    every valid guarantee's epsilon is at least; None when the claim stands),
    ``corrected_bound`` (which bound), ``claim_refuted`` (corrected epsilon above every
    claimed epsilon), ``witness`` (FEASGM/EASGM: why the mechanism itself, not only its
    analysis, misses the claim then) and ``verdict`` (one sentence); plus ``summary``
    (one sentence) and ``notes`` (list of strings).

    Decision rule (THEORY.md §§6, 7, 10; paper Appendix A.4, B.1): SGM and FEASGM with
    equal normalisers on both sides are post-processing of SGM — the claim stands.
    Otherwise the SGM analysis does not apply (claim not supported) and the corrected
    T-round upper bound is computed: exact chi-square for EASGM (``s = N/(N+1)``) and
    FEASGM (``s = K/(K+1)``), numerical composition of Eq. 14 for ASGM, with ``N`` the
    smaller dataset of the pair. If its epsilon exceeds the claimed one, no valid
    analysis can certify the claim for that pair.
    """
    N_train = check_int(N_train, "N_train", 2)
    batch_size = check_int(batch_size, "batch_size", 1)
    epochs = check_int(epochs, "epochs", 1)
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    n = check_int(n_params, "n_params", 1)
    delta = check_delta(delta)
    mech, mech_note = opacus_mechanism(opacus_version, loss_reduction)
    major, _, _ = _parse_version(opacus_version)
    samp = opacus_sampling(N_train, batch_size, opacus_version, sample_rate=sample_rate, drop_last=drop_last)
    q = samp["accountant_sample_rate"]
    T = check_int(steps, "steps", 1) if steps is not None else epochs * samp["steps_per_epoch"]
    pld_options = dict(pld_options or {})
    notes = []
    report = {
        "inputs": {"N_train": N_train, "batch_size": batch_size, "epochs": epochs, "noise_multiplier": sigma,
                   "n_params": n, "opacus_version": opacus_version, "delta": delta, "sample_rate": sample_rate,
                   "loss_reduction": loss_reduction, "drop_last": drop_last, "steps": steps},
        "mechanism": mech,
        "mechanism_note": mech_note,
        "sample_rate": samp["sample_rate"],
        "accountant_sample_rate": q,
        "sample_rate_rule": samp["rule"],
        "rounds": T,
        "expected_batch_size": samp["expected_batch_size"],
        "normaliser": {"feasgm": samp["expected_batch_size"], "easgm": N_train * q,
                       "asgm": "realised batch size |B|", "sgm": "none (sum)"}.get(mech, None),
        "delta": delta,
    }
    if mech == "unsupported":
        report.update(claimed_epsilon={}, neighbours=[], notes=["no built-in Poisson sampling in this release"],
                      summary=f"Opacus {opacus_version} has no built-in Poisson sampling: outside the paper's analysis.")
        return report
    if "prv" in claim_accountants:
        points, nbytes = prv_grid_bytes(q, sigma, T, delta)
        if nbytes > PRV_MAX_BYTES:
            raise ValueError(
                f"noise_multiplier = {sigma:g} is too small for Opacus's PRV accountant here: its grid would hold "
                f"{points:.3g} points (about {nbytes / 2**30:,.0f} GiB, limit {PRV_MAX_BYTES / 2**30:g} GiB) for "
                f"q = {q:.4g}, {T} rounds; pass claim_accountants=('rdp',)")
    claimed = {a: sgm_claim_epsilon(q, sigma, rounds=T, delta=delta, accountant=a) for a in claim_accountants}
    report["claimed_epsilon"] = claimed
    report["claimed_epsilon_max"] = max(claimed.values()) if claimed else None
    # PrivacyEngine(accountant="prv") is the default from 1.3.0 (read from v1.0.0-v1.6.0); 0.x have RDP only
    report["default_accountant"] = "prv" if _parse_version(opacus_version)[:2] >= (1, 3) else "rdp"
    claim_max = report["claimed_epsilon_max"]
    neighbours = []
    for name, small in (("removal", N_train - 1), ("addition", N_train)):
        entry = {"name": name, "sizes": [small, small + 1],
                 "description": ("D_train minus one record vs D_train" if name == "removal"
                                 else "D_train vs D_train plus one record")}
        q_pair = q
        if sample_rate is None and major >= 1:
            # Opacus derives the rates from each dataset's own length
            qs_small, q_small, _ = opacus1_rates(small, batch_size, drop_last)
            qs_big, q_big, _ = opacus1_rates(small + 1, batch_size, drop_last)
            entry["sample_rates"] = [qs_small, qs_big]
            if (qs_small, q_small) != (qs_big, q_big):
                entry.update(sgm_claim_supported=False, corrected_epsilon=None, claim_refuted=None,
                             verdict=("the two datasets get different sampling rates (len(data_loader) changes); "
                                      "outside both the SGM analysis and the paper's analysis"))
                neighbours.append(entry)
                continue
            q_pair = q_small
        if mech == "sgm":
            entry.update(sgm_claim_supported=True, corrected_epsilon=None, claim_refuted=False,
                         verdict="SGM (no normalisation): the SGM claim stands")
        elif mech == "feasgm":
            K_small, K_big = feasgm_floors(small, q_pair)
            entry["normalisers"] = [K_small, K_big]
            entry["floors_agree"] = K_small == K_big
            if K_small == 0:
                entry.update(sgm_claim_supported=False, corrected_epsilon=None, claim_refuted=None,
                             verdict="floor(N q) = 0: FEASGM divides by zero on the smaller dataset")
            elif K_small == K_big:
                entry.update(sgm_claim_supported=True, corrected_epsilon=None, claim_refuted=False,
                             verdict=(f"floors agree ({K_small} = {K_big}): FEASGM is SGM divided by a constant, "
                                      "the SGM claim stands"))
            else:
                eps = Chi2Pair(T * (n - 1), float(K_small)).epsilon(delta) if n > 1 else 0.0
                entry.update(sgm_claim_supported=False, corrected_epsilon=eps,
                             corrected_bound=f"T(P^m, Q_K^m), m = T(n-1) = {T * (n - 1)}, K = {K_small} (exact chi-square)",
                             witness=_WITNESS.format(a=K_small, b=K_small + 1))
        elif mech == "easgm":
            eps = Chi2Pair(T * (n - 1), float(small)).epsilon(delta) if n > 1 else 0.0
            entry.update(sgm_claim_supported=False, corrected_epsilon=eps,
                         corrected_bound=f"T(P^m, Q_N^m), m = T(n-1) = {T * (n - 1)}, N = {small} (exact chi-square)",
                         witness=_WITNESS.format(a=f"{small} q", b=f"{small + 1} q"))
        elif mech == "asgm":
            view = asgm_rounds_upper_bound(small, q_pair, None, n, rounds=T, **pld_options)
            lo, hi = view.epsilon_bounds(delta)
            entry.update(sgm_claim_supported=False, corrected_epsilon=lo, corrected_epsilon_bracket=[lo, hi],
                         corrected_bound=f"Eq. 14 composed over T = {T} rounds (PLD, step {view.pld.step:.3g})")
        if "verdict" not in entry:
            eps = entry["corrected_epsilon"]
            refuted = claim_max is not None and eps > claim_max
            entry["claim_refuted"] = bool(refuted)
            if refuted:
                entry["verdict"] = (f"SGM claim not supported: the corrected guarantee is provably weaker "
                                    f"(epsilon >= {eps:.4g} > claimed {claim_max:.4g} at delta = {delta:g})")
            else:
                entry["verdict"] = (f"SGM claim not supported by the analysis (the SGM argument does not apply), "
                                    f"but this bound does not refute it (epsilon >= {eps:.4g} <= claimed "
                                    f"{claim_max:.4g})")
        neighbours.append(entry)
    report["neighbours"] = neighbours
    if sample_rate is None and major >= 1:
        if mech == "feasgm" and N_train % batch_size != 0:
            notes.append(f"Opacus 1.x samples at 1/ceil(N/batch) = 1/{round(1 / samp['sample_rate'])}, not batch/N, "
                         "so N*q is not an integer here and the FEASGM normalisers can agree on both sides")
        if samp["sample_rate"] != q:
            notes.append(f"Opacus 1.x samples at {samp['sample_rate']:.6g} but charges the accountant "
                         f"{q:.6g} (int(1/(1/len)) < len in floating point): the claim is computed at the charged rate")
    report["notes"] = notes
    bad = [e["name"] for e in neighbours if not e.get("sgm_claim_supported", False)]
    if not bad:
        report["summary"] = "The SGM claim stands for both neighbouring pairs."
    else:
        refuted = [e["name"] for e in neighbours if e.get("claim_refuted")]
        report["summary"] = (f"SGM claim not supported for: {', '.join(bad)}"
                             + (f"; the corrected bound refutes the claimed epsilon for: {', '.join(refuted)}."
                                if refuted else "; the corrected bound does not refute the claimed epsilon."))
    return report
