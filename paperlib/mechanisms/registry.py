"""The table of mechanisms: one :class:`MechanismSpec` per way DP-SGD divides its noisy gradient sum.

Every rule that tells one mechanism from another is decided here, once, as a value (THEORY.md §2,
§6, §11; paper Section 3): what the noisy sum is divided by (the normaliser), what an empty batch
and a zero divisor do, on which pairs of data sets the mechanism is post-processing of SGM, how the
stored Opacus code audit names it (A, EA, FEA), the words a report uses for it, and which functions
compute its one-round guarantee, upper bounds, CLT bound, certificate and attack. The rest of the
library asks the spec (``mechanism_spec(m).fixed_normaliser(N, q)``, ``spec.equals_sgm(N, q)``,
``spec.guarantee``); it never compares against a mechanism's name (a test holds it to that).

Registered as Opacus registers its accountants (``opacus/accountants/registry.py``): the built-in
entries below, :func:`register_mechanism` for more. A computation is given as a callable or as
``"module:function"`` (resolved on first use), so that this module imports nothing but
:mod:`paperlib.fdp.validation` and the modules that compute can import it.

=========  ====================  =====================================================
mechanism  normaliser            who does it
=========  ====================  =====================================================
SGM        1 (public constant)   the mechanism the privacy analysis covers
EASGM      ``N q``               Opacus 0.14-0.15 (expected batch size; code EA)
FEASGM     ``floor(N q)``        Opacus 1.x, ``int(len(dataset) * sample_rate)`` (FEA)
ASGM       ``|B|``               Opacus <= 0.13 (A); DPSUR as the paper models it
DPSUR      ``|B'|``              DPSUR's own code: a separate Poisson(q) draw; no step on
                                 an empty batch (THEORY.md §11.4)
=========  ====================  =====================================================
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Mapping

from paperlib.fdp.validation import ParameterError

__all__ = ["MechanismSpec", "mechanism_spec", "register_mechanism", "registered_mechanisms", "spec_for_opacus_code",
           "rows_of"]


def _never(N: int, q: float) -> bool:
    return False


def _one(N: int, q: float) -> float:
    return 1.0


@dataclass(frozen=True)
class MechanismSpec:
    """One mechanism's rules and computations (module docstring).

    Rules (``N``: records in the data set, int >= 1; ``q``: sampling rate in (0, 1]):

    * ``fixed_normaliser(N, q) -> float``: the divisor when it does not depend on the batch (SGM 1.0,
      EASGM ``N q``, FEASGM ``float(int(N * q))``, which may be 0.0); None when it does (ASGM, DPSUR).
    * ``empty_divisor(N, q) -> float``: a batch-dependent divisor's value on an empty batch (or draw).
    * ``draws_divisor``: the divisor is the size of a separate Poisson draw, not of the batch (DPSUR).
    * ``skips_empty_batch``: an empty batch takes no step, so the release is exactly 0 (DPSUR).
    * ``divides_by_zero(N, q) -> bool``: the round divides by zero on ``N`` records (FEASGM, ``int(N q) = 0``).
    * ``floors(N, q) -> (int, int)`` or None: FEASGM's ``(int(N q), int((N + 1) q))`` on the pair ``(N, N + 1)``.
    * ``equals_sgm(N, q) -> bool``: on the pair ``(N, N + 1)`` the mechanism is post-processing of SGM, so the
      SGM analysis applies (SGM itself; FEASGM whose floors agree).
    * ``opacus_code``: the stored code audit's name of the rule (``"A"``, ``"EA"``, ``"FEA"``) or None;
      ``opacus_note``: what that code divides by, in the audit's words.

    Words: ``rule`` (``"floor(Nq)"``), ``title`` (``"FEASGM"``), ``prose_name`` (the mechanism in a sentence:
    ``"DPSUR's rule"``; the title where an entry gives none), ``normaliser_words(N, q)`` (what it divides
    by on ``N`` records, for a report), ``pair_normalisers(N, q)`` (on the pair, for a report's table),
    ``not_sgm(normalisers)`` (why a pair is not SGM), ``sgm_words`` (why every pair is SGM, for a mechanism with
    ``sgm_always``).

    Computations, each a callable or ``"module:function"``, None when the library has none:
    ``guarantee(N, q, sigma, n, *, tail_tol)`` and ``upper(N, q, sigma, n)`` (one round),
    ``rounds_upper(N, q, sigma, n, *, rounds, **pld)``, ``clt`` (the theorem of the CLT bound of the
    upper bound: ``"3.13"``, the chi-square pair with ``x = N`` over any rounds; ``"A.7"``, with ``x =
    floor(N q)``; ``"3.13+Eq.14"``, its chi-square part mixed as Eq. 14, one round; None: no CLT bound), ``certificates`` (the certificates :mod:`paperlib.mechanisms.certified` may use,
    in order: ``"sgm"``, ``"count"``, ``"chain"`` (THEORY.md §11.3b), ``"index"``, or the mechanism's own), ``own_certificate(setting, *, rel_tol, **pld)`` (a certificate of the mechanism's own, used in place of the others: DPSUR's,
    THEORY.md §11.4), ``attack(setting, *, tail, **pld)`` (a named attack, :mod:`paperlib.mechanisms.attacks`), ``scale_ratio(N, q)`` (the all-zero
    gradients scale test's ``x`` and its words, for a divisor that differs between ``D`` and ``D'``).
    """

    name: str
    title: str
    rule: str
    description: str
    paper: bool = True
    fixed_normaliser: Callable[[int, float], float] | None = None
    empty_divisor: Callable[[int, float], float] = _one
    draws_divisor: bool = False
    skips_empty_batch: bool = False
    divides_by_zero: Callable[[int, float], bool] = _never
    floors: Callable[[int, float], tuple[int, int]] | None = None
    sgm_always: bool = False
    opacus_code: str | None = None
    opacus_note: str | None = None
    normaliser_words: Callable[[int, float], str] | None = None
    pair_normalisers: Callable[[int, float], tuple] | None = None
    not_sgm: Callable[[tuple], str] | None = None
    sgm_words: str | None = None
    guarantee: Callable | str | None = None
    upper: Callable | str | None = None
    rounds_upper: Callable | str | None = None
    clt: str | None = None
    certificates: tuple[str, ...] = ("index",)
    own_certificate: Callable | str | None = None
    attack: Callable | str | None = None
    scale_ratio: Callable[[int, float], tuple[float, str]] | None = None
    prose_name: str | None = None
    _resolved: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        # the words a report needs, from the rule and description where an entry gives none, so that a new
        # entry with only its rules gets a check report (built-in entries give their own)
        defaults = {
            "normaliser_words": lambda N, q: f"{self.rule} ({self.description})",
            "pair_normalisers": lambda N, q: ((self.fixed_normaliser(N, q), self.fixed_normaliser(N + 1, q))
                                              if self.fixed_normaliser is not None else (self.rule, self.rule)),
            "not_sgm": lambda K: f"{self.title} {self.description}: not SGM",
            "sgm_words": f"{self.description}: SGM",
            "prose_name": self.title,
        }
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)

    def equals_sgm(self, N: int, q: float) -> bool:
        """True when the mechanism on the pair ``(N, N + 1)`` is post-processing of SGM (the SGM analysis
        applies): SGM always; FEASGM when its floors agree. Raises ValueError for a pair that divides by zero."""
        if self.sgm_always:
            return True
        if self.floors is None:
            return False
        self.require_defined(N, q)
        K, K1 = self.floors(N, q)
        return K == K1

    def require_defined(self, N: int, q: float) -> None:
        """Raise ValueError (naming ``q``) when the round divides by zero on ``N`` records."""
        if self.divides_by_zero(N, q):
            raise ParameterError("q", f"q: floor(N*q) = 0 for N={N}, q={q}, so {self.title} divides by zero (as "
                                 "Opacus v1.x does); choose N*q >= 1")

    def computation(self, what: str) -> Callable | None:
        """The callable behind ``what`` (``"guarantee"``, ``"upper"``, ``"rounds_upper"``, ``"attack"``),
        importing its module on first use; None when the mechanism has none."""
        target = getattr(self, what)
        if target is None or callable(target):
            return target
        if what not in self._resolved:
            module, name = target.split(":")
            self._resolved[what] = getattr(importlib.import_module(module), name)
        return self._resolved[what]


_REGISTRY: dict[str, MechanismSpec] = {}


def register_mechanism(spec: MechanismSpec) -> MechanismSpec:
    """Add ``spec`` to the table (a new entry for its ``name`` replaces the old one); returns it."""
    if not isinstance(spec, MechanismSpec):
        raise TypeError(f"spec must be a MechanismSpec, got {type(spec).__name__}")
    if not spec.name or spec.name != spec.name.strip().lower():
        raise ValueError(f"name must be a non-empty lower-case name, got {spec.name!r}")
    _REGISTRY[spec.name] = spec
    return spec


def mechanism_spec(mechanism) -> MechanismSpec:
    """The spec of ``mechanism`` (a :class:`~paperlib.mechanisms.core.Mechanism`, a spec, or a name in any
    case). Raises ValueError naming ``mechanism`` and the registered names otherwise."""
    if isinstance(mechanism, MechanismSpec):
        return mechanism
    key = getattr(mechanism, "value", mechanism)
    spec = _REGISTRY.get(key.strip().lower()) if isinstance(key, str) else None
    if spec is None:
        raise ParameterError("mechanism", f"mechanism must be one of {', '.join(_REGISTRY)}, got {key!r}")
    return spec


def registered_mechanisms() -> tuple[str, ...]:
    """The names in the table, in the order they were registered."""
    return tuple(_REGISTRY)


def rows_of(rows: Mapping, mechanism, position: int = 0) -> dict:
    """The entries of ``rows`` that belong to ``mechanism``: ``rows`` maps tuple keys whose element at
    ``position`` names a mechanism (``("easgm", q, N)`` in a notebook's results, any case) to values;
    keys that name another mechanism, or none in the table, are left out. So a grading check selects
    its series by the mechanism's value, never by comparing names itself."""
    spec = mechanism_spec(mechanism)
    return {k: v for k, v in rows.items() if str(getattr(k[position], "value", k[position])).strip().lower() == spec.name}


def spec_for_opacus_code(code: str) -> MechanismSpec:
    """The spec whose normalisation code in the stored Opacus audit is ``code`` (``"A"``, ``"EA"``, ``"FEA"``)."""
    for spec in _REGISTRY.values():
        if spec.opacus_code == code:
            return spec
    raise ValueError(f"code must be one of {', '.join(s.opacus_code for s in _REGISTRY.values() if s.opacus_code)}, "
                     f"got {code!r}")


# ------------------------------------------------------------------------------ the built-in entries
def _int_floor(N: int, q: float) -> float:
    return float(int(N * q))  # Opacus v1.x: int(len(dataset) * sample_rate), in float64


def _floors(N: int, q: float) -> tuple[int, int]:
    return int(N * q), int((N + 1) * q)


_G = "paperlib.mechanisms.guarantees:"
_M = "paperlib.mechanisms.multiround:"
_A = "paperlib.mechanisms.attacks:"

register_mechanism(MechanismSpec(
    name="sgm", title="SGM", rule="1", description="the Subsampled Gaussian Mechanism: the noisy sum, not normalised",
    fixed_normaliser=_one, sgm_always=True,
    sgm_words="loss_reduction='sum': the noisy sum is not normalised, SGM",
    normaliser_words=lambda N, q: "nothing (noisy sum)",
    pair_normalisers=lambda N, q: ("1 (sum)", "1 (sum)"),
    guarantee=_G + "sgm_guarantee", upper=_G + "sgm_guarantee", rounds_upper=_M + "sgm_rounds_upper_bound",
    certificates=("sgm",)))

register_mechanism(MechanismSpec(
    name="easgm", title="EASGM", rule="Nq", description="divides by the expected batch size N q",
    fixed_normaliser=lambda N, q: float(N * q),
    opacus_code="EA", opacus_note="EA: divides by sample_rate * sample_size (N q)",
    normaliser_words=lambda N, q: f"N q = {N * q:.6g}",
    pair_normalisers=lambda N, q: (N * q, (N + 1) * q),
    not_sgm=lambda K: "EASGM divides by N q, which differs between the two datasets: not SGM",
    guarantee=_G + "easgm_guarantee", upper=_G + "easgm_upper_bound", rounds_upper=_M + "easgm_rounds_upper",
    clt="3.13", certificates=("chain", "index"), attack=_A + "scale_attack_for",
    scale_ratio=lambda N, q: (float(N), f"N q = {N * q:g} and (N + 1) q = {(N + 1) * q:g}")))


def _feasgm_scale(N: int, q: float) -> tuple[float, str]:
    K, K1 = _floors(N, q)
    return float(K), f"floor(N q) = {K} and floor((N + 1) q) = {K1}"


register_mechanism(MechanismSpec(
    name="feasgm", title="FEASGM", rule="floor(Nq)", description="divides by floor(N q), as Opacus 1.x does",
    fixed_normaliser=_int_floor, divides_by_zero=lambda N, q: int(N * q) == 0, floors=_floors,
    opacus_code="FEA", opacus_note="FEA: divides by int(len(dataset) * sample_rate) (floor(N q))",
    normaliser_words=lambda N, q: f"int(N q) = {int(_int_floor(N, q))}",
    pair_normalisers=lambda N, q: _floors(N, q),
    not_sgm=lambda K: f"FEASGM divides by {K[0]} and {K[1]}: not SGM",
    guarantee=_G + "feasgm_guarantee", upper=_G + "feasgm_upper_bound",
    rounds_upper=_M + "feasgm_rounds_upper_bound", clt="A.7", certificates=("chain", "index"),
    attack=_A + "scale_attack_for",
    scale_ratio=_feasgm_scale))

register_mechanism(MechanismSpec(
    name="asgm", title="ASGM", rule="|B|", description="divides by the realised batch size |B| (1 when empty)",
    opacus_code="A", opacus_note="A: divides by the realised batch size |B|",
    normaliser_words=lambda N, q: "the realised batch size |B|",
    pair_normalisers=lambda N, q: ("|B|", "|B|"),
    not_sgm=lambda K: "ASGM divides by the realised batch size: not SGM",
    guarantee=_G + "asgm_guarantee", upper=_G + "asgm_upper_bound", rounds_upper=_M + "asgm_rounds_upper_bound",
    clt="3.13+Eq.14", certificates=("count", "index"), attack=_A + "aligned_attack"))

register_mechanism(MechanismSpec(
    name="dpsur", title="DPSUR", rule="|B'|", paper=False, prose_name="DPSUR's rule",
    description="divides by the size of a separate Poisson draw |B'|; no step on an empty batch",
    # an empty separate draw keeps the previous divisor, N q in the first round (algorithm/DPSUR.py:87-95,145-146)
    empty_divisor=lambda N, q: float(N * q), draws_divisor=True, skips_empty_batch=True,
    normaliser_words=lambda N, q: "the size |B'| of a separate Poisson draw (no step on an empty batch)",
    pair_normalisers=lambda N, q: ("|B'|", "|B'|"),
    not_sgm=lambda K: "DPSUR divides by the size of a separate Poisson draw and skips empty batches: not SGM",
    certificates=("dpsur",), own_certificate="paperlib.mechanisms.certificates:dpsur_certificate",
    attack=_A + "dpsur_attack"))
