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
from refmnn.backends.opencl.kernels._common import (
    FLOATS,
    NO_ACTIVATION,
    Activation,
    CLKernel,
    Launch,
    numel,
    operand_map,
    storage_defines,
)
from refmnn.ops.fused import DOMAIN as FUSED_DOMAIN

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
    """The launch of one batched GEMM; operands are argument slots of the owning kernel.

    ``offsets`` has 2, 3 or 4 columns per batch (A, B[, bias[, Z]] element offsets); the
    epilogue (``bias`` / ``z`` slots with their (sm, sn) strides, ``alpha`` / ``beta``,
    ``act``) is applied in the kernel's store -- ``cl/matmul.cl``."""

    def __init__(self, kernel: CLKernel, M: int, N: int, K: int, offsets: np.ndarray, c_stride: int,
                 a: Any, b: Any, c: Any, bias: Any = None, half: bool = False, *,
                 bias_strides: tuple[int, int] = (1, 0), z: Any = None, z_strides: tuple[int, int] = (0, 0),
                 alpha: float = 1.0, beta: float = 1.0, act: Activation = NO_ACTIVATION) -> None:
        self.kernel, self.M, self.N, self.K = kernel, M, N, K
        offsets = np.asarray(offsets, dtype=np.int64)
        table = np.zeros((len(offsets), 4), dtype=np.int64)
        table[:, :offsets.shape[1]] = offsets
        self.batch = len(table)
        self.table = kernel.static(table.astype(np.int32))
        self.c_stride, self.slots, self.bias, self.half = c_stride, (a, b, c), bias, half
        self.z, self.strides = z, [*bias_strides, *z_strides]
        self.scalars = [np.float32(alpha), np.float32(beta), *act.args]
        self.act = act

    def launch(self, config: tuple[Any, ...] | None) -> Launch:
        ctx = self.kernel.ctx
        config = tuple(config) if config else (DEFAULT_CPU if ctx.is_cpu else DEFAULT_GPU)
        defines: dict[str, Any] = dict(self.act.defines)
        if self.half:
            defines["HALF_STORAGE"] = ""
        if self.bias is not None:
            defines["HAS_BIAS"] = ""
        if self.z is not None:
            defines["HAS_Z"] = ""
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
                      [a, b, c, self.bias if self.bias is not None else ("in?", 99),
                       self.z if self.z is not None else ("in?", 99), ("buf", self.table),
                       self.M, self.N, self.K, self.c_stride, *self.strides, *self.scalars])


class FusedTail:
    """A fused node's epilogue operands, planned against a producer whose output is (batch, M, N)
    when seen flat (MatMul, Conv's 1x1 and im2col GEMMs).

    ``in_store``: the GEMM's keyword arguments (bias / z slots and strides, activation) when
    every operand maps affinely onto (b, m, n) (:func:`operand_map`); otherwise the GEMM
    stores the bare product (plus a conv bias) and ``post`` is an :class:`EpiloguePass` over
    the output. ``bias_input`` is FusedMatMul's bias (None for Conv, whose bias is a row bias
    the caller passes itself); ``z_input`` the residual."""

    def __init__(self, kernel: CLKernel, spec: NodeSpec, batch: int, M: int, N: int,
                 bias_input: int | None, z_input: int | None) -> None:
        def present(i: int | None) -> bool:
            return i is not None and i < len(spec.inputs) and spec.inputs[i] is not None

        out = spec.outputs[0].shape
        act = Activation(spec.attrs) if spec.node.domain == FUSED_DOMAIN else NO_ACTIVATION
        self.operands = [(i, spec.inputs[i].shape) for i in (bias_input, z_input) if present(i)]
        maps = [operand_map(out, shape, batch, M, N) for _, shape in self.operands]
        self.post: EpiloguePass | None = None
        self.in_store: dict[str, Any] = {}
        self.offsets: list[np.ndarray] = []
        if any(m is None for m in maps):
            if self.operands or act.code:
                self.post = EpiloguePass(kernel, spec, self.operands, act)
            return
        self.in_store["act"] = act
        for (index, _), (base, sm, sn), name in zip(self.operands, maps,
                                                    [n for i, n in ((bias_input, "bias"), (z_input, "z"))
                                                     if present(i)], strict=True):
            self.in_store[name] = ("in", index)
            self.in_store[f"{name}_strides"] = (sm, sn)
            self.offsets.append((name, base))

    def table(self, offsets: np.ndarray) -> np.ndarray:
        """``offsets`` (A, B[, row bias]) extended with the bias and Z columns of each batch."""
        offsets = np.asarray(offsets, dtype=np.int64)
        table = np.zeros((len(offsets), 4), dtype=np.int64)
        table[:, :offsets.shape[1]] = offsets
        for name, base in self.offsets:
            table[:, 2 if name == "bias" else 3] = base
        return table


