"""The pattern rules of the Opacus code audit, and the classification of one release.

For one DP-SGD step with Poisson sampling and ``loss_reduction="mean"``, a release's
source answers:

* **normalisation**: what the noisy sum ``S_B + G`` is divided by

  - ``A``   the realised batch size ``|B|``            -> mechanism ASGM
  - ``EA``  the expected batch size ``N q`` (a float)  -> mechanism EASGM
  - ``FEA`` its floor ``floor(N q)``                   -> mechanism FEASGM

* **built-in Poisson**: whether the release has a switch that turns Poisson sampling on
  and changes the update for it (``poisson=True`` in v0.14-v0.15,
  ``poisson_sampling=True`` in v1.x);
* **Poisson usable**: whether a variable-size Poisson batch can be fed at all; v0.9-v0.11
  raise ``ValueError`` on any batch larger than the ``batch_size`` given to the engine,
  so their mechanism is "Not supported";
* the file, line and code that show each finding.

How the answer is found
-----------------------
Nothing is keyed on the version number. Each release's source is matched against the
explicit pattern rules in :data:`RULES` (one regular expression per rule, applied line by
line, some with a context condition: the enclosing ``def``, the guarding ``if`` or the
next statement). The rules come in three code generations, recognised by which rules
fire, later generations taking precedence because their code runs after the older code
path it overrides:

1. ``engine-step`` (v0.9-v0.13): ``PrivacyEngine.step`` takes ``batch_size`` from
   ``self.clipper.pre_step()`` -- the number of per-sample gradients it saw, i.e. the
   realised ``|B|`` -- and does ``noise /= batch_size`` under ``loss_reduction == "mean"``;
   the clipper's ``_scale_summed_grad`` returns ``summed_grad / batch_size``. Together:
   ``(S_B + G) / |B|`` (A). If ``step`` also has ``if batch_size > self.batch_size:``
   followed by ``raise``, a Poisson batch above the configured size is rejected: "Not
   supported". v0.12 removes that check and ships ``UniformWithReplacementSampler``
   (a Poisson sampler despite its name).
2. ``engine-poisson`` (v0.14-v0.15): after the code of generation 1,
   ``if self.poisson and self.loss_reduction == "mean":`` rescales
   ``p.grad *= batch_size / self.avg_batch_size`` with
   ``self.avg_batch_size = self.sample_rate * self.sample_size``, turning the division by
   ``|B|`` into one by ``N q`` (EA). An ``int(...)``/``floor(...)`` around the product
   would make it FEA; the rule classifies the expression it finds.
3. ``dp-optimizer`` (v1.x): ``DPOptimizer.add_noise`` sets
   ``p.grad = (p.summed_grad + noise)`` and ``scale_grad`` does
   ``p.grad /= self.expected_batch_size * self.accumulated_iterations``;
   ``PrivacyEngine.make_private`` computes
   ``expected_batch_size = int(len(data_loader.dataset) * sample_rate)`` (FEA; a plain
   product would be EA).

A release that matches none of the generations raises :class:`AuditError` rather than
being guessed.

Reference: Wang, Cui, Cui, Yuan (2026), Section 5.5, Appendix A and Table 2.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from typing import Any, Mapping, Sequence

from paperlib.fdp.validation import ComputationError
from paperlib.mechanisms.registry import spec_for_opacus_code

__all__ = [
    "MECHANISM",
    "DIVISOR",
    "NOT_SUPPORTED",
    "ENGINE_FILE",
    "CLIPPER_FILE",
    "SAMPLER_FILE",
    "OPTIMIZER_FILE",
    "SOURCE_FILES",
    "AuditError",
    "Evidence",
    "Rule",
    "RULES",
    "classify_expected_size",
    "audit_sources",
]

#: normalisation -> the mechanism it implements under Poisson sampling (THEORY.md section 2), from the table
MECHANISM = {code: spec_for_opacus_code(code).title for code in ("A", "EA", "FEA")}
#: normalisation -> what the noisy sum is divided by: the mechanism's rule in the table
DIVISOR = {code: spec_for_opacus_code(code).rule for code in ("A", "EA", "FEA")}
NOT_SUPPORTED = "Not supported"

#: The files of a release the rules read (paths inside the wheel).
ENGINE_FILE = "opacus/privacy_engine.py"
CLIPPER_FILE = "opacus/per_sample_gradient_clip.py"
SAMPLER_FILE = "opacus/utils/uniform_sampler.py"
OPTIMIZER_FILE = "opacus/optimizers/optimizer.py"
SOURCE_FILES = (ENGINE_FILE, CLIPPER_FILE, SAMPLER_FILE, OPTIMIZER_FILE)


class AuditError(ComputationError):
    """A release's source does not match the rules, or the table or a release cannot be obtained."""


