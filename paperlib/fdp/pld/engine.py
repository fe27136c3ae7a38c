"""The engine: a round law on a grid, composed ``T`` times with dp_accounting's PMFs (THEORY.md §11).

:class:`Engine` discretises every law of a :class:`~paperlib.fdp.pld.laws.RoundLaw` on one grid
(:mod:`paperlib.fdp.pld.discretise`), assembles each direction's per-round PMF for both ends of the
bracket, composes them with ``DensePLDPmf.self_compose`` / ``compose`` (FFT), and answers the
queries with ``DensePLDPmf``'s own ``get_delta_for_epsilon`` / ``get_epsilon_for_delta``. The
trade-off curve needs the composed probabilities themselves, which dp_accounting keeps in private
attributes: :func:`pmf_arrays` is the one place that reads them (a test fails if they change).

Bookkeeping of the ends: dp_accounting's truncation ``tail_mass_truncation`` is added to the
infinity mass of every composition; on the upper end that is valid, on the lower end it is
subtracted again (``slack``, twice: it may also alias). A round law's ``latent_defect`` (mass of a
hidden event left out, THEORY.md §11.5) costs ``e^eps T eta`` on the lower end.

The grid is chosen from ``T`` and the target accuracy: a coarse pass, then finer grids (the bracket
shrinks like ``step^2``) until ``eps_up - eps_low <= rel_tol * max(eps_up, EPS_SCALE_FLOOR)`` or the
composed length would exceed ``max_length``; the achieved bracket is always reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from paperlib.fdp.pld.discretise import (TooLarge, assemble, batch_values, choose_shift, conv, discretise_values,
                                         garble, law_values)
from paperlib.fdp.pld.laws import RoundLaw, ScaleShiftLaw
from paperlib.fdp.progress import progress_bar

#: Default target: ``eps_up - eps_low <= DEFAULT_REL_TOL * max(eps_up, EPS_SCALE_FLOOR)``.
DEFAULT_REL_TOL = 0.01
#: Below this ``eps`` the tolerance is absolute (``rel_tol * EPS_SCALE_FLOOR``).
EPS_SCALE_FLOOR = 0.1
#: Smallest ``delta`` a composition answers (FFT round-off ~1e-16 per entry lives below).
PLD_DELTA_FLOOR = 1e-10
#: Per-round, per-law mass left beyond the grid (to +inf on the upper end).
ROUND_TAIL = 1e-18
#: dp_accounting's ``tail_mass_truncation`` in each composition.
TRUNCATION = 1e-15
#: Largest composed PMF length (complex FFT of this length: ~130 MB per array).
DEFAULT_MAX_LENGTH = 2**23
#: Coarsest grid the adaptive search starts from.
START_STEP = 0.5
#: Finest grid the adaptive search goes to.
MIN_STEP = 1e-7
#: Largest number of grid passes.
MAX_PASSES = 8
DIRECTIONS = ("QP", "PQ")


def require_dp_accounting():
    """Import dp_accounting's PLD modules; one-line ModuleNotFoundError naming the extra when absent."""
    try:
        from dp_accounting.pld import common, pld_pmf
    except ImportError:
        raise ModuleNotFoundError(
            "multi-round composition needs the [accounting] extra (dp-accounting is not installed): "
            "pip install 'paperlib[accounting]'", name="dp_accounting") from None
    return pld_pmf, common


def pmf_arrays(pmf) -> tuple[int, np.ndarray]:
    """``(lower_loss, probs)`` of a dp_accounting ``DensePLDPmf``: the probabilities of the losses
    ``(lower_loss + j) * discretization``. dp_accounting 0.6.0 has no public accessor; this wrapper is the
    only reader of its private ``_lower_loss`` / ``_probs`` (``tests/fdp/test_pld.py`` checks it against
    the public queries, so an upstream change fails there)."""
    return int(pmf._lower_loss), np.asarray(pmf._probs, dtype=float)


