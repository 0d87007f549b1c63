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
loops (``depthwise3x3`` below 2^12 outputs on OpenMP and 2^18 on workqueue, the epilogue below
2^21 elements) and small products are not split (:mod:`refmnn.backends.numba._blas`). The
depthwise threshold was 2^18 on both layers until an A/B on OpenMP (one process, sessions
built with each threshold, 30 interleaved runs, medians at 2 threads): 2^18 / 2^15 / 2^12 gave
mobilenet_v2 8.35 / 7.38 / 7.32 ms and mobilenet_v1 14.63 / 12.98 / 12.91 ms.

``direct`` -- any group, stride, dilation and padding.
    ``prange`` over (n, oc); for each input channel and kernel tap, a scalar weight times a row
    segment of the input, accumulated into the output plane (the valid ``ow`` range is computed
    per tap, so there are no bounds tests in the inner loop). Cost: ``12 * 2 * MACS`` (no register
    blocking: measured about 12x slower than the sgemm schemes on ResNet layers).
``im2col_gemm`` -- any group, stride, dilation and padding.
    Per image and group, the receptive fields are packed (``im2col``, in parallel over the K rows)
    into a WORKSPACE matrix ``[K, OH*OW]``, then one BLAS sgemm ``W_g [OC/g, K] @ col`` writes
    straight into the output plane, its epilogue applied per panel as in ``gemm_1x1``
    (:class:`GemmConv`; against a separate epilogue pass, per node, 2 threads: no change beyond
    noise on MobileNet-v2's first conv or ResNet-18's ten im2col convs). Cost: ``2 * MACS``
    (sgemm) ``+ 4 * N * C * KH * KW * OH * OW`` (packing traffic) ``+ 2e6 * N * g`` (per-group
    launch and sgemm overhead, ~40 us: it rules the scheme out for depthwise layers, where 960
    groups took 60 ms against 0.6 ms).
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
``winograd_f23``, ``winograd_f43`` -- 3x3, stride 1, dilation 1, one group: Winograd F(2x2, 3x3)
    and F(4x4, 3x3), in :mod:`.conv_winograd` (algorithm, cost formula, measured table).
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
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme, Storage
from refmnn.backends.numba.kernels._common import (F32, JIT, PARALLEL_LOCK, PJIT, renamed,
                                                  window_params)
from refmnn.backends.numba.kernels.fused import (NONE, Epilogue, activate_row, epilogue_ok,
                                                 epilogue_rows)
from refmnn.ops.fused import DOMAIN as FUSED_DOMAIN