@dataclasses.dataclass(frozen=True)
class Evidence:
    """One source line that a rule matched."""

    rule: str
    file: str
    line: int  # 1-based
    code: str  # the stripped source line
    meaning: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Rule:
    """A pattern rule: ``pattern`` matched against each line of ``file``.

    ``in_def``: the match must lie inside a function of that name (the nearest enclosing
    ``def`` by indentation). ``guard``: a regex the nearest preceding non-blank line with
    smaller indentation must match (the ``if`` that guards the matched line). ``then``:
    a regex the next non-blank line must match.
    """

    name: str
    generation: str
    file: str
    pattern: str
    meaning: str
    in_def: str | None = None
    guard: str | None = None
    then: str | None = None

    def find(self, sources: Mapping[str, str]) -> list[Evidence]:
        text = sources.get(self.file)
        if text is None:
            return []
        lines = text.splitlines()
        ctx = _Context(text)
        rx = re.compile(self.pattern)
        out = []
        for i, line in enumerate(lines):
            if line.lstrip().startswith("#") or not rx.search(line):
                continue
            if self.in_def is not None and ctx.enclosing_def(i + 1) != self.in_def:
                continue
            if self.guard is not None:
                g = ctx.guard(i + 1)
                if g is None or not re.search(self.guard, g):
                    continue
            if self.then is not None:
                nxt = _next_statement(lines, i)
                if nxt is None or not re.search(self.then, nxt):
                    continue
            out.append(Evidence(self.name, self.file, i + 1, line.strip(), self.meaning))
        return out


