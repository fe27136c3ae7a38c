"""The prepared device check of full mode (``make device-check``; issue 13 item 7).

One script that, in at most 8 minutes on one data-centre GPU, runs every code path that
``make all MODE=full DEVICE=cuda`` sends to the device, at the sizes full mode uses, on a
slice of each full-mode notebook (one point per figure, a few hundred real DP-SGD steps
instead of 20,000), and

1. compares the device's results with the CPU's for the same seeds: torch's CPU and
   CUDA generators give different draws for one seed, so random outputs are compared
   as distributions (two-sample Kolmogorov-Smirnov tests of the projected outputs and
   of distinguisher scores, Bonferroni at family level 1e-3; audited ``eps_L`` of both
   runs within each other's Clopper-Pearson range), deterministic parts (a round fed
   explicit draws, projections, likelihood ratios and normality votes of *given*
   outputs) value by value to 1e-9 relative;
2. measures per-trial and per-point costs and extrapolates the full-mode cost of every
   notebook (and of ``make all MODE=full``) from them and the full-mode work of each
   notebook (:func:`full_mode_work`, from :data:`NOTEBOOK_PARAMS`: the notebooks' own
   full-mode parameters, read from their sources by :func:`paperlib.artifact.nbparams.notebook_params`);
3. writes ``results/device_check.json`` (``$PAPERLIB_RESULTS``), the same tables as
   markdown in ``results/device_check.md``, and prints them.

Code paths (``id`` in the report). On the device (``torch`` device ``DEVICE``):

* ``mechanisms.sampler.iter_samples`` (``sample``, ``apply_round``): full ``n``-dim rounds
  (notebook 04, section 5: the KS and D'Agostino-Pearson distinguishers need them);
* ``mechanisms.sampler.iter_projected`` (``sample_projected``, ``apply_round_projected``,
  the chi-square residual from ``torch._standard_gamma``): the exact sufficient
  statistics (notebooks 04 and 05), at ``n = 10,000`` and at ``n = 1`` (no residual);
* ``audit.components.WhiteBoxModel.project``; ``audit.distinguishers``: the optimal
  distinguisher, the normality distinguisher with the chi-square test (coin and
  ``ties="half"``), with the KS test (``torch.sort``/``ndtr`` on the device) and with
  D'Agostino-Pearson (its statistic is scipy's, on the host, after a copy);
* ``audit.game.audit_distinguishers`` end to end: one point of notebook 04's Figure 2 and
  of notebook 05's Figure 3 (projected path), one of notebook 04's table of normality
  tests (full path, nine distinguishers).

The real implementations (reported as ``cpu-only``: timed on the CPU, and, in a GPU run,
on CUDA too; run first, since full mode's time rests on them):
``implementations.runners.run_steps`` for each implementation (``opacus-installed`` and
``opacus-1.0.2`` at ``dpfeta-mnist``'s ``n = 1,485,217`` (DP-FETA's own denoiser), notebook 07's two audits;
``opacus-0.15.0`` at the CNNs and the denoisers of notebook 06 (``dpfeta-mnist``,
``privimage-mnist``, ``privimage-cifar10``) and ``dpsur`` at ``cnn-mnist`` and ``cnn-cifar10``;
``opacus-0.13.0``, in no notebook of ``make all``, last), with
:func:`~paperlib.implementations.normaliser_detection.detect_normaliser` on the steps; in a GPU run each
implementation but DPSUR also steps on CUDA, timed, and compared with the CPU's steps at
``sigma = 0`` (same masks: updates equal to ``CUDA_TOL``). Then
``implementations.real_audit.audit_implementation(mode="full")`` (one point of notebook 06
and of notebook 07; its steps on CUDA where torch sees a GPU). Points come from synthetic
images of the model's input shape (the cost does not depend on the pixels; the notebooks
use the real data sets when they are there).

``DEVICE=cpu`` (no GPU, CI): the "device" side is the CPU too, with another seed for the
random parts (the same seed would give the same numbers and test nothing), so the
comparisons run and can fail; the report names every path and says it *would* run on
``cuda``. ``MODE=smoke`` shrinks the slice (every real implementation on the 430-weight
``tiny`` model, 400-round audits): its extrapolation is flagged as not representative.

Environment (as the other bench scripts): ``MODE`` (smoke|quick|full, default full),
``DEVICE`` (cpu|cuda, default cuda when available, else cpu), ``SEED`` (default 0),
``DEVICE_CHECK_BUDGET_S`` (seconds after which the remaining paths are skipped, default the
mode's ``budget_s``; the tests set it far above any run, so the paths checked never depend on
the machine's speed), ``DEVICE_CHECK_DOWNLOAD=1`` (let the old Opacus releases be downloaded when they are not
in the release cache; by default the check never touches the network and reports them
as skipped). ``--counts`` prints the full-mode work table as JSON and exits;
``--self-test`` shows that each comparison rejects a planted discrepancy.

Exit status: 0 when no path failed (``ok`` or ``skipped``), 1 when a comparison failed
(``mismatch``) or a path raised (``error``), 2 for bad settings.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from paperlib.artifact.nbparams import notebook_params
from paperlib.implementations.costs import CPU_ONLY

# ============================================================================ full-mode work
#: what this check reads of each notebook's full mode, by variable name: read from the notebook's
#: source by paperlib.artifact.nbparams.notebook_params (`pf.pick(..., full=...)` and the like;
#: nothing is executed), never copied here
NOTEBOOK_NAMES = {
    # TRIALS counted rounds per point, as many calibration rounds (audit_distinguishers' default):
    # 20,000 per point; Figure 2's grid N_VALUES x (Q_EASGM + Q_ASGM) with DISTINGUISHERS; section 5's table
    # SENS_SETTINGS x SENS_N with SPECS = audit.normality_test_specs()
    "04_audit_figure2": ("TRIALS", "N_VALUES", "Q_EASGM", "Q_ASGM", "N_DIM", "SIGMA", "C", "DELTA", "DISTINGUISHERS",
                         "SENS_N", "SENS_SETTINGS", "SPREAD_SEED_COUNT"),
    # Figure 3: SETTINGS x N_DIMS, COMMON["distinguishers"] = DISTINGUISHERS (projected path)
    "05_audit_figure3": ("TRIALS", "N_SET", "SIGMA", "C", "DELTA", "N_DIMS", "SETTINGS", "DISTINGUISHERS",
                         "SPREAD_SEED_COUNT"),
    # AUDIT_MODE "full": every round an implementation step, TRIALS on D and as many on D' (+ calibration);
    # each (DATASETS panel, METHODS row) audited with artifact.figure4.model_for's model (None: not audited)
    "06_audit_real_figure4": ("AUDIT_MODE", "TRIALS", "N", "SIGMA", "C", "DATASETS", "MODEL_OF", "PAPER_MODEL_OF",
                              "PAPER_MODEL_PANELS", "METHODS", "SPREAD_SEED_COUNT"),
    # one audit of MODEL per release in IMPLEMENTATIONS (the paper's, the installed one)
    "07_opacus_feasgm_figure6": ("AUDIT_MODE", "TRIALS", "N", "Q", "SIGMA", "C", "MODEL", "IMPLEMENTATIONS"),
    # chapter 7's game on MODEL twice: the release as shipped (chapter 7's own audit, reused from its
    # cache) and the fixed step ("opacus-installed+fix", BATCH_SIZE): the second is new work
    "11_the_fix": ("AUDIT_MODE", "TRIALS", "N", "Q", "MODEL", "BATCH_SIZE"),
}


def _notebook_params(nb: str, names) -> dict:
    """``names`` of notebook ``nb`` in full mode; RuntimeError naming any the reader cannot evaluate."""
    p = notebook_params(nb, "full")
    missing = [k for k in names if k not in p]
    if missing:
        raise RuntimeError(f"notebooks/{nb}.py: {', '.join(missing)} not readable as a constant "
                           "(paperlib.artifact.nbparams); bench/device_check.py needs it")
    return {k: p[k] for k in names}


NOTEBOOK_PARAMS = {nb: _notebook_params(nb, names) for nb, names in NOTEBOOK_NAMES.items()}

#: notebooks whose every computation is NumPy/SciPy (their DEVICE parameter is unused: each says
#: so in its set-up cell) or mode-independent (08 reads the stored Opacus table, and its one live
#: step is a ten-example Opacus step on the CPU): this check does not extrapolate them
HOST_ONLY_NOTEBOOKS = {
    "01_tradeoff_basics": "NumPy only (DEVICE unused)",
    "02_mechanism_guarantees": "NumPy Monte Carlo (DEVICE unused)",
    "03_figure5_upper_bounds": "NumPy/SciPy numerics (DEVICE unused)",
    "08_opacus_code_audit": "reads the stored code audit; one ten-example Opacus step on the CPU (mode-independent)",
    "09_multiround_figure7": "NumPy/SciPy composition numerics (DEVICE unused)",
    "10_practitioners": "NumPy/SciPy accounting (DEVICE unused)",
    "12_beyond_opacus": "one-step probes of each code path on the CPU, then NumPy/SciPy accounting (DEVICE unused)",
}


def _rounds(nb: str) -> int:
    """Rounds (or implementation steps) per point: counted + as many calibration rounds."""
    return 2 * NOTEBOOK_PARAMS[nb]["TRIALS"]


def full_mode_work() -> dict:
    """Per notebook, the full-mode work items: ``{"what", "points", "rounds_per_point", "measure", ...}``.

    ``measure`` names the slice measurement whose cost stands for one point of the item.
    """
    from paperlib.audit import normality_test_specs
    from paperlib.artifact.figure4 import model_for

    p4, p5, p6, p7, p11 = (NOTEBOOK_PARAMS[k] for k in ("04_audit_figure2", "05_audit_figure3", "06_audit_real_figure4",
                                                          "07_opacus_feasgm_figure6", "11_the_fix"))
    nb06 = []
    for ds in p6["DATASETS"]:
        for label, impl, q in p6["METHODS"]:
            model = model_for(ds, label, model_of=p6["MODEL_OF"], paper_model_of=p6["PAPER_MODEL_OF"],
                              paper_model_panels=p6["PAPER_MODEL_PANELS"])
            if model is None:
                continue
            nb06.append({"what": f"{label}: {impl} on {ds} ({model}), q = {q}", "points": 1,
                         "rounds_per_point": _rounds("06_audit_real_figure4"), "implementation": impl,
                         "model": model, "q": q, "measure": "real"})
    # the seed spread: dpsur on mnist at q = 0.7 again at SEED + 1, ... (SEED is the figure's run)
    more = p6["SPREAD_SEED_COUNT"] - 1
    nb06.append({"what": f"seed spread: dpsur on mnist (cnn-mnist), q = 0.7, {more} more seeds", "points": more,
                 "rounds_per_point": _rounds("06_audit_real_figure4"), "implementation": "dpsur",
                 "model": p6["MODEL_OF"]["mnist"], "q": 0.7, "measure": "real"})
    return {
        "04_audit_figure2": [
            {"what": f"Figure 2 sweep (projected path, {len(p4['DISTINGUISHERS'])} distinguishers, "
                     f"n = {p4['N_DIM']})",
             "points": len(p4["N_VALUES"]) * (len(p4["Q_EASGM"]) + len(p4["Q_ASGM"])),
             "rounds_per_point": _rounds("04_audit_figure2"), "measure": "audit-nb04-fig2"},
            {"what": f"table of normality tests (full path, {len(normality_test_specs())} distinguishers, "
                     f"n = {p4['N_DIM']})",
             "points": len(p4["SENS_N"]) * len(p4["SENS_SETTINGS"]),
             "rounds_per_point": _rounds("04_audit_figure2"), "measure": "audit-nb04-sens"},
            {"what": f"seed spread: one Figure 2 point at {p4['SPREAD_SEED_COUNT']} seeds (projected path, "
                     f"{len(p4['DISTINGUISHERS'])} distinguishers)", "points": p4["SPREAD_SEED_COUNT"],
             "rounds_per_point": _rounds("04_audit_figure2"), "measure": "audit-nb04-fig2"},
        ],
        "05_audit_figure3": [
            {"what": f"Figure 3 sweep (projected path, {len(p5['DISTINGUISHERS'])} distinguishers, "
                     f"n = {min(p5['N_DIMS']):,} ... {max(p5['N_DIMS']):,})",
             "points": len(p5["SETTINGS"]) * len(p5["N_DIMS"]),
             "rounds_per_point": _rounds("05_audit_figure3"), "measure": "audit-nb05"},
            {"what": f"seed spread: one Figure 3 point at {p5['SPREAD_SEED_COUNT']} seeds (projected path, "
                     f"{len(p5['DISTINGUISHERS'])} distinguishers, n = 100)", "points": p5["SPREAD_SEED_COUNT"],
             "rounds_per_point": _rounds("05_audit_figure3"), "measure": "audit-nb05"},
        ],
        "06_audit_real_figure4": nb06,
        "07_opacus_feasgm_figure6": [
            {"what": f"{impl} on {p7['MODEL']}, q = {p7['Q']}", "points": 1,
             "rounds_per_point": _rounds("07_opacus_feasgm_figure6"), "implementation": impl,
             "model": p7["MODEL"], "q": p7["Q"], "measure": "real"} for impl in p7["IMPLEMENTATIONS"]
        ],
        # the fixed step is the installed Opacus step with another divisor: its cost is that step's, and
        # its audit's fixed cost chapter 7's (the same game on the same model)
        "11_the_fix": [
            {"what": f"opacus-installed+fix (batch size {p11['BATCH_SIZE']}) on {p11['MODEL']}, q = {p11['Q']} "
                     "(the release's audit is chapter 7's, reused)", "points": 1,
             "rounds_per_point": _rounds("11_the_fix"), "implementation": "opacus-installed+fix",
             "model": p11["MODEL"], "q": p11["Q"], "measure": "real", "cost_of": "opacus-installed",
             "audit_like": "07_opacus_feasgm_figure6"},
        ],
    }


# ============================================================================ settings
MODES = ("smoke", "quick", "full")
#: slice sizes per mode. audit_trials: counted rounds of each end-to-end audit (as many
#: again calibrate; full = the notebooks' 10,000); sampler_trials: draws per dataset and side
#: of each distribution comparison; steps: implementation steps of the timed run_steps call
#: per model; real_trials: `trials` of the audit_implementation slice (2x that many steps)
SIZES = {
    "smoke": {"audit_trials": 400, "sampler_trials": 2_000, "exact_trials": 200, "steps": {"tiny": 4},
              "real_trials": 6, "fixed_cost": True, "budget_s": 110},
    "quick": {"audit_trials": 4_000, "sampler_trials": 10_000, "exact_trials": 1_000,
              "steps": {"cnn-mnist": 40, "cnn-cifar10": 20, "dpfeta-mnist": 3, "privimage-mnist": 3,
                        "privimage-cifar10": 3}, "real_trials": 10,
              "fixed_cost": True, "budget_s": 900},
    "full": {"audit_trials": 10_000, "sampler_trials": 20_000, "exact_trials": 2_000,
             "steps": {"cnn-mnist": 200, "cnn-cifar10": 100, "dpfeta-mnist": 20, "privimage-mnist": 20,
                       "privimage-cifar10": 20}, "real_trials": 20,
             "fixed_cost": True, "budget_s": 480},
}
_P6, _P7 = NOTEBOOK_PARAMS["06_audit_real_figure4"], NOTEBOOK_PARAMS["07_opacus_feasgm_figure6"]
#: model of opacus-0.13.0's timed steps: the release (ASGM) is in no notebook of make all
ASGM_RELEASE_MODEL = "cnn-mnist"
#: (N, q) of each implementation's timed steps: its notebook's N and one of its q (06: a METHODS row's,
#: 07: Q); opacus-0.13.0, in no notebook, as opacus-0.15.0
STEP_SETTING = {"opacus-installed": (_P7["N"], _P7["Q"]), "opacus-1.0.2": (_P7["N"], _P7["Q"]),
                "opacus-0.15.0": (_P6["N"], 0.5), "opacus-0.13.0": (_P6["N"], 0.5), "dpsur": (_P6["N"], 0.7)}
#: the other sampling rates chapter 6 audits an implementation at: its steps are timed there too (a step
#: at q = 0.005 is mostly an empty batch, an order of magnitude cheaper for a large model than at q = 0.5)
EXTRA_STEP_QS = {impl: tuple(sorted({q for _, i, q in _P6["METHODS"] if i == impl} - {STEP_SETTING[impl][1]}))
                 for impl in STEP_SETTING}
SIGMA, C = _P6["SIGMA"], _P6["C"]  # every audit notebook's (tests/artifact/test_device_check.py: they agree)
KS_LEVEL = 1e-3  # family-wise level of each path's KS tests (Bonferroni)
DETECT_STEPS = 20  # first steps kept whole for the normaliser's detection (an audit keeps at least 20)
REL_TOL = 1e-9  # deterministic parts: max |a - b| <= REL_TOL * max |a|


def _refuse(msg: str):
    """Bad settings: one line on stderr, exit status 2."""
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(2)


def _env_settings():
    mode = os.environ.get("MODE") or "full"
    if mode not in MODES:
        _refuse(f"MODE={mode!r} is not allowed: use MODE=smoke, MODE=quick or MODE=full")
    dev = os.environ.get("DEVICE") or None
    if dev not in (None, "cpu", "cuda"):
        _refuse(f"DEVICE={dev!r} is not allowed: use DEVICE=cpu or DEVICE=cuda")
    try:
        seed = int(os.environ.get("SEED") or 0)
    except ValueError:
        _refuse(f"SEED={os.environ.get('SEED')!r} must be an integer")
    import torch

    budget = os.environ.get("DEVICE_CHECK_BUDGET_S") or None
    if budget is not None:
        try:
            budget = float(budget)
        except ValueError:
            budget = -1.0
        if not (math.isfinite(budget) and budget > 0):
            _refuse(f"DEVICE_CHECK_BUDGET_S={os.environ.get('DEVICE_CHECK_BUDGET_S')!r} must be a number of seconds > 0")
        SIZES[mode]["budget_s"] = budget
    dev = dev or ("cuda" if torch.cuda.is_available() else "cpu")
    if dev == "cuda" and not torch.cuda.is_available():
        _refuse("DEVICE=cuda but torch.cuda.is_available() is False (no usable GPU); use DEVICE=cpu")
    return mode, dev, seed


# ============================================================================ comparisons
def ks_family(ref: dict, dev: dict, level: float = KS_LEVEL) -> dict:
    """Two-sample KS test per named sample (``ref[k]`` vs ``dev[k]``), Bonferroni at ``level``."""
    import numpy as np
    from scipy import stats

    p = {}
    for k in ref:
        a, b = np.asarray(ref[k], float).ravel(), np.asarray(dev[k], float).ravel()
        p[k] = float(stats.ks_2samp(a, b).pvalue)
    thr = level / max(1, len(p))
    min_p = min(p.values()) if p else 1.0
    return {"kind": "ks-2samp", "tests": len(p), "level": level, "threshold": thr, "min_p": min_p,
            "passed": bool(min_p >= thr), "p_values": p}


def exact_family(ref: dict, dev: dict, tol: float = REL_TOL) -> dict:
    """``max |a - b| / max |a|`` per named array (NaN/inf must sit at the same places)."""
    import numpy as np

    rel = {}
    for k in ref:
        a = np.asarray(ref[k], dtype=float)
        b = np.asarray(dev[k], dtype=float)
        if a.shape != b.shape:
            rel[k] = math.inf
            continue
        fa, fb = np.isfinite(a), np.isfinite(b)
        if not np.array_equal(fa, fb) or not np.array_equal(a[~fa], b[~fb], equal_nan=True):
            rel[k] = math.inf
            continue
        scale = float(np.max(np.abs(a[fa]))) if fa.any() else 0.0
        diff = float(np.max(np.abs(a[fa] - b[fb]))) if fa.any() else 0.0
        rel[k] = diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)
    worst = max(rel.values()) if rel else 0.0
    return {"kind": "exact", "tol": tol, "max_rel_diff": worst, "passed": bool(worst <= tol), "rel_diff": rel}


def equal_family(ref: dict, dev: dict) -> dict:
    """Boolean arrays (normality test passes) must agree entry by entry."""
    import numpy as np

    bad = {k: int(np.sum(np.asarray(ref[k]) != np.asarray(dev[k]))) for k in ref}
    total = {k: int(np.asarray(ref[k]).size) for k in ref}
    return {"kind": "equal", "mismatches": bad, "entries": total, "passed": bool(sum(bad.values()) == 0)}


def eps_overlap(ref: dict, dev: dict) -> dict:
    """Audits of the same point on two sides: per distinguisher, the ranges
    ``[eps_L(upper CP limits), eps_L(lower CP limits)]`` must overlap (each run's eps_L lies
    in the range the other's Clopper-Pearson intervals allow)."""
    from paperlib.audit.stats import eps_lower

    out, ok = {}, True
    for label, r in ref.items():
        s = dev[label]

        def rng(x):
            lo = float(eps_lower(x.fpr_ci[1], x.fnr_ci[1], x.delta))
            hi = float(eps_lower(x.fpr_ci[0], x.fnr_ci[0], x.delta))
            return [lo, hi]

        a, b = rng(r), rng(s)
        overlap = bool(a[0] <= b[1] and b[0] <= a[1])
        ok = ok and overlap
        out[label] = {"reference": a, "device": b, "eps_L": [float(r.eps_lower), float(s.eps_lower)],
                      "overlap": overlap}
    return {"kind": "clopper-pearson-overlap", "passed": bool(ok), "distinguishers": out}


def _merge(*checks) -> dict:
    return {"passed": bool(all(c["passed"] for c in checks)), "checks": list(checks)}


# ============================================================================ helpers
class Clock:
    """Wall time of a block, with the device synchronised before and after."""

    def __init__(self, dev):
        self.dev = dev

    def _sync(self):
        import torch

        if self.dev.type == "cuda":
            torch.cuda.synchronize()

    def __enter__(self):
        self._sync()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self._sync()
        self.s = time.perf_counter() - self.t0
        return False


def _seed(seed: int, *keys: int) -> int:
    import numpy as np

    return int(np.random.SeedSequence([int(seed), *[int(k) for k in keys]]).generate_state(1)[0])


def _fmt_s(s) -> str:
    if s is None or (isinstance(s, float) and not math.isfinite(s)):
        return "not measured"
    if s == 0:
        return "0 s"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.2f} h"


