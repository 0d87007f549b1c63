"""MatMul (NumPy semantics: batched, broadcasting batch axes, 1-D operands promoted), and
``refmnn::FusedMatMul`` = act((MatMul + bias) + Z) with the same schemes followed by the one-pass
epilogue of :mod:`.fused`; and Gemm / ``refmnn::FusedGemm`` (declared so that a model's final
``Gemm(transB=1)`` is not lowered to a Transpose that copies the weight on every run).

Scheme ``blas`` of Gemm -- 2-D A and B: one sgemm on ``A.T`` / ``B.T`` views, ``alpha`` in place,
    ``beta * C`` (pre-scaled in ``prepare``) and the activation in the epilogue. Applies when
    beta is 1 or 0 or C is a constant. Cost: ``2*M*N*K``.
Scheme ``gemv`` of Gemm -- one output row (a classifier's ``[1, K] @ W'``): a matrix-vector
    product over the threads (:class:`GemmGemv`), then ``blas``'s alpha and epilogue. Cost:
    ``N*K`` (one read of B). An sgemm of one row packs B before using it once: MobileNetV2's
    classifier ([1, 1280] @ [1280, 1000], 5 MB of weights, from memory every run) took 679 us
    in the model at 2 threads, 340 us as gemv (onnxruntime's: 353 us); the same product, hot
    in cache, 311 us as the split sgemm against 87 us for NumPy's sgemv on one thread.

Scheme ``blas`` -- applies always: ``np.matmul(a, b, out=out)`` on the arena views, i.e. one
    BLAS sgemm per batch through NumPy (OpenBLAS here), split into panels over the backend's
    threads (:mod:`refmnn.backends.numba._blas`). Calling BLAS is this scheme's point:
    a tuned sgemm runs at several times the speed of any loop nest Numba emits.
    Cost: ``2*M*N*K*batch`` flops at unit price + ``5000`` per batch (call and packing overhead).
    FusedMatMul's bias (one per column), residual and activation are applied per panel
    (:class:`MatMulBlas`): against the former pass after the product, the FusedMatMul nodes'
    time per run, 2 threads, 80 interleaved runs in one process: ViT-Tiny 15.20 -> 14.95 and
    15.29 -> 14.78 ms, BERT-6 18.60 -> 18.41 and 18.68 -> 18.58 ms, outputs equal.
Scheme ``blocked`` -- applies when both operands have rank >= 2 and are not empty: a Numba loop nest,
    ``prange`` over (batch, row-block), ``i-k-j`` order inside blocks of ``KB`` along K so the
    innermost loop streams a row of B into a row of the output (vectorised). Batch broadcasting
    is resolved in ``prepare`` into two index tables. Cost: ``4 * 2*M*N*K*batch`` (no register
    tiling: about a quarter of BLAS speed), so it wins only for tiny products where BLAS's call
    overhead dominates.
Scheme ``packed_simd`` -- B a constant matrix (a projection's weights), on AVX2/FMA CPUs: the
    product in Numba's 8-lane register tiles on B packed into strips once, in ``prepare``, A
    read in place, FusedMatMul's epilogue in registers. See :mod:`.matmul_packed`. Cost:
    ``0.8 * 2*R*N*K`` for at most 256 rows of A (R, batch axes folded in), ``1.1 * 2*R*N*K``
    for more, or on an Intel CPU with AVX-512 (where a BLAS runs twice the lanes).
Scheme ``strassen`` -- large 2-D products: Strassen's 7-product recursion over BLAS leaves; see
    :mod:`.strassen` for the algorithm, its accuracy and its cost.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme, Storage
from refmnn.backends.numba._blas import Binding
from refmnn.backends.numba.kernels import matmul_packed, strassen
from refmnn.backends.numba.kernels._common import F32, PARALLEL_LOCK, PJIT, SUM_MATH, batch_items
from refmnn.backends.numba.kernels.fused import Epilogue, epilogue_ok, epilogue_rows
from refmnn.ops.fused import DOMAIN as FUSED_DOMAIN

KB = 64  # K block of the blocked scheme
MB = 16  # rows per parallel work item


@njit(**PJIT)
def matmul_blocked(a, b, out, ia, ib):
    nb, m, n = out.shape
    k_total = a.shape[2]
    row_blocks = (m + MB - 1) // MB
    for t in prange(nb * row_blocks):
        bi = t // row_blocks
        r0 = (t % row_blocks) * MB
        r1 = min(m, r0 + MB)
        aa = a[ia[bi]]
        bb = b[ib[bi]]
        oo = out[bi]
        for i in range(r0, r1):
            for j in range(n):
                oo[i, j] = 0
        for k0 in range(0, k_total, KB):
            k1 = min(k_total, k0 + KB)
            for i in range(r0, r1):
                for k in range(k0, k1):
                    v = aa[i, k]
                    for j in range(n):
                        oo[i, j] += v * bb[k, j]


GEMV_ROWS = 64  # gemv_rows: weight rows per parallel work item
GEMV_COLUMNS = 256  # gemv_columns: output columns per work item (1 KiB, stays in L1)


@njit(**PJIT, fastmath=SUM_MATH)
def gemv_rows(w, x, y):
    """y[j] = sum_i w[j, i] x[i] for w [N, K] (rows contiguous): one dot product per row,
    summed in SIMD partial sums (SUM_MATH), blocks of GEMV_ROWS rows per work item."""
    n, k = w.shape
    for block in prange((n + GEMV_ROWS - 1) // GEMV_ROWS):
        for j in range(block * GEMV_ROWS, min(n, (block + 1) * GEMV_ROWS)):
            row = w[j]
            acc = np.float32(0)
            for i in range(k):
                acc += row[i] * x[i]
            y[j] = acc


@njit(**PJIT, fastmath=SUM_MATH)
def gemv_columns(b, x, y):
    """y[j] = sum_i x[i] b[i, j] for b [K, N] (rows contiguous): each work item keeps a block
    of GEMV_COLUMNS outputs and adds x[i] times that part of every row of b."""
    k, n = b.shape
    for block in prange((n + GEMV_COLUMNS - 1) // GEMV_COLUMNS):
        j0 = block * GEMV_COLUMNS
        width = min(n, j0 + GEMV_COLUMNS) - j0
        acc = y[j0:j0 + width]
        acc[:] = 0
        for i in range(k):
            xi = x[i]
            row = b[i, j0:j0 + width]
            for j in range(width):
                acc[j] += xi * row[j]


def _dims(spec: NodeSpec) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of the product."""
    a, b = (list(int(d) for d in t.shape) for t in spec.inputs[:2])
    k = a[-1]
    m = a[-2] if len(a) >= 2 else 1
    n = b[-1] if len(b) >= 2 else 1
    out = [int(d) for d in spec.outputs[0].shape]
    batch = int(np.prod(out, dtype=np.int64)) // max(m * n, 1)
    return batch, m, n, k


