"""Command line: ``python -m paperlib {tradeoff,epsilon,audit,audit-implementation} ...``
(the contract: README.md, section "Command line").

Examples::

    python -m paperlib tradeoff --mechanism easgm --bound guarantee \\
        --N 3 --q 0.5 --sigma 2 --n 20 --alpha 0.1
    python -m paperlib epsilon --mechanism feasgm --bound upper \\
        --N 140199 --q 0.005 --sigma 10 --n 26010 --rounds 200 --delta 1e-5

Output is one JSON object on stdout. Invalid input exits with status 2 and one
line on stderr that names the parameter and its allowed range.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from paperlib.mechanisms.clt import clt_bound
from paperlib.mechanisms.guarantees import MECHANISMS, feasgm_floors, guarantee, sgm_claim, upper_bound
from paperlib.fdp.mixture import LRMixture
from paperlib.validation import check_alpha_array, check_delta, check_int, check_positive, check_rate

BOUNDS = ("guarantee", "upper", "clt")
#: packages of the optional [audit] extra: a command that needs one says so in one line
AUDIT_EXTRA = ("torch", "torchvision", "opacus", "tqdm")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse's own status for usage errors)
        sys.stderr.write(f"paperlib: error: {message}\n")
        sys.exit(2)


def _curve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mechanism", required=True, choices=MECHANISMS, help="which normalisation DP-SGD uses")
    p.add_argument("--bound", default="guarantee", choices=BOUNDS,
                   help="guarantee (exact per-pair lower bound), upper (its upper bound, Thm 3.8/3.10/A.4), clt (Berry-Esseen CLT upper bound)")
    p.add_argument("--N", type=int, required=True, help="size of the smaller dataset |D| (D' has N+1)")
    p.add_argument("--q", type=float, required=True, help="Poisson sampling rate in (0, 1]")
    p.add_argument("--sigma", type=float, required=True, help="noise multiplier > 0")
    p.add_argument("--n", type=int, required=True, help="number of model parameters (output dimension) >= 1")
    p.add_argument("--rounds", type=int, default=1, help="number of training rounds T >= 1")
    p.add_argument("--tol", type=float, default=1e-6, help="largest interpolation error in beta (default 1e-6)")


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
    return p


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


def run_audit(args) -> dict:
    """``audit``: worst-case data (D = N copies of C u, added point -C u), balanced game, Eq. 3."""
    from paperlib.audit import audit_worst_case

    check_int(args.N, "N", 1)
    check_rate(args.q)
    check_positive(args.sigma, "sigma")
    check_positive(args.C, "C")
    check_int(args.n, "n", 1)
    check_int(args.trials, "trials", 2)
    check_delta(args.delta)
    r = audit_worst_case(args.mechanism, args.N, args.q, args.sigma, args.n, C=args.C, trials=args.trials,
                         distinguisher=args.distinguisher, seed=args.seed, device=args.device, delta=args.delta)
    return {"command": "audit", "fpr": r.fpr, "fnr": r.fnr, "eps_lower": r.eps_lower, "delta": r.delta,
            "trials": r.trials, "eps_claimed": _jsonnum(r.eps_claimed), "fpr_ci": list(r.fpr_ci),
            "fnr_ci": list(r.fnr_ci), "delta_lower": r.delta_lower, "violation": r.violation,
            "trials_D": r.trials_D, "trials_Dprime": r.trials_Dprime, "calibration_trials": r.calibration_trials,
            "path": r.path, "mechanism": r.mechanism, "distinguisher": r.distinguisher, "N": r.N, "n": r.n, "q": r.q,
            "sigma": r.sigma, "C": r.C, "seed": r.seed, "device": r.device}


IMPLEMENTATIONS = ("opacus-0.13.0", "opacus-0.15.0", "opacus-installed", "dpsur")


def _audit_implementation_options(a: argparse.ArgumentParser) -> None:
    """Options of ``python -m paperlib audit-implementation`` (paperlib.implementations.real_audit)."""
    a.add_argument("--implementation", required=True, choices=IMPLEMENTATIONS,
                   help="whose DP-SGD step: Opacus v0.13.0 (ASGM), v0.15.0 (EASGM), the installed v1.x (FEASGM), DPSUR (ASGM)")
    a.add_argument("--model", required=True, choices=("cnn-mnist", "cnn-cifar10", "large-mnist"),
                   help="model at fixed parameters theta_0 (built from --seed)")
    a.add_argument("--dataset", required=True, choices=("mnist", "fmnist", "cifar10", "synthetic"),
                   help="where the N+1 random points come from")
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


def run_audit_implementation(args) -> dict:
    """``audit-implementation``: one step of a real implementation, white-box game, Eq. 3."""
    check_int(args.N, "N", 1)
    if args.N > 12:
        raise ValueError(f"N must be <= 12 (the exact distinguishers enumerate 2^N subsets), got {args.N}")
    check_rate(args.q)
    check_positive(args.sigma, "sigma")
    check_positive(args.C, "C")
    check_int(args.trials, "trials", 2)
    check_delta(args.delta)
    from paperlib.artifact.provenance import ResultCache
    from paperlib.implementations import real_audit

    try:
        from paperlib.implementations.datasets import DatasetUnavailable
    except ImportError:  # pragma: no cover - the loader is part of the package
        DatasetUnavailable = ()  # noqa: N806
    try:
        r = real_audit.audit_implementation(args.implementation, args.model, args.dataset, N=args.N, q=args.q,
                                            sigma=args.sigma, C=args.C, trials=args.trials, seed=args.seed,
                                            mode=args.mode, delta=args.delta, progress=False,
                                            cache=ResultCache(args.mode))
    except DatasetUnavailable as exc:
        raise ValueError(f"dataset {args.dataset!r} unavailable: {str(exc).strip().splitlines()[0]}") from None
    keys = ("implementation", "version", "mechanism", "model", "dataset", "N", "n", "q", "sigma", "C", "delta", "seed",
            "mode", "path", "normaliser_found", "fpr", "fnr", "fpr_ci", "fnr_ci", "eps_lower", "eps_claimed",
            "violation", "trials", "calibration_trials", "seconds", "seconds_per_step", "full_mode_estimate_s")
    out = {"command": "audit-implementation"}
    out.update({k: r.get(k) for k in keys})
    if r.get("check"):
        out["check"] = {k: r["check"][k] for k in ("passed", "min_p", "threshold", "tests", "trials")}
    return out


def _validate(args) -> None:
    check_int(args.N, "N", 1)
    check_rate(args.q)
    check_positive(args.sigma, "sigma")
    check_int(args.n, "n", 1)
    check_int(args.rounds, "rounds", 1)
    check_positive(args.tol, "tol")
    if args.mechanism == "feasgm":
        K, _ = feasgm_floors(args.N, args.q)
        if K == 0:
            raise ValueError(f"N*q must be >= 1 for feasgm: floor(N*q) = 0 divides by zero (N={args.N}, q={args.q})")


def _curve(args):
    """The curve object asked for (an LRMixture, PointwiseMixture, or a CLT closure)."""
    mech, bound, T = args.mechanism, args.bound, args.rounds
    if bound == "clt":
        if mech not in ("easgm", "feasgm"):
            raise ValueError("bound=clt is defined for mechanism easgm or feasgm (Theorems 3.13, A.7)")
        if args.n < 2:
            raise ValueError("n must be >= 2 for the CLT bound (it composes n-1 coordinates)")
        return clt_bound(mech, args.N, args.q, args.sigma, args.n, rounds=T)
    if T > 1:
        # T rounds (paperlib.fdp.composition): easgm/feasgm upper exact (chi-square with T(n-1)
        # coordinates), asgm upper by numerical composition of Eq. 14, sgm f_q^(xT); the
        # T-round guarantee of easgm/asgm/feasgm has no closed form (clear error there)
        from paperlib.mechanisms.multiround import rounds_curve

        return rounds_curve(mech, bound, args.N, args.q, args.sigma, args.n, rounds=T)
    if bound == "guarantee":
        return guarantee(mech, args.N, args.q, args.sigma, args.n)
    return upper_bound(mech, args.N, args.q, args.sigma, args.n)


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
        beta = curve(alpha) if not isinstance(curve, LRMixture) else curve(alpha, tol=args.tol)
        out.update(alpha=alpha.tolist(), beta=[float(b) for b in beta], label=getattr(curve, "label", ""))
        meta = getattr(curve, "meta", {})
        for k in ("dropped_mass", "case", "K", "K_prime"):
            if k in meta:
                out[k] = meta[k]
        if isinstance(curve, LRMixture):
            if float(args.tol) in curve._curves:
                out["max_error"] = curve.curve(args.tol).meta["max_gap"]
                out["method"] = "sampled curve (tangent envelope)"
            else:
                out["method"] = "exact: common threshold solved per alpha"
    if args.rounds == 1:
        out["sgm_claim_beta"] = [float(b) for b in sgm_claim(args.q, args.sigma)(alpha)]
    return out


def run_epsilon(args) -> dict:
    delta = check_delta(args.delta)
    if args.claimed:
        if args.rounds > 1:
            # T rounds: the claim as Opacus's RDP accountant reports it (the paper's Figure 7 baseline)
            from paperlib.mechanisms.multiround import sgm_claim_epsilon

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
            raise ValueError("bound=clt has no privacy profile (it holds on [gamma, 1-gamma] only); use guarantee or upper")
        curve = _curve(args)
        label = getattr(curve, "label", "")
    eps = curve.epsilon(delta)
    out = {"command": "epsilon", "epsilon": _jsonnum(eps), "delta": delta, "curve": label,
           "mechanism": args.mechanism, "bound": "claim" if args.claimed else args.bound,
           "N": args.N, "q": args.q, "sigma": args.sigma, "n": args.n, "rounds": args.rounds}
    if not math.isfinite(eps):
        out["note"] = "no finite epsilon: delta(eps) exceeds delta for every eps (the pair is almost perfectly distinguishable)"
    return out


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "audit":
            out = run_audit(args)  # validates its own options
        elif args.command == "audit-implementation":
            out = run_audit_implementation(args)  # validates its own options
        else:
            _validate(args)
            out = run_tradeoff(args) if args.command == "tradeoff" else run_epsilon(args)
    except ValueError as exc:
        sys.stderr.write(f"paperlib: error: {str(exc).splitlines()[0]}\n")
        return 2
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in AUDIT_EXTRA:
            raise
        sys.stderr.write(f"paperlib: error: {args.command} needs the [audit] extra ({exc.name} is not installed): "
                         "pip install 'paperlib[audit]'\n")
        return 2
    except RuntimeError as exc:
        # audit-implementation: the implementation does not match its mechanism, an old release
        # is not available (offline, no cache) or does not run here, or its code audit failed
        if type(exc).__name__ not in ("ImplementationMismatch", "ReleaseNotAvailable", "AuditError"):
            raise
        sys.stderr.write(f"paperlib: error: {str(exc).splitlines()[0]}\n")
        return 1
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
