"""Normalizations (refmnn/ops/norm.py): LayerNormalization and BatchNormalization (newest, and
opset 9 where inference is the only mode and there are no is_test/spatial attributes)."""

from __future__ import annotations

from refmnn.dtypes import DType

from refmnn_conformance.case import POSITIVE, UNIT, OpCase, Sample, SampleContext, Tol
from refmnn_conformance.cases._common import FLOATS, prod


def layernorm_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 8))
    yield Sample((x, ctx.make((8,)), ctx.make((8,))), name="last_axis")
    yield Sample((x, ctx.make((8,))), name="no_bias")
    yield Sample((x, ctx.make((3, 8)), ctx.make((3, 8))), {"axis": 1}, name="two_axes")
    yield Sample((x, ctx.make((2, 3, 8)), ctx.make((8,))), {"axis": 0}, name="all_axes")
    yield Sample((x, ctx.make((8,)), ctx.make((8,))), {"axis": -1, "epsilon": 1e-2}, name="epsilon")
    yield Sample((x, ctx.make((8,)), ctx.make((8,))), outputs=3, name="mean_and_invstddev")
    yield Sample((ctx.make((4, 768)), ctx.make((768,)), ctx.make((768,))), name="wide")
    yield Sample((ctx.array([[1.0, 1.0, 1.0, 1.0]]), ctx.make((4,)), ctx.make((4,))), name="constant_row")
    yield Sample((ctx.make((0, 8)), ctx.make((8,)), ctx.make((8,))), name="empty_batch")
    if ctx.dtype_name != "float64":
        yield Sample((x, ctx.make((8,)), ctx.make((8,))), {"stash_type": 1}, outputs=3,
                     name="stash_float32")


def _ln_k(sample: Sample) -> int:
    x = sample.inputs[0]
    return max(1, prod(x.shape[sample.attrs.get("axis", -1):]))


def _bn_inputs(ctx: SampleContext, shape: tuple[int, ...]):
    c = shape[1]
    return (ctx.make(shape), ctx.make((c,), UNIT), ctx.make((c,), UNIT), ctx.make((c,)),
            ctx.make((c,), POSITIVE))


def batchnorm_samples(ctx: SampleContext):
    yield Sample(_bn_inputs(ctx, (2, 3, 4, 5)), name="nchw")
    yield Sample(_bn_inputs(ctx, (4, 3)), name="nc")
    yield Sample(_bn_inputs(ctx, (2, 3, 4)), name="ncl")
    yield Sample(_bn_inputs(ctx, (1, 2, 3, 2, 2)), name="ncdhw")
    yield Sample(_bn_inputs(ctx, (2, 3, 4, 5)), {"epsilon": 1e-2}, name="epsilon")
    yield Sample(_bn_inputs(ctx, (0, 3, 2, 2)), name="empty_batch")


def batchnorm_training_samples(ctx: SampleContext):
    yield Sample(_bn_inputs(ctx, (2, 3, 4, 5)), {"training_mode": 1, "momentum": 0.8}, outputs=3,
                 name="training_mode")


def batchnorm9_samples(ctx: SampleContext):
    yield Sample(_bn_inputs(ctx, (2, 3, 4, 5)), name="inference")
    yield Sample(_bn_inputs(ctx, (4, 3)), name="nc")
    yield Sample(_bn_inputs(ctx, (2, 3, 4)), {"epsilon": 1e-3, "momentum": 0.5}, name="attributes")


_LN_TOL = {DType.float16: Tol(2e-3, 1e-4, "mean, variance and rsqrt each round in float32; "
                                          "normalised values near zero need an absolute floor"),
           DType.bfloat16: Tol(1.6e-2, 1e-3, "8-bit mantissa; normalised values near zero need an "
                                            "absolute floor of about one bfloat16 step at 0.1")}
CASES = (
    OpCase("LayerNormalization", dtypes=FLOATS, samples=layernorm_samples, accumulates=_ln_k,
           tolerance=_LN_TOL, tags=("accumulates",)),
    OpCase("BatchNormalization", dtypes=FLOATS, samples=batchnorm_samples),
    OpCase("BatchNormalization", dtypes=(DType.float32,), samples=batchnorm_training_samples,
           variant="training", accumulates=lambda s: prod(s.inputs[0].shape) // s.inputs[0].shape[1],
           tags=("accumulates",)),
    OpCase("BatchNormalization", opset=9, dtypes=(DType.float32, DType.float16, DType.float64),
           samples=batchnorm9_samples, tags=("old-opset",)),
)
