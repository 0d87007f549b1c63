"""Convolution (refmnn/ops/conv.py): 1-D, 2-D and 3-D; groups, depthwise, strides, dilations,
explicit pads and every auto_pad mode."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import RefmnnError

from refmnn_conformance.case import UNIT, ErrorSample, OpCase, Sample, SampleContext, Tol
from refmnn_conformance.cases._common import FLOATS, prod

# name, X shape, W shape, attributes, with bias
CONVS = (
    ("1d", (1, 2, 9), (3, 2, 3), {}, True),
    ("2d", (2, 3, 7, 6), (4, 3, 3, 3), {}, True),
    ("3d", (1, 2, 5, 4, 6), (3, 2, 2, 3, 2), {}, True),
    ("no_bias", (1, 3, 6, 6), (2, 3, 3, 3), {}, False),
    ("pointwise", (2, 8, 5, 5), (4, 8, 1, 1), {}, True),
    ("strides", (1, 2, 9, 8), (3, 2, 3, 3), {"strides": (2, 3)}, True),
    ("dilations", (1, 2, 9, 9), (2, 2, 3, 3), {"dilations": (2, 3)}, True),
    ("pads", (1, 2, 5, 5), (3, 2, 3, 3), {"pads": (1, 0, 2, 1)}, True),
    ("groups", (1, 4, 6, 6), (6, 2, 3, 3), {"group": 2}, True),
    ("depthwise", (2, 6, 7, 7), (6, 1, 3, 3), {"group": 6, "pads": (1, 1, 1, 1)}, True),
    ("depthwise_multiplier", (1, 3, 6, 6), (6, 1, 3, 3), {"group": 3}, True),
    ("same_upper", (1, 2, 7, 8), (3, 2, 4, 3), {"auto_pad": "SAME_UPPER", "strides": (2, 2)}, True),
    ("same_lower", (1, 2, 7, 8), (3, 2, 4, 3), {"auto_pad": "SAME_LOWER", "strides": (2, 2)}, True),
    ("valid", (1, 2, 7, 8), (3, 2, 3, 3), {"auto_pad": "VALID"}, True),
    ("kernel_shape_given", (1, 2, 6, 6), (2, 2, 3, 3), {"kernel_shape": (3, 3)}, True),
    ("everything", (2, 4, 11, 10), (6, 2, 3, 2),
     {"group": 2, "strides": (2, 1), "dilations": (1, 2), "pads": (1, 2, 0, 1)}, True),
    ("wide_channels", (1, 64, 6, 6), (8, 64, 3, 3), {}, True),
    ("empty_batch", (0, 2, 5, 5), (3, 2, 3, 3), {}, True),
)


def conv_samples(ctx: SampleContext):
    for name, xs, ws, attrs, bias in CONVS:
        inputs = [ctx.make(xs, UNIT), ctx.make(ws, UNIT)]
        if bias:
            inputs.append(ctx.make((ws[0],), UNIT))
        yield Sample(tuple(inputs), attrs, name=name)
    yield Sample((ctx.noncontiguous(ctx.make((1, 2, 5, 6), UNIT)), ctx.make((2, 2, 3, 3), UNIT)),
                 name="noncontiguous")
    # +inf, NaN and -inf as the first tap of three filters, whose windows reach the padding:
    # the padded zeros times them are NaN there (a kernel that skips the padding taps gives
    # numbers, as numba's direct loops and OpenCL's direct and depthwise kernels did)
    for name, xs, ws, attrs in (("nonfinite_weights_padded", (1, 2, 5, 6), (3, 2, 3, 3),
                                 {"pads": (1, 1, 1, 1)}),
                                ("depthwise_nonfinite_weights_padded", (1, 3, 6, 5), (3, 1, 3, 3),
                                 {"group": 3, "pads": (1, 1, 1, 1)})):
        w = ctx.make(ws, UNIT)
        w[:, :, 0, 0] = np.array([[np.inf], [np.nan], [-np.inf]]).astype(w.dtype)
        yield Sample((ctx.make(xs, UNIT), w, ctx.make((ws[0],), UNIT)), attrs, name=name)


def conv_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((1, 3, 5, 5)), ctx.make((2, 2, 3, 3))), name="channel_mismatch"),
                      RefmnnError, r"channel|group|shape|C")


def _k(sample: Sample) -> int:
    w = sample.inputs[1]
    return max(1, prod(w.shape[1:]))


CASES = (
    OpCase("Conv", dtypes=FLOATS, samples=conv_samples, errors=conv_errors, accumulates=_k,
           tags=("accumulates",)),
    # the weights and bias as initializers, as a model's are: what numba's schemes for
    # constant weights (packed once, when planning: gemm_1x1_simd, direct*_few_simd...) run on
    OpCase("Conv", dtypes=(DType.float32,), samples=conv_samples, accumulates=_k,
           tags=("accumulates",), variant="constant_weights", constants=(1, 2)),
)


# ---------------------------------------------------------------------------------------------
# ConvTranspose, Col2Im, DeformConv (ConvInteger and QLinearConv are in quant.py)

CONV_TRANSPOSES = (
    ("1d", (1, 2, 5), (2, 3, 3), {}),
    ("2d", (2, 3, 4, 5), (3, 2, 3, 3), {}),
    ("strides_output_padding", (1, 2, 4, 4), (2, 3, 3, 3), {"strides": (2, 2),
                                                           "output_padding": (1, 0)}),
    ("pads_dilations", (1, 2, 5, 5), (2, 2, 3, 2), {"pads": (1, 0, 1, 1), "dilations": (2, 1)}),
    ("groups", (1, 4, 3, 3), (4, 1, 3, 3), {"group": 2}),
    ("output_shape", (1, 2, 3, 3), (2, 2, 3, 3), {"strides": (2, 2), "output_shape": (8, 7)}),
    ("same_upper", (1, 2, 3, 4), (2, 2, 3, 3), {"strides": (2, 2), "auto_pad": "SAME_UPPER"}),
    ("3d", (1, 2, 3, 3, 2), (2, 2, 2, 2, 2), {"strides": (1, 2, 1)}),
    ("empty_batch", (0, 2, 3, 4), (2, 3, 2, 2), {"strides": (2, 2)}),
)


def conv_transpose_samples(ctx: SampleContext):
    for name, xs, ws, attrs in CONV_TRANSPOSES:
        yield Sample((ctx.make(xs, UNIT), ctx.make(ws, UNIT), ctx.make((ws[1] * attrs.get("group", 1),),
                                                                       UNIT)), attrs, name=name)
    yield Sample((ctx.make((1, 2, 4, 4), UNIT), ctx.make((2, 3, 2, 2), UNIT)), name="no_bias")


def col2im_samples(ctx: SampleContext):
    i64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
    yield Sample((ctx.make((1, 2 * 4, 9)), i64(4, 4), i64(2, 2)), name="basic")
    yield Sample((ctx.make((2, 3 * 4, 9)), i64(5, 5), i64(2, 2)),
                 {"pads": (1, 1, 1, 1), "strides": (2, 2)}, name="pads_strides")
    yield Sample((ctx.make((1, 4, 4)), i64(5, 6), i64(2, 2)), {"dilations": (2, 2),
                                                              "strides": (3, 1)}, name="dilations")


def deform_conv_samples(ctx: SampleContext):
    x, w = ctx.make((1, 2, 5, 5), UNIT), ctx.make((3, 2, 2, 2), UNIT)
    offset = ctx.make((1, 2 * 4, 4, 4), UNIT)
    yield Sample((x, w, offset), name="basic")
    yield Sample((x, w, offset, ctx.make((3,), UNIT), ctx.make((1, 4, 4, 4), UNIT)),
                 name="bias_and_mask")
    yield Sample((ctx.make((1, 4, 5, 5), UNIT), ctx.make((2, 2, 2, 2), UNIT),
                  ctx.make((1, 2 * 2 * 4, 2, 2), UNIT) * ctx.scalar(2.0)),
                 {"group": 2, "offset_group": 2, "strides": (2, 2), "pads": (0, 0, 1, 1)},
                 name="groups_offset_groups")
    yield Sample((ctx.make((0, 2, 5, 5), UNIT), w, ctx.make((0, 2 * 4, 4, 4), UNIT)),
                 name="empty_batch")


def _ct_k(sample: Sample) -> int:
    w = sample.inputs[1]
    return max(1, w.shape[0] * prod(w.shape[2:]))


_CT_TOL = {DType.float16: Tol(2e-3, 1e-4, "a scatter-add of products; results near zero need an "
                                          "absolute floor")}
CASES = CASES + (
    OpCase("ConvTranspose", dtypes=FLOATS, samples=conv_transpose_samples, accumulates=_ct_k,
           tolerance=_CT_TOL, tags=("accumulates",)),
    OpCase("Col2Im", dtypes=(DType.float32, DType.float16, DType.float64), samples=col2im_samples,
           accumulates=lambda s: 4, tags=("accumulates",)),
    OpCase("DeformConv", dtypes=(DType.float32, DType.float64), samples=deform_conv_samples,
           accumulates=lambda s: prod(s.inputs[1].shape[1:]) * 4, tags=("accumulates",)),
)
