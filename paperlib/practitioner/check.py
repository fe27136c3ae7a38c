"""Check one training run: claimed epsilon, certified epsilon, the interval, a verdict per neighbour.

:func:`check_run` takes the settings a practitioner knows (the code that ran: an Opacus release
or DPSUR; dataset size, batch size or sample rate, epochs or steps, noise multiplier, number of
trainable parameters, ``loss_reduction``, the divisor, Poisson sampling, delta, the accountant
their run printed), makes one validated :class:`~paperlib.practitioner.run.Run` of them, and
returns one typed report (:class:`~paperlib.practitioner.report.CheckReport`) that ``python -m paperlib check``, :func:`check_opacus` (a live
``PrivacyEngine``), :class:`~paperlib.practitioner.accountant.CertifiedAccountant` and the
practitioner's book page share. :func:`format_statement` writes it as a short statement in the
manner of TF Privacy's ``compute_dp_sgd_privacy_statement``.

What it does (THEORY.md §§6, 10, 11):

1. the mechanism from the code (:mod:`~paperlib.practitioner.releases`: the stored code audit of
   every Opacus release, paper Table 2; ``loss_reduction='sum'`` and a public divisor are SGM;
   DPSUR's own rule), and the code's sampling rule;
2. the claim: the release's accountant over the run's steps
   (:func:`paperlib.mechanisms.claimed.sgm_claim_epsilon`, the one wrapper around Opacus's
   accountants, with the release's RDP conversion and orders);
3. for each neighbour of the training set, removal ``(N-1, N)`` and addition ``(N, N+1)``: the
   certified epsilon of the run as computed and the forced epsilon
   (:func:`paperlib.mechanisms.certified.certified_interval`, PLD with its accountant bracket),
   and the verdict on the claim;
4. the replace-one relation (the data-set size public, THEORY.md §11.3d): the exact epsilon where the release is
   SGM post-processed;
5. what would make the claim hold: each remedy is derived as a changed run and offered only where it gives both
   neighbours the SGM analysis.

Verdicts per neighbour (add/remove): ``stands`` (SGM, a public divisor, or FEASGM whose floors agree:
post-processing of SGM, the SGM analysis applies); ``holds`` (the certified epsilon is at most the
claimed one); ``refuted`` (a named attack forces an epsilon above the claim: no analysis of the
mechanism can certify it; this includes the two data sets getting different numbers of updates, Opacus 1.x
at a multiple of the batch size, where counting them forces epsilon = inf, THEORY.md §11.3c); ``unresolved``
(otherwise: the certified end is above the claim and no attack forces above it, or the certificate is
unavailable); ``not covered`` (a sampling rate that differs between the data sets at the same number of steps,
or a division by zero; the reason says what to change). A lower end that is not an attack (an upper bound of the index-revealed guarantee, e.g.
ASGM's Eq. 14, THEORY.md §11.5) never refutes.
"""

from __future__ import annotations

import dataclasses
import math
import time

from paperlib.fdp.validation import ParameterError, ParameterTypeError, check_bool
from paperlib.mechanisms.claimed import check_prv_grid, sgm_claim_epsilon
from paperlib.mechanisms.certified import certified_interval, forced_epsilon
from paperlib.mechanisms.multiround import sgm_replace_one_rounds
from paperlib.practitioner.report import (INTERVAL_FIELDS, CheckReport, Claim, NeighbourVerdict, fmt_epsilon,
                                         format_statement)
from paperlib.practitioner.run import Neighbour, Run, live_opacus_run

__all__ = ["check_run", "check", "check_opacus", "format_statement", "summary", "FIX_NAME"]

#: the fix :mod:`paperlib.practitioner.fix` provides (Opacus 1.x: divide by the configured batch size)
FIX_NAME = ("paperlib.practitioner.fix_normaliser(optimizer, batch_size) after make_private (Opacus 1.x): it divides "
            "by the configured batch size, a constant fixed before seeing the data")
