"""The run's true epsilon between two proven ends: certified (upper) and forced (lower) (THEORY.md §11).

* **Certified** — a per-round pair that dominates the mechanism for every set of clipped gradients,
  composed over ``T`` rounds (:mod:`paperlib.fdp.pld`, both orders, pessimistic end):

  ============================  ========================================================
* **Forced** — the epsilon of a named real attack (:mod:`paperlib.mechanisms.attacks`: data sets,
  gradients, test, errors computed exactly), the lower end of its bracket: the chi-square scale test
  (EASGM, FEASGM with differing floors), the aligned attack (ASGM), the target-alone attack (DPSUR);
  for SGM and FEASGM with agreeing floors the SGM worst case itself (others 0, target ``C u``, the
  likelihood-ratio test along ``u``), the lower end of the SGM composition. The upper bounds of §7
  (Eq. 14 for ASGM) bound the *index-revealed guarantee*, not the mechanism: they are not forced values.

:func:`certified_interval` gives both for the pair of sizes ``(N, N + 1)``;
:func:`certified_for_training_set` for both neighbours of a training set (removal and addition).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from paperlib.fdp.pld import DEFAULT_REL_TOL, PLDComposition, round_law_from_mixture
from paperlib.mechanisms.attacks import attack_for, hidden_tail
from paperlib.mechanisms.certificates import asgm_count_certificate
from paperlib.mechanisms.chain import chain_certificate
from paperlib.mechanisms.core import Mechanism
from paperlib.mechanisms.guarantees import DEFAULT_TAIL_TOL, guarantee
from paperlib.mechanisms.multiround import sgm_claim_rounds
from paperlib.mechanisms.setting import Setting
from paperlib.fdp.validation import ParameterError, check_int

__all__ = ["certified_guarantee", "certified_interval", "forced_epsilon", "certified_for_training_set",
           "ForcedEpsilon", "CertifiedInterval", "PairError", "TrainingSetInterval",
           "CERTIFICATES"]

#: Names of the certificates (``certified_method`` of :func:`certified_interval`).
CERTIFICATES = {"sgm": "SGM claim f_q^(xT) (the mechanism is SGM or post-processes it)",
                "index": "index revealed (THEORY.md §6: whether the target was sampled is revealed)",
                "count": "count revealed (THEORY.md §11.2: (|B|, S_B + G), n-free)",
                "chain": "chain of SGM and a scale test (THEORY.md §11.3b: keeps the amplification)",
                "dpsur": "count of the separate draw x SGM step (THEORY.md §11.4)"}


def _index_certificate(s: Setting, rel_tol, meta, **pld_options) -> PLDComposition:
    # dropped binomial mass counts as +inf loss in every round: keep T * tail_tol far below delta;
    # not below 1e-15 (scipy's binom.isf returns N for tails under ~1e-16)
    T = s.rounds
    tail_tol = max(1e-15, min(DEFAULT_TAIL_TOL, 1e-13 / T))
    one = guarantee(s.mechanism, s.N, s.q, s.sigma, s.n, tail_tol=tail_tol)
    meta = dict(meta, binomial_dropped_per_round=float(getattr(one, "dropped_mass", 0.0)),
                certificate=CERTIFICATES["index"])
    return PLDComposition(round_law_from_mixture(one), T, side="guarantee", rel_tol=rel_tol,
                          label=f"{s.spec.title} certified guarantee (index revealed), {T} round{'s' * (T > 1)} (PLD)",
                          meta=meta, **pld_options)


def _count_first(s: Setting) -> bool:
    """ASGM without a delta: the count certificate unless its infinite mass ``T q^(N+1)`` is not negligible
    or ``n`` is small against the batch size (there the index-revealed one wins; THEORY.md §11.2)."""
    N, q = s.N, s.q
    return q < 1 and s.rounds * math.exp((N + 1) * math.log(q)) <= 1e-9 and s.n - 1 > (N * q + 1) ** 2


def certified_guarantee(setting: Setting, *, rel_tol: float = DEFAULT_REL_TOL, certificate: str = "auto",
                        **pld_options) -> PLDComposition:
    """A certified ``T``-round guarantee of the setting's mechanism for the pair ``(N, N+1)`` (module docstring).

    Parameters
    ----------
    setting : :class:`~paperlib.mechanisms.setting.Setting` (mechanism, ``N``, ``q``, ``sigma``, ``n``,
        ``rounds``; ``delta`` is not used)
    certificate : ``"auto"`` (the mechanism's certificate; for ASGM the count-revealed one unless its
        infinite mass or a small ``n`` favours the index-revealed one), ``"count"`` or ``"index"`` (ASGM)
    rel_tol, **pld_options : accuracy target and grid options of :class:`~paperlib.fdp.pld.PLDComposition`

    Returns a :class:`~paperlib.fdp.pld.PLDComposition` on its guarantee side: ``epsilon(delta)`` (upper
    end: valid, never understated), ``epsilon_bounds(delta)``, ``delta(eps)``, ``f(alpha)`` (a lower bound
    of the composed trade-off ``T(P, Q)``), ``curve()``, ``meta`` (mechanism, case, ``certificate``,
    ``meta['pld']``). Raises ValueError naming ``certificate`` for another value, and naming ``q`` for
    FEASGM with ``floor(N q) = 0`` (division by zero).
    """
    s = setting
    if certificate not in ("auto", "count", "index"):
        raise ParameterError("certificate", f"certificate must be 'auto', 'count' or 'index', got {certificate!r}")
    N, T, spec = s.N, s.rounds, s.spec
    meta = {"mechanism": s.mechanism.value, "bound": "certified", "N": N, "q": s.q, "sigma": s.sigma, "n": s.n,
            "rounds": T, "pair": [N, N + 1]}
    if spec.floors is not None:
        K, K1 = spec.floors(N, s.q)
        meta.update(K=K, K_prime=K1, case="floors agree" if K == K1 else "floors differ")
    if s.equals_sgm():
        c = sgm_claim_rounds(s.q, s.sigma, rounds=T, side="lower", rel_tol=rel_tol, **pld_options)
        c.meta.update(meta, certificate=CERTIFICATES["sgm"])
        c.label = (f"SGM f_q^(x{T}) (certified, PLD)" if spec.sgm_always
                   else f"{spec.title} certified, {T} round{'s' * (T > 1)} (floors agree: SGM f_q^(x{T}))")
        return c
    own = spec.computation("own_certificate")  # a mechanism's own certificate (DPSUR's rule: THEORY.md §11.4)
    if own is not None:
        return own(s, rel_tol=rel_tol, **pld_options)
    if "count" in spec.certificates and s.q < 1 and (certificate == "count" or
                                                      (certificate == "auto" and _count_first(s))):
        c = asgm_count_certificate(s, rel_tol=rel_tol, **pld_options)
        c.meta.update(n=s.n, certificate=CERTIFICATES["count"])
        return c
    return _index_certificate(s, rel_tol, meta, **pld_options)


def _candidates(s: Setting, rel_tol, **pld_options) -> list:
    """``(name, composition)`` of every certificate worth computing for this pair."""
    if "count" in s.spec.certificates and s.q < 1:
        out = [("count", certified_guarantee(s, rel_tol=rel_tol, certificate="count", **pld_options))]
        if not _count_first(s) or s.N <= 1000:
            out.append(("index", certified_guarantee(s, rel_tol=rel_tol, certificate="index", **pld_options)))
        return out
    c = certified_guarantee(s, rel_tol=rel_tol, **pld_options)
    name = "sgm" if s.equals_sgm() else s.spec.certificates[0] if s.spec.own_certificate else "index"
    out = [(name, c)]
    if "chain" in s.spec.certificates and not s.equals_sgm() and s.q < 1:
        chain = chain_certificate(s, rel_tol=rel_tol, **pld_options)
        chain.meta["certificate"] = CERTIFICATES["chain"]
        out.insert(0, ("chain", chain))
    return out


def _delta_of(s: Setting) -> float:
    if s.delta is None:
        raise ParameterError("delta", "delta: this setting has none; give the Setting a delta in (0, 1)")
    return s.delta


@dataclass(frozen=True)
class ForcedEpsilon:
    """The epsilon a named real attack forces (:func:`forced_epsilon`; THEORY.md §11.5).

    ``epsilon_forced``: the lower end of ``epsilon_forced_bracket`` (``[lo, hi]`` of the attack's own
    accounting); ``forced_method``: how its errors are computed; ``forced_label``: the curve's label;
    ``forced_attack``: the attack in words (``name``, ``datasets``, ``gradients``, ``test``, ``method``).
    """

    epsilon_forced: float
    epsilon_forced_bracket: list
    forced_method: str
    forced_label: str
    forced_attack: dict

    def to_json(self) -> dict:
        """The result as a dict of JSON values (its field names as keys)."""
        return asdict(self)


@dataclass(frozen=True)
class CertifiedInterval:
    """The certified and forced epsilon of a pair ``(N, N+1)`` at ``delta`` (:func:`certified_interval`).

    The setting (``mechanism`` name, ``N``, ``pair``, ``q``, ``sigma``, ``n``, ``rounds``, ``delta``); the
    certified end (``epsilon_certified``, the upper end of ``epsilon_certified_bracket``; its
    ``certified_accounting_error = hi - lo``, ``certified_method``, ``certified_candidates`` {certificate:
    [lo, hi]} of every certificate computed, ``accuracy_met``, ``certified_label``, ``certified_grid``); the
    forced end (the :class:`ForcedEpsilon` fields and ``forced_accounting_error``); FEASGM's ``case``, ``K``,
    ``K_prime`` (None otherwise); a one-sentence ``statement``. ``epsilon_forced <= true epsilon <=
    epsilon_certified``.
    """

    mechanism: str
    N: int
    pair: list
    q: float
    sigma: float
    n: int
    rounds: int
    delta: float
    epsilon_certified: float
    epsilon_certified_bracket: list
    certified_accounting_error: float | None
    certified_method: str
    certified_candidates: dict
    epsilon_forced: float
    epsilon_forced_bracket: list
    forced_accounting_error: float | None
    forced_method: str
    forced_attack: dict
    accuracy_met: bool | None
    certified_label: str
    forced_label: str
    certified_grid: float | None
    statement: str
    case: str | None = None
    K: int | None = None
    K_prime: int | None = None

    def to_json(self) -> dict:
        """The result as a dict of JSON values; FEASGM's ``case``, ``K``, ``K_prime`` only where they apply."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if not (f.name in ("case", "K", "K_prime") and getattr(self, f.name) is None)}


