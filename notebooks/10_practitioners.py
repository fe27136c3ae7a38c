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
# # For practitioners: does my Opacus run keep its promise?
#
# The $\varepsilon$ an accountant prints for a DP-SGD run is the $\varepsilon$ of the
# subsampled Gaussian mechanism (SGM). The code that ran is a different mechanism in most
# Opacus releases {cite}`yousefpour2021opacus`: it divides the noisy gradient sum by a
# number that depends on the data (paper Table 2, {cite}`wang2026rethinking`). This page
# answers, for a run with Opacus:
#
# 1. **Which mechanism ran?** The realised batch size $|B|$ (ASGM, v0.12–v0.13), the
#    expected batch size $Nq$ (EASGM, v0.14–v0.15), or `int(N * q)` (FEASGM, v1.x);
#    `loss_reduction='sum'` leaves the sum alone (SGM).
# 2. **What is claimed?** The $\varepsilon$ of the release's own accountant (RDP before
#    v1.3, PRV from v1.3; releases up to v0.13 converted RDP to $(\varepsilon, \delta)$
#    with an older, looser formula, reproduced here).
# 3. **What does the mechanism that ran guarantee?** For each neighbour of the training set
#    (one record removed: $N-1$ against $N$; one added: $N$ against $N+1$), the *certified*
#    $\varepsilon$ of the whole run as computed (the per-round guarantee with the sampled
#    batch revealed, composed over all steps; `THEORY.md` §11) and the $\varepsilon$ the
#    upper bound of the guarantee *forces* (no analysis of the mechanism can certify less).
#    The truth lies in between. The verdict: the claim *stands* (the SGM analysis applies),
#    *holds* (certified below the claim), is *refuted* (forced above the claim), or is
#    *unresolved* (in between).
#
# Every number comes from one function, `paperlib.practitioner.check_run`; the command
# `python -m paperlib check`, `paperlib.check_opacus` (a live `PrivacyEngine`) and
# `paperlib.CertifiedAccountant` (an Opacus accountant) give the same report. Section 2 is the
# cell to edit for your own run.

# %% tags=["parameters"]
MODE = "quick"
DEVICE = "cpu"
SEED = 0

# %% [markdown]
# ## Set-up
#
# Everything here is deterministic (`SEED` is recorded, `DEVICE` unused). Quick and full mode
# check the common settings below with the epochs stated in their table; smoke mode (a build
# check) runs one epoch of each and leaves out the ASGM family, the slowest to certify.

# %%
import time

import matplotlib.pyplot as plt
from myst_nb import glue

from paperlib.practitioner.check import check_run, format_statement
from paperlib.practitioner.releases import normaliser_scan
from paperlib.artifact import figures as pf
from paperlib.artifact import plotting
from paperlib.artifact.provenance import save_result
from paperlib.artifact.tables import number_of, show_table

T_START = pf.start_notebook(MODE)
glue("nb10_mode", MODE, display=False)

# %% [markdown]
# ## 1. Common settings, per Opacus release family
#
# Three runs a practitioner might make (Table {glue:text}`nb10_tab_settings`): MNIST with the
# CNN of Tramèr & Boneh, CIFAR-10 with the book's CIFAR-10 CNN, and the fine-tune of a large
# model on a million records. The epochs and $\delta$ are chosen as such runs usually are:
# $\delta$ below $1/N$ (the usual rule), a few tens of epochs from scratch, a few epochs for a
# fine-tune. (This page was built in {glue:text}`nb10_mode` mode: {glue:text}`nb10_epochs_used`.)
# Each is
# checked as four release families would run it: v0.12–v0.13 (ASGM), v0.14–v0.15 (EASGM),
# v1.x (FEASGM, the sampling rule of v1.6.0) and `loss_reduction='sum'` with the learning
# rate divided by the batch size, or the fix that divides by the configured batch size (both
# SGM, with v1.6.0's sampling rule).

