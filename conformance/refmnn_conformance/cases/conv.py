"""Convolution (refmnn/ops/conv.py): 1-D, 2-D and 3-D; groups, depthwise, strides, dilations,
explicit pads and every auto_pad mode."""

from __future__ import annotations

from refmnn.errors import RefmnnError

from refmnn_conformance.case import UNIT, ErrorSample, OpCase, Sample, SampleContext
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


def conv_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((1, 3, 5, 5)), ctx.make((2, 2, 3, 3))), name="channel_mismatch"),
                      RefmnnError, r"channel|group|shape|C")


def _k(sample: Sample) -> int:
    w = sample.inputs[1]
    return max(1, prod(w.shape[1:]))


CASES = (
    OpCase("Conv", dtypes=FLOATS, samples=conv_samples, errors=conv_errors, accumulates=_k,
           tags=("accumulates",)),
)
