"""Command line: ``python -m paperlib {tradeoff,epsilon,audit,audit-implementation,check} ...``
(the contract: README.md, section "Command line").

Examples::

    python -m paperlib tradeoff --mechanism easgm --bound guarantee \\
        --N 3 --q 0.5 --sigma 2 --n 20 --alpha 0.1
    python -m paperlib epsilon --mechanism feasgm --bound upper \\
        --N 140199 --q 0.005 --sigma 10 --n 26010 --rounds 200 --delta 1e-5

Output is one JSON object on stdout. Invalid input exits with status 2 and one
line on stderr that names the parameter and its allowed range; so does a size above
the limits below (with the estimated cost) unless ``--yes`` is given, and running out
of memory (naming the parameter that sets the size). A computation that fails for valid
input exits with status 1 and one line "could not compute X for these parameters
(reason)", as do an implementation that does not match its mechanism and a release
that is not available. ``PAPERLIB_DEBUG=1`` shows the traceback instead.

Size limits (each refused above it, with an estimate, unless ``--yes``):

* ``audit``: ``--trials`` <= :data:`MAX_AUDIT_TRIALS`; ``(N+1) * n`` <=
  :data:`MAX_AUDIT_ELEMENTS` (the worst-case data and its copies, about 64 bytes each);
* ``audit-implementation``: ``--trials`` <= :data:`MAX_AUDIT_TRIALS` in quick mode,
  <= :data:`MAX_IMPLEMENTATION_TRIALS_FULL` in full mode (every round a real step);
* ``tradeoff``/``epsilon`` with ``--bound guarantee``: at most
  :data:`MAX_GUARANTEE_COMPONENTS` batch sizes in the binomial mixture (``N`` sets it;
  e.g. ``N`` up to about 7.7 million at ``q = 0.5``); a numerical composition over
  ``--rounds``: at most :data:`MAX_COMPOSED_ROUNDS` rounds;
* ``check``: at most 10^6 steps, and Opacus's PRV grid at most 4 GiB
  (:mod:`paperlib.practitioner.run`, :mod:`paperlib.mechanisms.claimed`).

Every limit goes through :func:`paperlib.fdp.validation.check_size`; a run allowed but
estimated to take more than 20 s says so on stderr first.

Progress bars (tqdm, on stderr) are shown for the audits, and for the guarantee numerics
(mixture curves and profiles, PLD compositions; :mod:`paperlib.fdp.progress`) once they have run
a few seconds, when stderr is a terminal.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Sequence

from paperlib.fdp.mixture import LRMixture
from paperlib.mechanisms.core import ANY, MECHANISMS, Mechanism
from paperlib.mechanisms.registry import mechanism_spec
from paperlib.mechanisms import curves
from paperlib.mechanisms.guarantees import sgm_claim, upper_bound
from paperlib.fdp.validation import (ComputationError, InputError, ParameterError, check_alpha_array, check_delta, check_int, check_positive, check_rate, check_seed,
                                     check_size, fmt_bytes, fmt_seconds)

#: tradeoff/epsilon stop after this many seconds (--max-seconds) and offer the fast upper bound
DEFAULT_MAX_SECONDS = 40.0  # a long library call can overrun it by ~15 s: the answer stays under a minute


class _OutOfTime(Exception):
    """The time budget of --max-seconds ran out."""


def _with_budget(seconds: float, fn):
    """``fn()``, interrupted by :class:`_OutOfTime` after ``seconds`` (> 0) of wall time.

    A SIGALRM timer (Unix, main thread); elsewhere ``fn()`` runs without a limit.
    """
    import signal
    import threading

    if not seconds or seconds <= 0 or not hasattr(signal, "setitimer") \
            or threading.current_thread() is not threading.main_thread():
        return fn()

    def _expire(signum, frame):
        raise _OutOfTime()

    old = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _out_of_time_message(args) -> str:
    """One line: what did not finish, and the upper bound's answer (Theorems 3.8/3.10/A.4, fast)."""
    msg = (f"could not compute {_what(args)} within --max-seconds {args.max_seconds:g} (large N makes the "
           "exact guarantee slow: it sums over the batch sizes)")
    if args.bound == "guarantee" and args.rounds == 1 and not mechanism_spec(args.mechanism).sgm_always:
        try:
            ub = upper_bound(args.mechanism, args.N, args.q, args.sigma, args.n)
            if args.command == "epsilon":
                hint = f"its upper bound (--bound upper) gives epsilon {ub.epsilon(args.delta):.6g} at this delta"
            else:
                hint = "its upper bound (--bound upper) answers in seconds"
            msg += f"; {hint}, or raise --max-seconds"
        except (ValueError, RuntimeError):
            msg += "; raise --max-seconds"
    else:
        msg += "; raise --max-seconds"
    return msg


#: packages of the optional [audit] extra: a command that needs one says so in one line
AUDIT_EXTRA = ("torch", "torchvision", "opacus", "tqdm")

# Size limits (module docstring) and the rough unit costs behind their estimates, measured
# on one x86-64 core (2026-11): an audit round ~25 us (N = 12; 7 us at N = 3), one
# real implementation step ~40 ms (cnn-mnist, CPU), one batch size of a guarantee
# mixture >= 15 ms per FPR value (more at large noncentrality).
MAX_AUDIT_TRIALS = 10_000_000
MAX_AUDIT_ELEMENTS = 50_000_000
MAX_IMPLEMENTATION_TRIALS_FULL = 20_000
MAX_GUARANTEE_COMPONENTS = 20_000
_SECONDS_PER_ROUND = 25e-6
_SECONDS_PER_ELEMENT = 6e-7
_BYTES_PER_ELEMENT = 64
_BYTES_PER_TRIAL = 32  # scores and tie-break keys, calibration + counted, per distinguisher
_SECONDS_PER_STEP = 0.04
_SECONDS_PER_COMPONENT = 0.015
#: rounds a PLD composition of tradeoff/epsilon composes without --yes (its grids grow with them)
MAX_COMPOSED_ROUNDS = 1_000_000
_SECONDS_PER_COMPOSED_ROUND = 2e-4  # measured: the certified EASGM guarantee, 2,340 rounds, ~0.5 s


#: estimated seconds above which a run announces its estimate on stderr even when stderr is not a terminal (a
#: script waiting minutes learns why; shorter runs keep a script's stderr to the one-line errors)
NOTICE_SECONDS_SCRIPT = 120.0


