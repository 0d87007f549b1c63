"""refmnn's channel-blocked ops (refmnn/ops/blocked.py): FusedConvNC8HW8 and FromNC8HW8.

The layout pass creates them for a backend that declares them (numba), so a backend that does
is checked here like any op: the 1x1 tiles with whole and partial groups of output blocks and a
task's last pixels, depthwise strides and paddings, the stem from NCHW, a blocked residual, and
what the kernels do not take (channels that are not whole blocks), which falls back.
"""

from __future__ import annotations

import numpy as np

from refmnn.errors import RefmnnError
from refmnn.ops.blocked import to_nc8hw8

from refmnn_conformance.case import UNIT, ErrorSample, OpCase, Sample, SampleContext
from refmnn_conformance.cases._common import FLOATS
from refmnn_conformance.cases.fused import DOMAIN, NARROW, _conv_k

RELU6 = {"activation": "clip", "activation_min": 0.0, "activation_max": 6.0}


def _blocked(ctx: SampleContext, shape: tuple[int, ...]) -> np.ndarray:
    """An NC8HW8 tensor holding an NCHW one of ``shape`` (the padding lanes zero)."""
    return to_nc8hw8(ctx.make(shape, UNIT))


def fused_conv_nc8hw8_samples(ctx: SampleContext):
    x = _blocked(ctx, (2, 16, 5, 6))
    yield Sample((x, ctx.make((24, 16, 1, 1), UNIT), ctx.make((24,), UNIT)),
                 {"activation": "relu"}, name="pointwise_three_blocks")
    yield Sample((x, ctx.make((40, 16, 1, 1), UNIT), ctx.make((40,), UNIT),
                  _blocked(ctx, (2, 40, 5, 6))), RELU6, name="pointwise_residual_five_blocks")
    yield Sample((_blocked(ctx, (1, 8, 3, 3)), ctx.make((8, 8, 1, 1), UNIT)),
                 name="pointwise_one_block_no_bias")
    yield Sample((_blocked(ctx, (1, 32, 7, 7)), ctx.make((64, 32, 1, 1), UNIT),
                  ctx.make((64,), UNIT)), {"activation": "clip", "activation_min": -0.5,
                                           "activation_max": 0.25}, name="pointwise_clip")
    dw = _blocked(ctx, (1, 16, 7, 9))
    yield Sample((dw, ctx.make((16, 1, 3, 3), UNIT), ctx.make((16,), UNIT)),
                 {"group": 16, "pads": (1, 1, 1, 1), **RELU6}, name="depthwise_relu6")
    yield Sample((_blocked(ctx, (2, 8, 9, 8)), ctx.make((8, 1, 3, 3), UNIT), ctx.make((8,), UNIT),
                  _blocked(ctx, (2, 8, 5, 4))),
                 {"group": 8, "pads": (1, 1, 1, 1), "strides": (2, 2), "activation": "relu"},
                 name="depthwise_stride2_residual")
    yield Sample((dw, ctx.make((16, 1, 3, 3), UNIT)),
                 {"group": 16, "pads": (0, 1, 2, 1), "strides": (1, 2)},
                 name="depthwise_uneven_pads")
    yield Sample((_blocked(ctx, (1, 8, 1, 2)), ctx.make((8, 1, 3, 3), UNIT)),
                 {"group": 8, "pads": (1, 1, 1, 1)}, name="depthwise_tiny_plane")
    yield Sample((ctx.make((1, 3, 20, 20), UNIT), ctx.make((16, 3, 3, 3), UNIT),
                  ctx.make((16,), UNIT)),
                 {"strides": (2, 2), "pads": (1, 1, 1, 1), "input_layout": "NCHW", **RELU6},
                 name="stem_from_nchw")
    yield Sample((ctx.make((2, 3, 9, 12), UNIT), ctx.make((32, 3, 3, 3), UNIT)),
                 {"pads": (1, 1, 1, 1), "input_layout": "NCHW"}, name="stem_stride1")
    # what the kernels above do not take: partial blocks, a dense 3x3, another activation
    yield Sample((_blocked(ctx, (1, 11, 6, 5)), ctx.make((5, 11, 3, 3), UNIT),
                  ctx.make((5,), UNIT)), {"pads": (1, 1, 1, 1), "activation": "sigmoid"},
                 name="partial_blocks_dense_sigmoid")


def fused_conv_nc8hw8_errors(ctx: SampleContext):
    w = ctx.make((8, 8, 1, 1))
    yield ErrorSample(Sample((ctx.make((1, 1, 4, 4, 4)), w), name="not_blocked"),
                      RefmnnError, r"NC8HW8")
    yield ErrorSample(Sample((_blocked(ctx, (1, 16, 4, 4)), w), name="block_count"),
                      RefmnnError, r"blocks|channel")
    yield ErrorSample(Sample((_blocked(ctx, (1, 8, 4, 4)), w, None, _blocked(ctx, (1, 8, 2, 2))),
                             name="residual_mismatch"), RefmnnError, r"residual|shape")
    yield ErrorSample(Sample((_blocked(ctx, (1, 8, 4, 4)), w), {"input_layout": "NHWC"},
                             name="unknown_layout"), RefmnnError, r"input_layout")


def from_nc8hw8_samples(ctx: SampleContext):
    yield Sample((_blocked(ctx, (2, 20, 5, 7)),), {"channels": 20}, name="partial_block")
    yield Sample((_blocked(ctx, (1, 8, 9, 9)),), {"channels": 8}, name="one_block_odd_plane")
    yield Sample((_blocked(ctx, (1, 16, 24)),), {"channels": 16}, name="one_spatial_axis")
    yield Sample((_blocked(ctx, (1, 32, 2, 2, 2)),), {"channels": 32}, name="three_spatial_axes")


def from_nc8hw8_errors(ctx: SampleContext):
    yield ErrorSample(Sample((_blocked(ctx, (1, 24, 3, 3)),), {"channels": 30},
                             name="too_many_channels"), RefmnnError, r"blocks|channel")
    yield ErrorSample(Sample((ctx.make((1, 2, 3, 4)),), {"channels": 8}, name="not_blocked"),
                      RefmnnError, r"NC8HW8")


CASES = (
    OpCase("FusedConvNC8HW8", domain=DOMAIN, opset=1, dtypes=FLOATS,
           samples=fused_conv_nc8hw8_samples, errors=fused_conv_nc8hw8_errors,
           accumulates=_conv_k, tolerance=NARROW, tags=("accumulates", "fused"),
           constants=(1, 2)),
    OpCase("FromNC8HW8", domain=DOMAIN, opset=1, dtypes=FLOATS, samples=from_nc8hw8_samples,
           errors=from_nc8hw8_errors, tags=("layout",)),
)