#: rates closer than this (relative) are the same rate computed two ways (float rounding)
_RATE_RTOL = 1e-12


def check_run(opacus_version: str | None = None, dataset_size: int | None = None, batch_size: int | None = None, *,
              sample_rate: float | None = None, epochs: int | None = None, steps: int | None = None,
              noise_multiplier: float, n_params: int, loss_reduction: str = "mean", poisson: bool | None = None,
              delta: float = 1e-5, accountant: str | None = None, drop_last: bool = False,
              charged_rate: bool = False, implementation: str = "opacus", divisor: str = "release",
              assume_release: bool = False, allow_large: bool = False, mechanism: str | None = None,
              pld_options: dict | None = None) -> CheckReport:
    """What a DP-SGD run claims and what it is certified to give (module docstring; THEORY.md §10, §11).

    The mechanism from paper Table 2 (the stored code audit), the claim from the release's
    accountant (:func:`~paperlib.mechanisms.claimed.sgm_claim_epsilon`), the certified and
    forced epsilon of each neighbour from :func:`~paperlib.mechanisms.certified.certified_interval`.

    Parameters are those of :class:`~paperlib.practitioner.run.Run` (``opacus_version`` for Opacus;
    ``implementation='dpsur'`` for DPSUR's code), plus ``pld_options`` (accuracy options of the PLD
    engine, :class:`~paperlib.fdp.pld.PLDComposition`).

    Returns
    -------
    A :class:`~paperlib.practitioner.report.CheckReport` (``to_json()`` for a dict): the settings and the
    rates, the claim, one :class:`~paperlib.practitioner.report.NeighbourVerdict` per neighbour (removal,
    addition: verdict in {stands, holds, refuted, unresolved, not covered}, certified and forced epsilon with
    their brackets, the attack, a sentence), the run's certified and forced epsilon, ``claim_stands``,
    ``remedies``, ``summary``, ``notes``, ``seconds``.

    Raises ValueError (TypeError for a boolean that is not one) with one line naming the setting.
    """
    if pld_options is not None and not isinstance(pld_options, dict):
        raise ParameterTypeError("pld_options",
                                 f"pld_options must be a dict of PLD accuracy options or None, got {type(pld_options).__name__}")
    run = Run(dataset_size=dataset_size, noise_multiplier=noise_multiplier, n_params=n_params,
              implementation=implementation, opacus_version=opacus_version, batch_size=batch_size,
              sample_rate=sample_rate, epochs=epochs, steps=steps, loss_reduction=loss_reduction, divisor=divisor,
              poisson=poisson, delta=delta, accountant=accountant, drop_last=drop_last, charged_rate=charged_rate,
              assume_release=assume_release, allow_large=allow_large, mechanism=mechanism)
    return check(run, pld_options)


def check(run: Run, pld_options: dict | None = None) -> CheckReport:
    """The report of :func:`check_run` for a validated :class:`~paperlib.practitioner.run.Run`.

    Its settings are not checked again: each neighbouring pair's computations take the pair's
    :class:`~paperlib.mechanisms.setting.Setting`, made once by :meth:`~paperlib.practitioner.run.Run.neighbours`.
    """
    t0 = time.perf_counter()
    report = _report(run, dict(pld_options or {}))
    report.seconds = time.perf_counter() - t0
    return report


def _claim(run: Run) -> Claim:
    acc, rel = run.claim_accountant, run.release
    if acc == "prv":  # the size limit in the run's own words, before the accountant computes
        check_prv_grid(run.q_account, run.noise_multiplier, run.rounds, run.delta, allow=run.allow_large,
                       sigma_name="noise_multiplier", rounds_name="steps", override="allow_large=True")
    eps = sgm_claim_epsilon(run.q_account, run.noise_multiplier, rounds=run.rounds, delta=run.delta, accountant=acc,
                            conversion=rel.rdp_conversion, orders=rel.rdp_orders, allow_large=True)
    # the conversion's bound below 0 still means (0, delta)-DP: shown as 0, its value kept
    return Claim(accountant=acc, epsilon=max(eps, 0.0), accountant_error=0.01 if acc == "prv" else None,
                 source=rel.claim_source(acc), conversion_value=eps if eps < 0 else None)


