"""``direct3x3_few`` -- a dense 3x3 convolution with few input channels (a network's first
layer on an RGB image: MobileNet's and SqueezeNet's), one of the numba Conv/FusedConv schemes
(:mod:`.conv` has the notation and the others).

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
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import NodeSpec
from refmnn.backends.numba.kernels._common import JIT, PARALLEL_LOCK, PJIT
from refmnn.backends.numba.kernels.conv_base import ConvBase, conv_params, is_2d, macs
from refmnn.backends.numba.kernels.conv_depthwise3x3 import (fill_padded, padded_geometry,
                                                             store_rows)

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


@njit(**PJIT)
def conv_direct3x3_few(x, w, bias, out, s, pt, pl, act, alpha, lo, hi, planes, scratch, parts):
    """3x3 conv of one group with few input channels (see the module docstring), bias and
    activation fused. ``planes [C, per-channel planes + padded row]``: the padded planes of
    every input channel, shared by the workers; ``scratch [parts, length]``: each worker's
    ``acc``."""
    n_img, c_in = x.shape[0], x.shape[1]
    oc_n = w.shape[0]
    oh_n, ow_n = out.shape[2], out.shape[3]
    hp, wp, pitch, size, area, length, _ = padded_geometry(oh_n, ow_n, s)
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
                    buf = planes[c]
                    k = w[oc0:oc0 + count, c]
                    if count == 4:
                        if s == 1:
                            _add_taps3x3_x4(accs[0], accs[1], accs[2], accs[3], buf[0:],
                                            buf[pitch:], buf[2 * pitch:], k)
                        else:
                            _add_taps3x3_s2_x4(accs[0], accs[1], accs[2], accs[3], buf[0:],
                                               buf[size:], buf[2 * size:], buf[3 * size:],
                                               pitch, k)
                        continue
                    for i in range(count):  # the last, short block
                        if s == 1:
                            _add_taps3x3(accs[i], buf[0:], buf[pitch:], buf[2 * pitch:], k, i)
                        else:
                            _add_taps3x3_s2(accs[i], buf[0:], buf[size:], buf[2 * size:],
                                            buf[3 * size:], pitch, k, i)
                for i in range(count):
                    store_rows(accs[i], out[n, oc0 + i], pitch, act, alpha, lo, hi)


def _geometry(spec: NodeSpec) -> tuple[int, int]:
    """(elements per input channel's planes + padded row, elements of one ``acc``)."""
    oh, ow = (int(d) for d in spec.outputs[0].shape[2:])
    *_, area, length, wide = padded_geometry(oh, ow, conv_params(spec)[2])
    return area + wide, length


class Direct3x3FewConv(ConvBase):
    """direct3x3_few: bias and activation in the loops (a FusedConv residual, then the
    activation, in the epilogue pass, as :class:`.conv_depthwise3x3.Depthwise3x3Conv`)."""

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
            conv_direct3x3_few(inputs[0], inputs[1], self.bias(inputs), outputs[0], s, pt, pl,
                               self.act, ep.alpha, ep.lo, ep.hi, planes, scratch, self.parts)
        self.epilogue(inputs, outputs[0])


def direct3x3_few_cost(spec: NodeSpec) -> float:
    n, c, h, w = (int(d) for d in spec.inputs[0].shape)
    return 2 * macs(spec) + 4.0 * n * c * h * w + 2000.0
