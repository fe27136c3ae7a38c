"""Check one Opacus training run: claimed epsilon, certified epsilon, interval, verdict.

:func:`check_run` takes the settings an Opacus user knows (release, dataset size, batch size
or sample rate, epochs or steps, noise multiplier, number of trainable parameters,
``loss_reduction``, Poisson sampling, delta, the accountant their run printed) and returns one
report (a dict) that ``python -m paperlib check``, :func:`check_opacus` (a live
``PrivacyEngine``), :class:`paperlib.opacus_accountant.CertifiedAccountant` and the
practitioner's book page share. :func:`format_statement` writes it as a short statement in the
manner of TF Privacy's ``compute_dp_sgd_privacy_statement``.

What it does (THEORY.md §§6, 10, 11):

1. the mechanism from the release: paper Table 2 (:func:`paperlib.practitioner.opacus_mechanism`;
   ``loss_reduction='sum'`` is SGM), and the release's sampling rule
   (:func:`paperlib.practitioner.opacus_sampling`): Opacus 1.x samples at ``1/len(data_loader)``,
   charges the accountant ``1/int(1/q)`` and divides by ``int(N q)`` in floating point; 0.x
   releases take ``sample_rate`` from the user (``batch_size / N`` assumed);
2. the claim: the named Opacus accountant over the run's steps (:func:`claimed_epsilon`: the
   installed Opacus 1.6.0's ``RDPAccountant``/``PRVAccountant``; releases up to 0.13 converted
   RDP to (eps, delta) with the older bound ``rdp - log(delta)/(alpha - 1)``, reproduced);
3. for each neighbour of the training set, removal ``(N-1, N)`` and addition ``(N, N+1)``: the
   certified epsilon of the run as computed and the epsilon the T-round upper bound forces
   (:func:`paperlib.mechanisms.certified.certified_interval`, PLD with its accountant bracket),
   and the verdict on the claim;
4. what would make the claim hold.

Verdicts per neighbour: ``stands`` (SGM, or FEASGM whose floors agree: post-processing of SGM,
the SGM analysis applies); ``holds`` (the SGM analysis does not apply, but the certified epsilon
is at most the claimed one); ``refuted`` (the forced epsilon exceeds the claim: no analysis of
the mechanism can certify it); ``unresolved`` (forced <= claimed < certified); ``not covered``
(the neighbour gets a different sampling rate and number of steps per epoch from Opacus 1.x, or
the certified numerics are out of range; the reason is given).
"""

from __future__ import annotations

import math
import time
import warnings

from paperlib.mechanisms.core import Mechanism, feasgm_floors
from paperlib.practitioner import (PRV_MAX_BYTES, _parse_version, opacus1_rates, opacus_mechanism, prv_grid_bytes)
from paperlib.fdp.validation import check_delta, check_int, check_positive, check_rate

__all__ = ["check_run", "claimed_epsilon", "format_statement", "check_opacus", "default_accountant",
           "MAX_CHECK_STEPS"]

#: most optimiser steps ``check`` composes (the PLD grids grow with T; 10^6 steps is ~400 epochs of
#: MNIST at batch 256)
MAX_CHECK_STEPS = 1_000_000
#: the error Opacus's PRVAccountant.get_epsilon targets by default (``eps_error``)
PRV_EPS_ERROR = 0.01
#: The fix :mod:`paperlib.fix` provides (Opacus 1.x: divide by the configured batch size)
FIX_NAME = ("paperlib.fix.fix_normaliser(optimizer, batch_size) after make_private (Opacus 1.x): it divides by the "
            "configured batch size, a constant fixed before seeing the data")


def default_accountant(opacus_version: str) -> str:
    """The accountant a ``PrivacyEngine()`` of that release uses: 'rdp' before 1.3, 'prv' from 1.3
    (read from ``PrivacyEngine.__init__`` of v1.0.0-v1.6.0; 0.x releases have RDP only)."""
    return "prv" if _parse_version(opacus_version)[:2] >= (1, 3) else "rdp"


