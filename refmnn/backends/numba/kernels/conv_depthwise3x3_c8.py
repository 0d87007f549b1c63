"""``depthwise3x3_c8`` -- depthwise 3x3 (dilation 1, stride 1 or 2, any padding) with eight
*channels* in a vector's lanes, on a CPU with AVX2 and FMA (:mod:`.simd`); channel multiplier 1,
channels a multiple of 8, planes of at least eight pixels in and out. See :mod:`.conv` for the
notation and :mod:`.conv_depthwise3x3` for the schemes that vectorise along a row.

Those schemes put eight (or LLVM's sixteen) outputs of one row in a vector. On MobileNet's
small planes the rows are short: 7 or 14 outputs, so much of the work runs in scalar loop
remainders, ends of rows and per-plane set-up, and 960 @ 7 x 7 took as long as 960 @ 14 x 14
(the taps themselves were not where the time went: see ``depthwise3x3_same``'s dropped
explicit-vector variant). Here a vector holds one pixel of eight channels, as in the packed
NC8HW8 layouts of onnxruntime's and MNN's depthwise kernels -- but the tensors stay NCHW: each
block of eight channels is transposed into that layout and back inside the kernel, eight
pixels at a time (:func:`.simd.vtranspose`, an 8 x 8 transpose in registers):

1. **In**: the block's eight planes, read eight pixels of each at a time, transposed into
   eight pixel vectors and stored into a zero-padded ``[Hp][Wp][8]`` buffer at positions
   read from a per-layer table (``ipos``: pixel -> padded position, made in ``prepare``; the
   pixels that no output reads go to a junk slot). The padding is zeroed once per call; every
   block overwrites only the interior. A plane whose size is not a multiple of 8 ends with
   an overlapping group (its last eight pixels), which stores some vectors twice.
2. **Taps**: an output pixel is nine FMAs of unit-stride vector loads from the buffer with the
   block's nine weight vectors (transposed from the weights, ``[C][9]``, in the same way) and
   the bias as the start: no bounds tests, no junk columns, any stride and padding alike (the
   table ``opos`` holds each output's top-left tap position).
3. **Out**: eight output pixels (eight vectors of eight channels) are activated in registers
   (Relu, Clip; another activation in a pass over the block's planes), transposed into eight
   channels' runs of eight pixels and stored into the output planes, the last group
   overlapping as in 1.

The transposes cost about as much as the taps at stride 1, so on large planes, where the
row-vector schemes run their vectors full, this one loses; at stride 2 it computes a quarter
of the outputs per input pixel transposed and wins further. Kernels alone, 2 threads, bias +
Clip, hot caches, median us of 10 x 40 calls alternating (``depthwise3x3_same`` /
``depthwise3x3_s2_simd`` / this scheme; an AVX2 EPYC, Zen 3, loaded shared VM):

    ==============  =====================  ============================================
    layer           same / s2_simd / c8    chosen by the costs
    ==============  =====================  ============================================
    960 @ 7, s1     93.8 / - / 38.1        c8 (MobileNetV2's last three blocks; 47.5 /
                                           31.7 in a second run)
    576 @ 14, s1    65.9 / - / 69.2        c8 (a tie)
    384 @ 14, s1    50.4 / - / 46.7        c8
    192 @ 28, s1    72.1 / - / 82.7        same
    144 @ 56, s1    181.5 / - / 205.3      same
    32 @ 112, s1    187.2 / - / 218.3      same
    576 @ 14, s2    120.2 / - / 38.7       c8 (14 columns: too narrow for s2_simd)
    192 @ 28, s2    90.4 / 58.9 / 43.3     c8
    144 @ 56, s2    276.3 / 134.3 / 118.9  c8 (116.2 / 97.9 in a second run)
    96 @ 112, s2    518.3 / 309.2 / 241.5  s2_simd (three more runs: 376 / 362, 372 /
                                           383, 364 / 348; in MobileNetV2, where its
                                           input comes from L3, 344 / 425)
    ==============  =====================  ============================================

In MobileNetV2 the costs give it 12 of the 17 depthwise layers; sessions with and without the
scheme, alternating in one process, 2 threads: those layers 863 -> 702 us and 1227 -> 969 us
(per-node medians), the model 0.977 and 0.983x (a third round 1.008x, noise); MobileNet-v1
0.994x; outputs within 3.2e-7 of the reference.

Cost (:func:`depthwise3x3_c8_cost`), fitted to that table: per block of eight channels, 600
per group of eight pixels transposed (in and out), 56 per output pixel's nine vector FMAs and
700 to start the block.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import NodeSpec, Storage
from refmnn.backends.numba.kernels._common import JIT, PJIT, renamed
from refmnn.backends.numba.kernels.conv_base import conv_params, is_depthwise_3x3
from refmnn.backends.numba.kernels.conv_depthwise3x3 import Depthwise3x3Conv
from refmnn.backends.numba.kernels.fused import CLIP, NONE, RELU, activate_row
from refmnn.backends.numba.kernels.gemm_simd import activate8
from refmnn.backends.numba.kernels.simd import LANES, native, vfma, vload, vstore, vtranspose

GROUP_COST = 600.0  # a group of eight pixels of a block transposed (in or out)
PIXEL_COST = 56.0  # an output pixel of a block: nine vector FMAs
BLOCK_COST = 700.0  # starting a block (its weights transposed, the loops set up)


def is_depthwise3x3_c8(spec: NodeSpec) -> bool:
    """Depthwise 3x3 (dilation 1, stride 1 or 2) with one output channel per input channel,
    a multiple of 8 of them, at least eight pixels per input and output plane, on a CPU with
    AVX2 and FMA (:func:`.simd.native`)."""
    if not (is_depthwise_3x3(spec) and native()):
        return False
    _, c, h, w = (int(d) for d in spec.inputs[0].shape)
    oh, ow = (int(d) for d in spec.outputs[0].shape[2:])
    return (int(spec.inputs[1].shape[0]) == c and c % LANES == 0 and h * w >= LANES
            and oh * ow >= LANES)


def depthwise3x3_c8_cost(spec: NodeSpec) -> float:
    n, c, h, w = (int(d) for d in spec.inputs[0].shape)
    oh, ow = (int(d) for d in spec.outputs[0].shape[2:])
    groups = -(-h * w // LANES) + -(-oh * ow // LANES)
    return n * c / LANES * (GROUP_COST * groups + PIXEL_COST * oh * ow + BLOCK_COST) + 2000.0


def c8_tables(h: int, w: int, oh: int, ow: int, s: int, pt: int, pl: int
              ) -> tuple[np.ndarray, np.ndarray, int, int]:
    """``(ipos, opos, pitch, size)`` of the padded block buffer ``[Hp][Wp][8]`` that the
    taps of an ``oh x ow`` output at stride ``s`` read: ``ipos[h * W + w]`` the buffer position
    of input pixel ``(h, w)`` (``pt`` rows and ``pl`` columns of padding before it; a junk slot
    after the buffer for pixels that no output reads), ``opos[oh * OW + ow]`` the position of
    output ``(oh, ow)``'s top-left tap, ``pitch`` the floats of a buffer row (``Wp * 8``) and
    ``size`` the buffer's floats with the junk slot."""
    hp, wp = (oh - 1) * s + 3, (ow - 1) * s + 3
    junk = hp * wp * LANES
    row, col = np.divmod(np.arange(h * w), w)
    row, col = row + pt, col + pl
    ipos = np.where((row < hp) & (col < wp), (row * wp + col) * LANES, junk)
    out_row, out_col = np.divmod(np.arange(oh * ow), ow)
    opos = (out_row * s * wp + out_col * s) * LANES
    return ipos.astype(np.int32), opos.astype(np.int32), wp * LANES, junk + LANES


