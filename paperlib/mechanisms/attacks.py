"""Real attacks: explicit data sets, explicit clipped gradients, an explicit test (THEORY.md §11.5).

A *forced* epsilon is the epsilon of a named attack: a pair of data sets ``D`` (``N`` records) and
``D' = D + target``, the clipped gradients of every record (the same at every round), and a test
whose errors are computed exactly or with a stated numerical error, composed over ``T`` rounds.
The attack's true trade-off lies above the mechanism's, so its epsilon is a lower bound of the
run's true epsilon. Every number here is a *lower end*: binning a statistic is post-processing, the
binned cells' probabilities come from normal and chi-square distribution functions
(:mod:`paperlib.fdp.tails` for ``10^6`` degrees of freedom), and the composition rounds losses down
(:mod:`paperlib.fdp.pld`, optimistic end), so ``delta_low(eps) <= delta_true(eps)``.

Attacks (``u`` a unit vector, ``C`` the clipping norm, ``X`` the released update):

* :func:`scale_attack` — EASGM, FEASGM with differing floors: every clipped gradient 0. The release
  is pure noise divided by ``N q`` on ``D`` and ``(N + 1) q`` on ``D'`` (``floor`` for FEASGM): the
  chi-square scale test over all ``n T`` coordinates, both orders, exact (:class:`Chi2Pair`).
* :func:`scaled_target_attack` — EASGM, FEASGM with differing floors: the other records 0, the target
  ``C u``; the likelihood-ratio test of ``<X, u>`` (binned, the target's amplified shift) and of the
  scale of all other coordinates. Forces more than :func:`scale_attack` at practical settings.
* :func:`aligned_attack` — ASGM: the other records ``C u``, the target ``-C u``. Dividing by ``|B|``
  cancels the count in the mean: ``<X, u> - C = (-2 C 1[target] + sigma C Z)/m``, ``||X_perp|| =
  sigma C chi_{n-1}/m`` (independent given ``m = |B|``). The attacker estimates the count
  ``J = round(sigma C sqrt(n - 1)/||X_perp||)``, forms ``zeta = -(<X, u> - C) J/(sigma C)`` and applies
  the exact likelihood-ratio test of ``(J, zeta binned)``; ``P(J = j | m)`` is a chi-square
  probability, ``zeta | m, j ~ N(shift j/m, (j/m)^2)``.
* :func:`dpsur_attack` — DPSUR's own rule: the other records 0, the target ``C u``; the divisor ``m``
  is an independent Poisson draw's size (read off the norm the same way, so the count's two laws
  enter the test), an empty batch releases exactly 0 (an outcome of its own).

Hidden events left out (sizes ``m`` in the far binomial tails, ``J`` far from ``m``, DPSUR's empty
separate draw, whose divisor depends on the past) cost ``e^eps T eta`` on the lower end
(:class:`~paperlib.fdp.pld.RoundLaw` ``latent_defect``), computed from the binomial and chi-square tails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from paperlib.fdp.chisquare import Chi2Pair
from paperlib.fdp.pld import DEFAULT_REL_TOL, Chi2Law, DiscreteLaw, PLDComposition, RoundLaw
from paperlib.fdp.tails import chi2_logcdf, chi2_logsf
from paperlib.mechanisms.core import Mechanism
from paperlib.mechanisms.guarantees import binomial_pair
from paperlib.mechanisms.setting import Setting
from paperlib.fdp.validation import ParameterError, check_int, check_rate

__all__ = ["Attack", "BinnedCells", "scale_attack", "scale_attack_for", "scaled_target_attack", "aligned_attack", "aligned_attack_cells", "dpsur_attack",
           "dpsur_attack_cells", "attack_for", "count_estimate_logprobs", "hidden_tail", "ZETA_BIN", "LATENT_TAIL"]

#: Width of the bins of ``zeta`` (in units of the noise): binning loses about ``w^2/12`` of the
#: information of a Gaussian shift test (Sheppard), negligible at 0.02.
ZETA_BIN = 0.02
#: Default mass of the hidden events left out per round (binomial tails of the sizes ``m``, counts ``J`` far
#: from the divisor). Its cost on the lower end is ``e^eps T eta``, so it must stay far below
#: ``delta e^{-eps} / T`` (at eps = 73, T = 11,250 even 1e-40 costs more than delta = 1e-5);
#: :func:`hidden_tail` chooses it from an estimate of eps.
LATENT_TAIL = 1e-120


def hidden_tail(delta: float, rounds: int, eps_hint: float | None) -> float:
    """The hidden mass per round that costs at most ``1e-4 delta`` at ``eps <= eps_hint + 1`` (the attack's
    epsilon never exceeds the certificate's, a good hint): ``1e-4 delta e^{-(eps_hint + 1)} / T`` within
    ``[1e-300, 1e-30]``; :data:`LATENT_TAIL` without a hint."""
    if eps_hint is None or not math.isfinite(eps_hint):
        return LATENT_TAIL
    tail = 1e-4 * delta * math.exp(-min(eps_hint + 1.0, 680.0)) / rounds
    return min(max(tail, 1e-300), 1e-30)


@dataclass
class Attack:
    """A named attack and its composed errors: ``epsilon_bounds(delta)`` brackets the attack's own
    epsilon; its lower end is the forced epsilon (a lower bound of the mechanism's true epsilon)."""

    name: str
    datasets: str
    gradients: str
    test: str
    method: str
    curve: object  # a PLDComposition (bound side) or an exact Chi2Pair
    meta: dict = field(default_factory=dict)

    def epsilon_bounds(self, delta: float) -> tuple[float, float]:
        if isinstance(self.curve, PLDComposition):
            return self.curve.epsilon_bounds(delta)
        e = float(self.curve.epsilon(delta))
        return e, e

    def describe(self) -> dict:
        """JSON-ready description: name, data sets, gradients, test, how its errors are computed."""
        return {"name": self.name, "datasets": self.datasets, "gradients": self.gradients, "test": self.test,
                "method": self.method, **{k: v for k, v in self.meta.items() if isinstance(v, (int, float, str))}}


# =============================================================================== EASGM / FEASGM
def scale_attack(mechanism: Mechanism | str, N: int, q: float, n: int, *, rounds: int) -> Attack:
    """The all-zero-gradient attack on EASGM or FEASGM (differing floors): the chi-square scale test.

    Every clipped gradient is 0, so each round releases ``G / nu`` with ``nu = N q`` on ``D`` and
    ``(N + 1) q`` on ``D'`` (EASGM; FEASGM ``floor(N q)`` and ``floor((N + 1) q)``): over ``T`` rounds
    the pair ``T(N(0, I_{nT}), N(0, s^2 I_{nT}))``, ``s = x/(x+1)`` with ``x = N`` (EASGM) or ``K``
    (FEASGM), exactly (:class:`~paperlib.fdp.chisquare.Chi2Pair`, both orders). Raises ValueError
    when the floors agree (FEASGM is then SGM and releases the same law on both sides).
    """
    mech = Mechanism.parse(mechanism)
    N, q, n, T = check_int(N, "N", 1), check_rate(q), check_int(n, "n", 1), check_int(rounds, "rounds", 1)
    spec = mech.spec
    if spec.scale_ratio is None:
        raise ParameterError("mechanism", f"mechanism must be easgm or feasgm for the scale attack, got {mech.value!r}")
    spec.require_defined(N, q)
    if spec.equals_sgm(N, q):
        K = spec.floors(N, q)[0]
        raise ParameterError("mechanism", f"mechanism: {spec.title}'s floors agree ({K}) for N = {N}, q = {q:g}: no scale attack")
    x, nu = spec.scale_ratio(N, q)
    pair = Chi2Pair(T * n, x, label=f"{mech.title} scale attack, {T} rounds x {n} coordinates")
    return Attack(name="scale test, all gradients 0",
                  datasets=f"D: {N} records, D': the same {N} plus a target",
                  gradients="every clipped gradient 0 (the target's too)",
                  test=f"chi-square test of ||X||^2 over all {n} coordinates of all {T} rounds (the release is "
                       f"noise divided by {nu})",
                  method="exact chi-square (both orders)", curve=pair,
                  meta={"coordinates": T * n, "x": x})


# =============================================================================== norm-read count
def _log_interval(la_cdf, lb_cdf, la_sf, lb_sf) -> np.ndarray:
    """``log(F(b) - F(a))`` from the logs of ``F`` and ``1 - F`` at ``a <= b``, from the smaller tail."""
    with np.errstate(invalid="ignore", divide="ignore"):
        from_cdf = lb_cdf + np.log(-np.expm1(np.minimum(la_cdf - lb_cdf, 0.0)))
        from_sf = la_sf + np.log(-np.expm1(np.minimum(lb_sf - la_sf, 0.0)))
    return np.where(lb_cdf < -0.6931471805599453, from_cdf, from_sf)


def count_estimate_logprobs(d: float, j: np.ndarray, n: int) -> np.ndarray:
    """``log P(J = j)`` for ``J = round(d sqrt(n - 1)/chi_{n-1})`` (the count read off ``||X_perp||``).

    ``J = j >= 1`` exactly when ``chi^2_{n-1}`` lies in ``[(n-1) d^2/(j + 1/2)^2, (n-1) d^2/(j - 1/2)^2)``
    (``J = 0``, a norm above twice its mean, is never asked for: that outcome is dropped, which is valid on
    the lower end). ``n = 1`` (no orthogonal part): ``J = 1`` surely.
    """
    j = np.asarray(j, dtype=float)
    if n == 1:
        return np.where(j == 1, 0.0, -np.inf)
    m = n - 1
    a = m * d * d / (j + 0.5) ** 2
    with np.errstate(divide="ignore"):
        b = np.where(j > 0.5, m * d * d / np.maximum(j - 0.5, 1e-300) ** 2, np.inf)
    return _log_interval(chi2_logcdf(a, m), chi2_logcdf(b, m), chi2_logsf(a, m), chi2_logsf(b, m))


def _count_range(d: float, n: int, tail: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The counts ``j`` that carry all but about ``tail`` of ``J``'s law given divisor ``d``, their log
    probabilities, and the mass outside them, ``P(J < j_0) + P(J > j_1)``, from the chi-square tails
    themselves (never as ``1 - sum``)."""
    if n == 1:
        return np.array([1]), np.array([0.0]), 0.0
    m = n - 1
    sd = d / math.sqrt(2.0 * m)  # J ~ d (1 + O(1/sqrt(2m)))
    z = math.sqrt(2.0 * math.log(1.0 / tail))  # standard deviations holding all but about tail
    width = 3.0 + z * sd * (1.0 + 40.0 / math.sqrt(m))
    j0, j1 = max(1, int(math.floor(d - width))), int(math.ceil(d + width)) + 1
    j = np.arange(j0, j1 + 1)
    lp = count_estimate_logprobs(d, j, m + 1)
    # J < j0: chi^2 >= m d^2/(j0 - 1/2)^2; J > j1: chi^2 < m d^2/(j1 + 1/2)^2
    below = float(np.exp(chi2_logsf(np.array([m * d * d / (j0 - 0.5) ** 2]), m))[0]) if j0 > 1 else 0.0
    above = float(np.exp(chi2_logcdf(np.array([m * d * d / (j1 + 0.5) ** 2]), m))[0])
    if j0 == 1:  # J = 0 (a norm above twice its mean) is dropped as an outcome, not hidden
        below = 0.0
    return j, lp, below + above


def _normal_bins(edges: np.ndarray, mean, sd) -> np.ndarray:
    """Probabilities of ``(-inf, e_0], (e_0, e_1], ..., (e_K, inf)`` under ``N(mean, sd^2)``, each cell from
    its smaller tail (relative accuracy in both tails). ``mean``, ``sd``: scalars or arrays of shape (r,)
    (then one row of cells per pair)."""
    mean, sd = np.atleast_1d(mean).astype(float)[:, None], np.atleast_1d(sd).astype(float)[:, None]
    z = (edges[None, :] - mean) / sd
    r = z.shape[0]
    lo = special.ndtr(z)
    hi = special.ndtr(-z)
    lo_cells = np.diff(np.hstack([np.zeros((r, 1)), lo, np.ones((r, 1))]), axis=1)
    hi_cells = -np.diff(np.hstack([np.ones((r, 1)), hi, np.zeros((r, 1))]), axis=1)
    mid = np.hstack([z, np.full((r, 1), np.inf)]) <= 0  # cell's right edge in the lower half
    out = np.maximum(np.where(mid, lo_cells, hi_cells), 0.0)
    return out[0] if out.shape[0] == 1 and np.ndim(mean) == 2 and mean.size == 1 else out


@dataclass
class _Latent:
    """One hidden divisor value: ``d`` (what the release is divided by), the normal components of
    ``zeta`` given it, ``(shift, mass on D, mass on D')``."""

    d: float
    comps: list


@dataclass
class BinnedCells:
    """The cells of a binned attack statistic ``(J, zeta bin)``: for each count ``j`` the masses of its
    ``zeta`` bins under ``D'`` (``q``) and ``D`` (``p``); ``edges`` of the bins (cell ``i`` is
    ``(edges[i-1], edges[i]]``, the first and last open), extra outcome ``atoms`` ``(q, p)``, and the hidden
    defect ``(eta_Q, eta_P)`` (mass of the hidden events left out)."""

    edges: np.ndarray
    rows: dict
    atoms: list
    defect: tuple

    def cell(self, j: int, zeta: float) -> int:
        """Index of ``zeta``'s bin (``np.searchsorted(edges, zeta)``: the number of edges below it)."""
        return int(np.searchsorted(self.edges, zeta))

    def law(self) -> DiscreteLaw:
        qs = [r[0] for r in self.rows.values()] + [np.array([a[0] for a in self.atoms])]
        ps = [r[1] for r in self.rows.values()] + [np.array([a[1] for a in self.atoms])]
        return DiscreteLaw(np.concatenate(qs), np.concatenate(ps))


def _binned_cells(latents: list, n: int, edges: np.ndarray, defect: tuple, tail: float, atoms=()) -> BinnedCells:
    """The discrete pair of ``(J, zeta binned)`` (plus extra outcome atoms ``(q, p)``) over the hidden values.

    Cells ``(j, bin)``: ``P = sum_d P(J = j | d) sum_comps massD P(bin)``, ``Q`` likewise with the ``D'``
    masses. Counts outside :func:`_count_range` are left out; their mass (chi-square tails) is added to
    the hidden defect of both sides.
    """
    rows = {}
    eta_q, eta_p = defect
    for lat in latents:
        j, lp, left = _count_range(lat.d, n, tail)
        eta_p += left * sum(c[1] for c in lat.comps)
        eta_q += left * sum(c[2] for c in lat.comps)
        keep = np.isfinite(lp)
        j, pj = j[keep], np.exp(lp[keep])
        ratio = j / lat.d
        add_q, add_p = np.zeros((j.size, edges.size + 1)), np.zeros((j.size, edges.size + 1))
        for shift, m_p, m_q in lat.comps:  # one matrix of cells per component: rows j, columns bins
            cells = _normal_bins(edges, shift * ratio, ratio).reshape(j.size, -1)
            if m_p > 0:
                add_p += (m_p * pj)[:, None] * cells
            if m_q > 0:
                add_q += (m_q * pj)[:, None] * cells
        for i, jj in enumerate(j):
            row = rows.setdefault(int(jj), [np.zeros(edges.size + 1), np.zeros(edges.size + 1)])
            row[0] += add_q[i]
            row[1] += add_p[i]
    return BinnedCells(edges, rows, list(atoms), (eta_q, eta_p))


def _round_law(cells: BinnedCells) -> tuple[RoundLaw, dict]:
    info = {"count_values": len(cells.rows), "zeta_bins": int(cells.edges.size + 1),
            "hidden_defect": [float(cells.defect[0]), float(cells.defect[1])]}
    return RoundLaw([(1.0, (cells.law(),))], latent_defect=tuple(info["hidden_defect"])), info


def _edges(max_shift: float, width: float = ZETA_BIN, z: float = 12.0) -> np.ndarray:
    lo, hi = -z * 1.05, max_shift * 1.05 + z * 1.05
    k = int(math.ceil((hi - lo) / width))
    return lo + width * np.arange(k + 1)


def _sizes(N: int, q: float, tail: float):
    """Sizes ``m`` kept (the union of the binomial supports of ``D`` and ``D'`` at ``tail``) with
    ``Bin(m; N, q)``, ``Bin(m; N + 1, q)``, and the masses left out on each side."""
    return binomial_pair(N, q, tail)


# =============================================================================== ASGM
def aligned_attack_cells(N: int, q: float, sigma: float, n: int, tail: float = LATENT_TAIL) -> BinnedCells:
    """One round of the aligned attack on ASGM (module docstring): the cells of its statistic.

    Hidden value ``m = |B|``: ``Bin(N, q)`` on ``D``, ``Bin(N + 1, q)`` on ``D'``, the target in the batch
    with probability ``gamma_m = m/(N + 1)``. Given ``m >= 1`` (divisor ``m``): ``zeta ~ N(0, .)`` on ``D``
    and without the target, ``N(2/sigma ., .)`` with it. ``m = 0`` divides by 1 (``X = G``: ``zeta ~
    N(J/sigma, J^2)`` on both sides). ``m = N + 1`` (only on ``D'``, everyone sampled): shift ``2/sigma``.
    """
    k, p, pq, out_q, out_p = _sizes(N, q, tail)
    mu = 2.0 / sigma
    latents = []
    for m, pm, pqm in zip(k, p, pq):
        if m == 0:
            latents.append(_Latent(1.0, [(1.0 / sigma, float(pm), float(pqm))]))
            continue
        g = m / (N + 1.0)
        latents.append(_Latent(float(m), [(0.0, float(pm), float(pqm) * (1 - g)), (mu, 0.0, float(pqm) * g)]))
    return _binned_cells(latents, n, _edges(mu), (out_q, out_p), tail)


def aligned_attack_law(N: int, q: float, sigma: float, n: int, tail: float = LATENT_TAIL) -> tuple[RoundLaw, dict]:
    """:func:`aligned_attack_cells` as a :class:`~paperlib.fdp.pld.RoundLaw` (with its hidden defect)."""
    k = _sizes(N, q, tail)[0]
    law, info = _round_law(aligned_attack_cells(N, q, sigma, n, tail))
    info.update(sizes=[int(k[0]), int(k[-1])])
    return law, info


def aligned_attack(setting: Setting, *, rel_tol: float = DEFAULT_REL_TOL, tail: float = LATENT_TAIL,
                   **pld_options) -> Attack:
    """The aligned attack on ASGM (others ``C u``, target ``-C u``; module docstring), composed over the
    setting's rounds (a :class:`~paperlib.mechanisms.setting.Setting`).

    Returns an :class:`Attack` whose curve is a :class:`~paperlib.fdp.pld.PLDComposition` on its bound side
    (``epsilon`` = the lower end).
    """
    N, q, sigma, n, T = setting.N, setting.q, setting.sigma, setting.n, setting.rounds
    return _composed(aligned_attack_law(N, q, sigma, n, tail), N, T, rel_tol, pld_options,
                     label=f"ASGM aligned attack, {T} rounds", name="aligned gradients, count read off the norm",
                     gradients="every record of D: C u; the target: -C u (u a fixed unit vector)",
                     test=("likelihood-ratio test of (J, zeta) with J = round(sigma C sqrt(n-1)/||X_perp||) and "
                           f"zeta = -(<X,u> - C) J/(sigma C) in bins of width {ZETA_BIN:g}"))


def _composed(law_info, N, T, rel_tol, pld_options, *, label, name, gradients, test) -> Attack:
    """A binned attack's round law composed over ``T`` rounds (the bound side: ``epsilon`` is the lower end)."""
    law, info = law_info
    curve = PLDComposition(law, T, side="bound", rel_tol=rel_tol, label=label, meta=dict(info), **pld_options)
    return Attack(name=name, datasets=f"D: {N} records, D': the same plus a target", gradients=gradients, test=test,
                  method="exact cell probabilities (normal, chi-square), PLD lower end", curve=curve, meta=info)


# =============================================================================== DPSUR
def dpsur_attack_cells(N: int, q: float, sigma: float, n: int, tail: float = LATENT_TAIL) -> BinnedCells:
    """One round of the attack on DPSUR's own rule (others 0, target ``C u``): the cells of its statistic.

    Hidden value ``m = |B'|`` (the separate draw, independent of the batch ``B``): ``Bin(N, q)`` on ``D``,
    ``Bin(N + 1, q)`` on ``D'``. ``B`` empty (probability ``(1-q)^N`` on ``D``, ``(1-q)^{N+1}`` on ``D'``):
    no step, the release is 0 (an atom). Otherwise ``zeta = <X, u> J/(sigma C) ~ N(., (J/m)^2)``, shifted by
    ``1/sigma`` when the target was sampled (probability ``q``, whatever ``m``). ``m = 0`` keeps the
    previous divisor (it depends on the past): left out as a hidden event.
    """
    k, p, pq, out_q, out_p = _sizes(N, q, tail)
    empty_p = math.exp(N * math.log1p(-q)) if q < 1 else 0.0  # B empty on D
    empty_q = empty_p * (1 - q)
    latents = []
    kept_p = kept_q = 0.0
    for m, pm, pqm in zip(k, p, pq):
        if m == 0:
            out_p += float(pm)
            out_q += float(pqm)
            continue
        kept_p += float(pm)
        kept_q += float(pqm)
        latents.append(_Latent(float(m), [(0.0, float(pm) * (1 - empty_p), float(pqm) * (1 - q) * (1 - empty_p)),
                                          (1.0 / sigma, 0.0, float(pqm) * q)]))
    atoms = [(empty_q * kept_q, empty_p * kept_p)]  # "no step": release 0 (m irrelevant; within the kept m)
    return _binned_cells(latents, n, _edges(1.0 / sigma), (out_q, out_p), tail, atoms=atoms)


def dpsur_attack_law(N: int, q: float, sigma: float, n: int, tail: float = LATENT_TAIL) -> tuple[RoundLaw, dict]:
    """:func:`dpsur_attack_cells` as a :class:`~paperlib.fdp.pld.RoundLaw` (with its hidden defect)."""
    k = _sizes(N, q, tail)[0]
    law, info = _round_law(dpsur_attack_cells(N, q, sigma, n, tail))
    e = math.exp(N * math.log1p(-q)) if q < 1 else 0.0
    info.update(sizes=[int(k[0]), int(k[-1])], empty_batch=[e, e * (1 - q)])
    return law, info


def dpsur_attack(setting: Setting, *, rel_tol: float = DEFAULT_REL_TOL, tail: float = LATENT_TAIL,
                 **pld_options) -> Attack:
    """The attack on DPSUR's own rule (module docstring), composed over the setting's rounds."""
    N, q, sigma, n, T = setting.N, setting.q, setting.sigma, setting.n, setting.rounds
    return _composed(dpsur_attack_law(N, q, sigma, n, tail), N, T, rel_tol, pld_options,
                     label=f"DPSUR attack, {T} rounds", name="target alone, divisor read off the norm",
                     gradients="every record of D: 0; the target: C u",
                     test=("likelihood-ratio test of (no step | J, zeta) with J = round(sigma C sqrt(n-1)/||X_perp||) "
                           f"and zeta = <X,u> J/(sigma C) in bins of width {ZETA_BIN:g}"))


def attack_for(setting: Setting, *, tail: float = LATENT_TAIL, **pld_options) -> Attack | list[Attack] | None:
    """The attack (or the list of attacks, each a real one) the table of mechanisms names for the setting's
    mechanism on its pair ``(N, N + 1)`` (a :class:`~paperlib.mechanisms.setting.Setting`), or None (SGM and FEASGM with agreeing floors: their
    worst case is the SGM pair, forced by the SGM composition itself). ``tail``: the hidden mass left out per
    round (:func:`hidden_tail`)."""
    attack = setting.spec.computation("attack")
    return None if attack is None else attack(setting, tail=tail, **pld_options)


def scale_attack_for(setting: Setting, *, tail: float = LATENT_TAIL, **pld_options) -> list[Attack] | None:
    """The attacks on EASGM / FEASGM (differing floors) as the table of mechanisms calls them: :func:`scale_attack`
    (all gradients 0) and :func:`scaled_target_attack` (others 0, target ``C u``); the caller keeps the one that
    forces more at its delta. None where the divisor is the same on both datasets (FEASGM's floors agree: the pair
    is SGM's, forced by the SGM composition itself)."""
    if setting.equals_sgm():
        return None
    out = [scale_attack(setting.mechanism, setting.N, setting.q, setting.n, rounds=setting.rounds)]
    if setting.q < 1:
        out.append(scaled_target_attack(setting, **pld_options))
    return out


def scaled_target_attack(setting: Setting, *, rel_tol: float = DEFAULT_REL_TOL, **pld_options) -> Attack:
    """Others 0, target ``C u`` on EASGM / FEASGM (differing floors): the likelihood-ratio test of ``<X, u>`` in bins
    of width :data:`ZETA_BIN` and of ``||X_perp||^2`` over all the other coordinates (THEORY.md §11.5).

    In units of ``D``'s noise a round releases ``N(0, I_n)`` on ``D`` and ``(1 - q) N(0, s^2 I_n) + q N(s u/sigma,
    s^2 I_n)`` on ``D'``, ``s = x/(x + 1)`` (the scale ratio of the divisors). Along ``u`` the pair is a
    hidden mixture, binned (post-processing: the binned pair's errors are a real test's); across ``u`` a pure
    scale pair, exact (:class:`~paperlib.fdp.pld.Chi2Law` over ``T (n - 1)`` coordinates). Composed on the PLD's
    lower end, so ``epsilon_bounds(delta)[0]`` is a forced epsilon. Unlike :func:`scale_attack` it keeps the
    target's amplified mean shift, which at practical settings forces more."""
    N, q, sigma, n, T = setting.N, setting.q, setting.sigma, setting.n, setting.rounds
    x, nu = setting.spec.scale_ratio(N, q)
    s = x / (x + 1.0)
    z = 12.0
    edges = np.arange(-z, s / sigma + z, ZETA_BIN)
    p_cells = _normal_bins(edges, 0.0, 1.0)
    q_cells = (1.0 - q) * _normal_bins(edges, 0.0, s) + q * _normal_bins(edges, s / sigma, s)
    law = RoundLaw([(1.0, (DiscreteLaw(q_cells, p_cells),))], common=(Chi2Law(n - 1, x),) if n > 1 else ())
    info = {"x": float(x), "cells": int(p_cells.size), "coordinates": T * n}
    return _composed((law, info), N, T, rel_tol, pld_options, label=f"{setting.spec.title} attack, others 0, {T} rounds",
                     name="others 0, target C u: shift and scale test",
                     gradients="every record of D: 0; the target: C u",
                     test=(f"likelihood-ratio test of <X, u> in bins of width {ZETA_BIN:g} and of ||X_perp||^2 over "
                           f"the other {n - 1} coordinates of all {T} rounds (the release is divided by {nu})"))
