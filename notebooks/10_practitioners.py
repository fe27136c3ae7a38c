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
# This page takes the settings of one DP-SGD training run with Opacus
# {cite}`yousefpour2021opacus` — training-set size, batch size, epochs, noise multiplier,
# number of trainable parameters and the Opacus release — and answers three questions
# with the results of {cite}`wang2026rethinking`:
#
# 1. **Which mechanism did the run use?** Opacus releases differ in what they divide the
#    noisy gradient sum by (paper Table 2; the code-audit chapter reads it from every
#    release): the realised batch size (ASGM, v0.12–v0.13), the expected batch size
#    $Nq$ (EASGM, v0.14–v0.15) or its floor $\lfloor Nq\rfloor$ (FEASGM, v1.x).
# 2. **What does the accountant claim?** The $\varepsilon$ at the given $\delta$ for the
#    subsampled Gaussian mechanism (SGM) over the run, from Opacus's RDP accountant
#    {cite}`mironov2019renyi` and its PRV accountant (the default of Opacus 1.6).
# 3. **Does the claim hold for the mechanism that ran?** Differential privacy compares
#    neighbouring datasets, and a training set has two kinds of neighbours: with one
#    record removed ($|D| = N-1$ against $|D'| = N$) and with one added ($N$ against
#    $N+1$). For each, the page checks whether the SGM analysis applies, and if not,
#    computes the corrected bound over all rounds (the previous chapter's exact
#    chi-square bound, or the numerical composition for ASGM).
#
# The decision logic is `paperlib.practitioner.practitioner_report`; this page only
# displays it. Change the parameters cell and re-run to check your own run.

# %% tags=["parameters"]
MODE = "quick"
DEVICE = "cpu"
SEED = 0
N_TRAIN = 60_000  # records in the training set
BATCH_SIZE = 256  # the DataLoader's batch_size
EPOCHS = 1
NOISE_MULTIPLIER = 1.0
N_PARAMS = 26_010  # trainable parameters (the MNIST CNN of Tramèr & Boneh)
OPACUS_VERSION = "1.6.0"
DELTA = 1e-5
SAMPLE_RATE = None  # None: derived as this Opacus release derives it; or give a rate
LOSS_REDUCTION = "mean"

# %% [markdown]
# ## Set-up
#
# Everything on this page is deterministic and takes seconds in every mode (`MODE` only
# sets the resolution of the numerical composition used for ASGM releases; `SEED` is
# recorded, `DEVICE` unused).

# %%
import time

import matplotlib.pyplot as plt
from IPython.display import display
from myst_nb import glue

from paperlib import practitioner as pr
from paperlib.mechanisms.core import feasgm_floors
from paperlib.artifact import figures as pf
from paperlib.artifact import plotting
from paperlib.artifact.provenance import results_dir, save_result

T_START = pf.start_notebook(MODE)
PLD = {"max_fft": pf.pick(MODE, smoke=2**16, quick=2**20, full=2**22)}
print(f"MODE={MODE} SEED={SEED}; results -> {results_dir().resolve()}")
glue("nb10_mode", MODE, display=False)


def show(report):
    """One table per report: the run, then each neighbouring pair."""
    r = report
    run = [["Opacus release", r["inputs"]["opacus_version"]],
           ["mechanism (Table 2)", f"{r['mechanism'].upper()}: {r['mechanism_note']}"],
           ["sampling rate q", f"{r['sample_rate']:.6g}  ({r['sample_rate_rule']})"],
           ["rounds T", f"{r['rounds']:,}"],
           ["divides by (on the training set)", r["normaliser"]]]
    for acc, e in r.get("claimed_epsilon", {}).items():
        run.append([f"claimed ε ({acc.upper()} accountant, δ = {r['delta']:g})", f"{e:.4g}"])
    display(pf.markdown_table(["", "this run"], run))
    rows = []
    for e in r["neighbours"]:
        rows.append([e["name"], f"{e['sizes'][0]:,} vs {e['sizes'][1]:,}",
                     " vs ".join(str(k) for k in e["normalisers"]) if "normalisers" in e else "–",
                     "yes" if e.get("sgm_claim_supported") else "no",
                     "–" if e.get("corrected_epsilon") is None else f"{e['corrected_epsilon']:.4g}",
                     e["verdict"]])
    display(pf.markdown_table(["neighbour", "|D| vs |D'|", "normalisers", "SGM claim supported",
                               "corrected ε ≥", "verdict"], rows))
    print(r["summary"])
    for note in r.get("notes", []):
        print("note:", note)

# %% [markdown]
# ## 1. Your run

# %%
report = pr.practitioner_report(N_TRAIN, BATCH_SIZE, EPOCHS, NOISE_MULTIPLIER, N_PARAMS, OPACUS_VERSION,
                                  delta=DELTA, sample_rate=SAMPLE_RATE, loss_reduction=LOSS_REDUCTION,
                                  pld_options=PLD)
