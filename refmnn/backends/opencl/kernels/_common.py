"""What every OpenCL kernel class shares: the device context, the program cache, the tuner and
the :class:`CLKernel` base class (prepare = compute launch parameters, build, tune; run =
enqueue only). Importing this module imports pyopencl."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl as cl

from refmnn.backends.base import Kernel, NodeSpec
from refmnn.dtypes import DType
from refmnn.errors import BackendError
from refmnn.ops.raster import contiguous_strides

CL_DIR = Path(__file__).resolve().parent.parent / "cl"
F32 = frozenset({DType.float32})
FLOATS = frozenset({DType.float32, DType.float16})


def _erf_prelude() -> str:
    """``#define ERF_P0 ...`` lines: the reference's Erf fit (``refmnn.ops._erf``) for
    ``erf_fit_d`` in ``cl/epilogue.cl``, written with round-trip digits."""
    from refmnn.ops._erf import ERF32_P, ERF32_Q

    lines = [f"#define ERF_P{i} ({c!r})" for i, c in enumerate(ERF32_P)]
    lines += [f"#define ERF_Q{i} ({c!r})" for i, c in enumerate(ERF32_Q[:-1])]  # Q is monic
    return "\n".join(lines) + "\n"


ERF_PRELUDE = _erf_prelude()


def _default_tune_path() -> Path:
    return Path.home() / ".cache" / "refmnn" / "opencl-tuning.json"


class Context:
    """One OpenCL context and in-order queue on the chosen device, with the program cache
    (in-process dict; on disk through pyopencl's binary cache) and the tuning table."""

    def __init__(self, backend: Any, platform: Any, device: Any) -> None:
        self.backend = backend
        self.platform = platform
        self.device = device
        self.cl = cl.Context([device])
        self.queue = cl.CommandQueue(self.cl)
        options = backend.config.options
        self.cache_dir = options.get("cache_dir") or None
        self.tune_on = str(options.get("tune", "on")).lower() not in ("off", "0", "false", "no")
        self.tune_path = Path(options.get("tune_cache") or _default_tune_path()).expanduser()
        self.tuning: dict[str, Any] = {}
        if self.tune_on and self.tune_path.exists():
            try:
                self.tuning = json.loads(self.tune_path.read_text())
            except (OSError, ValueError):
                self.tuning = {}
        self._programs: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
        self.builds = 0
        self.dummy = cl.Buffer(self.cl, cl.mem_flags.READ_WRITE, size=64)
        # Device-side input checks (see register_check): one int the kernels set to the id of
        # the first check that failed, zeroed at begin_run and read with the run's single sync.
        self.errors = cl.Buffer(self.cl, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                                hostbuf=np.zeros(1, np.int32))
        self.checks: list[str] = []
        self.device_key = f"{platform.name.strip()}|{device.name.strip()}"
        # A CPU device (PoCL) runs a work-group as a loop on one core: kernels that pick a
        # scheme by device kind (the GEMM: registers on CPUs, local-memory tiles on GPUs) ask this.
        self.is_cpu = bool(device.type & cl.device_type.CPU)

    def register_check(self, message: str) -> int:
        """Register a device-side input check (made at prepare); returns its id (>= 1), the
        value a kernel writes into ``errors`` (``atomic_cmpxchg(err, 0, id)``) when its input is
        invalid. The backend raises an OpError with ``message`` at the end of that run."""
        self.checks.append(message)
        return len(self.checks)

    def program(self, family: str, defines: dict[str, Any]) -> Any:
        """The built program of ``cl/<family>.cl`` with ``-D`` defines (cached)."""
        key = (family, tuple(sorted((k, str(v)) for k, v in defines.items())))
        prg = self._programs.get(key)
        if prg is None:
            source = "\n".join([ERF_PRELUDE] + [(CL_DIR / f"{name}.cl").read_text()
                                                for name in ("common", "epilogue", family)])
            options = [f"-D{k}={v}" if v != "" else f"-D{k}" for k, v in key[1]]
            try:
                prg = cl.Program(self.cl, source).build(options=options, cache_dir=self.cache_dir)
            except cl.RuntimeError as exc:
                raise BackendError(f"opencl: building cl/{family}.cl with {options} failed: {exc}") from exc
            self.builds += 1
            self._programs[key] = prg
        return prg

    def kernel(self, family: str, name: str, **defines: Any) -> Any:
        return cl.Kernel(self.program(family, defines), name)

    def save_tuning(self) -> None:
        if not self.tune_on:
            return
        try:
            self.tune_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.tune_path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self.tuning, indent=1, sort_keys=True))
            tmp.replace(self.tune_path)
        except OSError:
            pass


