"""Register-blocked products on the 8-lane vector type (:mod:`.simd`): the micro-tiles that
``gemm_1x1_simd`` and the Winograd schemes' ``*_simd`` variants compute with, and the batched
product of the latter.

A micro-tile computes ``y[i:i+R, j:j+8V] = w[i:i+R, :K] @ x[:K, j:j+8V]`` with its ``R x V``
accumulators held in registers through the whole sum over K, each step loading V vectors of
one row of x and broadcasting R weights, and stores the tile once at the end. ``w``, ``x`` and
``y`` are flat float32 arrays, with the tile's operands at element offsets: weight ``(r, c)``
at ``wo + r * wr + c * wc`` (``wr = 1, wc = 4`` for weights packed four rows at a time, as
``gemm_1x1_simd`` and the Winograd variants keep them), input ``(c, j)`` at ``xo + c * xp +
j`` and output ``(r, j)`` at ``yo + r * yp + j`` (``xp``, ``yp`` the row pitches). The
weights are read with :func:`.simd.vbroadcast`: with a plain ``w[q]`` (Numba's negative-index
fix-up on every read) LLVM spilled the 4 x 24 tile's accumulators to the stack on every step of
a packed-weights product, which ran 1.7-2x slower.

* :func:`tile4x24` -- twelve accumulators, 12 FMAs for 7 loads per step: the main tile.
* :func:`tile4x16`, :func:`tile4x8` -- the columns left after the 24-wide tiles (eight and
  four accumulators; a lone 1 x 8 chain is bound by the FMA's latency: ~4 cycles a step).
* :func:`packed_tile` -- one of the three, by width, on weights packed four rows at a time.

:func:`packed_batched_product` runs ``y[b] = w[b] @ x[b]`` over a batch whose columns are a
multiple of 8 -- the Winograd schemes' ``a*a`` products ``M_i = U_i @ V_i``, whose tile counts
they pad to that -- with each ``w[b]`` packed four rows at a time (:func:`pack_rows`, once, in
the scheme's ``prepare``), in tasks of ``GROUP`` rows by ``BLOCK`` columns shared out over the
threads. Before, the products read U's rows as they are (four weight streams a step, ``wr =
K``): at 256 and 512 channels that ran 2-4x slower than the sgemms, and the variants applied
only up to 128 channels. The products alone, 2 threads, medians of 3 x 20 calls (us, rows as
they are / packed / ``np.matmul``'s sgemms; a loaded machine):

    ==========================  ======================  ======================
    C -> OC, columns, items     times                   layer
    ==========================  ======================  ======================
    16 -> 64, 200, 36           199 / 190 / 297         SqueezeNet @55, F(4,3)
    32 -> 128, 56, 36           133 / 166 / 261         SqueezeNet @27
    64 -> 256, 16, 36           231 / 206 / 314         SqueezeNet @13
    64 -> 64, 200, 36           755 / 722 / 937         ResNet-18 @56
    128 -> 128, 56, 36          889 / 783 / 972         ResNet-18 @28
    256 -> 256, 16, 36          1430 / 1002 / 1607      ResNet-18 @14, F(4,3)
    256 -> 256, 56, 16          5771 / 867 / 1420       ResNet-18 @14, F(2,3)
    512 -> 512, 16, 16          6169 / 1964 / 3319      ResNet-18 @7, F(2,3)
    ==========================  ======================  ======================
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.numba.kernels._common import JIT, PJIT
from refmnn.backends.numba.kernels.fused import CLIP, NONE, RELU
from refmnn.backends.numba.kernels.simd import (vbroadcast, vclamp, vfma, vload, vrelu, vsplat,
                                                vstore)

ROWS = 4  # rows per micro-tile
PIXELS = 24  # columns of the main micro-tile: three vectors of 8
GROUP = 16  # rows per task (four micro-tile rows)
BLOCK = 192  # columns per task (eight main micro-tiles)


_NO_BIAS = np.zeros(4, np.float32)  # the bias argument of a plain product (never read)
_ZERO = np.float32(0)


@njit(inline="always", **JIT)
def _start(b, o, has_b):
    """An accumulator's start: ``b[o]`` in every lane (a row's bias, added first), else 0 (also
    for the rows of a tile past the end of ``b``, which the caller discards)."""
    return vsplat(b[o] if has_b and o < b.shape[0] else np.float32(0))


@njit(inline="always", **JIT)
def activate8(a, act, lo, hi):
    """A finished accumulator's activation, in registers: Relu, Clip to ``[lo, hi]``, or none
    (the codes of :mod:`.fused`; others are the caller's to apply)."""
    if act == RELU:
        return vrelu(a)
    if act == CLIP:
        return vclamp(a, vsplat(lo), vsplat(hi))
    return a


@njit(inline="always", **JIT)
def _store3(y, o, a0, a1, a2, act, lo, hi):
    """:func:`store3` of the three accumulators activated (:func:`activate8`)."""
    store3(y, o, activate8(a0, act, lo, hi), activate8(a1, act, lo, hi),
           activate8(a2, act, lo, hi))


@njit(inline="always", **JIT)
def fma3(w, x0, x1, x2, a0, a1, a2):
    """One row of a 24-wide micro-tile: ``a += w * x`` on its three vectors."""
    return vfma(w, x0, a0), vfma(w, x1, a1), vfma(w, x2, a2)


@njit(inline="always", **JIT)
def store3(y, o, a0, a1, a2):
    """One row of a 24-wide micro-tile, 24 values from ``y[o]`` on."""
    vstore(y, o, a0)
    vstore(y, o + 8, a1)
    vstore(y, o + 16, a2)


@njit(inline="always", **JIT)
def tile4x24(w, wo, wr, wc, x, xo, xp, y, yo, yp, j, k, b, bo, has_b, act, lo, hi):
    """``y[0:4, j:j+24] = act(w[0:4, :k] @ x[:k, j:j+24] + b[bo:bo+4])`` (rows of y from
    ``yo`` on; see :func:`_start`, :func:`activate8`): four rows of three vectors."""
    a00 = a01 = a02 = _start(b, bo, has_b)
    a10 = a11 = a12 = _start(b, bo + 1, has_b)
    a20 = a21 = a22 = _start(b, bo + 2, has_b)
    a30 = a31 = a32 = _start(b, bo + 3, has_b)
    for c in range(k):
        base = xo + c * xp + j
        x0, x1, x2 = vload(x, base), vload(x, base + 8), vload(x, base + 16)
        q = wo + c * wc
        a00, a01, a02 = fma3(vbroadcast(w, q), x0, x1, x2, a00, a01, a02)
        a10, a11, a12 = fma3(vbroadcast(w, q + wr), x0, x1, x2, a10, a11, a12)
        a20, a21, a22 = fma3(vbroadcast(w, q + 2 * wr), x0, x1, x2, a20, a21, a22)
        a30, a31, a32 = fma3(vbroadcast(w, q + 3 * wr), x0, x1, x2, a30, a31, a32)
    o = yo + j
    _store3(y, o, a00, a01, a02, act, lo, hi)
    _store3(y, o + yp, a10, a11, a12, act, lo, hi)
    _store3(y, o + 2 * yp, a20, a21, a22, act, lo, hi)
    _store3(y, o + 3 * yp, a30, a31, a32, act, lo, hi)


@njit(inline="always", **JIT)
def tile4x16(w, wo, wr, wc, x, xo, xp, y, yo, yp, j, k, b, bo, has_b, act, lo, hi):
    """:func:`tile4x24`'s ``y[0:4, j:j+16]``: four rows of two vectors."""
    a00 = a01 = _start(b, bo, has_b)
    a10 = a11 = _start(b, bo + 1, has_b)
    a20 = a21 = _start(b, bo + 2, has_b)
    a30 = a31 = _start(b, bo + 3, has_b)
    for c in range(k):
        base = xo + c * xp + j
        x0, x1 = vload(x, base), vload(x, base + 8)
        q = wo + c * wc
        w0, w1 = vbroadcast(w, q), vbroadcast(w, q + wr)
        w2, w3 = vbroadcast(w, q + 2 * wr), vbroadcast(w, q + 3 * wr)
        a00, a01 = vfma(w0, x0, a00), vfma(w0, x1, a01)
        a10, a11 = vfma(w1, x0, a10), vfma(w1, x1, a11)
        a20, a21 = vfma(w2, x0, a20), vfma(w2, x1, a21)
        a30, a31 = vfma(w3, x0, a30), vfma(w3, x1, a31)
    o = yo + j
    vstore(y, o, activate8(a00, act, lo, hi))
    vstore(y, o + 8, activate8(a01, act, lo, hi))
    vstore(y, o + yp, activate8(a10, act, lo, hi))
    vstore(y, o + yp + 8, activate8(a11, act, lo, hi))
    vstore(y, o + 2 * yp, activate8(a20, act, lo, hi))
    vstore(y, o + 2 * yp + 8, activate8(a21, act, lo, hi))
    vstore(y, o + 3 * yp, activate8(a30, act, lo, hi))
    vstore(y, o + 3 * yp + 8, activate8(a31, act, lo, hi))


@njit(inline="always", **JIT)
def tile4x8(w, wo, wr, wc, x, xo, xp, y, yo, yp, j, k, b, bo, has_b, act, lo, hi):
    """:func:`tile4x24`'s ``y[0:4, j:j+8]``: four rows of one vector."""
    a0, a1 = _start(b, bo, has_b), _start(b, bo + 1, has_b)
    a2, a3 = _start(b, bo + 2, has_b), _start(b, bo + 3, has_b)
    for c in range(k):
        x0 = vload(x, xo + c * xp + j)
        q = wo + c * wc
        a0 = vfma(vbroadcast(w, q), x0, a0)
        a1 = vfma(vbroadcast(w, q + wr), x0, a1)
        a2 = vfma(vbroadcast(w, q + 2 * wr), x0, a2)
        a3 = vfma(vbroadcast(w, q + 3 * wr), x0, a3)
    o = yo + j
    vstore(y, o, activate8(a0, act, lo, hi))
    vstore(y, o + yp, activate8(a1, act, lo, hi))
    vstore(y, o + 2 * yp, activate8(a2, act, lo, hi))
    vstore(y, o + 3 * yp, activate8(a3, act, lo, hi))


@njit(inline="always", **JIT)
def packed_tile(w, wo, x, xo, xp, y, yo, yp, width, k, b, bo, has_b, act, lo, hi):
    """The four rows of weights packed from ``wo`` (``[K][4]``, :func:`pack_rows`) times
    ``width`` (24, 16 or 8) columns of x from ``xo``: :func:`tile4x24`, :func:`tile4x16` or
    :func:`tile4x8`, the bias and activation as they take them."""
    if width == PIXELS:
        tile4x24(w, wo, 1, ROWS, x, xo, xp, y, yo, yp, 0, k, b, bo, has_b, act, lo, hi)
    elif width == 16:
        tile4x16(w, wo, 1, ROWS, x, xo, xp, y, yo, yp, 0, k, b, bo, has_b, act, lo, hi)
    else:
        tile4x8(w, wo, 1, ROWS, x, xo, xp, y, yo, yp, 0, k, b, bo, has_b, act, lo, hi)


@njit(**JIT)  # called, not inlined: see _common (Inlining)
def _block_row(wf, wo, xf, xo, yf, o, n, k, j0, j1):
    """One block of four rows of a product (:func:`packed_batched_product`), columns ``j0 ..
    j1 - 1``: 24-wide tiles, then one 8 or 16 wide, from one call site of the tiles."""
    for j in range(j0, j1, PIXELS):
        packed_tile(wf, wo, xf, xo + j, n, yf, o + j, n, min(PIXELS, j1 - j), k, _NO_BIAS, 0,
                    False, NONE, _ZERO, _ZERO)


@njit(**PJIT)
def packed_batched_product(wp, x, y, n):
    """``y[b] = w[b] @ x[b]`` for every ``b``, the weights packed four rows at a time: ``wp [B,
    M/4, K, 4]`` (row ``4q + i`` of ``w[b]`` at ``wp[b, q, :, i]``, as :func:`pack_rows`
    makes it); ``x [B, >= K * n]`` and ``y [B, >= M * n]`` hold each ``x[b] [K, n]`` and
    ``y[b] [M, n]`` row by row from the start of row ``b`` (rows may be longer: the Winograd
    schemes space them apart, :func:`.conv_winograd.slab`); C-contiguous float32, M a multiple
    of 4 and n of 8. Tasks of ``GROUP`` rows by ``BLOCK`` columns of one product, shared out
    over the threads; within a task each block of four rows runs along the columns (its 4 x K
    weights from L1 after the first tile), the four weights a step broadcasts adjacent in
    memory."""
    batch, blocks, k, _ = wp.shape
    xs, ys = x.shape[1], y.shape[1]
    wf, xf, yf = wp.reshape(-1), x.reshape(-1), y.reshape(-1)
    per = GROUP // ROWS
    groups = (blocks + per - 1) // per
    cols = (n + BLOCK - 1) // BLOCK
    for task in prange(batch * groups * cols):
        b = task // (groups * cols)
        g = task // cols % groups
        j0 = task % cols * BLOCK
        j1 = min(n, j0 + BLOCK)
        for r in range(g * per, min(blocks, (g + 1) * per)):
            _block_row(wf, (b * blocks + r) * k * ROWS, xf, b * xs, yf, b * ys + r * ROWS * n,
                       n, k, j0, j1)


def pack_rows(w: np.ndarray, out: np.ndarray) -> None:
    """``w [B, M, K]`` into ``out [B, ceil(M/4), K, 4]`` (:func:`packed_batched_product`'s
    layout), zeros for the rows past M."""
    out[...] = 0
    for i in range(ROWS):
        rows = w[:, i::ROWS]
        out[:, :rows.shape[1], :, i] = rows


__all__ = ["BLOCK", "GROUP", "PIXELS", "ROWS", "fma3", "pack_rows", "packed_batched_product",
           "packed_tile", "store3", "tile4x16", "tile4x24", "tile4x8"]
