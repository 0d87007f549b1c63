"""2-D pooling: MaxPool and AveragePool on NCHW tensors.

Scheme ``direct`` (every MaxPool and AveragePool; ``max3x3s2`` below takes MaxPool 3x3 stride
2): ``prange`` over the N*C planes. MaxPool is separable: per
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

Scheme ``max3x3s2``: MaxPool 3x3, stride 2, dilation 1, any padding (ResNet's and SqueezeNet's
pools). Here ``direct`` spends most of its time in the stride-2 taps: a loop of 27..56 outputs
per row, which LLVM compiles to AVX-512 gathers run mostly in the scalar remainder of its
64-element vector body. Per plane, this scheme writes the column maxima of every output row
into ``v`` ``[OH, 2 * OW]`` (padded column ``j`` = input column ``j - pad_left``, -inf outside),
splits ``v`` into its even and odd columns by viewing each pair of float32 as one 64-bit word
(one flat loop over the whole plane, unit stride), and takes every window's maximum ``max(even[q],
odd[q], even[q + 1])`` in a second flat loop; the last window of each row, whose third tap lies
in the next row there, is redone with that tap kept aside. Median us, 2 threads, same inputs,
isolated (direct / max3x3s2): 64 @ 111 148 / 101, 128 @ 55 102 / 62, 256 @ 27 59 / 38, 64 @
112 pads 1 140 / 101; in the models, interleaved with sessions built without the scheme (a
loaded machine): SqueezeNet's three pools 538 -> 456 us, ResNet-18's 438 -> 339 us. Cost:
``6 * n_out``.

Scheme ``max3x3s2_simd`` (:func:`max_pool_3x3s2_simd`): the same pools on a CPU with AVX2 and
FMA, with rows of at least 16 input and 8 output columns, eight outputs a vector (:mod:`.simd`).
Each worker keeps one padded row, -inf on both sides of the input columns (from ``pl``), so that
no window needs a bounds test. Per output row: the maximum over the window's input rows, eight
columns a vector, stored into the padded row; then for eight outputs ``ow``: the even and the
odd columns of the sixteen from ``2 * ow`` and the even ones of the sixteen from ``2 * ow + 2``
(four loads, three de-interleaving shuffles), two maxima, one store. The last vector of each
row overlaps the one before it and recomputes a few outputs, so there is no scalar tail: on
SqueezeNet's 27 x 27 and 13 x 13 planes most of ``max3x3s2``'s loops were such tails. The
maximum is :func:`.simd.vmax`, the scalar ``_max`` lane-wise (NaN wins, equal values give the
second), in the same order, so the results are those of the other schemes bit for bit.
A row's two halves are :func:`column_maxima8` and :func:`window_maxima8`, which
``refmnn::FusedConvMaxPool``'s kernel (:mod:`.conv_few_pool`) shares.
Median us, 2 threads, the two kernels alternating on the same arrays, two runs (max3x3s2 /
max3x3s2_simd): 256 @ 27 105 / 65 and 104 / 65, 128 @ 55 124 / 107 and 120 / 107, 64 @ 111
171 / 203 and 153 / 184, 64 @ 112 pads 1 181 / 212 and 174 / 203. On the wide planes, whose
pools are bound by reading the input, it lost; its cost, ``n_out * (2.8 + 0.077 * OW)``
against max3x3s2's ``6 * n_out``, gives it the rows of fewer than 41 outputs (SqueezeNet's
last two pools). In SqueezeNet, sessions with and without the scheme alternating in one
process, per-node medians (us, two runs): 128 @ 55 129 -> 114 and 138 -> 114, 256 @ 27 104 ->
69 and 110 -> 69; the whole model moved within its noise (1.007x and 0.994x).

AveragePool loops per output position over the (dilated) window clipped to the input, and
divides by the in-range count (``count_include_pad=0``) or by the count of window positions
inside the padded input (``count_include_pad=1``). Padding comes from ``pads`` or is worked
out from ``auto_pad`` and the output shape (which shape inference already computed with
``ceil_mode``), so ``run`` needs no shape logic. Applies: float32, 4-D input, only MaxPool's
first output (no Indices). Cost: ``n_out * kh * kw``.
"""

from __future__ import annotations

import sys

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme
from refmnn.backends.numba.kernels._common import (F32, JIT, PJIT, Bound, BoundRun, Call, handle,
                                                  numel, single_output, window_params)
from refmnn.backends.numba.kernels.fused import NONE
from refmnn.backends.numba.kernels.gemm_simd import activate8
from refmnn.backends.numba.kernels.simd import (LANES, native, veven, vload, vmax, vodd, vorder,
                                                vsplat, vstore)


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