# %%
SETTINGS = {  # the model sizes are those of paperlib.implementations.models (cnn-mnist, cnn-cifar10)
    "MNIST": dict(dataset_size=60_000, batch_size=256, noise_multiplier=1.1, n_params=26_010, epochs=10,
                  delta=1e-5),
    "CIFAR-10": dict(dataset_size=50_000, batch_size=256, noise_multiplier=1.5, n_params=550_570, epochs=30,
                     delta=1e-5),
    "fine-tune": dict(dataset_size=1_000_000, batch_size=1_024, noise_multiplier=1.0, n_params=100_000_000,
                      epochs=3, delta=1e-6),
}
FAMILIES = {  # label -> (release checked, loss_reduction)
    "v0.12–0.13 (ASGM)": ("0.13.0", "mean"),
    "v0.14–0.15 (EASGM)": ("0.15.0", "mean"),
    "v1.x (FEASGM)": ("1.6.0", "mean"),
    "sum / the fix (SGM)": ("1.6.0", "sum"),
}
show_table([dict(setting=k, **v) for k, v in SETTINGS.items()],
           {"setting": "setting", "dataset_size": "records N", "batch_size": "batch", "noise_multiplier": "σ",
            "n_params": "trainable parameters", "epochs": "epochs", "delta": "δ"},
           name="10_settings_table", caption="The common settings checked below (epochs as in quick and full mode).",
           formats={"dataset_size": ",d", "batch_size": ",d", "n_params": ",d", "noise_multiplier": "g",
                    "delta": "g"})
glue("nb10_tab_settings", number_of("10_settings_table"), display=False)
EPOCHS_SMOKE = 1
SKIP_SMOKE = ("v0.12–0.13 (ASGM)",)
reports = {}
for s_name, s in SETTINGS.items():
    opts = dict(s, epochs=pf.pick(MODE, smoke=EPOCHS_SMOKE, quick=s["epochs"], full=s["epochs"]))
    for f_name, (version, red) in FAMILIES.items():
        if MODE == "smoke" and f_name in SKIP_SMOKE:
            continue
        reports[(s_name, f_name)] = check_run(version, loss_reduction=red, **opts)
glue("nb10_epochs_used", "one epoch of each setting, ASGM left out" if MODE == "smoke"
     else "the epochs stated", display=False)


def verdicts(r):
    return {e["name"]: e["verdict"] for e in r["neighbours"]}


def table_rows(s_name):
    rows = []
    for f_name in FAMILIES:
        if (s_name, f_name) not in reports:
            rows.append({"family": f_name, "claimed": "not run in smoke mode"})
            continue
        r = reports[(s_name, f_name)]
        v = verdicts(r)
        rows.append({"family": f_name, "claimed": r["claimed_epsilon"], "acc": r["claim"]["accountant"].upper(),
                     "certified": r["epsilon_certified"] if r["epsilon_certified"] is not None else "not computed",
                     "forced": r["epsilon_forced"], "removal": v["removal"], "addition": v["addition"]})
    return rows


COLUMNS = {"family": "release family", "claimed": "claimed ε", "acc": "accountant", "certified": "certified ε",
           "forced": "forced ε", "removal": "removal", "addition": "addition"}
for s_name, s in SETTINGS.items():
    show_table(table_rows(s_name), COLUMNS, name=f"10_{s_name.lower().replace('-', '')}",
               caption=(f"{s_name}: N = {s['dataset_size']:,}, batch {s['batch_size']:,}, σ = {s['noise_multiplier']:g}, "
                        f"{s['n_params']:,} parameters, δ = {s['delta']:g}. Claimed ε (the release's accountant), "
                        "certified and forced ε (the larger over both neighbours) and the verdict per neighbour."),
               digits=3)

