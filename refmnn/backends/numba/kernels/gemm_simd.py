"""Register-blocked products on the 8-lane vector type (:mod:`.simd`): the micro-tiles that
``gemm_1x1_simd`` and the Winograd schemes' ``*_simd`` variants compute with, and the batched
product of the latter.

A micro-tile computes ``y[i:i+R, j:j+8V] = w[i:i+R, :K] @ x[:K, j:j+8V]`` with its ``R x V``
accumulators held in registers through the whole sum over K, each step loading V vectors of
one row of x and broadcasting R weights, and stores the tile once at the end. ``w``, ``x`` and
``y`` are flat float32 arrays, with the tile's operands at element offsets: weight ``(r, c)``
at ``wo + r * wr + c * wc`` (``wr = k, wc = 1`` for w's rows as they are; ``wr = 1, wc = 4``
for weights packed four rows at a time, as ``gemm_1x1_simd`` keeps them), input ``(c, j)`` at
``xo + c * xp + j`` and output ``(r, j)`` at ``yo + r * yp + j`` (``xp``, ``yp`` the row
pitches). One function serves the slices of a batch and a 1x1 convolution's packed operands.
The weights are read with :func:`.simd.vbroadcast`: with a plain ``w[q]`` (Numba's
negative-index fix-up on every read) LLVM spilled the 4 x 24 tile's accumulators to the stack
on every step of a packed-weights product, which ran 1.7-2x slower.

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
from refmnn.backends.numba.kernels.fused import CLIP, NONE, RELU
from refmnn.backends.numba.kernels.simd import (LANES, vbroadcast, vclamp, vfma, vload, vrelu,
                                                vsplat, vstore)

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
def tile1x8(w, wo, wc, x, xo, xp, y, yo, j, k):
    """``y[j:j+8] = w[:k] @ x[:k, j:j+8]``: one row of one vector."""
    acc = vsplat(np.float32(0))
    for c in range(k):
        acc = vfma(vbroadcast(w, wo + c * wc), vload(x, xo + c * xp + j), acc)
    vstore(y, yo + j, acc)


@njit(inline="always", **JIT)
def block(w, wo, x, xo, xp, y, yo, yp, i0, i1, j0, j1, k):
    """``y[i0:i1, j0:j] = w[i0:i1] @ x[:, j0:j]`` (w's rows contiguous, ``k`` long, from ``wo``
    on) for the largest ``j <= j1`` with ``j - j0`` a multiple of 8, in micro-tiles: the rows in
    blocks of four (24-wide tiles, then one 16- or 8-wide tile for the columns left), then the
    rows left one at a time. Returns ``j``."""
    whole = i0 + (i1 - i0) // ROWS * ROWS
    j = j0
    while j + PIXELS <= j1:
        for i in range(i0, whole, ROWS):
            tile4x24(w, wo + i * k, k, 1, x, xo, xp, y, yo + i * yp, yp, j, k, _NO_BIAS, 0,
                     False, NONE, _ZERO, _ZERO)
        j += PIXELS
    if j + 16 <= j1:
        for i in range(i0, whole, ROWS):
            tile4x16(w, wo + i * k, k, 1, x, xo, xp, y, yo + i * yp, yp, j, k, _NO_BIAS, 0,
                     False, NONE, _ZERO, _ZERO)
        j += 16
    elif j + LANES <= j1:
        for i in range(i0, whole, ROWS):
            tile4x8(w, wo + i * k, k, 1, x, xo, xp, y, yo + i * yp, yp, j, k, _NO_BIAS, 0,
                    False, NONE, _ZERO, _ZERO)
        j += LANES
    for i in range(whole, i1):
        for jv in range(j0, j, LANES):
            tile1x8(w, wo + i * k, 1, x, xo, xp, y, yo + i * yp, jv, k)
    return j


@njit(**PJIT)
def batched_product(w, x, y):
    """``y[b] = w[b] @ x[b]`` for every ``b``: ``w [B, M, K]``, ``x [B, K, N]`` and ``y [B, M,
    N]`` C-contiguous float32, N a multiple of 8. Tasks of ``GROUP`` rows by ``BLOCK`` columns
    of one product, shared out over the threads; within a task each strip of x is read by the
    task's row blocks in turn (from L1 after the first)."""
    batch, m, k = w.shape
    n = x.shape[2]
    wf, xf, yf = w.reshape(-1), x.reshape(-1), y.reshape(-1)
    groups = (m + GROUP - 1) // GROUP
    blocks = (n + BLOCK - 1) // BLOCK
    for task in prange(batch * groups * blocks):
        b = task // (groups * blocks)
        i0 = (task // blocks) % groups * GROUP
        j0 = task % blocks * BLOCK
        block(wf, b * m * k, xf, b * k * n, n, yf, b * m * n, n, i0, min(m, i0 + GROUP), j0,
              min(n, j0 + BLOCK), k)


__all__ = ["BLOCK", "GROUP", "PIXELS", "ROWS", "batched_product", "block", "fma3", "store3",
           "tile1x8", "tile4x16", "tile4x24", "tile4x8"]
