"""``python -m refmnn.benchmark MODEL...`` is ``refmnn bench MODEL...``."""

import sys

from refmnn.benchmark.cli import main

sys.exit(main())
