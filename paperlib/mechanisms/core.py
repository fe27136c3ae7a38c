"""The :class:`Mechanism` value: the four ways DP-SGD divides its noisy gradient sum.

One round of DP-SGD on a dataset of ``N_data`` records samples each record with
probability ``q`` (Poisson), sums the clipped gradients of the batch ``B``, adds
``N(0, sigma^2 C^2 I_n)`` and divides by a *normaliser* ``nu``. The privacy proof
analyses ``nu = 1`` (or any public constant); implementations divide by something
that depends on the data set (paper Section 3, THEORY.md §2):

==========  ====================  ==============================================
mechanism   normaliser ``nu``     who does it
==========  ====================  ==============================================
SGM         1 (a public constant) the mechanism the privacy analysis covers
EASGM       ``N_data q``          Opacus 0.14-0.15 (expected batch size)
FEASGM      ``floor(N_data q)``   Opacus 1.x (``int(len(dataset) * sample_rate)``)
ASGM        ``|B|``               Opacus <= 0.13; DPSUR as the paper models it
DPSUR       ``|B'|``              DPSUR's own code: ``B'`` is a separate Poisson(q)
                                  draw from the same data set; an empty ``B``
                                  takes no step (THEORY.md §2, §11.4)
==========  ====================  ==============================================

Decided once, here, for every layer:

* **Empty ASGM batch.** ``|B| = 0`` divides by 1 (the noise alone is released), as the
  paper's ASGM definition (Section 3) does.
* **DPSUR's own rule** (pinned commit, ``algorithm/DPSUR.py:145-146``; see
  :mod:`paperlib.implementations.dpsur`). The divisor is the size ``m = |B'|`` of a second,
  independent Poisson(q) draw from the same data set (so Binomial(N, q) on D, Binomial(N+1, q)
  on D'); when ``B'`` is empty DPSUR keeps its previous divisor, which in the first round is
  its ``batch_size = N_data q``. When the batch ``B`` itself is empty, no step is taken: the
  release is exactly 0 (:attr:`Mechanism.skips_empty_batch`). :meth:`Mechanism.normaliser`
  takes the *separate draw's* size for DPSUR (:attr:`Mechanism.draws_divisor`).
* **FEASGM with** ``floor(N_data q) = 0``. Opacus v1.x divides by zero. The normaliser
  is returned as 0 (what the code computes); the torch sampler, which reproduces the
  implementation, then yields inf/NaN outputs with a warning; every analysis (guarantees,
  bounds, simulation, audits) refuses such a setting with ``ValueError`` through
  :meth:`Mechanism.require_defined`.
* **Floating point.** ``floor(N_data q)`` is ``int(N_data * q)`` in float64, exactly as
  Opacus computes it, so ``22 * (15/22)`` truncates to 14.

Mechanisms are values of a string enum: ``Mechanism.EASGM == "easgm"``, they serialise
to JSON as their names, and every function accepts either the value or its name
(:meth:`Mechanism.parse`, case-insensitive). Importing this module imports neither torch
nor matplotlib.
"""

from __future__ import annotations

import enum
import sys

import numpy as np

from paperlib.fdp.validation import ParameterError, check_int, check_rate
from paperlib.mechanisms.registry import mechanism_spec, registered_mechanisms

__all__ = ["Mechanism", "RegisteredMechanism", "ANY", "MECHANISMS", "PAPER_MECHANISMS", "feasgm_floors"]