def _notice(line: str, seconds: float | None = None) -> None:
    """A long run's estimate, on stderr before it starts: on a terminal (where the run then shows its progress),
    and for a script when the estimate is at least :data:`NOTICE_SECONDS_SCRIPT`."""
    if sys.stderr.isatty():
        sys.stderr.write(f"paperlib: note: {line}; it shows progress on a terminal\n")
    elif seconds is not None and seconds >= NOTICE_SECONDS_SCRIPT:
        sys.stderr.write(f"paperlib: note: {line}\n")


def _refuse_size(args, name: str, value, limit, estimate: str, hint: str = "", shown=None,
                 seconds: float | None = None) -> None:
    """The one size limit (:func:`paperlib.fdp.validation.check_size`) with ``--yes`` as its override.

    Refuses ``value > limit`` with the estimate; a size that is allowed but estimated to take at
    least :data:`~paperlib.fdp.validation.NOTICE_SECONDS` is announced on stderr.
    """
    check_size(name, value, limit, estimate=estimate, allow=getattr(args, "yes", False), what=hint, shown=shown,
               seconds=seconds, notice=lambda line: _notice(line, seconds))


#: integer options are exact in float64 up to 2^53 (N q, T (n - 1), ... are formed in floats)
MAX_INTEGER = 2**53


def _check_integers(args, names=("N", "n", "rounds", "trials")) -> None:
    """Every integer option of the command at most :data:`MAX_INTEGER` (one line naming it)."""
    for name in names:
        v = getattr(args, name, None)
        if isinstance(v, int) and v > MAX_INTEGER:
            lib = "n_params" if name == "params" else name  # check's message names the library's parameter
            raise ParameterError(lib, f"{lib} must be an integer <= 2^53 (exact in floating point), got {v}")


def _audit_cost(N: int, n: int, trials: int, distinguishers: int = 1) -> tuple[float, float]:
    """Rough (seconds, bytes) of a worst-case audit (module constants; a guide, not a promise)."""
    elements = (N + 1) * n
    seconds = 2 * trials * _SECONDS_PER_ROUND + elements * _SECONDS_PER_ELEMENT
    return seconds, elements * _BYTES_PER_ELEMENT + trials * _BYTES_PER_TRIAL * distinguishers


def _check_audit_size(args) -> None:
    seconds, nbytes = _audit_cost(args.N, args.n, args.trials)
    est = f"{fmt_seconds(seconds)} and {fmt_bytes(nbytes)} of memory"
    _refuse_size(args, "n", (args.N + 1) * args.n, MAX_AUDIT_ELEMENTS, est, shown=args.n,
                 hint=f"(N+1)*n = {(args.N + 1) * args.n:,} floats of data, ")
    _refuse_size(args, "trials", args.trials, MAX_AUDIT_TRIALS, est, seconds=seconds)  # last: it may announce


def _composed_numerically(args) -> bool:
    """Does the curve asked for compose rounds numerically (PLD), whose grids grow with ``--rounds``?"""
    if args.rounds == 1 or args.bound == "clt" or getattr(args, "claimed", False):
        return False
    if args.bound == "guarantee":
        return True
    spec = mechanism_spec(args.mechanism)
    if spec.rounds_upper is None:  # no such bound: refused by the curve dispatch
        return False
    if spec.scale_ratio is None:  # SGM's claim, ASGM's Eq. 14: composed numerically
        return True
    K, K1 = spec.floors(args.N, args.q) if spec.floors is not None else (0, 1)
    return K == K1  # FEASGM whose floors agree: the SGM claim composed; else an exact chi-square pair


def _check_rounds_size(args) -> None:
    """--rounds of a numerical composition: its grids grow with the number of rounds."""
    if _composed_numerically(args):
        seconds = args.rounds * _SECONDS_PER_COMPOSED_ROUND
        _refuse_size(args, "rounds", args.rounds, MAX_COMPOSED_ROUNDS,
                     f"at least {fmt_seconds(seconds)} for the PLD composition", seconds=seconds,
                     hint="numerically composed rounds, ")


def _check_guarantee_size(args) -> None:
    """--bound guarantee: the binomial mixture's batch sizes (N sets them) at a rough cost each."""
    spec = mechanism_spec(args.mechanism)
    if args.bound != "guarantee" or spec.sgm_always or getattr(args, "claimed", False):
        return
    if spec.floors is not None:
        K, K1 = spec.floors(args.N, args.q)
        if K == K1:  # floors agree: the SGM claim, no mixture
            return
    from paperlib.mechanisms.guarantees import DEFAULT_TAIL_TOL, binomial_support

    if args.N > 2000:  # the support the guarantee uses (both tails cut at tail_tol / 2), not built
        from scipy import stats

        half = DEFAULT_TAIL_TOL / 2
        comps = int(stats.binom.isf(half, args.N, args.q) - stats.binom.ppf(half, args.N, args.q) + 1)
    else:
        comps = len(binomial_support(args.N, args.q)[0])
    values = len(args.alpha) if args.command == "tradeoff" else 40  # epsilon: ~40 profile evaluations
    seconds = comps * values * _SECONDS_PER_COMPONENT
    _refuse_size(args, "N", comps, MAX_GUARANTEE_COMPONENTS, f"at least {fmt_seconds(seconds)}; --bound upper "
                 "takes seconds", shown=args.N, hint=f"the guarantee mixes {comps:,} batch sizes of Bin(N, q), ")
    # no up-front guess of the time: the numerics draw their own progress bar on a terminal
    # (paperlib.fdp.progress), and --max-seconds stops them with the upper bound offered


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse's own status for usage errors)
        sys.stderr.write(f"paperlib: error: {message}\n")
        sys.exit(2)


def _curve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mechanism", required=True, choices=(*MECHANISMS, Mechanism.DPSUR.value),
                   help="which normalisation DP-SGD uses (dpsur: DPSUR's own rule, --bound guarantee only)")
    p.add_argument("--bound", default="guarantee", choices=curves.BOUNDS,
                   help="guarantee (exact per-pair lower bound), upper (its upper bound, Thm 3.8/3.10/A.4), clt (Berry-Esseen CLT upper bound)")
    p.add_argument("--N", type=int, required=True, help="size of the smaller dataset |D| (D' has N+1)")
    p.add_argument("--q", type=float, required=True, help="Poisson sampling rate in (0, 1]")
    p.add_argument("--sigma", type=float, required=True, help="noise multiplier > 0")
    p.add_argument("--n", type=int, required=True, help="number of model parameters (output dimension) >= 1")
    p.add_argument("--rounds", type=int, default=1, help="number of training rounds T >= 1")
    p.add_argument("--tol", type=float, default=1e-6, help="largest interpolation error in beta (default 1e-6)")
    p.add_argument("--yes", action="store_true", help="run even above the size limits (see python -m pydoc paperlib.cli)")
    p.add_argument("--max-seconds", type=float, default=DEFAULT_MAX_SECONDS,
                   help=f"give up after this many seconds and say so (default {DEFAULT_MAX_SECONDS:g}; 0: no limit)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m paperlib", description="Corrected f-DP guarantees of DP-SGD as it is run (Wang et al. 2026).")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    t = sub.add_parser("tradeoff", help="FNR beta at given FPR alpha values")
    _curve_options(t)
    t.add_argument("--alpha", type=float, nargs="+", required=True, help="FPR values in [0, 1]")
    e = sub.add_parser("epsilon", help="epsilon at a given delta")
    _curve_options(e)
    e.add_argument("--delta", type=float, required=True, help="delta in (0, 1)")
    e.add_argument("--claimed", action="store_true", help="report the SGM claim's epsilon instead")
    _audit_options(sub.add_parser("audit", help="audit one round on worst-case synthetic data (game, eps lower bound)"))
    _audit_implementation_options(sub.add_parser(
        "audit-implementation", help="audit one step of a real DP-SGD implementation on real data points"))
    _check_options(sub.add_parser("check", help="check an Opacus run: claimed vs certified epsilon, per neighbour"))
    _audit_step_options(sub.add_parser(
        "audit-step", help="classify any DP-SGD step from its own updates (module:function), and check its run"))
    return p


