"""Which code ran: each Opacus release's mechanism and sampling rule, and DPSUR's (THEORY.md §2, §10).

The mechanism of an Opacus release under Poisson sampling and ``loss_reduction='mean'`` is read
from the stored code audit of every release (``paperlib/resources/opacus_table2.json``, paper
Table 2 extended to every release on the package index; :mod:`paperlib.implementations.opacus_code`
rebuilds it): ``|B|`` (ASGM, 0.12-0.13; 0.9-0.11 have no built-in Poisson sampling), ``N q``
(EASGM, 0.14-0.15) or ``int(N q)`` (FEASGM, 1.x). A release that is not in the stored audit is
refused with the list of those that are, or accepted with ``assume=True`` under the rule of the
nearest audited release below it, and then says so (:attr:`Release.assumed`).

The sampling rule, read from each release's code: Opacus 1.x ``make_private(poisson_sampling=True)``
samples at ``1/len(data_loader)``, charges its accountant ``1/int(1/q)`` and divides by
``int(N q)`` in floating point (:func:`opacus1_rates`); 0.x releases take ``sample_rate`` from
the user (``batch_size / N`` assumed). The accountant a ``PrivacyEngine()`` uses: RDP before 1.3,
PRV from 1.3 (read from ``PrivacyEngine.__init__`` of v1.0.0-v1.6.0); releases up to 0.13
converted RDP with Mironov (2017, Prop. 3), later ones with Balle et al. (2020, Thm 21).

DPSUR (Fu et al. 2024; :mod:`paperlib.implementations.dpsur`, pinned commit in
``paperlib/resources/dpsur_source.json``) divides by the size of a separate Poisson draw and
takes no step on an empty batch (:attr:`~paperlib.mechanisms.core.Mechanism.DPSUR`); it samples
at ``batch_size / len(dataset)`` and accounts with RDP at its own orders
(``algorithm/DPSUR.py:24``) converted as Balle et al. (``privacy_analysis/RDP/rdp_convert_dp.py``).

:func:`neighbour_normalisers` and :func:`normaliser_scan` say, for Opacus 1.x, on which
neighbouring datasets ``int(N q)`` and the sampling rate stay the same (THEORY.md §6, §10).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from paperlib.fdp.validation import ParameterError, check_bool, check_int
from paperlib.implementations.opacus_code.wheels import load_table, parse_version
from paperlib.mechanisms.core import Mechanism
from paperlib.mechanisms.registry import spec_for_opacus_code

__all__ = ["Release", "opacus_release", "dpsur_release", "known_releases", "parse_version", "opacus1_rates",
           "neighbour_normalisers", "floors_agree_on_neighbours", "normaliser_scan", "DPSUR_ORDERS"]

#: DPSUR's RDP orders (``algorithm/DPSUR.py:24`` at the pinned commit)
DPSUR_ORDERS = tuple([1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512])

_NO_POISSON_NOTE = "A (normalises by |B|) but no built-in Poisson sampling"
_OWN_SAMPLER_NOTE = ("A: divides by the realised batch size |B| (no built-in Poisson sampling in this release; your "
                     "own Poisson sampler assumed)")
_SUM_NOTE = "loss_reduction='sum': the noisy sum is not normalised (SGM)"
_PUBLIC_NOTE = ("a public constant divisor (the fix, or a batch size fixed before seeing the data): post-processing "
                "of SGM")
_DPSUR_NOTE = ("DPSUR: divides by the size of a separate Poisson draw |B'| and takes no step on an empty batch "
               "(algorithm/DPSUR.py:145-146)")


@lru_cache(maxsize=1)
def _stored_releases() -> tuple[tuple[tuple[int, int, int], str, str, bool], ...]:
    """``(key, version, normalisation, poisson_builtin)`` of every release in the stored code audit
    (:func:`~paperlib.implementations.opacus_code.load_table`; keys by :func:`parse_version`)."""
    rows = [(parse_version(r["version"]), r["version"], r["normalisation"], bool(r["poisson_builtin"]))
            for r in load_table()["releases"]]
    return tuple(sorted(rows))


def known_releases() -> tuple[str, ...]:
    """The Opacus releases the stored code audit covers, oldest first."""
    return tuple(v for _, v, _, _ in _stored_releases())


@dataclass(frozen=True)
class Release:
    """The code that ran: an Opacus release (or DPSUR's code) and the rules read from it.

    Attributes
    ----------
    implementation : ``'opacus'`` or ``'dpsur'``
    version : the release as named (Opacus), or DPSUR's pinned commit
    key : ``(major, minor, micro)`` (Opacus; ``(0, 0, 0)`` for DPSUR)
    mechanism : the mechanism under Poisson sampling and ``loss_reduction='mean'``; ``None`` for
        0.9-0.11, which have no built-in Poisson sampling (with the user's own sampler they divide
        by ``|B|``: ASGM)
    note : what the code divides by, in words
    assumed : ``None`` for an audited release; otherwise why the rule is assumed
    """

    implementation: str
    version: str
    key: tuple[int, int, int]
    mechanism: Mechanism | None
    note: str
    assumed: str | None = None

    @property
    def name(self) -> str:
        """``'Opacus 1.6.0'`` or ``'DPSUR (commit d738b38)'``."""
        return f"Opacus {self.version}" if self.implementation == "opacus" else f"DPSUR (commit {self.version[:7]})"

    @property
    def samples_per_loader(self) -> bool:
        """True for Opacus 1.x: the sampling rate is ``1/len(data_loader)`` of each dataset."""
        return self.implementation == "opacus" and self.key[0] >= 1

    @property
    def poisson_builtin(self) -> bool:
        """True when the code samples Poisson batches itself (Opacus from 0.12, DPSUR)."""
        return self.implementation == "dpsur" or self.key[:2] >= (0, 12)

    @property
    def accountants(self) -> tuple[str, ...]:
        """The accountants the code offers: RDP always, PRV in Opacus from 1.3."""
        return ("rdp", "prv") if self.implementation == "opacus" and self.key[:2] >= (1, 3) else ("rdp",)

    @property
    def default_accountant(self) -> str:
        """The accountant a ``PrivacyEngine()`` of the release uses: 'prv' from 1.3, else 'rdp'."""
        return self.accountants[-1]

    @property
    def rdp_conversion(self) -> str:
        """How the release turns RDP into (eps, delta): 'mironov2017' up to Opacus 0.13, else 'balle2020'."""
        return "mironov2017" if self.implementation == "opacus" and self.key[:2] <= (0, 13) else "balle2020"

    @property
    def rdp_orders(self) -> tuple[float, ...] | None:
        """The RDP orders of the release's accountant (None: Opacus's ``DEFAULT_ALPHAS``; DPSUR's own)."""
        return DPSUR_ORDERS if self.implementation == "dpsur" else None

    def claim_source(self, accountant: str) -> str:
        """The claim's accountant in words, for the report."""
        if accountant == "prv":
            return "Opacus PRVAccountant (Gopi et al. 2021), eps_error 0.01"
        if self.implementation == "dpsur":
            return ("DPSUR's RDP accountant (its orders, Balle et al. 2020 conversion; the RDP of its validation "
                    "test is not included)")
        if self.rdp_conversion == "mironov2017":
            return f"Opacus {self.version} RDP accountant: eps = min over alpha of rdp - log(delta)/(alpha-1)"
        return f"Opacus {self.version} RDP accountant (Balle et al. 2020 conversion)"

    def mechanism_for(self, loss_reduction: str = "mean", divisor: str = "release") -> tuple[Mechanism, str]:
        """``(mechanism, note)`` of a run of this code with ``loss_reduction`` and ``divisor``.

        ``divisor='public'`` (a constant fixed before seeing the data: the fix, or
        ``loss_reduction='sum'`` with the learning rate divided by the batch size) and
        ``loss_reduction='sum'`` are SGM (post-processing). 0.9-0.11 (no built-in Poisson sampling):
        ASGM with the user's own Poisson sampler. DPSUR: its own rule (a public divisor is refused:
        DPSUR also skips the step on an empty batch, which is not post-processing of SGM). Raises
        ValueError naming ``loss_reduction`` or ``divisor``.
        """
        if loss_reduction not in ("mean", "sum"):
            raise ParameterError("loss_reduction", f"loss_reduction must be 'mean' or 'sum', got {loss_reduction!r}")
        if divisor not in ("release", "public"):
            raise ParameterError("divisor", f"divisor must be 'release' or 'public', got {divisor!r}")
        if self.implementation == "dpsur":
            if loss_reduction != "mean":
                raise ParameterError("loss_reduction",
                                     "loss_reduction: DPSUR's optimizer has no loss_reduction (it divides the noisy sum "
                                     "by the size of a separate Poisson draw)")
            if divisor != "release":
                raise ParameterError("divisor",
                                     "divisor: DPSUR takes no step on an empty batch, so a public divisor alone does not "
                                     "make it SGM; check the fixed run as an Opacus 1.x run with --divisor public")
            return Mechanism.DPSUR, _DPSUR_NOTE
        if divisor == "public":
            return Mechanism.SGM, _PUBLIC_NOTE
        if loss_reduction == "sum":
            return Mechanism.SGM, _SUM_NOTE
        if self.mechanism is None:
            return Mechanism.ASGM, _OWN_SAMPLER_NOTE
        return self.mechanism, self.note


def opacus_release(version: str, *, assume: bool = False) -> Release:
    """The Opacus release ``version`` and its rules (module docstring).

    A release the stored code audit does not list raises ValueError naming ``opacus_version``
    with the list of those it does, unless ``assume=True``: then the rule of the nearest audited
    release below it is assumed, and :attr:`Release.assumed` says so. Versions before 0.9.0 or from
    2.0 on are refused either way (no audited rule to assume).
    """
    key = parse_version(version)
    assume = check_bool(assume, "assume_release")
    rows = _stored_releases()
    for k, v, norm, poisson in rows:
        if k == key:
            return _release(version, k, norm, poisson)
    known = ", ".join(known_releases())
    below = [r for r in rows if r[0] < key]
    if not assume or not below or key[0] >= 2:
        hint = ("; pass assume_release=True to check it under the rule of the nearest audited release below it"
                if below and key[0] < 2 else
                "; assume_release covers an unaudited 0.9-1.x release only (a 2.x or later release may run another "
                "rule: audit it first)" if key[0] >= 2 else "")
        raise ParameterError("opacus_version",
                             f"opacus_version {version!r} is not in the stored code audit of Opacus releases "
                             f"({known}){hint}")
    k, v, norm, poisson = below[-1]
    return _release(version, key, norm, poisson,
                    assumed=f"Opacus {version} is not in the stored code audit: the rule of {v}, the nearest "
                            f"audited release below it, is assumed")


def _release(version, key, normalisation, poisson_builtin, assumed=None) -> Release:
    spec = spec_for_opacus_code(normalisation)  # the stored audit's code: A, EA or FEA
    mech, note = Mechanism(spec.name), spec.opacus_note
    if not poisson_builtin and key[:2] < (0, 12):
        mech, note = None, _NO_POISSON_NOTE
    return Release("opacus", version, key, mech, note, assumed)


def dpsur_release() -> Release:
    """DPSUR's code at the pinned commit (``paperlib/resources/dpsur_source.json``)."""
    text = resources.files("paperlib").joinpath("resources", "dpsur_source.json").read_text(encoding="utf-8")
    return Release("dpsur", json.loads(text)["commit"], (0, 0, 0), Mechanism.DPSUR, _DPSUR_NOTE)


# ------------------------------------------------------------------------------ Opacus 1.x sampling
def opacus1_rates(dataset_size: int, batch_size: int, drop_last: bool) -> tuple[float, float, int]:
    """Opacus 1.6.0 ``make_private(poisson_sampling=True)`` on a dataset of ``dataset_size`` records.

    Returns ``(q_sample, q_account, steps)``: ``DPDataLoader.from_data_loader`` samples
    with ``q_sample = 1/len(data_loader)`` (``len = ceil(dataset_size/batch)``, ``floor`` with
    ``drop_last``); its sampler runs ``steps = int(1/q_sample)`` batches per epoch (one
    fewer than ``len`` for some lengths, e.g. 93, in floating point); ``make_private``
    then charges the accountant ``q_account = 1/steps`` and divides by
    ``int(dataset_size * q_account)``. Read from the installed Opacus 1.6.0 source
    (privacy_engine.py, data_loader.py, utils/uniform_sampler.py) and checked against a
    real ``make_private`` call in the tests.
    """
    size = check_int(dataset_size, "dataset_size", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    drop_last = check_bool(drop_last, "drop_last")
    n_batches = size // batch_size if drop_last else -(-size // batch_size)
    if n_batches < 1:
        raise ParameterError("batch_size",
                             f"batch_size = {batch_size} exceeds dataset_size = {size} with drop_last=True")
    q_sample = 1 / n_batches
    steps = int(1 / q_sample)
    return q_sample, 1 / steps, steps


def neighbour_normalisers(N: int, batch_size: int, drop_last: bool = False) -> dict:
    """What Opacus 1.x divides by on a training set of ``N`` records and on both its neighbours.

    Each dataset (``N - 1``, ``N``, ``N + 1`` records) gets its own rates from
    :func:`opacus1_rates` and divides by ``int(m q_account)`` (FEASGM, THEORY.md §6). Returns
    ``{"rates": [three (q_sample, q_account, steps)], "normalisers": [three ints],
    "removal_weak": ..., "addition_weak": ..., "rate_changes": ...}``: a neighbour is in the weak
    case when its rate equals the training set's but ``int(N q)`` differs; ``rate_changes`` when a
    neighbour gets another rate (then the number of steps itself depends on the data).
    """
    rates = [opacus1_rates(m, batch_size, drop_last) for m in (N - 1, N, N + 1)]
    K = [int(m * r[1]) for m, r in zip((N - 1, N, N + 1), rates)]
    return {"rates": rates, "normalisers": K,
            "removal_weak": rates[0] == rates[1] and K[0] != K[1],
            "addition_weak": rates[2] == rates[1] and K[1] != K[2],
            "rate_changes": rates[0] != rates[1] or rates[2] != rates[1]}


def floors_agree_on_neighbours(N: int, batch_size: int, drop_last: bool = False) -> bool:
    """True when Opacus 1.x gives ``N - 1``, ``N`` and ``N + 1`` records the same rate and the same
    ``int(N q) > 0``: FEASGM is then post-processing of SGM for both neighbours (THEORY.md §6).
    False also when a dataset is too small for the batch size (``drop_last``)."""
    try:
        r = neighbour_normalisers(N, batch_size, drop_last)
    except ValueError:
        return False
    return not (r["rate_changes"] or r["removal_weak"] or r["addition_weak"]) and r["normalisers"][1] > 0


def normaliser_scan(N: int, batch_sizes, drop_last: bool = False) -> list[dict]:
    """:func:`neighbour_normalisers` for every batch size: rows ``{"B", "removal_weak", "addition_weak",
    "rate_changes"}`` (the book's scan of batch sizes, chapter 10)."""
    rows = []
    for B in batch_sizes:
        r = neighbour_normalisers(N, B, drop_last)
        rows.append({"B": B, "removal_weak": r["removal_weak"], "addition_weak": r["addition_weak"],
                     "rate_changes": r["rate_changes"]})
    return rows
