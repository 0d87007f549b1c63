"""2-D convolution (Conv-1/11, NCHW, float32), twelve schemes chosen by cost.

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
    blocking: measured about 12x slower than the sgemm schemes on ResNet layers) ``+ LOOP * N *
    OC * C/g * KH * KW * OH`` (a row loop per input channel, tap and output row).
``im2col_gemm`` -- any group, stride, dilation and padding.
    Per image and group, the receptive fields are packed (``im2col``, in parallel over the K rows)
    into a WORKSPACE matrix ``[K, OH*OW]``, then one BLAS sgemm ``W_g [OC/g, K] @ col`` writes
    straight into the output plane, its epilogue applied per panel as in ``gemm_1x1``
    (:class:`GemmConv`; against a separate epilogue pass, per node, 2 threads: no change beyond
    noise on MobileNet-v2's first conv or ResNet-18's ten im2col convs). Cost: ``2 * MACS``
    (sgemm, on ``OH*OW`` columns rounded up to 16: :func:`.conv_base.gemm_macs`)
    ``+ 4 * N * C * KH * KW * OH * OW`` (packing traffic) ``+ LOOP * N * C * KH * KW * OH``
    (a row loop per matrix row and output row: ResNet-18's three 3x3 stride-2 layers, 16128
    such loops each, packed in 188-204 us whatever their length, 2 threads)
    ``+ 40 * N * OC * C/g * KH * KW`` (the sgemm packing the weights: ``GEMM_PACK`` in
    :mod:`.conv_base`) ``+ 2e6 * N * g`` (per-group
    launch and sgemm overhead, ~40 us: it rules the scheme out for depthwise layers, where 960
    groups took 60 ms against 0.6 ms).
``gemm_1x1`` -- 1x1 kernel, stride 1, no padding, one group: the input plane already *is* the
    im2col matrix ``[C, H*W]``, so the conv is one sgemm per image with no packing; bias,
    residual and activation are applied to each sgemm panel by the thread that wrote it, while
    the panel is in cache (:func:`.fused.epilogue_rows`). Cost: ``2 * MACS + 40 * N * OC * C
    + 2e5 * N`` (MACS on ``H*W`` columns rounded up to 16, and the sgemm packing the weights,
    as im2col_gemm's).
    MobileNet-v2's 1x1 layers, 2 threads, same conditions as the table below (us, before: a
    split sgemm, then a parallel epilogue pass): [96,16]@[16,12544] 1618 -> 897,
    [144,24]@[24,3136] 718 -> 413, [192,32]@[32,784] 437 -> 158, [384,64]@[64,196] 360 -> 145,
    [1280,320]@[320,49] 654 -> 443.
``depthwise`` -- one input channel per group (``C/g == 1``, e.g. MobileNet's 3x3 layers).
    ``prange`` over channels; for each output row and each tap, a contiguous run of outputs is
    updated with the interior computed without bounds tests. Cost: ``10 * 2 * MACS`` (scalar-ish
    loops, but 9 taps per output leave nothing for a GEMM to win) ``+ LOOP * N * OC * KH * KW *
    OH`` (its row loops).
``depthwise_s1`` -- depthwise with stride 1: each worker copies a channel into a zero-padded
    plane in WORKSPACE and computes the output with the padded row pitch, so that every tap is
    one flat, vectorised loop over the whole plane (instead of one short loop per output row).
    Cost: ``3 * 2 * MACS + 4 * N * OC * (H+2) * (W+2)`` (the padded copy) ``+ LOOP * N * OC *
    (H + KH * KW + OH)`` (row copies in, a loop per tap, row copies out).
``winograd_f23``, ``winograd_f43`` -- 3x3, stride 1, dilation 1, one group: Winograd F(2x2, 3x3)
    and F(4x4, 3x3), in :mod:`.conv_winograd` (algorithm, cost formula, measured table);
    ``winograd_f23_simd``, ``winograd_f43_simd`` the same with the products in register tiles
    on U packed in ``prepare`` (:mod:`.gemm_simd`).
``gemm_1x1_simd`` -- ``gemm_1x1`` as a register-blocked product on packed operands, in
:mod:`.conv_1x1_simd`.
``depthwise3x3``, ``depthwise3x3_same``, ``depthwise3x3_s2_simd`` -- depthwise 3x3 (MobileNet's
    layers), in :mod:`.conv_depthwise3x3` (the loops, costs and measured tables);
    ``depthwise3x3_c8`` the same with eight channels in a vector's lanes (transposed in and out
    of NCHW in registers, for small planes and stride 2), in :mod:`.conv_depthwise3x3_c8`.
``direct3x3_few``, ``direct7x7_few`` -- 3x3 or 7x7, one group, at most four input channels (a
    first layer on an RGB image: MobileNet's and SqueezeNet's 3x3, ResNet's 7x7), in
    :mod:`.conv_direct_few`; ``direct3x3_few_simd`` the 3x3 one in register tiles;
    ``direct_few_oc16`` the 3x3 one in tiles of sixteen output channels by eight outputs, the
    input read where it lies (no padded planes), in :mod:`.conv_direct_few_oc16`.
``im2col_s2`` -- 3x3, stride 2, one group (ResNet's downsampling layers): im2col_gemm with its
    matrix rows copied whole from zero-padded parity planes, in :mod:`.conv_im2col_s2`.

``LOOP`` (:mod:`.conv_base`) prices each inner loop a scheme starts: on rows of 7..56 elements
its setup and LLVM's scalar remainder cost as much as the vectorised part, which ``MACS`` alone
does not see.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import KernelDef, NodeSpec, Scheme
from refmnn.backends.numba._blas import Binding
from refmnn.backends.numba.kernels._common import F32, PARALLEL_LOCK, PJIT, Bound, BoundRun, Call
from refmnn.backends.numba.kernels.conv_1x1_simd import (gemm_1x1_simd, gemm_1x1_simd_cost,
                                                        is_1x1_constant, packed_weights)
from refmnn.backends.numba.kernels.conv_1x1_simd import plan as plan_1x1
from refmnn.backends.numba.kernels.conv_direct_few_oc16 import (DirectFewOc16Conv,
                                                                direct_few_oc16_cost,
                                                                is_direct_few_oc16)
from refmnn.backends.numba.kernels.conv_base import (GEMM_CALL, LOOP, ConvBase, conv_direct,
                                                     conv_params, gemm_macs, is_1x1, is_2d,
                                                     is_depthwise, is_depthwise_3x3,
                                                     is_depthwise_s1, macs,
                                                     skips_padding_exactly, weights_packing)
from refmnn.backends.numba.kernels.conv_direct_few import (DirectFewConv, DirectFewSimdConv,
                                                           direct3x3_few_cost,
                                                           direct3x3_few_simd_cost,
                                                           direct7x7_few_cost,
                                                           direct7x7_few_simd_cost,
                                                           is_direct3x3_few, is_direct3x3_few_simd,
                                                           is_direct7x7_few, is_direct7x7_few_simd)
from refmnn.backends.numba.kernels.conv_depthwise3x3 import (Depthwise3x3Conv,
                                                             Depthwise3x3S2SimdConv,
                                                             Depthwise3x3SameConv,
                                                             depthwise3x3_cost,
                                                             depthwise3x3_s2_simd_cost,
                                                             depthwise3x3_same_cost,
                                                             is_depthwise3x3_s2_simd,
                                                             is_depthwise_3x3_same)
from refmnn.backends.numba.kernels.conv_depthwise3x3_c8 import (Depthwise3x3C8Conv,
                                                                depthwise3x3_c8_cost,
                                                                is_depthwise3x3_c8)
from refmnn.backends.numba.kernels.conv_im2col_s2 import (Im2colS2Conv, im2col_s2_cost,
                                                          is_im2col_s2)
from refmnn.backends.numba.kernels.conv_winograd import (Winograd23Conv, Winograd23SimdConv,
                                                         Winograd43Conv, Winograd43SimdConv,
                                                         is_3x3_s1_simd, winograd23_cost,
                                                         winograd23_simd_cost, winograd43_cost,
                                                         winograd43_simd_cost, winograd_applies)
from refmnn.backends.numba.kernels.fused import NONE, epilogue_ok, epilogue_rows
from refmnn.ops.fused import DOMAIN as FUSED_DOMAIN


# ---------------------------------------------------------------------------------------------
# numba loops


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

    def product(self, inputs, a, b, n, group, o) -> None:  # type: ignore[no-untyped-def]
        """``o = a @ b``, the output channels of image ``n``'s ``group`` as ``[OC/g, P]``, with
        the in-panel epilogue when ``in_panel`` (the caller runs ``self.epilogue`` otherwise)."""
        if not self.in_panel:
            self.backend.gemm(a, b, o)
            return
        args = self.panel_args(inputs, n, group, o)

        def finish(panel, i0, i1, j0, j1):  # type: ignore[no-untyped-def]
            epilogue_rows(o, *args, i0, i1, j0, j1)

        self.backend.gemm(a, b, o, finish, args)

    def panel_args(self, inputs, n, group, o) -> tuple:  # type: ignore[no-untyped-def]
        """The in-panel epilogue's operands for :meth:`product`'s ``o``."""
        ep = self.epilogue
        rows = slice(group * o.shape[0], (group + 1) * o.shape[0])
        return ep.panel_args(inputs[2][rows] if ep.bias_input is not None else None,
                             inputs[3][n][rows].reshape(o.shape) if ep.z_input is not None
                             else None, False)


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
    """One sgemm per image: the input plane already is the im2col matrix. A single image's
    product, with its epilogue, is bound to the run's arrays (:class:`.._blas.Binding`)."""

    def prepare(self, spec: NodeSpec) -> None:
        super().prepare(spec)
        self.binding = Binding()

    def run(self, inputs, outputs, workspace):
        if self.binding.run((*inputs, outputs[0]), lambda: self._bind(inputs, outputs[0])):
            return
        x, w, out = inputs[0], inputs[1], outputs[0]
        n_img, c = x.shape[0], x.shape[1]
        oc = w.shape[0]
        p = x.shape[2] * x.shape[3]
        wm = w.reshape(oc, c)
        for n in range(n_img):
            self.product(inputs, wm, x[n].reshape(c, p), n, 0, out[n].reshape(oc, p))
        if not self.in_panel:
            self.epilogue(inputs, out)

    def _bind(self, inputs, out):  # type: ignore[no-untyped-def]
        """The product of a single image with its in-panel epilogue (or none), bound; None
        otherwise (several images, an epilogue pass, views that would be copies)."""
        x, w = inputs[0], inputs[1]
        if out.shape[0] != 1 or (self.epilogue.active and not self.in_panel) or \
                not Binding.bindable((*inputs, out)):
            return None
        oc, c, p = w.shape[0], x.shape[1], x.shape[2] * x.shape[3]
        o = out[0].reshape(oc, p)
        args = self.panel_args(inputs, 0, 0, o) if self.in_panel else None
        return self.backend.gemm.bind(w.reshape(oc, c), x[0].reshape(c, p), o, args)