# ------------------------------------------------------------------------------------------- audit-step
#: parameter of paperlib.practitioner.step.audit_step -> option of ``audit-step``
STEP_OPTIONS = {"records": "--records", "sampling_rate": "--probe-rate", "trials": "--trials", "seed": "--seed",
                "dataset_size": "--dataset-size", "sample_rate": "--sample-rate", "steps": "--steps",
                "noise_multiplier": "--noise-multiplier", "n_params": "--params", "delta": "--delta",
                "target": "TARGET"}


def _audit_step_options(a: argparse.ArgumentParser) -> None:
    """Options of ``python -m paperlib audit-step`` (paperlib.practitioner.step.audit_step)."""
    a.add_argument("target", metavar="TARGET",
                   help="the step, module:function or path/to/file.py:function; its protocol: "
                        "python -m pydoc paperlib.implementations.step_audit")
    a.add_argument("--records", type=int, default=7, help="the probe's data set size, in [2, 64] (default 7)")
    a.add_argument("--probe-rate", type=float, default=0.5, help="the probe's sampling rate, in (0, 1) (default 0.5)")
    a.add_argument("--trials", type=int, default=24, help="calls of the step per data set, at most 10000 and enough to test its sampling "
                   "(13 at the probe's defaults; default 24)")
    a.add_argument("--seed", type=int, default=0, help="seed of the probe's calls, >= 0 (default 0)")
    a.add_argument("--dataset-size", type=int, help="the run's records (with the four below: the run's report)")
    a.add_argument("--sample-rate", type=float, help="the run's Poisson sampling rate in (0, 1]")
    a.add_argument("--steps", type=int, help="the run's optimiser steps, >= 1")
    a.add_argument("--noise-multiplier", type=float, help="the run's noise multiplier sigma > 0")
    a.add_argument("--params", type=int, help="the run's trainable parameters, >= 1")
    a.add_argument("--delta", type=float, default=1e-5, help="delta in (0, 1/dataset-size] (default 1e-5)")
    a.add_argument("--json", action="store_true", help="print the result as one JSON object")


def run_audit_step(args) -> int:
    """``audit-step``: the step's rule and mechanism, and with the run's settings the run's report; as text or
    (``--json``) one JSON object. A bad option exits 2 naming it; a step that fits no rule, or whose batches are
    not Poisson sampling's, exits 1 with the trials that showed it (and, with ``--json``, every trial on stdout)."""
    from paperlib.practitioner.check import format_statement
    from paperlib.implementations.step_audit import SAMPLING_ALPHA, StepProtocolError
    from paperlib.practitioner.step import StepNotClassified, audit_step, load_step

    def named(msg: str) -> str:
        for name, opt in STEP_OPTIONS.items():
            msg = re.sub(rf"(?<![\w-]){name}(?!\w)", opt, msg)
        return msg

    step = None
    try:
        step = load_step(args.target)
        r = audit_step(step, dataset_size=args.dataset_size, sample_rate=args.sample_rate, steps=args.steps,
                       noise_multiplier=args.noise_multiplier, n_params=args.params, delta=args.delta,
                       records=args.records, sampling_rate=args.probe_rate, trials=args.trials, seed=args.seed)
    except StepNotClassified as exc:
        if args.json:
            json.dump(_json_clean({"error": _first_line(exc), "evidence": exc.evidence}), sys.stdout)
            sys.stdout.write("\n")
        return _fail(_first_line(exc), 1)
    except StepProtocolError as exc:  # the target's fault: its message names the protocol's own parameters
        return _fail(_first_line(exc), 2)
    except (ParameterError, ValueError, TypeError) as exc:
        if os.environ.get("PAPERLIB_DEBUG"):
            raise
        return _fail(named(_first_line(exc)), 2)
    finally:
        if callable(getattr(step, "close", None)):  # a step made from a class (OpacusDDPStep: its processes)
            step.close()
    if args.json:
        json.dump(_json_clean(r.to_json()), sys.stdout)
        sys.stdout.write("\n")
        return 0
    a = r.audit
    lines = [a.sentence]
    for name, side in a.neighbours.items():
        nus = side["nu"]
        lines.append(f"  {name} ({side['records']} records): normaliser {min(nus):.3g} to {max(nus):.3g}, batches of "
                     f"{min(side['batch_sizes'])} to {max(side['batch_sizes'])}; {side['skipped']} skipped, "
                     f"{side['nonfinite']} not finite; batch sizes as Poisson sampling's at rate "
                     f"{a.probe['sampling_rate']:g} draws them (exact tests of one size and of the rate: p = "
                     f"{side['sampling']['fixed_size_p']:.2g} and {side['sampling']['rate_p']:.2g}, refused below "
                     f"{SAMPLING_ALPHA:g})")
    if r.check is not None:
        lines += ["", "The run, checked as the mechanism found; its claim is the SGM's, from the RDP accountant of "
                  "Opacus 1.6.0 (what a library that analyses its step as the SGM claims):", "",
                  format_statement(r.check, code="the step's code (classified from its updates)")]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


# ------------------------------------------------------------------------------------------- check
#: library parameter -> option of ``check`` (messages of paperlib.practitioner name the library's)
CHECK_OPTIONS = {"opacus_version": "--opacus-version", "dataset_size": "--dataset-size", "batch_size": "--batch-size",
                 "sample_rate": "--sample-rate", "epochs": "--epochs", "steps": "--steps",
                 "noise_multiplier": "--noise-multiplier", "n_params": "--params", "loss_reduction": "--loss-reduction",
                 "poisson": "--poisson", "delta": "--delta", "accountant": "--accountant", "drop_last": "--drop-last",
                 "implementation": "--implementation", "divisor": "--divisor", "assume_release": "--assume-release",
                 "allow_large": "--yes"}