# %%
FLOOR = 1e-3  # forced values below this are drawn at it (log scale)
glue("nb10_floor", f"{FLOOR:g}", display=False)
fig, axes = plt.subplots(1, 3, figsize=(plotting.FIG_WIDTH, 3.0), constrained_layout=True, sharey=True)
for ax, s_name in zip(axes, SETTINGS):
    for i, f_name in enumerate(FAMILIES):
        if (s_name, f_name) not in reports:
            continue
        r = reports[(s_name, f_name)]
        lo, hi = r["epsilon_forced"], r["epsilon_certified"]
        mech = r["mechanism"]
        color = plotting.COLORS.get(mech, plotting.COLORS["sgm_claim"])
        if lo is not None and hi is not None:
            ax.vlines(i, max(lo, FLOOR), hi, color=color, linewidth=3, alpha=0.8)
        if lo is not None:
            ax.plot(i, max(lo, FLOOR), "v", color=color, markersize=6)
        if hi is not None:
            ax.plot(i, hi, "^", color=color, markersize=6)
        else:
            ax.annotate("not\ncomputed", (i, max(lo or 1, FLOOR)), textcoords="offset points", xytext=(0, 8),
                        ha="center", fontsize=8)
        ax.plot(i, r["claimed_epsilon"], "o", mfc="none", mec=plotting.COLORS["sgm_claim"], markersize=8)
    ax.set_xticks(range(len(FAMILIES)), [f.split(" (")[1].rstrip(")") for f in FAMILIES], fontsize=8)
    ax.set_xlim(-0.6, len(FAMILIES) - 0.4)
    ax.set_yscale("log")
    ax.grid(True, axis="y", alpha=0.3, linewidth=0.5)
    ax.set_title(s_name)
axes[0].set_ylabel("ε at the setting's δ")
axes[0].plot([], [], "o", mfc="none", mec="k", label="claimed (accountant)")
axes[0].plot([], [], "^", color="grey", label="certified")
axes[0].plot([], [], "v", color="grey", label="forced")
plotting.figure_legend(fig, ncol=3)  # below the panels, never over an interval
pf.show_figure(fig, "10_settings", {"mode": MODE, "seed": SEED,
                                    "epochs": {k: pf.pick(MODE, smoke=EPOCHS_SMOKE, quick=v["epochs"],
                                                          full=v["epochs"]) for k, v in SETTINGS.items()}})

# %%
def eps_text(setting, family, key, fmt=".3g"):
    """A number of the tables for the prose ("–" for a family not run in this mode, "not computed")."""
    r = reports.get((setting, family))
    if r is None:
        return "–"
    v = r["claimed_epsilon"] if key == "claimed" else r[f"epsilon_{key}"]
    return "not computed" if v is None else format(v, fmt)


ASGM, EASGM, FEASGM, SGM = FAMILIES
for key, (setting, family, what, fmt) in {
        "mnist_easgm_claim": ("MNIST", EASGM, "claimed", ".3g"), "mnist_easgm_cert": ("MNIST", EASGM, "certified", ".3g"),
        "mnist_easgm_forced": ("MNIST", EASGM, "forced", ".3g"), "mnist_asgm_claim": ("MNIST", ASGM, "claimed", ".3g"),
        "mnist_asgm_cert": ("MNIST", ASGM, "certified", ".3g"), "mnist_asgm_forced": ("MNIST", ASGM, "forced", ".2g"),
        "mnist_fe_claim": ("MNIST", FEASGM, "claimed", ".3g"), "mnist_fe_cert": ("MNIST", FEASGM, "certified", ".3g"),
        "ft_easgm_forced": ("fine-tune", EASGM, "forced", ".3g"), "ft_easgm_claim": ("fine-tune", EASGM, "claimed", ".3g"),
        "ft_easgm_cert": ("fine-tune", EASGM, "certified", ".3g"),
        "ft_asgm_cert": ("fine-tune", ASGM, "certified", ".3g"), "ft_fe_cert": ("fine-tune", FEASGM, "certified", ".3g"),
}.items():
    glue(f"nb10_{key}", eps_text(setting, family, what, fmt), display=False)
glue("nb10_mnist_L", str(round(1 / reports[("MNIST", FEASGM)]["sample_rate"])), display=False)
glue("nb10_cifar_ratio", f"{SETTINGS['CIFAR-10']['n_params'] / SETTINGS['MNIST']['n_params']:.0f}", display=False)
glue("nb10_mnist_fe_K", str(reports[("MNIST", FEASGM)]["neighbours"][0]["normalisers"][0]), display=False)
glue("nb10_tab_mnist", number_of("10_mnist"), display=False)
glue("nb10_tab_ft", number_of("10_finetune"), display=False)
assert all(reports[(s, SGM)]["claim_stands"] for s in SETTINGS)
assert all(not reports[(s, EASGM)]["claim_stands"] for s in SETTINGS)
assert reports[("MNIST", FEASGM)]["claim_stands"] and reports[("fine-tune", FEASGM)]["claim_stands"]


