"""2-D pooling: MaxPool and AveragePool on NCHW tensors.

Scheme ``direct`` (the only one): ``prange`` over the N*C planes. MaxPool is separable: per
output row, the maximum over the window's input rows, elementwise along whole rows (unit
stride, vectorised; the usual three rows in one loop), then the maximum over the kw taps of
that row: the border outputs tap by tap with bounds tests, the interior ones in one loop
without (see :func:`_max_row`); every maximum is a select, NaN winning. SqueezeNet's and
ResNet-18's 3x3 stride-2 pools, median us of 300 calls, 2 threads, three rounds in one process
against the former version ("v1": row and output maxima set to -inf, then a pass per window
row and per tap, eight short loops per output row, the tap passes at a runtime stride):

=================  ===========  ===========
layer              v1           now
=================  ===========  ===========
64 @ 111           392-412      198-209
128 @ 55           258-278      141-147
256 @ 27           164-167      100
64 @ 112, pads 1   276-385      201-208
=================  ===========  ===========

(1 thread: 64 @ 111 497-583 -> 292-405 us; v1 had itself replaced a tap-by-tap loop over
strided input, 2-3x slower.) In-model, one process, interleaved, 2 threads: squeezenet1_1 6.46
-> 6.06 and 5.85 -> 5.74 ms, resnet18 21.41 -> 20.49 ms, outputs equal.

AveragePool loops per output position over the (dilated) window clipped to the input, and
divides by the in-range count (``count_include_pad=0``) or by the count of window positions
inside the padded input (``count_include_pad=1``). Padding comes from ``pads`` or is worked
out from ``auto_pad`` and the output shape (which shape inference already computed with
``ceil_mode``), so ``run`` needs no shape logic. Applies: float32, 4-D input, only MaxPool's
first output (no Indices). Cost: ``n_out * kh * kw``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme
from refmnn.backends.numba.kernels._common import (F32, JIT, PARALLEL_LOCK, PJIT, numel,
                                                  single_output, window_params)


@njit(inline="always", **JIT)
def _max(a, b):
    """max(a, b) with NaN winning, as np.maximum (a select, which LLVM vectorises)."""
    return a if (a > b or a != a) else b


@njit(inline="always", **JIT)
def _window_max(col, start, kw, dw, w):
    """max of col[start + j * dw] over the taps j < kw that fall inside [0, w); -inf if none
    (a border output: the scalar path)."""
    v = -np.inf
    first = True
    for j in range(kw):
        i = start + j * dw
        if 0 <= i < w:
            v = col[i] if first else _max(v, col[i])
            first = False
    return v


@njit(inline="always", **JIT)
def _max_row(x_plane, col, orow, h0, kh, kw, sw, dh, dw, pl):
    """One output row of MaxPool: ``col`` = the maximum over the window's valid input rows
    (from ``h0``), elementwise along whole rows (one fused loop for the common three rows),
    then ``orow[ow]`` = the maximum over the kw taps of col from ``ow * sw - pl``: the border
    outputs tap by tap with bounds tests, the interior ones in one loop without (3 taps at
    stride 2 as three unit-offset loads of a stride-2 pair, which LLVM de-interleaves)."""
    h, w = x_plane.shape
    i_lo = 0 if h0 >= 0 else (-h0 + dh - 1) // dh
    i_hi = min(kh, (h - 1 - h0) // dh + 1) if h - 1 - h0 >= 0 else 0
    if i_hi <= i_lo:  # no input row in the window (padding only)
        orow[:] = -np.inf
        return
    r0 = x_plane[h0 + i_lo * dh]
    if i_hi - i_lo == 3:
        r1, r2 = x_plane[h0 + (i_lo + 1) * dh], x_plane[h0 + (i_lo + 2) * dh]
        for k in range(w):
            col[k] = _max(_max(r0[k], r1[k]), r2[k])
    else:
        col[:] = r0
        for i in range(i_lo + 1, i_hi):
            r1 = x_plane[h0 + i * dh]
            for k in range(w):
                col[k] = _max(col[k], r1[k])
    ow_n = orow.shape[0]
    last = w - 1 - (kw - 1) * dw + pl  # interior: ow * sw - pl >= 0 and its last tap < w
    a = min(ow_n, (pl + sw - 1) // sw)
    e = max(a, min(ow_n, last // sw + 1 if last >= 0 else 0))
    for ow in range(a):
        orow[ow] = _window_max(col, ow * sw - pl, kw, dw, w)
    for ow in range(e, ow_n):
        orow[ow] = _window_max(col, ow * sw - pl, kw, dw, w)
    if kw == 3 and dw == 1 and sw == 2:
        src = col[2 * a - pl:]
        dst = orow[a:e]
        for k in range(e - a):
            dst[k] = _max(_max(src[2 * k], src[2 * k + 1]), src[2 * k + 2])
    else:
        for ow in range(a, e):
            base = ow * sw - pl
            v = col[base]
            for j in range(1, kw):
                v = _max(v, col[base + j * dw])
            orow[ow] = v


@njit(**PJIT)
def pool2d(x, out, is_max, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, include_pad):
    n, c, h, w = x.shape
    oh_n, ow_n = out.shape[2], out.shape[3]
    for t in prange(n * c):
        b = t // c
        ch = t % c
        col = np.empty(w, dtype=x.dtype)  # MaxPool: the window's column maxima of one output row
        for oh in range(oh_n):
            h0 = oh * sh - pt
            if is_max:
                _max_row(x[b, ch], col, out[b, ch, oh], h0, kh, kw, sw, dh, dw, pl)
                continue
            for ow in range(ow_n):
                w0 = ow * sw - pl
                acc = 0.0
                count = 0
                for i in range(kh):
                    ih = h0 + i * dh
                    in_h = 0 <= ih < h
                    pad_h = -pt <= ih < h + pb
                    for j in range(kw):
                        iw = w0 + j * dw
                        if in_h and 0 <= iw < w:
                            acc += x[b, ch, ih, iw]
                            count += 1
                        elif include_pad and pad_h and -pl <= iw < w + pr:
                            count += 1
                out[b, ch, oh, ow] = acc / count if count else 0.0


def pool_params(spec: NodeSpec) -> tuple[int, ...]:
    """(kh, kw, sh, sw, dh, dw, pad_top, pad_left, pad_bottom, pad_right)."""
    return window_params(spec, spec.attrs["kernel_shape"])


class Pool(Kernel):
    def __init__(self, is_max: bool) -> None:
        self.is_max = is_max

    def prepare(self, spec: NodeSpec) -> None:
        self.params = pool_params(spec)
        self.include = bool(spec.attrs.get("count_include_pad", 0))

    def run(self, inputs, outputs, workspace):
        with PARALLEL_LOCK:
            pool2d(inputs[0], outputs[0], self.is_max, *self.params, self.include)


def _ok(spec: NodeSpec) -> bool:
    x = spec.inputs[0]
    return (x is not None and x.rank == 4 and single_output(spec)
            and len(spec.attrs["kernel_shape"]) == 2 and spec.attrs.get("storage_order", 0) == 0)


def _cost(spec: NodeSpec) -> float:
    k = spec.attrs["kernel_shape"]
    return 2000.0 + numel(spec.outputs[0]) * int(k[0]) * int(k[1])


KERNELS = (
    KernelDef("MaxPool", (Scheme("direct", lambda b, s: Pool(True), applies=_ok, cost=_cost,
                                 doc="prange over planes, clipped window"),), since=8, dtypes=F32),
    KernelDef("AveragePool", (Scheme("direct", lambda b, s: Pool(False), applies=_ok, cost=_cost,
                                     doc="prange over planes, clipped window"),),
              since=7, dtypes=F32),
)
