"""Distinguishers for the one-round game (THEORY.md section 9).

Each distinguisher maps a chunk of outputs to a real *score*, larger meaning "more
like ``D'``"; the game turns scores into guesses with a threshold chosen on
separate calibration trials (:mod:`paperlib.audit.game`).

:class:`OptimalDistinguisher` (this project, beyond the paper)
    The exact log-likelihood ratio ``log dQ/dP (x)`` of the two output mixtures
    (``2^N`` components under D, ``2^(N+1)`` under D', merged when equal), by
    log-sum-exp over components in the projected coordinates of
    :class:`~paperlib.audit.components.WhiteBoxModel`: ``O((N+1) n)`` per trial. By the
    Neyman-Pearson lemma no distinguisher of the output does better.

:class:`NormalityDistinguisher` (the paper's Section 4 procedure, rebuilt)
    For every component pair ``(P_B^i, Q_B^i)``: standardise the output under
    each, ``z = (x - mean) / std`` (i.i.d. N(0,1) under the right hypothesis), apply a
    test of "i.i.d. N(0,1)" to both, and vote: for ``D`` when only the
    ``P``-standardised vector passes, for ``D'`` when only the ``Q`` one passes, a fair
    coin otherwise (the paper's "1 if only Proc_P passes" is our vote for ``D``). The
    score is the share of votes for ``D'``, plain (``aggregation="majority"``) or
    weighted by the pairs' probabilities (``"weighted"``). The copy of the paper does
    not say which test or aggregation it used; both are parameters here:

    ``test="chi2"`` (default)
        two-sided chi-square test of ``||z||^2`` against ``chi^2_n``. It reacts to a
        wrong scale and to a wrong mean, the two things that differ between ``P`` and
        ``Q``, and needs only the projection (cheap at any ``n``).
    ``test="ks"``
        Kolmogorov-Smirnov test of the ``n`` entries of ``z`` against N(0,1).
    ``test="normaltest"``
        D'Agostino-Pearson ``K^2`` (``scipy.stats.normaltest``). It tests the *shape*
        only (it is invariant to location and scale), so it cannot see the scale
        difference that drives EASGM's leakage: kept to show how much the choice of
        test matters. Needs ``n >= 8``.

    Pairs with ``P = Q`` always give a coin; with ``drop_identical=True`` (default)
    the adversary, who knows they carry no information, leaves them out.

    ``ties="coin"`` (default, the paper's rule) flips a fair coin for every pair where
    both or neither standardised vector passes; ``ties="half"`` counts such a pair as
    half a vote each way (the coin's expectation). The coins add noise to the score that
    hides which pairs voted; on ASGM, whose evidence lies in *which* pairs vote, the
    derandomised variant certifies far more (shown in the book's audit chapters).

:func:`brute_force_llr` evaluates the same likelihood ratio in the full ``n``
dimensions, subset by subset, for tests.
"""

from __future__ import annotations

from paperlib.fdp.validation import ParameterError


import itertools
import math

import numpy as np
import torch
from scipy import special, stats

from paperlib.mechanisms import sampler as mech_mod
from paperlib.mechanisms.core import ANY, Mechanism
from paperlib.audit.components import Projection, WhiteBoxModel

__all__ = [
    "NORMALITY_TESTS",
    "AGGREGATIONS",
    "TIES",
    "Distinguisher",
    "OptimalDistinguisher",
    "NormalityDistinguisher",
    "make_distinguisher",
    "normality_test_specs",
    "brute_force_llr",
]

NORMALITY_TESTS = ("chi2", "ks", "normaltest")
AGGREGATIONS = ("weighted", "majority")
TIES = ("coin", "half")
#: elements (trials x components) per block when scoring
_BLOCK = 1 << 22


class Distinguisher:
    """Interface: ``bind(model)`` once, then ``score(x, proj, rng)`` per chunk of outputs.

    ``x`` is the chunk of full ``n``-dimensional outputs, or ``None`` on the audit's
    projected path; ``proj`` is always given. A distinguisher whose score depends on
    the output only through ``proj`` (the basis coordinates and the squared residual)
    sets ``needs_full_output = False``, and the audit then samples only those
    statistics (:func:`paperlib.mechanisms.sampler.iter_projected`).
    """

    name = "distinguisher"
    #: True when :meth:`score` needs the full outputs ``x`` (not only the projection)
    needs_full_output = True

    def bind(self, model: WhiteBoxModel) -> None:
        self.model = model

    def score(self, x: torch.Tensor, proj: Projection, rng: np.random.Generator) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def describe(self) -> dict:
        return {"name": self.name}


