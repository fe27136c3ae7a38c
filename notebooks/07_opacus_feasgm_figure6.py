# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Auditing Opacus v1.0 (FEASGM) on real MNIST points (the paper's Figure 6)
#
# Since v1.0, Opacus {cite}`yousefpour2021opacus` divides the noisy gradient sum by
# $\lfloor Nq \rfloor$ (FEASGM) under Poisson sampling with mean reduction. DP-FETA builds on
# this code path, and Appendix A.3 of {cite}`wang2026rethinking` audits it in the regime
# where the normaliser differs between neighbouring datasets: $q = 0.5$, $|D| = 3$,
# $|D'| = 4$, so $\lfloor 3 \cdot 0.5 \rfloor = 1$ on $D$ but $\lfloor 4 \cdot 0.5 \rfloor = 2$
# on $D'$; $\sigma = 10$, $C = 0.1$. Four random MNIST points and DP-FETA's own MNIST
# denoiser (`dpfeta-mnist`, 1,485,217 parameters), rebuilt from DP-FETA's code at a pinned
# commit (`paperlib.implementations.paper_models` cites every block), its gradients from its own
# denoising loss (EDM's).
#
# **The code.** The paper names "Opacus v1.0" as DP-FETA's release. We run Opacus
# **1.0.2**, the last release of the v1.0 line; 1.0.0 and 1.0.1 divide the same way, as
# chapter 8's code audit shows. As chapter 6 does with Opacus v0.15.0, we install it on
# demand from its wheel into its own folder and run it in a subprocess. The wheel's SHA-256
# is stored in the package. DP-FETA's repository ships its own modified copy of Opacus (its
# `opacus/version.py` reads 1.1.3); its `DPOptimizer.scale_grad` divides by
# `expected_batch_size` as every v1 release does. Beside it we audit the installed Opacus
# release, whose step gives the same updates for the same seed. The white-box game, the
# distinguishers and $\varepsilon_L$ (Eq. 3, following {cite}`nasr2023tight`) are those of
# the previous chapter, and so are the modes (`full`: every round an Opacus step;
# `quick`/`smoke`: checked Opacus steps, then the batched FEASGM mechanism fed with the same
# per-example gradients).

# %% tags=["parameters"]
MODE = "quick"
DEVICE = "cpu"
SEED = 0

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
from myst_nb import glue

from paperlib.artifact import estimate
from paperlib.artifact import notebook as pf
from paperlib.artifact import plotting
from paperlib.artifact import prose
from paperlib.artifact import provenance as pv
from paperlib.artifact.provenance import save_result
from paperlib.artifact.tables import show_table
from paperlib import audit as A
from paperlib.audit import cp_upper, eps_lower
from paperlib.implementations import datasets as DS
from paperlib.implementations import real_audit as RA

T_START = pf.start_notebook(MODE)

AUDIT_MODE = "full" if MODE == "full" else "quick"
TRIALS = pf.pick(MODE, smoke=1_000, quick=10_000, full=10_000)  # counted rounds (as many again calibrate)
N, Q, SIGMA, C, DELTA = 3, 0.5, 10.0, 0.1, 1e-5
MODEL = "dpfeta-mnist"  # DP-FETA's MNIST denoiser from its code (1,485,217 parameters; paperlib.implementations.paper_models)
IMPLEMENTATIONS = ("opacus-1.0.2", "opacus-installed")  # the paper's release, then the installed one
# real Opacus steps per dataset in quick/smoke mode (the paper's code gets the larger share)
# a denoiser step costs ~2 s on 2 loaded CPU cores (~40x the CNN's), so quick mode runs 30 real steps per dataset
CHECK_TRIALS = {"opacus-1.0.2": pf.pick(MODE, smoke=20, quick=30, full=None),
                "opacus-installed": pf.pick(MODE, smoke=20, quick=30, full=None)}
