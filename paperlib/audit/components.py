"""The white-box adversary's model of one round: both output mixtures, component by component.

With the per-example vectors known (fixed starting parameters, THEORY.md section 9),
the output of one round is a finite Gaussian mixture under each hypothesis:

* under ``D``: one component per subset ``B`` of ``D`` (weight ``q^|B| (1-q)^(N-|B|)``),
  ``N(S_B / nu_D(B), (sigma C / nu_D(B))^2 I_n)``;
* under ``D'``: one per ``(B, b)``, ``b`` = whether the added point is sampled
  (extra weight ``q`` or ``1 - q``), ``N((S_B + b g_{N+1}) / nu_{D'}(B, b), (sigma C / nu_{D'})^2 I_n)``.

Every mean lies in the span ``V`` of the ``N + 1`` clipped vectors. With an
orthonormal basis ``U`` of a space containing ``V`` (``r = min(n, N + 1)`` columns,
from a QR factorisation), an output ``x`` enters every component's density only
through ``y = U^T x`` (``r`` numbers) and the squared norm ``R = ||x||^2 - ||y||^2`` of
its part orthogonal to ``V`` (``n - r`` dimensions):
``log N(x; m, s^2 I_n) = -(n/2) log(2 pi) - n log s - (||y - U^T m||^2 + R) / (2 s^2)``.
So the cost per trial is ``O(r n)`` for the projection plus ``O(K r)`` for ``K``
components, whatever ``n`` is. Components with equal mean and scale are merged
(their weights added), which turns the ``2^N`` subsets of worst-case data into
``N + 1`` batch sizes.

The paper's component *pairs* ``(P_B^i, Q_B^i)`` (Section 4) are the ``(B, b)``:
``P`` = the ``D`` component of ``B``, ``Q`` = the ``D'`` component of ``(B, b)``,
weight ``w_B q^b (1-q)^(1-b)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from paperlib.mechanisms import sampler as mech_mod
from paperlib.mechanisms.core import ANY, Mechanism
from paperlib.fdp.validation import ParameterError, check_positive, check_rate

__all__ = ["MAX_N_EXACT", "GaussianMixture", "PairSet", "WhiteBoxModel", "Projection"]

#: largest |D| whose 2^N subsets (and 2^(N+1) components of D') are enumerated
MAX_N_EXACT = 12


@dataclass
class GaussianMixture:
    """Isotropic Gaussian mixture with means given in the basis coordinates.

    ``logw`` (K,), ``coords`` (K, r) = ``U^T mean``, ``scale`` (K,) = standard deviation
    per coordinate, ``multiplicity`` (K,) = how many subsets were merged into each.
    """

    logw: np.ndarray
    coords: np.ndarray
    scale: np.ndarray
    multiplicity: np.ndarray

    @property
    def size(self) -> int:
        return int(self.logw.size)


@dataclass
class PairSet:
    """Component pairs ``(P_B^i, Q_B^i)`` (merged when equal), for the normality distinguisher."""

    weight: np.ndarray  # (K,) total probability of the merged pairs
    count: np.ndarray  # (K,) number of (B, b) merged
    coords_p: np.ndarray  # (K, r)
    scale_p: np.ndarray  # (K,)
    coords_q: np.ndarray
    scale_q: np.ndarray
    identical: np.ndarray  # (K,) bool: P == Q (no information; the vote is always a coin)

    @property
    def size(self) -> int:
        return int(self.weight.size)


@dataclass
class Projection:
    """``y = x U`` (m, r), ``sq_norm_y`` (m,), ``residual = ||x||^2 - ||y||^2`` (m,), all torch."""

    y: torch.Tensor
    sq_norm_y: torch.Tensor
    residual: torch.Tensor


def _merge(keys: np.ndarray, logw: np.ndarray, extra: np.ndarray | None = None):
    """Group equal rows of ``keys``; return (first index per group, log of summed weights, counts)."""
    _, first, inverse, counts = np.unique(keys, axis=0, return_index=True, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    lw = np.logaddexp.reduceat(logw[order], starts)
    return first, lw, counts


def _prob(logw: float) -> float:
    return float(math.exp(logw)) if math.isfinite(logw) else 0.0


class WhiteBoxModel:
    """Both output mixtures of one round of ``mechanism`` on given per-example vectors.

    Parameters
    ----------
    mechanism : {"sgm", "easgm", "asgm", "feasgm", "dpsur"}
        (``"dpsur"``: DPSUR's rule, whose empty batch is an exact-zero release, the atom
        :attr:`atom_logw`; its Gaussian parts are mixed over the separate draw's size, see
        :meth:`_dpsur`.)
    vectors : array (N+1, n); rows 0..N-1 are D, row N the added point (clipped here).
    q, sigma, C : sampling rate in (0, 1], noise multiplier > 0, clipping norm > 0.
    max_N : enumeration limit (default :data:`MAX_N_EXACT`).

    Raises ValueError for bad input, for ``N > max_N``, and for FEASGM with
    ``floor(N q) = 0`` (the round on D divides by zero: its output has no density).
    """

    def __init__(self, mechanism: str, vectors, q: float, sigma: float, C: float, max_N: int = MAX_N_EXACT):
        mechanism = Mechanism.parse(mechanism, ANY)
        self.mechanism = mechanism
        self.q = q = check_rate(q)
        self.sigma = sigma = check_positive(sigma, "sigma")
        self.C = C = check_positive(C, "C")
        v = mech_mod.as_vectors(vectors, device="cpu", dtype=torch.float64)
        N = v.shape[0] - 1
        if N > max_N:
            raise ParameterError("N",
                f"N = {N} > {max_N}: the exact distinguishers enumerate the 2^N subsets of D; use N <= {max_N}"
            )
        if mechanism.divides_by_zero(N, q):
            raise ParameterError("q",
                f"q: floor(N*q) = floor({N}*{q}) = 0, so FEASGM divides by zero on D (as Opacus v1.x: inf/nan "
                "outputs); there is no output density to audit. Choose N*q >= 1"
            )
        self.N, self.n = N, int(v.shape[1])
        clipped = mech_mod.clip(v, C).numpy()
        self.clipped = clipped
        # orthonormal basis of a space containing span(clipped rows): r = min(n, N+1) columns
        basis, _ = np.linalg.qr(clipped.T, mode="reduced")
        self.basis = np.ascontiguousarray(basis)  # (n, r)
        self.r = int(basis.shape[1])
        gc = clipped @ self.basis  # (N+1, r): coordinates of the clipped vectors
        self.vector_coords = gc

        masks = ((np.arange(2**N)[:, None] >> np.arange(N)[None, :]) & 1).astype(float)  # (2^N, N)
        k = masks.sum(axis=1)
        with np.errstate(divide="ignore"):
            lq = math.log(q)
            l1q = math.log1p(-q) if q < 1 else -math.inf
        with np.errstate(invalid="ignore"):
            logw_b = k * lq + np.where(N - k > 0, (N - k) * l1q, 0.0)  # (2^N,); q = 1: 0 * log 0 = 0
        sums = masks @ gc[:N]  # (2^N, r)
        sc = sigma * C

        #: log-probability of an exact-zero release (no step: DPSUR's empty batch) on D and D'; -inf otherwise
        self.atom_logw = {"D": -math.inf, "D'": -math.inf}
        if mechanism.draws_divisor:
            self._dpsur(masks, k, logw_b, sums, gc, lq, l1q, sc)
        else:
            nu_p = np.asarray(mechanism.normaliser(N, k, q), dtype=float)
            p_coords, p_scale = sums / nu_p[:, None], sc / nu_p
            q_coords, q_scale, q_logw = [], [], []
            for b in (0, 1):
                nu_q = np.asarray(mechanism.normaliser(N + 1, k + b, q), dtype=float)
                q_coords.append((sums + b * gc[N][None, :]) / nu_q[:, None])
                q_scale.append(sc / nu_q)
                q_logw.append(logw_b + (lq if b else l1q))
            q_coords = np.concatenate(q_coords)
            q_scale = np.concatenate(q_scale)
            q_logw = np.concatenate(q_logw)

            self.P = self._mixture(p_coords, p_scale, logw_b)
            self.Q = self._mixture(q_coords, q_scale, q_logw)
            self.pairs = self._pairs(np.concatenate([p_coords, p_coords]), np.concatenate([p_scale, p_scale]),
                                     q_coords, q_scale, q_logw)
        self._device_cache: dict = {}

    def _dpsur(self, masks, k, logw_b, sums, gc, lq, l1q, sc):
        """DPSUR's rule (THEORY.md §2, ``algorithm/DPSUR.py:145-146``): components ``(B, m)``.

        On D a non-empty batch ``B`` is divided by ``nu(m)``, ``m ~ Binomial(N, q)`` the size of
        the separate draw, independent of ``B`` (``nu(0) = N q``); on D' the batch is ``B + b``
        (``b``: the added record sampled) and ``m' ~ Binomial(N + 1, q)``. An empty batch is the
        atom at 0 (:attr:`atom_logw`), outside the Gaussian mixtures. The pairs couple the two
        separate draws as ``m' = m + e`` (``e``: the added record in ``B'``), so each pair is one
        joint draw of ``(B, b, B', e)``; an atom side of a pair has scale 0.
        """
        N, q, mech = self.N, self.q, self.mechanism
        with np.errstate(divide="ignore"):
            lb_D = stats.binom.logpmf(np.arange(N + 1), N, q)
            lb_Dp = stats.binom.logpmf(np.arange(N + 2), N + 1, q)
        nu_D = np.asarray(mech.normaliser(N, np.arange(N + 1), q), dtype=float)
        nu_Dp = np.asarray(mech.normaliser(N + 1, np.arange(N + 2), q), dtype=float)
        empty = k == 0
        self.atom_logw = {"D": float(logw_b[empty].sum()) if empty.any() else -math.inf,
                          "D'": float(logw_b[empty][0] + l1q) if empty.any() else -math.inf}
        # mixtures: every (B, m) with a non-empty batch
        pc, ps, pw = [], [], []
        for m in range(N + 1):
            pc.append(sums[~empty] / nu_D[m])
            ps.append(np.full(int((~empty).sum()), sc / nu_D[m]))
            pw.append(logw_b[~empty] + lb_D[m])
        qc, qs, qw = [], [], []
        for b in (0, 1):
            keep = (k + b) > 0
            for m in range(N + 2):
                qc.append((sums[keep] + b * gc[N][None, :]) / nu_Dp[m])
                qs.append(np.full(int(keep.sum()), sc / nu_Dp[m]))
                qw.append(logw_b[keep] + (lq if b else l1q) + lb_Dp[m])
        self.P = self._mixture(np.concatenate(pc), np.concatenate(ps), np.concatenate(pw))
        self.Q = self._mixture(np.concatenate(qc), np.concatenate(qs), np.concatenate(qw))
        # pairs: (B, m) on D with (B + b, m + e) on D'; atoms get coords 0 and scale 0
        a_pc, a_ps, a_qc, a_qs, a_w = [], [], [], [], []
        with np.errstate(divide="ignore"):
            lbin = {0: math.log1p(-q) if q < 1 else -math.inf, 1: math.log(q)}
        for m in range(N + 1):
            p_c = np.where(empty[:, None], 0.0, sums / nu_D[m])
            p_s = np.where(empty, 0.0, sc / nu_D[m])
            for b in (0, 1):
                for e in (0, 1):
                    q_empty = (k + b) == 0
                    a_pc.append(p_c)
                    a_ps.append(p_s)
                    a_qc.append(np.where(q_empty[:, None], 0.0, (sums + b * gc[N][None, :]) / nu_Dp[m + e]))
                    a_qs.append(np.where(q_empty, 0.0, sc / nu_Dp[m + e]))
                    a_w.append(logw_b + lbin[b] + lb_D[m] + lbin[e])
        self.pairs = self._pairs(np.concatenate(a_pc), np.concatenate(a_ps), np.concatenate(a_qc),
                                 np.concatenate(a_qs), np.concatenate(a_w))

    # ------------------------------------------------------------------ construction
    def _key(self, *cols):
        ref = self.sigma * self.C
        return np.round(np.column_stack(cols) / ref, 10) + 0.0  # + 0.0 turns -0.0 into 0.0

    def _mixture(self, coords, scale, logw) -> GaussianMixture:
        keep = np.isfinite(logw)
        coords, scale, logw = coords[keep], scale[keep], logw[keep]
        first, lw, counts = _merge(self._key(coords, scale), logw)
        return GaussianMixture(logw=lw, coords=coords[first], scale=scale[first], multiplicity=counts)

    def _pairs(self, pc, ps, qc, qs, logw) -> PairSet:
        keep = np.isfinite(logw)
        pc, ps, qc, qs, logw = pc[keep], ps[keep], qc[keep], qs[keep], logw[keep]
        first, lw, counts = _merge(self._key(pc, ps, qc, qs), logw)
        pc, ps, qc, qs = pc[first], ps[first], qc[first], qs[first]
        ident = np.all(self._key(pc, ps) == self._key(qc, qs), axis=1)
        return PairSet(weight=np.exp(lw), count=counts, coords_p=pc, scale_p=ps, coords_q=qc, scale_q=qs,
                       identical=ident)

    # ------------------------------------------------------------------ device-side helpers
    def on(self, device, dtype=torch.float64) -> dict:
        """Tensors of the model on ``device`` (cached): basis and both mixtures."""
        key = (str(device), dtype)
        if key not in self._device_cache:
            t = lambda a: torch.as_tensor(np.asarray(a), device=device, dtype=dtype)  # noqa: E731
            d = {"basis": t(self.basis)}
            for name, mix in (("P", self.P), ("Q", self.Q)):
                d[name] = {
                    "logw": t(mix.logw),
                    "coords": t(mix.coords),
                    "sq": t(np.sum(mix.coords**2, axis=1)),
                    "scale": t(mix.scale),
                }
            self._device_cache[key] = d
        return self._device_cache[key]

    def project(self, x: torch.Tensor) -> Projection:
        """Coordinates ``y = x U`` and residual squared norm of a chunk of outputs ``x`` (m, n)."""
        d = self.on(x.device, x.dtype)
        y = x @ d["basis"]
        sy = (y * y).sum(dim=1)
        res = torch.clamp(torch.linalg.vector_norm(x, dim=1) ** 2 - sy, min=0.0)
        if self.r == self.n:
            res = torch.zeros_like(res)
        return Projection(y=y, sq_norm_y=sy, residual=res)

    def is_atom(self, proj: Projection) -> torch.Tensor:
        """Bool (m,): the output is exactly 0 (DPSUR's no-step release; never for the other mechanisms)."""
        return (proj.sq_norm_y == 0) & (proj.residual == 0)

    def sq_dist(self, proj: Projection, coords: torch.Tensor, sq_coords: torch.Tensor) -> torch.Tensor:
        """``||x - m_c||^2`` for every trial and component: ``(m, K)``."""
        return (proj.sq_norm_y[:, None] - 2.0 * (proj.y @ coords.T) + sq_coords[None, :]
                + proj.residual[:, None]).clamp(min=0.0)

    def full_means(self, coords: np.ndarray) -> np.ndarray:
        """Means in R^n from basis coordinates (K, r) -> (K, n)."""
        return coords @ self.basis.T

    def describe(self) -> dict:
        extra = ({"atom_D": _prob(self.atom_logw["D"]), "atom_Dprime": _prob(self.atom_logw["D'"])}
                 if self.mechanism.skips_empty_batch else {})
        return {**extra, "N": self.N, "n": self.n, "r": self.r, "components_D": self.P.size,
                "components_Dprime": self.Q.size, "pairs": self.pairs.size,
                "identical_pairs": int(self.pairs.identical.sum())}
