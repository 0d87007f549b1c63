"""``python -m refmnn_conformance --backend NAME ...`` (same options as ``refmnn conformance``)."""

import sys

from refmnn_conformance.cli import main

sys.exit(main())
