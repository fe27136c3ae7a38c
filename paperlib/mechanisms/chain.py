"""The chain certificate of EASGM and FEASGM (THEORY.md §11.3b): SGM and a scale test, chained.

EASGM and FEASGM (floors differ) divide the noisy sum by a public constant that differs between ``D``
(``N`` records) and ``D'`` (``N + 1``). In units of the noisy sum ``Y = S_B + G`` (the update map
``F(theta, Y / c)`` is post-processing), ``D`` releases ``Y`` and ``D'`` releases ``s Y'`` with
``s = x/(x + 1)`` (EASGM ``x = N``; FEASGM ``x = floor(N q)``). A hybrid ``H`` sits between them, and two
per-round dominating pairs compose over ``T`` adaptive rounds:

* **route "SGM first"**: ``H`` = SGM on ``D'``. ``D`` vs ``H`` is one SGM round (add/remove, Poisson):
  the SGM pair ``N(0,1)`` vs ``(1 - q) N(0,1) + q N(1/sigma, 1)``, amplified. ``H`` vs ``D'`` is a scale
  test on the same batch: revealing the batch (post-processing in reverse) leaves, given ``|B'| = m``,
  ``N(0, I_n)`` vs ``N(c_m, s^2 I_n)`` with ``||c_m|| <= (1 - s) m / sigma``, worst at the largest norm
  (its trade-off falls as ``||c||`` grows: paper Theorem 3.4; a test checks it), weighted by
  ``Bin(m; N + 1, q)``: ``ScaleShiftLaw(x, c_m) ⊗ Chi2Law(n - 1, x)``, index revealed.
* **route "scale first"**: ``H`` = ``D``'s batch with ``D'``'s divisor: the scale test on ``D``
  (``m ~ Bin(N, q)``), then ``s`` times the SGM pair (a bijection of it).

The hockey-stick divergence splits through ``H``: for any event ``S``,
``P(S) - e^{a + b} R(S) = [P(S) - e^a H(S)] + e^a [H(S) - e^b R(S)]``, so
``delta_{P,R}(a + b) <= delta_{P,H}(a) + e^a delta_{H,R}(b)``; each order of the pair is chained
separately (``D||D'`` through ``H`` and ``D'||D`` through ``H``), the best split taken on a grid, the
smaller route per order and the larger order at the end (Lebeda, Regehr, Kamath, Steinke 2024). The
certificate holds for every gradient configuration and keeps the amplification of both parts; its
``n``-dependence is the scale test's, as the truth's is. The index-revealed certificate (THEORY.md §6)
stays valid too: :func:`paperlib.mechanisms.certified.certified_interval` reports the smaller.
"""

from __future__ import annotations

import math

import numpy as np

from paperlib.fdp.pld import DEFAULT_REL_TOL, PLDComposition, RoundLaw, ScaleShiftLaw, Chi2Law
from paperlib.fdp.validation import ParameterError
from paperlib.mechanisms.certificates import certificate_tail
from paperlib.mechanisms.guarantees import binomial_pair
from paperlib.mechanisms.multiround import sgm_claim_rounds
from paperlib.mechanisms.setting import Setting

__all__ = ["ChainCertificate", "chain_certificate", "scale_round_law", "chain_crossing"]

#: Points of the grid of epsilon on which the split ``a + b`` is searched (the answer is a grid point
#: where the chained delta is at most the target: valid; the grid costs at most one spacing).
SPLIT_GRID = 4000


