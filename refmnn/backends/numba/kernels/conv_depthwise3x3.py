"""The 3x3 depthwise schemes of the numba Conv/FusedConv kernels (MobileNet's layers; see
:mod:`.conv` for the notation and the other schemes). Both apply the bias and the activation in
their own loops, run a serial copy of their loops below ``DEPTHWISE_PARALLEL_MIN`` outputs (why:
:mod:`.conv`'s docstring), and leave a FusedConv residual, then the activation too, to the
epilogue pass.

``depthwise3x3`` -- depthwise, 3x3, dilation 1, stride 1 or 2 on both axes (MobileNet's layers).
    Each worker copies a plane into a zero-padded plane in WORKSPACE (stride 2: split into four
    row/column parity planes, so every tap is a unit-stride load), computes the whole output
    plane as one flat loop with the nine taps unrolled and no bounds tests (a few junk columns
    per row, the padded pitch), activates it in L1 and copies its rows out: the input is read
    and the output written once. Cost: ``2 * MACS + 4 * N * C * H * W`` (the padded copy)
    ``+ LOOP * N * C * (H + 2 + OH)`` (its loops, see below).
    FusedConv, 2 threads, loaded shared VM, one-node sessions, median us of 3 x 60 interleaved
    runs against the previous schemes (depthwise_s1 / depthwise + a parallel epilogue pass):

    =============  ============  ============  ===========
    layer          before        depthwise3x3  speed-up
    =============  ============  ============  ===========
    32 @ 112, s1   999 (s1)      450           2.2x
    144 @ 56, s1   1046 (s1)     451           2.3x
    384 @ 14, s1   482 (s1)      225           2.1x
    960 @ 7, s1    455 (s1)      227           2.0x
    96 @ 112, s2   2291          1096          2.1x
    144 @ 56, s2   1323          483           2.7x
    576 @ 14, s2   884           279           3.2x
    =============  ============  ============  ===========

    Tried and dropped: one loop per output row (short rows ran in LLVM's scalar remainder: 2x
    slower), border outputs with tested taps instead of the padded copy (~25 cycles each against
    ~0.5 for an interior output), indexing the plane with a runtime ``ih - pt`` (Numba's
    negative-index fixup stopped vectorisation: 10x slower), FMA contraction (no gain, the loop
    is load-bound). An NC4HW4 packed layout was not tried: the flat loop is already 16 lanes wide
    along W, and packing would add a layout conversion around every depthwise layer.
``depthwise3x3_same`` -- depthwise, 3x3, dilation 1, one column of padding on the left and, at
    stride 1, on the right (the width is kept: ``OW == W``), any padding above and below. The
    plane is copied once, as one flat loop, between zero rows in WORKSPACE at the *input's own*
    row pitch ``W``: stride-1 output ``q = oh*W + ow`` is then ``b + sum w[kh, kw] * buf[q +
    kh*W + kw]``, one flat loop written straight into the output plane -- no padded columns, no
    junk columns, no row-by-row copy out (rows of 7..56 elements run mostly in LLVM's scalar
    remainder, which is where depthwise3x3 spends its time on small planes). Without padded
    columns, the left taps of an output in column 0 read the previous row's last element and
    the right taps of column ``W - 1`` the next row's first: two per-layer masks (``q % W !=
    0``, ``q % W != W - 1``, made in ``prepare``) *select* those three-tap sums away -- a
    select, not a multiply by 0, so an inf or NaN read across the row edge cannot leak in.
    Stride 2 (at most one column of padding on the right) computes the stride-1 rows ``0 ..
    2*(OH-1)`` into WORKSPACE and samples every other row and column: 4x the taps, all
    vectorised, against depthwise3x3's two short loops per input row; the costs choose it for
    planes up to 56 x 56. Cost: ``18 * (stride-1 outputs) + 4 * N * C * H * W + LOOP * N * C *
    (3 + (OH at stride 2))``; depthwise3x3's is ``2 * MACS + 4 * N * C * H * W + LOOP * N * C *
    (H + 2 + OH)``, ``LOOP`` the cost of starting an inner loop (:mod:`.conv_base`). Median us
    of 5 x 50 calls, 2 threads, pads 1, bias + clip, the two kernels interleaved in one process
    on the same inputs (shared VM, load average 0.7):

    ==============  ============  ==================  =========
    layer           depthwise3x3  depthwise3x3_same   speed-up
    ==============  ============  ==================  =========
    32 @ 112, s1    144           114                 1.3x
    144 @ 56, s1    191           126                 1.5x
    192 @ 28, s1    110           62                  1.8x
    384 @ 14, s1    111           40                  2.8x
    576 @ 14, s1    153           52                  2.9x
    960 @ 7, s1     104           62                  1.7x
    96 @ 112, s2    273           400                 0.7x (depthwise3x3 chosen)
    144 @ 56, s2    172           173                 1.0x
    192 @ 28, s2    127           65                  1.9x
    576 @ 14, s2    176           84                  2.1x
    ==============  ============  ==================  =========

    End to end, 2 threads, medians of 40 interleaved runs in one process against a session
    built without the scheme, two rounds: MobileNet-v2 9.01 -> 7.95 and 9.89 -> 8.97 ms (16
    layers on it), MobileNet-v1 10.78 -> 10.01 and 10.49 -> 9.76 ms (12); outputs within 3e-8.
    Tried and dropped: the taps as explicit eight-lane vectors (:mod:`.simd`; the side columns'
    sums selected by float32 masks, the last vector shifted back to end at the plane's last
    output, Relu/Clip in registers), for the small planes whose rows run in LLVM's scalar
    remainder. Kernels alone, 2 threads, bias + Clip, median us alternating, before -> after:
    960 @ 7 91.5 -> 89.5, 384 @ 14 55.8 -> 57.4, 576 @ 14 80 -> 85, 192 @ 28 63 -> 75, 144 @
    56 166 -> 204, 576 @ 14 s2 108 -> 125: LLVM's own vector loop (16 lanes, byte masks) wins,
    and at 7 x 7 the taps are not where the time goes.
``depthwise3x3_s2_simd`` -- depthwise, 3x3, dilation 1, stride 2, on a CPU with AVX2 and FMA
    (:mod:`.simd`), rows of at least 17 columns. Straight from the NCHW plane into the output,
    no copy: eight outputs of a row at a time, each of the three input rows as two pairs of
    unit-stride loads (elements ``i .. i + 15`` and ``i + 1 .. i + 16``) de-interleaved into
    the three taps' vectors (:func:`.simd.veven` / :func:`.simd.vodd`, one in-lane shuffle
    each; the results' lanes are put in order once, before the store), nine FMAs, the bias and
    Relu/Clip in registers. A row's vectors start at its first output whose taps lie in the
    row and step by eight, the last one shifted back to end at the row's last output that
    they reach (it overlaps the one before: a few outputs computed twice); the outputs left at
    the two ends are summed tap by tap -- except output 0 with one column of padding on the
    left, which has a vector of its own: it loads from the element before the row and zeroes
    that lane (:func:`.simd.vset`) before the de-interleave. Tap by tap, output 0 alone had cost
    a third of the kernel or more (kernels alone, 2 threads, bias + Clip, alternating, median
    us, before -> after: 96 @ 112 291 -> 237, 144 @ 56 155 -> 114, 192 @ 28 82 -> 59, 256 @ 28
    106 -> 75, 128 @ 56 137 -> 105; results within 1.5e-6, the sums' order changed). In
    MobileNetV2 the three layers read their inputs cold, from L3, and run no faster (sessions
    alternating: 0.98-1.00x of the model, the layers 0.92-1.06x). Cost: ``2 * MACS + 2 * N * C
    * H * W`` (the input read once) ``+ LOOP * N * C * OH`` (a row's ends).
    Kernels alone, median us of 30 calls, the least of 5 rounds alternating (depthwise3x3 /
    depthwise3x3_same / depthwise3x3_s2_simd), pads 1, bias, hot caches:

    ==============  =================  =================
    layer           1 thread           2 threads (noisy)
    ==============  =================  =================
    96 @ 112        484 / 690 / 311    492 / 470 / 237
    144 @ 56        282 / 261 / 175    293 / 190 / 156
    192 @ 28        160 / 96 / 87      171 / 79 / 74
    128 @ 56                           249 / 174 / 124
    256 @ 28                           227 / 98 / 97
    ==============  =================  =================

    In MobileNetV2 (its three stride-2 layers of 28 columns or more; 576 @ 14 stays with
    depthwise3x3_same), one process, the plans with and without the scheme interleaved, 30
    runs on a loaded machine: those layers 846 -> 563 us at 2 threads (the model 10.67 -> 10.39
    ms), 1079 -> 759 us at 1 thread (14.75 -> 14.45 ms); outputs within 3.2e-8. On the way
    (8 @ 112, 1 thread): a de-interleave with a lane-crossing ``vpermpd`` per tap (LLVM's
    lowering of an in-order even/odd shuffle) took 34.4 us, one per vector 31.0; a scalar loop
    over the whole row that skipped the vectors' outputs took 39.5; one chain of nine FMAs
    instead of one per input row ran the same; the first eight outputs of a row with left
    padding from a small zero-padded copy of its first columns, instead of output 0 tap by
    tap, gained nothing (26.4 -> 28.1 us, the two alternating in one process).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import NodeSpec, Storage
from refmnn.backends.numba.kernels._common import JIT, PJIT, Bound, BoundRun, Call, renamed
from refmnn.backends.numba.kernels.conv_base import (LOOP, ConvBase, conv_params,
                                                     is_depthwise_3x3, macs)
from refmnn.backends.numba.kernels.fused import CLIP, NONE, RELU, activate, activate_row
from refmnn.backends.numba.kernels.gemm_simd import activate8
from refmnn.backends.numba.kernels.simd import (native, vadd, veven, vfma, vload, vodd, vorder,
                                                vset, vsplat, vstore)

# outputs from which both schemes run their parallel loops, on OpenMP / on workqueue (whose
# launches cost more)
DEPTHWISE_PARALLEL_MIN = 1 << 12
DEPTHWISE_PARALLEL_MIN_WORKQUEUE = 1 << 18


def is_depthwise_3x3_same(spec: NodeSpec) -> bool:
    """Depthwise 3x3, dilation 1, one column of padding on the left and, at stride 1, on the
    right (the width is kept); at stride 2, at most one on the right (every sampled column is
    then a column of the stride-1 result)."""
    if not is_depthwise_3x3(spec):
        return False
    _, _, s, _, _, _, _, pl, _, pr, _ = conv_params(spec)
    return pl == 1 and (pr == 1 if s == 1 else pr <= 1)


@njit(inline="always", **JIT)
def _taps3x3(acc, p0, p1, p2, s, b, k):
    """``acc[q] = b + the nine taps`` at flat position ``s * q`` of the padded rows p0, p1, p2
    (the padded plane from row 0, 1, 2 on). Slices from 0 keep every index provably >= 0, so
    Numba emits no negative-index fixup and the loop vectorises."""
    w00, w01, w02 = k[0, 0], k[0, 1], k[0, 2]
    w10, w11, w12 = k[1, 0], k[1, 1], k[1, 2]
    w20, w21, w22 = k[2, 0], k[2, 1], k[2, 2]
    for q in range(acc.shape[0]):
        i = q * s
        acc[q] = (b + (w00 * p0[i] + w01 * p0[i + 1] + w02 * p0[i + 2])
                  + (w10 * p1[i] + w11 * p1[i + 1] + w12 * p1[i + 2])
                  + (w20 * p2[i] + w21 * p2[i + 1] + w22 * p2[i + 2]))


@njit(inline="always", **JIT)
def _taps3x3_s2(acc, ee, eo, oe, oo, pitch, b, k):
    """Stride 2 on the four parity planes of the padded input (even/odd row, even/odd column,
    each with row pitch ``pitch``): tap (kh, kw) of output ``q = oh*pitch + ow`` is element
    ``q``, ``q + 1`` or ``q + pitch`` (+1) of one plane, so every load is unit-stride."""
    e2, o2 = ee[pitch:], eo[pitch:]
    for q in range(acc.shape[0]):
        acc[q] = (b + (k[0, 0] * ee[q] + k[0, 1] * eo[q] + k[0, 2] * ee[q + 1])
                  + (k[1, 0] * oe[q] + k[1, 1] * oo[q] + k[1, 2] * oe[q + 1])
                  + (k[2, 0] * e2[q] + k[2, 1] * o2[q] + k[2, 2] * e2[q + 1]))


@njit(inline="always", **JIT)
def padded_geometry(oh_n, ow_n, s, k):
    """The padded plane that the ``k x k`` taps of an ``oh_n x ow_n`` output at stride ``s``
    read (see :func:`fill_padded`): ``(hp, wp, pitch, size, area, length, wide)`` -- its height
    and width, the row pitch, the elements of one plane (stride 2: of each parity plane, whose
    rows and columns are the padded plane's even or odd ones), of all of them, of the flat
    output ``acc``, and of the zero-padded input row (stride 2, else 0)."""
    hp = (oh_n - 1) * s + k
    wp = (ow_n - 1) * s + k
    pitch = wp if s == 1 else (wp + 1) // 2
    size = (hp if s == 1 else (hp + 1) // 2) * pitch
    area = size if s == 1 else 4 * size
    length = (oh_n - 1) * pitch + ow_n
    wide = 2 * pitch if s == 2 else 0
    return hp, wp, pitch, size, area, length, wide


@njit(inline="always", **JIT)
def fill_padded(src, buf, padded, s, pt, pl, hp, wp, pitch, size):
    """Copy the plane ``src [H, W]`` into the zero-padded plane that the 3x3 taps read (padding
    ``pt`` rows above, ``pl`` columns left; ``hp x wp`` padded): at stride 1 one plane of row
    pitch ``pitch`` in ``buf``, at stride 2 its four row/column parity planes of ``size``
    elements each (pitch ``pitch``), through the zero-padded row ``padded`` (``2 * pitch``
    long, 8-byte aligned). Only the interior is written: ``buf`` and ``padded`` must be
    zero-filled once."""
    h, wd = src.shape
    pairs = padded.view(np.uint64)  # stride 2: each (even, odd) pair of columns as one word
    bits = buf.view(np.uint32)
    # the input rows and columns that fall inside the padded plane
    for ih in range(max(0, -pt), min(h, hp - pt)):
        r = ih + pt
        line = src[ih]
        count = min(wd, wp - pl)
        if s == 1:
            row = buf[r * pitch + pl:r * pitch + pl + count]
            for k in range(count):
                row[k] = line[k]
        else:
            # the zero-padded row (its padding columns are never written, so they stay zero),
            # then its even and odd columns c into column c // 2 of parity planes (r % 2, 0)
            # and (r % 2, 1): the low and high halves of each 64-bit pair (little-endian), one
            # loop of integer truncations and shifts, which LLVM vectorises (as max3x3s2 does;
            # a loop of float loads at stride 2 did not vectorise as well)
            inner = padded[pl:pl + count]
            for k in range(count):
                inner[k] = line[k]
            even = bits[(r % 2) * 2 * size + (r // 2) * pitch:]
            odd = bits[((r % 2) * 2 + 1) * size + (r // 2) * pitch:]
            for m in range(pitch):
                pair = pairs[m]
                even[m] = np.uint32(pair & 0xFFFFFFFF)
                odd[m] = np.uint32(pair >> 32)


@njit(inline="always", **JIT)
def store_rows(acc, plane, pitch, act, alpha, lo, hi):
    """Activate the flat output ``acc`` (rows of pitch ``pitch``, junk columns after each) in
    place and copy its rows into ``plane [OH, OW]``."""
    activate_row(acc, act, alpha, lo, hi)
    ow_n = plane.shape[1]
    for oh in range(plane.shape[0]):
        dst = plane[oh]
        line = acc[oh * pitch:oh * pitch + ow_n]
        for k in range(ow_n):
            dst[k] = line[k]


def _depthwise3x3(x, w, bias, out, s, pt, pl, mult, act, alpha, lo, hi, scratch, parts):
    """3x3 depthwise conv, stride ``s`` (1 or 2) on both axes, any padding, bias and activation
    fused; the input is read once and the output written once.

    ``parts`` workers (``prange``), each over a contiguous run of the (n, oc) planes. A worker
    copies its plane, zero-padded, into its scratch (the padding is zeroed once per call: every
    plane overwrites only the interior) such that the whole output plane is *one* flat loop
    ``acc[q], q = oh*P + ow`` (row pitch ``P``, a few junk columns per row) with the nine taps
    unrolled and no bounds tests, which LLVM vectorises:

    * stride 1: the padded plane ``[Hp, Wp]``, ``P = Wp``; tap (kh, kw) is ``pad[q + kh*P + kw]``.
    * stride 2: the padded plane split by row and column parity into four planes of pitch
      ``P = OW + 1`` ("space to depth"); each tap is ``plane[q (+1) (+P)]`` of one of them.
      Each input row is first copied into a zero-padded row, whose even and odd columns then
      go to their two planes in one loop. Copying each parity straight from the input row at
      stride 2 (one loop per parity) took 70% of the kernel; against it, median us of 300
      calls, three rounds, 2 threads: 96 @ 112 524-597 -> 220-279, 144 @ 56 169-253 ->
      107-180, 192 @ 28 and 576 @ 14 unchanged within noise (1 thread: 747-809 -> 390-395,
      326-329 -> 208-213); MobileNet-v2 end to end, interleaved in one process: 8.63 -> 8.25
      and 9.47 -> 9.07 ms, mobilenet_v1 10.64 -> 10.35 ms, outputs equal. That loop then read
      the pairs as floats at stride 2; reading each pair as one 64-bit word and storing its
      halves, as ``max3x3s2`` does (:mod:`.pool`), took the copy from ~300 of the kernel's
      ~410 us (96 @ 112) down by a fifth. The whole kernel, median us of 5 x 60 calls
      alternating, 2 threads, outputs bit-equal, on an AVX2 EPYC (Zen 3): 96 @ 112 412 -> 345,
      144 @ 56 142 -> 123, 192 @ 28 113 -> 84, 576 @ 14 149 -> 104, 128 @ 56 166 -> 134,
      256 @ 28 144 -> 103, 512 @ 14 142 -> 111, 64 @ 112 175 -> 171.

    One loop per output row instead ran mostly in LLVM's scalar remainder (rows of 7..56
    outputs against a 16-lane vector loop unrolled 4x), and a flat stride-2 loop over the plain
    padded plane (loads ``pad[2q + ...]``) was 2x slower than the parity planes. ``acc`` is
    activated in place (:func:`.fused.activate_row`) and its rows copied to the output.
    """
    n_img, c_in, h, wd = x.shape
    oc_n = w.shape[0]
    oh_n, ow_n = out.shape[2], out.shape[3]
    hp, wp, pitch, size, area, length, wide = padded_geometry(oh_n, ow_n, s, 3)
    jobs = n_img * oc_n
    for part in prange(parts):
        padded = scratch[part, :wide]  # first: 8-byte aligned (each part's row is even)
        buf = scratch[part, wide:wide + area]
        acc = scratch[part, wide + area:wide + area + length]
        buf[:] = 0
        padded[:] = 0
        for t in range(part * jobs // parts, (part + 1) * jobs // parts):
            n = t // oc_n
            oc = t % oc_n
            fill_padded(x[n, oc // mult], buf, padded, s, pt, pl, hp, wp, pitch, size)
            b = bias[oc]
            k3 = w[oc, 0]
            if s == 1:
                _taps3x3(acc, buf[0:], buf[pitch:], buf[2 * pitch:], 1, b, k3)
            else:
                _taps3x3_s2(acc, buf[0:], buf[size:], buf[2 * size:], buf[3 * size:], pitch, b, k3)
            store_rows(acc, out[n, oc], pitch, act, alpha, lo, hi)


conv_depthwise3x3 = njit(**PJIT)(_depthwise3x3)
# the same loops, one thread, no launch (its own name: see _common.renamed)
conv_depthwise3x3_serial = njit(**JIT)(renamed(_depthwise3x3, "_serial"))


@njit(inline="always", **JIT)
def _taps3x3_same(dst, r0, r1, r2, keep_left, keep_right, b, k):
    """``dst[q] = b + the nine taps`` at flat position ``q`` of the rows r0, r1, r2 (the buffer
    from padded row 0, 1, 2 on, one guard element first), grouped by kernel column; the left and
    right columns' sums are selected away where ``keep_left[q]`` / ``keep_right[q]`` is 0."""
    w00, w01, w02 = k[0, 0], k[0, 1], k[0, 2]
    w10, w11, w12 = k[1, 0], k[1, 1], k[1, 2]
    w20, w21, w22 = k[2, 0], k[2, 1], k[2, 2]
    zero = np.float32(0)
    for q in range(dst.shape[0]):
        left = w00 * r0[q] + w10 * r1[q] + w20 * r2[q]
        mid = w01 * r0[q + 1] + w11 * r1[q + 1] + w21 * r2[q + 1]
        right = w02 * r0[q + 2] + w12 * r1[q + 2] + w22 * r2[q + 2]
        dst[q] = ((b + mid) + (left if keep_left[q] else zero)) + (right if keep_right[q] else zero)


