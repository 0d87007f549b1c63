"""BLAS calls of the numba backend: NumPy's sgemm, with threads managed by refmnn.

Numba's ``np.dot`` needs SciPy's BLAS bindings, so the GEMM schemes call ``np.matmul(a, b,
out=view)`` from Python instead (one sgemm, no allocation, the GIL released while it runs).

Threads: OpenBLAS's own worker threads spin after each call, and so do OpenMP's; with Numba's
``prange`` loops between GEMMs both pools fight for the cores (on a loaded two-core machine a
1x1 convolution took 100x longer). So while the backend runs, NumPy's OpenBLAS is set to one
thread (restored after the run) and :func:`gemm` splits a large product into ``threads``
column or row panels computed by a small thread pool, one sgemm each. Without a recognised
OpenBLAS (another BLAS vendor) the thread count is left alone and the split is skipped.
"""

from __future__ import annotations

import ctypes
import glob
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

SPLIT_MIN_FLOPS = 2e6  # below this a product runs as one call


class _OpenBlas:
    def __init__(self) -> None:
        self.set = self.get = None
        here = os.path.dirname(np.__file__)
        for path in glob.glob(os.path.join(here, "..", "numpy.libs", "*openblas*")) + \
                glob.glob(os.path.join(here, ".dylibs", "*openblas*")):
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for suffix in ("64_", ""):
                for prefix in ("scipy_openblas_", "openblas_"):
                    setter = getattr(lib, f"{prefix}set_num_threads{suffix}", None)
                    getter = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
                    if setter is not None and getter is not None:
                        setter.argtypes, getter.restype = [ctypes.c_int], ctypes.c_int
                        self.set, self.get = setter, getter
                        return


_OPENBLAS: _OpenBlas | None = None


def openblas() -> _OpenBlas:
    global _OPENBLAS
    if _OPENBLAS is None:
        _OPENBLAS = _OpenBlas()
    return _OPENBLAS


class Gemm:
    """``out = a @ b`` for 2-D (or batched) float32 views on ``threads`` threads: split into
    panels over refmnn's pool with a one-thread BLAS (``split``), or left to the BLAS's pool."""

    def __init__(self, threads: int, split: bool = True) -> None:
        self.threads = max(1, threads)
        self.split = split
        self.pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="refmnn-gemm") \
            if split and self.threads > 1 and openblas().set is not None else None
        self._saved: int | None = None

    def begin(self) -> None:
        """Set the BLAS's thread count for the run (1 when splitting), remembering the old one."""
        lib = openblas()
        if lib.set is not None:
            self._saved = lib.get()
            lib.set(1 if self.split else self.threads)

    def end(self) -> None:
        lib = openblas()
        if self._saved is not None and lib.set is not None:
            lib.set(self._saved)
            self._saved = None

    def __call__(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        if out.ndim < 2 or a.ndim < 2 or b.ndim < 2 or out.size == 0:
            np.matmul(a, b, out=out)
            return
        m, n = out.shape[-2], out.shape[-1]
        k = a.shape[-1]
        parts = self.threads
        flops = 2.0 * m * n * k * (out.size // (m * n))
        if self.pool is None or self._saved is None or flops < SPLIT_MIN_FLOPS:
            np.matmul(a, b, out=out)
            return
        if n >= m:  # column panels: b[..., :, j0:j1] -> out[..., :, j0:j1]
            step = -(-n // parts)
            step = -(-step // 16) * 16
            cuts = [(j, min(n, j + step)) for j in range(0, n, step)]
            jobs = [(a, b[..., :, j0:j1], out[..., :, j0:j1]) for j0, j1 in cuts]
        else:  # row panels
            step = -(-m // parts)
            cuts = [(i, min(m, i + step)) for i in range(0, m, step)]
            jobs = [(a[..., i0:i1, :], b, out[..., i0:i1, :]) for i0, i1 in cuts]
        futures = [self.pool.submit(np.matmul, x, y, out=o) for x, y, o in jobs[1:]]
        np.matmul(*jobs[0][:2], out=jobs[0][2])
        for f in futures:
            f.result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False)
