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
# # Auditing real DP-SGD implementations on real data (the paper's Figure 4)
#
# Chapters 4 and 5 audited the mechanisms on synthetic worst-case gradients. Here the
# rounds come from the code that practitioners run, as in Section 5.1 of
# {cite}`wang2026rethinking`: five random points of a real dataset (MNIST, Fashion-MNIST,
# CIFAR-10; one panel each) form $D'$, the first four form $D$ ($|D| = 4$), the model sits
# at fixed, known parameters $\theta_0$, and one DP-SGD step with $C = 0.1$, $\sigma = 10$
# and learning rate 1 is taken; its output is the normalised noisy gradient
# $(\theta_0 - \theta_1)/\mathrm{lr}$.
#
# **What is audited.** DPSGD-HF, DP-FETA and PrivImage are described in their papers as
# EASGM (division by the expected batch size $Nq$), so — like the paper — we run their
# step through Opacus v0.15.0 {cite}`yousefpour2021opacus`, whose Poisson path divides by
# $Nq$, at $q = 0.005$ and $q = 0.5$. The three methods share this code path and differ
# only in the model, and only its size $n$ enters the analysis; here the Tramèr-Boneh
# CNN (`cnn-mnist`, 26,010 parameters) stands for all three on MNIST and Fashion-MNIST,
# and `cnn-cifar10` for all three on CIFAR-10 (the 1,485,217-parameter model of DP-FETA
# and PrivImage is audited in the next chapter). DPSUR writes its own ASGM step
# (division by the realised batch size $|B|$); we run that step (`paperlib`'s
# re-implementation from the DPSUR paper) on the same models at $q = 0.7$ and $q = 0.8$.
#
# **The game** is that of the previous chapters, white box: the adversary knows every
# per-example gradient at $\theta_0$, hence every Gaussian component of both output
# distributions. The optimal (likelihood-ratio) and the normality distinguisher score each
# output; a threshold chosen on separate calibration rounds turns scores into guesses;
# 95% Clopper-Pearson limits of FPR and FNR give $\varepsilon_L$ at $\delta = 10^{-5}$
# (Eq. 3, following {cite}`nasr2023tight`), compared with the SGM claim.
#
# **Modes.** In `full` mode every round — calibration and counted, on $D$ and on $D'$ — is
# one step of the implementation. In `quick` and `smoke` mode only the first
# `CHECK_TRIALS` steps per dataset come from the implementation; they must pass a
# Kolmogorov-Smirnov check (every projected coordinate and the residual norm, against the
# batched mechanism with the same gradients, Bonferroni at level 0.001) before the remaining
# rounds are drawn from the batched mechanism fed with those gradients
# (`paperlib.implementations.real_audit`). The normaliser each implementation actually used
# is also read off its steps (`runners.detect_normaliser`).

# %% tags=["parameters"]
MODE = "quick"
DEVICE = "cpu"
SEED = 0

# %% [markdown]
# ## Set-up

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from paperlib.artifact import figures as pf
from paperlib.artifact import plotting
from paperlib.implementations import real_audit as RA
from paperlib.implementations.datasets import resolve_dataset
from paperlib.artifact import provenance as pv
from paperlib.artifact.provenance import save_result

T_START = pf.start_notebook(MODE)

AUDIT_MODE = "full" if MODE == "full" else "quick"
TRIALS = pf.pick(MODE, smoke=1_000, quick=10_000, full=10_000)  # counted rounds (as many again calibrate)
CHECK_TRIALS = pf.pick(MODE, smoke=20, quick=30, full=None)  # implementation steps per dataset (quick check)
N, SIGMA, C, DELTA = 4, 10.0, 0.1, 1e-5
DATASETS = {"mnist": "MNIST", "fmnist": "Fashion-MNIST", "cifar10": "CIFAR-10"}
MODEL_OF = {"mnist": "cnn-mnist", "fmnist": "cnn-mnist", "cifar10": "cnn-cifar10"}
METHODS = [("DPSGD-HF / DP-FETA / PrivImage", "opacus-0.15.0", 0.005),
           ("DPSGD-HF / DP-FETA / PrivImage", "opacus-0.15.0", 0.5),
           ("DPSUR", "dpsur", 0.7), ("DPSUR", "dpsur", 0.8)]