def verdict_text(setting, family):
    """What the bounds say about the claim, as a clause for the prose."""
    r = reports.get((setting, family))
    if r is None:
        return "not run in this mode"
    v = set(verdicts(r).values())
    if v <= {"stands", "holds"}:
        return "the claim holds"
    if "refuted" in v:
        return "the claim is refuted: no analysis of the mechanism that ran can certify it"
    return "these bounds neither confirm nor refute the claim"


for key, (setting, family) in {"mnist_easgm": ("MNIST", EASGM), "mnist_asgm": ("MNIST", ASGM),
                               "cifar_easgm": ("CIFAR-10", EASGM), "ft_easgm": ("fine-tune", EASGM)}.items():
    glue(f"nb10_{key}_verdict", verdict_text(setting, family), display=False)
for key, (setting, family, what) in {"cifar_easgm_claim": ("CIFAR-10", EASGM, "claimed"),
                                     "cifar_easgm_forced": ("CIFAR-10", EASGM, "forced")}.items():
    glue(f"nb10_{key}", eps_text(setting, family, what), display=False)
glue("nb10_tab_cifar", number_of("10_cifar10"), display=False)

# %% [markdown]
# ```{glue:figure} 10_settings
# :name: fig-10-settings
#
# Claimed $\varepsilon$ (open circles) against the interval the mechanism that ran lies in:
# from the $\varepsilon$ its upper bound forces (down triangle) to its certified $\varepsilon$
# (up triangle), the larger over both neighbours, per release family (ASGM v0.12–0.13, EASGM
# v0.14–0.15, FEASGM v1.x, SGM with `loss_reduction='sum'` or the fix). Log scale; forced values
# below {glue:text}`nb10_floor` are drawn at {glue:text}`nb10_floor`.
# ```
#
# **Reading the tables.** On MNIST (Table {glue:text}`nb10_tab_mnist`), Opacus v0.14–0.15
# prints $\varepsilon$ = {glue:text}`nb10_mnist_easgm_claim`. Its mechanism, EASGM, is certified
# at {glue:text}`nb10_mnist_easgm_cert` (the run as computed, the sampled batch revealed), and
# its upper bound forces {glue:text}`nb10_mnist_easgm_forced`: {glue:text}`nb10_mnist_easgm_verdict`.
# On CIFAR-10 (Table {glue:text}`nb10_tab_cifar`), with {glue:text}`nb10_cifar_ratio` times more
# parameters, the same
# release's bound forces {glue:text}`nb10_cifar_easgm_forced` against a claim of
# {glue:text}`nb10_cifar_easgm_claim`: {glue:text}`nb10_cifar_easgm_verdict`. Opacus v0.12–0.13
# prints {glue:text}`nb10_mnist_asgm_claim` on MNIST; ASGM's upper bound forces only
# {glue:text}`nb10_mnist_asgm_forced` and its certified value is {glue:text}`nb10_mnist_asgm_cert`:
# {glue:text}`nb10_mnist_asgm_verdict` (the certified value with the batch revealed is far
# above the truth for ASGM, whose leakage hides in which rounds a record was sampled).
#
# Opacus v1.x with batch 256 on 60,000 records samples at $1/\lceil N/256\rceil$ =
# 1/{glue:text}`nb10_mnist_L` and divides by {glue:text}`nb10_mnist_fe_K` on all three dataset sizes: FEASGM is then SGM divided
# by a constant, the claim ({glue:text}`nb10_mnist_fe_claim`, PRV) stands, and the certified
# value is the SGM one, {glue:text}`nb10_mnist_fe_cert`. With `loss_reduction='sum'` (or the
# fix) the claim stands in every setting.
#
# For the fine-tune (Table {glue:text}`nb10_tab_ft`), EASGM's upper bound forces
# {glue:text}`nb10_ft_easgm_forced` against a claim of {glue:text}`nb10_ft_easgm_claim`
# ({glue:text}`nb10_ft_easgm_verdict`; certified: {glue:text}`nb10_ft_easgm_cert`; ASGM
# certified: {glue:text}`nb10_ft_asgm_cert`), while v1.x, whose normaliser `int(N q)` is the
# same on all three dataset sizes here, is certified at the SGM value {glue:text}`nb10_ft_fe_cert`.
# Where the library's numerics cannot evaluate a case to their stated accuracy, the table says
# *not computed* instead of guessing.

