"""The typed results of a practitioner's check: :class:`Claim`, :class:`NeighbourVerdict`, :class:`CheckReport`.

:func:`~paperlib.practitioner.check.check_run` returns a :class:`CheckReport`; the command line, the
accountant and the book read its attributes. Each class has one :meth:`to_json`, the only place it
becomes a dict (the ``--json`` output of ``python -m paperlib check`` and the book's result files).
Epsilons are floats (``inf`` where no finite epsilon exists; JSON writes it as null through the
command line); brackets are ``[lower, upper]`` lists.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from paperlib.fdp.validation import ParameterError
from paperlib.mechanisms.core import Mechanism

__all__ = ["Claim", "NeighbourVerdict", "CheckReport", "VERDICTS", "format_statement", "fmt_epsilon"]

#: a neighbour's verdict on the claim (THEORY.md §11; :mod:`~paperlib.practitioner.check`)
VERDICTS = ("stands", "holds", "refuted", "unresolved", "not covered")


@dataclass
class Claim:
    """The claimed epsilon: the release's accountant over the run's steps (THEORY.md §10).

    ``accountant`` ('rdp' or 'prv'); ``epsilon`` (>= 0); ``accountant_error`` (the PRV accountant's
    ``eps_error``, None for RDP); ``source`` (who computes it, in words); ``conversion_value`` (the RDP
    conversion's value when it is below 0, shown as 0; else None).
    """

    accountant: str
    epsilon: float
    accountant_error: float | None
    source: str
    conversion_value: float | None = None

    def to_json(self) -> dict:
        out = {"accountant": self.accountant, "epsilon": self.epsilon, "accountant_error": self.accountant_error,
               "source": self.source}
        if self.conversion_value is not None:
            out["conversion_value"] = self.conversion_value
        return out


#: the fields of a certified pair copied from :class:`~paperlib.mechanisms.certified.CertifiedInterval`
INTERVAL_FIELDS = ("epsilon_certified", "epsilon_certified_bracket", "certified_accounting_error", "epsilon_forced",
                   "epsilon_forced_bracket", "forced_accounting_error", "forced_method", "forced_attack",
                   "certified_method", "accuracy_met", "certified_label", "forced_label", "case", "statement")


@dataclass
class NeighbourVerdict:
    """One neighbouring pair's answer: its sizes and rates, how it was computed, and the verdict on the claim.

    ``name`` ('removal' or 'addition'), ``sizes`` ``[N', N' + 1]``, ``description``, ``sample_rates`` (on each
    data set), ``normalisers`` (what the code divides by on each, None when the rates differ),
    ``floors_agree`` (FEASGM only), ``sgm`` (post-processing of SGM), ``not_covered`` (no analysis covers the
    pair), ``why`` (in words). The numbers: ``epsilon_certified`` (None when not computed; then
    ``certified_error`` says why) and ``epsilon_forced`` with their brackets and accountant errors, and the
    fields of :data:`INTERVAL_FIELDS`; ``forced_is_attack`` (the forced end is a named attack). The verdict:
    ``verdict`` (one of :data:`VERDICTS`), ``sentence``, ``claim_stands``; ``note`` (a remark on the rates);
    ``steps_per_epoch`` (on each data set) and, where they differ, ``update_counts`` (updates in all on each).
    ``computed``: 'not covered', 'no certificate', 'update count' (the two data sets get different numbers of
    updates: forced epsilon inf, no certified epsilon, THEORY.md §11.3c) or 'certified' (which numbers exist).
    """

    name: str
    sizes: list
    description: str
    sample_rates: list
    normalisers: list | None = None
    floors_agree: bool | None = None
    sgm: bool = False
    not_covered: bool = False
    why: str = ""
    computed: str = "certified"
    epsilon_certified: float | None = None
    epsilon_certified_bracket: list | None = None
    certified_accounting_error: float | None = None
    certified_method: str | None = None
    certified_label: str | None = None
    certified_error: str | None = None
    accuracy_met: bool | None = None
    epsilon_forced: float | None = None
    epsilon_forced_bracket: list | None = None
    forced_accounting_error: float | None = None
    forced_method: str | None = None
    forced_attack: dict | None = None
    forced_label: str | None = None
    forced_is_attack: bool | None = None
    case: str | None = None
    statement: str | None = None
    note: str | None = None
    steps_per_epoch: list | None = None
    update_counts: list | None = None
    verdict: str | None = None
    sentence: str | None = None
    claim_stands: bool = False

    def to_json(self) -> dict:
        """The verdict as a dict: the fields that exist for how it was computed (``computed``)."""
        out = {"name": self.name, "sizes": list(self.sizes), "description": self.description,
               "sample_rates": list(self.sample_rates)}
        if self.normalisers is not None:
            out["normalisers"] = list(self.normalisers)
        if self.steps_per_epoch is not None:
            out["steps_per_epoch"] = list(self.steps_per_epoch)
        if self.update_counts is not None:
            out["update_counts"] = list(self.update_counts)
        if self.computed == "not covered":
            out.update(sgm=self.sgm, epsilon_certified=None, epsilon_forced=None, not_covered=True, why=self.why)
        else:
            if self.floors_agree is not None:
                out["floors_agree"] = self.floors_agree
            out.update(sgm=self.sgm, why=self.why)
            if self.computed == "no certificate":
                out.update(epsilon_certified=None, certified_error=self.certified_error)
                if self.forced_method is not None:
                    out.update(epsilon_forced=self.epsilon_forced, epsilon_forced_bracket=self.epsilon_forced_bracket,
                               forced_method=self.forced_method, forced_attack=self.forced_attack,
                               forced_is_attack=self.forced_is_attack)
                else:
                    out["epsilon_forced"] = None
            else:
                out.update({k: getattr(self, k) for k in INTERVAL_FIELDS if k != "case" or self.case is not None})
                out["forced_is_attack"] = self.forced_is_attack
                if self.note is not None:
                    out["note"] = self.note
        out.update(verdict=self.verdict, sentence=self.sentence, claim_stands=self.claim_stands)
        return out


@dataclass
class CheckReport:
    """What a DP-SGD run claims and what it is certified to give (:func:`~paperlib.practitioner.check.check_run`).

    ``inputs`` (the settings as given, validated: a dict), ``implementation``, ``release`` (its name),
    ``release_assumed`` (None, or why the rule is assumed), ``mechanism`` (the mechanism value),
    ``mechanism_note``, ``sample_rate``, ``accountant_sample_rate``, ``sample_rate_rule``, ``steps_per_epoch``,
    ``steps``, ``normaliser`` (in words), ``delta``, ``claim`` (:class:`Claim`), ``neighbours`` (removal,
    addition: :class:`NeighbourVerdict`), ``epsilon_certified`` (the larger over the neighbours, None when one
    is not computed), ``epsilon_forced`` (the larger), ``claim_stands`` (both neighbours), ``remedies``,
    ``summary``, ``notes``, ``seconds`` (wall time), ``read_from_opacus`` (what a live run gave; None otherwise),
    ``replace_one`` (the other neighbouring relation, THEORY.md §11.3d: the data-set size public, one record
    replaced; ``epsilon`` with its ``epsilon_bracket`` where the release is SGM post-processed, else ``epsilon``
    None and ``why``). The neighbours' numbers are for add/remove (the data-set size private), the relation the
    accountants' claims are made under.
    """

    inputs: dict
    implementation: str
    release: str
    release_assumed: str | None
    mechanism: Mechanism
    mechanism_note: str
    sample_rate: float
    accountant_sample_rate: float
    sample_rate_rule: str
    steps_per_epoch: int
    steps: int
    normaliser: str
    delta: float
    claim: Claim
    neighbours: list = field(default_factory=list)
    remedies: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    summary: str = ""
    seconds: float = 0.0
    read_from_opacus: dict | None = None
    replace_one: dict | None = None

    @property
    def claimed_epsilon(self) -> float:
        """The claimed epsilon (the claim's)."""
        return self.claim.epsilon

    @property
    def epsilon_certified(self) -> float | None:
        """The larger certified epsilon over the neighbours; None when one is not computed."""
        certs = [e.epsilon_certified for e in self.neighbours]
        return max(certs) if certs and all(c is not None for c in certs) else None

    @property
    def epsilon_forced(self) -> float | None:
        """The larger forced epsilon over the neighbours (None when none is computed)."""
        forced = [e.epsilon_forced for e in self.neighbours if e.epsilon_forced is not None]
        return max(forced) if forced else None

    @property
    def interval(self) -> list:
        """``[epsilon_forced, epsilon_certified]``."""
        return [self.epsilon_forced, self.epsilon_certified]

    @property
    def claim_stands(self) -> bool:
        """The claim stands or holds for both neighbours."""
        return all(e.claim_stands for e in self.neighbours)

    def neighbour(self, name: str) -> NeighbourVerdict:
        """The verdict of the neighbour ``name`` ('removal' or 'addition'; ParameterError naming ``name`` otherwise)."""
        for e in self.neighbours:
            if e.name == name:
                return e
        raise ParameterError("name", f"name must be one of {', '.join(e.name for e in self.neighbours)}, got {name!r}")

    def __str__(self) -> str:
        """The report as a short statement (:func:`format_statement`)."""
        return format_statement(self)

    def to_json(self) -> dict:
        """The report as one JSON-ready dict (mechanism as its name; epsilons as floats, inf kept)."""
        out = {"command": "check", "inputs": dict(self.inputs), "implementation": self.implementation,
               "release": self.release, "release_assumed": self.release_assumed, "mechanism": str(self.mechanism),
               "mechanism_note": self.mechanism_note, "sample_rate": self.sample_rate,
               "accountant_sample_rate": self.accountant_sample_rate, "sample_rate_rule": self.sample_rate_rule,
               "steps_per_epoch": self.steps_per_epoch, "steps": self.steps, "normaliser": self.normaliser,
               "delta": self.delta, "claim": self.claim.to_json(), "claimed_epsilon": self.claimed_epsilon,
               "neighbours": [e.to_json() for e in self.neighbours], "epsilon_certified": self.epsilon_certified,
               "epsilon_forced": self.epsilon_forced, "interval": self.interval, "claim_stands": self.claim_stands,
               "remedies": list(self.remedies), "notes": list(self.notes), "summary": self.summary,
               "seconds": self.seconds}
        if self.read_from_opacus is not None:
            out["read_from_opacus"] = dict(self.read_from_opacus)
        if self.replace_one is not None:
            out["replace_one"] = dict(self.replace_one)
        return out


def fmt_epsilon(x, digits=4) -> str:
    """An epsilon for a sentence: ``digits`` significant digits, "inf", or "-" for None."""
    if x is None:
        return "-"
    return f"{x:.{digits}g}" if math.isfinite(x) else "inf"


def format_statement(report: CheckReport, width: int = 88, code: str | None = None) -> str:
    """The report (a :class:`~paperlib.practitioner.report.CheckReport`) as a short statement (plain text, lines
    of at most about ``width`` characters). ``code``: what ran, in words, where it is not the release the report
    names (``audit-step``: a step checked as the mechanism its updates show)."""
    import textwrap

    r, i = report, report.inputs
    wrap = lambda s: textwrap.fill(s, width)  # noqa: E731
    how = (f"batch size {i['batch_size']:,}" if i["batch_size"] is not None else f"sample rate {i['sample_rate']:g}")
    if code is None:
        code = (f"Opacus {i['opacus_version']} (Poisson sampling, loss_reduction='{i['loss_reduction']}'"
                + (", divisor: a public constant" if i.get("divisor") == "public" else "") + ")"
                if r.implementation == "opacus" else f"{r.release} (Poisson sampling)")
    lines = [wrap(f"DP-SGD with {code} over {i['dataset_size']:,} records, {how}: sampling rate "
                  f"{r.sample_rate:.6g}, {r.steps:,} steps"
                  + (f" ({i['epochs']} epoch{'s' * (i['epochs'] != 1)} of {r.steps_per_epoch:,})" if i["epochs"] else "")
                  + f", noise multiplier {i['noise_multiplier']:g}, {i['n_params']:,} trainable parameters."),
             wrap(f"Mechanism run: {r.mechanism.title} ({r.mechanism_note}); it divides by "
                  f"{r.normaliser}."),
             "",
             wrap(f"Claimed: epsilon = {fmt_epsilon(r.claimed_epsilon)} at delta = {r.delta:g} "
                  f"({r.claim.source}; the SGM analysis)."),
             "",
             f"{'neighbour':<10}{'sizes':<17}{'claim':<13}{'certified eps':<15}{'[forced, certified]'}"]
    if r.release_assumed:
        lines.insert(2, wrap(f"Release rule ASSUMED: {r.release_assumed}."))
    for e in r.neighbours:
        c = e.epsilon_certified
        cs = fmt_epsilon(c) + (f" ±{e.certified_accounting_error:.2g}" if c is not None and
                      e.certified_accounting_error else "")
        lines.append(f"{e.name:<10}{'{:,}/{:,}'.format(*e.sizes):<17}{e.verdict.upper():<13}{cs:<14} "
                     f"[{fmt_epsilon(e.epsilon_forced)}, {fmt_epsilon(c)}]")
    lines.append("")
    for e in r.neighbours:
        lines.append(wrap(e.sentence))
    lines.append("")
    if r.epsilon_certified is not None and math.isfinite(r.epsilon_certified):
        attacks = all(e.forced_is_attack for e in r.neighbours)
        lower = (f"a named attack forces epsilon >= {fmt_epsilon(r.epsilon_forced)} on it" if attacks else
                 f"the lower end {fmt_epsilon(r.epsilon_forced)} is not forced by an attack")
        lines.append(wrap(f"The mechanism you ran is ({fmt_epsilon(r.epsilon_certified)}, {r.delta:g})-DP for "
                          f"add/remove neighbours (certified, PLD upper end); {lower}."))
    lines.append(wrap(r.summary))
    rep = r.replace_one
    if rep is not None:
        if rep.get("epsilon") is not None:
            lines.append(wrap(f"Replace-one neighbours (the data-set size public, one record replaced): epsilon = "
                              f"{fmt_epsilon(rep['epsilon'])} ({rep['method']}); the numbers above are for add/remove "
                              f"neighbours (the size private), the relation the claim is made under."))
        else:
            lines.append(wrap(f"Replace-one neighbours (the data-set size public): not computed: {rep['why']}."))
    if r.remedies:
        lines.append("To make the claim hold:")
        for m in r.remedies:
            lines.append(textwrap.fill(m, width, initial_indent="  - ", subsequent_indent="    "))
    for note in r.notes:
        lines.append(wrap("Note: " + note))
    return "\n".join(lines)
