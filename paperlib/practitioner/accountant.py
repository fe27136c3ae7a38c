"""An Opacus accountant that reports the certified epsilon of the mechanism Opacus runs.

:class:`CertifiedAccountant` has Opacus's own interface (``opacus.accountants.IAccountant``:
``step(noise_multiplier=, sample_rate=)``, ``get_epsilon(delta)``, ``mechanism()``, ``len``,
``history``, ``state_dict``), so it can stand in for the RDP/PRV accountant of a
``PrivacyEngine``::

    from opacus import PrivacyEngine
    from paperlib.practitioner import CertifiedAccountant

    engine = PrivacyEngine()
    engine.accountant = CertifiedAccountant(opacus_version="1.6.0", dataset_size=len(train_set),
                                            n_params=sum(p.numel() for p in model.parameters()))
    model, optimizer, loader = engine.make_private(module=model, optimizer=optimizer, data_loader=loader,
                                                   noise_multiplier=1.1, max_grad_norm=1.0)
    ...                                          # train
    engine.get_epsilon(1e-5)                      # certified epsilon of the steps taken so far

Set it before ``make_private`` (which attaches the accountant's step hook to the optimizer),
or attach it afterwards with ``optimizer.attach_step_hook(acc.get_optimizer_hook_fn(sample_rate))``.

``get_epsilon(delta)`` is the certified epsilon of the steps taken so far for add/remove
neighbours of the training set, the larger over removal and addition
(:func:`paperlib.practitioner.check.check_run`, THEORY.md §11): the mechanism of the release
(Table 2), the sampling rate it is charged on both datasets of each pair. Where the SGM analysis
applies (``loss_reduction='sum'``, FEASGM whose floors agree, an optimizer fixed by
:func:`~paperlib.practitioner.fix.fix_normaliser`, which the step hook recognises) this is the SGM
epsilon by PLD; elsewhere the certified composition of the per-pair guarantee. ``get_epsilon``
returns ``inf`` when a neighbour cannot be certified (the reason is in :meth:`last_report`, whose
claim is the release's own accountant's: PRV from Opacus 1.3, RDP before). This module imports
torch and Opacus; nothing in ``paperlib.fdp`` or ``paperlib.mechanisms`` imports it.
"""

from __future__ import annotations

import math

from opacus.accountants import IAccountant

from paperlib.fdp.validation import ParameterError, ParameterTypeError, check_bool, check_int, check_positive, check_rate
from paperlib.practitioner.fix import fixed_divisor
from paperlib.practitioner.releases import opacus_release
from paperlib.practitioner.run import check_run_delta, live_opacus_run

__all__ = ["CertifiedAccountant", "register_certified_accountant", "ACCOUNTANT_NAME"]

#: The name :func:`register_certified_accountant` registers with Opacus: ``PrivacyEngine(accountant=ACCOUNTANT_NAME)``.
ACCOUNTANT_NAME = "paperlib-certified"
RELATIONS = ("add/remove", "replace-one")


