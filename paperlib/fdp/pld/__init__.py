"""T-fold composition of privacy-loss laws on dp_accounting's PMFs: the one multi-round engine.

Every multi-round result of the project goes through it (THEORY.md §11): the SGM claim
``f_q^{⊗T}``, the ASGM upper bound of Eq. 14 over ``T`` rounds, the certified ``T``-round
guarantees (index revealed, ASGM through ``(|B|, S_B + G)``, DPSUR's own rule) and the composed
real attacks. Each result carries an error bracket: an upper end that is a valid upper bound
(never understated) and a lower end that is a valid lower bound, so the truth lies in
``[eps_low, eps_up]``.

Modules (one concern each):

* :mod:`~paperlib.fdp.pld.laws` — what is composed: a :class:`RoundLaw`, a mixture (index revealed)
  of products of *laws*, each a pair given by the law of its privacy loss under both sides
  (:class:`ShiftLaw`, :class:`DilutedLaw`, :class:`ScaleShiftLaw`, :class:`Chi2Law`,
  :class:`IndexedDilutedLaw`, :class:`DiscreteLaw`). The component ``T(N(0,I_n), N(mu e_1, s^2 I_n))``
  of THEORY.md §4 is ``ScaleShiftLaw(x, mu) ⊗ Chi2Law(n-1, x)``, so no noncentral chi-square with
  ``n = 10^6`` degrees of freedom is evaluated; a factor shared by every component is composed
  once (exactly for :class:`Chi2Law`: ``Chi2Law(T m, x)``).
* :mod:`~paperlib.fdp.pld.discretise` — a law on a grid: the pessimistic (connect-the-dots) upper end
  and the optimistic (merged cells, garbled onto the grid, first moment kept) lower end.
* :mod:`~paperlib.fdp.pld.engine` — the grid passes, composition with ``DensePLDPmf.self_compose`` /
  ``compose``, queries by ``get_delta_for_epsilon`` / ``get_epsilon_for_delta``.
* :mod:`~paperlib.fdp.pld.composition` — :class:`PLDComposition`, the public
  :class:`~paperlib.fdp.tradeoff.TradeOff`: ``epsilon_bounds(delta)``, ``delta_bounds(eps)``, the
  curves of both sides.

Two directions are kept: ``Q||P`` (the loss ``L`` under ``Q``) and ``P||Q`` (``-L`` under ``P``);
``delta(eps)`` is the larger of the two hockey-stick divergences, ``epsilon(delta)`` the larger
epsilon (Lebeda, Regehr, Kamath, Steinke 2024: each order composed separately).

Numerical floor: below ``delta = PLD_DELTA_FLOOR`` the FFT round-off (about ``1e-16`` per entry)
and the truncated tails are no longer negligible, and ValueError is raised.

dp_accounting (the ``[accounting]`` extra) is imported when a composition is built, never at
import time: ``import paperlib.fdp`` does not need it.
"""

from paperlib.fdp.pld.composition import PLDComposition, compose
from paperlib.fdp.pld.engine import (DEFAULT_MAX_LENGTH, DEFAULT_REL_TOL, EPS_SCALE_FLOOR, PLD_DELTA_FLOOR,
                                     ROUND_TAIL, TRUNCATION, require_dp_accounting)
from paperlib.fdp.pld.laws import (Chi2Law, DilutedLaw, DiscreteLaw, IndexedDilutedLaw, ReplaceLaw, RoundLaw,
                                   ScaleShiftLaw, ShiftLaw, round_law_from_mixture)

__all__ = [
    "ShiftLaw",
    "DilutedLaw",
    "ReplaceLaw",
    "ScaleShiftLaw",
    "Chi2Law",
    "IndexedDilutedLaw",
    "DiscreteLaw",
    "RoundLaw",
    "round_law_from_mixture",
    "PLDComposition",
    "compose",
    "PLD_DELTA_FLOOR",
    "DEFAULT_REL_TOL",
    "DEFAULT_MAX_LENGTH",
    "ROUND_TAIL",
    "TRUNCATION",
    "EPS_SCALE_FLOOR",
    "require_dp_accounting",
]
