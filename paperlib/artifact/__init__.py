"""What exists only for the book and ``make``: the result cache and provenance,
dependency tracking, run logs, claims and grades, the artifact appendix, book tags,
figure helpers, the plotting style and numbered tables (:mod:`paperlib.artifact.tables`).

No computing layer (:mod:`paperlib.fdp`, :mod:`paperlib.mechanisms`,
:mod:`paperlib.audit`, :mod:`paperlib.implementations`) imports this package; a test
enforces it. It must stay importable by a bare system ``python3`` for
``python -m paperlib.artifact.deps`` (no numpy at import time).
"""