show(report)
glue("nb10_summary", report["summary"], display=False)

# %% [markdown]
# How to read it. *Normalisers* are the numbers Opacus divides by on the two datasets
# of the pair (FEASGM only). When they agree, the released gradient is the SGM output
# divided by a constant, so the SGM claim holds for that pair. When they differ — and
# always for EASGM and ASGM — the SGM analysis does not describe the mechanism, and the
# *corrected ε* is the $\varepsilon$ (at the same $\delta$) of the upper bound on the
# run's guarantee: no valid analysis can certify a smaller one for that pair. If it
# exceeds the claimed $\varepsilon$, the claim is refuted. For FEASGM and EASGM this is
# not only a statement about analyses: when every clipped gradient is zero, the released
# noisy gradients are plain Gaussian noise divided by the two normalisers, a pair that
# is even easier to tell apart than the bound says.

# %% [markdown]
# ## 2. Two runs that differ only in the sampling rate
#
# `THEORY.md` (§6) assumes that Opacus sets $q$ = batch size / $N$, so that $Nq$ is an
# integer $b$ and the removal neighbour always gets $\lfloor (N-1)q \rfloor = b-1$
# against $b$. With $N = 60{,}000$ and batch size 256 that gives normalisers 255 and 256
# for the removal neighbour — the weak case — while the addition neighbour gets 256 on
# both sides. A rate with $Nq = 256.5$ instead leaves room on both sides, and the floors
# agree. The two reports below are asserted.

# %%
ex_int = pr.practitioner_report(60_000, 256, EPOCHS, NOISE_MULTIPLIER, N_PARAMS, "1.6.0", delta=DELTA,
                                  sample_rate=256 / 60_000)
show(ex_int)
rem, add = ex_int["neighbours"]
assert rem["normalisers"] == [255, 256] and not rem["floors_agree"] and not rem["sgm_claim_supported"]
assert rem["claim_refuted"] and rem["corrected_epsilon"] > max(ex_int["claimed_epsilon"].values())
assert add["normalisers"] == [256, 256] and add["floors_agree"] and add["sgm_claim_supported"]

# %%
ex_half = pr.practitioner_report(60_000, 256, EPOCHS, NOISE_MULTIPLIER, N_PARAMS, "1.6.0", delta=DELTA,
                                   sample_rate=256.5 / 60_000)
show(ex_half)
assert all(e["floors_agree"] and e["sgm_claim_supported"] for e in ex_half["neighbours"])
glue("nb10_eps_int", float(rem["corrected_epsilon"]), display=False)
glue("nb10_claim_int", float(ex_int["claimed_epsilon"]["rdp"]), display=False)

# %% [markdown]
# With $q = 256/60{,}000$ the removal neighbour's corrected bound has
# $\varepsilon \ge$ {glue:text}`nb10_eps_int:.1f` against a claimed
# {glue:text}`nb10_claim_int:.3f` (RDP): the claim fails by two orders of magnitude,
# although the two normalisers differ by one part in 256.
#
# ## 3. What Opacus 1.6.0 actually does
#
# Opacus 1.6.0 does not take $q$ = batch size / $N$. `make_private(poisson_sampling=True)`
# samples at $1/\mathtt{len(data\_loader)}$, i.e. $1/\lceil N/B \rceil$, and divides by
# `int(N * sample_rate)` (checked against a real `make_private` call in the tests). So
# $Nq$ is an integer only when $\lceil N/B\rceil$ divides $N$ — for $N = 60{,}000$ and
# $B = 256$, $q = 1/235$ and both neighbours get the normaliser 255 (section 1 above, if
# the defaults are unchanged). The removal neighbour is in the weak case exactly when
# $\lceil N/B \rceil$ divides $N$, the addition neighbour when it divides $N+1$ (and then
# $\lceil (N+1)/B \rceil$ usually changes too, giving the two datasets different
# sampling rates, which neither analysis covers). {numref}`fig-10-batch-size-scan` scans
# all batch sizes for $N = 60{,}000$.

# %%
def normaliser_scan(N, batch_sizes):
    rows = []
    for B in batch_sizes:
        q_rm = pr.opacus1_rates(N - 1, B, False)
        q_tr = pr.opacus1_rates(N, B, False)
        q_ad = pr.opacus1_rates(N + 1, B, False)
        k_rm = (feasgm_floors(N - 1, q_rm[1])[0], feasgm_floors(N, q_tr[1])[0])
        k_ad = (feasgm_floors(N, q_tr[1])[0], feasgm_floors(N + 1, q_ad[1])[0])
        rows.append({"B": B, "removal_weak": q_rm == q_tr and k_rm[0] != k_rm[1],
                     "addition_weak": q_ad == q_tr and k_ad[0] != k_ad[1],
                     "rate_changes": q_rm != q_tr or q_ad != q_tr})
    return rows


