"""Real implementation steps in parallel: chunks of rounds on Dask workers, the same bits for any worker count.

An audit of real code (:mod:`paperlib.implementations.real_audit`) splits its
implementation steps into *chunks*: calls of :func:`paperlib.implementations.runners.run_steps`
whose size and seed are fixed by the audit alone (the seed of chunk ``k`` of dataset ``d`` is
derived from the audit's seed, ``d`` and ``k``), never by how many workers there are.
:func:`run_chunks` runs such a list of calls and yields their results in list order; each
call runs with one torch thread (:func:`one_thread`), so its floating-point sums are done in
one order and the results are **bitwise the same for any number of workers** and any
scheduler (``tests/implementations/test_parallel.py``).

Where the calls run (:func:`resolve_workers`, :func:`resolve_scheduler`):

* ``workers = 1`` (or a single chunk): in this process, one after another; Dask is not
  imported.
* ``workers = k > 1``, no scheduler: a ``dask.distributed.LocalCluster`` of ``k`` worker
  processes with one thread each, started on first use and kept for the process (closed at
  exit). The default ``k`` is ``$WORKERS`` when set, else the number of cores this process
  may use.
* a scheduler address (``scheduler=``, else ``$DASK_SCHEDULER``, else Dask's own
  configuration key ``scheduler-address``), e.g. ``tcp://host:8786``: the same calls go to
  that cluster (its workers must import this ``paperlib`` and torch; a Slurm cluster from
  ``dask_jobqueue.SLURMCluster`` is one, see README). ``workers`` is then ignored.

The old Opacus releases run in one subprocess per worker process that imports the release
once (:func:`paperlib.implementations.release_server.run_release`). At most ``2 x`` the number of
worker threads calls are in flight, so the memory held is bounded however many chunks an
audit has. Progress: ``bar.update(trials)`` after each chunk (a tqdm bar of rounds done
across the workers).

A chunk's ``chunk x n`` updates are large (83 MB for 400 steps of the 26,010-parameter CNN)
and what an audit keeps of them is small (their projection on the ``N + 1`` gradients, the
step check, a few rows). ``run_chunks(..., reduce=f, reduce_args=..., shared=...)`` therefore
applies ``f`` where the chunk ran, so only its result travels back; ``shared`` (large
read-only inputs such as the gradients and the basis) is sent to each worker once
(``Client.scatter(broadcast=True)``), not with every chunk. A reduction may also ask the steps to
be reduced as they are taken (``run_chunks(..., step_options=g)``, :func:`run_reduced`): the real audits' Opacus
steps are projected in the loop of steps (:class:`paperlib.implementations.opacus_step.StepProjection`),
so the whole updates never leave it. Worker processes of the local
cluster keep freed memory instead of trimming it back to the system after every call
(``MALLOC_TRIM_THRESHOLD_``, which distributed sets to 64 KiB, and ``MALLOC_MMAP_THRESHOLD_``:
each chunk's arrays would be returned and faulted in again).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from collections import deque
from typing import Iterable, Iterator

__all__ = ["WORKERS_ENV", "SCHEDULER_ENV", "default_workers", "resolve_workers", "resolve_scheduler",
           "one_thread", "run_chunk", "run_reduced", "run_chunks", "warm", "close_cluster"]

WORKERS_ENV = "WORKERS"
SCHEDULER_ENV = "DASK_SCHEDULER"
#: calls in flight per worker thread (enough to keep each busy while results come back)
IN_FLIGHT_PER_THREAD = 2
#: a local cluster starts one process per worker: at most this many times the cores this process may use
MAX_WORKERS_PER_CORE = 4
#: seconds to wait for an external scheduler before refusing its address
CONNECT_TIMEOUT = 10

_LOCAL: dict = {}  # {"workers": k, "cluster": LocalCluster, "client": Client}
_CLIENTS: dict = {}  # scheduler address -> Client


def default_workers() -> int:
    """The cores this process may use (``os.sched_getaffinity``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def resolve_workers(workers: int | None = None) -> int:
    """``workers`` if given, else ``$WORKERS``, else :func:`default_workers`; an integer from 1 to
    :data:`MAX_WORKERS_PER_CORE` times the cores this process may use (a local cluster starts one process per
    worker); ParameterError naming ``workers`` or ``WORKERS`` otherwise."""
    from paperlib.fdp.validation import ParameterError, check_int

    if workers is not None:
        name, value = "workers", check_int(workers, "workers", 1)
    else:
        env = os.environ.get(WORKERS_ENV, "").strip()
        if not env:
            return default_workers()
        try:
            value = int(env)
        except ValueError:
            raise ParameterError(WORKERS_ENV, f"{WORKERS_ENV} must be an integer >= 1, not {env!r}") from None
        name, value = WORKERS_ENV, check_int(value, WORKERS_ENV, 1)
    limit = MAX_WORKERS_PER_CORE * default_workers()
    if value > limit:
        raise ParameterError(name, f"{name} = {value:,} is more than {MAX_WORKERS_PER_CORE} times the "
                                   f"{default_workers()} cores this process may use (at most {limit}): a local "
                                   "cluster starts one process per worker")
    return value


def resolve_scheduler(scheduler: str | None = None, *, dask_config: bool = True) -> str | None:
    """The Dask scheduler address to use, or ``None`` for a local cluster: ``scheduler`` if
    given, else ``$DASK_SCHEDULER``, else (``dask_config``, and only when dask is installed)
    Dask's configuration key ``scheduler-address``. An address must look like
    ``<protocol>://<host>[:port]`` (ValueError naming ``scheduler`` otherwise)."""
    addr = scheduler if scheduler is not None else (os.environ.get(SCHEDULER_ENV, "").strip() or None)
    if addr is None and dask_config:
        try:
            import dask
        except ImportError:
            return None
        addr = dask.config.get("scheduler-address", None) or None
    if addr is None:
        return None
    if not isinstance(addr, str) or "://" not in addr or not addr.split("://", 1)[1]:
        raise ValueError(f"scheduler ({SCHEDULER_ENV}) must be a Dask scheduler address such as "
                         f"tcp://host:8786, not {addr!r}")
    return addr


@contextlib.contextmanager
def one_thread():
    """torch (and its OpenMP/MKL pools) on one thread inside, restored after: one order of
    floating-point sums, so a chunk gives the same bits in every process."""
    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


def run_chunk(call: dict) -> dict:
    """One chunk: ``runners.run_steps(**call)`` on one thread (runs in a worker or in process)."""
    from paperlib.implementations import runners

    with one_thread():
        return runners.run_steps(**call)


def run_reduced(call: dict, reduce, args, shared, step_options=None) -> dict:
    """One chunk and its reduction, ``reduce(runners.run_steps(**call), args, shared)``, on one
    thread (runs in a worker or in process; ``reduce`` must be a module-level function). A
    reduction that needs less than the whole updates comes with ``step_options(args, shared) ->
    dict``, a module-level function giving extra ``run_steps`` keywords (such as ``project``: the
    updates reduced at each step, where it runs), merged into the call here, where ``shared`` has
    arrived."""
    from paperlib.implementations import runners

    extra = step_options(args, shared) if step_options is not None else {}
    with one_thread():
        return reduce(runners.run_steps(**call, **extra), args, shared)


def quiet_distributed_logs() -> None:
    """Distributed's loggers in this process at WARNING at least: its INFO lines ("Scheduler at:
    tcp://127.0.0.1:...", "dashboard at", "Start Nanny at", "Receive client connection: Client-...")
    are not for a reader, and where the root logger has an INFO handler (a Jupyter kernel, a library
    that called ``logging.basicConfig``) they propagate to it and land in a notebook's stderr.
    ``LocalCluster(silence_logs=...)`` silences only distributed's own handler, not that propagation."""
    import logging

    names = ["distributed"] + [n for n in list(logging.root.manager.loggerDict) if n.startswith("distributed.")]
    for name in names:
        lg = logging.getLogger(name)
        if lg.level < logging.WARNING:  # NOTSET (0) inherits from "distributed", set here
            lg.setLevel(logging.WARNING)


def _local_client(workers: int):
    if _LOCAL.get("workers") == workers and _LOCAL["client"].status == "running":
        return _LOCAL["client"]
    close_cluster()
    import logging

    import dask
    from dask.distributed import Client, LocalCluster

    # one thread per worker process; the HTTP server on a free port (":0"; the default 8787 may be taken by
    # another cluster, and distributed then warns on stderr); a fresh scratch folder per cluster (a stale
    # lock left by an earlier one makes distributed log its purge into the notebook's output); worker logs
    # only at CRITICAL: a step that raises (a planted wheel) is re-raised here, in one line, not logged twice
    scratch = tempfile.mkdtemp(prefix="paperlib-dask-")
    logging.getLogger("distributed.diskutils").setLevel(logging.ERROR)  # the scheduler's purge of others' stale locks
    quiet_distributed_logs()
    # glibc's malloc in the workers: distributed sets MALLOC_TRIM_THRESHOLD_ = 64 KiB, which hands freed
    # memory back to the system and (being set) freezes the mmap threshold at 128 KiB, so every larger
    # array of a step is a fresh mmap, faulted in page by page; keep freed memory, mmap only above 32 MiB
    # (temporary-directory: the scheduler's workspace too, not /tmp/dask-scratch-space)
    with dask.config.set({"temporary-directory": scratch,
                          "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": 1 << 30,
                          "distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": 32 << 20}):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                               silence_logs=logging.CRITICAL, local_directory=scratch)
    client = Client(cluster, set_as_default=False)
    _LOCAL.update(workers=workers, cluster=cluster, client=client, scratch=scratch)
    if not _LOCAL.get("atexit"):
        atexit.register(close_cluster)
        _LOCAL["atexit"] = True
    return client


