"""The paper's setting of each claim, and what a run substituted for it (THEORY.md section 10).

One :class:`Setting` per graded claim says what the paper ran: data (synthetic worst case or
real points of a training split), model per method (name and size), Opacus release, code
path, every round of the game a real implementation step, trials per audited point,
distinguisher, and the scalar parameters of the experiment (N, q, sigma, C, n, rounds). The
grade never trusts a notebook's word for it: :func:`substitutions` compares the parameters
each result file records about *itself* (``params``, ``inputs``, ``model``, ``n``,
``version``, ``trials``) with the setting, so a notebook that switches model, split, release,
code path or trial count is listed, with no edit here, and a new model of the paper's
architecture is accepted by adding its name to :data:`PAPER_MODELS`.

A substitution is a dict ``{"aspect", "verdict", "text", "points", "reason"}``: ``aspect`` one of
:data:`ASPECTS`; ``verdict`` "not reproduced" (synthetic stand-in data for a real-data claim)
or "partly reproduced"; ``text`` says what ran and what the paper ran; ``points`` how many
of the claim's audited points it concerns, as ``"k/total"``; ``reason`` the one line the
grade shows (aspect, text and point count).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from paperlib.mechanisms.registry import mechanism_spec

__all__ = ["ASPECTS", "PAPER_MODELS", "PAPER_SIZES", "size_findings", "Setting", "SETTINGS", "run_of_audit", "runs_of_sweep",
           "NOT_AUDITED", "not_audited", "substitutions",
           "split_of"]

#: The aspects a run can differ in, in the order they are listed.
ASPECTS = ("data", "split", "model", "release", "code path", "real steps", "trials", "distinguisher", "parameters")

#: Models whose architecture is the one the paper's methods use (name -> words). A model not
#: here is named by the result (``model``, ``n``) and listed as a substitution where a
#: method's setting asks for one of these.
PAPER_MODELS = {
    "cnn-mnist": "Tramèr & Boneh's MNIST/FMNIST CNN (26,010 parameters)",
    "cnn-cifar10": "Tramèr & Boneh's CIFAR-10 CNN (550,570 parameters)",
    "dpfeta-mnist": "DP-FETA's own MNIST denoiser (its public code)",
    "privimage-mnist": "PrivImage's own MNIST denoiser (its public code)",
    "privimage-cifar10": "PrivImage's own CIFAR-10 denoiser (its public code)",
}
#: The model sizes the paper states per method (Section 5.3: "1,485,217 parameters" for DP-FETA and PrivImage on
#: MNIST and FMNIST). A model of the method's own code whose recorded size differs is a finding, not a substitution.
PAPER_SIZES = {"DP-FETA": 1_485_217, "PrivImage": 1_485_217}
#: Each method's own model (built from its public code): only its size is compared with PAPER_SIZES; another model
#: audited for the method (the CNN standing for all three) is a model substitution, listed as such.
OWN_MODEL = {"DP-FETA": "dpfeta-mnist", "PrivImage": "privimage-mnist"}


def size_findings(runs: list[dict]) -> list[str]:
    """Findings for runs (:func:`run_of_audit`) of a method's own model whose size ``n`` differs from
    the size the paper states for it (:data:`PAPER_SIZES`), one per (method, model, size)."""
    out = []
    for run in runs:
        for m in run.get("methods") or []:
            want, n, model = PAPER_SIZES.get(m), run.get("n"), str(run.get("model"))
            if want and model == OWN_MODEL.get(m) and isinstance(n, (int, float)) and int(n) != want:
                text = (f"{m}'s own model ({model}, built from its public code) has {int(n):,} parameters, not the "
                        f"{want:,} the paper gives for it (Section 5.3)")
                if text not in out:
                    out.append(text)
    return out


#: Words for models that are not the paper's (what the grade says they are).
OTHER_MODELS = {
    "large-mnist": "a stand-in of the same size (1,485,217 parameters; its architecture is ours, not DP-FETA's "
                   "or PrivImage's, which the paper copy does not give)",
    "tiny": "a 430-parameter test model",
}


@dataclass(frozen=True)
class Setting:
    """What the paper ran for one claim (THEORY.md section 10)."""

    claim: str
    #: "synthetic" (the worst-case gradients of the paper's tight setting) or "real" (image points)
    data: str | None = None
    #: the split the paper's points come from ("train": members of the training set)
    split: str | None = None
    #: ``{method: (model names of its architecture, words)}``; ``"*"`` for every method
    models: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)
    #: ``{implementation: (release prefixes, words)}``
    releases: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)
    #: the paper's own code path must have run (``inputs["code_as_paper"]``)
    code: bool = False
    #: every round of the game a step of the implementation
    all_rounds_real: bool = False
    #: trials per audited point
    trials: int | None = None
    #: the distinguisher the paper's statements are about (its label in the audit results)
    distinguisher: str | None = None
    #: scalar parameters: ``{name: value or tuple of allowed values}``
    params: dict[str, Any] = field(default_factory=dict)
    #: whose setting it is, as the substitutions name it
    ref: str = "the paper"


_PAPER_DIST = "normality[chi2,weighted]"
_MNIST_CNN = (("cnn-mnist",), PAPER_MODELS["cnn-mnist"])
_DPFETA = (("dpfeta-mnist",), "DP-FETA's own 1,485,217-parameter model (Section 5.3)")
_PRIVIMAGE = (("privimage-mnist",), "PrivImage's own model (Section 5.3 gives 1,485,217 parameters)")
_CIFAR_CNN = (("cnn-cifar10",), PAPER_MODELS["cnn-cifar10"])

#: One setting per graded claim of the paper (and X1's own: the fix is this artifact's claim).
SETTINGS: dict[str, Setting] = {
    "C2": Setting("C2", data="synthetic", trials=10_000, distinguisher=_PAPER_DIST,
                  params={"n": 100, "N": (2, 3, 4, 5), "sigma": 10.0, "C": 0.1}),
    "C3": Setting("C3", data="synthetic", trials=10_000, distinguisher=_PAPER_DIST,
                  params={"N": 4, "sigma": 10.0, "C": 0.1}),
    "C4": Setting("C4", data="real", split="train", code=True, all_rounds_real=True, trials=10_000,
                  distinguisher=_PAPER_DIST,
                  models={"DPSUR": _MNIST_CNN, "DPSGD-HF": _MNIST_CNN, "DP-FETA": _DPFETA, "PrivImage": _PRIVIMAGE},
                  releases={"opacus-0.15.0": (("0.15.",), "Opacus v0.15.0")},
                  params={"N": 4, "sigma": 10.0, "C": 0.1}),
    "C6": Setting("C6", data="real", split="train", code=True, all_rounds_real=True, trials=10_000,
                  distinguisher=_PAPER_DIST, models={"DP-FETA": _DPFETA},
                  releases={"*": (("1.0.",), "Opacus v1.0")},
                  params={"N": 3, "q": 0.5, "sigma": 10.0, "C": 0.1}),
    "C7": Setting("C7", params={"N": 140_199, "T": 200, "q": 0.005, "sigma": 10.0, "n": (26_010, 1_485_217)}),
    "X1": Setting("X1", data="real", split="train", all_rounds_real=True, trials=10_000, distinguisher=_PAPER_DIST,
                  ref="this claim's setting"),
}
#: CIFAR-10: the paper names no model per method; Tramèr & Boneh's CIFAR-10 CNN is DPSGD-HF's; PrivImage's own
#: is its code's CIFAR-10 denoiser (the paper gives no size for it); DP-FETA's code has none (its CIFAR-10 point
#: is reported as not audited, paperlib.implementations.paper_models.UNAVAILABLE).
CIFAR_MODELS = {"DPSUR": _CIFAR_CNN, "DPSGD-HF": _CIFAR_CNN,
                "DP-FETA": ((), "their own model (the paper gives its size, 1,485,217, for MNIST and FMNIST)"),
                "PrivImage": (("privimage-cifar10",), "PrivImage's own CIFAR-10 model (its public code)")}


def split_of(inputs: dict) -> str | None:
    """The split the points came from: ``inputs["split"]``, else read off ``data_detail``
    ("MNIST test split, indices ..."); ``None`` when neither says."""
    s = inputs.get("split")
    if isinstance(s, str) and s:
        return s
    m = re.search(r"\b(train|training|test)\s+split\b", str(inputs.get("data_detail") or ""))
    return None if m is None else ("train" if m.group(1).startswith("train") else "test")


def run_of_audit(result: dict, method: str = "") -> dict:
    """The parameters one real-implementation audit *result* records about itself."""
    inp = result.get("inputs") if isinstance(result.get("inputs"), dict) else {}
    dists = sorted(result.get("eps_lower")) if isinstance(result.get("eps_lower"), dict) else []
    return {"methods": [m.strip() for m in str(method).split("/") if m.strip()], "inputs": inp or None,
            "data": inp.get("data"), "split": split_of(inp) if inp else None, "panel": result.get("dataset"),
            "model": result.get("model"), "n": result.get("n"), "implementation": result.get("implementation"),
            "version": result.get("version"), "trials": result.get("trials"), "distinguishers": dists,
            "mechanism": result.get("mechanism"),
            "params": {k: result.get(k) for k in ("N", "q", "sigma", "C", "n") if result.get(k) is not None}}


def runs_of_sweep(params: dict) -> list[dict]:
    """One run per point of an ``audit_sweep`` result's ``params`` (synthetic worst case)."""
    common = params.get("common") if isinstance(params.get("common"), dict) else {}
    dists = [d if isinstance(d, str) else d.get("name", "?") for d in common.get("distinguishers", [])]
    dists = [_PAPER_DIST if d == "normality" else d for d in dists]
    out = []
    for p in params.get("points") or []:
        if isinstance(p, dict):
            out.append({"data": "synthetic", "trials": common.get("trials"), "distinguishers": dists,
                        "params": {**{k: common[k] for k in ("sigma", "C") if k in common},
                                   **{k: p[k] for k in ("N", "n", "q") if k in p}}})
    return out


