"""The OpenCL backend: refmnn's core op set as OpenCL C kernels run through pyopencl.

Memory (``host_memory = False``, so refmnn inserts copies where values cross to the reference):

* one ``cl.Buffer`` per ARENA (the planned peak), per STATIC constant and per WORKSPACE;
* a device tensor (:class:`CLTensor`) is ``(buffer, byte offset, shape, dtype)``. Kernels take
  every tensor as a ``(pointer, element offset)`` pair of arguments instead of a sub-buffer,
  because refmnn aligns offsets to 64 bytes and ``CL_DEVICE_MEM_BASE_ADDR_ALIGN`` may be larger
  (PoCL: 128 bytes);
* one in-order command queue. :meth:`upload` enqueues a non-blocking copy (of a private host
  copy, so the caller may reuse its array); :meth:`download` enqueues a copy and waits -- the only
  host synchronisation of a run; :meth:`end_run` calls ``queue.finish()``. Nothing synchronises
  per node. ``stats`` counts downloads, finishes and tuning syncs (the tests check it).

Programs (``kernels/_common.py``): one per ``cl/<family>.cl`` source and set of ``-D`` defines,
built once per process (in-process cache) and cached on disk between processes by pyopencl's
binary cache (``options["cache_dir"]``) and PoCL's own cache (``options["pocl_cache_dir"]``,
exported as ``POCL_CACHE_DIR`` before the first build). Work-group sizes are tuned per kernel and
shape at prepare (a few candidates timed on scratch buffers, the fastest of five runs each), the
winners kept in a JSON file
(``options["tune_cache"]``; ``options["tune"] = "off"`` turns tuning off and uses defaults).

Configuration (:class:`refmnn.backends.BackendConfig`): ``device`` (name substring or index
among the devices of the chosen platform), ``options["platform"]`` (name substring or index),
``precision`` is not used (float32 is computed in float32; float16 is stored as half and
computed in float32, via ``vload_half``/``vstore_half``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from refmnn.backends.base import Backend, BackendConfig, Buffer, KernelDef, Probe, Storage
from refmnn.errors import BackendError, OpError
from refmnn.graph import TensorType

INSTALL_HINT = "pip install 'pyopencl[pocl]' mako"

_RUNTIME_PID: list[int] = []
"""The process that first called into the OpenCL runtime (a one-element list once it has). The
runtime does not survive fork: in a child forked after it started -- a mere platform query
suffices -- PoCL's threads are gone and the first upload waits for ever (a multiprocessing pool
with the "fork" start method hung). Process-wide state by nature, as the runtime's is."""


def _forked_from() -> int | None:
    """The parent's pid when this process was forked after the runtime started, else None."""
    return _RUNTIME_PID[0] if _RUNTIME_PID and _RUNTIME_PID[0] != os.getpid() else None


def _runtime_starts() -> None:
    """Call before any call into the OpenCL runtime: refuses a forked child (see above)."""
    parent = _forked_from()
    if parent is not None:
        raise BackendError(
            f"opencl: this process was forked from process {parent} after that one had started "
            f"the OpenCL runtime, which does not survive fork (it would wait for ever); start "
            f"worker processes with multiprocessing's 'spawn' or 'forkserver' method, or fork "
            f"before anything in the parent touches OpenCL")
    if not _RUNTIME_PID:
        _RUNTIME_PID.append(os.getpid())


def _pick(items: Sequence[Any], choice: str | int | None, what: str) -> Any:
    """``items[choice]`` by index, or the first whose name contains ``choice`` (any case)."""
    if choice is None or choice == "":
        return items[0]
    text = str(choice).strip()
    if text.lstrip("-").isdigit():
        index = int(text)
        if not -len(items) <= index < len(items):
            raise BackendError(f"opencl: {what} index {index} out of range ({len(items)} seen)")
        return items[index]
    for item in items:
        if text.lower() in item.name.lower():
            return item
    names = ", ".join(repr(i.name) for i in items)
    raise BackendError(f"opencl: no {what} matching {text!r} (seen: {names})")