def _normaliser(run: Run) -> str:
    if run.divisor == "public":  # the fix: SGM by a public constant
        return "a public constant (the configured batch size)"
    return run.mechanism.spec.normaliser_words(run.dataset_size, run.q_account)


def _report(run: Run, opts: dict) -> CheckReport:
    claim = _claim(run)
    report = CheckReport(
        inputs=run.inputs(), implementation=run.implementation, release=run.release.name,
        release_assumed=run.release.assumed, mechanism=run.mechanism, mechanism_note=run.mechanism_note,
        sample_rate=run.q_sample, accountant_sample_rate=run.q_account, sample_rate_rule=run.sample_rate_rule,
        steps_per_epoch=run.steps_per_epoch, steps=run.rounds, normaliser=_normaliser(run), delta=run.delta,
        claim=claim)
    for pair in run.neighbours():
        e = _neighbour(run, pair, opts)
        _verdict(e, claim.epsilon)
        report.neighbours.append(e)
    report.replace_one = _replace_one(run, opts, claim.epsilon)
    report.remedies = _remedies(run, report.neighbours)
    report.notes = _notes(run, report.neighbours, claim)
    report.summary = summary(claim.epsilon, [(e.name, e.verdict) for e in report.neighbours])
    return report


def _replace_one(run: Run, opts: dict, claimed: float) -> dict:
    """The run under the replace-one relation (THEORY.md §11.3d): with the data-set size public, the sampling rate,
    the normaliser and the number of steps are public constants, so a release whose divisor is fixed before the
    batch (SGM, EASGM, FEASGM, a public divisor) is SGM post-processed; its exact epsilon is the
    Poisson-subsampled Gaussian's under replace-one, composed (PLD, both orders)."""
    # the charged rate, as the add/remove numbers (conservative for a loader that samples at a lower rate)
    out = {"relation": "replace-one", "dataset_size": "public", "sample_rate": run.q_account, "steps": run.rounds}
    spec = run.mechanism.spec
    if spec.fixed_normaliser is None:
        out.update(epsilon=None, why=f"{spec.title} divides by a count drawn with the batch ({spec.rule}), so it is "
                                     "not SGM post-processed under replace-one either, and no certificate for it is "
                                     "implemented")
        return out
    comp = sgm_replace_one_rounds(run.q_account, run.noise_multiplier, rounds=run.rounds,
                                  **{k: v for k, v in opts.items() if k in ("rel_tol", "max_length")})
    lo, hi = comp.epsilon_bounds(run.delta)
    out.update(epsilon=hi, epsilon_bracket=[lo, hi], claim_holds=hi <= claimed,
               method="the Poisson-subsampled Gaussian under replace-one, composed by PLD: exact, the release being "
                      "SGM post-processed when the size is public")
    return out


def summary(claimed: float, verdicts) -> str:
    """The report's one-sentence summary, from the neighbours' verdicts ``[(name, verdict), ...]`` alone.

    "stands" when every verdict is stands, "holds" when every verdict is stands or holds; "does not hold" only when an attack refutes it on
    some neighbour; otherwise (unresolved, not covered) the claim is neither certified nor refuted
    ("is not established"). Every sentence but the first names each neighbour's verdict.
    """
    verdicts = list(verdicts)
    each = ", ".join(f"{name}: {v}" for name, v in verdicts)
    if all(v == "stands" for _, v in verdicts):
        return f"The claimed epsilon {claimed:.4g} stands for both neighbours: the SGM analysis applies."
    if all(v in ("stands", "holds") for _, v in verdicts):
        return f"The claimed epsilon {claimed:.4g} holds for both neighbours."
    if any(v == "refuted" for _, v in verdicts):
        return f"The claimed epsilon {claimed:.4g} does not hold for every neighbour ({each})."
    return (f"The claimed epsilon {claimed:.4g} is not established for every neighbour ({each}): no attack refutes "
            "it, and no analysis certifies it either.")