def _remote_client(address: str):
    client = _CLIENTS.get(address)
    if client is None or client.status != "running":
        from dask.distributed import Client

        from paperlib.fdp.validation import ParameterError

        try:
            client = Client(address, set_as_default=False, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as exc:  # nothing listens there, or it is not a Dask scheduler
            raise ParameterError(SCHEDULER_ENV, f"{SCHEDULER_ENV}: no Dask scheduler answered at {address} within "
                                                f"{CONNECT_TIMEOUT} s ({type(exc).__name__}); start one there or "
                                                "unset it for a local cluster") from None
        _CLIENTS[address] = client
    return client


def warm(call: dict, *, workers: int | None = None, scheduler: str | None = None, reduce=None, reduce_arg=None,
         shared=None, step_options=None) -> int:
    """Run ``call`` once on every worker (in process for one worker), so each has imported
    torch, Opacus and any old release (and, with ``reduce``, its reduction with ``reduce_arg``
    and ``shared`` has run once: the
    process's memory has grown to a chunk's working set) before steps are timed; returns the
    number of workers warmed (benchmarks and ``bench/device_check.py``)."""
    address = resolve_scheduler(scheduler, dask_config=False)
    w = resolve_workers(workers)
    fn, args = ((run_chunk, (call,)) if reduce is None else
                (run_reduced, (call, reduce, reduce_arg, shared, step_options)))
    if address is None and w == 1:
        fn(*args)
        return 1
    address = address or resolve_scheduler(None)
    client = _remote_client(address) if address is not None else _local_client(w)
    return len(client.run(fn, *args))


def close_cluster() -> None:
    """Close the local cluster this process started (if any); clients of external schedulers stay."""
    client, cluster = _LOCAL.pop("client", None), _LOCAL.pop("cluster", None)
    _LOCAL.pop("workers", None)
    for obj in (client, cluster):
        if obj is not None:
            with contextlib.suppress(Exception):  # already closed at interpreter exit
                obj.close()
    scratch = _LOCAL.pop("scratch", None)
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)


