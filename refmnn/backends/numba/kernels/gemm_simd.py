"""Register-blocked products on the 8-lane vector type (:mod:`.simd`): the micro-tiles that
``gemm_1x1_simd`` and the Winograd schemes' ``*_simd`` variants compute with, and the batched
product of the latter.

A micro-tile computes ``y[i:i+R, j:j+8V] = w[i:i+R, :K] @ x[:K, j:j+8V]`` with its ``R x V``
accumulators held in registers through the whole sum over K, each step loading V vectors of
one row of x and broadcasting R weights, and stores the tile once at the end. ``w`` is a
C-contiguous 2-D float32 array; ``x`` and ``y`` are flat float32 arrays, with the tile's
operands at element offsets (``xo + c * xp + j``, ``yo + r * yp + j``: ``xp``, ``yp`` the row
pitches), so that one function serves a 1x1 convolution's planes and the slices of a batch.

* :func:`tile4x24` -- twelve accumulators, 12 FMAs for 7 loads per step: the main tile.
* :func:`tile4x16`, :func:`tile4x8` -- the columns left after the 24-wide tiles (eight and
  four accumulators; a lone 1 x 8 chain is bound by the FMA's latency: ~4 cycles a step).
* :func:`tile1x8` -- the rows left after the blocks of four.

:func:`batched_product` runs ``y[b] = w[b] @ x[b]`` over a batch whose columns are a multiple
of 8 -- the Winograd schemes' ``a*a`` products ``M_i = U_i @ V_i``, whose tile counts they pad
to that -- in tasks of ``GROUP`` rows by ``BLOCK`` columns shared out over the threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.numba.kernels._common import JIT, PJIT
from refmnn.backends.numba.kernels.simd import LANES, vfma, vload, vsplat, vstore

ROWS = 4  # rows per micro-tile
PIXELS = 24  # columns of the main micro-tile: three vectors of 8
GROUP = 16  # rows per task (four micro-tile rows)
BLOCK = 192  # columns per task (eight main micro-tiles)


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
def tile4x24(w, x, xo, xp, y, yo, yp, i, j, k):
    """``y[i:i+4, j:j+24] = w[i:i+4, :k] @ x[:k, j:j+24]``: four rows of three vectors."""
    a00 = a01 = a02 = a10 = a11 = a12 = vsplat(np.float32(0))
    a20 = a21 = a22 = a30 = a31 = a32 = vsplat(np.float32(0))
    for c in range(k):
        base = xo + c * xp + j
        x0, x1, x2 = vload(x, base), vload(x, base + 8), vload(x, base + 16)
        a00, a01, a02 = fma3(vsplat(w[i, c]), x0, x1, x2, a00, a01, a02)
        a10, a11, a12 = fma3(vsplat(w[i + 1, c]), x0, x1, x2, a10, a11, a12)
        a20, a21, a22 = fma3(vsplat(w[i + 2, c]), x0, x1, x2, a20, a21, a22)
        a30, a31, a32 = fma3(vsplat(w[i + 3, c]), x0, x1, x2, a30, a31, a32)
    o = yo + i * yp + j
    store3(y, o, a00, a01, a02)
    store3(y, o + yp, a10, a11, a12)
    store3(y, o + 2 * yp, a20, a21, a22)
    store3(y, o + 3 * yp, a30, a31, a32)


@njit(inline="always", **JIT)
def tile4x16(w, x, xo, xp, y, yo, yp, i, j, k):
    """``y[i:i+4, j:j+16] = w[i:i+4, :k] @ x[:k, j:j+16]``: four rows of two vectors."""
    a00 = a01 = a10 = a11 = a20 = a21 = a30 = a31 = vsplat(np.float32(0))
    for c in range(k):
        base = xo + c * xp + j
        x0, x1 = vload(x, base), vload(x, base + 8)
        w0, w1, w2, w3 = vsplat(w[i, c]), vsplat(w[i + 1, c]), vsplat(w[i + 2, c]), \
            vsplat(w[i + 3, c])
        a00, a01 = vfma(w0, x0, a00), vfma(w0, x1, a01)
        a10, a11 = vfma(w1, x0, a10), vfma(w1, x1, a11)
        a20, a21 = vfma(w2, x0, a20), vfma(w2, x1, a21)
        a30, a31 = vfma(w3, x0, a30), vfma(w3, x1, a31)
    o = yo + i * yp + j
    vstore(y, o, a00)
    vstore(y, o + 8, a01)
    vstore(y, o + yp, a10)
    vstore(y, o + yp + 8, a11)
    vstore(y, o + 2 * yp, a20)
    vstore(y, o + 2 * yp + 8, a21)
    vstore(y, o + 3 * yp, a30)
    vstore(y, o + 3 * yp + 8, a31)


@njit(inline="always", **JIT)
def tile4x8(w, x, xo, xp, y, yo, yp, i, j, k):
    """``y[i:i+4, j:j+8] = w[i:i+4, :k] @ x[:k, j:j+8]``: four rows of one vector."""
    a0 = a1 = a2 = a3 = vsplat(np.float32(0))
    for c in range(k):
        x0 = vload(x, xo + c * xp + j)
        a0 = vfma(vsplat(w[i, c]), x0, a0)
        a1 = vfma(vsplat(w[i + 1, c]), x0, a1)
        a2 = vfma(vsplat(w[i + 2, c]), x0, a2)
        a3 = vfma(vsplat(w[i + 3, c]), x0, a3)
    o = yo + i * yp + j
    vstore(y, o, a0)
    vstore(y, o + yp, a1)
    vstore(y, o + 2 * yp, a2)
    vstore(y, o + 3 * yp, a3)


@njit(inline="always", **JIT)
def tile1x8(w, x, xo, xp, y, yo, yp, i, j, k):
    """``y[i, j:j+8] = w[i, :k] @ x[:k, j:j+8]``."""
    acc = vsplat(np.float32(0))
    for c in range(k):
        acc = vfma(vsplat(w[i, c]), vload(x, xo + c * xp + j), acc)
    vstore(y, yo + i * yp + j, acc)


@njit(inline="always", **JIT)
def block(w, x, xo, xp, y, yo, yp, i0, i1, j0, j1, k):
    """``y[i0:i1, j0:j] = w[i0:i1] @ x[:, j0:j]`` for the largest ``j <= j1`` with ``j - j0`` a
    multiple of 8, in micro-tiles: the rows in blocks of four (24-wide tiles, then one 16- or
    8-wide tile for the columns left), then the rows left one at a time. Returns ``j``."""
    whole = i0 + (i1 - i0) // ROWS * ROWS
    j = j0
    while j + PIXELS <= j1:
        for i in range(i0, whole, ROWS):
            tile4x24(w, x, xo, xp, y, yo, yp, i, j, k)
        j += PIXELS
    if j + 16 <= j1:
        for i in range(i0, whole, ROWS):
            tile4x16(w, x, xo, xp, y, yo, yp, i, j, k)
        j += 16
    elif j + LANES <= j1:
        for i in range(i0, whole, ROWS):
            tile4x8(w, x, xo, xp, y, yo, yp, i, j, k)
        j += LANES
    for i in range(whole, i1):
        for jv in range(j0, j, LANES):
            tile1x8(w, x, xo, xp, y, yo, yp, i, jv, k)
    return j


@njit(**PJIT)
def batched_product(w, x, y):
    """``y[b] = w[b] @ x[b]`` for every ``b``: ``w [B, M, K]``, ``x [B, K, N]`` and ``y [B, M,
    N]`` C-contiguous float32, N a multiple of 8. Tasks of ``GROUP`` rows by ``BLOCK`` columns
    of one product, shared out over the threads; within a task each strip of x is read by the
    task's row blocks in turn (from L1 after the first)."""
    batch, m, k = w.shape
    n = x.shape[2]
    xf, yf = x.reshape(-1), y.reshape(-1)
    groups = (m + GROUP - 1) // GROUP
    blocks = (n + BLOCK - 1) // BLOCK
    for task in prange(batch * groups * blocks):
        b = task // (groups * blocks)
        i0 = (task // blocks) % groups * GROUP
        j0 = task % blocks * BLOCK
        block(w[b], xf, b * k * n, n, yf, b * m * n, n, i0, min(m, i0 + GROUP), j0,
              min(n, j0 + BLOCK), k)


__all__ = ["BLOCK", "GROUP", "PIXELS", "ROWS", "batched_product", "block", "fma3", "store3",
           "tile1x8", "tile4x16", "tile4x24", "tile4x8"]
