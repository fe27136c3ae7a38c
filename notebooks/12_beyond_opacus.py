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
# # Beyond Opacus: any DP-SGD code, read from its own updates
#
# Chapters 8 and 10 know Opacus's releases by their source code. Most DP-SGD code is not an
# Opacus release. It may be JAX Privacy, dp-transformers, a training loop written by hand, or
# Opacus run across several processes. This chapter asks each of them two questions. Does the
# code draw its batches as the accountant assumes, by Poisson sampling? And which number does
# it divide the noisy gradient sum by? The answers come from the code's own updates, not from
# reading it.
#
# **The probe.** paperlib calls one step of the code on two neighbouring data sets, of seven
# and eight records. Each record's gradient points along its own axis, at twice the clipping
# norm, and many further coordinates carry noise only. From one update, the noise-only
# coordinates give the divisor, and each record's coordinate says whether the record was in
# the batch. Repeated over many seeds, the divisors follow one rule or none. The rules are a
# constant fixed in advance, the expected batch size $Nq$, its floor, the size of the batch
# drawn $|B|$, and the size of a separate draw. The batch sizes must vary as Poisson sampling
# makes them vary. Two exact tests refuse batches that always have the same size, and batches
# drawn at another rate. The repository's `THEORY.md` (section 11.7) gives the estimators,
# the tests and their errors.
#
# Everything runs on the CPU in every mode (`DEVICE` is unused).
#
# **The run.** The mechanism found is then checked at one setting for every code path:
# Opacus's MNIST example for one epoch. Its claim is the SGM's, as an RDP accountant reports
# it. Opacus, in one process or two, takes its sampling rate from its data loader. Its rows
# are checked as chapter 10 checks such a run: a batch size of {glue:text}`nb12_loader_batch` for
# {glue:text}`nb12_loader_epochs`, so that a
# data set one record larger also gets its own number of steps. The other code paths sample
# at a rate they are given. Chapter 10 explains the bracket of certified and forced
# $\varepsilon$ and the verdicts.

# %% tags=["parameters"]
MODE = "quick"
DEVICE = "cpu"
SEED = 0

# %%
import time

from IPython.display import Markdown, display
from myst_nb import glue

from paperlib.practitioner.step import BEYOND_SETTING, CODE_PATHS, LOADER_SETTING, beyond_opacus
from paperlib.artifact import notebook as pf
from paperlib.artifact.provenance import save_result
from paperlib.artifact.grading.checks import fmt_eps
from paperlib.artifact.tables import LINE_BREAK, SOFT_BREAK, number_of, show_table

T_START = pf.start_notebook(MODE)
TRIALS = pf.pick(MODE, smoke=16, quick=24, full=48)  # calls of each step per data set
glue("nb12_mode", MODE, display=False)
glue("nb12_trials", f"{TRIALS}", display=False)
glue("nb12_n_paths", f"{len(CODE_PATHS)}", display=False)
for k, v in BEYOND_SETTING.items():
    glue(f"nb12_{k}", f"{v:,}" if isinstance(v, int) else f"{v:g}", display=False)
glue("nb12_loader_batch", f"{LOADER_SETTING['batch_size']:,}", display=False)
glue("nb12_loader_epochs", "one epoch" if LOADER_SETTING["epochs"] == 1 else f"{LOADER_SETTING['epochs']} epochs",
     display=False)

# %% [markdown]
# ## 1. The code paths, classified
#
# Each of the {glue:text}`nb12_n_paths` code paths runs {glue:text}`nb12_trials` steps on each
# data set, in this run's {glue:text}`nb12_mode` mode. JAX Privacy 2.0.0 and dp-transformers
# 1.0.0 are installed on demand from wheels pinned by their hashes, each into a folder of its
# own, and run in separate processes. Opacus runs once in one process and once under
# `DistributedDataParallel` with two processes. The two hand-written loops differ in one line:
# the divisor. dp-transformers runs twice: as it ships, and with the library's own Poisson
# sampler put in place of its shuffling one. Where the probe configures a batch size, it is 4,
# about half of the seven or eight records, so a public constant reads as 4.
#
# dp-transformers runs outside the range it declares. Its package asks for PyTorch 1.12 or
# older, which has no build for this Python, so it runs beside the PyTorch and Opacus of this
# environment. Its own trainer takes one optimisation step. One change is made to it: its
# privacy accountant cannot be built at the probe's tiny noise, so it is built at a noise
# multiplier of 1. The optimiser gets the probe's noise, and the accountant never touches the
# update.

# %%
DATA, INFO = pf.cached("12_beyond_opacus", {"trials": TRIALS, "seed": SEED, "setting": BEYOND_SETTING,
                                            "paths": {k: list(v) for k, v in CODE_PATHS.items()}},
                       lambda: beyond_opacus(trials=TRIALS, seed=SEED), mode=MODE, seed=SEED)