class Gemm1x1SimdConv(BoundRun, GemmConv):
    """gemm_1x1_simd: :class:`GemmConv`'s in-panel epilogue, each image's product computed
    in Numba's register tiles on packed operands (:func:`.conv_1x1_simd.gemm_1x1_simd`, the
    epilogue per tile, in registers where the activation allows) instead of an sgemm; its own
    ``run``, its calls bound to the run's arrays (:class:`.Bound`)."""

    def prepare(self, spec: NodeSpec) -> None:
        import numba

        super().prepare(spec)
        self.wp = packed_weights(self.backend, spec)
        plain = self.epilogue.panel_args(None, None, False)
        self.plain = (*plain[:5], NONE, *plain[6:])  # no bias, residual or activation
        oc, c = int(spec.inputs[1].shape[0]), int(spec.inputs[1].shape[1])
        p = int(spec.inputs[0].shape[2]) * int(spec.inputs[0].shape[3])
        self.parts = numba.config.NUMBA_NUM_THREADS
        self.by_rows, self.groups, self.strips, self.sub, self.row, plane = plan_1x1(
            oc, c, p, self.parts)
        self.plane = max(plane, 1)
        self.workspace_bytes = (self.parts * self.row + self.plane) * 4
        self.bound = Bound()

    def after_calls(self, inputs, out):  # type: ignore[no-untyped-def]
        return None if self.in_panel else self.epilogue.after(inputs, out)

    def calls(self, inputs, out, workspace) -> tuple[Call, ...]:  # type: ignore[no-untyped-def]
        """One :func:`.conv_1x1_simd.gemm_1x1_simd` call per image (see :class:`.Bound`)."""
        x = inputs[0]
        c, oc = x.shape[1], out.shape[1]
        p = x.shape[2] * x.shape[3]
        raw = workspace.handle[:self.workspace_bytes].view(np.float32)
        scratch = raw[:self.parts * self.row].reshape(self.parts, self.row)
        plane = raw[self.parts * self.row:]
        calls = []
        for n in range(x.shape[0]):
            o = out[n].reshape(oc, p)
            args = self.panel_args(inputs, n, 0, o) if self.in_panel else self.plain
            calls.append((gemm_1x1_simd, (self.wp, oc, x[n].reshape(c, p), o, *args,
                                          self.by_rows, self.groups, self.strips, self.sub,
                                          scratch, plane)))
        return tuple(calls)


