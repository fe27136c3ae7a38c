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
# # Trade-off functions, privacy profiles and the SGM claim
#
# This chapter sets up the language of the rest of the book. Privacy is measured the
# way {cite}`dong2022gaussian` do it, as a hypothesis test: an adversary sees one
# output of a mechanism and has to decide whether it was computed on the dataset $D$
# or on its neighbour $D'$. Its errors are the false positive rate (FPR, $\alpha$:
# it says $D'$ when the truth is $D$) and the false negative rate (FNR, $\beta$). The
# best achievable FNR at each FPR is the *trade-off function* of the pair of output
# distributions, and a mechanism is private to the degree that this curve stays close
# to the diagonal $\beta = 1 - \alpha$ (random guessing).
#
# We draw the three trade-off functions that appear everywhere in the paper
# {cite}`wang2026rethinking`: the Gaussian curve $G_\mu$, the identity $\mathrm{Id}$
# and the $(\varepsilon,\delta)$ curve $f_{\varepsilon,\delta}$. We convert curves into
# privacy profiles $\delta(\varepsilon)$ and back. We then look at the guarantee that
# every DP-SGD analysis quotes: the subsampled Gaussian mechanism (SGM) curve of
# {cite}`bu2020deep`. The next chapters compare the mechanisms that DP-SGD code
# actually runs against exactly this curve. The formulas are collected in the
# project's theory notes (`THEORY.md`, sections 1 and 3).

# %% tags=["parameters"]
MODE = "quick"
DEVICE = "cpu"
SEED = 0

# %% [markdown]
# ## Set-up
#
# `MODE` only changes grid sizes here. Every quantity in this chapter has a closed form
# or is computed to a stated tolerance, so the quick mode and the full mode print the
# same numbers. The quick mode uses coarser grids for the numerical checks, and the smoke
# mode coarser still. `DEVICE` is unused, since everything is a few milliseconds of NumPy.
# `SEED` is unused too, since nothing is random.

# %%
import math
import time

import matplotlib.pyplot as plt
import numpy as np
from myst_nb import glue
from scipy import optimize, stats

from paperlib.artifact import notebook as pf
from paperlib.mechanisms import guarantees
from paperlib.artifact import plotting
from paperlib.fdp import tradeoff
from paperlib.artifact.provenance import save_result

T_START = pf.start_notebook(MODE)

N_X = pf.pick(MODE, smoke=2_001, quick=40_001, full=400_001)  # grid for the numerical sup
N_EPS = pf.pick(MODE, smoke=25, quick=81, full=161)  # epsilon grid of the profile plots
N_ALPHA = pf.pick(MODE, smoke=101, quick=401, full=2001)  # alpha grid of the checks
print(f"MODE={MODE} SEED={SEED}: {N_X} thresholds for the numerical sup, {N_EPS} eps values, {N_ALPHA} alpha values")
glue("nb01_mode", MODE, display=False)
glue("nb01_seed", SEED, display=False)
glue("nb01_nx", N_X, display=False)
glue("nb01_nalpha", N_ALPHA, display=False)

# %% [markdown]
# ## 1. Three trade-off functions
#
# For two distributions $P$ (output on $D$) and $Q$ (output on $D'$) the trade-off
# function is $T(P,Q)(\alpha) = \inf\{\beta_\phi : \alpha_\phi \le \alpha\}$, the
# smallest FNR of any (possibly randomised) test $\phi$ whose FPR is at most $\alpha$.
# By the Neyman-Pearson lemma the infimum is attained by thresholding the likelihood
# ratio $dQ/dP$, and the resulting curve is convex, non-increasing and lies below
# $1-\alpha$. The three reference curves are
#
# - $G_\mu(\alpha) = \Phi(\Phi^{-1}(1-\alpha) - \mu)$, testing $N(0,1)$ against
#   $N(\mu,1)$: the Gaussian mechanism with sensitivity $\mu$ in noise units;
# - $\mathrm{Id}(\alpha) = 1-\alpha$: two identical distributions, nothing to learn;
# - $f_{\varepsilon,\delta}(\alpha) = \max\{0,\ 1-\delta-e^{\varepsilon}\alpha,\ e^{-\varepsilon}(1-\delta-\alpha)\}$:
#   the curve that is equivalent to $(\varepsilon,\delta)$-differential privacy
#   ({cite}`dong2022gaussian`, Section 2).
#
# A mechanism satisfies "$f$-DP" when its trade-off curve lies on or above $f$ for
# every pair of neighbours; a *lower* curve means an adversary errs less, i.e. more
# leakage.