#: switches as the library's messages name them (``pass allow_large=True``) -> the command line's
CHECK_SWITCHES = {"assume_release=True": "--assume-release", "allow_large=True": "--yes"}


def _check_options(c: argparse.ArgumentParser) -> None:
    """Options of ``python -m paperlib check`` (paperlib.practitioner.check.check_run)."""
    c.add_argument("--implementation", default="opacus", choices=("opacus", "dpsur"),
                   help="whose DP-SGD code ran: an Opacus release (default) or DPSUR's own code")
    c.add_argument("--opacus-version", help="the Opacus release that ran, e.g. 1.6.0 or 0.15.0 (required for opacus)")
    c.add_argument("--assume-release", action="store_true",
                   help="accept a release the stored code audit does not list, under the rule of the nearest audited "
                        "release below it (the report says so)")
    c.add_argument("--dataset-size", type=int, required=True, help="records in the training set, len(dataset) >= 2")
    c.add_argument("--batch-size", type=int, help="the DataLoader's batch size (or give --sample-rate)")
    c.add_argument("--sample-rate", type=float, help="Poisson sampling rate in (0, 1] (or give --batch-size)")
    c.add_argument("--epochs", type=int, help="epochs (or give --steps)")
    c.add_argument("--steps", type=int, help="optimiser steps in all (or give --epochs)")
    c.add_argument("--noise-multiplier", type=float, required=True, help="noise multiplier sigma > 0")
    c.add_argument("--params", type=int, required=True, help="number of trainable parameters >= 1")
    c.add_argument("--loss-reduction", default="mean", choices=("mean", "sum"), help="as given to make_private")
    c.add_argument("--divisor", default="release", choices=("release", "public"),
                   help="what the noisy sum is divided by: the release's rule (default) or a public constant "
                        "(the fix paperlib.practitioner.fix_normaliser: SGM)")
    c.add_argument("--poisson", action=argparse.BooleanOptionalAction, default=None,
                   help="Poisson sampling (default: on for releases >= 0.12; --no-poisson is outside the analysis)")
    c.add_argument("--drop-last", action="store_true", help="the DataLoader had drop_last=True (Opacus 1.x rule)")
    c.add_argument("--delta", type=float, default=1e-5, help="delta in (0, 1/dataset-size] (default 1e-5)")
    c.add_argument("--accountant", choices=("rdp", "prv"),
                   help="what the run printed (default: the release's, prv from 1.3, rdp before)")
    c.add_argument("--yes", action="store_true",
                   help="run even above the size limits (more than 10^6 steps, a PRV grid above 4 GiB)")
    c.add_argument("--json", action="store_true", help="print the report as one JSON object")


def _option_names(message: str) -> str:
    """A message of paperlib.practitioner with the library's parameter names turned into ``check``'s options."""
    for switch, opt in CHECK_SWITCHES.items():
        message = message.replace(switch, opt)
    for name, opt in CHECK_OPTIONS.items():
        if "_" in name:
            message = re.sub(rf"(?<![\w-]){name}(?!\w)", opt, message)
        else:  # plain words: only where they name the parameter (start, or "X or name")
            message = re.sub(rf"^{name}(?!\w)|(?<=\bor ){name}(?=[ :])", opt, message)
    return message


def _json_clean(x):
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_clean(v) for v in x]
    return x


def run_check(args) -> int:
    """``check``: the report of :func:`paperlib.practitioner.check.check_run`, as text or (``--json``) one JSON
    object. Every failure is one line: a bad setting exits 2 naming its option, a computation that fails 1."""
    from paperlib.practitioner.check import check_run, format_statement

    try:
        _check_integers(args, ("dataset_size", "batch_size", "epochs", "steps", "params"))
        r = check_run(args.opacus_version, args.dataset_size, args.batch_size, sample_rate=args.sample_rate,
                      epochs=args.epochs, steps=args.steps, noise_multiplier=args.noise_multiplier,
                      n_params=args.params, loss_reduction=args.loss_reduction, poisson=args.poisson,
                      delta=args.delta, accountant=args.accountant, drop_last=args.drop_last,
                      implementation=args.implementation, divisor=args.divisor, assume_release=args.assume_release,
                      allow_large=args.yes)
    except ParameterError as exc:  # a setting outside its range (the library names it): exit 2, named as an option
        if os.environ.get("PAPERLIB_DEBUG"):
            raise
        return _fail(_option_names(_first_line(exc)), 2)
    except (ValueError, TypeError) as exc:  # valid settings whose computation failed
        if os.environ.get("PAPERLIB_DEBUG"):
            raise
        msg = _first_line(exc)
        return _fail(msg if msg.startswith("could not compute") else
                     f"could not compute the check for these settings ({msg})", 1)
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top not in AUDIT_EXTRA + ("dp_accounting",):
            raise
        return _fail(f"check needs {top} (not installed): pip install 'paperlib[audit,accounting]'", 2)
    except MemoryError:
        if os.environ.get("PAPERLIB_DEBUG"):
            raise
        return _fail("out of memory computing the check: the memory grows with the number of steps and falls with "
                     "the noise multiplier; lower --steps/--epochs or use --accountant rdp", 2)
    except (RuntimeError, ArithmeticError) as exc:  # a numerical step that failed for valid settings
        if os.environ.get("PAPERLIB_DEBUG"):
            raise
        msg = _first_line(exc)
        return _fail(msg if msg.startswith("could not compute") else
                     f"could not compute the check for these settings ({type(exc).__name__}: {msg})", 1)
    if args.json:
        json.dump(_json_clean(dict(r.to_json(), statement=format_statement(r))), sys.stdout)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_statement(r) + "\n")
    return 0