def _fmt(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def _model_words(run: dict) -> str:
    name = str(run.get("model"))
    words = PAPER_MODELS.get(name) or OTHER_MODELS.get(name)
    n = run.get("n")
    return f"{name}, " + (words or (f"{_fmt(n)} parameters" if n else "size not recorded"))


#: Where the substituted mechanism(s) of a "real steps" entry go in its text (one entry per claim).
MECH = "\x00mechanism\x00"


def _mechanism_words(mech: Any) -> str:
    """The substituted mechanism as the result names it (``r["mechanism"]``): "DPSUR's rule", "FEASGM"."""
    if not mech:
        return "the mechanism (not recorded)"
    try:
        return mechanism_spec(mech).prose_name
    except ValueError:  # a name outside the table: as the result wrote it
        return str(mech).upper()


def _one(setting: Setting, run: dict) -> list[tuple[str, ...]]:
    """``[(aspect, verdict, text)]`` for one run; a "real steps" entry adds the mechanism substituted
    (its text holds :data:`MECH` where the mechanisms of all runs go)."""
    out = []
    data = run.get("data")
    if setting.data == "real":
        detail = str((run.get("inputs") or {}).get("data_detail") or "").removeprefix("synthetic stand-in").strip(" ()")
        if data == "synthetic stand-in" or (run.get("inputs") is None and "synthetic" in str(run.get("panel"))):
            out.append(("data", "not reproduced", "synthetic stand-in data for a real-data claim"
                        + (f" ({detail})" if detail else "")))
        elif run.get("inputs") is None:
            out.append(("data", "partly reproduced", "inputs not recorded"))
        elif data not in ("full dataset", "bundled real points", "data folder sample"):
            out.append(("data", "partly reproduced", f"data {data!r} not recorded as real"))
    elif setting.data == "synthetic" and data not in (None, "synthetic"):
        out.append(("data", "partly reproduced", f"ran on {data}; the paper: synthetic worst-case gradients"))
    if setting.split and run.get("inputs") is not None and data != "synthetic stand-in":
        sp = run.get("split")
        if sp != setting.split:
            panel = _PANEL_TITLE.get(str(run.get("panel") or "").lower(), "")
            out.append(("split", "partly reproduced",
                        (f"{panel + ' ' if panel else ''}points from the {sp} split" if sp else "split not recorded")
                        + f"; {setting.ref}: points of the {'training' if setting.split == 'train' else setting.split} "
                          "split (members of the data set it trains on)"))
    if setting.models and run.get("model") is not None:
        table = CIFAR_MODELS if "cifar" in str(run.get("panel") or "").lower() else setting.models
        wrong: dict[str, list[str]] = {}  # the paper's model (words) -> methods that ran another
        for m in run.get("methods") or ["*"]:
            want = table.get(m) or setting.models.get(m) or setting.models.get("*")
            if want and str(run.get("model")) not in want[0]:
                wrong.setdefault(want[1], []).append(m)
        for words, ms in wrong.items():
            out.append(("model", "partly reproduced", f"{' and '.join(ms)}: ran {_model_words(run)}; the paper: "
                                                      f"{words}"))
    if setting.releases and run.get("version") is not None:
        want = setting.releases.get(str(run.get("implementation"))) or setting.releases.get("*")
        if want and not str(run.get("version")).startswith(want[0]):
            out.append(("release", "partly reproduced", f"ran Opacus {run.get('version')}; the paper: {want[1]}"))
    inp = run.get("inputs")
    if setting.code and isinstance(inp, dict) and inp.get("code_as_paper") is not True:
        out.append(("code path", "partly reproduced",
                    f"ran {inp.get('code', '?')}; the paper audited {inp.get('paper_code', '?')}"))
    if setting.all_rounds_real and isinstance(inp, dict) and inp:
        rr, rounds = inp.get("real_rounds"), inp.get("rounds")
        if isinstance(rr, (int, float)) and isinstance(rounds, (int, float)):
            if rr < rounds:
                out.append(("real steps", "partly reproduced",
                            f"{int(rr):,} of {int(rounds):,} rounds ran as real implementation steps, the others "
                            f"drawn from the mechanism the checked steps implement{MECH}; {setting.ref}: every round "
                            "a real step", _mechanism_words(run.get("mechanism"))))
        else:
            out.append(("real steps", "partly reproduced", "real_rounds/rounds not recorded"))
    if setting.trials and isinstance(run.get("trials"), (int, float)) and run["trials"] != setting.trials:
        out.append(("trials", "partly reproduced",
                    f"{int(run['trials']):,} trials per point; {setting.ref}: {setting.trials:,}"))
    if setting.distinguisher and run.get("distinguishers") and setting.distinguisher not in run["distinguishers"]:
        out.append(("distinguisher", "partly reproduced",
                    f"ran {', '.join(run['distinguishers'])}; the paper's: {setting.distinguisher}"))
    for k, want in setting.params.items():
        got = (run.get("params") or {}).get(k)
        if got is None:
            continue
        allowed = want if isinstance(want, tuple) else (want,)
        if not any(abs(float(got) - float(a)) <= 1e-12 * max(1.0, abs(float(a))) for a in allowed):
            out.append(("parameters", "partly reproduced",
                        f"{k} = {_fmt(got)}; the paper: {' or '.join(_fmt(a) for a in allowed)}"))
    return out


#: how a result names a point that was not audited because the method's own model cannot be had: this prefix,
#: then the reason (paperlib.implementations.paper_models.UNAVAILABLE); notebook 06 writes it, check_fig4 reads it
NOT_AUDITED = "not audited: "


def not_audited(points: list[tuple[str, str]], total: int) -> list[dict]:
    """Entries (as :func:`substitutions` gives them) for points of the paper that were not audited
    because the method's own model cannot be had (``(what, reason)`` each, e.g. DP-FETA on
    CIFAR-10: its code has no configuration for it); ``total``: the points of the claim. A
    difference of the run from the paper's setting (partly reproduced), not a failure of the claim."""
    groups: dict[str, list[str]] = {}
    for what, reason in points:
        groups.setdefault(reason, []).append(what)
    return [{"aspect": "model", "verdict": "partly reproduced", "text": f"{', '.join(ws)}: not audited ({reason})",
             "points": f"{len(ws)}/{total}",
             # "of the paper's": the other substitutions count over the points that ran, this one over all
             "reason": f"model: {', '.join(ws)}: not audited ({reason}); {len(ws)} of the paper's {total} points, "
                       f"the other {total - len(ws)} ran"}
            for reason, ws in groups.items()]


#: a panel's data set in a sentence (so a substituted split names the panels it concerns)
_PANEL_TITLE = {"mnist": "MNIST", "fmnist": "Fashion-MNIST", "cifar10": "CIFAR-10"}


def substitutions(setting: Setting | None, runs: list[dict]) -> list[dict]:
    """Every way the *runs* of one claim differ from its *setting*, grouped, worst first.

    Each run is a dict from :func:`run_of_audit` or :func:`runs_of_sweep` (or a dict with
    ``params`` only). A run without ``inputs`` (written before they were recorded) is listed as
    "inputs not recorded". Returns ``[{"aspect", "verdict", "text", "points"}]`` in the order of
    :data:`ASPECTS`, one entry per distinct text with the count of runs it concerns.
    """
    if setting is None or not runs:
        return []
    seen: dict[tuple[str, str, str], int] = {}
    mechs: dict[tuple[str, str, str], dict[str, int]] = {}  # per entry: the mechanism each run substituted
    for run in runs:
        for it in _one(setting, run):
            key = it[:3]
            seen[key] = seen.get(key, 0) + 1
            if len(it) > 3:
                mechs.setdefault(key, {})
                mechs[key][it[3]] = mechs[key].get(it[3], 0) + 1

    def _mech(t: str, key) -> str:
        ms = mechs.get(key) or {}
        words = (f" ({next(iter(ms))})" if len(ms) == 1 else
                 " (" + ", ".join(f"{m} at {k} point{'s' if k > 1 else ''}" for m, k in ms.items()) + ")") if ms else ""
        return t.replace(MECH, words)
    order = {a: i for i, a in enumerate(ASPECTS)}
    rows = sorted(seen.items(), key=lambda kv: (kv[0][1] != "not reproduced", order[kv[0][0]]))
    return [{"aspect": a, "verdict": v, "text": t, "points": f"{k}/{len(runs)}",
             "reason": f"{a}: {t}" + (f" ({k}/{len(runs)} points)" if len(runs) > 1 else "")}
            for (a, v, t0), k in rows for t in [_mech(t0, (a, v, t0))]]