# %%
alpha = np.linspace(0.0, 1.0, N_ALPHA)
mus = [0.5, 1.0, 2.0, 3.0]
fig, ax = plotting.new_axes("Reference trade-off functions")
for k, mu in enumerate(mus):  # one colour, marker and dash per μ (plotting.series_kw)
    ax.plot(alpha, tradeoff.gaussian_tradeoff(alpha, mu), label=rf"$G_{{{mu:g}}}$", **plotting.series_kw(k))
ax.plot(alpha, tradeoff.eps_delta_tradeoff(alpha, 1.0, 0.1), label=r"$f_{1,\,0.1}$", color="#000000",
        linewidth=1.2)
ax.legend(loc="upper right")
pf.show_figure(fig, "01_tradeoff_functions", {"mode": MODE, "seed": SEED, "mu": mus, "eps_delta": [1.0, 0.1]})

# the basic properties, checked on the grid
for mu in mus:
    g = tradeoff.gaussian_tradeoff(alpha, mu)
    assert np.all(np.diff(g) <= 1e-15) and np.all(g <= 1 - alpha + 1e-15), mu
    assert np.all(np.diff(g, 2) >= -1e-9), f"G_{mu} should be convex"
assert np.allclose(tradeoff.gaussian_tradeoff(alpha, 0.0), tradeoff.identity_tradeoff(alpha))

# %% [markdown]
# ```{glue:figure} 01_tradeoff_functions
# :name: fig-01-tradeoff-functions
#
# The Gaussian trade-off functions $G_\mu$ for
# $\mu \in \{0.5, 1, 2, 3\}$ (one colour, marker and dash per $\mu$; a larger $\mu$ lies lower,
# i.e. more leakage), the $(\varepsilon,\delta)$ curve $f_{1,0.1}$ (black, two straight pieces) and the
# diagonal $\mathrm{Id}$ (grey dashed). Closed forms evaluated at
# {glue:text}`nb01_nalpha` equally spaced values of $\alpha$ (nothing random).
# ```

# %% [markdown]
# ## 2. Privacy profiles and the Balle–Wang formula
#
# A trade-off function $f$ and the family of $(\varepsilon,\delta)$ statements it
# implies carry the same information. The smallest $\delta$ for which $f \ge f_{\varepsilon,\delta}$
# is the *privacy profile*
#
# $$
# \delta_f(\varepsilon) = \max\Big(\sup_\alpha\,[1 - f(\alpha) - e^{\varepsilon}\alpha],\ \sup_\alpha\,[1 - \alpha - e^{\varepsilon} f(\alpha)]\Big),
# $$
#
# the two terms being the two orders of the pair ($D$ vs $D'$ and $D'$ vs $D$).
# Geometrically, $f_{\varepsilon,\delta_f(\varepsilon)}$ is the piecewise-linear
# curve with slopes $-e^{\pm\varepsilon}$ that just touches $f$ from below; the
# collection of these supporting lines over all $\varepsilon$ rebuilds $f$ as their upper
# envelope. Inverting the profile gives $\varepsilon(\delta)$, the number that is usually
# reported (here always at $\delta = 10^{-5}$).
#
# For $G_\mu$ the profile has the closed form of {cite}`balle2018improving`,
# $\delta(\varepsilon) = \Phi(-\varepsilon/\mu + \mu/2) - e^{\varepsilon}\Phi(-\varepsilon/\mu - \mu/2)$,
# implemented as `paperlib.fdp.tradeoff.gaussian_delta`. Below we check it against a
# direct numerical evaluation of the supremum. With the threshold $x$ of the optimal
# test as parameter, $\alpha = 1-\Phi(x)$ and $1 - G_\mu(\alpha) = 1 - \Phi(x-\mu)$, so
# the supremum is a one-dimensional maximisation over $x$: a dense grid followed by a
# bounded Brent refinement around the best grid point. ($G_\mu$ is symmetric, so both
# orders give the same value.)