# %% [markdown]
# ## 2. Your run — edit this cell
#
# **✎ Edit the next cell** with your run's settings and re-run the page (or the two cells
# below it). The same check from a terminal, and from a live Opacus 1.x run:
#
# ```bash
# python -m paperlib check --opacus-version 1.6.0 --dataset-size 60000 --batch-size 256 \
#     --epochs 10 --noise-multiplier 1.1 --params 26010
# ```
#
# ```python
# paperlib.check_opacus(privacy_engine, optimizer, data_loader, epochs=10, delta=1e-5, model=model)
# ```

# %%
# ======================= ✎ YOUR RUN: edit these values =======================
OPACUS_VERSION = "1.6.0"  # the release you trained with
DATASET_SIZE = 60_000  # len(train_dataset)
BATCH_SIZE = 256  # the DataLoader's batch_size (or set SAMPLE_RATE and BATCH_SIZE = None)
SAMPLE_RATE = None  # Poisson sampling rate, if you set it yourself
EPOCHS = 10
NOISE_MULTIPLIER = 1.1
N_PARAMS = 26_010  # trainable parameters: sum(p.numel() for p in model.parameters() if p.requires_grad)
LOSS_REDUCTION = "mean"  # as passed to make_private
DELTA = 1e-5
ACCOUNTANT = None  # what your run printed: "rdp" or "prv" (None: the release's default)
# ==============================================================================

# %%
mine = check_run(OPACUS_VERSION, DATASET_SIZE, BATCH_SIZE, sample_rate=SAMPLE_RATE, epochs=EPOCHS,
                 noise_multiplier=NOISE_MULTIPLIER, n_params=N_PARAMS, loss_reduction=LOSS_REDUCTION, delta=DELTA,
                 accountant=ACCOUNTANT)
print(format_statement(mine, width=80))

# %% [markdown]
# The statement is what `python -m paperlib check` prints (`--json` gives the same as one
# object). *Certified* is the upper end of the composition's error bracket, so it never
# understates the run's privacy loss; *forced* is the lower end of the upper bound's bracket.

# %% [markdown]
# ## 3. Which batch sizes keep Opacus 1.x on the safe side
#
# Opacus 1.x samples at $q = 1/\mathtt{len(data\_loader)} = 1/\lceil N/B \rceil$ and divides
# by `int(N * q)`. Whether that number is the same on a dataset and its neighbour depends on
# $N$ and $B$: when $\lceil N/B\rceil$ divides $N$ (for instance $B$ = {glue:text}`nb10_example_B`
# on 60,000 records)
# the removal neighbour divides by one less, and FEASGM is far from SGM. When $\lceil N/B\rceil$
# itself changes between $N$ and $N+1$, the two datasets even run a different number of steps
# per epoch, which no analysis covers. {numref}`fig-10-batch-size-scan` scans all batch sizes
# for 60,000 records.

