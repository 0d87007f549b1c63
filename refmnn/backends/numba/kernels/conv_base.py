"""What every numba Conv/FusedConv scheme shares (:mod:`.conv`, :mod:`.conv_winograd`,
:mod:`.conv_depthwise3x3`): the geometry of a node, the predicates that say where a scheme
applies, :class:`ConvBase` (parameters, bias, epilogue) and the direct loops (``direct``'s, and
Winograd's where its transforms cannot be exact)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, NodeSpec, Storage
from refmnn.backends.numba.kernels._common import PJIT, window_params
from refmnn.backends.numba.kernels.fused import NONE, Epilogue

GEMM_CALL = 2e5  # per sgemm call (and its packing launch), in flop units (~4 us at 50 GFLOP/s)
# Per inner loop that the direct and depthwise schemes start (a row copy, a tap's row update),
# in the same units: its setup and LLVM's scalar remainder, which on MobileNet's 7..56-element
# rows cost as much as the vectorised part or more. Fitted to depthwise3x3 at 2 threads: 960 @ 7
# (13k row loops) 116 us and 32 @ 112 (7k) 143 us give ~8 ns a loop, ~800 units.
LOOP = 800.0
# OpenBLAS's sgemm (its AVX-512 kernels) computes a row-major product a block of 16 output
# columns at a time, so a product with ``n`` columns costs about as much as one with ``n``
# rounded up to 16: [512, 4608] @ [4608, 49] (ResNet-18's last 3x3 layers as im2col_gemm) took
# 1.66 ms on 2 threads, 140 GFLOP/s counted on 49 columns and 183 (the ceiling) on 64. Without
# the rounding the costs tied im2col_gemm with winograd_f23 on those layers (whose products
# have 16 columns) and chose im2col_gemm; in the model, 2 threads, interleaved, each layer took
# 2.05-2.13 ms as im2col_gemm and 1.36-1.43 ms as winograd_f23 (ResNet-18 21.56 -> 18.04 ms).
GEMM_COLUMNS = 16
# Per element of the weights-side operand that an sgemm packs on every call (OpenBLAS packs
# both operands each time; in im2col_gemm, im2col_s2 and the sgemm Winograd products the
# weights' side is the large one, and the a*a products of F(a-2, 3) pack a*a times as many
# elements as the weights have). Measured on ResNet-18's 3x3 layers, kernels alone, 2 threads,
# the least of 4 medians of 10 calls alternating (us, im2col_gemm / winograd_f23 /
# winograd_f43): 256 @ 14x14 2302 / 1167 / 1654, 512 @ 7x7 3365 / 3440 / 5403. Without this
# term the costs chose winograd_f43 at 256 @ 14x14 (36 products of 16 columns, each packing a
# 256 x 256 matrix); with it, winograd_f23, and at 512 @ 7x7 still winograd_f23 (faster in the
# model: see above). Whole model, 2 threads, alternating processes: ResNet-18 33.43 / 36.19 ->
# 32.86 / 34.15 ms (medians of two runs of 50). The value lies in the range (30..53) that
# orders both layers so; every other choice in the zoo stayed as it was. gemm_1x1 counts it too
# (its sgemm packs the OC x C weights on every call, where gemm_1x1_simd packs them once): with
# gemm_1x1_simd priced at 1.1 x its MACs for many channels, that makes the scheme the cheaper
# one on planes of at most 192 pixels (0.2 * P < GEMM_PACK) -- the 7x7 and 13x13 1x1 layers of
# the zoo (MobileNetV2's 8, SqueezeNet's expand1x1 and final conv, MobileNet-v1's 2). In the
# model, 2 threads, one process, the two plans interleaved, 30 runs, a loaded machine: those
# nodes took 2251 -> 2002 us in MobileNetV2 (the 960 -> 160 projections 5-10% slower, the rest
# 0-25% faster) and 3127 -> 2747 us in SqueezeNet (its final conv 2515 -> 2173). (Since then
# gemm_1x1_simd is priced at 0.95 x its MACs and is the cheaper one at every size: see
# conv_1x1_simd's docstring.)
GEMM_PACK = 40.0


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


def gemm_columns(n: int) -> int:
    """``n`` rounded up to a multiple of ``GEMM_COLUMNS``: the columns an sgemm's time is
    made of."""
    return -(-n // GEMM_COLUMNS) * GEMM_COLUMNS


def gemm_macs(spec: NodeSpec) -> float:
    """:func:`macs` as the sgemms of im2col_gemm and gemm_1x1 compute them, on their columns
    (the ``OH * OW`` outputs of an image) rounded up by :func:`gemm_columns`."""
    oh, ow = (int(d) for d in spec.outputs[0].shape[2:])
    return macs(spec) * gemm_columns(oh * ow) / max(oh * ow, 1)


def weights_packing(spec: NodeSpec) -> float:
    """``GEMM_PACK`` per element of the weights ``[OC, C/g, KH, KW]``, per image: what the sgemm
    of a scheme whose weights are its packed operand (im2col_gemm, im2col_s2, gemm_1x1) spends
    packing them on every call."""
    n = int(spec.inputs[0].shape[0])
    oc, cg, kh, kw = (int(d) for d in spec.inputs[1].shape)
    return GEMM_PACK * n * oc * cg * kh * kw


def is_2d(spec: NodeSpec) -> bool:
    x, w = spec.inputs[0], spec.inputs[1]
    return x is not None and w is not None and x.rank == 4 and w.rank == 4


def is_1x1(spec: NodeSpec) -> bool:
    if not is_2d(spec):
        return False
    kh, kw, sh, sw, _, _, pt, pl, pb, pr, g = conv_params(spec)
    return (kh, kw, sh, sw, pt, pl, pb, pr, g) == (1, 1, 1, 1, 0, 0, 0, 0, 1)


def skips_padding_exactly(spec: NodeSpec) -> bool:
    """Whether a scheme that skips the taps in the padding (``direct``, ``depthwise``, and the
    edge columns of ``depthwise3x3_same`` and ``depthwise3x3_s2_simd``) gives the reference's
    sums: the convolution has no padding, or its weights are a constant and all finite. What
    such a scheme leaves out is weight * 0, which is 0 for a finite weight but NaN for an
    infinite or NaN one (the reference pads with zeros and multiplies). Found by running every
    scheme with such weights: those four gave numbers where the reference has NaN; im2col_gemm
    and the schemes that copy the input into a zero-padded plane were right, and they run where
    these decline (also when the weights only arrive at run time and the convolution pads)."""
    return not any(conv_params(spec)[6:10]) or finite_constant_weights(spec)


def finite_constant_weights(spec: NodeSpec) -> bool:
    """The weights (input 1) are a constant with every element finite."""
    return 1 in spec.constants and bool(np.isfinite(np.asarray(spec.constants[1])).all())


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

    def activation_in_loops(self) -> int:
        """For a scheme whose loops add the bias and activate: the activation code those loops
        apply -- none when a FusedConv residual must be added first, which the epilogue pass
        then does, activating after it; the epilogue pass runs only in that case."""
        ep = self.epilogue
        ep.active = ep.z_input is not None
        return NONE if ep.active else ep.act


# ---------------------------------------------------------------------------------------------
# direct loops


@njit(**PJIT)
def conv_direct(x, w, bias, out, sh, sw, dh, dw, pt, pl, group):
    """out = bias + the sum of each window's taps that fall inside the input, a prange over
    (image, output channel), one weight times a row of inputs at a time. Taps in the padding
    add nothing -- not the weight times zero, which the reference's padded product is: exact
    for finite weights only (with an infinite or NaN weight the reference has NaN where a
    window overlaps the padding), so the schemes that call it where the convolution pads apply
    only to finite constant weights (:func:`skips_padding_exactly`, :func:`winograd_applies`)."""
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