# %%
def delta_numeric(eps: float, mu: float) -> float:
    """sup_x [Phi(mu - x) - e^eps (1 - Phi(x))], computed without the closed form."""
    xs = np.linspace(-12.0, 12.0 + mu, N_X)

    def h(x):
        return stats.norm.sf(x - mu) - math.exp(eps) * stats.norm.sf(x)

    i = int(np.argmax(h(xs)))
    lo, hi = xs[max(i - 1, 0)], xs[min(i + 1, xs.size - 1)]
    res = optimize.minimize_scalar(lambda x: -h(x), bounds=(lo, hi), method="bounded",
                                   options={"xatol": 1e-12})
    return max(0.0, float(-res.fun), float(h(xs[i])))


def compute_profiles():
    eps_grid = np.linspace(0.0, 8.0, N_EPS)
    out = {"eps": eps_grid, "mu": mus, "closed_form": [], "numeric": [], "paperlib_mixture": []}
    for mu in mus:
        out["closed_form"].append(tradeoff.gaussian_delta(eps_grid, mu))
        out["numeric"].append([delta_numeric(e, mu) for e in eps_grid])
        # a third route: paperlib's exact profile of the G_mu family (likelihood-ratio tails)
        from paperlib.fdp.gaussian import GaussShiftFamily
        from paperlib.fdp.mixture import LRMixture
        out["paperlib_mixture"].append(LRMixture([GaussShiftFamily([mu], [1.0])]).delta(eps_grid))
    return out


prof, info = pf.cached("01_gaussian_profiles", {"mode": MODE, "n_x": N_X, "n_eps": N_EPS, "mu": mus},
                       compute_profiles, mode=MODE, seed=SEED)
eps_grid = np.asarray(prof["eps"])
cf, num, mix = (np.asarray(prof[k]) for k in ("closed_form", "numeric", "paperlib_mixture"))
abs_err = np.max(np.abs(cf - num))
big = cf > 1e-10
rel_err = np.max(np.abs(cf - num)[big] / cf[big])
print(f"Balle-Wang vs numerical sup: max |diff| = {abs_err:.2e}, max relative diff (delta > 1e-10) = {rel_err:.2e}")
print(f"Balle-Wang vs paperlib LR-mixture profile: max |diff| = {np.max(np.abs(cf - mix)):.2e}")
print("cached" if info["cached"] else f"computed in {info['wall_time_s']:.2f} s")
assert abs_err < 1e-9 and rel_err < 1e-6
assert np.max(np.abs(cf - mix)) < 1e-12

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(plotting.FIG_WIDTH, 3.9), constrained_layout=True)
pf.style_axes(ax1, r"$G_1$ and its supporting $f_{\varepsilon,\delta(\varepsilon)}$")
pf.plot_curve(ax1, alpha, tradeoff.gaussian_tradeoff(alpha, 1.0), "guarantee", r"$G_1$", linewidth=2.2)
eps_lines = [0.0, 0.5, 1.0, 2.0]
for k, e in enumerate(eps_lines):
    d = float(tradeoff.gaussian_delta(e, 1.0))
    line = tradeoff.eps_delta_tradeoff(alpha, e, d)
    assert np.all(line <= tradeoff.gaussian_tradeoff(alpha, 1.0) + 1e-12)  # below G_1 ...
    assert np.min(tradeoff.gaussian_tradeoff(alpha, 1.0) - line) < 2e-3  # ... and touching it
    ax1.plot(alpha, line, label=rf"$\varepsilon={e:g}$, $\delta={d:.3f}$", linewidth=1.0,
             **plotting.series_kw(k + 1, markevery=[0, alpha.size - 1]))
plotting.legend_below(ax1)

for k, mu in enumerate(mus):
    col, _ = plotting.series_style(k)
    ax2.semilogy(eps_grid, cf[k], color=col, linestyle=plotting.SERIES_LINESTYLES[k], label=rf"$\mu={mu:g}$ (closed form)")
    sup = np.asarray(num[k][::4], dtype=float)  # an underflowed 0 lies far below the axis (1e-12): not drawn
    ax2.semilogy(eps_grid[::4], np.where(sup > 0, sup, np.nan), "o", color=col, markersize=3.5, markerfacecolor="none")