class MatMulBlas(Kernel):
    """One product through the backend's GEMM. FusedMatMul's epilogue is applied to each panel
    by the thread that computed it (:func:`.fused.epilogue_rows`, bias per column) when the
    bias is one value per output column and the residual has the output's shape -- every
    fused transformer projection -- and otherwise as a pass after the product."""

    def __init__(self, backend) -> None:  # type: ignore[no-untyped-def]
        self.backend = backend

    def prepare(self, spec: NodeSpec) -> None:
        # FusedMatMul's bias and residual (none for MatMul)
        self.epilogue = ep = Epilogue(spec, 2, 3)
        out = tuple(int(d) for d in spec.outputs[0].shape)
        self.in_panel = (ep.active and len(out) >= 2 and spec.outputs[0].dtype.numpy == np.float32
                         and ep.per_column(spec))
        self.rows = (-1, *out[-2:])
        self.binding = Binding()

    def run(self, inputs, outputs, workspace):
        out, ep = outputs[0], self.epilogue
        if self.binding.run((*inputs, out), lambda: self._bind(inputs, out)):
            return
        if not self.in_panel:
            self.backend.gemm(inputs[0], inputs[1], out)
            ep(inputs, out)
            return
        args = self.panel_args(inputs)
        bias, z, has_b, has_z = args[:4]
        items, zs = out.reshape(self.rows), z.reshape(self.rows) if has_z else None

        def finish(panel, i0, i1, j0, j1):  # type: ignore[no-untyped-def]
            for item in range(items.shape[0]):  # every batch item of the panel
                epilogue_rows(items[item], bias, zs[item] if has_z else z, *args[2:],
                              i0, i1, j0, j1)

        self.backend.gemm(inputs[0], inputs[1], out, finish, args)

    def panel_args(self, inputs) -> tuple:  # type: ignore[no-untyped-def]
        """The in-panel epilogue's operands (the bias per output column)."""
        ep = self.epilogue
        return ep.panel_args(inputs[2].reshape(-1) if ep.bias_input is not None else None,
                             inputs[3] if ep.z_input is not None else None, True)

    def _bind(self, inputs, out):  # type: ignore[no-untyped-def]
        """The product with its in-panel epilogue (or none), bound; None with an epilogue
        pass or views that would be copies."""
        if (self.epilogue.active and not self.in_panel) or \
                not Binding.bindable((*inputs, out)):
            return None
        args = self.panel_args(inputs) if self.in_panel else None
        return self.backend.gemm.bind(inputs[0], inputs[1], out, args)