@njit(inline="always", **JIT)
def _column_maxima(plane, v, last, pt, pl, oh_n, wp):
    """Row ``oh`` of ``v`` (pitch ``wp = 2 * OW``) = the maximum over the (up to) three input
    rows of output row ``oh``'s windows, for padded columns ``0 .. wp - 1`` (input column
    ``j - pl``; -inf outside the input); ``last[oh]`` the same for padded column ``wp``, the
    third tap of the row's last window."""
    h, w = plane.shape
    ninf = np.float32(-np.inf)
    j0, j1 = pl, min(wp, w + pl)  # the padded columns that are input columns
    for oh in range(oh_n):
        lo, hi = max(2 * oh - pt, 0), min(2 * oh - pt + 3, h)
        row = v[oh * wp:(oh + 1) * wp]
        row[:j0] = ninf
        row[j1:] = ninf
        dst = row[j0:j1]
        if hi - lo == 3:
            r0, r1, r2 = plane[lo], plane[lo + 1], plane[lo + 2]
            for k in range(j1 - j0):
                dst[k] = _max(_max(r0[k], r1[k]), r2[k])
        else:  # a window clipped by the top or bottom edge
            dst[:] = ninf
            for i in range(lo, hi):
                r1 = plane[i]
                for k in range(j1 - j0):
                    dst[k] = _max(dst[k], r1[k])
        e = wp - pl  # the input column of padded column wp
        m = ninf
        if 0 <= e < w:
            for i in range(lo, hi):
                m = _max(m, plane[i, e])
        last[oh] = m


def scratch_3x3s2(oh_n: int, ow_n: int) -> int:
    """float32 elements of one worker's buffers in :func:`max_pool_3x3s2` (even, so that the
    next worker's row stays 8-byte aligned for the 64-bit view)."""
    size = oh_n * ow_n
    return (4 * size + 1 + oh_n + 1) // 2 * 2