def _old_rdp_conversion(version: tuple) -> bool:
    """Releases up to 0.13 convert RDP with ``eps = rdp - log(delta)/(alpha-1)`` (Mironov 2017,
    Prop. 3); 0.14 onwards with Balle et al. 2020, Thm 21 (read from each release's
    ``privacy_analysis.py``)."""
    return version[:2] <= (0, 13)


def claimed_epsilon(opacus_version: str, q: float, sigma: float, steps: int, delta: float,
                    accountant: str | None = None) -> dict:
    """The epsilon the release's accountant prints for the SGM over ``steps`` rounds.

    ``accountant``: 'rdp' or 'prv' (None: the release's default, :func:`default_accountant`).
    RDP: Opacus 1.6.0's ``compute_rdp`` at ``RDPAccountant.DEFAULT_ALPHAS`` (the same orders and
    formula in every release from 0.12; tested against the 0.13.0 and 0.15.0 code when cached),
    converted as that release converts. PRV: Opacus 1.6.0's ``PRVAccountant.get_epsilon`` (its
    upper end at ``eps_error = 0.01``); refused (ValueError naming ``accountant``) before 1.3, and
    (naming ``noise_multiplier``) when its grid would need more than
    :data:`paperlib.practitioner.PRV_MAX_BYTES`.
    Returns ``{"accountant", "epsilon", "accountant_error" (PRV: 0.01; RDP: None, an upper bound
    with no stated error), "source"}``.
    """
    version = _parse_version(opacus_version)
    q = check_rate(q, "sample_rate")
    sigma = check_positive(sigma, "noise_multiplier")
    steps = check_int(steps, "steps", 1)
    delta = check_delta(delta)
    acc = default_accountant(opacus_version) if accountant is None else accountant
    if acc not in ("rdp", "prv"):
        raise ValueError(f"accountant must be 'rdp' or 'prv', got {accountant!r}")
    if acc == "prv":
        if version[:2] < (1, 3):
            raise ValueError(f"accountant 'prv' does not exist in Opacus {opacus_version} (PRVAccountant came with "
                             "1.3.0); use 'rdp'")
        points, nbytes = prv_grid_bytes(q, sigma, steps, delta)
        if nbytes > PRV_MAX_BYTES:
            raise ValueError(
                f"noise_multiplier = {sigma:g} is too small for Opacus's PRV accountant here: its grid would hold "
                f"{points:.3g} points (about {nbytes / 2**30:,.0f} GiB); use accountant 'rdp'")
        from opacus.accountants import PRVAccountant

        a = PRVAccountant()
        a.history = [(sigma, q, steps)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eps = float(a.get_epsilon(delta=delta, eps_error=PRV_EPS_ERROR))
        return {"accountant": "prv", "epsilon": eps, "accountant_error": PRV_EPS_ERROR,
                "source": "Opacus PRVAccountant (Gopi et al. 2021), eps_error 0.01"}
    import numpy as np
    from opacus.accountants import RDPAccountant
    from opacus.accountants.analysis import rdp as rdp_analysis

    orders = np.asarray(RDPAccountant.DEFAULT_ALPHAS, dtype=float)
    rdp = np.asarray(rdp_analysis.compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=orders))
    if _old_rdp_conversion(version):
        with np.errstate(invalid="ignore"):
            vals = rdp - math.log(delta) / (orders - 1)
        eps = float(np.nanmin(vals)) if not np.isnan(vals).all() else math.inf
        src = f"Opacus {opacus_version} RDP accountant: eps = min over alpha of rdp - log(delta)/(alpha-1)"
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eps = float(rdp_analysis.get_privacy_spent(orders=orders, rdp=rdp, delta=delta)[0])
        src = f"Opacus {opacus_version} RDP accountant (Balle et al. 2020 conversion)"
    return {"accountant": "rdp", "epsilon": eps, "accountant_error": None, "source": src}


