"""Code audit of every Opacus release: how is the noisy gradient sum normalised?

This module regenerates Table 2 of Wang et al. (2026), and extends it past v1.5.4 to
every release on the package index. For each release from v0.9.0 on, it reads the
release's own source (the ``.py`` files inside the wheel that ``pip download`` fetches)
and answers, for one DP-SGD step with Poisson sampling and ``loss_reduction="mean"``:

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

Results and their refresh
-------------------------
The audit of every release is stored in the package as
``paperlib/resources/opacus_table2.json`` (committed source data), so the table rebuilds
offline. ``python -m paperlib.implementations.opacus_code --refresh`` (``make opacus-table``) lists the
releases on the index, downloads the missing wheels into the cache, re-audits them and
rewrites the file. The cache is ``$PAPERLIB_CACHE/opacus-src/`` (default
``<repo>/.cache/opacus-src/``).

Confirmation by a real step
---------------------------
:func:`step_check` runs one real DP-SGD step of whatever ``opacus`` is importable on a
tiny linear model and reads the divisor off the parameter update, twice: once with zero
noise (the update is ``-lr * |B| / divisor`` exactly) and once with zero gradients and
unit noise over 4,096 coordinates (the update's standard deviation is
``lr * sigma * C / divisor``). With ``N = 10`` and ``q = 0.25`` the three candidates
``|B|``, ``N q = 2.5`` and ``floor(N q) = 2`` differ, so the step tells them apart.
:func:`confirm_release` runs it for an old release installed with
``pip install --no-deps --target <cache>/opacus-<version>`` in a subprocess with that
folder first on ``PYTHONPATH``.

References: Wang, Cui, Cui, Yuan (2026), Section 5.5, Appendix A and Table 2;
Yousefpour et al. (2021) for Opacus.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import hashlib
import importlib.resources
import json
import math
import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

__all__ = [
    "PACKAGE",
    "FIRST_VERSION",
    "PAPER_LAST_VERSION",
    "CACHE_ENV",
    "REFRESH_COMMAND",
    "MECHANISM",
    "NOT_SUPPORTED",
    "PAPER_TABLE2",
    "RULES",
    "Rule",
    "Evidence",
    "AuditError",
    "cache_root",
    "wheel_cache_dir",
    "stored_table_path",
    "list_versions",
    "fetch_wheel",
    "cached_wheel",
    "read_sources",
    "audit_sources",
    "audit_wheel",
    "audit_versions",
    "build_table",
    "load_table",
    "save_table",
    "paper_row",
    "compare_with_paper",
    "Table",
    "records_table",
    "markdown_table",
    "step_check",
    "install_release",
    "confirm_release",
    "main",
]

PACKAGE = "opacus"
FIRST_VERSION = "0.9.0"
PAPER_LAST_VERSION = "1.5.4"  # Table 2 of the paper stops here
CACHE_ENV = "PAPERLIB_CACHE"
REFRESH_COMMAND = "python -m paperlib.implementations.opacus_code --refresh   (or: make opacus-table)"
SCHEMA = 1

MECHANISM = {"A": "ASGM", "EA": "EASGM", "FEA": "FEASGM"}
DIVISOR = {"A": "|B|", "EA": "N*q", "FEA": "floor(N*q)"}
NOT_SUPPORTED = "Not supported"

# Table 2 of Wang et al. (2026), one entry per release it lists:
# (version, normalisation, built-in Poisson update logic, mechanism, commit the paper cites).
# The paper's rows group releases ("v0.9.0-v0.9.1", "v1.3", "v1.4-v1.4.1", "v1.5-v1.5.4");
# they are expanded here to the release names on the package index.
_PAPER_ROWS: tuple[tuple[tuple[str, ...], str, bool, str, str], ...] = (
    (("0.9.0", "0.9.1"), "A", False, NOT_SUPPORTED, "33a7ca4"),
    (("0.10.0", "0.10.1"), "A", False, NOT_SUPPORTED, "9d76ea5"),
    (("0.11.0",), "A", False, NOT_SUPPORTED, "9d76ea5"),
    (("0.12.0",), "A", False, "ASGM", "9d76ea5"),
    (("0.13.0",), "A", False, "ASGM", "9d76ea5"),
    (("0.14.0",), "EA", True, "EASGM", "e9983ec"),
    (("0.15.0",), "EA", True, "EASGM", "e9983ec"),
    (("1.0.0", "1.0.1", "1.0.2"), "FEA", True, "FEASGM", "1241e62"),
    (("1.1.0", "1.1.1", "1.1.2", "1.1.3"), "FEA", True, "FEASGM", "1241e62"),
    (("1.2.0",), "FEA", True, "FEASGM", "1241e62"),
    (("1.3.0",), "FEA", True, "FEASGM", "1241e62"),
    (("1.4.0", "1.4.1"), "FEA", True, "FEASGM", "1241e62"),
    (("1.5", "1.5.1", "1.5.2", "1.5.3", "1.5.4"), "FEA", True, "FEASGM", "1241e62"),
)
PAPER_TABLE2: dict[str, dict[str, Any]] = {
    v: {"normalisation": norm, "poisson_builtin": builtin, "mechanism": mech, "paper_commit": commit}
    for versions, norm, builtin, mech, commit in _PAPER_ROWS
    for v in versions
}

_ENGINE = "opacus/privacy_engine.py"
_CLIPPER = "opacus/per_sample_gradient_clip.py"
_SAMPLER = "opacus/utils/uniform_sampler.py"
_OPTIMIZER = "opacus/optimizers/optimizer.py"
SOURCE_FILES = (_ENGINE, _CLIPPER, _SAMPLER, _OPTIMIZER)


class AuditError(RuntimeError):
    """A release's source does not match the rules, or the table cannot be obtained."""


