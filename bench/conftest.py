"""Thread count of the op and scheme microbenchmarks (bench/test_*.py), set once for both.

``REFMNN_BENCH_THREADS`` (default 1) becomes the BLAS/OpenMP thread variables before any test
module imports NumPy (pytest imports this file first), unless they are set already.
"""

from __future__ import annotations

import os
import sys

THREADS = int(os.environ.get("REFMNN_BENCH_THREADS", "1"))
if "numpy" in sys.modules:  # pragma: no cover - depends on the pytest plugins loaded
    import warnings

    warnings.warn("numpy was imported before bench/conftest.py set the BLAS thread count; "
                  "set OMP_NUM_THREADS/OPENBLAS_NUM_THREADS in the environment", stacklevel=1)
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))