def _rates(version, N, batch_size, sample_rate, drop_last, charged=False):
    """(q_sample, q_account, steps_per_epoch, rule) of a run on ``N`` records."""
    major = version[0]
    if charged:  # the rate Opacus charges its accountant (and normalises with), as given to IAccountant.step
        return sample_rate, sample_rate, max(int(1 / sample_rate), 1), "the rate charged to the accountant"
    if major >= 1:
        if sample_rate is not None:
            steps = int(1 / sample_rate)
            return sample_rate, 1 / steps, steps, "Opacus 1.x with the given sample_rate: len(DPDataLoader) = int(1/q)"
        qs, qa, steps = opacus1_rates(N, batch_size, drop_last)
        return qs, qa, steps, (f"Opacus 1.x: sample_rate = 1/len(data_loader) = 1/"
                               f"{'floor' if drop_last else 'ceil'}(N/batch)")
    if sample_rate is None:
        sample_rate = batch_size / N
        rule = "Opacus 0.x: sample_rate = batch_size / sample_size"
    else:
        rule = "Opacus 0.x: the given sample_rate"
    return sample_rate, sample_rate, max(int(1 / sample_rate), 1), rule


def _validate(opacus_version, dataset_size, batch_size, sample_rate, epochs, steps, noise_multiplier, n_params,
              loss_reduction, poisson, delta, accountant):
    version = _parse_version(opacus_version)
    opacus_mechanism(opacus_version, loss_reduction)  # release in 0.9-1.x, loss_reduction known
    N = check_int(dataset_size, "dataset_size", 2)
    if (batch_size is None) == (sample_rate is None):
        raise ValueError("batch_size or sample_rate: give exactly one of them (the data loader's batch size, or "
                         "the Poisson sampling rate in (0, 1])")
    if batch_size is not None:
        batch_size = check_int(batch_size, "batch_size", 1)
        if batch_size > N:
            raise ValueError(f"batch_size = {batch_size:,} is larger than dataset_size = {N:,}")
    if sample_rate is not None:
        sample_rate = check_rate(sample_rate, "sample_rate")
    if (epochs is None) == (steps is None):
        raise ValueError("epochs or steps: give exactly one of them")
    if epochs is not None:
        epochs = check_int(epochs, "epochs", 1)
    if steps is not None:
        steps = check_int(steps, "steps", 1)
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    n = check_int(n_params, "n_params", 1)
    delta = check_delta(delta)
    if accountant not in (None, "rdp", "prv"):
        raise ValueError(f"accountant must be 'rdp' or 'prv', got {accountant!r}")
    if accountant == "prv" and version[:2] < (1, 3):
        raise ValueError(f"accountant 'prv' does not exist in Opacus {opacus_version} (PRVAccountant came with "
                         "1.3.0); use 'rdp'")
    if poisson is False:
        raise ValueError(f"poisson: without Poisson sampling (fixed-size shuffled batches) Opacus "
                         f"{opacus_version}'s accountant and this analysis do not apply; train with "
                         + ("make_private(poisson_sampling=True)" if version[0] >= 1 else
                            "a Poisson sampler (UniformWithReplacementSampler)"))
    if poisson is None and version[:2] <= (0, 11):
        raise ValueError(f"poisson: Opacus {opacus_version} has no built-in Poisson sampling (it came with 0.12); "
                         "pass poisson=True (--poisson) if you sampled with your own Poisson sampler")
    return version, N, batch_size, sample_rate, epochs, steps, sigma, n, delta


def _verdict(entry, claim):
    """Fill ``verdict`` and ``sentence`` of a neighbour entry from its numbers and the claim."""
    c, f = entry.get("epsilon_certified"), entry.get("epsilon_forced")
    sizes = "{:,} vs {:,}".format(*entry["sizes"])
    if entry.get("sgm") and c is not None:
        entry["verdict"] = "stands"
        entry["sentence"] = f"{entry['name']} ({sizes}): the SGM claim stands ({entry['why']})."
    elif c is None:
        if f is not None and f > claim:
            entry["verdict"] = "refuted"
            entry["sentence"] = (f"{entry['name']} ({sizes}): claim refuted: the upper bound forces epsilon >= "
                                 f"{f:.4g} > {claim:.4g}; certified epsilon not computed ({entry['why']}).")
        else:
            entry["verdict"] = "not covered"
            entry["sentence"] = f"{entry['name']} ({sizes}): not covered: {entry['why']}."
    elif c <= claim:
        entry["verdict"] = "holds"
        entry["sentence"] = (f"{entry['name']} ({sizes}): the claim holds: certified epsilon {c:.4g} <= claimed "
                             f"{claim:.4g} ({entry['why']}).")
    elif f is not None and f > claim:
        entry["verdict"] = "refuted"
        entry["sentence"] = (f"{entry['name']} ({sizes}): claim refuted: no analysis of this mechanism can give "
                             f"less than {f:.4g} > claimed {claim:.4g} (certified {c:.4g}; {entry['why']}).")
    else:
        entry["verdict"] = "unresolved"
        entry["sentence"] = (f"{entry['name']} ({sizes}): claim not certified: the run is certified at {c:.4g} "
                             f"> claimed {claim:.4g}, and the upper bound forces only {f:.4g} ({entry['why']}).")
    entry["claim_stands"] = entry["verdict"] in ("stands", "holds")