class Launch:
    """One prepared enqueue: a kernel, its global and local sizes and its argument list, where a
    tensor slot is ``("in", i)`` / ``("out", i)`` / ``("ws", element offset)`` / ``("in?", i)`` (an
    optional input: the dummy buffer when absent), expanded to (buffer, element offset), or
    ``("buf", cl.Buffer)``, a kernel-owned STATIC table, expanded to the pointer alone, or
    ``("static", cl.Buffer)``, kernel-owned packed weights, expanded to (buffer, 0), or
    ``("err", id)``, expanded to (the context's error flag, id) for a device-side input check."""

    __slots__ = ("kernel", "gsize", "lsize", "args")

    def __init__(self, kernel: Any, gsize: Sequence[int], lsize: Sequence[int] | None, args: Sequence[Any]) -> None:
        self.kernel = kernel
        self.gsize = tuple(int(g) for g in gsize)
        self.lsize = None if lsize is None else tuple(int(v) for v in lsize)
        self.args = [_scalar(a) for a in args]


def set_args(kernel: Any, args: Sequence[Any]) -> None:
    """``kernel.set_args(*args)``, the scalar types declared on the kernel's first call.

    Declared types make pyopencl pack the scalars with one struct call: untyped, set_args
    probes every argument and took ~115 us per launch (MobileNetV2: 55 launches, 6 ms of host
    time per run, which at 2 threads the host takes from PoCL's two workers); typed, ~1 us.
    A kernel keeps its argument kinds across launches (the same slots, buffers where buffers
    go), so the types of the first call hold for every later one. The kernel object carries
    the mark itself: a table of the kernels typed so far, held by the context, kept every
    kernel of every plan alive (a session re-planned for new shapes grew ~1 MB a plan)."""
    if not getattr(kernel, "_refmnn_typed", False):
        kernel.set_scalar_arg_dtypes([a.dtype if isinstance(a, np.generic) else None for a in args])
        kernel._refmnn_typed = True
    kernel.set_args(*args)


def _scalar(a: Any) -> Any:
    if isinstance(a, bool):
        return np.int32(a)
    if isinstance(a, (int, np.integer)) and not isinstance(a, np.int32):
        return np.int32(a)
    if isinstance(a, (float, np.floating)) and not isinstance(a, np.float32):
        return np.float32(a)
    return a


# The tuner times each candidate TUNE_REPEATS times after a warm-up and keeps its fastest run.
# It used to time one batch of two runs, so one disturbed batch on this shared machine could
# crown a poor configuration, and the cache kept it: two fresh tunings of SqueezeNet's 512 ->
# 1000 1x1 conv alone picked local sizes running at 2217 and 1553 us. With the fastest of five,
# fresh processes, medians of 30 runs at 2 threads, two rounds (old cache / new cache):
# squeezenet1_1 15.46, 15.07 / 14.98, 15.33 ms; mobilenet_v2 16.47, 16.45 / 15.97, 15.78 ms.
# TUNER is part of every cache key, so entries made by an earlier method are tuned again.
TUNE_REPEATS = 5
TUNER = "min5"