def _notes(run: Run, neighbours: list, claim: Claim) -> list[str]:
    notes = []
    if run.release.assumed:
        notes.append(run.release.assumed + " (assume_release)")
    if not math.isclose(run.q_sample, run.q_account, rel_tol=_RATE_RTOL, abs_tol=0.0):
        notes.append(f"the sample rate {run.q_sample:.6g} gives Opacus {_charged_words(run.q_sample, run.q_account)}: "
                     "it charges the accountant that rate and normalises with it; the claim and the certified numbers "
                     "use it (conservative for a loader of yours that samples at the lower rate)")
    if run.mechanism.spec.floors is not None and any(e.floors_agree for e in neighbours) \
            and run.batch_size is not None and run.sample_rate is None and run.dataset_size % run.batch_size:
        notes.append(f"Opacus 1.x samples at 1/len(data_loader) = 1/{round(1 / run.q_sample)}, not batch/N: N q is not "
                     "an integer here, so int(N q) can agree on both datasets")
    if claim.conversion_value is not None:
        notes.append(f"the accountant's RDP conversion gives {claim.conversion_value:.4g} < 0 at this delta: the "
                     "claim is (0, delta)-DP, shown as 0")
    return notes


def _why(run: Run, entry: NeighbourVerdict) -> str:
    spec, K = run.mechanism.spec, entry.normalisers
    if spec.sgm_always:
        return "the noisy sum is divided by a public constant: SGM" if run.divisor == "public" else spec.sgm_words
    if entry.sgm:
        return f"both datasets divide by int(N q) = {K[0]}: post-processing of SGM"
    return spec.not_sgm(K)


def _neighbour(run: Run, pair: Neighbour, opts: dict) -> NeighbourVerdict:
    """One neighbouring pair (:meth:`Run.neighbours`): its rates, normalisers, certified and forced epsilon."""
    name = pair.name
    entry = NeighbourVerdict(name=name, sizes=list(pair.sizes),
                             description="D_train minus one record vs D_train" if name == "removal"
                             else "D_train vs D_train plus one record",
                             sample_rates=list(pair.sample_rates), steps_per_epoch=list(pair.steps_per_epoch),
                             normalisers=None if pair.normalisers is None else list(pair.normalisers))
    if pair.update_counts is not None:
        return _count_refutes(entry, pair)
    if pair.not_covered:
        entry.computed, entry.not_covered, entry.why = "not covered", True, pair.not_covered
        return entry
    entry.floors_agree, entry.sgm = pair.floors_agree, pair.sgm
    entry.why = _why(run, entry)
    m, setting = run.mechanism, pair.setting
    qs_a, qa_a = pair.sample_rates[0], pair.charged_rates[0]
    try:
        r = certified_interval(setting, **opts)
    except ValueError as exc:
        # no certificate here (the mechanism's is not available, or numerics out of range): the forced end alone
        msg = str(exc).splitlines()[0]
        if not m.spec.paper:
            msg = f"no certificate of {m.spec.title}'s rule is available in this paperlib ({msg})"
        entry.computed, entry.certified_error = "no certificate", msg
        entry.why += f"; certified epsilon not computed: {msg}"
        try:
            fr = forced_epsilon(setting, **opts)
            entry.epsilon_forced, entry.epsilon_forced_bracket = fr.epsilon_forced, fr.epsilon_forced_bracket
            entry.forced_method, entry.forced_attack = fr.forced_method, fr.forced_attack
            entry.forced_is_attack = _is_attack(fr)
        except ValueError:
            entry.epsilon_forced = None
        return entry
    for k in INTERVAL_FIELDS:
        setattr(entry, k, getattr(r, k))
    entry.forced_is_attack = _is_attack(r)
    if not math.isclose(qs_a, qa_a, rel_tol=_RATE_RTOL, abs_tol=0.0):
        # make_private re-wraps the loader at the charged rate; a DPDataLoader of yours (poisson_sampling=False)
        # samples at qs_a < qa_a: certified at qa_a is valid for both, an attack at qa_a forces nothing on the latter
        entry.forced_is_attack = False
        entry.note = (f"the sample rate {qs_a:.6g} gives Opacus {_charged_words(qs_a, qa_a)}, the rate it charges, "
                      "normalises with and (make_private's own loader) samples with; these numbers use it, valid "
                      f"(conservative) for a loader of yours that samples at {qs_a:.6g}, where the lower end is not a "
                      "forced value")
    return entry