# ---------------------------------------------------------------------------------------------
# declarations


def _row_loops(spec: NodeSpec) -> float:
    """N * OC * KH * KW * OH: one row loop per output row and kernel tap (per output channel)."""
    n, oc, oh, _ = (int(d) for d in spec.outputs[0].shape)
    kh, kw = (int(d) for d in spec.inputs[1].shape[2:])
    return float(n * oc * kh * kw * oh)


def _direct_cost(spec: NodeSpec) -> float:
    cg = int(spec.inputs[1].shape[1])
    return 12 * 2 * macs(spec) + LOOP * cg * _row_loops(spec) + 2000.0


def _depthwise_cost(spec: NodeSpec) -> float:
    return 10 * 2 * macs(spec) + LOOP * _row_loops(spec) + 2000.0


def _depthwise_s1_cost(spec: NodeSpec) -> float:
    n, _, h, w = (int(d) for d in spec.inputs[0].shape)
    oc, _, kh, kw = (int(d) for d in spec.inputs[1].shape)
    oh = int(spec.outputs[0].shape[2])
    loops = n * oc * (h + kh * kw + oh)  # per plane: row copies in, one loop per tap, rows out
    return 3 * 2 * macs(spec) + 4.0 * n * oc * (h + 2) * (w + 2) + LOOP * loops + 2000.0


