"""dp-transformers 1.0.0's trainer behind the step protocol of :mod:`paperlib.implementations.step_audit`.

dp-transformers (Microsoft) wraps Hugging Face's ``Trainer`` for DP training with Opacus: ``OpacusDPTrainer``
clips per-example gradients with Opacus's ``GradSampleModule``, builds Opacus's ``DPOptimizer`` with
``expected_batch_size = per_device_train_batch_size * gradient_accumulation_steps`` (a configured constant), and
takes its batches from its own ``ShuffledAuthorSampler`` (a shuffle of the records cut into batches of that
size, the last incomplete one dropped). Its accountants (Opacus's RDP and the PRV accountant) are given the
sampling rate ``batch size / N`` as a Poisson rate.

Its wheel requires ``torch>=1.9.1,<=1.12.1``; no such torch has a wheel for CPython 3.11, so it cannot be
installed beside the locked environment by its own requirements. It is installed here with ``--no-deps`` from
the hash-pinned wheels of :data:`PINS` (transformers 4.26.1, datasets 2.10.1 and the parts of their
dependencies the locked environment does not hold) into its own folder, ``<cache root>/dp-transformers-1.0.0``
(:mod:`paperlib.implementations.pinned`), and runs beside the locked torch and Opacus 1.6.0 in a subprocess:
outside its declared torch range, which the chapter says.

:func:`dp_transformers_step` runs the trainer itself for one optimisation step (``max_steps=1``, SGD at learning
rate 1, no momentum or decay, a constant schedule) on the probe's linear model, with
``per_device_train_batch_size = round(sampling_rate * m)`` (its sampling rate is then that over ``m``, as the
trainer computes it). One change to its construction: the trainer builds its PRV accountant from the noise
multiplier, and prv-accountant 0.1.0 cannot discretise the probe's 0.02 (``RuntimeError: Discrete mean differs
from continuous mean significantly``); it is built at 1.0 and the optimiser, created when training starts, gets
the probe's noise multiplier. The accountants do not touch the update.

``sampler="poisson"`` runs the same trainer with the library's own ``PoissonAuthorSampler`` (at the trainer's
sampling rate) returned by ``_get_train_sampler`` in place of its shuffling sampler: what a user of the library
can change to draw batches as its accountants assume.
"""

from __future__ import annotations

from pathlib import Path

from paperlib.implementations.pinned import LibraryUnavailable, classify_in_subprocess, ensure_pinned, pinned_dir
from paperlib.implementations.step_audit import StepAudit, probe_options

__all__ = ["VERSION", "PINS", "DpTransformersUnavailable", "install_dir", "ensure_installed", "dp_transformers_step",
           "classify_dp_transformers"]