def _charged_words(q_sample: float, q_charged: float) -> str:
    """Why Opacus charges another rate than its loader samples with, in words (only called when they differ)."""
    k, whole = round(1 / q_charged), round(1 / q_sample)
    if math.isclose(1 / q_sample, whole, rel_tol=1e-9):  # 1/q is a whole number but int() truncated it by an ulp
        return (f"1/int(1/q) = 1/{k} = {q_charged:.6g} (1/q = {1 / q_sample!r} falls just below {whole} in floating "
                "point)")
    return (f"1/len(data_loader) = 1/int(1/q) = 1/{k} = {q_charged:.6g}: 1/q = {1 / q_sample:.6g} is not a whole "
            "number of steps an epoch")


def _count_refutes(entry: NeighbourVerdict, pair: Neighbour) -> NeighbourVerdict:
    """The two datasets get different numbers of updates (THEORY.md §11.3c): the count is a perfect test, so the
    forced epsilon is infinite, and the certified one with it (no finite epsilon holds for the sequence of
    updates; a certified epsilon of a release of the final model only is not known)."""
    (T_a, T_b), (s_a, s_b) = pair.update_counts, pair.steps_per_epoch
    a, b = pair.sizes
    entry.computed, entry.update_counts = "update count", [T_a, T_b]
    entry.why = (f"the number of updates differs ({s_a:,} vs {s_b:,} an epoch, {T_a:,} vs {T_b:,} in all): Opacus "
                 f"runs len(data_loader) = ceil(N/batch) steps an epoch on each dataset, so counting the updates tells "
                 f"the two apart")
    entry.epsilon_forced, entry.epsilon_forced_bracket = math.inf, [math.inf, math.inf]
    entry.forced_method = "exact: the two counts differ surely"
    entry.forced_attack = {"name": "count the updates", "datasets": f"D: {a} records, D': the same plus a target",
                           "gradients": "any", "test": f"the number of released updates ({T_a:,} on D, {T_b:,} on D')",
                           "method": entry.forced_method}
    entry.forced_is_attack = True
    # the exact epsilon of the released sequence is infinite, so the certificate is too (as the accountant says)
    entry.epsilon_certified, entry.epsilon_certified_bracket = math.inf, [math.inf, math.inf]
    entry.note = "a release of the final model only has no known certificate"
    return entry


def _is_attack(r) -> bool:
    """Is the forced end a named attack (a valid lower bound of the true epsilon)? Read from the result
    (a :class:`~paperlib.mechanisms.certified.CertifiedInterval` or ``ForcedEpsilon``): its ``forced_attack``."""
    return bool(r.forced_attack)


def _attack_name(entry: NeighbourVerdict) -> str:
    """The named attack behind the forced end (``forced_attack['name']``), else its method, for a sentence."""
    att = entry.forced_attack
    if isinstance(att, dict) and att.get("name"):
        return f"the attack '{att['name']}'"
    return f"a real attack ({entry.forced_method or 'named in the report'})"