def _md(x) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


class Check:
    """Runs the paths in order, records one entry per path, and keeps the time budget."""

    def __init__(self, mode, dev, seed):
        import torch

        self.mode, self.dev, self.seed = mode, dev, seed
        self.cuda = dev.type == "cuda"
        self.sz = SIZES[mode]
        self.t_start = time.perf_counter()
        self.entries: list[dict] = []
        self.measures: dict = {}  # measure id -> {"per_point_s", "rounds", ...} for the extrapolation
        self.cpu = torch.device("cpu")
        self.threads = 1 if not self.cuda else None  # the notebooks audit on one CPU thread (DEVICE=cpu)

    # the "device side" of a comparison: on a GPU the same seed; on the CPU another stream
    def dev_seed(self, s: int) -> int:
        return s if self.cuda else _seed(s, 99)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t_start

    def run(self, entry: dict, fn) -> None:
        """``entry``: id, functions, notebooks, device_support; ``fn(entry)`` fills sizes/comparison/timing/extrapolation."""
        entry.setdefault("ran_on", str(self.dev) if entry["device_support"] == "device" else "cpu")
        entry["would_run_on_gpu"] = "cuda" if entry["device_support"] == "device" else "cpu"
        entry.setdefault("timing", {})
        entry.setdefault("extrapolation", {"full_mode_s": None, "basis": "not measured"})
        entry.setdefault("comparison", None)
        if self.elapsed() > self.sz["budget_s"]:
            entry["status"] = "skipped"
            entry["note"] = f"time budget of {self.sz['budget_s']} s spent before this path"
            self.entries.append(entry)
            print(f"-- {entry['id']}: skipped (time budget)", flush=True)
            return
        t0 = time.perf_counter()
        try:
            fn(entry)
            if entry.get("status") is None:
                cmp = entry.get("comparison")
                entry["status"] = "ok" if cmp is None or cmp.get("passed", True) else "mismatch"
        except Exception as exc:  # one path's failure is reported, the others still run
            entry["status"] = "error"
            entry["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        entry["wall_s"] = time.perf_counter() - t0
        self.entries.append(entry)
        print(f"-- {entry['id']}: {entry['status']} in {entry['wall_s']:.1f} s"
              + (f" ({entry['error']})" if entry.get("error") else "")
              + (f" ({entry['note']})" if entry.get("note") and entry["status"] == "skipped" else ""), flush=True)


# ============================================================================ device paths
def _worst(N, n):
    from paperlib.audit import worst_case_vectors

    return worst_case_vectors(N, n, C)


def _project_np(x, basis):
    import numpy as np

    t = x.detach().cpu().numpy()
    y = t @ basis
    res = np.maximum(np.einsum("ij,ij->i", t, t) - np.einsum("ij,ij->i", y, y), 0.0)
    return y, res


def path_iter_samples(ck: Check, e: dict) -> None:
    import torch

    from paperlib.audit import WhiteBoxModel
    from paperlib.mechanisms import sampler as S

    mech, N, n, q = "asgm", 5, NOTEBOOK_PARAMS["04_audit_figure2"]["N_DIM"], 0.5  # a notebook-04 section-5 point
    v = _worst(N, n)
    e["sizes"] = {"mechanism": mech, "N": N, "n": n, "q": q, "sigma": SIGMA, "C": C,
                  "trials_per_dataset": ck.sz["sampler_trials"], "exact_trials": ck.sz["exact_trials"]}
    basis = WhiteBoxModel(mech, v, q, SIGMA, C).basis
    # deterministic: one round fed the same explicit draws on both sides
    g = torch.Generator().manual_seed(_seed(ck.seed, 1, 0))
    m = ck.sz["exact_trials"]
    ref_x, dev_x = {}, {}
    vt = S.as_vectors(v, device="cpu")
    for ds, rows in (("D", vt[:-1]), ("D'", vt)):
        masks = torch.rand((m, rows.shape[0]), generator=g, dtype=torch.float64) < q
        noise = torch.randn((m, n), generator=g, dtype=torch.float64)
        a = S.apply_round(mech, S.clip(rows, C), masks, noise, q, SIGMA, C)
        rd = rows.to(ck.dev)
        b = S.apply_round(mech, S.clip(rd, C), masks.to(ck.dev), noise.to(ck.dev), q, SIGMA, C)
        ref_x[ds], dev_x[ds] = a.numpy(), b.cpu().numpy()
    exact = exact_family(ref_x, dev_x)
    # random: sample() with the same seed on the CPU and on the device, compared as distributions
    t = ck.sz["sampler_trials"]
    ref, dev = {}, {}
    tdev = 0.0
    for k, ds in enumerate(("D", "D'")):
        s = _seed(ck.seed, 1, 1 + k)
        xr = S.sample(mech, v, q, SIGMA, C, ds, t, torch.Generator().manual_seed(s))
        with Clock(ck.dev) as clk:
            xd = S.sample(mech, v, q, SIGMA, C, ds, t, torch.Generator(device=ck.dev).manual_seed(ck.dev_seed(s)),
                          device=ck.dev)
        tdev += clk.s
        for side, x in (("ref", xr), ("dev", xd)):
            y, res = _project_np(x, basis)
            tgt = ref if side == "ref" else dev
            for j in range(y.shape[1]):
                tgt[f"{ds} coord {j}"] = y[:, j]
            tgt[f"{ds} residual"] = res
    e["comparison"] = _merge(exact, ks_family(ref, dev))
    per = tdev / (2 * t)
    e["timing"] = {"seconds": tdev, "trials": 2 * t, "per_trial_s": per}
    ck.measures["iter_samples"] = per


def path_iter_projected(ck: Check, e: dict) -> None:
    import torch

    from paperlib.mechanisms import sampler as S

    p5 = NOTEBOOK_PARAMS["05_audit_figure3"]
    mech, N, q = "asgm", p5["N_SET"], 0.7  # notebook 05's ASGM setting
    cases = [max(p5["N_DIMS"]), min(p5["N_DIMS"])]  # n = 10,000 (chi-square residual) and n = 1 (none)
    e["sizes"] = {"mechanism": mech, "N": N, "n": cases, "q": q, "sigma": SIGMA, "C": C,
                  "trials_per_dataset": ck.sz["sampler_trials"], "exact_trials": ck.sz["exact_trials"]}
    ref_x, dev_x, ref, dev = {}, {}, {}, {}
    tdev, tcount = 0.0, 0
    t = ck.sz["sampler_trials"]
    m = ck.sz["exact_trials"]
    for ci, n in enumerate(cases):
        v = _worst(N, n)
        basis = S.span_basis(v, C)
        vt = S.as_vectors(v, device="cpu")
        g = torch.Generator().manual_seed(_seed(ck.seed, 2, ci))
        for k, (ds, rows) in enumerate((("D", vt[:-1]), ("D'", vt))):
            rc = S.clip(rows, C) @ basis
            masks = torch.rand((m, rows.shape[0]), generator=g, dtype=torch.float64) < q
            z = torch.randn((m, basis.shape[1]), generator=g, dtype=torch.float64)
            chi2 = 2.0 * torch._standard_gamma(torch.full((m,), 0.5 * max(n - basis.shape[1], 1), dtype=torch.float64),
                                               generator=g)
            a = S.apply_round_projected(mech, rc, masks, z, chi2, q, SIGMA, C)
            b = S.apply_round_projected(mech, rc.to(ck.dev), masks.to(ck.dev), z.to(ck.dev), chi2.to(ck.dev),
                                        q, SIGMA, C)
            ref_x[f"n={n} {ds} coords"], dev_x[f"n={n} {ds} coords"] = a[0].numpy(), b[0].cpu().numpy()
            ref_x[f"n={n} {ds} residual"], dev_x[f"n={n} {ds} residual"] = a[1].numpy(), b[1].cpu().numpy()
            s = _seed(ck.seed, 2, 10 + 2 * ci + k)
            cr, rr = S.sample_projected(mech, v, q, SIGMA, C, ds, t, torch.Generator().manual_seed(s), basis=basis)
            with Clock(ck.dev) as clk:
                cd, rd = S.sample_projected(mech, v, q, SIGMA, C, ds, t,
                                            torch.Generator(device=ck.dev).manual_seed(ck.dev_seed(s)),
                                            basis=basis.to(ck.dev), device=ck.dev)
            tdev += clk.s
            tcount += t
            for j in range(cr.shape[1]):
                ref[f"n={n} {ds} coord {j}"], dev[f"n={n} {ds} coord {j}"] = cr[:, j].numpy(), cd[:, j].cpu().numpy()
            if basis.shape[1] < n:
                ref[f"n={n} {ds} residual"], dev[f"n={n} {ds} residual"] = rr.numpy(), rd.cpu().numpy()
            else:  # r = n: no residual at all; both sides must give exact zeros
                ref_x[f"n={n} {ds} sampled residual (0)"] = rr.numpy()
                dev_x[f"n={n} {ds} sampled residual (0)"] = rd.cpu().numpy()
    e["comparison"] = _merge(exact_family(ref_x, dev_x), ks_family(ref, dev))
    per = tdev / tcount
    e["timing"] = {"seconds": tdev, "trials": tcount, "per_trial_s": per}
    ck.measures["iter_projected"] = per


def _given_outputs(ck, mech, N, n, q, trials, key, full=False):
    """Outputs drawn once on the CPU (projected, or full n-dim), per dataset, with their model."""
    import torch

    from paperlib.audit import WhiteBoxModel
    from paperlib.mechanisms import sampler as S

    v = _worst(N, n)
    model = WhiteBoxModel(mech, v, q, SIGMA, C)
    out = {}
    for k, ds in enumerate(("D", "D'")):
        g = torch.Generator().manual_seed(_seed(ck.seed, key, k))
        if full:
            out[ds] = S.sample(mech, v, q, SIGMA, C, ds, trials, g)
        else:
            out[ds] = S.sample_projected(mech, v, q, SIGMA, C, ds, trials, g, basis=torch.as_tensor(model.basis))
    return v, model, out


def _proj(y, res):
    from paperlib.audit.components import Projection

    return Projection(y=y, sq_norm_y=(y * y).sum(dim=1), residual=res)


def path_project(ck: Check, e: dict) -> None:
    mech, N, n, q = "asgm", 5, NOTEBOOK_PARAMS["04_audit_figure2"]["N_DIM"], 0.5
    t = ck.sz["exact_trials"]
    _, model, out = _given_outputs(ck, mech, N, n, q, t, 3, full=True)
    e["sizes"] = {"mechanism": mech, "N": N, "n": n, "q": q, "trials_per_dataset": t}
    ref, dev = {}, {}
    tdev = 0.0
    for ds, x in out.items():
        a = model.project(x)
        xd = x.to(ck.dev)
        with Clock(ck.dev) as clk:
            b = model.project(xd)
        tdev += clk.s
        for name in ("y", "sq_norm_y", "residual"):
            ref[f"{ds} {name}"] = getattr(a, name).numpy()
            dev[f"{ds} {name}"] = getattr(b, name).cpu().numpy()
    e["comparison"] = _merge(exact_family(ref, dev))
    e["timing"] = {"seconds": tdev, "trials": 2 * t, "per_trial_s": tdev / (2 * t)}
    ck.measures["project"] = tdev / (2 * t)


def path_optimal(ck: Check, e: dict) -> None:
    import torch

    from paperlib.audit import OptimalDistinguisher
    from paperlib.mechanisms import sampler as S

    mech, N, q = "asgm", max(NOTEBOOK_PARAMS["04_audit_figure2"]["N_VALUES"]), 0.9  # notebook 04's largest N
    n = NOTEBOOK_PARAMS["04_audit_figure2"]["N_DIM"]
    t = ck.sz["exact_trials"]
    v, model, out = _given_outputs(ck, mech, N, n, q, t, 4)
    d = OptimalDistinguisher()
    d.bind(model)
    e["sizes"] = {"mechanism": mech, "N": N, "n": n, "q": q, "given_trials": t,
                  "trials_per_dataset": ck.sz["sampler_trials"], "components": [model.P.size, model.Q.size]}
    ref_s, dev_s = {}, {}
    tdev = 0.0
    for ds, (y, res) in out.items():
        ref_s[ds] = d.score(None, _proj(y, res))
        with Clock(ck.dev) as clk:
            dev_s[ds] = d.score(None, _proj(y.to(ck.dev), res.to(ck.dev)))
        tdev += clk.s
    exact = exact_family(ref_s, dev_s)
    # the pipeline as the audit runs it: rounds drawn and scored on each side, scores compared in law
    basis_dev = torch.as_tensor(model.basis, device=ck.dev)
    ref, dev = {}, {}
    ts = ck.sz["sampler_trials"]
    for k, ds in enumerate(("D", "D'")):
        s = _seed(ck.seed, 4, 10 + k)
        y, r = S.sample_projected(mech, v, q, SIGMA, C, ds, ts, torch.Generator().manual_seed(s),
                                  basis=torch.as_tensor(model.basis))
        ref[f"{ds} score"] = d.score(None, _proj(y, r))
        y, r = S.sample_projected(mech, v, q, SIGMA, C, ds, ts,
                                  torch.Generator(device=ck.dev).manual_seed(ck.dev_seed(s)), basis=basis_dev,
                                  device=ck.dev)
        dev[f"{ds} score"] = d.score(None, _proj(y, r))
    e["comparison"] = _merge(exact, ks_family(ref, dev))
    e["timing"] = {"seconds": tdev, "trials": 2 * t, "per_trial_s": tdev / (2 * t)}
    ck.measures["optimal"] = tdev / (2 * t)


def _normality(ck: Check, e: dict, test: str, key: int) -> None:
    import numpy as np

    from paperlib.audit import NormalityDistinguisher

    full = test != "chi2"
    mech, N, q = "asgm", 5, 0.5
    n = NOTEBOOK_PARAMS["04_audit_figure2"]["N_DIM"]
    t = ck.sz["exact_trials"]
    _, model, out = _given_outputs(ck, mech, N, n, q, t, key, full=full)
    variants = {"coin": NormalityDistinguisher(test=test), "half": NormalityDistinguisher(test=test, ties="half")}
    if test != "chi2":
        variants = {"coin": variants["coin"], "majority": NormalityDistinguisher(test=test, aggregation="majority")}
    for d in variants.values():
        d.bind(model)
    e["sizes"] = {"mechanism": mech, "N": N, "n": n, "q": q, "test": test, "given_trials": t,
                  "pairs": int(variants["coin"].n_pairs_used)}
    ref_p, dev_p, ref_s, dev_s = {}, {}, {}, {}
    tdev = 0.0
    for ds, o in out.items():
        if full:
            x_ref, p_ref = o, model.project(o)
            x_dev = o.to(ck.dev)
            p_dev = model.project(x_dev)
        else:
            y, res = o
            x_ref, p_ref, x_dev, p_dev = None, _proj(y, res), None, _proj(y.to(ck.dev), res.to(ck.dev))
        d = variants["coin"]
        pr = d.pairs
        for side in ("p", "q"):
            coords, scale = pr[f"coords_{side}"], pr[f"scale_{side}"]
            ref_p[f"{ds} passes {side.upper()}"] = d.passes(x_ref, p_ref, coords, scale)
            with Clock(ck.dev) as clk:
                dev_p[f"{ds} passes {side.upper()}"] = d.passes(x_dev, p_dev, coords, scale)
            tdev += clk.s
        for name, dv in variants.items():
            # the votes' coins come from a numpy generator: the same seed on both sides
            ref_s[f"{ds} score {name}"] = dv.score(x_ref, p_ref, np.random.default_rng([ck.seed, key, 1]))
            dev_s[f"{ds} score {name}"] = dv.score(x_dev, p_dev, np.random.default_rng([ck.seed, key, 1]))
    e["comparison"] = _merge(equal_family(ref_p, dev_p), exact_family(ref_s, dev_s))
    e["timing"] = {"seconds": tdev, "trials": 2 * t, "per_trial_s": tdev / (2 * t)}
    ck.measures[f"normality-{test}"] = tdev / (2 * t)


def _audit(ck, vectors, mech, q, distinguishers, trials, seed, dev, threads):
    from paperlib.audit import audit_distinguishers

    kw = {"num_threads": threads} if threads else {}
    with Clock(dev) as clk:
        r = audit_distinguishers(vectors, mech, q, SIGMA, C, trials=trials, distinguishers=distinguishers,
                                 seed=seed, device=dev, delta=1e-5, **kw)
    return r, clk.s


def _audit_path(ck: Check, e: dict, measure: str, mech, N, n, q, distinguishers, key) -> None:
    v = _worst(N, n)
    t = ck.sz["audit_trials"]
    s = _seed(ck.seed, key)
    ref, t_ref = _audit(ck, v, mech, q, distinguishers, t, s, ck.cpu, None)
    dev, t_dev = _audit(ck, v, mech, q, distinguishers, t, ck.dev_seed(s), ck.dev, ck.threads)
    path = next(iter(dev.values())).path
    e["sizes"] = {"mechanism": mech, "N": N, "n": n, "q": q, "trials": t, "calibration_trials": t,
                  "distinguishers": len(dev), "path": path}
    e["comparison"] = _merge(eps_overlap(ref, dev))
    rounds = 2 * t
    e["timing"] = {"seconds": t_dev, "rounds": rounds, "per_trial_s": t_dev / rounds, "per_point_s": t_dev,
                   "reference_cpu_s": t_ref}
    ck.measures[measure] = {"per_point_s": t_dev, "rounds": rounds}


def path_audit_nb04(ck, e):
    p4 = NOTEBOOK_PARAMS["04_audit_figure2"]
    _audit_path(ck, e, "audit-nb04-fig2", "asgm", max(p4["N_VALUES"]), p4["N_DIM"], 0.9, p4["DISTINGUISHERS"], 20)


def path_audit_nb05(ck, e):
    p5 = NOTEBOOK_PARAMS["05_audit_figure3"]
    _audit_path(ck, e, "audit-nb05", "asgm", p5["N_SET"], max(p5["N_DIMS"]), 0.7, p5["DISTINGUISHERS"], 21)


def path_audit_nb04_sens(ck, e):
    from paperlib.audit import normality_test_specs

    _audit_path(ck, e, "audit-nb04-sens", "asgm", max(NOTEBOOK_PARAMS["04_audit_figure2"]["N_VALUES"]),
                NOTEBOOK_PARAMS["04_audit_figure2"]["N_DIM"], 0.5, normality_test_specs(), 22)


def warm_up(ck: Check) -> float:
    """A few rounds on the device first (CUDA context, kernels), not counted in any timing."""
    from paperlib.audit import audit_distinguishers

    with Clock(ck.dev) as clk:
        audit_distinguishers(_worst(3, 100), "asgm", 0.5, SIGMA, C, trials=64, distinguishers=["optimal", "normality"],
                             seed=0, device=ck.dev)
        audit_distinguishers(_worst(3, 100), "asgm", 0.5, SIGMA, C, trials=64,
                             distinguishers=["optimal", {"name": "normality", "test": "ks"}], seed=0, device=ck.dev)
    # the in-process implementations once on the tiny model (imports, first-call set-up)
    from paperlib.implementations import runners

    t0 = time.perf_counter()
    X, y = _points("tiny", 4, 0)
    for impl in ("opacus-installed", "dpsur"):
        runners.run_steps(impl, "tiny", X, y, dataset="D", q=0.5, sigma=SIGMA, C=C, trials=1, seed=0)
    runners.per_example_gradients("tiny", X, y)
    return clk.s + time.perf_counter() - t0


# ============================================================================ real implementations (CPU)
def _points(model: str, k: int, seed: int):
    """``k`` synthetic images of ``model``'s input shape (standardised uniform pixels) and labels."""
    import torch

    from paperlib.implementations.models import MODEL_INPUT

    g = torch.Generator().manual_seed(int(seed))
    X = (torch.rand((k, *MODEL_INPUT[model]), generator=g, dtype=torch.float32) - 0.5) / 0.25
    y = torch.randint(0, 10, (k,), generator=g, dtype=torch.int64)
    return X, y


def _accepted_rules(documented: str, candidates: dict) -> set:
    acc = {documented}
    if documented == "|B'|":  # DPSUR: detect_normaliser's rules are of the batch; |B'| has |B|'s law
        acc.add("|B|")
    if documented in ("Nq", "floor(Nq)") and candidates.get("Nq") == candidates.get("floor(Nq)"):
        acc |= {"Nq", "floor(Nq)"}
    return acc


def full_models(impl: str) -> list:
    """Models ``impl`` runs on in make all's full mode: those of its items of :func:`full_mode_work`
    (notebooks 06, 07), the CNNs first, then the paper's denoisers; :data:`ASGM_RELEASE_MODEL` for a
    release in no notebook (opacus-0.13.0)."""
    items = [w for ws in full_mode_work().values() for w in ws if w.get("implementation") == impl]
    if not items:
        return [ASGM_RELEASE_MODEL]
    from paperlib.artifact.figure4 import own_models

    paper = own_models(_P6["PAPER_MODEL_OF"]) | {_P7["MODEL"]}
    return sorted(dict.fromkeys(w["model"] for w in items), key=lambda m: m in paper)  # stable sort


def _models_for(ck: Check, impl: str) -> list:
    return ["tiny"] if ck.mode == "smoke" else full_models(impl)


def _download() -> bool:
    return os.environ.get("DEVICE_CHECK_DOWNLOAD") == "1"


def path_run_steps(ck: Check, e: dict, impl: str) -> None:
    from paperlib.implementations import normaliser_detection, runners

    N, q = STEP_SETTING[impl]
    documented = runners.IMPLEMENTATION_MECHANISM[impl]
    e["sizes"] = {"N": N, "q": q, "sigma": SIGMA, "C": C, "models": {}}
    e["comparison"] = None
    per_model, detections = {}, {}
    from paperlib.implementations import real_audit as RA

    for model in _models_for(ck, impl):
        X, y = _points(model, N + 1, _seed(ck.seed, 30))
        m = ck.sz["steps"][model]
        kw = dict(dataset="D", q=q, sigma=SIGMA, C=C, seed=_seed(ck.seed, 31), download=_download(), device="cpu")
        t0 = time.perf_counter()
        grads = runners.per_example_gradients(model, X, y)
        t_grads = time.perf_counter() - t0
        # the steps as the audit takes them: projected on the white-box basis at the step (the Opacus
        # implementations, real_audit.step_options; DPSUR returns its whole updates, projected after)
        shared = RA.reduce_shared(grads, N, C)

        def options(keep):
            return RA.step_options(RA.reduce_args(impl, model, documented, q, SIGMA, C, "D", m, grads.shape[1],
                                                  kw["seed"], 0, keep), shared)
        opts = options(0)  # as an audit's chunks after its first: no whole update kept
        try:
            t1, startup = None, 0.0
            if ck.sz["fixed_cost"]:  # a first call: an old release's subprocess starts, the basis is converted
                t0 = time.perf_counter()
                startup = runners.run_steps(impl, model, X, y, trials=1, **kw, **opts)["startup_seconds"]
                t1 = time.perf_counter() - t0
            t0 = time.perf_counter()
            out = runners.run_steps(impl, model, X, y, trials=m, **kw, **opts)
            tm = time.perf_counter() - t0
            by_q = {f"{q:g}": out["step_seconds"] / m}
            for q2 in EXTRA_STEP_QS[impl]:  # the loop of steps at the notebooks' other sampling rates
                o2 = runners.run_steps(impl, model, X, y, trials=m, **{**kw, "q": q2}, **opts)
                by_q[f"{q2:g}"] = o2["step_seconds"] / m
            if out["updates"] is None:  # whole updates for the normaliser's detection (as an audit's first chunk)
                k = min(m, DETECT_STEPS)
                first = runners.run_steps(impl, model, X, y, trials=k, **kw, **options(k))["projected"]["first"]
        except runners.ReleaseNotAvailable as exc:
            e["status"] = "skipped"
            e["note"] = str(exc).strip().splitlines()[0]
            return
        # run_steps times its loop of steps itself; the rest of a call is its set-up (model, engine, data and
        # results moved), an old release's subprocess start apart (once per worker, startup_s)
        b = out["step_seconds"] / m
        a = max(out["seconds"] - out["step_seconds"] - out["startup_seconds"], 0.0)
        how = "the loop of steps timed inside an m-step call; the call's set-up apart (a release's start excluded)"
        if out["updates"] is not None:  # what the real audit adds per step: projecting each update after the steps
            t0 = time.perf_counter()
            RA.project_outputs(out["updates"], shared["basis"])
            t_proj = (time.perf_counter() - t0) / m
            updates = out["updates"]
        else:  # projected in the steps (timed with them)
            t_proj, updates = 0.0, first
        f = normaliser_detection.detect_normaliser(updates, grads, q=q, sigma=SIGMA, C=C, N_data=N)
        # Nq and floor(Nq) are one rule where N q is an integer; a documented rule among equally likely ones passes
        ok = f["normaliser"] in _accepted_rules(documented.rule, f["candidates"]) \
            or documented.rule in (f.get("ties") or [])
        if impl == "dpsur":
            # DPSUR divides by the size of a separate Poisson draw (implementations.dpsur), a divisor no
            # rule of the update's own batch describes: the rule found is recorded, not graded here;
            # tests/implementations/test_dpsur.py checks that step against DPSUR's own code instead
            ok = True
        detections[model] = {"documented": documented.rule, "found": f["normaliser"], "ties": f.get("ties"),
                             "agreement": f.get("agreement"), "trials": f.get("trials"), "passed": ok}
        per_model[model] = {"steps": m, "per_call_s": a, "per_step_s": b, "per_step_s_by_q": by_q, "startup_s": startup,
                            "one_step_call_s": t1, "m_step_call_s": tm,
                            "per_example_gradients_s": t_grads, "project_per_step_s": t_proj, "how": how,
                            "n": int(out["n"]),
                            "version": out.get("version")}
        if ck.cuda and impl not in CPU_ONLY:
            per_model[model].update(_cuda_steps(runners, impl, model, X, y, m, kw, opts, EXTRA_STEP_QS[impl]))
        e["sizes"]["models"][model] = {"n": int(out["n"]), "steps": m}
    e["timing"] = {"models": per_model, "seconds": sum(v["m_step_call_s"] + (v["one_step_call_s"] or 0.0)
                                                       for v in per_model.values()),
                   "per_trial_s": {k: v["per_step_s"] for k, v in per_model.items()}}
    e["normaliser_detection"] = detections
    e["comparison"] = {"passed": bool(all(d["passed"] for d in detections.values())),
                       "checks": [{"kind": "normaliser-detection", "passed": bool(all(d["passed"] for d in detections.values())),
                                   "detail": detections}],
                       "note": ("CPU against CUDA at sigma = 0 (same masks, no noise: updates equal to "
                                f"{CUDA_TOL:g} x max |u|) and the normaliser read off the CPU steps" if ck.cuda
                                and impl not in CPU_ONLY else "no GPU here (or DPSUR, CPU only): the normaliser "
                                "read off the steps must be the documented one")}
    for model, pm in per_model.items():
        if "cuda_vs_cpu" in pm:
            e["comparison"]["checks"].append(pm["cuda_vs_cpu"])
            e["comparison"]["passed"] = bool(e["comparison"]["passed"] and pm["cuda_vs_cpu"]["passed"])
    ck.measures[f"steps:{impl}"] = per_model


#: the CPU-CUDA comparison of steps at sigma = 0: max |u_cpu - u_cuda| <= CUDA_TOL * max |u_cpu| (float32 steps)
CUDA_TOL = 1e-4


def _cuda_steps(runners, impl, model, X, y, m, kw, opts, extra_qs=()) -> dict:
    """Per-step and per-call cost on CUDA (timed as on the CPU; projected on the GPU as the audit's steps
    are, ``opts``), at ``kw["q"]`` and ``extra_qs``, and the sigma = 0 comparison of whole updates with the CPU."""
    ckw = {**kw, **opts, "device": "cuda"}
    runners.run_steps(impl, model, X, y, trials=1, **ckw)  # warm: CUDA context, kernels, the basis on the GPU
    t0 = time.perf_counter()
    o = runners.run_steps(impl, model, X, y, trials=m, **ckw)
    tm = time.perf_counter() - t0
    b = o["step_seconds"] / m
    a = max(o["seconds"] - o["step_seconds"] - o["startup_seconds"], 0.0)
    by_q = {f"{kw['q']:g}": b}
    for q2 in extra_qs:
        by_q[f"{q2:g}"] = runners.run_steps(impl, model, X, y, trials=m, **{**ckw, "q": q2})["step_seconds"] / m
    k = min(m, 8)
    z = {**kw, "sigma": 0.0}
    cpu = runners.run_steps(impl, model, X, y, trials=k, **z)
    gpu = runners.run_steps(impl, model, X, y, trials=k, **{**z, "device": "cuda"})
    scale = float(np.abs(cpu["updates"]).max()) or 1.0
    diff = float(np.abs(cpu["updates"] - gpu["updates"]).max())
    same_masks = bool(np.array_equal(cpu["batch_sizes"], gpu["batch_sizes"]))
    return {"cuda_per_step_s": b, "cuda_per_call_s": a, "cuda_per_step_s_by_q": by_q, "cuda_m_step_call_s": tm,
            "cuda_vs_cpu": {"kind": "cpu-cuda-sigma0", "model": model, "steps": k, "max_abs_diff": diff,
                            "max_abs_update": scale, "tolerance": CUDA_TOL * scale, "same_batch_sizes": same_masks,
                            "passed": bool(same_masks and diff <= CUDA_TOL * scale)}}


def path_real_audit(ck: Check, e: dict, nb: str, impl: str, model_full: str, N: int, q: float) -> None:
    from paperlib.implementations import real_audit as RA
    from paperlib.implementations import runners

    model = "tiny" if ck.mode == "smoke" else model_full
    T = ck.sz["real_trials"]
    e["sizes"] = {"implementation": impl, "model": model, "N": N, "q": q, "trials": T, "steps": 2 * T,
                  "dataset": "synthetic"}
    if impl in runners.RELEASES:  # the audit would download a missing release: look in the cache first
        from paperlib.implementations.opacus_code import AuditError, install_release

        try:
            install_release(runners.RELEASES[impl], download=_download())
        except AuditError as exc:
            e["status"] = "skipped"
            e["note"] = (f"opacus {runners.RELEASES[impl]} is not in the release cache "
                         f"({(str(exc).strip().splitlines() or ['?'])[0]}); DEVICE_CHECK_DOWNLOAD=1 fetches it")
            return
    t0 = time.perf_counter()
    # check_trials only passes validation here (full audit mode does not check)
    r = RA.audit_implementation(impl, model, "synthetic", N=N, q=q, sigma=SIGMA, C=C, trials=T,
                                seed=_seed(ck.seed, 40), mode="full", check_trials=10, progress=False,
                                cache=None).to_json()
    wall = time.perf_counter() - t0
    steps = int(r["implementation_steps"])
    impl_s = float(r["seconds_per_step"] or 0.0) * steps
    # the rest: once per point (gradients, basis, normaliser detection, scoring) plus a projection
    # per step, whose cost the run_steps path measured on this model
    proj = ((ck.measures.get(f"steps:{impl}") or {}).get(model) or {}).get("project_per_step_s")
    fixed = max(wall - impl_s - steps * (proj or 0.0), 0.0)
    documented = runners.IMPLEMENTATION_MECHANISM[impl].rule
    found = {ds: (f or {}).get("normaliser") for ds, f in r["normaliser"].items()}
    ok = all(found[ds] in _accepted_rules(documented, (r["normaliser"][ds] or {}).get("candidates") or {})
             for ds in found)
    e["comparison"] = {"passed": bool(ok), "checks": [{"kind": "normaliser-detection", "passed": bool(ok),
                                                       "documented": documented, "found": found}],
                       "note": "CPU only: every round is a real step; the normaliser found on D and D' must be the "
                               "documented one; eps_L on so few rounds is not meaningful",
                       "eps_lower": r["eps_lower"], "path": r["path"]}
    e["timing"] = {"seconds": wall, "steps": steps, "step_device": r.get("step_device"), "implementation_s": impl_s,
                   "per_point_fixed_s": fixed,
                   "project_per_step_s": proj, "per_trial_s": wall / max(steps, 1)}
    ck.measures[f"real-audit:{nb}"] = {"model": model, "fixed_s": fixed}


# ============================================================================ extrapolation
def _step_cost(s: dict, item: dict, prefix: str = "") -> float:
    """Seconds per step of a work item: the cost measured at its sampling rate, else at the timed one."""
    return float((s.get(f"{prefix}per_step_s_by_q") or {}).get(f"{item.get('q', -1):g}", s[f"{prefix}per_step_s"]))


def _calls_per_point(impl: str, model_n: int, rounds: int) -> int:
    """run_steps calls of one full-mode real audit: per dataset ceil(steps / chunk), chunk as real_audit chunks."""
    from paperlib.implementations import real_audit as RA

    chunk = RA.chunk_steps(impl, model_n)
    per_ds = rounds // 2
    return 2 * math.ceil(per_ds / chunk)


def extrapolate(ck: Check) -> tuple[list, dict]:
    """Per-notebook full-mode estimates, and the per-path full-mode totals (``{path id: seconds}``)."""
    from paperlib.implementations.models import MODEL_PARAMETERS

    work = full_mode_work()
    per_path: dict = {}
    notebooks = []
    representative = ck.mode == "full"
    for nb, items in work.items():
        rows, total, missing = [], 0.0, []
        for it in items:
            row = dict(it)
            rounds = it["rounds_per_point"]
            if it["measure"] == "real":
                impl, model = it["implementation"], it["model"]
                steps = ck.measures.get(f"steps:{it.get('cost_of', impl)}") or {}
                mm = model if model in steps else ("tiny" if "tiny" in steps else None)
                ra = ck.measures.get(f"real-audit:{it.get('audit_like', nb)}")
                if mm is None:
                    row["estimate_s"] = None
                    missing.append(it["what"])
                else:
                    s = steps[mm]
                    calls = _calls_per_point(impl, MODEL_PARAMETERS[model], rounds)
                    step_cost = calls * s["per_call_s"] + rounds * _step_cost(s, it)
                    other = rounds * s["project_per_step_s"]
                    if ra is not None:
                        other += ra["fixed_s"]  # measured on one model per notebook (the largest)
                    else:
                        row["note"] = "the real audit's per-point cost (gradients, scoring) not measured"
                    row.update({"measured_model": mm, "run_steps_calls": calls, "steps": rounds,
                                "steps_s": step_cost, "other_s": other,
                                "estimate_s": it["points"] * (step_cost + other)})
                    total += row["estimate_s"]
                    pid = f"implementations.runners.run_steps[{impl}]"
                    per_path[pid] = per_path.get(pid, 0.0) + it["points"] * step_cost
                    pid = f"implementations.real_audit.audit_implementation[{nb[:2]}]"
                    per_path[pid] = per_path.get(pid, 0.0) + it["points"] * other
            else:
                meas = ck.measures.get(it["measure"])
                if meas is None:
                    row["estimate_s"] = None
                    missing.append(it["what"])
                else:
                    per_point = meas["per_point_s"] * rounds / meas["rounds"]
                    row.update({"per_point_s": per_point, "estimate_s": it["points"] * per_point,
                                "measured_rounds": meas["rounds"]})
                    total += row["estimate_s"]
            rows.append(row)
        notebooks.append({"notebook": nb, "work": rows, "estimate_s": None if missing else total,
                          "partial_estimate_s": total, "missing": missing,
                          # the Opacus steps run on the checked device (runners.step_device), DPSUR's on the CPU
                          "runs_on": str(ck.dev) + (" (DPSUR: cpu)" if ck.dev.type != "cpu" and any(
                              w.get("implementation") == "dpsur" for w in items) else ""),
                          "representative": representative,
                          "basis": ("measured per point/step at full-mode sizes" if representative else
                                    f"measured at {ck.mode}-mode sizes: NOT the full-mode cost")})
    # the device paths' share of the audits (rounds of each kind in make all's full mode)
    w4, w5 = work["04_audit_figure2"], work["05_audit_figure3"]
    r4, r5 = _rounds("04_audit_figure2"), _rounds("05_audit_figure3")
    fig2, sens, fig3 = w4[0]["points"] * r4, w4[1]["points"] * r4, w5[0]["points"] * r5
    n_ag = 2  # weighted and majority aggregation in the table of normality tests
    rounds_of = {
        "mechanisms.sampler.iter_samples": ("iter_samples", sens),
        "mechanisms.sampler.iter_projected": ("iter_projected", fig2 + fig3),
        "audit.components.WhiteBoxModel.project": ("project", sens),
        "audit.distinguishers.OptimalDistinguisher": ("optimal", fig2 + sens + fig3),
        # passes per (round, side P/Q) are computed once per distinguisher: fig2 1 chi2, the table
        # 2 coin + 2 ties=half, Figure 3 coin + ties=half
        "audit.distinguishers.NormalityDistinguisher[chi2]": ("normality-chi2", fig2 + 2 * n_ag * sens + 2 * fig3),
        "audit.distinguishers.NormalityDistinguisher[ks]": ("normality-ks", n_ag * sens),
        "audit.distinguishers.NormalityDistinguisher[normaltest]": ("normality-normaltest", n_ag * sens),
    }
    for pid, (meas, rounds) in rounds_of.items():
        if ck.measures.get(meas) is not None:
            per_path[pid] = ck.measures[meas] * rounds
        per_path.setdefault(pid + "#rounds", rounds)
    for pid, nb, k in (("audit.game.audit_distinguishers[projected, nb04 Figure 2]", "04_audit_figure2", 0),
                       ("audit.game.audit_distinguishers[full, nb04 normality tests]", "04_audit_figure2", 1),
                       ("audit.game.audit_distinguishers[projected, nb05 Figure 3]", "05_audit_figure3", 0)):
        row = next(n for n in notebooks if n["notebook"] == nb)["work"][k]
        if row.get("estimate_s") is not None:
            per_path[pid] = row["estimate_s"]
        per_path.setdefault(pid + "#rounds", row["points"] * row["rounds_per_point"])
    return notebooks, per_path


#: the machine full mode is written for (issue 20): 16 CPU workers and one data-centre GPU, 30 minutes
PARALLEL_WORKERS, PARALLEL_GPUS, FULL_BUDGET_S = 16, 1, 1800
#: the notebooks whose full mode runs real implementation steps (chapters 6, 7 and 11)
REAL_STEP_NOTEBOOKS = ("06_audit_real_figure4", "07_opacus_feasgm_figure6", "11_the_fix")


def parallel_estimate(ck: Check) -> dict:
    """Full mode's real steps (notebooks 06, 07 and 11) on PARALLEL_WORKERS workers and PARALLEL_GPUS GPUs
    (:func:`paperlib.implementations.costs.full_mode_estimate`), from the costs measured here.

    Per step on one worker: the run_steps cost (per step, plus the per-call cost spread over a chunk)
    on the CPU, or on CUDA where this run measured it (else ``gpus`` is 0: CPU workers only). The
    projection of each step on the white-box basis runs in the worker that made the step
    (``real_audit.reduce_chunk``), so it is spread over the workers; each audit's fixed cost runs in
    the parent process, one audit after another. Both, added without overlap, are the
    ``overhead_s`` of the estimate."""
    from paperlib.implementations.costs import full_mode_estimate
    from paperlib.implementations.models import MODEL_PARAMETERS

    work = full_mode_work()
    items, cpu, gpu, serial, missing = [], {}, {}, 0.0, []
    for nb in REAL_STEP_NOTEBOOKS:
        for it in work[nb]:
            impl, model = it["implementation"], it["model"]
            steps = ck.measures.get(f"steps:{it.get('cost_of', impl)}") or {}
            mm = model if model in steps else ("tiny" if "tiny" in steps else None)
            if mm is None:
                missing.append(it["what"])
                continue
            ra = ck.measures.get(f"real-audit:{it.get('audit_like', nb)}") or {}
            s = steps[mm]
            calls = _calls_per_point(impl, MODEL_PARAMETERS[model], it["rounds_per_point"])
            per_call = calls / it["rounds_per_point"]  # calls per step
            key = (impl, f"{model} #{len(items)}")  # each item at its own sampling rate's cost
            cpu[key] = _step_cost(s, it) + per_call * s["per_call_s"]
            if "cuda_per_step_s" in s:
                gpu[key] = _step_cost(s, it, "cuda_") + per_call * s["cuda_per_call_s"]
            items.append({"implementation": impl, "model": key[1], "points": it["points"],
                          "steps_per_point": it["rounds_per_point"]})
            serial += it["points"] * (it["rounds_per_point"] * s["project_per_step_s"] / PARALLEL_WORKERS
                                      + ra.get("fixed_s", 0.0))
    from paperlib.implementations.costs import CPU_ONLY as _cpu_only

    have_gpu = bool(items) and all((i["implementation"], i["model"]) in gpu for i in items
                                   if i["implementation"] not in _cpu_only)
    gpus = PARALLEL_GPUS if have_gpu else 0
    est = full_mode_estimate(items, cpu, workers=PARALLEL_WORKERS, gpus=gpus, gpu_step_costs=gpu if gpus else None,
                             overhead_s=serial)
    cpu_only = full_mode_estimate(items, cpu, workers=PARALLEL_WORKERS, overhead_s=serial)
    sec = est["seconds"]
    return {"workers": PARALLEL_WORKERS, "gpus": gpus, "estimate": est, "cpu_workers_only": cpu_only,
            "missing": missing, "budget_s": FULL_BUDGET_S, "meets_budget": (not missing) and sec <= FULL_BUDGET_S,
            "over_budget_s": max(sec - FULL_BUDGET_S, 0.0), "representative": ck.mode == "full",
            "note": ("GPU per-step costs measured in this run" if gpus else
                     f"no GPU measured in this run: the estimate is for {PARALLEL_WORKERS} CPU workers only; "
                     "run make device-check on a GPU machine for the one-GPU estimate")
                    + ("" if ck.mode == "full" else f"; from {ck.mode}-mode sizes, not representative")}


def _recorded_full(name: str):
    """Wall time of the last MODE=full run of a notebook, from the run log (results/runs), or None."""
    try:
        from paperlib.artifact.runlog import load_runs
    except ImportError:  # pragma: no cover
        return None
    for rec in load_runs("notebook"):
        if rec.get("name") == name and rec.get("mode") == "full":
            return rec.get("wall_s")
    return None


# ============================================================================ report
def _paths(ck: Check):
    """(entry, function) for every path, in the order they run: the real implementations' steps and
    audits first (full mode's time and its 30-minute budget rest on them: a budget spent early
    skips the cheaper sampler and distinguisher paths, not them), the release in no notebook last."""
    dev = "device"
    cpu = "cpu-only"
    nb45 = ["04_audit_figure2", "05_audit_figure3"]
    P = [
        ({"id": "mechanisms.sampler.iter_samples", "functions": ["iter_samples", "sample", "apply_round"],
          "notebooks": ["04_audit_figure2"], "device_support": dev}, lambda e: path_iter_samples(ck, e)),
        ({"id": "mechanisms.sampler.iter_projected",
          "functions": ["iter_projected", "sample_projected", "apply_round_projected", "torch._standard_gamma"],
          "notebooks": nb45, "device_support": dev}, lambda e: path_iter_projected(ck, e)),
        ({"id": "audit.components.WhiteBoxModel.project", "functions": ["WhiteBoxModel.on", "WhiteBoxModel.project"],
          "notebooks": ["04_audit_figure2"], "device_support": dev}, lambda e: path_project(ck, e)),
        ({"id": "audit.distinguishers.OptimalDistinguisher", "functions": ["score", "log_densities", "_log_mix"],
          "notebooks": nb45, "device_support": dev}, lambda e: path_optimal(ck, e)),
        ({"id": "audit.distinguishers.NormalityDistinguisher[chi2]", "functions": ["passes", "votes", "score"],
          "notebooks": nb45, "device_support": dev}, lambda e: _normality(ck, e, "chi2", 5)),
        ({"id": "audit.distinguishers.NormalityDistinguisher[ks]", "functions": ["passes (_passes_full)", "score"],
          "notebooks": ["04_audit_figure2"], "device_support": dev}, lambda e: _normality(ck, e, "ks", 6)),
        ({"id": "audit.distinguishers.NormalityDistinguisher[normaltest]", "functions": ["passes (_passes_full)", "score"],
          "notebooks": ["04_audit_figure2"], "device_support": dev,
          "note": "standardised on the device, D'Agostino-Pearson statistic by scipy on the host"},
         lambda e: _normality(ck, e, "normaltest", 7)),
        ({"id": "audit.game.audit_distinguishers[projected, nb04 Figure 2]", "functions": ["audit_distinguishers"],
          "notebooks": ["04_audit_figure2"], "device_support": dev}, lambda e: path_audit_nb04(ck, e)),
        ({"id": "audit.game.audit_distinguishers[projected, nb05 Figure 3]", "functions": ["audit_distinguishers"],
          "notebooks": ["05_audit_figure3"], "device_support": dev}, lambda e: path_audit_nb05(ck, e)),
        ({"id": "audit.game.audit_distinguishers[full, nb04 normality tests]", "functions": ["audit_distinguishers"],
          "notebooks": ["04_audit_figure2"], "device_support": dev}, lambda e: path_audit_nb04_sens(ck, e)),
    ]
    p6, p7 = NOTEBOOK_PARAMS["06_audit_real_figure4"], NOTEBOOK_PARAMS["07_opacus_feasgm_figure6"]
    real_nb = {"opacus-installed": ["07_opacus_feasgm_figure6"], "opacus-1.0.2": ["07_opacus_feasgm_figure6"],
               "opacus-0.15.0": ["06_audit_real_figure4"],
               "opacus-0.13.0": [], "dpsur": ["06_audit_real_figure4"]}
    why = ("timed on the CPU (no device comparison of the audit itself); in a GPU run run_steps also times its "
           "steps on cuda and compares them with the CPU's at sigma = 0 (dpsur: CPU only)")
    def steps(impl):
        return ({"id": f"implementations.runners.run_steps[{impl}]", "functions": ["run_steps", "detect_normaliser"],
                 "notebooks": real_nb[impl], "device_support": cpu, "cpu_only_reason": why,
                 **({"note": "in no notebook of make all (the paper's ASGM release)"} if not real_nb[impl] else {})},
                lambda e: path_run_steps(ck, e, impl))

    # each implementation's timed steps, then the notebooks' real audits (they use the projection
    # cost measured with the steps), the release no notebook uses last
    R = [steps("opacus-installed"), steps("dpsur"), steps("opacus-0.15.0")]
    R += [
        ({"id": "implementations.real_audit.audit_implementation[07]", "functions": ["audit_implementation(mode='full')"],
          "notebooks": ["07_opacus_feasgm_figure6"], "device_support": cpu, "cpu_only_reason": why},
         lambda e: path_real_audit(ck, e, "07_opacus_feasgm_figure6", "opacus-installed", p7["MODEL"], p7["N"], p7["Q"])),
        ({"id": "implementations.real_audit.audit_implementation[06]", "functions": ["audit_implementation(mode='full')"],
          "notebooks": ["06_audit_real_figure4"], "device_support": cpu, "cpu_only_reason": why},
         lambda e: path_real_audit(ck, e, "06_audit_real_figure4", *(("dpsur", "cnn-cifar10", p6["N"], 0.7)
                                                                    if ck.mode == "smoke" else
                                                                    ("opacus-0.15.0", "cnn-cifar10", p6["N"], 0.5))))]
    R.append(steps("opacus-1.0.2"))  # chapter 7's second audit (its real-audit overhead is the installed one's)
    return R + P + [steps("opacus-0.13.0")]


def _work_text(items: list) -> str:
    """One cell: audit items one by one; real-implementation points summarised."""
    real = [w for w in items if w["measure"] == "real"]
    parts = [f"{w['points']} × {w['what']}, {w['rounds_per_point']:,} rounds each" for w in items
             if w["measure"] != "real"]
    if real:
        impls = sorted({w["implementation"] for w in real})
        models = sorted({w["model"] for w in real})
        parts.append(f"{sum(w['points'] for w in real)} point(s) × {real[0]['rounds_per_point']:,} real steps "
                     f"({', '.join(impls)}; {', '.join(models)})")
    return "; ".join(parts)


def tables(report: dict) -> str:
    L = [f"## Device check: MODE={report['mode']}, DEVICE={report['device']}, SEED={report['seed']}", ""]
    L.append(f"{report['comparison_note']}")
    L.append("")
    L.append("| path | runs on (GPU run) | notebooks | status | comparison | cost per trial | measured | "
             "full-mode estimate |")
    L.append("|---|---|---|---|---|---|---|---|")
    for e in report["paths"]:
        cmp = e.get("comparison")
        if e["status"] == "skipped":
            ctext = "skipped: " + e.get("note", "")
        elif e.get("error"):
            ctext = "error: " + e["error"]
        elif cmp is None:
            ctext = "-"
        else:
            kinds = sorted({c.get("kind", "?") for c in cmp.get("checks", [])})
            ctext = ("passed" if cmp.get("passed") else "FAILED") + " (" + ", ".join(kinds) + ")"
        per = e.get("timing", {}).get("per_trial_s")
        if isinstance(per, dict):
            per = ", ".join(f"{k}: {_fmt_s(v)}/step" for k, v in per.items())
        else:
            per = _fmt_s(per) if per is not None else "-"
        ran = e["ran_on"] + ("" if e["ran_on"] == e["would_run_on_gpu"] else f" ({e['would_run_on_gpu']})")
        L.append(f"| `{_md(e['id'])}` | {_md(ran)} | {_md(', '.join(n[:2] for n in e['notebooks']) or '-')} | "
                 f"{e['status']} | {_md(ctext)} | {_md(per)} | {_fmt_s(e.get('timing', {}).get('seconds'))} | "
                 f"{_fmt_s(e['extrapolation'].get('full_mode_s'))} |")
    L += ["", "| notebook | runs on | full-mode work | estimate (`make all MODE=full`) | basis |", "|---|---|---|---|---|"]
    for nb in report["notebooks"]:
        work = _work_text(nb.get("work", [])) or nb.get("note", "-")
        est = nb.get("estimate_s")
        L.append(f"| {nb['notebook']} | {_md(nb.get('runs_on', '-'))} | {_md(work)} | "
                 f"{_fmt_s(est)} | {_md(nb.get('basis', '-'))} |")
    tot = report["make_all_full"]
    L += ["", f"`make all MODE=full`: {_fmt_s(tot['estimate_s'])}"
          + (f" (partial: {_fmt_s(tot['partial_estimate_s'])} for the notebooks above; not measured: "
             + ", ".join(tot["not_measured"]) + ")" if tot["not_measured"] else "")
          + ("" if tot["representative"] else f" — from {report['mode']}-mode sizes, not representative"), ""]
    par = report.get("full_mode_parallel")
    if par:
        est = par["estimate"]
        L += [f"Real steps of notebooks 06, 07 and 11 in full mode on {par['workers']} workers and {par['gpus']} GPU(s) "
              f"(paperlib.implementations.costs.full_mode_estimate): {_fmt_s(est['seconds'])} "
              f"(CPU part {_fmt_s(est['cpu_seconds'])}, GPU part {_fmt_s(est['gpu_seconds'])}, serial projection "
              f"and per-audit work {_fmt_s(est['overhead_s'])}; {par['workers']} CPU workers alone: "
              f"{_fmt_s(par['cpu_workers_only']['seconds'])}); budget {_fmt_s(par['budget_s'])}: "
              + ("met" if par["meets_budget"] else f"not met, over by {_fmt_s(par['over_budget_s'])}"
                 + (f" (not measured: {', '.join(par['missing'])})" if par["missing"] else ""))
              + f". {par['note']}.", ""]
    return "\n".join(L)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--counts" in argv:
        print(json.dumps({"params": NOTEBOOK_PARAMS, "work": full_mode_work(),
                          "host_only": HOST_ONLY_NOTEBOOKS}, indent=1))
        return 0
    if "--self-test" in argv:
        return self_test()
    mode, dev_name, seed = _env_settings()
    import torch

    from paperlib.artifact.provenance import provenance_block, results_dir, write_json_atomic

    dev = torch.device(dev_name)
    ck = Check(mode, dev, seed)
    print(f"== device check: MODE={mode} DEVICE={dev_name} SEED={seed} (budget {ck.sz['budget_s']} s)", flush=True)
    warm = warm_up(ck)
    for entry, fn in _paths(ck):
        ck.run(entry, fn)
    notebooks, per_path = extrapolate(ck)
    par = parallel_estimate(ck)
    for e in ck.entries:
        rounds = per_path.get(e["id"] + "#rounds")
        if e["id"] in per_path:
            e["extrapolation"] = {"full_mode_s": per_path[e["id"]],
                                  "basis": "measured cost x the full-mode work of make all"
                                           + ("" if mode == "full" else f" (from {mode}-mode sizes)")}
        elif e["status"] == "ok" and e["id"].endswith("[opacus-0.13.0]"):
            e["extrapolation"] = {"full_mode_s": 0.0, "basis": "used by no notebook of make all"}
        if rounds is not None:
            e["extrapolation"]["full_mode_rounds"] = rounds
    all_nbs = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9]*.py"))
    for name in all_nbs:
        if name in HOST_ONLY_NOTEBOOKS:
            rec = _recorded_full(name)
            notebooks.append({"notebook": name, "runs_on": "cpu", "work": [], "note": HOST_ONLY_NOTEBOOKS[name],
                              "estimate_s": rec, "partial_estimate_s": rec or 0.0, "missing": [] if rec else ["all"],
                              "basis": ("recorded MODE=full run (results/runs)" if rec is not None else
                                        "no device path: not extrapolated here (not measured)")})
        elif not any(n["notebook"] == name for n in notebooks):
            notebooks.append({"notebook": name, "runs_on": "?", "work": [], "estimate_s": None,
                              "partial_estimate_s": 0.0, "missing": ["all"], "basis": "unknown notebook: not in "
                              "this check's tables (update bench/device_check.py)"})
    notebooks.sort(key=lambda n: n["notebook"])
    not_measured = [n["notebook"] for n in notebooks if n["estimate_s"] is None]
    partial = sum(n["partial_estimate_s"] or 0.0 for n in notebooks)
    wall = time.perf_counter() - ck.t_start
    failed = [e["id"] for e in ck.entries if e["status"] in ("mismatch", "error")]
    if dev.type == "cuda":
        note = (f"Comparisons: CUDA ({torch.cuda.get_device_name(0)}) against the CPU, same seeds; random outputs "
                "in law (KS, Clopper-Pearson), deterministic parts to 1e-9 relative.")
    else:
        note = ("No CUDA here: the 'device' side is the CPU with another seed for the random parts (the comparisons "
                "run and can fail, but test no GPU); paths marked 'cpu (cuda)' would run on cuda in a GPU run.")
    report = {
        "kind": "device_check", "version": 1, "mode": mode, "device": dev_name, "seed": seed,
        "cuda_available": bool(torch.cuda.is_available()),
        "gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else None,
        "torch": torch.__version__, "torch_cuda": torch.version.cuda, "cpu_threads": torch.get_num_threads(),
        "budget_s": ck.sz["budget_s"], "warmup_s": warm, "wall_s": wall, "comparison_note": note,
        "cuda_paths": [e["id"] for e in ck.entries if e["device_support"] == "device"],
        "cpu_only_paths": [e["id"] for e in ck.entries if e["device_support"] != "device"],
        "paths": ck.entries, "notebooks": notebooks,
        "make_all_full": {"estimate_s": None if not_measured else partial, "partial_estimate_s": partial,
                          "not_measured": not_measured, "representative": mode == "full",
                          "note": "notebook compute only (not the book build); GPU times read 'not measured' until "
                                  "this check has run with MODE=full DEVICE=cuda on a GPU"},
        "full_mode_parallel": par,
        "failed": failed, "passed": not failed,
        "provenance": provenance_block({"mode": mode, "device": dev_name, "seed": seed}, mode=mode, seed=seed,
                                       wall_time=wall),
    }
    md = tables(report)
    report["table_markdown"] = md
    out = results_dir() / "device_check.json"
    write_json_atomic(out, report)
    (results_dir() / "device_check.md").write_text(md + "\n", encoding="utf-8")
    print()
    print(md)
    print(f"written: {out} ({wall:.0f} s)")
    if failed:
        print("device check FAILED: " + ", ".join(failed), file=sys.stderr)
        return 1
    print("device check passed" + (" (CPU only: no GPU tested)" if dev.type != "cuda" else ""))
    return 0