VERSION = "1.0.0"
#: (distribution, version, sha256 of its CPython 3.11 Linux x86-64 wheel), installed with ``--no-deps``
PINS = (
    ("dp-transformers", "1.0.0", "716dff8787cdeb55d0fb2da72a07acc946e151b4a7c772e3c0b70b8feef3542e"),
    ("transformers", "4.26.1", "dae2fa15290c1f526e1b629b0e235eea5e4c04078fcaf1f197a70d51b4f65df2"),
    ("tokenizers", "0.13.3", "9ba2b0bf01777c9b9bc94b53764d6684554ce98551fec496f71bc5be3a03e98b"),
    ("huggingface-hub", "0.12.1", "867586cc8543fe1bd43a219fedbea7d71690021ad80f0c46f35c4751069278d7"),
    ("regex", "2026.12.2", "cc27b9346a90c33d2020cc104409a47e16d83e592f38dd047e59732d1f765910"),
    ("datasets", "2.10.1", "bfde7253b31abfd075f9ad55961b13c135a5a9295cea04ae86c47b9c0e0466fd"),
    # datasets 2.10 subclasses pyarrow.PyExtensionType, which pyarrow 21 removed; 17.0 has it and NumPy 2 wheels
    ("pyarrow", "17.0.0", "e3343cb1e88bc2ea605986d4b94948716edc7a8d14afd4e2c097232f729758b4"),
    ("pandas", "3.1.1", "4f1602f614bb83f443381dbcbb94c4ac764b2e50c8d6c965614c5cd83e328c47"),
    ("python-dateutil", "4.0.0", "a5e246f79eb80475e691bf93862cead98decd8a498cf53ba0516fcdc0f50dc1c"),
    ("pytz", "2026.6", "7fed3fee8fd6bd4a2b7b75a8d56021d0624127bf69bd5691f115db929ac570b3"),
    ("tzdata", "2026.6", "0a10eec6e13ef16b627fabed9a5f2ba61a62b1c67f327305f4e7e412a70b4aec"),
    ("six", "1.17.0", "4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274"),
    ("dill", "0.4.1", "1e1ce33e978ae97fcfcff5638477032b801c46c7c65cf717f95fbc2248f79a9d"),
    ("multiprocess", "0.70.19", "928851ae7973aea4ce0eaf330bbdafb2e01398a91518d5c8818802845564f45c"),
    ("xxhash", "4.1.0", "5e713f5db9e1a8aafac59a45cc1ffce11ca507730f5dc12e212ea7b73d9debde"),
    ("aiohttp", "3.14.5", "50a195903119008fe9cc68710535eb37f556ffffd6a7759afe70a2c145587045"),
    ("aiohappyeyeballs", "2.7.1", "9243213661e29250eb41368e5daa826fc017156c3b8a11440826b2e3ed376472"),
    ("aiosignal", "1.4.0", "053243f8b92b990551949e63930a839ff0cf0b0ebbe0597b0f3fb19e1a0fe82e"),
    ("attrs", "26.1.0", "c647aa4a12dfbad9333ca4e71fe62ddc36f4e63b2d260a37a8b83d2f043ac309"),
    ("frozenlist", "1.8.0", "2552f44204b744fba866e573be4c1f9048d6a324dfe14475103fd51613eb1d1f"),
    ("multidict", "7.2.1", "3b7542fad2706595c1b1853b46f2c3c4ae5cc5a6252b7225f294d607a29e1bdf"),
    ("propcache", "0.5.4", "6e9368e87a3efc285e559131092c5db643eb8e56de4ee42064d5baec22ef2bb5"),
    ("yarl", "1.25.1", "d5add7b4ca7afeea91d52e4d4e4db3b1fe9885b71f07054560d8c4296b7441a2"),
    ("prv-accountant", "0.1.0", "548ece45c5d2359a8ff0c4484dfd9a5ebc690a33ec21a47e7eb935ac7dee2ebb"),
)
_LABEL = f"dp-transformers-{VERSION}"
#: the noise multiplier the trainer's PRV accountant is built at (the module docstring says why)
ACCOUNTANT_NOISE_MULTIPLIER = 1.0


class DpTransformersUnavailable(LibraryUnavailable):
    """dp-transformers cannot be installed or run here (another platform, no network and no installed copy)."""


def install_dir() -> Path:
    """The folder dp-transformers is installed into: ``<cache root>/dp-transformers-1.0.0``."""
    return pinned_dir(_LABEL)


def ensure_installed(download: bool = True) -> Path:
    """The install folder, installing the pinned wheels first when it is missing or holds other pins.

    Raises
    ------
    DpTransformersUnavailable
        As :func:`~paperlib.implementations.pinned.ensure_pinned`: another platform, no copy and no download, pip
        failing.
    """
    return ensure_pinned(_LABEL, f"dp-transformers {VERSION}", PINS, download=download,
                         error=DpTransformersUnavailable)