class CLTensor:
    """A typed window ``(buffer, byte offset, shape, dtype)`` of a device buffer."""

    __slots__ = ("buffer", "offset", "shape", "dtype", "numel", "nbytes", "off")

    def __init__(self, buffer: Any, offset: int, shape: Sequence[int], dtype: np.dtype) -> None:
        self.buffer = buffer
        self.offset = int(offset)
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.numel = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        self.nbytes = self.numel * self.dtype.itemsize
        if self.offset % self.dtype.itemsize:
            raise BackendError(f"opencl: offset {offset} not a multiple of {self.dtype} size")
        self.off = np.int32(self.offset // self.dtype.itemsize)  # element offset, a kernel argument

    def __repr__(self) -> str:
        return f"CLTensor({self.dtype}{list(self.shape)} @ {self.offset})"


def pocl_defaults() -> None:
    """PoCL settings refmnn picks unless the environment already has them, exported before PoCL
    starts (it reads them once, when the first platform query loads it).

    ``POCL_AFFINITY=1`` pins PoCL's worker threads to cores. Unpinned, after the host had waited
    a moment the scheduler woke the workers onto the host thread's core and they stayed together
    for the following runs: blocks of 4 runs after 0.2 s pauses (as the benchmark's interleaved
    rounds), medians at 2 threads, unpinned / pinned: squeezenet1_1 12.33 / 7.81 ms (7.7 with no
    pauses), mobilenet_v2 13.14 / 9.24 ms; at 1 thread no difference (16.2 / 15.8 ms)."""
    os.environ.setdefault("POCL_AFFINITY", "1")


class OpenCLBackend(Backend):
    """OpenCL kernels for refmnn's core op set (float32, and float16 storage)."""

    name = "opencl"
    host_memory = False
    linear_memory = True  # a tensor is (buffer, byte offset, shape): C-order bytes from the offset

    def __init__(self, config: BackendConfig | None = None) -> None:
        super().__init__(config)
        self._kernels: tuple[KernelDef, ...] | None = None
        self._ctx: Any = None
        self.stats = {"downloads": 0, "finish": 0, "tune_sync": 0, "launches": 0}

    # -- discovery ---------------------------------------------------------------------------

    @classmethod
    def probe(cls) -> Probe:
        pocl_defaults()
        try:
            import pyopencl as cl
        except Exception as exc:  # noqa: BLE001 - the reason is the report
            return Probe(False, f"pyopencl not installed: {INSTALL_HINT} "
                                f"({type(exc).__name__}: {exc})")
        try:
            _runtime_starts()
        except BackendError as exc:
            return Probe(False, str(exc), cl.VERSION_TEXT)
        try:
            platforms = cl.get_platforms()
        except Exception as exc:  # noqa: BLE001
            return Probe(False, f"no OpenCL platform found ({type(exc).__name__}: {exc}); "
                                f"{INSTALL_HINT} installs PoCL", cl.VERSION_TEXT)
        devices = []
        for p_index, platform in enumerate(platforms):
            try:
                for d_index, device in enumerate(platform.get_devices()):
                    devices.append(f"[{p_index}:{d_index}] {platform.name}: {device.name.strip()}")
            except Exception:  # noqa: BLE001, S112 - a platform with no devices
                continue
        if not devices:
            return Probe(False, "no OpenCL platform found" if not platforms else
                         "OpenCL platforms found but no devices", cl.VERSION_TEXT)
        return Probe(True, "", cl.VERSION_TEXT, tuple(devices))

    @property
    def context(self) -> Any:
        """The lazily created :class:`refmnn.backends.opencl.kernels._common.Context`."""
        _runtime_starts()  # also for a context made before a fork, used in the child
        if self._ctx is None:
            options = self.config.options
            pocl_dir = options.get("pocl_cache_dir")
            if pocl_dir:
                os.makedirs(os.path.expanduser(pocl_dir), exist_ok=True)
                os.environ["POCL_CACHE_DIR"] = os.path.abspath(os.path.expanduser(pocl_dir))
            pocl_defaults()
            import pyopencl as cl

            from refmnn.backends.opencl.kernels._common import Context

            platforms = cl.get_platforms()
            if not platforms:
                raise BackendError("opencl: no OpenCL platform found")
            platform = _pick(platforms, options.get("platform"), "platform")
            device = _pick(platform.get_devices(), self.config.device, "device")
            self._ctx = Context(self, platform, device)
        return self._ctx

    def kernels(self) -> Sequence[KernelDef]:
        if self._kernels is None:
            from refmnn.backends.opencl.kernels import all_kernel_defs

            self._kernels = all_kernel_defs()
        return self._kernels

    # -- memory ------------------------------------------------------------------------------

    def allocate(self, nbytes: int, storage: Storage) -> Buffer:
        import pyopencl as cl

        ctx = self.context
        handle = cl.Buffer(ctx.cl, cl.mem_flags.READ_WRITE, size=max(int(nbytes), 64))
        return Buffer(nbytes, storage, handle)

    def free(self, buffer: Buffer) -> None:
        if buffer.handle is not None:
            buffer.handle.release()
        buffer.handle = None

    def view(self, buffer: Buffer, offset: int, type: TensorType) -> CLTensor:
        assert type.dtype is not None and type.shape is not None
        return CLTensor(buffer.handle, offset, type.shape, type.dtype.numpy)

    def upload(self, src: np.ndarray, dst: CLTensor) -> None:
        import pyopencl as cl

        if dst.nbytes == 0:
            return
        host = np.array(src, dtype=dst.dtype, order="C", copy=True)  # private: caller may reuse src
        if host.shape != dst.shape:
            raise BackendError(f"opencl: upload of {host.shape} into {dst.shape}")
        cl.enqueue_copy(self.context.queue, dst.buffer, host, dst_offset=dst.offset, is_blocking=False)

    def download(self, src: CLTensor) -> np.ndarray:
        import pyopencl as cl

        out = np.empty(src.shape, dtype=src.dtype)
        if src.nbytes:
            self.stats["downloads"] += 1
            cl.enqueue_copy(self.context.queue, out, src.buffer, src_offset=src.offset, is_blocking=True)
        return out

    # -- run brackets ------------------------------------------------------------------------

    def begin_run(self) -> None:
        if self._ctx is not None:
            _runtime_starts()  # a Session made before a fork, run in the child
        if self._ctx is not None and self._ctx.checks:
            import pyopencl as cl

            cl.enqueue_copy(self._ctx.queue, self._ctx.errors, np.zeros(1, np.int32),
                            is_blocking=False)

    def end_run(self) -> None:
        """The run's one host synchronisation; raises the first device-side input check that
        failed during the run (its flag is read in the same sync)."""
        if self._ctx is None:
            return
        ctx = self._ctx
        failed = np.zeros(1, np.int32)
        if ctx.checks:
            import pyopencl as cl

            cl.enqueue_copy(ctx.queue, failed, ctx.errors, is_blocking=False)
        self.stats["finish"] += 1
        ctx.queue.finish()
        if failed[0]:
            raise OpError(ctx.checks[int(failed[0]) - 1])

    def close(self) -> None:
        if self._ctx is not None:
            self._ctx.queue.finish()
            self._ctx.save_tuning()

    def describe(self) -> str:
        try:
            ctx = self.context
        except Exception as exc:  # noqa: BLE001
            return f"opencl (unavailable: {exc})"
        return f"opencl {ctx.platform.name.strip()}: {ctx.device.name.strip()}"
