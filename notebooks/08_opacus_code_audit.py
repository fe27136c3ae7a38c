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
# # Opacus code audit: which mechanism does each release run? (Table 2)
#
# The analysis in this book separates four mechanisms that differ only in what the
# noisy sum of clipped gradients $S_B + G$ is divided by before the update: nothing
# (SGM), the realised batch size $|B|$ (ASGM), the expected batch size $Nq$ (EASGM) or
# its floor $\lfloor Nq \rfloor$ (FEASGM). Which of them a practitioner actually gets is
# decided by a line or two in the DP-SGD library. The paper's authors {cite}`wang2026rethinking` read the
# `privacy_engine.py` of Opacus {cite}`yousefpour2021opacus` from v0.9.0 to v1.5.4 and
# summarised it in their Table 2 (Section 5.5 and Appendix A of the paper). The floor
# of Opacus 1.x had been reported before, in Opacus issue #571 {cite}`opacus571`. The paper
# also credits auditing work by Cebere et al. with documenting it. We cite their audit of
# DP-SGD in the hidden-state threat model {cite}`cebere2025tighter`, since the copy of the
# paper has no reference list to confirm which of their works it means.
#
# This chapter redoes that audit for **every** Opacus release on the package index from
# v0.9.0 on, including the ones published after the paper's table stops. The setting is
# the one the paper studies: Poisson sampling with `loss_reduction="mean"`, Opacus's
# default. The audit itself lives in `paperlib.implementations.opacus_code`; its result is committed to
# the repository as data, so this notebook needs no network. `make opacus-table`
# re-downloads the releases and redoes the audit.

# %% tags=["parameters"]
MODE = "quick"
DEVICE = "cpu"
SEED = 0

# %% [markdown]
# ## Set-up
#
# Nothing here depends on `MODE`: the notebook reads the stored audit, and its one
# computation (a real Opacus step on a dataset of a few examples) takes well under a second.
# That step always runs on the CPU, whatever `DEVICE` says; `SEED` fixes its Poisson
# batches and its noise.

# %%
import math
import re
from collections import Counter

from IPython.display import display
from packaging.version import Version

from paperlib.implementations import opacus_code as oc
from paperlib.artifact.tables import LINE_BREAK, SOFT_BREAK, show_table

doc = oc.load_table()
# the real step's dataset, as the check builds it (its defaults), for the text below
import inspect  # noqa: E402
from myst_nb import glue  # noqa: E402
from paperlib.implementations.opacus_code import stepcheck  # noqa: E402

