"""One dispatch from a question to its curve: ``curve(mechanism, bound, N, q, sigma, n, rounds=T)``.

Every trade-off curve of a mechanism that the package computes is registered here, keyed by
the mechanism (:class:`~paperlib.mechanisms.core.Mechanism`), the bound and whether it is one
round (``T = 1``) or many (``T > 1``), in the manner of Opacus's ``accountants/registry.py``:

===========  =========================================  ===========================================
bound        one round (``T = 1``)                      ``T > 1`` rounds
===========  =========================================  ===========================================
guarantee    the per-pair guarantee: SGM its claim      the certified T-round guarantee
             ``f_q`` (Bu et al. 2020), EASGM Thm 3.6,   (:func:`~paperlib.mechanisms.certified.certified_guarantee`,
             FEASGM Thms A.2/A.3, ASGM (THEORY.md §6)   THEORY.md §11); SGM ``f_q^{⊗T}``
upper        its upper bound: Thms 3.8, 3.10 (Eq. 14),  the T-round upper bound (Thm A.6;
             A.4; SGM its claim                         :func:`~paperlib.mechanisms.multiround.rounds_upper_bound`)
guarantee    DPSUR's own rule: the certified guarantee  the same over T rounds
(DPSUR)      (count of the separate draw x SGM step,
             THEORY.md §11.4)
clt          the CLT bound of the upper bound (Thms     the same over T rounds (Corollary B.2)
             3.12/3.13, A.7): EASGM and FEASGM
===========  =========================================  ===========================================

Each entry is a builder ``fn(N, q, sigma, n, *, rounds, **options)`` returning a
:class:`~paperlib.fdp.tradeoff.TradeOff`; its accuracy is on that interface
(``epsilon_bounds``, ``accounting()``). A mechanism or bound added later (DPSUR's own rule, a
tighter certificate) registers with :func:`register`; :func:`curve` refuses a combination that
is not registered in one line listing those that are. This module imports the modules that
define the curves (guarantees, multiround, certified, clt); none of them imports it.
"""

from __future__ import annotations

from typing import Callable

from paperlib.fdp.tradeoff import TradeOff
from paperlib.fdp.validation import ParameterError, check_int
from paperlib.mechanisms.certified import certified_guarantee
from paperlib.mechanisms.clt import clt_bound
from paperlib.mechanisms.core import ANY, PAPER_MECHANISMS, Mechanism
from paperlib.mechanisms.guarantees import DEFAULT_TAIL_TOL, guarantee, upper_bound
from paperlib.mechanisms.multiround import rounds_upper_bound, sgm_claim_rounds
from paperlib.mechanisms.setting import Setting, checked

__all__ = ["curve", "register", "registered", "BOUNDS", "ONE", "MANY"]

#: the bounds a curve can be asked for
BOUNDS = ("guarantee", "upper", "clt")
#: the two kinds of rounds an entry covers
ONE, MANY = "one", "many"

_REGISTRY: dict[tuple[Mechanism, str, str], Callable[..., TradeOff]] = {}


def register(mechanism: Mechanism | str, bound: str, rounds: str = "any"):
    """Decorator: ``fn`` builds ``bound`` of ``mechanism`` for ``rounds`` in {``'one'``, ``'many'``, ``'any'``}.

    ``fn(N, q, sigma, n, *, rounds, **options)`` returns a :class:`~paperlib.fdp.tradeoff.TradeOff`.
    A new entry replaces an old one for the same key. ``bound`` is any name (``BOUNDS`` lists the
    ones the command line offers).
    """
    mech = Mechanism.parse(mechanism, allowed=ANY)
    if rounds not in (ONE, MANY, "any"):
        raise ParameterError("rounds", f"rounds must be 'one', 'many' or 'any', got {rounds!r}")
    if not isinstance(bound, str) or not bound:
        raise ParameterError("bound", f"bound must be a non-empty name, got {bound!r}")

    def deco(fn):
        for kind in ((ONE, MANY) if rounds == "any" else (rounds,)):
            _REGISTRY[(mech, bound, kind)] = fn
        return fn

    return deco


def registered() -> list[tuple[str, str, str]]:
    """The registered ``(mechanism, bound, rounds kind)`` triples, sorted."""
    return sorted((m.value, b, k) for m, b, k in _REGISTRY)


def _available() -> str:
    """What is registered, in words: ``"asgm: guarantee, upper; easgm: clt, guarantee, upper; ..."``."""
    kinds: dict = {}
    for m, b, k in registered():
        kinds.setdefault(m, {}).setdefault(b, set()).add(k)
    only = {frozenset({ONE}): " (T = 1 only)", frozenset({MANY}): " (T > 1 only)"}
    return "; ".join(f"{m}: " + ", ".join(b + only.get(frozenset(k), "") for b, k in bs.items())
                     for m, bs in kinds.items())


