"""What a practitioner's DP-SGD run guarantees (THEORY.md §10, §11): the practitioner boundary.

* :mod:`.releases` — which code ran: each Opacus release's mechanism and sampling rule (the stored
  code audit of every release, paper Table 2) and DPSUR's;
* :mod:`.run` — :class:`~.run.Run`, one run's settings, validated once when made;
* :mod:`.check` — the one report: :func:`~.check.check_run` (settings), :func:`~.check.check_opacus`
  (a live Opacus run), :func:`~.check.format_statement`;
* :mod:`.accountant` — :class:`~.accountant.CertifiedAccountant`, an Opacus accountant whose epsilon
  is the certified one;
* :mod:`.fix` — the fix for Opacus 1.x: :func:`~.fix.fix_normaliser`, :func:`~.fix.sum_reduction_lr`;
* :mod:`.examples` — chapter 10's rows: every release family at published settings, checked as it is
  and with its fix (:func:`~.examples.family_rows`).

Every argument is checked here, in one line naming it (ValueError; TypeError for an object of the
wrong kind), before any Opacus object is read; the computing layers below take the validated
values. Names are imported on first use (PEP 562): importing this package imports neither torch
nor Opacus.
"""

from importlib import import_module

_EXPORTS = {
    "Release": "releases", "opacus_release": "releases", "dpsur_release": "releases", "known_releases": "releases",
    "opacus1_rates": "releases", "neighbour_normalisers": "releases", "floors_agree_on_neighbours": "releases",
    "normaliser_scan": "releases",
    "Run": "run", "MAX_CHECK_STEPS": "run",
    "check_run": "check", "check": "check", "check_opacus": "check", "format_statement": "check",
    "CertifiedAccountant": "accountant", "register_certified_accountant": "accountant",
    "fix_normaliser": "fix", "fixed_divisor": "fix", "normaliser_of": "fix", "sum_reduction_lr": "fix",
    "family_rows": "examples", "family_row": "examples", "dpsur_row": "examples",
}

__all__ = list(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