ax2.plot([], [], "o", color="grey", markerfacecolor="none", markersize=3.5, label="numerical sup")
ax2.set_ylim(1e-12, 1)
ax2.set_xlim(0, eps_grid[-1])
ax2.set_xlabel(r"$\varepsilon$")
ax2.set_ylabel(r"$\delta(\varepsilon)$")
ax2.set_title(r"Privacy profiles of $G_\mu$")
ax2.grid(True, alpha=0.3, linewidth=0.5)
plotting.legend_below(ax2)
pf.show_figure(fig, "01_privacy_profiles", {"mode": MODE, "seed": SEED, "mu": mus, "n_x": N_X})

# %% [markdown]
# ```{glue:figure} 01_privacy_profiles
# :name: fig-01-privacy-profiles
#
# Left: $G_1$ (blue) with the $(\varepsilon,\delta(\varepsilon))$ curves
# that support it for $\varepsilon \in \{0, 0.5, 1, 2\}$ (one colour and marker per
# $\varepsilon$, legend below); each touches $G_1$ without crossing it. Right: the privacy profiles of
# $G_\mu$, $\mu \in \{0.5,1,2,3\}$: the Balle–Wang closed form (lines) and the direct
# numerical supremum (open circles, every fourth $\varepsilon$ shown); the two agree to
# the printed precision above. {glue:text}`nb01_nx` grid points per supremum.
# ```

# %% [markdown]
# ## 3. The SGM claim $f_q$, its inverse and the symmetrised $C_q$
#
# One DP-SGD step samples a Poisson batch (every example with probability $q$), adds
# the clipped gradients and adds Gaussian noise of standard deviation $\sigma C$. For the
# *ordered* pair ($D$, and $D'$ = $D$ plus one example), {cite}`bu2020deep` show that
# the tight trade-off function of this subsampled Gaussian mechanism is
#
# $$
# f_q = q\,G_{1/\sigma} + (1-q)\,\mathrm{Id},
# $$
#
# attained when every gradient of $D$ is zero: with probability $1-q$ the added
# example is not sampled and the outputs coincide; otherwise the adversary faces
# $G_{1/\sigma}$. (The mixture is taken at the *same* $\alpha$ because the adversary
# does not see whether the example was sampled; the optimal test thresholds the
# output itself.) `paperlib.mechanisms.guarantees.sgm_claim` evaluates it as the exact trade-off
# of $N(0,1)$ against $(1-q)N(0,1)+qN(1/\sigma,1)$.
#
# $f_q$ is not symmetric. Swapping the roles of $D$ and $D'$ gives the inverse
# $f_q^{-1}$, the mirror image of $f_q$ in the line $\beta=\alpha$. A guarantee for the
# unordered pair must hold in both orders; the tightest convex function below both is
# $C_q(G_{1/\sigma}) = \min\{f_q, f_q^{-1}\}^{**}$ (lower convex envelope), which is the
# form in which the claim is usually stated ({cite}`dong2022gaussian`, Section 4;
# `THEORY.md` §3). The later chapters work with the ordered pair $(D, D')$, so the
# claim they compare against is $f_q$ itself; its privacy profile already takes both
# orders into account (section 4 below).

# %%
q_demo, sigma_demo = 0.3, 0.5  # mu = 1/sigma = 2, large enough to see the asymmetry
claim = guarantees.sgm_claim(q_demo, sigma_demo)
a_f, b_f = pf.curve_points(claim)
sym_tol = 1e-7  # chord error of the sampled curves
inv = claim.curve(sym_tol).inverse()
sym = guarantees.sgm_claim_symmetric(q_demo, sigma_demo, tol=sym_tol)

