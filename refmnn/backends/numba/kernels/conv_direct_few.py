"""``direct3x3_few`` and ``direct7x7_few`` -- dense 3x3 and 7x7 convolutions with few input
channels (a network's first layer on an RGB image: MobileNet's and SqueezeNet's 3x3, ResNet's
7x7), numba Conv/FusedConv schemes (:mod:`.conv` has the notation and the others).

Applies to one group, at most ``FEW_CHANNELS`` input channels, a 3x3 kernel, dilation 1 and
stride 1 or 2 on both axes, any padding. With ``C * 9`` multiply-adds per output, im2col +
sgemm is a poor fit: its ``[C*9, OH*OW]`` matrix (2-9x the input) is written and read again,
and an sgemm with ``K = 27`` spends its time packing and storing, not multiplying
(MobileNetV2's ``[32, 27] @ [27, 12544]`` and SqueezeNet's ``[64, 27] @ [27, 12321]`` ran at
86-96 GFLOP/s on two threads, half of what larger products reach).

Instead, per image, every input channel is copied once into the zero-padded planes that
:mod:`.conv_depthwise3x3`'s kernel reads (:func:`.conv_depthwise3x3.fill_padded`: one plane of
row pitch ``P`` at stride 1, four row/column parity planes at stride 2, so that every tap is a
unit-stride load), in parallel over channels. Then ``prange`` over blocks of four output
channels: each output plane is one flat loop ``acc[q], q = oh*P + ow`` (a few junk columns per
row), started from the bias, to which each input channel adds its nine taps -- for four output
channels in the same loop, so that each loaded input element feeds four multiply-adds (one
output channel per loop, nine loads for nine multiply-adds, took 316 against 294-305 us on
MobileNet's layer and 500 against 509-524 on SqueezeNet's: little difference at these sizes,
where the fixed part below weighs as much). The weights are read into scalars before the loop
(LLVM cannot prove that the stores to ``acc`` leave them alone; reading them inside the loop
cost 4x). The activation is applied to ``acc`` and its rows are copied out
(:func:`.conv_depthwise3x3.store_rows`). A FusedConv residual, then the activation too, go to
the epilogue pass.

Cost: ``2 * MACS + 4 * N * C * H * W + 2000`` -- im2col_gemm's multiply-adds and its call
overhead, without its packing traffic; im2col_gemm's formula prices its sgemm at full speed,
which at ``K = C * 9 <= 36`` it is not, so this keeps the comparison in the measured order.
Measured, 2 threads, median us of 5 x 50 calls of each applicable scheme in turn on the same
inputs (shared VM):

=====================================  ===========  ===========  ============  =============
layer                                  im2col_gemm  winograd_43  direct3x3_few  chosen
=====================================  ===========  ===========  ============  =============
3 -> 32 @ 224, s2, pads 1 (MobileNet)  383          --           278            direct3x3_few
3 -> 64 @ 224, s2 (SqueezeNet)         579          --           486            direct3x3_few
3 -> 16 @ 56, s1, pads 1               78           89           35             direct3x3_few
3 -> 16 @ 224, s1, pads 1              1079         493          409            direct3x3_few
=====================================  ===========  ===========  ============  =============

About 70 us of MobileNet's 278 is fixed: zeroing the padded planes (~600 KB at stride 2) and
filling them; the rest runs at about two thirds of the cores' multiply-add peak.

``direct3x3_few_simd`` (:func:`conv_direct_few_simd`; output channels a multiple of 4, a CPU
with AVX2 and FMA) fills the same padded planes, then computes the outputs in micro-tiles of 4
output channels x 24 flat positions held in twelve 8-lane accumulators (:mod:`.simd`), started
from the bias and summed over all ``9 * C`` taps in registers (each step: three vector loads
of one tap's inputs, four weights broadcast, 12 FMAs), where direct3x3_few adds each input
channel's taps into ``acc`` in memory. Tasks of 4 output channels by about 256 flat outputs
(whole output rows) go to the workers; each stores its tile rows into a scratch row, then
copies the output rows out, the activation applied on the way; the junk columns and the last
tile's overrun (reading at most ``SLACK`` elements past the planes) are computed and dropped.
With none, Relu or Clip, rows of at least 8 and a C-contiguous output, the rows are copied
eight at a time with the activation in registers (:func:`_store_rows8`); otherwise by
:func:`.conv_depthwise3x3.store_rows` (activate the scratch row, then copy it element by
element through views of the output made for each row), which had taken more than half of the
kernel: SqueezeNet's first layer with Relu, the kernel alone, 2 threads, 986 us, 441 without
that copy. One layer with Relu as a session, 2 threads, median us of the step, the two
versions in turn (each next to onnxruntime's whole run, in us): 3 -> 64 @ 224, s2
(SqueezeNet) 957-1017 -> 470-558 (onnxruntime 494-628), 3 -> 32 @ 224, s2, pads 1
(MobileNet) 460-598 -> 300-354 (306-355).
Whole models, sessions alternating the two kernels in one process, 2 threads, median ms,
outputs bit-equal: squeezenet1_1 7.59 -> 7.24, mobilenet_v2 7.33 -> 7.20, resnet18 (its 7x7
first layer) 19.61 -> 19.20, mobilenet_v1 13.53 -> 13.23. Against direct3x3_few, 2 threads,
medians of 5 x 40 calls alternating (us, im2col_gemm / direct3x3_few / direct3x3_few_simd),
two runs a minute apart (before the vector stores):

=====================================  ===================================================
layer                                  times
=====================================  ===================================================
3 -> 32 @ 224, s2, pads 1 (MobileNet)  481 / 389 / 357, 485 / 435 / 356
3 -> 64 @ 224, s2 (SqueezeNet)         697 / 693 / 577, 718 / 782 / 580
3 -> 16 @ 56, s1, pads 1               130 / 67 / 53, 140 / 63 / 50
3 -> 16 @ 224, s1, pads 1              1132 / 834 / 559, 1138 / 793 / 549
=====================================  ===================================================

Cost: direct3x3_few's with the multiply-adds at ``SIMD_FACTOR`` (0.6).

The weights are packed once, in ``prepare``, four output channels at a time, as
``gemm_1x1_simd`` packs its own (:func:`.conv_1x1_simd.packed_weights`: ``[OC/4][C][taps][4]``),
and read with :func:`.simd.vbroadcast`; the 4-D ``w[oc, c, kh, kw]`` read in the loop had cost
10-20%: against direct3x3_few, kernels alone, 2 threads, the least of 4 medians of 10 calls, two
runs each, the register tiles took 0.80-0.89 of its time unpacked and 0.70-0.76 packed on
MobileNet's and SqueezeNet's first layers.

``direct7x7_few_simd`` is the same for a 7x7 kernel (49 taps per input channel; the packed
weights are found by the tap's index alone: splitting it into the kernel row and column, a
division by the kernel's width per step, had made these tiles 1.25x slower): ResNet-18's first
layer (3 -> 64 @ 224, stride 2, pads 3), kernels alone as above (us, im2col_gemm /
direct7x7_few / direct7x7_few_simd): 3147 / 3713 / 2195; 3 -> 32: 1956 / 1807 / 1043. In the
model, 2 threads: 3.9 -> 3.1 ms while the other layers' times rose 10-20% with the machine's
load. Cost: direct3x3_few_simd's formula.

``direct7x7_few`` is the same scheme for a 7x7 kernel (:func:`_add_channel7x7`): the same
padded planes (7x7 geometry), blocks of four output channels, stores; each input channel adds
its taps one kernel row at a time, seven taps whose 28 weights (four output channels) stay in
registers, so ``acc`` is read and written 7 times per input channel instead of once. ResNet-18's
first layer (3 -> 64 @ 224, stride 2, pads 3), 2 threads, in the model, 40 interleaved runs
against a session without the scheme (im2col_gemm: a [147, 12544] matrix, 7.4 MB, then an
sgemm with K = 147 that OpenBLAS runs at ~110 GFLOP/s): 2496 -> 1718 us; the model 18.67 ->
17.81 ms. Cost: direct3x3_few's formula.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import NodeSpec
from refmnn.backends.numba.kernels._common import JIT, PARALLEL_LOCK, PJIT, Bound, BoundRun, Call
from refmnn.backends.numba.kernels.conv_1x1_simd import packed_weights
from refmnn.backends.numba.kernels.conv_base import ConvBase, conv_params, is_2d, macs
from refmnn.backends.numba.kernels.conv_depthwise3x3 import (fill_padded, padded_geometry,
                                                             store_rows)
from refmnn.backends.numba.kernels.fused import CLIP, NONE, RELU
from refmnn.backends.numba.kernels.gemm_simd import activate8, fma3, store3
from refmnn.backends.numba.kernels.simd import native, vbroadcast, vload, vsplat, vstore

FEW_CHANNELS = 4  # input channels up to which the scheme applies (RGB, RGBA, grey)


def is_direct3x3_few(spec: NodeSpec) -> bool:
    """One group, at most FEW_CHANNELS input channels, 3x3, dilation 1, stride 1 or 2."""
    if not is_2d(spec) or int(spec.inputs[1].shape[1]) > FEW_CHANNELS:
        return False
    kh, kw, sh, sw, dh, dw, *_, g = conv_params(spec)
    return (kh, kw, dh, dw, g) == (3, 3, 1, 1, 1) and sh == sw and sh in (1, 2)


@njit(**JIT)
def _nine(k, i):
    """The nine weights of output channel ``i`` of ``k [count, 3, 3]``, as scalars (loaded
    once, before the loop: LLVM cannot prove the stores to ``acc`` leave ``k`` alone)."""
    return (k[i, 0, 0], k[i, 0, 1], k[i, 0, 2], k[i, 1, 0], k[i, 1, 1], k[i, 1, 2],
            k[i, 2, 0], k[i, 2, 1], k[i, 2, 2])


@njit(**JIT)
def _dot9(v, t):
    return ((v[0] * t[0] + v[1] * t[1] + v[2] * t[2]) + (v[3] * t[3] + v[4] * t[4] + v[5] * t[5])
            + (v[6] * t[6] + v[7] * t[7] + v[8] * t[8]))


@njit(**JIT)
def _taps(p0, p1, p2, q):
    """Stride 1: the nine inputs of output ``q``, elements ``q .. q + 2`` of the padded rows
    p0, p1, p2 (the padded plane from row 0, 1, 2 on)."""
    return (p0[q], p0[q + 1], p0[q + 2], p1[q], p1[q + 1], p1[q + 2], p2[q], p2[q + 1], p2[q + 2])


@njit(**JIT)
def _taps_s2(ee, eo, oe, oo, e2, o2, q):
    """Stride 2 on the four parity planes (even/odd row, even/odd column; ``e2``, ``o2`` the
    even-row planes one row down): tap (kh, kw) of output ``q`` is element ``q`` or ``q + 1``
    of one of them."""
    return (ee[q], eo[q], ee[q + 1], oe[q], oo[q], oe[q + 1], e2[q], o2[q], e2[q + 1])


@njit(**JIT)
def _add_taps3x3(acc, p0, p1, p2, k, i):
    """``acc[q] += the nine taps`` of output channel ``i`` of ``k``, stride 1."""
    v = _nine(k, i)
    for q in range(acc.shape[0]):
        acc[q] += _dot9(v, _taps(p0, p1, p2, q))


@njit(**JIT)
def _add_taps3x3_s2(acc, ee, eo, oe, oo, pitch, k, i):
    """``acc[q] += the nine taps`` of output channel ``i`` of ``k``, stride 2."""
    e2, o2 = ee[pitch:], eo[pitch:]
    v = _nine(k, i)
    for q in range(acc.shape[0]):
        acc[q] += _dot9(v, _taps_s2(ee, eo, oe, oo, e2, o2, q))


@njit(**JIT)
def _add_taps3x3_x4(a0, a1, a2, a3, p0, p1, p2, k):
    """``_add_taps3x3`` for four output channels at once (``k [4, 3, 3]``): each loaded input
    element feeds four multiply-adds instead of one."""
    v0, v1, v2, v3 = _nine(k, 0), _nine(k, 1), _nine(k, 2), _nine(k, 3)
    for q in range(a0.shape[0]):
        t = _taps(p0, p1, p2, q)
        a0[q] += _dot9(v0, t)
        a1[q] += _dot9(v1, t)
        a2[q] += _dot9(v2, t)
        a3[q] += _dot9(v3, t)


@njit(**JIT)
def _add_taps3x3_s2_x4(a0, a1, a2, a3, ee, eo, oe, oo, pitch, k):
    """``_add_taps3x3_s2`` for four output channels at once (``k [4, 3, 3]``)."""
    e2, o2 = ee[pitch:], eo[pitch:]
    v0, v1, v2, v3 = _nine(k, 0), _nine(k, 1), _nine(k, 2), _nine(k, 3)
    for q in range(a0.shape[0]):
        t = _taps_s2(ee, eo, oe, oo, e2, o2, q)
        a0[q] += _dot9(v0, t)
        a1[q] += _dot9(v1, t)
        a2[q] += _dot9(v2, t)
        a3[q] += _dot9(v3, t)


@njit(**JIT)
def _add_channel3x3(accs, buf, w, oc0, count, c, s, pitch, size):
    """``accs[i] += `` input channel ``c``'s nine taps of output channel ``oc0 + i``, from
    its padded planes ``buf`` (four output channels in one loop, a short block one by one)."""
    k = w[oc0:oc0 + count, c]
    if count == 4:
        if s == 1:
            _add_taps3x3_x4(accs[0], accs[1], accs[2], accs[3], buf[0:], buf[pitch:],
                            buf[2 * pitch:], k)
        else:
            _add_taps3x3_s2_x4(accs[0], accs[1], accs[2], accs[3], buf[0:], buf[size:],
                               buf[2 * size:], buf[3 * size:], pitch, k)
        return
    for i in range(count):  # the last, short block
        if s == 1:
            _add_taps3x3(accs[i], buf[0:], buf[pitch:], buf[2 * pitch:], k, i)
        else:
            _add_taps3x3_s2(accs[i], buf[0:], buf[size:], buf[2 * size:], buf[3 * size:],
                            pitch, k, i)


@njit(**PJIT)
def conv_direct_few(x, w, bias, out, s, pt, pl, act, alpha, lo, hi, planes, scratch, parts):
    """3x3 or 7x7 conv of one group with few input channels (see the module docstring), bias
    and activation fused. ``planes [C, per-channel planes + padded row]``: the padded planes of
    every input channel, shared by the workers; ``scratch [parts, 4 * length]``: each worker's
    four ``acc``."""
    n_img, c_in = x.shape[0], x.shape[1]
    oc_n, kernel = w.shape[0], w.shape[2]
    oh_n, ow_n = out.shape[2], out.shape[3]
    hp, wp, pitch, size, area, length, _ = padded_geometry(oh_n, ow_n, s, kernel)
    for n in range(n_img):
        for c in prange(c_in):
            channel = planes[c]
            if n == 0:
                channel[:] = 0  # the padding, never written by fill_padded
            fill_padded(x[n, c], channel[:area], channel[area:], s, pt, pl, hp, wp, pitch, size)
        blocks = (oc_n + 3) // 4  # output channels in blocks of four (the last may be short)
        for part in prange(parts):
            accs = scratch[part].reshape(4, length)
            for block in range(part * blocks // parts, (part + 1) * blocks // parts):
                oc0 = 4 * block
                count = min(4, oc_n - oc0)
                for i in range(count):
                    accs[i, :] = bias[oc0 + i]
                for c in range(c_in):
                    if kernel == 3:
                        _add_channel3x3(accs, planes[c], w, oc0, count, c, s, pitch, size)
                    else:
                        _add_channel7x7(accs, planes[c], w, oc0, count, c, s, pitch, size)
                for i in range(count):
                    store_rows(accs[i], out[n, oc0 + i], pitch, act, alpha, lo, hi)


def _geometry(spec: NodeSpec) -> tuple[int, int]:
    """(elements per input channel's planes + padded row, elements of one ``acc``)."""
    oh, ow = (int(d) for d in spec.outputs[0].shape[2:])
    k = int(spec.inputs[1].shape[2])
    *_, area, length, wide = padded_geometry(oh, ow, conv_params(spec)[2], k)
    return area + wide, length


class DirectFewConv(ConvBase):
    """direct3x3_few and direct7x7_few: bias and activation in the loops (a FusedConv residual,
    then the activation, in the epilogue pass, as :class:`.conv_depthwise3x3.Depthwise3x3Conv`)."""

    def prepare(self, spec: NodeSpec) -> None:
        import numba

        super().prepare(spec)
        self.act = self.activation_in_loops()
        self.parts = numba.config.NUMBA_NUM_THREADS
        self.c = int(spec.inputs[0].shape[1])
        self.per_channel, self.length = _geometry(spec)
        self.workspace_bytes = (self.c * self.per_channel + self.parts * 4 * self.length) * 4

    def run(self, inputs, outputs, workspace):  # type: ignore[no-untyped-def]
        _, _, s, _, _, _, pt, pl, _, _, _ = self.params
        ep = self.epilogue
        raw = workspace.handle[:self.workspace_bytes].view(np.float32)
        planes = raw[:self.c * self.per_channel].reshape(self.c, self.per_channel)
        scratch = raw[self.c * self.per_channel:].reshape(self.parts, 4 * self.length)
        with PARALLEL_LOCK:
            conv_direct_few(inputs[0], inputs[1], self.bias(inputs), outputs[0], s, pt, pl,
                            self.act, ep.alpha, ep.lo, ep.hi, planes, scratch, self.parts)
        self.epilogue(inputs, outputs[0])


def direct3x3_few_cost(spec: NodeSpec) -> float:
    n, c, h, w = (int(d) for d in spec.inputs[0].shape)
    return 2 * macs(spec) + 4.0 * n * c * h * w + 2000.0


# ---------------------------------------------------------------------------------------------
# direct3x3_few_simd

SIMD_FACTOR = 0.6  # its multiply-adds, priced against direct3x3_few's
TILE = 24  # outputs per micro-tile row: three vectors of 8
SLACK = 2 * TILE  # elements after the planes that a last micro-tile may read (results unused)


def tap_offsets(s: int, pitch: int, size: int, k: int = 3) -> np.ndarray:
    """Where tap (kh, kw) of a ``k x k`` kernel for output ``q`` is, as ``q + offset`` in one
    input channel's padded planes (:func:`.conv_depthwise3x3.fill_padded`), in the order ``kh *
    k + kw``: ``kh * pitch + kw`` in the one plane at stride 1; at stride 2 in parity plane
    ``(kh % 2, kw % 2)``, row ``kh // 2`` down and column ``kw // 2`` right."""
    kh, kw = np.divmod(np.arange(k * k, dtype=np.int64), k)
    if s == 1:
        return kh * pitch + kw
    return ((kh % 2) * 2 + kw % 2) * size + (kh // 2) * pitch + kw // 2


@njit(inline="always", **JIT)
def _tile_taps(planes, per_channel, offsets, wp, bias, oc0, c_in, q, acc, ao, ap):
    """Outputs ``q .. q + 23`` of output channels ``oc0 .. oc0 + 3`` (flat positions of the
    planes' pitch), from the bias plus all ``c_in * taps`` taps (:func:`tap_offsets`; ``wp``
    the weights packed by :func:`.conv_1x1_simd.packed_weights`): twelve
    accumulators, each step three vector loads of one tap's inputs and four weights broadcast;
    stored into ``acc`` from ``ao`` on (row pitch ``ap``)."""
    a00 = a01 = a02 = vsplat(bias[oc0])
    a10 = a11 = a12 = vsplat(bias[oc0 + 1])
    a20 = a21 = a22 = vsplat(bias[oc0 + 2])
    a30 = a31 = a32 = vsplat(bias[oc0 + 3])
    taps = offsets.shape[0]
    wo = oc0 * c_in * taps  # this block's packed weights: (oc0 / 4) * c_in * taps * 4
    for c in range(c_in):
        for t in range(taps):
            o = c * per_channel + offsets[t] + q
            x0, x1, x2 = vload(planes, o), vload(planes, o + 8), vload(planes, o + 16)
            r = wo + (c * taps + t) * 4
            a00, a01, a02 = fma3(vbroadcast(wp, r), x0, x1, x2, a00, a01, a02)
            a10, a11, a12 = fma3(vbroadcast(wp, r + 1), x0, x1, x2, a10, a11, a12)
            a20, a21, a22 = fma3(vbroadcast(wp, r + 2), x0, x1, x2, a20, a21, a22)
            a30, a31, a32 = fma3(vbroadcast(wp, r + 3), x0, x1, x2, a30, a31, a32)
    store3(acc, ao, a00, a01, a02)
    store3(acc, ao + ap, a10, a11, a12)
    store3(acc, ao + 2 * ap, a20, a21, a22)
    store3(acc, ao + 3 * ap, a30, a31, a32)


@njit(inline="always", **JIT)
def _store_rows8(acc, flat, start, rows, ow_n, pitch, act, lo, hi):
    """:func:`.conv_depthwise3x3.store_rows` for none, Relu or Clip and rows of at least 8:
    ``rows`` rows of ``acc`` (pitch ``pitch``) activated in registers and stored into ``flat``
    from ``start`` on (pitch ``ow_n``), eight at a time, a row's last vector shifted back to
    end at its last element (it overlaps the one before: the same values stored twice)."""
    for r in range(rows):
        a, d = r * pitch, start + r * ow_n
        for v0 in range(0, ow_n, 8):
            v = min(v0, ow_n - 8)
            vstore(flat, d + v, activate8(vload(acc, a + v), act, lo, hi))


@njit(inline="always", **JIT)
def fill_channel(x, n, c, planes, per_channel, area, s, pt, pl, hp, wpad, pitch, size):
    """Input channel ``c`` of image ``n`` into its padded planes, ``planes[c * per_channel:]``
    (:func:`.conv_depthwise3x3.fill_padded`; the padding zeroed at the first image)."""
    channel = planes[c * per_channel:(c + 1) * per_channel]
    if n == 0:
        channel[:] = 0  # the padding, never written by fill_padded
    fill_padded(x[n, c], channel[:area], channel[area:], s, pt, pl, hp, wpad, pitch, size)


@njit(**PJIT)
def conv_direct_few_simd(x, wp, k, offsets, bias, out, flat, s, pt, pl, act, alpha, lo, hi,
                         planes, scratch, parts, rows):
    """3x3 or 7x7 conv of one group with few input channels in register tiles (see the module
    docstring), bias and activation fused. ``offsets``: :func:`tap_offsets`; ``planes``: flat,
    every input channel's padded planes (as in :func:`conv_direct_few`) and ``SLACK`` more;
    ``scratch [parts, 4 * span]``: each worker's outputs of one task, ``span`` covering
    ``rows`` output rows rounded up to ``TILE``; ``flat``: ``out`` as one flat array when it is
    C-contiguous (the output rows are then stored by :func:`_store_rows8`), else empty."""
    n_img, c_in = x.shape[0], x.shape[1]
    oc_n = out.shape[1]
    oh_n, ow_n = out.shape[2], out.shape[3]
    hp, wpad, pitch, size, area, _, wide = padded_geometry(oh_n, ow_n, s, k)
    per_channel = area + wide
    span = scratch.shape[1] // 4
    groups = (oh_n + rows - 1) // rows  # tasks: (block of 4 output channels, group of rows)
    tasks = (oc_n // 4) * groups
    in_registers = flat.size == out.size and ow_n >= 8 and (act == NONE or act == RELU or
                                                            act == CLIP)
    for n in range(n_img):
        for c in prange(c_in):
            fill_channel(x, n, c, planes, per_channel, area, s, pt, pl, hp, wpad, pitch, size)
        for part in prange(parts):
            acc = scratch[part]
            for task in range(part * tasks // parts, (part + 1) * tasks // parts):
                oc0 = task // groups * 4
                oh0 = task % groups * rows
                oh1 = min(oh_n, oh0 + rows)
                q0 = oh0 * pitch
                q1 = (oh1 - 1) * pitch + ow_n
                for q in range(q0, q1, TILE):
                    _tile_taps(planes, per_channel, offsets, wp, bias, oc0, c_in, q, acc,
                               q - q0, span)
                for i in range(4):
                    if in_registers:
                        _store_rows8(acc[i * span:], flat, ((n * oc_n + oc0 + i) * oh_n + oh0)
                                     * ow_n, oh1 - oh0, ow_n, pitch, act, lo, hi)
                    else:
                        store_rows(acc[i * span:(i + 1) * span], out[n, oc0 + i, oh0:oh1],
                                   pitch, act, alpha, lo, hi)


_NO_FLAT = np.zeros(0, np.float32)  # conv_direct_few_simd's ``flat`` for a strided output


def _simd_applies(spec: NodeSpec) -> bool:
    """What the register tiles add to direct3x3_few's and direct7x7_few's conditions: output
    channels a multiple of 4, the weights known when planning (``prepare`` packs them), a CPU
    with AVX2 and FMA (:func:`.simd.native`)."""
    return int(spec.inputs[1].shape[0]) % 4 == 0 and 1 in spec.constants and native()


def is_direct3x3_few_simd(spec: NodeSpec) -> bool:
    """direct3x3_few's conditions and :func:`_simd_applies`'."""
    return is_direct3x3_few(spec) and _simd_applies(spec)


class DirectFewSimdConv(BoundRun, DirectFewConv):
    """direct3x3_few_simd and direct7x7_few_simd: the padded planes of :class:`DirectFewConv`,
    the outputs in register tiles, tasks of a few output rows."""

    def prepare(self, spec: NodeSpec) -> None:
        super().prepare(spec)
        oh, ow = (int(d) for d in spec.outputs[0].shape[2:])
        s, k = self.params[2], self.params[0]
        _, _, pitch, size, _, _, _ = padded_geometry(oh, ow, s, k)
        self.offsets = tap_offsets(s, pitch, size, k)
        self.wp = self.packed(spec)
        self.rows = max(1, 256 // pitch)  # output rows per task: about 256 outputs
        self.span = -(-((self.rows - 1) * pitch + ow) // TILE) * TILE
        self.planes = self.c * self.per_channel + SLACK
        self.workspace_bytes = (self.planes + self.parts * 4 * self.span) * 4
        self.bound = Bound()

    def packed(self, spec: NodeSpec) -> np.ndarray:
        """The weights, constants here, packed once (:func:`.conv_1x1_simd.packed_weights`)."""
        return packed_weights(self.backend, spec)

    def after_calls(self, inputs, out):  # type: ignore[no-untyped-def]
        return self.epilogue.after(inputs, out)

    def calls(self, inputs, out, workspace) -> tuple[Call, ...]:  # type: ignore[no-untyped-def]
        """The :func:`conv_direct_few_simd` call (see :class:`.Bound`)."""
        _, _, s, _, _, _, pt, pl, _, _, _ = self.params
        ep = self.epilogue
        raw = workspace.handle[:self.workspace_bytes].view(np.float32)
        planes = raw[:self.planes]
        scratch = raw[self.planes:].reshape(self.parts, 4 * self.span)
        flat = out.reshape(-1) if out.flags.c_contiguous else _NO_FLAT
        return ((conv_direct_few_simd, (inputs[0], self.wp, self.params[0], self.offsets,
                                        self.bias(inputs), out, flat, s, pt, pl, self.act,
                                        ep.alpha, ep.lo, ep.hi, planes, scratch, self.parts,
                                        self.rows)),)


def direct3x3_few_simd_cost(spec: NodeSpec) -> float:
    """direct3x3_few's cost with its multiply-adds at ``SIMD_FACTOR`` (the module docstring)."""
    n, c, h, w = (int(d) for d in spec.inputs[0].shape)
    return 2 * macs(spec) * SIMD_FACTOR + 4.0 * n * c * h * w + 2000.0


# ---------------------------------------------------------------------------------------------
# direct7x7_few


def is_direct7x7_few(spec: NodeSpec) -> bool:
    """One group, at most FEW_CHANNELS input channels, 7x7, dilation 1, stride 1 or 2."""
    if not is_2d(spec) or int(spec.inputs[1].shape[1]) > FEW_CHANNELS:
        return False
    kh, kw, sh, sw, dh, dw, *_, g = conv_params(spec)
    return (kh, kw, dh, dw, g) == (7, 7, 1, 1, 1) and sh == sw and sh in (1, 2)


@njit(inline="always", **JIT)
def _seven(k, i, c, kh):
    """Row ``kh`` of output channel ``i``'s kernel over input channel ``c``, as scalars."""
    return (k[i, c, kh, 0], k[i, c, kh, 1], k[i, c, kh, 2], k[i, c, kh, 3], k[i, c, kh, 4],
            k[i, c, kh, 5], k[i, c, kh, 6])


@njit(inline="always", **JIT)
def _dot7(v, t):
    return (((v[0] * t[0] + v[1] * t[1]) + (v[2] * t[2] + v[3] * t[3]))
            + ((v[4] * t[4] + v[5] * t[5]) + v[6] * t[6]))


@njit(inline="always", **JIT)
def _taps7(r, q):
    """Stride 1: the seven inputs of a kernel row for output ``q``, elements ``q .. q + 6`` of
    the padded row ``r``."""
    return (r[q], r[q + 1], r[q + 2], r[q + 3], r[q + 4], r[q + 5], r[q + 6])


@njit(inline="always", **JIT)
def _taps7_s2(e, o, q):
    """Stride 2: the same from that row's even- and odd-column planes ``e``, ``o`` (padded
    column ``2 ow + kw`` is element ``q + kw // 2`` of one of them)."""
    return (e[q], o[q], e[q + 1], o[q + 1], e[q + 2], o[q + 2], e[q + 3])


@njit(**JIT)
def _add_row7_x4(a0, a1, a2, a3, r, v0, v1, v2, v3):
    """``a_i[q] += v_i . (the seven taps of one kernel row)`` for four output channels,
    stride 1 (one loop per stride: a stride test inside the loop stopped its vectorisation,
    16x slower)."""
    for q in range(a0.shape[0]):
        t = _taps7(r, q)
        a0[q] += _dot7(v0, t)
        a1[q] += _dot7(v1, t)
        a2[q] += _dot7(v2, t)
        a3[q] += _dot7(v3, t)


@njit(**JIT)
def _add_row7_s2_x4(a0, a1, a2, a3, e, o, v0, v1, v2, v3):
    """:func:`_add_row7_x4` at stride 2."""
    for q in range(a0.shape[0]):
        t = _taps7_s2(e, o, q)
        a0[q] += _dot7(v0, t)
        a1[q] += _dot7(v1, t)
        a2[q] += _dot7(v2, t)
        a3[q] += _dot7(v3, t)


@njit(**JIT)
def _add_row7(a, r, e, o, s, v):
    """One output channel (the last, short block), either stride."""
    if s == 1:
        for q in range(a.shape[0]):
            a[q] += _dot7(v, _taps7(r, q))
    else:
        for q in range(a.shape[0]):
            a[q] += _dot7(v, _taps7_s2(e, o, q))


@njit(**JIT)
def _add_channel7x7(accs, buf, w, oc0, count, c, s, pitch, size):
    """:func:`_add_channel3x3` for a 7x7 kernel, one kernel row (seven taps, their 28 weights
    in registers) at a time: ``acc`` is read and written 7 times per input channel. Stride 2:
    kernel row ``kh`` reads row ``oh + kh // 2`` of the parity planes of row parity
    ``kh % 2``."""
    for kh in range(7):
        if s == 1:
            r = buf[kh * pitch:]
            e, o = r, r
        else:
            e = buf[(kh % 2) * 2 * size + (kh // 2) * pitch:]
            o = buf[((kh % 2) * 2 + 1) * size + (kh // 2) * pitch:]
            r = e
        if count == 4 and s == 1:
            _add_row7_x4(accs[0], accs[1], accs[2], accs[3], r, _seven(w, oc0, c, kh),
                         _seven(w, oc0 + 1, c, kh), _seven(w, oc0 + 2, c, kh),
                         _seven(w, oc0 + 3, c, kh))
        elif count == 4:
            _add_row7_s2_x4(accs[0], accs[1], accs[2], accs[3], e, o, _seven(w, oc0, c, kh),
                            _seven(w, oc0 + 1, c, kh), _seven(w, oc0 + 2, c, kh),
                            _seven(w, oc0 + 3, c, kh))
        else:
            for i in range(count):
                _add_row7(accs[i], r, e, o, s, _seven(w, oc0 + i, c, kh))


def direct7x7_few_cost(spec: NodeSpec) -> float:
    """As direct3x3_few's: im2col_gemm's multiply-adds without its packing traffic."""
    return direct3x3_few_cost(spec)


def is_direct7x7_few_simd(spec: NodeSpec) -> bool:
    """direct7x7_few's conditions and :func:`_simd_applies`'."""
    return is_direct7x7_few(spec) and _simd_applies(spec)


def direct7x7_few_simd_cost(spec: NodeSpec) -> float:
    """direct3x3_few_simd's formula (the module docstring)."""
    return direct3x3_few_simd_cost(spec)