def run_chunks(calls: Iterable[dict], *, workers: int | None = None, scheduler: str | None = None,
               bar=None, reduce=None, reduce_args=None, shared=None, step_options=None) -> Iterator[dict]:
    """Run each ``call`` (keyword arguments of :func:`runners.run_steps`) and yield the results in order.

    ``workers``/``scheduler``: where they run (module docstring; resolved by
    :func:`resolve_workers` and :func:`resolve_scheduler`). ``bar``: anything with
    ``update(n)`` (a tqdm bar), advanced by each call's ``trials``. ``reduce``: a module-level
    function ``reduce(result, reduce_args[i], shared) -> dict`` applied to call ``i``'s result
    where it ran (:func:`run_reduced`), so only what it returns comes back; ``reduce_args`` (one
    small picklable object per call) and ``shared`` (one read-only object, sent to each worker
    once) go with it; ``step_options`` (:func:`run_reduced`) asks the steps themselves for less than the
    whole updates. An exception of a call (``ValueError``, ``ReleaseNotAvailable``, ...) is
    raised here, the calls still queued are cancelled. The results do not depend on
    ``workers`` or ``scheduler``: each call (and its reduction) runs on one thread, with the seed
    its dict gives.
    """
    calls = list(calls)
    if reduce is not None:
        reduce_args = list(reduce_args) if reduce_args is not None else [None] * len(calls)
        if len(reduce_args) != len(calls):
            raise ValueError(f"reduce_args must hold one entry per call ({len(calls)}), got {len(reduce_args)}")
    address = resolve_scheduler(scheduler, dask_config=False)
    w = resolve_workers(workers)
    if address is None and (w == 1 or len(calls) <= 1):
        for i, call in enumerate(calls):  # in process: no Dask
            out = (run_chunk(call) if reduce is None else
                   run_reduced(call, reduce, reduce_args[i], shared, step_options))
            if bar is not None:
                bar.update(int(call["trials"]))
            yield out
        return
    if address is None:
        address = resolve_scheduler(None)  # Dask's own configuration, now that Dask is needed
    client = _remote_client(address) if address is not None else _local_client(w)
    threads = max(1, sum(client.nthreads().values()))
    window = IN_FLIGHT_PER_THREAD * threads
    pending: deque = deque()
    shared_f = None
    if reduce is not None and shared is not None:
        # hash=False: a fresh key per audit, never another audit's data under an equal-looking key
        [shared_f] = client.scatter([shared], broadcast=True, hash=False)

    def take() -> dict:
        done, fut = pending.popleft()
        out = fut.result()
        if bar is not None:
            bar.update(int(done["trials"]))
        return out

    try:
        for i, call in enumerate(calls):
            # pure=False: equal calls are run again, never shared (each holds its own seed anyway)
            fut = (client.submit(run_chunk, call, pure=False) if reduce is None else
                   client.submit(run_reduced, call, reduce, reduce_args[i], shared_f, step_options, pure=False))
            pending.append((call, fut))
            if len(pending) >= window:
                yield take()
        while pending:
            yield take()
    finally:
        if pending:
            client.cancel([f for _, f in pending])
        if shared_f is not None:
            with contextlib.suppress(Exception):
                shared_f.release()