def _audit_options(a: argparse.ArgumentParser) -> None:
    """Options of ``python -m paperlib audit`` (DESIGN.md command line; paperlib.audit)."""
    a.add_argument("--mechanism", required=True, choices=MECHANISMS, help="which normalisation DP-SGD uses")
    a.add_argument("--N", type=int, required=True, help="size of D (D' has N+1); at most 12 (subsets are enumerated)")
    a.add_argument("--q", type=float, required=True, help="Poisson sampling rate in (0, 1]")
    a.add_argument("--sigma", type=float, required=True, help="noise multiplier > 0")
    a.add_argument("--C", type=float, required=True, help="clipping norm > 0")
    a.add_argument("--n", type=int, required=True, help="output dimension (number of parameters) >= 1")
    a.add_argument("--trials", type=int, required=True,
                   help="counted rounds in total, half on D and half on D' (>= 2); as many again calibrate the threshold")
    a.add_argument("--distinguisher", required=True, choices=("optimal", "normality"),
                   help="optimal: exact likelihood ratio; normality: the paper's per-component normality votes")
    a.add_argument("--seed", type=int, required=True, help="random seed")
    a.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where the rounds run (default cpu)")
    a.add_argument("--delta", type=float, default=1e-5, help="delta of the epsilon lower bound, in (0, 1) (default 1e-5)")
    a.add_argument("--yes", action="store_true", help="run even above the size limits (see python -m pydoc paperlib.cli)")


def run_audit(args) -> dict:
    """``audit``: worst-case data (D = N copies of C u, added point -C u), balanced game, Eq. 3."""
    from paperlib.audit import audit_worst_case

    _check_integers(args)
    check_int(args.N, "N", 1)
    check_rate(args.q)
    check_positive(args.sigma, "sigma")
    check_positive(args.C, "C")
    check_int(args.n, "n", 1)
    check_int(args.trials, "trials", 2)
    check_delta(args.delta)
    check_seed(args.seed)
    if args.N > 12:
        raise ParameterError("N", f"N must be <= 12 (the exact distinguishers enumerate 2^N subsets), got {args.N}")
    _check_audit_size(args)
    r = audit_worst_case(args.mechanism, args.N, args.q, args.sigma, args.n, C=args.C, trials=args.trials,
                         distinguisher=args.distinguisher, seed=args.seed, device=args.device, delta=args.delta,
                         progress=sys.stderr.isatty())
    return {"command": "audit", "fpr": r.fpr, "fnr": r.fnr, "eps_lower": r.eps_lower, "delta": r.delta,
            "trials": r.trials, "eps_claimed": _jsonnum(r.eps_claimed), "fpr_ci": list(r.fpr_ci),
            "fnr_ci": list(r.fnr_ci), "delta_lower": r.delta_lower, "violation": r.violation,
            "trials_D": r.trials_D, "trials_Dprime": r.trials_Dprime, "calibration_trials": r.calibration_trials,
            "path": r.path, "mechanism": r.mechanism, "distinguisher": r.distinguisher, "N": r.N, "n": r.n, "q": r.q,
            "sigma": r.sigma, "C": r.C, "seed": r.seed, "device": r.device}


class _LazyChoices:
    """argparse ``choices`` read from a constant of the implementations package when first
    needed (a value checked, a usage line printed), so that building the parser does not
    import torch: one definition of the names, and the core commands run without the
    [audit] extra."""

    def __init__(self, load):
        self._load, self._values = load, None

    def _get(self) -> tuple:
        if self._values is None:
            self._values = tuple(self._load())
        return self._values

    def __contains__(self, value) -> bool:
        return value in self._get()

    def __iter__(self):
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __getitem__(self, i):
        return self._get()[i]


def _implementation_names() -> tuple[str, ...]:
    """The releases as shipped, then the fixed ones (the table of implementations, paperlib.implementations.registry)."""
    from paperlib.implementations.registry import FIXED_IMPLEMENTATIONS, IMPLEMENTATIONS

    return tuple(IMPLEMENTATIONS) + tuple(FIXED_IMPLEMENTATIONS)


def _dataset_names() -> tuple[str, ...]:
    from paperlib.implementations import datasets

    return tuple(datasets.DATASETS)


def _model_names() -> tuple[str, ...]:
    from paperlib.implementations.models import OFFERED_MODELS

    return OFFERED_MODELS


IMPLEMENTATION_CHOICES = _LazyChoices(_implementation_names)
MODEL_CHOICES = _LazyChoices(_model_names)
DATASET_CHOICES = _LazyChoices(_dataset_names)


def _audit_implementation_options(a: argparse.ArgumentParser) -> None:
    """Options of ``python -m paperlib audit-implementation`` (paperlib.implementations.real_audit)."""
    # metavar given: argparse would otherwise list the (lazy) choices while building the parser
    a.add_argument("--implementation", required=True, choices=IMPLEMENTATION_CHOICES, metavar="IMPLEMENTATION",
                   help="one of %(choices)s; whose DP-SGD step: opacus-installed (v1.x, FEASGM), opacus-1.0.2 (FEASGM, the v1.0 line the "
                        "paper audits), opacus-0.15.0 (EASGM), opacus-0.13.0 (ASGM), "
                        "dpsur (DPSUR's rule: a separate draw's size), "
                        "opacus-installed+fix (the installed release divided by --batch-size: SGM)")
    a.add_argument("--model", required=True, choices=MODEL_CHOICES, metavar="MODEL",
                   help="one of %(choices)s; model at fixed parameters theta_0 (built from --seed)")
    a.add_argument("--dataset", required=True, choices=DATASET_CHOICES, metavar="DATASET",
                   help="one of %(choices)s; where the N+1 points come from: the dataset in the data folder ($PAPERLIB_DATA or "
                        "<repo>/data; downloaded in full mode), else the real points bundled with the package; "
                        "synthetic (a random stand-in) only when named")
    a.add_argument("--data-dir", default=None, metavar="DIR",
                   help="the data folder to read the dataset from (default $PAPERLIB_DATA or <repo>/data); a dataset "
                        "there is used as it is or refused, naming the file that cannot be read")
    a.add_argument("--batch-size", type=int, default=None,
                   help="the configured batch size the fixed implementation divides by (opacus-installed+fix "
                        "only; required there), an integer >= 1")
    a.add_argument("--N", type=int, required=True, help="size of D (D' has N+1); at most 12 (subsets are enumerated)")
    a.add_argument("--q", type=float, required=True, help="Poisson sampling rate in (0, 1]")
    a.add_argument("--sigma", type=float, required=True, help="noise multiplier > 0")
    a.add_argument("--C", type=float, required=True, help="clipping norm > 0")
    a.add_argument("--trials", type=int, required=True,
                   help="counted rounds in total, half on D and half on D' (>= 2); as many again calibrate the threshold")
    a.add_argument("--seed", type=int, required=True, help="random seed (points, model, steps)")
    a.add_argument("--mode", default="quick", choices=("quick", "full"),
                   help="quick: checked implementation steps + the batched mechanism; full: every round an implementation step")
    a.add_argument("--delta", type=float, default=1e-5, help="delta of the epsilon lower bound, in (0, 1) (default 1e-5)")
    a.add_argument("--yes", action="store_true", help="run even above the size limits (see python -m pydoc paperlib.cli)")