def _neighbour(name, small, mech, version, batch_size, sample_rate, drop_last, charged, sigma, n, T, delta,
               pld_options):
    from paperlib.mechanisms.certified import certified_interval

    entry = {"name": name, "sizes": [small, small + 1],
             "description": "D_train minus one record vs D_train" if name == "removal"
             else "D_train vs D_train plus one record"}
    qs_a, qa_a, st_a, _ = _rates(version, small, batch_size, sample_rate, drop_last, charged)
    qs_b, qa_b, st_b, _ = _rates(version, small + 1, batch_size, sample_rate, drop_last, charged)
    entry["sample_rates"] = [qs_a, qs_b]
    if (qs_a, qa_a) != (qs_b, qa_b):
        entry.update(sgm=False, epsilon_certified=None, epsilon_forced=None,
                     why=(f"Opacus derives a different sampling rate for each dataset (len(data_loader) "
                          f"{round(1 / qs_a)} vs {round(1 / qs_b)}, {st_a} vs {st_b} steps per epoch), so the "
                          "number of released gradients tells the two apart; neither the SGM analysis nor this "
                          "one covers it: fix the sample rate and the number of steps"))
        return entry
    q = qa_a
    if mech == "feasgm":
        K, K1 = feasgm_floors(small, q)
        entry["normalisers"] = [K, K1]
        if K == 0:
            entry.update(sgm=False, epsilon_certified=None, epsilon_forced=None,
                         why="int(N q) = 0: Opacus divides by zero on the smaller dataset")
            return entry
        entry["floors_agree"] = K == K1
    elif mech == "easgm":
        entry["normalisers"] = [small * q, (small + 1) * q]
    elif mech == "asgm":
        entry["normalisers"] = ["|B|", "|B|"]
    else:
        entry["normalisers"] = ["1 (sum)", "1 (sum)"]
    entry["sgm"] = mech == "sgm" or bool(entry.get("floors_agree"))
    if mech == "sgm":
        entry["why"] = "loss_reduction='sum': the noisy sum is not normalised, SGM"
    elif entry["sgm"]:
        entry["why"] = f"both datasets divide by int(N q) = {entry['normalisers'][0]}: post-processing of SGM"
    elif mech == "feasgm":
        entry["why"] = f"FEASGM divides by {entry['normalisers'][0]} and {entry['normalisers'][1]}: not SGM"
    elif mech == "easgm":
        entry["why"] = "EASGM divides by N q, which differs between the two datasets: not SGM"
    else:
        entry["why"] = "ASGM divides by the realised batch size: not SGM"
    try:
        r = certified_interval(mech, small, q, sigma, n, rounds=T, delta=delta, **pld_options)
    except ValueError as exc:
        # numerics out of range (e.g. EASGM noncentrality on very large datasets): the forced epsilon alone
        msg = str(exc).splitlines()[0]
        entry.update(epsilon_certified=None, certified_error=msg)
        entry["why"] += f"; certified epsilon not computed: {msg}"
        try:
            from paperlib.mechanisms.certified import forced_epsilon

            fr = forced_epsilon(mech, small, q, sigma, n, rounds=T, delta=delta, **pld_options)
            entry.update(epsilon_forced=fr["epsilon_forced"], epsilon_forced_bracket=fr["epsilon_forced_bracket"],
                         forced_method=fr["forced_method"])
        except ValueError:
            entry["epsilon_forced"] = None
        return entry
    for k in ("epsilon_certified", "epsilon_certified_bracket", "certified_accounting_error", "epsilon_forced",
              "epsilon_forced_bracket", "forced_accounting_error", "forced_method", "accuracy_met", "certified_label",
              "forced_label", "case", "statement"):
        if k in r:
            entry[k] = r[k]
    if qs_a != qa_a:
        entry["note"] = (f"the loader samples at {qs_a:.6g} but Opacus charges and normalises with {qa_a:.6g} "
                         "(int(1/q) < 1/q in floating point); the certified numbers use the charged rate")
    return entry