class _Rules:
    """What every mechanism value can say about itself, read from its entry in the table of mechanisms
    (:mod:`~paperlib.mechanisms.registry`): the built-in :class:`Mechanism` members and the
    :class:`RegisteredMechanism` values of entries added with
    :func:`~paperlib.mechanisms.registry.register_mechanism` alike."""

    __slots__ = ()

    # ------------------------------------------------------------------ description
    @property
    def spec(self):
        """This mechanism's entry in the table of mechanisms (:class:`~paperlib.mechanisms.registry.MechanismSpec`):
        every rule below is read from it."""
        return mechanism_spec(str.__str__(self))

    @property
    def title(self) -> str:
        """Upper-case name used in the paper (``"EASGM"``)."""
        return self.spec.title

    @property
    def rule(self) -> str:
        """The normaliser as a short formula: ``"1"``, ``"Nq"``, ``"floor(Nq)"``, ``"|B|"`` or ``"|B'|"``."""
        return self.spec.rule

    @property
    def draws_divisor(self) -> bool:
        """True when the divisor is the size of a separate Poisson draw (DPSUR's own rule), not of the batch."""
        return self.spec.draws_divisor

    @property
    def skips_empty_batch(self) -> bool:
        """True when an empty batch takes no step, so the release is exactly 0 (DPSUR's code)."""
        return self.spec.skips_empty_batch

    # ------------------------------------------------------------------ the normaliser
    def fixed_normaliser(self, N_data: int, q: float) -> float | None:
        """The normaliser when it does not depend on the batch: SGM 1, EASGM ``N_data q``,
        FEASGM ``float(int(N_data * q))`` (may be 0.0); ``None`` for ASGM and DPSUR."""
        fixed = self.spec.fixed_normaliser
        return None if fixed is None else fixed(N_data, q)

    def normaliser(self, N_data: int, batch_size, q: float):
        """Divisor of the noisy sum for ``N_data`` records and realised batch size(s) ``batch_size``.

        ``batch_size`` may be an int, a numpy array or a torch tensor; the result has its
        kind and shape (float64). ASGM divides an empty batch by 1; FEASGM may give 0
        (see the module docstring): nothing is corrected here. For DPSUR
        (:attr:`draws_divisor`) ``batch_size`` is the size of the *separate* draw ``B'``, and
        an empty draw gives DPSUR's first-round divisor ``N_data q``.
        """
        fixed = self.fixed_normaliser(N_data, q)
        torch = sys.modules.get("torch")  # only when the caller already uses torch
        if torch is not None and isinstance(batch_size, torch.Tensor):
            b = batch_size if batch_size.is_floating_point() else batch_size.to(torch.float64)
            if fixed is not None:
                return torch.full_like(b, fixed)
            return torch.where(b > 0, b, torch.full_like(b, self.spec.empty_divisor(N_data, q)))
        b = np.asarray(batch_size, dtype=float)
        out = (np.full_like(b, fixed) if fixed is not None
               else np.where(b > 0, b, self.spec.empty_divisor(N_data, q)))
        return float(out) if out.ndim == 0 else out

    def divides_by_zero(self, N_data: int, q: float) -> bool:
        """True for FEASGM with ``floor(N_data q) = 0`` (Opacus v1.x divides by zero)."""
        return self.spec.divides_by_zero(N_data, q)

    def require_defined(self, N_data: int, q: float) -> None:
        """Raise ValueError (naming ``q``) when the round divides by zero on ``N_data`` records."""
        self.spec.require_defined(N_data, q)

    def floors(self, N: int, q: float) -> tuple[int, int]:
        """FEASGM's normalisers on the pair ``(D, D')`` of sizes ``(N, N + 1)``: see :func:`feasgm_floors`."""
        if self.spec.floors is None:
            raise ParameterError("mechanism", f"mechanism: floors are defined for feasgm only, got {str.__str__(self)!r}")
        return self.spec.floors(N, q)


#: :meth:`Mechanism.parse`'s ``allowed`` for "every mechanism in the table" (built-in and registered)
ANY = "any"


