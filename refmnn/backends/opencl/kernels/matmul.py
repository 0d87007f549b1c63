"""MatMul (``cl/matmul.cl``): a tiled GEMM with local memory, batched through an offset table.

Scheme ``tiled_gemm`` (every float MatMul, any ranks, numpy-style batch broadcasting, 1-D
operands promoted as numpy does): ``C[b] = A[b] @ B[b]`` with one work-group per TS x TS tile of
C, each work-item computing WPT rows of one column, K staged through local memory TS at a
time. Every batch's A and B element offsets sit in a small STATIC int table built at prepare,
so broadcast batch dimensions are free. The tile configuration (TS, WPT) is the tuned
parameter (candidates (16, 4), (16, 2), (32, 4), (32, 8)); each is its own program (``-D``).
Cost: 2 * M * N * K * batch. Conv's im2col and Winograd schemes reuse :class:`Gemm`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refmnn.backends.base import KernelDef, NodeSpec, Scheme
from refmnn.backends.opencl.kernels._common import FLOATS, CLKernel, Launch, numel, storage_defines

TILES = [(16, 4), (16, 2), (32, 4), (32, 8)]
DEFAULT_TILE = (16, 4)


class Gemm:
    """The launch of one batched GEMM; operands are argument slots of the owning kernel."""

    def __init__(self, kernel: CLKernel, M: int, N: int, K: int, offsets: np.ndarray, c_stride: int,
                 a: Any, b: Any, c: Any, bias: Any = None, half: bool = False) -> None:
        self.kernel, self.M, self.N, self.K = kernel, M, N, K
        self.batch = len(offsets)
        self.table = kernel.static(np.asarray(offsets, dtype=np.int32).reshape(-1, 3))
        self.c_stride, self.slots, self.bias, self.half = c_stride, (a, b, c), bias, half

    def launch(self, tile: tuple[int, int] | None) -> Launch:
        ts, wpt = tile or DEFAULT_TILE
        defines: dict[str, Any] = {"TS": ts, "WPT": wpt}
        if self.half:
            defines["HALF_STORAGE"] = ""
        if self.bias is not None:
            defines["HAS_BIAS"] = ""
        knl = self.kernel.ctx.kernel("matmul", "gemm", **defines)
        gsize = (-(-self.N // ts) * ts, -(-self.M // ts) * (ts // wpt), self.batch)
        if self.M == 0 or self.N == 0:
            gsize = (0, 0, 0)
        a, b, c = self.slots
        return Launch(knl, gsize, (ts, ts // wpt, 1),
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
        return TILES if self.gemm.M * self.gemm.N * self.gemm.K * self.gemm.batch >= 1 << 16 else [None]

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
    KernelDef("MatMul", (Scheme("tiled_gemm", lambda b, s: MatMul(b, s), applies=_matmul_ok, cost=_flops,
                                doc="TSxTS tiles through local memory, WPT rows per work-item, batch offset table"),),
              since=1, dtypes=FLOATS),
)
