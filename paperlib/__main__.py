"""``python -m paperlib``: see :mod:`paperlib.cli`."""

import sys

from .cli import main

sys.exit(main())
