"""Progress bars for the long numerics (one-round guarantees at large ``N``/``n``, ASGM mixtures,
PLD compositions over many rounds), without a hard dependency on tqdm.

Every long computation takes ``progress``:

* ``None`` (default): a bar on stderr only when stderr is a terminal (so never under pytest's
  capture or in a notebook kernel, papermill included), and only once the computation has run
  for :data:`AUTO_DELAY` seconds (short calls stay silent);
* ``True``: a bar on stderr from the start, whatever stderr is; ``False``: none;
* a callable ``fn(done, total)`` (``total`` may be None): called at each step instead of a bar.

tqdm (in the ``[audit]`` extra) is imported when a bar is first shown; without it no bar is drawn
and the computation runs the same (the core install is numpy + scipy only).
"""

from __future__ import annotations

import sys

__all__ = ["AUTO_DELAY", "progress_bar"]

#: seconds an automatic bar (``progress=None``) waits before it appears
AUTO_DELAY = 2.0


class _Bar:
    """The object :func:`progress_bar` yields: ``update(n)``, ``set_total(total)``, ``set_postfix_str(s)``."""

    def __init__(self, bar=None, callback=None, total=None):
        self._bar, self._callback, self.total, self.done = bar, callback, total, 0

    def update(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        if self._callback is not None:
            self._callback(self.done, self.total)

    def set_total(self, total) -> None:
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def set_postfix_str(self, s: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(s, refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


class progress_bar:
    """Context manager: ``with progress_bar(progress, total, desc, unit) as bar: ... bar.update(k)``.

    ``progress`` as in the module docstring; ``total`` an int or None (unknown); ``desc`` and ``unit``
    label the bar. Nesting: an inner bar inside an outer one of the same computation is not drawn
    (only the outermost shows), so a guarantee's epsilon shows one bar, not one per profile value.
    """

    _active = 0

    def __init__(self, progress=None, total=None, desc: str = "", unit: str = "it"):
        self.progress, self.total, self.desc, self.unit = progress, total, desc, unit
        self.bar = None

    def __enter__(self) -> _Bar:
        p = self.progress
        bar = None
        callback = p if callable(p) else None
        if callback is None and progress_bar._active == 0:
            show = sys.stderr.isatty() if p is None else bool(p)
            if show:
                try:
                    from tqdm import tqdm
                except ImportError:  # optional: no bar without tqdm
                    tqdm = None
                if tqdm is not None:
                    bar = tqdm(total=self.total, desc=self.desc, unit=self.unit, file=sys.stderr, leave=False,
                               delay=AUTO_DELAY if p is None else 0.0, dynamic_ncols=True)
        progress_bar._active += 1
        self.bar = _Bar(bar, callback, self.total)
        return self.bar

    def __exit__(self, *exc) -> None:
        progress_bar._active -= 1
        self.bar.close()