class EpiloguePass:
    """The epilogue as its own launch, in place over the output (``epilogue`` of
    ``cl/elementwise.cl``): y = act((y + bias) + z) with the operands broadcast through 4
    collapsed axes. Used only when the producer cannot apply an operand in its store."""

    def __init__(self, kernel: CLKernel, spec: NodeSpec, operands: list[tuple[int, Any]],
                 act: Activation) -> None:
        from refmnn.backends.opencl.kernels._common import broadcast4

        out = spec.outputs[0]
        shapes = [shape for _, shape in operands] or [out.shape]
        sizes, strides = broadcast4(out.shape, [out.shape, *shapes])
        while len(strides) < 3:
            strides.append([0, 0, 0, 0])
        defines = {**storage_defines(out), **act.defines}
        slots = []
        for k in range(2):
            if k < len(operands):
                defines[("HAS_P", "HAS_Q")[k]] = ""
                slots.append(("in", operands[k][0]))
            else:
                slots.append(("in?", 99))
        self.knl = kernel.ctx.kernel("elementwise", "epilogue", **defines)
        n0, n1, n2, n3 = sizes
        self.launch = Launch(self.knl, (n3, n2, n0 * n1), None,
                             [("out", 0), *slots, n1, *strides[1], *strides[2], *act.args])


def fused_ok(spec: NodeSpec, operands: tuple[int, ...]) -> bool:
    """Whether a fused node's epilogue can run here: its operands broadcast to the output through
    at most 4 collapsed axes (always true of biases and same-shape residuals)."""
    from refmnn.backends.opencl.kernels._common import broadcast4

    out = spec.outputs[0]
    shapes = [spec.inputs[i].shape for i in operands if i < len(spec.inputs) and spec.inputs[i] is not None]
    return broadcast4(out.shape, [out.shape, *shapes]) is not None


class MatMul(CLKernel):
    """MatMul and refmnn::FusedMatMul (bias = input 2, residual Z = input 3, activation)."""

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
            rows.append((int(ia) * M * K, int(ib) * K * N))
        self.tail = FusedTail(self, spec, len(rows), M, N, 2, 3)
        self.gemm = Gemm(self, M, N, K, self.tail.table(np.array(rows, dtype=np.int64).reshape(-1, 2)), M * N,
                         ("in", 0), ("in", 1), ("out", 0), half=bool(storage_defines(spec.outputs[0])),
                         **self.tail.in_store)
        self.n_out = numel(spec.outputs[0].shape)
        self.fill = K == 0   # an empty sum: the output is zeros

    def candidates(self) -> list[Any]:
        g = self.gemm
        return candidates(self.ctx) if g.M * g.N * g.K * g.batch >= 1 << 16 else [None]

    def launches(self, local: Any) -> list[Launch]:
        post = [self.tail.post.launch] if self.tail.post else []
        return [self.gemm.launch(local), *post]

    def run(self, inputs, outputs, workspace):  # type: ignore[no-untyped-def]
        if self.fill:
            import pyopencl as cl

            out = outputs[0]
            if out.nbytes:
                cl.enqueue_fill_buffer(self.ctx.queue, out.buffer, np.uint8(0), out.offset, out.nbytes)
            return   # (FusedMatMul requires K > 0: an empty sum has no epilogue here)
        super().run(inputs, outputs, workspace)