def _verdict(entry: NeighbourVerdict, claim: float) -> None:
    """Fill ``verdict``, ``sentence`` and ``claim_stands`` of a neighbour's verdict (module docstring)."""
    c, f = entry.epsilon_certified, entry.epsilon_forced
    attack = bool(entry.forced_is_attack)
    sizes = "{:,} vs {:,}".format(*entry.sizes)
    head = f"{entry.name} ({sizes})"
    why = entry.why
    if entry.computed == "update count":  # first: the SGM's own rounds, counted, are refuted too
        verdict, sentence = "refuted", (f"{head}: claim refuted: {why}; no analysis can certify a finite epsilon for "
                                        f"the sequence of updates (forced epsilon = inf).")
    elif entry.sgm and c is not None:
        verdict, sentence = "stands", f"{head}: the SGM claim stands ({why})."
    elif c is not None and c <= claim:
        verdict, sentence = "holds", (f"{head}: the claim holds: certified epsilon {c:.4g} <= claimed {claim:.4g} "
                                      f"({why}).")
    elif f is not None and attack and f > claim:
        verdict = "refuted"
        by = _attack_name(entry)
        if c is None:
            sentence = (f"{head}: claim refuted: {by} forces epsilon >= {f:.4g} > {claim:.4g}; certified "
                        f"epsilon not computed ({why}).")
        else:
            sentence = (f"{head}: claim refuted: {by} forces epsilon >= {f:.4g} > claimed {claim:.4g}, so no "
                        f"analysis of this mechanism can certify the claim (certified {c:.4g}; {why}).")
    elif entry.not_covered:
        verdict, sentence = "not covered", f"{head}: not covered: {why}."
    elif c is None:
        verdict, sentence = "unresolved", f"{head}: claim not certified: {why}."
    else:
        lower = (f"{_attack_name(entry)} forces only {f:.4g}" if attack else
                 f"the lower end {fmt_epsilon(f)} is an upper bound of the index-revealed guarantee, not an attack")
        verdict, sentence = "unresolved", (f"{head}: claim not certified: the run is certified at {c:.4g} > claimed "
                                           f"{claim:.4g}, and {lower} ({why}).")
    entry.verdict, entry.sentence = verdict, sentence
    entry.claim_stands = verdict in ("stands", "holds")


def _variant(run: Run, **changes) -> Run | None:
    """The run with ``changes`` (validated as a new run), or None when the changed settings are refused."""
    try:
        return dataclasses.replace(run, mechanism=run.given_mechanism, **changes)
    except ValueError:
        return None


def _resolves(run: Run | None) -> bool:
    """Does this run give both neighbours the SGM analysis with the same number of updates? (the remedied setting,
    derived as ``check`` derives any run: a remedy is offered only where it resolves both neighbours)"""
    return run is not None and all(p.sgm and p.update_counts is None and not p.not_covered for p in run.neighbours())


def _batch_sizes(run: Run, **changes) -> list[int]:
    """Two batch sizes near the run's for which the run with ``changes`` resolves both neighbours."""
    b, N, good = run.batch_size, run.dataset_size, []
    if b is None:
        return good
    for d in range(0, 65):
        for c in sorted({b - d, b + d}):
            if 1 <= c <= N and _resolves(_variant(run, batch_size=c, **changes)):
                good.append(c)
        if len(good) >= 2:
            break
    return sorted(good)[:2]