@njit(inline="always", **JIT)
def _pixel(buf, i, pitch, k, last, bias, act, lo, hi):
    """``act(bias + the nine taps)`` of the output whose top-left tap is at ``buf[i]``: ``k``
    the block's weight vectors of taps 0..7, ``last`` that of tap 8 (:func:`.gemm_simd.activate8`:
    Relu, Clip or none)."""
    a = vfma(vload(buf, i), k[0], bias)
    a = vfma(vload(buf, i + LANES), k[1], a)
    a = vfma(vload(buf, i + 2 * LANES), k[2], a)
    a = vfma(vload(buf, i + pitch), k[3], a)
    a = vfma(vload(buf, i + pitch + LANES), k[4], a)
    a = vfma(vload(buf, i + pitch + 2 * LANES), k[5], a)
    a = vfma(vload(buf, i + 2 * pitch), k[6], a)
    a = vfma(vload(buf, i + 2 * pitch + LANES), k[7], a)
    return activate8(vfma(vload(buf, i + 2 * pitch + 2 * LANES), last, a), act, lo, hi)


def _depthwise3x3_c8(x, w, bias, out, ipos, opos, pitch, act, alpha, lo, hi, scratch, parts):
    """3x3 depthwise, eight channels a vector (see the module docstring): ``w`` the weights
    ``[C, 1, 3, 3]``, ``bias [C]``, C-contiguous, ``ipos``, ``opos`` and ``pitch`` from
    :func:`c8_tables`. ``parts`` workers (``prange``), each over a contiguous run of the
    (n, block of eight channels) pairs -- which are the runs of eight planes of x and out, as
    C is a multiple of 8 -- with its own padded buffer ``scratch[part]``."""
    hw = x.shape[2] * x.shape[3]
    ohw = out.shape[2] * out.shape[3]
    channels = x.shape[1]
    jobs = x.shape[0] * channels // LANES
    xf, of, wf = x.reshape(x.size), out.reshape(out.size), w.reshape(w.size)
    vact = act if act == RELU or act == CLIP else NONE  # the one in registers
    for part in prange(parts):
        buf = scratch[part]
        buf[:] = 0
        for t in range(part * jobs // parts, (part + 1) * jobs // parts):
            src, dst = t * LANES * hw, t * LANES * ohw  # the block's first planes in x, out
            q = 0
            while q < hw:  # in: eight pixels of the eight planes at a time
                q = min(q, hw - LANES)  # the last group overlaps the one before
                p = vtranspose(vload(xf, src + q), vload(xf, src + hw + q),
                               vload(xf, src + 2 * hw + q), vload(xf, src + 3 * hw + q),
                               vload(xf, src + 4 * hw + q), vload(xf, src + 5 * hw + q),
                               vload(xf, src + 6 * hw + q), vload(xf, src + 7 * hw + q))
                vstore(buf, ipos[q], p[0])
                vstore(buf, ipos[q + 1], p[1])
                vstore(buf, ipos[q + 2], p[2])
                vstore(buf, ipos[q + 3], p[3])
                vstore(buf, ipos[q + 4], p[4])
                vstore(buf, ipos[q + 5], p[5])
                vstore(buf, ipos[q + 6], p[6])
                vstore(buf, ipos[q + 7], p[7])
                q += LANES
            # the weights: channel c's taps 0..7 at wf[9c], taps 1..8 at wf[9c + 1]
            c9 = (t * LANES) % channels * 9
            k = vtranspose(vload(wf, c9), vload(wf, c9 + 9), vload(wf, c9 + 18),
                           vload(wf, c9 + 27), vload(wf, c9 + 36), vload(wf, c9 + 45),
                           vload(wf, c9 + 54), vload(wf, c9 + 63))
            last = vtranspose(vload(wf, c9 + 1), vload(wf, c9 + 10), vload(wf, c9 + 19),
                              vload(wf, c9 + 28), vload(wf, c9 + 37), vload(wf, c9 + 46),
                              vload(wf, c9 + 55), vload(wf, c9 + 64))[7]
            b = vload(bias, (t * LANES) % channels)
            q = 0
            while q < ohw:  # out: eight output pixels at a time
                q = min(q, ohw - LANES)
                y = vtranspose(_pixel(buf, opos[q], pitch, k, last, b, vact, lo, hi),
                               _pixel(buf, opos[q + 1], pitch, k, last, b, vact, lo, hi),
                               _pixel(buf, opos[q + 2], pitch, k, last, b, vact, lo, hi),
                               _pixel(buf, opos[q + 3], pitch, k, last, b, vact, lo, hi),
                               _pixel(buf, opos[q + 4], pitch, k, last, b, vact, lo, hi),
                               _pixel(buf, opos[q + 5], pitch, k, last, b, vact, lo, hi),
                               _pixel(buf, opos[q + 6], pitch, k, last, b, vact, lo, hi),
                               _pixel(buf, opos[q + 7], pitch, k, last, b, vact, lo, hi))
                vstore(of, dst + q, y[0])
                vstore(of, dst + ohw + q, y[1])
                vstore(of, dst + 2 * ohw + q, y[2])
                vstore(of, dst + 3 * ohw + q, y[3])
                vstore(of, dst + 4 * ohw + q, y[4])
                vstore(of, dst + 5 * ohw + q, y[5])
                vstore(of, dst + 6 * ohw + q, y[6])
                vstore(of, dst + 7 * ohw + q, y[7])
                q += LANES
            if vact != act:
                activate_row(of[dst:dst + LANES * ohw], act, alpha, lo, hi)


conv_depthwise3x3_c8 = njit(**PJIT)(_depthwise3x3_c8)
# the same loops, one thread, no launch (its own name: see _common.renamed)
conv_depthwise3x3_c8_serial = njit(**JIT)(renamed(_depthwise3x3_c8, "_serial"))


class Depthwise3x3C8Conv(Depthwise3x3Conv):
    """depthwise3x3_c8: Depthwise3x3Conv's activation, epilogue, threading and ``run``; its own
    buffer, position tables (STATIC, made in ``prepare``), loops and their arguments."""

    def scratch_per_part(self, spec: NodeSpec) -> int:
        return self.size  # the padded block buffer's, from the tables made in prepare

    def prepare(self, spec: NodeSpec) -> None:
        _, _, h, w = (int(d) for d in spec.inputs[0].shape)
        oh, ow = (int(d) for d in spec.outputs[0].shape[2:])
        _, _, s, _, _, _, pt, pl, _, _, _ = conv_params(spec)
        ipos, opos, self.pitch, self.size = c8_tables(h, w, oh, ow, s, pt, pl)
        super().prepare(spec)  # sizes the workspace by scratch_per_part
        buf = self.backend.allocate(4 * (ipos.size + opos.size), Storage.STATIC)
        tables = buf.handle[:4 * (ipos.size + opos.size)].view(np.int32)
        tables[:ipos.size], tables[ipos.size:] = ipos, opos
        self.ipos, self.opos = tables[:ipos.size], tables[ipos.size:]

    def arguments(self, inputs, out, scratch) -> tuple:  # type: ignore[no-untyped-def]
        """The loops' arguments (see :func:`_depthwise3x3_c8`)."""
        ep = self.epilogue
        return (inputs[0], inputs[1], self.bias(inputs), out, self.ipos, self.opos, self.pitch,
                self.act, ep.alpha, ep.lo, ep.hi, scratch, self.parts)

    loops = (conv_depthwise3x3_c8, conv_depthwise3x3_c8_serial)