# %%
SCAN_N = 60_000
SCAN_B = list(range(16, 1025))
scan = normaliser_scan(SCAN_N, SCAN_B)
weak_rm = [r["B"] for r in scan if r["removal_weak"]]
weak_ad = [r["B"] for r in scan if r["addition_weak"]]
changes = [r["B"] for r in scan if r["rate_changes"]]
fig, ax = plt.subplots(figsize=(plotting.FIG_WIDTH, 2.2), constrained_layout=True)
ax.vlines(weak_rm, 0.55, 0.95, color=plotting.COLORS["upper"], linewidth=1.2, label="removal: floors differ")
ax.vlines(weak_ad, 0.05, 0.45, color=plotting.COLORS["feasgm"], linewidth=1.2, label="addition: floors differ")
ax.vlines(changes, 0.0, 1.0, color=plotting.COLORS["simulation"], linewidth=0.6, alpha=0.6,
          label="a neighbour gets another sampling rate")
ax.set_yticks([])
ax.set_xlabel(f"batch size B (Opacus 1.6.0 rule, N = {SCAN_N:,})")
ax.set_xlim(SCAN_B[0], SCAN_B[-1])
plotting.legend_below(ax, ncol=2)  # the lines fill the whole strip: the legend goes under it
pf.show_figure(fig, "10_batch_size_scan", {"mode": MODE, "seed": SEED, "N": SCAN_N, "B": [SCAN_B[0], SCAN_B[-1]]})
EXAMPLE_B = min(weak_rm, key=lambda b: abs(b - SETTINGS["MNIST"]["batch_size"]))
assert SETTINGS["MNIST"]["batch_size"] not in weak_rm + weak_ad and EXAMPLE_B in weak_rm
assert SCAN_N % -(-SCAN_N // EXAMPLE_B) == 0  # ceil(N/B) divides N: the case the prose describes
glue("nb10_example_B", str(EXAMPLE_B), display=False)
glue("nb10_n_weak_rm", str(len(weak_rm)), display=False)
glue("nb10_n_changes", str(len(changes)), display=False)
glue("nb10_n_scan", f"{len(SCAN_B):,}", display=False)
glue("nb10_scan_lo", f"{SCAN_B[0]:,}", display=False)
glue("nb10_scan_hi", f"{SCAN_B[-1]:,}", display=False)

# %% [markdown]
# ```{glue:figure} 10_batch_size_scan
# :name: fig-10-batch-size-scan
#
# Batch sizes $B$ for which Opacus 1.6.0, run on 60,000 records, divides by different numbers
# on the two datasets of a neighbouring pair (vermillion: removal, brown: addition), and (grey)
# those for which a neighbour gets another sampling rate. For all others the SGM claim holds.
# Exact arithmetic, the same in every mode.
# ```
#
# Of the {glue:text}`nb10_n_scan` batch sizes from {glue:text}`nb10_scan_lo` to
# {glue:text}`nb10_scan_hi`, {glue:text}`nb10_n_weak_rm`
# put the removal neighbour in the weak case and {glue:text}`nb10_n_changes` change a
# neighbour's sampling rate. `check` names nearby batch sizes that are safe for both
# neighbours when yours is not.
#
# ## 4. During training: an accountant that reports the certified ε
#
# `paperlib.CertifiedAccountant` has Opacus's accountant interface. Set it on the engine
# before `make_private`, and `privacy_engine.get_epsilon(delta)` reports the certified
# $\varepsilon$ of the steps taken so far (both neighbours, the larger):
#
# ```python
# from opacus import PrivacyEngine
# import paperlib
#
# engine = PrivacyEngine()
# engine.accountant = paperlib.CertifiedAccountant(
#     dataset_size=len(train_set), n_params=sum(p.numel() for p in model.parameters() if p.requires_grad))
# model, optimizer, loader = engine.make_private(module=model, optimizer=optimizer, data_loader=loader,
#                                                noise_multiplier=1.1, max_grad_norm=1.0)
# ...  # train
# engine.get_epsilon(1e-5)
# ```

# %%
wall = time.perf_counter() - T_START
_ = save_result("10_practitioners", {"mode": MODE, "settings": SETTINGS, "families": FAMILIES,
                                 "your_run": mine["inputs"]},
            {"settings": [{"setting": s, "family": f, "report": reports[(s, f)]} for s, f in reports],
             "your_run": mine, "weak_batch_sizes": {"removal": weak_rm, "addition": weak_ad, "rate_changes": changes}},
            mode=MODE, seed=SEED, wall_time=wall)