def _check_batch_size_option(args) -> None:
    """``--batch-size``: required by the fixed implementations, refused by the others (one line naming it)."""
    from paperlib.implementations.runners import FIXED_IMPLEMENTATIONS

    b = args.batch_size
    if args.implementation in FIXED_IMPLEMENTATIONS:
        if b is None:
            raise ParameterError("batch_size",
                                 f"batch_size (--batch-size): {args.implementation} divides by the configured batch "
                                 "size; give --batch-size (an integer >= 1)")
        if b < 1 or b > MAX_INTEGER:
            raise ParameterError("batch_size",
                                 f"batch_size (--batch-size) must be an integer >= 1 (and <= 2^53), got {b}")
    elif b is not None:
        raise ParameterError("batch_size",
                             f"batch_size (--batch-size): only {', '.join(FIXED_IMPLEMENTATIONS)} takes a batch size, "
                             f"not {args.implementation}")


def run_audit_implementation(args) -> dict:
    """``audit-implementation``: one step of a real implementation, white-box game, Eq. 3.

    The points: :func:`paperlib.implementations.datasets.resolve_dataset` -- the dataset in
    the data folder if it is there (downloaded in full mode), otherwise the real points
    bundled with the package; the synthetic stand-in only for ``--dataset synthetic``. The
    output's ``inputs`` says which ran (data and code)."""
    _check_integers(args)
    check_int(args.N, "N", 1)
    if args.N > 12:
        raise ParameterError("N", f"N must be <= 12 (the exact distinguishers enumerate 2^N subsets), got {args.N}")
    check_rate(args.q)
    check_positive(args.sigma, "sigma")
    check_positive(args.C, "C")
    check_int(args.trials, "trials", 2)
    check_delta(args.delta)
    check_seed(args.seed)
    _check_batch_size_option(args)
    if args.mode == "full":
        _refuse_size(args, "trials", args.trials, MAX_IMPLEMENTATION_TRIALS_FULL,
                     f"{fmt_seconds(2 * args.trials * _SECONDS_PER_STEP)}: every round a real step",
                     seconds=2 * args.trials * _SECONDS_PER_STEP,
                     hint="full mode, ")
    else:
        seconds = 2 * args.trials * _SECONDS_PER_ROUND + 400 * _SECONDS_PER_STEP
        _refuse_size(args, "trials", args.trials, MAX_AUDIT_TRIALS,
                     f"{fmt_seconds(seconds)} and {fmt_bytes(2 * args.trials * _BYTES_PER_TRIAL)} of memory",
                     seconds=seconds)
    from paperlib.artifact.provenance import ResultCache
    from paperlib.implementations import datasets, real_audit

    if args.data_dir is not None and not args.data_dir.strip():
        raise ParameterError("data_dir", "data_dir (--data-dir) must be a folder, got an empty string")
    try:
        try:
            choice = datasets.resolve_points(args.dataset, args.N + 1, args.seed, mode=args.mode,
                                             root=args.data_dir)
        except datasets.TooFewPoints as exc:  # k = N + 1 points: say it with the user's parameter
            raise ParameterError("N",
                                 f"N (--N) must be <= {exc.available - 1} with {exc.where} (D' has N+1 points), got "
                                 f"{args.N}; put the full dataset into the data folder (--data-dir or "
                                 "$PAPERLIB_DATA)") from None
        name, root, source = choice.dataset, choice.root, choice.source
        extra = {"batch_size": args.batch_size} if args.batch_size is not None else {}
        r = real_audit.audit_implementation(args.implementation, args.model, name, N=args.N, q=args.q,
                                            sigma=args.sigma, C=args.C, trials=args.trials, seed=args.seed,
                                            mode=args.mode, delta=args.delta, progress=sys.stderr.isatty(),
                                            cache=ResultCache(args.mode), data_root=root,
                                            points="bundled" if source == datasets.SOURCE_BUNDLED else "folder",
                                            **extra)
    except datasets.DatasetUnavailable as exc:
        raise ParameterError("dataset",
                             f"dataset {args.dataset!r} unavailable: {str(exc).strip().splitlines()[0]}") from None
    keys = ("implementation", "version", "mechanism", "model", "dataset", "N", "n", "q", "sigma", "C", "delta", "seed",
            "mode", "path", "normaliser_found", "real_steps_disagreeing", "step_check", "claim", "fpr", "fnr",
            "fpr_ci", "fnr_ci", "eps_lower", "eps_claimed", "violation", "trials", "calibration_trials", "seconds",
            "seconds_per_step", "seconds_per_call", "step_device", "full_mode_estimate_s")
    r = r.to_json()  # the audit's one dict form; the command prints these of its fields
    out = {"command": "audit-implementation"}
    out.update({k: r.get(k) for k in keys})
    if args.batch_size is not None:
        out["batch_size"] = args.batch_size
    out["data"] = source
    out["data_note"] = choice.note
    if r.get("inputs"):
        out["inputs"] = r["inputs"]
    if r.get("check"):
        out["check"] = {k: r["check"].get(k) for k in ("passed", "min_p", "threshold", "tests", "trials",
                                                       "min_detectable_ks_distance", "power")}
    return out


def _validate(args) -> None:
    _check_integers(args)
    check_int(args.N, "N", 1)
    check_rate(args.q)
    check_positive(args.sigma, "sigma")
    check_int(args.n, "n", 1)
    check_int(args.rounds, "rounds", 1)
    check_positive(args.tol, "tol")
    if not (math.isfinite(args.max_seconds) and args.max_seconds >= 0):
        raise ParameterError("max_seconds",
                             f"max_seconds (--max-seconds) must be a finite number >= 0 (0: no limit), got {args.max_seconds!r}")
    Mechanism.parse(args.mechanism, allowed=ANY).require_defined(args.N, args.q)  # FEASGM with floor(N q) = 0
    if args.command == "tradeoff":
        check_alpha_array(args.alpha)
    else:
        check_delta(args.delta)
    _check_guarantee_size(args)
    _check_rounds_size(args)  # last: it may announce a long run


def _curve(args):
    """The curve asked for, from the one dispatch (:func:`paperlib.mechanisms.curves.curve`)."""
    try:
        return curves.curve(args.mechanism, args.bound, args.N, args.q, args.sigma, args.n, rounds=args.rounds)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "dp_accounting":
            raise
        raise ParameterError("rounds", "rounds > 1 needs the [accounting] extra for this curve (dp-accounting is not "
                                       "installed): pip install 'paperlib[accounting]'") from None


def _jsonnum(x):
    x = float(x)
    return x if math.isfinite(x) else None