class OptimalDistinguisher(Distinguisher):
    """Exact ``log dQ/dP`` of the two output mixtures (the Neyman-Pearson test)."""

    name = "optimal"
    needs_full_output = False  # the likelihood ratio depends on x only through (U^T x, ||residual||^2)

    def _log_mix(self, proj: Projection, mix: dict) -> torch.Tensor:
        n = self.model.n
        m = proj.y.shape[0]
        K = mix["logw"].numel()
        step = max(1, _BLOCK // max(1, K))
        out = torch.empty(m, dtype=proj.y.dtype, device=proj.y.device)
        base = mix["logw"] - n * torch.log(mix["scale"])
        inv2s2 = 0.5 / mix["scale"] ** 2
        for s in range(0, m, step):
            p = Projection(proj.y[s:s + step], proj.sq_norm_y[s:s + step], proj.residual[s:s + step])
            d2 = self.model.sq_dist(p, mix["coords"], mix["sq"])
            out[s:s + step] = torch.logsumexp(base[None, :] - d2 * inv2s2[None, :], dim=1)
        return out

    def log_densities(self, x: torch.Tensor, proj: Projection | None = None):
        """``(log p_D(x), log p_D'(x))`` up to the common constant ``-(n/2) log(2 pi)``."""
        if proj is None:
            proj = self.model.project(x)
        d = self.model.on(proj.y.device, proj.y.dtype)
        return self._log_mix(proj, d["P"]), self._log_mix(proj, d["Q"])

    def score(self, x, proj, rng=None) -> np.ndarray:
        lp, lq = self.log_densities(x, proj)
        out = (lq - lp).cpu().numpy().astype(np.float64)
        if self.model.mechanism.skips_empty_batch:
            # an exact-zero release (no step) has no density: its ratio is that of the atoms' probabilities
            # (dominating measure Lebesgue + the point mass at 0, so Neyman-Pearson still holds)
            atom = self.model.is_atom(proj).cpu().numpy()
            out[atom] = self.model.atom_logw["D'"] - self.model.atom_logw["D"]
        return out


class NormalityDistinguisher(Distinguisher):
    """The paper's per-pair normality-test votes (see the module docstring)."""

    def __init__(self, test: str = "chi2", aggregation: str = "weighted", level: float = 0.05,
                 drop_identical: bool = True, ties: str = "coin"):
        if test not in NORMALITY_TESTS:
            raise ValueError(f"test must be one of {NORMALITY_TESTS}, got {test!r}")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
        if not (isinstance(level, (int, float)) and 0.0 < float(level) < 1.0):
            raise ValueError(f"level (the normality test's significance level) must be in (0, 1), got {level!r}")
        self.test = test
        self.aggregation = aggregation
        self.level = float(level)
        self.drop_identical = bool(drop_identical)
        if ties not in TIES:
            raise ValueError(f"ties must be one of {TIES}, got {ties!r}")
        self.ties = ties
        self.name = f"normality[{test},{aggregation}]" + ("" if ties == "coin" else f"[ties={ties}]")

    @property
    def needs_full_output(self) -> bool:
        """Only ``test="chi2"`` (a function of ``||z||^2``) works on the projection alone."""
        return self.test != "chi2"

    def bind(self, model: WhiteBoxModel) -> None:
        if self.test == "normaltest" and model.n < 8:
            raise ParameterError("n", f"n must be >= 8 for test='normaltest' (D'Agostino-Pearson), got n = {model.n}")
        super().bind(model)
        ps = model.pairs
        keep = ~ps.identical if self.drop_identical else np.ones(ps.size, dtype=bool)
        self.n_pairs_used = int(keep.sum())
        self.pairs = {k: getattr(ps, k)[keep] for k in
                      ("weight", "count", "coords_p", "scale_p", "coords_q", "scale_q")}

    def describe(self) -> dict:
        return {"name": "normality", "test": self.test, "aggregation": self.aggregation, "level": self.level,
                "drop_identical": self.drop_identical, "ties": self.ties}

    # ---------------------------------------------------------------- pass/fail per (trial, pair)
    # Each test passes when its p-value is >= level, i.e. when its statistic lies inside
    # the acceptance region; the critical values are computed once per (test, n, level).
    def _critical(self):
        n, a = self.model.n, self.level
        if self.test == "chi2":  # two-sided: p = 2 min(F, 1 - F) >= a
            return stats.chi2.ppf(a / 2, n), stats.chi2.isf(a / 2, n)
        if self.test == "ks":  # exact law of the two-sided KS statistic D_n
            return stats.kstwo.isf(a, n)
        return stats.chi2.isf(a, 2)  # D'Agostino-Pearson K^2 ~ chi^2_2

    def _passes_chi2(self, proj, coords, scale, crit):
        dev, dt = proj.y.device, proj.y.dtype
        c = torch.as_tensor(coords, device=dev, dtype=dt)
        sq = (c * c).sum(dim=1)
        stat = self.model.sq_dist(proj, c, sq) / torch.as_tensor(scale, device=dev, dtype=dt)[None, :] ** 2
        lo, hi = crit
        return _atoms_pass(self.model, proj, scale, ((stat >= lo) & (stat <= hi)).cpu().numpy())

    def _passes_full(self, x, coords, scale, crit):
        """KS / D'Agostino-Pearson on the full standardised vectors, in blocks."""
        n = self.model.n
        m = x.shape[0]
        K = coords.shape[0]
        means = torch.as_tensor(self.model.full_means(coords), device=x.device, dtype=x.dtype)  # (K, n)
        sc = torch.as_tensor(scale, device=x.device, dtype=x.dtype)
        out = np.empty((m, K), dtype=bool)
        sc = torch.where(sc > 0, sc, torch.ones_like(sc))  # atoms (scale 0) are decided by _atoms_pass
        kb = max(1, min(K, _BLOCK // max(1, n)))
        mb = max(1, _BLOCK // max(1, kb * n))
        i = torch.arange(1, n + 1, device=x.device, dtype=x.dtype)
        for k0 in range(0, K, kb):
            for s in range(0, m, mb):
                z = (x[s:s + mb, None, :] - means[None, k0:k0 + kb, :]) / sc[None, k0:k0 + kb, None]
                if self.test == "ks":
                    zs, _ = torch.sort(z, dim=-1)
                    cdf = torch.special.ndtr(zs)
                    D = torch.maximum((i / n - cdf).amax(dim=-1), (cdf - (i - 1) / n).amax(dim=-1))
                    out[s:s + mb, k0:k0 + kb] = (D <= crit).cpu().numpy()
                else:
                    k2 = stats.normaltest(z.cpu().numpy(), axis=-1).statistic
                    out[s:s + mb, k0:k0 + kb] = k2 <= crit
        return _atoms_pass(self.model, self.model.project(x), scale, out)

    def passes(self, x, proj, coords, scale) -> np.ndarray:
        """Boolean (trials, pairs): does the output standardised by (coords, scale) pass the test?"""
        crit = self._critical()
        if self.test == "chi2":
            return self._passes_chi2(proj, coords, scale, crit)
        if x is None:
            raise ValueError(f"test={self.test!r} needs the full outputs, not only their projection")
        return self._passes_full(x, coords, scale, crit)

    # ---------------------------------------------------------------- votes
    def votes(self, x, proj, rng: np.random.Generator):
        """Votes for D' per (trial, pair): counts in [0, count] (coins drawn for ties)."""
        p = self.pairs
        if p["weight"].size == 0:
            return np.zeros((proj.y.shape[0], 0)), p
        pass_p = self.passes(x, proj, p["coords_p"], p["scale_p"])
        pass_q = self.passes(x, proj, p["coords_q"], p["scale_q"])
        for_q = pass_q & ~pass_p
        for_p = pass_p & ~pass_q
        tie = ~(for_q | for_p)
        cnt = p["count"][None, :]
        if self.ties == "coin":
            tied = rng.binomial(np.broadcast_to(cnt, tie.shape), 0.5)
        else:  # "half": the coin's expectation, no randomness
            tied = 0.5 * np.broadcast_to(cnt, tie.shape)
        v = np.where(for_q, cnt, 0) + np.where(tie, tied, 0)
        return v.astype(float), p

    def score(self, x, proj, rng) -> np.ndarray:
        v, p = self.votes(x, proj, rng)
        if v.shape[1] == 0:  # no informative pair: every guess is a coin
            return rng.random(proj.y.shape[0])
        if self.aggregation == "majority":
            return v.sum(axis=1) / p["count"].sum()
        w = p["weight"] / p["count"]
        return (v @ w) / p["weight"].sum()


def _atoms_pass(model: WhiteBoxModel, proj: Projection, scale, passes: np.ndarray) -> np.ndarray:
    """Where a pair's side is DPSUR's atom at 0 (scale 0), an output passes exactly when it is 0."""
    atom_cols = np.asarray(scale) == 0
    if not atom_cols.any():
        return passes
    is0 = model.is_atom(proj).cpu().numpy()
    passes[:, atom_cols] = is0[:, None]
    return passes


def make_distinguisher(spec) -> Distinguisher:
    """``"optimal"``, ``"normality"``, a dict ``{"name": "normality", "test": ..., ...}``, or an instance."""
    if isinstance(spec, Distinguisher):
        return spec
    if isinstance(spec, str):
        if spec == "optimal":
            return OptimalDistinguisher()
        if spec == "normality":
            return NormalityDistinguisher()
    if isinstance(spec, dict):
        d = dict(spec)
        name = d.pop("name", None)
        if name == "optimal" and not d:
            return OptimalDistinguisher()
        if name == "normality":
            return NormalityDistinguisher(**d)
    raise ParameterError("distinguisher", f"distinguisher must be 'optimal' or 'normality' (or a dict/instance), got {spec!r}")


def normality_test_specs() -> dict:
    """The distinguishers of notebook 04's table of normality tests (section 5), ``{label: spec}``.

    In this order: the normality distinguisher with every test of :data:`NORMALITY_TESTS` and
    every aggregation of :data:`AGGREGATIONS` (label ``"test/aggregation"``, the fair coin for
    undecided pairs, as the paper), the chi-square one with ``ties="half"`` for each aggregation
    (``"chi2/aggregation/ties=½"``; not the paper's rule), and ``"optimal"``:
    ``len(NORMALITY_TESTS) * len(AGGREGATIONS) + len(AGGREGATIONS) + 1`` (= 9) entries, each a
    spec :func:`make_distinguisher` takes. A fresh dict on each call.
    """
    specs = {f"{t}/{ag}": {"name": "normality", "test": t, "aggregation": ag}
             for t in NORMALITY_TESTS for ag in AGGREGATIONS}
    specs.update({f"chi2/{ag}/ties=½": {"name": "normality", "test": "chi2", "aggregation": ag, "ties": "half"}
                  for ag in AGGREGATIONS})
    specs["optimal"] = "optimal"
    return specs


def brute_force_llr(mechanism: str, vectors, q: float, sigma: float, C: float, x) -> np.ndarray:
    """``log dQ/dP (x)`` by enumerating all subsets in the full ``n`` dimensions (for tests).

    ``x``: array (m, n). Uses ``scipy.stats.norm.logpdf`` coordinate by coordinate; no
    projection, no merging. Only for small ``N`` and ``n``.
    """
    v = np.asarray(vectors, dtype=float)
    g = mech_mod.clip(torch.as_tensor(v), C).numpy()
    N = g.shape[0] - 1
    x = np.atleast_2d(np.asarray(x, dtype=float))
    mech = Mechanism.parse(mechanism, ANY)
    if mech.draws_divisor:
        return _brute_force_llr_dpsur(g, N, q, sigma, C, x)
    lp_terms, lq_terms = [], []
    for mask in itertools.product((0, 1), repeat=N):
        m = np.array(mask, dtype=bool)
        k = int(m.sum())
        w = q**k * (1 - q) ** (N - k)
        sb = g[:N][m].sum(axis=0)
        nu = float(mech.normaliser(N, k, q))
        lp_terms.append(math.log(w) + stats.norm.logpdf(x, sb / nu, sigma * C / nu).sum(axis=1) if w > 0
                        else np.full(x.shape[0], -np.inf))
        for b in (0, 1):
            wb = w * (q if b else 1 - q)
            nu = float(mech.normaliser(N + 1, k + b, q))
            mean = (sb + b * g[N]) / nu
            lq_terms.append(math.log(wb) + stats.norm.logpdf(x, mean, sigma * C / nu).sum(axis=1) if wb > 0
                            else np.full(x.shape[0], -np.inf))
    return special.logsumexp(np.array(lq_terms), axis=0) - special.logsumexp(np.array(lp_terms), axis=0)


def _brute_force_llr_dpsur(g, N, q, sigma, C, x) -> np.ndarray:
    """DPSUR's rule by enumeration: each record of D' in or out of the batch and of the separate draw.

    Every joint draw ``(B, B')`` of the ``N + 1`` records (``4^(N+1)`` of them, the last record
    absent on D) is its own component: an exact-zero release when ``B`` is empty, else
    ``N(S_B / nu(|B'|), (sigma C / nu)^2 I_n)``. No use of the binomial law of ``|B'|``.
    """
    atom = np.all(x == 0, axis=1)

    def side(N_data):
        terms, atom_p = [], 0.0
        for bits in itertools.product((0, 1), repeat=2 * N_data):
            b = np.array(bits[:N_data], dtype=bool)
            d = np.array(bits[N_data:], dtype=bool)
            w = q ** (b.sum() + d.sum()) * (1 - q) ** (2 * N_data - b.sum() - d.sum())
            if w == 0:
                continue
            if not b.any():
                atom_p += w
                continue
            nu = float(Mechanism.DPSUR.normaliser(N_data, int(d.sum()), q))
            terms.append(math.log(w) + stats.norm.logpdf(x, g[:N_data][b].sum(axis=0) / nu,
                                                         sigma * C / nu).sum(axis=1))
        return special.logsumexp(np.array(terms), axis=0), math.log(atom_p) if atom_p > 0 else -math.inf

    lp, ap = side(N)
    lq, aq = side(N + 1)
    return np.where(atom, aq - ap, lq - lp)
