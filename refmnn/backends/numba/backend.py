"""The Numba CPU backend: refmnn's core op set as JIT-compiled loops over NumPy views.

Tensors are NumPy arrays in host memory, exactly as in the reference backend: every activation is
a view into one 64-byte aligned ``uint8`` arena at the offset the memory planner chose, so values
move between this backend and the reference without copies (``host_memory = True``).

Kernels live in :mod:`refmnn.backends.numba.kernels`, one module per op family, named after
``refmnn/ops/<family>.py``. Each module's docstring explains its schemes: what they compute,
when they apply and the cost formula the planner compares (``refmnn explain MODEL --backends
numba`` prints the choice for every node and why).

Configuration (:class:`refmnn.backends.BackendConfig`):

* ``threads``: Numba's worker threads for ``prange`` loops (``numba.set_num_threads`` in
  :meth:`NumbaBackend.begin_run`), capped at ``NUMBA_NUM_THREADS`` (default: all cores). The
  BLAS GEMMs of the ``*gemm*``, ``winograd`` and ``blas`` schemes run on NumPy's sgemm split
  into ``threads`` panels by refmnn's own thread pool, with NumPy's OpenBLAS set to one thread
  during the run (see :mod:`refmnn.backends.numba._blas` for why).
* ``options["gemm"]``: ``"split"`` (default, as above) or ``"blas"``: leave threading to the BLAS
  library (OpenBLAS's own pool, ``OPENBLAS_NUM_THREADS``). On a quiet machine the two are close;
  under load ``"blas"`` was up to 10x slower (its workers spin against Numba's).
* ``options["cache_dir"]``: where compiled kernels are cached on disk (default
  ``NUMBA_CACHE_DIR`` if set, else ``~/.cache/refmnn/numba``), in a sub-folder named by
  :func:`kernel_fingerprint`, a hash of this package's sources: Numba itself invalidates a
  cached function only when its own file changes, not when a helper it inlines from another
  module does, so every edit starts a fresh cache instead of risking stale machine code. Every
  kernel is ``@njit(cache=True)``: it compiles once per argument signature (a few seconds in
  all for a model, the first time) and later processes load the machine code from the cache.
  The option takes effect only if it is given before the kernel modules are first imported in
  the process (the first ``kernels()`` call of any NumbaBackend), since Numba picks the cache
  location when a function is decorated.

* ``options["threading_layer"]`` (default ``"workqueue"``): Numba's threading layer for the
  ``prange`` loops, unless ``NUMBA_THREADING_LAYER`` is set. Measured on a loaded two-core
  machine, a parallel ``im2col`` took 10x longer on the OpenMP layer (workers waking up late,
  or spinning against the GEMM threads) than on ``workqueue``. ``workqueue`` does not allow two
  threads inside parallel loops at once, so every parallel kernel call takes
  :data:`refmnn.backends.numba.kernels._common.PARALLEL_LOCK`: sessions on several Python
  threads stay safe, their parallel loops just take turns. Like the cache directory, the layer
  must be chosen before the process's first parallel loop runs.

``import refmnn.backends.numba`` does not import Numba; :meth:`probe` and :meth:`kernels` do.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from refmnn.backends.base import Backend, BackendConfig, KernelDef, Probe
from refmnn.backends.host import HostMemory


def kernel_fingerprint(root: Path | None = None) -> str:
    """A hash of every source file of this package and of Numba's version.

    Numba invalidates a cached function only when *its own* source file changes, not when a
    helper it inlines from another module does (``_common.row_sum``, ``fused.activate``...), so
    a stale machine-code cache could silently run an old helper. Keying the cache folder by this
    fingerprint makes any edit start a fresh cache."""
    import numba

    root = root or Path(__file__).resolve().parent
    digest = hashlib.sha256(numba.__version__.encode())
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _configure_cache(cache_dir: str | None) -> None:
    """Point Numba's on-disk cache at ``<cache_dir>/<kernel_fingerprint()>`` (before the kernel
    modules are imported); ``cache_dir`` defaults to ``NUMBA_CACHE_DIR`` or
    ``~/.cache/refmnn/numba``."""
    base = cache_dir or os.environ.get("NUMBA_CACHE_DIR") or "~/.cache/refmnn/numba"
    path = os.path.join(os.path.abspath(os.path.expanduser(base)), kernel_fingerprint())
    os.makedirs(path, exist_ok=True)
    import numba.core.config as numba_config

    numba_config.CACHE_DIR = path


def _configure_threads(layer: str | None) -> None:
    """Choose Numba's threading layer unless the environment or the user's code already did."""
    import numba

    chosen = "NUMBA_THREADING_LAYER" in os.environ or numba.config.THREADING_LAYER != "default"
    if layer and not chosen:
        numba.config.THREADING_LAYER = layer


class NumbaBackend(HostMemory, Backend):
    """Numba-compiled CPU kernels for refmnn's core op set (float32 first)."""

    name = "numba"

    def __init__(self, config: BackendConfig | None = None) -> None:
        super().__init__(config)
        self._kernels: tuple[KernelDef, ...] | None = None
        self._gemm = None

    @property
    def gemm(self):  # type: ignore[no-untyped-def]
        """The GEMM entry point of the kernels (``gemm(a, b, out)``), threaded per the config."""
        if self._gemm is None:
            from refmnn.backends.numba._blas import Gemm

            split = str(self.config.options.get("gemm", "split")).lower() != "blas"
            self._gemm = Gemm(self._threads(), split)
        return self._gemm

    def _threads(self) -> int:
        import numba

        wanted = self.config.threads or numba.config.NUMBA_NUM_THREADS
        return max(1, min(int(wanted), numba.config.NUMBA_NUM_THREADS))

    @classmethod
    def probe(cls) -> Probe:
        try:
            import numba
        except Exception as exc:  # noqa: BLE001 - the reason is the report
            return Probe(False, f"numba is not importable: {type(exc).__name__}: {exc} "
                                f"(pip install 'refmnn[numba]')")
        return Probe(True, "", numba.__version__, ("cpu",))

    def kernels(self) -> Sequence[KernelDef]:
        if self._kernels is None:
            _configure_cache(self.config.options.get("cache_dir"))
            _configure_threads(self.config.options.get("threading_layer", "workqueue"))
            from refmnn.backends.numba.kernels import all_kernel_defs

            self._kernels = all_kernel_defs()
        return self._kernels

    # -- run brackets ------------------------------------------------------------------------

    def begin_run(self) -> None:
        import numba

        numba.set_num_threads(self._threads())
        self.gemm.begin()

    def end_run(self) -> None:
        if self._gemm is not None:
            self._gemm.end()

    def close(self) -> None:
        if self._gemm is not None:
            self._gemm.close()
            self._gemm = None

    def describe(self) -> str:
        probe = self.probe()
        threads = self.config.threads or "default"
        return f"numba {probe.version or '(unavailable)'} CPU, threads {threads}"
