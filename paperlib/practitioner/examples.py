"""Every release family at published settings: claim, certified and forced epsilon, verdict, the fix.

The practitioner's chapter (chapter 10) shows one row per release family and setting:
Opacus 0.12-0.13 (ASGM), 0.14-0.15 (EASGM), 1.x with ``int(N q)`` differing and agreeing on the
neighbours (FEASGM), each at the settings of Opacus's MNIST example
(:data:`OPACUS_MNIST_README`), and DPSUR at its own defaults (:data:`DPSUR_DEFAULTS`). Each row
is one :func:`~paperlib.practitioner.check.check_run` report (the one path of ``python -m paperlib
check``), the same run with the family's fix, and the sentence a practitioner can act on, whose
words come from comparing the numbers (:func:`action_sentence`).

The bracket: the true epsilon of the code that ran lies between *forced* (the epsilon a named
attack reaches: two data sets, their gradients and a test whose errors are computed) and
*certified* (a guarantee proven for every set of gradients), THEORY.md §11.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from paperlib.fdp.validation import ParameterError, check_int
from paperlib.mechanisms.certified import certified_for_training_set
from paperlib.mechanisms.core import Mechanism
from paperlib.practitioner.check import check_run
from paperlib.practitioner.releases import floors_agree_on_neighbours

__all__ = ["OPACUS_MNIST_README", "OPACUS_CIFAR10_EXAMPLE", "MNIST_README_SETTINGS", "MNIST", "DPSUR_DEFAULTS", "Family", "FAMILIES",
           "nearest_agreeing_batch", "families_for", "family_row", "dpsur_row", "family_rows", "action_sentence",
           "versus", "VERDICT_ORDER", "fix_certified"]

#: Opacus's MNIST example at release 0.13.0 (the sample parameter sets of its README)
OPACUS_MNIST_README = {"repository": "pytorch/opacus", "tag": "v0.13.0",
                       "commit": "f62aec19921bad13c17a6d16861b837205a3d113",
                       "path": "examples/mnist_README.md", "script": "examples/mnist.py"}
#: its three private settings: ``python mnist.py -n=EPOCHS --sigma=SIGMA -sr=0.004`` and the epsilon the README
#: prints at delta 1e-5
MNIST_README_SETTINGS = (
    {"name": "σ 1.3, 15 epochs", "noise_multiplier": 1.3, "epochs": 15, "readme_epsilon": 1.19},
    {"name": "σ 1.1, 60 epochs", "noise_multiplier": 1.1, "epochs": 60, "readme_epsilon": 3.01},
    {"name": "σ 0.7, 45 epochs", "noise_multiplier": 0.7, "epochs": 45, "readme_epsilon": 7.10},
)
#: the example's data and model: 60,000 MNIST records, sample rate 0.004 (batch 240 on average), its
#: SampleConvNet (26,010 parameters: conv 8x8 16, conv 4x4 32, linear 512-32, linear 32-10), delta 1e-5
MNIST = {"dataset_size": 60_000, "sample_rate": 0.004, "batch_size": 240, "n_params": 26_010, "delta": 1e-5}
#: Opacus 1.x's CIFAR-10 example at its defaults (examples/cifar10.py at the commit below): 50,000 records, the
#: DataLoader's batch size int(0.04 * 50,000) = 2,000, sigma 1.5, 90 epochs, delta 1e-5, its convnet (four 3x3
#: convolutions 3-32-64-64-128 with biases and a 128-10 linear layer: 131,466 parameters); checked as Opacus 1.6.0
OPACUS_CIFAR10_EXAMPLE = {"repository": "pytorch/opacus", "commit": "060080abe9d2c89617c626ebc58f4c48c9a614eb",
                          "path": "examples/cifar10.py", "dataset_size": 50_000, "batch_size": 2_000,
                          "noise_multiplier": 1.5, "epochs": 90, "n_params": 131_466, "delta": 1e-5}
#: DPSUR's defaults for MNIST (Fu et al. 2024, pinned commit): batch 256 of 60,000, sigma 1.23, the 25,543 steps
#: at which its RDP accountant reaches its target epsilon 3, the 26,010-parameter CNN
DPSUR_DEFAULTS = {"dataset_size": 60_000, "batch_size": 256, "steps": 25_543, "noise_multiplier": 1.23,
                  "n_params": 26_010, "delta": 1e-5, "target_epsilon": 3.0}

#: verdicts from the worst to the best (the row's verdict is the worst over its two neighbours)
VERDICT_ORDER = ("refuted", "not covered", "unresolved", "holds", "stands")


@dataclass(frozen=True)
class Family:
    """A release family: how a run of it is checked and what its fix is.

    ``run`` holds the :func:`check_run` options of the code (the release, how the rate is given),
    ``fix`` the options that apply the family's fix on top (``None``: DPSUR, whose fix is its own
    code changed to SGM) and ``fix_name`` the fix in words.
    """
    key: str
    label: str
    run: dict = field(default_factory=dict)
    fix: dict | None = None
    fix_name: str = ""


def nearest_agreeing_batch(N: int, batch_size: int, span: int = 64) -> int:
    """The batch size nearest ``batch_size`` (the smaller on a tie) for which Opacus 1.x gives ``N - 1``,
    ``N`` and ``N + 1`` records the same rate and the same ``int(N q)`` (then FEASGM is SGM). ValueError
    when none lies within ``span``."""
    N, b, span = check_int(N, "N", 2), check_int(batch_size, "batch_size", 1), check_int(span, "span", 0)
    for d in range(span + 1):
        for c in (b - d, b + d):
            if 1 <= c <= N and floors_agree_on_neighbours(N, c):
                return c
    raise ParameterError("batch_size", f"batch_size: no batch size within {span} of {b} has agreeing floors on {N:,} records")


_SUM_FIX = ("summing the loss instead of averaging it (Opacus's sum reduction, learning rate divided by the "
            "batch size)")
_PUBLIC_FIX = "dividing by the configured batch size with fix_normaliser(optimizer, batch_size)"


def families_for(N: int, batch_size: int, sample_rate: float) -> tuple[Family, ...]:
    """The Opacus families for a data set of ``N`` records: 0.13.0 at ``sample_rate`` (given to the sampler and
    the engine, as in the MNIST example), 0.15.0 and 1.6.0 at ``batch_size``, 1.6.0 at the nearest batch size
    whose floors agree (:func:`nearest_agreeing_batch`), each with its fix."""
    agree = nearest_agreeing_batch(N, batch_size)
    return (
        Family("asgm", "Opacus 0.12–0.13 (ASGM)", {"opacus_version": "0.13.0", "sample_rate": sample_rate},
               {"loss_reduction": "sum"}, _SUM_FIX),
        Family("easgm", "Opacus 0.14–0.15 (EASGM)", {"opacus_version": "0.15.0", "batch_size": batch_size},
               {"loss_reduction": "sum"}, _SUM_FIX),
        Family("feasgm-differ", f"Opacus 1.x, batch {batch_size} (FEASGM)",
               {"opacus_version": "1.6.0", "batch_size": batch_size}, {"divisor": "public"}, _PUBLIC_FIX),
        Family("feasgm-agree", f"Opacus 1.x, batch {agree} (FEASGM)",
               {"opacus_version": "1.6.0", "batch_size": agree}, {"divisor": "public"}, _PUBLIC_FIX),
    )


#: the Opacus families at the MNIST example's settings (the 1.x rows: its batch 240, and the nearest batch
#: size whose floors agree)
FAMILIES = families_for(MNIST["dataset_size"], MNIST["batch_size"], MNIST["sample_rate"])
_DPSUR_FIX = "a public divisor with a noise-only step on an empty batch"


def fix_certified(row: dict) -> float | None:
    """The certified ε of a row's run with its fix, or None where the fix does not cover every
    neighbour (Opacus 1.x with floors that differ: the addition neighbour still runs another number
    of steps, so the removal side's value is no guarantee of the run).

    ``row`` is a :func:`family_row` / :func:`dpsur_row` result (its ``"fix"`` entry).
    """
    fix = row["fix"]
    return None if fix["certified"] is None or fix["verdict"] in ("not covered", "refuted") else fix["certified"]


def _worst(verdicts) -> str:
    return min(verdicts, key=VERDICT_ORDER.index)


def _summary(report) -> dict:
    """The numbers of one check report (a :class:`~paperlib.practitioner.report.CheckReport`) a row needs."""
    # a neighbour that is not covered has no bracket: the others' still bound what they cover
    certs = [e.epsilon_certified for e in report.neighbours if e.epsilon_certified is not None]
    return {"claimed": report.claimed_epsilon, "accountant": report.claim.accountant,
            "certified": max(certs) if certs else None, "forced": report.epsilon_forced,
            "verdicts": {e.name: e.verdict for e in report.neighbours},
            "verdict": _worst(e.verdict for e in report.neighbours),
            "attack": next((e.forced_attack["name"] for e in report.neighbours
                            if e.forced_is_attack and isinstance(e.forced_attack, dict)), None),
            "mechanism": str(report.mechanism), "steps": report.steps, "sample_rate": report.sample_rate}


def versus(x: float | None, ref: float, *, far: float = 10.0) -> str:
    """``x`` against ``ref`` in a word, from the numbers as printed (3 significant digits): "far above"
    (at least ``far`` times), "above", "at", "below", "far below" (at most ``1/far`` times), or "not
    computed" (``x`` None)."""
    if x is None:
        return "not computed"
    if _fmt(x) == _fmt(ref):
        return "at"
    if x > ref:
        return "far above" if x >= far * ref else "above"
    return "far below" if x * far <= ref else "below"


def _fmt(x) -> str:
    if x is None:
        return "–"
    if x == float("inf"):
        return "∞"
    return f"{x:,.0f}" if abs(x) >= 1000 else format(x, ".3g")  # never an exponent in a sentence


def action_sentence(row: dict, *, attack_named: bool = True) -> str:
    """The advice a practitioner can act on (one to three short sentences), from the row's numbers and verdicts.

    ``row`` as :func:`family_row` returns it (``claimed``, ``certified``, ``forced``, ``verdict``,
    ``verdicts``, ``attack``, ``fix``). The verdict decides the advice; every number is the row's.
    ``attack_named=False`` says "the attack above" instead of its name (for a text that has just
    named and described it).
    """
    c, lo, hi, v = row["claimed"], row["forced"], row["certified"], row["verdict"]
    fix = row["fix"]
    name = fix["name"][:1].upper() + fix["name"][1:]  # the fix opens a sentence of its own
    # short sentences: the book's prose style (at most 45 words a sentence)
    if fix["verdict"] == "not covered" or fix.get("forced") == float("inf"):
        fixed = (f"{name} alone does not help: a neighbour still runs another number of updates. Choose a batch "
                 "size that does not divide the data-set size or its neighbours' as well; the command "
                 "python -m paperlib check lists some.")
    elif fix["certified"] is not None and fix["certified"] <= c:
        fixed = f"{name} makes it SGM, certified at {_fmt(fix['certified'])} ≤ {_fmt(c)}: the claim then holds."
    else:
        fixed = f"With {fix['name']} it is certified at {_fmt(fix['certified'])}."
    if v == "stands":
        return f"Publish ε = {_fmt(c)}: the SGM analysis applies to this run as it is."
    if v == "holds":
        return (f"Publish ε = {_fmt(c)}: the code that ran is certified at {_fmt(hi)} ≤ {_fmt(c)}, although it is "
                "not the mechanism the accountant analyses.")
    if v == "refuted":
        attack = f"the attack '{row['attack']}'" if attack_named else "the attack above"
        if lo is not None and lo == float("inf"):
            return (f"Do not publish ε = {_fmt(c)}: a neighbouring data set runs another number of updates, so "
                    f"counting them tells the two apart and no finite ε holds. {fixed}")
        return (f"Do not publish ε = {_fmt(c)}: {attack} reaches ε = {_fmt(lo)}, so the run "
                f"leaks at least that much. {fixed}")
    if v == "not covered":
        side = next(k for k, x in row["verdicts"].items() if x == "not covered")
        return (f"Do not publish ε = {_fmt(c)}: on the {side} neighbour Opacus runs another number of steps per "
                f"epoch, which no analysis covers; fix the sample rate by passing it to the DPDataLoader. {fixed}")
    return (f"Do not publish ε = {_fmt(c)} as proven: the run's ε lies between {_fmt(lo)} (an attack reaches it) and "
            f"{_fmt(hi)} (proven); publish {_fmt(hi)}, or apply the fix. {fixed}")


def family_row(family: Family, setting: dict, *, pld_options: dict | None = None) -> dict:
    """One row: ``family`` run at ``setting`` (``dataset_size``, ``noise_multiplier``, ``epochs`` or
    ``steps``, ``n_params``, ``delta``), checked as it is and with its fix.

    Returns ``{"family", "label", "setting", "claimed", "accountant", "certified" (the larger over the
    neighbours that have one: a neighbour that is not covered has none), "forced" (inf where a neighbour runs
    another number of updates), "ratio" (certified/forced, None when either is missing or forced is infinite),
    "replace_one" (the replace-one epsilon, THEORY.md §11.3d, None where not computed), "verdicts" (per
    neighbour), "verdict" (the worst),
    "attack", "mechanism", "steps", "sample_rate", "fix": {"name", "claimed", "certified", "forced",
    "verdicts", "verdict"}, "sentence", "report", "fix_report"}``. ValueError (one line) for a bad setting.
    """
    opts = {k: setting[k] for k in ("dataset_size", "noise_multiplier", "n_params", "delta", "epochs", "steps")
            if setting.get(k) is not None}
    report = check_run(**family.run, **opts, pld_options=pld_options)
    fix_report = check_run(**family.run, **family.fix, **opts, pld_options=pld_options)
    row = {"family": family.key, "label": family.label, "setting": setting.get("name", ""), **_summary(report)}
    f = _summary(fix_report)
    row["fix"] = {"name": family.fix_name, **{k: f[k] for k in ("claimed", "certified", "forced", "verdicts",
                                                                 "verdict")}}
    return _finish(row, report, fix_report)


def _finish(row: dict, report, fix_report) -> dict:
    c, f = row["certified"], row["forced"]
    row["ratio"] = c / f if c is not None and f and math.isfinite(f) else None
    rep = report.replace_one or {}
    row["replace_one"] = rep.get("epsilon")
    row["sentence"] = action_sentence(row)
    row["report"], row["fix_report"] = report, fix_report
    return row


def dpsur_row(setting: dict | None = None, *, pld_options: dict | None = None) -> dict:
    """DPSUR's row (:func:`family_row`'s keys) at ``setting`` (default :data:`DPSUR_DEFAULTS`): its own rule
    checked as it is, and the fix (a public divisor and a step on an empty batch: SGM at the same rate,
    noise and steps, certified by :func:`~paperlib.mechanisms.certified.certified_for_training_set`)."""
    s = dict(DPSUR_DEFAULTS if setting is None else setting)
    opts = {k: s[k] for k in ("dataset_size", "batch_size", "noise_multiplier", "n_params", "delta", "steps",
                              "epochs") if s.get(k) is not None}
    report = check_run(implementation="dpsur", **opts, pld_options=pld_options)
    row = {"family": "dpsur", "label": "DPSUR (its own rule)", "setting": s.get("name", "DPSUR's defaults"),
           **_summary(report)}
    sgm = certified_for_training_set(Mechanism.SGM, report.inputs["dataset_size"], report.sample_rate,
                                     s["noise_multiplier"], s["n_params"], rounds=report.steps, delta=s["delta"],
                                     **(pld_options or {}))
    verdicts = {k: "stands" for k in ("removal", "addition")}  # SGM: the claim's own analysis applies
    row["fix"] = {"name": _DPSUR_FIX, "claimed": row["claimed"], "certified": sgm.epsilon_certified,
                  "forced": sgm.epsilon_forced, "verdicts": verdicts, "verdict": "stands"}
    return _finish(row, report, sgm)


def family_rows(settings=MNIST_README_SETTINGS, families=FAMILIES, *, dpsur: dict | None = DPSUR_DEFAULTS,
                base: dict = MNIST, pld_options: dict | None = None) -> list[dict]:
    """:func:`family_row` for every family at every setting (each merged into ``base``), then DPSUR's row at
    ``dpsur`` (None: left out)."""
    rows = [family_row(fam, {**base, **s}, pld_options=pld_options) for s in settings for fam in families]
    if dpsur is not None:
        rows.append(dpsur_row(dpsur, pld_options=pld_options))
    return rows