def self_test() -> int:
    """Each comparison rejects a planted discrepancy of the size a device bug would cause."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal(20_000)
    res = {
        "ks_same_law_passes": ks_family({"x": a}, {"x": rng.standard_normal(20_000)})["passed"],
        # the power at 20,000 draws a side: a 10% scale or a 0.1 sd shift of one coordinate, and a 1%
        # change of the normaliser in the squared residual (nearly deterministic at n - r = 9,995)
        "ks_scale_10pc_fails": not ks_family({"x": a}, {"x": 1.1 * rng.standard_normal(20_000)})["passed"],
        "ks_shift_0.1sd_fails": not ks_family({"x": a}, {"x": 0.1 + rng.standard_normal(20_000)})["passed"],
        "ks_residual_wrong_normaliser_fails": not ks_family(
            {"r": rng.chisquare(9_995, 20_000) / 2.0 ** 2}, {"r": rng.chisquare(9_995, 20_000) / 2.01 ** 2})["passed"],
        "exact_1e-12_passes": exact_family({"x": a}, {"x": a * (1 + 1e-12)})["passed"],
        "exact_1e-8_fails": not exact_family({"x": a}, {"x": a * (1 + 1e-8)})["passed"],
        "exact_nan_place_fails": not exact_family({"x": np.array([1.0, np.nan])}, {"x": np.array([np.nan, 1.0])})["passed"],
        "equal_one_flip_fails": not equal_family({"p": np.zeros(10, bool)}, {"p": np.eye(1, 10, dtype=bool)[0]})["passed"],
    }

    class R:  # a stand-in AuditResult
        def __init__(self, fp, fn, n):
            from paperlib.audit.stats import clopper_pearson, eps_lower

            self.delta = 1e-5
            self.fpr_ci, self.fnr_ci = clopper_pearson(fp, n), clopper_pearson(fn, n)
            self.eps_lower = float(eps_lower(self.fpr_ci[1], self.fnr_ci[1], self.delta))

    res["overlap_close_passes"] = eps_overlap({"o": R(50, 60, 5000)}, {"o": R(55, 58, 5000)})["passed"]
    res["overlap_far_fails"] = not eps_overlap({"o": R(50, 60, 5000)}, {"o": R(500, 600, 5000)})["passed"]
    print(json.dumps(res, indent=1))
    return 0 if all(res.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