ROWS = DATA["rows"]
RAN = [r for r in ROWS if not r.get("error")]


def _bracket(n):
    if n["forced"] is None:  # refused by the probe: no mechanism analysed here runs it
        return n["verdict"]
    return f"{n['verdict']}{LINE_BREAK}[{fmt_eps(n['forced'])}, {fmt_eps(n['certified'])}]"


def _found(r):
    if r.get("refused"):
        return f"refused: {r['rule']}"
    return f"{r['rule']}, {r['mechanism'].upper()}" if r.get("mechanism") else "not run"


# A soft break lets the long class name wrap, so the table fits the page.
table = [[f"{r['library']} {r.get('version', '')}".strip(),
          r["how"].replace("DistributedDataParallel", f"Distributed{SOFT_BREAK}DataParallel"), _found(r),
          f"{r['claimed']:.3g}" if "claimed" in r else "–",
          *(_bracket(n) for n in r.get("neighbours", [])), *(["–", "–"] if r.get("error") else [])]
         for r in ROWS]
show_table(table, ["Library", "Code path", "Divisor found, mechanism", "Claimed ε", "Removal", "Addition"],
           name="12_beyond", markup=True, caption="Each code path's divisor, read off its updates, and its run checked as the "
           "mechanism found. The run is Opacus's MNIST example for one epoch; the claim is the SGM's, from an RDP "
           "accountant. The last two columns give the verdict and the bracket [forced, certified] of ε for each "
           "neighbour. A code path whose batches always have one size is not covered: no mechanism analysed here "
           "runs it.")
glue("nb12_tab", number_of("12_beyond"), display=False)
MATCH = sum(r.get("rule") == r["expected_rule"] for r in RAN)
glue("nb12_match", f"{MATCH} of {len(RAN)}", display=False)
_missing = [f"{r['library']}, {r['how']}: {r['error']}" for r in ROWS if r.get("error")]
glue("nb12_not_run", ("What did not run here, and why: " + "; ".join(_missing) + ".") if _missing else
     "Every code path ran here.", display=False)

# %% [markdown]
# Table {glue:text}`nb12_tab` gives the result. For {glue:text}`nb12_match` code paths that ran,
# the finding is the one the code was written with: its divisor, or for dp-transformers the
# fixed size of its batches. {glue:text}`nb12_not_run`
#
# Opacus's rows need a word. Under `DistributedDataParallel` each rank divides by its share of
# the floor of the expected batch size, and the ranks' gradients are then averaged. The two
# divisions cancel, so the run divides by the floor, as one process does. On the addition
# neighbour both rows are refuted without any bound. A batch size of
# {glue:text}`nb12_loader_batch` divides {glue:text}`nb12_dataset_size`, so the loader of the
# data set with one record added makes an extra batch each epoch: counting the updates tells
# the two data sets apart. Chapter 10 shows the same for this run.
#
# dp-transformers needs a word too. Its trainer shuffles the records and cuts them into
# batches of the configured size, while its accountants are told the rate of Poisson
# sampling. Its divisor is that configured size, a public constant, so the divisor is not its
# problem. Its sampling is. For batches of a fixed size, accounting as if they were Poisson
# sampled can understate ε {cite}`chua2024private,annamalai2026shuffle`. The library has a
# Poisson sampler of its own, which its trainer does not use {cite}`dptransformers`. Put in
# its place, the same trainer divides by the configured batch size under Poisson sampling,
# and its claim stands.
#
# ## 2. What each finding means for its users
#
# For each code path that ran: what its updates show, then what its users can do.

# %%
display(Markdown("\n".join(f"- **{r['library']}, {r['how']}.** {r['sentence']} {r['advice']}" for r in RAN)))

# %%
wall = time.perf_counter() - T_START
save_result("12_beyond_summary", {"mode": MODE, "seed": SEED, "trials": TRIALS, "setting": BEYOND_SETTING},
            {"rows": ROWS, "claim": DATA["claim"]}, mode=MODE, seed=SEED, wall_time=wall)
print(f"notebook 12 finished in {wall:.1f} s (MODE={MODE})")

# %% [markdown]
# ## 3. The grade of this chapter
#
# The grade page counts these classifications as our addition to the paper. Each code path's
# divisor must be the one it was written with, and dp-transformers must be refused for its
# fixed batch size.

# %%
# Claim X3 (beyond the paper: any code, classified from its updates), graded from this notebook's results by
# the same check as the grade page.
from paperlib.artifact.claims import require as grade_claim  # noqa: E402
from paperlib.artifact.claims import chapter_grade  # noqa: E402

GRADE = grade_claim("X3")
display(Markdown(chapter_grade(GRADE)))  # the grade page's sentence and findings, in the chapter