def _depthwise3x3_same(x, w, bias, out, s, pt, mult, act, alpha, lo, hi, keep_left, keep_right,
                       scratch, parts):
    """3x3 depthwise at the input's row pitch (see the module docstring), bias and activation
    fused; stride 2 computes the stride-1 rows ``0 .. 2*(OH-1)`` into scratch and samples every
    other row and column of them. ``parts`` workers (``prange``) each over a contiguous run of
    the (n, oc) planes, each with a buffer ``[guard, pt zero rows, the plane, the zero rows
    below, guard]`` of row pitch ``W`` at the start of its scratch row (the zeros written once
    per call; every plane overwrites only its rows), then (stride 2) the stride-1 rows.

    A plane makes no array views of x or out: it is copied from x's flat view by offset, eight
    elements a vector (:func:`.simd.vload`; as a scalar loop, ``plane[i] = xf[src + i]``, whose
    computed index carries Numba's negative-index fix-up, the kernel ran twice as slow on 56 x
    56 planes), and written through one slice of out's flat view; the buffer's three row views
    are made once per worker (a view updates its parent's reference count, which both
    workers share: the likely cost). Against the four views per plane of before (x's plane,
    out's, and their reshapes) and three per plane of the buffer, the kernel alone (2 threads,
    bias + Clip, alternating, median us): 960 @ 7 102 -> 55, 576 @ 14 80 -> 57, 384 @ 14 55 ->
    40, 576 @ 14 s2 106 -> 81, 192 @ 28 65 -> 56, 144 @ 56 172 -> 157, 32 @ 112 145 -> 135;
    sessions alternating in one process, 2 threads: MobileNetV2 10.04 -> 9.59 ms, MobileNet-v1
    12.62 -> 12.43 ms; outputs bit-equal."""
    n_img, c_in, h, wd = x.shape
    oc_n = w.shape[0]
    oh_n, ow_n = out.shape[2], out.shape[3]
    size = h * wd
    start = 1 + pt * wd  # where the plane begins in the buffer
    length = keep_left.shape[0]  # outputs of the stride-1 loop: OH rows, or 2*OH - 1 (s == 2)
    span = scratch.shape[1] - (length if s == 2 else 0)  # the buffer
    jobs = n_img * oc_n
    area = oh_n * ow_n
    xf, of = x.reshape(x.size), out.reshape(out.size)  # no views made per plane (see above)
    for part in prange(parts):
        buf = scratch[part, :span]
        rows = scratch[part, span:]  # s == 2: the stride-1 rows
        buf[:start] = 0
        buf[start + size:] = 0
        plane = buf[start:start + size]
        r0, r1, r2 = buf[0:], buf[wd:], buf[2 * wd:]
        for t in range(part * jobs // parts, (part + 1) * jobs // parts):
            n = t // oc_n
            oc = t % oc_n
            src = (n * c_in + oc // mult) * size  # the plane copied from x's flat view
            for i in range(0, size - 7, 8):
                vstore(plane, i, vload(xf, src + i))
            for i in range(size - size % 8, size):
                plane[i] = xf[src + i]
            dst = of[t * area:(t + 1) * area]
            _taps3x3_same(dst if s == 1 else rows, r0, r1, r2, keep_left, keep_right, bias[oc],
                          w[oc, 0])
            if s == 2:
                for oh in range(oh_n):
                    line = rows[2 * oh * wd:]
                    row = dst[oh * ow_n:(oh + 1) * ow_n]
                    for ow in range(ow_n):
                        row[ow] = line[2 * ow]
            activate_row(dst, act, alpha, lo, hi)


conv_depthwise3x3_same = njit(**PJIT)(_depthwise3x3_same)
# the same loops, one thread, no launch (its own name: see _common.renamed)
conv_depthwise3x3_same_serial = njit(**JIT)(renamed(_depthwise3x3_same, "_serial"))


def s2_vector_span(wd: int, pl: int) -> tuple[int, int]:
    """depthwise3x3_s2_simd's vectors in an output row of a ``wd``-wide input with ``pl``
    columns of padding on the left: ``(first, last)``, the first output of the first vector
    (the first whose leftmost tap, column ``2 * ow - pl``, lies in the row) and of the last one
    (whose loads reach column ``2 * last - pl + 16``, the row's last or before); no vector when
    ``first > last``."""
    return (pl + 1) // 2, (wd - 17 + pl) // 2


@njit(inline="always", **JIT)
def _row_s2(xf, i, acc, k0, k1, k2, edge):
    """``acc + k0 * x[i + 2j] + k1 * x[i + 2j + 1] + k2 * x[i + 2j + 2]`` for the eight lanes
    ``j``: two pairs of unit-stride loads (elements ``i .. i + 15`` and ``i + 1 .. i + 16``),
    de-interleaved into their even and odd elements (no load reaches past ``i + 16``), the lanes
    in :func:`.simd.veven`'s order. With ``edge``, element ``i`` is the column of padding before
    the row (the previous row's last element or the plane's last before it): it is replaced by
    zero in the loaded vector -- a select, not a weight multiplied by 0, so an inf or NaN there
    cannot leak in."""
    a, b = vload(xf, i), vload(xf, i + 8)
    if edge:
        a = vset(a, 0, np.float32(0))
    acc = vfma(veven(a, b), k0, acc)
    acc = vfma(vodd(a, b), k1, acc)
    return vfma(vodd(vload(xf, i + 1), vload(xf, i + 9)), k2, acc)


@njit(inline="always", **JIT)
def _one_s2(xf, src, h, wd, r0, c0, w, oc, b):
    """One output from its taps that lie in the plane at ``xf[src:]`` (rows ``r0 ..``, columns
    ``c0 ..``)."""
    acc = b
    for kh in range(3):
        r = r0 + kh
        if 0 <= r < h:
            for kw in range(3):
                c = c0 + kw
                if 0 <= c < wd:
                    acc += w[oc, 0, kh, kw] * xf[src + r * wd + c]
    return acc


def _depthwise3x3_s2_simd(x, w, bias, out, pt, pl, first, last, mult, act, alpha, lo, hi,
                          parts):
    """3x3 depthwise at stride 2 straight from the NCHW planes into the output, eight outputs
    of a row at a time (see :func:`_row_s2`), bias and activation in registers (Relu, Clip;
    another activation in a pass over each row); the outputs whose taps reach past the row's
    ends one by one (``first``, ``last``: :func:`s2_vector_span`). ``parts`` workers
    (``prange``), each over a contiguous run of the (n, oc) planes. A plane makes no array
    views (as in :func:`_depthwise3x3_same`): x and out are read and written through their
    flat views at the plane's offsets, the weights as scalars of w. Against the five views per
    plane of before, kernel alone, 2 threads, bias + Clip, alternating, median us: 96 @ 112
    260 -> 241, 144 @ 56 150 -> 137, 192 @ 28 84 -> 74, 256 @ 28 112 -> 98 (1 thread: 0.95-
    0.99x); outputs bit-equal."""
    n_img, c_in, h, wd = x.shape
    oc_n = w.shape[0]
    oh_n, ow_n = out.shape[2], out.shape[3]
    vact = act if act == RELU or act == CLIP else NONE  # the one in registers
    jobs = n_img * oc_n
    area = oh_n * ow_n
    xf, of = x.reshape(x.size), out.reshape(out.size)  # no views made per plane
    for part in prange(parts):
        for t in range(part * jobs // parts, (part + 1) * jobs // parts):
            oc = t % oc_n
            src = (t // oc_n * c_in + oc // mult) * h * wd  # the plane's offsets in xf and of
            dst = t * area
            b = bias[oc]
            vb, zero = vsplat(b), vsplat(np.float32(0))
            k00, k01, k02 = vsplat(w[oc, 0, 0, 0]), vsplat(w[oc, 0, 0, 1]), vsplat(w[oc, 0, 0, 2])
            k10, k11, k12 = vsplat(w[oc, 0, 1, 0]), vsplat(w[oc, 0, 1, 1]), vsplat(w[oc, 0, 1, 2])
            k20, k21, k22 = vsplat(w[oc, 0, 2, 0]), vsplat(w[oc, 0, 2, 1]), vsplat(w[oc, 0, 2, 2])
            for oh in range(oh_n):
                r0 = 2 * oh - pt
                o = dst + oh * ow_n
                # one column of padding on the left: output 0 in a vector too, its padding read
                # as a zeroed lane (the element before the row; the rows before x's first row
                # of all, which has none, keep output 0 tap by tap)
                left = pl == 1 and first <= last and (src > 0 or r0 > 0)
                ow = 0 if left else first
                while ow <= last:  # the last vector may overlap the one before it
                    i = src + r0 * wd + 2 * ow - pl
                    edge = left and ow == 0
                    # a sum per input row (a row outside the plane adds nothing)
                    top = _row_s2(xf, i, vb, k00, k01, k02, edge) if 0 <= r0 < h else vb
                    mid = (_row_s2(xf, i + wd, zero, k10, k11, k12, edge) if 0 <= r0 + 1 < h
                           else zero)
                    low = (_row_s2(xf, i + 2 * wd, zero, k20, k21, k22, edge) if 0 <= r0 + 2 < h
                           else zero)
                    acc = vadd(vadd(top, mid), low)
                    vstore(of, o + ow, vorder(activate8(acc, vact, lo, hi)))
                    ow = last if ow < last and ow + 8 > last else ow + 8
                # the outputs the vectors leave at the row's two ends (output 0 done above)
                for ow in range(first if left else 0, min(first, ow_n)):
                    v = _one_s2(xf, src, h, wd, r0, 2 * ow - pl, w, oc, b)
                    of[o + ow] = activate(vact, v, alpha, lo, hi)
                for ow in range(last + 8 if first <= last else first, ow_n):
                    v = _one_s2(xf, src, h, wd, r0, 2 * ow - pl, w, oc, b)
                    of[o + ow] = activate(vact, v, alpha, lo, hi)
                if vact != act:
                    activate_row(of[o:o + ow_n], act, alpha, lo, hi)


conv_depthwise3x3_s2_simd = njit(**PJIT)(_depthwise3x3_s2_simd)
# the same loops, one thread, no launch (its own name: see _common.renamed)
conv_depthwise3x3_s2_simd_serial = njit(**JIT)(renamed(_depthwise3x3_s2_simd, "_serial"))


class Depthwise3x3Conv(BoundRun, ConvBase):
    """3x3 depthwise with the bias and the activation applied in the same pass (the residual,
    when FusedConv has one, still goes through the epilogue pass, which then also activates).
    Small layers run the serial copy of the loops (one part): a parallel launch costs more than
    they do."""

    def prepare(self, spec: NodeSpec) -> None:
        import numba

        super().prepare(spec)
        self.act = self.activation_in_loops()
        n, oc, oh, ow = (int(d) for d in spec.outputs[0].shape)
        from refmnn.backends.numba.backend import threading_layer

        wq = threading_layer() == "workqueue"
        self.parallel = n * oc * oh * ow >= (DEPTHWISE_PARALLEL_MIN_WORKQUEUE if wq else
                                             DEPTHWISE_PARALLEL_MIN)
        self.parts = numba.config.NUMBA_NUM_THREADS if self.parallel else 1
        self.per = self.scratch_per_part(spec)
        self.workspace_bytes = self.parts * self.per * 4
        self.bound = Bound()

    def scratch_per_part(self, spec: NodeSpec) -> int:
        """float32 elements of one part's scratch: (stride 2) the padded input row, the padded
        plane (stride 2: the four parity planes) and acc (see :func:`_depthwise3x3`); an even
        count, so that every part's padded row is 8-byte aligned for its 64-bit view."""
        oh, ow = (int(d) for d in spec.outputs[0].shape[2:])
        *_, area, length, wide = padded_geometry(oh, ow, self.params[2], 3)
        return (wide + area + length + 1) // 2 * 2

    def arguments(self, inputs, out, scratch) -> tuple:  # type: ignore[no-untyped-def]
        """The loops' arguments (see :func:`_depthwise3x3`)."""
        _, _, s, _, _, _, pt, pl, _, _, g = self.params
        ep = self.epilogue
        return (inputs[0], inputs[1], self.bias(inputs), out, s, pt, pl, inputs[1].shape[0] // g,
                self.act, ep.alpha, ep.lo, ep.hi, scratch, self.parts)

    loops = (conv_depthwise3x3, conv_depthwise3x3_serial)  # (parallel, serial) builds

    def after_calls(self, inputs, out):  # type: ignore[no-untyped-def]
        return self.epilogue.after(inputs, out)

    def calls(self, inputs, out, workspace) -> tuple[Call, ...]:  # type: ignore[no-untyped-def]
        """The parallel or the serial loops' call (see :class:`.Bound`)."""
        scratch = workspace.handle[:self.workspace_bytes].view(np.float32).reshape(
            self.parts, self.per) if self.workspace_bytes else None
        parallel, serial = self.loops
        return ((parallel if self.parallel else serial, self.arguments(inputs, out, scratch)),)


class Depthwise3x3SameConv(Depthwise3x3Conv):
    """depthwise3x3_same: Depthwise3x3Conv's activation, epilogue, threading and ``run``; its
    own buffer, masks, loops and their arguments."""

    def _stride1_outputs(self, spec: NodeSpec) -> int:
        """Outputs of the stride-1 loop: OH rows of W, or 2*OH - 1 of them at stride 2."""
        oh, wd = int(spec.outputs[0].shape[2]), int(spec.inputs[0].shape[3])
        return oh * wd if self.params[2] == 1 else (2 * oh - 1) * wd

    def scratch_per_part(self, spec: NodeSpec) -> int:
        """The buffer ``[guard, pt zero rows, the plane, pb zero rows, guard]`` of row pitch
        ``W``, then (stride 2) the stride-1 rows (see :func:`_depthwise3x3_same`)."""
        _, _, h, wd = (int(d) for d in spec.inputs[0].shape)
        _, _, s, _, _, _, pt, _, pb, _, _ = self.params
        return 2 + (pt + h + pb) * wd + (self._stride1_outputs(spec) if s == 2 else 0)

    def prepare(self, spec: NodeSpec) -> None:
        super().prepare(spec)
        wd = int(spec.inputs[0].shape[3])
        length = self._stride1_outputs(spec)
        column = np.arange(length) % wd
        buf = self.backend.allocate(2 * length, Storage.STATIC)
        masks = buf.handle[:2 * length].view(np.uint8).reshape(2, length)
        masks[0] = column != 0
        masks[1] = column != wd - 1
        self.keep_left, self.keep_right = masks[0], masks[1]

    def arguments(self, inputs, out, scratch) -> tuple:  # type: ignore[no-untyped-def]
        """The loops' arguments (see :func:`_depthwise3x3_same`)."""
        _, _, s, _, _, _, pt, _, _, _, g = self.params
        ep = self.epilogue
        return (inputs[0], inputs[1], self.bias(inputs), out, s, pt, inputs[1].shape[0] // g,
                self.act, ep.alpha, ep.lo, ep.hi, self.keep_left, self.keep_right, scratch,
                self.parts)

    loops = (conv_depthwise3x3_same, conv_depthwise3x3_same_serial)


def depthwise3x3_cost(spec: NodeSpec) -> float:
    n, c, h, w = (int(d) for d in spec.inputs[0].shape)
    oh = int(spec.outputs[0].shape[2])
    # per plane: a copy loop per input row, the taps and activation, a copy loop per output row
    # (stride 2's second loop per input row, a de-interleave of half its length, is not counted:
    # with it the formula overestimated the stride-2 layers 1.3-1.6x)
    loops = n * c * (h + 2 + oh)
    return 2 * macs(spec) + 4.0 * n * c * h * w + LOOP * loops + 2000.0


def depthwise3x3_same_cost(spec: NodeSpec) -> float:
    n, c, h, w = (int(d) for d in spec.inputs[0].shape)
    oh = int(spec.outputs[0].shape[2])
    s = conv_params(spec)[2]
    computed = n * c * (oh if s == 1 else 2 * oh - 1) * w  # stride-1 outputs
    # per plane: the copy, taps and activation loops (stride 2: a sampling loop per output row)
    loops = n * c * (3 + (oh if s == 2 else 0))
    return 2 * 9 * computed + 4.0 * n * c * h * w + LOOP * loops + 2000.0


def is_depthwise3x3_s2_simd(spec: NodeSpec) -> bool:
    """Depthwise 3x3 at stride 2 (dilation 1), on a CPU with AVX2 and FMA (:func:`.simd.native`),
    with a row wide enough for one vector of eight outputs (:func:`s2_vector_span`)."""
    if not (is_depthwise_3x3(spec) and conv_params(spec)[2] == 2 and native()):
        return False
    first, last = s2_vector_span(int(spec.inputs[0].shape[3]), conv_params(spec)[7])
    return first <= last


class Depthwise3x3S2SimdConv(Depthwise3x3Conv):
    """depthwise3x3_s2_simd: Depthwise3x3Conv's activation, epilogue, threading and ``run``;
    no scratch, its own loops and their arguments."""

    def scratch_per_part(self, spec: NodeSpec) -> int:
        return 0

    def arguments(self, inputs, out, scratch) -> tuple:  # type: ignore[no-untyped-def]
        """The loops' arguments (see :func:`_depthwise3x3_s2_simd`)."""
        _, _, _, _, _, _, pt, pl, _, _, g = self.params
        ep = self.epilogue
        first, last = s2_vector_span(int(inputs[0].shape[3]), pl)
        return (inputs[0], inputs[1], self.bias(inputs), out, pt, pl, first, last,
                inputs[1].shape[0] // g, self.act, ep.alpha, ep.lo, ep.hi, self.parts)

    loops = (conv_depthwise3x3_s2_simd, conv_depthwise3x3_s2_simd_serial)


def depthwise3x3_s2_simd_cost(spec: NodeSpec) -> float:
    n, c, h, w = (int(d) for d in spec.inputs[0].shape)
    oh = int(spec.outputs[0].shape[2])
    # the taps in registers, the input read once (no copy), a row's ends one by one
    return 2 * macs(spec) + 2.0 * n * c * h * w + LOOP * n * c * oh + 2000.0
