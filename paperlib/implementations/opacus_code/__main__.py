"""``python -m paperlib.implementations.opacus_code``: see :mod:`.cli`."""

import sys

from .cli import main

sys.exit(main())