# ---------------------------------------------------------------------------- rules


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
        import ast

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
        "engine_realised_batch_size", "engine-step", _ENGINE,
        r"^\s*\w+\s*,\s*batch_size\s*=\s*self\.clipper\.pre_step\(\)",
        "step() takes batch_size from the clipper: the number of per-sample gradients "
        "it saw, i.e. the realised batch size |B|",
        in_def="step",
    ),
    Rule(
        "engine_noise_over_batch_size", "engine-step", _ENGINE,
        r"^\s*noise\s*/=\s*batch_size\s*$",
        "with loss_reduction='mean' the noise G is divided by that batch_size",
        in_def="step", guard=_MEAN_GUARD,
    ),
    Rule(
        "clipper_sum_over_batch_size", "engine-step", _CLIPPER,
        r"^\s*return\s+summed_grad\s*/\s*batch_size\s*$",
        "the clipper returns the sum of clipped gradients S_B divided by the same batch_size",
        in_def="_scale_summed_grad",
    ),
    Rule(
        "engine_batch_size_upper_bound", "engine-step", _ENGINE,
        r"^\s*if\s+batch_size\s*>\s*self\.batch_size\s*:",
        "a batch larger than the configured batch_size raises ValueError: a variable-size "
        "Poisson batch cannot be fed (Poisson sampling not supported)",
        in_def="step", then=r"^\s*raise\b",
    ),
    Rule(
        "poisson_sampler_shipped", "engine-step", _SAMPLER,
        r"^\s*class\s+UniformWithReplacementSampler\b",
        "the release ships a sampler that includes each example independently with "
        "probability sample_rate (Poisson sampling)",
    ),
    # -- generation 2, engine-poisson (v0.14-v0.15): a poisson flag rescales |B| -> avg_batch_size
    Rule(
        "engine_poisson_flag", "engine-poisson", _ENGINE,
        r"^\s*poisson\s*:\s*bool\s*=",
        "PrivacyEngine has a poisson switch (built-in Poisson sampling and update logic)",
    ),
    Rule(
        "engine_rescale_to_avg_batch_size", "engine-poisson", _ENGINE,
        r"^\s*(?:p\.grad|new_grad)\s*\*=\s*batch_size\s*/\s*self\.avg_batch_size\s*$",
        "under poisson and loss_reduction='mean' the gradient already divided by |B| is "
        "multiplied by |B| / avg_batch_size: the divisor becomes avg_batch_size",
        guard=r"if\s+self\.poisson\s+and\s+self\.loss_reduction\s*==\s*[\"']mean[\"']",
    ),
    Rule(
        "engine_avg_batch_size_value", "engine-poisson", _ENGINE,
        r"^\s*self\.avg_batch_size\s*=\s*(?P<expr>.*sample_rate.*)$",
        "the value of avg_batch_size",
    ),
    # -- generation 3, dp-optimizer (v1.x): DPOptimizer.scale_grad divides by expected_batch_size
    Rule(
        "optimizer_noise_added_to_sum", "dp-optimizer", _OPTIMIZER,
        r"^\s*p\.grad\s*=\s*\(?\s*p\.summed_grad\s*\+\s*noise\b",
        "add_noise stores S_B + G in p.grad, before any scaling",
        in_def="add_noise",
    ),
    Rule(
        "optimizer_divide_by_expected_batch_size", "dp-optimizer", _OPTIMIZER,
        r"^\s*p\.grad\s*/=\s*self\.expected_batch_size\b",
        "scale_grad divides S_B + G by expected_batch_size (times the number of accumulated "
        "virtual steps, 1 for a plain step) under loss_reduction='mean'",
        in_def="scale_grad",
    ),
    Rule(
        "engine_expected_batch_size_value", "dp-optimizer", _ENGINE,
        r"^\s*expected_batch_size\s*=\s*(?P<expr>.*sample_rate.*)$",
        "make_private computes expected_batch_size from the dataset size and sample_rate",
    ),
    Rule(
        "engine_poisson_sampling_flag", "dp-optimizer", _ENGINE,
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


def _first(evs: Sequence[Evidence]) -> Evidence | None:
    return evs[0] if evs else None


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


# ---------------------------------------------------------------------------- files


def _repo_root() -> Path | None:
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else None


def cache_root() -> Path:
    """``$PAPERLIB_CACHE`` if set, else ``<repo>/.cache`` (``~/.cache/paperlib`` outside a checkout)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    root = _repo_root()
    return root / ".cache" if root is not None else Path.home() / ".cache" / "paperlib"


def wheel_cache_dir() -> Path:
    """Where downloaded release wheels live: ``<cache>/opacus-src/``."""
    return cache_root() / "opacus-src"


def stored_table_path() -> Path:
    """The committed audit table inside the package."""
    return Path(str(importlib.resources.files("paperlib") / "resources" / "opacus_table2.json"))


def _version_key(v: str):
    from packaging.version import Version

    return Version(v)


def _pip(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True, text=True, timeout=timeout,
    )


def list_versions(first: str = FIRST_VERSION) -> list[str]:
    """Release versions of Opacus on the package index, oldest first, from ``first`` on
    (no pre-releases). Uses ``pip index versions``, falling back to the version list in
    the error that ``pip download opacus==0`` prints. Needs the network."""
    versions: list[str] = []
    r = _pip("index", "versions", PACKAGE, timeout=300)
    m = re.search(r"Available versions:\s*(.+)", r.stdout)
    if r.returncode == 0 and m:
        versions = [v.strip() for v in m.group(1).split(",") if v.strip()]
    else:
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            r2 = _pip("download", "--no-deps", "-d", d, f"{PACKAGE}==0", timeout=300)
        m = re.search(r"\(from versions:\s*([^)]*)\)", r2.stderr + r2.stdout)
        if m is None or not m.group(1).strip() or m.group(1).strip() == "none":
            raise AuditError(
                "cannot list Opacus releases on the package index (no network?):\n"
                + (r.stderr.strip() or r2.stderr.strip())[-2000:]
            )
        versions = [v.strip() for v in m.group(1).split(",") if v.strip()]
    lo = _version_key(first)
    keep = [v for v in versions if not _version_key(v).is_prerelease and _version_key(v) >= lo]
    return sorted(set(keep), key=_version_key)


def _wheel_version(path: Path) -> str | None:
    m = re.match(rf"{PACKAGE}-([^-]+)-", path.name)
    return m.group(1) if m else None


def cached_wheel(version: str, cache: Path | None = None) -> Path | None:
    """The cached wheel of ``version`` (exact version string match), or ``None``."""
    cache = wheel_cache_dir() if cache is None else cache
    if not cache.is_dir():
        return None
    for p in sorted(cache.glob(f"{PACKAGE}-*.whl")):
        if _wheel_version(p) == version:
            return p
    return None


def fetch_wheel(version: str, cache: Path | None = None) -> Path:
    """The release's wheel in the cache, downloaded with
    ``pip download --no-deps --only-binary=:all: opacus==VERSION`` if missing."""
    cache = wheel_cache_dir() if cache is None else cache
    hit = cached_wheel(version, cache)
    if hit is not None:
        return hit
    cache.mkdir(parents=True, exist_ok=True)
    r = _pip("download", "--no-deps", "--only-binary=:all:", "-d", str(cache), f"{PACKAGE}=={version}")
    hit = cached_wheel(version, cache)
    if r.returncode != 0 or hit is None:
        raise AuditError(f"pip download of {PACKAGE}=={version} failed:\n{r.stderr.strip()[-2000:]}")
    return hit


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_sources(wheel: Path, files: Iterable[str] = SOURCE_FILES) -> dict[str, str]:
    """The text of ``files`` (paths inside the package) that exist in the wheel."""
    out = {}
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for f in files:
            if f in names:
                out[f] = z.read(f).decode("utf-8")
    return out


def audit_wheel(wheel: Path, version: str | None = None) -> dict[str, Any]:
    """Audit one release wheel; the record that :func:`build_table` stores."""
    version = version or _wheel_version(wheel)
    if version is None:
        raise AuditError(f"cannot tell the version of {wheel.name}")
    sources = read_sources(wheel)
    if _ENGINE not in sources:
        raise AuditError(f"{wheel.name} has no {_ENGINE}")
    try:
        found = audit_sources(sources)
    except AuditError as exc:
        raise AuditError(f"opacus {version}: {exc}") from None
    return {
        "version": version,
        "wheel": wheel.name,
        "wheel_sha256": _sha256(wheel),
        "file": found["primary"]["file"],
        "line": found["primary"]["line"],
        "code": found["primary"]["code"],
        **found,
        "in_paper_table2": version in PAPER_TABLE2,
    }


def audit_versions(versions: Sequence[str], *, download: bool, cache: Path | None = None,
                   log: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Audit the given releases from the cache (downloading missing wheels if ``download``)."""
    recs = []
    for v in versions:
        wheel = fetch_wheel(v, cache) if download else cached_wheel(v, cache)
        if wheel is None:
            raise AuditError(f"opacus {v} is not in the cache {wheel_cache_dir() if cache is None else cache}; "
                             f"fill it with: {REFRESH_COMMAND}")
        rec = audit_wheel(wheel, v)
        if log:
            log(f"opacus {v:7s} {rec['normalisation']:3s} {rec['mechanism']:13s} {rec['file']}:{rec['line']}  {rec['code']}")
        recs.append(rec)
    return recs


def build_table(records: Sequence[dict[str, Any]], *, confirmations: Sequence[dict[str, Any]] = (),
                source: str) -> dict[str, Any]:
    """The stored JSON document: releases (oldest first), confirmations, provenance."""
    import platform

    recs = sorted(records, key=lambda r: _version_key(r["version"]))
    return {
        "schema": SCHEMA,
        "what": "Opacus code audit: divisor of the noisy gradient sum under Poisson sampling with "
                "loss_reduction='mean' (Table 2 of Wang et al. 2026, extended to every release)",
        "generated_utc": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "generated_by": "python -m paperlib.implementations.opacus_code --refresh",
        "source": source,
        "python": platform.python_version(),
        "first_version": FIRST_VERSION,
        "paper_last_version": PAPER_LAST_VERSION,
        "n_releases": len(recs),
        "rules": [{"name": r.name, "generation": r.generation, "file": r.file, "pattern": r.pattern,
                   "meaning": r.meaning} for r in RULES],
        "releases": list(recs),
        "confirmations": list(confirmations),
    }


def save_table(doc: Mapping[str, Any], path: Path | None = None) -> Path:
    from paperlib.artifact.provenance import write_json_atomic

    path = stored_table_path() if path is None else Path(path)
    out = write_json_atomic(path, dict(doc))
    os.chmod(out, 0o644)
    return out


def load_table(path: Path | None = None, *, rebuild_from_cache: bool = True) -> dict[str, Any]:
    """The stored audit table; no network.

    Without the stored file, the table is rebuilt from the wheels already in the cache if
    any are there (``rebuild_from_cache``); otherwise :class:`AuditError` names the
    command that fetches them.
    """
    path = stored_table_path() if path is None else Path(path)
    if path.is_file():
        return json.loads(path.read_text())
    cache = wheel_cache_dir()
    wheels = sorted(cache.glob(f"{PACKAGE}-*.whl"), key=lambda p: _version_key(_wheel_version(p) or "0")) \
        if cache.is_dir() else []
    if rebuild_from_cache and wheels:
        recs = [audit_wheel(w) for w in wheels
                if _version_key(_wheel_version(w) or "0") >= _version_key(FIRST_VERSION)]
        return build_table(recs, source=f"rebuilt offline from the wheel cache {cache}")
    raise AuditError(
        f"no stored Opacus code-audit table at {path} and no release wheels in {cache}. "
        f"Run (needs the network): {REFRESH_COMMAND}"
    )


# ---------------------------------------------------------------------------- paper


def paper_row(version: str) -> dict[str, Any] | None:
    """Table 2's entry for ``version`` or ``None`` if the paper does not list it."""
    return PAPER_TABLE2.get(version)


def compare_with_paper(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per release: ``status`` is ``"agrees"``, ``"differs"`` (with ``diffs``) or
    ``"not in paper"`` (releases after v1.5.4)."""
    out = []
    for r in records:
        p = paper_row(r["version"])
        if p is None:
            out.append({"version": r["version"], "status": "not in paper", "diffs": []})
            continue
        diffs = [k for k in ("normalisation", "poisson_builtin", "mechanism") if r[k] != p[k]]
        out.append({"version": r["version"], "status": "differs" if diffs else "agrees", "diffs": diffs})
    missing = sorted(set(PAPER_TABLE2) - {r["version"] for r in records}, key=_version_key)
    out.extend({"version": v, "status": "not audited", "diffs": []} for v in missing)
    return out


class Table:
    """A small table that renders as HTML (Jupyter, the book) and as Markdown (``str``).

    Cells are plain text with two bits of markup: ```code``` and ``**bold**``. Pipes in
    cells are escaped for Markdown; everything is HTML-escaped for HTML.
    """

    def __init__(self, header: Sequence[str], rows: Sequence[Sequence[Any]]):
        self.header = [str(h) for h in header]
        self.rows = [[str(c) for c in row] for row in rows]
        if any(len(r) != len(self.header) for r in self.rows):
            raise ValueError("every row needs one cell per header column")

    def markdown(self) -> str:
        esc = lambda c: c.replace("|", "\\|")  # noqa: E731
        lines = ["| " + " | ".join(map(esc, self.header)) + " |", "|" + "---|" * len(self.header)]
        lines += ["| " + " | ".join(map(esc, r)) + " |" for r in self.rows]
        return "\n".join(lines)

    @staticmethod
    def _html_cell(c: str) -> str:
        import html

        out = []
        for i, part in enumerate(c.split("`")):  # odd parts are code
            part = html.escape(part)
            out.append(f"<code>{part}</code>" if i % 2 else re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", part))
        return "".join(out)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{self._html_cell(h)}</th>" for h in self.header)
        body = "".join("<tr>" + "".join(f"<td>{self._html_cell(c)}</td>" for c in r) + "</tr>" for r in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __str__(self) -> str:
        return self.markdown()


def records_table(records: Sequence[dict[str, Any]], *, compare: bool = True) -> Table:
    """The audit as a :class:`Table`, one row per release; with ``compare``, a last column
    against the paper's Table 2."""
    cmp = {c["version"]: c for c in compare_with_paper(records)} if compare else {}
    head = ["Version", "File:line", "Code", "Normalisation", "Built-in Poisson", "Mechanism"]
    if compare:
        head.append("vs. paper's Table 2")
    rows = []
    for r in records:
        cells = [
            f"v{r['version']}",
            f"`{r['file'].removeprefix('opacus/')}:{r['line']}`",
            f"`{r['code']}`",
            f"{r['normalisation']} ({r['divisor']})",
            "✓" if r["poisson_builtin"] else "✗",
            r["mechanism"],
        ]
        if compare:
            c = cmp[r["version"]]
            cells.append({"agrees": "same", "not in paper": "**new** (after v1.5.4)"}.get(
                c["status"], "**differs**: " + ", ".join(c["diffs"])))
        rows.append(cells)
    return Table(head, rows)


def markdown_table(records: Sequence[dict[str, Any]], *, compare: bool = True) -> str:
    """The audit as a Markdown table, one row per release."""
    return records_table(records, compare=compare).markdown()


# ---------------------------------------------------------------------------- real step


def _opacus_version(opacus) -> str:
    """``opacus.__version__``, or (v0.9-v0.11 have none) the version in the
    ``opacus-*.dist-info`` folder next to the imported package."""
    v = getattr(opacus, "__version__", None)
    if v:
        return str(v)
    site = Path(opacus.__file__).resolve().parents[1]
    for info in sorted(site.glob(f"{PACKAGE}-*.dist-info")):
        m = re.match(rf"{PACKAGE}-(.+)\.dist-info$", info.name)
        if m:
            return m.group(1)
    return "unknown"


def _opacus_api(opacus) -> str:
    import inspect

    PE = opacus.PrivacyEngine
    if hasattr(PE, "make_private"):
        return "v1-make_private"
    params = inspect.signature(PE.__init__).parameters
    if "poisson" in params:
        return "v0-poisson"
    if "sample_rate" in params:
        return "v0-sample_rate"
    return "v0-batch_size"


def step_check(*, seed: int = 0, N: int = 10, batch_size: int = 3, d_noise: int = 4096,
               n_batches: int = 6, lr: float = 1.0) -> dict[str, Any]:
    """Run real DP-SGD steps of the importable ``opacus`` and read off the divisor.

    The dataset has ``N`` examples; the sampling rate is ``q = 1 / ceil(N / batch_size)``
    (how Opacus v1.x derives it from a ``DataLoader`` with that batch size; v0.x gets the
    same ``q`` directly; v0.9-v0.11 get ``batch_size`` itself, their upper bound). The
    defaults give ``q = 0.25``, ``N q = 2.5``, ``floor(N q) = 2``.

    Two runs, each over ``n_batches`` non-empty Poisson batches (empty batches are
    skipped and counted: they carry no example):

    * ``signal``: ``Linear(2, 1, bias=False)`` at zero, every example ``x = (1, 0)``,
      loss ``model(x).mean()``, zero noise, clipping norm 10 (no clipping). Each
      per-example gradient is ``(1, 0)``, so the update of the first weight is
      ``-lr |B| / divisor`` and ``divisor = lr |B| / (-update)``.
    * ``noise``: ``Linear(d_noise, 1, bias=False)``, every example ``x = 0`` (zero
      gradients), noise multiplier 1, clipping norm 1. The update is ``-lr G / divisor``
      with ``G ~ N(0, I)``, so ``divisor = lr / std(update)`` (about 1.1% error at 4,096
      coordinates).

    Each measured divisor is matched to the candidates ``A = |B|``, ``EA = N q`` and
    ``FEA = floor(N q)`` (relative tolerance 1e-5 for ``signal``, 7% for ``noise``). A
    batch is decisive when exactly one candidate matches. ``verdict`` is the candidate
    that every batch of both runs matches, provided each run has a decisive batch;
    otherwise ``"inconclusive"``. For v0.9-v0.11 (no Poisson support) a batch of
    ``batch_size + 1`` examples is also fed: ``rejects_larger_batch`` records whether the
    engine raised ``ValueError``, and ``verdict`` becomes ``"Not supported"`` if so.

    v0.14-v0.15 take extra noise-only "empty batch" steps inside ``optimizer.step()``
    (their simulation of empty Poisson batches, each a separate round that uses no
    example); the check sets that count to zero so one round's update is measured.
    """
    import warnings

    import torch
    import opacus

    warnings.simplefilter("ignore")
    api = _opacus_api(opacus)
    k = math.ceil(N / batch_size)
    q = 1.0 / k
    Nq = N * q
    cand = {"A": None, "EA": Nq, "FEA": float(math.floor(Nq))}
    t0 = time.perf_counter()

    def poisson_batches(gen):
        while True:
            mask = torch.rand(N, generator=gen) < q
            yield mask.nonzero(as_tuple=False).reshape(-1).tolist()

    def run(kind: str) -> dict[str, Any]:
        torch.manual_seed(seed + (0 if kind == "signal" else 1))
        gen = torch.Generator().manual_seed(seed + 17)
        d = 2 if kind == "signal" else d_noise
        X = torch.zeros(N, d)
        if kind == "signal":
            X[:, 0] = 1.0
        Y = torch.zeros(N, dtype=torch.long)
        sigma, C = (0.0, 10.0) if kind == "signal" else (1.0, 1.0)
        model = torch.nn.Linear(d, 1, bias=False)
        with torch.no_grad():
            model.weight.zero_()
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        ds = torch.utils.data.TensorDataset(X, Y)
        engine = None
        if api == "v1-make_private":
            pe = opacus.PrivacyEngine()
            dl0 = torch.utils.data.DataLoader(ds, batch_size=batch_size)
            model, opt, dl = pe.make_private(module=model, optimizer=opt, data_loader=dl0,
                                             noise_multiplier=sigma, max_grad_norm=C, poisson_sampling=True)
            info = {"expected_batch_size": opt.expected_batch_size, "sample_rate": 1.0 / len(dl0)}

            def batches():
                while True:
                    for xb, _ in dl:
                        yield xb
        else:
            if api == "v0-batch_size":
                engine = opacus.PrivacyEngine(model, batch_size=batch_size, sample_size=N, alphas=[2.0, 8.0],
                                              noise_multiplier=sigma, max_grad_norm=C)
            elif api == "v0-sample_rate":
                engine = opacus.PrivacyEngine(model, sample_rate=q, noise_multiplier=sigma, max_grad_norm=C)
            else:
                engine = opacus.PrivacyEngine(model, sample_rate=q, sample_size=N, poisson=True,
                                              noise_multiplier=sigma, max_grad_norm=C)
                engine._sample_poisson_empty_batches = lambda: 0
            engine.attach(opt)
            info = {k2: getattr(engine, k2) for k2 in ("sample_rate", "avg_batch_size", "batch_size")
                    if getattr(engine, k2, None) is not None}
            sampler = None
            try:
                from opacus.utils.uniform_sampler import UniformWithReplacementSampler

                sampler = UniformWithReplacementSampler(num_samples=N, sample_rate=q, generator=gen)
                info["sampler"] = "opacus.utils.uniform_sampler.UniformWithReplacementSampler"
            except ImportError:
                info["sampler"] = "torch.rand(N) < q (the release ships no Poisson sampler)"

            def indices():
                if sampler is None:
                    yield from poisson_batches(gen)
                while True:  # one pass of the sampler is one epoch; keep going
                    yield from sampler

            def batches():
                for idx in indices():
                    if api == "v0-batch_size" and len(idx) > batch_size:
                        continue  # fed separately below (the engine rejects it)
                    yield X[idx]

        rows, empty = [], 0
        for xb in batches():
            if len(rows) >= n_batches:
                break
            if xb.shape[0] == 0:
                empty += 1
                if empty > 1000:
                    raise RuntimeError("only empty batches")
                continue
            with torch.no_grad():
                next(model.parameters()).zero_()
            opt.zero_grad()
            w0 = next(model.parameters()).detach().clone()
            loss = model(xb).mean()
            loss.backward()
            opt.step()
            upd = (next(model.parameters()).detach() - w0).reshape(-1)
            B = int(xb.shape[0])
            if kind == "signal":
                div = lr * B / float(-upd[0])
                tol = 1e-5
            else:
                div = lr * sigma * C / float(upd.std())
                tol = 0.07
            cands = dict(cand, A=float(B))
            match = sorted(lbl for lbl, v in cands.items() if abs(div - v) <= tol * v)
            rows.append({"batch_size": B, "divisor": div, "matches": match})
        out = {"kind": kind, "noise_multiplier": sigma, "max_grad_norm": C, "dim": d, "batches": rows,
               "empty_batches_skipped": empty, **{k2: v for k2, v in info.items()}}
        if api == "v0-batch_size":
            opt.zero_grad()
            xb = X[: batch_size + 1]
            try:
                model(xb).mean().backward()
                opt.step()
                out["rejects_larger_batch"] = False
            except ValueError as exc:
                out["rejects_larger_batch"] = True
                out["rejection_message"] = str(exc).splitlines()[0][:200]
        return out

    runs = [run("signal"), run("noise")]
    verdict = "inconclusive"
    common = None
    for r in runs:
        for b in r["batches"]:
            common = set(b["matches"]) if common is None else common & set(b["matches"])
    decisive_each = all(any(len(b["matches"]) == 1 for b in r["batches"]) for r in runs)
    if common is not None and len(common) == 1 and decisive_each:
        verdict = common.pop()
    if api == "v0-batch_size" and all(r.get("rejects_larger_batch") for r in runs):
        verdict_poisson = NOT_SUPPORTED
    else:
        verdict_poisson = MECHANISM.get(verdict, "inconclusive")
    return {
        "opacus": _opacus_version(opacus),
        "opacus_file": str(Path(opacus.__file__).parent),
        "torch": torch.__version__,
        "api": api,
        "seed": seed,
        "N": N,
        "q": q,
        "Nq": Nq,
        "floor_Nq": math.floor(Nq),
        "runs": runs,
        "verdict": verdict,
        "mechanism": verdict_poisson,
        "wall_time_s": round(time.perf_counter() - t0, 3),
    }


# Compatibility shims for running v0.9-v0.11 on current torch, applied only inside the
# subprocess of confirm_release and recorded in its output. Neither touches the code path
# under test: torchcsprng is imported at module level but used only with secure_rng=True,
# and ModuleAttributeError was an AttributeError subclass that torch later removed.
_SHIM = r"""
import sys, types, warnings
warnings.simplefilter("ignore")
shims = []
try:
    import opacus  # noqa: F401
except ImportError:
    for name in [m for m in sys.modules if m == "opacus" or m.startswith("opacus.")]:
        del sys.modules[name]
    try:
        import torchcsprng  # noqa: F401
    except ImportError:
        m = types.ModuleType("torchcsprng")
        def _unavailable(*a, **k):
            raise RuntimeError("torchcsprng stub: secure_rng is not available in this check")
        m.create_random_device_generator = _unavailable
        m.create_mt19937_generator = _unavailable
        sys.modules["torchcsprng"] = m
        shims.append("torchcsprng: stub module (the release imports it; it is used only with secure_rng=True)")
    import torch.nn.modules.module as _mm
    if not hasattr(_mm, "ModuleAttributeError"):
        _mm.ModuleAttributeError = AttributeError
        shims.append("torch.nn.modules.module.ModuleAttributeError = AttributeError (removed from torch)")
    import opacus  # noqa: F401
import json
from paperlib.implementations.opacus_code import step_check
out = step_check(seed=int(sys.argv[1]))
out["shims"] = shims
print("@@RESULT@@" + json.dumps(out))
"""


def install_release(version: str, *, cache: Path | None = None, download: bool = False) -> Path:
    """``pip install --no-deps --target <cache>/opacus-<version>`` from the cached wheel.

    With ``download=False`` the wheel must already be in the cache (no network)."""
    target = cache_root() / f"{PACKAGE}-{version}"
    if (target / PACKAGE / "__init__.py").is_file():
        return target
    wheel = fetch_wheel(version, cache) if download else cached_wheel(version, cache)
    if wheel is None:
        raise AuditError(f"opacus {version} is not in the wheel cache; fill it with: {REFRESH_COMMAND}")
    r = _pip("install", "--no-deps", "--no-index", "--target", str(target), str(wheel))
    if r.returncode != 0:
        raise AuditError(f"pip install --target {target} {wheel.name} failed:\n{r.stderr.strip()[-2000:]}")
    return target


def confirm_release(version: str, *, seed: int = 0, timeout: float = 300, download: bool = False) -> dict[str, Any]:
    """Install ``version`` into the cache and run :func:`step_check` in a subprocess with
    that folder first on ``PYTHONPATH``. Returns the check's result, or a dict with
    ``verdict: "error"`` and the reason when the release does not run here."""
    t0 = time.perf_counter()
    try:
        target = install_release(version, download=download)
    except AuditError as exc:
        return {"opacus": version, "verdict": "error", "mechanism": "error", "error": str(exc)}
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(target), str(root)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("OMP_NUM_THREADS", "1")
    try:
        r = subprocess.run([sys.executable, "-c", _SHIM, str(seed)], capture_output=True, text=True,
                           timeout=timeout, env=env, cwd=str(target))
    except subprocess.TimeoutExpired:
        return {"opacus": version, "verdict": "error", "mechanism": "error", "error": f"timed out after {timeout} s"}
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("@@RESULT@@")), None)
    if r.returncode != 0 or line is None:
        err = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return {"opacus": version, "verdict": "error", "mechanism": "error", "error": err[:500],
                "wall_time_s": round(time.perf_counter() - t0, 3)}
    out = json.loads(line[len("@@RESULT@@"):])
    if out["opacus"] != version:
        out["verdict"] = "error"
        out["error"] = f"imported opacus {out['opacus']} from {out['opacus_file']}, not {version}"
    out["subprocess_wall_time_s"] = round(time.perf_counter() - t0, 3)
    return out


