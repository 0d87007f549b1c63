"""Winograd convolution schemes of the numba Conv/FusedConv kernels (see :mod:`.conv` for the
notation: input ``[N, C, H, W]``, weights ``[OC, C, 3, 3]``, output ``[N, OC, OH, OW]``).

``winograd_f23`` -- 3x3, stride 1, dilation 1, one group: Winograd F(2x2, 3x3). The weights are
    transformed once in ``prepare`` into a STATIC buffer ``U [16, OC, C]`` (``G g G^T``); ``run``
    transforms 4x4 input tiles (``B^T d B``) into a WORKSPACE ``V [16, C, tiles]``, does 16 sgemms
    ``M_i = U_i @ V_i`` and transforms back (``A^T m A``) with the bias, a FusedConv residual
    shaped like the output and the activation (a broadcast residual goes to the epilogue pass,
    which then activates too). End to end, 2 threads, 30-60 interleaved runs in one process,
    this fusion together with :func:`winograd43_output`'s whole-plane loops against the
    previous output transform and epilogue pass: SqueezeNet 1.1 6.05 -> 5.49 ms (8 layers),
    ResNet-18 24.06 -> 23.18 ms (10 layers), outputs equal. It trades 36 multiplies
    per output 2x2 tile for 16. Applies only when the weights are known in ``prepare``
    (``spec.constants[1]``). Cost: the Winograd formula below with ``a = 4``.
``winograd_f43`` -- same conditions: Winograd F(4x4, 3x3) (Lavin & Gray's matrices, points 0,
    +-1, +-2, infinity), 6x6 input tiles overlapping by 2, ``U [36, OC, C]`` transformed in float64
    in ``prepare``, 36 sgemms. 144 multiplies per output 4x4 tile become 36 (4x fewer, against
    2.25x for F(2,3)), and the transforms touch 36 elements per 16 outputs (F(2,3): 16 per 4).
    The price: U is 4x the size of the weights (F(2,3): 1.8x), which every image streams from
    memory -- with few tiles (7x7 outputs: 4 tiles, 49 of their 64 outputs used) the sgemms are
    ``[OC, C] @ [C, 4]``, bound by that stream -- and larger rounding errors (the transforms
    have entries up to 8 and 1/24): on ResNet-18's layers with N(0, 1) inputs and weights, against
    a float64 convolution, relative L2 error 1.1e-6 .. 2.9e-6 and max |error| / max |output|
    <= 9.7e-6, where im2col_gemm and winograd_f23 stay <= 5e-7 and <= 7.1e-7. ResNet-18's
    output still matches the reference to relative L2 4e-7.

``winograd_f23_simd``, ``winograd_f43_simd`` -- the same on a CPU with AVX2 and FMA: U packed
    four output channels at a time in ``prepare`` (:func:`.gemm_simd.pack_rows`), V's and M's
    rows padded to a multiple of 8 tiles (the padding columns of V zeroed, those of M never
    read; M's channels to a multiple of 4) and the ``a*a`` products in the register tiles of
    :mod:`.gemm_simd` (:func:`.gemm_simd.packed_batched_product`, one parallel loop over all of
    them) instead of ``a*a`` sgemm calls, which pay a call and the packing of U_i per product:
    at 16-56 columns most of the work (the products alone: :mod:`.gemm_simd`'s table). Until U
    was packed, the register tiles read its rows as they are and lost to the sgemms above 128
    input channels, where the variants did not apply. The whole kernels, 2 threads, the least
    of 4 medians of 10 calls alternating (us, im2col_gemm / winograd_f23 / winograd_f43 /
    winograd_f23_simd / winograd_f43_simd; the costs' choice marked, then before this):

    =============  ======================================  ==========================
    layer          times                                   chosen (before)
    =============  ======================================  ==========================
    512 @ 7x7      2881 / 2531 / 4796 / *1141* / 2789      f23_simd (winograd_f23)
    256 @ 14x14    2457 / 995 / 1470 / 1153 / *816*        f43_simd (winograd_f23)
    128 @ 28x28    2668 / 1028 / 771 / 922 / *788*         f43_simd (f43_simd)
    64 @ 56x56     2688 / 1180 / 827 / 1061 / *739*        f43_simd (f43_simd)
    16->64 @ 55    693 / 464 / 357 / 377 / *281*           f43_simd (f43_simd)
    64->256 @ 13   604 / 323 / 363 / 294 / *272*           f43_simd (f43_simd)
    =============  ======================================  ==========================

    ResNet-18 end to end, 2 threads, alternating processes, medians of 50 runs: 40.32 -> 33.30
    ms; SqueezeNet 7.21 -> 7.06 ms. Cost: the Winograd formula with the products on the padded
    tiles at ``SIMD_FACTOR`` (0.85) and no sgemm calls or packing.

    V and M are ``a*a`` slabs each, ``[a*a, slab]``: channel ``c``'s tiles are the row ``c *
    pitch ..`` of every slab, and the slabs are spaced an odd number of cache lines apart
    (:func:`slab`). The input transform writes one channel's row in all ``a*a`` slabs at once,
    the output transform reads six (F(4,3)) of one channel's rows at once; packed back to back,
    ``[a*a, C, pitch]``, the slabs were ``C * pitch * 4`` bytes apart, a multiple of 4096 in
    many layers (64 @ 13x13, 128 @ 28x28, 256 @ 14x14: every slab's row in the same set of the
    64-set L1), so those rows evicted each other. The input transform alone, hot, 2 threads:
    64 @ 13x13 68 -> 37 us, 128 @ 28x28 259 -> 148-159 us, 16 @ 55x55 unchanged. Each
    channel's padding columns are zeroed by the input transform too (:func:`zero_padding`),
    where NumPy's ``fill`` of the strided slice ``v[:, :, tiles:]`` had cost 67 us at 64 @
    56x56. The kernel before and after, 2 threads, inputs cycling over 8 planes, medians of 300
    calls alternating (us): 16 -> 64 @ 55 539 -> 527, 32 -> 128 @ 27 412 -> 381, 48 -> 192 @
    13 255 -> 250, 64 -> 256 @ 13 323 -> 285, 64 @ 56 1493 -> 1449, 128 @ 28 1162 -> 1106,
    256 @ 14 1519 -> 1411, 512 @ 7 (F(2,3)) 1580 -> 1506. Whole models, sessions with either
    kernel alternating in one process, outputs bit-equal: SqueezeNet 1.1 7.44 -> 7.18 ms
    (0.965), ResNet-18 28.78 -> 27.53 (0.957); the spacing alone (against the new kernel with
    the slabs back to back) 0.975 and 0.984.

Winograd cost, F(m x m, 3x3) with ``a = m + 2`` and ``tiles = ceil(OH/m) * ceil(OW/m)``::

    N * (2 * a*a * OC * C * tiles16                the sgemms (whole tiles, border waste included;
                                                   tiles16: tiles rounded up to 16, the columns
                                                   an sgemm computes at a time, conv_base.py)
         + 60 * a*a * (C + OC) * tiles             the input and output transforms, per element
         + 20 * a*a * OC * C                       reading U, once per image
         + 40 * a*a * OC * C                       the sgemms packing each U_i (GEMM_PACK,
                                                   conv_base.py; not in the *_simd variants)
         + 2 * 2e5)                                the sgemm calls

The two coefficients were fitted (least squares, in the units of ``conv._im2col_cost``, whose own
scale was fitted to its measured times) to the times below, measured on a shared 2-core machine:
2 threads, N = 1, stride 1, pads 1, C = OC, median of >= 21 interleaved runs in one process,
then the median of 10 such processes (ms; load from other users moved single runs by up to 50%):

    ===========  ===========  ============  ============  ======================
    layer        im2col_gemm  winograd_f23  winograd_f43  chosen by the costs
    ===========  ===========  ============  ============  ======================
    64 @ 56x56   4.05         4.48          1.69          winograd_f43
    128 @ 28x28  3.36         2.04          1.42          winograd_f43
    256 @ 14x14  3.37         2.11          1.88          winograd_f43
    512 @ 7x7    3.99         3.92          3.94          winograd_f23 (below)
    16->64 @ 55  0.47         0.57          0.24          winograd_f43 (see below)
    ===========  ===========  ============  ============  ======================

At 7x7 the three were tied within the noise (each won some runs; im2col_gemm two of the three
most loaded ones). The fit gave 17 for U's coefficient (at the fitted scale, 20 units are about
0.3 ns per 4-byte element, 13 GB/s); 20 broke the tie towards im2col_gemm, which streams 4x
less weight memory than F(4,3) and keeps no transformed copy of the weights. (That fit predates
the rounding of the sgemms' columns to 16, which now prices F(2,3) below im2col_gemm at 512 @
7x7 -- faster since, as measured in ResNet-18: ``GEMM_COLUMNS`` in :mod:`.conv_base` -- and
leaves every other choice in the zoo as it was.) The transform
coefficient is shared by both schemes: measured alone, either scheme's transforms took 0.6 to
4 ns per element, the most on the smallest planes, where each parallel loop has little work to
share out. The fit gave 84 units (about 1.3 ns per element); that priced F(4,3) above
im2col_gemm on SqueezeNet's 16 -> 64 channel layers at 55x55 (few input channels, so the
transforms weigh more against the GEMM), where F(4,3) measured 2x faster (bench/test_schemes.py,
``conv3x3_16to64_55``, 2 threads, medians of 20: the last row, C != OC). 60 units orders all
five layers as measured and keeps every choice of the first four.

Since then both Winograd kernels changed (fused output transforms, whole-plane loops), and on a
Zen 3 EPYC (2026-11-26) the 256 @ 14x14 row measured 2.30 / 1.17 / 1.65 ms: F(4,3)'s 36 sgemms
of 16 columns each pack a 256 x 256 U_i, and that packing, which the formula above left out,
outweighs the multiplies it saves. The packing term (``GEMM_PACK``, also in ``im2col_gemm``'s
and ``im2col_s2``'s costs for their weights) now chooses F(2,3) there; the other rows' choices
stand.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from refmnn.backends.base import NodeSpec, Storage
from refmnn.backends.numba.kernels._common import JIT, PARALLEL_LOCK, PJIT, Bound, BoundRun, Call
from refmnn.backends.numba.kernels.conv_base import (GEMM_CALL, GEMM_PACK, ConvBase,
                                                      conv_direct, finite_constant_weights,
                                                      gemm_columns, is_3x3_s1)
from refmnn.backends.numba.kernels.fused import NONE, activate_row
from refmnn.backends.numba.kernels.gemm_simd import ROWS, pack_rows, packed_batched_product
from refmnn.backends.numba.kernels.simd import LANES, native

WINOGRAD_TRANSFORM = 60.0  # per element of V or M written / read by the tile transforms
WINOGRAD_U_READ = 20.0  # per element of U streamed by the sgemms (once per image)
SIMD_FACTOR = 0.85  # their products' multiply-adds, priced against the sgemms' (as gemm_1x1_simd)

# ---------------------------------------------------------------------------------------------
# Winograd F(2x2, 3x3)

# G (4x3), B^T (4x4), A^T (2x4) of F(2, 3)
WG = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float64)


@njit(**JIT)  # once per channel: see _common (Inlining)
def zero_padding(v, start, stop):
    """Zero columns ``start .. stop - 1`` of every slab of ``v``: a channel's padding columns,
    which the products multiply (their results are never read) and which must not hold NaNs."""
    for i in range(v.shape[0]):
        for t in range(start, stop):
            v[i, t] = 0


@njit(inline="always", **JIT)
def load_tile_rows(rows, src, top, h, lo, hi, pl):
    """Copy input rows ``top .. top + len(rows) - 1`` of the plane ``src`` into ``rows``, columns
    ``[lo, hi)`` (shifted right by the left padding ``pl``); rows outside the plane become 0.
    The input transforms of F(2,3) (4 rows per tile row) and F(4,3) (6) share it."""
    for i in range(rows.shape[0]):
        ih = top + i
        dst = rows[i, lo:hi]
        if 0 <= ih < h:
            seg = src[ih, lo - pl:hi - pl]
            for k in range(hi - lo):
                dst[k] = seg[k]
        else:
            for k in range(hi - lo):
                dst[k] = 0


@njit(**JIT)  # once per channel: see _common (Inlining)
def store_tile_rows(y, plane, z, has_z, n, oc, tiles_w, act, alpha, lo, hi):
    """The output transforms' last step: ``y [m, m * tiles]`` holds row ``r`` of every m x m
    output tile, each tile's ``m`` values side by side, so row ``oh`` of the output plane is
    the contiguous line ``y[oh % m, m * (oh // m) * tiles_w:]``; copy its first OW values into
    ``plane``, adding the residual ``z[n, oc]`` (when ``has_z``, shaped like the output) and
    activating (all of ``y`` at once when there is no residual)."""
    m = y.shape[0]
    ow_n = plane.shape[1]
    if not has_z:
        activate_row(y.reshape(-1), act, alpha, lo, hi)
    for oh in range(plane.shape[0]):
        line = y[oh % m, m * (oh // m) * tiles_w:]
        dst = plane[oh]
        if has_z:
            res = z[n, oc, oh]
            for k in range(ow_n):
                dst[k] = line[k] + res[k]
            activate_row(dst, act, alpha, lo, hi)
        else:
            for k in range(ow_n):
                dst[k] = line[k]


@njit(**PJIT)
def winograd23_input(x, n, pt, pl, tiles_h, tiles_w, v, pitch):
    """V[16, C, tiles] = B^T d B for every 4x4 input tile d (stride 2, zero outside), stored
    as ``v [16, slab]`` (:func:`slab`): tile ``t`` of channel ``c`` at ``v[i, c * pitch + t]``,
    columns ``tiles .. pitch - 1`` of each channel's row zeroed.

    As :func:`winograd43_input`: per tile row, its four input rows copied, zero-padded, into
    ``rows``; ``B^T`` down each column (one loop along the row), then ``B`` across each tile's
    four columns, writing V contiguously. Against a 4x4 tile gathered element by element with
    bounds tests, ResNet-18's three 512 @ 7x7 layers in the model, 2 threads, min of 5 x 50
    calls: 204-224 -> 122-129 us (the output transform below: 110-136 -> 45-49 us; ResNet-18
    end to end, 40 interleaved runs, both together: 21.76 -> 20.93 and 25.70 -> 25.00 ms).
    Allocating ``rows`` and ``tmp`` once per thread instead of per channel made no difference.
    """
    c_in, h, wd = x.shape[1], x.shape[2], x.shape[3]
    width = 2 * tiles_w + 2
    lo = min(width, max(0, pl))  # columns [lo, hi) of ``rows`` hold input, the rest stay 0
    hi = max(lo, min(width, pl + wd))
    for c in prange(c_in):
        rows = np.zeros((4, width), dtype=np.float32)
        tmp = np.empty((4, width), dtype=np.float32)
        src = x[n, c]
        row = c * pitch  # channel c's row in each of the 16 slabs
        zero_padding(v, row + tiles_h * tiles_w, row + pitch)
        for th in range(tiles_h):
            load_tile_rows(rows, src, th * 2 - pt, h, lo, hi, pl)
            for j in range(width):  # tmp = B^T rows
                d0, d1, d2, d3 = rows[0, j], rows[1, j], rows[2, j], rows[3, j]
                tmp[0, j] = d0 - d2
                tmp[1, j] = d1 + d2
                tmp[2, j] = d2 - d1
                tmp[3, j] = d1 - d3
            t0 = th * tiles_w
            for k in range(4):  # V[k, :] = tmp B, tile by tile
                for tw in range(tiles_w):
                    e0, e1, e2, e3 = (tmp[k, tw * 2], tmp[k, tw * 2 + 1], tmp[k, tw * 2 + 2],
                                      tmp[k, tw * 2 + 3])
                    t = row + t0 + tw
                    v[k * 4 + 0, t] = e0 - e2
                    v[k * 4 + 1, t] = e1 + e2
                    v[k * 4 + 2, t] = e2 - e1
                    v[k * 4 + 3, t] = e1 - e3


@njit(**PJIT)
def winograd23_output(m, pitch, bias, z, has_z, out, n, tiles_h, tiles_w, act, alpha, lo, hi):
    """out[n, oc, 2x2 tile] = act(A^T M A + bias (+ z)), clipped at the output border: the
    loops of :func:`winograd43_output` (all tiles of a channel at once; each tile row's output
    rows contiguous lines of ``y``) for 4x4 tiles; ``m [16, slab]`` as there."""
    oc_n = out.shape[1]
    tiles = tiles_h * tiles_w
    for oc in prange(oc_n):
        b = bias[oc]
        plane = out[n, oc]
        s = np.empty((2, 4, tiles), dtype=np.float32)
        y = np.empty((2, 2 * tiles), dtype=np.float32)
        r0 = oc * pitch  # channel oc's row in each of the 16 slabs
        for col in range(4):  # s = A^T M
            m0, m1 = m[0 * 4 + col, r0:r0 + tiles], m[1 * 4 + col, r0:r0 + tiles]
            m2, m3 = m[2 * 4 + col, r0:r0 + tiles], m[3 * 4 + col, r0:r0 + tiles]
            s0, s1 = s[0, col], s[1, col]
            for t in range(tiles):
                s0[t] = m0[t] + m1[t] + m2[t]
                s1[t] = m1[t] - m2[t] - m3[t]
        for r in range(2):  # y = s A
            e0, e1, e2, e3 = s[r, 0], s[r, 1], s[r, 2], s[r, 3]
            yr = y[r]
            for t in range(tiles):
                yr[2 * t + 0] = e0[t] + e1[t] + e2[t] + b
                yr[2 * t + 1] = e1[t] - e2[t] - e3[t] + b
        store_tile_rows(y, plane, z, has_z, n, oc, tiles_w, act, alpha, lo, hi)


# ---------------------------------------------------------------------------------------------
# Winograd F(4x4, 3x3)

# The matrices of Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks" (CVPR 2016,
# arXiv:1509.09308), section 4.2, from the interpolation points 0, 1, -1, 2, -2 and infinity:
# Y = A^T [(G g G^T) * (B^T d B)] A for a 3x3 filter g and a 6x6 input tile d.
# B^T (6x6), written out in winograd43_input:       A^T (4x6), written out in winograd43_output:
#   [4,  0, -5,  0, 1, 0]                             [1, 1,  1, 1,  1, 0]
#   [0, -4, -4,  1, 1, 0]                             [0, 1, -1, 2, -2, 0]
#   [0,  4, -4, -1, 1, 0]                             [0, 1,  1, 4,  4, 0]
#   [0, -2, -1,  2, 1, 0]                             [0, 1, -1, 8, -8, 1]
#   [0,  2, -1, -2, 1, 0]
#   [0,  4,  0, -5, 0, 1]
# G (6x3), applied to the weights in float64 in prepare:
WG43 = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                 [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], dtype=np.float64)
# float32 constants, so that the transforms stay in float32 (an integer literal would promote a
# float32 product to float64, as in NumPy)
TWO, FOUR, FIVE, EIGHT = np.float32(2), np.float32(4), np.float32(5), np.float32(8)


@njit(**PJIT)
def winograd43_input(x, n, pt, pl, tiles_h, tiles_w, v, pitch):
    """V[36, C, tiles] = B^T d B for every 6x6 input tile d (stride 4, zero outside), stored
    as ``v [36, slab]`` (:func:`slab`): tile ``t`` of channel ``c`` at ``v[i, c * pitch + t]``,
    columns ``tiles .. pitch - 1`` of each channel's row zeroed.

    One tile row at a time: the six input rows it covers are copied, zero-padded, into ``rows``;
    ``B^T`` combines them down each column (``tmp``, one loop along the whole row), then ``B``
    combines the six columns of each tile, a loop over the tiles that writes V contiguously.
    No bounds tests are left in the arithmetic loops.
    """
    c_in, h, wd = x.shape[1], x.shape[2], x.shape[3]
    width = 4 * tiles_w + 2
    lo = min(width, max(0, pl))  # columns [lo, hi) of ``rows`` hold input, the rest stay 0
    hi = max(lo, min(width, pl + wd))
    for c in prange(c_in):
        rows = np.zeros((6, width), dtype=np.float32)
        tmp = np.empty((6, width), dtype=np.float32)
        src = x[n, c]
        row = c * pitch  # channel c's row in each of the 36 slabs
        zero_padding(v, row + tiles_h * tiles_w, row + pitch)
        for th in range(tiles_h):
            load_tile_rows(rows, src, th * 4 - pt, h, lo, hi, pl)
            for j in range(width):  # tmp = B^T rows
                d0, d1, d2, d3, d4, d5 = (rows[0, j], rows[1, j], rows[2, j], rows[3, j],
                                          rows[4, j], rows[5, j])
                tmp[0, j] = FOUR * d0 - FIVE * d2 + d4
                tmp[1, j] = d3 + d4 - FOUR * (d1 + d2)
                tmp[2, j] = d4 - d3 + FOUR * (d1 - d2)
                tmp[3, j] = d4 - d2 + TWO * (d3 - d1)
                tmp[4, j] = d4 - d2 + TWO * (d1 - d3)
                tmp[5, j] = FOUR * d1 - FIVE * d3 + d5
            t0 = th * tiles_w
            for k in range(6):  # V[k, :] = tmp B, tile by tile
                for tw in range(tiles_w):
                    e = tmp[k, tw * 4:tw * 4 + 6]
                    e0, e1, e2, e3, e4, e5 = e[0], e[1], e[2], e[3], e[4], e[5]
                    t = row + t0 + tw
                    v[k * 6 + 0, t] = FOUR * e0 - FIVE * e2 + e4
                    v[k * 6 + 1, t] = e3 + e4 - FOUR * (e1 + e2)
                    v[k * 6 + 2, t] = e4 - e3 + FOUR * (e1 - e2)
                    v[k * 6 + 3, t] = e4 - e2 + TWO * (e3 - e1)
                    v[k * 6 + 4, t] = e4 - e2 + TWO * (e1 - e3)
                    v[k * 6 + 5, t] = FOUR * e1 - FIVE * e3 + e5


@njit(**PJIT)
def winograd43_output(m, pitch, bias, z, has_z, out, n, tiles_h, tiles_w, act, alpha, lo, hi):
    """out[n, oc, 4x4 tile] = act(A^T M A + bias (+ z)), clipped at the output border, from
    ``m [36, slab]`` (:func:`slab`: tile ``t`` of channel ``oc`` at ``m[i, oc * pitch + t]``).

    Per output channel, over all its tiles at once: ``A^T`` combines the six rows of every
    tile (``s[r, col, tile]``, six flat loops over the tiles, each reading one contiguous row of
    M), then ``A`` the six columns (``y[r]``: row ``r`` of every tile's output, its four values
    side by side, so that row ``r`` of tile row ``th`` is the contiguous line
    ``y[r, 4 * th * tiles_w:]``). Each output row is then one copy of the first OW values of
    its line, adding the residual ``z`` (same shape as ``out``; ``has_z``) and activating.
    Against the same two steps tile row by tile row (loops of ``tiles_w`` = 4..14 iterations,
    mostly LLVM's scalar remainder), median us of 5 x 100 calls, 2 threads, the transform alone:
    64 @ 55x55 159 -> 64, 128 @ 27 142 -> 42, 192 @ 13 95 -> 31, 256 @ 13 123 -> 38; keeping
    the four values of a tile in four planes instead (a gather to copy a row out) 93, 54, 38,
    47.
    """
    oc_n = out.shape[1]
    tiles = tiles_h * tiles_w
    for oc in prange(oc_n):
        b = bias[oc]
        plane = out[n, oc]
        s = np.empty((4, 6, tiles), dtype=np.float32)
        y = np.empty((4, 4 * tiles), dtype=np.float32)
        r0 = oc * pitch  # channel oc's row in each of the 36 slabs
        for col in range(6):  # s = A^T M
            m0, m1 = m[0 * 6 + col, r0:r0 + tiles], m[1 * 6 + col, r0:r0 + tiles]
            m2, m3 = m[2 * 6 + col, r0:r0 + tiles], m[3 * 6 + col, r0:r0 + tiles]
            m4, m5 = m[4 * 6 + col, r0:r0 + tiles], m[5 * 6 + col, r0:r0 + tiles]
            s0, s1, s2, s3 = s[0, col], s[1, col], s[2, col], s[3, col]
            for t in range(tiles):
                s0[t] = m0[t] + m1[t] + m2[t] + m3[t] + m4[t]
                s1[t] = m1[t] - m2[t] + TWO * (m3[t] - m4[t])
                s2[t] = m1[t] + m2[t] + FOUR * (m3[t] + m4[t])
                s3[t] = m1[t] - m2[t] + EIGHT * (m3[t] - m4[t]) + m5[t]
        for r in range(4):  # y = s A
            e0, e1, e2, e3, e4, e5 = s[r, 0], s[r, 1], s[r, 2], s[r, 3], s[r, 4], s[r, 5]
            yr = y[r]
            for t in range(tiles):
                yr[4 * t + 0] = e0[t] + e1[t] + e2[t] + e3[t] + e4[t] + b
                yr[4 * t + 1] = e1[t] - e2[t] + TWO * (e3[t] - e4[t]) + b
                yr[4 * t + 2] = e1[t] + e2[t] + FOUR * (e3[t] + e4[t]) + b
                yr[4 * t + 3] = e1[t] - e2[t] + EIGHT * (e3[t] - e4[t]) + e5[t] + b
        store_tile_rows(y, plane, z, has_z, n, oc, tiles_w, act, alpha, lo, hi)


@njit(**PJIT)
def direct_if_nonfinite(x, w, bias, z, has_z, out, n, pt, pl, act, alpha, lo, hi):
    """Where image ``n`` of the input holds an infinity or a NaN, its outputs again by direct
    summation (:func:`.conv_base.conv_direct`), then the residual and the activation as the
    output transform applies them; otherwise nothing.

    Why: the transforms add and subtract the inputs of a whole tile (``B^T d B``), so one
    infinite input turns outputs NaN whose own sums -- the reference's, over their windows --
    give an infinity or a number (measured: a 12 -> 3 channel 9x15 convolution of inputs a
    tenth NaN, +-inf, zeros and subnormals: F(4,3) 93 outputs NaN where the reference has
    numbers or infinities, found by ``tools/fuzz_graphs.py --special --scale 3``), and after a
    Relu or a Clip such an output could even look finite. The direct sums put NaN and
    infinities where the reference does. The check is one parallel pass over the image's input
    (finite inputs, the usual case, pay only that: ~86 us over ResNet-18's 13 Winograd
    layers, 0.6 % of its run); the non-finite weights it would miss keep the scheme from
    applying (:func:`winograd_applies`)."""
    image = x[n].reshape(-1)
    bad = 0
    for i in prange(image.size):
        if not np.isfinite(image[i]):
            bad += 1
    if bad == 0:
        return
    conv_direct(x[n:n + 1], w, bias, out[n:n + 1], 1, 1, 1, 1, pt, pl, 1)
    for oc in prange(out.shape[1]):
        plane = out[n, oc]
        for oh in range(plane.shape[0]):
            row = plane[oh]
            if has_z:
                residual = z[n, oc, oh]
                for k in range(row.shape[0]):
                    row[k] += residual[k]
            activate_row(row, act, alpha, lo, hi)


class WinogradConv(BoundRun, ConvBase):
    """Winograd F(m x m, 3x3), shared by F(2x2, 3x3) and F(4x4, 3x3): ``m x m`` output tiles
    from ``a x a`` input tiles (``a = m + 2``), ``a*a`` sgemms ``M_i = U_i @ V_i`` per image."""

    # set by each subclass: the output tile side m, G ((m + 2) x 3, float64) and the two loops
    # transform_input(x, n, pt, pl, tiles_h, tiles_w, v),
    # transform_output(m, bias, z, has_z, out, n, tiles_h, tiles_w, act, alpha, lo, hi)
    m: int
    wg: np.ndarray
    simd = False  # the products in gemm_simd's register tiles, the tile count padded to 8

    def prepare(self, spec: NodeSpec) -> None:
        super().prepare(spec)
        w = np.asarray(spec.constants[1], dtype=np.float64)  # [OC, C, 3, 3]
        oc, c = w.shape[0], w.shape[1]
        a2 = (self.m + 2) ** 2
        g = self.wg
        u = np.einsum("ij,ocjk,lk->iloc", g, w, g).reshape(a2, oc, c)  # G g G^T per (oc, c)
        # the *_simd variants keep U four rows at a time ([a*a, OC/4, C, 4], zero rows past
        # OC) and M with OC rounded up to 4 rows (the output transform reads the first OC)
        shape = (a2, -(-oc // ROWS), c, ROWS) if self.simd else (a2, oc, c)
        size = math.prod(shape)
        buf = self.backend.allocate(size * 4, Storage.STATIC)
        self.u = buf.handle[:size * 4].view(np.float32).reshape(shape)
        if self.simd:
            pack_rows(u.astype(np.float32), self.u)
        else:
            self.u[...] = u
        self.a2, self.oc, self.c = a2, shape[1] * ROWS if self.simd else oc, c
        self.n = int(spec.inputs[0].shape[0])
        self.oh, self.ow = (int(d) for d in spec.outputs[0].shape[2:])
        self.th, self.tw = -(-self.oh // self.m), -(-self.ow // self.m)
        self.tiles = self.th * self.tw
        self.pitch = padded_tiles(self.tiles) if self.simd else self.tiles  # V's and M's rows
        # V and M as a*a slabs of C (OC) rows of ``pitch`` tiles; the *_simd variants space the
        # slabs apart (see slab), the others' sgemms take them as C-contiguous 3-D arrays
        self.v_slab = slab(c * self.pitch) if self.simd else c * self.pitch
        self.m_slab = slab(self.oc * self.pitch) if self.simd else self.oc * self.pitch
        self.v_elems = a2 * self.v_slab
        self.m_elems = a2 * self.m_slab
        self.workspace_bytes = (self.v_elems + self.m_elems) * 4
        # the output transform adds the bias, a residual shaped like the output, and activates;
        # a broadcast residual is left to the epilogue pass (which then also activates)
        ep = self.epilogue
        out = tuple(int(d) for d in spec.outputs[0].shape)
        self.z_in_loops = ep.z_input is not None and \
            tuple(int(d) for d in spec.inputs[ep.z_input].shape) == out
        ep.active = ep.z_input is not None and not self.z_in_loops
        self.act = NONE if ep.active else ep.act
        self.no_z = np.zeros((1, 1, 1, 1), np.float32)
        self.bound = Bound()

    def after_calls(self, inputs, out):  # type: ignore[no-untyped-def]
        return self.epilogue.after(inputs, out)

    def bind(self, inputs, outputs, workspace):  # type: ignore[no-untyped-def]
        return BoundRun.bind(self, inputs, outputs, workspace) if self.simd else None

    def run(self, inputs, outputs, workspace):
        if self.simd:  # every step a compiled loop: bound (see :class:`.Bound`)
            BoundRun.run(self, inputs, outputs, workspace)
            return
        # the products are the backend's sgemm (which takes the lock where it must)
        for function, args in self.calls(inputs, outputs[0], workspace):
            if function is self.backend.gemm:
                function(*args)
            else:
                with PARALLEL_LOCK:
                    function(*args)
        self.epilogue(inputs, outputs[0])

    def calls(self, inputs, out, workspace) -> tuple[Call, ...]:  # type: ignore[no-untyped-def]
        """Per image: the input transform, the batched product, the output transform."""
        _, _, _, _, _, _, pt, pl, _, _, _ = self.params
        raw = workspace.handle[:self.workspace_bytes].view(np.float32)
        v = raw[:self.v_elems].reshape(self.a2, self.v_slab)
        m = raw[self.v_elems:self.v_elems + self.m_elems].reshape(self.a2, self.m_slab)
        if self.simd:
            product: Call = (packed_batched_product, (self.u, v, m, self.pitch))
        else:  # unspaced slabs: V and M as [a*a, rows, tiles], C-contiguous
            product = (self.backend.gemm, (self.u, v.reshape(self.a2, self.c, self.pitch),
                                           m.reshape(self.a2, self.oc, self.pitch)))
        bias = self.bias(inputs)
        ep = self.epilogue
        z = inputs[ep.z_input] if self.z_in_loops else self.no_z
        calls: list[Call] = []
        for n in range(self.n):
            calls += [(self.transform_input, (inputs[0], n, pt, pl, self.th, self.tw, v,
                                              self.pitch)),
                      product,
                      (self.transform_output, (m, self.pitch, bias, z, self.z_in_loops, out, n,
                                               self.th, self.tw, self.act, ep.alpha, ep.lo,
                                               ep.hi)),
                      (direct_if_nonfinite, (inputs[0], inputs[1], bias, z, self.z_in_loops,
                                             out, n, pt, pl, self.act, ep.alpha, ep.lo, ep.hi))]
        return tuple(calls)


class Winograd23Conv(WinogradConv):
    """F(2x2, 3x3): 4x4 input tiles, 16 sgemms."""

    m = 2
    wg = WG
    transform_input = staticmethod(winograd23_input)
    transform_output = staticmethod(winograd23_output)


class Winograd43Conv(WinogradConv):
    """F(4x4, 3x3): 6x6 input tiles, 36 sgemms."""

    m = 4
    wg = WG43
    transform_input = staticmethod(winograd43_input)
    transform_output = staticmethod(winograd43_output)


class Winograd23SimdConv(Winograd23Conv):
    """F(2x2, 3x3) with the 16 products in register tiles
    (:func:`.gemm_simd.packed_batched_product`)."""

    simd = True


class Winograd43SimdConv(Winograd43Conv):
    """F(4x4, 3x3) with the 36 products in register tiles
    (:func:`.gemm_simd.packed_batched_product`)."""

    simd = True


def padded_tiles(tiles: int) -> int:
    """The row pitch of V and M for the ``*_simd`` variants: ``tiles`` rounded up to 8."""
    return -(-tiles // LANES) * LANES


LINE_FLOATS = 16  # float32 elements per 64-byte cache line


def slab(elems: int) -> int:
    """Elements from one slab of V or M to the next for the ``*_simd`` variants: ``elems``
    rounded up to ``16 (mod 32)``, an odd number of cache lines, so that one channel's rows in
    the ``a*a`` slabs, which the transforms write and read together, fall into ``a*a``
    different sets of the L1 cache (64 sets of 64-byte lines). See the module docstring."""
    return elems + (LINE_FLOATS - elems) % (2 * LINE_FLOATS)


def winograd_applies(spec: NodeSpec) -> bool:
    """3x3, stride 1, dilation 1, one group, constant weights that are all finite: the
    transformed weights U mix each filter's nine taps, so one infinite or NaN weight would spoil
    outputs its own products do not reach (see :func:`direct_if_nonfinite`)."""
    return is_3x3_s1(spec) and finite_constant_weights(spec)


def is_3x3_s1_simd(spec: NodeSpec) -> bool:
    """The Winograd conditions on a CPU with AVX2 and FMA (:func:`.simd.native`)."""
    return winograd_applies(spec) and native()


def winograd_cost(spec: NodeSpec, m: int, simd: bool = False) -> float:
    """F(m x m, 3x3), a = m + 2: the ``a*a`` sgemms on whole tiles, the input and output
    transforms (``WINOGRAD_TRANSFORM`` per element of V and M) and the stream of U from memory
    (``WINOGRAD_U_READ`` per element, once per image); see the module docstring. ``simd``: the
    products in register tiles instead, on the tiles padded to 8, at ``SIMD_FACTOR`` the
    price per multiply-add and without the sgemms' calls."""
    n, c, _, _ = (int(d) for d in spec.inputs[0].shape)
    oc = int(spec.inputs[1].shape[0])
    oh, ow = (int(d) for d in spec.outputs[0].shape[2:])
    a2 = (m + 2) ** 2
    tiles = -(-oh // m) * -(-ow // m)
    if simd:
        products = 2.0 * a2 * oc * c * padded_tiles(tiles) * SIMD_FACTOR
    else:
        products = 2.0 * a2 * oc * c * gemm_columns(tiles) + 2 * GEMM_CALL
    u_elem = WINOGRAD_U_READ if simd else WINOGRAD_U_READ + GEMM_PACK  # the sgemms pack U_i
    return n * (products + WINOGRAD_TRANSFORM * a2 * (c + oc) * tiles + u_elem * a2 * oc * c)


def winograd23_cost(spec: NodeSpec) -> float:
    return winograd_cost(spec, 2)


def winograd43_cost(spec: NodeSpec) -> float:
    return winograd_cost(spec, 4)


def winograd23_simd_cost(spec: NodeSpec) -> float:
    return winograd_cost(spec, 2, simd=True)


def winograd43_simd_cost(spec: NodeSpec) -> float:
    return winograd_cost(spec, 4, simd=True)
