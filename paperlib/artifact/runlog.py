"""Measured time and disk use of each run, for the artifact appendix.

``make`` calls this module after each notebook it executes, after the book build, and
at the end of ``make all``; :mod:`paperlib.artifact.appendix` reads the records back. Records
are small JSON files in ``results/runs/`` (``$PAPERLIB_RESULTS/runs``), written
atomically:

``notebook-<name>-<mode>.json``
    one executed notebook: wall time (s), mode, device, seed, commit, and the bytes it
    wrote under ``results/``, ``figures/``, ``data/`` and ``.cache/`` (files modified
    during the run).
``book.json``
    the last ``jupyter-book build``: wall time.
``test.json``
    the last ``make test`` that passed: wall time from the start of ``make`` (lint, the smoke-mode test book,
    pytest, nbval and the browser test), and the tests' summary line.

A notebook's record also holds its peak memory: ``measure`` runs papermill and samples, once a second, the
memory of papermill and every process under it (the kernel, its Dask workers, the old Opacus releases'
subprocesses): their proportional set sizes summed, so that a library shared by the processes counts once.
The record keeps the largest sum.
``tier-<mode>.json``
    the last ``make all`` in that mode: wall time from the start of ``make`` to the end
    of the book, how many notebooks it executed (a *cold* run executes all of them; a
    warm one re-uses executed notebooks), and the disk use of the environment, data,
    caches and outputs. The last cold run is kept beside the last run.

Command line (used by the Makefile)::

    python -m paperlib.artifact.runlog measure --out build/peak/NAME.json -- papermill ...   # peak memory
    python -m paperlib.artifact.runlog notebook NAME --mode M --device D --seed S --start T0 --wall W \
        [--peak-file build/peak/NAME.json]
    python -m paperlib.artifact.runlog test --wall W
    python -m paperlib.artifact.runlog book --mode M --wall W
    python -m paperlib.artifact.runlog tier --mode M --device D --start T0 --notebooks K
    python -m paperlib.artifact.runlog failed build/failed/NAME.ipynb   # which cell failed, and why
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from paperlib.artifact.provenance import git_commit, results_dir, write_json_atomic

__all__ = ["hardware", "hardware_text", "runs_dir", "bytes_written_since", "disk_usage", "record_notebook", "record_book", "record_tier",
           "record_test", "measure_peak_memory",
           "load_runs", "failed_cell", "main"]

#: Folders whose new files count as a notebook's disk use (relative to the working directory).
WRITE_ROOTS = ("results", "figures", "data", ".cache")
#: Folders reported in a tier's disk use.
DISK_ROOTS = (".venv", "data", ".cache", "results", "figures", "book/_build", "book/notebooks", "build")


def runs_dir() -> Path:
    """``<results>/runs`` (see :func:`paperlib.artifact.provenance.results_dir`)."""
    return results_dir() / "runs"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _tree_bytes(root: Path, since_ns: int | None = None) -> int:
    total = 0
    if not root.exists():
        return 0
    for dirpath, _, names in os.walk(root, followlinks=False):
        for n in names:
            try:
                st = os.lstat(os.path.join(dirpath, n))
            except OSError:  # removed while walking
                continue
            if since_ns is None or st.st_mtime_ns >= since_ns:
                total += st.st_size
    return total


def bytes_written_since(start_s: float, roots=WRITE_ROOTS) -> int:
    """Total size in bytes of the files under ``roots`` modified at or after ``start_s`` (epoch seconds)."""
    since = int(start_s * 1e9)
    roots = [results_dir() if r == "results" else Path(r) for r in roots]
    return sum(_tree_bytes(Path(r), since) for r in dict.fromkeys(roots))


def disk_usage(roots=DISK_ROOTS) -> dict:
    """``{folder: bytes}`` for each of ``roots`` that exists (apparent file sizes, links not followed)."""
    return {str(r): _tree_bytes(Path(r)) for r in roots if Path(r).exists()}


def hardware() -> dict:
    """The machine a time was measured on: ``{"cpu", "cores", "ram_gib", "gpu"}``.

    CPU model and memory from ``/proc`` (Linux; ``platform`` elsewhere), cores usable by this
    process (``os.sched_getaffinity`` where it exists), GPUs from ``nvidia-smi -L`` ("none" when
    there is no such command or it lists none). Never imports torch.
    """
    import platform
    import shutil
    import subprocess

    cpu = platform.processor() or platform.machine() or "unknown"
    ram = None
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                ram = round(int(line.split()[1]) / 2**20, 1)
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpu = "none"
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
            gpus = [ln.split(":", 1)[1].split("(")[0].strip() for ln in out.splitlines() if ln.startswith("GPU ")]
            gpu = ", ".join(gpus) or "none"
        except (OSError, subprocess.SubprocessError):
            pass
    return {"cpu": cpu, "cores": cores, "ram_gib": ram, "gpu": gpu}


def hardware_text(hw: dict | None) -> str:
    """``"2 cores of Intel(R) Xeon(R) ..., 23.4 GiB RAM, no GPU"`` (``"hardware not recorded"`` for None)."""
    if not hw:
        return "hardware not recorded"
    gpu = hw.get("gpu") or "none"
    return (f"{hw.get('cores', '?')} cores of {hw.get('cpu', '?')}, {hw.get('ram_gib', '?')} GiB RAM, "
            + ("no GPU" if gpu == "none" else f"GPU {gpu}"))


def _base(mode: str) -> dict:
    commit, dirty = git_commit()
    return {"mode": mode, "finished_utc": _now(), "git_commit": commit, "git_dirty": dirty, "hardware": hardware()}


def record_notebook(name: str, *, mode: str, device: str, seed: int, start_s: float, wall_s: float,
                    peak_memory_bytes: int | None = None) -> Path:
    """Record one executed notebook (see the module docstring); returns the file written. ``peak_memory_bytes``:
    the peak memory :func:`measure_peak_memory` measured for the run (None: not measured)."""
    rec = {**_base(mode), "kind": "notebook", "name": name, "device": device, "seed": int(seed),
           "wall_s": round(float(wall_s), 1), "bytes_written": bytes_written_since(start_s),
           "peak_memory_bytes": None if peak_memory_bytes is None else int(peak_memory_bytes)}
    return write_json_atomic(runs_dir() / f"notebook-{name}-{mode}.json", rec)


def short_summary(summary) -> str:
    """pytest's summary line without its clock form: "2496 passed in 381.75s (0:06:21)" -> "... in 381.75s"
    (the seconds once; the wall time is recorded apart)."""
    return re.sub(r"\s*\(\d+:\d\d:\d\d\)\s*$", "", str(summary or "").strip())


def record_test(*, wall_s: float, summary: str = "") -> Path:
    """Record the ``make test`` that just passed: its wall time (s) and pytest's summary line."""
    rec = {**_base("smoke"), "kind": "test", "wall_s": round(float(wall_s), 1), "summary": short_summary(summary)}
    return write_json_atomic(runs_dir() / "test.json", rec)


