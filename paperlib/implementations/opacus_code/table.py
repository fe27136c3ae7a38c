"""Table 2 of Wang et al. (2026), rebuilt from the audit of every Opacus release.

The audit of every release is stored in the package as
``paperlib/resources/opacus_table2.json`` (committed source data, read by
:func:`load_table`), so the table rebuilds offline; each release's record also stores the
sha256 of its wheel, which :mod:`.wheels` checks every wheel against.
``python -m paperlib.implementations.opacus_code --refresh`` (``make opacus-table``) lists
the releases on the index, downloads the missing wheels into the cache, re-audits them and
rewrites the file (:func:`build_table`, :func:`save_table`). :func:`compare_with_paper`
and :func:`records_table` put the result next to the paper's Table 2
(:data:`PAPER_TABLE2`).

Reference: Wang, Cui, Cui, Yuan (2026), Section 5.5 and Table 2.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .rules import ENGINE_FILE, NOT_SUPPORTED, RULES, AuditError, audit_sources
from .wheels import (FIRST_VERSION, REFRESH_COMMAND, cached_wheel, fetch_wheel, load_table, parse_version,
                     read_sources, stored_table_path, verify_wheel, wheel_cache_dir, wheel_version)

__all__ = [
    "PAPER_LAST_VERSION",
    "SCHEMA",
    "PAPER_TABLE2",
    "paper_row",
    "audit_wheel",
    "audit_versions",
    "build_table",
    "save_table",
    "load_table",
    "compare_with_paper",
    "records_table",
    "markdown_table",
]

PAPER_LAST_VERSION = "1.5.4"  # Table 2 of the paper stops here
SCHEMA = 1

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


def audit_wheel(wheel: Path, version: str | None = None, *, trust_new: bool = False) -> dict[str, Any]:
    """Audit one release wheel; the record that :func:`build_table` stores.

    The wheel is verified first (:func:`~.wheels.verify_wheel`: its sha256 against the
    stored one, or recorded as new with ``trust_new``), then its source files are read
    (nothing in it runs) and classified by :func:`~.rules.audit_sources`.

    Raises :class:`~.wheels.WheelVerificationError` for a wheel that does not match, and
    :class:`~.rules.AuditError` when its source matches no rule.
    """
    version = version or wheel_version(wheel)
    if version is None:
        raise AuditError(f"cannot tell the version of {Path(wheel).name}")
    sha = verify_wheel(wheel, version, trust_new=trust_new)
    sources = read_sources(wheel)
    if ENGINE_FILE not in sources:
        raise AuditError(f"{Path(wheel).name} has no {ENGINE_FILE}")
    try:
        found = audit_sources(sources)
    except AuditError as exc:
        raise AuditError(f"opacus {version}: {exc}") from None
    return {
        "version": version,
        "wheel": Path(wheel).name,
        "wheel_sha256": sha,
        "file": found["primary"]["file"],
        "line": found["primary"]["line"],
        "code": found["primary"]["code"],
        **found,
        "in_paper_table2": version in PAPER_TABLE2,
    }


def audit_versions(versions: Sequence[str], *, download: bool, cache: Path | None = None, trust_new: bool = False,
                   log: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Audit the given releases from the wheel cache (downloading missing wheels if
    ``download``). ``trust_new``: record releases that have no stored sha256 yet, from a
    fresh download (the online refresh only; see :func:`~.wheels.fetch_wheel`)."""
    recs = []
    for v in versions:
        wheel = fetch_wheel(v, cache, trust_new=trust_new) if download else cached_wheel(v, cache)
        if wheel is None:
            raise AuditError(f"opacus {v} is not in the cache {wheel_cache_dir() if cache is None else cache}; "
                             f"fill it with: {REFRESH_COMMAND}")
        rec = audit_wheel(wheel, v, trust_new=trust_new)
        if log:
            log(f"opacus {v:7s} {rec['normalisation']:3s} {rec['mechanism']:13s} {rec['file']}:{rec['line']}  {rec['code']}")
        recs.append(rec)
    return recs


def build_table(records: Sequence[dict[str, Any]], *, confirmations: Sequence[dict[str, Any]] = (),
                source: str) -> dict[str, Any]:
    """The stored JSON document: releases (oldest first), confirmations, provenance."""
    import platform

    recs = sorted(records, key=lambda r: parse_version(r["version"]))
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
    """Write the table as JSON (indent 1, sorted keys, mode 0644) to ``path`` (default the
    stored table), atomically: a temporary file in the same folder, fsync'ed, then moved
    over ``path``, so a reader never sees a partial file. Returns the path written."""
    path = stored_table_path() if path is None else Path(path)
    text = json.dumps(dict(doc), indent=1, sort_keys=True) + "\n"  # TypeError before touching disk
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    load_table.cache_clear()  # the next load_table() reads what was just written
    return path


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
    missing = sorted(set(PAPER_TABLE2) - {r["version"] for r in records}, key=parse_version)
    out.extend({"version": v, "status": "not audited", "diffs": []} for v in missing)
    return out


def records_table(records: Sequence[dict[str, Any]], *, compare: bool = True) -> tuple[list[str], list[list[str]]]:
    """The audit as ``(header, rows)`` of text cells, one row per release (cells may hold ```code``` and
    ``**bold**``); with ``compare``, a last column against the paper's Table 2. The book shows them with
    :func:`paperlib.artifact.tables.show_table`; :func:`markdown_table` prints them."""
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
    return head, rows


def markdown_table(records: Sequence[dict[str, Any]], *, compare: bool = True) -> str:
    """The audit as a Markdown table, one row per release (pipes in cells escaped), for the command line."""
    head, rows = records_table(records, compare=compare)
    line = lambda cells: "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"  # noqa: E731
    return "\n".join([line(head), "|" + "---|" * len(head), *map(line, rows)])
