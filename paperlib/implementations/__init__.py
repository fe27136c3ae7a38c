"""Real DP-SGD steps for the audits of Section 4 (THEORY.md sections 9-10).

* :mod:`.models` -- models with the paper's parameter counts and fixed, seeded
  starting parameters;
* :mod:`.runners` -- one DP-SGD step (Poisson sampling, ``loss_reduction="mean"``) of
  the installed Opacus (v1.x, FEASGM), of old Opacus releases run from the release cache
  in a subprocess (v0.15.0 EASGM, v0.13.0 ASGM) and of DPSUR's step (its own rule),
  returning the parameter updates, and per-example gradients at ``theta_0``;
* :mod:`.release_server` -- the old releases' subprocess (one per release and process) and its
  protocol; :mod:`.normaliser_detection` -- :func:`~.normaliser_detection.detect_normaliser`,
  which reads the normaliser off the updates;
* :mod:`.dpsur` -- DPSUR's step, re-implemented line by line from DPSUR's source at a pinned
  commit; :mod:`.dpsur_source` -- that source fetched, sha256-verified and run in a subprocess;
* :mod:`.datasets` -- dataset loading (MNIST, FMNIST, CIFAR-10);
* :mod:`.parallel` -- the steps of an audit in chunks on Dask workers (bitwise the same for
  any worker count); :mod:`.costs` -- full mode's time from measured per-step costs.
"""
