"""One training run's settings, validated once: the :class:`Run` value.

Everything a practitioner's check needs (THEORY.md §10, §11) enters here, from the command line,
the Python API, a live Opacus run (:func:`~paperlib.practitioner.check.check_opacus`) or an
accountant (:class:`~paperlib.practitioner.accountant.CertifiedAccountant`). Making a :class:`Run`
checks every setting once (one line naming it: ValueError, TypeError for a value of the wrong
kind) and resolves what follows from it: the release and its rules
(:mod:`~paperlib.practitioner.releases`), the :class:`~paperlib.mechanisms.core.Mechanism` that
ran, the sampling and accounting rates, the number of steps and the accountant. Its neighbouring
pairs (:meth:`Run.neighbours`) carry one :class:`~paperlib.mechanisms.setting.Setting` each, made
(and validated) once; the computing layers take it and do not check it again.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from paperlib.fdp.validation import (ParameterError, check_bool, check_delta, check_int, check_positive,
                                     check_rate, check_size)
from paperlib.implementations.registry import FAMILIES
from paperlib.mechanisms.core import ANY, Mechanism
from paperlib.mechanisms.setting import Setting
from paperlib.practitioner.releases import Release, dpsur_release, opacus1_rates, opacus_release

__all__ = ["Run", "Neighbour", "live_opacus_run", "check_run_delta", "MAX_CHECK_STEPS", "IMPLEMENTATIONS",
           "DIVISORS"]

#: most optimiser steps a check composes without ``allow_large`` (the PLD grids grow with the
#: number of steps; 10^6 steps is about 400 epochs of MNIST at batch 256)
MAX_CHECK_STEPS = 1_000_000
#: the code a run can have used: the families of the table of implementations
#: (:data:`paperlib.implementations.registry.FAMILIES`)
IMPLEMENTATIONS = FAMILIES
#: what the noisy sum is divided by: the release's own rule, or a public constant (the fix)
DIVISORS = ("release", "public")


def check_run_delta(delta, dataset_size: int) -> float:
    """``delta`` as a float after checking it is in ``(0, 1/dataset_size]``.

    A larger delta is met by a mechanism that publishes one random record in the clear, so no
    epsilon at that delta protects anyone (and an accountant's RDP conversion can give a negative
    epsilon there). ValueError naming ``delta`` otherwise.
    """
    delta = check_delta(delta)
    if delta > 1 / dataset_size:
        raise ParameterError("delta",
                             f"delta = {delta:g} is above 1/dataset_size = {1 / dataset_size:.3g}: a mechanism that "
                             "publishes one random record in the clear meets it, so no epsilon at this delta protects "
                             "anyone; use delta <= 1/dataset_size (usually far below)")
    return delta


@dataclass(frozen=True)
class Run:
    """The settings of one DP-SGD training run, checked when the value is made.

    Parameters
    ----------
    dataset_size : int >= 2 — records in the training set (``len(data_loader.dataset)``)
    noise_multiplier : float > 0; n_params : int >= 1 (trainable parameters)
    implementation : ``'opacus'`` (default) or ``'dpsur'`` (DPSUR's own code)
    opacus_version : the Opacus release (required for ``'opacus'``; refused for ``'dpsur'``); one the
        stored code audit lists, or any 0.9-1.x with ``assume_release=True``
    batch_size : int in [1, dataset_size], or ``sample_rate`` in (0, 1]: exactly one. A batch size is
        turned into rates as the release does; a sample rate is used on both datasets of each pair
    epochs : int >= 1, or ``steps`` : int >= 1 (optimiser steps in all): exactly one
    loss_reduction : ``'mean'`` (Opacus's default) or ``'sum'`` (SGM)
    divisor : ``'release'`` (what the code divides by) or ``'public'`` (a constant fixed before seeing
        the data: :func:`~paperlib.practitioner.fix.fix_normaliser`; SGM)
    poisson : True, False (refused: neither analysis covers fixed-size batches) or None (the release's
        default; 0.9-0.11 have no built-in Poisson sampling and need True)
    delta : float in (0, 1/dataset_size]: a larger delta lets a mechanism publish a record in the clear
    accountant : ``'rdp'``, ``'prv'`` (Opacus from 1.3) or None (the release's default)
    drop_last : bool, the data loader's flag (Opacus 1.x rule)
    charged_rate : bool — ``sample_rate`` is the rate Opacus charges its accountant (what
        ``IAccountant.step`` receives), used as given for sampling, accounting and the normaliser
    assume_release, allow_large : bool — accept a release outside the stored audit; compose more than
        :data:`MAX_CHECK_STEPS` steps and build a PRV grid above its memory limit
    mechanism : None (default: the release's rule, with ``loss_reduction`` and ``divisor``) or the name of an
        entry of the table of mechanisms (:mod:`~paperlib.mechanisms.registry`) that the code runs instead (a
        modified optimizer; e.g. one registered with
        :func:`~paperlib.mechanisms.registry.register_mechanism`); the release still sets the sampling rule
        and the claim

    Attributes set when made: ``release`` (:class:`~paperlib.practitioner.releases.Release`),
    ``mechanism`` (the :class:`~paperlib.mechanisms.core.Mechanism` that ran: the given one, else the release's
    rule), ``given_mechanism`` (its name when given), ``mechanism_note``, ``q_sample``
    (the loader's Poisson rate), ``q_account`` (the rate charged and normalised with),
    ``steps_per_epoch``, ``sample_rate_rule``, ``rounds`` (``T``), ``claim_accountant``.

    Raises ValueError (TypeError for a boolean that is not one) with one line naming the setting.
    """

    dataset_size: int
    noise_multiplier: float
    n_params: int
    implementation: str = "opacus"
    opacus_version: str | None = None
    batch_size: int | None = None
    sample_rate: float | None = None
    epochs: int | None = None
    steps: int | None = None
    loss_reduction: str = "mean"
    divisor: str = "release"
    poisson: bool | None = None
    delta: float = 1e-5
    accountant: str | None = None
    drop_last: bool = False
    charged_rate: bool = False
    assume_release: bool = False
    allow_large: bool = False
    mechanism: Mechanism | str | None = None
    given_mechanism: str | None = field(init=False, compare=False)
    release: Release = field(init=False, compare=False)
    mechanism_note: str = field(init=False, compare=False)
    q_sample: float = field(init=False, compare=False)
    q_account: float = field(init=False, compare=False)
    steps_per_epoch: int = field(init=False, compare=False)
    sample_rate_rule: str = field(init=False, compare=False)
    rounds: int = field(init=False, compare=False)
    claim_accountant: str = field(init=False, compare=False)

    def _set(self, **values) -> None:
        for k, v in values.items():
            object.__setattr__(self, k, v)

    def __post_init__(self):
        if self.implementation not in IMPLEMENTATIONS:
            raise ParameterError("implementation",
                                 f"implementation must be one of {', '.join(IMPLEMENTATIONS)}, got {self.implementation!r}")
        for name in ("drop_last", "charged_rate", "assume_release", "allow_large"):
            self._set(**{name: check_bool(getattr(self, name), name)})
        if self.poisson is not None:
            self._set(poisson=check_bool(self.poisson, "poisson"))
        release = self._release()
        mech, note = release.mechanism_for(self.loss_reduction, self.divisor)
        given = None
        if self.mechanism is not None:  # the code runs another rule of the table (a modified optimizer)
            if (self.loss_reduction, self.divisor) != ("mean", "release"):
                raise ParameterError("mechanism",
                                     "mechanism: give the rule your code runs, or loss_reduction='sum' / "
                                     "divisor='public' (SGM), not both")
            mech = Mechanism.parse(self.mechanism, ANY)
            given, note = mech.value, f"given: {mech.spec.description}"
        self._set(given_mechanism=given)
        N = check_int(self.dataset_size, "dataset_size", 2)
        self._set(dataset_size=N, release=release, mechanism=mech, mechanism_note=note)
        self._check_sizes(N)
        self._set(noise_multiplier=check_positive(self.noise_multiplier, "noise_multiplier"),
                  n_params=check_int(self.n_params, "n_params", 1))
        self._set(delta=check_run_delta(self.delta, N))
        self._check_accountant_and_sampling(release)
        self._set(**dict(zip(("q_sample", "q_account", "steps_per_epoch", "sample_rate_rule"), self.rates(N))))
        T = self.steps if self.steps is not None else self.epochs * self.steps_per_epoch
        check_size("steps", T, MAX_CHECK_STEPS, allow=self.allow_large, override="allow_large=True",
                   estimate="PLD grids that grow with the number of steps (under 10 s at 23,400 steps)")
        self._set(rounds=T)
        if mech.divides_by_zero(N, self.q_account):
            name = "batch_size" if self.batch_size is not None else "sample_rate"
            raise ParameterError(name, f"{name}: int(dataset_size * sample_rate) = 0, {release.name} divides by zero")

    def _release(self) -> Release:
        if self.implementation == "dpsur":
            if self.opacus_version is not None:
                raise ParameterError("opacus_version",
                                     "opacus_version: DPSUR's code is not an Opacus release; leave it unset for "
                                     "implementation 'dpsur'")
            return dpsur_release()
        if self.opacus_version is None:
            raise ParameterError("opacus_version", "opacus_version: name the Opacus release that ran (e.g. '1.6.0')")
        return opacus_release(self.opacus_version, assume=self.assume_release)

    def _check_sizes(self, N: int) -> None:
        if (self.batch_size is None) == (self.sample_rate is None):
            raise ParameterError("batch_size",
                                 "batch_size or sample_rate: give exactly one of them (the data loader's batch size, or "
                                 "the Poisson sampling rate in (0, 1])")
        if self.batch_size is not None:
            b = check_int(self.batch_size, "batch_size", 1)
            if b > N:
                raise ParameterError("batch_size", f"batch_size = {b:,} is larger than dataset_size = {N:,}")
            self._set(batch_size=b)
        else:
            self._set(sample_rate=check_rate(self.sample_rate, "sample_rate"))
        if self.charged_rate and self.sample_rate is None:
            raise ParameterError("sample_rate", "sample_rate: charged_rate=True needs the charged sample_rate")
        if (self.epochs is None) == (self.steps is None):
            raise ParameterError("epochs", "epochs or steps: give exactly one of them")
        if self.epochs is not None:
            self._set(epochs=check_int(self.epochs, "epochs", 1))
        else:
            self._set(steps=check_int(self.steps, "steps", 1))

    def _check_accountant_and_sampling(self, release: Release) -> None:
        acc = self.accountant
        if acc not in (None, "rdp", "prv"):
            raise ParameterError("accountant", f"accountant must be 'rdp' or 'prv', got {acc!r}")
        if acc is not None and acc not in release.accountants:
            raise ParameterError("accountant",
                                 f"accountant {acc!r} does not exist in {release.name} (PRVAccountant came with Opacus "
                                 "1.3.0); use 'rdp'")
        self._set(claim_accountant=release.default_accountant if acc is None else acc)
        if self.poisson is False:
            how = ("make_private(poisson_sampling=True)" if release.samples_per_loader else
                   "a Poisson sampler (UniformWithReplacementSampler)")
            raise ParameterError("poisson",
                                 f"poisson: without Poisson sampling (fixed-size shuffled batches) {release.name}'s "
                                 f"accountant and this analysis do not apply; train with {how}")
        if self.poisson is None and not release.poisson_builtin:
            raise ParameterError("poisson",
                                 f"poisson: {release.name} has no built-in Poisson sampling (it came with 0.12); pass "
                                 "poisson=True (--poisson) if you sampled with your own Poisson sampler")

    # ------------------------------------------------------------------ the release's sampling rule
    def rates(self, size: int, sample_rate: float | None = None) -> tuple[float, float, int, str]:
        """``(q_sample, q_account, steps_per_epoch, rule)`` of this run's code on ``size`` records.

        ``sample_rate`` overrides the run's (0.x and DPSUR keep the training set's rate on its
        neighbours: a fixed hyperparameter typed by the user). Opacus 1.x derives the rate from each
        dataset's own ``len(data_loader)`` unless a rate is given (:func:`opacus1_rates`).
        """
        rate = self.sample_rate if sample_rate is None else sample_rate
        if self.charged_rate:  # the rate Opacus charges its accountant (and normalises with)
            return rate, rate, max(int(1 / rate), 1), "the rate charged to the accountant"
        if self.release.samples_per_loader:
            if rate is not None:
                steps = int(1 / rate)
                return rate, 1 / steps, steps, "Opacus 1.x with the given sample_rate: len(DPDataLoader) = int(1/q)"
            qs, qa, steps = opacus1_rates(size, self.batch_size, self.drop_last)
            return qs, qa, steps, (f"Opacus 1.x: sample_rate = 1/len(data_loader) = 1/"
                                   f"{'floor' if self.drop_last else 'ceil'}(N/batch)")
        who = "DPSUR" if self.release.implementation == "dpsur" else "Opacus 0.x"
        if rate is None:
            rate = self.batch_size / size
            rule = f"{who}: sample_rate = batch_size / sample_size"
        else:
            rule = f"{who}: the given sample_rate"
        return rate, rate, max(int(1 / rate), 1), rule

    # ------------------------------------------------------------------ the neighbouring datasets
    def neighbours(self) -> tuple["Neighbour", "Neighbour"]:
        """The run's two neighbouring pairs, removal ``(N - 1, N)`` and addition ``(N, N + 1)``, as its code
        treats them (THEORY.md §10, §11.3c): the one place their rates, steps per epoch and normalisers are
        derived, for ``check``, :func:`~paperlib.practitioner.check.check_opacus` and
        :class:`~paperlib.practitioner.accountant.CertifiedAccountant` alike.

        Opacus 1.x with a batch size derives each dataset's rate from its own ``len(data_loader)``
        (:func:`~paperlib.practitioner.releases.opacus1_rates`); a given sample rate, Opacus 0.x and DPSUR
        keep the training set's rate on both datasets (a fixed hyperparameter). Derived once per run (the
        pairs, and their :class:`~paperlib.mechanisms.setting.Setting`, are kept).
        """
        kept = self.__dict__.get("_neighbours")
        if kept is not None:
            return kept
        # 0.x and DPSUR: the rate is a fixed hyperparameter (batch_size / sample_size, typed by the user) on both
        # datasets; Opacus 1.x derives it from each dataset's own len(data_loader) unless a rate is given
        fixed = self.sample_rate if self.release.samples_per_loader else self.q_sample
        pairs = tuple(self._neighbour(name, small, fixed)
                      for name, small in (("removal", self.dataset_size - 1), ("addition", self.dataset_size)))
        object.__setattr__(self, "_neighbours", pairs)
        return pairs

    def _neighbour(self, name: str, small: int, fixed: float | None) -> "Neighbour":
        qs_a, qa_a, st_a, _ = self.rates(small, fixed)
        qs_b, qa_b, st_b, _ = self.rates(small + 1, fixed)
        common = dict(name=name, sizes=(small, small + 1), sample_rates=(qs_a, qs_b), charged_rates=(qa_a, qa_b),
                      steps_per_epoch=(st_a, st_b))
        if (qs_a, qa_a) != (qs_b, qa_b):
            # THEORY.md §11.3c: a different number of updates is a perfect test (count them)
            epochs = self.epochs
            if epochs is None and self.steps % self.steps_per_epoch == 0:
                epochs = self.steps // self.steps_per_epoch  # whole epochs of this loader (an accountant's count)
            T_a, T_b = (self.steps, self.steps) if epochs is None else (epochs * st_a, epochs * st_b)
            if T_a != T_b:
                return Neighbour(**common, update_counts=(T_a, T_b))
            return Neighbour(**common, not_covered=(
                f"Opacus derives a different sampling rate for each dataset (len(data_loader) {round(1 / qs_a)} vs "
                f"{round(1 / qs_b)}) while the number of steps is the same ({T_a:,}); no analysis of a sampling rate "
                "that depends on the data set is known: give the sample rate itself (make_private with a "
                "sample_rate, or a batch size that does not divide N - 1, N or N + 1)"))
        spec, q = self.mechanism.spec, qa_a
        floors_agree = None
        if spec.floors is not None:
            K, K1 = spec.floors(small, q)
            if K == 0:
                return Neighbour(**common, normalisers=(K, K1),
                                 not_covered="int(N q) = 0: Opacus divides by zero on the smaller dataset")
            normalisers, floors_agree = (K, K1), K == K1
        elif self.divisor == "public":
            normalisers = ("public", "public")
        else:
            normalisers = spec.pair_normalisers(small, q)
        sgm = spec.sgm_always or bool(floors_agree)
        # the charged rate qa_a >= qs_a: what make_private's own DPDataLoader samples with, and conservative for a
        # loader of yours that samples at qs_a (check's notes say so where the two differ)
        fields = dict(mechanism=self.mechanism, N=small, q=q, sigma=self.noise_multiplier, n=self.n_params,
                      rounds=self.rounds, delta=self.delta, neighbour=name)
        return Neighbour(**common, normalisers=normalisers, floors_agree=floors_agree,
                         sgm=sgm, setting_fields=tuple(fields.items()))

    def inputs(self) -> dict:
        """The settings as given (validated), for the report."""
        return {"implementation": self.implementation, "opacus_version": self.opacus_version,
                "dataset_size": self.dataset_size, "batch_size": self.batch_size, "sample_rate": self.sample_rate,
                "epochs": self.epochs, "steps": self.steps, "noise_multiplier": self.noise_multiplier,
                "n_params": self.n_params, "loss_reduction": self.loss_reduction, "divisor": self.divisor,
                "poisson": True, "delta": self.delta, "accountant": self.claim_accountant,
                "drop_last": self.drop_last, **({} if self.given_mechanism is None else
                                                {"mechanism": self.given_mechanism})}


@dataclass(frozen=True)
class Neighbour:
    """One neighbouring pair of a run, ``sizes = (N', N' + 1)`` records, as the run's code treats it
    (:meth:`Run.neighbours`).

    ``sample_rates``, ``charged_rates``, ``steps_per_epoch``: on each dataset of the pair.
    ``update_counts``: ``(T, T')``, the numbers of updates on each dataset where they differ (Opacus 1.x when a
    dataset size crosses a multiple of the batch size: counting the updates tells the two apart, THEORY.md
    §11.3c), else None. ``not_covered``: why no analysis covers the pair (a division by zero, or a sampling
    rate that differs with the same number of steps), else None. ``normalisers``: what the code divides by on each dataset (None when
    the rates differ). ``floors_agree``: FEASGM's ``int(N q)`` equal on both (None for other mechanisms).
    ``sgm``: the pair's releases are post-processing of SGM's, so the SGM analysis applies. ``setting``:
    the pair as the computing layers take it (:class:`~paperlib.mechanisms.setting.Setting`: the run's
    mechanism, ``N'``, the charged rate, noise multiplier, parameters, steps, delta; None when not covered).
    """

    name: str
    sizes: tuple[int, int]
    sample_rates: tuple[float, float]
    charged_rates: tuple[float, float]
    steps_per_epoch: tuple[int, int]
    normalisers: tuple | None = None
    floors_agree: bool | None = None
    sgm: bool = False
    not_covered: str | None = None
    update_counts: tuple[int, int] | None = None
    setting_fields: tuple | None = field(default=None, repr=False)

    @functools.cached_property
    def setting(self) -> Setting | None:
        """The pair as a validated :class:`~paperlib.mechanisms.setting.Setting`, made on first use (once), so a run
        derived only for its structure (a remedy checked by ``check``) validates none; None when not covered."""
        return None if self.setting_fields is None else Setting(**dict(self.setting_fields))

    @property
    def rate(self) -> float:
        """The rate the pair is charged and normalised with (equal on both datasets when covered)."""
        return self.charged_rates[0]


# ------------------------------------------------------------------------------ a live Opacus run
def _loader_batches(dataset_size: int, batch_size: int, drop_last: bool) -> int:
    return dataset_size // batch_size if drop_last else -(-dataset_size // batch_size)


def _batch_sizes_for(dataset_size: int, batches: int, drop_last: bool) -> tuple[int, int] | None:
    """The range ``(lo, hi)`` of batch sizes in ``[1, dataset_size]`` whose DataLoader has ``batches``
    batches an epoch over ``dataset_size`` records (None when none has)."""
    N, L = dataset_size, batches
    if L < 1 or L > N:
        return None
    if drop_last:  # floor(N / B) = L  <=>  N / (L + 1) < B <= N / L
        lo, hi = N // (L + 1) + 1, N // L
    else:  # ceil(N / B) = L  <=>  N / L <= B < N / (L - 1)
        lo = -(-N // L)
        hi = N if L == 1 else (N - 1) // (L - 1)
    lo, hi = max(lo, 1), min(hi, N)
    if lo > hi or _loader_batches(N, lo, drop_last) != L or _loader_batches(N, hi, drop_last) != L:
        return None
    return lo, hi


def live_opacus_run(*, dataset_size: int, sample_rate: float, charged: bool = False, batch_size: int | None = None,
                    drop_last: bool = False, **settings) -> tuple[Run, list[str]]:
    """The :class:`Run` of a live Opacus training run, from what its objects hold, and notes on how it was read.

    One derivation for :func:`~paperlib.practitioner.check.check_opacus` (``sample_rate``: the
    ``DPDataLoader``'s) and :class:`~paperlib.practitioner.accountant.CertifiedAccountant`
    (``charged=True``: the rate Opacus charges its accountant), so both give the answer that
    ``python -m paperlib check --batch-size B`` gives for the same run.

    Opacus 1.x ``make_private`` derives the rate from ``len(data_loader)``, so a neighbouring dataset
    may get another rate; which one depends on the DataLoader's ``batch_size``. With ``batch_size``
    given, the run is the command line's run (and the rate it implies must be the live one: else
    ValueError naming ``batch_size``). Without it, every batch size whose loader has the live number of
    batches is tried; when they all give the neighbours the same rates, the answer is theirs, else
    ValueError naming ``batch_size`` (pass it). A live rate that no batch size gives (a loader built
    with its own ``sample_rate``) is kept on both datasets of each pair. Opacus 0.x and DPSUR keep the
    rate on both datasets in any case. ``settings``: the other fields of :class:`Run`.
    """
    N = check_int(dataset_size, "dataset_size", 2)
    sample_rate = check_rate(sample_rate, "sample_rate")
    drop_last = check_bool(drop_last, "drop_last")
    given = dict(settings, dataset_size=N, drop_last=drop_last)
    fixed = Run(**given, sample_rate=sample_rate, charged_rate=charged)
    if not fixed.release.samples_per_loader:
        if batch_size is not None:  # 0.x: the rate is batch_size / sample_size; a batch size is informational
            check_int(batch_size, "batch_size", 1)
        return fixed, []
    live = "the rate charged to the accountant" if charged else "the loader's sample rate"

    def matches(run: Run) -> bool:
        got = run.q_account if charged else run.q_sample
        return math.isclose(got, sample_rate, rel_tol=1e-12, abs_tol=0.0)

    if batch_size is not None:
        run = Run(**given, batch_size=batch_size)
        if not matches(run):
            raise ParameterError("batch_size",
                                 f"batch_size = {run.batch_size:,} over {N:,} records gives a sample rate of "
                                 f"1/{run.steps_per_epoch:,}, but {live} is {sample_rate:.6g}: pass the DataLoader's "
                                 "batch size and the training set's size")
        return run, []
    steps = round(1 / sample_rate)
    for L in dict.fromkeys((steps, steps + 1)):  # 1/int(1/(1/L)) may charge 1/(L - 1) (e.g. L = 93)
        span = _batch_sizes_for(N, L, drop_last)
        if span is None:
            continue
        ends = [Run(**given, batch_size=b) for b in span]
        if not all(matches(r) for r in ends):
            continue
        if ends[0].neighbours() != ends[1].neighbours():
            a, b = span
            raise ParameterError("batch_size",
                                 f"batch_size: {L:,} batches an epoch over {N:,} records fit batch sizes {a:,} to {b:,}, "
                                 "whose neighbouring datasets get different sampling rates or normalisers; pass the "
                                 "DataLoader's batch_size")
        # the neighbours' rates and normalisers are monotone in the batch size: equal at both ends, equal between
        a, b = span
        return ends[0], [f"the DataLoader's batch size was not given: the {L:,} batches an epoch over {N:,} records "
                         f"fit batch sizes {a:,} to {b:,}, and every one gives the neighbouring datasets the same "
                         "rates and normalisers"]
    return fixed, [f"{live} {sample_rate:.6g} is not 1/len(data_loader) for any batch size: it is kept on both "
                   "datasets of each pair (a DPDataLoader built with its own sample_rate)"]