@dataclass(frozen=True)
class PairError:
    """A pair with no interval: its sizes and why (FEASGM dividing by zero on it)."""

    pair: list
    error: str

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TrainingSetInterval:
    """Both neighbours of a training set (:func:`certified_for_training_set`): ``removal`` and ``addition``
    (each a :class:`CertifiedInterval`, or a :class:`PairError`), the larger certified and forced epsilons
    (None where neither pair has one) and the parameters."""

    mechanism: str
    N_train: int
    q: float
    sigma: float
    n: int
    rounds: int
    delta: float
    removal: CertifiedInterval | PairError
    addition: CertifiedInterval | PairError
    epsilon_certified: float | None
    epsilon_forced: float | None

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["removal"], out["addition"] = self.removal.to_json(), self.addition.to_json()
        return out


def certified_interval(setting: Setting, *, rel_tol: float = DEFAULT_REL_TOL, **pld_options) -> CertifiedInterval:
    """``epsilon_certified`` and ``epsilon_forced`` of the setting's mechanism for the pair ``(N, N+1)`` at its
    ``delta`` (a :class:`~paperlib.mechanisms.setting.Setting` with a delta), as a :class:`CertifiedInterval`.

    ``epsilon_certified``: the upper end of the smallest valid certificate's bracket (``certified_method``
    names it; ``certified_candidates`` lists every certificate computed with its bracket).
    ``epsilon_forced``: the lower end of the bracket of a named real attack's epsilon (``forced_attack``
    describes it: data sets, gradients, test; ``forced_method`` how its errors are computed). So
    ``epsilon_forced <= true epsilon <= epsilon_certified``. Also: brackets, accountant errors
    (``*_accounting_error = hi - lo``), ``accuracy_met``, ``certified_label``, ``forced_label``, the FEASGM
    case, a one-sentence ``statement`` and the parameters. The mechanism may be DPSUR's own rule.
    """
    s = setting
    delta, N, T = _delta_of(s), s.N, s.rounds
    cands = []
    for name, c in _candidates(s, rel_tol, **pld_options):
        lo, hi = c.epsilon_bounds(delta)
        cands.append((hi, name, c, lo))
    c_hi, name, cert, c_lo = min(cands, key=lambda t: (t[0], t[1] not in ("count", "chain")))
    forced = forced_epsilon(s, certified=cert, rel_tol=rel_tol, **pld_options)
    f_lo, f_hi = forced.epsilon_forced_bracket
    statement = (f"{s.spec.title} over {T} round{'s' * (T > 1)} is ({_fmt(c_hi)}, {delta:g})-DP for datasets "
                 f"of sizes {N} and {N + 1} (certificate: {name}); the attack "
                 f"\"{forced.forced_attack['name']}\" forces epsilon >= {_fmt(f_lo)} at this delta.")
    return CertifiedInterval(
        mechanism=s.mechanism.value, N=N, pair=[N, N + 1], q=s.q, sigma=s.sigma, n=s.n, rounds=T, delta=delta,
        epsilon_certified=c_hi, epsilon_certified_bracket=[c_lo, c_hi],
        certified_accounting_error=_err(c_lo, c_hi), certified_method=CERTIFICATES[name],
        certified_candidates={CERTIFICATES[nm]: [lo, hi] for hi, nm, _, lo in cands},
        epsilon_forced=f_lo, epsilon_forced_bracket=[f_lo, f_hi], forced_accounting_error=_err(f_lo, f_hi),
        forced_method=forced.forced_method, forced_attack=forced.forced_attack,
        accuracy_met=cert.meta.get("pld", {}).get("accuracy_met"), certified_label=cert.label,
        forced_label=forced.forced_label, certified_grid=cert.meta.get("pld", {}).get("step"), statement=statement,
        **{k: cert.meta[k] for k in ("case", "K", "K_prime") if k in cert.meta})