# checks: closed form of f_q, C_q below both directions, C_q symmetric
fq_formula = q_demo * tradeoff.gaussian_tradeoff(alpha, 1 / sigma_demo) + (1 - q_demo) * (1 - alpha)
err_formula = np.max(np.abs(claim(alpha, tol=1e-8) - fq_formula))
c_sym = sym(alpha)
gap_min = np.min(np.minimum(claim(alpha, tol=1e-8), inv(alpha)) - c_sym)
asym = np.max(np.abs(sym.inverse()(alpha) - c_sym))
# the checks as one sentence of the page (rounded; a tiny negative gap is the chord error of the curves)
glue("nb01_q_demo", f"{q_demo:g}", display=False)
glue("nb01_sigma_demo", f"{sigma_demo:g}", display=False)
glue("nb01_mu_demo", f"{1 / sigma_demo:g}", display=False)
glue("nb01_demo_tol", f"{sym_tol:.0e}", display=False)
glue("nb01_demo_checks",
     f"On the {alpha.size} grid values of α, paperlib's f_q differs from q·G + (1−q)·Id by at most "
     f"{err_formula:.1e}. C_q lies below both f_q and its inverse: the smallest gap, {gap_min:.0e}, is "
     f"zero within the chord error {sym_tol:.0e} of the curves. C_q equals its own inverse to "
     f"{asym:.0e}, and f_q and its inverse differ by up to {np.max(np.abs(claim(alpha) - inv(alpha))):.3f}.",
     display=False)
assert err_formula < 1e-6 and gap_min > -1e-7 and asym < 1e-5

fig, ax = plotting.new_axes(rf"SGM claim, $q={q_demo}$, $\sigma={sigma_demo}$")
pf.plot_curve(ax, alpha, tradeoff.gaussian_tradeoff(alpha, 1 / sigma_demo), "guarantee",
              rf"$G_{{1/\sigma}} = G_{{{1 / sigma_demo:g}}}$ (no subsampling)", linewidth=1.0)
pf.plot_curve(ax, sym.alpha, sym.beta, "sgm_claim", r"$C_q = \min\{f_q, f_q^{-1}\}^{**}$", linewidth=7,
              alpha=0.22, solid_capstyle="butt")
pf.plot_curve(ax, a_f, b_f, "sgm_claim", r"$f_q$ (order $D$, $D'$)", linewidth=1.8)
pf.plot_curve(ax, inv.alpha, inv.beta, "sgm_claim", r"$f_q^{-1}$ (order $D'$, $D$)", linestyle=":", linewidth=1.6)
ax.legend(loc="upper right")
pf.show_figure(fig, "01_sgm_claim", {"mode": MODE, "seed": SEED, "q": q_demo, "sigma": sigma_demo})

# %% [markdown]
# ```{glue:figure} 01_sgm_claim
# :name: fig-01-sgm-claim
#
# The SGM claim for $q$ = {glue:text}`nb01_q_demo`, $\sigma$ = {glue:text}`nb01_sigma_demo`: $f_q$ (black solid), its
# inverse $f_q^{-1}$ (black dotted) and their symmetrised lower envelope $C_q$ (wide grey
# band). For reference, the thin blue line is the unsubsampled $G_{1/\sigma}$, here $G_\mu$
# with $\mu$ = {glue:text}`nb01_mu_demo`. The envelope $C_q$ follows $f_q$ for small $\alpha$ and
# $f_q^{-1}$ for large $\alpha$, and bridges the two with a straight piece across the diagonal.
# The curve $f_q$ starts at $(0,1)$ with the steep slope of $G_{1/\sigma}$ and ends along the
# line of slope $-(1-q)$; its inverse does the opposite. Exact curves (chord error below {glue:text}`nb01_demo_tol`).
# ```
#
# {glue:text}`nb01_demo_checks`

# %% [markdown]
# ## 4. Privacy profiles of the claim
#
# Plugging $f_q$ into the definition of the profile gives, for the first order of the
# pair, a subsampling formula: the supremum of $1 - f_q(\alpha) - e^{\varepsilon}\alpha$
# equals $q\,\delta_{G_{1/\sigma}}(\varepsilon')$ with
# $e^{\varepsilon'} = 1 + (e^{\varepsilon}-1)/q$ — the familiar "amplification by
# subsampling" (`THEORY.md` §3). The second order contributes
# $\sup_\alpha[1-\alpha-e^{\varepsilon}f_q(\alpha)]$, which vanishes as soon as
# $e^{\varepsilon}(1-q) \ge 1$ because $f_q \ge (1-q)(1-\alpha)$; for smaller
# $\varepsilon$ it can be the larger of the two. `paperlib` computes the profile
# exactly from the likelihood-ratio tails of the mixture (`LRMixture.delta`). We check
# it against the subsampling formula where that formula is the whole answer, and
# against the profile of the sampled, symmetrised curve $C_q$, which must be the same
# function (a lower estimate of it, within the sampling tolerance).