def curve(mechanism: Mechanism | str, bound: str, N: int, q: float, sigma: float, n: int, *, rounds: int = 1,
          progress=None, **options) -> TradeOff:
    """The curve of ``bound`` for ``mechanism`` on the pair of sizes ``(N, N+1)`` over ``rounds`` rounds.

    The table of the module docstring: the guarantees of THEORY.md §6 (Theorem 3.6, Theorems
    A.2/A.3), the upper bounds of §7 (Theorems 3.8, 3.10, A.4; A.6 over rounds), the CLT bounds of
    §8 (Theorems 3.12/3.13, A.7) and the certified T-round guarantee of §11.

    Parameters
    ----------
    mechanism : a :class:`~paperlib.mechanisms.core.Mechanism` or its name
    bound : ``'guarantee'``, ``'upper'`` or ``'clt'`` (module docstring), or a registered name
    N : int >= 1 (``|D|``; ``|D'| = N + 1``); q : sampling rate in (0, 1]; sigma : noise multiplier > 0
        (the upper bounds and CLT bounds of EASGM do not use it); n : int >= 1 (parameters)
    rounds : int >= 1
    progress : progress bar of a long numerical composition (None: on a terminal only;
        :mod:`paperlib.fdp.progress`)
    **options : the builder's accuracy options (``tail_tol`` of a one-round guarantee; ``step``,
        ``rel_tol``, ``max_length``, ``tail`` of a PLD composition)

    Returns a :class:`~paperlib.fdp.tradeoff.TradeOff` (``f(alpha)``, ``epsilon(delta)``,
    ``epsilon_bounds(delta)``, ``accounting()``, ``label``, ``meta``). Raises ValueError naming the
    parameter on bad input, and naming ``bound`` (with what is registered) for a combination that
    has no entry.
    """
    mech = Mechanism.parse(mechanism, allowed=ANY)
    T = check_int(rounds, "rounds", 1)
    kind = ONE if T == 1 else MANY
    fn = _REGISTRY.get((mech, bound, kind))
    if fn is None:
        raise ParameterError("bound", f"bound: {bound!r} is not defined for mechanism {mech.value} over "
                         f"{'1 round' if T == 1 else f'{T} rounds'}; registered: {_available()}")
    c = fn(N, q, sigma, n, rounds=T, **options)
    if progress is not None:
        c.progress = progress
    return c


# ------------------------------------------------------------------------------------ registrations
for _m in PAPER_MECHANISMS:
    register(_m, "guarantee", ONE)(
        lambda N, q, sigma, n, *, rounds, tail_tol=DEFAULT_TAIL_TOL, _m=_m: guarantee(_m, N, q, sigma, n,
                                                                                        tail_tol=tail_tol))
    register(_m, "upper", ONE)(lambda N, q, sigma, n, *, rounds, _m=_m: upper_bound(_m, N, q, sigma, n))
    register(_m, "upper", MANY)(
        lambda N, q, sigma, n, *, rounds, _m=_m, **pld: rounds_upper_bound(_m, N, q, sigma, n, rounds=rounds, **pld))


def _sgm_rounds(N, q, sigma, n, *, rounds, **pld):
    checked(N=N, q=q, sigma=sigma, n=n)  # N and n do not enter the claim, but must be valid
    return sgm_claim_rounds(q, sigma, rounds=rounds, side="lower", **pld)


def _clt(mech: Mechanism):
    def build(N, q, sigma, n, *, rounds):
        if check_int(n, "n", 1) < 2:
            raise ParameterError("n", "n must be >= 2 for the CLT bound (it composes n-1 coordinates)")
        return clt_bound(mech, N, q, sigma, n, rounds=rounds)
    return build


for _m in Mechanism:
    if _m.spec.sgm_always:  # SGM over T rounds: its claim f_q^(xT)
        register(_m, "guarantee", MANY)(_sgm_rounds)
    elif _m.spec.paper:  # the certified T-round guarantee (THEORY.md §11)
        register(_m, "guarantee", MANY)(
            lambda N, q, sigma, n, *, rounds, _m=_m, **pld: certified_guarantee(Setting(_m, N, q, sigma, n,
                                                                                        rounds=rounds), **pld))
    else:  # DPSUR's own rule (THEORY.md §11.4): its certified guarantee, one round or many; no upper bound or
        # CLT bound of the paper's kind exists for it
        register(_m, "guarantee")(
            lambda N, q, sigma, n, *, rounds, _m=_m, **pld: certified_guarantee(Setting(_m, N, q, sigma, n,
                                                                                        rounds=rounds), **pld))
    if _m.spec.clt in ("3.13", "A.7"):  # any number of rounds (Corollary B.2, Theorem A.7)
        register(_m, "clt")(_clt(_m))
del _m
