"""One mechanism on one pair of data sets, as a value: :class:`Setting`.

A :class:`Setting` says what every computation of :mod:`paperlib.mechanisms` needs (THEORY.md §0,
§11): the mechanism (an entry of the table of mechanisms), the pair of data-set sizes ``(N, N + 1)``,
the sampling rate ``q``, the noise multiplier ``sigma``, the number of parameters ``n``, the number of
rounds, and what a run adds: the clipping norm ``C``, ``delta``, which neighbour of a training set the
pair is (``"removal"``: the training set is the larger data set; ``"addition"``: the smaller) and the
neighbouring relation (THEORY.md §11.3d: ``"add/remove"``, the data-set size private; ``"replace-one"``,
the size public).

It is validated once, when it is made, by :func:`validate` (one :class:`~paperlib.fdp.validation.ParameterError`
naming the field and its allowed range); the functions that take it trust it. Limits that depend on
the computation (FEASGM's division by zero, a certificate's ``q < 1``, grid sizes, floors of
``delta``) are the computation's and are checked there.
"""

from __future__ import annotations

from dataclasses import dataclass

from paperlib.fdp.validation import ParameterError, check_delta, check_int, check_positive, check_rate
from paperlib.mechanisms.core import ANY, Mechanism

__all__ = ["Setting", "validate", "checked", "NEIGHBOURS", "RELATIONS"]

#: which neighbour of a training set the pair ``(N, N + 1)`` is (None: a pair, no training set named)
NEIGHBOURS = (None, "removal", "addition")
#: the neighbouring relations (THEORY.md §11.3d)
RELATIONS = ("add/remove", "replace-one")


@dataclass(frozen=True)
class Setting:
    """One mechanism on the pair of data sets of sizes ``(N, N + 1)`` (module docstring).

    Fields: ``mechanism`` (a :class:`~paperlib.mechanisms.core.Mechanism`, a registered mechanism or its
    name; stored as the mechanism value), ``N`` int >= 1, ``q`` in (0, 1], ``sigma`` > 0, ``n`` int >= 1,
    ``rounds`` int >= 1 (default 1), ``delta`` in (0, 1) or None, ``C`` > 0 (default 1), ``neighbour`` in
    :data:`NEIGHBOURS`, ``relation`` in :data:`RELATIONS` (default ``"add/remove"``).

    Raises :class:`~paperlib.fdp.validation.ParameterError` (a ValueError) naming the first bad field.
    """

    mechanism: Mechanism
    N: int
    q: float
    sigma: float
    n: int
    rounds: int = 1
    delta: float | None = None
    C: float = 1.0
    neighbour: str | None = None
    relation: str = "add/remove"

    def __post_init__(self):
        for name, value in validate(self).items():
            object.__setattr__(self, name, value)

    @property
    def spec(self):
        """The mechanism's entry in the table (:class:`~paperlib.mechanisms.registry.MechanismSpec`)."""
        return self.mechanism.spec

    @property
    def pair(self) -> tuple[int, int]:
        """The data-set sizes ``(N, N + 1)``."""
        return self.N, self.N + 1

    def equals_sgm(self) -> bool:
        """True when the mechanism on this pair is post-processing of SGM (the SGM analysis applies; raises
        ValueError naming ``q`` where the round divides by zero)."""
        return self.spec.equals_sgm(self.N, self.q)


#: the one rule of each numeric field (its allowed range), for :func:`validate` and :func:`checked`
_RULES = {
    "N": lambda v: check_int(v, "N", 1),
    "q": check_rate,
    "sigma": lambda v: check_positive(v, "sigma"),
    "n": lambda v: check_int(v, "n", 1),
    "rounds": lambda v: check_int(v, "rounds", 1),
    "delta": check_delta,
    "C": lambda v: check_positive(v, "C"),
}


def checked(*, optional: tuple[str, ...] = (), **fields) -> tuple:
    """The given fields of a setting converted, in the order given, after checking each by the rule a
    :class:`Setting` applies to it (``N``, ``q``, ``sigma``, ``n``, ``rounds``, ``delta``, ``C``); a field named in
    ``optional`` may be None (a bound that does not depend on it) and is passed through. For the functions of
    :mod:`paperlib.mechanisms` that take numbers rather than a :class:`Setting` (one-round guarantees and
    bounds, whose ``q`` or ``sigma`` may be absent). Raises :class:`~paperlib.fdp.validation.ParameterError`
    naming the first bad one.
    """
    return tuple(None if v is None and k in optional else _RULES[k](v) for k, v in fields.items())


def validate(setting: Setting) -> dict:
    """The fields of ``setting`` converted (``int``, ``float``, the mechanism value), after checking each
    (one :class:`~paperlib.fdp.validation.ParameterError` naming the first bad one). The one check of a
    :class:`Setting`: called once, when it is made."""
    s = setting
    out = {"mechanism": Mechanism.parse(s.mechanism, ANY)}
    out.update(zip(_RULES, checked(optional=("delta",), **{k: getattr(s, k) for k in _RULES})))
    if s.neighbour not in NEIGHBOURS:
        raise ParameterError("neighbour", f"neighbour must be 'removal', 'addition' or None, got {s.neighbour!r}")
    if s.relation not in RELATIONS:
        raise ParameterError("relation", f"relation must be one of {', '.join(RELATIONS)}, got {s.relation!r}")
    return out