def _tree_memory(proc) -> int:
    """Memory (bytes) of *proc* and every process under it: the proportional set size where the system gives it
    (Linux: a page shared by k processes counts 1/k in each, so the sum is what the tree occupies), else the
    resident set size (which counts shared pages once per process). Processes that end meanwhile count 0."""
    import psutil  # a dependency of Dask's distributed, which the lock pins

    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            try:
                total += p.memory_full_info().pss
            except (AttributeError, psutil.AccessDenied):
                total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def measure_peak_memory(cmd: list[str], out: str | os.PathLike, interval_s: float = 1.0) -> int:
    """Run *cmd*, sample the memory of it and its descendants (:func:`_tree_memory`) every *interval_s* seconds
    (reading a process's proportional set size takes about 10 ms once torch is loaded: once a second costs about
    1 % of a core), write
    ``{"peak_memory_bytes": peak, "interval_s": ...}`` to *out* (atomically), and return the command's exit
    status. A peak shorter than the interval can be missed, so the value is a lower bound of the true peak.

    Raises
    ------
    ValueError
        If *cmd* is empty or *interval_s* is not positive.
    """
    import psutil

    if not cmd:
        raise ValueError("cmd: give the command to run after --")
    if not interval_s > 0:
        raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
    child = subprocess.Popen(cmd)
    ps = psutil.Process(child.pid)
    peak = 0
    while True:
        try:
            rc = child.wait(timeout=interval_s)
            break
        except subprocess.TimeoutExpired:
            peak = max(peak, _tree_memory(ps))
        except KeyboardInterrupt:  # the terminal's Ctrl-C reached the child too: wait for it, then stop
            child.wait()
            raise
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(out), {"peak_memory_bytes": int(peak), "interval_s": interval_s})
    return rc


def record_book(*, mode: str, wall_s: float) -> Path:
    """Record the last book build."""
    rec = {**_base(mode), "kind": "book", "wall_s": round(float(wall_s), 1)}
    return write_json_atomic(runs_dir() / "book.json", rec)