GEMM_CALL = 2e5  # per sgemm call (and its packing launch), in flop units (~4 us at 50 GFLOP/s)
DEPTHWISE_PARALLEL_MIN = 1 << 12  # outputs from which depthwise3x3 runs its parallel loops,
DEPTHWISE_PARALLEL_MIN_WORKQUEUE = 1 << 18  # on OpenMP / on workqueue (its launches cost more)


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
      Each input row is first copied into a zero-padded row, whose even and odd columns then
      go to their two planes in one loop. Copying each parity straight from the input row at
      stride 2 (one loop per parity) took 70% of the kernel; against it, median us of 300
      calls, three rounds, 2 threads: 96 @ 112 524-597 -> 220-279, 144 @ 56 169-253 ->
      107-180, 192 @ 28 and 576 @ 14 unchanged within noise (1 thread: 747-809 -> 390-395,
      326-329 -> 208-213); MobileNet-v2 end to end, interleaved in one process: 8.63 -> 8.25
      and 9.47 -> 9.07 ms, mobilenet_v1 10.64 -> 10.35 ms, outputs equal.

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
    wide = 2 * pitch if s == 2 else 0  # stride 2: one padded input row (>= wp columns)
    jobs = n_img * oc_n
    for part in prange(parts):
        buf = scratch[part, :planes * size]
        acc = scratch[part, planes * size:planes * size + length]
        padded = scratch[part, planes * size + length:planes * size + length + wide]
        buf[:] = 0
        padded[:] = 0
        for t in range(part * jobs // parts, (part + 1) * jobs // parts):
            n = t // oc_n
            oc = t % oc_n
            src = x[n, oc // mult]
            # copy the input rows and columns that fall inside the padded plane
            for ih in range(max(0, -pt), min(h, hp - pt)):
                r = ih + pt
                line = src[ih]
                count = min(wd, wp - pl)
                if s == 1:
                    row = buf[r * pitch + pl:r * pitch + pl + count]
                    for k in range(count):
                        row[k] = line[k]
                else:
                    # the zero-padded row (its padding columns are never written, so they stay
                    # zero), then its even and odd columns c into column c // 2 of parity
                    # planes (r % 2, 0) and (r % 2, 1): one loop reading both members of each
                    # pair, which LLVM vectorises as a de-interleave
                    inner = padded[pl:pl + count]
                    for k in range(count):
                        inner[k] = line[k]
                    even = buf[(r % 2) * 2 * size + (r // 2) * pitch:]
                    odd = buf[((r % 2) * 2 + 1) * size + (r // 2) * pitch:]
                    for m in range(pitch):
                        even[m] = padded[2 * m]
                        odd[m] = padded[2 * m + 1]
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
# the same loops, one thread, no launch (its own name: see _common.renamed)
conv_depthwise3x3_serial = njit(**JIT)(renamed(_depthwise3x3, "_serial"))


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
        from refmnn.backends.numba.backend import threading_layer

        wq = threading_layer() == "workqueue"
        self.parallel = n * oc * oh * ow >= (DEPTHWISE_PARALLEL_MIN_WORKQUEUE if wq else
                                             DEPTHWISE_PARALLEL_MIN)
        self.parts = numba.config.NUMBA_NUM_THREADS if self.parallel else 1
        if sh == 1:  # the padded plane and acc (see _depthwise3x3)
            pitch, planes = (ow - 1) + 3, ((oh - 1) + 3) * ((ow - 1) + 3)
        else:
            pitch, planes = ow + 1, 4 * (oh + 1) * (ow + 1)
        self.per = planes + (oh - 1) * pitch + ow + (2 * pitch if sh == 2 else 0)
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


class GemmConv(ConvBase):
    """A conv computed as sgemms ``out[n, group] = W[group] @ cols``: bias, residual and
    activation are applied to each panel by the thread that computed it, while it is in cache
    (:func:`.fused.epilogue_rows`), unless the residual broadcasts (then one epilogue pass after
    the sgemms)."""

    bias_in_epilogue = True

    def prepare(self, spec: NodeSpec) -> None:
        super().prepare(spec)
        z = spec.inputs[3] if len(spec.inputs) > 3 else None
        out = tuple(int(d) for d in spec.outputs[0].shape)
        self.in_panel = self.epilogue.active and (
            z is None or tuple(int(d) for d in z.shape) == out)
        self._none1 = np.zeros(1, np.float32)
        self._none2 = np.zeros((1, 1), np.float32)

    def product(self, inputs, a, b, n, group, o) -> None:  # type: ignore[no-untyped-def]
        """``o = a @ b``, the output channels of image ``n``'s ``group`` as ``[OC/g, P]``, with
        the in-panel epilogue when ``in_panel`` (the caller runs ``self.epilogue`` otherwise)."""
        if not self.in_panel:
            self.backend.gemm(a, b, o)
            return
        ep = self.epilogue
        has_b, has_z = ep.bias_input is not None, ep.z_input is not None
        rows = slice(group * o.shape[0], (group + 1) * o.shape[0])
        bias = inputs[2][rows] if has_b else self._none1
        z = inputs[3][n][rows].reshape(o.shape) if has_z else self._none2

        def finish(panel, i0, i1, j0, j1):  # type: ignore[no-untyped-def]
            epilogue_rows(o, bias, z, has_b, has_z, False, ep.act, ep.alpha, ep.lo, ep.hi,
                          i0, i1, j0, j1)

        self.backend.gemm(a, b, o, finish,
                          (bias, z, has_b, has_z, False, ep.act, ep.alpha, ep.lo, ep.hi))


class Im2colConv(GemmConv):
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
                self.product(inputs, wm[gi], col, n, gi, planes[gi])
        if not self.in_panel:
            self.epilogue(inputs, out)


class Gemm1x1Conv(GemmConv):
    """One sgemm per image: the input plane already is the im2col matrix."""

    def run(self, inputs, outputs, workspace):
        x, w, out = inputs[0], inputs[1], outputs[0]
        n_img, c = x.shape[0], x.shape[1]
        oc = w.shape[0]
        p = x.shape[2] * x.shape[3]
        wm = w.reshape(oc, c)
        for n in range(n_img):
            self.product(inputs, wm, x[n].reshape(c, p), n, 0, out[n].reshape(oc, p))
        if not self.in_panel:
            self.epilogue(inputs, out)


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


def _schemes(fused: bool) -> tuple[Scheme, ...]:
    # imported here: conv_winograd builds on ConvBase and GEMM_CALL, defined above
    from refmnn.backends.numba.kernels.conv_winograd import (Winograd23Conv, Winograd43Conv,
                                                             winograd23_cost, winograd43_cost)

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
               cost=winograd23_cost,
               doc="F(2x2,3x3): weights transformed in prepare, 16 sgemms"),
        Scheme("winograd_f43", lambda b, s: Winograd43Conv(b), applies=when(is_3x3_s1),
               cost=winograd43_cost,
               doc="F(4x4,3x3): weights transformed in prepare, 36 sgemms"),
    )


KERNELS = (
    KernelDef("Conv", _schemes(False), since=1, dtypes=F32),
    KernelDef("FusedConv", _schemes(True), domain=FUSED_DOMAIN, since=1, dtypes=F32),
)