def forced_epsilon(setting: Setting, *, certified: PLDComposition | None = None, rel_tol: float = DEFAULT_REL_TOL,
                   **pld_options) -> ForcedEpsilon:
    """The epsilon a named real attack forces on the setting's pair ``(N, N+1)`` at its ``delta`` (THEORY.md §11.5).

    EASGM, FEASGM with differing floors: the chi-square scale test (all gradients 0, all ``n T``
    coordinates, both orders; exact). ASGM: the aligned attack; DPSUR's rule: the target-alone attack
    (:mod:`paperlib.mechanisms.attacks`; exact cell probabilities, composed on the PLD lower end). SGM and
    FEASGM with agreeing floors: the SGM worst case (others 0, target ``C u``), the lower end of the SGM
    composition (``certified`` when given, so it is not computed twice). Returns a :class:`ForcedEpsilon`.
    """
    s = setting
    delta, N, T = _delta_of(s), s.N, s.rounds
    if s.equals_sgm():
        if certified is None or certified.meta.get("certificate") != CERTIFICATES["sgm"]:
            certified = certified_guarantee(s, rel_tol=rel_tol, **pld_options)
        lo, hi = certified.epsilon_bounds(delta)
        attack = {"name": "SGM worst case", "datasets": f"D: {N} records, D': the same plus a target",
                  "gradients": "every record of D: 0; the target: C u",
                  "test": "likelihood-ratio test of <X, u> (the pair N(0,1) vs (1-q) N(0,1) + q N(1/sigma,1))",
                  "method": "PLD lower end of the SGM composition"}
        return ForcedEpsilon(lo, [lo, hi], attack["method"], f"SGM worst case, {T} rounds (PLD lower end)", attack)
    hint = certified.epsilon_bounds(delta)[1] if certified is not None else None  # the attack stays below it
    att = attack_for(s, rel_tol=rel_tol, tail=hidden_tail(delta, T, hint), **pld_options)
    if att is None:  # a registered rule with no attack in its entry: no forced value to give
        raise ParameterError("mechanism", f"mechanism {s.mechanism.value!r} has no attack in the table of mechanisms "
                                          "(give its MechanismSpec an attack): no forced epsilon")
    if isinstance(att, (list, tuple)):  # several real attacks: each forces its epsilon, keep the strongest
        att = max(att, key=lambda a: a.epsilon_bounds(delta)[0])
    lo, hi = att.epsilon_bounds(delta)
    label = getattr(att.curve, "label", att.name)
    return ForcedEpsilon(lo, [lo, hi], att.method, label, att.describe())