print(f"MODE={MODE} (audit mode {AUDIT_MODE}) SEED={SEED}: {TRIALS:,} counted + {TRIALS:,} calibration rounds "
      f"per point" + (f", {CHECK_TRIALS} checked implementation steps per dataset" if CHECK_TRIALS else ""))

# %% [markdown]
# ## 1. The data points
#
# Five points per dataset, drawn with `SEED`. Without network access a dataset may be
# missing; outside `full` mode the panel then falls back to the `synthetic` stand-in
# (random pixels of the dataset's shape) and says so — those numbers are not about the real
# dataset. In `full` mode a missing dataset stops the notebook.


# %%
# a local copy of MNIST/FMNIST (../shared/data beside the clone) is used when data/ has none
SOURCES = {name: resolve_dataset(name, N + 1, SEED, mode=MODE) for name in DATASETS}
for name, (used, root, note) in SOURCES.items():
    print(f"{DATASETS[name]:>14}: " + (f"NOTE: {note}" if note else f"real data ({root or 'default data folder'})"))

# %% [markdown]
# ## 2. The audits
#
# Each point is cached under a hash of its parameters (`results/real_audit_<key>.json`),
# so a rerun is instant. A point whose implementation cannot run here (e.g. the Opacus
# v0.15.0 release is not in the local release cache) or fails the check is reported, not
# plotted.

# %%
rows = []
for name, (used, root, note) in SOURCES.items():
    for label, impl, q in METHODS:
        try:
            r = RA.audit_implementation(impl, MODEL_OF[name], used, N=N, q=q, sigma=SIGMA, C=C, trials=TRIALS,
                                        seed=SEED, mode=AUDIT_MODE, check_trials=CHECK_TRIALS, delta=DELTA,
                                        progress=False, data_root=root, cache=pv.ResultCache(MODE))
            rows.append({"panel": name, "method": label, "impl": impl, "q": q, "result": r, "error": None})
        except (RuntimeError, ValueError) as exc:  # ImplementationMismatch, ReleaseNotAvailable, ...
            rows.append({"panel": name, "method": label, "impl": impl, "q": q, "result": None,
                         "error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"})

OPT, NORM = "optimal", "normality[chi2,weighted]"
print(f"{'panel':>8} {'method':>31} {'q':>6} {'normaliser':>11} {'eps_L opt':>9} {'eps_L norm':>10} "
      f"{'claim':>6} {'check p':>8}")
for row in rows:
    r = row["result"]
    if r is None:
        print(f"{row['panel']:>8} {row['method']:>31} {row['q']:>6} not audited: {row['error']}")
        continue
    chk = f"{r['check']['min_p']:.3f}" if r.get("check") else "-"
    print(f"{row['panel']:>8} {row['method']:>31} {row['q']:>6} {r['normaliser_found']:>11} "
          f"{r['eps_lower'][OPT]:9.2f} {r['eps_lower'][NORM]:10.2f} {r['eps_claimed']:6.3f} {chk:>8}")

# %% [markdown]
# ## 3. The paper's Figure 4

# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), sharey=True)
for ax, name in zip(axes, DATASETS):
    pts = [row for row in rows if row["panel"] == name]
    x = np.arange(len(pts))
    for k, (lab, off, col) in enumerate([(OPT, -0.2, "C0"), (NORM, 0.2, "C1")]):
        vals = [row["result"]["eps_lower"][lab] if row["result"] else np.nan for row in pts]
        ax.bar(x + off, vals, width=0.38, color=col, label=["optimal distinguisher", "normality distinguisher"][k])
    claims = [row["result"]["eps_claimed"] if row["result"] else np.nan for row in pts]
    ax.hlines(claims, x - 0.45, x + 0.45, colors="k", linewidth=2, label="SGM claim")
    ax.set_xticks(x, [f"{'EASGM' if row['impl'] != 'dpsur' else 'DPSUR'}\nq={row['q']}" for row in pts])
    used, _, note = SOURCES[name]
    ax.set_title(DATASETS[name] + (" (synthetic stand-in)" if note else "") + f", {MODEL_OF[name]}")
    ax.set_yscale("symlog", linthresh=0.1)