DATASET, ROOT, SOURCE = DS.resolve_dataset("mnist", N + 1, SEED, mode=MODE)
POINTS = "bundled" if SOURCE == DS.SOURCE_BUNDLED else "folder"
DATA_LABEL = {DS.SOURCE_FULL: "MNIST", DS.SOURCE_BUNDLED: "real MNIST points (bundled)"}.get(
    SOURCE, f"MNIST ({SOURCE})")
glue("nb07_mode", MODE, display=False)
glue("nb07_trials", f"{TRIALS:,}", display=False)

# %% [markdown]
# ## 1. The audits

# %%
RESULTS, ERRORS = {}, {}
for impl in IMPLEMENTATIONS:
    try:
        RESULTS[impl] = RA.audit_implementation(
            impl, MODEL, DATASET, N=N, q=Q, sigma=SIGMA, C=C, trials=TRIALS, seed=SEED, mode=AUDIT_MODE,
            check_trials=CHECK_TRIALS[impl], delta=DELTA, progress=False, data_root=ROOT, points=POINTS,
            cache=pv.ResultCache(MODE))
    except (RuntimeError, ValueError) as exc:  # ReleaseNotAvailable (offline, not cached), mismatch
        ERRORS[impl] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
R, R_NEW = RESULTS.get("opacus-1.0.2"), RESULTS.get("opacus-installed")
OPT, NORM = "optimal", "normality[chi2,weighted]"
nd = TRIALS // 2
CEILING = eps_lower(cp_upper(0, nd), cp_upper(0, TRIALS - nd), DELTA)

rows = []
for impl in IMPLEMENTATIONS:
    r = RESULTS.get(impl)
    if r is None:
        rows.append({"code": impl, "data": "-", "normaliser": "-", "opt": None, "norm": None, "claim": None,
                     "real": ERRORS.get(impl, "not run")})
        continue
    inp = r.inputs
    rows.append({"code": f"Opacus {r.version}", "data": inp["data"], "normaliser": r.normaliser_found,
                 "opt": r.eps_lower[OPT], "norm": r.eps_lower[NORM], "claim": r.eps_claimed,
                 "real": f"{inp['real_rounds']:,} of {inp['rounds']:,}"})
show_table(rows, {"code": "code", "data": "data", "normaliser": "normaliser found", "opt": "ε_L optimal",
                  "norm": "ε_L normality", "claim": "ε SGM claim", "real": "real Opacus steps / rounds"},
           name="07_fig6_audits", caption="One step of Opacus FEASGM audited on the same four points: ε_L at "
           "δ = 1e-5 with both distinguishers, and how many of the game's rounds were real Opacus steps.",
           formats={"opt": ".2f", "norm": ".2f", "claim": ".3g"})


# %%
def _g(key, value, missing="not computed (the release could not run here)"):
    glue(f"nb07_{key}", missing if value is None else value, display=False)


inp = R.inputs if R else {}
_g("version", R and R.version)
_g("data_detail", inp.get("data_detail"))
_g("data", inp.get("data"))
_g("eps_opt", R and f"{R.eps_lower[OPT]:.2f}")
_g("eps_norm", R and f"{R.eps_lower[NORM]:.2f}")
_g("claim", (R or R_NEW) and f"{(R or R_NEW).eps_claimed:.3f}")
_g("ceiling", f"{CEILING:.2f}")
_g("real_rounds", R and f"{inp['real_rounds']:,}")
_g("rounds", R and f"{inp['rounds']:,}")
_g("real_share", R and f"{100 * inp['real_rounds'] / inp['rounds']:.1f} %")
_g("sec_per_step", R and R.seconds_per_step and f"{R.seconds_per_step:.2f}")
_g("full_min", (R or R_NEW) and f"{estimate.seconds([R, R_NEW])[0] / 60:.0f}")  # both releases, every round real
_g("normaliser", R and R.normaliser_found)
_g("check_p", R and R.check and f"{R.check['min_p']:.3f}", missing="no check (full mode)")
_g("new_version", R_NEW and R_NEW.version)
_g("new_eps_opt", R_NEW and f"{R_NEW.eps_lower[OPT]:.2f}")
_g("new_eps_norm", R_NEW and f"{R_NEW.eps_lower[NORM]:.2f}")
_g("new_real", R_NEW and f"{R_NEW.inputs['real_rounds']:,}")
# the end of the caption's last sentence: a clause only when Opacus 1.0.2 failed ("error, if any: none" read oddly)
_g("old_error_end", None if ERRORS.get("opacus-1.0.2") is None else f"; Opacus 1.0.2 failed: {ERRORS['opacus-1.0.2']}.",
   missing=".")

