"""The numba kernels of the channel-blocked ops (:mod:`refmnn.ops.blocked`): convolutions that
read and write NC8HW8 tensors (``[N, C/8, H, W, 8]``, eight channels innermost), and the
conversion back to NCHW. :func:`refmnn.schedule.blocked.block_channels` puts a chain of
convolutions into this layout when these schemes apply to its nodes.

In NC8HW8 a vector is eight channels of one pixel, which is what a convolution's inner step
wants: the weights of eight output channels times one input value (a 1x1 layer), or a tap's
weights of eight channels times their eight inputs (a depthwise layer). The NCHW schemes of
:mod:`.conv` must rearrange instead: ``gemm_1x1_simd`` packs the input into strips per call,
``depthwise3x3_c8`` transposes eight planes in and out of registers, the others vectorise along
a row and pay for its ends. Here:

* ``gemm_1x1_nc8hw8`` (:func:`gemm_1x1_nc8hw8`) -- a 1x1 convolution as tiles of four pixels
  by up to ``GROUP`` (four) blocks of output channels: sixteen accumulators; each input channel
  is four weight vectors (the group's 32 output channels, packed ``[C][32]`` once in
  ``prepare``) and four broadcast inputs, read where they lie (a pixel's channels are adjacent)
  -- no packing, no strips, no tails but the last pixels of a task (one-pixel tiles). A group
  of fewer blocks (24 or 16 output channels) skips the missing blocks' multiply-adds: the
  guards are loop-invariant and LLVM takes them out of the loop (as fast as a kernel without
  them at four blocks). Bias, residual and Relu/Clip are applied in registers before each
  store. Tasks: (image, group, run of pixels), at least ``TASKS_PER_PART`` per worker.
* ``depthwise3x3_nc8hw8`` (:func:`depthwise3x3_nc8hw8`) -- a 3x3 depthwise convolution, any
  stride and padding: per output pixel, nine vector loads and multiply-adds with the block's
  nine weight vectors (held in registers through a row); taps that fall in the padding are
  skipped at the edges. Tasks: (image, block, output row).
* ``direct_few_oc16_nc8hw8`` -- :mod:`.conv_direct_few_oc16`'s stem tiles (sixteen output
  channels by eight outputs, computed as vectors over the channels) stored as they are, two
  blocks, without the transposes its NCHW version needs: a network's first layer writes the
  chain's layout directly.
* ``transpose8`` (FromNC8HW8) -- eight pixels' vectors of eight channels transposed in
  registers (:func:`.simd.vtranspose`) into eight channels' runs of eight pixels.

Each output is the reference's sum in another order (the bias first, then one fused
multiply-add per term), so results agree with the reference to rounding, not bit for bit.

Measured, AMD EPYC (Zen 4), 2 threads. Prototypes of the two loops against the NCHW schemes,
kernels alone, hot, median us: 1x1 384 -> 64 @ 14x14 45 against gemm_1x1_simd's 57, 960 ->
160 @ 7x7 70 against 101, 64 -> 384 @ 14x14 44 against 57, 320 -> 1280 @ 7x7 181 against 251
(0.69-0.93x on ten MobileNetV2 layers); with the missing blocks' multiply-adds skipped, 32 ->
16 @ 112x112 64 against 114 computed on four blocks, 144 -> 24 @ 56x56 100 against 129; the
depthwise loop about half of the NCHW schemes' in-model times (32 @ 112x112 89 against 119,
576 @ 14x14 21 against 30-36). In MobileNetV2, each step timed in one process with the old
plan's beside it (150 runs, median us, old -> blocked): 1x1 32 -> 16 @ 112x112 169 -> 96, 16
-> 96 @ 112x112 399 -> 308, 144 -> 24 @ 56x56 176 -> 129, 576 -> 96 @ 14x14 164 -> 133, 960
-> 160 @ 7x7 137 -> 94, 320 -> 1280 @ 7x7 286 -> 247; depthwise 32 @ 112x112 144 -> 106, 96
@ 112x112 stride 2 166 -> 144, 144 @ 56x56 stride 2 78 -> 42, 28x28 and 14x14 46-50 -> 46-49,
7x7 24-25 -> 27-28 (``depthwise3x3_c8`` was a little quicker there); the stem 222 -> 205; the
one conversion back, 1280 channels @ 7x7, 28; the steps' sum 5796 -> 4678. Whole models,
sessions with and without the layout alternating in one process (40 x 5 runs): MobileNetV2
5.17 -> 4.28 ms (0.83), MobileNet-v1 7.59 -> 6.58 (0.87).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme, Storage
from refmnn.backends.numba.kernels._common import (F32, JIT, PJIT, Bound, BoundRun, Call,
                                                  into_contiguous)
from refmnn.backends.numba.kernels.conv_base import ConvBase, conv_params, is_1x1, macs
from refmnn.backends.numba.kernels.conv_direct_few_oc16 import (is_direct_few_oc16, packed_oc16,
                                                               tile16)
from refmnn.backends.numba.kernels.fused import ACT_CODES, CLIP, NONE, RELU
from refmnn.backends.numba.kernels.gemm_simd import activate8
from refmnn.backends.numba.kernels.simd import (native, vadd, vbroadcast, vfma, vload, vstore,
                                                vtranspose)
from refmnn.ops.blocked import LANES, unblocked_type
from refmnn.ops.fused import DOMAIN as FUSED_DOMAIN

GROUP = 4  # blocks of output channels a 1x1 tile holds
PIXELS = 4  # pixels a 1x1 tile holds
TASKS_PER_PART = 4  # 1x1 tasks per worker at least, where the pixels allow
IN_LOOPS = (NONE, RELU, CLIP)  # the activations the loops apply in registers


# ---------------------------------------------------------------------------------------------
# the loops


@njit(inline="always", **JIT)
def _finish(yf, zf, o, acc, has_z, act, lo, hi):
    """Store ``act(acc + z)`` (z only with ``has_z``) at ``yf[o:o + 8]``."""
    if has_z:
        acc = vadd(acc, vload(zf, o))
    vstore(yf, o, activate8(acc, act, lo, hi))


@njit(inline="always", **JIT)
def _maybe(a, o, nb, k, other):
    """The vector of block ``k`` (``a[o + 8k:]``) when a group has more than ``k`` blocks, else
    ``other`` (a stand-in that is never stored)."""
    return vload(a, o + LANES * k) if nb > k else other


@njit(inline="always", **JIT)
def _tile4(xf, xo, plane, cb_n, wp, wo, nb, bias, bo, yf, zf, yo, has_z, act, lo, hi):
    """Four pixels (from ``xf[xo]``; the next block of channels ``plane`` further) by ``nb`` <=
    4 blocks of output channels (weights ``[C][8 nb]`` from ``wp[wo]``, bias from
    ``bias[bo]``), stored from ``yf[yo]`` (block ``k`` ``plane`` apart)."""
    st = nb * LANES
    b0 = vload(bias, bo)
    b1, b2 = _maybe(bias, bo, nb, 1, b0), _maybe(bias, bo, nb, 2, b0)
    b3 = _maybe(bias, bo, nb, 3, b0)
    a00 = a10 = a20 = a30 = b0
    a01 = a11 = a21 = a31 = b1
    a02 = a12 = a22 = a32 = b2
    a03 = a13 = a23 = a33 = b3
    for cb in range(cb_n):
        xq, wq = xo + cb * plane, wo + cb * LANES * st
        for c8 in range(LANES):
            q = wq + c8 * st
            w0 = vload(wp, q)
            w1, w2 = _maybe(wp, q, nb, 1, w0), _maybe(wp, q, nb, 2, w0)
            w3 = _maybe(wp, q, nb, 3, w0)
            x0, x1 = vbroadcast(xf, xq + c8), vbroadcast(xf, xq + LANES + c8)
            x2, x3 = vbroadcast(xf, xq + 2 * LANES + c8), vbroadcast(xf, xq + 3 * LANES + c8)
            a00, a10 = vfma(w0, x0, a00), vfma(w0, x1, a10)
            a20, a30 = vfma(w0, x2, a20), vfma(w0, x3, a30)
            if nb > 1:
                a01, a11 = vfma(w1, x0, a01), vfma(w1, x1, a11)
                a21, a31 = vfma(w1, x2, a21), vfma(w1, x3, a31)
            if nb > 2:
                a02, a12 = vfma(w2, x0, a02), vfma(w2, x1, a12)
                a22, a32 = vfma(w2, x2, a22), vfma(w2, x3, a32)
            if nb > 3:
                a03, a13 = vfma(w3, x0, a03), vfma(w3, x1, a13)
                a23, a33 = vfma(w3, x2, a23), vfma(w3, x3, a33)
    for k, (p0, p1, p2, p3) in enumerate(((a00, a10, a20, a30), (a01, a11, a21, a31),
                                          (a02, a12, a22, a32), (a03, a13, a23, a33))):
        if k < nb:
            o = yo + k * plane
            _finish(yf, zf, o, p0, has_z, act, lo, hi)
            _finish(yf, zf, o + LANES, p1, has_z, act, lo, hi)
            _finish(yf, zf, o + 2 * LANES, p2, has_z, act, lo, hi)
            _finish(yf, zf, o + 3 * LANES, p3, has_z, act, lo, hi)


@njit(inline="always", **JIT)
def _tile1(xf, xo, plane, cb_n, wp, wo, nb, bias, bo, yf, zf, yo, has_z, act, lo, hi):
    """:func:`_tile4` for one pixel (a task's last ones)."""
    st = nb * LANES
    a0 = vload(bias, bo)
    a1, a2 = _maybe(bias, bo, nb, 1, a0), _maybe(bias, bo, nb, 2, a0)
    a3 = _maybe(bias, bo, nb, 3, a0)
    for cb in range(cb_n):
        xq, wq = xo + cb * plane, wo + cb * LANES * st
        for c8 in range(LANES):
            q = wq + c8 * st
            x0 = vbroadcast(xf, xq + c8)
            a0 = vfma(vload(wp, q), x0, a0)
            if nb > 1:
                a1 = vfma(vload(wp, q + LANES), x0, a1)
            if nb > 2:
                a2 = vfma(vload(wp, q + 2 * LANES), x0, a2)
            if nb > 3:
                a3 = vfma(vload(wp, q + 3 * LANES), x0, a3)
    for k, a in enumerate((a0, a1, a2, a3)):
        if k < nb:
            _finish(yf, zf, yo + k * plane, a, has_z, act, lo, hi)


@njit(**PJIT)
def gemm_1x1_nc8hw8(x, wp, bias, z, has_z, y, act, lo, hi, chunk, parts):
    """``y = act(w @ x + bias + z)`` per pixel: ``x [N, CB, ..., 8]`` and ``y [N, OCB, ...,
    8]`` (z like y when ``has_z``) C-contiguous float32; ``wp`` the weights packed by
    :func:`packed_groups`; tasks of ``chunk`` pixels (a multiple of 4) of one image and one
    group of output blocks (module docstring)."""
    n_img, cb_n, ocb_n = x.shape[0], x.shape[1], y.shape[1]
    p_n = x.size // (n_img * cb_n * LANES)
    c_in = cb_n * LANES
    plane = p_n * LANES
    groups = (ocb_n + GROUP - 1) // GROUP
    chunks = (p_n + chunk - 1) // chunk
    xf, yf, zf = x.reshape(-1), y.reshape(-1), z.reshape(-1)
    tasks = n_img * groups * chunks
    for part in prange(parts):
        for task in range(part * tasks // parts, (part + 1) * tasks // parts):
            n, g, t = task // (groups * chunks), task // chunks % groups, task % chunks
            nb = min(GROUP, ocb_n - g * GROUP)
            wo, bo = g * GROUP * LANES * c_in, g * GROUP * LANES
            x0, y0 = n * cb_n * plane, (n * ocb_n + g * GROUP) * plane
            p, end = t * chunk, min(p_n, (t + 1) * chunk)
            while p + PIXELS <= end:
                _tile4(xf, x0 + p * LANES, plane, cb_n, wp, wo, nb, bias, bo, yf, zf,
                       y0 + p * LANES, has_z, act, lo, hi)
                p += PIXELS
            while p < end:
                _tile1(xf, x0 + p * LANES, plane, cb_n, wp, wo, nb, bias, bo, yf, zf,
                       y0 + p * LANES, has_z, act, lo, hi)
                p += 1


@njit(**PJIT)
def depthwise3x3_nc8hw8(x, wt, bias, z, has_z, y, sh, sw, pt, pl, act, lo, hi, parts):
    """``y = act(depthwise3x3(x) + bias + z)``: ``x [N, CB, H, W, 8]``, ``y [N, CB, OH, OW,
    8]`` (z like y when ``has_z``) C-contiguous float32, ``wt [CB][9][8]`` each block's nine
    taps' weight vectors; ``sh, sw`` the strides, ``pt, pl`` the top and left padding (the
    output's size gives the rest). Tasks: (image, block, output row)."""
    n_img, cb_n, h, w = x.shape[0], x.shape[1], x.shape[2], x.shape[3]
    oh_n, ow_n = y.shape[2], y.shape[3]
    xf, yf, zf = x.reshape(-1), y.reshape(-1), z.reshape(-1)
    row = w * LANES
    tasks = n_img * cb_n * oh_n
    for part in prange(parts):
        for task in range(part * tasks // parts, (part + 1) * tasks // parts):
            nc, oh = task // oh_n, task % oh_n  # nc: image and block
            cb = nc % cb_n
            q = cb * 9 * LANES
            w0, w1, w2 = vload(wt, q), vload(wt, q + 8), vload(wt, q + 16)
            w3, w4, w5 = vload(wt, q + 24), vload(wt, q + 32), vload(wt, q + 40)
            w6, w7, w8 = vload(wt, q + 48), vload(wt, q + 56), vload(wt, q + 64)
            start = vload(bias, cb * LANES)
            xb, yo = nc * h * row, (nc * oh_n + oh) * ow_n * LANES
            ih0 = oh * sh - pt
            rows_in = ih0 >= 0 and ih0 + 3 <= h
            for ow in range(ow_n):
                iw0 = ow * sw - pl
                acc = start
                if rows_in and iw0 >= 0 and iw0 + 3 <= w:  # every tap inside: unchecked
                    i = xb + ih0 * row + iw0 * LANES
                    acc = vfma(vload(xf, i), w0, acc)
                    acc = vfma(vload(xf, i + 8), w1, acc)
                    acc = vfma(vload(xf, i + 16), w2, acc)
                    acc = vfma(vload(xf, i + row), w3, acc)
                    acc = vfma(vload(xf, i + row + 8), w4, acc)
                    acc = vfma(vload(xf, i + row + 16), w5, acc)
                    acc = vfma(vload(xf, i + 2 * row), w6, acc)
                    acc = vfma(vload(xf, i + 2 * row + 8), w7, acc)
                    acc = vfma(vload(xf, i + 2 * row + 16), w8, acc)
                else:  # the same order, the taps in the padding skipped
                    for kh in range(3):
                        ih = ih0 + kh
                        if 0 <= ih < h:
                            for kw in range(3):
                                iw = iw0 + kw
                                if 0 <= iw < w:
                                    acc = vfma(vload(xf, xb + ih * row + iw * LANES),
                                               vload(wt, q + (kh * 3 + kw) * LANES), acc)
                _finish(yf, zf, yo + ow * LANES, acc, has_z, act, lo, hi)


@njit(**PJIT)
def conv_few_oc16_nc8hw8(x, wp, bias, out, kh_n, kw_n, sh, sw, pt, pl, act, lo, hi, parts):
    """:func:`.conv_direct_few_oc16.conv_few_oc16` writing ``out [N, OC/8, OH, OW, 8]``: each
    tile's two vectors per output are the lanes of two blocks, stored as they are. Tasks:
    (image, output row, block of sixteen channels)."""
    n_img, c_in, h, w = x.shape
    ocb_n, oh_n, ow_n = out.shape[1], out.shape[2], out.shape[3]
    blocks = ocb_n // 2
    xf, of = x.reshape(-1), out.reshape(-1)
    plane = oh_n * ow_n * LANES
    jobs = n_img * oh_n * blocks
    for part in prange(parts):
        for t in range(part * jobs // parts, (part + 1) * jobs // parts):
            n, oh, b = t // (oh_n * blocks), t // blocks % oh_n, t % blocks
            base = (n * ocb_n + 2 * b) * plane + oh * ow_n * LANES
            for g in range(0, ow_n, LANES):
                ow0 = min(g, ow_n - LANES)  # the last tile overlaps the one before
                low, high = tile16(xf, wp, bias, n, c_in, h, w, kh_n, kw_n, sh, sw,
                                   oh * sh - pt, ow0 * sw - pl, b, act, lo, hi, False)
                for j in range(LANES):
                    vstore(of, base + (ow0 + j) * LANES, low[j])
                    vstore(of, base + plane + (ow0 + j) * LANES, high[j])


@njit(**PJIT)
def from_nc8hw8(x, y, parts):
    """``y [N, C, ...] = x [N, C/8, ..., 8]`` without the padding lanes (C-contiguous float32):
    eight pixels at a time transposed in registers, the last ones (fewer than eight) one by
    one. Tasks: (image, block)."""
    n_img, cb_n, c = x.shape[0], x.shape[1], y.shape[1]
    p_n = x.size // (n_img * cb_n * LANES)
    xf, yf = x.reshape(-1), y.reshape(-1)
    tasks = n_img * cb_n
    for part in prange(parts):
        for task in range(part * tasks // parts, (part + 1) * tasks // parts):
            n, cb = task // cb_n, task % cb_n
            lanes = min(LANES, c - cb * LANES)
            xo, yo = task * p_n * LANES, (n * c + cb * LANES) * p_n
            p = 0
            while p + LANES <= p_n:
                i = xo + p * LANES
                cols = vtranspose(vload(xf, i), vload(xf, i + 8), vload(xf, i + 16),
                                  vload(xf, i + 24), vload(xf, i + 32), vload(xf, i + 40),
                                  vload(xf, i + 48), vload(xf, i + 56))
                for k in range(lanes):
                    vstore(yf, yo + k * p_n + p, cols[k])
                p += LANES
            for q in range(p, p_n):
                for k in range(lanes):
                    yf[yo + k * p_n + q] = xf[xo + q * LANES + k]


# ---------------------------------------------------------------------------------------------
# where the schemes apply


def nchw_spec(spec: NodeSpec) -> NodeSpec:
    """The FusedConvNC8HW8 node as the FusedConv it stands for: X, Z and Y typed NCHW (the
    predicates and parameters of :mod:`.conv_base` read those shapes)."""
    w = spec.inputs[1]
    c = int(w.shape[1]) * int(spec.attrs.get("group", 1) or 1)
    oc = int(w.shape[0])
    x = spec.inputs[0]
    if spec.attrs.get("input_layout", "NC8HW8") != "NCHW":
        x = unblocked_type(x, c)
    rest = tuple(unblocked_type(t, oc) for t in spec.inputs[3:])
    return dataclasses.replace(spec, inputs=(x, *spec.inputs[1:3], *rest),
                               outputs=(unblocked_type(spec.outputs[0], oc),))


def _blocked_ok(spec: NodeSpec, input_layout: str) -> bool:
    """What every scheme needs: X's layout, static shapes, constant weights, whole blocks of
    output channels (and of input channels from a blocked X), an activation the loops apply, a
    CPU with AVX2 and FMA."""
    x, w, y = spec.inputs[0], spec.inputs[1], spec.outputs[0]
    if (spec.attrs.get("input_layout", "NC8HW8") != input_layout or not native()
            or x is None or w is None or y is None or 1 not in spec.constants):
        return False
    if not (x.is_static and w.is_static and y.is_static) or w.rank != 4 or y.rank != 5:
        return False
    if ACT_CODES.get(spec.attrs.get("activation", "none") or "none") not in IN_LOOPS:
        return False
    whole_in = (int(w.shape[1]) * int(spec.attrs.get("group", 1) or 1)) % LANES == 0
    return (whole_in or input_layout == "NCHW") and int(w.shape[0]) % LANES == 0


def is_1x1_nc8hw8(spec: NodeSpec) -> bool:
    """A 1x1, stride 1, unpadded, one-group convolution from an NC8HW8 input."""
    return _blocked_ok(spec, "NC8HW8") and is_1x1(nchw_spec(spec))


def is_depthwise3x3_nc8hw8(spec: NodeSpec) -> bool:
    """A 3x3 depthwise convolution (one channel a group), dilation 1, any stride and padding,
    from an NC8HW8 input."""
    if not _blocked_ok(spec, "NC8HW8"):
        return False
    plain = nchw_spec(spec)
    kh, kw, _, _, dh, dw, *_, g = conv_params(plain)
    return ((kh, kw, dh, dw) == (3, 3, 1, 1) and int(plain.inputs[1].shape[1]) == 1
            and g == int(plain.inputs[0].shape[1]) == int(plain.inputs[1].shape[0]))


def is_direct_few_oc16_nc8hw8(spec: NodeSpec) -> bool:
    """:func:`.conv_direct_few_oc16.is_direct_few_oc16`'s stems from an NCHW input, without a
    residual."""
    no_z = len(spec.inputs) < 4 or spec.inputs[3] is None
    return _blocked_ok(spec, "NCHW") and no_z and is_direct_few_oc16(nchw_spec(spec))


def _cost(factor: float):  # type: ignore[no-untyped-def]
    return lambda spec: 2 * macs(nchw_spec(spec)) * factor + 2000.0


# ---------------------------------------------------------------------------------------------
# kernels


def packed_groups(backend, spec: NodeSpec) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The 1x1 weights ``[OC, C]`` in a STATIC buffer, group by group of ``GROUP`` blocks (32
    output channels, fewer in the last group): group ``g`` at ``g * 32 * C``, laid out ``[C][8
    nb]`` -- the group's output channels of one input channel adjacent."""
    w = np.asarray(spec.constants[1], np.float32)
    oc = int(w.shape[0])
    w = w.reshape(oc, -1)
    c = int(w.shape[1])
    buf = backend.allocate(oc * c * 4, Storage.STATIC)
    wp = buf.handle[:oc * c * 4].view(np.float32)
    span = GROUP * LANES
    for g0 in range(0, oc, span):
        part = w[g0:g0 + span]
        wp[g0 * c:(g0 + part.shape[0]) * c] = part.T.reshape(-1)
    return wp


class _BlockedConv(BoundRun, ConvBase):
    """Shared by the FusedConvNC8HW8 schemes: :class:`.ConvBase`'s parameters and bias for the
    node as its NCHW FusedConv, the activation and residual in the loops."""

    def prepare(self, spec: NodeSpec) -> None:
        import numba

        self.plain = nchw_spec(spec)
        super().prepare(self.plain)
        ep = self.epilogue
        self.act, self.lo, self.hi = ep.act, ep.lo, ep.hi
        self.has_z = ep.z_input is not None
        self.parts = numba.config.NUMBA_NUM_THREADS
        self.bound = Bound()

    def residual(self, inputs, out):  # type: ignore[no-untyped-def]
        """Z as the loops read it (C-contiguous), or ``out`` standing in when there is none."""
        return np.ascontiguousarray(inputs[3]) if self.has_z else out


class Gemm1x1Blocked(_BlockedConv):
    """gemm_1x1_nc8hw8 (:func:`gemm_1x1_nc8hw8`)."""

    def prepare(self, spec: NodeSpec) -> None:
        super().prepare(spec)
        self.wp = packed_groups(self.backend, spec)
        n, ocb = int(spec.outputs[0].shape[0]), int(spec.outputs[0].shape[1])
        p = int(np.prod(spec.outputs[0].shape[2:-1]))
        tasks = n * -(-ocb // GROUP)
        chunks = max(1, -(-TASKS_PER_PART * self.parts // tasks))
        per = -(-p // chunks)  # pixels a task, rounded up to whole tiles
        self.chunk = max(PIXELS, -(-per // PIXELS) * PIXELS)

    def calls(self, inputs, out, workspace) -> tuple[Call, ...]:  # type: ignore[no-untyped-def]
        x = np.ascontiguousarray(inputs[0])
        return into_contiguous(out, lambda target: (gemm_1x1_nc8hw8, (
            x, self.wp, self.bias(inputs), self.residual(inputs, target), self.has_z, target,
            self.act, self.lo, self.hi, self.chunk, self.parts)))


class Depthwise3x3Blocked(_BlockedConv):
    """depthwise3x3_nc8hw8 (:func:`depthwise3x3_nc8hw8`); the weights ``[C, 1, 3, 3]`` packed
    once as ``[C/8][9][8]``."""

    def prepare(self, spec: NodeSpec) -> None:
        super().prepare(spec)
        w = np.asarray(spec.constants[1], np.float32)
        c = int(w.shape[0])
        buf = self.backend.allocate(c * 9 * 4, Storage.STATIC)
        self.wt = buf.handle[:c * 9 * 4].view(np.float32)
        self.wt.reshape(c // LANES, 9, LANES)[...] = w.reshape(c // LANES, LANES, 9).transpose(
            0, 2, 1)

    def calls(self, inputs, out, workspace) -> tuple[Call, ...]:  # type: ignore[no-untyped-def]
        _, _, sh, sw, _, _, pt, pl, *_ = self.params
        x = np.ascontiguousarray(inputs[0])
        return into_contiguous(out, lambda target: (depthwise3x3_nc8hw8, (
            x, self.wt, self.bias(inputs), self.residual(inputs, target), self.has_z, target,
            sh, sw, pt, pl, self.act, self.lo, self.hi, self.parts)))


class DirectFewOc16Blocked(_BlockedConv):
    """direct_few_oc16_nc8hw8 (:func:`conv_few_oc16_nc8hw8`); the weights packed as
    :func:`.conv_direct_few_oc16.packed_oc16` packs them."""

    def prepare(self, spec: NodeSpec) -> None:
        super().prepare(spec)
        self.wp = packed_oc16(self.backend, self.plain)

    def calls(self, inputs, out, workspace) -> tuple[Call, ...]:  # type: ignore[no-untyped-def]
        kh, kw, sh, sw, _, _, pt, pl, *_ = self.params
        x = np.ascontiguousarray(inputs[0])
        return into_contiguous(out, lambda target: (conv_few_oc16_nc8hw8, (
            x, self.wp, self.bias(inputs), target, kh, kw, sh, sw, pt, pl, self.act, self.lo,
            self.hi, self.parts)))


class FromBlocked(BoundRun, Kernel):
    """FromNC8HW8 by :func:`from_nc8hw8`."""

    def __init__(self, backend) -> None:  # type: ignore[no-untyped-def]
        self.backend = backend

    def prepare(self, spec: NodeSpec) -> None:
        import numba

        self.parts = numba.config.NUMBA_NUM_THREADS
        self.bound = Bound()

    def calls(self, inputs, out, workspace) -> tuple[Call, ...]:  # type: ignore[no-untyped-def]
        x = np.ascontiguousarray(inputs[0])
        return into_contiguous(out, lambda target: (from_nc8hw8, (x, target, self.parts)))


def _from_ok(spec: NodeSpec) -> bool:
    """Static shapes of rank 3 or more, a CPU with AVX2 and FMA."""
    x = spec.inputs[0]
    return native() and x is not None and x.is_static and x.rank >= 3


KERNELS = (
    KernelDef("FusedConvNC8HW8", (
        Scheme("gemm_1x1_nc8hw8", lambda b, s: Gemm1x1Blocked(b), applies=is_1x1_nc8hw8,
               cost=_cost(0.8), doc="1x1: 4 pixels x 32 channels a tile, inputs read in place"),
        Scheme("depthwise3x3_nc8hw8", lambda b, s: Depthwise3x3Blocked(b),
               applies=is_depthwise3x3_nc8hw8, cost=_cost(3.0),
               doc="3x3 depthwise: a vector of 8 channels a tap, weights in registers"),
        Scheme("direct_few_oc16_nc8hw8", lambda b, s: DirectFewOc16Blocked(b),
               applies=is_direct_few_oc16_nc8hw8, cost=_cost(0.35),
               doc="3x3 stem from NCHW: 16-channel x 8-output tiles stored as two blocks"),
    ), domain=FUSED_DOMAIN, since=1, dtypes=F32),
    KernelDef("FromNC8HW8", (
        Scheme("transpose8", lambda b, s: FromBlocked(b), applies=_from_ok,
               doc="8 pixels x 8 channels transposed in registers"),
    ), domain=FUSED_DOMAIN, since=1, dtypes=F32),
)