# %%
sigma_prof = 1.0
qs = [0.005, 0.05, 0.3, 1.0]
glue("nb01_prof_qs", "{" + ", ".join(f"{q:g}" for q in qs) + "}", display=False)
glue("nb01_prof_sigma", f"{sigma_prof:g}", display=False)


def compute_claim_profiles():
    eps_p = np.linspace(0.0, 6.0, N_EPS)
    out = {"eps": eps_p, "q": qs, "sigma": sigma_prof, "delta": [], "formula": [], "sym_curve": [],
           "eps_at_1e-5": {}}
    for q in qs:
        c = guarantees.sgm_claim(q, sigma_prof)
        out["delta"].append(c.delta(eps_p))
        ep = np.log1p(np.expm1(eps_p) / q)
        out["formula"].append(q * tradeoff.gaussian_delta(ep, 1 / sigma_prof))
        out["sym_curve"].append(guarantees.sgm_claim_symmetric(q, sigma_prof, tol=1e-8).delta(eps_p))
    # epsilon at delta = 1e-5 of the claim: these q, and the settings of the later chapters
    for q, s in [(q, sigma_prof) for q in qs] + LATER_SETTINGS:
        out["eps_at_1e-5"][f"q={q:g},sigma={s:g}"] = guarantees.sgm_claim(q, s).epsilon(1e-5)
    return out


# (q, sigma) of the later chapters: sigma = 10 at every q of the paper's Figures 2, 4, 5 and 6, and
# chapter 2's settings at sigma = 2 and (q = 0.1) sigma = 1
LATER_SETTINGS = ([(q, 10.0) for q in (0.005, 0.1, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)]
                  + [(0.5, 2.0), (0.7, 2.0), (1.0, 2.0), (0.1, 1.0)])
cp, info = pf.cached("01_sgm_claim_profiles", {"mode": MODE, "n_eps": N_EPS, "q": qs, "sigma": sigma_prof,
                                               "later": LATER_SETTINGS},
                     compute_claim_profiles, mode=MODE, seed=SEED)
eps_p = np.asarray(cp["eps"])
dl, fm, sc = (np.asarray(cp[k]) for k in ("delta", "formula", "sym_curve"))
rows = []
for k, q in enumerate(qs):
    region = eps_p >= -math.log1p(-q) if q < 1 else np.ones_like(eps_p, dtype=bool)
    err_f = np.max(np.abs(dl[k] - fm[k])[region])
    err_s = np.max(np.abs(dl[k] - sc[k]))
    below_other = np.all(dl[k] >= fm[k] - 1e-15)  # the max over both orders is at least the first
    rows.append([q, err_f, err_s, cp["eps_at_1e-5"][f"q={q:g},sigma={sigma_prof:g}"]])
    assert err_f < 1e-12, (q, err_f)
    assert err_s < 1e-6, (q, err_s)
    assert below_other
pf.markdown_table(["q (σ = 1)", "max |exact − q·δ_G(ε')|, ε ≥ log 1/(1−q)", "max |exact − profile of sampled C_q|",
                   "ε at δ = 1e-5"], rows, floatfmt=".3g", name="01_subsampling_formula",
                  caption="The SGM claim's privacy profile, exact against the subsampling formula (for ε above "
                          "log 1/(1−q), where the formula holds) and against the profile of its symmetrisation C_q, "
                          "at σ = 1; the last column is the claim's ε at δ = 1e-5.")