def _err(lo: float, hi: float) -> float | None:
    return float(hi - lo) if math.isfinite(hi) and math.isfinite(lo) else None


def _fmt(x: float) -> str:
    return f"{x:.4g}" if math.isfinite(x) else "inf"


def certified_for_training_set(mechanism: Mechanism | str, N_train: int, q: float, sigma: float, n: int, *,
                               rounds: int, delta: float = 1e-5, rel_tol: float = DEFAULT_REL_TOL,
                               **pld_options) -> TrainingSetInterval:
    """Both neighbours of a training set of ``N_train`` records (THEORY.md §11), as a :class:`TrainingSetInterval`.

    ``removal``: the pair of sizes ``(N_train - 1, N_train)``; ``addition``: ``(N_train, N_train + 1)``;
    each the :class:`CertifiedInterval` of :func:`certified_interval` (or a :class:`PairError` where FEASGM
    divides by zero on that pair). ``epsilon_certified`` is the larger of the two (the run's certified
    epsilon for add/remove neighbours), ``epsilon_forced`` the larger forced epsilon.
    ``N_train >= 2``; the other parameters as a :class:`~paperlib.mechanisms.setting.Setting`'s fields.
    """
    N_train = check_int(N_train, "N_train", 2)
    pairs = [Setting(mechanism, N, q, sigma, n, rounds=rounds, delta=delta, neighbour=name)
             for name, N in (("removal", N_train - 1), ("addition", N_train))]
    found = {}
    for pair in pairs:
        try:
            found[pair.neighbour] = certified_interval(pair, rel_tol=rel_tol, **pld_options)
        except ValueError as exc:
            if not pair.spec.divides_by_zero(pair.N, pair.q):
                raise
            found[pair.neighbour] = PairError(list(pair.pair), str(exc).splitlines()[0])
    done = [r for r in found.values() if isinstance(r, CertifiedInterval)]
    s = pairs[0]
    return TrainingSetInterval(
        mechanism=s.mechanism.value, N_train=N_train, q=s.q, sigma=s.sigma, n=s.n, rounds=s.rounds, delta=s.delta,
        removal=found["removal"], addition=found["addition"],
        epsilon_certified=max((r.epsilon_certified for r in done), default=None),
        epsilon_forced=max((r.epsilon_forced for r in done), default=None))