_sc = {k: p.default for k, p in inspect.signature(stepcheck.step_check).parameters.items()}
_nb = -(-_sc["N"] // _sc["batch_size"])
for k, v in {"sc_N": _sc["N"], "sc_batch": _sc["batch_size"], "sc_nbatches": _nb, "sc_q": f"{1 / _nb:g}",
             "sc_Nq": f"{_sc['N'] / _nb:g}", "sc_floor": math.floor(_sc["N"] / _nb),
             "sc_dnoise": f"{_sc['d_noise']:,}"}.items():
    glue(f"nb08_{k}", str(v), display=False)
releases = doc["releases"]
versions = [r["version"] for r in releases]
print(f"stored audit: {oc.stored_table_path().name}, generated {doc['generated_utc']}")
print(f"source of the wheels: {doc['source']}")
print(f"releases audited: {len(releases)} (v{versions[0]} to v{versions[-1]})")

# %% [markdown]
# ## 1. How a release is classified
#
# The audit does not look up an answer per version. It unpacks each release's wheel
# (the `.py` files are in it), and matches the source against a short list of pattern
# rules. Each rule is a regular expression with a condition on where the line sits: the
# function around it, the `if` that guards it, or the statement after it. The rules
# fall into three code generations:
#
# * **engine-step** (the oldest releases). `PrivacyEngine.step` takes the batch size
#   from the clipper, that is, the number of per-example gradients it just saw, and
#   divides the noise by it under `loss_reduction == "mean"`; the clipper divides the
#   clipped sum by the same number. Together: $(S_B + G)/|B|$, normalisation **A**. If
#   `step` also raises `ValueError` when the batch is larger than the `batch_size` the
#   engine was built with, a Poisson batch (whose size is random) cannot be fed, and
#   the mechanism is **Not supported**.
# * **engine-poisson**. The engine gains a `poisson` switch. With it on and
#   `loss_reduction="mean"`, the gradient already divided by $|B|$ is multiplied by
#   `batch_size / self.avg_batch_size`, with `avg_batch_size = sample_rate *
#   sample_size`: the divisor becomes $Nq$, normalisation **EA**.
# * **dp-optimizer** (v1.x). `DPOptimizer.add_noise` adds the noise to the clipped sum
#   and `scale_grad` divides the result by `expected_batch_size`, which
#   `PrivacyEngine.make_private` sets to `int(len(data_loader.dataset) * sample_rate)`:
#   the truncation gives $\lfloor Nq \rfloor$, normalisation **FEA**.
#
# For the two later generations the rule reads the expression that computes the
# divisor and classifies it (a plain product is EA, an `int(...)` or `floor(...)` around
# it FEA), so a change in that line would change the verdict. A release whose source
# fits none of the generations stops the audit with an error instead of being guessed.

# %%
# a rule's name and its regular expression have no spaces to wrap at: they may break after each _ of the
# name and each \s* or \s+ of the expression (SOFT_BREAK)
show_table([[f"`{r['name'].replace('_', '_' + SOFT_BREAK)}`{LINE_BREAK}in `{r['file'].removeprefix('opacus/')}`",
             r["generation"],
             "`" + re.sub(r"(\\s[*+])", r"\1" + SOFT_BREAK, r["pattern"]) + "`"] for r in doc["rules"]],
           ["Rule, and the file it reads", "Generation", "Pattern (a regular expression)"],
           name="08_rules", caption="The rules of the code audit: the source pattern that identifies each "
                                    "generation of the normalisation code.", markup=True)

# %% [markdown]
# ## 2. The audit, one row per release
#
# The first column gives the line in `privacy_engine.py` that fixes the divisor
# (for v1.x, where the value of `expected_batch_size` is set; the division itself is in
# `optimizers/optimizer.py`, listed further down). The last column compares the row
# with the paper's Table 2.

# %%
_header, _rows = oc.records_table(releases)  # release, file:line and code in one cell, so that the table fits the page
show_table([[f"**{r[0]}**{LINE_BREAK}{r[1]}{LINE_BREAK}{r[2]}", *r[3:]] for r in _rows],
           ["Release, file:line and code", *_header[3:]], name="08_releases", markup=True,
           caption="The code audit, one row per release: the line that fixes the divisor, the normalisation, "
                   "built-in Poisson sampling, the resulting mechanism, and the comparison with the paper's Table 2.")

# %%
cmp = oc.compare_with_paper(releases)
status = Counter(c["status"] for c in cmp)
in_paper = [c for c in cmp if c["status"] in ("agrees", "differs", "not audited")]
print(f"releases listed in the paper's Table 2: {len(in_paper)}")
print(f"  agree with the paper on normalisation, built-in Poisson and mechanism: {status['agrees']}")
print(f"  differ: {status['differs']}   listed in the paper but not audited here: {status['not audited']}")
new = [c["version"] for c in cmp if c["status"] == "not in paper"]
print(f"releases after the paper's last one (v{oc.PAPER_LAST_VERSION}): {', '.join('v' + v for v in new) or 'none'}")
for c in cmp:
    if c["status"] == "differs":
        print(f"  v{c['version']} differs in: {', '.join(c['diffs'])}")
assert status["differs"] == 0 and status["not audited"] == 0

# %% [markdown]
# ## 3. The same result in the paper's layout
#
# Consecutive releases with the same code generation and the same findings are merged
# into one row, as the paper does. Rows that extend the paper's table are marked.

# %%
def grouped(recs):
    groups = []
    for r in recs:
        key = (r["generation"], r["normalisation"], r["poisson_builtin"], r["mechanism"])
        if groups and groups[-1][0] == key:
            groups[-1][1].append(r["version"])
        else:
            groups.append((key, [r["version"]]))
    return groups


rows = []
for (gen, norm, builtin, mech), vs in grouped(releases):
    span = f"v{vs[0]}" if len(vs) == 1 else f"v{vs[0]} – v{vs[-1]}"
    listed = [v for v in vs if oc.paper_row(v) is not None]
    note = ("yes" if len(listed) == len(vs) else
            "no (**new**)" if not listed else
            f"up to v{listed[-1]}; **new**: " + ", ".join("v" + v for v in vs if v not in listed))
    rows.append([span, gen, f"{norm} ({oc.DIVISOR[norm]})", "✓" if builtin else "✗", mech, note])
show_table(rows, ["Versions", "Generation", "Normalisation", "Built-in Poisson", "Mechanism",
                 "In the paper's Table 2"], name="08_paper_layout", markup=True,
           caption="The audit in the layout of the paper's Table 2 (consecutive releases with the same findings merged).")

# %% [markdown]
# ## 4. The evidence behind each generation
#
# Every line that a rule matched, for the newest release of each generation (and,
# for the oldest generation, also for the newest release that still rejects large
# batches). Line numbers are those of the released file.

# %%
latest = {}
for r in releases:
    latest[(r["generation"], r["mechanism"])] = r
for (gen, _), r in latest.items():
    print(f"opacus v{r['version']} ({gen}): {r['normalisation']} → {r['mechanism']}")
    for e in r["evidence"]:
        print(f"    {e['file']}:{e['line']:<5d} {e['code']}")
    print()

# %% [markdown]
# ## 5. Confirmation by a real step
#
# Reading code can be wrong, so each finding is also checked by running the release.
# The check builds a dataset of $N$ = {glue:text}`nb08_sc_N` examples and samples with
# $q$ = {glue:text}`nb08_sc_q`, so that the three candidate divisors differ: $\lvert B\rvert$
# is random, $Nq$ = {glue:text}`nb08_sc_Nq` and $\lfloor Nq \rfloor$ = {glue:text}`nb08_sc_floor`.
# (Opacus v1.x derives $q$ from a data loader as one over the number of batches; a batch
# size of {glue:text}`nb08_sc_batch` gives {glue:text}`nb08_sc_nbatches` batches and
# $q$ = {glue:text}`nb08_sc_q`.) Two runs of
# one step per Poisson batch on a linear model started at zero:
#
# * with zero noise and every per-example gradient equal to $(1, 0)$, the update of
#   the first weight is exactly $-|B|/\text{divisor}$;
# * with zero gradients and unit noise over {glue:text}`nb08_sc_dnoise` weights, the standard deviation of
#   the update is $1/\text{divisor}$ (to about 1%).
#
# A divisor is read off every non-empty batch and matched to the candidates. The
# stored table records this check for every release, each installed on its own with
# `pip install --no-deps --target` and run in a separate process. Releases v0.9–v0.11
# need two import shims on current PyTorch (a stub for the optional `torchcsprng`
# package, and an alias for an exception class PyTorch has since removed); neither
# touches the code path being measured. For the releases of those three minor versions (five
# releases, v0.9.0 to v0.11.0) the check also feeds
# one batch larger than the configured batch size and records that the engine rejects
# it, which is what makes them "Not supported".

# %%
conf_rows = []
by_version = {r["version"]: r for r in releases}
for c in sorted(doc["confirmations"], key=lambda c: Version(c["opacus"])):
    r = by_version.get(c["opacus"])
    agree = r is not None and c["verdict"] == r["normalisation"] and c["mechanism"] == r["mechanism"]
    note = []
    if c.get("shims"):
        note.append(f"{len(c['shims'])} import shim{'' if len(c['shims']) == 1 else 's'}")
    rej = [run.get("rejects_larger_batch") for run in c.get("runs", []) if "rejects_larger_batch" in run]
    if rej:
        note.append("rejects a batch above batch_size" if all(rej) else "accepts a batch above batch_size")
    if c.get("error"):
        note.append("error: " + c["error"])
    conf_rows.append([f"v{c['opacus']}", c.get("api", "–"), c["verdict"], c["mechanism"],
                      "yes" if agree else "**no**", "; ".join(note)])
show_table(conf_rows, ["Release", "API", "Divisor found", "Mechanism", "Agrees with the code audit", "Note"],
           name="08_confirmations", markup=True,
           caption="Each release confirmed by a real DP-SGD step: the divisor observed and the mechanism it implies.")
print(f"releases confirmed by a real step: {sum(c['verdict'] != 'error' for c in doc['confirmations'])} "
      f"of {len(releases)}")

# %% [markdown]
# The same check, run now on the Opacus installed in this environment:

# %%

live = oc.step_check(seed=SEED)
print(f"installed opacus {live['opacus']} (torch {live['torch']}), API {live['api']}")
print(f"N = {live['N']}, q = {live['q']}, N q = {live['Nq']}, floor(N q) = {live['floor_Nq']}")
for run in live["runs"]:
    print(f"{run['kind']:>6s} run (noise multiplier {run['noise_multiplier']}, {run['dim']} weights):")
    for b in run["batches"]:
        print(f"    |B| = {b['batch_size']}: divisor {b['divisor']:.4f}  matches {', '.join(b['matches']) or 'none'}")
print(f"verdict: divides by {oc.DIVISOR.get(live['verdict'], live['verdict'])} → {live['mechanism']}")
expected = by_version.get(live["opacus"])
if expected is not None:
    assert live["verdict"] == expected["normalisation"], (live["verdict"], expected["normalisation"])

# %% [markdown]
# ## 6. What the floor does to neighbouring datasets
#
# Under FEASGM the divisor depends on the dataset size, and it can differ between two
# neighbouring datasets, $D$ with $N$ examples and $D'$ with $N + 1$. In the paper's
# multi-round example (Appendix A.4: $|D| = 140{,}199$, $q = 0.005$) the two floors are
# 700 and 701, so the update on $D$ is the noisy sum divided by 700 and on $D'$ by 701.
# When $Nq$ and $(N+1)q$ have the same floor, FEASGM behaves like SGM up to a known
# constant; when they straddle an integer, it does not, which is the case
# Appendix A analyses.

# %%
for N, q in [(140_199, 0.005), (59_999, 0.005), (10, 0.25), (3, 0.5)]:
    k0, k1 = math.floor(N * q), math.floor((N + 1) * q)
    kind = "different divisors" if k0 != k1 else "same divisor"
    print(f"N = {N:>7,d}, q = {q}:  floor(N q) = {k0:>4d}, floor((N+1) q) = {k1:>4d}  ({kind})")

# %% [markdown]
# ## 7. Remarks
#
# * The audit agrees with every release the paper's Table 2 lists: ASGM-style
#   averaging by $|B|$ up to v0.13, unusable with Poisson batches before v0.12 because
#   of the batch-size check, averaging by $Nq$ in v0.14–v0.15, and by $\lfloor Nq
#   \rfloor$ in every v1.x release. The releases after v1.5.4 (at the time of writing,
#   v1.6.0) keep the v1.x code and are FEASGM too.
# * The paper's prose summarises the same audit differently in two places: its
#   introduction places EASGM in v0.14–v1.4 and FEASGM from v1.5, and Section 5.5 dates
#   Poisson support from v0.13 and its explicit handling from v0.15. The released code
#   sides with Table 2: `int(len(data_loader.dataset) * sample_rate)` is already in
#   v1.0.0, the `poisson` switch already in v0.14.0, and v0.12.0 already accepts
#   variable-size batches and ships a Poisson sampler.
# * The paper also lists a commit per row; a wheel carries no commit, so this audit
#   records each wheel's SHA-256 instead.
# * With `loss_reduction="sum"` none of these code paths divides at all (read from the same
#   files, not checked by a rule): that path is the SGM the usual privacy analysis assumes.

# %%
# The paper's claim C8, graded from this notebook's results by the same check (and
# tolerance) as the grade page; the verdict, including "not reproduced", is shown here and on the grade page.
from paperlib.artifact.claims import require as grade_claim  # noqa: E402
from paperlib.artifact.claims import chapter_grade  # noqa: E402
from IPython.display import Markdown, display  # noqa: E402

GRADE = grade_claim("C8")
display(Markdown(chapter_grade(GRADE)))  # the grade page's sentence and list of substitutions, in the chapter