# %% [markdown]
# The audited points are {glue:text}`nb07_data_detail`. Opacus {glue:text}`nb07_version`
# divided by {glue:text}`nb07_normaliser` (read off its steps), and its steps passed the
# Kolmogorov-Smirnov check against the FEASGM mechanism (smallest p-value
# {glue:text}`nb07_check_p`). With {glue:text}`nb07_trials` counted rounds the optimal
# distinguisher certifies $\varepsilon_L$ = {glue:text}`nb07_eps_opt` and the paper's
# normality distinguisher {glue:text}`nb07_eps_norm`, against the SGM claim
# $\varepsilon$ = {glue:text}`nb07_claim`; no run of this size can certify more than
# {glue:text}`nb07_ceiling`. Of the {glue:text}`nb07_rounds` rounds of the game,
# {glue:text}`nb07_real_rounds` ({glue:text}`nb07_real_share`) were real Opacus
# {glue:text}`nb07_version` steps in this mode ({glue:text}`nb07_mode`). A step costs about
# {glue:text}`nb07_sec_per_step` s here, subprocess start-up included. In `full` mode every
# round of both releases' audits is a real step, and the two audits take about
# {glue:text}`nb07_full_min` minutes on this machine; the artifact appendix sums this with
# chapters 6 and 11.
# The installed Opacus {glue:text}`nb07_new_version` gives $\varepsilon_L$ =
# {glue:text}`nb07_new_eps_opt` (optimal) and {glue:text}`nb07_new_eps_norm` (normality),
# {glue:text}`nb07_new_real` of its rounds real steps.

# %% [markdown]
# ## 2. The paper's Figure 6

# %%
fig, ax = plt.subplots(figsize=(6.4, 4.2))
x = np.arange(2)
for k, (impl, hatch) in enumerate([("opacus-1.0.2", None), ("opacus-installed", "//")]):
    col = plotting.series_style(k)[0]  # the book's series colours (colour-blind safe)
    r = RESULTS.get(impl)
    if r is None:
        continue
    vals = [r.eps_lower[OPT], r.eps_lower[NORM]]
    real = r.inputs["real_rounds"]
    ax.bar(x + (k - 0.5) * 0.38, vals, width=0.36, color=col, hatch=hatch, edgecolor="k", linewidth=0.5,
           label=f"Opacus {r.version} ({real:,} of {r.inputs['rounds']:,} rounds real steps)")
claim = (R or R_NEW).eps_claimed if (R or R_NEW) else None
if claim is not None:
    ax.axhline(claim, color=plotting.COLORS["sgm_claim"], lw=2, label=f"SGM claim ε = {claim:.3g}")
ax.axhline(CEILING, color="#999999", ls=":", label=rf"largest certifiable $\varepsilon_L$ ({TRIALS:,} trials)")
ax.set_xticks(x, ["optimal distinguisher", "normality distinguisher"])
ax.set_ylabel(r"audited $\varepsilon_L$ ($\delta = 10^{-5}$)")
ax.set_ylim(0, CEILING * 1.35)
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False)  # below the axes, never over a bar
ax.set_title(f"Opacus FEASGM on {DATA_LABEL}, q = {Q}, |D| = {N}, σ = {SIGMA}, C = {C}", fontsize=9)
fig.tight_layout()
pf.show_figure(fig, "07_fig6_opacus_feasgm", {"mode": MODE, "seed": SEED, "trials": TRIALS, "N": N, "q": Q,
                                             "sigma": SIGMA, "C": C, "model": MODEL, "data": SOURCE,
                                             "real steps on each of D and D′": CHECK_TRIALS or "every round"})
