"""``python -m refmnn`` is the ``refmnn`` command."""

import sys

from refmnn.cli import main

sys.exit(main())
