"""The public object: :class:`PLDComposition`, the ``T``-fold composition of a round law with its bracket."""

from __future__ import annotations

import numpy as np

from paperlib.fdp.pld.engine import (DEFAULT_MAX_LENGTH, export_pld, DEFAULT_REL_TOL, EPS_SCALE_FLOOR, PLD_DELTA_FLOOR,
                                     ROUND_TAIL, TRUNCATION, Engine, State, require_dp_accounting)
from paperlib.fdp.pld.laws import RoundLaw, round_law_from_mixture
from paperlib.fdp.tradeoff import TradeOff, TradeOffCurve, check_tradeoff, lower_convex_envelope
from paperlib.fdp.validation import ParameterError, check_alpha_array, check_delta, check_int, check_positive

__all__ = ["PLDComposition", "compose"]


class PLDComposition(TradeOff):
    """The ``T``-fold composition of a round law, with its error bracket (:mod:`paperlib.fdp.pld`).

    Parameters
    ----------
    law : :class:`RoundLaw` (or an :class:`~paperlib.fdp.mixture.LRMixture`, converted by
        :func:`round_law_from_mixture`)
    rounds : int >= 1
    side : ``"guarantee"`` (default): ``epsilon``/``delta`` are the upper ends (valid upper bounds on
        the composition's privacy loss, never understated) and the curve is a lower bound of the
        trade-off function; ``"bound"``: for a curve that is itself an *upper bound* of a guarantee
        (the ASGM Eq. 14 bound), ``epsilon``/``delta`` are the lower ends and the curve never lies
        below the composed trade-off.
    step : float > 0 or None — grid of the privacy loss; ``None`` chooses it (coarse pass, then
        finer ones until the bracket meets ``rel_tol``; see the module docstring).
    rel_tol : float in (0, 1) — target bracket width relative to ``max(eps, 0.1)`` (``delta``:
        relative to ``delta``); default 0.01.
    max_length : int — largest composed PMF length (default ``2**23``).
    tail : float — per-round mass left beyond each law's grid (to +inf on the upper end).
    progress : None, bool or callable — progress bar of each grid pass (:mod:`paperlib.fdp.progress`;
        None: on a terminal's stderr only, after a few seconds); also settable as ``.progress``.

    Methods: ``epsilon(delta)``, ``epsilon_bounds(delta)``, ``delta(eps)``, ``delta_bounds(eps)``,
    ``f(alpha)`` (the ordered trade-off ``T(P, Q)`` on this side), ``lower(alpha)``, ``upper(alpha)``,
    ``curve(tol)``, ``max_error()``, ``view(side)``; attributes ``step``, ``rounds``, ``label``,
    ``meta`` (grid, tail and truncation masses, lower-end shift, passes, whether the target
    accuracy was met). ``pld`` is the object itself.

    Raises ValueError naming the parameter on bad input, for ``delta < PLD_DELTA_FLOOR``, and
    "could not compute ..." when no grid fits ``max_length``; ModuleNotFoundError naming the
    ``[accounting]`` extra when dp_accounting is missing.
    """

    def __init__(self, law, rounds: int, *, side: str = "guarantee", step: float | None = None,
                 rel_tol: float = DEFAULT_REL_TOL, max_length: int = DEFAULT_MAX_LENGTH, tail: float = ROUND_TAIL,
                 label: str = "", meta: dict | None = None, _engine: Engine | None = None, progress=None):
        if side not in ("guarantee", "bound"):
            raise ValueError(f"side must be 'guarantee' or 'bound', got {side!r}")
        self.side = side
        self.label = label
        self.meta = dict(meta or {})
        if _engine is None:
            require_dp_accounting()
            if not isinstance(law, RoundLaw):
                law = round_law_from_mixture(law)
            rounds = check_int(rounds, "rounds", 1)
            if step is not None:
                step = check_positive(step, "step")
            if not (isinstance(rel_tol, (int, float)) and 0 < rel_tol < 1):
                raise ValueError(f"rel_tol must be in (0, 1), got {rel_tol!r}")
            max_length = check_int(max_length, "max_length", 256)
            if not (isinstance(tail, (int, float)) and 0 < tail <= 1e-6):
                raise ValueError(f"tail must be in (0, 1e-6], got {tail!r}")
            _engine = Engine(law, rounds, step=step, rel_tol=float(rel_tol), max_length=max_length,
                              tail=float(tail))
        if progress is not None:
            _engine.progress = progress
        self._engine = _engine
        self.rounds = _engine.rounds
        self._curves: dict = {}

    @property
    def progress(self):
        """Progress bar of each grid pass: None (on a terminal's stderr after a few seconds), True,
        False or a callable ``fn(done, total)`` (:mod:`paperlib.fdp.progress`); settable."""
        return self._engine.progress

    @progress.setter
    def progress(self, value) -> None:
        self._engine.progress = value

    # ------------------------------------------------------------ views and state
    def view(self, side: str, label: str | None = None, meta: dict | None = None) -> "PLDComposition":
        """The same composition (shared grids) seen from ``side``."""
        m = dict(self.meta)
        m.update(meta or {})
        return PLDComposition(None, self.rounds, side=side, label=self.label if label is None else label, meta=m,
                              _engine=self._engine)

    @property
    def pld(self) -> "PLDComposition":
        return self

    @property
    def step(self) -> float:
        return self._engine.ensure().step

    def _state(self) -> State:
        return self._engine.ensure()

    def accounting(self) -> dict:
        """How the current grid was obtained: step, passes, tail masses, shifts, accuracy met."""
        st = self._state()
        e = self._engine
        return {"engine": "dp_accounting PLD (connect-the-dots upper, merged-cell lower)",
                "step": st.step, "rounds": e.rounds, "passes": list(e.passes), "rel_tol": e.rel_tol,
                "accuracy_met": e.accuracy_met, "tail_per_round": e.tail, "truncation": TRUNCATION,
                "directions": st.info}

    def _meta_update(self):
        self.meta.update(pld=self.accounting())

    # ------------------------------------------------------------ interop
    def to_dp_accounting(self, estimate: str = "pessimistic", value_discretization_interval: float | None = None):
        """This composition as a dp_accounting ``PrivacyLossDistribution``, to compose with a user's other
        events (``pld.compose(other)``) and query with dp_accounting's own methods.

        ``estimate``: ``"pessimistic"`` (the upper end: its ``get_epsilon_for_delta`` is never below this
        composition's true epsilon; connect-the-dots, Doroshenko et al. 2022) or ``"optimistic"`` (the lower
        end: never above it; the merged-cell PMF with its losses moved down by the lower end's shift,
        rounded down to the grid, which keeps it optimistic). ``pmf_remove`` holds the direction ``Q||P``
        (the loss ``log q/p`` under ``Q``, the data set with the target as the first distribution, dp_accounting's
        "remove" adjacency) and ``pmf_add`` the direction ``P||Q``. ``value_discretization_interval``: the grid
        of the export (dp_accounting composes only PLDs of one interval: give your other events' interval;
        a finer one also keeps the error small over many compositions); default this composition's grid step.

        Raises ValueError naming ``estimate`` for another value, and for ``"optimistic"`` where the lower end
        is more than a PMF (a mass subtracted after composition, or a hidden event's defect): compose the
        one-round export in dp_accounting instead. ModuleNotFoundError naming the ``[accounting]`` extra
        when dp_accounting is missing. Source: THEORY.md §11 (the engine's two ends).
        """
        if estimate not in ("pessimistic", "optimistic"):
            raise ValueError(f"estimate must be 'pessimistic' or 'optimistic', got {estimate!r}")
        if value_discretization_interval is None:
            return export_pld(self._state(), estimate)
        step = check_positive(value_discretization_interval, "value_discretization_interval")
        return export_pld(self._engine.build(step), estimate)  # one pass on that grid; this composition's stays

    # ------------------------------------------------------------ profiles
    def epsilon_bounds(self, delta: float) -> tuple[float, float]:
        """``(eps_low, eps_up)`` with ``eps_low <= eps(delta) <= eps_up`` for the exact composition.

        ``delta`` in ``[PLD_DELTA_FLOOR, 1)``. Refines the grid until the bracket meets ``rel_tol``
        (when the grid was not fixed); ``meta['pld']['accuracy_met']`` says whether it did.
        """
        delta = check_delta(delta)
        if delta < PLD_DELTA_FLOOR:
            raise ParameterError("delta", f"delta must be >= {PLD_DELTA_FLOOR:g} for a multi-round composition (FFT "
                             f"round-off and truncated tails are not negligible below), got {delta!r}")
        lo, hi = self._engine.epsilon_bounds(delta)
        self._meta_update()
        return float(lo), float(hi)

    def epsilon(self, delta: float) -> float:
        """Upper end (``side='guarantee'``) or lower end (``side='bound'``) of :meth:`epsilon_bounds`."""
        lo, hi = self.epsilon_bounds(delta)
        return hi if self.side == "guarantee" else lo

    def delta_bounds(self, eps) -> tuple[np.ndarray, np.ndarray]:
        """``(delta_low, delta_up)`` at each ``eps >= 0`` (arrays of ``eps``'s shape)."""
        e = np.asarray(eps, dtype=float)
        if not np.all(np.isfinite(e)) or np.any(e < 0):
            raise ParameterError("eps", f"eps must be finite and >= 0, got {eps!r}")
        lo, hi = self._engine.delta_bounds(np.atleast_1d(e))
        self._meta_update()
        return lo.reshape(e.shape), hi.reshape(e.shape)

    def order_delta_bounds(self, eps) -> dict:
        """Each order's hockey-stick divergence on the current grid: ``{"QP": (lo, hi), "PQ": (lo, hi)}``,
        ``"QP"`` for ``H(Q||P)`` (the loss under ``Q``), ``"PQ"`` for ``H(P||Q)``, at each ``eps`` of a sorted
        1-D array (vectorised: a chain of pairs needs whole profiles, THEORY.md §11.3b). ``lo <= exact <= hi``
        on this grid; call :meth:`epsilon_bounds` first to refine the grid to ``rel_tol`` near a ``delta``."""
        e = np.asarray(eps, dtype=float)
        if e.ndim != 1 or not np.all(np.isfinite(e)) or np.any(np.diff(e) < 0):
            raise ParameterError("eps", "eps must be a sorted 1-D array of finite values")
        st = self._state()
        return {d: st.direction_delta(d, e) for d in ("QP", "PQ")}

    def delta(self, eps):
        lo, hi = self.delta_bounds(eps)
        d = hi if self.side == "guarantee" else lo
        return d if np.ndim(eps) else float(d)

    def delta_limit(self) -> float:
        st = self._state()
        return max(st.up[d].inf for d in ("QP", "PQ")) if self.side == "guarantee" else 0.0

    def delta_floor(self) -> float:
        return PLD_DELTA_FLOOR

    # ------------------------------------------------------------ curves (ordered pair T(P, Q))
    def _chains(self):
        """Vertices of the pessimistic curve (a lower bound of ``T(P, Q)``) and of an upper bound.

        The upper bound: the optimistic pair's curve, thinned (its chord only rises), capped by
        ``1 - alpha`` and replaced by its lower convex envelope: every step stays above the true
        (convex) trade-off function, which lies below both ``1 - alpha`` and the optimistic curve.
        """
        st = self._state()
        key = ("chains", st.step)
        if key not in self._curves:
            a_lo, b_lo = st.up["QP"].chain(deficit_to_inf=True)
            a, b = st.low["QP"].chain(st.shift["QP"])
            idx = _thin(a, b)
            a, b = a[idx], b[idx]
            grid = np.union1d(np.clip(a, 0.0, 1.0), [0.0, 1.0])
            yb = np.clip(np.minimum(np.interp(grid, a, b), 1.0 - grid), 0.0, 1.0)
            a_up, b_up = lower_convex_envelope(grid, yb)
            self._curves[key] = ((a_lo, b_lo), (a_up, b_up))
        return self._curves[key]

    def lower(self, alpha) -> np.ndarray:
        """A lower bound of the composed ``T(P, Q)`` (the pessimistic pair's exact curve)."""
        a = check_alpha_array(alpha)
        (al, bl), _ = self._chains()
        out = np.interp(a, al, bl, right=0.0)
        return np.clip(np.minimum(out, 1.0 - a), 0.0, 1.0)

    def upper(self, alpha) -> np.ndarray:
        """An upper bound of the composed ``T(P, Q)`` (the optimistic, shifted pair's curve)."""
        a = check_alpha_array(alpha)
        _, (au, bu) = self._chains()
        out = np.interp(a, au, bu)
        return np.clip(np.minimum(out, 1.0 - a), 0.0, 1.0)

    def __call__(self, alpha) -> np.ndarray:
        return self.lower(alpha) if self.side == "guarantee" else self.upper(alpha)

    def beta_bounds(self, alpha) -> tuple[np.ndarray, np.ndarray]:
        """``(lower(alpha), upper(alpha))``, refining the grid (when not fixed) until their largest gap is
        at most ``rel_tol * max(beta, 0.1)``; ``meta['pld']['accuracy_met']`` says whether it was reached."""
        a = check_alpha_array(alpha)
        e = self._engine
        e.ensure()
        while True:
            lo, hi = self.lower(a), self.upper(a)
            width = float(np.max(hi - lo))
            tol = e.rel_tol * max(float(np.max(hi)), EPS_SCALE_FLOOR)
            if width <= tol:
                e.accuracy_met = True
                break
            if not e.refine(width, tol):
                e.accuracy_met = False
                break
        self._meta_update()
        return lo, hi

    def max_error(self, grid: int = 2001) -> float:
        """Largest ``upper - lower`` on an alpha grid: the discretisation error of the curve."""
        a = np.linspace(0.0, 1.0, grid)
        return float(np.max(self.upper(a) - self.lower(a)))

    def curve(self, tol: float = 1e-6) -> TradeOffCurve:
        """This side as a :class:`~paperlib.fdp.tradeoff.TradeOffCurve` (checked to be a trade-off function).

        Guarantee side: points of the pessimistic curve thinned to about 25,000 with their exact
        slopes, so ``curve.lower`` stays a valid lower bound (``curve(alpha)`` is the chord, within
        ``max_gap``). Bound side: the optimistic curve's points, thinned (the chord only rises).
        ``tol`` is accepted; the curve's own error is ``max_error()``.
        """
        st = self._state()
        key = (self.side, st.step)
        if key in self._curves:
            return self._curves[key]
        (al, bl), (au, bu) = self._chains()
        a, b = (al, bl) if self.side == "guarantee" else (au, bu)
        if self.side == "guarantee":
            a = np.minimum(a, 1.0)  # the chain's alpha sums to 1 up to round-off (1 + 4e-11 seen)
            if a[-1] < 1.0:
                a, b = np.append(a, 1.0), np.append(b, 0.0)
            keep = np.ones(a.size, dtype=bool)
            keep[1:] = (np.diff(a) > 0) | (np.diff(b) != 0)
            a, b = a[keep], b[keep]
        slope = None
        if self.side == "guarantee":
            # the outgoing segment's slope of the full (convex) chain: a subgradient at each vertex
            with np.errstate(divide="ignore", invalid="ignore"):
                s = np.diff(b) / np.diff(a)
            full_slope = np.concatenate([np.where(np.isfinite(s), s, -np.inf), [0.0]])
        idx = _thin(a, b)
        a, b = a[idx], b[idx]
        if self.side == "guarantee":
            slope = full_slope[idx]
        meta = dict(self.meta)
        meta.update(side=self.side, max_error=self.max_error(), step=st.step)
        c = TradeOffCurve(a, np.clip(b, 0.0, 1.0), slope, label=self.label, meta=meta)
        why = check_tradeoff(c.alpha, c.beta, 1e-9)
        if why is not None:
            raise RuntimeError(f"could not compute a valid trade-off curve for these parameters ({why})")
        self._curves[key] = c
        return c


def _thin(a: np.ndarray, b: np.ndarray, n: int = 12_000) -> np.ndarray:
    """Indices of vertices to keep: near a dense grid of alpha and of beta levels, plus the ends."""
    if a.size <= 2 * n:
        return np.arange(a.size)
    levels = np.unique(np.concatenate([np.linspace(0, 1, n), np.logspace(-16, 0, 800)]))
    ia = np.searchsorted(a, levels)
    ib = np.searchsorted(-b, -levels)
    idx = np.concatenate([ia, ia - 1, ib, ib - 1, [0, a.size - 1]])
    return np.unique(np.clip(idx, 0, a.size - 1))


def compose(mixture_or_law, rounds: int, *, side: str = "guarantee", label: str = "", meta: dict | None = None,
            **options) -> PLDComposition:
    """``PLDComposition(mixture_or_law, rounds, side=..., **options)`` (see the class)."""
    return PLDComposition(mixture_or_law, rounds, side=side, label=label, meta=meta, **options)