class Mechanism(_Rules, enum.StrEnum):
    """SGM, EASGM, ASGM or FEASGM (paper Section 3), or DPSUR's own rule (THEORY.md §2, §11.4); see the
    module docstring for the rules. A mechanism added to the table with
    :func:`~paperlib.mechanisms.registry.register_mechanism` is a :class:`RegisteredMechanism`, which has the
    same methods; :meth:`parse` returns either."""

    SGM = "sgm"
    EASGM = "easgm"
    ASGM = "asgm"
    FEASGM = "feasgm"
    DPSUR = "dpsur"

    # ------------------------------------------------------------------ parsing
    @classmethod
    def parse(cls, value, allowed=None, need: str | None = None) -> "Mechanism | RegisteredMechanism":
        """The mechanism named ``value`` (a mechanism value, a spec, or its name in any case).

        ``allowed``: the mechanisms the caller handles: None (default) for the paper's four (SGM, EASGM,
        ASGM, FEASGM) and any registered entry marked ``paper``; :data:`ANY` for every entry of the table
        (DPSUR's own rule and registered ones too); or a sequence of mechanisms. Raises ValueError naming
        ``mechanism`` and the allowed names otherwise (``need``: the computation the caller needs, named when a
        registered mechanism lacks it).
        """
        names = _allowed_names(allowed)
        if isinstance(value, (cls, RegisteredMechanism)):
            key = str.__str__(value)
        elif isinstance(value, str):
            key = value.strip().lower()
        else:
            key = getattr(value, "name", None) if type(value).__name__ == "MechanismSpec" else None
        if key is not None and key not in names and key in registered_mechanisms() and need is not None:
            raise ParameterError("mechanism", f"mechanism {key!r} has no {need} in the table of mechanisms (give its "
                                              f"MechanismSpec a {need}); mechanisms with one: {', '.join(names)}")
        if key is None or key not in names:
            shown = str.__str__(value) if isinstance(value, str) else value
            raise ParameterError("mechanism", f"mechanism must be one of {', '.join(names)}, got {shown!r}")
        return cls(key) if key in cls._value2member_map_ else RegisteredMechanism(key)

    @classmethod
    def having(cls, what: str) -> tuple[str, ...]:
        """The names of the mechanisms whose entry has the computation ``what`` (``"guarantee"``, ``"upper"``,
        ...), built-ins first: the ``allowed`` of a function that needs it."""
        return tuple(n for n in _allowed_names(ANY) if getattr(mechanism_spec(n), what) is not None)

    @classmethod
    def from_rule(cls, rule: str) -> "Mechanism":
        """The mechanism whose normaliser rule is ``rule`` (``"1"``, ``"Nq"``, ``"floor(Nq)"``, ``"|B|"``)."""
        for m in cls:
            if m.rule == rule:
                return m
        raise ValueError(f"rule must be one of {', '.join(m.rule for m in cls)}, got {rule!r}")


class RegisteredMechanism(_Rules, str):
    """A mechanism added to the table with :func:`~paperlib.mechanisms.registry.register_mechanism`: a string
    (its name; JSON writes it so) with every method of :class:`Mechanism`. Made by :meth:`Mechanism.parse`."""

    __slots__ = ()

    @property
    def value(self) -> str:
        """Its name, as :attr:`Mechanism.value` is."""
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"<RegisteredMechanism {str.__str__(self)}>"


def _allowed_names(allowed) -> tuple[str, ...]:
    """The names :meth:`Mechanism.parse` accepts for ``allowed`` (built-ins first, in their order)."""
    builtin = tuple(m.value for m in Mechanism)
    extra = tuple(n for n in registered_mechanisms() if n not in builtin)
    if allowed == ANY:
        return builtin + extra
    if allowed is None:
        return tuple(n for n in builtin + extra if mechanism_spec(n).paper)
    return tuple(str.__str__(Mechanism.parse(m, ANY)) for m in allowed)


#: The four mechanisms the paper analyses; :meth:`Mechanism.parse` accepts only these unless told
#: otherwise. DPSUR's own rule is a :class:`Mechanism` too, accepted only where its analysis exists.
PAPER_MECHANISMS: tuple[Mechanism, ...] = tuple(m for m in Mechanism if m.spec.paper)
#: Their names, in the order the command line lists them.
MECHANISMS: tuple[str, ...] = tuple(m.value for m in PAPER_MECHANISMS)


def feasgm_floors(N: int, q: float) -> tuple[int, int]:
    """``(floor(N q), floor((N + 1) q))``: FEASGM's normalisers on D and D' (Opacus v1.x).

    Computed in floating point exactly as Opacus does (``int(len(dataset) * sample_rate)``),
    so a rate such as ``q = b / N`` whose product rounds just below an integer gives the
    same floor as the library would (THEORY.md §6). ``N >= 1``, ``q`` in (0, 1];
    raises ValueError naming the parameter otherwise.
    """
    N = check_int(N, "N", 1)
    q = check_rate(q)
    return Mechanism.FEASGM.spec.floors(N, q)
