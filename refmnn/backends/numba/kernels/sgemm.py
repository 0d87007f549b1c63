"""BLAS sgemm called from inside Numba's parallel loops (the OpenMP layer's GEMM path).

Numba's ``np.dot`` needs SciPy's BLAS bindings, which refmnn does not depend on; NumPy's own
OpenBLAS exports ``cblas_sgemm`` (``scipy_cblas_sgemm64_`` in NumPy 2 wheels, 64-bit integers),
and so does MKL (``cblas_sgemm_64``; :func:`refmnn.backends.numba._blas.sgemm` picks one per
process). Its address is registered with LLVM under a fixed name (:func:`register`) and the kernels
declare it as an external function, so the compiled code links by name and stays cacheable.

:func:`gemm_panels` splits ``out[b] = a[b] @ b[b]`` into ``parts`` column or row panels per
batch item and runs each panel's sgemm (OpenBLAS held at one thread) and its fused epilogue
(:func:`.fused.epilogue_rows`) in one ``prange`` iteration: one parallel launch per product,
on the workers of Numba's threading layer -- no second thread pool spinning against them.
"""

from __future__ import annotations

from numba import njit, prange, types

from refmnn.backends.numba.kernels._common import PARALLEL_LOCK, PJIT
from refmnn.backends.numba.kernels.fused import epilogue_rows

SYMBOL = "refmnn_cblas_sgemm64"
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112

_i32, _i64, _f32 = types.int32, types.int64, types.float32
# pointers are passed as 64-bit integers (the same register as a pointer on every 64-bit ABI)
cblas_sgemm = types.ExternalFunction(SYMBOL, types.void(
    _i32, _i32, _i32, _i64, _i64, _i64, _f32, _i64, _i64, _i64, _i64, _f32, _i64, _i64))


def register(address: int) -> None:
    """Make ``SYMBOL`` resolve to the ILP64 ``cblas_sgemm`` at ``address``."""
    import llvmlite.binding as llvm

    llvm.add_symbol(SYMBOL, address)


def _panels(pa, pb, out, ta, tb, lda, ldb, m, n, k, batch, sa, sb, parts, by_cols,
            bias, z, has_b, has_z, b_cols, act, alpha, lo, hi):
    """``out[i] = op(a)[i] @ op(b)[i]`` for ``i < batch``: ``pa``, ``pb`` the addresses of the
    float32 operands (``sa``, ``sb`` element strides between batch items, 0 to broadcast), ``out``
    the flat C-contiguous ``[batch, m, n]`` result; ``parts`` panels per item, then the epilogue
    on each panel (``z`` flat and shaped like ``out``; the bias per row, or per column when
    ``b_cols``)."""
    pc = out.ctypes.data
    ya = out.reshape(batch, m, n)
    za = z.reshape(-1, n) if has_z else z.reshape(1, -1)
    for job in prange(batch * parts):
        item, part = job // parts, job % parts
        if by_cols:
            step = ((n + parts - 1) // parts + 15) // 16 * 16
            i0, i1, j0, j1 = 0, m, min(n, part * step), min(n, (part + 1) * step)
        else:
            step = (m + parts - 1) // parts
            i0, i1, j0, j1 = min(m, part * step), min(m, (part + 1) * step), 0, n
        if i1 <= i0 or j1 <= j0:
            continue
        # op(a) rows i0:i1 and op(b) columns j0:j1, as element offsets
        oa = item * sa + (i0 * lda if ta == NO_TRANS else i0)
        ob = item * sb + (j0 if tb == NO_TRANS else j0 * ldb)
        oc = item * m * n + i0 * n + j0
        cblas_sgemm(ROW_MAJOR, ta, tb, i1 - i0, j1 - j0, k, 1.0, pa + 4 * oa, lda,
                    pb + 4 * ob, ldb, 0.0, pc + 4 * oc, n)
        if has_b or has_z or act != 0:
            # without a residual ``za`` is [1, 1] and this slice empty: never read then
            epilogue_rows(ya[item], bias, za[item * m:(item + 1) * m], has_b, has_z, b_cols,
                          act, alpha, lo, hi, i0, i1, j0, j1)


gemm_panels = njit(**PJIT)(_panels)
__all__ = ["PARALLEL_LOCK", "cblas_sgemm", "gemm_panels", "register"]
