"""The table of implementations: one meaning of the word "implementation".

An *implementation* is a DP-SGD code whose steps this package runs and audits: the installed
Opacus, an old Opacus release run from the release cache, DPSUR's own step, or the installed Opacus
with the fix (paper Table 2; THEORY.md §10). Each entry says which code *family* it belongs to
(``"opacus"`` or ``"dpsur"``: what a practitioner names with ``check --implementation``), the
release it runs (None: the installed one, or not Opacus), the mechanism its code audit documents,
and whether it is a release as shipped or one with the fix. Everything that lists implementations
reads this table: the step runners (:mod:`~paperlib.implementations.runners`), the real-step audits,
the command line's choices and the practitioner's ``implementation`` setting. Importing it imports
neither torch nor the releases.
"""

from __future__ import annotations

from dataclasses import dataclass

from paperlib.mechanisms.core import Mechanism

__all__ = ["Implementation", "TABLE", "BY_NAME", "IMPLEMENTATIONS", "FIXED_IMPLEMENTATIONS", "IMPLEMENTATION_MECHANISM",
           "RELEASES", "FAMILIES"]


@dataclass(frozen=True)
class Implementation:
    """One DP-SGD code this package runs (module docstring).

    ``name`` (``"opacus-0.15.0"``), ``family`` (``"opacus"`` or ``"dpsur"``), ``release`` (the Opacus
    release it runs from the cache; None for the installed Opacus and for DPSUR), ``mechanism`` (what its
    code audit documents), ``fixed`` (the installed Opacus with :func:`~paperlib.practitioner.fix_normaliser`:
    it divides by a public constant), ``paper_code`` (what the paper ran for this implementation's
    mechanism, for the book's provenance; None: not in the paper), ``as_paper`` (its code is the code the
    paper ran: the old releases, installed on demand from their sha256-checked wheels).
    """

    name: str
    family: str
    release: str | None
    mechanism: Mechanism
    fixed: bool = False
    paper_code: str | None = None
    as_paper: bool = False


#: every implementation, the releases as shipped first (their order is the command line's)
_FETA = "DP-FETA's code path, built on Opacus v1.0 (FEASGM; Appendix A.3)"
TABLE: tuple[Implementation, ...] = (
    Implementation("opacus-installed", "opacus", None, Mechanism.FEASGM, paper_code=_FETA),
    Implementation("opacus-1.0.2", "opacus", "1.0.2", Mechanism.FEASGM, paper_code=_FETA, as_paper=True),
    Implementation("opacus-0.15.0", "opacus", "0.15.0", Mechanism.EASGM, as_paper=True, paper_code=(
        "Opacus v0.15.0, the EASGM code path of DPSGD-HF, DP-FETA and PrivImage (Section 5.1)")),
    Implementation("opacus-0.13.0", "opacus", "0.13.0", Mechanism.ASGM, as_paper=True,
                   paper_code="Opacus v0.13.0, DPSGD-HF's release (ASGM; Table 2)"),
    # |B'|: a separate Poisson draw's size; no step on an empty batch
    Implementation("dpsur", "dpsur", None, Mechanism.DPSUR, paper_code=(
        "DPSUR's own code, from its public repository (which the paper analyses as ASGM; Section 5.1)")),
    # divided by a public constant (paperlib.practitioner.fix)
    Implementation("opacus-installed+fix", "opacus", None, Mechanism.SGM, fixed=True),
)

#: each implementation's entry, by name
BY_NAME: dict[str, Implementation] = {i.name: i for i in TABLE}
#: the releases as shipped
IMPLEMENTATIONS: tuple[str, ...] = tuple(i.name for i in TABLE if not i.fixed)
#: the installed Opacus with the fix
FIXED_IMPLEMENTATIONS: tuple[str, ...] = tuple(i.name for i in TABLE if i.fixed)
#: the mechanism each implementation is documented to run (code audit, Table 2)
IMPLEMENTATION_MECHANISM: dict[str, Mechanism] = {i.name: i.mechanism for i in TABLE}
#: the old Opacus releases run from the release cache
RELEASES: dict[str, str] = {i.name: i.release for i in TABLE if i.release is not None}
#: the code families a practitioner names (``check --implementation``)
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(i.family for i in TABLE))