class CertifiedAccountant(IAccountant):
    """Opacus accountant (``IAccountant``) whose epsilon is the certified epsilon of the run (THEORY.md §11).

    Parameters
    ----------
    opacus_version : str — the release whose mechanism runs (default: the installed Opacus)
    dataset_size : int >= 2 — records in the training set
    n_params : int >= 1 — trainable parameters of the model
    batch_size, drop_last : the DataLoader's, as given to ``make_private`` (Opacus does not keep them):
        a neighbouring dataset gets its own ``len(data_loader)``, so its rate can depend on them. With
        ``batch_size`` the report is ``python -m paperlib check --batch-size``'s, and a charged rate the
        batch size does not give is refused; without it, the batch sizes that fit the charged rate are
        tried (:func:`~paperlib.practitioner.run.live_opacus_run`)
    loss_reduction : 'mean' (default) or 'sum'
    divisor : 'release' (default; 'public' once the optimizer's step hook sees an optimizer fixed by
        :func:`~paperlib.practitioner.fix.fix_normaliser`) or 'public' (a public constant divisor)
    assume_release, allow_large : as for :class:`~paperlib.practitioner.run.Run`
    pld_options : accuracy options of the PLD engine (:class:`~paperlib.fdp.pld.PLDComposition`)

    ``history`` is a list of ``(noise_multiplier, sample_rate, steps)`` as in Opacus's
    ``RDPAccountant`` (consecutive equal steps merged). ``get_epsilon`` composes one
    ``(noise_multiplier, sample_rate)`` pair; a history with different values raises ValueError
    (the certified composition of unequal rounds is not implemented). Every argument is checked
    when the accountant is made (ValueError, TypeError naming it), and ``delta`` at every
    :meth:`get_epsilon`, before any step.
    """

    def __init__(self, *, opacus_version: str | None = None, dataset_size: int, n_params: int | None,
                 batch_size: int | None = None, drop_last: bool = False, loss_reduction: str = "mean",
                 divisor: str = "release",
                 assume_release: bool = False, allow_large: bool = False, pld_options: dict | None = None):
        super().__init__()
        if opacus_version is None:
            import opacus

            opacus_version = opacus.__version__
        release = opacus_release(opacus_version, assume=assume_release)
        release.mechanism_for(loss_reduction, divisor)  # checks both
        if pld_options is not None and not isinstance(pld_options, dict):
            raise ParameterTypeError("pld_options", f"pld_options must be a dict of PLD accuracy options or None, got "
                                                    f"{type(pld_options).__name__}")
        self.opacus_version = opacus_version
        self.dataset_size = check_int(dataset_size, "dataset_size", 2)
        # None: learned from the optimizer at its first step (the step hook sees its parameters)
        self.n_params = None if n_params is None else check_int(n_params, "n_params", 1)
        self.batch_size = None if batch_size is None else check_int(batch_size, "batch_size", 1)
        self.drop_last = check_bool(drop_last, "drop_last")
        self.loss_reduction = loss_reduction
        self.divisor = divisor
        self.assume_release = check_bool(assume_release, "assume_release")
        self.allow_large = check_bool(allow_large, "allow_large")
        self.accountant = release.default_accountant  # the claim last_report quotes
        self.pld_options = dict(pld_options or {})
        self._last = None
        self._cache = {}
        self._checked = None  # (optimizer id, sample rate) last checked by the step hook

    def step(self, *, noise_multiplier: float, sample_rate: float):
        """One optimiser step at ``(noise_multiplier, sample_rate)`` (Opacus calls it through its hook)."""
        noise_multiplier = check_positive(noise_multiplier, "noise_multiplier")
        sample_rate = check_rate(sample_rate, "sample_rate")
        if self.history and self.history[-1][:2] == (noise_multiplier, sample_rate):
            sigma, q, k = self.history.pop()
            self.history.append((sigma, q, k + 1))
        else:
            self.history.append((noise_multiplier, sample_rate, 1))

    def get_optimizer_hook_fn(self, sample_rate: float):
        """Opacus's step hook (``IAccountant.get_optimizer_hook_fn``), which also notes whether the
        optimizer divides by a public constant (:func:`~paperlib.practitioner.fix.fixed_divisor`)."""
        step = super().get_optimizer_hook_fn(sample_rate)

        def hook_fn(optim):
            if fixed_divisor(optim) is not None:
                self.divisor = "public"
            if self.n_params is None:
                self.n_params = sum(p.numel() for p in optim.params)  # DPOptimizer.params: those with requires_grad
            if self._checked != (id(optim), sample_rate):  # once per optimizer and rate, not at every step
                self._check_against(optim, sample_rate)
                self._checked = (id(optim), sample_rate)
            step(optim)

        return hook_fn

    def _check_against(self, optim, sample_rate: float) -> None:
        """Refuse (one line naming the argument) what the accountant was told where the optimizer it hooks holds
        otherwise: a release of another major version than the optimizer's, or a dataset size whose
        ``int(dataset_size * sample_rate)`` is not the optimizer's expected batch size (Opacus 1.x computes it so)."""
        import opacus

        try:
            installed = opacus_release(opacus.__version__, assume=True)
        except ValueError:  # a development build whose version the audit cannot place: nothing to compare
            return
        told = opacus_release(self.opacus_version, assume=self.assume_release)
        if told.key[0] != installed.key[0]:
            raise ParameterError("opacus_version", f"opacus_version: {self.opacus_version!r} was given, but the "
                                                   f"optimizer is Opacus {opacus.__version__}'s; leave it unset (the "
                                                   "installed release is used)")
        expected = getattr(optim, "expected_batch_size", None)
        if expected is not None and fixed_divisor(optim) is None and installed.key[0] >= 1:
            derived = int(self.dataset_size * sample_rate)
            if derived != expected:
                raise ParameterError("dataset_size", f"dataset_size: {self.dataset_size:,} records at the sampling "
                                                     f"rate {sample_rate:.6g} give int(N q) = {derived}, but the "
                                                     f"optimizer divides by {expected}; give the training set's size")

    def load_state_dict(self, state_dict):
        """Opacus's ``load_state_dict``, with each ``history`` entry checked: ``(noise_multiplier > 0, sample_rate
        in (0, 1], steps >= 1)``; ParameterError naming ``history`` otherwise (not a TypeError later)."""
        super().load_state_dict(state_dict)
        history = []
        for entry in self.history:
            try:
                sigma, q, k = entry
                history.append((check_positive(sigma, "noise_multiplier"), check_rate(q, "sample_rate"),
                                check_int(k, "steps", 1)))
            except (TypeError, ValueError):
                self.history = []
                raise ParameterError("history", f"history: each entry must be (noise_multiplier > 0, sample_rate in "
                                                f"(0, 1], steps >= 1), got {entry!r}") from None
        self.history = history
        self._cache = {}

    def __len__(self) -> int:
        return len(self.history)

    @classmethod
    def mechanism(cls) -> str:
        return "certified"

    def _report(self, delta: float):
        if not self.history:
            return None
        pairs = {(s, q) for s, q, _ in self.history}
        if len(pairs) > 1:
            raise ParameterError("noise_multiplier",
                                 f"noise_multiplier and sample_rate: the history holds {len(pairs)} different pairs; the "
                                 "certified composition of unequal rounds is not implemented")
        sigma, q = next(iter(pairs))
        if self.n_params is None:
            raise ParameterError("n_params", "n_params: not known yet; give n_params, or let the optimizer's step hook "
                                             "(make_private attaches it) see the model's parameters")
        T = sum(k for _, _, k in self.history)
        key = (sigma, q, T, float(delta), self.divisor)
        if key not in self._cache:
            from paperlib.practitioner.check import check

            # the rate Opacus passes is the one it charges and normalises with (1/len(DPDataLoader))
            run, how = live_opacus_run(dataset_size=self.dataset_size, sample_rate=q, charged=True,
                                       batch_size=self.batch_size, drop_last=self.drop_last, steps=T,
                                       opacus_version=self.opacus_version, noise_multiplier=sigma,
                                       n_params=self.n_params, loss_reduction=self.loss_reduction,
                                       divisor=self.divisor, poisson=True, delta=delta, accountant=self.accountant,
                                       assume_release=self.assume_release, allow_large=self.allow_large)
            report = check(run, self.pld_options)
            report.notes += how
            report.inputs["batch_size"] = self.batch_size
            self._cache = {key: report}
        self._last = self._cache[key]
        return self._last

    def get_epsilon(self, delta: float, relation: str = "add/remove", **kwargs) -> float:
        """Certified epsilon of the steps so far at ``delta`` (0 before any step).

        ``relation``: ``"add/remove"`` (default; the data-set size private, the relation of Opacus's own claim):
        both neighbours, the larger, ``inf`` where a neighbour cannot be certified; ``"replace-one"`` (the size
        public): the replace-one epsilon of :func:`~paperlib.practitioner.check.check_run` (THEORY.md §11.3d),
        ``inf`` where none is computed. ``delta`` in (0, 1/dataset_size] is checked first."""
        delta = check_run_delta(delta, self.dataset_size)
        if relation not in RELATIONS:
            raise ParameterError("relation", f"relation must be one of {', '.join(RELATIONS)}, got {relation!r}")
        r = self._report(delta)
        if r is None:
            return 0.0
        eps = r.epsilon_certified if relation == "add/remove" else (r.replace_one or {}).get("epsilon")
        return float(eps) if eps is not None else math.inf

    def last_report(self):
        """The full report (a :class:`~paperlib.practitioner.report.CheckReport`, as
        :func:`paperlib.practitioner.check.check_run` returns) behind the last :meth:`get_epsilon`; None before any
        step."""
        return self._last


