"""MatMul (``cl/matmul.cl``): a batched GEMM through an offset table, two kernels, tuned.

Scheme ``gemm`` (every float MatMul, any ranks, numpy-style batch broadcasting, 1-D
operands promoted as numpy does): ``C[b] = A[b] @ B[b]``. Every batch's A and B element offsets
sit in a small STATIC int table built at prepare, so broadcast batch dimensions are free. Conv's
1x1, im2col and Winograd schemes reuse :class:`Gemm`. Cost: 2 * M * N * K * batch.

The tuned parameter is a GEMM configuration, one of two kernels of ``cl/matmul.cl``:

* ``("reg", VW, NV, WM, LX, LY)`` -- ``gemm_reg``: each work-item keeps a WM x (NV * VW) block
  of C in registers (NV vectors of VW floats per row) and reads A and B straight from global
  memory; work-groups of LX x LY work-items (x along N). The fast kernel on CPU devices (PoCL:
  ~10x the tiled kernel), where local memory is plain cached memory and barriers split the
  work-item loop.
* ``("tiled", TS, WPT)`` -- ``gemm``: TS x TS tiles of C per work-group staged through local
  memory, WPT rows per work-item; the textbook GPU kernel.

Candidates depend on the device kind (``Context.is_cpu``): CPU devices try register blocks only
(the tiled kernel never wins there and is slow to time), other devices try both kernels. Each
configuration is its own program (``-D``); the untuned default is ``DEFAULT_CPU`` or
``DEFAULT_GPU``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refmnn.backends.base import KernelDef, NodeSpec, Scheme
from refmnn.backends.opencl.kernels._common import FLOATS, CLKernel, Launch, numel, storage_defines

# Register blocks (VW, NV, WM): with AVX2's 16 vector registers, 6 x 16 and 8 x 8 blocks (12 and
# 8 accumulators) leave room for the B vectors and A's broadcast; 4 x 24 is wider along N.
REG_BLOCKS = [(8, 2, 6), (8, 1, 8), (8, 3, 4)]
REG_LOCALS = [(8, 2), (4, 4), (1, 16)]
REG = [("reg", *blk, *loc) for blk in REG_BLOCKS for loc in REG_LOCALS]
TILED = [("tiled", 16, 4), ("tiled", 16, 2), ("tiled", 32, 4), ("tiled", 32, 8)]
DEFAULT_CPU = ("reg", 8, 2, 6, 8, 2)
DEFAULT_GPU = ("tiled", 16, 4)


def candidates(ctx: Any) -> list[tuple[Any, ...]]:
    """The GEMM configurations the tuner times on this device."""
    return list(REG) if ctx.is_cpu else TILED + [("reg", 4, 1, 8, 16, 4), ("reg", 4, 2, 4, 16, 4)]


class Gemm:
    """The launch of one batched GEMM; operands are argument slots of the owning kernel."""

    def __init__(self, kernel: CLKernel, M: int, N: int, K: int, offsets: np.ndarray, c_stride: int,
                 a: Any, b: Any, c: Any, bias: Any = None, half: bool = False) -> None:
        self.kernel, self.M, self.N, self.K = kernel, M, N, K
        self.batch = len(offsets)
        self.table = kernel.static(np.asarray(offsets, dtype=np.int32).reshape(-1, 3))
        self.c_stride, self.slots, self.bias, self.half = c_stride, (a, b, c), bias, half

    def launch(self, config: tuple[Any, ...] | None) -> Launch:
        ctx = self.kernel.ctx
        config = tuple(config) if config else (DEFAULT_CPU if ctx.is_cpu else DEFAULT_GPU)
        defines: dict[str, Any] = {}
        if self.half:
            defines["HALF_STORAGE"] = ""
        if self.bias is not None:
            defines["HAS_BIAS"] = ""
        if config[0] == "tiled":
            _, ts, wpt = config
            knl = ctx.kernel("matmul", "gemm", TS=ts, WPT=wpt, **defines)
            gsize = (-(-self.N // ts) * ts, -(-self.M // ts) * (ts // wpt), self.batch)
            lsize: tuple[int, ...] = (ts, ts // wpt, 1)
        elif config[0] == "reg":
            _, vw, nv, wm, lx, ly = config
            knl = ctx.kernel("matmul", "gemm_reg", VW=vw, NV=nv, WM=wm, **defines)
            gsize = (-(-self.N // (vw * nv)), -(-self.M // wm), self.batch)   # rounded up to lsize
            lsize = (lx, ly, 1)
        else:
            raise ValueError(f"opencl: unknown GEMM configuration {config}")
        if self.M == 0 or self.N == 0:
            gsize = (0, 0, 0)
        a, b, c = self.slots
        return Launch(knl, gsize, lsize,
                      [a, b, c, self.bias if self.bias is not None else ("in?", 99), ("buf", self.table),
                       self.M, self.N, self.K, self.c_stride])


class MatMul(CLKernel):
    tunable = True

    def setup(self, spec: NodeSpec) -> None:
        a_shape = [int(d) for d in spec.inputs[0].shape]
        b_shape = [int(d) for d in spec.inputs[1].shape]
        if len(a_shape) == 1:
            a_shape = [1, a_shape[0]]
        if len(b_shape) == 1:
            b_shape = [b_shape[0], 1]
        M, K, N = a_shape[-2], a_shape[-1], b_shape[-1]
        batch_shape = np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))
        rows = []
        a_batch = np.arange(numel(a_shape[:-2]), dtype=np.int64).reshape(a_shape[:-2])
        b_batch = np.arange(numel(b_shape[:-2]), dtype=np.int64).reshape(b_shape[:-2])
        a_idx = np.broadcast_to(a_batch, batch_shape).reshape(-1)
        b_idx = np.broadcast_to(b_batch, batch_shape).reshape(-1)
        for ia, ib in zip(a_idx, b_idx, strict=True):
            rows.append((int(ia) * M * K, int(ib) * K * N, 0))
        self.gemm = Gemm(self, M, N, K, np.array(rows, dtype=np.int32).reshape(-1, 3), M * N,
                         ("in", 0), ("in", 1), ("out", 0), half=bool(storage_defines(spec.outputs[0])))
        self.n_out = numel(spec.outputs[0].shape)
        self.fill = K == 0   # an empty sum: the output is zeros

    def candidates(self) -> list[Any]:
        g = self.gemm
        return candidates(self.ctx) if g.M * g.N * g.K * g.batch >= 1 << 16 else [None]

    def launches(self, local: Any) -> list[Launch]:
        return [self.gemm.launch(local)]

    def run(self, inputs, outputs, workspace):  # type: ignore[no-untyped-def]
        if self.fill:
            import pyopencl as cl

            out = outputs[0]
            if out.nbytes:
                cl.enqueue_fill_buffer(self.ctx.queue, out.buffer, np.uint8(0), out.offset, out.nbytes)
            return
        super().run(inputs, outputs, workspace)


def _matmul_ok(spec: NodeSpec) -> bool:
    a, b = spec.inputs[0], spec.inputs[1]
    return a is not None and b is not None and a.rank >= 1 and b.rank >= 1


def _flops(spec: NodeSpec) -> float:
    a = spec.inputs[0]
    return 2.0 * numel(spec.outputs[0].shape) * int(a.shape[-1])


KERNELS = (
    KernelDef("MatMul", (Scheme("gemm", lambda b, s: MatMul(b, s), applies=_matmul_ok, cost=_flops,
                                doc="batched GEMM: register blocks (CPU) or local-memory tiles (GPU), tuned"),),
              since=1, dtypes=FLOATS),
)
