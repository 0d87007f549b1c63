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
  BLAS GEMMs of the ``*gemm*``, ``winograd`` and ``blas`` schemes run a one-thread sgemm
  (MKL's on Intel CPUs where the ``mkl`` wheel is installed, else NumPy's OpenBLAS held at one
  thread during the run; ``REFMNN_SGEMM`` forces one), split into ``threads`` panels by refmnn
  (see :mod:`refmnn.backends.numba._blas` for why and for the figures).
* ``options["gemm"]``: ``"split"`` (default): on the OpenMP (or TBB) layer the panels run inside
  one Numba parallel loop, each worker calling ``cblas_sgemm`` and the fused epilogue itself
  (:mod:`.kernels.sgemm`: one 1-2 us launch per product); on ``workqueue`` over refmnn's own
  Python thread pool (20-50 us per handed-off panel). ``"pool"``: always the Python pool.
  ``"blas"``: leave threading to OpenBLAS's own pool (``OPENBLAS_NUM_THREADS``) -- its
  spinning workers fight Numba's: 5-10x slower at 2 threads (squeezenet1_1 243 ms, resnet18
  276 ms on the OpenMP layer).
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

* ``options["threading_layer"]`` (default ``"omp"``, or ``"workqueue"`` where Numba finds no
  OpenMP runtime): Numba's threading layer for the ``prange`` loops, unless
  ``NUMBA_THREADING_LAYER`` is set; ``options["omp_wait"]`` (default: none, the runtime's own
  policy): OpenMP's wait policy, set as ``OMP_WAIT_POLICY`` unless ``OMP_WAIT_POLICY``,
  ``GOMP_SPINCOUNT`` or ``KMP_BLOCKTIME`` is set already. GNU OpenMP's default lets a worker
  spin ~300k iterations (a fraction of a millisecond) after a loop before it sleeps: a model's
  loops follow each other within microseconds, so entering one costs 1.5-3.6 us, while an idle
  process's workers are asleep. ``"passive"`` (sleep at once) costs 35-56 us per loop on the
  shared two-core VM (mobilenet_v2 10.2 against 8.4 ms, fresh processes); ``"active"`` spins
  for ever. Both choices are fixed per process before its first parallel loop (the layer by
  Numba, the policy when the OpenMP runtime loads, which probing for it does). Numba's
  ``workqueue`` workers sleep between loops: entering one costs 73-111 us, and a MobileNet runs
  ~100 of them. Measured end to end (median ms of 25 runs per process, each configuration in
  its own process, shuffled and repeated; medians over the processes; "region" = the GEMM
  panels inside the parallel loop, "pool" = on the Python pool; the OpenMP column ran with the
  runtime's default policy -- an ``OMP_WAIT_POLICY=PASSIVE`` meant for it was set only after
  the runtime had loaded, found and fixed later)::

      quieter machine     workqueue + pool   omp + region       (onnxruntime, 2 threads)
      2 threads
      mobilenet_v2        17.3               9.1                4.0
      squeezenet1_1       15.4               7.3                5.2
      resnet18            29.3               21.3               17.2
      bert6               31.3               25.4               17.0
      1 thread
      mobilenet_v2        15.3               12.8
      squeezenet1_1       15.7               12.1
      resnet18            43.6               41.2
      bert6               43.1               40.8

  Under load (another process's two busy workers on the two cores), per-process medians at 2
  threads, workqueue against OpenMP: with the GEMM on the Python pool, mobilenet_v2 15.6-16.8
  against 12.1-92.6, resnet18 41-43 against 105-204 (the spinning workers starve the pool's
  thread, and wait for descheduled partners: why ``workqueue`` was the default before); with
  the region GEMM, 14.8 / 13.5 (mobilenet_v2), 13.7 / 11.1 (squeezenet1_1), 39.0 / 38.7
  (resnet18), 43.1 / 41.1 (bert6) in one round -- but 44.6 / 148 (resnet18) and 44.7 / 88
  (bert6) in another, heavier one. ``"active"`` was far worse under load (squeezenet1_1 7 ms in
  one process, 338 ms in the next); ``"blas"`` GEMMs were 5-10x slower. So the default is
  ``omp`` + region + the runtime's bounded spin, the fastest here when the cores are free
  (1.2-2.1x at 2 threads, 1.05-1.3x at 1); on a machine shared with other busy processes,
  ``threading_layer="workqueue"`` or ``omp_wait="passive"`` degrade more gracefully. Every
  parallel kernel call takes :data:`refmnn.backends.numba.kernels._common.PARALLEL_LOCK`:
  ``workqueue`` aborts the process if two threads enter parallel loops at once, and on OpenMP
  (thread-safe) two sessions' loops on the same cores would only oversubscribe them; so
  sessions on several Python threads stay safe and their parallel loops take turns.

``import refmnn.backends.numba`` does not import Numba; :meth:`probe` and :meth:`kernels` do.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from refmnn.backends.base import Backend, BackendConfig, KernelDef, Probe
from refmnn.backends.host import HostMemory
from refmnn.errors import BackendError, RefmnnError


def kernel_fingerprint(root: Path | None = None) -> str:
    """A hash of every source file of this package and of Numba's version.

    Numba invalidates a cached function only when *its own* source file changes, not when a
    helper it inlines from another module does (``_common.erf32``, ``fused.activate``...), so
    a stale machine-code cache could silently run an old helper. Keying the cache folder by this
    fingerprint makes any edit start a fresh cache."""
    import numba

    root = root or Path(__file__).resolve().parent
    digest = hashlib.sha256(numba.__version__.encode())
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _own_fingerprint() -> str:
    """:func:`kernel_fingerprint` of the installed package, read once per process (Numba fixes
    the cache location when the kernel modules are first imported, so later edits of the
    sources could not take effect in this process anyway)."""
    return kernel_fingerprint()


def _configure_cache(cache_dir: str | None) -> None:
    """Point Numba's on-disk cache at ``<cache_dir>/<kernel_fingerprint()>`` (before the kernel
    modules are imported); ``cache_dir`` defaults to ``NUMBA_CACHE_DIR`` or
    ``~/.cache/refmnn/numba``."""
    base = cache_dir or os.environ.get("NUMBA_CACHE_DIR") or "~/.cache/refmnn/numba"
    path = os.path.join(os.path.abspath(os.path.expanduser(base)), _own_fingerprint())
    os.makedirs(path, exist_ok=True)
    import numba.core.config as numba_config

    numba_config.CACHE_DIR = path


def _configure_threads(layer: str | None, wait: str | None = None) -> None:
    """Choose Numba's threading layer unless the environment or the user's code already did;
    on the OpenMP layer also OpenMP's wait policy (``OMP_WAIT_POLICY``), unless set already."""
    import numba

    chosen = "NUMBA_THREADING_LAYER" in os.environ or numba.config.THREADING_LAYER != "default"
    effective = numba.config.THREADING_LAYER if chosen else layer
    if wait and str(effective).lower() in ("omp", "default") and not any(
            v in os.environ for v in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")):
        # read once, when the OpenMP runtime loads: before _omp_available() loads it
        os.environ["OMP_WAIT_POLICY"] = str(wait).upper()
    if layer == "omp" and not _omp_available():
        layer = "workqueue"
    if layer and not chosen:
        numba.config.THREADING_LAYER = layer


def _omp_available() -> bool:
    try:
        from numba.np.ufunc import omppool  # noqa: F401 - needs an OpenMP runtime (libgomp)
    except Exception:  # noqa: BLE001
        return False
    return True


def threading_layer() -> str:
    """The threading layer Numba runs ``prange`` loops on (its threads are started if needed)."""
    import numba

    try:
        return numba.threading_layer()
    except ValueError:  # no parallel loop has run yet
        from numba.np.ufunc.parallel import _launch_threads

        _launch_threads()
        return numba.threading_layer()


_FORKED_WITH_OMP: list[bool] = []
"""[True] in a process forked while Numba's GNU OpenMP threads (the default layer's) ran. They do
not survive fork: a child that runs a parallel loop is terminated by libgomp ("fork() called
from a process already using GNU OpenMP"), and a multiprocessing pool whose worker dies so waits
for ever. Process-wide state by nature, set by the fork hook below."""


def _note_fork() -> None:
    """``os.register_at_fork``'s child hook: were the parent's OpenMP threads running?"""
    numba = sys.modules.get("numba")
    if numba is None:
        return
    try:
        if numba.threading_layer() == "omp":
            _FORKED_WITH_OMP[:] = [True]
    except ValueError:  # no thread started yet: the child may start its own
        pass


os.register_at_fork(after_in_child=_note_fork)


def _check_not_forked() -> None:
    """Refuse to run in a child forked while the OpenMP threads ran (see above)."""
    if _FORKED_WITH_OMP:
        raise BackendError(
            "numba: this process was forked from one whose Numba OpenMP threads were running; "
            "they do not survive fork (GNU OpenMP would terminate this process): start worker "
            "processes with multiprocessing's 'spawn' or 'forkserver' method, fork before the "
            "parent runs a numba Session, or give the backend options={'threading_layer': "
            "'workqueue'}")


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

            mode = str(self.config.options.get("gemm", "split")).lower()
            self.kernels()  # the threading layer is configured first
            region = mode == "split" and threading_layer() in ("omp", "tbb")  # "pool": never
            self._gemm = Gemm(self._threads(), mode != "blas", region)
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
        _check_not_forked()  # before planning, so before any kernel's prepare runs a loop
        if self._kernels is None:
            _configure_cache(self.config.options.get("cache_dir"))
            opts = self.config.options
            _configure_threads(opts.get("threading_layer", "omp"), opts.get("omp_wait"))
            from refmnn.backends.numba.kernels import all_kernel_defs

            self._kernels = all_kernel_defs()
        return self._kernels

    # -- run brackets ------------------------------------------------------------------------

    def begin_run(self) -> None:
        import numba

        _check_not_forked()
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
        text = f"numba {probe.version or '(unavailable)'} CPU, threads {threads}"
        try:
            from refmnn.backends.numba._blas import sgemm

            kernel = sgemm()
        except RefmnnError:  # REFMNN_SGEMM names a library that does not load
            return text
        return text if kernel is None else f"{text}, sgemm {kernel.describe()}"