def scale_round_law(batch_from: int, N: int, q: float, sigma: float, n: int, x: float, tail: float) -> RoundLaw:
    """One round of the scale part: ``sum_m Bin(m; batch_from, q) T(N(0, I_n), N(c_m e_1, s^2 I_n))``, index
    revealed, ``c_m = m / ((x + 1) sigma)`` (``= (1 - s) m / sigma``), ``s = x / (x + 1)``.

    ``batch_from``: the size of the data set the batch is drawn from, ``N + 1`` (route "SGM first") or ``N``
    ("scale first"), ``N`` the smaller size of the pair; the sizes of :func:`binomial_pair` at ``tail``, the mass
    beyond them left out (infinite loss on the upper end: at most ``T`` times it added to delta)."""
    m, p, pq, out_q, out_p = binomial_pair(N, q, tail)
    w, out = (pq, out_q) if batch_from == N + 1 else (p, out_p)
    parts = [(float(wi), (ScaleShiftLaw(x, float(mi) / ((x + 1.0) * sigma)),)) for mi, wi in zip(m, w) if wi > 0]
    common = (Chi2Law(n - 1, x),) if n > 1 else ()
    return RoundLaw(parts, common=common, dropped=out,
                    description={"batch_from": batch_from, "x": x, "sizes_kept": int(m.size)})


def chain_crossing(first: np.ndarray, second: np.ndarray, grid: np.ndarray, delta: float) -> int | None:
    """The first index ``k`` of ``grid`` where ``min_{i <= k} first[i] + e^{grid[i]} second[k - i] <= delta``, or None.

    The chained delta does not increase with ``k`` (each term falls and more splits join), so a bisection over
    ``k`` evaluates it at about ``log2(len(grid))`` points, each ``O(k)``, instead of the whole min-plus product."""
    scale = np.exp(np.minimum(grid, 700.0))

    def at(k: int) -> float:
        return float(np.min(first[: k + 1] + scale[: k + 1] * second[k::-1]))

    lo, hi = 0, grid.size - 1
    if at(hi) > delta:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if at(mid) > delta else (lo, mid)
    return lo