def _im2col_cost(spec: NodeSpec) -> float:
    n, c, _, _ = (int(d) for d in spec.inputs[0].shape)
    kh, kw, *_, g = conv_params(spec)
    oh, ow = (int(d) for d in spec.outputs[0].shape[2:])
    return (2 * gemm_macs(spec) + 4.0 * n * c * kh * kw * oh * ow + LOOP * n * c * kh * kw * oh
            + weights_packing(spec) + 10 * GEMM_CALL * n * g)


def _gemm_1x1_cost(spec: NodeSpec) -> float:
    return 2 * gemm_macs(spec) + weights_packing(spec) + GEMM_CALL * int(spec.inputs[0].shape[0])


def _schemes(fused: bool) -> tuple[Scheme, ...]:
    def when(applies):  # type: ignore[no-untyped-def]
        return (lambda spec: applies(spec) and epilogue_ok(spec, 3)) if fused else applies

    def skipping(applies):  # type: ignore[no-untyped-def]
        """A scheme whose loops skip the padding taps: see skips_padding_exactly."""
        return when(lambda spec: applies(spec) and skips_padding_exactly(spec))

    return (
        Scheme("direct", lambda b, s: DirectConv(b), applies=skipping(is_2d), cost=_direct_cost,
               doc="prange over (n, oc), tap-by-tap row updates"),
        Scheme("im2col_gemm", lambda b, s: Im2colConv(b), applies=when(is_2d), cost=_im2col_cost,
               doc="pack receptive fields into WORKSPACE, one BLAS sgemm per group"),
        Scheme("im2col_s2", lambda b, s: Im2colS2Conv(b), applies=when(is_im2col_s2),
               cost=im2col_s2_cost,
               doc="3x3 stride 2: im2col rows copied whole from parity planes, one sgemm"),
        Scheme("gemm_1x1", lambda b, s: Gemm1x1Conv(b), applies=when(is_1x1), cost=_gemm_1x1_cost,
               doc="1x1 stride 1: one BLAS sgemm per image, no packing"),
        Scheme("gemm_1x1_simd", lambda b, s: Gemm1x1SimdConv(b), applies=when(is_1x1_constant),
               cost=gemm_1x1_simd_cost,
               doc="1x1 stride 1: 4 x 24 register tiles of 8-lane vectors, epilogue per task"),
        Scheme("depthwise", lambda b, s: DepthwiseConv(b), applies=skipping(is_depthwise),
               cost=_depthwise_cost,
               doc="one input channel per group, prange over channels"),
        Scheme("depthwise_s1", lambda b, s: DepthwiseS1Conv(b), applies=when(is_depthwise_s1),
               cost=_depthwise_s1_cost,
               doc="stride-1 depthwise on a padded plane, one flat loop per tap"),
        Scheme("depthwise3x3", lambda b, s: Depthwise3x3Conv(b), applies=when(is_depthwise_3x3),
               cost=depthwise3x3_cost,
               doc="3x3 depthwise on a padded plane, nine taps unrolled, bias and activation"),
        Scheme("depthwise3x3_same", lambda b, s: Depthwise3x3SameConv(b),
               applies=skipping(is_depthwise_3x3_same), cost=depthwise3x3_same_cost,
               doc="3x3 stride-1 depthwise at the input's row pitch, edge columns masked"),
        Scheme("depthwise3x3_s2_simd", lambda b, s: Depthwise3x3S2SimdConv(b),
               applies=skipping(is_depthwise3x3_s2_simd), cost=depthwise3x3_s2_simd_cost,
               doc="3x3 stride-2 depthwise from the planes, 8 outputs a vector, de-interleaved"),
        Scheme("depthwise3x3_c8", lambda b, s: Depthwise3x3C8Conv(b),
               applies=when(is_depthwise3x3_c8), cost=depthwise3x3_c8_cost,
               doc="3x3 depthwise, 8 channels a vector, transposed in and out in registers"),
        Scheme("direct3x3_few", lambda b, s: DirectFewConv(b), applies=when(is_direct3x3_few),
               cost=direct3x3_few_cost,
               doc="3x3 with <= 4 input channels: padded planes, taps unrolled per channel"),
        Scheme("direct3x3_few_simd", lambda b, s: DirectFewSimdConv(b),
               applies=when(is_direct3x3_few_simd), cost=direct3x3_few_simd_cost,
               doc="3x3 with <= 4 input channels: padded planes, 4 x 24 register tiles"),
        Scheme("direct_few_oc16", lambda b, s: DirectFewOc16Conv(b),
               applies=when(is_direct_few_oc16), cost=direct_few_oc16_cost,
               doc="3x3, <= 4 input channels: 16-channel x 8-output tiles, inputs read in place"),
        Scheme("direct7x7_few", lambda b, s: DirectFewConv(b), applies=when(is_direct7x7_few),
               cost=direct7x7_few_cost,
               doc="7x7 with <= 4 input channels: padded planes, a kernel row of taps at a time"),
        Scheme("direct7x7_few_simd", lambda b, s: DirectFewSimdConv(b),
               applies=when(is_direct7x7_few_simd), cost=direct7x7_few_simd_cost,
               doc="7x7 with <= 4 input channels: padded planes, 4 x 24 register tiles"),
        Scheme("winograd_f23", lambda b, s: Winograd23Conv(b), applies=when(winograd_applies),
               cost=winograd23_cost,
               doc="F(2x2,3x3): weights transformed in prepare, 16 sgemms"),
        Scheme("winograd_f43", lambda b, s: Winograd43Conv(b), applies=when(winograd_applies),
               cost=winograd43_cost,
               doc="F(4x4,3x3): weights transformed in prepare, 36 sgemms"),
        Scheme("winograd_f23_simd", lambda b, s: Winograd23SimdConv(b),
               applies=when(is_3x3_s1_simd), cost=winograd23_simd_cost,
               doc="F(2x2,3x3), its 16 products in 8-lane register tiles (<= 128 channels)"),
        Scheme("winograd_f43_simd", lambda b, s: Winograd43SimdConv(b),
               applies=when(is_3x3_s1_simd), cost=winograd43_simd_cost,
               doc="F(4x4,3x3), its 36 products in 8-lane register tiles (<= 128 channels)"),
    )


KERNELS = (
    KernelDef("Conv", _schemes(False), since=1, dtypes=F32),
    KernelDef("FusedConv", _schemes(True), domain=FUSED_DOMAIN, since=1, dtypes=F32),
)
