"""Code audit of every Opacus release: how is the noisy gradient sum normalised?

This package regenerates Table 2 of Wang et al. (2026), and extends it past v1.5.4 to
every release on the package index. For each release from v0.9.0 on, it reads the
release's own source (the ``.py`` files inside the wheel that ``pip download`` fetches,
checked against the sha256 stored for it) and answers, for one DP-SGD step with Poisson
sampling and ``loss_reduction="mean"``, what the noisy sum ``S_B + G`` is divided by:
``|B|`` (A, ASGM), ``N q`` (EA, EASGM) or ``floor(N q)`` (FEA, FEASGM), whether the
release has built-in Poisson sampling, and whether a Poisson batch can be fed at all.

Modules, one job each:

* :mod:`.rules` -- the pattern rules (:data:`~.rules.RULES`) and the classification of
  one release's source (:func:`~.rules.audit_sources`); :class:`AuditError`.
* :mod:`.wheels` -- the release cache: listing releases, ``pip download``, the sha256
  check of every wheel against the stored value (:func:`~.wheels.verify_wheel`,
  :class:`WheelVerificationError`), reading a wheel's source, and
  :func:`install_release` into ``<cache>/opacus-<version>``.
* :mod:`.table` -- auditing wheels into the stored table
  ``paperlib/resources/opacus_table2.json`` (:func:`load_table`), the paper's Table 2
  and the comparison with it, its rows and Markdown (:func:`records_table`, :func:`~.table.markdown_table`).
* :mod:`.stepcheck` -- the confirmation by a real DP-SGD step (:func:`step_check`) of the
  installed Opacus, or of an old release in a subprocess (:func:`confirm_release`).
* :mod:`.cli` -- ``python -m paperlib.implementations.opacus_code [--refresh | --from-cache]``.

References: Wang, Cui, Cui, Yuan (2026), Section 5.5, Appendix A and Table 2;
Yousefpour et al. (2021) for Opacus.
"""

from .rules import DIVISOR, AuditError
from .stepcheck import confirm_release, step_check
from .table import (PAPER_LAST_VERSION, audit_wheel, compare_with_paper, load_table, paper_row,
                    records_table)
from .wheels import REFRESH_COMMAND, WheelVerificationError, install_release, stored_table_path

__all__ = [
    "AuditError",
    "WheelVerificationError",
    "REFRESH_COMMAND",
    "PAPER_LAST_VERSION",
    "DIVISOR",
    "audit_wheel",
    "load_table",
    "stored_table_path",
    "paper_row",
    "compare_with_paper",
    "records_table",
    "install_release",
    "confirm_release",
    "step_check",
]
