"""The cache folder of everything this package fetches or installs: one root.

Old Opacus releases (``opacus-src/`` wheels, ``opacus-<version>/`` installs;
:mod:`paperlib.implementations.opacus_code.wheels`), DPSUR's pinned source (``dpsur/<commit>/``;
:mod:`paperlib.implementations.dpsur_source`) and the methods' own model code
(``paper-models/<owner>/<repo>/<commit>/``; :mod:`paperlib.implementations.paper_models`) all live
under :func:`cache_root`. Importing it imports nothing heavy.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "PACKAGE_PARENT", "cache_root"]

#: the environment variable that moves the cache
CACHE_ENV = "PAPERLIB_CACHE"
#: the folder that holds the ``paperlib`` package (the repository root in a checkout)
PACKAGE_PARENT = Path(__file__).resolve().parents[2]


def cache_root() -> Path:
    """``$PAPERLIB_CACHE`` if set, else ``<repo>/.cache`` (``~/.cache/paperlib`` outside a checkout)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    if (PACKAGE_PARENT / "pyproject.toml").is_file():
        return PACKAGE_PARENT / ".cache"
    return Path.home() / ".cache" / "paperlib"
