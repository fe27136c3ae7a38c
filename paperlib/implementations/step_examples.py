"""Real DP-SGD code behind the step protocol of :mod:`paperlib.implementations.step_audit`.

Each function here is one library's step, or a hand-written training loop, wrapped in the protocol: it trains
the probe model of :func:`~paperlib.implementations.step_audit.linear_probe` for one step with the library's
own code and returns the noisy gradient estimate it applied (and the batch where the code exposes it). They are
what :func:`~paperlib.implementations.step_audit.classify_step` is tested on, and examples of how to wrap
one's own code.

- :func:`opacus_step`: Opacus (the installed release), ``PrivacyEngine.make_private`` with Poisson sampling and
  ``loss_reduction='mean'``, an SGD optimiser at learning rate 1.
- :func:`loop_divide_by_batch`: a hand-written PyTorch loop that divides the noisy sum by the size of the batch
  it drew (``torch.func`` per-example gradients, a Poisson mask).
- :func:`loop_divide_by_constant`: the same loop dividing by a batch size fixed in its configuration
  (:data:`LOOP_BATCH_SIZE`) before it sees the data.
- :class:`OpacusDDPStep`: the installed Opacus under ``DifferentiallyPrivateDistributedDataParallel`` with two
  processes on the CPU (``gloo``), as multi-GPU training runs it: each rank samples its share of the data, rank 0
  adds the noise, each divides by ``int(N q) / world_size`` and the gradients are summed and divided by the world
  size. The two processes stay up across calls (a context manager closes them).
"""

from __future__ import annotations

from paperlib.fdp.validation import ParameterError, check_int
from paperlib.implementations.step_audit import linear_probe

__all__ = ["LOOP_BATCH_SIZE", "opacus_step", "loop_divide_by_batch", "loop_divide_by_constant", "OpacusDDPStep"]

#: the batch size the hand-written loop's configuration fixes in advance (a public constant)
LOOP_BATCH_SIZE = 4


def _rows_to_indices(x, batch) -> list[int]:
    """The record indices of a batch of probe inputs (the rows are distinct, so each is found exactly)."""
    import torch

    return sorted(int(torch.nonzero((x == row).all(dim=1))[0, 0]) for row in batch)


def opacus_step(gradients, *, sampling_rate, noise_multiplier, max_grad_norm, seed):
    """One step of the installed Opacus: ``make_private(poisson_sampling=True)`` on the probe, the loss the batch
    mean (``loss_reduction='mean'``, Opacus's default). Opacus sets its sampling rate to ``1 / len(loader)``, so
    the loader's batch size is ``round(sampling_rate * m)`` and the rate the step runs at is the one that gives
    (0.5 for the probe's defaults)."""
    import logging
    import warnings

    import torch
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    # Opacus warns about its non-cryptographic RNG and logs every empty Poisson batch: a probe of many steps
    # would print both at every call (and the warning names a file of this machine)
    opacus_log = logging.getLogger("opacus")
    level = opacus_log.level
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opacus_log.setLevel(logging.ERROR)
        try:
            model, x = linear_probe(gradients)
            weight = model.weight  # the same parameter inside Opacus's wrappers
            loader = DataLoader(TensorDataset(x), batch_size=max(1, round(sampling_rate * len(x))))
            torch.manual_seed(seed)
            optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
            model, optimizer, loader = PrivacyEngine(accountant="rdp").make_private(
                module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=noise_multiplier,
                max_grad_norm=max_grad_norm, poisson_sampling=True)
            (xb,) = next(iter(loader))
            optimizer.zero_grad()
            model(xb).mean().backward()  # as a training loop does, an empty batch too (Opacus handles its zero rows)
            optimizer.step()
        finally:
            opacus_log.setLevel(level)
    update = -weight.detach().reshape(-1)  # from zero at learning rate 1
    return update.double().numpy(), _rows_to_indices(x, xb)


def _loop(gradients, sampling_rate, noise_multiplier, max_grad_norm, seed, divisor):
    """A plain PyTorch DP-SGD step: Poisson mask, per-example gradients with ``torch.func``, clip, sum, noise,
    divide by ``divisor(batch_size)``."""
    import torch
    from torch.func import functional_call, grad, vmap

    model, x = linear_probe(gradients)
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(len(x), generator=g) < sampling_rate
    xb = x[mask]
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, xi):
        return functional_call(model, p, (xi.unsqueeze(0),)).sum()

    total = torch.zeros(x.shape[1])
    if len(xb):
        per = vmap(grad(loss), in_dims=(None, 0))(params, xb)["weight"].reshape(len(xb), -1)
        scale = torch.clamp(max_grad_norm / per.norm(dim=1).clamp_min(1e-12), max=1.0)
        total = (per * scale[:, None]).sum(0)
    noisy = total.double() + torch.normal(0.0, noise_multiplier * max_grad_norm, (x.shape[1],), generator=g,
                                          dtype=torch.float64)
    return (noisy / divisor(int(mask.sum()))).numpy(), torch.nonzero(mask).reshape(-1).tolist()