axes[0].set_ylabel(r"audited $\varepsilon_L$ ($\delta = 10^{-5}$)")
axes[0].legend(fontsize=8, loc="upper left")
fig.suptitle(f"One DP-SGD step on 5 real points, |D| = {N}, C = {C}, σ = {SIGMA} "
             f"(mode {MODE}, seed {SEED}, {TRIALS:,} counted trials)", fontsize=10)
fig.tight_layout()
meta = {"mode": MODE, "seed": SEED, "trials": TRIALS, "check_trials": CHECK_TRIALS, "N": N, "sigma": SIGMA, "C": C,
        "delta": DELTA, "data": {k: v[0] for k, v in SOURCES.items()}}
pf.show_figure(fig, "06_fig4_real_audit", meta)

# %% [markdown]
# ```{glue:figure} 06_fig4_real_audit
# :name: fig-06-fig4-real-audit
#
# The paper's Figure 4, regenerated: audited $\varepsilon_L$ of one step of the EASGM code
# path (Opacus v0.15.0, standing for DPSGD-HF, DP-FETA and PrivImage) at $q = 0.005, 0.5$
# and of DPSUR's ASGM step at $q = 0.7, 0.8$, with $|D| = 4$, $|D'| = 5$, $C = 0.1$,
# $\sigma = 10$, $\delta = 10^{-5}$; bars: the two distinguishers; black ticks: the SGM
# claim's $\varepsilon$. The data source of each panel is in its title and in the line
# below; a panel marked "synthetic stand-in" did not use the real dataset.
# ```

# %%
n_above = sum(1 for row in rows if row["result"] and row["result"]["eps_lower"][OPT] > row["result"]["eps_claimed"])
n_run = sum(1 for row in rows if row["result"])
est = sum(row["result"]["full_mode_estimate_s"] or 0.0 for row in rows if row["result"])
print(f"eps_L (optimal) above the SGM claim at {n_above} of {n_run} audited points")
print(f"full mode (every one of the {2 * TRIALS:,} rounds per point an implementation step) would take about "
      f"{est / 3600:.1f} h on this machine, from the measured cost per step "
      f"(subprocess start-up of the old Opacus releases included)")
save_result("06_fig4_real_audit", {"mode": MODE, "seed": SEED, "trials": TRIALS, "check_trials": CHECK_TRIALS,
                                   "N": N, "sigma": SIGMA, "C": C, "delta": DELTA,
                                   "methods": [list(m) for m in METHODS]},
            {"points": [{k: v for k, v in row.items()} for row in rows],
             "sources": {k: [v[0], str(v[1]) if v[1] else None, v[2]] for k, v in SOURCES.items()},
             "full_mode_estimate_s": est},
            mode=MODE, seed=SEED, wall_time=time.perf_counter() - T_START)
print(f"notebook wall time {time.perf_counter() - T_START:.0f} s")

# %% [markdown]
# ## 4. Reading the figure
#
# At every audited point the optimal distinguisher certifies more leakage than the SGM
# analysis allows — the implementations' steps follow the normalised mechanisms (the
# detected normaliser is $Nq$ for the Opacus v0.15.0 path and $|B|$ for DPSUR, as
# documented), and for the normalised mechanisms the SGM claim is not a valid guarantee.
# The gap is large for the EASGM path: dividing by $Nq$ with $N = 4$ and $N+1 = 5$ gives
# outputs of visibly different scale on $D$ and $D'$, whatever the batch. For DPSUR's ASGM
# step the gap is smaller, and larger at $q = 0.8$ than at $q = 0.7$ (the paper's
# observations). Where the normality distinguisher finds less, this is the price of its
# voting rule, not evidence of privacy: the optimal distinguisher bounds what any test of
# the output can find. The largest $\varepsilon_L$ a run can certify is limited by the
# number of trials (no errors at all gives about 7.7 with 10,000 counted rounds), so
# the tallest bars are capped.

# %%
# The paper's claim C4, graded from this notebook's results by the same check (and
# tolerance) as the grade page: a claim these numbers do not support stops the build.
from paperlib.artifact.claims import require as grade_claim  # noqa: E402

GRADE = grade_claim("C4")
print(f"C4 ({GRADE['item']}): {GRADE['verdict']} in {GRADE['mode']} mode")
