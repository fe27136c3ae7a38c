"""``python -m paperlib``: see :mod:`paperlib.cli`."""

import sys

from paperlib.cli import main

sys.exit(main())