def _remedies(mech, version, N, batch_size, sample_rate, drop_last, neighbours):
    if all(e.get("claim_stands") for e in neighbours):
        return []
    out = []
    if any("different sampling rate" in e.get("why", "") for e in neighbours):
        out.append("a batch size for which len(data_loader) is the same for N - 1, N and N + 1 records (or a fixed "
                   "sample rate and number of steps): otherwise the number of steps itself depends on the data set")
    out += ["loss_reduction='sum' (and reduction='sum' in the loss) with the learning rate divided by the batch "
           "size (paperlib.fix.sum_reduction_lr): the update is then SGM's, so the SGM claim holds",
           f"the fix {FIX_NAME}: post-processing of SGM, so the SGM claim holds"]
    if version[0] >= 1 and batch_size is not None and sample_rate is None:
        good = []
        for d in range(1, 65):
            for b in (batch_size - d, batch_size + d):
                if 1 <= b <= N and _floors_agree_both(N, b, drop_last):
                    good.append(b)
            if len(good) >= 2:
                break
        if good:
            out.append(f"keep loss_reduction='mean' but use a batch size for which int(N q) is the same on both "
                       f"datasets of both neighbours, e.g. {', '.join(str(b) for b in sorted(good)[:2])} "
                       "(then FEASGM is post-processing of SGM)")
    elif version[0] == 0:
        out.append("Opacus 1.x with a batch size whose floors agree on both neighbours (FEASGM is then "
                   "post-processing of SGM; `check` says which)")
    return out


def _floors_agree_both(N, b, drop_last):
    try:
        rates = [opacus1_rates(m, b, drop_last) for m in (N - 1, N, N + 1)]
    except ValueError:
        return False
    if not (rates[0] == rates[1] == rates[2]):
        return False
    q = rates[1][1]
    Ks = [int(m * q) for m in (N - 1, N, N + 1)]
    return Ks[0] == Ks[1] == Ks[2] > 0


