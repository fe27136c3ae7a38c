"""Discretisation of a law on a grid of losses: the two ends of the engine's bracket (THEORY.md §11.6).

For a grid ``step`` (losses ``j * step``) and one direction (``QP``: the loss ``L`` under ``Q``;
``PQ``: ``-L`` under ``P``; the measure the loss is drawn from is called ``U``, the other ``Lo``):

* **Upper end (pessimistic).** The mass of each cell ``(v_j, v_{j+1}]`` is split between its two
  ends so that both its ``U``-mass and its ``Lo``-mass are kept (Doroshenko et al. 2022, "Connect the
  Dots", computed from the cell masses). By Jensen's inequality on ``(1 - x e^{-L})_+`` the split pair
  dominates the true one at every ``eps``, so its ``T``-fold composition dominates the true
  composition. Mass below the grid moves up to its first point, mass above it (and ``U``'s infinite
  losses) goes to ``+inf``. The error is of second order in ``step``.
* **Lower end (optimistic).** Merging the outcomes of each centred cell ``(v_j - step/2, v_j + step/2]``
  is post-processing; a further garbling (:class:`_Garbling`) puts each merged loss exactly on
  ``v_j`` by moving a small fraction of a neighbour, so the first moment of the loss is kept and no
  bias accumulates over ``T`` rounds. Cells no neighbour can balance are merged into their heavier
  neighbour, the rest are covered by a shift ``c`` of the composed losses (:func:`choose_shift`).
  Mass below the grid is dropped, finite losses above it are put on the last point (lowering a loss
  lowers ``delta(eps) = E_U[(1 - e^{eps - L})_+]`` for every composition), truly infinite losses stay
  at ``+inf`` and mass a law left out is dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import signal

from paperlib.fdp.pld.laws import Law, scale_shift_log4


@dataclass
class _Disc:
    """One law, one direction, on the grid: both ends' raw material."""

    i0: int  # grid index of entry 0
    up: np.ndarray  # pessimistic (split) PMF
    up_inf: float  # its mass at +inf
    mass: np.ndarray  # U-mass of the centred cells (same indices as ``up``)
    lmass: np.ndarray  # the other distribution's mass of the same cells
    top: float  # U-mass above the last centred cell (put on the last point, lower end)
    info: dict
    step_: float
    total: float = 1.0  # total U-measure of the law (infinite losses included)
    inf_law: float = 0.0  # U's infinite mass in the law itself (not the grid's tails)
    inf_exact: float = 0.0  # the part of it that truly has infinite loss (kept at +inf on the lower end)
    _garbling: "_Garbling | None" = None

    @property
    def garbling(self) -> "_Garbling":
        if self._garbling is None:
            self._garbling = garble(self.i0, self.mass, self.lmass, self.top, self.step_)
        return self._garbling


def _centred_logt(i0: int, mass: np.ndarray, lmass: np.ndarray, step: float, bound: float | None = None) -> np.ndarray:
    """``log E[e^{v_j - L} | cell j]`` (``-inf`` for empty cells): ``> 0`` when the merged loss lies below
    ``v_j``. For plain centred cells it lies in ``[-step/2, step/2]`` (``bound``; a guard against round-off)."""
    v = (i0 + np.arange(mass.size)) * step
    with np.errstate(divide="ignore", invalid="ignore"):
        lt = v + np.log(lmass) - np.log(mass)
    b = step / 2 if bound is None else bound
    return np.where(mass > 0, np.clip(np.where(np.isfinite(lt), lt, b), -b, b), -np.inf)


def garble(i0: int, mass: np.ndarray, lmass: np.ndarray, top: float, step: float, passes: int = 3) -> "_Garbling":
    """The lower-end garbling of centred cells, after merging the cells it cannot balance into a neighbour.

    A deficit cell with no higher-loss mass to take, or a surplus cell with no lower-loss mass, would be
    rounded down, shifting the loss by ``mass * offset`` in every round. Merging it into its heavier
    neighbour (post-processing) keeps the first moment instead; the merged outcome is then balanced
    like any other cell. A few passes; cells whose neighbour is itself being merged wait for the next.
    """
    m, lm = mass.astype(float).copy(), lmass.astype(float).copy()
    bound = step / 2
    g = _Garbling(i0, m, _centred_logt(i0, m, lm, step, bound), top, step)
    for _ in range(passes):
        bad = g.fallback | g.unhelped_surplus
        bad &= m > 1e-300
        if not bad.any():
            break
        left = np.concatenate([[0.0], m[:-1]])
        right = np.concatenate([m[1:], [0.0]])
        target = np.where(right >= left, 1, -1)
        idx = np.flatnonzero(bad)
        tgt = idx + target[idx]
        ok = (tgt >= 0) & (tgt < m.size)
        idx, tgt = idx[ok], tgt[ok]
        ok = ~bad[tgt] & (m[tgt] > 0)  # into a cell that stays where it is
        idx, tgt = idx[ok], tgt[ok]
        if idx.size == 0:
            break
        np.add.at(m, tgt, m[idx])
        np.add.at(lm, tgt, lm[idx])
        m[idx] = 0.0
        lm[idx] = 0.0
        bound += step  # a merged cell's loss may now lie up to one more step from its point
        g = _Garbling(i0, m, _centred_logt(i0, m, lm, step, bound), top, step)
    return g


