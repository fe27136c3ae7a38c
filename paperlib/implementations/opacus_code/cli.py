"""Command line of the Opacus code audit: ``python -m paperlib.implementations.opacus_code``.

Without options it prints the stored table (offline). ``--refresh`` (``make
opacus-table``) lists the releases on the package index, downloads the missing wheels,
re-audits every release, confirms by real steps and rewrites
``paperlib/resources/opacus_table2.json``; it is the one path that records the sha256 of
a release not in the stored table yet (from a fresh download). ``--from-cache`` re-audits
the cached wheels offline, each checked against its stored sha256.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from .rules import AuditError
from .stepcheck import confirm_release, step_check, summarise_confirmation
from .table import audit_versions, build_table, load_table, markdown_table, save_table
from .wheels import (FIRST_VERSION, PACKAGE, REFRESH_COMMAND, is_release, list_versions, parse_version,
                     wheel_cache_dir, wheel_version)

__all__ = ["main"]


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _kept_confirmations(path: Path | None, done: list, sha: dict, log) -> list:
    """The stored table's real-step confirmations of releases not confirmed again in this run,
    kept where the release's wheel is the same file (same sha256 in the old and the new audit):
    a rewrite with ``--confirm installed`` (the default) must not drop what ``--confirm all``
    established. A confirmation of a wheel that changed, or is no longer audited, is dropped
    and the log says so."""
    try:
        old = load_table(path)
    except (AuditError, ValueError):  # no stored table (a first build) or an unreadable one: nothing to keep
        return []
    old_sha = {r.get("version"): r.get("wheel_sha256") for r in old.get("releases", [])}
    redone = {c.get("opacus") for c in done}
    kept, dropped = [], []
    for c in old.get("confirmations", []):
        v = c.get("opacus")
        if v in redone:
            continue
        if v in sha and old_sha.get(v) and old_sha.get(v) == sha[v]:
            kept.append({**c, "kept_from": old.get("generated_utc")})
        else:
            dropped.append(str(v))
    if kept or dropped:
        log(f"kept {len(kept)} stored real-step confirmation(s) of unchanged wheels"
            + (f"; dropped {len(dropped)} whose wheel changed or is no longer audited: {', '.join(dropped)}"
               if dropped else ""))
    return kept


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status (0, or 1 after a one-line ``paperlib: error: ...``)."""
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
                # new releases (no stored sha256) are recorded from a fresh download
                recs = audit_versions(versions, download=True, trust_new=True, log=log)
                source = "pip download --no-deps --only-binary=:all: opacus==VERSION (package index)"
            else:
                cache = wheel_cache_dir()
                versions = sorted({v for w in cache.glob(f"{PACKAGE}-*.whl") if (v := wheel_version(w))
                                   and is_release(v) and parse_version(v) >= parse_version(FIRST_VERSION)},
                                  key=parse_version)
                if not versions:
                    raise AuditError(f"no wheels in {cache}; run: {REFRESH_COMMAND}")
                recs = audit_versions(versions, download=False, log=log)
                source = f"wheel cache {cache} (offline re-audit)"
            confirmations = []
            sha = {r["version"]: r["wheel_sha256"] for r in recs}  # verified or just recorded
            if args.confirm != "none":
                import opacus

                installed = opacus.__version__
                c = step_check(seed=args.seed)
                confirmations.append(summarise_confirmation(c, "in-process, installed opacus"))
                log(f"real step, installed opacus {installed}: divides by {c['verdict']} -> {c['mechanism']}")
                if args.confirm == "all":
                    for v in versions:
                        if v == installed:
                            continue
                        c = confirm_release(v, seed=args.seed, sha256=sha[v])
                        confirmations.append(summarise_confirmation(
                            c, f"subprocess, pip install --no-deps --target <cache>/opacus-{v}"))
                        log(f"real step, opacus {v}: {c['verdict']} -> {c['mechanism']}"
                            + (f" ({c.get('error')})" if c.get("error") else ""))
            confirmations += _kept_confirmations(args.output, confirmations, sha, log)
            doc = build_table(recs, confirmations=confirmations, source=source)
            path = save_table(doc, args.output)
            log(f"wrote {path} ({len(recs)} releases)")
        else:
            doc = load_table(args.output)
    except AuditError as exc:
        print(f"paperlib: error: {_first_line(exc)}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(markdown_table(doc["releases"]))
    return 0