def check_run(opacus_version: str, dataset_size: int, batch_size: int | None = None, *,
              sample_rate: float | None = None, epochs: int | None = None, steps: int | None = None,
              noise_multiplier: float, n_params: int, loss_reduction: str = "mean", poisson: bool | None = None,
              delta: float = 1e-5, accountant: str | None = None, drop_last: bool = False,
              charged_rate: bool = False, pld_options: dict | None = None) -> dict:
    """What a DP-SGD run with Opacus claims and what it is certified to give (module docstring).

    Parameters
    ----------
    opacus_version : str, a release in 0.9-1.x ('1.6.0', '0.15.0', ...)
    dataset_size : int >= 2, records in the training set (``len(data_loader.dataset)``)
    batch_size : int in [1, dataset_size] (the DataLoader's), or ``sample_rate`` in (0, 1]: exactly one.
        A batch size is turned into rates as the release does; a sample rate is used on both
        datasets of each pair
    epochs : int >= 1, or steps : int >= 1 (optimiser steps in all): exactly one
    noise_multiplier : float > 0; n_params : int >= 1 (trainable parameters)
    loss_reduction : 'mean' (Opacus's default) or 'sum' (SGM)
    poisson : True (Poisson sampling; default for releases >= 0.12), False is refused (neither
        analysis covers fixed-size batches), None: the release's default
    delta : float in (0, 1); accountant : 'rdp', 'prv' or None (the release's default)
    drop_last : the data loader's flag (Opacus 1.x rule); pld_options : accuracy options of the PLD engine
    charged_rate : True when ``sample_rate`` is the rate Opacus charges its accountant (what
        ``IAccountant.step`` receives: ``1/len(DPDataLoader)``), used as given for sampling,
        accounting and the normaliser; False (default): a DPDataLoader's own rate (1.x charges
        ``1/int(1/rate)``)

    Returns
    -------
    dict (JSON-serialisable): ``inputs``; ``mechanism``, ``mechanism_note``; ``sample_rate``,
    ``accountant_sample_rate``, ``sample_rate_rule``, ``steps_per_epoch``, ``steps``, ``normaliser``;
    ``claim`` (:func:`claimed_epsilon`), ``claimed_epsilon``; ``neighbours`` (list: removal,
    addition; each with ``sizes``, ``normalisers``, ``verdict`` in {stands, holds, refuted,
    unresolved, not covered}, ``claim_stands``, ``epsilon_certified`` and its bracket and error,
    ``epsilon_forced`` and its bracket, ``sentence``); ``epsilon_certified`` (the larger over the
    neighbours, None when one is not computed), ``epsilon_forced`` (the larger), ``interval``,
    ``claim_stands`` (both neighbours), ``remedies`` (list of strings), ``summary``, ``notes``,
    ``seconds``.

    Raises ValueError with one line naming the setting (``dataset_size``, ``batch_size``,
    ``sample_rate``, ``epochs``, ``steps``, ``noise_multiplier``, ``n_params``, ``loss_reduction``,
    ``poisson``, ``delta``, ``accountant``, ``opacus_version``) on bad settings.
    """
    t0 = time.perf_counter()
    version, N, batch_size, sample_rate, epochs, steps, sigma, n, delta = _validate(
        opacus_version, dataset_size, batch_size, sample_rate, epochs, steps, noise_multiplier, n_params,
        loss_reduction, poisson, delta, accountant)
    mech, mech_note = opacus_mechanism(opacus_version, loss_reduction)
    notes = []
    if mech == "unsupported":  # 0.9-0.11 with the user's own Poisson sampler: it divides by |B|
        mech, mech_note = "asgm", ("A: divides by the realised batch size |B| (no built-in Poisson sampling in this "
                                   "release; your own Poisson sampler assumed)")
    if charged_rate and sample_rate is None:
        raise ValueError("sample_rate: charged_rate=True needs the charged sample_rate")
    qs, qa, per_epoch, rule = _rates(version, N, batch_size, sample_rate, drop_last, charged_rate)
    T = steps if steps is not None else epochs * per_epoch
    if T > MAX_CHECK_STEPS:
        raise ValueError(f"steps = {T:,} is above {MAX_CHECK_STEPS:,} (the composition grids grow with the number "
                         "of steps)")
    if mech == "feasgm" and int(N * qa) == 0:
        name = "batch_size" if batch_size is not None else "sample_rate"
        raise ValueError(f"{name}: int(dataset_size * sample_rate) = 0, Opacus {opacus_version} divides by zero")
    acc = default_accountant(opacus_version) if accountant is None else accountant
    claim = claimed_epsilon(opacus_version, qa, sigma, T, delta, acc)
    eps_claim = claim["epsilon"]
    normaliser = {"feasgm": f"int(N q) = {int(N * qa)}", "easgm": f"N q = {N * qa:.6g}",
                  "asgm": "the realised batch size |B|", "sgm": "nothing (noisy sum)"}[mech]
    report = {
        "command": "check",
        "inputs": {"opacus_version": opacus_version, "dataset_size": N, "batch_size": batch_size,
                   "sample_rate": sample_rate, "epochs": epochs, "steps": steps, "noise_multiplier": sigma,
                   "n_params": n, "loss_reduction": loss_reduction, "poisson": True, "delta": delta,
                   "accountant": acc, "drop_last": drop_last},
        "mechanism": mech, "mechanism_note": mech_note,
        "sample_rate": qs, "accountant_sample_rate": qa, "sample_rate_rule": rule,
        "steps_per_epoch": per_epoch, "steps": T, "normaliser": normaliser, "delta": delta,
        "claim": claim, "claimed_epsilon": eps_claim,
    }
    opts = dict(pld_options or {})
    neighbours = []
    for name, small in (("removal", N - 1), ("addition", N)):
        # 0.x: the rate is a fixed hyperparameter (batch_size / sample_size, typed by the user) on both datasets;
        # 1.x derives it from each dataset's own len(data_loader) unless a rate is given
        fixed = sample_rate if version[0] >= 1 else qs
        e = _neighbour(name, small, mech, version, batch_size, fixed, drop_last, charged_rate, sigma, n, T, delta,
                       opts)
        _verdict(e, eps_claim)
        neighbours.append(e)
    report["neighbours"] = neighbours
    certs = [e.get("epsilon_certified") for e in neighbours]
    forced = [e["epsilon_forced"] for e in neighbours if e.get("epsilon_forced") is not None]
    report["epsilon_certified"] = max(certs) if all(c is not None for c in certs) else None
    report["epsilon_forced"] = max(forced) if forced else None
    report["interval"] = [report["epsilon_forced"], report["epsilon_certified"]]
    report["claim_stands"] = all(e["claim_stands"] for e in neighbours)
    report["remedies"] = _remedies(mech, version, N, batch_size, sample_rate, drop_last, neighbours)
    if qs != qa:
        notes.append(f"Opacus samples at {qs:.6g} but charges the accountant {qa:.6g} (int(1/q) < 1/q in floating "
                     "point): the claim and the certified numbers use the charged rate")
    if mech == "feasgm" and any(e.get("floors_agree") for e in neighbours) and batch_size is not None \
            and sample_rate is None and N % batch_size:
        notes.append(f"Opacus 1.x samples at 1/len(data_loader) = 1/{round(1 / qs)}, not batch/N: N q is not an "
                     "integer here, so int(N q) can agree on both datasets")
    report["notes"] = notes
    verdicts = {e["name"]: e["verdict"] for e in neighbours}
    if report["claim_stands"]:
        report["summary"] = f"The claimed epsilon {eps_claim:.4g} holds for both neighbours."
    else:
        report["summary"] = (f"The claimed epsilon {eps_claim:.4g} does not hold for every neighbour "
                             f"(removal: {verdicts['removal']}, addition: {verdicts['addition']}).")
    report["seconds"] = time.perf_counter() - t0
    return report