def export_pld(state: "State", estimate: str):
    """dp_accounting's ``PrivacyLossDistribution`` of one grid's composition (``PLDComposition.to_dp_accounting``):
    the pessimistic PMFs as they are, or the optimistic ones with their losses moved down by the lower end's
    shift (rounded down to the grid: still optimistic). ``pmf_remove`` is the ``Q||P`` direction, ``pmf_add``
    ``P||Q``. ValueError where the lower end subtracts a mass after composing (no PMF carries it)."""
    from dp_accounting.pld import pld_pmf, privacy_loss_distribution

    if estimate == "pessimistic":
        pmfs = {d: state.up[d].pmf for d in DIRECTIONS}
    else:
        if state.slack > 0 or state.defect:
            raise ValueError("estimate: the optimistic end of this composition subtracts a mass after composing "
                             "(truncation or a hidden event), which a PMF cannot carry; export the one-round "
                             "composition and compose it in dp_accounting")
        pmfs = {}
        for d in DIRECTIONS:
            i0, probs = pmf_arrays(state.low[d].pmf)
            cells = math.ceil(state.shift[d] / state.step - 1e-12)  # losses moved down by at least the shift
            pmfs[d] = pld_pmf.DensePLDPmf(state.step, i0 - cells, probs, state.low[d].inf, False)
    return privacy_loss_distribution.PrivacyLossDistribution(pmfs["QP"], pmfs["PQ"])