def _remedies(run: Run, neighbours: list) -> list[str]:
    """Changes that make the claim hold on both neighbours, each checked by deriving the changed run."""
    if all(e.claim_stands for e in neighbours):
        return []
    out = []
    counts = any(e.computed == "update count" for e in neighbours)
    if run.mechanism.spec.skips_empty_batch:
        out.append("divide the noisy sum by a public constant and take a (noise-only) step on an empty batch, as "
                   "Opacus 1.x with the fix does: the update is then SGM's, so the SGM claim holds")
        return out
    sgm_ways = [("loss_reduction='sum' (and reduction='sum' in the loss) with the learning rate divided by the batch "
                 "size (paperlib.practitioner.sum_reduction_lr): the update is then SGM's, so the SGM claim holds",
                 {"loss_reduction": "sum"})]
    if run.release.samples_per_loader:  # fix_normaliser patches Opacus 1.x's DPOptimizer
        sgm_ways.append((f"the fix {FIX_NAME}: post-processing of SGM, so the SGM claim holds", {"divisor": "public"}))
    for text, changes in sgm_ways:
        if _resolves(_variant(run, **changes)):
            out.append(text)
        elif counts and (sizes := _batch_sizes(run, **changes)):
            out.append(f"{text}, with a batch size such as {' or '.join(map(str, sizes))}: with {run.batch_size} "
                       "the number of steps an epoch differs between neighbouring datasets")
    if run.release.samples_per_loader and run.sample_rate is None and run.mechanism.spec.floors:
        good = _batch_sizes(run)
        if good:
            out.append(f"keep loss_reduction='mean' but use a batch size for which the number of steps an epoch and "
                       f"int(N q) are the same on both datasets of both neighbours, e.g. {', '.join(map(str, good))} "
                       "(then FEASGM is post-processing of SGM)")
    elif run.release.implementation == "opacus" and run.release.key[0] == 0 and run.batch_size is not None:
        good = _batch_sizes(run, opacus_version="1.6.0", assume_release=False)
        if good:
            out.append(f"Opacus 1.x (checked with 1.6.0) with batch size {' or '.join(map(str, good))}: the same "
                       "number of steps an epoch and int(N q) on both datasets of both neighbours, so FEASGM is then "
                       "post-processing of SGM")
    return out


# ------------------------------------------------------------------------------ a live Opacus run
def _opacus_objects(privacy_engine, optimizer, data_loader, model):
    """Refuse objects of the wrong kind (TypeError naming the argument) before reading any of them."""
    from opacus import PrivacyEngine
    from opacus.data_loader import DPDataLoader
    from opacus.optimizers import DPOptimizer
    from torch.nn import Module
    from torch.utils.data import DataLoader

    if privacy_engine is not None and not isinstance(privacy_engine, PrivacyEngine):
        raise ParameterTypeError("privacy_engine",
                                 f"privacy_engine must be the opacus.PrivacyEngine that made the run private (or None), got "
                                 f"{type(privacy_engine).__name__}")
    if not isinstance(optimizer, DPOptimizer):
        raise ParameterTypeError("optimizer",
                                 f"optimizer must be the DPOptimizer returned by PrivacyEngine.make_private, got "
                                 f"{type(optimizer).__name__}")
    if not isinstance(data_loader, DataLoader):
        raise ParameterTypeError("data_loader",
                                 f"data_loader must be the DataLoader returned by PrivacyEngine.make_private, got "
                                 f"{type(data_loader).__name__}")
    if not isinstance(data_loader, DPDataLoader):
        raise ParameterError("data_loader",
                             "data_loader: not a DPDataLoader (make_private(poisson_sampling=True) returns one); "
                             "without Poisson sampling neither the accountant nor this analysis applies")
    if model is not None and not isinstance(model, Module):
        raise ParameterTypeError("model",
                                 f"model must be the torch.nn.Module being trained (or None), got {type(model).__name__}")