def _f(x, digits=4):
    if x is None:
        return "-"
    return f"{x:.{digits}g}" if math.isfinite(x) else "inf"


def format_statement(report: dict, width: int = 88) -> str:
    """The report as a short statement (plain text, lines of at most about ``width`` characters)."""
    import textwrap

    r, i = report, report["inputs"]
    wrap = lambda s: textwrap.fill(s, width)  # noqa: E731
    how = (f"batch size {i['batch_size']:,}" if i["batch_size"] is not None else f"sample rate {i['sample_rate']:g}")
    lines = [wrap(f"DP-SGD with Opacus {i['opacus_version']} (Poisson sampling, loss_reduction='{i['loss_reduction']}') "
                  f"over {i['dataset_size']:,} records, {how}: sampling rate {r['sample_rate']:.6g}, "
                  f"{r['steps']:,} steps" + (f" ({i['epochs']} epochs of {r['steps_per_epoch']:,})" if i["epochs"]
                                             else "") +
                  f", noise multiplier {i['noise_multiplier']:g}, {i['n_params']:,} trainable parameters."),
             wrap(f"Mechanism run: {r['mechanism'].upper()} ({r['mechanism_note']}); it divides by {r['normaliser']}."),
             "",
             wrap(f"Claimed: epsilon = {_f(r['claimed_epsilon'])} at delta = {r['delta']:g} "
                  f"({r['claim']['source']}; the SGM analysis)."),
             "",
             f"{'neighbour':<10}{'sizes':<17}{'claim':<13}{'certified eps':<15}{'[forced, certified]'}"]
    for e in r["neighbours"]:
        c = e.get("epsilon_certified")
        cs = _f(c) + (f" ±{e['certified_accounting_error']:.2g}" if c is not None and
                      e.get("certified_accounting_error") else "")
        lines.append(f"{e['name']:<10}{'{:,}/{:,}'.format(*e['sizes']):<17}{e['verdict'].upper():<13}{cs:<15}"
                     f"[{_f(e.get('epsilon_forced'))}, {_f(c)}]")
    lines.append("")
    for e in r["neighbours"]:
        lines.append(wrap(e["sentence"]))
    lines.append("")
    if r["epsilon_certified"] is not None:
        lines.append(wrap(f"The mechanism you ran is ({_f(r['epsilon_certified'])}, {r['delta']:g})-DP for "
                          f"add/remove neighbours (certified, PLD upper end); no analysis of it can give less than "
                          f"{_f(r['epsilon_forced'])}."))
    lines.append(wrap(r["summary"]))
    if r["remedies"]:
        lines.append("To make the claim hold:")
        for m in r["remedies"]:
            lines.append(textwrap.fill(m, width, initial_indent="  - ", subsequent_indent="    "))
    for note in r["notes"]:
        lines.append(wrap("Note: " + note))
    return "\n".join(lines)