_saved = save_result(
    "07_fig6_opacus_feasgm",
    {"mode": MODE, "seed": SEED, "trials": TRIALS, "check_trials": CHECK_TRIALS, "N": N, "q": Q, "sigma": SIGMA,
     "C": C, "model": MODEL},
    # the graded result is the paper's release; where it cannot run here (offline, not cached) the
    # installed release stands in, and its r.inputs say so (the grade then reads "partly reproduced")
    {"result": R or R_NEW, "installed": R_NEW, "paper_release_error": ERRORS.get("opacus-1.0.2"),
     "error": ERRORS.get("opacus-installed") if R is None else None, "dataset": DATASET, "source": SOURCE},
    mode=MODE, seed=SEED, wall_time=time.perf_counter() - T_START)

# %% [markdown]
# ```{glue:figure} 07_fig6_opacus_feasgm
# :name: fig-07-fig6-opacus-feasgm
#
# The paper's Figure 6, regenerated on {glue:text}`nb07_data`: audited $\varepsilon_L$ of
# one step of Opacus {glue:text}`nb07_version` (DP-FETA's v1.0 line, FEASGM) and of the
# installed Opacus {glue:text}`nb07_new_version`, with $q = 0.5$, $|D| = 3$, $|D'| = 4$,
# $\sigma = 10$, $C = 0.1$, $\delta = 10^{-5}$, for both distinguishers; black line: the SGM
# claim; dotted: the largest $\varepsilon_L$ the trials can certify. Of
# {glue:text}`nb07_rounds` rounds, {glue:text}`nb07_real_rounds` were real Opacus
# {glue:text}`nb07_version` steps and {glue:text}`nb07_new_real` real steps of the installed
# release; the rest were drawn from the FEASGM mechanism with the same gradients, after the
# steps passed the check{glue:text}`nb07_old_error_end`
# ```
#
# Both distinguishers certify far more leakage than the claim allows: the step divides by
# 1 on $D$ and by 2 on $D'$, so the noise scale alone — visible in the norm of a
# 1,485,217-dimensional output — tells the datasets apart, whatever batch was drawn.
# The bars are capped by the number of trials, not by the mechanism.

# %% [markdown]
# ## 3. The spread of $\varepsilon_L$ across seeds
#
# The paper's Figure 6 has a single point, so it is the representative one: the audit of
# {glue:text}`nb07_spread_code` is repeated at three seeds derived from `SEED`
# ({glue:text}`nb07_spread_seeds`). The seed draws the four points, the model's starting
# parameters and every round, so the spread covers all three, and shows how close to the
# certification ceiling each seed comes. The first seed is the figure's run. The others use
# fewer real Opacus steps, to keep the chapter's run time within bounds; the real steps per
# run are {glue:text}`nb07_spread_real`. The rest of their rounds are drawn from the FEASGM
# mechanism after the steps passed the same check.
# {glue:text}`nb07_spread_text`

# %%
SPREAD_IMPL = "opacus-1.0.2" if R is not None else "opacus-installed"
SPREAD_SEEDS = [s for s in A.spread_seeds(SEED, 3)]
# real steps per dataset of the extra seeds (the figure's seed keeps its own); smoke mode runs no extra seed
SPREAD_CHECK = pf.pick(MODE, smoke=None, quick=10, full=None)
SPREAD_RUNS, SPREAD_ERR = {}, None


def _spread_audit(s):
    if s == SEED:
        SPREAD_RUNS[s] = RESULTS[SPREAD_IMPL]
    else:
        ds, root, src = DS.resolve_dataset("mnist", N + 1, s, mode=MODE)
        SPREAD_RUNS[s] = RA.audit_implementation(
            SPREAD_IMPL, MODEL, ds, N=N, q=Q, sigma=SIGMA, C=C, trials=TRIALS, seed=s, mode=AUDIT_MODE,
            check_trials=SPREAD_CHECK, delta=DELTA, progress=False, data_root=root,
            points="bundled" if src == DS.SOURCE_BUNDLED else "folder", cache=pv.ResultCache(MODE))
    return SPREAD_RUNS[s].eps_lower