def loop_divide_by_batch(gradients, *, sampling_rate, noise_multiplier, max_grad_norm, seed):
    """The hand-written loop dividing by the size of the batch it drew (an empty batch divides by 1)."""
    return _loop(gradients, sampling_rate, noise_multiplier, max_grad_norm, seed, lambda b: max(b, 1))


def loop_divide_by_constant(gradients, *, sampling_rate, noise_multiplier, max_grad_norm, seed):
    """The hand-written loop dividing by :data:`LOOP_BATCH_SIZE`, fixed before it sees the data."""
    return _loop(gradients, sampling_rate, noise_multiplier, max_grad_norm, seed, lambda b: float(LOOP_BATCH_SIZE))


def _ddp_worker(rank: int, world_size: int, port: int, inbox, outbox) -> None:
    """One rank of :class:`OpacusDDPStep`: joins the gloo group, then runs one Opacus DDP step per message."""
    import logging
    import warnings

    # this process writes to the caller's stderr (a notebook shows it): no warning per step, no log per empty batch
    warnings.simplefilter("ignore")
    logging.getLogger("opacus").setLevel(logging.ERROR)
    import torch
    import torch.distributed as dist
    from opacus import PrivacyEngine
    from opacus.distributed import DifferentiallyPrivateDistributedDataParallel as DPDDP
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    try:
        while (msg := inbox.get()) is not None:
            gradients, q, sigma, C, seed = msg
            base, x = linear_probe(gradients)
            weight = base.weight
            torch.manual_seed(seed * world_size + rank)  # each rank its own draws; rank 0's noise
            model = DPDDP(base)
            loader = DataLoader(TensorDataset(x), batch_size=max(1, round(q * len(x))))
            optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
            model, optimizer, loader = PrivacyEngine(accountant="rdp").make_private(
                module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=sigma, max_grad_norm=C,
                poisson_sampling=True)
            (xb,) = next(iter(loader))
            optimizer.zero_grad()
            model(xb).mean().backward()
            optimizer.step()
            outbox.put((rank, (-weight.detach().reshape(-1)).double().numpy(), _rows_to_indices(x, xb)))
    finally:
        dist.destroy_process_group()


class OpacusDDPStep:
    """The installed Opacus under DistributedDataParallel, ``world_size`` processes on the CPU (module docstring);
    a step of the protocol. Use as a context manager (``with OpacusDDPStep() as step: ...``) or call ``close``."""

    def __init__(self, world_size: int = 2, timeout_s: float = 300.0):
        world_size = check_int(world_size, "world_size", 2)
        if world_size > 8:
            raise ParameterError("world_size", f"world_size must be an integer in [2, 8], got {world_size!r}")
        self.world_size, self.timeout_s, self._procs = world_size, float(timeout_s), []

    def _start(self) -> None:
        import socket

        import torch.multiprocessing as mp

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        ctx = mp.get_context("spawn")
        self._outbox = ctx.Queue()
        self._inboxes = [ctx.Queue() for _ in range(self.world_size)]
        self._procs = [ctx.Process(target=_ddp_worker, args=(r, self.world_size, port, self._inboxes[r],
                                                               self._outbox), daemon=True)
                       for r in range(self.world_size)]
        for p in self._procs:
            p.start()

    def __call__(self, gradients, *, sampling_rate, noise_multiplier, max_grad_norm, seed):
        import queue

        if not self._procs:
            self._start()
        for box in self._inboxes:
            box.put((gradients, sampling_rate, noise_multiplier, max_grad_norm, seed))
        got = {}
        try:
            while len(got) < self.world_size:
                rank, update, batch = self._outbox.get(timeout=self.timeout_s)
                got[rank] = (update, batch)
        except queue.Empty:
            self.close()
            raise RuntimeError(f"Opacus DDP step: no answer from rank(s) {sorted(set(range(self.world_size)) - set(got))} "
                               f"within {self.timeout_s:g} s") from None
        return got[0][0], sorted(i for _, b in got.values() for i in b)

    def close(self) -> None:
        for box in getattr(self, "_inboxes", []):
            box.put(None)
        for p in self._procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
        self._procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