class ChainCertificate:
    """The chain certificate of a :class:`~paperlib.mechanisms.setting.Setting` of EASGM or FEASGM (floors
    differ) for the pair ``(N, N + 1)`` over its rounds (module docstring; THEORY.md §11.3b).

    ``epsilon_bounds(delta) -> (lo, hi)``: ``hi`` is a certified epsilon (valid for every gradient
    configuration, never understated); ``lo`` the same chain computed from the lower ends of the three
    compositions (the accounting bracket of the certificate, not a bound of the truth). ``meta``: the
    parts' epsilons, the route and split chosen per order; ``label``. Raises ParameterError naming
    ``mechanism`` for a mechanism whose divisor does not differ between the two data sets.
    """

    def __init__(self, setting: Setting, *, rel_tol: float = DEFAULT_REL_TOL, **pld_options):
        s = setting
        if s.spec.scale_ratio is None or s.equals_sgm():
            raise ParameterError("mechanism", f"mechanism: the chain certificate is for a divisor that is a public "
                                 f"constant differing between the two data sets (EASGM, FEASGM with differing "
                                 f"floors), got {s.mechanism.value!r} on this pair")
        if s.q >= 1:
            raise ParameterError("q", f"q must be < 1 for the chain certificate, got {s.q!r}")
        self.setting = s
        self.rel_tol = rel_tol
        x, words = s.spec.scale_ratio(s.N, s.q)
        self.x = float(x)
        T = s.rounds
        tail = certificate_tail(T)
        self.sgm = sgm_claim_rounds(s.q, s.sigma, rounds=T, rel_tol=rel_tol, **pld_options)
        self.scale = {route: PLDComposition(scale_round_law(size, s.N, s.q, s.sigma, s.n, self.x, tail), T,
                                            side="guarantee", rel_tol=rel_tol, **pld_options)
                      for route, size in (("sgm first", s.N + 1), ("scale first", s.N))}
        self.label = f"{s.spec.title} certified (chain: SGM and a scale test), {T} round{'s' * (T > 1)} (PLD)"
        self.meta = {"mechanism": s.mechanism.value, "bound": "certified", "N": s.N, "q": s.q, "sigma": s.sigma,
                     "n": s.n, "rounds": T, "pair": [s.N, s.N + 1], "scale_x": self.x, "divisors": words}
        if s.spec.floors is not None:
            K, K1 = s.spec.floors(s.N, s.q)
            self.meta.update(K=K, K_prime=K1, case="floors differ")
        self._cache: dict = {}

    def _parts(self, delta: float) -> dict:
        parts = {"sgm": self.sgm.epsilon_bounds(delta)}
        for route, c in self.scale.items():
            parts[route] = c.epsilon_bounds(delta)
        return parts

    def _profiles(self, emax: float):
        grid = np.linspace(0.0, emax, SPLIT_GRID)
        prof = {"sgm": self.sgm.order_delta_bounds(grid)}
        for route, c in self.scale.items():
            prof[route] = c.order_delta_bounds(grid)
        return grid, prof

    def epsilon_bounds(self, delta: float) -> tuple[float, float]:
        """``(lo, hi)``: the certified epsilon at ``delta`` (``hi``) and its accounting bracket (class docstring)."""
        if delta in self._cache:
            return self._cache[delta]
        parts = self._parts(delta)
        self.meta["parts"] = {k: list(v) for k, v in parts.items()}
        top = parts["sgm"][1] + max(parts["sgm first"][1], parts["scale first"][1])
        if not math.isfinite(top):
            self._cache[delta] = (math.inf, math.inf)
            return self._cache[delta]
        # each part is needed up to about the sum of their epsilons at delta (a little more: the deltas add)
        emax = 1.25 * top + 0.5
        for _ in range(6):
            out = self._chain(delta, emax)
            if out is not None:
                self._cache[delta] = out
                return out
            emax *= 2.0
        self._cache[delta] = (math.inf, math.inf)
        return self._cache[delta]

    def _chain(self, delta: float, emax: float):
        grid, prof = self._profiles(emax)
        # the orders: D||D' is P||Q of the SGM pair (P = D) and of the scale pair (P = the hybrid);
        # D'||D is Q||P of both. Route "SGM first": D -> SGM on D' -> D'; "scale first": D -> scaled D -> D'.
        routes = {("D||D'", "sgm first"): (prof["sgm"]["PQ"], prof["sgm first"]["PQ"]),
                  ("D||D'", "scale first"): (prof["scale first"]["PQ"], prof["sgm"]["PQ"]),
                  ("D'||D", "sgm first"): (prof["sgm first"]["QP"], prof["sgm"]["QP"]),
                  ("D'||D", "scale first"): (prof["sgm"]["QP"], prof["scale first"]["QP"])}
        ends = {}
        for end, j in (("lo", 0), ("hi", 1)):
            per_order = {}
            for (order, route), (a, b) in routes.items():
                k = chain_crossing(a[j], b[j], grid, delta)
                eps = math.inf if k is None else float(grid[max(k - (j == 0), 0)])
                if order not in per_order or eps < per_order[order][0]:
                    per_order[order] = (eps, route)
            ends[end] = per_order
        lo = max(e for e, _ in ends["lo"].values())
        hi = max(e for e, _ in ends["hi"].values())
        if not math.isfinite(hi):
            return None  # the grid ends before the chain reaches delta: a longer one
        self.meta["routes"] = {order: route for order, (_, route) in ends["hi"].items()}
        self.meta["split_grid"] = float(grid[1] - grid[0])
        self.meta["pld"] = {"accuracy_met": bool(hi - lo <= self.rel_tol * max(hi, 0.1) + 2 * (grid[1] - grid[0])),
                            "step": self.sgm.step}
        return min(lo, hi), hi

    def epsilon(self, delta: float) -> float:
        return self.epsilon_bounds(delta)[1]


def chain_certificate(setting: Setting, *, rel_tol: float = DEFAULT_REL_TOL, **pld_options) -> ChainCertificate:
    """:class:`ChainCertificate` of ``setting`` (EASGM, or FEASGM whose floors differ)."""
    return ChainCertificate(setting, rel_tol=rel_tol, **pld_options)