@dataclass
class _Garbling:
    """Lower-end construction on centred cells: masses ``mass`` (U) with merged-loss offsets ``logt``."""

    i0: int
    mass: np.ndarray
    logt: np.ndarray
    top: float  # U-mass above the last cell (on the last point)
    step_: float

    def __post_init__(self):
        # Garbling that puts every merged cell's loss L*_j exactly on its grid point v_j:
        # * deficit cell (L*_j < v_j, logt_j > 0) takes the fraction dl_{j+1} of cell j+1 (loss
        #   L*_{j+1} > v_j):  dl_{j+1} u_{j+1} (e^{-v_j} - e^{-L*_{j+1}}) = u_j (e^{-L*_j} - e^{-v_j}).
        #   Computed for the whole cell j although part of it may go elsewhere: the merged loss
        #   then lies above v_j, i.e. v_j rounds it down (valid).
        # * surplus cell (L*_j > v_j, logt_j < 0) takes the fraction dr_{j-1} of cell j-1 (loss
        #   L*_{j-1} < v_j), computed for a lower bound of what cell j keeps, so that the merged loss
        #   stays >= v_j (valid, rounding down the remainder).
        # Merging is post-processing; the first moment of the loss is kept to first order, so no
        # bias accumulates over T rounds (rounding each cell down would shift it by ~|rho'| step^3).
        m, lt, st = self.mass, self.logt, self.step_
        fin = np.isfinite(lt) & (m > 0)
        deficit = fin & (lt > 0)
        surplus = fin & (lt < 0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # donation of cell j+1 to deficit cell j (index j, length K)
            dl = m[:-1] * np.expm1(lt[:-1]) / (m[1:] * -np.expm1(lt[1:] - st))
            # donation of cell j-1 to surplus cell j if cell j kept all of itself (index j-1)
            dr_max = m[1:] * -np.expm1(lt[1:]) / (m[:-1] * np.expm1(lt[:-1] + st))
        ok_l = deficit[:-1] & fin[1:] & np.isfinite(dl) & (dl >= 0)
        ok_r = surplus[1:] & fin[:-1] & np.isfinite(dr_max) & (dr_max >= 0)
        dl = np.where(ok_l, dl, 0.0)
        dr_max = np.where(ok_r, dr_max, 0.0)
        K1 = m.size
        give_left = np.concatenate([[0.0], dl])  # cell k gives give_left[k] of itself to k-1
        give_right_max = np.concatenate([dr_max, [0.0]])  # at most this to k+1
        # capacity: a donor cannot give more than itself; drop the offending requests
        over = give_left + give_right_max > 1.0
        if over.any():
            bad_l = over & (give_left > 0)
            give_left = np.where(bad_l, 0.0, give_left)
            over = give_left + give_right_max > 1.0
            give_right_max = np.where(over, 0.0, give_right_max)
        keep_low = 1.0 - give_left - give_right_max  # lower bound of what each cell keeps
        give_right = give_right_max * np.concatenate([keep_low[1:], [0.0]])  # scaled by the receiver's keep_low
        self.give_left, self.give_right = give_left, give_right
        helped = np.zeros(K1, dtype=bool)
        helped[:-1] |= give_left[1:] > 0
        helped[1:] |= give_right[:-1] > 0
        self.fallback = deficit & ~helped  # deficit cells nobody helped: the shift must cover them
        self.unhelped_surplus = surplus & ~helped  # rounded down (valid), at a first-order cost

    def lower(self, c: float) -> tuple[int, np.ndarray]:
        """Lower-end PMF (index offset, probabilities) for the shift bound ``c``.

        Every cell's merged outcome sits at ``v_j`` (the garbling of ``__post_init__``); deficit
        cells that no neighbour could help ("fallback") sit at ``v_j`` when ``logt <= c``
        (covered by the shift) and at ``v_{j-1}`` otherwise.
        """
        m = self.mass
        own = m * (1.0 - self.give_left - self.give_right)
        received = np.zeros(m.size)
        received[:-1] += self.give_left[1:] * m[1:]
        received[1:] += self.give_right[:-1] * m[:-1]
        down = self.fallback & (self.logt > c)
        # a deficit cell not covered by c goes to the largest grid point at most its merged loss + c
        k = np.where(down, np.ceil(np.where(down, self.logt - c, 0.0) / self.step_ - 1e-12), 0).astype(np.int64)
        k = np.where(down, np.maximum(k, 1), 0)
        pad = int(k.max()) if k.size else 0
        out = np.zeros(m.size + pad)
        out[pad:] += np.where(down, 0.0, own) + received
        np.add.at(out, pad + np.arange(m.size) - k, np.where(down, own, 0.0))
        out[-1] += self.top
        return self.i0 - pad, out

    def shift_entries(self):
        """``(logt, mass)`` of the fallback cells: what the shift bound ``c`` must cover."""
        return self.logt[self.fallback], self.mass[self.fallback]


def _cell_masses(lF: np.ndarray, lS: np.ndarray) -> np.ndarray:
    """Masses of the cells between consecutive points from the log CDF/SF there (relative accuracy)."""
    a_f, b_f = lF[:-1], lF[1:]
    a_s, b_s = lS[:-1], lS[1:]
    with np.errstate(invalid="ignore", over="ignore"):
        from_f = np.exp(b_f) * -np.expm1(np.minimum(a_f - b_f, 0.0))
        from_s = np.exp(a_s) * -np.expm1(np.minimum(b_s - a_s, 0.0))
    use_f = b_f < -0.6931471805599453
    out = np.where(use_f, from_f, from_s)
    return np.where(np.isfinite(out) & (out > 0), out, 0.0)


@dataclass
class _Values:
    """A law's four log tails on the half-grid ``t * step / 2``, ``t = t0 .. t0 + len - 1``."""

    t0: int
    q_le: np.ndarray
    q_gt: np.ndarray
    p_le: np.ndarray
    p_gt: np.ndarray
    i_lo: int  # grid range of the Q||P direction: [i_lo, i_hi]
    i_hi: int
    inf: tuple = (0.0, 0.0)  # (Q[L = +inf], P[L = -inf]) on the upper end
    exact: tuple = (0.0, 0.0)  # their truly infinite part
    totals: tuple = (1.0, 1.0)  # total masses (Q, P)


def _grid_range(law: Law, step: float, tail: float, max_cells: int) -> tuple[int, int]:
    lo, hi = law.span(tail)
    i_lo = int(math.floor(lo / step))
    i_hi = max(int(math.ceil(hi / step)), i_lo + 1)
    if i_hi - i_lo + 1 > max_cells:
        raise TooLarge(i_hi - i_lo + 1)
    return i_lo, i_hi


def law_values(law: Law, step: float, tail: float, max_cells: int) -> _Values:
    i_lo, i_hi = _grid_range(law, step, tail, max_cells)
    t0, t1 = 2 * i_lo - 1, 2 * i_hi + 1
    v = np.arange(t0, t1 + 1) * (step / 2.0)
    q_le, q_gt, p_le, p_gt = law.log4(v)
    return _Values(t0, q_le, q_gt, p_le, p_gt, i_lo, i_hi, inf=law.inf_masses(), totals=law.totals(),
                   exact=law.exact_inf())


def batch_values(laws: list, step: float, tail: float, max_cells: int) -> dict:
    """:func:`law_values` for many :class:`ScaleShiftLaw` at once (one vectorised evaluation)."""
    ranges = [_grid_range(f, step, tail, max_cells) for f in laws]
    lens = np.array([2 * (hi - lo) + 3 for lo, hi in ranges])
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    t = np.concatenate([np.arange(2 * lo - 1, 2 * hi + 2) for lo, hi in ranges])
    rep = np.repeat(np.arange(len(laws)), lens)
    const = {k: np.array([getattr(f, k) for f in laws])[rep] for k in ("A", "d", "s2", "m_q", "m_p")}
    vals = scale_shift_log4(t * (step / 2.0), const["A"], const["d"], const["s2"], const["m_q"], const["m_p"])
    out = {}
    for j, (f, (lo, hi)) in enumerate(zip(laws, ranges)):
        sl = slice(starts[j], starts[j] + lens[j])
        out[f.key()] = _Values(2 * lo - 1, *(a[sl] for a in vals), lo, hi)
    return out


def _directed(vals: _Values, direction: str):
    """Grid range, ``(log U[L' <= h], log U[L' > h], log Lo[L' <= h], log Lo[L' > h])`` at the
    half-grid points ``h`` of a direction (Q||P: ``L`` under Q; P||Q: ``-L`` under P, read off the
    same values at ``-h``: ``P[-L <= h] = P[L > -h]``; for an atom exactly at ``-h`` this moves it
    to the neighbouring cell, where it sits at that cell's end: both ends stay valid), and ``U``'s
    infinite masses (upper end, exact) and total."""
    if direction == "QP":
        return (vals.i_lo, vals.i_hi, (vals.q_le, vals.q_gt, vals.p_le, vals.p_gt), vals.inf[0], vals.totals[0],
                vals.exact[0])
    return (-vals.i_hi, -vals.i_lo, (vals.p_gt[::-1], vals.p_le[::-1], vals.q_gt[::-1], vals.q_le[::-1]),
            vals.inf[1], vals.totals[1], vals.exact[1])


def discretise_values(vals: _Values, direction: str, step: float) -> _Disc:
    i_lo, i_hi, (lFU, lSU, lFL, lSL), u_inf, total, u_exact = _directed(vals, direction)
    K = i_hi - i_lo
    # half-grid points h_t = (i_lo - 1/2 + t/2) step, t = 0 .. 2K + 2
    uh = _cell_masses(lFU, lSU)  # half-cells (h_t, h_{t+1}], t = 0 .. 2K+1
    lh = _cell_masses(lFL, lSL)
    v = (i_lo + np.arange(K + 1)) * step
    # ---- upper end: split cells (v_k, v_{k+1}] = half-cells 2j+1, 2j+2
    u = uh[1:2 * K + 1:2] + uh[2:2 * K + 2:2]
    lo_m = lh[1:2 * K + 1:2] + lh[2:2 * K + 2:2]
    with np.errstate(divide="ignore", invalid="ignore"):
        logt = np.clip(v[:-1] + np.log(lo_m) - np.log(u), -step, 0.0)
    frac = np.where(u > 0, -np.expm1(logt) / -math.expm1(-step), 0.0)
    frac = np.clip(np.where(np.isfinite(frac), frac, 0.0), 0.0, 1.0)
    b = u * frac
    up = np.zeros(K + 1)
    up[:-1] += u - b
    up[1:] += b
    below = float(np.exp(lFU[1]))  # U[L' <= v_{i_lo}]: rounded up to the first point
    up[0] += below
    up_inf = float(np.exp(lSU[2 * K + 1])) + u_inf  # U[L' > v_{i_hi}], infinite losses included
    # ---- lower end: centred cells (v_j - step/2, v_j + step/2] = half-cells 2j, 2j+1
    mass = uh[0:2 * K + 2:2] + uh[1:2 * K + 2:2]
    lmass = lh[0:2 * K + 2:2] + lh[1:2 * K + 2:2]
    top = float(np.exp(lSU[2 * K + 2]))  # finite losses beyond the grid: lowered to the last point (valid)
    info = {"below": below, "above": up_inf, "dropped_below": float(np.exp(lFU[0])), "cells": K + 1}
    return _Disc(i_lo, up, up_inf, mass, lmass, top, info, step, total, u_inf, u_exact)


class TooLarge(Exception):
    def __init__(self, length: int):
        super().__init__(length)
        self.length = int(length)


def conv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.size == 1 or b.size == 1:
        return a * b[0] if b.size == 1 else b * a[0]
    if min(a.size, b.size) <= 64:
        return np.convolve(a, b)
    return np.maximum(signal.fftconvolve(a, b), 0.0)


def assemble(items) -> tuple[int, np.ndarray]:
    lo = min(i for i, _, _ in items)
    hi = max(i + a.size for i, a, _ in items)
    out = np.zeros(hi - lo)
    for i, a, w in items:
        out[i - lo:i - lo + a.size] += w * a
    nz = np.flatnonzero(out > 0)
    if nz.size == 0:
        return 0, np.array([0.0])
    return lo + int(nz[0]), out[nz[0]:nz[-1] + 1]


def choose_shift(entries, factor_count: int, step: float) -> float:
    """``c`` minimising ``factor_count * c + step * (mass rounded down)`` (per round)."""
    if not entries:
        return 0.0
    lt = np.concatenate([e[0] for e in entries])
    ms = np.concatenate([e[1] for e in entries])
    ok = np.isfinite(lt) & (lt > 0) & (ms > 0)
    lt, ms = lt[ok], ms[ok]
    if lt.size == 0:
        return 0.0
    order = np.argsort(-lt)
    lt, ms = lt[order], ms[order]
    above = np.concatenate([[0.0], np.cumsum(ms)[:-1]])  # mass strictly above candidate i
    cand = factor_count * lt + step * above
    # candidate "round every positive cell down": c = 0
    j = int(np.argmin(cand))
    best = float(lt[j]) if cand[j] <= step * float(np.sum(ms)) else 0.0
    return best

