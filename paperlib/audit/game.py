"""The one-round membership game and its audit (THEORY.md section 9; paper Sections 4-5).

Procedure of :func:`audit_distinguishers` (and of its one-distinguisher form :func:`audit`):

1. Build the white-box model (:class:`~paperlib.audit.components.WhiteBoxModel`):
   the adversary knows every per-example vector, hence every component.
2. **Calibration**: run the mechanism ``calibration_trials`` times, half on ``D`` and
   half on ``D'`` (balanced), score the outputs, and choose the decision threshold
   that maximises the empirical lower bound on epsilon *on these trials*
   (:func:`select_threshold`; objective ``"eps"``, or ``"delta"`` at a fixed epsilon).
3. **Counting**: ``trials`` fresh runs, again half on each dataset; guess ``D'`` when
   the score exceeds the threshold (ties broken at random); count false positives
   (``D`` guessed as ``D'``) and false negatives.
4. Clopper-Pearson intervals of FPR and FNR; ``eps_L`` at the given ``delta`` and
   ``delta_L`` at the claim's epsilon (:mod:`paperlib.audit.stats`), compared with the
   SGM claim ``sgm_claim(q, sigma).epsilon(delta)``.

The threshold is never chosen on the counted trials (that would void the intervals).
``trials`` counts the game's counted rounds in total (the paper's "10,000 trials per
audited result"): ``trials // 2`` on ``D`` and the rest on ``D'``. The mechanism runs
``calibration_trials + trials`` times in all.

Sampling path (``path``, recorded in :attr:`AuditResult.path`):

``"projected"``
    Every distinguisher used needs the output only through its coordinates in an
    orthonormal basis ``U`` of the span of the clipped vectors and the squared norm of
    the residual (the optimal distinguisher; the normality distinguisher with
    ``test="chi2"``). Those statistics are drawn exactly, without ``n``-dimensional
    noise (:func:`paperlib.mechanisms.sampler.iter_projected`: ``r <= N+1`` normals and one
    chi-square variate per round), so the cost per round does not grow with ``n``.
``"full"``
    The full ``n``-dimensional outputs (:func:`paperlib.mechanisms.sampler.iter_samples`),
    projected afterwards; needed by ``test="ks"`` and ``test="normaltest"``.

``path="auto"`` (default) takes ``"projected"`` when every distinguisher allows it and
``"full"`` otherwise. ``batched=False`` runs the plain per-trial loop, which is always
full-dimensional (path ``"full"``, ``batched`` false in the result).

Randomness: one ``torch.Generator`` on the device, seeded with ``seed``, draws all
mechanism randomness in the order calibration-D, calibration-D', counted-D,
counted-D'; a numpy generator seeded with ``(seed, 1)`` draws the coins of the
normality votes and the random tie-breaks. Same seed, device and path, same numbers;
the projected and full paths draw different variates (same law), and CPU and CUDA
generators differ, so device and path are part of a result's parameters.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch
from tqdm import tqdm

from paperlib.mechanisms import sampler as mech_mod
from paperlib.mechanisms.core import ANY, Mechanism
from paperlib.mechanisms.guarantees import sgm_claim
from paperlib.fdp.validation import ParameterError, check_delta, check_int, check_positive, check_probability, check_rate, check_seed
from paperlib.audit.components import MAX_N_EXACT, Projection, WhiteBoxModel
from paperlib.audit.distinguishers import make_distinguisher
from paperlib.audit.stats import clopper_pearson, cp_upper, delta_lower, eps_lower

__all__ = [
    "AUDIT_VERSION",
    "AuditConfig",
    "AuditResult",
    "worst_case_vectors",
    "vectors_digest",
    "select_threshold",
    "audit_distinguishers",
    "audit",
    "audit_outputs",
    "audit_worst_case",
    "PATHS",
    "resolve_path",
]

#: bump when the procedure changes, so cached results are recomputed
#: (2: the projected sampling path is the default where the distinguishers allow it)
AUDIT_VERSION = 2

#: accepted values of ``path`` (see the module docstring)
PATHS = ("auto", "projected", "full")


@dataclass(frozen=True)
class AuditConfig:
    """The knobs of one audit (how many rounds, at what confidence, where they run).

    ``trials`` counted rounds (half on D, half on D'); ``calibration_trials`` separate
    rounds that choose the threshold (default ``trials``); ``delta`` of ``eps_L``;
    ``confidence`` of each two-sided Clopper-Pearson interval; ``objective`` ``"eps"``
    (maximise ``eps_L``) or ``"delta"`` (maximise ``delta_L`` at ``eps_for_delta``, default
    the SGM claim's epsilon); ``seed``; ``device`` and ``dtype`` of the sampled rounds;
    ``chunk_size`` trials per batch (default from memory); ``batched=False`` the plain
    per-trial loop; ``path`` ``"auto"``, ``"projected"`` or ``"full"``; ``progress`` a tqdm
    bar; ``num_threads`` torch CPU threads during the audit; ``max_N`` the largest ``N``
    the exact distinguishers enumerate. Validated when the audit runs.
    """

    trials: int | None = None  # required: no default number of rounds
    calibration_trials: int | None = None
    delta: float = 1e-5
    confidence: float = 0.95
    objective: str = "eps"
    eps_for_delta: float | None = None
    seed: int = 0
    device: object = "cpu"
    dtype: object = torch.float64
    chunk_size: int | None = None
    batched: bool = True
    path: str = "auto"
    progress: bool = False
    num_threads: int | None = None
    max_N: int = MAX_N_EXACT

    @classmethod
    def make(cls, config: "AuditConfig | None" = None, **knobs) -> "AuditConfig":
        """``config`` (default: the defaults) with ``knobs`` replaced; ValueError naming an unknown knob."""
        base = config if config is not None else cls()
        unknown = sorted(set(knobs) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown audit option(s) {', '.join(unknown)}; allowed: "
                             f"{', '.join(cls.__dataclass_fields__)}")
        return replace(base, **knobs)


@dataclass
class AuditResult:
    """Outcome of one audit (one distinguisher). ``to_dict()`` gives JSON-ready numbers."""

    mechanism: str
    distinguisher: dict
    N: int
    n: int
    q: float
    sigma: float
    C: float
    delta: float
    trials: int  # counted rounds in total
    trials_D: int
    trials_Dprime: int
    calibration_trials: int
    false_positives: int
    false_negatives: int
    fpr: float
    fnr: float
    fpr_ci: tuple
    fnr_ci: tuple
    confidence: float
    eps_lower: float
    eps_claimed: float
    eps_for_delta: float
    delta_lower: float
    violation: bool  # eps_lower > eps_claimed (or delta_lower > delta)
    threshold: tuple  # (score, tie-break key)
    calibration: dict
    seed: int
    device: str
    dtype: str
    data: str
    path: str  # "projected" (exact sufficient statistics only) or "full" (n-dimensional outputs)
    batched: bool  # False: the plain per-trial loop (always full-dimensional)
    model: dict = field(default_factory=dict)
    wall_time_s: float | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["fpr_ci"] = list(self.fpr_ci)
        d["fnr_ci"] = list(self.fnr_ci)
        t = [float(v) if math.isfinite(v) else None for v in self.threshold]
        d["threshold"] = t
        return d


# ---------------------------------------------------------------------------- data
def worst_case_vectors(N: int, n: int, C: float = 1.0, *, kind: str = "worst", direction: str = "e1",
                       seed: int = 0) -> np.ndarray:
    """Synthetic per-example vectors, shape ``(N+1, n)``, every row of norm ``C``.

    ``kind="worst"`` (THEORY.md section 6): every record of D is ``C u`` and the added
    point is ``-C u``, which attains every component's largest mean shift at once.
    ``u`` is ``e_1`` (``direction="e1"``), ``(1, ..., 1)/sqrt(n)`` (``"ones"``) or a uniformly
    random unit vector (``"random"``, from ``seed``). The optimal distinguisher and the
    ``chi2`` normality test do not depend on ``u``; the ``ks`` and ``normaltest``
    tests do.
    ``kind="random"``: every row an independent uniformly random direction (not worst case).
    """
    N = check_int(N, "N", 1)
    n = check_int(n, "n", 1)
    C = check_positive(C, "C")
    rng = np.random.default_rng(seed)
    if kind == "worst":
        if direction == "e1":
            u = np.zeros(n)
            u[0] = 1.0
        elif direction == "ones":
            u = np.full(n, 1.0 / math.sqrt(n))
        elif direction == "random":
            u = rng.standard_normal(n)
            u /= np.linalg.norm(u)
        else:
            raise ValueError(f"direction must be 'e1', 'ones' or 'random', got {direction!r}")
        v = np.tile(C * u, (N + 1, 1))
        v[N] = -C * u
        return v
    if kind == "random":
        v = rng.standard_normal((N + 1, n))
        return C * v / np.linalg.norm(v, axis=1, keepdims=True)
    raise ValueError(f"kind must be 'worst' or 'random', got {kind!r}")


# ---------------------------------------------------------------------------- thresholds
def _greater(scores, keys, t):
    """Guess D' where (score, key) > (t_score, t_key) lexicographically."""
    ts, tk = t
    return (scores > ts) | ((scores == ts) & (keys > tk))


def select_threshold(scores_d, keys_d, scores_dp, keys_dp, *, delta: float, confidence: float = 0.95,
                     objective: str = "eps", eps_for_delta: float | None = None):
    """Threshold maximising the calibration trials' ``eps_L`` (or ``delta_L`` at ``eps_for_delta``).

    Scores with larger values mean "D'"; ``keys`` (uniform on [0, 1)) break ties at random.
    Every pooled calibration value is a candidate, plus "guess D' always" (only the ends
    of runs of D scores can be optimal, so only those are evaluated); among equal
    objective values the largest empirical advantage ``1 - FPR - FNR`` wins. Returns
    ``(threshold, info)`` with ``threshold = (score, key)`` and the calibration FPR, FNR
    and objective at it.
    """
    sd, kd = np.asarray(scores_d, float), np.asarray(keys_d, float)
    sq, kq = np.asarray(scores_dp, float), np.asarray(keys_dp, float)
    nd, nq = sd.size, sq.size
    s = np.concatenate([sd, sq])
    k = np.concatenate([kd, kq])
    lab = np.concatenate([np.zeros(nd, bool), np.ones(nq, bool)])
    order = np.lexsort((k, s))
    s, k, lab = s[order], k[order], lab[order]
    # threshold at position i (0..size): elements [0, i) are guessed D, [i, size) D'.
    # i = 0: always D'; i = size: always D.
    cum_d = np.concatenate([[0], np.cumsum(~lab)])
    cum_q = np.concatenate([[0], np.cumsum(lab)])
    fp = nd - cum_d  # D elements above the threshold
    fn = cum_q  # D' elements at or below it
    # Only the ends of runs of D scores can be optimal (moving the threshold past a D
    # score lowers FP, past a D' score raises FN), plus "always D'" and "always D".
    pos = np.arange(s.size + 1)
    cand = (pos == 0) | (pos == s.size)
    cand[1:-1] = ~lab[:-1] & lab[1:]
    cand[0] = cand[-1] = True
    pos, fp, fn = pos[cand], fp[cand], fn[cand]
    a_r = cp_upper(fp, np.full(fp.shape, nd), confidence)
    b_r = cp_upper(fn, np.full(fn.shape, nq), confidence)
    if objective == "eps":
        obj = eps_lower(a_r, b_r, delta)
    elif objective == "delta":
        if eps_for_delta is None:
            raise ValueError("eps_for_delta is needed for objective='delta'")
        obj = delta_lower(a_r, b_r, eps_for_delta)
    else:
        raise ParameterError("objective", f"objective must be 'eps' or 'delta', got {objective!r}")
    # ties of the objective (e.g. eps_L = 0 everywhere on few trials): take the largest
    # empirical advantage 1 - FPR - FNR among them
    adv = 1.0 - fp / nd - fn / nq
    best = obj >= np.max(obj) - 1e-12
    j = int(np.flatnonzero(best)[np.argmax(adv[best])])
    i = int(pos[j])
    thr = (-math.inf, -math.inf) if i == 0 else (float(s[i - 1]), float(k[i - 1]))
    info = {"fpr": float(fp[j] / nd), "fnr": float(fn[j] / nq), "objective": objective,
            "value": float(obj[j]), "trials_D": nd, "trials_Dprime": nq}
    return thr, info


# ---------------------------------------------------------------------------- the game
def vectors_digest(vectors: np.ndarray) -> str:
    a = np.ascontiguousarray(np.asarray(vectors, dtype=np.float64))
    return hashlib.sha256(a.tobytes() + str(a.shape).encode()).hexdigest()[:16]


def _bind_distinguishers(distinguishers, model) -> dict:
    """``{label: distinguisher bound to the white-box model}`` from a list of specs or a dict."""
    if isinstance(distinguishers, dict):
        specs = dict(distinguishers)
    else:
        specs = {}
        for spec in distinguishers:
            d = make_distinguisher(spec)
            specs[d.name] = d
    dists = {}
    for label, spec in specs.items():
        d = make_distinguisher(spec)
        d.bind(model)
        dists[label] = d
    return dists


def _eps_for_delta(eps_claimed: float, eps_for_delta, objective: str) -> float:
    """The epsilon at which ``delta_L`` is reported: ``eps_for_delta``, else the SGM claim's.

    A claim with no finite epsilon at ``delta`` (tiny ``sigma``) claims nothing: every
    ``delta_L`` at ``eps = inf`` is 0, so the result reports ``inf`` and ``delta_L = 0``
    (only ``objective='delta'`` needs a finite value; it then asks for ``eps_for_delta``).
    """
    if eps_for_delta is None:
        if math.isfinite(eps_claimed) or objective == "eps":
            return float(eps_claimed)
        raise ValueError("eps_for_delta: the SGM claim has no finite epsilon at this delta, so "
                         "objective='delta' needs an explicit eps_for_delta >= 0")
    try:
        e = None if isinstance(eps_for_delta, (bool, str)) else float(eps_for_delta)
    except (TypeError, ValueError):
        e = None
    if e is None or not math.isfinite(e) or e < 0:
        raise ValueError(f"eps_for_delta must be a finite number >= 0, got {eps_for_delta!r}")
    return e


def _validate_common(mechanism, q, sigma, C, trials, calibration_trials, delta, confidence):
    mechanism = Mechanism.parse(mechanism, ANY)
    q = check_rate(q)
    sigma = check_positive(sigma, "sigma")
    C = check_positive(C, "C")
    trials = check_int(trials, "trials", 2)
    calibration_trials = trials if calibration_trials is None else check_int(calibration_trials,
                                                                             "calibration_trials", 2)
    delta = check_delta(delta)
    confidence = check_probability(confidence, "confidence", open_left=True, open_right=True)
    return q, sigma, C, trials, calibration_trials, delta, confidence


def resolve_path(path: str, dists: dict, batched: bool = True) -> str:
    """The sampling path an audit takes: ``"projected"`` or ``"full"`` (see the module docstring).

    ``dists`` maps labels to (bound or unbound) distinguishers. Raises ValueError naming
    ``path`` for an unknown value, for ``"projected"`` when a distinguisher needs the full
    outputs, and for ``"projected"`` with ``batched=False`` (the loop is full-dimensional).
    """
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    full_needed = [label for label, d in dists.items() if d.needs_full_output]
    if path == "projected":
        if not batched:
            raise ValueError("path='projected' needs batched=True (the per-trial loop is full-dimensional)")
        if full_needed:
            raise ValueError(f"path='projected' is not possible: {full_needed} need the full n-dimensional outputs "
                             "(only the optimal and the chi2 normality distinguishers work on the projection)")
        return "projected"
    if path == "full" or not batched or full_needed:
        return "full"
    return "projected"


def _projected_chunk_size(model: WhiteBoxModel, device) -> int:
    """Trials per chunk on the projected path: bounded by the widest (trials x components) array scored."""
    width = max(model.r, model.P.size, model.Q.size, model.pairs.size)
    return mech_mod.default_chunk_size(width, model.N + 1, device=device)


def _run_side(model, dists, mechanism, vectors_t, q, sigma, C, dataset, count, gen, rng, device, dtype,
              chunk_size, batched, bar, path="full"):
    """Scores (and tie keys) of ``count`` rounds on ``dataset`` for every distinguisher."""
    scores = {name: [] for name in dists}
    if path == "projected":
        basis = model.on(device, dtype)["basis"]

        def _proj():
            for ch in mech_mod.iter_projected(
                    mechanism, vectors_t, q, sigma, C, dataset, count, gen, basis=basis, device=device,
                    dtype=dtype, chunk_size=chunk_size or _projected_chunk_size(model, device)):
                y = ch.coords
                yield None, Projection(y=y, sq_norm_y=(y * y).sum(dim=1), residual=ch.residual)

        chunks = _proj()
    elif batched:
        chunks = ((ch.outputs, None) for ch in mech_mod.iter_samples(
            mechanism, vectors_t, q, sigma, C, dataset, count, gen, device=device, dtype=dtype,
            chunk_size=chunk_size))
    else:
        rows = vectors_t[:-1] if dataset == "D" else vectors_t
        N_data, n = rows.shape

        def _loop():
            for _ in range(count):
                mask = torch.rand((1, N_data), generator=gen, device=device, dtype=torch.float64) < q
                dmask = mech_mod._divisor_draw(mechanism, 1, N_data, q, gen, device)  # DPSUR's B' (else None)
                noise = torch.randn((1, n), generator=gen, device=device, dtype=dtype)
                yield mech_mod.apply_round_loop(mechanism, rows, mask, noise, q, sigma, C, dmask), None

        chunks = _loop()
    for x, proj in chunks:
        if proj is None:
            proj = model.project(x)
        for name, d in dists.items():
            scores[name].append(d.score(x, proj, rng))
        if bar is not None:
            bar.update(proj.y.shape[0])
    out = {}
    for name in dists:
        sc = np.concatenate(scores[name])
        out[name] = (sc, rng.random(sc.size))
    return out


def _results(dists, res, model, *, mechanism, q, sigma, C, delta, trials, calibration_trials, confidence, objective,
             eps_claimed, eps_d, eps_for_delta, seed, device, dtype, data, path, batched, wall) -> dict:
    """Threshold on the calibration scores, counts on the counted ones: ``{label: AuditResult}``."""
    path_used = path
    out = {}
    for label, d in dists.items():
        (sd, kd), (sq, kq) = res["cal"]["D"][label], res["cal"]["D'"][label]
        thr, info = select_threshold(sd, kd, sq, kq, delta=delta, confidence=confidence, objective=objective,
                                     eps_for_delta=eps_d)
        (cd, ckd), (cq, ckq) = res["count"]["D"][label], res["count"]["D'"][label]
        fp = int(_greater(cd, ckd, thr).sum())
        fn = int((~_greater(cq, ckq, thr)).sum())
        nd, nq = cd.size, cq.size
        fpr_ci = clopper_pearson(fp, nd, confidence)
        fnr_ci = clopper_pearson(fn, nq, confidence)
        e_l = float(eps_lower(fpr_ci[1], fnr_ci[1], delta))
        d_l = float(delta_lower(fpr_ci[1], fnr_ci[1], eps_d)) if math.isfinite(eps_d) else 0.0
        out[label] = AuditResult(
            mechanism=mechanism, distinguisher=d.describe(), N=model.N, n=model.n, q=q, sigma=sigma, C=C,
            delta=delta, trials=trials, trials_D=nd, trials_Dprime=nq, calibration_trials=calibration_trials,
            false_positives=fp, false_negatives=fn, fpr=fp / nd, fnr=fn / nq, fpr_ci=fpr_ci, fnr_ci=fnr_ci,
            confidence=confidence, eps_lower=e_l, eps_claimed=eps_claimed, eps_for_delta=eps_d,
            delta_lower=d_l, violation=bool(e_l > eps_claimed or (eps_for_delta is None and d_l > delta)),
            threshold=thr, calibration=info, seed=int(seed), device=str(device), dtype=str(dtype).replace("torch.", ""),
            data=data, path=path_used, batched=bool(batched), model=model.describe(), wall_time_s=wall,
        )
    return out


def audit_distinguishers(
    vectors,
    mechanism: str,
    q: float,
    sigma: float,
    C: float,
    *,
    config: AuditConfig | None = None,
    distinguishers=("optimal",),
    data: str = "given",
    **knobs,
) -> dict:
    """Audit one round of ``mechanism`` on given vectors with several distinguishers on the same runs.

    Parameters
    ----------
    vectors : array (N+1, n)
        Per-example vectors (rows 0..N-1 = D, row N = the added point); clipped to ``C``.
    mechanism : a :class:`~paperlib.mechanisms.core.Mechanism` or its name
    q, sigma, C : sampling rate in (0, 1], noise multiplier > 0, clipping norm > 0.
    config : :class:`AuditConfig`, the audit's knobs; any of its fields may also be given
        as a keyword (``trials=20_000, seed=1``), which replaces the config's value.
    trials : int >= 2
        Counted rounds in total (half on D, half on D').
    distinguishers : iterable
        Specs for :func:`~paperlib.audit.distinguishers.make_distinguisher`, e.g.
        ``"optimal"``, ``"normality"``, ``{"name": "normality", "test": "ks"}``; or a dict
        ``{label: spec}``.
    delta : the delta of ``eps_L`` (default 1e-5).
    calibration_trials : rounds for choosing the threshold (default ``trials``), separate.
    seed, device, dtype : randomness, where the rounds run, float type of the outputs.
    confidence : of each Clopper-Pearson interval (two-sided, default 0.95).
    objective : ``"eps"`` (maximise ``eps_L``) or ``"delta"`` (maximise ``delta_L`` at ``eps_for_delta``).
    eps_for_delta : epsilon at which ``delta_L`` is reported (default: the SGM claim's epsilon).
    chunk_size : trials per batch (default from memory size); ``batched=False`` runs the
        plain per-trial loop (same numbers as ``path="full", chunk_size=1``).
    path : ``"auto"`` (default), ``"projected"`` or ``"full"``: sample only the exact
        sufficient statistics (projection on the span of the clipped vectors and the
        residual's squared norm) or the full ``n``-dimensional outputs. ``"auto"`` takes
        ``"projected"`` when every distinguisher allows it (:func:`resolve_path`).
    progress : show a tqdm bar over the rounds.
    data : label stored with the result ("given", "worst-case", ...).
    num_threads : torch CPU threads during the audit (restored afterwards); ``None`` keeps
        the current setting. On a shared, busy machine 1 is often much faster than 2.

    Returns ``{label: AuditResult}``.

    Raises ValueError naming the parameter: q outside (0, 1], trials < 2, non-finite or
    misshaped vectors, N > ``max_N`` (12), FEASGM with floor(N q) = 0, unknown names,
    ``path="projected"`` with a distinguisher that needs the full outputs.
    """
    cfg = AuditConfig.make(config, **knobs)
    objective, eps_for_delta, dtype, batched = cfg.objective, cfg.eps_for_delta, cfg.dtype, cfg.batched
    q, sigma, C, trials, calibration_trials, delta, confidence = _validate_common(
        mechanism, q, sigma, C, cfg.trials, cfg.calibration_trials, cfg.delta, cfg.confidence)
    seed = check_seed(cfg.seed)
    if objective not in ("eps", "delta"):
        raise ParameterError("objective", f"objective must be 'eps' or 'delta', got {objective!r}")
    device = torch.device(cfg.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ParameterError("device", "device: 'cuda' was asked for but torch.cuda.is_available() is False")
    vectors_t = mech_mod.as_vectors(vectors, device="cpu", dtype=torch.float64)
    model = WhiteBoxModel(mechanism, vectors_t, q, sigma, C, max_N=cfg.max_N)
    dists = _bind_distinguishers(distinguishers, model)
    path_used = resolve_path(cfg.path, dists, batched)
    eps_claimed = float(sgm_claim(q, sigma).epsilon(delta))
    eps_d = _eps_for_delta(eps_claimed, eps_for_delta, objective)

    t0 = time.perf_counter()
    res = _play_rounds(model, dists, mechanism, vectors_t, q, sigma, C, cfg, seed=seed, device=device,
                       rounds=(calibration_trials, trials), path_used=path_used)
    wall = time.perf_counter() - t0

    return _results(dists, res, model, mechanism=mechanism, q=q, sigma=sigma, C=C, delta=delta, trials=trials,
                    calibration_trials=calibration_trials, confidence=confidence, objective=objective,
                    eps_claimed=eps_claimed, eps_d=eps_d, eps_for_delta=eps_for_delta, seed=seed, device=device,
                    dtype=dtype, data=data, path=path_used, batched=batched, wall=wall)


def _play_rounds(model, dists, mechanism, vectors_t, q, sigma, C, cfg: AuditConfig, *, seed: int, device,
                 rounds: tuple[int, int], path_used: str) -> dict:
    """Run the calibration then the counted rounds, each half on D and half on D': ``{phase: {ds: side}}``."""
    calibration_trials, trials = rounds
    dtype, chunk_size, batched, num_threads = cfg.dtype, cfg.chunk_size, cfg.batched, cfg.num_threads
    gen = torch.Generator(device=device).manual_seed(int(seed))
    rng = np.random.default_rng([int(seed), 1])
    vt = vectors_t.to(device=device, dtype=dtype)
    halves = {"cal": (calibration_trials // 2, calibration_trials - calibration_trials // 2),
              "count": (trials // 2, trials - trials // 2)}
    prev_threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(check_int(num_threads, "num_threads", 1))
    bar = tqdm(total=calibration_trials + trials, desc=f"audit {mechanism} N={model.N} n={model.n}",
               unit="round", disable=not cfg.progress, leave=False)
    res = {}
    try:
        for phase in ("cal", "count"):
            res[phase] = {}
            for ds, cnt in zip(("D", "D'"), halves[phase]):
                res[phase][ds] = _run_side(model, dists, mechanism, vt, q, sigma, C, ds, cnt, gen, rng, device,
                                           dtype, chunk_size, batched, bar, path_used)
    finally:
        bar.close()
        torch.set_num_threads(prev_threads)
    return res


def audit(vectors, mechanism: str, q: float, sigma: float, C: float, *, trials: int,
          distinguisher="optimal", **kwargs) -> AuditResult:
    """One distinguisher's :class:`AuditResult`; other arguments as :func:`audit_distinguishers`."""
    res = audit_distinguishers(vectors, mechanism, q, sigma, C, trials=trials,
                               distinguishers={"d": distinguisher}, **kwargs)
    return res["d"]


# ---------------------------------------------------------------------------- given outputs
def _as_output_block(x, model: WhiteBoxModel, what: str):
    """``(x_full or None, Projection)`` of one side's given outputs (float64, CPU)."""
    if isinstance(x, dict):
        if set(x) != {"coords", "residual"}:
            raise ValueError(f"outputs{what}: a projected block must be a dict with keys 'coords' and 'residual'")
        y = torch.as_tensor(np.asarray(x["coords"], dtype=np.float64))
        res = torch.as_tensor(np.asarray(x["residual"], dtype=np.float64)).reshape(-1)
        if y.ndim != 2 or y.shape[1] != model.r or res.shape[0] != y.shape[0]:
            raise ValueError(f"outputs{what}: coords must have shape (m, r={model.r}) and residual shape (m,), "
                             f"got {tuple(y.shape)} and {tuple(res.shape)}")
        if not (bool(torch.isfinite(y).all()) and bool(torch.isfinite(res).all())):
            raise ValueError(f"outputs{what}: projected outputs must be finite")
        return None, Projection(y=y, sq_norm_y=(y * y).sum(dim=1), residual=res)
    t = x.detach().to("cpu", torch.float64) if isinstance(x, torch.Tensor) else torch.as_tensor(
        np.asarray(x, dtype=np.float64))
    if t.ndim != 2 or t.shape[1] != model.n:
        raise ValueError(f"outputs{what}: full outputs must have shape (m, n={model.n}), got {tuple(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"outputs{what}: outputs must be finite (found NaN or inf)")
    return t, model.project(t)


def audit_outputs(vectors, mechanism: str, q: float, sigma: float, C: float, outputs: dict, *,
                  distinguishers=("optimal",), delta: float = 1e-5, seed: int = 0, confidence: float = 0.95,
                  objective: str = "eps", eps_for_delta: float | None = None, chunk_size: int | None = None,
                  data: str = "given", source: str = "given", max_N: int = MAX_N_EXACT) -> dict:
    """Audit outputs produced elsewhere (e.g. by a real DP-SGD implementation) with the white-box distinguishers.

    The game of :func:`audit_distinguishers`, except that nothing is sampled here: the
    rounds are ``outputs = {"cal": {"D": X, "D'": X}, "count": {"D": X, "D'": X}}``,
    the calibration rounds (threshold choice) and the counted rounds on each dataset.
    Each ``X`` is either the full outputs, an array or tensor ``(m, n)`` (e.g. the
    update ``(theta_0 - theta_1) / lr`` of one step per row), or their projection
    ``{"coords": (m, r), "residual": (m,)}`` in the basis
    ``WhiteBoxModel(mechanism, vectors, q, sigma, C).basis`` (the exact sufficient
    statistics the optimal and chi2-normality distinguishers use). ``vectors`` are the
    per-example vectors the adversary knows (white box) and ``mechanism`` the
    normalisation the adversary's model assumes.

    Randomness: a numpy generator seeded with ``(seed, 1)`` draws the normality votes'
    coins and the tie-break keys, consumed side by side (cal-D, cal-D', count-D,
    count-D') and chunk by chunk (``chunk_size`` rows, default all), exactly as
    :func:`audit_distinguishers` does; so outputs drawn by
    :func:`paperlib.mechanisms.sampler.sample` with the generator an audit would use give that
    audit's numbers. ``source`` is stored as the result's ``path``.

    Returns ``{label: AuditResult}``; ValueError for misshaped, non-finite or missing blocks.
    """
    q, sigma, C, _, _, delta, confidence = _validate_common(mechanism, q, sigma, C, 2, 2, delta, confidence)
    seed = check_seed(seed)
    if objective not in ("eps", "delta"):
        raise ParameterError("objective", f"objective must be 'eps' or 'delta', got {objective!r}")
    if not isinstance(outputs, dict) or set(outputs) != {"cal", "count"}:
        raise ValueError("outputs must be a dict with keys 'cal' and 'count', each {'D': X, \"D'\": X}")
    vectors_t = mech_mod.as_vectors(vectors, device="cpu", dtype=torch.float64)
    model = WhiteBoxModel(mechanism, vectors_t, q, sigma, C, max_N=max_N)
    dists = _bind_distinguishers(distinguishers, model)
    eps_claimed = float(sgm_claim(q, sigma).epsilon(delta))
    eps_d = _eps_for_delta(eps_claimed, eps_for_delta, objective)
    blocks = {}
    for phase in ("cal", "count"):
        side = outputs[phase]
        if not isinstance(side, dict) or set(side) != {"D", "D'"}:
            raise ValueError(f"outputs['{phase}'] must be a dict with keys 'D' and \"D'\"")
        blocks[phase] = {}
        for ds in ("D", "D'"):
            x, proj = _as_output_block(side[ds], model, f"['{phase}']['{ds}']")
            if x is None:
                need = [label for label, d in dists.items() if d.needs_full_output]
                if need:
                    raise ValueError(f"outputs['{phase}']['{ds}'] is projected but {need} need the full outputs")
            if proj.y.shape[0] < 1:
                raise ValueError(f"outputs['{phase}']['{ds}'] holds no rounds")
            blocks[phase][ds] = (x, proj)
    t0 = time.perf_counter()
    rng = np.random.default_rng([int(seed), 1])
    res = {}
    for phase in ("cal", "count"):
        res[phase] = {}
        for ds in ("D", "D'"):
            x, proj = blocks[phase][ds]
            m = proj.y.shape[0]
            step = m if chunk_size is None else check_int(chunk_size, "chunk_size", 1)
            scores = {label: [] for label in dists}
            for a in range(0, m, step):
                b = min(m, a + step)
                xc = None if x is None else x[a:b]
                pc = Projection(y=proj.y[a:b], sq_norm_y=proj.sq_norm_y[a:b], residual=proj.residual[a:b])
                for label, d in dists.items():
                    scores[label].append(d.score(xc, pc, rng))
            res[phase][ds] = {}
            for label in dists:
                sc = np.concatenate(scores[label])
                res[phase][ds][label] = (sc, rng.random(sc.size))
    wall = time.perf_counter() - t0
    n_cal = blocks["cal"]["D"][1].y.shape[0] + blocks["cal"]["D'"][1].y.shape[0]
    n_count = blocks["count"]["D"][1].y.shape[0] + blocks["count"]["D'"][1].y.shape[0]
    return _results(dists, res, model, mechanism=mechanism, q=q, sigma=sigma, C=C, delta=delta, trials=int(n_count),
                    calibration_trials=int(n_cal), confidence=confidence, objective=objective,
                    eps_claimed=eps_claimed, eps_d=eps_d, eps_for_delta=eps_for_delta, seed=seed, device="cpu",
                    dtype=torch.float64, data=data, path=source, batched=True, wall=wall)


def audit_worst_case(mechanism, N: int, q: float, sigma: float, n: int, *, C: float = 1.0, trials: int,
                     distinguisher="optimal", kind: str = "worst", direction: str = "e1",
                     data_seed: int | None = None, **kwargs) -> AuditResult:
    """:func:`audit` on :func:`worst_case_vectors` (``N``, ``n``, ``C``; ``kind``, ``direction``).

    The white-box game of paper Section 4 on its worst-case data, lower bound of Eq. 3 (THEORY.md §9).

    ``mechanism`` is a :class:`~paperlib.mechanisms.core.Mechanism` or its name; ``N`` in
    1..12, ``q`` in (0, 1], ``sigma > 0``, ``n >= 1``, clipping norm ``C > 0``; other
    keywords as :func:`audit_distinguishers`.
    """
    N = check_int(N, "N", 1)
    if N > kwargs.get("max_N", MAX_N_EXACT):
        raise ParameterError("N", f"N = {N} > {kwargs.get('max_N', MAX_N_EXACT)}: the exact distinguishers enumerate 2^N subsets")
    n = check_int(n, "n", 1)
    C = check_positive(C, "C")
    ds = check_seed(kwargs.get("seed", 0) if data_seed is None else data_seed,
                    "seed" if data_seed is None else "data_seed")
    v = worst_case_vectors(N, n, C, kind=kind, direction=direction, seed=ds)
    label = "worst-case" if kind == "worst" else "random"
    return audit(v, mechanism, q, sigma, C, trials=trials, distinguisher=distinguisher,
                 data=f"{label} ({direction})" if kind == "worst" else label, **kwargs)