def check_opacus(privacy_engine, optimizer, data_loader, *, epochs: int | None = None, delta: float,
                 model=None, steps: int | None = None, accountant: str | None = None,
                 pld_options: dict | None = None) -> dict:
    """:func:`check_run` for a live Opacus 1.x run (the objects ``make_private`` returned).

    Reads what Opacus holds: ``optimizer.noise_multiplier``, ``optimizer.loss_reduction``,
    ``optimizer.expected_batch_size`` (checked against ``int(len(dataset) * q)``), the sample rate of
    the ``DPDataLoader`` (``data_loader.sample_rate``; its ``len`` gives the steps per epoch),
    ``len(data_loader.dataset)``, the number of trainable parameters of ``model`` (or of the
    optimizer's parameters when ``model`` is None), and the installed Opacus version. The
    accountant defaults to the one ``privacy_engine`` holds (its ``mechanism()``, when 'rdp' or
    'prv'). ``epochs`` (or ``steps``, the total) as for the run. Returns the report of
    :func:`check_run` plus ``read_from_opacus`` (what was read). Raises ValueError (one line) when
    the loader does not Poisson-sample or a value is missing.
    """
    import opacus
    import torch

    if not all(hasattr(optimizer, a) for a in ("noise_multiplier", "expected_batch_size", "loss_reduction")):
        raise ValueError("optimizer must be the DPOptimizer returned by PrivacyEngine.make_private")
    q_sample = getattr(data_loader, "sample_rate", None)
    if q_sample is None:
        raise ValueError("data_loader: not a DPDataLoader (make_private(poisson_sampling=True) returns one); "
                         "without Poisson sampling neither the accountant nor this analysis applies")
    N = len(data_loader.dataset)
    params = model.parameters() if model is not None else (p for g in optimizer.param_groups for p in g["params"])
    n = int(sum(p.numel() for p in params if p.requires_grad))
    loss_reduction = optimizer.loss_reduction
    if accountant is None:
        m = privacy_engine.accountant.mechanism() if privacy_engine is not None else None
        accountant = m if m in ("rdp", "prv") else None
    report = check_run(opacus.__version__, N, sample_rate=float(q_sample), epochs=epochs, steps=steps,
                       noise_multiplier=float(optimizer.noise_multiplier), n_params=n, loss_reduction=loss_reduction,
                       poisson=True, delta=delta, accountant=accountant, pld_options=pld_options)
    K = int(N * report["accountant_sample_rate"])
    if loss_reduction == "mean" and int(optimizer.expected_batch_size) != K:
        raise ValueError(f"optimizer.expected_batch_size = {optimizer.expected_batch_size} is not int(len(dataset) "
                         f"* sample_rate) = {K}: not the Opacus {opacus.__version__} make_private rule (distributed "
                         "or a modified optimizer?)")
    report["read_from_opacus"] = {"opacus_version": opacus.__version__, "dataset_size": N,
                                  "sample_rate": float(q_sample), "steps_per_epoch": len(data_loader),
                                  "expected_batch_size": int(optimizer.expected_batch_size),
                                  "noise_multiplier": float(optimizer.noise_multiplier),
                                  "loss_reduction": loss_reduction, "n_params": n,
                                  "accountant": accountant, "torch": torch.__version__}
    report["notes"].append("read from a live PrivacyEngine: the sample rate is used on both datasets of each pair "
                           "(a neighbour's own len(data_loader) is not known here; `python -m paperlib check "
                           "--batch-size B` checks it)")
    return report