@njit(**PJIT)
def max_pool_3x3s2(x, out, pt, pl, scratch):
    """MaxPool 3x3, stride 2, dilation 1, any padding (see ``max3x3s2`` in the module
    docstring). One worker (``prange``) per row of ``scratch``, each over a contiguous run of
    the planes, with its buffers there: the column maxima ``v`` ``[OH, 2 * OW]``, ``halves``
    (the even and odd columns of ``v``, OH * OW + 1 and OH * OW elements) and ``last`` (the
    third tap of each row's last window)."""
    n, c, _, _ = x.shape
    oh_n, ow_n = out.shape[2], out.shape[3]
    wp, size = 2 * ow_n, oh_n * ow_n
    parts, jobs = scratch.shape[0], n * c
    for part in prange(parts):
        v = scratch[part, :2 * size]
        halves = scratch[part, 2 * size:4 * size + 1]
        last = scratch[part, 4 * size + 1:4 * size + 1 + oh_n]
        pairs = v.view(np.uint64)
        bits = halves.view(np.uint32)
        lo_bits, hi_bits = bits[:size + 1], bits[size + 1:]
        even, odd = halves[:size + 1], halves[size + 1:]
        even[size] = -np.inf
        for t in range(part * jobs // parts, (part + 1) * jobs // parts):
            _column_maxima(x[t // c, t % c], v, last, pt, pl, oh_n, wp)
            # split v into its even and odd columns: the low and high halves of each 64-bit
            # pair (little-endian), one flat loop
            for q in range(size):
                pair = pairs[q]
                lo_bits[q] = np.uint32(pair & 0xFFFFFFFF)
                hi_bits[q] = np.uint32(pair >> 32)
            # window (oh, ow) = columns 2ow, 2ow + 1, 2ow + 2 of v's row oh: even[q], odd[q],
            # even[q + 1], q = oh * OW + ow, one flat loop; the last window of each row reads
            # the next row's first column there and is redone with its third tap from ``last``
            dst = out[t // c, t % c].reshape(size)
            for q in range(size):
                dst[q] = _max(_max(even[q], odd[q]), even[q + 1])
            for oh in range(oh_n):
                q = (oh + 1) * ow_n - 1
                dst[q] = _max(_max(even[q], odd[q]), last[oh])


def scratch_3x3s2_simd(w: int, pl: int, ow_n: int) -> int:
    """float32 elements of one worker's padded row in :func:`max_pool_3x3s2_simd`: the input
    columns from ``pl``, -inf around them, room for the last group's loads (to ``2 * OW + 2``)
    and a multiple of 8, so that every worker's row starts 32-byte apart."""
    return -(-(max(pl + w, 2 * ow_n + 2) + LANES) // LANES) * LANES


@njit(inline="always", **JIT)
def column_maxima8(src, o0, o1, o2, rows, w, row, pl, act, lo, hi):
    """The first half of one output row of a 3x3 stride-2 max pool, eight columns a vector
    (see ``max3x3s2_simd`` in the module docstring): into ``row`` from ``pl`` on, column by
    column, the maximum over the ``rows`` (0 to 3) input rows of its windows, ``w`` elements
    of ``src`` from ``o0``, ``o1`` and ``o2`` on, each element activated first
    (:func:`.gemm_simd.activate8`: none, Relu or Clip to ``[lo, hi]``). ``row``: the worker's
    padded row, -inf outside the input columns (:func:`scratch_3x3s2_simd`); the last vector
    overlaps the one before it."""
    for g in range(0, w, LANES):
        k = min(g, w - LANES)
        m = vsplat(np.float32(-np.inf))  # a window wholly in the padding: -inf
        if rows > 0:
            m = vmax(m, activate8(vload(src, o0 + k), act, lo, hi))
        if rows > 1:
            m = vmax(m, activate8(vload(src, o1 + k), act, lo, hi))
        if rows > 2:
            m = vmax(m, activate8(vload(src, o2 + k), act, lo, hi))
        vstore(row, pl + k, m)


@njit(inline="always", **JIT)
def window_maxima8(row, out, base, ow_n):
    """The second half: ``out[base + ow] = max(row[2 ow], row[2 ow + 1], row[2 ow + 2])`` for
    ``ow < ow_n``, from the even and the odd of sixteen columns and the even of sixteen from two
    on (in veven's lane order, put right by vorder); the last vector overlaps the one before."""
    for g in range(0, ow_n, LANES):
        o = min(g, ow_n - LANES)
        a, b = vload(row, 2 * o), vload(row, 2 * o + LANES)
        c, d = vload(row, 2 * o + 2), vload(row, 2 * o + 2 + LANES)
        m = vmax(vmax(veven(a, b), vodd(a, b)), veven(c, d))
        vstore(out, base + o, vorder(m))


@njit(**PJIT)
def max_pool_3x3s2_simd(x, out, h, w, oh_n, ow_n, pt, pl, scratch):
    """MaxPool 3x3, stride 2, dilation 1, any padding, eight outputs a vector (see
    ``max3x3s2_simd`` in the module docstring). ``x`` and ``out`` are the flat NCHW tensors;
    one worker (``prange``) per row of ``scratch``, each over a contiguous run of the planes,
    with its -inf padded row there."""
    parts, planes = scratch.shape[0], x.size // (h * w)
    ninf = np.float32(-np.inf)
    for part in prange(parts):
        row = scratch[part]
        for j in range(row.size):
            row[j] = ninf  # the padding columns stay -inf; the input columns are rewritten
        for t in range(part * planes // parts, (part + 1) * planes // parts):
            for oh in range(oh_n):
                lo, hi = max(2 * oh - pt, 0), min(2 * oh - pt + 3, h)
                first = (t * h + lo) * w
                column_maxima8(x, first, first + w, first + 2 * w, hi - lo, w, row, pl, NONE,
                               ninf, ninf)
                window_maxima8(row, out, (t * oh_n + oh) * ow_n, ow_n)


def pool_params(spec: NodeSpec) -> tuple[int, ...]:
    """(kh, kw, sh, sw, dh, dw, pad_top, pad_left, pad_bottom, pad_right)."""
    return window_params(spec, spec.attrs["kernel_shape"])


class Pool(BoundRun, Kernel):
    def __init__(self, is_max: bool) -> None:
        self.is_max = is_max

    def prepare(self, spec: NodeSpec) -> None:
        self.params = pool_params(spec)
        self.include = bool(spec.attrs.get("count_include_pad", 0))
        self.bound = Bound()

    def binding(self, inputs, outputs, workspace):  # type: ignore[no-untyped-def]
        return ((inputs[0], outputs[0], handle(workspace)),
                lambda: self.calls(inputs[0], outputs[0], workspace), None)

    def calls(self, x, out, workspace) -> tuple[Call, ...]:  # type: ignore[no-untyped-def]
        """The :func:`pool2d` call (see :class:`.Bound`)."""
        return ((pool2d, (x, out, self.is_max, *self.params, self.include)),)


class MaxPool3x3s2(Pool):
    def __init__(self) -> None:
        super().__init__(True)

    def prepare(self, spec: NodeSpec) -> None:
        import numba

        super().prepare(spec)
        _, _, self.h, self.w = (int(d) for d in spec.inputs[0].shape)
        self.oh, self.ow = (int(d) for d in spec.outputs[0].shape[2:])
        self.parts = numba.config.NUMBA_NUM_THREADS
        self.per = self.scratch_per_part()
        self.workspace_bytes = self.parts * self.per * 4

    def scratch_per_part(self) -> int:
        """float32 elements of one worker's buffers (see :func:`scratch_3x3s2`)."""
        return scratch_3x3s2(self.oh, self.ow)

    def scratch(self, workspace) -> np.ndarray:  # type: ignore[no-untyped-def]
        """The workers' buffers in the workspace, one row each."""
        return workspace.handle[:self.workspace_bytes].view(np.float32).reshape(
            self.parts, self.per)

    def calls(self, x, out, workspace) -> tuple[Call, ...]:  # type: ignore[no-untyped-def]
        """The :func:`max_pool_3x3s2` call (see :class:`.Bound`)."""
        _, _, _, _, _, _, pt, pl, _, _ = self.params
        scratch = self.scratch(workspace)
        return ((max_pool_3x3s2, (x, out, pt, pl, scratch)),)


class MaxPool3x3s2Simd(MaxPool3x3s2):
    def scratch_per_part(self) -> int:
        """float32 elements of one worker's padded row (see :func:`scratch_3x3s2_simd`)."""
        return scratch_3x3s2_simd(self.w, self.params[7], self.ow)

    def calls(self, x, out, workspace) -> tuple[Call, ...]:  # type: ignore[no-untyped-def]
        """The :func:`max_pool_3x3s2_simd` call (see :class:`.Bound`)."""
        _, _, _, _, _, _, pt, pl, _, _ = self.params
        scratch = self.scratch(workspace)
        return ((max_pool_3x3s2_simd, (x.reshape(-1), out.reshape(-1), self.h, self.w, self.oh,
                                       self.ow, pt, pl, scratch)),)


def _ok(spec: NodeSpec) -> bool:
    x = spec.inputs[0]
    return (x is not None and x.rank == 4 and single_output(spec)
            and len(spec.attrs["kernel_shape"]) == 2 and spec.attrs.get("storage_order", 0) == 0)


def _cost(spec: NodeSpec) -> float:
    k = spec.attrs["kernel_shape"]
    return 2000.0 + numel(spec.outputs[0]) * int(k[0]) * int(k[1])


def _ok_3x3s2(spec: NodeSpec) -> bool:
    return (_ok(spec) and sys.byteorder == "little"
            and pool_params(spec)[:6] == (3, 3, 2, 2, 1, 1))


def _cost_3x3s2(spec: NodeSpec) -> float:
    # per output: the column maxima of two columns and the split (two 3x3-window taps'
    # worth), the window maximum (one)
    return 2000.0 + numel(spec.outputs[0]) * 6


def _ok_3x3s2_simd(spec: NodeSpec) -> bool:
    """max3x3s2's cases on a CPU with AVX2 (:func:`.simd.native`), with rows of at least 16
    input and 8 output columns (one vector of each; the last vector of a row overlaps)."""
    return (_ok_3x3s2(spec) and native() and int(spec.inputs[0].shape[3]) >= 2 * LANES
            and int(spec.outputs[0].shape[3]) >= LANES)


def _cost_3x3s2_simd(spec: NodeSpec) -> float:
    # fitted to the times in the module docstring: against max3x3s2's 6 per output, 3.8 on
    # 13-output rows and 4.9 on 27, 7.0 on 55 and 57 (the wide planes' pools are bound by
    # reading the input, where this scheme gains nothing and lost 17-19 %)
    return 2000.0 + numel(spec.outputs[0]) * (2.8 + 0.077 * int(spec.outputs[0].shape[3]))


KERNELS = (
    KernelDef("MaxPool", (Scheme("direct", lambda b, s: Pool(True), applies=_ok, cost=_cost,
                                 doc="prange over planes, clipped window"),
                          Scheme("max3x3s2", lambda b, s: MaxPool3x3s2(), applies=_ok_3x3s2,
                                 cost=_cost_3x3s2,
                                 doc="3x3 stride 2: column maxima, even/odd split, flat loops"),
                          Scheme("max3x3s2_simd", lambda b, s: MaxPool3x3s2Simd(),
                                 applies=_ok_3x3s2_simd, cost=_cost_3x3s2_simd,
                                 doc="3x3 stride 2, eight outputs a vector (AVX2)")),
              since=8, dtypes=F32),
    KernelDef("AveragePool", (Scheme("direct", lambda b, s: Pool(False), applies=_ok, cost=_cost,
                                     doc="prange over planes, clipped window"),),
              since=7, dtypes=F32),
)