def dp_transformers_step(gradients, *, sampling_rate, noise_multiplier, max_grad_norm, seed, sampler="own"):
    """One optimisation step of dp-transformers' ``OpacusDPTrainer`` on the probe (the module docstring), with its
    own shuffling sampler (``sampler="own"``) or its ``PoissonAuthorSampler`` (``"poisson"``); runs where
    ``dp_transformers`` imports (the subprocess of :func:`classify_dp_transformers`). Returns ``(noisy gradient,
    batch indices)``: the update from zero at learning rate 1, and the records the trainer read."""
    import tempfile

    import numpy as np
    import torch
    from dp_transformers import PrivacyArguments, TrainingArguments
    from dp_transformers.dp_utils import OpacusDPTrainer
    from transformers import logging as hf_logging
    from transformers.trainer_callback import PrinterCallback

    hf_logging.set_verbosity_error()
    x = torch.as_tensor(np.asarray(gradients), dtype=torch.float32)
    m, n = x.shape

    class Probe(torch.nn.Module):
        """The linear probe; the loss is the batch mean (Opacus's ``loss_reduction='mean'``, the trainer's)."""

        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(n, 1, bias=False)
            torch.nn.init.zeros_(self.lin.weight)

        def forward(self, x):
            return {"loss": self.lin(x).mean()}

    read = []

    class Records(torch.utils.data.Dataset):
        def __len__(self):
            return m

        def __getitem__(self, i):
            read.append(int(i))  # the trainer's sampler chooses; the probe is told which records it read
            return {"x": x[i]}

    model = Probe()
    weight = model.lin.weight
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=max(1, round(sampling_rate * m)),
                                 gradient_accumulation_steps=1, max_steps=1, learning_rate=1.0,
                                 lr_scheduler_type="constant", weight_decay=0.0, seed=int(seed) % 2**32,
                                 no_cuda=True, report_to=[], disable_tqdm=True, save_strategy="no",
                                 logging_strategy="no", log_level="error", remove_unused_columns=False)
        privacy = PrivacyArguments(noise_multiplier=ACCOUNTANT_NOISE_MULTIPLIER,
                                   per_sample_max_grad_norm=max_grad_norm, target_delta=1e-5)
        trainer_class = OpacusDPTrainer
        if sampler == "poisson":  # the library's own Poisson sampler in place of its shuffling one
            from dp_transformers.sampler import PoissonAuthorSampler

            class PoissonTrainer(OpacusDPTrainer):
                def _get_train_sampler(self):
                    return PoissonAuthorSampler(self.author_mapping, self.sampling_probability)

            trainer_class = PoissonTrainer
        trainer = trainer_class(model=model, args=args, train_dataset=Records(), privacy_args=privacy,
                                optimizers=(torch.optim.SGD(model.parameters(), lr=1.0), None))
        trainer.remove_callback(PrinterCallback)
        privacy.noise_multiplier = float(noise_multiplier)  # read when the trainer creates its DPOptimizer
        trainer.train()
    return (-weight.detach().reshape(-1)).double().numpy(), sorted(read)


def classify_dp_transformers(*, sampler: str = "own", download: bool = True, **probe) -> StepAudit:
    """Classify dp-transformers' trainer in a subprocess (the module docstring), with its own sampler
    (``sampler="own"``) or the library's Poisson sampler in its place (``"poisson"``). ``probe``: the options of
    :func:`~paperlib.implementations.step_audit.classify_step`.

    Raises
    ------
    ValueError
        ``sampler`` or a probe option out of its range (one line naming it), before anything is installed.
    DpTransformersUnavailable
        See :func:`ensure_installed`; also when the subprocess fails (its last line of error).
    StepNotClassified
        Its updates fit no known rule, or its batches are not Poisson sampling's (what its trainer shows).
    """
    if sampler not in ("own", "poisson"):
        raise ValueError(f"sampler must be 'own' or 'poisson', got {sampler!r}")
    probe = probe_options(**probe)  # before installing anything
    return classify_in_subprocess(ensure_installed(download=download), f"dp-transformers {VERSION}",
                                  "paperlib.implementations.dp_transformers_step:dp_transformers_step",
                                  {"sampler": sampler}, probe,
                                  env={"TOKENIZERS_PARALLELISM": "false", "HF_DATASETS_OFFLINE": "1",
                                       "TRANSFORMERS_OFFLINE": "1"},
                                  error=DpTransformersUnavailable)