class _Pmf:
    """A composed PMF (dp_accounting ``DensePLDPmf``), queried through its public methods."""

    def __init__(self, pmf, step: float):
        self.pmf = pmf
        self.step = step
        self.size = int(pmf.size)
        self.inf = float(pmf.get_delta_for_epsilon(math.inf))  # the mass at +inf

    def delta(self, eps) -> np.ndarray:
        """``inf + sum_{v_j > eps} p_j (1 - e^{eps - v_j})`` at each ``eps`` (``get_delta_for_epsilon``)."""
        e = np.atleast_1d(np.asarray(eps, dtype=float))
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # dp_accounting's exp of huge losses
            out = np.array([self.pmf.get_delta_for_epsilon(float(x)) for x in e.ravel()], dtype=float)
        return np.clip(out, 0.0, 1.0).reshape(e.shape)

    def epsilon(self, delta: float) -> float:
        """Smallest ``eps >= 0`` with ``delta(eps) <= delta``; ``inf`` when the +inf mass exceeds it.

        ``get_epsilon_for_delta`` walks down from the largest loss; when the answer is 0 it would reach losses
        below -709 and overflow ``exp(-loss)``, so ``delta(0) <= delta`` is answered first."""
        if self.inf > delta:
            return math.inf
        # dp_accounting overflows a scalar division on losses in the thousands (harmless: the term is 0); silenced
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            if self.pmf.get_delta_for_epsilon(0.0) <= delta:
                return 0.0
            return max(float(self.pmf.get_epsilon_for_delta(float(delta))), 0.0)

    def chain(self, shift: float = 0.0, deficit_to_inf: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Vertices ``(alpha, beta)`` of the trade-off ``T(Lo, U)`` of the discrete pair (losses - shift).

        The likelihood-ratio test rejects for large losses: adding atoms in decreasing loss,
        ``alpha`` gains ``p_j e^{-(v_j - shift)}`` and ``1 - beta`` gains ``p_j``; the mass at +inf is
        rejected first (``alpha = 0``). ``deficit_to_inf`` (the pessimistic end): mass the composed PMF lost
        (``1 - inf - sum p`` > 0: FFT round-off, truncation) is counted at +inf too, so the curve stays a lower
        bound (else ``beta`` would stop at the deficit, above the true curve, at 10^5 rounds).
        """
        i0, probs = pmf_arrays(self.pmf)
        p = np.maximum(probs, 0.0)[::-1]
        v = ((i0 + np.arange(p.size)) * self.step)[::-1] - shift
        with np.errstate(divide="ignore", over="ignore"):
            la = np.where(p > 0, np.log(np.where(p > 0, p, 1.0)) - v, -np.inf)
            da = np.exp(np.minimum(la, 700.0))
        alpha = np.concatenate([[0.0], np.cumsum(da)])
        cum = np.concatenate([[0.0], np.cumsum(p)])
        deficit = max(1.0 - self.inf - float(cum[-1]), 0.0) if deficit_to_inf else 0.0
        beta = 1.0 - self.inf - deficit - cum
        return alpha, np.maximum(beta, 0.0)


def _grid_delta(pmf: "_Pmf", eps: np.ndarray) -> np.ndarray:
    """``inf + sum_{v_j > eps} p_j (1 - e^{eps - v_j})`` at each ``eps`` of a sorted array, by suffix sums
    (``get_delta_for_epsilon`` one value at a time costs a pass over the PMF per value)."""
    i0, p = pmf_arrays(pmf.pmf)
    p = np.maximum(p, 0.0)
    v = (i0 + np.arange(p.size)) * pmf.step
    idx = np.searchsorted(v, eps, side="right")  # first atom with v_j > eps
    tail_p = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]])
    # log sum_{i >= j} p_i e^{-v_i} in the log domain: eps + it is <= log(tail_p) <= 0, so nothing overflows
    with np.errstate(divide="ignore"):
        lw = np.where(p > 0, np.log(np.where(p > 0, p, 1.0)) - v, -np.inf)
    tail_lw = np.concatenate([np.logaddexp.accumulate(lw[::-1])[::-1], [-np.inf]])
    with np.errstate(over="ignore", under="ignore"):
        out = tail_p[idx] - np.exp(np.minimum(eps + tail_lw[idx], 0.0))
    return np.clip(pmf.inf + np.maximum(out, 0.0), 0.0, 1.0)


#: Tail values of common factors on a grid, shared between compositions (the two routes of the chain certificate
#: compose the same ``Chi2Law``); a few entries only (each up to a few MB).
_COMMON_VALUES: dict = {}
_COMMON_KEEP = 6


def _common_values(law, step: float, tail: float, max_length: int):
    key = (law.key(), step, tail, max_length)
    if key not in _COMMON_VALUES:
        if len(_COMMON_VALUES) >= _COMMON_KEEP:
            _COMMON_VALUES.pop(next(iter(_COMMON_VALUES)))
        _COMMON_VALUES[key] = law_values(law, step, tail, max_length)
    return _COMMON_VALUES[key]


@dataclass
class State:
    """Both ends of a composition on one grid, both directions."""

    step: float
    up: dict  # direction -> _Pmf (pessimistic)
    low: dict  # direction -> _Pmf (optimistic, before the shift)
    shift: dict  # direction -> shift of the lower end
    slack: float  # mass to subtract on the lower end (dp_accounting truncation, aliasing)
    info: dict
    defect: dict | None = None  # direction -> T * eta of a hidden event left out (lower end: e^eps times it)

    def _defect(self, d: str) -> float:
        return (self.defect or {}).get(d, 0.0)

    def delta_bounds(self, eps: np.ndarray):
        hi = np.maximum(self.up["QP"].delta(eps), self.up["PQ"].delta(eps))
        with np.errstate(over="ignore"):
            lo = np.maximum.reduce([np.maximum(self.low[d].delta(eps + self.shift[d]) - self.slack
                                               - np.exp(np.minimum(eps, 700.0)) * self._defect(d), 0.0)
                                    for d in DIRECTIONS])
        return np.minimum(lo, hi), hi

    def direction_delta(self, d: str, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(delta_low, delta_up)`` of one direction (``"QP"``: ``H(Q||P)``, ``"PQ"``: ``H(P||Q)``) at each
        ``eps`` of a sorted grid, vectorised (suffix sums of the composed PMFs; a chain of pairs needs each
        order's profile on a grid, THEORY.md §11.3b). Matches ``get_delta_for_epsilon`` (a test)."""
        e = np.asarray(eps, dtype=float)
        hi = _grid_delta(self.up[d], e)
        with np.errstate(over="ignore"):
            lo = _grid_delta(self.low[d], e + self.shift[d]) - self.slack - np.exp(np.minimum(e, 700.0)) * self._defect(d)
        return np.clip(np.minimum(lo, hi), 0.0, 1.0), hi

    def epsilon_bounds(self, delta: float):
        hi = max(self.up[d].epsilon(delta) for d in DIRECTIONS)
        lows = []
        for d in DIRECTIONS:
            e0 = self.low[d].epsilon(delta + self.slack) - self.shift[d]
            if self._defect(d) > 0 and math.isfinite(e0):
                # e^eps T eta for every eps up to e0 + 1 >= the answer (adding slack only lowers it)
                extra = math.exp(min(e0 + 1.0, 700.0)) * self._defect(d)
                e0 = self.low[d].epsilon(min(delta + self.slack + extra, 1.0)) - self.shift[d]
            lows.append(max(e0, 0.0))
        return min(max(lows), hi), hi


# =============================================================================== the engine
class Engine:
    """Builds :class:`State` objects for a round law on grids chosen to meet ``rel_tol``."""

    def __init__(self, law: RoundLaw, rounds: int, *, step, rel_tol, max_length, tail):
        self.law = law
        self.rounds = rounds
        self.fixed_step = step is not None
        self.rel_tol = rel_tol
        self.max_length = max_length
        self.tail = tail
        self.state: State | None = None
        self.passes: list = []
        self._first_step = float(step) if step is not None else START_STEP
        self.accuracy_met: bool | None = None
        self.progress = None  # progress bar setting of every grid pass (PLDComposition's ``progress``)

    # ------------------------------------------------------------ one grid
    def build(self, step: float) -> State:
        """One grid pass at ``step`` (both directions), with a progress bar (``self.progress``,
        :mod:`paperlib.fdp.progress`) over the two directions."""
        with progress_bar(self.progress, total=2, desc=f"PLD composition, {self.rounds:,} rounds, step {step:.2g}",
                          unit=" directions") as bar:
            return self._build(step, bar)

    def _build(self, step: float, bar) -> State:
        T, law = self.rounds, self.law
        values: dict = {}  # each law evaluated once, on a half-grid both directions share
        batch = {f.key(): f for _, fs in law.parts for f in fs if isinstance(f, ScaleShiftLaw)}
        if batch:
            values.update(batch_values(list(batch.values()), step, self.tail, self.max_length))
        up, low, shift, info = {}, {}, {}, {}
        slack = 2 * TRUNCATION if T > 1 else 0.0  # the lower end's self_compose adds TRUNCATION, may alias as much
        for direction in DIRECTIONS:
            up[direction], low[direction], shift[direction], info[direction], extra = \
                self._direction(direction, step, values)
            slack += extra
            bar.update(1)
        eta_q, eta_p = law.latent_defect
        defect = {"QP": T * float(eta_p), "PQ": T * float(eta_q)} if (eta_q or eta_p) else None
        return State(step=step, up=up, low=low, shift=shift, slack=slack, info=info, defect=defect)

    def _discs(self, direction: str, step: float, values: dict) -> dict:
        discs = {}
        for _, factors in self.law.parts:
            for f in factors:
                k = f.key()
                if k not in discs:
                    if k not in values:
                        values[k] = law_values(f, step, self.tail, self.max_length)
                    discs[k] = discretise_values(values[k], direction, step)
        return discs

    def _lower_items(self, discs: dict, step: float):
        """Lower-end items ``(index, probs, weight)`` of one round and the shift bound ``c``.

        One-factor components and identity atoms are garbled together (merging outcomes of different
        components is post-processing too, and cells narrower than the grid then find neighbours);
        products are garbled factor by factor.
        """
        parts = self.law.parts
        single = [(w, f[0] if f else None) for w, f in parts if len(f) <= 1]
        multi = [(w, f) for w, f in parts if len(f) > 1]
        entries, items, joint, tops, low_inf = [], [], None, [], 0.0
        if single:
            lo_i = min(discs[f.key()].i0 if f is not None else 0 for _, f in single)
            hi_i = max(discs[f.key()].i0 + discs[f.key()].mass.size if f is not None else 1 for _, f in single)
            jm, jl = np.zeros(hi_i - lo_i), np.zeros(hi_i - lo_i)
            for w, f in single:
                if f is None:  # identity: loss 0 under both
                    jm[-lo_i] += w
                    jl[-lo_i] += w
                    continue
                d = discs[f.key()]
                jm[d.i0 - lo_i:d.i0 - lo_i + d.mass.size] += w * d.mass
                jl[d.i0 - lo_i:d.i0 - lo_i + d.mass.size] += w * d.lmass
                tops.append((d.i0 + d.mass.size - 1, w * d.top))
                low_inf += w * d.inf_exact
            joint = garble(lo_i, jm, jl, 0.0, step)
            entries.append(joint.shift_entries())
        for w, factors in multi:
            for f in factors:
                lt_f, m_f = discs[f.key()].garbling.shift_entries()
                entries.append((lt_f, w * m_f))
        factor_count = max([len(f) for _, f in multi] + [1])
        c = choose_shift(entries, factor_count, step)
        if joint is not None:
            j0, arr = joint.lower(c)
            items.append((j0, arr, 1.0))
            items.extend((i, np.array([m]), 1.0) for i, m in tops if m > 0)
        for w, factors in multi:
            i_lw, a_lw, total, finite = 0, np.array([1.0]), 1.0, 1.0
            for f in factors:
                d = discs[f.key()]
                j0, arr = d.garbling.lower(c)
                a_lw = conv(a_lw, arr)
                i_lw += j0
                total *= d.total
                finite *= d.total - d.inf_exact
            items.append((i_lw, a_lw, w))
            low_inf += w * (total - finite)
        return items, c, factor_count, low_inf

    def _upper_items(self, discs: dict):
        """Upper-end items of one round, the mass at +inf (dropped mixture mass, beyond-grid tails) and the part
        of it that the laws themselves put there (no grid can make that finite)."""
        items, inf_up, inherent = [], self.law.dropped, self.law.dropped
        for w, factors in self.law.parts:
            if not factors:
                items.append((0, np.array([1.0]), w))
                continue
            i_up, a_up, total, finite, finite_law = 0, np.array([1.0]), 1.0, 1.0, 1.0
            for f in factors:
                d = discs[f.key()]
                a_up = conv(a_up, d.up)
                i_up += d.i0
                total *= d.total
                finite *= d.total - d.up_inf
                finite_law *= d.total - d.inf_law
            inf_up += w * (total - finite)
            inherent += w * (total - finite_law)
            items.append((i_up, a_up, w))
        return items, inf_up, inherent

    def _direction(self, direction: str, step: float, values: dict):
        """Both ends of one direction: composed PMFs, the lower end's shift, a summary, extra slack."""
        pld_pmf, common = require_dp_accounting()
        T = self.rounds
        discs = self._discs(direction, step, values)
        items_low, c, factor_count, low_inf = self._lower_items(discs, step)
        items_up, inf_up, inherent = self._upper_items(discs)
        i_u, p_u = assemble(items_up)
        i_l, p_l = assemble(items_low)
        length = self._composed_length(common, p_u, T) if T > 1 else p_u.size
        if length > self.max_length:
            raise TooLarge(length)
        pu = pld_pmf.DensePLDPmf(step, i_u, p_u, min(inf_up, 1.0), True)
        pl = pld_pmf.DensePLDPmf(step, i_l, p_l, min(low_inf, 1.0), False)
        if T > 1:
            with np.errstate(all="ignore"):
                pu = pu.self_compose(T, tail_mass_truncation=TRUNCATION)
                pl = pl.self_compose(T, tail_mass_truncation=TRUNCATION)
        total_shift, extra = T * factor_count * c, 0.0
        common_info = []
        for cf in self.law.common:
            pu, pl, c_r, slack_r, ci = self._compose_common(cf, direction, step, values, pu, pl, pld_pmf)
            total_shift += c_r
            extra += slack_r
            common_info.append(ci)
        up, low = _Pmf(pu, step), _Pmf(pl, step)
        inherent = -math.expm1(T * math.log1p(-min(inherent, 1.0))) if inherent < 1 else 1.0
        for ci in common_info:
            inherent = 1.0 - (1.0 - inherent) * (1.0 - ci["inherent_infinity_mass"])
        info = {"round_cells": int(p_u.size), "composed_length": int(up.size), "infinity_mass": up.inf,
                "round_tail_to_inf": float(inf_up), "shift_per_round": float(c), "lower_shift": float(total_shift),
                "common": common_info, "inherent_infinity_mass": float(inherent)}
        return up, low, float(total_shift), info, extra

    def _compose_common(self, cf, direction, step, values, pu, pl, pld_pmf):
        """Compose a common factor into both ends: exactly when it has ``composed(T)``, else by its own
        ``T``-fold self-composition. Returns the PMFs, the lower end's shift and extra slack, a summary."""
        T = self.rounds
        exact = hasattr(cf, "composed")
        claw = cf.composed(T) if exact else cf
        if claw.key() not in values:
            values[claw.key()] = _common_values(claw, step, self.tail, self.max_length)
        d = discretise_values(values[claw.key()], direction, step)
        c_r = choose_shift([d.garbling.shift_entries()], 1, step)
        cu = pld_pmf.DensePLDPmf(step, d.i0, d.up, d.up_inf, True)
        j0, arr = d.garbling.lower(c_r)
        nz = np.flatnonzero(arr > 0)
        if nz.size:
            cl = pld_pmf.DensePLDPmf(step, j0 + int(nz[0]), arr[nz[0]:nz[-1] + 1], d.inf_exact, False)
        else:  # every outcome of the factor has infinite loss (e.g. disjoint supports): only its infinite mass
            cl = pld_pmf.DensePLDPmf(step, j0, np.zeros(1), d.inf_exact, False)
        slack = 0.0
        if not exact and T > 1:
            with np.errstate(all="ignore"):
                cu = cu.self_compose(T, tail_mass_truncation=TRUNCATION)
                cl = cl.self_compose(T, tail_mass_truncation=TRUNCATION)
            c_r *= T
            slack = 2 * TRUNCATION
        if pu.size + cu.size > self.max_length:
            raise TooLarge(pu.size + cu.size)
        # no truncation: the result is only queried (dp_accounting's truncation loops in Python)
        pu = pu.compose(cu, tail_mass_truncation=0.0)
        pl = pl.compose(cl, tail_mass_truncation=0.0)
        own = d.inf_law if exact else (-math.expm1(T * math.log1p(-d.inf_law)) if d.inf_law < 1 else 1.0)
        ci = {"law": str(claw.key()[:3]), "cells": d.info["cells"], "shift": c_r, "tail_to_inf": d.up_inf,
              "composed": "exactly" if exact else "self_compose", "inherent_infinity_mass": float(own)}
        return pu, pl, c_r, slack, ci

    def _composed_length(self, common, probs, T) -> int:
        with np.errstate(all="ignore"):  # its Chernoff bound overflows harmlessly for large orders
            lb, ub = common.compute_self_convolve_bounds(probs, T, TRUNCATION)
        return int(ub - lb + 1)

    # ------------------------------------------------------------ adaptive grid
    def ensure(self) -> State:
        if self.state is None:
            self.state = self._build_fitting(self._first_step)
        return self.state

    def _build_fitting(self, step: float) -> State:
        """Build at ``step``; when too large, at the finest step that fits (coarser by the overshoot)."""
        for _ in range(40):
            try:
                st = self.build(step)
                self.passes.append(step)
                return st
            except TooLarge as exc:
                if self.fixed_step and step == self._first_step and not self.passes:
                    raise ValueError(
                        f"step = {step:g} needs a PMF of length {exc.length} for rounds = {self.rounds} "
                        f"(largest {self.max_length}); use a larger step") from None
                if self.state is not None:
                    raise
                step *= max(1.5, 1.2 * exc.length / self.max_length)
        raise ValueError(f"could not compute the composition for these parameters (no grid fits in "
                         f"{self.max_length} entries for rounds = {self.rounds})")

    def tolerance(self, value: float) -> float:
        return self.rel_tol * max(value, EPS_SCALE_FLOOR)

    def refine(self, width: float, tol: float) -> bool:
        """Move to a finer grid predicted from ``width`` (~step^2); False when none is allowed."""
        if self.fixed_step or len(self.passes) >= MAX_PASSES:
            return False
        st = self.state
        # the bracket shrinks like step^2: aim at half the tolerance, so that one more pass suffices
        ratio = math.sqrt(0.5 * tol / width) if width > 0 and math.isfinite(width) else 0.5
        new = max(st.step * min(max(ratio, 0.03), 0.7), MIN_STEP)
        if new >= st.step:
            return False
        grown = max(st.info[d]["composed_length"] for d in ("QP", "PQ")) * st.step / new
        if grown > self.max_length:
            new = st.step * max(st.info[d]["composed_length"] for d in ("QP", "PQ")) / (0.9 * self.max_length)
            if new >= 0.95 * st.step:
                return False
        try:
            self.state = self.build(new)
        except TooLarge:
            return False
        self.passes.append(new)
        return True

    def epsilon_bounds(self, delta: float):
        st = self.ensure()
        while True:
            lo, hi = st.epsilon_bounds(delta)
            inherent = max(st.info[d]["inherent_infinity_mass"] for d in DIRECTIONS)
            if not math.isfinite(hi):
                # the laws' own infinite mass above delta: no grid makes the upper end finite
                if math.isfinite(lo) and inherent <= delta and not self.fixed_step and self.refine(1.0, 0.25):
                    st = self.state
                    continue
                self.accuracy_met = not math.isfinite(lo)
                return lo, hi
            tol = self.tolerance(hi)
            if hi - lo <= tol:
                self.accuracy_met = True
                return lo, hi
            if not self.refine(hi - lo, tol):
                self.accuracy_met = False
                return lo, hi
            st = self.state

    def delta_bounds(self, eps: np.ndarray):
        st = self.ensure()
        while True:
            lo, hi = st.delta_bounds(eps)
            width = float(np.max(hi - lo)) if np.size(hi) else 0.0
            tol = self.rel_tol * float(np.max(hi)) if np.size(hi) else 0.0
            if width <= max(tol, 1e-14):
                self.accuracy_met = True
                return lo, hi
            if not self.refine(width, max(tol, 1e-14)):
                self.accuracy_met = False
                return lo, hi
            st = self.state