def _summarise_confirmation(c: Mapping[str, Any], how: str) -> dict[str, Any]:
    """The part of a step check that is stored in the table (the batches, compactly)."""
    keep = {k: c.get(k) for k in ("opacus", "torch", "api", "seed", "N", "q", "Nq", "floor_Nq",
                                  "verdict", "mechanism", "error", "shims") if k in c}
    keep["how"] = how
    if "runs" in c:
        keep["runs"] = [{"kind": r["kind"],
                         "batches": [{"size": b["batch_size"], "divisor": round(b["divisor"], 6),
                                      "matches": ",".join(b["matches"]) or "none"} for b in r["batches"]],
                         "empty_batches_skipped": r["empty_batches_skipped"],
                         **({"rejects_larger_batch": r["rejects_larger_batch"]} if "rejects_larger_batch" in r else {})}
                        for r in c["runs"]]
    return keep


# ---------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m paperlib.implementations.opacus_code",
        description="Opacus code audit (Table 2 of Wang et al. 2026). Without options: print the stored table.",
    )
    p.add_argument("--refresh", action="store_true",
                   help="online: list releases, download missing wheels, re-audit, rewrite the stored table")
    p.add_argument("--from-cache", action="store_true",
                   help="offline: re-audit the wheels already in the cache and rewrite the stored table")
    p.add_argument("--confirm", choices=("none", "installed", "all"), default="installed",
                   help="with --refresh/--from-cache: confirm by a real step the installed opacus "
                        "(default), every release that runs here (subprocess per release), or none")
    p.add_argument("--output", type=Path, default=None, help="write the table here instead of the package file")
    p.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    p.add_argument("--step-check", action="store_true",
                   help="run the real-step check of the importable opacus and print its JSON")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    if args.step_check:
        print(json.dumps(step_check(seed=args.seed), indent=1))
        return 0
    try:
        if args.refresh or args.from_cache:
            log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
            if args.refresh:
                versions = list_versions()
                log(f"{len(versions)} releases of opacus from {FIRST_VERSION} on: {', '.join(versions)}")
                recs = audit_versions(versions, download=True, log=log)
                source = "pip download --no-deps --only-binary=:all: opacus==VERSION (package index)"
            else:
                cache = wheel_cache_dir()
                versions = sorted({v for w in cache.glob(f"{PACKAGE}-*.whl") if (v := _wheel_version(w))
                                   and _version_key(v) >= _version_key(FIRST_VERSION)}, key=_version_key)
                if not versions:
                    raise AuditError(f"no wheels in {cache}; run: {REFRESH_COMMAND}")
                recs = audit_versions(versions, download=False, log=log)
                source = f"wheel cache {cache} (offline re-audit)"
            confirmations = []
            if args.confirm != "none":
                import opacus

                installed = opacus.__version__
                c = step_check(seed=args.seed)
                confirmations.append(_summarise_confirmation(c, "in-process, installed opacus"))
                log(f"real step, installed opacus {installed}: divides by {c['verdict']} -> {c['mechanism']}")
                if args.confirm == "all":
                    for v in versions:
                        if v == installed:
                            continue
                        c = confirm_release(v, seed=args.seed)
                        confirmations.append(_summarise_confirmation(
                            c, f"subprocess, pip install --no-deps --target <cache>/opacus-{v}"))
                        log(f"real step, opacus {v}: {c['verdict']} -> {c['mechanism']}"
                            + (f" ({c.get('error')})" if c.get("error") else ""))
            doc = build_table(recs, confirmations=confirmations, source=source)
            path = save_table(doc, args.output)
            log(f"wrote {path} ({len(recs)} releases)")
        else:
            doc = load_table(args.output)
    except AuditError as exc:
        print(f"paperlib.implementations.opacus_code: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(markdown_table(doc["releases"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