class MatMulBlocked(Kernel):
    def prepare(self, spec: NodeSpec) -> None:
        a, b = (tuple(int(d) for d in t.shape) for t in spec.inputs[:2])
        out = tuple(int(d) for d in spec.outputs[0].shape)
        batch = out[:-2]
        self.ia, self.ib = batch_items(a, batch), batch_items(b, batch)
        self.shapes = ((-1, *a[-2:]), (-1, *b[-2:]), (-1, *out[-2:]))
        self.epilogue = Epilogue(spec, 2, 3)

    def run(self, inputs, outputs, workspace):
        sa, sb, so = self.shapes
        with PARALLEL_LOCK:
            matmul_blocked(inputs[0].reshape(sa), inputs[1].reshape(sb), outputs[0].reshape(so),
                           self.ia, self.ib)
        self.epilogue(inputs, outputs[0])


def _blas_cost(spec: NodeSpec) -> float:
    batch, m, n, k = _dims(spec)
    return 2.0 * batch * m * n * k + 5000.0 * batch


def _blocked_cost(spec: NodeSpec) -> float:
    batch, m, n, k = _dims(spec)
    return 4 * 2.0 * batch * m * n * k + 2000.0


class GemmBlas(Kernel):
    """Gemm-7+: Y = alpha * A' @ B' + beta * C as one sgemm on the (possibly transposed) views
    -- BLAS reads a transposed operand in place, so a ``transB=1`` weight is never copied --
    then ``alpha`` in place and ``beta * C`` (pre-scaled once in ``prepare`` when beta != 1)
    with FusedGemm's activation in the epilogue pass."""

    def __init__(self, backend) -> None:  # type: ignore[no-untyped-def]
        self.backend = backend

    def prepare(self, spec: NodeSpec) -> None:
        a = spec.attrs
        self.ta, self.tb = int(a["transA"]), int(a["transB"])
        self.alpha, beta = np.float32(a["alpha"]), float(a["beta"])
        has_c = len(spec.inputs) > 2 and spec.inputs[2] is not None and beta != 0.0
        self.epilogue = Epilogue(spec, 2 if has_c else None, None)
        if has_c and beta != 1.0:
            c = np.asarray(spec.constants[2], dtype=np.float32) * np.float32(beta)
            buf = self.backend.allocate(max(c.nbytes, 4), Storage.STATIC)
            self.epilogue.bias_array = buf.handle[:c.nbytes].view(np.float32)
            self.epilogue.bias_array[:] = c.reshape(-1)

    def run(self, inputs, outputs, workspace):
        a, b, out = inputs[0], inputs[1], outputs[0]
        self.product(a, b, out)
        if self.alpha != 1:
            np.multiply(out, self.alpha, out=out)
        self.epilogue(inputs, out)

    def product(self, a, b, out) -> None:  # type: ignore[no-untyped-def]
        self.backend.gemm(a.T if self.ta else a, b.T if self.tb else b, out)