class CLKernel(Kernel):
    """Base class: subclasses implement :meth:`setup` (shape-dependent work, returning nothing)
    and :meth:`launches` (the enqueues for a given local size). ``tunable`` kernels list
    ``candidates()`` local sizes; the fastest on scratch buffers wins, cached in the JSON file."""

    tunable = False

    def __init__(self, backend: Any, spec: NodeSpec) -> None:
        self.backend = backend
        self.ctx: Context = backend.context
        self.local: Any = None
        self.plan: list[Launch] = []

    # -- subclass hooks ----------------------------------------------------------------------
    def setup(self, spec: NodeSpec) -> None:
        raise NotImplementedError

    def launches(self, local: Any) -> list[Launch]:
        raise NotImplementedError

    def candidates(self) -> list[Any]:
        return [self.local]

    # -- contract ----------------------------------------------------------------------------
    def prepare(self, spec: NodeSpec) -> None:
        self.setup(spec)
        if self.tunable and self.ctx.tune_on:
            self.local = self._tune(spec)
        self.plan = self.launches(self.local)

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], workspace: Any | None) -> None:
        self._enqueue(self.plan, inputs, outputs, workspace)

    def _enqueue(self, plan: Sequence[Launch], inputs: Sequence[Any], outputs: Sequence[Any],
                 workspace: Any | None) -> None:
        queue = self.ctx.queue
        dummy = self.ctx.dummy
        for launch in plan:
            if not all(launch.gsize):
                continue
            args: list[Any] = []
            for a in launch.args:
                if isinstance(a, tuple):
                    kind, index = a
                    if kind == "in":
                        t = inputs[index]
                    elif kind == "in?":
                        t = inputs[index] if index < len(inputs) else None
                    elif kind == "out":
                        t = outputs[index]
                    elif kind == "ws":  # ("ws", element offset into the workspace)
                        args += [workspace.handle, np.int32(index)]
                        continue
                    elif kind == "buf":  # a STATIC table owned by the kernel (pointer only)
                        args.append(index)
                        continue
                    elif kind == "err":  # ("err", check id): the error flag and this check's id
                        args += [self.ctx.errors, np.int32(index)]
                        continue
                    elif kind == "static":  # a STATIC tensor owned by the kernel (packed weights)
                        args += [index, np.int32(0)]
                        continue
                    else:
                        raise BackendError(f"opencl: bad argument slot {a}")
                    if t is None:
                        args += [dummy, np.int32(0)]
                    else:
                        args += [t.buffer, t.off]
                else:
                    args.append(a)
            set_args(launch.kernel, args)
            gsize = launch.gsize
            if launch.lsize is not None:
                gsize = tuple(-(-g // l) * l for g, l in zip(gsize, launch.lsize, strict=True))
            cl.enqueue_nd_range_kernel(queue, launch.kernel, gsize, launch.lsize)
            self.backend.stats["launches"] += 1

    # -- static memory and tuning ------------------------------------------------------------
    def static(self, array: np.ndarray) -> Any:
        """A STATIC device buffer holding ``array`` (uploaded once, at prepare)."""
        array = np.ascontiguousarray(array)
        buf = cl.Buffer(self.ctx.cl, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                        hostbuf=array if array.nbytes else np.zeros(16, np.uint8))
        return buf

    def _tune(self, spec: NodeSpec) -> Any:
        shapes = [None if t is None else (str(t.dtype), tuple(t.shape)) for t in (*spec.inputs, *spec.outputs)]
        attrs = sorted((k, repr(v)) for k, v in spec.attrs.items())
        candidates = self.candidates()
        # the candidate list is part of the key: a kernel that gains candidates is tuned again
        sig = hashlib.sha1(repr((shapes, attrs, candidates)).encode()).hexdigest()[:16]
        key = f"{self.ctx.device_key}|{type(self).__name__}|{spec.node.op}|{sig}|{TUNER}"
        cached = self.ctx.tuning.get(key)
        if cached is not None:
            value = tuple(cached) if isinstance(cached, list) else cached
            if value in candidates:
                return value
        if len(candidates) < 2:
            return self.local
        inputs, outputs, workspace = self._scratch(spec)
        best, best_time = self.local, float("inf")
        queue = self.ctx.queue
        for local in candidates:
            try:
                plan = self.launches(local)
                self._enqueue(plan, inputs, outputs, workspace)   # warm-up
                queue.finish()
                elapsed = float("inf")
                for _ in range(TUNE_REPEATS):  # the fastest of a few: robust to other load
                    start = time.perf_counter()
                    self._enqueue(plan, inputs, outputs, workspace)
                    queue.finish()
                    elapsed = min(elapsed, time.perf_counter() - start)
            except cl.Error:
                continue
            finally:
                self.backend.stats["tune_sync"] += 1
            if elapsed < best_time:
                best, best_time = local, elapsed
        for buf in self._scratch_buffers:
            buf.release()
        self.ctx.tuning[key] = list(best) if isinstance(best, tuple) else best
        self.ctx.save_tuning()
        return best

    def _scratch(self, spec: NodeSpec) -> tuple[list[Any], list[Any], Any]:
        """Zero-filled stand-ins for the node's tensors (constant inputs get their values)."""
        from refmnn.backends.opencl.backend import CLTensor

        self._scratch_buffers = []

        def make(t: Any, value: np.ndarray | None) -> Any:
            if t is None:
                return None
            dtype = t.dtype.numpy
            nbytes = max(64, int(np.prod(t.shape, dtype=np.int64)) * dtype.itemsize)
            if value is not None:
                host = np.ascontiguousarray(np.asarray(value, dtype=dtype))
                buf = cl.Buffer(self.ctx.cl, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                                hostbuf=host if host.nbytes else np.zeros(64, np.uint8))
            else:
                buf = cl.Buffer(self.ctx.cl, cl.mem_flags.READ_WRITE, size=nbytes)
                cl.enqueue_fill_buffer(self.ctx.queue, buf, np.uint8(0), 0, nbytes)
            self._scratch_buffers.append(buf)
            return CLTensor(buf, 0, t.shape, dtype)

        inputs = [make(t, spec.constants.get(i)) for i, t in enumerate(spec.inputs)]
        outputs = [make(t, None) for t in spec.outputs]
        workspace = None
        if self.workspace_bytes:
            from refmnn.backends.base import Buffer, Storage

            buf = cl.Buffer(self.ctx.cl, cl.mem_flags.READ_WRITE, size=max(64, self.workspace_bytes))
            self._scratch_buffers.append(buf)
            workspace = Buffer(self.workspace_bytes, Storage.WORKSPACE, buf)
        return inputs, outputs, workspace


# -- shape helpers -------------------------------------------------------------------------------

def numel(shape: Sequence[int]) -> int:
    return int(np.prod([int(d) for d in shape], dtype=np.int64)) if len(shape) else 1


def collapse(sizes: Sequence[int], strides: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 axes and merge neighbours that every operand walks as one axis."""
    out_sizes: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for axis, size in enumerate(sizes):
        size = int(size)
        if size == 1:
            continue
        if out_sizes and all(m[-1] == s[axis] * size for m, s in zip(out_strides, strides, strict=True)):
            out_sizes[-1] *= size
            for m, s in zip(out_strides, strides, strict=True):
                m[-1] = s[axis]
            continue
        out_sizes.append(size)
        for m, s in zip(out_strides, strides, strict=True):
            m.append(int(s[axis]))
    return out_sizes, out_strides


def pad4(sizes: list[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]]] | None:
    """Pad collapsed sizes/strides in front to 4 axes; None if more than 4 remain."""
    if len(sizes) > 4:
        return None
    pad = 4 - len(sizes)
    return [1] * pad + sizes, [[0] * pad + s for s in strides]


def broadcast_strides(out_shape: Sequence[int], shape: Sequence[int]) -> list[int]:
    r = len(out_shape)
    shape = [1] * (r - len(shape)) + [int(d) for d in shape]
    s = contiguous_strides(shape)
    return [0 if shape[i] == 1 and int(out_shape[i]) != 1 else s[i] for i in range(r)]


def broadcast4(out_shape: Sequence[int], in_shapes: Sequence[Sequence[int]]):  # type: ignore[no-untyped-def]
    """(sizes[4], [strides[4] per input]) of a broadcast, or None when > 4 axes remain."""
    strides = [broadcast_strides(out_shape, s) for s in in_shapes]
    sizes, merged = collapse(out_shape, strides)
    return pad4(sizes, merged)


def storage_defines(t: Any) -> dict[str, Any]:
    """``HALF_STORAGE`` when the tensor type is float16."""
    return {"HALF_STORAGE": ""} if t is not None and t.dtype == DType.float16 else {}




# -- fused epilogues ------------------------------------------------------------------------------

ACT_CODES = {"none": 0, "relu": 1, "leaky_relu": 2, "clip": 3, "sigmoid": 4, "tanh": 5, "gelu": 6,
             "gelu_tanh": 7}
"""The ``activation`` attribute of the fused ops (refmnn/ops/fused.py) -> ``-DACT`` of
``cl/epilogue.cl``."""


class Activation:
    """A fused node's activation: the ``ACT`` define and its three float arguments."""

    def __init__(self, attrs: Any) -> None:
        name = attrs.get("activation", "none") or "none"
        self.code = ACT_CODES[name]
        self.args = [np.float32(attrs.get("activation_alpha", 0.01)),
                     np.float32(attrs.get("activation_min", -np.inf)),
                     np.float32(attrs.get("activation_max", np.inf))]

    @property
    def defines(self) -> dict[str, Any]:
        return {"ACT": self.code} if self.code else {}


NO_ACTIVATION = Activation({})


def operand_map(out_shape: Sequence[int], shape: Sequence[int], batch: int, M: int, N: int
                ) -> tuple[np.ndarray, int, int] | None:
    """How a GEMM store reads an operand broadcast to the output: the output, seen flat as
    (batch, M, N), reads element ``base[b] + m * sm + n * sn`` of the operand (``shape``
    broadcast to ``out_shape``). Returns ``(base, sm, sn)``, or None when no such affine map
    exists (e.g. a residual broadcast along part of a GEMM axis). Found numerically: the
    operand's index array is broadcast to the output and checked against the affine map."""
    if batch * M * N == 0:   # an empty output reads nothing
        return np.zeros(batch, dtype=np.int64), 0, 0
    index = np.arange(numel(shape), dtype=np.int64).reshape([int(d) for d in shape])
    try:
        full = np.broadcast_to(index, tuple(int(d) for d in out_shape)).reshape(batch, M, N)
    except ValueError:
        return None
    base = full[:, 0, 0]
    sm = int(full[0, 1, 0] - full[0, 0, 0]) if M > 1 else 0
    sn = int(full[0, 0, 1] - full[0, 0, 0]) if N > 1 else 0
    expect = base[:, None, None] + np.arange(M)[None, :, None] * sm + np.arange(N)[None, None, :] * sn
    if not np.array_equal(full, expect):
        return None
    return base, sm, sn