spread = None
if SPREAD_IMPL in RESULTS and not (MODE == "smoke"):
    try:
        spread = A.seed_spread(_spread_audit, SPREAD_SEEDS, labels=[OPT, NORM])
    except (RuntimeError, ValueError) as exc:
        SPREAD_ERR = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
if spread is not None:
    _c = SPREAD_RUNS[SEED].eps_claimed
    _real = [f"{SPREAD_RUNS[s].inputs['real_rounds']:,} of {SPREAD_RUNS[s].inputs['rounds']:,}"
             for s in spread["seeds"]]
    _rows = A.spread_rows(spread, [OPT, NORM], _c, extra=_real)
    show_table(_rows, ["seed", "ε_L optimal", "ε_L normality", "ε SGM claim", "real Opacus steps / rounds"],
               name="07_seed_spread",
               caption=f"The point of the paper's Figure 6 (Opacus {SPREAD_RUNS[SEED].version}, q = {Q:g}, |D| = {N}) audited at "
                       f"three seeds, {TRIALS:,} counted trials each: ε_L at δ = 1e-5 with both distinguishers, "
                       "against the SGM claim, and how many rounds were real Opacus steps.",
               formats={"ε_L optimal": ".2f", "ε_L normality": ".2f", "ε SGM claim": ".3f"})
    save_result("07_seed_spread", {"mode": MODE, "seed": SEED, "seeds": SPREAD_SEEDS, "implementation": SPREAD_IMPL,
                                   "trials": TRIALS, "check_trials": SPREAD_CHECK, "N": N, "q": Q, "sigma": SIGMA,
                                   "C": C, "model": MODEL},
                {**spread, "claim": _c, "real_rounds": {str(s): SPREAD_RUNS[s].inputs["real_rounds"]
                                                        for s in spread["seeds"]}}, mode=MODE, seed=SEED,
                wall_time=sum(float(SPREAD_RUNS[s].seconds or 0.0) for s in spread["seeds"]))
    glue("nb07_spread_text",
         f"Across the {len(SPREAD_SEEDS)} seeds the optimal distinguisher's ε_L values "
         f"{prose.against_ceiling(spread['eps'][OPT], CEILING, unit='seeds')} and the paper's normality "
         f"distinguisher's {prose.span(spread['eps'][NORM])}: "
         f"{prose.against_claim(list(spread['eps'][OPT]) + list(spread['eps'][NORM]), _c)}.",
         display=False)
    glue("nb07_spread_real", ", ".join(f"seed {s}: {r}" for s, r in zip(spread["seeds"], _real)), display=False)
else:
    _why = SPREAD_ERR or ("not computed in this mode (smoke runs no extra seed)" if MODE == "smoke"
                          else "not computed (the release could not run here)")
    glue("nb07_spread_text", f"The spread is {_why}.", display=False)
    glue("nb07_spread_real", "not computed in this mode", display=False)
glue("nb07_spread_code", f"Opacus {RESULTS[SPREAD_IMPL].version}" if SPREAD_IMPL in RESULTS else "no release",
     display=False)
glue("nb07_spread_seeds", ", ".join(str(s) for s in SPREAD_SEEDS), display=False)

# %%
# The paper's claim C6, graded from this notebook's results by the same check (and
# tolerance) as the grade page: a claim these numbers do not support stops the build.
from paperlib.artifact.claims import require as grade_claim  # noqa: E402
from paperlib.artifact.claims import chapter_grade  # noqa: E402
from IPython.display import Markdown, display  # noqa: E402

GRADE = grade_claim("C6")
display(Markdown(chapter_grade(GRADE)))  # the grade page's sentence and list of substitutions, in the chapter
