"""2-D convolution (Conv-1/11, NCHW, float32), eight schemes chosen by cost.

Notation: input ``[N, C, H, W]``, weights ``[OC, C/g, KH, KW]``, output ``[N, OC, OH, OW]``,
``g`` groups, ``K = (C/g) * KH * KW`` the reduction length, ``MACS = N * OC * OH * OW * K``.
The bias is added inside the loops (direct, depthwise, Winograd) or, for the sgemm schemes, in
one epilogue pass right after the sgemm -- the same pass that adds FusedConv's residual and
applies its activation (:mod:`.fused`), so ``Conv -> Add -> Relu`` reads and writes the output
once more, not three times. ``gemm_1x1`` runs that pass per sgemm panel, on the thread that
computed the panel, and ``depthwise3x3`` applies bias and activation in its own loops, so
neither pays a second parallel launch. FusedConv has the same schemes as Conv.

What a launch costs decides much here: on the shared two-core VM these kernels were tuned on,
entering an empty ``prange`` loop took 50-100 us on the workqueue layer (waking a sleeping
worker; 1-2 us on OpenMP, whose workers spin), and handing a panel to the GEMM pool 20-50 us,
while many MobileNet layers compute in 50-200 us. So small kernels run serial copies of their
loops (``depthwise3x3`` below 2^18 outputs, the epilogue below 2^21 elements) and small products
are not split (:mod:`refmnn.backends.numba._blas`).

``direct`` -- any group, stride, dilation and padding.
    ``prange`` over (n, oc); for each input channel and kernel tap, a scalar weight times a row
    segment of the input, accumulated into the output plane (the valid ``ow`` range is computed
    per tap, so there are no bounds tests in the inner loop). Cost: ``12 * 2 * MACS`` (no register
    blocking: measured about 12x slower than the sgemm schemes on ResNet layers).
``im2col_gemm`` -- any group, stride, dilation and padding.
    Per image and group, the receptive fields are packed (``im2col``, in parallel over the K rows)
    into a WORKSPACE matrix ``[K, OH*OW]``, then one BLAS sgemm ``W_g [OC/g, K] @ col`` writes
    straight into the output plane. Cost: ``2 * MACS`` (sgemm) ``+ 4 * N * C * KH * KW * OH * OW``
    (packing traffic) ``+ 2e6 * N * g`` (per-group launch and sgemm overhead, ~40 us: it rules
    the scheme out for depthwise layers, where 960 groups took 60 ms against 0.6 ms).
``gemm_1x1`` -- 1x1 kernel, stride 1, no padding, one group: the input plane already *is* the
    im2col matrix ``[C, H*W]``, so the conv is one sgemm per image with no packing; bias,
    residual and activation are applied to each sgemm panel by the thread that wrote it, while
    the panel is in cache (:func:`.fused.epilogue_rows`). Cost: ``2 * MACS + 2e5 * N``.
    MobileNet-v2's 1x1 layers, 2 threads, same conditions as the table below (us, before: a
    split sgemm, then a parallel epilogue pass): [96,16]@[16,12544] 1618 -> 897,
    [144,24]@[24,3136] 718 -> 413, [192,32]@[32,784] 437 -> 158, [384,64]@[64,196] 360 -> 145,
    [1280,320]@[320,49] 654 -> 443.
``depthwise`` -- one input channel per group (``C/g == 1``, e.g. MobileNet's 3x3 layers).
    ``prange`` over channels; for each output row and each tap, a contiguous run of outputs is
    updated with the interior computed without bounds tests. Cost: ``10 * 2 * MACS`` (scalar-ish
    loops, but 9 taps per output leave nothing for a GEMM to win).
``depthwise_s1`` -- depthwise with stride 1: each worker copies a channel into a zero-padded
    plane in WORKSPACE and computes the output with the padded row pitch, so that every tap is
    one flat, vectorised loop over the whole plane (instead of one short loop per output row).
    Cost: ``3 * 2 * MACS + 4 * N * OC * (H+2) * (W+2)`` (the padded copy).
``depthwise3x3`` -- depthwise, 3x3, dilation 1, stride 1 or 2 on both axes (MobileNet's layers).
    Each worker copies a plane into a zero-padded plane in WORKSPACE (stride 2: split into four
    row/column parity planes, so every tap is a unit-stride load), computes the whole output
    plane as one flat loop with the nine taps unrolled and no bounds tests (a few junk columns
    per row, the padded pitch), activates it in L1 and copies its rows out: the input is read
    and the output written once. Cost: ``2 * MACS + 4 * N * C * H * W`` (the padded copy).
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
``winograd_f23`` -- 3x3, stride 1, dilation 1, one group: Winograd F(2x2, 3x3). The weights are
    transformed once in ``prepare`` into a STATIC buffer ``U [16, OC, C]`` (``G g G^T``); ``run``
    transforms 4x4 input tiles (``B^T d B``) into a WORKSPACE ``V [16, C, tiles]``, does 16 sgemms
    ``M_i = U_i @ V_i`` and transforms back (``A^T m A``) with the bias. It trades 36 multiplies
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

Winograd cost, F(m x m, 3x3) with ``a = m + 2`` and ``tiles = ceil(OH/m) * ceil(OW/m)``::

    N * (2 * a*a * OC * C * tiles                  the sgemms (whole tiles, border waste included)
         + 84 * a*a * (C + OC) * tiles             the input and output transforms, per element
         + 20 * a*a * OC * C                       reading U, once per image
         + 2 * 2e5)                                the sgemm calls

The two coefficients were fitted (least squares, in the units of ``_im2col_cost``, whose own
scale was fitted to its measured times) to the times below, measured on a shared 2-core machine:
2 threads, N = 1, stride 1, pads 1, C = OC, median of >= 21 interleaved runs in one process,
then the median of 10 such processes (ms; load from other users moved single runs by up to 50%):

    ===========  ===========  ============  ============  ======================
    layer        im2col_gemm  winograd_f23  winograd_f43  chosen by the costs
    ===========  ===========  ============  ============  ======================
    64 @ 56x56   4.05         4.48          1.69          winograd_f43
    128 @ 28x28  3.36         2.04          1.42          winograd_f43
    256 @ 14x14  3.37         2.11          1.88          winograd_f43
    512 @ 7x7    3.99         3.92          3.94          im2col_gemm
    ===========  ===========  ============  ============  ======================

At 7x7 the three are tied within the noise (each won some runs; im2col_gemm two of the three
most loaded ones). The fit gave 17 for U's coefficient (at the fitted scale, 20 units are about
0.3 ns per 4-byte element, 13 GB/s); 20 breaks the tie towards im2col_gemm, which streams 4x
less weight memory than F(4,3) and keeps no transformed copy of the weights. The transform
coefficient, 84 units (about 1.3 ns per element), is shared by both schemes: measured alone,
either scheme's transforms took 0.6 to 4 ns per element, the most on the smallest planes, where
each parallel loop has little work to share out.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme, Storage
from refmnn.backends.numba.kernels._common import F32, JIT, PARALLEL_LOCK, PJIT, window_params
from refmnn.backends.numba.kernels.fused import (NONE, Epilogue, activate_row, epilogue_ok,
                                                 epilogue_rows)
from refmnn.ops.fused import DOMAIN as FUSED_DOMAIN

GEMM_CALL = 2e5  # per sgemm call (and its packing launch), in flop units (~4 us at 50 GFLOP/s)
WINOGRAD_TRANSFORM = 84.0  # per element of V or M written / read by the tile transforms
WINOGRAD_U_READ = 20.0  # per element of U streamed by the sgemms (once per image)
DEPTHWISE_PARALLEL_MIN = 1 << 18  # outputs from which depthwise3x3 runs its parallel loops


# ---------------------------------------------------------------------------------------------
# parameters


def conv_params(spec: NodeSpec) -> tuple[int, ...]:
    """(kh, kw, sh, sw, dh, dw, pad_top, pad_left, pad_bottom, pad_right, group)."""
    kernel = spec.attrs.get("kernel_shape") or [int(d) for d in spec.inputs[1].shape[2:]]
    return (*window_params(spec, kernel), int(spec.attrs.get("group", 1) or 1))


def macs(spec: NodeSpec) -> float:
    n, oc, oh, ow = (int(d) for d in spec.outputs[0].shape)
    _, cg, kh, kw = (int(d) for d in spec.inputs[1].shape)
    return float(n * oc * oh * ow * cg * kh * kw)


def is_2d(spec: NodeSpec) -> bool:
    x, w = spec.inputs[0], spec.inputs[1]
    return x is not None and w is not None and x.rank == 4 and w.rank == 4


def is_1x1(spec: NodeSpec) -> bool:
    if not is_2d(spec):
        return False
    kh, kw, sh, sw, _, _, pt, pl, pb, pr, g = conv_params(spec)
    return (kh, kw, sh, sw, pt, pl, pb, pr, g) == (1, 1, 1, 1, 0, 0, 0, 0, 1)


def is_depthwise(spec: NodeSpec) -> bool:
    return (is_2d(spec) and int(spec.inputs[1].shape[1]) == 1
            and conv_params(spec)[-1] == int(spec.inputs[0].shape[1]))


def is_depthwise_s1(spec: NodeSpec) -> bool:
    return is_depthwise(spec) and conv_params(spec)[2:4] == (1, 1)


def is_depthwise_3x3(spec: NodeSpec) -> bool:
    """Depthwise 3x3, dilation 1, stride 1 or 2 on both axes."""
    if not is_depthwise(spec):
        return False
    kh, kw, sh, sw, dh, dw, *_ = conv_params(spec)
    return (kh, kw, dh, dw) == (3, 3, 1, 1) and sh == sw and sh in (1, 2)


def is_3x3_s1(spec: NodeSpec) -> bool:
    if not is_2d(spec):
        return False
    kh, kw, sh, sw, dh, dw, *_, g = conv_params(spec)
    return (kh, kw, sh, sw, dh, dw, g) == (3, 3, 1, 1, 1, 1, 1) and 1 in spec.constants


# ---------------------------------------------------------------------------------------------
# numba loops


@njit(**PJIT)
def conv_direct(x, w, bias, out, sh, sw, dh, dw, pt, pl, group):
    n_img, c_in, h, wd = x.shape
    oc_n, cg, kh_n, kw_n = w.shape
    oh_n, ow_n = out.shape[2], out.shape[3]
    ocg = oc_n // group
    for t in prange(n_img * oc_n):
        n = t // oc_n
        oc = t % oc_n
        g = oc // ocg
        plane = out[n, oc]
        b = bias[oc]
        for oh in range(oh_n):
            for ow in range(ow_n):
                plane[oh, ow] = b
        for ic in range(cg):
            c = g * cg + ic
            for kh in range(kh_n):
                for kw in range(kw_n):
                    wv = w[oc, ic, kh, kw]
                    off = kw * dw - pl
                    lo = 0 if off >= 0 else min(ow_n, (-off + sw - 1) // sw)
                    hi = max(lo, min(ow_n, (wd - 1 - off) // sw + 1 if wd - 1 - off >= 0 else 0))
                    if hi == lo:
                        continue
                    for oh in range(oh_n):
                        ih = oh * sh - pt + kh * dh
                        if ih < 0 or ih >= h:
                            continue
                        # slices first: indices from 0 let LLVM vectorise (no negative-index fixup)
                        dst = plane[oh, lo:hi]
                        src = x[n, c, ih, lo * sw + off:(hi - 1) * sw + off + 1:sw]
                        for k in range(hi - lo):
                            dst[k] += wv * src[k]


@njit(**PJIT)
def conv_depthwise(x, w, bias, out, sh, sw, dh, dw, pt, pl, mult):
    n_img, c_in, h, wd = x.shape
    oc_n, _, kh_n, kw_n = w.shape
    oh_n, ow_n = out.shape[2], out.shape[3]
    for t in prange(n_img * oc_n):
        n = t // oc_n
        oc = t % oc_n
        c = oc // mult
        plane = out[n, oc]
        src = x[n, c]
        b = bias[oc]
        for oh in range(oh_n):
            orow = plane[oh]
            for ow in range(ow_n):
                orow[ow] = b
            for kh in range(kh_n):
                ih = oh * sh - pt + kh * dh
                if ih < 0 or ih >= h:
                    continue
                irow = src[ih]
                for kw in range(kw_n):
                    wv = w[oc, 0, kh, kw]
                    off = kw * dw - pl
                    lo = 0 if off >= 0 else min(ow_n, (-off + sw - 1) // sw)
                    hi = max(lo, min(ow_n, (wd - 1 - off) // sw + 1 if wd - 1 - off >= 0 else 0))
                    if hi == lo:
                        continue
                    # slices first: indices from 0 let LLVM vectorise (no negative-index fixup)
                    dst = orow[lo:hi]
                    seg = irow[lo * sw + off:(hi - 1) * sw + off + 1:sw]
                    for k in range(hi - lo):
                        dst[k] += wv * seg[k]


@njit(**PJIT)
def conv_depthwise_s1(x, w, bias, out, dh, dw, pt, pl, mult, scratch, parts):
    """Stride-1 depthwise conv with every tap one long contiguous loop.

    Each worker copies a channel into a zero-padded plane ``[Hp, Wp]`` of its scratch and
    computes the output with the padded row pitch ``Wp``: then tap (kh, kw) is
    ``o[p] += w * pad[p + kh*dh*Wp + kw*dw]`` over one flat range, which LLVM vectorises; the
    ``Wp - OW`` junk columns per row are dropped when copying out.
    """
    n_img, c_in, h, wd = x.shape
    oc_n, _, kh_n, kw_n = w.shape
    oh_n, ow_n = out.shape[2], out.shape[3]
    hp = oh_n + (kh_n - 1) * dh
    wp = ow_n + (kw_n - 1) * dw
    length = (oh_n - 1) * wp + ow_n
    jobs = n_img * oc_n
    for part in prange(parts):
        pad = scratch[part, :hp * wp]
        acc = scratch[part, hp * wp:hp * wp + oh_n * wp]
        for t in range(part * jobs // parts, (part + 1) * jobs // parts):
            n = t // oc_n
            oc = t % oc_n
            c = oc // mult
            for i in range(hp * wp):
                pad[i] = 0
            for ih in range(h):
                row = pad[(ih + pt) * wp + pl:(ih + pt) * wp + pl + wd]
                src = x[n, c, ih]
                for k in range(wd):
                    row[k] = src[k]
            b = bias[oc]
            for i in range(length):
                acc[i] = b
            for kh in range(kh_n):
                for kw in range(kw_n):
                    wv = w[oc, 0, kh, kw]
                    shifted = pad[kh * dh * wp + kw * dw:kh * dh * wp + kw * dw + length]
                    for i in range(length):
                        acc[i] += wv * shifted[i]
            for oh in range(oh_n):
                dst = out[n, oc, oh]
                line = acc[oh * wp:oh * wp + ow_n]
                for k in range(ow_n):
                    dst[k] = line[k]


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

    One loop per output row instead ran mostly in LLVM's scalar remainder (rows of 7..56
    outputs against a 16-lane vector loop unrolled 4x), and a flat stride-2 loop over the plain
    padded plane (loads ``pad[2q + ...]``) was 2x slower than the parity planes. ``acc`` is
    activated in place (:func:`.fused.activate_row`) and its rows copied to the output.
    """
    n_img, c_in, h, wd = x.shape
    oc_n = w.shape[0]
    oh_n, ow_n = out.shape[2], out.shape[3]
    hp = (oh_n - 1) * s + 3  # the padded plane that the taps read
    wp = (ow_n - 1) * s + 3
    pitch = wp if s == 1 else ow_n + 1
    rows = hp if s == 1 else oh_n + 1
    size = rows * pitch  # one plane (s == 1) or each of the four parity planes (s == 2)
    planes = 1 if s == 1 else 4
    length = (oh_n - 1) * pitch + ow_n
    jobs = n_img * oc_n
    for part in prange(parts):
        buf = scratch[part, :planes * size]
        acc = scratch[part, planes * size:planes * size + length]
        buf[:] = 0
        for t in range(part * jobs // parts, (part + 1) * jobs // parts):
            n = t // oc_n
            oc = t % oc_n
            src = x[n, oc // mult]
            # copy the input rows and columns that fall inside the padded plane
            for ih in range(max(0, -pt), min(h, hp - pt)):
                r = ih + pt
                line = src[ih]
                if s == 1:
                    row = buf[r * pitch + pl:r * pitch + pl + wd]
                    for k in range(min(wd, wp - pl)):
                        row[k] = line[k]
                else:  # column c = iw + pl goes to parity plane (r % 2, c % 2), column c // 2
                    first, end = max(0, -pl), min(wd, wp - pl)
                    for parity in range(2):
                        i0 = first + (first + pl + parity) % 2  # first iw of this parity
                        if i0 >= end:
                            continue
                        d0 = ((r % 2) * 2 + parity) * size + (r // 2) * pitch + (i0 + pl) // 2
                        dst = buf[d0:]
                        seg = line[i0:]
                        for m in range((end - i0 + 1) // 2):
                            dst[m] = seg[2 * m]
            b = bias[oc]
            k3 = w[oc, 0]
            if s == 1:
                _taps3x3(acc, buf[0:], buf[pitch:], buf[2 * pitch:], 1, b, k3)
            else:
                _taps3x3_s2(acc, buf[0:], buf[size:], buf[2 * size:], buf[3 * size:], pitch, b, k3)
            activate_row(acc, act, alpha, lo, hi)
            plane = out[n, oc]
            for oh in range(oh_n):
                dst = plane[oh]
                line = acc[oh * pitch:oh * pitch + ow_n]
                for k in range(ow_n):
                    dst[k] = line[k]


conv_depthwise3x3 = njit(**PJIT)(_depthwise3x3)
conv_depthwise3x3_serial = njit(**JIT)(_depthwise3x3)  # the same loops, one thread, no launch


@njit(**PJIT)
def im2col(x, n, c0, cg, kh_n, kw_n, sh, sw, dh, dw, pt, pl, oh_n, ow_n, col):
    """col[(ic, kh, kw), (oh, ow)] = x[n, c0 + ic, oh*sh - pt + kh*dh, ow*sw - pl + kw*dw]
    (0 outside the input)."""
    h, wd = x.shape[2], x.shape[3]
    kk = kh_n * kw_n
    for r in prange(cg * kk):
        ic = r // kk
        kh = (r // kw_n) % kh_n
        kw = r % kw_n
        off = kw * dw - pl
        lo = 0 if off >= 0 else min(ow_n, (-off + sw - 1) // sw)
        hi = max(lo, min(ow_n, (wd - 1 - off) // sw + 1 if wd - 1 - off >= 0 else 0))
        src = x[n, c0 + ic]
        for oh in range(oh_n):
            base = oh * ow_n
            ih = oh * sh - pt + kh * dh
            if ih < 0 or ih >= h:
                for ow in range(ow_n):
                    col[r, base + ow] = 0
                continue
            row = src[ih]
            dst = col[r, base:base + ow_n]
            for ow in range(lo):
                dst[ow] = 0
            if hi > lo:
                seg = row[lo * sw + off:(hi - 1) * sw + off + 1:sw]
                part = dst[lo:hi]
                for k in range(hi - lo):
                    part[k] = seg[k]
            for ow in range(hi, ow_n):
                dst[ow] = 0


# ---------------------------------------------------------------------------------------------
# Winograd F(2x2, 3x3)

# G (4x3), B^T (4x4), A^T (2x4) of F(2, 3)
WG = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float64)


@njit(**PJIT)
def winograd23_input(x, n, pt, pl, tiles_h, tiles_w, v):
    """V[16, C, tiles] = B^T d B for every 4x4 input tile d (stride 2, zero outside)."""
    c_in, h, wd = x.shape[1], x.shape[2], x.shape[3]
    for c in prange(c_in):
        tile = np.empty((4, 4), dtype=np.float32)
        tmp = np.empty((4, 4), dtype=np.float32)
        src = x[n, c]
        for th in range(tiles_h):
            for tw in range(tiles_w):
                h0 = th * 2 - pt
                w0 = tw * 2 - pl
                for i in range(4):
                    ih = h0 + i
                    for j in range(4):
                        iw = w0 + j
                        tile[i, j] = src[ih, iw] if (0 <= ih < h and 0 <= iw < wd) else 0
                # tmp = B^T tile (rows)
                for j in range(4):
                    d0, d1, d2, d3 = tile[0, j], tile[1, j], tile[2, j], tile[3, j]
                    tmp[0, j] = d0 - d2
                    tmp[1, j] = d1 + d2
                    tmp[2, j] = d2 - d1
                    tmp[3, j] = d1 - d3
                t = th * tiles_w + tw
                for i in range(4):
                    d0, d1, d2, d3 = tmp[i, 0], tmp[i, 1], tmp[i, 2], tmp[i, 3]
                    v[i * 4 + 0, c, t] = d0 - d2
                    v[i * 4 + 1, c, t] = d1 + d2
                    v[i * 4 + 2, c, t] = d2 - d1
                    v[i * 4 + 3, c, t] = d1 - d3


@njit(**PJIT)
def winograd23_output(m, bias, out, n, tiles_h, tiles_w):
    """out[n, oc, 2x2 tile] = A^T M A + bias, clipped at the output border."""
    oc_n, oh_n, ow_n = out.shape[1], out.shape[2], out.shape[3]
    for oc in prange(oc_n):
        b = bias[oc]
        plane = out[n, oc]
        tmp = np.empty((2, 4), dtype=np.float32)
        for th in range(tiles_h):
            for tw in range(tiles_w):
                t = th * tiles_w + tw
                for j in range(4):
                    m0 = m[0 * 4 + j, oc, t]
                    m1 = m[1 * 4 + j, oc, t]
                    m2 = m[2 * 4 + j, oc, t]
                    m3 = m[3 * 4 + j, oc, t]
                    tmp[0, j] = m0 + m1 + m2
                    tmp[1, j] = m1 - m2 - m3
                for i in range(2):
                    oh = th * 2 + i
                    if oh >= oh_n:
                        continue
                    y0 = tmp[i, 0] + tmp[i, 1] + tmp[i, 2] + b
                    y1 = tmp[i, 1] - tmp[i, 2] - tmp[i, 3] + b
                    ow = tw * 2
                    plane[oh, ow] = y0
                    if ow + 1 < ow_n:
                        plane[oh, ow + 1] = y1


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
def winograd43_input(x, n, pt, pl, tiles_h, tiles_w, v):
    """V[36, C, tiles] = B^T d B for every 6x6 input tile d (stride 4, zero outside).

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
        for th in range(tiles_h):
            for i in range(6):
                ih = th * 4 - pt + i
                dst = rows[i, lo:hi]
                if 0 <= ih < h:
                    seg = src[ih, lo - pl:hi - pl]
                    for k in range(hi - lo):
                        dst[k] = seg[k]
                else:
                    for k in range(hi - lo):
                        dst[k] = 0
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
                    t = t0 + tw
                    v[k * 6 + 0, c, t] = FOUR * e0 - FIVE * e2 + e4
                    v[k * 6 + 1, c, t] = e3 + e4 - FOUR * (e1 + e2)
                    v[k * 6 + 2, c, t] = e4 - e3 + FOUR * (e1 - e2)
                    v[k * 6 + 3, c, t] = e4 - e2 + TWO * (e3 - e1)
                    v[k * 6 + 4, c, t] = e4 - e2 + TWO * (e1 - e3)
                    v[k * 6 + 5, c, t] = FOUR * e1 - FIVE * e3 + e5


@njit(**PJIT)
def winograd43_output(m, bias, out, n, tiles_h, tiles_w):
    """out[n, oc, 4x4 tile] = A^T M A + bias, clipped at the output border.

    One tile row at a time: ``A^T`` combines the six rows of every tile (``s[r, l, tile]``, loops
    over the tiles that read M contiguously), then ``A`` combines the six columns into a line of
    ``4 * tiles_w`` outputs, of which the first OW are copied into the output row.
    """
    oc_n, oh_n, ow_n = out.shape[1], out.shape[2], out.shape[3]
    for oc in prange(oc_n):
        b = bias[oc]
        plane = out[n, oc]
        s = np.empty((4, 6, tiles_w), dtype=np.float32)
        line = np.empty(4 * tiles_w, dtype=np.float32)
        for th in range(tiles_h):
            t0 = th * tiles_w
            for col in range(6):  # s = A^T M, column by column
                for tw in range(tiles_w):
                    m0 = m[0 * 6 + col, oc, t0 + tw]
                    m1 = m[1 * 6 + col, oc, t0 + tw]
                    m2 = m[2 * 6 + col, oc, t0 + tw]
                    m3 = m[3 * 6 + col, oc, t0 + tw]
                    m4 = m[4 * 6 + col, oc, t0 + tw]
                    m5 = m[5 * 6 + col, oc, t0 + tw]
                    s[0, col, tw] = m0 + m1 + m2 + m3 + m4
                    s[1, col, tw] = m1 - m2 + TWO * (m3 - m4)
                    s[2, col, tw] = m1 + m2 + FOUR * (m3 + m4)
                    s[3, col, tw] = m1 - m2 + EIGHT * (m3 - m4) + m5
            for r in range(min(4, oh_n - th * 4)):  # y = s A, a line of outputs
                for tw in range(tiles_w):
                    e0, e1, e2, e3, e4, e5 = (s[r, 0, tw], s[r, 1, tw], s[r, 2, tw], s[r, 3, tw],
                                              s[r, 4, tw], s[r, 5, tw])
                    line[tw * 4 + 0] = e0 + e1 + e2 + e3 + e4 + b
                    line[tw * 4 + 1] = e1 - e2 + TWO * (e3 - e4) + b
                    line[tw * 4 + 2] = e1 + e2 + FOUR * (e3 + e4) + b
                    line[tw * 4 + 3] = e1 - e2 + EIGHT * (e3 - e4) + e5 + b
                dst = plane[th * 4 + r]
                for k in range(ow_n):
                    dst[k] = line[k]


# ---------------------------------------------------------------------------------------------
# kernels


class ConvBase(Kernel):
    """Shared by every scheme (and by FusedConv, whose residual Z is input 3 and whose
    activation is in the attributes): the parameters, the bias, and the epilogue pass."""

    bias_in_epilogue = False  # the GEMM schemes add the bias in the epilogue pass

    def __init__(self, backend) -> None:  # type: ignore[no-untyped-def]
        self.backend = backend

    def prepare(self, spec: NodeSpec) -> None:
        self.params = conv_params(spec)
        oc = int(spec.inputs[1].shape[0])
        self.has_bias = len(spec.inputs) > 2 and spec.inputs[2] is not None
        bias_input = 2 if self.bias_in_epilogue else None
        self.epilogue = Epilogue(spec, bias_input, 3, bias_shape=(oc, 1, 1))
        # a zero bias in STATIC memory when the node has none, so the loops always add one
        buf = self.backend.allocate(oc * 4, Storage.STATIC)
        self.zero_bias = buf.handle[:oc * 4].view(np.float32)
        self.zero_bias[:] = 0

    def bias(self, inputs) -> np.ndarray:  # type: ignore[no-untyped-def]
        return inputs[2] if self.has_bias else self.zero_bias


class DirectConv(ConvBase):
    def run(self, inputs, outputs, workspace):
        kh, kw, sh, sw, dh, dw, pt, pl, _, _, g = self.params
        with PARALLEL_LOCK:
            conv_direct(inputs[0], inputs[1], self.bias(inputs), outputs[0],
                        sh, sw, dh, dw, pt, pl, g)
        self.epilogue(inputs, outputs[0])


class DepthwiseConv(ConvBase):
    def run(self, inputs, outputs, workspace):
        kh, kw, sh, sw, dh, dw, pt, pl, _, _, g = self.params
        mult = inputs[1].shape[0] // g
        with PARALLEL_LOCK:
            conv_depthwise(inputs[0], inputs[1], self.bias(inputs), outputs[0],
                           sh, sw, dh, dw, pt, pl, mult)
        self.epilogue(inputs, outputs[0])


class DepthwiseS1Conv(ConvBase):
    def prepare(self, spec: NodeSpec) -> None:
        import numba

        super().prepare(spec)
        kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, g = self.params
        h, wd = (int(d) for d in spec.inputs[0].shape[2:])
        oh, ow = (int(d) for d in spec.outputs[0].shape[2:])
        self.parts = numba.config.NUMBA_NUM_THREADS
        self.per = (h + pt + pb) * (wd + pl + pr) + oh * (wd + pl + pr)
        self.workspace_bytes = self.parts * self.per * 4

    def run(self, inputs, outputs, workspace):
        kh, kw, sh, sw, dh, dw, pt, pl, _, _, g = self.params
        mult = inputs[1].shape[0] // g
        raw = workspace.handle[:self.workspace_bytes].view(np.float32)
        scratch = raw.reshape(self.parts, self.per)
        with PARALLEL_LOCK:
            conv_depthwise_s1(inputs[0], inputs[1], self.bias(inputs), outputs[0],
                              dh, dw, pt, pl, mult, scratch, self.parts)
        self.epilogue(inputs, outputs[0])


class Depthwise3x3Conv(ConvBase):
    """3x3 depthwise with the bias and the activation applied in the same pass (the residual,
    when FusedConv has one, still goes through the epilogue pass, which then also activates).
    Small layers run the serial copy of the loops (one part): a parallel launch costs more than
    they do."""

    def prepare(self, spec: NodeSpec) -> None:
        import numba

        super().prepare(spec)
        ep = self.epilogue
        self.act = ep.act if ep.z_input is None else NONE
        ep.active = ep.z_input is not None
        kh, kw, sh, sw, *_ = self.params
        n, oc, oh, ow = (int(d) for d in spec.outputs[0].shape)
        self.parallel = n * oc * oh * ow >= DEPTHWISE_PARALLEL_MIN
        self.parts = numba.config.NUMBA_NUM_THREADS if self.parallel else 1
        if sh == 1:  # the padded plane and acc (see _depthwise3x3)
            pitch, planes = (ow - 1) + 3, ((oh - 1) + 3) * ((ow - 1) + 3)
        else:
            pitch, planes = ow + 1, 4 * (oh + 1) * (ow + 1)
        self.per = planes + (oh - 1) * pitch + ow
        self.workspace_bytes = self.parts * self.per * 4

    def run(self, inputs, outputs, workspace):
        kh, kw, sh, sw, dh, dw, pt, pl, _, _, g = self.params
        mult = inputs[1].shape[0] // g
        ep = self.epilogue
        scratch = workspace.handle[:self.workspace_bytes].view(np.float32).reshape(
            self.parts, self.per)
        args = (inputs[0], inputs[1], self.bias(inputs), outputs[0], sh, pt, pl, mult,
                self.act, ep.alpha, ep.lo, ep.hi, scratch, self.parts)
        if self.parallel:
            with PARALLEL_LOCK:
                conv_depthwise3x3(*args)
        else:
            conv_depthwise3x3_serial(*args)
        self.epilogue(inputs, outputs[0])


class Im2colConv(ConvBase):
    bias_in_epilogue = True

    def prepare(self, spec: NodeSpec) -> None:
        super().prepare(spec)
        oc, cg, kh, kw = (int(d) for d in spec.inputs[1].shape)
        self.n, self.c = int(spec.inputs[0].shape[0]), int(spec.inputs[0].shape[1])
        self.oh, self.ow = (int(d) for d in spec.outputs[0].shape[2:])
        self.k = cg * kh * kw
        self.workspace_bytes = self.k * self.oh * self.ow * 4

    def run(self, inputs, outputs, workspace):
        kh, kw, sh, sw, dh, dw, pt, pl, _, _, g = self.params
        x, w, out = inputs[0], inputs[1], outputs[0]
        oc = w.shape[0]
        ocg, cg, p = oc // g, w.shape[1], self.oh * self.ow
        col = workspace.handle[:self.k * p * 4].view(np.float32).reshape(self.k, p)
        wm = w.reshape(g, ocg, self.k)
        for n in range(self.n):
            planes = out[n].reshape(g, ocg, p)
            for gi in range(g):
                with PARALLEL_LOCK:
                    im2col(x, n, gi * cg, cg, kh, kw, sh, sw, dh, dw, pt, pl, self.oh, self.ow, col)
                self.backend.gemm(wm[gi], col, planes[gi])
        self.epilogue(inputs, out)


class Gemm1x1Conv(ConvBase):
    """One sgemm per image; bias, residual and activation applied per panel by the thread that
    computed it (:func:`.fused.epilogue_rows`), unless the residual broadcasts (then one
    epilogue pass after the sgemms)."""

    bias_in_epilogue = True

    def prepare(self, spec: NodeSpec) -> None:
        super().prepare(spec)
        z = spec.inputs[3] if len(spec.inputs) > 3 else None
        self.in_panel = self.epilogue.active and (
            z is None or tuple(int(d) for d in z.shape) == tuple(int(d) for d in spec.outputs[0].shape))
        self._none1 = np.zeros(1, np.float32)
        self._none2 = np.zeros((1, 1), np.float32)

    def run(self, inputs, outputs, workspace):
        x, w, out = inputs[0], inputs[1], outputs[0]
        n_img, c = x.shape[0], x.shape[1]
        oc = w.shape[0]
        p = x.shape[2] * x.shape[3]
        wm = w.reshape(oc, c)
        ep = self.epilogue
        if not self.in_panel:
            for n in range(n_img):
                self.backend.gemm(wm, x[n].reshape(c, p), out[n].reshape(oc, p))
            ep(inputs, out)
            return
        has_b, has_z = ep.bias_input is not None, ep.z_input is not None
        b = inputs[2] if has_b else self._none1
        for n in range(n_img):
            o = out[n].reshape(oc, p)
            z = inputs[3][n].reshape(oc, p) if has_z else self._none2

            def finish(panel, i0, i1, j0, j1, o=o, z=z):  # type: ignore[no-untyped-def]
                epilogue_rows(o, b, z, has_b, has_z, ep.act, ep.alpha, ep.lo, ep.hi,
                              i0, i1, j0, j1)

            self.backend.gemm(wm, x[n].reshape(c, p), o, finish)


class WinogradConv(ConvBase):
    """Winograd F(m x m, 3x3), shared by F(2x2, 3x3) and F(4x4, 3x3): ``m x m`` output tiles
    from ``a x a`` input tiles (``a = m + 2``), ``a*a`` sgemms ``M_i = U_i @ V_i`` per image."""

    # set by each subclass: the output tile side m, G ((m + 2) x 3, float64) and the two loops
    # transform_input(x, n, pt, pl, tiles_h, tiles_w, v), transform_output(m, bias, out, n, ...)
    m: int
    wg: np.ndarray

    def prepare(self, spec: NodeSpec) -> None:
        super().prepare(spec)
        w = np.asarray(spec.constants[1], dtype=np.float64)  # [OC, C, 3, 3]
        oc, c = w.shape[0], w.shape[1]
        a2 = (self.m + 2) ** 2
        g = self.wg
        u = np.einsum("ij,ocjk,lk->iloc", g, w, g).reshape(a2, oc, c)  # G g G^T per (oc, c)
        buf = self.backend.allocate(u.size * 4, Storage.STATIC)
        self.u = buf.handle[:u.size * 4].view(np.float32).reshape(a2, oc, c)
        self.u[...] = u
        self.a2, self.oc, self.c = a2, oc, c
        self.n = int(spec.inputs[0].shape[0])
        self.oh, self.ow = (int(d) for d in spec.outputs[0].shape[2:])
        self.th, self.tw = -(-self.oh // self.m), -(-self.ow // self.m)
        tiles = self.th * self.tw
        self.v_elems = a2 * c * tiles
        self.m_elems = a2 * oc * tiles
        self.workspace_bytes = (self.v_elems + self.m_elems) * 4

    def run(self, inputs, outputs, workspace):
        _, _, _, _, _, _, pt, pl, _, _, _ = self.params
        tiles = self.th * self.tw
        raw = workspace.handle[:self.workspace_bytes].view(np.float32)
        v = raw[:self.v_elems].reshape(self.a2, self.c, tiles)
        m = raw[self.v_elems:self.v_elems + self.m_elems].reshape(self.a2, self.oc, tiles)
        bias = self.bias(inputs)
        for n in range(self.n):
            with PARALLEL_LOCK:
                self.transform_input(inputs[0], n, pt, pl, self.th, self.tw, v)
            self.backend.gemm(self.u, v, m)
            with PARALLEL_LOCK:
                self.transform_output(m, bias, outputs[0], n, self.th, self.tw)
        self.epilogue(inputs, outputs[0])


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


# ---------------------------------------------------------------------------------------------
# declarations


def _direct_cost(spec: NodeSpec) -> float:
    return 12 * 2 * macs(spec) + 2000.0


def _depthwise_cost(spec: NodeSpec) -> float:
    return 10 * 2 * macs(spec) + 2000.0


def _depthwise_s1_cost(spec: NodeSpec) -> float:
    n, c, h, w = (int(d) for d in spec.inputs[0].shape)
    oc = int(spec.inputs[1].shape[0])
    return 3 * 2 * macs(spec) + 4.0 * n * oc * (h + 2) * (w + 2) + 2000.0


def _depthwise3x3_cost(spec: NodeSpec) -> float:
    n, c, h, w = (int(d) for d in spec.inputs[0].shape)
    return 2 * macs(spec) + 4.0 * n * c * h * w + 2000.0


def _im2col_cost(spec: NodeSpec) -> float:
    n, c, _, _ = (int(d) for d in spec.inputs[0].shape)
    kh, kw, *_, g = conv_params(spec)
    oh, ow = (int(d) for d in spec.outputs[0].shape[2:])
    return 2 * macs(spec) + 4.0 * n * c * kh * kw * oh * ow + 10 * GEMM_CALL * n * g


def _gemm_1x1_cost(spec: NodeSpec) -> float:
    return 2 * macs(spec) + GEMM_CALL * int(spec.inputs[0].shape[0])


def _winograd_cost(spec: NodeSpec, m: int) -> float:
    """F(m x m, 3x3), a = m + 2: the ``a*a`` sgemms on whole tiles, the input and output
    transforms (``WINOGRAD_TRANSFORM`` per element of V and M) and the stream of U from memory
    (``WINOGRAD_U_READ`` per element, once per image); see the module docstring."""
    n, c, _, _ = (int(d) for d in spec.inputs[0].shape)
    oc = int(spec.inputs[1].shape[0])
    oh, ow = (int(d) for d in spec.outputs[0].shape[2:])
    a2 = (m + 2) ** 2
    tiles = -(-oh // m) * -(-ow // m)
    return n * (2.0 * a2 * oc * c * tiles + WINOGRAD_TRANSFORM * a2 * (c + oc) * tiles
                + WINOGRAD_U_READ * a2 * oc * c + 2 * GEMM_CALL)


def _winograd23_cost(spec: NodeSpec) -> float:
    return _winograd_cost(spec, 2)


def _winograd43_cost(spec: NodeSpec) -> float:
    return _winograd_cost(spec, 4)


def _schemes(fused: bool) -> tuple[Scheme, ...]:
    def when(applies):  # type: ignore[no-untyped-def]
        return (lambda spec: applies(spec) and epilogue_ok(spec, 3)) if fused else applies

    return (
        Scheme("direct", lambda b, s: DirectConv(b), applies=when(is_2d), cost=_direct_cost,
               doc="prange over (n, oc), tap-by-tap row updates"),
        Scheme("im2col_gemm", lambda b, s: Im2colConv(b), applies=when(is_2d), cost=_im2col_cost,
               doc="pack receptive fields into WORKSPACE, one BLAS sgemm per group"),
        Scheme("gemm_1x1", lambda b, s: Gemm1x1Conv(b), applies=when(is_1x1), cost=_gemm_1x1_cost,
               doc="1x1 stride 1: one BLAS sgemm per image, no packing"),
        Scheme("depthwise", lambda b, s: DepthwiseConv(b), applies=when(is_depthwise),
               cost=_depthwise_cost,
               doc="one input channel per group, prange over channels"),
        Scheme("depthwise_s1", lambda b, s: DepthwiseS1Conv(b), applies=when(is_depthwise_s1),
               cost=_depthwise_s1_cost,
               doc="stride-1 depthwise on a padded plane, one flat loop per tap"),
        Scheme("depthwise3x3", lambda b, s: Depthwise3x3Conv(b), applies=when(is_depthwise_3x3),
               cost=_depthwise3x3_cost,
               doc="3x3 depthwise, nine taps unrolled per row, bias and activation in the pass"),
        Scheme("winograd_f23", lambda b, s: Winograd23Conv(b), applies=when(is_3x3_s1),
               cost=_winograd23_cost,
               doc="F(2x2,3x3): weights transformed in prepare, 16 sgemms"),
        Scheme("winograd_f43", lambda b, s: Winograd43Conv(b), applies=when(is_3x3_s1),
               cost=_winograd43_cost,
               doc="F(4x4,3x3): weights transformed in prepare, 36 sgemms"),
    )


KERNELS = (
    KernelDef("Conv", _schemes(False), since=1, dtypes=F32),
    KernelDef("FusedConv", _schemes(True), domain=FUSED_DOMAIN, since=1, dtypes=F32),
)