def register_certified_accountant(*, dataset_size: int, n_params: int | None = None, name: str = ACCOUNTANT_NAME,
                                  **options) -> type:
    """Register :class:`CertifiedAccountant` with Opacus (``opacus.accountants.registry.register_accountant``) so that
    ``PrivacyEngine(accountant=name)`` makes one: Opacus builds accountants without arguments, so the data-set size
    (which the optimizer does not know) is given here; ``n_params`` is learned from the optimizer at its first step
    when not given. ``options``: the other arguments of :class:`CertifiedAccountant` (``opacus_version``,
    ``batch_size``, ...). Every argument is checked now (ParameterError naming it). Returns the registered class;
    a second call replaces the registration. Needs an Opacus with the accountant registry (1.5 and later)::

        register_certified_accountant(dataset_size=len(train_set))
        engine = PrivacyEngine(accountant="paperlib-certified")
    """
    try:
        from opacus.accountants.registry import register_accountant
    except ImportError:  # pragma: no cover - Opacus before the registry
        raise ParameterError("opacus", "opacus: this release has no accountant registry (opacus.accountants.registry); "
                                       "set engine.accountant = CertifiedAccountant(...) instead") from None
    if not isinstance(name, str) or not name.strip():
        raise ParameterError("name", f"name must be a non-empty string, got {name!r}")
    CertifiedAccountant(dataset_size=dataset_size, n_params=n_params, **options)  # every argument checked now

    class RegisteredCertifiedAccountant(CertifiedAccountant):
        __doc__ = CertifiedAccountant.__doc__

        def __init__(self):
            super().__init__(dataset_size=dataset_size, n_params=n_params, **options)

    register_accountant(name, RegisteredCertifiedAccountant, force=True)
    return RegisteredCertifiedAccountant