class _Context:
    """Where a line sits in the code: its enclosing function and the ``if`` guarding it.

    Uses the parsed syntax tree (``ast``); a text that does not parse (a fragment) falls
    back to indentation: the nearest less-indented ``def`` / code line above.
    """

    def __init__(self, text: str):
        self.lines = text.splitlines()
        try:
            self.tree = ast.parse(text)
        except SyntaxError:
            self.tree = None
        self._defs: list[tuple[int, int, str]] = []
        self._ifs: list[tuple[int, int, int]] = []  # (first body line, last body line, if line)
        if self.tree is not None:
            for node in ast.walk(self.tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self._defs.append((node.lineno, node.end_lineno, node.name))
                elif isinstance(node, ast.If) and node.body:
                    self._ifs.append((node.body[0].lineno, node.body[-1].end_lineno, node.lineno))

    def enclosing_def(self, lineno: int) -> str | None:
        if self.tree is None:
            return _enclosing_def(self.lines, lineno - 1)
        inside = [(a, name) for a, b, name in self._defs if a <= lineno <= b]
        return max(inside)[1] if inside else None

    def guard(self, lineno: int) -> str | None:
        """The ``if`` line whose body (not its ``else``) contains ``lineno``, innermost."""
        if self.tree is None:
            return _enclosing_line(self.lines, lineno - 1)
        inside = [(a, at) for a, b, at in self._ifs if a <= lineno <= b]
        return self.lines[max(inside)[1] - 1] if inside else None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _enclosing_line(lines: Sequence[str], i: int) -> str | None:
    """The nearest preceding code line indented less than line ``i`` (its block header)."""
    ind = _indent(lines[i])
    for j in range(i - 1, -1, -1):
        s = lines[j].strip()
        if s and not s.startswith("#") and _indent(lines[j]) < ind:
            return lines[j]
    return None


def _enclosing_def(lines: Sequence[str], i: int) -> str | None:
    """Name of the nearest ``def`` above line ``i`` that is indented less than it."""
    ind = _indent(lines[i])
    for j in range(i - 1, -1, -1):
        m = re.match(r"\s*(?:async\s+)?def\s+(\w+)\s*\(", lines[j])
        if m and _indent(lines[j]) < ind:
            return m.group(1)
        if re.match(r"class\s+\w+", lines[j]):
            return None
    return None


def _next_statement(lines: Sequence[str], i: int) -> str | None:
    for j in range(i + 1, len(lines)):
        s = lines[j].strip()
        if s and not s.startswith("#"):
            return lines[j]
    return None


_MEAN_GUARD = r"""if\s+self\.loss_reduction\s*==\s*["']mean["']"""

RULES: tuple[Rule, ...] = (
    # -- generation 1, engine-step (v0.9-v0.13): the engine divides by the realised |B|
    Rule(
        "engine_realised_batch_size", "engine-step", ENGINE_FILE,
        r"^\s*\w+\s*,\s*batch_size\s*=\s*self\.clipper\.pre_step\(\)",
        "step() takes batch_size from the clipper: the number of per-sample gradients "
        "it saw, i.e. the realised batch size |B|",
        in_def="step",
    ),
    Rule(
        "engine_noise_over_batch_size", "engine-step", ENGINE_FILE,
        r"^\s*noise\s*/=\s*batch_size\s*$",
        "with loss_reduction='mean' the noise G is divided by that batch_size",
        in_def="step", guard=_MEAN_GUARD,
    ),
    Rule(
        "clipper_sum_over_batch_size", "engine-step", CLIPPER_FILE,
        r"^\s*return\s+summed_grad\s*/\s*batch_size\s*$",
        "the clipper returns the sum of clipped gradients S_B divided by the same batch_size",
        in_def="_scale_summed_grad",
    ),
    Rule(
        "engine_batch_size_upper_bound", "engine-step", ENGINE_FILE,
        r"^\s*if\s+batch_size\s*>\s*self\.batch_size\s*:",
        "a batch larger than the configured batch_size raises ValueError: a variable-size "
        "Poisson batch cannot be fed (Poisson sampling not supported)",
        in_def="step", then=r"^\s*raise\b",
    ),
    Rule(
        "poisson_sampler_shipped", "engine-step", SAMPLER_FILE,
        r"^\s*class\s+UniformWithReplacementSampler\b",
        "the release ships a sampler that includes each example independently with "
        "probability sample_rate (Poisson sampling)",
    ),
    # -- generation 2, engine-poisson (v0.14-v0.15): a poisson flag rescales |B| -> avg_batch_size
    Rule(
        "engine_poisson_flag", "engine-poisson", ENGINE_FILE,
        r"^\s*poisson\s*:\s*bool\s*=",
        "PrivacyEngine has a poisson switch (built-in Poisson sampling and update logic)",
    ),
    Rule(
        "engine_rescale_to_avg_batch_size", "engine-poisson", ENGINE_FILE,
        r"^\s*(?:p\.grad|new_grad)\s*\*=\s*batch_size\s*/\s*self\.avg_batch_size\s*$",
        "under poisson and loss_reduction='mean' the gradient already divided by |B| is "
        "multiplied by |B| / avg_batch_size: the divisor becomes avg_batch_size",
        guard=r"if\s+self\.poisson\s+and\s+self\.loss_reduction\s*==\s*[\"']mean[\"']",
    ),
    Rule(
        "engine_avg_batch_size_value", "engine-poisson", ENGINE_FILE,
        r"^\s*self\.avg_batch_size\s*=\s*(?P<expr>.*sample_rate.*)$",
        "the value of avg_batch_size",
    ),
    # -- generation 3, dp-optimizer (v1.x): DPOptimizer.scale_grad divides by expected_batch_size
    Rule(
        "optimizer_noise_added_to_sum", "dp-optimizer", OPTIMIZER_FILE,
        r"^\s*p\.grad\s*=\s*\(?\s*p\.summed_grad\s*\+\s*noise\b",
        "add_noise stores S_B + G in p.grad, before any scaling",
        in_def="add_noise",
    ),
    Rule(
        "optimizer_divide_by_expected_batch_size", "dp-optimizer", OPTIMIZER_FILE,
        r"^\s*p\.grad\s*/=\s*self\.expected_batch_size\b",
        "scale_grad divides S_B + G by expected_batch_size (times the number of accumulated "
        "virtual steps, 1 for a plain step) under loss_reduction='mean'",
        in_def="scale_grad",
    ),
    Rule(
        "engine_expected_batch_size_value", "dp-optimizer", ENGINE_FILE,
        r"^\s*expected_batch_size\s*=\s*(?P<expr>.*sample_rate.*)$",
        "make_private computes expected_batch_size from the dataset size and sample_rate",
    ),
    Rule(
        "engine_poisson_sampling_flag", "dp-optimizer", ENGINE_FILE,
        r"^\s*poisson_sampling\s*:\s*bool\s*=\s*True\b",
        "make_private has poisson_sampling=True by default (built-in Poisson sampling "
        "through DPDataLoader)",
    ),
)
_RULE = {r.name: r for r in RULES}


def classify_expected_size(expr: str) -> str:
    """``"FEA"`` if ``expr`` (the right-hand side computing the divisor from the sample
    rate and the dataset size) truncates to an integer, ``"EA"`` if it is a plain product.

    >>> classify_expected_size("int(len(data_loader.dataset) * sample_rate)")
    'FEA'
    >>> classify_expected_size("self.sample_rate * self.sample_size")
    'EA'
    """
    e = expr.split("#", 1)[0].strip()
    if not re.search(r"\*", e):
        raise AuditError(f"cannot classify the expected batch size expression {expr!r}: no product")
    if re.match(r"^(?:int|math\.floor|floor|np\.floor|numpy\.floor|math\.trunc)\s*\(", e) or "//" in e:
        return "FEA"
    if re.match(r"^(?:round|math\.ceil|ceil)\s*\(", e):
        raise AuditError(f"expected batch size expression {expr!r} rounds in a way no rule covers")
    return "EA"


def _expr(ev: Evidence) -> str:
    m = re.search(_RULE[ev.rule].pattern, ev.code)
    if m is None or "expr" not in m.groupdict():  # pragma: no cover - rules guarantee a match
        raise AuditError(f"rule {ev.rule} matched but has no expression: {ev.code!r}")
    return m.group("expr").strip()


def audit_sources(sources: Mapping[str, str]) -> dict[str, Any]:
    """Apply :data:`RULES` to one release's source files and classify the release.

    ``sources`` maps a path inside the package (``"opacus/privacy_engine.py"``, ...) to
    its text; missing files are simply absent. Returns a dict with ``generation``,
    ``normalisation`` (A/EA/FEA), ``divisor``, ``poisson_builtin``, ``poisson_usable``,
    ``mechanism``, ``primary`` (the evidence for the normalisation, in
    ``privacy_engine.py``) and ``evidence`` (every matched line).

    Raises :class:`AuditError` when no generation's rules all fire, or the rules
    contradict each other.
    """
    hits = {r.name: r.find(sources) for r in RULES}
    evidence: list[Evidence] = [e for r in RULES for e in hits[r.name]]

    gen3 = all(hits[n] for n in ("optimizer_divide_by_expected_batch_size", "engine_expected_batch_size_value",
                                 "optimizer_noise_added_to_sum"))
    gen2 = all(hits[n] for n in ("engine_rescale_to_avg_batch_size", "engine_avg_batch_size_value"))
    gen1 = all(hits[n] for n in ("engine_realised_batch_size", "engine_noise_over_batch_size",
                                 "clipper_sum_over_batch_size"))

    if gen3:
        generation = "dp-optimizer"
        values = hits["engine_expected_batch_size_value"]
        kinds = {classify_expected_size(_expr(e)) for e in values}
        if len(kinds) != 1:
            raise AuditError(f"expected_batch_size is computed in inconsistent ways: {[e.code for e in values]}")
        normalisation = kinds.pop()
        primary = values[0]
        poisson_builtin = bool(hits["engine_poisson_sampling_flag"])
        poisson_usable = True
    elif gen2:
        generation = "engine-poisson"
        values = hits["engine_avg_batch_size_value"]
        kinds = {classify_expected_size(_expr(e)) for e in values}
        if len(kinds) != 1:
            raise AuditError(f"avg_batch_size is computed in inconsistent ways: {[e.code for e in values]}")
        normalisation = kinds.pop()
        primary = hits["engine_rescale_to_avg_batch_size"][0]
        poisson_builtin = bool(hits["engine_poisson_flag"])
        poisson_usable = not hits["engine_batch_size_upper_bound"]
    elif gen1:
        generation = "engine-step"
        normalisation = "A"
        primary = hits["engine_noise_over_batch_size"][0]
        poisson_builtin = False
        poisson_usable = not hits["engine_batch_size_upper_bound"]
    else:
        found = sorted(n for n, h in hits.items() if h)
        raise AuditError(
            "no code generation's rules all match this source (rules that fired: "
            f"{found or 'none'}); add a rule for the new code rather than guessing"
        )
    if not poisson_usable and generation != "engine-step":
        raise AuditError("a batch-size upper bound next to built-in Poisson logic: no rule covers this")
    mechanism = MECHANISM[normalisation] if poisson_usable else NOT_SUPPORTED
    return {
        "generation": generation,
        "normalisation": normalisation,
        "divisor": DIVISOR[normalisation],
        "poisson_builtin": poisson_builtin,
        "poisson_usable": poisson_usable,
        "mechanism": mechanism,
        "primary": primary.as_dict(),
        "evidence": [{k: v for k, v in e.as_dict().items() if k != "meaning"} for e in evidence],
    }
