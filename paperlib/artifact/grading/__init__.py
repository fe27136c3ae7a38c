"""The grade of the paper's claims, in parts: statistics (:mod:`.stats`), the paper's setting per
claim (:mod:`.setting`), the per-figure checks (:mod:`.checks`) and rendering (:mod:`.render`).
:mod:`paperlib.artifact.claims` puts them together (the registry, :func:`~paperlib.artifact.claims.grade`).
"""