class GemmOp(CLKernel):
    """Gemm and refmnn::FusedGemm: Y = act(alpha * A' @ B' + beta * C). A transposed operand is
    transposed once on the host when it is a constant (a Linear layer's weights, transB = 1),
    else by ``transpose2d`` into the workspace each run; C (any unidirectional broadcast to
    (M, N)) and the activation are the GEMM's store epilogue."""

    tunable = True

    def setup(self, spec: NodeSpec) -> None:
        at = spec.attrs
        a, b = spec.inputs[0], spec.inputs[1]
        trans_a, trans_b = int(at.get("transA", 0)), int(at.get("transB", 0))
        M, K = (int(a.shape[1]), int(a.shape[0])) if trans_a else (int(a.shape[0]), int(a.shape[1]))
        N = int(b.shape[0]) if trans_b else int(b.shape[1])
        half = bool(storage_defines(spec.outputs[0]))
        dtype = spec.outputs[0].dtype.numpy
        self.pre: list[Launch] = []
        self.workspace_bytes = 0
        slots = []
        for index, trans, rows, cols in ((0, trans_a, K, M), (1, trans_b, N, K)):
            if not trans:
                slots.append(("in", index))
            elif index in spec.constants:
                slots.append(("static", self.static(np.asarray(spec.constants[index], dtype=dtype).T)))
            else:   # transpose (rows x cols) into the workspace
                at_ws = self.workspace_bytes // dtype.itemsize
                knl = self.ctx.kernel("matmul", "transpose2d", **storage_defines(spec.outputs[0]))
                self.pre.append(Launch(knl, (cols, rows), None, [("in", index), ("ws", at_ws), rows, cols]))
                slots.append(("ws", at_ws))
                self.workspace_bytes += -(-rows * cols * dtype.itemsize // 64) * 64
        c = spec.inputs[2] if len(spec.inputs) > 2 else None
        beta = float(at.get("beta", 1.0))
        act = Activation(at) if spec.node.domain == FUSED_DOMAIN else NO_ACTIVATION
        kw: dict[str, Any] = {"alpha": float(at.get("alpha", 1.0)), "beta": beta, "act": act}
        table = np.zeros((1, 4), dtype=np.int64)
        if c is not None and beta != 0.0 and M * N:
            base, sm, sn = operand_map((M, N), c.shape, 1, M, N)  # type: ignore[misc]
            kw.update(bias=("in", 2), bias_strides=(sm, sn))
            table[0, 2] = base[0]
        self.gemm = Gemm(self, M, N, K, table, M * N, slots[0], slots[1], ("out", 0), half=half, **kw)

    def candidates(self) -> list[Any]:
        g = self.gemm
        return candidates(self.ctx) if g.M * g.N * g.K >= 1 << 16 else [None]

    def launches(self, local: Any) -> list[Launch]:
        return [*self.pre, self.gemm.launch(local)]


def _gemm_ok(spec: NodeSpec) -> bool:
    a, b = spec.inputs[0], spec.inputs[1]
    if a is None or b is None or a.rank != 2 or b.rank != 2:
        return False
    K = int(a.shape[0 if spec.attrs.get("transA", 0) else 1])
    c = spec.inputs[2] if len(spec.inputs) > 2 else None
    if c is not None and c.rank > 2:
        return False
    return K > 0


def _gemm_flops(spec: NodeSpec) -> float:
    a = spec.inputs[0]
    return 2.0 * numel(spec.outputs[0].shape) * int(a.shape[0 if spec.attrs.get("transA", 0) else 1])


def _matmul_ok(spec: NodeSpec) -> bool:
    a, b = spec.inputs[0], spec.inputs[1]
    return a is not None and b is not None and a.rank >= 1 and b.rank >= 1


def _fused_matmul_ok(spec: NodeSpec) -> bool:
    return _matmul_ok(spec) and int(spec.inputs[0].shape[-1]) > 0 and fused_ok(spec, (2, 3))


def _flops(spec: NodeSpec) -> float:
    a = spec.inputs[0]
    return 2.0 * numel(spec.outputs[0].shape) * int(a.shape[-1])


_GEMM_DOC = "batched GEMM: register blocks (CPU) or local-memory tiles (GPU), tuned"

KERNELS = (
    KernelDef("MatMul", (Scheme("gemm", lambda b, s: MatMul(b, s), applies=_matmul_ok, cost=_flops,
                                doc=_GEMM_DOC),),
              since=1, dtypes=FLOATS),
    KernelDef("FusedMatMul", (Scheme("gemm", lambda b, s: MatMul(b, s), applies=_fused_matmul_ok, cost=_flops,
                                     doc=_GEMM_DOC + "; bias, residual and activation in the store"),),
              domain=FUSED_DOMAIN, since=1, dtypes=FLOATS),
    KernelDef("Gemm", (Scheme("gemm", lambda b, s: GemmOp(b, s), applies=_gemm_ok, cost=_gemm_flops,
                              doc="the GEMM kernel; constant transposed operands packed at prepare"),),
              since=7, dtypes=FLOATS),
    KernelDef("FusedGemm", (Scheme("gemm", lambda b, s: GemmOp(b, s), applies=_gemm_ok, cost=_gemm_flops,
                                   doc="the GEMM kernel; C and the activation in the store"),),
              domain=FUSED_DOMAIN, since=1, dtypes=FLOATS),
)