SCAN_B = list(range(16, 1025))
scan = normaliser_scan(N_TRAIN, SCAN_B)
weak_rm = [r["B"] for r in scan if r["removal_weak"]]
weak_ad = [r["B"] for r in scan if r["addition_weak"]]
changes = [r["B"] for r in scan if r["rate_changes"]]
fig, ax = plt.subplots(figsize=(7.5, 2.2), constrained_layout=True)
ax.vlines(weak_rm, 0.55, 0.95, color=plotting.COLORS["upper"], linewidth=1.2, label="removal neighbour: floors differ")
ax.vlines(weak_ad, 0.05, 0.45, color=plotting.COLORS["feasgm"], linewidth=1.2, label="addition neighbour: floors differ")
ax.set_yticks([])
ax.set_xlabel("batch size B (Opacus 1.6.0 rule, N = {:,})".format(N_TRAIN))
ax.set_xlim(SCAN_B[0], SCAN_B[-1])
ax.legend(fontsize=7, loc="upper right")
pf.show_figure(fig, "10_batch_size_scan", {"mode": MODE, "seed": SEED, "N": N_TRAIN, "B": [SCAN_B[0], SCAN_B[-1]]})
print(f"N = {N_TRAIN:,}, B in [{SCAN_B[0]}, {SCAN_B[-1]}]: removal neighbour in the weak case for B = {weak_rm}")
print(f"addition neighbour in the weak case for B = {weak_ad}")
print(f"{len(changes)} batch sizes give one of the neighbours a different sampling rate")
if N_TRAIN == 60_000:
    assert 250 in weak_rm and 256 not in weak_rm and 256 not in weak_ad

# %% [markdown]
# ```{glue:figure} 10_batch_size_scan
# :name: fig-10-batch-size-scan
#
# Batch sizes $B$ for which Opacus 1.6.0, run on $N$ records, divides by different
# numbers on the two datasets of a neighbouring pair (vermillion: removal neighbour,
# brown: addition neighbour). For these batch sizes the SGM claim is not supported for
# that pair; for all others the floors agree and it holds. The scan is exact arithmetic,
# the same in every mode.
# ```

# %%
ex_250 = pr.practitioner_report(60_000, 250, EPOCHS, NOISE_MULTIPLIER, N_PARAMS, "1.6.0", delta=DELTA)
show(ex_250)
assert not ex_250["neighbours"][0]["sgm_claim_supported"] and ex_250["neighbours"][0]["claim_refuted"]

# %% [markdown]
# ## 4. Older releases
#
# The same run under Opacus 0.15 (EASGM) and 0.13 (ASGM). Neither release is covered by
# the SGM analysis for any neighbour; whether the corrected bound *refutes* the claim
# depends on the sizes. With the default settings (a full 60,000-record training set,
# one epoch, a 26,010-parameter model) the bounds stay below the claimed $\varepsilon$:
# the claim is unsupported but not shown false. With the 1,485,217-parameter model,
# EASGM's bound exceeds it.

# %%
older = {}
for version, n in (("0.15.0", N_PARAMS), ("0.13.0", N_PARAMS), ("0.15.0", 1_485_217)):
    r = pr.practitioner_report(N_TRAIN, BATCH_SIZE, EPOCHS, NOISE_MULTIPLIER, n, version, delta=DELTA,
                                 pld_options=PLD)
    older[(version, n)] = r
    print(f"--- Opacus {version}, n = {n:,}")
    show(r)
    assert not any(e["sgm_claim_supported"] for e in r["neighbours"])
if (N_TRAIN, BATCH_SIZE, EPOCHS, NOISE_MULTIPLIER) == (60_000, 256, 1, 1.0):
    assert older[("0.15.0", 1_485_217)]["neighbours"][0]["claim_refuted"]

# %%
wall = time.perf_counter() - T_START
save_result("10_practitioners", {"mode": MODE, "N_train": N_TRAIN, "batch_size": BATCH_SIZE, "epochs": EPOCHS,
                                 "noise_multiplier": NOISE_MULTIPLIER, "n_params": N_PARAMS,
                                 "opacus_version": OPACUS_VERSION, "delta": DELTA, "sample_rate": SAMPLE_RATE,
                                 "loss_reduction": LOSS_REDUCTION},
            {"report": report, "example_batch_over_N": ex_int, "example_half_integer": ex_half,
             "example_B250": ex_250, "weak_batch_sizes": {"removal": weak_rm, "addition": weak_ad}},
            mode=MODE, seed=SEED, wall_time=wall)
print(f"notebook 10 finished in {wall:.1f} s (MODE={MODE})")
