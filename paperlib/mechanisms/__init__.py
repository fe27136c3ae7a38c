"""The mechanisms of the paper: SGM, EASGM, FEASGM and ASGM.

:mod:`.core` holds the :class:`~paperlib.mechanisms.core.Mechanism` value (how each one
normalises the noisy sum, what an empty batch does, the FEASGM floors);
:mod:`.guarantees` the one-round guarantees and upper bounds; :mod:`.multiround` the
T-round bounds and the accountant baselines; :mod:`.simulation` the Monte Carlo of the
mechanisms (numpy); :mod:`.sampler` the batched torch sampler used by the audits (torch
is imported only when that module is).
"""
