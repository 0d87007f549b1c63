"""``im2col_s2`` -- a dense 3x3 convolution at stride 2 (ResNet's downsampling layers) as one
sgemm over an im2col matrix built from parity planes, a numba Conv/FusedConv scheme (:mod:`.conv`
has the notation and the others).

``im2col_gemm`` gathers each row ``(c, kh, kw)`` of its ``[9C, OH*OW]`` matrix with stride-2
loads, one short loop per output row. Here each input channel is first split, zero-padded, into
its four row/column parity planes (:func:`.conv_depthwise3x3.fill_padded`, the planes that
``depthwise3x3`` reads: row pitch ``P = OW + 1``), in which tap ``(kh, kw)`` of output ``(oh, ow)``
is element ``(oh + kh // 2) * P + ow + kw // 2`` of plane ``(kh % 2, kw % 2)``. So each matrix row
is *one* contiguous copy of ``OH * P`` elements -- the matrix keeps the planes' junk column, one
per output row -- and the sgemm ``W [OC, 9C] @ cols [9C, OH * P]`` computes it too. A last pass
adds the bias to each output channel's ``OH * P`` values, activates them and copies their rows
into the output (:func:`.conv_depthwise3x3.store_rows`); a FusedConv residual, then the
activation, go to the epilogue pass.

Cost: ``2 * MACS`` on ``OH * P`` columns (rounded up to 16, :func:`.conv_base.gemm_columns`)
``+ 4 * N * C * H * W`` (the planes) ``+ N * 9C * OH * P`` (the contiguous copies)
``+ LOOP * N * C * (H + 9)`` (a loop per input row and per matrix row; ``im2col_gemm`` starts one
per matrix row and output row) ``+ 40 * N * OC * 9C`` (the sgemm packing the weights:
``GEMM_PACK``, :mod:`.conv_base`) ``+ 2e5 * N``. The matrix alone, 2 threads, median of 5 x 100
calls, against ``im2col``: 64 @ 56 -> 28 53 against 193 us, 128 @ 28 58 against 204, 256 @ 14
34 against 188. In ResNet-18 at 2 threads, 40 interleaved runs against a session without the
scheme (these layers then ran ``im2col_gemm``): 939 -> 802, 878 -> 857 and 1063 -> 1023 us, the
model 17.14 -> 16.32 ms.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import NodeSpec
from refmnn.backends.numba.kernels._common import PARALLEL_LOCK, PJIT
from refmnn.backends.numba.kernels.conv_base import (GEMM_CALL, LOOP, ConvBase, conv_params,
                                                     gemm_columns, is_2d, macs, weights_packing)
from refmnn.backends.numba.kernels.conv_depthwise3x3 import (fill_padded, padded_geometry,
                                                             store_rows)


def is_im2col_s2(spec: NodeSpec) -> bool:
    """One group, 3x3, stride 2 on both axes, dilation 1."""
    if not is_2d(spec):
        return False
    kh, kw, sh, sw, dh, dw, *_, g = conv_params(spec)
    return (kh, kw, sh, sw, dh, dw, g) == (3, 3, 2, 2, 1, 1, 1)


@njit(**PJIT)
def parity_im2col(x, n, pt, pl, oh_n, ow_n, planes, cols):
    """``cols [9C, OH * P]``: row ``c * 9 + kh * 3 + kw`` is tap ``(kh, kw)`` of input channel
    ``c`` for every output, copied from the channel's zero-padded parity planes (``planes [C,
    4 planes + the padded row]``; see the module docstring)."""
    c_in = x.shape[1]
    hp, wp, pitch, size, area, length, wide = padded_geometry(oh_n, ow_n, 2, 3)
    span = oh_n * pitch
    for c in prange(c_in):
        buf = planes[c]
        buf[:] = 0  # the padding, never written by fill_padded
        fill_padded(x[n, c], buf[:area], buf[area:area + wide], 2, pt, pl, hp, wp, pitch, size)
        for tap in range(9):
            kh, kw = tap // 3, tap % 3
            # tap (2, 2) reads one element past plane (0, 0): the first of plane (0, 1), for
            # the last output row's junk column
            src = buf[((kh % 2) * 2 + kw % 2) * size + (kh // 2) * pitch + kw // 2:]
            dst = cols[c * 9 + tap]
            for q in range(span):
                dst[q] = src[q]


@njit(**PJIT)
def store_s2(m, bias, out, n, pitch, act, alpha, lo, hi):
    """``out[n, oc] = act(m[oc] + bias[oc])``, ``m [OC, OH * P]`` rows of pitch ``P``."""
    for oc in prange(out.shape[1]):
        acc = m[oc]
        b = bias[oc]
        for q in range(acc.shape[0]):
            acc[q] += b
        store_rows(acc, out[n, oc], pitch, act, alpha, lo, hi)


class Im2colS2Conv(ConvBase):
    """im2col_s2: the matrix, one sgemm and the bias/activation pass per image."""

    def prepare(self, spec: NodeSpec) -> None:
        super().prepare(spec)
        self.act = self.activation_in_loops()
        n, c, _, _ = (int(d) for d in spec.inputs[0].shape)
        self.n, self.c, self.oc = n, c, int(spec.inputs[1].shape[0])
        self.oh, self.ow = (int(d) for d in spec.outputs[0].shape[2:])
        _, _, pitch, _, area, _, wide = _geometry(self.oh, self.ow)
        self.pitch, self.per_channel = pitch, area + wide
        self.span = self.oh * pitch
        self.sizes = (c * self.per_channel, 9 * c * self.span, self.oc * self.span)
        self.workspace_bytes = sum(self.sizes) * 4

    def run(self, inputs, outputs, workspace):  # type: ignore[no-untyped-def]
        _, _, _, _, _, _, pt, pl, _, _, _ = self.params
        ep = self.epilogue
        raw = workspace.handle[:self.workspace_bytes].view(np.float32)
        a, b, _ = self.sizes
        planes = raw[:a].reshape(self.c, self.per_channel)
        cols = raw[a:a + b].reshape(9 * self.c, self.span)
        m = raw[a + b:].reshape(self.oc, self.span)
        w = inputs[1].reshape(self.oc, 9 * self.c)
        for n in range(self.n):
            with PARALLEL_LOCK:
                parity_im2col(inputs[0], n, pt, pl, self.oh, self.ow, planes, cols)
            self.backend.gemm(w, cols, m)
            with PARALLEL_LOCK:
                store_s2(m, self.bias(inputs), outputs[0], n, self.pitch, self.act, ep.alpha,
                         ep.lo, ep.hi)
        self.epilogue(inputs, outputs[0])


def _geometry(oh: int, ow: int) -> tuple[int, ...]:
    """:func:`.conv_depthwise3x3.padded_geometry` at stride 2 for a 3x3 kernel, in Python."""
    return padded_geometry.py_func(oh, ow, 2, 3)


def im2col_s2_cost(spec: NodeSpec) -> float:
    """See the module docstring."""
    n, c, h, w = (int(d) for d in spec.inputs[0].shape)
    oh, ow = (int(d) for d in spec.outputs[0].shape[2:])
    span = oh * (ow + 1)
    gemm = 2 * macs(spec) * gemm_columns(span) / max(oh * ow, 1)
    copies = 4.0 * n * c * h * w + 1.0 * n * 9 * c * span + LOOP * n * c * (h + 9)
    return gemm + copies + weights_packing(spec) + GEMM_CALL * n