# %%
fig, ax = plt.subplots(figsize=(plotting.FIG_WIDTH * 0.75, 4.2), constrained_layout=True)
for k, q in enumerate(qs):
    col, _ = plotting.series_style(k)
    ax.semilogy(eps_p, np.maximum(dl[k], 1e-300), color=col, linestyle=plotting.SERIES_LINESTYLES[k], linewidth=1.6,
                label=rf"$q={q:g}$")
    ax.semilogy(eps_p[::5], np.maximum(fm[k][::5], 1e-300), "s", color=col, markersize=3, markerfacecolor="none")
ax.plot([], [], "s", color="grey", markerfacecolor="none", markersize=3, label=r"$q\,\delta_{G}(\varepsilon')$")
ax.axhline(1e-5, color="#BBBBBB", linestyle="--", linewidth=1.0)
ax.text(0.1, 1.6e-5, r"$\delta = 10^{-5}$", fontsize=8, color="#777777")
ax.set_ylim(1e-12, 1)
ax.set_xlim(0, eps_p[-1])
ax.set_xlabel(r"$\varepsilon$")
ax.set_ylabel(r"$\delta(\varepsilon)$")
ax.set_title(rf"Privacy profile of the SGM claim $f_q$, $\sigma={sigma_prof:g}$")
ax.grid(True, alpha=0.3, linewidth=0.5)
ax.legend()
pf.show_figure(fig, "01_sgm_claim_profiles", {"mode": MODE, "seed": SEED, "q": qs, "sigma": sigma_prof})

# %% [markdown]
# ```{glue:figure} 01_sgm_claim_profiles
# :name: fig-01-sgm-claim-profiles
#
# Privacy profiles $\delta(\varepsilon)$ of the SGM claim $f_q$ with
# $\sigma$ = {glue:text}`nb01_prof_sigma` for $q \in$ {glue:text}`nb01_prof_qs` (one colour and dash per $q$): the
# exact profile (lines) and the subsampling formula $q\,\delta_{G_{1/\sigma}}(\varepsilon')$
# (open squares). Subsampling lowers the whole profile; the dashed line marks
# $\delta=10^{-5}$, where the table above reads off $\varepsilon$.
# ```
#
# The $\varepsilon$ values of the claim at $\delta = 10^{-5}$ for the settings used
# later in the book: $\sigma = 10$ at every sampling rate of the paper's Figures 2 and 4–6
# (chapters 3–7, 9 and 11), and chapter 2's settings:

# %%
pf.markdown_table(["q", "σ", "ε of the SGM claim at δ = 1e-5"],
                  [[q, s, cp["eps_at_1e-5"][f"q={q:g},sigma={s:g}"]]
                   for s, q in sorted({(s, q) for q, s in [(q, sigma_prof) for q in qs] + [tuple(x) for x in LATER_SETTINGS]})],
                  floatfmt=".4g", name="01_claim_eps",
                  caption="The ε of the SGM claim at δ = 1e-5 for every (q, σ) of this chapter and of the later ones.")

# %% [markdown]
# ## Summary
#
# - $G_\mu$, $\mathrm{Id}$ and $f_{\varepsilon,\delta}$ are computed in closed form; the
#   Balle–Wang profile of $G_\mu$ matches a direct numerical supremum (asserted above).
# - The SGM claim $f_q = qG_{1/\sigma} + (1-q)\mathrm{Id}$ is asymmetric; $C_q$ is its
#   symmetrisation, and its privacy profile equals the exact two-sided profile of $f_q$.
# - These are the baselines: in the following chapters the mechanisms that
#   implementations really run (EASGM, ASGM, FEASGM) are compared with $f_q$ at the same
#   $q$ and $\sigma$.

# %%
wall = time.perf_counter() - T_START
summary = {
    "balle_wang_max_abs_err": abs_err,
    "balle_wang_max_rel_err": rel_err,
    "claim_eps_at_1e-5": cp["eps_at_1e-5"],
    "sgm_demo": {"q": q_demo, "sigma": sigma_demo, "formula_err": err_formula, "symmetry_err": asym},
}
save_result("01_tradeoff_basics", {"mode": MODE, "n_x": N_X, "n_eps": N_EPS, "n_alpha": N_ALPHA}, summary,
            mode=MODE, seed=SEED, wall_time=wall)
print(f"notebook 01 finished in {wall:.1f} s (MODE={MODE})")