def check_opacus(privacy_engine, optimizer, data_loader, *, epochs: int | None = None, delta: float,
                 model=None, steps: int | None = None, accountant: str | None = None,
                 batch_size: int | None = None, drop_last: bool = False,
                 allow_large: bool = False, pld_options: dict | None = None) -> CheckReport:
    """:func:`check_run` for a live Opacus 1.x run (the objects ``make_private`` returned; THEORY.md §10, §11).

    Reads what Opacus holds: ``optimizer.noise_multiplier``, ``optimizer.loss_reduction``,
    ``optimizer.expected_batch_size`` (``int(len(dataset) * q)`` as ``make_private`` sets it, or the
    public constant :func:`~paperlib.practitioner.fix.fix_normaliser` set: then the divisor is
    ``'public'``, SGM), the sample rate of the ``DPDataLoader`` (its ``len`` gives the steps per
    epoch), ``len(data_loader.dataset)``, the number of trainable parameters of ``model`` (or of the
    optimizer's parameters when ``model`` is None), and the installed Opacus version. The accountant
    defaults to the one ``privacy_engine`` holds (its ``mechanism()``, when 'rdp' or 'prv').
    ``epochs`` (or ``steps``, the total) as for the run. ``batch_size`` and ``drop_last``: those of the
    DataLoader given to ``make_private`` (Opacus does not keep them). A neighbouring dataset gets its own
    ``len(data_loader)``, so its rate can depend on the batch size: with ``batch_size`` the report is the one
    ``python -m paperlib check --batch-size`` gives; without it, the batch sizes that fit the live loader are
    tried, and a run whose neighbours differ between them is refused (:func:`~paperlib.practitioner.run.live_opacus_run`).
    Returns the report of :func:`check_run` plus ``read_from_opacus`` (what was read).

    Raises TypeError naming the argument for an object of the wrong kind (checked before any is
    read), ValueError (one line) when the loader does not Poisson-sample, when the optimizer's
    divisor follows neither rule, or for a bad setting.
    """
    _opacus_objects(privacy_engine, optimizer, data_loader, model)
    allow_large = check_bool(allow_large, "allow_large")
    import opacus
    import torch

    from paperlib.practitioner.fix import fixed_divisor

    q_sample = float(data_loader.sample_rate)
    N = len(data_loader.dataset)
    params = model.parameters() if model is not None else (p for g in optimizer.param_groups for p in g["params"])
    n = int(sum(p.numel() for p in params if p.requires_grad))
    loss_reduction = optimizer.loss_reduction
    if accountant is None and privacy_engine is not None:
        m = privacy_engine.accountant.mechanism()
        accountant = m if m in ("rdp", "prv") else None
    public = fixed_divisor(optimizer)
    run, how = live_opacus_run(dataset_size=N, sample_rate=q_sample, batch_size=batch_size, drop_last=drop_last,
                               noise_multiplier=float(optimizer.noise_multiplier), n_params=n,
                               opacus_version=opacus.__version__, epochs=epochs, steps=steps,
                               loss_reduction=loss_reduction, divisor="release" if public is None else "public",
                               poisson=True, delta=delta, accountant=accountant, allow_large=allow_large)
    K = int(N * run.q_account)
    if public is None and loss_reduction == "mean" and int(optimizer.expected_batch_size) != K:
        raise ParameterError("optimizer",
                             f"optimizer.expected_batch_size = {optimizer.expected_batch_size} is not int(len(dataset) "
                             f"* sample_rate) = {K}: not the Opacus {opacus.__version__} make_private rule (distributed, "
                             "or a modified optimizer? a constant set by paperlib.practitioner.fix_normaliser is "
                             "recognised)")
    report = check(run, pld_options)
    report.read_from_opacus = {"opacus_version": opacus.__version__, "dataset_size": N,
                                  "sample_rate": q_sample, "steps_per_epoch": len(data_loader),
                                  "expected_batch_size": int(optimizer.expected_batch_size),
                                  "fixed_divisor": public,
                                  "noise_multiplier": float(optimizer.noise_multiplier),
                                  "loss_reduction": loss_reduction, "n_params": n,
                                  "accountant": accountant, "torch": torch.__version__}
    if batch_size is None and run.batch_size is not None:  # inferred: the report gives what was read
        report.inputs.update(batch_size=None, sample_rate=q_sample)
    report.notes += how
    return report