class GemmGemv(GemmBlas):
    """Gemm with one output row (a classifier: [1, K] @ B'), as a matrix-vector product split
    over the threads: dot products with the rows of a ``transB=1`` weight (:func:`gemv_rows`),
    or a ``transB=0`` B's rows scaled and summed into column blocks (:func:`gemv_columns`).
    Bound by reading B once; an sgemm of one row packs B first."""

    def product(self, a, b, out) -> None:  # type: ignore[no-untyped-def]
        x, y = a.reshape(-1), out.reshape(-1)  # [1, K] or the transposed [K, 1]: K values
        with PARALLEL_LOCK:
            (gemv_rows if self.tb else gemv_columns)(b, x, y)


def _gemm_ok(spec: NodeSpec) -> bool:
    if any(t is None or t.rank != 2 for t in spec.inputs[:2]):
        return False
    has_c = len(spec.inputs) > 2 and spec.inputs[2] is not None and spec.attrs["beta"] != 0.0
    if has_c and spec.attrs["beta"] != 1.0 and 2 not in spec.constants:
        return False
    return epilogue_ok(spec, 3, 2)


def _gemm_cost(spec: NodeSpec) -> float:
    m, n = (int(d) for d in spec.outputs[0].shape)
    a = spec.inputs[0].shape
    k = int(a[0] if spec.attrs["transA"] else a[1])
    return 2.0 * m * n * k + 5000.0


def _schemes(fused: bool) -> tuple[Scheme, ...]:
    def when(applies):  # type: ignore[no-untyped-def]
        return (lambda spec: applies(spec) and epilogue_ok(spec, 3, 2)) if fused else applies

    return (
        Scheme("blas", lambda b, s: MatMulBlas(b), applies=when(lambda spec: True), cost=_blas_cost,
               doc="np.matmul into the output view (sgemm)"),
        Scheme("blocked", lambda b, s: MatMulBlocked(), cost=_blocked_cost,
               applies=when(lambda spec: all(t.rank >= 2 and t.numel() for t in spec.inputs[:2])),
               doc="numba i-k-j loop nest, K blocks, prange over row blocks"),
        Scheme("packed_simd", lambda b, s: matmul_packed.MatMulPacked(b),
               applies=when(matmul_packed.applies), cost=matmul_packed.cost,
               doc="register tiles on constant B packed once, A in place (no BLAS call)"),
        strassen.scheme(fused),
    )


def _gemv_ok(spec: NodeSpec) -> bool:
    return _gemm_ok(spec) and int(spec.outputs[0].shape[0]) == 1


def _gemv_cost(spec: NodeSpec) -> float:
    n, k = int(spec.outputs[0].shape[1]), int(spec.inputs[0].shape[1 - spec.attrs["transA"]])
    return 1.0 * n * k + 2000.0


GEMM = (Scheme("blas", lambda b, s: GemmBlas(b), applies=_gemm_ok, cost=_gemm_cost,
                doc="sgemm on transposed views, alpha/beta/C/activation in the epilogue"),
        Scheme("gemv", lambda b, s: GemmGemv(b), applies=_gemv_ok, cost=_gemv_cost,
               doc="one output row: matrix-vector product over the threads, then the epilogue"))

KERNELS = (
    KernelDef("MatMul", _schemes(False), since=1, dtypes=F32),
    KernelDef("FusedMatMul", _schemes(True), domain=FUSED_DOMAIN, since=1, dtypes=F32),
    KernelDef("Gemm", GEMM, since=7, dtypes=F32),
    KernelDef("FusedGemm", GEMM, domain=FUSED_DOMAIN, since=1, dtypes=F32),
)