def record_tier(*, mode: str, device: str, start_s: float, notebooks: int) -> Path:
    """Record the ``make all`` that started at ``start_s`` (epoch seconds) and ends now.

    ``notebooks`` is how many notebooks the project has; the record counts how many of
    them this run executed (their notebook records finished after ``start_s``).
    """
    executed = []
    for rec in load_runs("notebook"):
        try:
            t = _dt.datetime.strptime(rec["finished_utc"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.timezone.utc)
        except (KeyError, ValueError):
            continue
        if rec.get("mode") == mode and t.timestamp() >= int(start_s):
            executed.append(rec["name"])
    run = {**_base(mode), "kind": "tier", "device": device, "wall_s": round(time.time() - start_s, 1),
           "notebooks_total": int(notebooks), "notebooks_executed": sorted(executed),
           "cold": len(executed) >= int(notebooks), "disk_bytes": disk_usage()}
    path = runs_dir() / f"tier-{mode}.json"
    old = {}
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            old = {}
    doc = {"last": run, "last_cold": run if run["cold"] else old.get("last_cold")}
    return write_json_atomic(path, doc)


def load_runs(kind: str | None = None) -> list[dict]:
    """Every record in :func:`runs_dir` (of ``kind``: ``notebook``, ``book`` or ``tier``), by file name."""
    d = runs_dir()
    out = []
    if not d.is_dir():
        return out
    for p in sorted(d.glob("*.json")):
        try:
            rec = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        k = rec.get("kind") or ("tier" if "last" in rec else None)
        if kind is None or k == kind:
            out.append(rec)
    return out


def failed_cell(path: str | os.PathLike) -> str | None:
    """One line naming the first cell of a (partially) executed notebook that raised an error.

    ``"cell 7 (In [5]): <first source line> -> ValueError: <message>"``, or ``None``
    when no cell has an error output. Cells are counted from 1 in file order.
    """
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    for k, cell in enumerate(nb.get("cells", []), start=1):
        for out in cell.get("outputs", []) or []:
            if out.get("output_type") == "error":
                src = cell.get("source", "")
                src = "".join(src) if isinstance(src, list) else src
                first = next((ln.strip() for ln in src.splitlines() if ln.strip() and not ln.startswith("#")), "")
                ec = cell.get("execution_count")
                where = f"cell {k}" + (f" (In [{ec}])" if ec is not None else "")
                return f"{where}: {first[:80]} -> {out.get('ename', 'Error')}: {str(out.get('evalue', ''))[:200]}"
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paperlib.artifact.runlog", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    nb = sub.add_parser("notebook")
    nb.add_argument("name")
    bk = sub.add_parser("book")
    tr = sub.add_parser("tier")
    for p in (nb, bk, tr):
        p.add_argument("--mode", required=True, choices=("smoke", "quick", "full"))
    for p in (nb, tr):
        p.add_argument("--device", required=True)
        p.add_argument("--start", type=float, required=True, help="start time, seconds since the epoch")
    for p in (nb, bk):
        p.add_argument("--wall", type=float, required=True, help="wall time in seconds")
    nb.add_argument("--seed", type=int, required=True)
    nb.add_argument("--peak-file", help="the JSON file `measure` wrote for this run (its peak memory)")
    ts = sub.add_parser("test", help="record a make test that passed")
    ts.add_argument("--wall", type=float, required=True, help="wall time in seconds")
    ts.add_argument("--summary", default="", help="pytest's summary line")
    ms = sub.add_parser("measure", help="run a command and record its peak memory (with its descendants)")
    ms.add_argument("--out", required=True)
    ms.add_argument("command", nargs=argparse.REMAINDER, help="-- the command")
    tr.add_argument("--notebooks", type=int, required=True, help="number of notebooks in the project")
    fl = sub.add_parser("failed", help="print the cell that failed in a partially executed notebook")
    fl.add_argument("path")
    a = ap.parse_args(argv)
    if a.cmd == "failed":
        try:
            line = failed_cell(a.path)
        except (OSError, ValueError) as exc:
            line = f"(could not read {a.path}: {exc})"
        print(line or "(no cell shows an error; see the papermill output above)")
        return 0
    if a.cmd == "measure":
        cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
        try:
            return measure_peak_memory(cmd, a.out)
        except ValueError as exc:
            print(f"runlog measure: {exc}", file=sys.stderr)
            return 2
    if a.cmd == "test":
        record_test(wall_s=a.wall, summary=a.summary)
        return 0
    if a.cmd == "notebook":
        peak = None
        if a.peak_file:
            try:
                peak = json.loads(Path(a.peak_file).read_text(encoding="utf-8")).get("peak_memory_bytes")
            except (OSError, ValueError):
                peak = None  # not measured (the file is missing or unreadable): recorded as such
        record_notebook(a.name, mode=a.mode, device=a.device, seed=a.seed, start_s=a.start, wall_s=a.wall,
                        peak_memory_bytes=peak)
    elif a.cmd == "book":
        record_book(mode=a.mode, wall_s=a.wall)
    else:
        p = record_tier(mode=a.mode, device=a.device, start_s=a.start, notebooks=a.notebooks)
        last = json.loads(p.read_text(encoding="utf-8"))["last"]
        print(f"make all (MODE={a.mode}): {last['wall_s']:.0f} s, {len(last['notebooks_executed'])} of "
              f"{a.notebooks} notebooks executed; recorded in {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