def run_tradeoff(args) -> dict:
    alpha = check_alpha_array(args.alpha)
    curve = _curve(args)
    out = {"command": "tradeoff", "mechanism": args.mechanism, "bound": args.bound,
           "N": args.N, "q": args.q, "sigma": args.sigma, "n": args.n, "rounds": args.rounds}
    if args.bound == "clt":
        res = curve.bounds(alpha)  # the theorem's own curve, as the CLI has always printed it
        out.update(alpha=alpha.tolist(), beta=[_jsonnum(b) for b in res.upper], mu=curve.mu, gamma=curve.gamma,
                   note="CLT upper bound, defined on [gamma, 1 - gamma]; null outside")
    else:
        composed = curve.accounting() is not None  # a numerical composition (PLD) with its bracket
        if composed:
            lo, hi = curve.beta_bounds(alpha)  # refines its grid to the accuracy target first
        sampled = isinstance(curve, LRMixture) and alpha.size > LRMixture.EXACT_BELOW
        beta = curve(alpha, tol=args.tol) if isinstance(curve, LRMixture) else curve(alpha)
        out.update(alpha=alpha.tolist(), beta=[float(b) for b in beta], label=curve.label)
        for k in ("dropped_mass", "case", "K", "K_prime"):
            if k in curve.meta:
                out[k] = curve.meta[k]
        if isinstance(curve, LRMixture):
            if sampled:
                out["max_error"] = curve.curve(args.tol).meta["max_gap"]
                out["method"] = "sampled curve (tangent envelope)"
            else:
                out["method"] = "exact: common threshold solved per alpha"
        if composed:
            # the true curve lies between its two ends at every alpha
            out.update(beta_bracket=[[float(a), float(b)] for a, b in zip(lo, hi)],
                       accounting_error=float(max(hi - lo)), method="PLD composition (dp_accounting)",
                       accounting=_accounting_summary(curve))
            if float(max(hi - lo)) > ACCOUNTING_TOLERANCE * max(float(max(hi)), 0.1):
                sys.stderr.write(f"paperlib: warning: the composed curve is known to {float(max(hi - lo)):.3g} "
                                 f"only (beta_bracket), more than {ACCOUNTING_TOLERANCE:.0%} of it\n")
    if args.rounds == 1:
        out["sgm_claim_beta"] = [float(b) for b in sgm_claim(args.q, args.sigma)(alpha)]
    return out


def run_epsilon(args) -> dict:
    delta = check_delta(args.delta)
    if args.claimed:
        if args.rounds > 1:
            # T rounds: the claim as Opacus's RDP accountant reports it (the paper's Figure 7 baseline)
            from paperlib.mechanisms.claimed import sgm_claim_epsilon

            eps = sgm_claim_epsilon(args.q, args.sigma, rounds=args.rounds, delta=delta, accountant="rdp")
            out = {"command": "epsilon", "epsilon": _jsonnum(eps), "delta": delta,
                   "curve": f"SGM claim over {args.rounds} rounds (Opacus RDP accountant)",
                   "accountant": "rdp", "mechanism": args.mechanism, "bound": "claim",
                   "N": args.N, "q": args.q, "sigma": args.sigma, "n": args.n, "rounds": args.rounds}
            if not math.isfinite(eps):
                out["note"] = "the RDP accountant gives no finite epsilon at this delta"
            return out
        curve, label = sgm_claim(args.q, args.sigma), "SGM claim"
    else:
        if args.bound == "clt":
            raise ParameterError("bound",
                                 "bound=clt has no privacy profile (it holds on [gamma, 1-gamma] only); use guarantee or upper")
        if args.bound == "guarantee" and args.rounds > 1 and not mechanism_spec(args.mechanism).sgm_always:
            return _epsilon_certified(args, delta)
        curve = _curve(args)
        label = curve.label
    eps = curve.epsilon(delta)
    out = {"command": "epsilon", "epsilon": _jsonnum(eps), "delta": delta, "curve": label,
           "mechanism": args.mechanism, "bound": "claim" if args.claimed else args.bound,
           "N": args.N, "q": args.q, "sigma": args.sigma, "n": args.n, "rounds": args.rounds}
    if curve.accounting() is not None:
        # a numerical composition: the exact epsilon lies in the bracket; "epsilon" is its safe end
        # (upper for a guarantee or claim, lower for an upper bound of a guarantee)
        lo, hi = curve.epsilon_bounds(delta)
        out.update(epsilon_bracket=[_jsonnum(lo), _jsonnum(hi)],
                   accounting_error=_jsonnum(hi - lo) if math.isfinite(hi) else None,
                   accounting=_accounting_summary(curve))
        _warn_bracket(lo, hi)
    return _note_infinite(out, eps, certificate=args.bound == "guarantee" and not args.claimed)


def _warn_bracket(lo: float, hi: float) -> None:
    """Warn on stderr when an epsilon's accountant bracket is wider than :data:`ACCOUNTING_TOLERANCE`."""
    if (hi - lo > ACCOUNTING_TOLERANCE * max(hi, 0.1)) if math.isfinite(hi) else math.isfinite(lo):
        sys.stderr.write(f"paperlib: warning: epsilon is known only to the bracket [{lo:.6g}, {hi:.6g}] "
                         f"(accountant error above {ACCOUNTING_TOLERANCE:.0%})\n")


def _note_infinite(out: dict, eps: float, certificate: bool = False) -> dict:
    if not math.isfinite(eps):
        out["note"] = ("no finite epsilon from this certificate: its outcomes of infinite privacy loss (events it "
                       "reveals) carry more than delta; the mechanism itself may still have a finite epsilon"
                       if certificate else
                       "no finite epsilon: delta(eps) exceeds delta for every eps (the pair is almost perfectly "
                       "distinguishable)")
    return out


def _epsilon_certified(args, delta: float) -> dict:
    """``epsilon --bound guarantee`` over several rounds: the pair's certified epsilon (the smallest valid
    certificate) and the epsilon a named attack forces, from ``certified_interval``: the numbers ``check`` gives."""
    from paperlib.mechanisms.certified import certified_interval
    from paperlib.mechanisms.setting import Setting

    r = certified_interval(Setting(args.mechanism, args.N, args.q, args.sigma, args.n, rounds=args.rounds,
                                   delta=delta))
    lo, hi = r.epsilon_certified_bracket
    out = {"command": "epsilon", "epsilon": _jsonnum(hi), "delta": delta, "curve": r.certified_label,
           "certificate": r.certified_method, "mechanism": args.mechanism, "bound": "guarantee",
           "N": args.N, "q": args.q, "sigma": args.sigma, "n": args.n, "rounds": args.rounds,
           "epsilon_bracket": [_jsonnum(lo), _jsonnum(hi)],
           "accounting_error": _jsonnum(hi - lo) if math.isfinite(hi) else None,
           "accounting": {"engine": "dp_accounting PLD", "step": r.certified_grid,
                          "accuracy_met": r.accuracy_met},
           "pair": [args.N, args.N + 1], "epsilon_forced": _jsonnum(r.epsilon_forced),
           "epsilon_forced_bracket": [_jsonnum(v) for v in r.epsilon_forced_bracket],
           "forced_by": r.forced_label}
    _warn_bracket(lo, hi)
    return _note_infinite(out, hi, certificate=True)


