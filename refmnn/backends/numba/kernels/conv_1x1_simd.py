"""``gemm_1x1_simd``: a 1x1 convolution (stride 1, one group, constant weights) as a
register-blocked product on packed operands, in Numba's own code -- no BLAS call (see
:mod:`.conv` for the notation).

Per image the output plane is ``y [OC, P] = W [OC, C] @ x [C, P]`` (``P = H * W``). Both
operands are packed so that the micro-tile reads two contiguous streams, as a BLAS does:

* the weights once, in ``prepare`` (:func:`packed_weights`): blocks of four output channels,
  ``[OC/4][C][4]``, so the four weights a step broadcasts are adjacent;
* the input in strips of 24 pixels, ``[C][24]`` (the last strip of a plane 8, 16 or 24 wide,
  zero-filled past the plane), copied at run time (:func:`pack_strip`); a plane's last one or
  two pixels (``COLUMNS``) as columns instead, ``[column][C]`` (:func:`pack_columns`).

A strip times a block of four channels is one micro-tile of :mod:`.gemm_simd` (4 x 24, twelve
8-lane accumulators held through the whole sum over C; 4 x 16 or 4 x 8 for a narrow last
strip), stored straight into y -- or through a small buffer where the tile overhangs the plane
or the channels. A strip of columns times a block is four dot products per column
(:func:`_columns`), from the same packed weights: a 4 x 8 tile for one pixel (7 x 7, 13 x 13
and 55 x 55 planes end in one) had cost three quarters of the two full strips of a 7 x 7 plane.
The kernel before and after, alternating in one process, 2 threads, hot, bias, median us: 960
-> 320 @ 7x7 303 -> 247, 320 -> 1280 356 -> 309, 160 -> 960 158 -> 134, 576 -> 160 89 -> 77;
planes of 13 x 13 and 55 x 55 (by strips) and planes without columns 0.94-1.04x (noise);
whole models, sessions alternating: MobileNetV2 10.72 -> 10.32 and 9.67 -> 9.44 ms, SqueezeNet
1.1 7.80 -> 7.62, MobileNet-v1 13.31 -> 13.20; outputs within 6e-8 of before. Each column
reads the block's weights again, so ``COLUMNS`` is 2: four columns (a 14 x 14 plane's last
pixels) ran no faster than the 4 x 8 tile (96 -> 576 @ 196 pixels: 170 against 163 us). Two
orders of the loops (:func:`by_rows_order` chooses; the table below says why):

* **by strips** (the default): a task takes a run of up to 8 strips;
  it packs as many of them as fit in ``SUB_BYTES`` (a quarter of L2) into its own buffer and
  runs each of its channel blocks against them, left to right, then the next ones (the weights
  stay in L2; each output row is written in stretches of up to 192 pixels: tile by tile down
  the channels instead, the rows of a 112 x 112 plane, 50176 bytes apart, fell into the same
  few L1 sets and that layer ran 3x slower). Tasks are (run of strips, group of channel
  blocks), enough of them to share out over the threads.

  The strips are packed input channel by input channel (:func:`pack_strips`), so each
  channel's row is read in one stretch of up to 192 pixels. Before, the buffer held what fit
  in half of L1 -- one strip at 144 channels -- and each strip was packed on its own: a
  96-byte piece of every channel's row, 12 KB apart, as many streams as channels, which the
  hardware prefetchers do not follow. Old and new kernels alternating in one process, 2
  threads, bias, median us, the inputs cycling over 8 planes (so they come from L3, as a
  layer's input does when it does not fit in L2): 144 -> 24 @ 56x56 534-595 -> 320-364, 96 ->
  24 @ 56x56 283-382 -> 157-242, 32 -> 16 @ 112x112 432-468 -> 287-311, 24 -> 144 @ 56x56 0.86-
  0.89x, 16 -> 96 @ 112x112 the same within 6%; one plane (hot): 144 -> 24 @ 56x56 224 -> 207,
  96 -> 24 @ 56x56 156 -> 144. Whole models, sessions with each kernel alternating in one
  process, median ms, outputs bit-equal: MobileNetV2 7.46 -> 7.39, 10.34 -> 10.28 and 9.51 ->
  9.23 at 2 threads, 13.75 -> 13.26 at 1; SqueezeNet 1.1 8.89 -> 8.77; MobileNet-v1 19.59 ->
  19.68 (noise).
* **by rows** (many output channels on a small plane or from few input channels, or weights
  larger than L2): the plane is packed whole first, then each worker takes an
  even share of the channel blocks and runs them against the packed plane, ``PLANE_BYTES`` of
  it (a pass: as many strips as fit in L2) at a time: a block's weights stay in L1 through a
  pass, the pass's strips in L2. Before the passes, the plane was run whole: at 576 -> 96 @
  14x14 its 9 strips (498 KB) filled L2; and the blocks were dealt out in groups of
  ``ceil(blocks / groups)``, which gave one worker 16 of 24 blocks there (24 of 40 at 960 ->
  160 @ 7x7). Kernels alone against ``gemm_1x1``, 2 threads, hot, alternating, time relative
  to it, before -> after: 576 -> 96 @ 14x14 1.34 -> 1.06, 960 -> 160 @ 7x7 1.36 -> 1.19,
  960 -> 320 and 320 -> 1280 @ 7x7 (already even) 1.12 and 1.09 -> 1.13 and 1.11. A last
  strip of one or two columns joins the pass before it: as a pass of its own it read every
  block's weights once more (MobileNetV2's 960 -> 160 and 960 -> 320 @ 7x7, 0.6-1.2 MB from
  L3; the model, sessions with either plan alternating in one process: 0.9965x, 0.9954x).

By strips, a plane of few strips is shared out by groups of channel blocks; a worker's tasks
are consecutive, so it runs a run's groups one after the other on the strips it packed once
(only a run split between two workers is packed twice; each group's task had packed them again:
the old and new kernel alternating in one process, 2 threads, loaded, median ms: MobileNetV2
8.25 -> 8.20, SqueezeNet 1.1 11.71 -> 11.51, outputs bit-equal); by rows, the plane is packed
once, but each block streams it from L2, which costs where the blocks are few. Before, the
weights' size alone chose (by rows above 160 KB). The kernel in each order and ``gemm_1x1``
(its node, ~5 us of Python included), alternating in one process, 2 threads, bias + Clip,
median us, a loaded machine; (*) marks what :func:`by_rows_order` now chooses, (o) what the
weights' size chose:

    ======================  ===========================  =================================
    C -> OC @ HW            gemm_1x1 / strips / rows     in the zoo
    ======================  ===========================  =================================
    16 -> 96 @ 112x112      801 / 584 (*o) / 686         MobileNetV2
    24 -> 144 @ 56x56       289 / 321 (o) / 301 (*)      MobileNetV2 (a second run: 303 /
                                                         315 / 305)
    32 -> 192 @ 28x28       134 / 147 (o) / 130 (*)      MobileNetV2 (125 / 131 in another)
    144 -> 32 @ 28x28       155 / 97 (*o) / 186          MobileNetV2
    64 -> 384 @ 14x14       125 / 159 (o) / 116 (*)      MobileNetV2
    384 -> 96 @ 14x14       215 / 168 (*o) / 198         MobileNetV2
    96 -> 576 @ 14x14       210 / 264 / 202 (*o)         MobileNetV2
    576 -> 96 @ 14x14       228 / 225 (*) / 277 (o)      MobileNetV2
    960 -> 160 @ 7x7        176 / 220 / 148 (*o)         MobileNetV2
    128 -> 16 @ 55x55       236 / 166 (*o) / 495         SqueezeNet
    32 -> 128 @ 27x27       107 / 99 (o) / 85 (*)        SqueezeNet
    64 -> 256 @ 13x13       93 / 105 (o) / 82 (*)        SqueezeNet
    512 -> 1000 @ 13x13     1572 / 1598 / 1365 (*o)      SqueezeNet
    128 -> 128 @ 56x56      894 / 774 (*o) / 845         MobileNet-v1
    256 -> 256 @ 28x28      859 / 739 (*) / 782 (o)      MobileNet-v1
    512 -> 512 @ 14x14      869 / 819 / 773 (*o)         MobileNet-v1
    1024 -> 1024 @ 7x7      997 / 1060 / 799 (*o)        MobileNet-v1
    ======================  ===========================  =================================

Whole models, sessions with the old and the new choices (orders and costs, see below)
alternating in one process, 2 threads, median ms: MobileNetV2 13.41 -> 12.92, 10.02 -> 9.78
(10 layers leave gemm_1x1); SqueezeNet 1.1 8.29 -> 7.91, 7.42 -> 7.12 (and 10.07 -> 10.20 in
a heavily loaded round); MobileNet-v1 14.03 -> 12.41; outputs within 5e-8.

Each tile's bias and activation (none, Relu or Clip) are applied in registers: the bias is
where the accumulators start, the activation comes before the store; a FusedConv residual is
added to the tile right after it is stored (:func:`_residual`, the activation then). A task's
``fused.epilogue_rows`` does it for the other activations. At few input channels a tile costs
little, and an epilogue after it costs as much: bias and Clip as a pass over each stored tile
took the 16 -> 96 @ 112x112 product from 411 to 716 us, in registers from 609 to 634 us (2
threads, two runs of a busy machine). A residual that broadcasts goes to the epilogue pass
instead, as in ``gemm_1x1``.

Against OpenBLAS's sgemm (``gemm_1x1``) on an AVX2 EPYC (Zen 3; OpenBLAS's Haswell kernels),
each scheme's kernel with a bias, one thread, CPU time, the least of 5 x 40 calls alternating
(us, ``gemm_1x1`` / ``gemm_1x1_simd``; the machine was shared and busy, and repeated runs moved
single rows by up to 20%):

    ====================  ==============  ==================================
    layer (C -> OC @ HW)  times           in the zoo
    ====================  ==============  ==================================
    16 -> 96 @ 112x112    816 / 853       MobileNetV2's first expansion
    24 -> 144 @ 56x56     360 / 322       MobileNetV2's expansions
    32 -> 192 @ 28x28     162 / 133
    96 -> 24 @ 56x56      217 / 263       MobileNetV2's projections
    144 -> 24 @ 56x56     319 / 307
    192 -> 32 @ 28x28     149 / 142
    384 -> 64 @ 14x14     154 / 134
    64 -> 384 @ 14x14     139 / 155       (priced above gemm_1x1)
    16 -> 64 @ 55x55      138 / 134       SqueezeNet's expand1x1
    128 -> 16 @ 55x55     240 / 236       SqueezeNet's squeeze
    256 -> 32 @ 27x27     185 / 171
    512 -> 64 @ 13x13     164 / 157
    ====================  ==============  ==================================

Whole models, 2 threads, against the unpacked version of this kernel (which read x and w in
place, tasks of 16 channels x 192 pixels, the epilogue per task), medians of 8 x 5 runs in
two processes each, alternating: SqueezeNet 1.1 9.54 / 9.58 -> 8.94 / 9.05 ms, MobileNetV2
14.49 / 14.19 -> 13.80 / 14.07 ms.

The cost (:func:`gemm_1x1_simd_cost`) prices it below ``gemm_1x1`` wherever it applies: its
MACs at 0.75x for at most ``FEW_CHANNELS`` input channels, 0.85x for at most ``FEW_OUTPUTS``
output channels, ``MANY_FACTOR`` (0.95x) otherwise, and no packing of the weights per call
(``GEMM_PACK``, :mod:`.conv_base`). With the orders above it ran as fast as the sgemm or
faster on every 1x1 layer of the zoo (the table; 24 -> 144 @ 56x56 a tie). Before, at 1.1x,
the sgemm kept the layers with more than 64 output channels from more than 32 inputs on planes
over 192 pixels.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import NodeSpec, Storage
from refmnn.backends.numba.kernels._common import JIT, PJIT
from refmnn.backends.numba.kernels.conv_base import GEMM_CALL, gemm_macs, is_1x1
from refmnn.backends.numba.kernels.fused import CLIP, NONE, RELU, activate, epilogue_rows
from refmnn.backends.numba.kernels.gemm_simd import (PIXELS, ROWS, activate8, pack_rows,
                                                    packed_tile)
from refmnn.backends.numba.kernels.simd import (native, vadd, vfma, vlane, vload, vpair,
                                                vsplat, vstore)

FEW_CHANNELS = 32  # input channels up to which the scheme is priced well below gemm_1x1
FEW_OUTPUTS = 64  # output channels up to which it is, whatever the input channels
MANY_FACTOR = 0.95  # its MACs' factor otherwise (just below gemm_1x1: see the module docstring)
ROWS_ORDER_BYTES = 512 * 1024  # weights above this size (L2) are run in the "by rows" order
ROWS_ORDER_OUTPUTS = 128  # and so are products with this many output channels or more, on
ROWS_ORDER_PIXELS = 256  # planes of up to this many pixels or from up to FEW_CHANNELS inputs
TASKS_PER_PART = 8  # tasks per worker at least, where the channels allow (load balance)
SPARE = ROWS * PIXELS  # a worker's buffer for one overhanging tile
RUN = 8  # strips per task at most, by strips
SUB_BYTES = 128 * 1024  # packed strips at a time at most: a quarter of L2
PLANE_BYTES = 192 * 1024  # by rows: packed strips a pass of the blocks reads at most (L2)
COLUMNS = 2  # a plane's last pixels up to this many run as dot products (_columns)


@njit(**JIT)
def strips(p):  # type: ignore[no-untyped-def]
    """A plane of ``p`` pixels as ``(count, full, tail)``: ``count`` strips, ``full`` of them
    24 wide and a last one ``tail`` wide: 8, 16 or 24, or at most ``COLUMNS`` (a strip of
    columns, see :func:`_columns`); 0, and no such strip, when 24 divides ``p``."""
    full, rest = divmod(p, PIXELS)
    tail = rest if rest <= COLUMNS else 8 if rest <= 8 else 16 if rest <= 16 else PIXELS
    return full + (1 if tail else 0), full, tail


@njit(inline="always", **JIT)
def _strip(s, full, tail, p):
    """Strip ``s`` of a plane of ``p`` pixels (see :func:`strips`) as ``(width, n)``: its width
    and how many of its pixels lie in the plane."""
    width = PIXELS if s < full else tail
    return width, min(width, p - s * PIXELS)


@njit(inline="always", **JIT)
def pack_strip(x, p, k, j0, n, width, buf):
    """``buf[c * width + t] = x[c * p + j0 + t]`` for ``t < n``, zero for ``n <= t < width``,
    every input channel ``c < k``: one strip of the plane ``x [k, p]`` (flat); a strip of
    columns (``width <= COLUMNS``) as :func:`pack_columns` lays it out."""
    if width <= COLUMNS:
        pack_columns(x, p, k, j0, n, buf)
    elif n == width:
        for c in range(k):
            src, dst = c * p + j0, c * width
            for v in range(0, width, 8):
                vstore(buf, dst + v, vload(x, src + v))
    else:
        for c in range(k):
            src, dst = c * p + j0, c * width
            for t in range(n):
                buf[dst + t] = x[src + t]
            for t in range(n, width):
                buf[dst + t] = 0.0


@njit(inline="always", **JIT)
def pack_columns(x, p, k, j0, n, buf):
    """The last ``n <= COLUMNS`` pixels of the plane ``x [k, p]`` (flat), from pixel ``j0``, as
    :func:`_columns` reads them: column ``t`` (its ``k`` input channels) at ``buf[t * k:]``."""
    for c in range(k):
        for t in range(n):
            buf[t * k + c] = x[c * p + j0 + t]


@njit(inline="always", **JIT)
def pack_strips(x, p, k, a, b, full, tail, buf):
    """Strips ``a .. b - 1`` of the plane ``x [k, p]`` (flat) packed one after another into
    ``buf`` (strip ``s`` at ``(s - a) * k * PIXELS``, laid out as by :func:`pack_strip`). The
    full strips go input channel by input channel, each channel's row read in one contiguous
    stretch; a last, narrower strip by :func:`pack_strip`."""
    last = min(b, full)  # strips a .. last - 1 are full
    for c in range(k):
        for s in range(a, last):
            src, dst = c * p + s * PIXELS, (s - a) * k * PIXELS + c * PIXELS
            for v in range(0, PIXELS, 8):
                vstore(buf, dst + v, vload(x, src + v))
    if b > full:
        width, n = _strip(full, full, tail, p)
        pack_strip(x, p, k, full * PIXELS, n, width, buf[(full - a) * k * PIXELS:])


@njit(inline="always", **JIT)
def _residual(y, o, p, width, z, act, lo, hi):
    """``act(y + z)`` on one tile just stored (``y``, ``z`` flat, the tile from ``o`` on: four
    rows of pitch ``p``, ``width`` wide); the activation is none, Relu or Clip."""
    for row in range(ROWS):
        for v in range(0, width, 8):
            q = o + row * p + v
            vstore(y, q, activate8(vadd(vload(y, q), vload(z, q)), act, lo, hi))


@njit(**JIT)  # called, not inlined: see the docstring
def _columns(wp, k, r, xs, xo, n, yf, p, m, j0, bias, zf, has_b, has_z, act, alpha, lo, hi,
             finish):
    """Channels ``4r .. 4r + 3`` over a strip of ``n <= COLUMNS`` columns (pixels ``j0 ..``,
    packed by :func:`pack_columns` at ``xs[xo:]``), column by column, as dot products over the
    input channels: a vector holds two channels' weights of the block (``wp``'s ``[K][4]``
    layout: ``w[c, 0..3], w[c + 1, 0..3]``) times the two channels' values of the column
    (:func:`.simd.vpair`), four sums in flight; output ``i`` is lane ``i`` plus lane ``i + 4``
    (and, for an odd ``k``, the last channel's product). Then the bias, a residual (``zf``) and
    the activation with ``finish`` (as :func:`_tile` applies them in registers; here in
    scalars, since :func:`.fused.epilogue_rows` would make a view per row); the block's rows
    inside ``[m]`` are stored into ``yf``.

    Why: such a remainder ran as a 4 x 8 tile whose strip, eight pixels wide, came from L2 at
    every step of K; on a 7 x 7 plane (two 24-wide strips and one pixel) it cost three
    quarters of what the two full strips did. A column's ``k`` values stay in L1. The function
    is called, once per block and strip of columns, rather than inlined into each of
    :func:`gemm_1x1_simd`'s loops: inlined, the "by strips" order ran up to 5-8% slower on
    planes that have no columns at all."""
    wo = r * k * ROWS
    zero = vsplat(np.float32(0))
    pairs = k // 2
    i0 = r * ROWS
    for t in range(n):
        base = xo + t * k
        a0 = a1 = a2 = a3 = zero
        for c in range(0, 2 * pairs - 7, 8):  # four pairs of channels a step
            q = wo + c * ROWS
            a0 = vfma(vload(wp, q), vpair(xs, base + c), a0)
            a1 = vfma(vload(wp, q + 8), vpair(xs, base + c + 2), a1)
            a2 = vfma(vload(wp, q + 16), vpair(xs, base + c + 4), a2)
            a3 = vfma(vload(wp, q + 24), vpair(xs, base + c + 6), a3)
        for c in range(2 * (pairs - pairs % 4), 2 * pairs, 2):
            a0 = vfma(vload(wp, wo + c * ROWS), vpair(xs, base + c), a0)
        acc = vadd(vadd(a0, a1), vadd(a2, a3))
        for i in range(min(ROWS, m - i0)):
            v = vlane(acc, i) + vlane(acc, i + 4)
            if k % 2:
                v += wp[wo + (k - 1) * ROWS + i] * xs[base + k - 1]
            o = (i0 + i) * p + j0 + t
            if finish:
                if has_b:
                    v += bias[i0 + i]
                if has_z:
                    v += zf[o]
                v = activate(act, v, alpha, lo, hi)
            yf[o] = v


@njit(inline="always", **JIT)
def _tile(wp, k, r, xs, xo, width, n, y, yf, p, m, j0, spare, bias, z, zf, has_b, has_z, act,
          alpha, lo, hi, finish):
    """Channels ``4r .. 4r + 3`` over one packed strip (``xs`` from ``xo``, ``width`` wide, its
    first ``n`` pixels in the plane, from pixel ``j0``): straight into ``y`` (``[m, p]``) when
    the tile lies inside it, else through ``spare`` and only the part inside copied. With
    ``finish``, the tile's epilogue too: the bias is where its accumulators start, the
    activation is applied before they are stored, and a residual is added in between by
    :func:`_residual` (:func:`.fused.epilogue_rows` on the part of a tile that overhangs).
    ``yf``, ``zf``: y and z flat, made once by the caller (a reshape per tile costs a reference
    count's atomic update, shared by the threads). A strip of columns (``width <= COLUMNS``)
    goes to :func:`_columns`."""
    if width <= COLUMNS:
        _columns(wp, k, r, xs, xo, n, yf, p, m, j0, bias, zf, has_b, has_z, act, alpha, lo, hi,
                 finish)
        return
    i = r * ROWS
    inside = n == width and i + ROWS <= m
    out, oo, op = (yf, i * p + j0, p) if inside else (spare, 0, PIXELS)
    wo = r * k * ROWS
    tb = finish and has_b
    ta = act if finish and not has_z else NONE
    packed_tile(wp, wo, xs, xo, width, out, oo, op, width, k, bias, i, tb, ta, lo, hi)
    if inside:
        if finish and has_z:
            _residual(yf, oo, p, width, zf, act, lo, hi)
        return
    rows = min(ROWS, m - i)
    for row in range(rows):
        for t in range(n):
            yf[(i + row) * p + j0 + t] = spare[row * PIXELS + t]
    if finish and has_z:
        epilogue_rows(y, bias, z, False, True, False, act, alpha, lo, hi, i, i + rows, j0,
                      j0 + n)


@njit(**PJIT)
def gemm_1x1_simd(wp, m, x, y, bias, z, has_b, has_z, b_cols, act, alpha, lo, hi, by_rows,
                  groups, run, sub, scratch, plane):
    """``y = act(w @ x + bias + z)`` for one image: ``wp`` the packed weights of ``w [m, C]``
    (:func:`packed_weights`), ``x [C, P]`` and ``y [m, P]`` C-contiguous float32, ``z`` shaped
    like ``y`` when ``has_z``. ``scratch [parts, ...]``: each worker's strip buffer (``C * 24``,
    by strips) and spare tile (the last ``SPARE``); ``plane``: the packed plane (by rows).
    By strips, ``groups``: the channel blocks' share-out per run of ``run`` strips, packed
    ``sub`` at a time; by rows, each worker's even share of the blocks runs over ``run`` strips
    of the packed plane at a time. See the module docstring."""
    k, p = x.shape
    count, full, tail = strips(p)
    blocks = (m + ROWS - 1) // ROWS
    parts = scratch.shape[0]
    xf, yf, zf = x.reshape(-1), y.reshape(-1), z.reshape(-1)
    # the epilogue per tile (bias, residual, none / Relu / Clip) or, for the other
    # activations, per task (epilogue_rows, scalar)
    finish = (has_b or has_z or act != NONE) and (act == NONE or act == RELU or act == CLIP)
    epi = (has_b or has_z or act != NONE) and not finish
    if by_rows:
        for s in prange(count):
            width, n = _strip(s, full, tail, p)
            pack_strip(xf, p, k, s * PIXELS, n, width, plane[s * k * PIXELS:])
        for part in prange(parts):
            spare = scratch[part]
            r0, r1 = part * blocks // parts, (part + 1) * blocks // parts  # its blocks
            for a in range(0, count, run):  # run strips of the packed plane at a time (L2)
                for r in range(r0, r1):
                    for s in range(a, min(count, a + run)):
                        width, n = _strip(s, full, tail, p)
                        _tile(wp, k, r, plane, s * k * PIXELS, width, n, y, yf, p, m,
                              s * PIXELS, spare, bias, z, zf, has_b, has_z, act, alpha, lo, hi,
                              finish)
            if epi and r0 < r1:
                epilogue_rows(y, bias, z, has_b, has_z, b_cols, act, alpha, lo, hi, r0 * ROWS,
                              min(m, r1 * ROWS), 0, p)
        return
    runs = (count + run - 1) // run
    tasks = runs * groups
    for part in prange(parts):
        buf = scratch[part]
        spare = buf[buf.shape[0] - SPARE:]
        held = -1  # the first strip that buf holds (packed by this worker's previous task)
        for task in range(part * tasks // parts, (part + 1) * tasks // parts):
            first, g = task // groups * run, task % groups
            last = min(count, first + run)
            r0, r1 = g * blocks // groups, (g + 1) * blocks // groups
            for a in range(first, last, sub):  # sub strips at a time, packed one after another
                b = min(last, a + sub)
                if a != held:  # the run's other groups reuse what the first one packed
                    pack_strips(xf, p, k, a, b, full, tail, buf)
                    held = a
                for r in range(r0, r1):
                    for s in range(a, b):  # a block's rows written left to right
                        width, n = _strip(s, full, tail, p)
                        _tile(wp, k, r, buf, (s - a) * k * PIXELS, width, n, y, yf, p, m,
                              s * PIXELS, spare, bias, z, zf, has_b, has_z, act, alpha, lo, hi,
                              finish)
            if epi and r0 < r1:
                epilogue_rows(y, bias, z, has_b, has_z, b_cols, act, alpha, lo, hi,
                              r0 * ROWS, min(m, r1 * ROWS), first * PIXELS,
                              min(p, last * PIXELS))


def plan(oc: int, c: int, p: int, parts: int) -> tuple[bool, int, int, int, int, int]:
    """``(by_rows, groups, run, sub, scratch row length, plane length)`` of
    :func:`gemm_1x1_simd` for ``w [oc, c]`` over ``p`` pixels with ``parts`` workers. By rows
    when the weights exceed ``ROWS_ORDER_BYTES``, in passes of as many strips as fit in
    ``PLANE_BYTES``, one more where the last pass would hold a strip of columns alone
    (``groups`` and ``sub`` unused: 1). By strips, a task takes a run of up to
    ``RUN`` strips (fewer when the plane has too few for ``TASKS_PER_PART`` tasks per worker),
    packed ``sub`` at a time, as many as fit in ``SUB_BYTES`` (L2): each channel block's rows
    are written in stretches of ``sub`` strips, and the epilogue of a task works on stretches
    of the run; the channel blocks' groups are halved until there are enough tasks or a group
    is down to two blocks."""
    count, _, tail = strips(p)
    blocks = (oc + ROWS - 1) // ROWS
    want = TASKS_PER_PART * parts
    if by_rows_order(oc, c, p):
        run = max(1, PLANE_BYTES // (c * PIXELS * 4))
        if 0 < tail <= COLUMNS and count > 1 and (count - 1) % run == 0:
            run += 1  # no last pass of a strip of columns alone (the weights read again for it)
        return True, 1, run, 1, SPARE, count * c * PIXELS
    run = max(1, min(RUN, count // want))
    sub = max(1, min(run, SUB_BYTES // (c * PIXELS * 4)))
    runs = -(-count // run)
    groups = 1
    while runs * groups < want and blocks // (2 * groups) >= 2:
        groups *= 2
    return False, groups, run, sub, sub * c * PIXELS + SPARE, 0


def by_rows_order(oc: int, c: int, p: int) -> bool:
    """Whether :func:`gemm_1x1_simd` runs ``w [oc, c]`` over ``p`` pixels by rows: weights
    larger than L2 (``ROWS_ORDER_BYTES``), or many output channels (``ROWS_ORDER_OUTPUTS``) on a
    small plane (``ROWS_ORDER_PIXELS``) or from few input channels (``FEW_CHANNELS``). See the
    module docstring for the measurements."""
    return oc * c * 4 > ROWS_ORDER_BYTES or (oc >= ROWS_ORDER_OUTPUTS and (
        p <= ROWS_ORDER_PIXELS or c <= FEW_CHANNELS))


def is_1x1_constant(spec: NodeSpec) -> bool:
    """``gemm_1x1``'s conditions (1x1, stride 1, no padding, one group) with the weights known
    when planning (``prepare`` packs them once), on a CPU with AVX2 and FMA
    (:func:`.simd.native`)."""
    return is_1x1(spec) and 1 in spec.constants and native()


def gemm_1x1_simd_cost(spec: NodeSpec) -> float:
    """``gemm_1x1``'s cost -- ``2 * MACs`` plus ``GEMM_CALL`` per image (here a parallel launch)
    -- with the MACs' term times 0.75 for at most ``FEW_CHANNELS`` input channels, 0.85 for at
    most ``FEW_OUTPUTS`` output channels, ``MANY_FACTOR`` otherwise, and without the sgemm's
    packing of the weights (see the module docstring)."""
    oc, c = int(spec.inputs[1].shape[0]), int(spec.inputs[1].shape[1])
    factor = 0.75 if c <= FEW_CHANNELS else 0.85 if oc <= FEW_OUTPUTS else MANY_FACTOR
    return 2 * gemm_macs(spec) * factor + GEMM_CALL * int(spec.inputs[0].shape[0])


def packed_weights(backend, spec: NodeSpec) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The constant weights ``[OC, C, KH, KW]`` packed into a STATIC buffer, flat ``[OC/4][K][4]``
    with ``K = C * KH * KW`` (weight ``(i, q)`` of ``w [OC, K]`` at ``(i // 4) * 4K + 4q + i %
    4``), zeros for the channels past OC: the four weights a micro-tile's step broadcasts are
    adjacent. Here ``K = C``; ``direct*_few_simd`` (:mod:`.conv_direct_few`) packs its taps
    (``q = c * KH * KW + kh * KW + kw``) the same way."""
    w = np.asarray(spec.constants[1], np.float32)
    oc = int(w.shape[0])
    w = w.reshape(1, oc, -1)
    k = int(w.shape[2])
    blocks = (oc + ROWS - 1) // ROWS
    buf = backend.allocate(blocks * k * ROWS * 4, Storage.STATIC)
    wp = buf.handle[:blocks * k * ROWS * 4].view(np.float32)
    pack_rows(w, wp.reshape(1, blocks, k, ROWS))
    return wp