#: relative width of a PLD bracket above which the CLI warns (of max(value, 0.1))
ACCOUNTING_TOLERANCE = 0.01


def _accounting_summary(curve) -> dict:
    """Grid, passes and accuracy of a numerical composition (its ``accounting()``), for the JSON output."""
    acc = curve.accounting()
    return {"engine": acc.get("engine"), "step": acc.get("step"), "passes": len(acc.get("passes", [])),
            "rel_tol": acc.get("rel_tol"), "accuracy_met": acc.get("accuracy_met")}


def _what(args) -> str:
    """What a command computes, for "could not compute X for these parameters"."""
    if args.command == "audit":
        return f"the {args.mechanism.upper()} audit"
    if args.command == "audit-implementation":
        return f"the audit of {args.implementation}"
    if getattr(args, "claimed", False):
        thing = "the SGM claim's epsilon"
    else:
        thing = f"the {args.mechanism.upper()} " + {"guarantee": "guarantee", "upper": "upper bound",
                                                    "clt": "CLT bound"}[args.bound]
    return thing + (f" over {args.rounds} rounds" if args.rounds > 1 else "")


def _is_out_of_memory(exc: BaseException) -> bool:
    """torch's allocation failures (``torch.OutOfMemoryError``, a RuntimeError; the CPU allocator's "can't
    allocate memory"), recognised without importing torch when the command did not."""
    torch = sys.modules.get("torch")
    oom = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    return (oom is not None and isinstance(exc, oom)) or "can't allocate memory" in str(exc)


def _size_parameter(args) -> str:
    """The parameter that sets the memory a command needs (named when memory runs out)."""
    if args.command == "audit":
        data = (args.N + 1) * args.n * _BYTES_PER_ELEMENT
        return f"n (n = {args.n:,}, N = {args.N})" if data >= args.trials * _BYTES_PER_TRIAL \
            else f"trials (trials = {args.trials:,})"
    if args.command == "audit-implementation":
        return f"trials (trials = {args.trials:,})"
    if args.rounds > 1:
        return f"rounds (rounds = {args.rounds:,})"
    return f"N (N = {args.N:,})"


def _fail(message: str, status: int) -> int:
    sys.stderr.write(f"paperlib: error: {' '.join(str(message).split()) or 'unknown error'}\n")
    return status


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


#: a negative number argparse would take for an option: it knows ``-1`` and ``-0.5``, not ``-1e-5`` or ``-inf``
_NEGATIVE_NUMBER = re.compile(r"-(\d+\.?\d*|\.\d+)(e[-+]?\d+)?|-inf(inity)?", re.I)


def _join_negative_values(argv: Sequence[str]) -> list[str]:
    """``--delta -1e-5`` as ``--delta=-1e-5``, so that a negative value reaches its option's range check
    (argparse reads it as an unknown option and says only "expected one argument")."""
    out: list[str] = []
    for tok in argv:
        if out and out[-1].startswith("--") and out[-1] != "--" and "=" not in out[-1] \
                and _NEGATIVE_NUMBER.fullmatch(tok):
            out[-1] = f"{out[-1]}={tok}"
        else:
            out.append(tok)
    return out


def main(argv=None) -> int:
    parser = build_parser()
    argv = _join_negative_values(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(argv)
    except ModuleNotFoundError as exc:  # audit-implementation's choices come from the torch-based package
        if (exc.name or "").split(".")[0] not in AUDIT_EXTRA:
            raise
        sys.stderr.write(f"paperlib: error: audit-implementation needs the [audit] extra ({exc.name} is not "
                         "installed): pip install 'paperlib[audit]'\n")
        return 2
    if args.command == "check":
        return run_check(args)
    if args.command == "audit-step":
        return run_audit_step(args)
    try:
        if args.command == "audit":
            out = run_audit(args)  # validates its own options
        elif args.command == "audit-implementation":
            out = run_audit_implementation(args)  # validates its own options
        else:
            _validate(args)
            run = run_tradeoff if args.command == "tradeoff" else run_epsilon
            try:
                out = _with_budget(args.max_seconds, lambda: run(args))
            except _OutOfTime:
                return _fail(_out_of_time_message(args), 1)
    except MemoryError:
        if os.environ.get("PAPERLIB_DEBUG"):
            raise
        p = _size_parameter(args)
        return _fail(f"out of memory computing {_what(args)}: the memory grows with {p}; "
                     f"lower --{p.split()[0]}", 2)
    except ValueError as exc:
        if os.environ.get("PAPERLIB_DEBUG"):
            raise
        msg = _first_line(exc)
        if isinstance(exc, InputError):  # a setting out of range, a refused file of the user's
            return _fail(msg, 2)
        # not about an option the user gave: an internal step failed for these values
        return _fail(msg if msg.startswith("could not compute") else
                     f"could not compute {_what(args)} for these parameters ({msg})", 1)
    except ArithmeticError as exc:  # OverflowError, ZeroDivisionError, FloatingPointError inside a computation
        if os.environ.get("PAPERLIB_DEBUG"):
            raise
        return _fail(f"could not compute {_what(args)} for these parameters ({type(exc).__name__}: "
                     f"{_first_line(exc)})", 1)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in AUDIT_EXTRA:
            raise
        sys.stderr.write(f"paperlib: error: {args.command} needs the [audit] extra ({exc.name} is not installed): "
                         "pip install 'paperlib[audit]'\n")
        return 2
    except RuntimeError as exc:
        # audit-implementation: the implementation does not match its mechanism, an old release
        # is not available (offline, no cache) or does not run here, or its code audit failed;
        # elsewhere a numerical step that failed ("could not compute ... (reason)"); torch's
        # allocation failures are RuntimeErrors too
        if os.environ.get("PAPERLIB_DEBUG"):
            raise
        msg = _first_line(exc)
        if _is_out_of_memory(exc):
            p = _size_parameter(args)
            return _fail(f"out of memory computing {_what(args)}: the memory grows with {p}; "
                         f"lower --{p.split()[0]}", 2)
        if isinstance(exc, ComputationError) or msg.startswith("could not compute"):
            return _fail(msg, 1)
        return _fail(f"could not compute {_what(args)} for these parameters ({msg})", 1)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
